"""A planted bug that needs depth >= 6 (issue 62, acceptance 4): `free_swa_keeps_index_mapping`
(model/mutants/) on a hybrid-SWA instance whose window (3 tokens) makes the SWA double free wait for
the decode steps that slide tokens out of it. The explicit engine finds it at depth 6; BMC to the
test's bound, depth 5, reports it holds there (every run of at most 5 iterations is safe: the bug is
out of a shallow search's reach, not missed)."""

from __future__ import annotations

from checker.engines import explicit
from checker.engines.bmc import BMC
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.config import pinned
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

DESIGN = PRESETS["current"].with_mutants(frozenset({"free_swa_keeps_index_mapping"}))
CFG = pinned(CONFIGS["hybrid_swa"], full_tokens=(12, 12), swa_tokens=(12, 12), sliding_window_size=(3, 3),
             chunked_prefill_size=(4, 4), input_len=(2, 2), max_new_tokens=(8, 8), req_pool_size=(1, 1))
Z3_BOUND = 5


def test_explicit_finds_the_depth_6_bug() -> None:
    r = explicit.search(DESIGN, CFG, ["conservation"], 8, keep_going=False).results["conservation"]
    assert r.verdict is Verdict.VIOLATED and r.depth == 6 and r.trace is not None
    system = System(CFG, DESIGN)
    states, _ = run_concrete(system, r.trace.params, r.trace.actions)
    assert not PROPERTIES["conservation"].holds(system.ctx(Concrete(), r.trace.params), states[-1])
    # the correct model is safe on the same instance to the same depth: the mutant is the bug
    ok = explicit.search(PRESETS["current"], CFG, ["conservation"], 8).results["conservation"]
    assert ok.verdict is not Verdict.VIOLATED


def test_bmc_within_the_bound_does_not_find_it() -> None:
    r = BMC(System(CFG, DESIGN), ["conservation"], minimize=False).run(Z3_BOUND)["conservation"]
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.depth == Z3_BOUND


def test_swarm_finds_the_depth_6_bug_shortest() -> None:
    from checker.engines.swarm import check_config

    r = check_config(DESIGN, CFG, ["conservation"], 8, runs=8, jobs=1).results["conservation"]
    assert r.verdict is Verdict.VIOLATED and r.depth == 6
