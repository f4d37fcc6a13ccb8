"""The HiCache load-back under a shortfall (model/hicache.py::init_load_back's eviction), and the
config that reaches it.

`init_load_back` evicts before it loads only where the host hit is larger than a pool's free
slots. On `hybrid_swa_hicache` both requests share the warm prefix, so whoever loads it back finds
nothing else evictable (the other request's nodes hang below the prefix) and the admission gates
leave room for the hit: no reachable state of its points has a shortfall there, and the three
mutants of that eviction survived as "likely equivalent" (docs/mutants.md). `hicache_evict` lets
request 0 not share the prefix, so its cached chain holds the pools when request 1 loads the
prefix back. These tests fail if the config stops reaching the eviction, or if the mutants stop
behaving as the mutation report classifies them.
"""

from __future__ import annotations

from typing import Any

import pytest

import model.hicache as hicache
from checker.engines.agreement import pinned
from checker.engines.explicit import Explorer
from checker.mutation.diff import inclusion
from checker.mutation.operators import design_for, generate
from checker.verdict import Verdict
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS

# a slice of hicache_evict's explicit points (the host-only prefix), where every property is exercised
SHORTFALL_POINTS = dict(full_tokens=(6, 8), swa_tokens=(5, 6), sliding_window_size=(2, 2), chunked_prefill_size=(4, 4),
                        input_len=(4, 5), max_new_tokens=(1, 3), warm_len=(3, 3), warm_device=(0, 0), warm_host=(1, 1))


def _count_shortfalls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    seen = dict(calls=0, full=0, swa=0)
    real = hicache.init_load_back

    def spy(x: Any, s: Any, r: int, m: Any, temporary_lock: tuple = ()) -> Any:
        seen["calls"] += 1
        seen["full"] += int(m.host_hit_length > s.full_available)
        seen["swa"] += int(m.swa_host_hit_length > s.swa_available)
        return real(x, s, r, m, temporary_lock)

    monkeypatch.setattr(hicache, "init_load_back", spy)
    return seen


SHORTFALL_PROPS = ["no_prefill_oom", "no_decode_oom", "conservation", "busy_check_sound", "well_formed", "residency",
                   "lock_ledger", "idle_check_sound", "recompute_only_when_short"]


@pytest.fixture(scope="module")
def shortfall_search() -> tuple[dict[str, Any], dict[str, int], int]:
    """One search of the shortfall slice on the model to depth 6 (every state by depth 4) with every
    property, the load-backs counted as they run: the results, the shortfall counts and how many
    load-backs gave up. Three tests below read it (one search instead of three)."""
    mp = pytest.MonkeyPatch()
    try:
        seen = _count_shortfalls(mp)
        gave_up = _count_give_ups(mp)
        cfg = pinned(CONFIGS["hicache_evict"], **SHORTFALL_POINTS)
        r = Explorer(System(cfg, PRESETS["current"]), SHORTFALL_PROPS).run(6).results
    finally:
        mp.undo()
    return r, seen, gave_up["n"]


def _count_give_ups(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    gave_up = dict(n=0)
    real = hicache.ghost_needless_recompute

    def spy(x: Any, s: Any, full_need: Any, swa_need: Any, fits: Any, locks: tuple) -> Any:
        gave_up["n"] += int(not fits)
        return real(x, s, full_need, swa_need, fits, locks)

    monkeypatch.setattr(hicache, "ghost_needless_recompute", spy)
    return gave_up


def test_hicache_evict_reaches_a_load_back_that_must_evict_and_every_property_holds_there(
        shortfall_search: tuple[dict[str, Any], dict[str, int], int]) -> None:
    r, seen, _ = shortfall_search
    assert seen["calls"] > 0 and seen["full"] > 0 and seen["swa"] > 0, seen
    for p in SHORTFALL_PROPS:
        assert r[p].verdict is Verdict.HOLDS_TO_DEPTH, (p, r[p].words())


def test_hybrid_swa_hicache_loads_back_without_a_shortfall(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reason the config was added: where both requests share the host-only prefix (the
    instance tests/engines/test_agreement.py pins), every load-back finds the room it needs."""
    seen = _count_shortfalls(monkeypatch)
    cfg = pinned(CONFIGS["hybrid_swa_hicache"], input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 0), warm_host=(1, 1))
    Explorer(System(cfg, PRESETS["current"]), ["conservation"]).run(3)
    assert seen["calls"] > 0 and seen["full"] == seen["swa"] == 0, seen


def test_the_swapped_eviction_amounts_are_a_restriction_on_hicache_evict() -> None:
    """init_load_back@42:swap:0 (full and SWA eviction amounts swapped) was "likely equivalent" on
    hybrid_swa_hicache; on hicache_evict it diverges: it loses successors of the model and gains
    none. What it loses are eviction outcomes (which nodes go), not load-backs: no load-back gives up
    in any reachable state of hicache_evict's points to depth 5, with or without the mutant (see the
    test below), so `recompute_only_when_short` cannot see it either. A mutant whose behaviours are
    a subset of the model's breaks no safety property the model keeps."""
    [m] = [m for m in generate(transition="init_load_back", ops=("swap",)) if m.before.startswith("radix_cache.evict(")]
    inc = inclusion("hicache_evict", PRESETS["current"], design_for(m), 300, max_depth=3)
    assert inc["extra"] == 0 and inc["fewer"] > 0, inc


# the SWA fit test `<` for `<=` (an exact SWA fit refused) and the property that sees it
CMP = "swa_need <= s.swa_available"


def test_recompute_only_when_short_kills_the_exact_swa_fit_refusal() -> None:
    """init_load_back@46:cmp:0 survived every earlier property (refusing a load-back is a path the
    scheduler handles: the host hit is prefilled again). `recompute_only_when_short` (the ghost
    `needless_recompute`, model/hicache.py::ghost_needless_recompute) sees a load-back given up while
    the SWA pool had room: at depth 2 on the shortfall slice."""
    [m] = [m for m in generate(transition="init_load_back", ops=("cmp",)) if m.before == CMP]
    cfg = pinned(CONFIGS["hicache_evict"], **SHORTFALL_POINTS)
    r = Explorer(System(cfg, design_for(m)), ["recompute_only_when_short"]).run(4, keep_going=False).results
    assert r["recompute_only_when_short"].verdict is Verdict.VIOLATED and r["recompute_only_when_short"].depth == 2, \
        r["recompute_only_when_short"].words()
    tr = r["recompute_only_when_short"].trace
    assert tr.states[-1].needless_recompute and not any(s.needless_recompute for s in tr.states[:-1])


def test_recompute_only_when_short_holds_on_the_model_and_is_exercised(
        shortfall_search: tuple[dict[str, Any], dict[str, int], int]) -> None:
    r = shortfall_search[0]["recompute_only_when_short"]
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.witness_depth is not None, r.words()


def test_no_load_back_gives_up_on_hicache_evict_with_or_without_the_swap(
        shortfall_search: tuple[dict[str, Any], dict[str, int], int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Why the swap survives the new property: the load-backs it changes still fit (the model's
    search counted its load-backs; the swap's search here, to depth 5)."""
    seen, model_gave_up = shortfall_search[1], shortfall_search[2]
    assert seen["calls"] > 0, seen  # the model's search ran load-backs at all
    gave_up = _count_give_ups(monkeypatch)
    [m] = [m for m in generate(transition="init_load_back", ops=("swap",)) if m.before.startswith("radix_cache.evict(")]
    Explorer(System(pinned(CONFIGS["hicache_evict"], **SHORTFALL_POINTS), design_for(m)), ["conservation"]).run(5)
    assert dict(model=model_gave_up, swap=gave_up["n"]) == dict(model=0, swap=0)


def test_a_hicache_only_property_is_not_checked_on_a_config_without_hicache() -> None:
    """On `small` no load-back ever runs: `recompute_only_when_short` would be vacuous there, which
    is not a finding. It is left out of the config's check (and of its exit status); on the HiCache
    configs it is checked like any other property."""
    from checker.engines import explicit, run
    from checker.engines.applies import for_config

    assert "recompute_only_when_short" not in for_config(CONFIGS["small"])
    assert "recompute_only_when_short" in for_config(CONFIGS["hicache_evict"])
    assert for_config(CONFIGS["small"], ["conservation", "recompute_only_when_short", "progress"]) == ["conservation", "progress"]
    rep = run.check_config(PRESETS["current"], CONFIGS["small"], ["conservation", "recompute_only_when_short"], 2, prove=False)
    assert set(rep.results) == {"conservation"} and rep.results["conservation"].verdict is Verdict.HOLDS_TO_DEPTH
    rep = explicit.check_config(PRESETS["current"], CONFIGS["small"], ["recompute_only_when_short"], 2)
    assert rep.results == {}
