"""The fast explicit engine (checker/engines/explicit.py) against the graph engine it replaces
(checker/engines/explicit_graph.py): the same successors in the same order, the same verdicts,
depths, witnesses and counterexample lengths on pinned instances; its coverage of the bounds and
the words that say it; `jobs=2` finding what `jobs=1` finds."""

from __future__ import annotations

import pytest

from checker.engines.agreement import pinned
from checker.engines.explicit import (
    Explorer,
    FastExplorer,
    PointRunner,
    bound_points,
    check_config,
    coverage,
    grid_size,
    param_points,
    search,
    successors,
)
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

# (config, pins, design, depth): small instances, violations among them (v0.5.10.post1 on sessions and hybrid_swa)
INSTANCES = [
    ("sessions", dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2)), "v0.5.10.post1", 3),
    ("hybrid_swa", dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
                        input_len=(3, 5), max_new_tokens=(2, 2)), "v0.5.10.post1", 2),
    ("small", dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1)), "current", 3),
    ("hybrid_swa_hicache", dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 0), warm_host=(1, 1)), "current", 2),
    ("paged", dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(2, 2)), "current", 2),
]


def _key(r):  # noqa: ANN001, ANN202
    return r.verdict, r.depth, r.witness_depth if r.verdict is not Verdict.VIOLATED else None


@pytest.mark.parametrize("name,pins,design,depth", INSTANCES, ids=[i[0] for i in INSTANCES])
def test_fast_and_graph_engines_agree_on_pinned_instances(name: str, pins: dict, design: str, depth: int) -> None:
    system = System(pinned(CONFIGS[name], **pins), PRESETS[design])
    old = Explorer(system, None).run(depth, keep_going=True)
    new = FastExplorer(system, None).run(depth, keep_going=True)
    assert new.distinct_states == old.distinct_states and new.transitions == old.transitions
    assert {p: _key(r) for p, r in new.results.items()} == {p: _key(r) for p, r in old.results.items()}
    for p, r in new.results.items():
        if r.verdict is Verdict.VIOLATED:
            assert r.trace is not None and r.trace.depth == r.depth == old.results[p].trace.depth
            assert r.trace.params == old.results[p].trace.params  # the same point: BMC's readable order
            states, _ = run_concrete(system, r.trace.params, r.trace.actions)
            assert not PROPERTIES[p].holds(system.ctx(Concrete(), r.trace.params), states[-1])


def test_successors_are_the_graph_engines_in_order_also_under_a_planted_bug() -> None:
    """The recorded-call replay (a transition call that returned before the advanced choice is not
    run again) changes nothing: the successors of every state to depth 2 are the re-run ones."""
    cfg = pinned(CONFIGS["hybrid_swa"], full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1),
                 chunked_prefill_size=(4, 4), input_len=(3, 5), max_new_tokens=(2, 2))
    for design in (PRESETS["current"], PRESETS["current"].with_mutants(frozenset({"finished_tail_freed_twice"}))):
        system = System(cfg, design)
        for p in param_points(system)[:2]:
            run = PointRunner(system, p)
            level = [run.init()]
            skipped = 0
            for _ in range(2):
                nxt = []
                for s in level:
                    fast = run.successors(s)
                    assert fast == list(successors(system, p, s))
                    nxt += [s2 for _, s2 in fast if s2.oom == 0]
                level = nxt
            skipped += run.skipped + run.value_hits
            assert skipped > 0  # the replay was exercised


def test_bound_points_cover_more_than_the_explicit_points_and_say_so() -> None:
    system = System(CONFIGS["hybrid_swa"], PRESETS["current"])
    old = param_points(system)
    bp = bound_points(system, 3 * len(old))
    assert bp.points[: len(old)] == old and len(bp.points) == 3 * len(old) and len(set(bp.points)) == len(bp.points)
    assert not bp.exact and bp.total == grid_size(CONFIGS["hybrid_swa"])
    assert all(system.params_ok(system.ctx(Concrete(), p)) for p in bp.points)
    cov_old, cov = coverage(system.cfg, old), coverage(system.cfg, bp.points)
    assert cov["full_tokens"][1] == 29 and cov_old["full_tokens"][0] < cov["full_tokens"][0] <= 29
    assert all(cov[k][0] >= cov_old[k][0] for k in cov_old)
    assert bound_points(system, 3 * len(old)).points == bp.points  # seeded: the same list every run
    # a search of part of the bounds is never `holds` for the config: its words say how much it covered
    rep = check_config(PRESETS["current"], CONFIGS["hybrid_swa"], ["well_formed"], 1, max_points=len(old) + 20)
    r = rep.results["well_formed"]
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.meta["parameter_points"] == len(old) + 20
    assert f"on {len(old) + 20} of {grid_size(CONFIGS['hybrid_swa'])} parameter points of the bounds grid" in r.words()
    assert "values covered: full_tokens " in r.words()


def test_a_pinned_instance_is_searched_whole_and_counted_exactly() -> None:
    cfg = pinned(CONFIGS["small"], full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1))
    system = System(cfg, PRESETS["current"])
    bp = bound_points(system)
    assert bp.exact and bp.total == len(bp.points) == len(param_points(system))
    r = check_config(PRESETS["current"], cfg, ["conservation"], 3).results["conservation"]
    assert r.meta["parameter_points"] == r.meta["points_in_bounds"] and r.words() == r.verdict.words(3)


def test_two_shards_find_what_one_finds() -> None:
    cfg = pinned(CONFIGS["sessions"], full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))
    design = PRESETS["v0.5.10.post1"]
    one = search(design, cfg, None, 3, jobs=1)
    two = search(design, cfg, None, 3, jobs=2)
    assert len(two.shards) == 2 and two.distinct_states == one.distinct_states
    for p, r in one.results.items():
        q = two.results[p]
        assert _key(q) == _key(r)
        if r.verdict is Verdict.VIOLATED:
            assert q.trace.params == r.trace.params and [s.picks for s in q.trace.steps] == [s.picks for s in r.trace.steps]
    assert any(r.verdict is Verdict.VIOLATED for r in one.results.values())
