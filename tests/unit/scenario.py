"""Drive the concrete model through a scripted list of event-loop iterations (the digest's
section 11 scenarios). Picks name the model's choices (`recv.arrive[0]`, `decode.evict_swa[0]`,
`decode.accept[0]`, ...); a choice not named takes False / its low end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checker.traces.trace import run_concrete
from model.config import Config, Params, concrete_params
from model.designs import Design
from model.invariant_checker import BusyCheck, self_check_during_busy
from model.ops import Concrete
from model.radix_cache import counters
from model.state import State
from model.system import System
from model.transition import Ctx


@dataclass
class Run:
    system: System
    params: Params
    states: list[State]

    def ctx(self) -> Ctx:
        return self.system.ctx(Concrete(), self.params)

    def busy(self, t: int) -> BusyCheck:
        return self_check_during_busy(self.ctx(), self.states[t])

    def counters(self, t: int) -> Any:
        return counters(self.ctx(), self.states[t])


def drive(cfg: Config, design: Design, picks: list[dict[str, Any]], **params: Any) -> Run:
    system = System(cfg, design)
    p = concrete_params(cfg, **params)
    states, _ = run_concrete(system, p, [("event_loop_iteration", pk) for pk in picks])
    return Run(system, p, states)
