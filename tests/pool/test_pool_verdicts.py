"""The pool's own verdicts on the properties of issue 29 (pool/abstraction.py, pool/scheduler.py):
`lock_ledger` (read off the tree's live lock handles and lock counts), the idle check (SGLang's
`on_idle` equations and tree sanity check computed from the live objects, then judged against the
pool's ownership check), `request_bounds` (the requests' own fields), and the two records of a
needless retraction / load-back give-up (`retract_only_when_short`, `recompute_only_when_short`),
which the pool keeps itself rather than reading the model's ghosts.

They agree with the model's properties on random walks of the correct model (where every property
holds: the walks show the pool is not stricter), and each one reproduces a counterexample of a bug
planted on both sides (the pool is not weaker). Replay also compares the idle check's verdict and
the two records with the model's at every step (checker/replay/pool.py::_derived_difference).
"""

from __future__ import annotations

import dataclasses

import pytest

import pool.scheduler as pool_scheduler
from checker.engines.agreement import pinned
from checker.engines.bmc import BMC
from checker.engines.explicit import Explorer
from checker.mutation.operators import design_for, find
from checker.replay.pool import REPRODUCED, _derived_ctx, _derived_difference, replay_trace
from checker.traces.walk import random_walk
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from pool import ReplayChooser, Scheduler
from pool.abstraction import violated
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

NEW = ("lock_ledger", "idle_check_sound", "idle_check_complete", "request_bounds", "retract_only_when_short",
       "recompute_only_when_short")


@pytest.mark.parametrize("config", ["small", "sessions", "pressure", "hybrid_swa", "hybrid_swa_hicache", "spec_v2"])
def test_the_pool_agrees_with_the_model_on_random_walks(config: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, design = CONFIGS[config], PRESETS["current"]
    system = System(cfg, design)
    retracted = [0]
    real = pool_scheduler.Scheduler.release_kv_cache

    def counting(self, req, is_insert, ch, site, abort=False):  # noqa: ANN001, ANN202
        retracted[0] += site.startswith("retract")
        return real(self, req, is_insert, ch, site, abort)

    monkeypatch.setattr(pool_scheduler.Scheduler, "release_kv_cache", counting)
    steps = idle = 0
    for seed in range(30 if config == "pressure" else 8):  # pressure retracts in few walks
        tr = random_walk(cfg, design, 25, seed)
        x, dx = system.ctx(Concrete(), tr.params), _derived_ctx(tr)
        sch, ch = Scheduler(cfg, design, tr.params), ReplayChooser()
        for t, st in enumerate(tr.steps, 1):
            ch.set_picks(st.picks)
            sch.step(ch)
            assert _derived_difference(tr, st.state, sch, dx) is None, f"{config} seed {seed} step {t}"
            for p in NEW:
                model = PROPERTIES[p].holds(x, st.state) is True
                assert violated(sch, p) != model, f"{config} seed {seed} step {t} {p}: model holds={model}"
            steps += 1
            idle += bool(sch.idle and sch.idle.idle)
    assert steps > 30 and idle > 0, (steps, idle)  # the walks ran, and reached the idle check
    if config in ("pressure", "spec_v2"):
        assert retracted[0] > 0  # the retraction record was judged (pressure: for want of memory)


def test_a_lock_kept_by_a_finished_request_is_reproduced_on_the_pool() -> None:
    cfg = pinned(CONFIGS["small"])
    design = PRESETS["current"].with_mutants(frozenset({"finished_req_keeps_lock"}))
    res = BMC(System(cfg, design), ["lock_ledger"]).run(3)["lock_ledger"]
    assert res.trace is not None, res
    out = replay_trace(res.trace)
    assert out.status == REPRODUCED, out


def test_an_idle_check_that_forgets_session_rows_is_reproduced_on_the_pool() -> None:
    design = PRESETS["current"].with_mutants(frozenset({"idle_check_ignores_session_rows"}))
    res = BMC(System(CONFIGS["sessions"], design), ["idle_check_sound"]).run(3)["idle_check_sound"]
    assert res.trace is not None, res
    out = replay_trace(res.trace)
    assert out.status == REPRODUCED, out


def test_a_retraction_without_a_shortfall_is_recorded_by_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated mutant that drops check_decode_mem's eviction (tests/quality/test_request_bounds_retract.py)
    retracts with evictable memory left. The same edit on the pool (its check_decode_mem without the
    eviction) replays the model's counterexample state for state, and the pool's own record of the
    retraction (not the model's ghost) says it was needless."""
    m = find("check_decode_mem", "drop", "s = radix_cache.evict_from_tree_cache(x, s, need, site)")
    r = Explorer(System(CONFIGS["pressure"], design_for(m)), ["retract_only_when_short"]).run(4, keep_going=False)
    res = r.results["retract_only_when_short"]
    assert res.verdict is Verdict.VIOLATED and res.trace is not None, res.words()

    def no_eviction(self, batch, ch, site):  # noqa: ANN001, ANN202
        return self.alloc.available_size() >= self.decode_tokens_needed(batch)

    monkeypatch.setattr(pool_scheduler.Scheduler, "check_decode_mem", no_eviction)
    trace = dataclasses.replace(res.trace, design=PRESETS["current"])  # the edit is on the pool by hand
    out = replay_trace(trace, check_model=False, expect_violation=True)
    assert out.status == REPRODUCED, out


def test_the_pool_does_not_record_a_retraction_the_check_demands(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the edit, the same counterexample's events are not a needless retraction on the pool:
    the record is the pool's judgement, not a copy of the model's."""
    m = find("check_decode_mem", "drop", "s = radix_cache.evict_from_tree_cache(x, s, need, site)")
    r = Explorer(System(CONFIGS["pressure"], design_for(m)), ["retract_only_when_short"]).run(4, keep_going=False)
    trace = dataclasses.replace(r.results["retract_only_when_short"].trace, design=PRESETS["current"])
    out = replay_trace(trace, check_model=False, expect_violation=True)
    assert out.status != REPRODUCED, out


def test_a_load_back_given_up_with_room_is_recorded_by_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated mutant that refuses a load-back whose SWA need exactly fits (`<` for `<=`,
    tests/quality/test_load_back_shortfall.py) gives up a host hit the pools had room for. The same
    edit on the pool's load-back replays the model's counterexample, and the pool's own record (its
    tree's `evictable_left`, not the model's) says the give-up was needless."""
    from pool.radix_tree import RadixTree
    from tests.quality.test_load_back_shortfall import CMP, SHORTFALL_POINTS

    m = find("init_load_back", "cmp", CMP)
    cfg = pinned(CONFIGS["hicache_evict"], **SHORTFALL_POINTS)
    res = Explorer(System(cfg, design_for(m)), ["recompute_only_when_short"]).run(4, keep_going=False).results[
        "recompute_only_when_short"]
    assert res.verdict is Verdict.VIOLATED and res.trace is not None, res.words()
    real = RadixTree.load_back

    def exact_fit_refused(self, match):  # noqa: ANN001, ANN202
        if self.hybrid and match.swa_host_hit_length >= self.alloc.swa_available_size():
            return None
        return real(self, match)

    monkeypatch.setattr(RadixTree, "load_back", exact_fit_refused)
    out = replay_trace(dataclasses.replace(res.trace, design=PRESETS["current"]), check_model=False, expect_violation=True)
    assert out.status == REPRODUCED, out
