"""Streaming sessions: `SessionSlot.save_from_req`, `SessionSlot.restore_to_req` (with the prefix
rule of `match_prefix`), and `release_session`.

SGLang: mem_cache/session_aware_cache.py (`SessionAwareCache`, the file #22213/#22753/#22862 change)
in v0.5.10.post1; session/streaming_session.py (`SessionSlot`, `StreamingSession`) from v0.5.11,
owned by UnifiedRadixCache from v0.5.22 (`release_session` there), as in 0.5.23.

A session slot keeps the KV of the previous turn in the request's req_to_token row: the row index
(`req_pool_idx`), `kv_committed_len`, `kv_allocated_len`, `swa_evicted_seqlen`, and from the first
turn the tree lock (`last_node`, `cache_protected_len`, `swa_uuid_for_lock`). The next turn's
request restores that row instead of matching the tree; the slot is *not* cleared on restore (a
request rejected by the PrefillAdder restores again on the next pass). Session slot i belongs to
request slot `config.streaming_sessions[i]`, and its row is that request slot's row.

The record across releases (design flag `session_record`): off = copy-on-save / copy-on-restore
(v0.5.11-0.5.18, `SessionSlot.save_from_req` copies the request's numbers); `shared` (#37108,
v0.5.19-0.5.21: the slot takes the request's `ReqKvInfo` at the first save and every later turn
runs on that object; kvmc keeps the copy and reads a lent record through the request, `record`,
which is what sharing means for every count: no count changes); `owned_at_alloc` (v0.5.22+,
session/streaming_session.py rewritten: the slot takes the record and the tree lock at the first
turn's row allocation, `take`, and the busy check counts every record holding a row as
session-held, the borrowing turn not as uncached, model/invariant_checker.py). Since v0.5.19
(`session_rewind_page_floor`) a restore whose SWA cursor is past the prefix rewinds to a page.

From v0.5.11 (`finish_req_detach`) a turn retracted twice loses its session (`finish_req`, `slot_detached`)
and runs like a request without one until its next turn.

Abstracted: one session per streaming request slot; aborts, the close-on-finish deferral of #21875
and spec-v2 overshoot trims are not modelled (no speculative decoding with sessions).
"""

from __future__ import annotations

from typing import Any

from . import allocator, radix_cache
from .radix_cache import MatchResult
from .state import CHUNKED, ROOT, RUNNING, VIRTUAL, State
from .radix_cache import DRIFT_FIELDS
from .transition import Ctx, transition


def holds_range(x: Ctx, A: Any, P: Any, E: Any) -> tuple[Any, Any]:
    """Tokens a row owns in each pool: full [P, ceil(A)), SWA [max(P, E), ceil(A))."""
    full = x.ceil_page(A) - P
    swa = x.clamp0(x.ceil_page(A) - x.max(P, E)) if x.cfg.hybrid_swa else 0
    return full, swa


def unfiltered_counted(x: Ctx) -> bool:
    """Does the busy check count a finished turn still in a batch (`unfiltered`)? Off
    `uncached_skips_released_req` (v0.5.10.post1): `_get_batch_uncached_size` counts every Req of a
    batch whose KV is not freed (0.5.10.post1:managers/scheduler_runtime_checker_mixin.py:193-207);
    from 0.5.11 `_get_total_uncached_sizes` skips a Req whose `req_pool_idx` is None, as a finished
    turn's is (0.5.11: ...mixin.py:373-405)."""
    return bool(x.cfg.streaming_sessions) and not x.on("uncached_skips_released_req")


def lent(x: Ctx, s: State, i: int) -> Any:
    """Session slot i's record is borrowed by its running turn (the request holds its row through the
    slot: a restored turn, or since v0.5.22 the first turn after `take`)."""
    r = x.cfg.streaming_sessions[i]
    return x.and_(s.slot_holding[i], x.or_(s.status[r] == RUNNING, s.status[r] == CHUNKED), s.last_node[r] == VIRTUAL)


@transition("session/streaming_session.py::StreamingSession (the slot's KV record)", modifies=())
def record(x: Ctx, s: State, i: int) -> tuple[Any, Any, Any, Any]:
    """(A, C, P, E) of session slot i's KV record. kvmc keeps the slot's numbers as a copy made at
    `save_from_req` (v0.5.11-0.5.18 copy-on-save); since v0.5.19 (#37108, `session_record`) the slot and
    its running turn share one `ReqKvInfo`, so while the record is lent its numbers are the request's."""
    r = x.cfg.streaming_sessions[i]
    slot = (s.slot_kv_allocated_len[i], s.slot_kv_committed_len[i], s.slot_cache_protected_len[i], s.slot_swa_evicted_seqlen[i])
    if x.variant("session_record") is None:
        return slot
    req = (s.kv_allocated_len[r], s.kv_committed_len[r], s.cache_protected_len[r], s.swa_evicted_seqlen[r])
    on = lent(x, s, i)
    return tuple(x.ite(on, a, b) for a, b in zip(req, slot))  # type: ignore[return-value]


@transition(
    "session/streaming_session.py::StreamingSession.take (v0.5.22, via allocation.maybe_hand_to_session)",
    modifies=("slot_holding", "slot_kv_allocated_len", "slot_kv_committed_len", "slot_swa_evicted_seqlen",
              "slot_cache_protected_len", "slot_last_node", "slot_swa_lock_top", "slot_is_active", "last_node",
              "swa_lock_top"),
)
def take(x: Ctx, s: State, r: int, i: int) -> State:
    """v0.5.22+ (`session_record=owned_at_alloc`): the first turn's record and tree lock go to slot i
    when the turn gets its row; the request borrows them from then on (its lock node becomes the
    slot's virtual node). kvmc takes them at the turn's first checkpoint, right after its prefill
    publishes the prompt (`try_checkpoint`: the insert moves the slot's lock to the deepest
    inserted node), which is the same iteration: nothing runs between the allocation and it. The
    slot is active from then on, as after a restore: its row is the running turn's (0.5.22 has no
    `is_active` flag; SGLang's own replay shows the row in use, upstream/sched/abstraction.py)."""
    return s.slot(
        i,
        slot_holding=True,
        slot_kv_allocated_len=s.kv_allocated_len[r],
        slot_kv_committed_len=s.kv_committed_len[r],
        slot_swa_evicted_seqlen=s.swa_evicted_seqlen[r],
        slot_cache_protected_len=s.cache_protected_len[r],
        slot_last_node=s.last_node[r],
        slot_swa_lock_top=s.swa_lock_top[r],
        slot_is_active=True,
    ).req(r, last_node=VIRTUAL, swa_lock_top=ROOT)


@transition(
    "mem_cache/session_aware_cache.py::SessionSlot.restore_to_req (via SessionAwareCache.match_prefix)",
    modifies=("slot_kv_allocated_len", "slot_kv_committed_len", "slot_swa_evicted_seqlen", "slot_is_active",
              "full_available", "swa_available"),
)
def restore_to_req(x: Ctx, s: State, r: int, i: int, key_len: Any) -> tuple[State, MatchResult]:
    """Give request r the KV of session slot i; the device prefix is the committed part of the row.

    prefix_len = min(C, |key| - 1) before #22862; min(C, |key|) after, which also frees the row's
    tail [ceil(prefix_len), A) that the next extend would overwrite, and trims slot and request.
    The request's copies of the slot fields come back in the match result and are written when
    the PrefillAdder admits it (nothing reads them before: a rejected request restores again)."""
    C, A, E = s.slot_kv_committed_len[i], s.slot_kv_allocated_len[i], s.slot_swa_evicted_seqlen[i]
    P = s.slot_cache_protected_len[i]
    if x.on("retract_tail_free"):
        prefix = x.min(C, key_len)
        if x.on("session_rewind_page_floor") and x.ps > 1:
            # v0.5.19: a rewind below the SWA cursor lands on a page (the row free splits SWA-dead from
            # SWA-alive at the cursor; a cut inside a page would free it twice)
            prefix = x.ite(E > prefix, x.floor_page(prefix), prefix)
            C = x.min(C, prefix)
        old_full, old_swa = holds_range(x, A, P, E)
        A, C, E = prefix, x.min(C, prefix), x.min(E, prefix)
        new_full, new_swa = holds_range(x, A, P, E)
        s = allocator.free(x, s, old_full - new_full, old_swa - new_swa)
        s = s.slot(i, slot_kv_allocated_len=A, slot_kv_committed_len=C, slot_swa_evicted_seqlen=E)
    else:
        prefix = x.min(C, x.clamp0(key_len - 1))
    s = s.slot(i, slot_is_active=True)
    no = tuple(False for _ in range(x.cfg.num_atoms))
    return s, MatchResult(prefix, VIRTUAL, VIRTUAL, 0, 0, no, no, P, E)


@transition(
    "mem_cache/session_aware_cache.py::SessionSlot.save_from_req (via SessionAwareCache.cache_finished_req)",
    modifies=(
        "slot_holding", "slot_kv_allocated_len", "slot_kv_committed_len", "slot_swa_evicted_seqlen",
        "slot_cache_protected_len", "slot_last_node", "slot_swa_lock_top", "slot_is_active",
    ),
)
def save_from_req(x: Ctx, s: State, r: int, i: int) -> State:
    """Finishing (or retracted) request r hands its row to slot i; on the first turn the slot also
    takes over the request's tree lock. The request's req_pool_idx becomes None."""
    first = x.not_(s.slot_holding[i])
    return s.slot(
        i,
        slot_holding=True,
        slot_kv_allocated_len=s.kv_allocated_len[r],
        slot_kv_committed_len=s.kv_committed_len[r],
        slot_swa_evicted_seqlen=s.swa_evicted_seqlen[r],
        slot_cache_protected_len=x.ite(first, s.cache_protected_len[r], s.slot_cache_protected_len[i]),
        slot_last_node=x.ite(first, s.last_node[r], s.slot_last_node[i]),
        slot_swa_lock_top=x.ite(first, s.swa_lock_top[r], s.slot_swa_lock_top[i]),
        slot_is_active=False,
    )


@transition(
    "session/session_controller.py::Session.finish_req (v0.5.11+, via StreamingSession.try_cache_finished_req)",
    modifies=("slot_turn_saved", "slot_detached"),
)
def finish_req(x: Ctx, s: State, i: int) -> State:
    """After a save of session i's turn, a finish's or a retraction's (`finish_req_detach`):
    `req_nodes` keeps only this Req, and the Req it held before loses its session
    (`prev_node.req.session = None`, 0.5.11:session/session_controller.py:257-264). At the turn's
    first save that is the previous turn's finished Req; at a second (the turn was retracted before)
    it is the turn itself, which is detached from then on (model/system.py::match_prefix,
    model/schedule_batch.py::release_kv_cache). The next turn is a new Req: both bits clear."""
    return s.slot(i, slot_turn_saved=True, slot_detached=x.or_(s.slot_detached[i], s.slot_turn_saved[i]))


@transition(
    "mem_cache/session_aware_cache.py::SessionAwareCache.release_session",
    modifies=(
        "slot_holding", "slot_closed", "slot_turn_saved", "slot_detached", "full_available", "swa_available",
        "req_pool_available", *DRIFT_FIELDS),
)
def release_session(x: Ctx, s: State, i: int) -> State:
    """Close session i: drop the first-turn tree lock, free the row's own KV, return its pool slot.
    The session and its req_nodes are gone (`slot_turn_saved`, `slot_detached` clear)."""
    s = radix_cache.dec_lock_ref(x, s, s.slot_last_node[i], s.slot_swa_lock_top[i])
    full, swa = holds_range(x, s.slot_kv_allocated_len[i], s.slot_cache_protected_len[i], s.slot_swa_evicted_seqlen[i])
    s = allocator.free(x, s, full, swa)
    return s.slot(i, slot_holding=False, slot_closed=True, slot_turn_saved=False, slot_detached=False).set(
        req_pool_available=s.req_pool_available + 1)
