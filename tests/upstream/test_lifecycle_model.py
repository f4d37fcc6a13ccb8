"""The model side of the lifecycle rows on a scenario `kvmc conform` found (no SGLang needed):
UnifiedRadixCache/swa on 0.5.18, page 4, window 5, one request of 10 tokens prefilled 1 then 9,
stashed, then `evict(1)`. The stash's re-match stops at 0 (a 4-token live tail after the [0, 4)
tombstone is shorter than the window), so the tree's [0, 4) tombstone and [4, 8) leaf are both
evictable. SGLang 0.5.18 evicts the leaf and keeps the tombstone as a Full-only leaf
(UnifiedRadixCache `_iteratively_delete_tombstone_leaf`: only Full decides); the model had deleted
the tombstone with it (SWARadixCache's rule), freeing 8 tokens for a need of 1, which its own
"the last node evicted was needed" rule then refused: no outcome at all (for SWARadixCache too)."""

from __future__ import annotations

import pytest

from model import allocator, radix_cache
from model.designs import preset
from model.ops import Concrete, Symbolic
from model.state import CHUNKED, OOM_ASSERT, RUNNING, WAITING
from model.system import init_state, match_prefix
from model.transition import Ctx
from upstream import lifecycle

SGLANG_0518 = {"full_available": 88, "full_evictable": 4, "full_protected": 0, "swa_available": 92,
               "swa_evictable": 0, "swa_protected": 0}


def _matched(design_name: str, input_len: int):
    """Page 4, window 5, a 96-token pool, the unified cache; request 1 (`input_len` tokens) matched."""
    design = preset(design_name)
    sc = lifecycle.Life(4, True, 5, 96, 0, ((1, False), (input_len, False)), (), "unified")
    cfg, p = lifecycle._model(sc, design)
    x = Ctx(Concrete(), cfg, design, p)
    s = init_state(x).set(status=(WAITING, WAITING))
    s, m, _ = match_prefix(x, s, 1)
    return design, x, s, m


def _stashed(design_name: str):
    _design, x, s, m = _matched(design_name, 10)
    s, top = radix_cache.inc_lock_ref(x, s, m.last_device_node)
    s = s.req(1, last_node=m.last_device_node, swa_lock_top=top, cache_protected_len=0, kv_committed_len=0,
              kv_allocated_len=0, status=CHUNKED)
    s = s.set(req_pool_available=s.req_pool_available - 1)
    s = allocator.alloc(x, s, 4).req(1, kv_committed_len=1, kv_allocated_len=1)  # chunk 1
    s = radix_cache.cache_unfinished_req(x, s, 1, "stash")  # the next chunk's stash: nothing page-aligned
    s = allocator.alloc(x, s, 8).req(1, kv_committed_len=10, kv_allocated_len=10, status=RUNNING)  # chunk 9
    s = radix_cache.cache_unfinished_req(x, s, 1, "stash")
    return x, s


@pytest.mark.parametrize("design_name", ["v0.5.18", "v0.5.22"])
def test_unified_tree_keeps_the_childless_tombstone(design_name: str) -> None:
    x, s = _stashed(design_name)
    assert lifecycle._sizes(x, s) == {**SGLANG_0518, "full_available": 84, "full_evictable": 8, "swa_available": 88,
                                      "swa_evictable": 4}
    outcomes = [lifecycle._sizes(x, o) for o in lifecycle._model_evictions(x, s, 1, 1)]
    assert SGLANG_0518 in outcomes, outcomes


def test_swa_radix_cache_deletes_the_childless_tombstone() -> None:
    """Without the flag (SWARadixCache's `_iteratively_delete_tombstone_leaf`) the tombstone goes in
    the same LRU step as its last child: for a need of 1 that step frees 8 Full tokens, and the
    model allows it (the step's forced tombstones count as the step's own, not as a step that was not
    needed: before, this state too had no outcome)."""
    x, s = _stashed("v0.5.18")
    x = Ctx(Concrete(), x.cfg, x.design.with_fix("swa_tombstone_parent_kept", None), x.p)
    for need in (1, 8):
        outcomes = [lifecycle._sizes(x, o) for o in lifecycle._model_evictions(x, s, need, need)]
        assert outcomes and all(o["full_available"] == 92 and o["full_evictable"] == 0 for o in outcomes), (need, outcomes)


def _stashed_then_grown(design_name: str):
    """Finding 3's scenario (docs/releases.md §0): one request of 11 tokens prefilled 10, stashed
    (the re-match ends at 0: [0, 4) tombstone, [4, 8) live, shorter than the window), then its
    last token; returns the state before the finish."""
    design, x, s, m = _matched(design_name, 11)
    s = s.req(1, last_node=m.last_device_node, cache_protected_len=0, status=CHUNKED)
    s = s.set(req_pool_available=s.req_pool_available - 1)
    s = allocator.alloc(x, s, 12).req(1, kv_committed_len=10, kv_allocated_len=10)  # chunk 10
    assert not radix_cache.checkpoint_assertion_fails(x, s, 1, finished=False)  # the stash itself lives
    s = radix_cache.cache_unfinished_req(x, s, 1, "stash")
    if design.variant("unfinished_swa_release") == "rematch":
        assert s.cache_protected_len[1] == 0
    return x, s.req(1, kv_committed_len=11, kv_allocated_len=11, status=RUNNING)  # chunk 1 (same page)


@pytest.mark.parametrize("design_name,dies", [("v0.5.22", True), ("v0.5.23", False)])
def test_the_finish_after_a_short_rematch_kills_0_5_22(design_name: str, dies: bool) -> None:
    """0.5.22's finish goes through checkpoint_into_tree: the insert finds [0, 8) in the tree
    (new_prefix_len = 8), the re-match ends at 0, and SGLang's assertion kills the scheduler;
    0.5.23 keeps the inserted path (no re-match)."""
    x, s = _stashed_then_grown(design_name)
    assert bool(radix_cache.checkpoint_assertion_fails(x, s, 1, finished=True)) is dies
    # a second stash without new KV would fail the same assertion where the stash re-matches
    assert bool(radix_cache.checkpoint_assertion_fails(x, s.req(1, kv_committed_len=10), 1, finished=False)) is dies


@pytest.mark.parametrize("design_name,dies", [("v0.5.20", True), ("v0.5.23", False)])
def test_the_second_stash_after_a_short_rematch_dies(design_name: str, dies: bool) -> None:
    """kvmc conform on 0.5.20 (both sides die): page 4, window 5, a 12-token warm prefix (SGLang's
    nodes [0, 4) and [4, 12), #26919's cap), a 34-token request sharing it, chunks of 10 and 12:
    the first stash re-matches to 12 ([12, 16) tombstone, [16, 20) live, shorter than the window),
    the second's insert finds [12, 20) in the tree and its re-match ends at 12 again."""
    design = preset(design_name)
    sc = lifecycle.Life(4, True, 5, 96, 12, ((34, True), (1, False)), (), "unified")
    cfg, p = lifecycle._model(sc, design, (4, 8))
    x = Ctx(Concrete(), cfg, design, p)
    s = init_state(x).set(status=(WAITING, WAITING))
    s, m, _ = match_prefix(x, s, 0)
    assert m.prefix_len == 12
    s, top = radix_cache.inc_lock_ref(x, s, m.last_device_node)
    s = s.req(0, last_node=m.last_device_node, swa_lock_top=top, cache_protected_len=12, kv_committed_len=12,
              kv_allocated_len=12, status=CHUNKED)
    s = s.set(req_pool_available=s.req_pool_available - 1)
    s = allocator.alloc(x, s, 12).req(0, kv_committed_len=22, kv_allocated_len=22)  # chunk 10
    assert not radix_cache.checkpoint_assertion_fails(x, s, 0, finished=False)
    s = radix_cache.cache_unfinished_req(x, s, 0, "stash")
    s = allocator.alloc(x, s, 12).req(0, kv_committed_len=34, kv_allocated_len=34)  # chunk 12
    assert bool(radix_cache.checkpoint_assertion_fails(x, s, 0, finished=False)) is dies
    # the outcome is the transition's own: the state SGLang dies in (after the out-of-window release
    # and the insert; P, the lock and the row not moved), and the same in z3 at these numbers
    after = radix_cache.cache_unfinished_req(x, s, 0, "stash")
    assert (after.oom == OOM_ASSERT) is dies
    if dies:
        assert (after.cache_protected_len[0], after.last_node[0]) == (s.cache_protected_len[0], s.last_node[0])
        assert lifecycle._sizes(x, after)["full_evictable"] == 20  # SGLang 0.5.20's tree at its death
    import z3

    xs = Ctx(Symbolic(0), cfg, design, p)
    assert z3.is_true(z3.simplify(z3.BoolVal(True) == (radix_cache.cache_unfinished_req(xs, s, 0, "stash").oom == OOM_ASSERT))) is dies
