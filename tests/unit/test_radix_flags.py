"""The radix-cache / SWA-window flags of issue 27 (docs/releases.md section A), each on a concrete
scenario through the one model definition, before and after, with numbers derived by hand from
the SGLang source of the release that ships the behaviour (file:line in each test's comment)."""

from __future__ import annotations

import pytest

from model.config import Config

from .scenario import D55F1C28, drive

CURRENT = D55F1C28  # the scenarios were derived on it (tests/unit/scenario.py)
ARRIVE0 = {"recv.arrive[0]": True}
EVICT0 = {"decode.evict_swa[0]": True}


def _swa_cfg(ps: int, W: int, input_len: int, max_new: int, *, full: int = 256, swa: int = 128, chunk: int | None = None,
             private_atoms: int = 4, num_reqs: int = 1, name: str = "radix_flags", align: int | None = None) -> Config:
    bounds = {"full_tokens": (full, full), "swa_tokens": (swa, swa), "sliding_window_size": (W, W),
              "input_len": (input_len, input_len), "max_new_tokens": (max_new, max_new), "req_pool_size": (2, 2),
              "max_prefill_tokens": (4096, 4096)}
    if chunk is not None:
        bounds["chunked_prefill_size"] = (chunk, chunk)
    return Config(name=name, doc="", num_reqs=num_reqs, page_size=ps, hybrid_swa=True, chunked_prefill=chunk is not None,
                  private_atoms=private_atoms, bounds=bounds, truncation_align_size=align)


# -- swa_release_threshold (#29860 v0.5.15.post1; v0.5.23) -------------------------------------------
# free_swa_out_of_window_slots (0.5.14:mem_cache/common.py:84-100 page_margin: pre_len - W - ps;
# 0.5.18:mem_cache/common.py:78-100 max_w_ps: pre_len - max(W, ps); 0.5.23:mem_cache/common.py:111-120
# ceil_max_w_ps: pre_len - ceil_align(max(W, ps), ps)); E first rises to P; the new E is floored.
# ps=4, W=5, a 5-token prompt: P = floor_4(5) = 4 after its prefill. Decode k (k = 1, 2, ...) runs with
# pre_len = C = 4 + k. The release fires at C = 20 (decode 16) and C = 22 (decode 18):
#   page_margin   floor_4(20 - 9) = 8,  floor_4(22 - 9) = 12
#   max_w_ps      floor_4(20 - 5) = 12, floor_4(22 - 5) = 16
#   ceil_max_w_ps floor_4(20 - 8) = 12, floor_4(22 - 8) = 12
S_THR = _swa_cfg(4, 5, 5, 40)
PICKS_THR = [ARRIVE0] + [{}] * 15 + [EVICT0] + [{}] + [EVICT0]


@pytest.mark.parametrize("variant, e20, e22", [(None, 8, 12), ("max_w_ps", 12, 16), ("ceil_max_w_ps", 12, 12)])
def test_swa_release_threshold(variant: str | None, e20: int, e22: int) -> None:
    design = CURRENT.with_fix("swa_release_threshold", variant)
    run = drive(S_THR, design, PICKS_THR)
    quiet = drive(S_THR, design, PICKS_THR[:-3] + [{}] * 3)  # the same steps, no release
    s16, s18 = run.states[17], run.states[19]
    assert (s16.kv_committed_len[0], s16.cache_protected_len[0], s16.swa_evicted_seqlen[0]) == (21, 4, e20)
    assert (s18.kv_committed_len[0], s18.swa_evicted_seqlen[0]) == (23, e22)
    # the SWA slots [P, E) went back to the SWA allocator, nothing else did
    assert s16.swa_available - quiet.states[17].swa_available == e20 - 4
    assert s18.swa_available - quiet.states[19].swa_available == e22 - 4
    assert s18.full_available == quiet.states[19].full_available
    assert not any(run.busy(t).fired for t in range(len(run.states)))


# -- swa_leaf_window_cap (#26919; the unified cache is the hybrid-SWA default from v0.5.16) ------------
# 0.5.18:mem_cache/unified_cache/components/swa_component.py:398-422 (_maybe_split_leaf_for_swa_lock):
# tail = ceil(W / ps) * ps = 8 for ps=4, W=5; a new leaf of 20 > 8 tokens is split at 20 - 8 = 12 (both
# page multiples). The request's lock at the leaf then covers 8 >= W SWA tokens and stops there.
S_CAP = _swa_cfg(4, 5, 20, 4)


# The cap is the unified tree's: without HiCache a hybrid-SWA config runs on it only from #30468
# (`unified_radix_default`); on SWARadixCache the flag changes nothing (model/designs.py::leaf_window_cap).
@pytest.mark.parametrize("cap, unified, nodes, swa_ev, swa_prot", [
    (None, "on", (20, 0), 0, 20), ("on", "on", (12, 8), 12, 8), ("on", None, (20, 0), 0, 20)])
def test_swa_leaf_window_cap(cap: str | None, unified: str | None, nodes: tuple[int, int], swa_ev: int,
                             swa_prot: int) -> None:
    run = drive(S_CAP, CURRENT.with_fix("unified_radix_default", unified).with_fix("swa_leaf_window_cap", cap), [ARRIVE0])
    s, c = run.states[1], run.counters(1)
    assert (s.kv_committed_len[0], s.cache_protected_len[0]) == (20, 20)
    assert s.node_len[:2] == nodes and not any(s.node_swa_tombstone)
    assert (c.full_evictable, c.full_protected) == (0, 20)  # the full lock still covers the whole path
    assert (c.swa_evictable, c.swa_protected) == (swa_ev, swa_prot)
    assert (s.full_available, s.swa_available) == (236, 108)
    assert not run.busy(1).fired


# -- swa_tombstone_leaf_kept (#29351, v0.5.15.post1) and the partial revive (all releases, model fix) --
# A direct insert on a built tree (kvmc's event loop never reaches E >= floor(C): every threshold
# keeps at least a page below the insert boundary, 0.5.18:mem_cache/common.py:78-86).
def _insert_ctx(design, node_len=(0, 0, 0, 0), tomb=(False,) * 4, swa_available=64):  # noqa: ANN001, ANN202
    from model.ops import Concrete
    from model.system import System, init_state
    from model.config import concrete_params

    cfg = _swa_cfg(4, 5, 16, 4, full=64, swa=64)
    x = System(cfg, design).ctx(Concrete(), concrete_params(cfg))
    s = init_state(x)
    used = sum(node_len)
    s = s.set(node_len=tuple(node_len), node_swa_tombstone=tuple(tomb), full_available=64 - used,
              swa_available=swa_available)
    return x, s


@pytest.mark.parametrize("kept", [None, "on"])
def test_swa_tombstone_leaf_kept(kept: str | None) -> None:
    # 0.5.18:.../swa_component.py:369-372: split_pos = E - start >= len(leaf): "Entire leaf is outside
    # the SWA window -- left as a tombstone" (before: SWARadixCache._insert_helper frees it,
    # 0.5.13:mem_cache/swa_radix_cache.py:1193-1194). The request owns [0, 8) (full 56 free), its SWA of
    # [0, 8) already released (E = 8).
    from model.radix_cache import insert

    x, s = _insert_ctx(CURRENT.with_fix("swa_tombstone_leaf_kept", kept))
    s = s.set(full_available=56)
    s2, last, owned = insert(x, s, 0, 0, 8, 8, "t")
    assert owned == 8
    if kept is None:
        assert s2.node_len[0] == 0 and s2.full_available == 64 and last == -1  # freed, nothing inserted
    else:
        assert s2.node_len[0] == 8 and s2.node_swa_tombstone[0] and last == 0  # the tree's, Full only
        assert s2.full_available == 56
    assert s2.swa_available == 64


def test_partial_revive_of_a_tombstone_splits_it_at_E() -> None:
    # 0.5.18:.../swa_component.py:282-312 (branch 2) and 0.5.13:mem_cache/swa_radix_cache.py:1148-1162: the
    # request (prev 0, E = 4) re-inserts [0, 8) over its own tombstone node [0, 8). The node splits at E:
    # [0, 4) stays a tombstone (the request's full copy freed, 4), [4, 8) takes the request's slots (the
    # tree's old full of it freed, 4; the request's SWA of [4, 8) now the tree's). kvmc used to keep the
    # whole node a tombstone and free the request's SWA of [4, 8) too (4 more SWA freed, 4 fewer live).
    from model.radix_cache import counters, insert

    x, s = _insert_ctx(CURRENT, node_len=(8, 0, 0, 0), tomb=(True, False, False, False), swa_available=60)
    s = s.set(full_available=48)  # tree [0, 8) + the request's own copy of [0, 8)
    s2, last, owned = insert(x, s, 0, 0, 8, 4, "t")
    assert s2.node_len[:3] == (4, 4, 0) and s2.node_swa_tombstone[:2] == (True, False)
    assert last == 1 and owned == 8
    assert s2.full_available == 56 and s2.swa_available == 60
    assert counters(x, s2).swa_evictable == 4


# -- unfinished_swa_release (#27402 hook, #29350, default on by #34653: v0.5.18; rematch <= v0.5.22,
# path v0.5.23) and docs/releases.md's candidate finding 3 ---------------------------------------------
# 0.5.18:mem_cache/unified_radix_cache.py:793-859: free_swa_out_of_window_slots(req, |key| - 1) then
# insert(swa_evicted_seqlen = E'), then P := |match_prefix(key)|. ps=4, W=5, an 11-token prompt, no
# chunking: after its prefill C = 11, pre_len = 10; max_w_ps: E' = floor_4(10 - 5) = 4, SWA [0, 4) freed;
# insert [0, 8): [0, 4) tombstone, [4, 8) live (4 < W: the match validator rejects it,
# 0.5.18:.../swa_component.py:200-225), so the re-match is the root: P = 0, nothing locked.
S_F3 = _swa_cfg(4, 5, 11, 3)
F3 = CURRENT.with_fix("swa_release_threshold", "max_w_ps")


def test_unfinished_swa_release_off_keeps_todays_insert() -> None:
    run = drive(S_F3, F3.with_fix("unfinished_swa_release", None), [ARRIVE0])
    s = run.states[1]
    assert (s.cache_protected_len[0], s.swa_evicted_seqlen[0], s.node_len[0], s.node_swa_tombstone[0]) == (8, 0, 8, False)
    assert (s.full_available, s.swa_available) == (244, 116)
    assert not run.busy(1).fired


def test_unfinished_swa_release_path_keeps_the_inserted_path() -> None:
    run = drive(S_F3, F3.with_fix("unfinished_swa_release", "path"), [ARRIVE0, {}])
    s, b, c = run.states[1], run.busy(1), run.counters(1)
    assert (s.cache_protected_len[0], s.swa_evicted_seqlen[0], s.last_node[0]) == (8, 4, 1)
    assert s.node_len[:2] == (4, 4) and s.node_swa_tombstone[:2] == (True, False)
    assert (s.full_available, s.swa_available) == (244, 120)  # SWA [0, 4) went back
    assert (c.full_protected, c.swa_protected, c.swa_evictable) == (8, 4, 0)
    # busy check: 244 + 0 + 8 + (12 - 8) = 256; SWA: 120 + 0 + 4 + (12 - max(8, 4)) = 128
    assert (b.terms["sum"], b.terms["swa_sum"]) == (256, 128) and not b.fired


def test_unfinished_swa_release_rematch_finding_3() -> None:
    from specs.properties import PROPERTIES

    run = drive(S_F3, F3.with_fix("unfinished_swa_release", "rematch"), [ARRIVE0])
    s, b, c = run.states[1], run.busy(1), run.counters(1)
    assert (s.cache_protected_len[0], s.swa_evicted_seqlen[0], s.last_node[0]) == (0, 4, -1)
    assert s.node_len[:2] == (4, 4) and s.node_swa_tombstone[:2] == (True, False)
    assert (c.full_evictable, c.full_protected) == (8, 0)  # the request's own tree part is not locked
    # "Full Pool Mem Leak Detected!": 244 + 8 + 0 + (12 - 0) = 264 != 256 (the study's F + 8)
    assert (b.terms["available"], b.terms["evictable"], b.terms["uncached"], b.terms["sum"]) == (244, 8, 12, 264)
    assert b.fired
    x = run.ctx()
    assert PROPERTIES["conservation"].holds(x, s) is False  # [0, 8) is the tree's and the request's
    assert PROPERTIES["busy_check_complete"].holds(x, s) is True


@pytest.mark.parametrize("threshold", [None, "ceil_max_w_ps"])
def test_rematch_is_harmless_with_the_other_thresholds(threshold: str | None) -> None:
    # page_margin: floor_4(10 - 9) = 0; ceil_max_w_ps: floor_4(10 - 8) = 0: no tombstone, the match is [0, 8)
    d = CURRENT.with_fix("swa_release_threshold", threshold).with_fix("unfinished_swa_release", "rematch")
    run = drive(S_F3, d, [ARRIVE0, {}, {}])
    s = run.states[1]
    assert (s.cache_protected_len[0], s.swa_evicted_seqlen[0], s.node_swa_tombstone[0]) == (8, 0, False)
    assert not any(run.busy(t).fired for t in range(len(run.states)))


# -- swa_segment_lock (#36848, v0.5.20) ----------------------------------------------------------------
# ps=4, W=5, chunk 12 with --truncation-align-size 8 (server_args asserts chunk % ps == 0), an 18-token
# prompt, unfinished_swa_release=path, max_w_ps. Pass 1: add_one_req's chunk is floor_4(12) = 12,
# aligned down to 8 (0.5.13:managers/schedule_policy.py add_one_req; add_chunked_req does not align).
# Pass 2: its stash (pre_len 7, E' = 0) inserts [0, 8) live; the chunk [8, 18) (10 <= 12) completes the
# prefill; cache_unfinished_req: pre_len 17, E' = floor_4(17 - 5) = 12, SWA [8, 12) freed,
# insert [8, 12) tombstone + [12, 16) live; the lock is at [12, 16) (4 < W tokens).
# Old walk (<= v0.5.19): [12, 16) then, skipping the tombstone, [0, 8): SWA protected 12.
# Segment walk (0.5.20:mem_cache/unified_cache/components/swa.py:774-830): [12, 16) + [8, 12) = 8 >= 5,
# the boundary is the tombstone: SWA protected 4, [0, 8) evictable.
S_SEG = _swa_cfg(4, 5, 18, 3, chunk=12, align=8)
SEG = F3.with_fix("unfinished_swa_release", "path")


@pytest.mark.parametrize("seg, top, swa_ev, swa_prot", [(None, 0, 0, 12), ("on", 1, 8, 4)])
def test_swa_segment_lock(seg: str | None, top: int, swa_ev: int, swa_prot: int) -> None:
    run = drive(S_SEG, SEG.with_fix("swa_segment_lock", seg), [ARRIVE0, {}])
    s, c, b = run.states[2], run.counters(2), run.busy(2)
    assert (s.kv_committed_len[0], s.cache_protected_len[0], s.swa_evicted_seqlen[0]) == (18, 16, 12)
    assert s.node_len[:3] == (8, 4, 4) and s.node_swa_tombstone[:3] == (False, True, False)
    assert (s.last_node[0], s.swa_lock_top[0]) == (2, top)
    assert (c.swa_evictable, c.swa_protected, c.full_protected) == (swa_ev, swa_prot, 16)
    assert (s.swa_available, b.terms["swa_uncached"], b.terms["swa_sum"]) == (128 - 20 + 4, 4, 128) and not b.fired


# -- busy_check_chunked_req (#37502, v0.5.20) and docs/releases.md's candidate finding 6 ----------------
# ps=4, W=8, chunk 8 with --enable-mixed-chunk, a 24-token SWA pool: request 1 (4 tokens) runs; request 0
# (20 tokens) arrives and the adder's chunk budget is 8 - 1 = 7 (a token per running request,
# 0.5.13:managers/schedule_policy.py PrefillAdder.__init__'s mixed_with_decode_tokens): add_one_req
# chunks [0, floor_4(7)) = [0, 4) beside request 1's decode; add_chunked_req does not page-floor its
# chunk: min(rc = 7, rem_total, rem_swa - ps) = 7, [4, 11); the next pass defers it (its lock covers
# [0, 8), rem_swa - ps = 4 + 0 - 4 = 0 <= 0, #23174) and request 1 decodes alone. Request 0 is parked
# outside every batch with P = floor_4(11) = 8 and A = 11: it owns [8, 12) of each pool. The pre-#37502
# check counts only last_batch / running_batch (0.5.18:managers/scheduler_components/invariant_checker.py),
# so it misses those 4 tokens: "Mem Leak Detected" with no leak (a busy-check false alarm). Every
# release's server_args asserts chunked_prefill_size % page_size == 0, so a parked chunk ends off a page
# only where the chunk budget is cut below the chunk size: the mixed-chunk reserve here.
S_F6 = Config(
    name="radix_flags_f6", doc="", num_reqs=2, page_size=4, hybrid_swa=True, chunked_prefill=True, mixed_chunk=True,
    private_atoms=4,
    bounds={"full_tokens": (256, 256), "swa_tokens": (24, 24), "sliding_window_size": (8, 8), "input_len": (20, 20),
            "max_new_tokens": (3, 10), "chunked_prefill_size": (8, 8), "req_pool_size": (2, 2),
            "max_prefill_tokens": (4096, 4096)},
)
PICKS_F6 = [{"recv.arrive[1]": True}, ARRIVE0, {}, {}]


@pytest.mark.parametrize("flag, fired", [(None, True), ("on", False)])
def test_busy_check_chunked_req_finding_6(flag: str | None, fired: bool) -> None:
    from specs.properties import PROPERTIES

    run = drive(S_F6, CURRENT.with_fix("busy_check_chunked_req", flag), PICKS_F6, input_len=(20, 4), max_new_tokens=(3, 10))
    s, b = run.states[4], run.busy(4)
    assert s.status == (2, 3) and not s.in_last_batch[0]  # chunked (parked), running
    assert (s.kv_allocated_len[0], s.kv_committed_len[0], s.cache_protected_len[0]) == (11, 11, 8)
    assert s.kv_committed_len[1] == 7 and s.last_batch == 2  # request 1 decoded alone
    assert b.terms["uncached"] == (4 if flag is None else 8)  # request 1's [4, 8), plus request 0's [8, 12)
    assert b.terms["sum"] == (252 if flag is None else 256) and b.fired is fired
    x = run.ctx()
    assert PROPERTIES["conservation"].holds(x, s) is True
    assert PROPERTIES["busy_check_sound"].holds(x, s) is (not fired)


# -- swa_branching_insert (v0.5.20, PR not identified) -------------------------------------------------
# 0.5.20:mem_cache/unified_cache/components/swa.py:344-386 (the match records branching =
# floor_page(full_kv_hit_length) when it reaches past the SWA-valid prefix), :925-950
# (prepare_for_caching_req: the insert stops at branching when branching > P), :975-990 (cleanup: the
# branch is inserted, forget it; release the out-of-window SWA again with pre_len = |fill| - 1).
# A retracted request (11 prompt tokens + 1 output) finds its own chain [0, 4) tombstone, [4, 8) live:
# the match stops at the root (4 < W live tokens after the tombstone), the Full-KV hit is 8, so
# branching = 8. Its prefill is [0, 12); cache_unfinished_req (path, max_w_ps):
#   off: pre_len 11, E' = floor_4(11 - 5) = 4: SWA [0, 4) released; insert [0, 12): [0, 4) stays a
#        tombstone (the request's copy freed), [4, 8) a duplicate, [8, 12) new; P = 12.
#   on:  the key stops at 8: pre_len 7, E' = 0; insert [0, 8): the tombstone [0, 4) is revived with the
#        request's slots, [4, 8) a duplicate; P = 8; then E := max(E, P) = 8 (floor_4(11 - 5) = 4 < 8):
#        the request keeps [8, 12) as its own and the tree has a live window [0, 8) again.
S_BR = _swa_cfg(4, 5, 11, 3, full=64, swa=64)
BR = F3.with_fix("unfinished_swa_release", "path")


@pytest.mark.parametrize("flag", [None, "on"])
def test_swa_branching_insert(flag: str | None) -> None:
    from checker.traces.trace import DictOracle
    from model.config import concrete_params
    from model.ops import Concrete
    from model.radix_cache import match_prefix
    from model.state import WAITING
    from model.system import System, init_state

    system = System(S_BR, BR.with_fix("swa_branching_insert", flag))
    p = concrete_params(S_BR)
    s = init_state(system.ctx(Concrete(), p))
    s = s.set(node_len=(4, 4, 0, 0), node_swa_tombstone=(True, False, False, False), full_available=56, swa_available=60)
    s = s.req(0, status=WAITING, output_len=1)
    m = match_prefix(system.ctx(Concrete(), p), s, 0, 11)
    assert (m.prefix_len, m.swa_branching_seqlen) == (0, 8 if flag else 0)
    x = system.ctx(Concrete(DictOracle({})), p, check_frames=True)
    s1 = system.step(x, s)
    assert s1.kv_committed_len[0] == 12 and s1.swa_branching_seqlen[0] == 0
    if flag is None:
        assert (s1.cache_protected_len[0], s1.swa_evicted_seqlen[0]) == (12, 4)
        assert s1.node_len[:3] == (4, 4, 4) and s1.node_swa_tombstone[:3] == (True, False, False)
        assert (s1.full_available, s1.swa_available) == (52, 56)
    else:
        assert (s1.cache_protected_len[0], s1.swa_evicted_seqlen[0]) == (8, 8)
        assert s1.node_len[:3] == (4, 4, 0) and s1.node_swa_tombstone[:2] == (False, False)
        assert (s1.full_available, s1.swa_available) == (52, 52)
    from specs.properties import PROPERTIES
    assert PROPERTIES["conservation"].holds(x, s1) is True


# -- prompt_boundary_split (plain radix cache, v0.5.20, PR not identified) -----------------------------
# 0.5.20:mem_cache/radix_cache.py:517-541: after inserting [0, floor_page(C)), cache_finished_req inserts
# the key cut at floor_page(|input|) again (topology only, no frees) when 0 < it < floor_page(C). kvmc's
# requests are cached unfinished at the end of their prefill, so the prompt boundary is already a node
# boundary, except when a retracted request's re-prefill built one node over prompt and output: here an
# 8-token prompt with 5 output tokens holds [0, 12) as one node (C = 12 = P). At its finish the node is
# split at 8, so an eviction of 4 tokens can take the output [8, 12) alone and keep the prompt.
S_PBS = Config(name="radix_flags_pbs", doc="", num_reqs=1, page_size=4, private_atoms=3,
               bounds={"full_tokens": (64, 64), "input_len": (8, 8), "max_new_tokens": (6, 6), "req_pool_size": (1, 1),
                       "max_prefill_tokens": (64, 64)})


@pytest.mark.parametrize("flag", [None, "on"])
def test_prompt_boundary_split(flag: str | None) -> None:
    from checker.traces.trace import DictOracle
    from model.config import concrete_params
    from model.ops import Concrete, Infeasible
    from model.radix_cache import cache_finished_req, evict
    from model.state import RUNNING
    from model.system import System, init_state

    system = System(S_PBS, CURRENT.with_fix("prompt_boundary_split", flag))
    p = concrete_params(S_PBS)
    s = init_state(system.ctx(Concrete(), p))
    s = s.set(node_len=(12, 0, 0), full_available=52, req_pool_available=0)
    s = s.req(0, status=RUNNING, output_len=5, kv_allocated_len=12, kv_committed_len=12, cache_protected_len=12, last_node=0)
    s1 = cache_finished_req(system.ctx(Concrete(), p, check_frames=True), s, 0, True, "finish[0]")
    assert s1.node_len == ((8, 4, 0) if flag else (12, 0, 0)) and s1.full_available == 52 and s1.last_node[0] == -1
    if flag:  # the output leaf alone
        s2 = evict(system.ctx(Concrete(DictOracle({"e.evict[1]": True})), p), s1, 4, 0, "e")
        assert s2.node_len == (8, 0, 0) and s2.full_available == 56
    else:  # the one node is the only leaf: 12 tokens go, or nothing
        with pytest.raises(Infeasible):
            evict(system.ctx(Concrete(DictOracle({})), p), s1, 4, 0, "e")
        s2 = evict(system.ctx(Concrete(DictOracle({"e.evict[0]": True})), p), s1, 4, 0, "e")
        assert s2.node_len == (0, 0, 0) and s2.full_available == 64


# -- swa_tombstone_parent_kept: the SWA pass tombstones a node before its last child goes -------------
# 0.5.21:mem_cache/unified_cache/components/swa.py:710-790 (`_evict_device_next_node`): the SWA pass
# walks the SWA LRU list from its tail and deletes an evictable device leaf or tombstones anything else.
# A chain n0 (4) - n1 (4), nothing locked, SWA pool empty, an SWA-only need of 6: with n0 the older,
# n0 is tombstoned (4 SWA; n1 still below it), then n1 deleted (4 + 4): n0 stays a Full-only leaf.
# SWARadixCache (flag off) never leaves that: its pass tombstones internal nodes only after the leaves
# went, and a tombstone losing its last child goes with it (both deleted is its outcome).
@pytest.mark.parametrize("kept", [None, "on"])
def test_swa_pass_tombstones_a_parent_before_its_child_goes(kept: str | None) -> None:
    from checker.traces.trace import DictOracle
    from model.config import concrete_params
    from model.ops import Concrete, Infeasible
    from model.radix_cache import evict
    from model.system import System, init_state

    cfg = _swa_cfg(4, 5, 16, 4, full=64, swa=64)
    ops = Concrete(DictOracle({"t.evict[1]": True, "t.tombstone[0]": True}))
    x = System(cfg, CURRENT.with_fix("swa_tombstone_parent_kept", kept)).ctx(ops, concrete_params(cfg))
    s = init_state(x).set(node_len=(4, 4, 0, 0), node_swa_tombstone=(False,) * 4, full_available=56, swa_available=0)
    if kept is None:
        with pytest.raises(Infeasible, match="SWA eviction stopped early"):
            evict(x, s, 0, 6, "t")
        assert "t.tombstone[0]" not in ops.picks  # never offered: n0 keeps no device child
        return
    s2 = evict(x, s, 0, 6, "t")
    assert ops.picks["t.tombstone[0]"] is True
    assert s2.node_len[:2] == (4, 0) and s2.node_swa_tombstone[:2] == (True, False)
    assert (s2.full_available, s2.swa_available) == (60, 8)  # n0's full slots stay the tree's
