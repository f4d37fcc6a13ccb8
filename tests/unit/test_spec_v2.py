"""Spec v2 (v0.5.13+, model/speculative.py): the over-allocation A' = max(A, ceil(C + 2a)), the
decode need, no free per step, the release of [ceil(C), A), the retraction order, and the
planted stranded-tail leak that shows #27228 under spec v2.

Numbers derived from the 0.5.18 source: `allocation_sizing.get_alloc_len_per_decode` with
page_size 4, topk 2, num_steps 2, num_draft_tokens 3 is max(((4-1)+2+4-1)//4 * 4 * 2, 3) = 16, so
the reserve 2a is 32; `eagle_prepare_for_decode` rounds C + 32 up to a page."""

from __future__ import annotations

import pytest

from model.config import Config, Spec
from model.designs import preset
from model.ops import Concrete
from model.state import FINISHED, RUNNING
from model.system import System
from model import allocation_sizing, schedule_batch
from specs.configs import CONFIGS
from tests.unit.scenario import D55F1C28, drive

V2 = D55F1C28.with_fix("eagle_v1_removed", "on").with_fix("spec_v2_page_align", "on")
ARRIVE0 = {"recv.arrive[0]": True}

S4 = Config(
    name="spec_v2_page4", doc="", num_reqs=1, page_size=4, spec=Spec(num_steps=2, topk=2, num_draft_tokens=3, version=2),
    private_atoms=2,
    bounds={"full_tokens": (128, 128), "input_len": (5, 5), "max_new_tokens": (6, 6), "req_pool_size": (1, 1),
            "max_prefill_tokens": (64, 64)},
)


def _ctx(cfg: Config):  # noqa: ANN202
    from model.config import concrete_params

    return System(cfg, V2).ctx(Concrete(), concrete_params(cfg))


def test_alloc_len_per_decode_follows_allocation_sizing() -> None:
    assert allocation_sizing.alloc_len_per_decode(_ctx(S4)) == 16  # the draft tree's page-aligned branches
    assert allocation_sizing.alloc_len_per_decode(_ctx(CONFIGS["spec_v2"])) == 4  # page 1: max(L*k, D) = max(4, 3)


def test_over_allocation_then_no_free_then_release() -> None:
    run = drive(S4, V2, [ARRIVE0, {"decode.accept[0]": 2}, {"decode.accept[0]": 3}, {}])
    s1, s2, s3 = run.states[1], run.states[2], run.states[3]
    # prefill: 5 tokens in two pages, the first token out; C = A = 5
    assert (s1.kv_committed_len[0], s1.kv_allocated_len[0], s1.full_available) == (5, 5, 120)
    # decode 1: A' = max(5, ceil4(5 + 32)) = 40, a paged extend of ceil(40) - ceil(5) = 32 slots; C += 2
    assert (s2.kv_allocated_len[0], s2.kv_committed_len[0], s2.full_available) == (40, 7, 88)
    # decode 2: A' = max(40, ceil4(7 + 32)) = 40: nothing allocated, nothing freed; C += 3, out = 6
    assert (s3.kv_allocated_len[0], s3.kv_committed_len[0]) == (40, 10)
    assert s3.status[0] == FINISHED
    # finish: the tree takes [0, 8), the tail page [8, 12) and the over-allocation [12, 40) are freed
    assert s3.full_available == 128 - 8
    assert run.busy(3).ran and not run.busy(3).fired


def test_decode_need_matches_the_extend() -> None:
    run = drive(S4, V2, [ARRIVE0])
    x = run.ctx()
    s = run.states[1]
    batch = tuple(st == RUNNING for st in s.status)
    assert schedule_batch.decode_tokens_needed(x, s, batch) == 32  # ceil(40) - ceil(5)
    assert schedule_batch.spec_v2_tokens_needed(x, s, batch) == 32


def test_without_page_align_the_row_is_not_rounded() -> None:
    pre = V2.with_fix("spec_v2_page_align", None)  # v0.5.13-0.5.15.post1
    run = drive(S4, pre, [ARRIVE0, {"decode.accept[0]": 2}])
    assert run.states[2].kv_allocated_len[0] == 37  # 5 + 32: the allocator still takes whole pages
    assert run.states[2].full_available == 120 - (40 - 8)


@pytest.mark.parametrize("flag, victim", [(None, 1), ("on", 0)])
def test_retraction_order(flag: str | None, victim: int) -> None:
    """Before v0.5.17 a spec batch is retracted from the back (slot 1); since, by (|out|, -|in|):
    with equal outputs the longer prompt (slot 0) goes first."""
    cfg = CONFIGS["spec_v2"]
    design = V2.with_fix("spec_retract_length_order", flag)
    run = drive(cfg, design, [{"recv.arrive[0]": True, "recv.arrive[1]": True}, {"decode.test_retract": True}],
                full_tokens=40, input_len=(3, 2), max_new_tokens=(6, 6))
    s = run.states[2]
    assert s.status[victim] != RUNNING and s.status[1 - victim] == RUNNING


def test_stranded_tail_leak_shows_27228() -> None:
    """At page 1 (at page 4 the short length still covers the page, so nothing is lost)."""
    leak = frozenset({"spec_v2_records_short_alloc"})
    cfg, picks = CONFIGS["spec_v2"], [ARRIVE0, {"decode.accept[0]": 2}]
    params = dict(full_tokens=24, input_len=(1, 1), max_new_tokens=(6, 6))
    fixed = drive(cfg, V2.with_mutants(leak), picks, **params)
    assert fixed.states[2].kv_allocated_len[0] == 8  # A' = 1 + 8 = 9 allocated, 8 recorded
    b = fixed.busy(2)
    assert b.fired and b.terms["sum"] == 23  # one slot allocated and owned by nobody
    pre = drive(cfg, V2.with_fix("spec_topk_busy_check", None).with_mutants(leak), picks, **params)
    assert not pre.busy(2).ran and not pre.busy(2).fired


# -- spec v2 on hybrid SWA (config hybrid_swa_spec_v2; SGLang 0.5.23 speculative/eagle_utils.py::
# eagle_prepare_for_decode: maybe_evict_swa, then alloc_for_spec_decode on the SWA allocator)
SWA1 = Config(
    name="spec_v2_swa", doc="", num_reqs=1, page_size=1, hybrid_swa=True,
    spec=Spec(num_steps=2, topk=2, num_draft_tokens=3, version=2), private_atoms=4,
    bounds={"full_tokens": (40, 40), "swa_tokens": (30, 30), "sliding_window_size": (2, 2), "input_len": (5, 5),
            "max_new_tokens": (12, 12), "req_pool_size": (1, 1), "max_prefill_tokens": (64, 64)},
)


def test_hybrid_swa_both_pools_over_allocated_and_the_window_slides_behind_c() -> None:
    fire = {"decode.evict_swa[0]": True}
    run = drive(SWA1, preset("current"), [ARRIVE0, {"decode.accept[0]": 2}, {"decode.accept[0]": 3, **fire},
                           {"decode.accept[0]": 3, **fire}])
    s1, s2, s3, s4 = run.states[1:5]
    # prefill: 5 tokens in each pool; the stash inserts [0, 5) (P = 5) and releases the SWA that slid out
    # of the window behind pre_len 4: [0, floor(4 - ceil(max(W, ps)))) = [0, 2)
    assert (s1.kv_committed_len[0], s1.cache_protected_len[0], s1.swa_evicted_seqlen[0]) == (5, 5, 2)
    assert (s1.full_available, s1.swa_available) == (35, 27)
    # decode 1: a = max(L*k, D) = 4, A' = 5 + 8 = 13: 8 slots from BOTH pools; C += 2
    assert (s2.kv_allocated_len[0], s2.kv_committed_len[0], s2.full_available, s2.swa_available) == (13, 7, 27, 19)
    # decode 2: E rises to P = 5; the window release from C = 7 keeps ceil(max(W, ps)) = 2: floor(7 - 2) = 5,
    # nothing freed; A' = max(13, 7 + 8) = 15, two more slots from each pool; C += 3
    assert (s3.swa_evicted_seqlen[0], s3.kv_allocated_len[0], s3.kv_committed_len[0]) == (5, 15, 10)
    assert (s3.full_available, s3.swa_available) == (25, 17)
    # decode 3: from C = 10 the release frees SWA [5, 8) (the full KV stays), then A' = 18 takes 3 from
    # each pool: the over-allocated tail [C, A) is never released by the window
    assert (s4.swa_evicted_seqlen[0], s4.kv_allocated_len[0], s4.kv_committed_len[0]) == (8, 18, 13)
    assert (s4.full_available, s4.swa_available) == (22, 17)
    assert all(run.busy(t).ran and not run.busy(t).fired for t in (2, 3, 4))


def test_hybrid_swa_spec_v1_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="spec v2 only"):
        Config(name="v1_swa", doc="", num_reqs=1, page_size=1, hybrid_swa=True,
               spec=Spec(num_steps=2, topk=2, num_draft_tokens=3, version=1), bounds={})
