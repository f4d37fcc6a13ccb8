"""A runnable implementation of SGLang's scheduler KV-memory mechanisms on torch tensors.

`kvmc replay` drives it with a counterexample's recorded choices and checks, step by step, that it
refines the model (checker/replay/pool.py). It imports only `Config`, `Design` and `Params` (and the
state's field names) from model/; none of the model's transitions.

    from pool import Scheduler, ReplayChooser, to_state, ownership
"""

from .abstraction import AbstractionError, to_state, violated, well_formed
from .allocator import PoolError
from .choices import ChoiceError, Chooser, FunctionChooser, ReplayChooser
from .mutants import POOL_MUTANTS
from .scheduler import Scheduler

__all__ = ["Scheduler", "ReplayChooser", "FunctionChooser", "Chooser", "ChoiceError", "PoolError", "AbstractionError",
           "to_state", "violated", "well_formed", "POOL_MUTANTS"]
