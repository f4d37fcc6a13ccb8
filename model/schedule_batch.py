"""`ScheduleBatch` steps and the release path: `_evict_swa` / `maybe_evict_swa`, `alloc_for_extend` /
`prepare_for_extend`, the decode step's page demand (`new_tokens_required_next_decode`, spec v2's
`_new_tokens_required_next_decode_spec_v2`), `check_decode_mem`, `retract_decode`,
`alloc_for_decode` / `prepare_for_decode`, and `release_kv_cache`.

SGLang, v0.5.10.post1 .. 0.5.23: managers/schedule_batch.py, mem_cache/common.py
(`release_kv_cache`; the allocations moved to mem_cache/allocation.py in v0.5.16), and the
spec v2 sizing of mem_cache/allocation_sizing.py (model/allocation_sizing.py).

Abstracted: a batch is a set of request slots (its order is the slot order). `_evict_swa` fires
whenever the scheduler may call it in a decode step (a choice): SGLang's trigger (every W decode
steps in v0.5.1x, "at least SGLANG_SWA_EVICTION_INTERVAL tokens slid out" now) only decides *when*,
and any timing is covered. The out-of-window threshold is the `swa_release_threshold` variant
(v0.5.1x's `pre_len - W - page_size` when off).
Retraction under `SGLANG_TEST_RETRACT` may be forced at any decode step (a choice), again covering
every interval.
"""

from __future__ import annotations

from typing import Any

from . import allocation_sizing, allocator, radix_cache, session
from .state import (
    FINISHED,
    OOM_DECODE,
    OOM_NONE,
    OOM_PREFILL,
    OOM_REQ_SLOTS,
    ROOT,
    RUNNING,
    WAITING,
    State,
)
from .radix_cache import DRIFT_FIELDS
from .transition import Ctx, transition


@transition(
    "managers/schedule_batch.py::ScheduleBatch._evict_swa",
    modifies=("swa_evicted_seqlen", "swa_available"),
)
def _evict_swa(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    """Release request r's SWA slots that slid out of the window (`free_swa_out_of_window_slots`,
    threshold per `swa_release_threshold`: radix_cache.swa_release_bounds). E first rises to
    cache_protected_len (the tree owns [0, P); nothing is freed for it)."""
    E, target = radix_cache.swa_release_bounds(x, s, r, pre_len)
    s = allocator.free_swa(x, s, target - E)
    return s.req(r, swa_evicted_seqlen=target)


@transition("managers/schedule_batch.py::ScheduleBatch.maybe_evict_swa (decode)", modifies=("swa_evicted_seqlen", "swa_available"))
def maybe_evict_swa(x: Ctx, s: State, batch: tuple) -> State:
    """`ScheduleBatch.maybe_evict_swa` in a decode step (`prepare_for_decode`, and spec v2's
    `eagle_prepare_for_decode`, 0.5.23:speculative/eagle_utils.py:858): each running request may
    release the SWA slots that slid out of its window, pre_len = `req.seqlen - 1` (input + output
    ids), which is C on the non-overlap loop, also under spec v2, where the verify adds the accepted
    tokens to both. Never A: spec v2's over-allocated tail [C, A) is not yet attended. The window is
    `swa_retain_window` = max(W, draft_swa_window) in 0.5.23, W for the EAGLE v2 worker (its
    draft_swa_window is 0). Whether it fires is a choice (the module docstring)."""
    for r in range(x.cfg.num_reqs):
        fire = x.choose_bool_when(f"evict_swa[{r}]", batch[r])
        s = x.branch(fire, lambda r=r: _evict_swa(x, s, r, s.kv_committed_len[r]), lambda: s)
    return s


@transition("mem_cache/common.py::release_kv_cache (the over-allocation freed)", modifies=())
def _release_tokens(x: Ctx, s: State, r: int) -> tuple[Any, Any]:
    """Over-allocation [ceil(C), ceil(A)) freed by release_kv_cache after the cache took its part."""
    over = x.ceil_page(s.kv_allocated_len[r]) - x.ceil_page(s.kv_committed_len[r])
    return over, (over if x.cfg.hybrid_swa else 0)


@transition(
    "mem_cache/common.py::release_kv_cache",
    modifies=(
        "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available", "swa_available",
        "req_pool_available", "slot_holding", "slot_kv_allocated_len", "slot_kv_committed_len",
        "slot_swa_evicted_seqlen", "slot_cache_protected_len", "slot_last_node", "slot_swa_lock_top", "slot_is_active",
        "slot_closed", "slot_turn_saved", "slot_detached", "last_node", "swa_lock_top", "load_back_node",
        "load_back_swa_top", *DRIFT_FIELDS, "oom"),
)
def release_kv_cache(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: Any = False) -> State:
    """Release request r's KV on finish (is_insert) or retraction: the cache takes its part
    (`cache_finished_req`; a streaming session's slot takes the whole row), then the
    over-allocation and the req_to_token slot are freed.

    `abort` (retract_decode's "Out of memory even after retracting") changes nothing here: SGLang
    sets `to_finish`, not `finished_reason`, before `release_req`, so the session cache's
    `FINISH_ABORT` branch (`release_session`) is not taken and the slot keeps the row like any
    retraction (v0.5.10.post1 `SessionAwareCache.cache_finished_req` has no abort branch at all;
    v0.5.11-0.5.23 `try_cache_finished_req` tests `finished_reason`).

    From v0.5.11 (`finish_req_detach`) the slot's save goes on to `Session.finish_req`, and a turn
    that detached from its session (retracted twice) releases through the tree like any request.

    A finish on v0.5.22 (`finish_checkpoint`) may die on SGLang's assertion inside the cache's part
    (radix_cache.cache_finished_req: `oom = OOM_ASSERT`); the release stops there."""
    def to_tree() -> State:
        cached = radix_cache.cache_finished_req(x, s, r, is_insert, site)

        def go_on() -> State:
            full, swa = _release_tokens(x, cached, r)
            s1 = allocator.free(x, cached, full, swa)
            s1 = s1.set(req_pool_available=s1.req_pool_available + 1)
            return s1.req(r, last_node=ROOT, swa_lock_top=ROOT)

        if not (is_insert and radix_cache.rematches(x, True)):
            return go_on()
        # v0.5.22: the checkpoint into the tree may have died on SGLang's assertion (OOM_ASSERT); then
        # release_kv_cache stops there (the over-allocation and the row are not freed)
        return x.branch(cached.oom == OOM_NONE, go_on, lambda: cached)

    i = x.cfg.slot_of(r)
    if i is None:
        return to_tree()

    def save(i: int = i) -> State:
        s1 = session.save_from_req(x, s, r, i)
        if x.on("finish_req_detach"):
            s1 = session.finish_req(x, s1, i)
        return s1.req(r, last_node=ROOT, swa_lock_top=ROOT)

    if not x.on("finish_req_detach"):
        return save()
    # a turn detached from its session releases like any request
    return x.branch(x.not_(s.slot_detached[i]), save, to_tree)


@transition(
    "mem_cache/common.py::alloc_for_extend (ScheduleBatch.prepare_for_extend)",
    modifies=(
        "req_pool_available", "full_available", "swa_available", "node_len",
        "node_device", "node_swa_tombstone", "kv_allocated_len", "kv_committed_len", "swa_evicted_seqlen", "oom",
    ),
)
def alloc_for_extend(x: Ctx, s: State, batch: tuple, prefix: tuple, extend: tuple, fresh_slot: tuple) -> State:
    """Allocate req_to_token slots and KV for an extend batch; A = C = prefix + extend on success.

    page_size 1: `alloc_token_slots(E)` after evicting E. Paged: `alloc_extend` needs
    sum(ceil(seq/ps) - ceil(prefix/ps)) pages (the partial last prefix page is filled first), after
    evicting E + bs * ps. A None from the allocator is SGLang's "Prefill out of memory"."""
    R = x.cfg.num_reqs
    ps = x.ps
    if x.cfg.chunk_cache and x.cfg.hybrid_swa:
        # `maybe_evict_swa` first, whose extend branch runs only without a tree (ChunkCache; 0.5.22+ a cache
        # without prefix sharing): each request's SWA below its prefix minus the window goes
        for r in range(R):
            s = x.branch(batch[r], lambda r=r: _evict_swa(x, s, r, prefix[r]), lambda: s)
    bs = x.sum(x.ite(batch[r], 1, 0) for r in range(R))
    fresh = x.sum(x.ite(x.and_(batch[r], fresh_slot[r]), 1, 0) for r in range(R))
    slots_ok = fresh <= s.req_pool_available
    ext_total = x.sum(x.ite(batch[r], extend[r], 0) for r in range(R))
    if ps == 1:
        needs = list(extend)
        evict_for = ext_total
    else:
        needs = [x.ceil_page(prefix[r] + extend[r]) - x.ceil_page(prefix[r]) for r in range(R)]
        evict_for = ext_total + bs * ps
    need = x.sum(x.ite(batch[r], needs[r], 0) for r in range(R))

    def allocate() -> State:
        s1 = x.checkpoint("evicted for extend", radix_cache.evict_from_tree_cache(x, s, evict_for, "evict"))
        ok = allocator.extend_fits(x, s1, need, ext_total, bs)

        def done() -> State:
            # request by request (the sum is `need`; SGLang takes it in one call): the ledger is
            # exact after each request's part, a checkpoint for the induction step
            s2 = s1
            for r in range(R):
                seq = prefix[r] + extend[r]
                s2 = allocator.alloc(x, s2, x.ite(batch[r], needs[r], 0))
                s2 = s2.set(req_pool_available=s2.req_pool_available - x.ite(x.and_(batch[r], fresh_slot[r]), 1, 0))
                s2 = s2.req(
                    r,
                    kv_allocated_len=x.ite(batch[r], seq, s2.kv_allocated_len[r]),
                    kv_committed_len=x.ite(batch[r], seq, s2.kv_committed_len[r]),
                )
                s2 = x.checkpoint(f"allocated[{r}]", s2)
            return s2

        return x.branch(ok, done, lambda: s1.set(oom=OOM_PREFILL))

    return x.branch(slots_ok, allocate, lambda: s.set(oom=OOM_REQ_SLOTS))


@transition("managers/schedule_batch.py::ScheduleBatch._new_tokens_required_next_decode_spec_v2", modifies=())
def spec_v2_tokens_needed(x: Ctx, s: State, batch: tuple) -> Any:
    """`ScheduleBatch._new_tokens_required_next_decode_spec_v2`: sum of ceil(A') - ceil(A), the
    pages the paged extend A -> A' takes."""
    R = x.cfg.num_reqs
    return x.sum(
        x.ite(batch[r], x.ceil_page(allocation_sizing.spec_v2_alloc_len(x, s, r)) - x.ceil_page(s.kv_allocated_len[r]), 0) for r in range(R)
    )


@transition("managers/schedule_batch.py::ScheduleBatch.new_tokens_required_next_decode", modifies=())
def decode_tokens_needed(x: Ctx, s: State, batch: tuple) -> Any:
    """`new_tokens_required_next_decode`: a page for each request whose KV ends on a page boundary;
    with EAGLE v1 `bs * max(L'*k, D')` (page-rounded for page_size > 1); with spec v2
    `_new_tokens_required_next_decode_spec_v2` (above)."""
    R = x.cfg.num_reqs
    ps = x.ps
    bs = x.sum(x.ite(batch[r], 1, 0) for r in range(R))
    spec = x.cfg.spec
    if spec is not None and spec.version == 2:
        return spec_v2_tokens_needed(x, s, batch)
    if spec is not None:
        L, k, D = spec.num_steps, spec.topk, spec.num_draft_tokens
        if ps > 1:
            L = -(-(L + ps) // ps) * ps if k > 1 else -(-L // ps) * ps
            D = -(-D // ps) * ps
        return bs * max(L * k, D)
    if ps == 1:
        return bs
    starts_page = [x.and_(batch[r], x.page_aligned(s.kv_committed_len[r])) for r in range(R)]
    return ps * x.sum(x.ite(starts_page[r], 1, 0) for r in range(R))


@transition(
    "managers/schedule_batch.py::ScheduleBatch.check_decode_mem",
    modifies=("full_available", "swa_available", "node_len", "node_device", "node_swa_tombstone"),
)
def check_decode_mem(x: Ctx, s: State, batch: tuple, site: str) -> tuple[State, Any]:
    """Evict for the next decode step's pages, then compare `available_size()` with the need."""
    need = decode_tokens_needed(x, s, batch)
    s = radix_cache.evict_from_tree_cache(x, s, need, site)
    return s, allocator.available_size(x, s) >= need


@transition("managers/schedule_batch.py::ScheduleBatch._get_decode_retraction_order", modifies=())
def _retract_victims(x: Ctx, s: State, kept: tuple, act: Any, it: int) -> list:
    """Which request is the next to retract (`_get_decode_retraction_order`): SGLang sorts by
    (len(output_ids), -len(origin_input_ids)) descending and pops from the end; before v0.5.17
    speculative decoding retracted from the back of the batch (`allow_policy_sort=False`: its
    filter_batch could only drop the tail), since then in the same order (`spec_retract_length_order`).

    Among requests with equal keys the stable sort leaves running-batch order, which is admission
    order, and pops the last admitted. The model keeps no admission order, so a tie is a choice
    (`retract[it].tie_pass[r]`: the highest-slot tied request is retracted unless it passes, then
    the next, ...; the lowest cannot pass): every tie-break SGLang can make is explored, and no
    order state is added."""
    R = x.cfg.num_reqs
    if x.cfg.spec is not None and not x.on("spec_retract_length_order"):
        return [x.and_(act, kept[r], *(x.not_(kept[q]) for q in range(r + 1, R))) for r in range(R)]
    out, inp = s.output_len, s.origin_input_len
    first = [x.and_(kept[r], *(x.implies(kept[q], x.or_(out[r] < out[q], x.and_(out[r] == out[q], inp[r] >= inp[q])))
                               for q in range(R) if q != r)) for r in range(R)]
    passes = [x.choose_bool_when(f"retract[{it}].tie_pass[{r}]", x.and_(act, first[r], x.or_(*first[:r])))
              if r > 0 else False for r in range(R)]
    return [x.and_(act, first[r], x.not_(passes[r]), *(x.implies(first[q], passes[q]) for q in range(r + 1, R)))
            for r in range(R)]


@transition(
    "managers/schedule_batch.py::ScheduleBatch.retract_decode",
    modifies=(
        "status", "kv_allocated_len", "kv_committed_len", "cache_protected_len", "swa_evicted_seqlen", "swa_branching_seqlen", "last_node",
        "swa_lock_top", "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available",
        "swa_available", "req_pool_available", "slot_holding", "slot_kv_allocated_len", "slot_kv_committed_len",
        "slot_swa_evicted_seqlen", "slot_cache_protected_len", "slot_last_node", "slot_swa_lock_top", "slot_is_active",
        "slot_closed", "slot_turn_saved", "slot_detached", "load_back_node", "load_back_swa_top", "needless_retract",
        *DRIFT_FIELDS, "oom"),
)
def retract_decode(x: Ctx, s: State, fits: Any, forced: Any) -> State:
    """Retract running requests one at a time (release_kv_cache without insert, evict for the
    kept ones, reset_for_retract) until check_decode_mem passes; keep at least one. The last one,
    if it still does not fit, is aborted ("Out of memory even after retracting"). `fits` is the
    caller's check; `forced` is SGLANG_TEST_RETRACT, which retracts at least one of two or more."""
    R = x.cfg.num_reqs
    kept = tuple(s.status[r] == RUNNING for r in range(R))
    going: Any = x.or_(x.not_(fits), forced)
    for it in range(R):
        if it > 0:
            with x.scope(f"retract[{it}]"):
                s, fits = x.branch(going, lambda: check_decode_mem(x, s, kept, "check"), lambda: (s, True))
            going = x.and_(going, x.not_(fits))
        last_one = x.sum(x.ite(kept[r], 1, 0) for r in range(R)) == 1
        abort = x.and_(going, last_one, x.not_(fits))
        act = x.and_(going, x.or_(x.not_(last_one), abort))
        victims = _retract_victims(x, s, kept, act, it)
        s = ghost_needless_retract(x, s, kept, victims, forced if it == 0 else False)  # not mutated (ghost_)
        for r in range(R):

            def retract(r: int = r, it: int = it) -> State:
                s1 = release_kv_cache(x, s, r, False, f"retract[{it}].release[{r}]", abort)
                # reset_for_retract (output_ids are kept: it re-prefills input + output); an abort
                # finishes. SGLang resets after the eviction below; it touches only r's fields and
                # r holds no lock any more, so the eviction is the same, and the ledger is whole
                # again before it (its nodes are checkpoints)
                s1 = s1.req(
                    r,
                    status=x.ite(abort, FINISHED, WAITING),
                    kv_allocated_len=0,
                    kv_committed_len=0,
                    cache_protected_len=0,
                    swa_evicted_seqlen=0,
                    swa_branching_seqlen=0,
                    last_node=ROOT,
                    swa_lock_top=ROOT,
                )
                with x.scope(f"retract[{it}].victim[{r}]"):
                    rest = x.sum(x.ite(x.and_(kept[q], q != r), 1, 0) for q in range(R))
                    return radix_cache.evict_from_tree_cache(x, s1, rest * x.cfg.retract_decode_steps, "evict")

            s = x.branch(victims[r], retract, lambda: s)
        kept = tuple(x.and_(kept[r], x.not_(victims[r])) for r in range(R))
        going = x.and_(going, x.not_(last_one))
    return s


@transition(
    "mem_cache/common.py::alloc_for_decode (ScheduleBatch.prepare_for_decode)",
    modifies=(
        "swa_evicted_seqlen", "swa_available", "full_available", "node_len",
        "node_device", "node_swa_tombstone", "kv_allocated_len", "kv_committed_len", "oom",
    ),
)
def alloc_for_decode(x: Ctx, s: State, batch: tuple) -> State:
    """One decode step's KV: `maybe_evict_swa` (pre_len = seqlen - 1 = C), evict bs*ps, then
    `alloc_decode` (a new page per request whose KV ends on a page boundary); A, C += 1."""
    R = x.cfg.num_reqs
    ps = x.ps
    if x.cfg.hybrid_swa:
        s = maybe_evict_swa(x, s, batch)
    bs = x.sum(x.ite(batch[r], 1, 0) for r in range(R))
    need = decode_tokens_needed(x, s, batch)
    s = radix_cache.evict_from_tree_cache(x, s, bs * ps, "evict")
    ok = allocator.can_alloc(x, s, need)

    def done() -> State:
        s1 = allocator.alloc(x, s, need)
        for r in range(R):
            s1 = s1.req(
                r,
                kv_allocated_len=s1.kv_allocated_len[r] + x.ite(batch[r], 1, 0),
                kv_committed_len=s1.kv_committed_len[r] + x.ite(batch[r], 1, 0),
            )
        return s1

    return x.branch(ok, done, lambda: s.set(oom=OOM_DECODE))


def ghost_needless_retract(x: Ctx, s: State, kept: tuple, victims: list, forced: Any) -> State:
    """The ghost `needless_retract` (model/state.py GHOST_FIELDS): set when one of `victims` is
    retracted (or aborted) from the `kept` batch although memory is not short (`short_of_memory`)
    and SGLANG_TEST_RETRACT does not force this retraction (`forced`: its first one only). Kvmc's
    own record, not SGLang's: `kvmc mutate` does not mutate a statement calling a `ghost_` function."""
    needless = x.and_(x.or_(*victims), x.not_(x.or_(short_of_memory(x, s, kept), forced)))
    return s.set(needless_retract=x.or_(s.needless_retract, needless))


def short_of_memory(x: Ctx, s: State, batch: tuple) -> Any:
    """What `check_decode_mem` failing means: even with every evictable tree token evicted, a pool
    holds less than the next decode step of `batch` needs (available + evictable < need, in the full
    pool and, with an SWA sub-allocator, in the SWA pool). Read on the state the check left: its
    eviction moves tokens from evictable to available, so the sum is the one before it. Written
    apart from the check itself (the ghost `needless_retract` compares the two)."""
    need = decode_tokens_needed(x, s, batch)
    cnt = radix_cache.counters(x, s)
    short = s.full_available + cnt.full_evictable < need
    if allocator.swa_paged(x):
        short = x.or_(short, s.swa_available + cnt.swa_evictable < need)
    return short
