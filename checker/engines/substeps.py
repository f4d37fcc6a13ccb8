"""The parts of an iteration that the step queries of the z3 engines share: a free state (every
field a fresh symbol), the states at the checkpoints inside an iteration, and `first_break`, the
exhaustive cases "goal conjunct j first fails after sub-step i". Used by the induction engine's
step cases (checker/engines/induction.py) and by the BMC's relative-induction pass
(checker/engines/bmc.py: a goal whose one-step query from any state where every fact holds is
unsat needs no query at any depth); here so that neither engine imports the other.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import z3

from model.config import Params
from model.ops import Symbolic
from model.state import BOOL_FIELDS, FIELD_NAMES, State
from model.system import System


def term(v: Any) -> Any:
    return z3.BoolVal(v) if isinstance(v, bool) else v


def free_state(system: System, params: Params, tag: str) -> State:
    x = system.ctx(Symbolic(0), params)
    shape = system.init(x)
    d = {}
    for f in FIELD_NAMES:
        v = getattr(shape, f)
        mk = z3.Bool if f in BOOL_FIELDS else z3.Int
        d[f] = tuple(mk(f"{f}[{i}]@{tag}") for i in range(len(v))) if isinstance(v, tuple) else mk(f"{f}@{tag}")
    return State(**d)


class FirstBreak(NamedTuple):
    cases: list[Any]
    names: list[str]
    states: list[State]  # E_0 (the state before the step) and each checkpoint's state that changed
    ends: list[int | None]  # per case, the index in `states` its sub-step ends at (None: no checkpoint)
    index: dict[str, int]  # checkpoint label -> the index in `states` of its state


class CheckpointStates(NamedTuple):
    states: list[State]  # E_0 (the state before the step) and each checkpoint's state that changed
    labels: list[str]
    taken: list[Any]  # the path condition each was reached under
    index: dict[str, int]  # every checkpoint's label -> the index of its state in `states`


def checkpoint_states(pre: State, checkpoints: list[tuple[str, Any, State]]) -> CheckpointStates:
    """The states along the last step: the one before it, then each checkpoint's where it changed."""
    states_at, labels, taken = [pre], ["before the step"], [True]
    index: dict[str, int] = {}
    for label, cond, st in checkpoints:
        if not all(getattr(st, f) is getattr(states_at[-1], f) for f in FIELD_NAMES):
            states_at.append(st)
            labels.append(label)
            taken.append(cond)
        index[label] = len(states_at) - 1  # (a sub-step that changed nothing on any path shares the one before)
    return CheckpointStates(states_at, labels, taken, index)


def first_break(system: System, params: Params, states: list[State], goal: Any,
                checkpoints: list[tuple[str, Any, State]], conjuncts: Callable[..., list[Any]]) -> FirstBreak | None:
    """The cases "goal conjunct j first fails after sub-step i" of the last step, or None when the
    goal is not the property's `conjuncts` (specs/properties.py) read at the last state.

    The model marks the points inside an iteration where the state is whole (`x.checkpoint`); the
    state at checkpoint i is E_i = (its state if its path was taken, else E_{i-1}), E_0 the state
    before the step. A conjunct that holds at E_0 (it is assumed there) and fails after the step
    fails first somewhere along E_0 .. E_n, the last state: the cases "fails at E_0", "holds at
    E_{i-1}, fails at E_i" and "holds at E_n (read inside the iteration), fails after the step"
    cover the goal's negation for any terms E_i (telescoping), so the split is exhaustive whatever
    the checkpoints are. It pays when the property's inner reading is exact at the checkpoints
    (tests/engines/test_first_break.py checks that on random walks): then each case asks whether
    one sub-transition keeps the ledger, which z3 answers locally. On hybrid_swa_hicache's
    conservation, both requests waiting and an extend that leaves both running, unknown after
    120 s whole: its 54 first-break cases are unsat in 178 s together, none over 60 s."""
    pre, post = states[-2], states[-1]
    k = len(states) - 1
    xg = system.ctx(Symbolic(k, prefix="goal."), params)
    final = conjuncts(xg, post, False)
    parts = list(goal.children()) if z3.is_and(goal) else [goal]
    if len(final) != len(parts) or not all(z3.is_expr(f) and f.eq(g) for f, g in zip(final, parts)):
        return None
    xm = system.ctx(Symbolic(k, prefix="mid."), params)
    cs = checkpoint_states(pre, checkpoints)
    states_at, labels, taken = cs.states, cs.labels, cs.taken
    inner = [conjuncts(xm, e, True) for e in states_at]
    if xm.ops.constraints or any(len(c) != len(final) for c in inner):
        return None
    cases: list[Any] = []
    names: list[str] = []
    ends: list[int | None] = []
    for j in range(len(final)):
        # the conjunct read at E_i, as an if-then-else over the conjunct's values at the
        # checkpoints (not over their states: the same value, far smaller terms)
        at = term(inner[0][j])
        cases.append(z3.Not(at))
        names.append(f"conjunct {j + 1} fails {labels[0]}")
        ends.append(None)
        for i in range(1, len(states_at)):
            here = term(inner[i][j])
            # a sub-step breaks the ledger only on its own path (E_i = E_{i-1} off it): stated,
            # so that z3 need not find it
            cases.append(z3.And(term(taken[i]), at, z3.Not(here)))
            names.append(f"conjunct {j + 1} first fails at {labels[i]}")
            ends.append(i)
            at = here if taken[i] is True else z3.If(taken[i], here, at)
        cases.append(z3.And(at, z3.Not(final[j])))
        names.append(f"conjunct {j + 1} first fails after the step's last checkpoint")
        ends.append(None)
    return FirstBreak(cases, names, states_at, ends, cs.index)
