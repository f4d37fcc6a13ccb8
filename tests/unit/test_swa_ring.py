"""The per-request SWA ring (v0.5.20+, config `swa_ring`; SGLang mem_cache/allocator/swa.py,
managers/schedule_policy.py, managers/scheduler_components/invariant_checker.py of 0.5.20): SWA
capacity is free request rows x ceil_page(W), the gate admits on `needed <= rem_swa` with no
evictable term, a chunked continuation is not charged again, `free_swa` is a no-op, and the busy
check skips the SWA equation. Numbers: page 2, W 4, so one ring costs 4 tokens."""

from __future__ import annotations

import pytest

from model import allocator, prefill_adder
from model.state import CHUNKED, RUNNING
from specs.configs import CONFIGS
from specs.properties import ledger
from tests.unit.scenario import D55F1C28, drive

RING = CONFIGS["swa_ring"]
DESIGN = D55F1C28.with_fix("swa_req_ring", "on")
BOTH = {"recv.arrive[0]": True, "recv.arrive[1]": True}


def test_capacity_is_free_rows_times_the_ring_cost() -> None:
    run = drive(RING, DESIGN, [{}], full_tokens=32, req_pool_size=3)
    x, s = run.ctx(), run.states[0]
    assert allocator.swa_ring_cost(x) == 4
    assert allocator.swa_available_size(x, s) == 12 and allocator.swa_size(x) == 12
    assert s.swa_available == 0  # no SWA sub-allocator pages anything
    ad = prefill_adder.new_adder(x, s)
    assert prefill_adder.rem_swa_tokens(x, s, ad) == 12
    assert prefill_adder._swa_budget_for_req(x, ad, 10, 3, 0) == 4  # one ring, whatever the extend


@pytest.mark.parametrize("rows, admitted", [(2, (True, True)), (1, (True, False))])
def test_exact_fit_admits(rows: int, admitted: tuple[bool, bool]) -> None:
    """Two rows, two requests: the second needs 4 with 4 left and is admitted (`<=`, the ring's
    exact capacity; the token pool's `<` would refuse it). One row: the pass stops at the rows."""
    run = drive(RING, DESIGN, [BOTH], full_tokens=32, req_pool_size=rows, input_len=(3, 3), max_new_tokens=(3, 3),
                chunked_prefill_size=8)
    s = run.states[1]
    assert tuple(st == RUNNING for st in s.status) == admitted
    assert s.req_pool_available == 0
    assert prefill_adder.ring_swa_gate_fails(run.ctx(), 4, 4) is False
    assert prefill_adder.ring_swa_gate_fails(run.ctx(), 5, 4) is True


def test_chunked_continuation_is_not_charged_again() -> None:
    # r0 (10 tokens) is chunked by 4: its first chunk pays the ring; the continuation does not
    run = drive(RING, DESIGN, [{"recv.arrive[0]": True}, {}], full_tokens=32, req_pool_size=2, input_len=(10, 3),
                max_new_tokens=(2, 2), chunked_prefill_size=4)
    assert run.states[1].status[0] == CHUNKED
    x, s = run.ctx(), run.states[1]
    from model.system import get_new_batch_prefill, stash_chunked_req

    s2 = stash_chunked_req(x, s)
    _s3, ad = get_new_batch_prefill(x, s2)
    assert ad.can_run[0] and ad.rem_swa_token_offset == 0  # 1 free row x 4, nothing charged


def test_window_release_frees_nothing_and_busy_check_skips_swa() -> None:
    picks = [{"recv.arrive[0]": True}] + [{"decode.evict_swa[0]": True}] * 4
    run = drive(RING, DESIGN, picks, full_tokens=32, req_pool_size=2, input_len=(8, 1), max_new_tokens=(6, 1),
                chunked_prefill_size=8)
    last = run.states[-1]
    assert last.status[0] == RUNNING and last.swa_evicted_seqlen[0] > 0  # E advanced...
    assert all(st.swa_available == 0 for st in run.states)  # ...and freed nothing
    b = run.busy(len(run.states) - 1)
    assert b.ran and not b.fired
    L = ledger(run.ctx(), last)
    assert L.swa_ok is True and L.full_ok and L.slots_ok


def test_random_walks_replay_on_the_pool() -> None:
    """The pool's ring (pool/allocator.py::RingSWAAllocator, the adder, the busy check, the
    ownership check without an SWA pool) follows the model step by step."""
    import random

    from checker.replay.pool import replay_trace
    from checker.traces.walk import random_walk

    rng = random.Random("swa_ring")
    steps = 0
    for _ in range(12):
        t = random_walk(RING, DESIGN, 16, rng.randrange(1 << 30))
        o = replay_trace(t, file="walk swa_ring")
        assert o.ok, o.line()
        steps += len(t.steps)
    assert steps > 100
