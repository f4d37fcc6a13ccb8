"""What must hold: named properties, each with a one-line meaning and a reachability witness.

A property is data: a name, a meaning, a predicate over (ctx, state) written with the model's ops
(so every engine evaluates the same definition), and a witness predicate: a state where the
property is *exercised*. If no reachable state within the bound satisfies the witness, the
property's verdict is `vacuous`, not `holds`.

The ground truth for memory is an ownership ledger, independent of SGLang's checker formula: every
token slot of each pool is free (allocator), in a tree node on the device (its length; a tombstone
has no SWA slots), in the row of a request that owns KV (positions [P, ceil(A)), SWA from
max(P, E)), or in the row held by a streaming-session slot that no running request has taken over.
Those owners are disjoint by construction, so the ledger is exact iff nothing leaked (a slot owned
by nobody) and nothing was freed twice or owned twice (a slot counted twice).

The ledger is also defined inside an iteration (`mid=True`), at the points the model marks with
`x.checkpoint`: there a request admitted by this iteration's extend batch owns its row from the
moment it is allocated, while its status still says WAITING (process_batch_result_prefill changes
it later). At an iteration's boundary no WAITING request has a row (`request_rows` lemma), so both
readings agree there; the induction engine uses the inner one to ask which sub-step of an
iteration first breaks the ledger (checker/engines/induction.py, `case_splits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from model import radix_cache
from model.invariant_checker import holds_kv, self_check_during_busy
from model.session import holds_range
from model.state import (DECODE_BATCH, EXTEND_BATCH, NO_BATCH, OOM_DECODE, OOM_NONE, OOM_PREFILL, OOM_REQ_SLOTS,
                          WAITING, State)
from model.transition import Ctx


@dataclass(frozen=True)
class Ledger:
    full_free: Any
    full_tree: Any
    full_reqs: Any
    full_sessions: Any
    swa_free: Any
    swa_tree: Any
    swa_reqs: Any
    swa_sessions: Any
    slots_free: Any
    slots_reqs: Any
    slots_sessions: Any
    full_ok: Any
    swa_ok: Any
    slots_ok: Any

    @property
    def pools_ok(self) -> Any:
        return (self.full_ok, self.swa_ok)


def owns_row(x: Ctx, s: State, r: int, mid: bool = False) -> Any:
    """Request r owns its req_to_token row: `holds_kv`; inside an iteration (`mid`) also once its
    extend was allocated (`alloc_for_extend`) before its status left WAITING."""
    h = holds_kv(x, s, r)
    return x.or_(h, x.and_(s.status[r] == WAITING, s.kv_allocated_len[r] > 0)) if mid else h


def ledger(x: Ctx, s: State, mid: bool = False) -> Ledger:
    """Who owns every token slot (and every req_to_token slot) now; `mid`: at a checkpoint inside
    an iteration (module docstring)."""
    cfg, p = x.cfg, x.p
    R = cfg.num_reqs
    tree_f, tree_s = radix_cache.tree_tokens(x, s)
    req_f: Any = 0
    req_s: Any = 0
    n_req: Any = 0
    for r in range(R):
        h = owns_row(x, s, r, mid)
        f, w = holds_range(x, s.kv_allocated_len[r], s.cache_protected_len[r], s.swa_evicted_seqlen[r])
        req_f = req_f + x.ite(h, f, 0)
        req_s = req_s + x.ite(h, w, 0)
        n_req = n_req + x.ite(h, 1, 0)
    ses_f: Any = 0
    ses_s: Any = 0
    n_ses: Any = 0
    for i, r in enumerate(cfg.streaming_sessions):
        own = x.and_(s.slot_holding[i], x.not_(owns_row(x, s, r, mid)))  # not lent to its running turn
        f, w = holds_range(x, s.slot_kv_allocated_len[i], s.slot_cache_protected_len[i], s.slot_swa_evicted_seqlen[i])
        ses_f = ses_f + x.ite(own, f, 0)
        ses_s = ses_s + x.ite(own, w, 0)
        n_ses = n_ses + x.ite(own, 1, 0)
    full_ok = s.full_available + tree_f + req_f + ses_f == p.full_tokens
    # with the per-request SWA ring (config swa_ring) the SWA ledger is the request-row pool's: a
    # row owns its ring, so `slots_ok` is the SWA conservation; the tree's SWA tokens own no memory
    swa_ok = (s.swa_available + tree_s + req_s + ses_s == p.swa_tokens) if (cfg.hybrid_swa and not cfg.swa_ring) else True
    slots_ok = s.req_pool_available + n_req + n_ses == p.req_pool_size
    return Ledger(
        s.full_available, tree_f, req_f, ses_f, s.swa_available, tree_s, req_s, ses_s,
        s.req_pool_available, n_req, n_ses, full_ok, swa_ok, slots_ok,
    )


Pred = Callable[[Ctx, State], Any]


@dataclass(frozen=True)
class Property:
    name: str
    meaning: str
    holds: Pred
    witness: Pred
    witness_meaning: str
    # the conjuncts of `holds`, in order, as a function of (ctx, state, mid): `mid` reads them at a
    # checkpoint inside an iteration. A property that has them lets the induction engine split its
    # step by the first sub-step that breaks a conjunct (checker/engines/induction.py, `case_splits`).
    conjuncts: Callable[[Ctx, State, bool], list[Any]] | None = None


def _ran(x: Ctx, s: State) -> Any:
    return s.last_batch != NO_BATCH


def _no_prefill_oom_conjuncts(x: Ctx, s: State, mid: bool = False) -> list[Any]:
    return [s.oom != OOM_PREFILL, s.oom != OOM_REQ_SLOTS]  # (an iteration sets `oom` once and stops)


def _no_prefill_oom(x: Ctx, s: State) -> Any:
    return x.and_(*_no_prefill_oom_conjuncts(x, s))


def _no_decode_oom_conjuncts(x: Ctx, s: State, mid: bool = False) -> list[Any]:
    return [s.oom != OOM_DECODE]


def _no_decode_oom(x: Ctx, s: State) -> Any:
    return _no_decode_oom_conjuncts(x, s)[0]


def _conservation_conjuncts(x: Ctx, s: State, mid: bool = False) -> list[Any]:
    L = ledger(x, s, mid)
    return [c for c in (L.full_ok, L.swa_ok, L.slots_ok) if c is not True]


def _conservation(x: Ctx, s: State) -> Any:
    return x.and_(*_conservation_conjuncts(x, s))


def _busy_check_sound(x: Ctx, s: State) -> Any:
    L = ledger(x, s)
    b = self_check_during_busy(x, s)
    return x.implies(x.and_(L.full_ok, L.swa_ok), x.and_(x.not_(b.fired), x.not_(b.crashed)))


def _busy_check_complete(x: Ctx, s: State) -> Any:
    L = ledger(x, s)
    b = self_check_during_busy(x, s)
    leak = x.and_(_ran(x, s), s.oom == OOM_NONE, x.not_(x.and_(L.full_ok, L.swa_ok)))
    return x.implies(leak, b.fired)


def _well_formed(x: Ctx, s: State) -> Any:
    cfg = x.cfg
    cnt = radix_cache.counters(x, s)
    c = [s.full_available >= 0, cnt.full_evictable >= 0, cnt.full_protected >= 0, s.req_pool_available >= 0]
    if cfg.hybrid_swa:
        c += [s.swa_available >= 0, cnt.swa_evictable >= 0, cnt.swa_protected >= 0]
    for a in range(cfg.num_atoms):
        c += [s.node_len[a] >= 0, x.page_aligned(s.node_len[a])]
    for r in range(cfg.num_reqs):
        A, C, P, E = s.kv_allocated_len[r], s.kv_committed_len[r], s.cache_protected_len[r], s.swa_evicted_seqlen[r]
        c.append(x.implies(holds_kv(x, s, r), x.and_(P >= 0, P <= C, C <= A, E >= 0, x.page_aligned(P), x.page_aligned(E))))
    return x.and_(*c)


def _request_and_tree(x: Ctx, s: State) -> Any:
    L = ledger(x, s)
    return x.and_(L.full_tree > 0, L.full_reqs > 0)


def _busy_nontrivial(x: Ctx, s: State) -> Any:
    b = self_check_during_busy(x, s)
    return x.and_(b.ran, b.terms["uncached"] > 0, b.terms["evictable"] + b.terms["protected"] > 0)


PROPERTIES: dict[str, Property] = {
    p.name: p
    for p in [
        Property(
            "no_prefill_oom",
            "once add_one_req/add_chunked_req admit a batch, its allocation (alloc_req_slots, alloc_extend) cannot fail",
            _no_prefill_oom,
            lambda x, s: s.last_batch == EXTEND_BATCH,
            "an extend batch was allocated",
            _no_prefill_oom_conjuncts,
        ),
        Property(
            "no_decode_oom",
            "once check_decode_mem (after retraction) passes, the decode / EAGLE allocation cannot fail",
            _no_decode_oom,
            lambda x, s: s.last_batch == DECODE_BATCH,
            "a decode batch was allocated",
            _no_decode_oom_conjuncts,
        ),
        Property(
            "conservation",
            "the ownership ledger is exact in every pool: no leaked slot, no slot freed or owned twice",
            _conservation,
            _request_and_tree,
            "a request and the tree both hold full-pool tokens",
            _conservation_conjuncts,
        ),
        Property(
            "busy_check_sound",
            "SGLang's busy check neither fires nor crashes while the ledger says nothing leaked (no false alarm)",
            _busy_check_sound,
            _busy_nontrivial,
            "the busy check ran with uncached and tree tokens",
        ),
        Property(
            "busy_check_complete",
            "whenever the ledger shows a leak after a batch ran, SGLang's busy check fires (no missed leak)",
            _busy_check_complete,
            _busy_nontrivial,
            "the busy check ran with uncached and tree tokens",
        ),
        Property(
            "well_formed",
            "pool and tree counters are non-negative, C <= A, P <= C, P and E and node lengths are page aligned",
            _well_formed,
            _ran,
            "a batch ran",
        ),
    ]
}


def get(name: str) -> Property:
    try:
        return PROPERTIES[name]
    except KeyError:
        raise KeyError(f"unknown property {name!r}; expected one of {list(PROPERTIES)}") from None
