"""The digest's section 11 scenarios, run through the concrete model with the digest's numbers.

Each test drives the one model definition (the same functions the z3 engines encode) and checks
the numbers the digest derives by hand: pool sizes, busy-check terms, and where the pre-fix design
fails while the fixed one balances or defers."""

from __future__ import annotations

import pytest

from model import prefill_adder
from model.config import Config, Spec
from model.designs import PRESETS
from model.ops import Concrete
from model.radix_cache import match_prefix
from model.state import CHUNKED, FINISHED, OOM_NONE, OOM_PREFILL, RUNNING, WAITING
from model.system import System, init_state
from model.config import concrete_params

from .scenario import D55F1C28, drive

CURRENT = D55F1C28  # the scenarios were derived on it (tests/unit/scenario.py)
ARRIVE0 = {"recv.arrive[0]": True}
ARRIVE1 = {"recv.arrive[1]": True}


# -- 11.1 #21499: the SWA pool is not covered by the busy check ------------------------------------
S111 = Config(
    name="digest_11_1", doc="", num_reqs=1, page_size=1, hybrid_swa=True, private_atoms=2,
    bounds={"full_tokens": (64, 64), "swa_tokens": (32, 32), "sliding_window_size": (4, 4), "input_len": (10, 10),
            "max_new_tokens": (20, 20), "req_pool_size": (1, 1), "max_prefill_tokens": (64, 64)},
)
# prefill, decodes 1..9 without a window release, decode 10 releases [10, 14)
PICKS_111 = [ARRIVE0] + [{}] * 9 + [{"decode.evict_swa[0]": True}]


def test_11_1b_both_pools_balance_after_the_window_release() -> None:
    run = drive(S111, CURRENT, PICKS_111)
    s1, b1 = run.states[1], run.busy(1)
    assert (s1.kv_allocated_len[0], s1.cache_protected_len[0], s1.swa_evicted_seqlen[0]) == (10, 10, 0)
    assert (b1.terms["available"], b1.terms["protected"], b1.terms["uncached"]) == (54, 10, 0)
    assert (b1.terms["swa_available"], b1.terms["swa_protected"], b1.terms["swa_uncached"]) == (22, 10, 0)
    s, b = run.states[11], run.busy(11)
    assert (s.kv_allocated_len[0], s.swa_evicted_seqlen[0]) == (20, 14)
    assert (b.terms["available"], b.terms["protected"], b.terms["uncached"], b.terms["sum"]) == (44, 10, 10, 64)
    assert (b.terms["swa_available"], b.terms["swa_protected"], b.terms["swa_uncached"], b.terms["swa_sum"]) == (16, 10, 6, 32)
    assert not any(run.busy(t).fired for t in range(len(run.states)))


def test_11_1b_injected_swa_leak_caught_only_by_the_swa_equation() -> None:
    leak = frozenset({"evict_swa_skips_free_swa"})
    fixed = drive(S111, CURRENT.with_mutants(leak), PICKS_111)
    b = fixed.busy(11)
    assert (b.terms["swa_available"], b.terms["swa_protected"], b.terms["swa_uncached"]) == (12, 10, 6)
    assert b.terms["swa_sum"] == 28 and b.terms["swa_total"] == 32
    assert b.fired and b.full_ok and not b.swa_ok
    prefix = drive(S111, CURRENT.with_fix("swa_busy_check", "full_pool_only").with_mutants(leak), PICKS_111)
    assert prefix.busy(11).terms["sum"] == 64 and not prefix.busy(11).fired  # silent


def test_11_1a_released_check_crashes_on_swa_radix() -> None:
    run = drive(S111, PRESETS["v0.5.10.post1"], PICKS_111[:1])
    assert run.busy(1).crashed
    assert not drive(S111, CURRENT, PICKS_111[:1]).busy(1).crashed


# -- 11.2 #22213 / #22753 / #22862: streaming sessions -------------------------------------------------
S112 = Config(
    name="digest_11_2", doc="", num_reqs=1, page_size=1, streaming_sessions=(0,), private_atoms=2, max_turns=2,
    turn_tokens=(10, 10),
    bounds={"full_tokens": (1000, 1000), "input_len": (20, 20), "max_new_tokens": (5, 5), "req_pool_size": (2, 2),
            "max_prefill_tokens": (4096, 4096)},
)
# turn 1: prefill + 4 decodes (finish saves the slot), one idle iteration, turn 2 with 10 new tokens
PICKS_112 = [ARRIVE0] + [{}] * 5 + [{"recv.next_turn[0]": True, "recv.turn_tokens[0]": 10}]


def test_11_2_turn_one_saves_the_slot_and_balances() -> None:
    run = drive(S112, CURRENT, PICKS_112)
    s = run.states[5]
    assert s.status[0] == FINISHED and s.slot_holding[0]
    assert (s.slot_kv_allocated_len[0], s.slot_kv_committed_len[0], s.slot_cache_protected_len[0]) == (24, 24, 20)
    b = run.busy(5)
    assert (b.terms["available"], b.terms["protected"], b.terms["session_held"], b.terms["sum"]) == (976, 20, 4, 1000)


@pytest.mark.parametrize(
    "variant, expected_sum, fired",
    [(None, 1004, True), ("is_active", 1000, False), ("active_idx", 1000, False)],
)
def test_11_2_turn_two_double_counts_without_the_fix(variant: str | None, expected_sum: int, fired: bool) -> None:
    run = drive(S112, CURRENT.with_fix("session_active", variant), PICKS_112)
    s, b = run.states[7], run.busy(7)
    assert (s.kv_allocated_len[0], s.kv_committed_len[0], s.cache_protected_len[0]) == (35, 35, 20)
    assert (b.terms["available"], b.terms["protected"], b.terms["uncached"]) == (965, 20, 15)
    assert b.terms["session_held"] == (4 if variant is None else 0)
    assert b.terms["sum"] == expected_sum and b.fired is fired


# -- 11.3 #23174: hybrid-SWA chunked prefill OOM in add_chunked_req ------------------------------------
def _chunked_at(ps: int, swa_available: int, left: int, chunk: int, design: str | None):
    cfg = Config(
        name="digest_11_3", doc="", num_reqs=1, page_size=ps, hybrid_swa=True, chunked_prefill=True, private_atoms=3,
        bounds={"full_tokens": (64 * ps * 8, 64 * ps * 8), "swa_tokens": (64 * ps, 64 * ps), "sliding_window_size": (128, 128),
                "chunked_prefill_size": (chunk, chunk), "input_len": (ps + left, ps + left), "max_new_tokens": (8, 8),
                "req_pool_size": (1, 1), "max_prefill_tokens": (8192, 8192)},
    )
    d = CURRENT if design is None else CURRENT.with_fix("chunked_swa_page_reserve", None)
    x = System(cfg, d).ctx(Concrete(), concrete_params(cfg))
    s = init_state(x).set(swa_available=swa_available)
    # the chunked request: a page-aligned prefix of one page is computed and `left` tokens remain
    s = s.req(0, status=CHUNKED, origin_input_len=ps + left, kv_committed_len=ps, kv_allocated_len=ps)
    ad = prefill_adder.new_adder(x, s)
    return x, s, prefill_adder.add_chunked_req(x, s, ad, 0)


def test_11_3a_one_page_missing() -> None:
    # ps=64, 500 tokens left, rem_chunk 2048, rem_swa = 100 (not a page multiple, as the unit test mocks)
    x, _, (ad, stays) = _chunked_at(64, 100, 500, 2048, design="pre")
    assert ad.extend[0] == 100 and stays
    assert x.ceil_page(ad.extend[0]) == 128 > 100  # alloc_extend needs two pages: None, "Prefill out of memory"
    x, _, (ad, stays) = _chunked_at(64, 100, 500, 2048, design=None)
    assert ad.extend[0] == 36 and 36 + 64 <= 100 and x.ceil_page(36) == 64 and stays


def test_11_3b_exhausted_swa_budget_falls_back_to_the_whole_chunk() -> None:
    x, _, (ad, stays) = _chunked_at(64, 0, 2048, 2048, design="pre")
    assert ad.extend[0] == 2048 and ad.can_run[0]  # R <= 0 -> R := rem_chunk: 32 pages with none free
    x, _, (ad, stays) = _chunked_at(64, 0, 2048, 2048, design=None)
    assert ad.extend[0] == 0 and not ad.can_run[0] and stays  # deferred to a later pass


S113 = Config(
    name="digest_11_3_system", doc="", num_reqs=1, page_size=1, hybrid_swa=True, chunked_prefill=True, private_atoms=3,
    bounds={"full_tokens": (9, 9), "swa_tokens": (5, 5), "sliding_window_size": (3, 3), "chunked_prefill_size": (3, 3),
            "input_len": (6, 6), "max_new_tokens": (1, 1), "req_pool_size": (2, 2), "max_prefill_tokens": (8, 8)},
)


def test_11_3b_end_to_end_oom_before_the_fix_and_deferral_after() -> None:
    picks = [ARRIVE0, {}, {}]
    pre = drive(S113, CURRENT.with_fix("chunked_swa_page_reserve", None), picks)
    assert [s.swa_available for s in pre.states] == [5, 2, 0, 0]
    assert pre.states[3].oom == OOM_PREFILL
    post = drive(S113, CURRENT, picks)
    assert all(s.oom == OOM_NONE for s in post.states)
    assert post.states[3].status[0] == CHUNKED  # deferred, not over-allocated


# -- 11.4 #27228: busy check disabled for EAGLE topk > 1 -----------------------------------------------
S114 = Config(
    name="digest_11_4", doc="", num_reqs=1, page_size=4, spec=Spec(num_steps=5, topk=8, num_draft_tokens=64),
    private_atoms=2,
    bounds={"full_tokens": (4096, 4096), "input_len": (10, 10), "max_new_tokens": (20, 20), "req_pool_size": (1, 1),
            "max_prefill_tokens": (4096, 4096)},
)
PICKS_114 = [ARRIVE0, {"decode.accept[0]": 3}]


def test_11_4a_balancing_verify_trace() -> None:
    run = drive(S114, CURRENT, PICKS_114)
    b1, b2 = run.busy(1), run.busy(2)
    assert run.states[1].cache_protected_len[0] == 8
    assert (b1.terms["available"], b1.terms["protected"], b1.terms["uncached"], b1.terms["sum"]) == (4084, 8, 4, 4096)
    assert run.states[2].kv_allocated_len[0] == run.states[2].kv_committed_len[0] == 13
    assert (b2.terms["available"], b2.terms["uncached"], b2.terms["sum"]) == (4080, 8, 4096)
    assert b2.ran and not b2.fired


def test_11_4a_stranded_page_silent_before_the_fix() -> None:
    leak = frozenset({"verify_keeps_rejected_page"})
    fixed = drive(S114, CURRENT.with_mutants(leak), PICKS_114)
    assert fixed.busy(2).terms["sum"] == 4092 and fixed.busy(2).fired
    pre = drive(S114, PRESETS["v0.5.12.post1"].with_mutants(leak), PICKS_114)
    assert pre.states[2].full_available == 4076  # the same stranded page
    assert not pre.busy(2).ran and not pre.busy(2).fired  # "topk > 1: skip the busy check"


# -- 11.5 #27391: the SWA admission budget ignores HiCache SWA load-back ---------------------------------
S115 = Config(
    name="digest_11_5", doc="", num_reqs=2, page_size=64, hybrid_swa=True, hicache=True, chunked_prefill=True,
    warm_atoms=2, shares_warm_prefix=(True, True), private_atoms=3,
    bounds={"full_tokens": (8192, 8192), "swa_tokens": (1792, 1792), "sliding_window_size": (128, 128),
            "chunked_prefill_size": (512, 512), "input_len": (1025, 2560), "max_new_tokens": (2, 2),
            "req_pool_size": (2, 2), "max_prefill_tokens": (8192, 8192), "warm_len": (512, 1024),
            "warm_device": (0, 1), "warm_host": (0, 1)},
)
# warm path A (1024, on device) -> B (512, evicted to host); Z keeps A locked; Y = A + B + 1024.
# The digest's Z is A + 64 tokens that are not B's; in kvmc a sharing request's tokens follow the
# whole warm prefix, so its stash would split B. Z = A + 1 token instead: its partial page
# [1024, 1088) is its own (64 slots, as in the digest) and its stash ends at A.
PARAMS_115 = dict(input_len=(1025, 2560), warm_len=(1024, 512), warm_device=(1, 0), warm_host=(1, 1))


def test_11_5_match_and_budget_numbers() -> None:
    run = drive(S115, CURRENT, [ARRIVE0], **PARAMS_115)
    s = run.states[1]
    assert s.status[0] == RUNNING and run.busy(1).terms["swa_available"] == 704
    assert run.counters(1).swa_evictable == 0
    m = match_prefix(run.ctx(), s, 1, 2559)
    assert (m.prefix_len, m.host_hit_length, m.swa_host_hit_length) == (1024, 512, 512)
    e = 2560 - 1024
    for design, budget in [("v0.5.12.post1", 576), ("v0.5.13", 1088)]:
        x = run.system.__class__(S115, PRESETS[design]).ctx(Concrete(), run.params)
        ad = prefill_adder.new_adder(x, s)
        assert prefill_adder._swa_budget_for_req(x, ad, e, 2, m.swa_host_hit_length) == budget


def test_11_5_admitted_then_out_of_memory_before_the_fix() -> None:
    run = drive(S115, PRESETS["v0.5.12.post1"], [ARRIVE0, ARRIVE1], **PARAMS_115)
    s = run.states[2]
    assert s.swa_available == 192  # 704 - the 512 SWA tokens init_load_back allocated
    assert s.oom == OOM_PREFILL  # the 512-token chunk needs 8 SWA pages, 3 are free


def test_11_5_rejected_at_admission_after_the_fix() -> None:
    run = drive(S115, PRESETS["v0.5.13"], [ARRIVE0, ARRIVE1], **PARAMS_115)
    s = run.states[2]
    assert s.oom == OOM_NONE and s.status[1] == WAITING  # NO_TOKEN: no load-back started
