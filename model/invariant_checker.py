"""SGLang's own busy-time memory check, computed as SGLang computes it: the thing whose soundness
and completeness kvmc checks against the ownership ledger (specs/properties.py).

SGLang: managers/scheduler_runtime_checker_mixin.py (<= v0.5.12: `self_check_during_busy`,
`_get_total_uncached_sizes`, `_check_pool_invariant`), managers/scheduler_components/
invariant_checker.py + pool_stats_observer.py (since #25624, v0.5.13; as in 0.5.23); digest section 1.

At the end of an iteration that ran a batch, for each pool X:
    avail_X + evictable_X + protected_X + session_held_X + uncached_X == total_X
with uncached over requests of last_batch and (if a different object) running_batch that still
hold KV (and, with `busy_check_chunked_req`, #37502 v0.5.20, the chunked request wherever it is):
U_F += ceil(A) - P, U_S += ceil(A) - max(P, E); and session-held over slots holding KV:
H_F += ceil(A_s) - P_s, H_S += ceil(A_s) - max(P_s, E_s), filtered per the `session_active` fix.

Design flags: `swa_busy_check` (#21499; off = the released v0.5.10.post1 check, which calls
`evictable_size()` on SWARadixCache and raises NotImplementedError; `full_pool_only` = main between
#22562 and #21499), `session_active` (#22213 / #22753), `spec_topk_busy_check` (#27228),
`busy_check_chunked_req` (#37502).

The idle-time check (`self_check_during_idle`): `Scheduler.on_idle` (managers/scheduler.py, v0.5.13+;
`check_memory` before) runs when an iteration found no batch and the server is fully idle (no
running or chunked request, nothing waiting); it checks each pool's equation without uncached
tokens (every slot holding KV counts as session-held: no batch owns one), the req_to_token pool
(`free + session-held rows == size`, `_check_req_pool`) and, with
`SGLANG_ENABLE_TREE_CACHE_SANITY_CHECK` (always before v0.5.19), the tree: `sanity_check` of
SWARadixCache / UnifiedRadixCache, every node's full and SWA `lock_ref` zero and each evictable
counter equal to its LRU list's size. Only the SWA-capable caches run it (`_check_tree_cache`), and
UnifiedRadixCache skips it while a session holds KV (a session keeps its first-turn lock by design).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .radix_cache import counters, lock_refs
from . import session
from .session import holds_range
from .state import CHUNKED, FINISHED, NEW, NO_BATCH, OOM_NONE, RUNNING, State
from .transition import Ctx, transition


@dataclass(frozen=True)
class BusyCheck:
    ran: Any  # an iteration ran a batch (last_batch is not None) and the check did not return early
    crashed: Any  # raised instead of checking (NotImplementedError on SWARadixCache)
    full_ok: Any
    swa_ok: Any  # True when the SWA pool is not checked
    fired: Any  # "Full/SWA Pool Mem Leak Detected!"
    terms: dict  # the equation's values, for reports


def holds_kv(x: Ctx, s: State, r: int) -> Any:
    """The request owns its row (req_pool_idx is not None and its KV is not released)."""
    return x.or_(s.status[r] == RUNNING, s.status[r] == CHUNKED)


def in_batches(x: Ctx, s: State, r: int) -> Any:
    """r is in last_batch or running_batch (after a decode they are the same object)."""
    return x.or_(s.in_last_batch[r], s.status[r] == RUNNING)


@transition(
    "managers/scheduler_components/invariant_checker.py::SchedulerInvariantChecker.self_check_during_busy",
    modifies=(),
)
def self_check_during_busy(x: Ctx, s: State) -> BusyCheck:
    """SGLang's busy-time check on state `s` (module docstring): available + evictable + protected +
    session-held + uncached == total, per pool, after an iteration that ran a batch."""
    cfg = x.cfg
    R = cfg.num_reqs
    ran = x.and_(s.last_batch != NO_BATCH, s.oom == OOM_NONE)  # the check after a crash never runs
    if cfg.spec is not None and cfg.spec.topk > 1 and not x.on("spec_topk_busy_check"):
        ran = False  # "speculative_eagle_topk > 1: skip the busy check" (warning, return)
    # v0.5.10.post1 calls evictable_size(), which SWARadixCache raises on and a chunk cache answers (0)
    one_total = cfg.hybrid_swa and x.variant("swa_busy_check") is None
    crashed = x.and_(ran, True) if (one_total and not cfg.chunk_cache) else False
    if x.on("busy_check_chunked_req"):  # _get_total_uncached_sizes adds scheduler.chunked_req (0.5.20:...invariant_checker.py:270-310)
        counted = [x.and_(x.or_(in_batches(x, s, r), s.status[r] == CHUNKED), holds_kv(x, s, r)) for r in range(R)]
    else:
        counted = [x.and_(in_batches(x, s, r), holds_kv(x, s, r)) for r in range(R)]
    U_F: Any = 0
    U_S: Any = 0
    for r in range(R):
        f, w = holds_range(x, s.kv_allocated_len[r], s.cache_protected_len[r], s.swa_evicted_seqlen[r])
        U_F = U_F + x.ite(counted[r], f, 0)
        U_S = U_S + x.ite(counted[r], w, 0)
    H_F: Any = 0
    H_S: Any = 0
    variant = x.variant("session_active")
    owned = x.variant("session_record") == "owned_at_alloc"
    for i, r in enumerate(cfg.streaming_sessions):
        A_s, _C_s, P_s, E_s = session.record(x, s, i)
        f, w = holds_range(x, A_s, P_s, E_s)
        if owned:
            # v0.5.22 (pool_stats_observer.py:27-45, invariant_checker.py:274-310): every session record
            # holding a row is session-held, also while a turn borrows it, and the borrowing turn is not
            # uncached (#22753's de-duplication, by record identity; without it the row counts twice)
            held = s.slot_holding[i]
            if variant is not None:
                dedup = x.and_(counted[r], session.lent(x, s, i))
                U_F = U_F - x.ite(dedup, f, 0)
                U_S = U_S - x.ite(dedup, w, 0)
        elif variant is None:
            held = s.slot_holding[i]
        elif variant == "is_active":
            held = x.and_(s.slot_holding[i], x.not_(s.slot_is_active[i]))
        else:  # active_idx: the slot's req_pool_idx is not used by a batch request (a detached turn's is its own)
            held = x.and_(s.slot_holding[i], x.not_(x.and_(counted[r], x.not_(s.slot_detached[i]))))
        H_F = H_F + x.ite(held, f, 0)
        H_S = H_S + x.ite(held, w, 0)
        if session.unfiltered_counted(x):
            # a finished turn whose Req is still in last_batch (finished by the extend batch) or in
            # running_batch (finished by a decode, `unfiltered`) handed its row to the slot
            # unfreed: uncached as well as session-held, also after its session closed. Its numbers
            # are the ones save_from_req copied into the slot (the copy outlives the close).
            done = x.or_(x.and_(s.in_last_batch[r], s.status[r] == FINISHED), s.unfiltered[r])
            U_F = U_F + x.ite(done, f, 0)
            U_S = U_S + x.ite(done, w, 0)
    cnt = counters(x, s)
    # SWAChunkCache under v0.5.10.post1's check: `available_size()` is the SWA allocator's min(full, SWA)
    # against max_total_num_tokens, the full pool's size (0.5.10.post1:managers/scheduler_runtime_checker_mixin.py:44-49,
    # 209-247; mem_cache/swa_memory_pool.py:311-315)
    avail = x.min(s.full_available, s.swa_available) if (one_total and cfg.chunk_cache) else s.full_available
    full_sum = avail + cnt.full_evictable + cnt.full_protected + H_F + U_F
    full_ok = full_sum == x.p.full_tokens
    swa_ok: Any = True
    swa_sum: Any = 0
    if cfg.hybrid_swa:
        swa_sum = s.swa_available + cnt.swa_evictable + cnt.swa_protected + H_S + U_S
        # with the per-request SWA ring (v0.5.20+) `_check_swa_pool` skips the SWA equation
        # ("there is no token pool to conserve", invariant_checker.py v0.5.20:154-164)
        if x.variant("swa_busy_check") == "on" and not cfg.swa_ring:
            swa_ok = swa_sum == x.p.swa_tokens
    fired = x.and_(ran, x.not_(crashed), x.not_(x.and_(full_ok, swa_ok)))
    terms = dict(
        available=avail, evictable=cnt.full_evictable, protected=cnt.full_protected, session_held=H_F,
        uncached=U_F, sum=full_sum, total=x.p.full_tokens,
        swa_available=s.swa_available, swa_evictable=cnt.swa_evictable, swa_protected=cnt.swa_protected,
        swa_session_held=H_S, swa_uncached=U_S, swa_sum=swa_sum, swa_total=x.p.swa_tokens,
    )
    return BusyCheck(ran, crashed, full_ok, swa_ok, fired, terms)


@dataclass(frozen=True)
class IdleCheck:
    idle: Any  # `on_idle` ran its checks: no batch this iteration, nothing running, chunked or waiting
    full_ok: Any
    swa_ok: Any  # True without hybrid SWA
    req_ok: Any
    tree_ok: Any  # the tree sanity check passed (True where it does not run)
    fired: Any  # "memory leak detected" / "req_to_token_pool memory leak detected" / a sanity assertion
    terms: dict


def is_fully_idle(x: Ctx, s: State) -> Any:
    """`is_fully_idle()` where `on_idle` is called: this iteration ran no batch, no request is
    running, chunked or waiting (a NEW request has not arrived; a FINISHED one is gone)."""
    quiet = [x.or_(s.status[r] == NEW, s.status[r] == FINISHED) for r in range(x.cfg.num_reqs)]
    return x.and_(s.last_batch == NO_BATCH, s.oom == OOM_NONE, *quiet)


@transition("managers/scheduler.py::Scheduler.on_idle (InvariantChecker._check_all_pools, _check_req_pool, "
            "_check_tree_cache)", modifies=())
def self_check_during_idle(x: Ctx, s: State) -> IdleCheck:
    """SGLang's idle-time check on state `s` (module docstring): pool equations without uncached
    tokens, the req_to_token pool, and the tree sanity check where SGLang runs it."""
    cfg = x.cfg
    idle = is_fully_idle(x, s)
    H_F: Any = 0
    H_S: Any = 0
    n_held: Any = 0
    for i in range(len(cfg.streaming_sessions)):
        f, w = holds_range(x, s.slot_kv_allocated_len[i], s.slot_cache_protected_len[i], s.slot_swa_evicted_seqlen[i])
        H_F = H_F + x.ite(s.slot_holding[i], f, 0)
        H_S = H_S + x.ite(s.slot_holding[i], w, 0)
        n_held = n_held + x.ite(s.slot_holding[i], 1, 0)
    cnt = counters(x, s)
    full_ok = s.full_available + cnt.full_evictable + cnt.full_protected + H_F == x.p.full_tokens
    swa_ok: Any = True
    if cfg.hybrid_swa and not getattr(cfg, "swa_ring", False):  # a per-request SWA ring has no SWA pool to balance
        swa_ok = s.swa_available + cnt.swa_evictable + cnt.swa_protected + H_S == x.p.swa_tokens
    req_ok = s.req_pool_available + n_held == x.p.req_pool_size
    tree_ok: Any = True
    if cfg.hybrid_swa:  # SWARadixCache / UnifiedRadixCache; the plain RadixCache has no sanity check
        full_ref, swa_ref = lock_refs(x, s)
        unlocked = [ref == 0 for ref in [*full_ref, *swa_ref]]
        exact = [s.full_evictable_drift == 0, s.swa_evictable_drift == 0]
        runs = x.not_(x.or_(*s.slot_holding)) if cfg.hicache else True
        tree_ok = x.implies(runs, x.and_(*unlocked, *exact))
    fired = x.and_(idle, x.not_(x.and_(full_ok, swa_ok, req_ok, tree_ok)))
    terms = dict(available=s.full_available, evictable=cnt.full_evictable, protected=cnt.full_protected,
                 session_held=H_F, total=x.p.full_tokens, swa_available=s.swa_available, swa_evictable=cnt.swa_evictable,
                 swa_protected=cnt.swa_protected, swa_session_held=H_S, swa_total=x.p.swa_tokens,
                 req_free=s.req_pool_available, session_rows=n_held, req_total=x.p.req_pool_size)
    return IdleCheck(idle, full_ok, swa_ok, req_ok, tree_ok, fired, terms)
