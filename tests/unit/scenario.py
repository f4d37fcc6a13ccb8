"""Drive the concrete model through a scripted list of event-loop iterations (the digest's
section 11 scenarios). Picks name the model's choices (`recv.arrive[0]`, `decode.evict_swa[0]`,
`decode.accept[0]`, ...); a choice not named takes False / its low end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checker.traces.trace import run_concrete
from model.config import Config, Params, concrete_params
from model.designs import PRESETS, Design
from model.invariant_checker import BusyCheck, self_check_during_busy
from model.ops import Concrete
from model.radix_cache import counters
from model.state import State
from model.system import System
from model.transition import Ctx


# The design the hand-derived scenarios of tests/unit were written against: `current` until
# 2026-11-26, SGLang main at d55f1c28 (the merge-base of 0.5.18): v0.5.13 with the SWA window
# headroom, the gate on the fresh tail and the chunk-cap hatch, without the enqueue clip. Each
# scenario turns one flag on or off on it, so its numbers stay derivable by hand from that source;
# `current` (0.5.23) has the later flags on, each tested in its own scenario.
D55F1C28 = (PRESETS["v0.5.13"].with_fix("swa_window_headroom", "on").with_fix("swa_gate_fresh_tail", "on")
            .with_fix("swa_chunk_cap", "never_fits").with_fix("enqueue_clip_max_new", None))


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
