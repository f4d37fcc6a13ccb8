"""The refinement map: the pool's live objects -> the model's state variables (model/state.py),
and the pool's own verdict on each property (from its tensors, not from the model's formulas).

Fields map one for one: allocator available sizes, free req_to_token rows, the tree's counters
minus their recount ("drift"), one entry per model atom (the node standing for it: length, on
device, host copy, SWA tombstone), per request its queue (status), lengths, lock nodes and batch
membership, per session slot its saved row, and the scheduler's last batch and allocation failure.
"""

from __future__ import annotations

from typing import Any

from model.state import ROOT, VIRTUAL, State

from . import ownership
from .radix_tree import LockHandle
from .scheduler import (
    DECODE_BATCH,
    EXTEND_BATCH,
    NO_BATCH,
    OOM_ASSERT,
    OOM_DECODE,
    OOM_NONE,
    OOM_PREFILL,
    OOM_REQ_SLOTS,
    Scheduler,
)

STATUS = {"new": 0, "waiting": 1, "chunked": 2, "running": 3, "finished": 4}
_NEW, _WAITING, _CHUNKED, _RUNNING, _FINISHED = (STATUS[k] for k in ("new", "waiting", "chunked", "running", "finished"))


class AbstractionError(RuntimeError):
    """The pool is in a state the model cannot express (e.g. a node beyond a request's private chain)."""


def _atom(h: LockHandle | None, uuid: bool = False) -> int:
    if h is None:
        return ROOT
    n = h.uuid_node if uuid else h.node
    if n is None or n.atom is None and n.parent is None:
        return ROOT
    if n.atom is None:
        raise AbstractionError(f"lock on {n}, which stands for no model atom")
    return n.atom


def to_state(sch: Scheduler) -> State:
    """One walk over the tree (atoms and the counters' recount together), one pass per request and
    session slot; plain Python values only (no tensor is read)."""
    cfg = sch.cfg
    K = cfg.num_atoms
    t = sch.tree
    hyb, hic = cfg.hybrid_swa, cfg.hicache
    nodes: list[Any] = [None] * K
    node_len = [0] * K
    node_device = [not hic] * K
    node_host = [False] * K
    node_tomb = [False] * K
    fe = fp = se = sp = 0
    stack = list(t.root.children)
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        a = n.atom
        if a is None:
            raise AbstractionError(f"tree node {n} stands for no model atom (request {n.owner} inserted more than "
                                   f"private_atoms={cfg.private_atoms} nodes)")
        if nodes[a] is not None:
            raise AbstractionError(f"two tree nodes stand for atom {a}: {nodes[a]} and {n}")
        nodes[a] = n
        L = len(n.key)
        node_len[a] = L
        node_host[a] = n.host_value is not None
        node_tomb[a] = n.swa_tombstone
        if n.value is None:
            continue
        if hic:
            node_device[a] = True
        if n.full_lock_ref > 0:
            fp += L
        else:
            fe += L
        if hyb and not n.swa_tombstone:
            if n.swa_lock_ref > 0:
                sp += L
            else:
                se += L
    reqs = sch.reqs
    running = {id(r) for r in sch.running}
    chunked = {id(r) for r in sch.chunked}
    waiting = {id(r) for r in sch.waiting}

    def status(r: Any) -> int:
        i = id(r)
        if i in running:
            return _RUNNING
        if i in chunked:
            return _CHUNKED
        if i in waiting:
            return _WAITING
        return _FINISHED if r.finished else _NEW

    def last(req: Any) -> int:
        return VIRTUAL if req.virtual else _atom(req.lock)

    slots = sch.slots
    return State(
        full_available=sch.alloc.full_available_size(),
        swa_available=sch.alloc.swa_available_size() if (hyb and not cfg.swa_ring) else 0,  # the ring pages no SWA
        req_pool_available=sch.req_pool.available_size(),
        full_evictable_drift=t.full_evictable_size_ - fe,
        full_protected_drift=t.full_protected_size_ - fp,
        swa_evictable_drift=(t.swa_evictable_size_ - se) if hyb else 0,
        swa_protected_drift=(t.swa_protected_size_ - sp) if hyb else 0,
        node_len=tuple(node_len),
        node_device=tuple(node_device),
        node_host=tuple(node_host),
        node_swa_tombstone=tuple(node_tomb),
        status=tuple(status(r) for r in reqs),
        origin_input_len=tuple(r.origin_input_len for r in reqs),
        output_len=tuple(r.output_len for r in reqs),
        kv_allocated_len=tuple(r.kv_allocated_len for r in reqs),
        kv_committed_len=tuple(r.kv_committed_len for r in reqs),
        cache_protected_len=tuple(r.cache_protected_len for r in reqs),
        swa_evicted_seqlen=tuple(r.swa_evicted_seqlen for r in reqs),
        swa_branching_seqlen=tuple(r.swa_branching_seqlen for r in reqs),
        last_node=tuple(last(r) for r in reqs),
        swa_lock_top=tuple(ROOT if (r.virtual or not hyb) else _atom(r.lock, True) for r in reqs),
        in_last_batch=tuple(r.in_last_batch for r in reqs),
        load_back_node=tuple(_atom(r.load_back) for r in reqs),
        load_back_swa_top=tuple(_atom(r.load_back, True) if hyb else ROOT for r in reqs),
        turn=tuple(r.turn for r in reqs),
        unfiltered=tuple(r.unfiltered for r in reqs),
        slot_holding=tuple(s.req_pool_idx is not None for s in slots),
        slot_kv_allocated_len=tuple(s.kv_allocated_len for s in slots),
        slot_kv_committed_len=tuple(s.kv_committed_len for s in slots),
        slot_cache_protected_len=tuple(s.cache_protected_len for s in slots),
        slot_swa_evicted_seqlen=tuple(s.swa_evicted_seqlen for s in slots),
        slot_last_node=tuple(last(s) for s in slots),
        slot_swa_lock_top=tuple(ROOT if (s.virtual or not hyb) else _atom(s.lock, True) for s in slots),
        slot_is_active=tuple(s.is_active for s in slots),
        slot_closed=tuple(s.closed for s in slots),
        slot_turn_saved=tuple(s.turn_saved for s in slots),
        slot_detached=tuple(s.detached for s in slots),
        last_batch=sch.last_batch,
        oom=sch.oom,
        batch_is_full=sch.batch_is_full,
        needless_retract=False, needless_recompute=False,  # ghosts of the model's (model/state.py GHOST_FIELDS): not compared
    )


def well_formed(sch: Scheduler) -> bool:
    ps = sch.ps
    t = sch.tree
    ok = min(t.full_evictable_size_, t.full_protected_size_, t.swa_evictable_size_, t.swa_protected_size_) >= 0
    for n in t.nodes():
        ok = ok and len(n) % ps == 0
    for r in sch.reqs:
        if sch.holds_kv(r):
            A, C, P, E = r.kv_allocated_len, r.kv_committed_len, r.cache_protected_len, r.swa_evicted_seqlen
            ok = ok and 0 <= P <= C <= A and E >= 0 and P % ps == 0 and E % ps == 0
    return bool(ok)


def residency_ok(sch: Scheduler) -> bool:
    """No use after free, on the slots themselves: for every request holding KV, the row's matched
    prefix [0, P) is slots of device nodes some lock holds (full_lock_ref > 0), its own part [P, C)
    is not on the free list, and with an SWA sub-allocator every position of its next token's window
    [C + 1 - W, C) still maps to an SWA slot that is not free (a tombstoned node or a window released
    past it maps to 0). The model's `residency` states the same of its abstract state
    (specs/properties.py: the locked path, no tombstone in the window, E <= max(P, C + 1 - W))."""
    ps = sch.ps
    rows = sch.req_pool.req_to_token
    alloc = sch.alloc
    hybrid = sch.hybrid and not sch.cfg.swa_ring
    full_free = set((alloc.full if sch.hybrid else alloc).free_pages.tolist())
    swa_free = set(alloc.swa.free_pages.tolist()) if hybrid else set()
    locked: set[int] = set()
    for n in sch.tree.nodes():
        if n.value is not None and n.full_lock_ref > 0:
            locked.update(n.value.tolist())
    for req in sch.reqs:
        if not sch.holds_kv(req) or req.req_pool_idx is None:
            continue
        row = rows[req.req_pool_idx]
        P, C = req.cache_protected_len, req.kv_committed_len
        if any(int(t) not in locked for t in row[:P].tolist()):
            return False
        if any(int(t) // ps in full_free for t in row[P:C].tolist()):
            return False
        if hybrid:
            lo = max(0, C + 1 - sch.tree.W)
            for t in row[lo:C].tolist():
                m = int(alloc.full_to_swa_index_mapping[int(t)])
                if m <= 0 or m // ps in swa_free:
                    return False
    return True


def lock_ledger_ok(sch: Scheduler) -> bool:
    """Every live lock has a live owner and every lock count is what the live locks make it, read
    off the tree: each handle the tree holds is some request's lock (that request holds KV), some
    request's in-flight load-back (it ran in the last batch or waits), or an open session slot's; a
    slot holding KV is open; each node's full lock ref is the number of handles whose path covers
    it and its SWA lock ref the number that took its SWA lock; and the four counters are their
    recount. The model's `lock_ledger` states the same of owners and counter drift."""
    t = sch.tree
    owned: set[int] = set()
    for r in sch.reqs:
        if r.lock is not None and not r.lock.released and r.lock.node not in (None, t.root):
            if not sch.holds_kv(r) and sch.oom == OOM_NONE:  # (after a crash: an admission in flight)
                return False
            owned.add(id(r.lock))
        if r.load_back is not None and not r.load_back.released:
            if not (r.in_last_batch or r in sch.waiting):
                return False
            owned.add(id(r.load_back))
    for slot in sch.slots:
        if slot.closed and (slot.holding or (slot.lock is not None and not slot.lock.released)):
            return False
        if slot.lock is not None and not slot.lock.released:
            owned.add(id(slot.lock))
    full_ref: dict[int, int] = {}
    swa_ref: dict[int, int] = {}
    for h in t.handles:
        if id(h) not in owned:
            return False
        n = h.node
        while n is not None and n is not t.root:
            full_ref[id(n)] = full_ref.get(id(n), 0) + 1
            n = n.parent
        for n in h.swa_nodes:
            swa_ref[id(n)] = swa_ref.get(id(n), 0) + 1
    for n in t.nodes():
        if n.full_lock_ref != full_ref.get(id(n), 0):
            return False
        if sch.hybrid and n.swa_lock_ref != swa_ref.get(id(n), 0):
            return False
    counters = (t.full_evictable_size_, t.full_protected_size_, t.swa_evictable_size_, t.swa_protected_size_)
    return counters == t.recount()


def request_bounds_ok(sch: Scheduler) -> bool:
    """Per request, from its own fields: its output stops at its enqueued max_new_tokens (at least
    the prefill's one token), its committed KV covers only tokens it has but the one being decoded,
    and a request that has not arrived (or waits) holds no KV (one not arrived has no output)."""
    alive = sch.oom == OOM_NONE  # (a crash leaves the iteration's state: lengths not judged there)
    for r in sch.reqs:
        n, A, C = r.output_len, r.kv_allocated_len, r.kv_committed_len
        if not 0 <= n <= max(sch.max_new_tokens(r), 1) or (alive and C > r.origin_input_len + n - 1):
            return False
        st = sch.status_of(r)
        if st == "new" and (n or A or C):
            return False
        if alive and st == "waiting" and (A or C):
            return False
    return True


def violated(sch: Scheduler, prop: str, own: ownership.Ownership | None = None) -> bool:
    """The pool's own verdict: does the state after the last step violate `prop`?"""
    if prop == "no_prefill_oom":
        return sch.oom in (OOM_PREFILL, OOM_REQ_SLOTS)
    if prop == "no_decode_oom":
        return sch.oom == OOM_DECODE
    if prop == "no_scheduler_assertion":
        return sch.oom == OOM_ASSERT
    if prop == "well_formed":
        return not well_formed(sch)
    if prop == "prompt_prefilled":  # a prefill that ended computed the whole fill but its last token
        done = [r for r in sch.reqs if r in sch.running
                or (r.finished and r.in_last_batch and sch.last_batch == EXTEND_BATCH)]
        return any(r.kv_committed_len != r.origin_input_len + r.output_len - 1 for r in done)
    if prop == "residency":
        return not residency_ok(sch)
    if prop == "lock_ledger":
        return not lock_ledger_ok(sch)
    if prop == "request_bounds":
        return not request_bounds_ok(sch)
    if prop == "retract_only_when_short":
        return sch.needless_retract
    if prop == "recompute_only_when_short":
        return sch.needless_recompute
    own = own or ownership.check(sch)
    b = sch.busy
    fired = bool(b and b.fired)
    crashed = bool(b and b.crashed)
    if prop == "conservation":
        return not own.ok
    if prop == "busy_check_sound":
        return own.pools_ok and (fired or crashed)
    if prop == "busy_check_complete":
        ran = sch.last_batch in (EXTEND_BATCH, DECODE_BATCH) and sch.oom == OOM_NONE
        return ran and not own.pools_ok and not fired
    if prop in ("idle_check_sound", "idle_check_complete"):
        i = sch.idle
        if i is None or not i.idle:
            return False
        exact = own.ok and lock_ledger_ok(sch)
        return (exact and i.fired) if prop == "idle_check_sound" else (not exact and not i.fired)
    raise KeyError(f"unknown property {prop!r}")


__all__ = ["to_state", "violated", "well_formed", "residency_ok", "lock_ledger_ok", "request_bounds_ok", "AbstractionError", "NO_BATCH"]
