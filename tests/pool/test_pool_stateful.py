"""Random exploration of the pool itself: a Hypothesis state machine drives the torch pool with
random scheduler iterations (arrivals, session turns and closes, forced retraction, accepted
draft tokens, `_evict_swa` timing, HiCache write-back: every question the scheduler asks is a
draw; eviction follows the pool's own LRU order) and checks after every iteration:
* the ownership check on the tensors (every page and row owned exactly once: pool/ownership.py),
* SGLang's busy check computed from the live objects does not fire or crash, nor its idle check,
* no allocation fails after admission,
* the pool's own verdicts on residency, the lock ledger and the request bounds hold, and no
  retraction or load-back give-up happened without a shortfall (pool/abstraction.py).
Failures shrink to a minimal program of iterations. Fixed CI profile: derandomized, bounded.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from model.designs import PRESETS, Design
from model.ops import Concrete
from model.system import System
from pool import FunctionChooser, Scheduler, ownership
from pool.abstraction import lock_ledger_ok, request_bounds_ok, residency_ok, well_formed
from pool.scheduler import OOM_MESSAGES, OOM_NONE
from specs.configs import CONFIGS
from checker.traces.walk import pick_params

CI = settings(derandomize=True, max_examples=40, stateful_step_count=14, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)


def _params(cfg, seed: int):  # noqa: ANN001, ANN202
    rng = random.Random(seed)
    system = System(cfg, PRESETS["current"])
    for _ in range(500):
        p = pick_params(cfg, rng)
        if system.params_ok(system.ctx(Concrete(), p)):
            return p
    raise AssertionError(f"no valid parameters for {cfg.name}")


def machine(design: Design, configs: list[str]) -> type[RuleBasedStateMachine]:
    class PoolMachine(RuleBasedStateMachine):
        sch: Scheduler | None = None
        explored: dict = {"iterations": 0, "configs": set()}  # what the run covered, for the test

        @initialize(name=st.sampled_from(configs), seed=st.integers(0, 10_000))
        def build(self, name: str, seed: int) -> None:
            cfg = CONFIGS[name]
            self.sch = Scheduler(cfg, design, _params(cfg, seed), device="cpu")
            self.explored["configs"].add(name)

        @precondition(lambda self: self.sch is not None and self.sch.oom == OOM_NONE)
        @rule(data=st.data())
        def iteration(self, data: st.DataObject) -> None:
            ch = FunctionChooser(lambda q: data.draw(st.booleans(), label=q),
                                 lambda q, lo, hi: data.draw(st.integers(lo, hi), label=q))
            assert self.sch is not None
            self.sch.step(ch)
            self.explored["iterations"] += 1

        @invariant()
        def memory(self) -> None:
            """Ground truth first (ownership on the tensors), then SGLang's own check, then OOM."""
            if self.sch is None:
                return
            own = ownership.check(self.sch)
            assert own.ok, f"ownership check: {own.describe()}"
            b = self.sch.busy
            if b is not None:
                assert not b.crashed, "busy check crashed"
                assert not b.fired, f"busy check fired: {b.terms}"
            assert self.sch.oom == OOM_NONE, OOM_MESSAGES[self.sch.oom]
            assert well_formed(self.sch)
            i = self.sch.idle
            assert not (i and i.fired), f"idle check fired: {i.terms if i else None}"
            assert residency_ok(self.sch), "residency: a slot a request reads is free or unlocked"
            assert lock_ledger_ok(self.sch), "lock ledger: a lock without a live owner, or a lock count off"
            assert request_bounds_ok(self.sch), "request bounds"
            assert not self.sch.needless_retract and not self.sch.needless_recompute

    return PoolMachine


ALL = ["small", "paged", "hybrid_swa", "hybrid_swa_hicache", "sessions", "spec_topk"]

def test_current_design_random_exploration() -> None:
    m = machine(PRESETS["current"], ALL)
    run_state_machine_as_test(m, settings=CI)  # the invariants raise on any violation
    assert m.explored["iterations"] >= CI.max_examples  # it really drove the pool
    assert len(m.explored["configs"]) >= 3, m.explored["configs"]


def test_finds_retract_leak_without_22862() -> None:
    """With `retract_tail_free` off (#22862), a retracted streaming turn re-admitted from its
    session slot overwrites row position C-1: the ownership check must find the orphaned slot."""
    design = PRESETS["current"].with_fix("retract_tail_free", None)
    with pytest.raises(AssertionError, match="ownership check: full pool: [1-9]"):
        run_state_machine_as_test(machine(design, ["sessions"]), settings=settings(CI, max_examples=200))

