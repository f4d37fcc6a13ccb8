"""The pool's own `residency` verdict (pool/abstraction.py::residency_ok), read from its slots: a
request's prefix slots held by a locked node, its own part off the free list, its window's SWA
slots mapped and not free. It agrees with the model's `residency` on random walks of the correct
model, and confirms the counterexample of a planted window release that frees the window."""

from __future__ import annotations

import pytest

from checker.engines.bmc import BMC
from checker.replay.pool import REPRODUCED, replay_trace
from checker.traces.walk import random_walk
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from pool import ReplayChooser, Scheduler
from pool.abstraction import residency_ok
from specs.configs import CONFIGS
from specs.properties import PROPERTIES
from model.config import pinned


@pytest.mark.parametrize("config", ["small", "hybrid_swa", "hybrid_swa_page4", "sessions", "hybrid_swa_spec_v2"])
def test_the_pool_agrees_with_the_model_on_random_walks(config: str) -> None:
    cfg, design = CONFIGS[config], PRESETS["current"]
    system = System(cfg, design)
    steps = 0
    for seed in range(6):
        tr = random_walk(cfg, design, 25, seed)
        x = system.ctx(Concrete(), tr.params)
        sch, ch = Scheduler(cfg, design, tr.params), ReplayChooser()
        for t, st in enumerate(tr.steps, 1):
            ch.set_picks(st.picks)
            sch.step(ch)
            model = PROPERTIES["residency"].holds(x, st.state) is True
            assert residency_ok(sch) == model, f"{config} seed {seed} step {t}: model {model}"
            steps += 1
    assert steps > 30, steps  # the walks ran


def test_the_pool_confirms_a_window_released_from_the_allocated_length() -> None:
    cfg = pinned(CONFIGS["hybrid_swa_spec_v2"], full_tokens=(24, 24), swa_tokens=(12, 12), sliding_window_size=(2, 2),
                 input_len=(1, 1), max_new_tokens=(4, 4), req_pool_size=(1, 1))
    design = PRESETS["current"].with_mutants(frozenset({"spec_v2_window_from_allocated_len"}))
    res = BMC(System(cfg, design), ["residency"]).run(3)["residency"]
    assert res.trace is not None, res
    out = replay_trace(res.trace)
    assert out.status == REPRODUCED, out
