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

from model import enqueue, radix_cache
from model.invariant_checker import holds_kv, is_fully_idle, self_check_during_busy, self_check_during_idle
from model.session import holds_range
from model.state import (DECODE_BATCH, EXTEND_BATCH, NO_BATCH, OOM_ASSERT, OOM_DECODE, OOM_NONE, OOM_PREFILL, OOM_REQ_SLOTS,
                          FINISHED, NEW, ROOT, RUNNING, VIRTUAL, WAITING, State)
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
        # not lent to its running turn (a turn detached from its session has a row of its own)
        own = x.and_(s.slot_holding[i], x.or_(x.not_(owns_row(x, s, r, mid)), s.slot_detached[i]))
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
    # the configs whose scheduler has what the property is about (None: every config); on the others
    # it is not checked, rather than reported vacuous (checker/engines/applies.py)
    applies: Callable[[Any], bool] | None = None
    applies_meaning: str = ""


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


def _no_scheduler_assertion_conjuncts(x: Ctx, s: State, mid: bool = False) -> list[Any]:
    return [s.oom != OOM_ASSERT]


def _no_scheduler_assertion(x: Ctx, s: State) -> Any:
    return _no_scheduler_assertion_conjuncts(x, s)[0]


def _request_kv_in_tree(x: Ctx, s: State) -> Any:
    """A request's own KV went into the tree (a node of its private chain exists): an insert ran,
    the step SGLang's insert-and-re-match asserts after."""
    cfg = x.cfg
    return x.or_(*[s.node_len[a] > 0 for r in range(cfg.num_reqs) for a in cfg.private_chain(r)])


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


def _prompt_prefilled(x: Ctx, s: State) -> Any:
    """A request past its prefill (running, or finished by the extend batch that just ran) has the KV
    of its whole fill but the token being decoded: C = |input| + |output| - 1."""
    c = []
    for r in range(x.cfg.num_reqs):
        fill = s.origin_input_len[r] + s.output_len[r]
        just_done = x.and_(s.last_batch == EXTEND_BATCH, s.in_last_batch[r], s.status[r] == FINISHED)
        c.append(x.implies(x.or_(s.status[r] == RUNNING, just_done), s.kv_committed_len[r] == fill - 1))
    return x.and_(*c)


def _some_running(x: Ctx, s: State) -> Any:
    return x.or_(*[s.status[r] == RUNNING for r in range(x.cfg.num_reqs)])


def _window_released(x: Ctx, s: State) -> Any:
    """Some request released part of its SWA window (True without hybrid SWA)."""
    return x.or_(*[s.swa_evicted_seqlen[r] > 0 for r in range(x.cfg.num_reqs)]) if x.cfg.hybrid_swa else True


def _request_and_tree(x: Ctx, s: State) -> Any:
    L = ledger(x, s)
    if x.cfg.chunk_cache:  # no tree: two requests hold full-pool tokens, one with its window partly released
        return x.and_(*[s.kv_allocated_len[r] > 0 for r in range(x.cfg.num_reqs)], _window_released(x, s))
    return x.and_(L.full_tree > 0, L.full_reqs > 0)


def _busy_nontrivial(x: Ctx, s: State) -> Any:
    b = self_check_during_busy(x, s)
    if x.cfg.chunk_cache:  # no tree: the check counts uncached tokens of a request whose window was partly released
        return x.and_(b.ran, b.terms["uncached"] > 0, _window_released(x, s))
    return x.and_(b.ran, b.terms["uncached"] > 0, b.terms["evictable"] + b.terms["protected"] > 0)


# -- residency, locks, idle ------------------------------------------------------------------------
def locked_path(x: Ctx, s: State, r: int, node: Any) -> tuple[Any, Any, list[tuple[int, Any, Any]]]:
    """The part of r's path a lock at `node` covers: (its length, all of it on the device,
    [(atom, covered, end position of the atom)] root first)."""
    pos: Any = 0
    on_dev = []
    ends = []
    for a in x.shape.path[r]:
        cov = radix_cache._under(x, node, a)
        L = x.ite(cov, s.node_len[a], 0)
        pos = pos + L
        on_dev.append(x.implies(x.and_(cov, s.node_len[a] > 0), s.node_device[a]))
        ends.append((a, cov, pos))
    return pos, x.and_(*on_dev), ends


def window_reads(x: Ctx, s: State, r: int, ends: list[tuple[int, Any, Any]], *held: Any) -> list[tuple[int, Any]]:
    """Hybrid SWA: the nodes of r's locked path (`ends` of `locked_path`) that its next token's
    window [C + 1 - W, C] reads, each with the condition that it does (`held` and-ed in front):
    the one definition `residency` and the lemma `swa_window_locked` both use."""
    W, C = x.p.sliding_window_size, s.kv_committed_len[r]
    return [(a, x.and_(*held, cov, s.node_len[a] > 0, end > C + 1 - W)) for a, cov, end in ends]


def _residency_conjuncts(x: Ctx, s: State, mid: bool = False) -> list[Any]:
    """Per request holding KV: its matched prefix [0, P) is exactly the device nodes of its path
    that its own lock covers (a session turn's: the slot's lock); with hybrid SWA, those nodes
    that reach into the window of its next token ([C + 1 - W, C]) are no tombstones, and its own
    row's SWA starts no later than the window (E <= max(P, C + 1 - W))."""
    cfg = x.cfg
    out = []
    for r in range(cfg.num_reqs):
        h = holds_kv(x, s, r)
        P, C, E, ln = s.cache_protected_len[r], s.kv_committed_len[r], s.swa_evicted_seqlen[r], s.last_node[r]
        plen, dev, ends = locked_path(x, s, r, ln)
        tree = ln != VIRTUAL
        out.append(x.implies(x.and_(h, tree), x.and_(plen == P, dev)))
        i = cfg.slot_of(r)
        if i is not None:
            slen, sdev, _ = locked_path(x, s, r, s.slot_last_node[i])
            out.append(x.implies(x.and_(h, x.not_(tree)), x.and_(s.slot_holding[i], slen == P, sdev)))
        if cfg.hybrid_swa and not getattr(cfg, "swa_ring", False):
            for a, reads in window_reads(x, s, r, ends, h, tree):
                out.append(x.implies(reads, x.not_(s.node_swa_tombstone[a])))
            out.append(x.implies(h, E <= x.max(P, C + 1 - x.p.sliding_window_size)))
    return out


def _residency(x: Ctx, s: State) -> Any:
    return x.and_(*_residency_conjuncts(x, s))


def _reads_prefix(x: Ctx, s: State) -> Any:
    if x.cfg.chunk_cache:  # no tree: a request reads its own row, past a released part of its window
        return x.or_(*[x.and_(holds_kv(x, s, r), s.swa_evicted_seqlen[r] > 0) for r in range(x.cfg.num_reqs)]) \
            if x.cfg.hybrid_swa else x.or_(*[holds_kv(x, s, r) for r in range(x.cfg.num_reqs)])
    return x.or_(*[x.and_(holds_kv(x, s, r), s.cache_protected_len[r] > 0) for r in range(x.cfg.num_reqs)])


def _lock_ledger(x: Ctx, s: State) -> Any:
    """Every lock has a live owner: a request's tree lock belongs to a request that holds KV, a
    load-back's lock is in flight (taken by the last prefill pass: its request ran in the last
    batch or still waits, and the next `loading_check` releases it), a session's lock to an open
    session; and SGLang's evictable / protected counters are what those locks make them (no drift).
    Where the scheduler died in the iteration (`oom`), a request the pass had admitted holds its
    lock without KV: the admission was in flight, and the crash is its own property's violation."""
    cfg = x.cfg
    c = []
    died = s.oom != OOM_NONE
    for r in range(cfg.num_reqs):
        locks = x.and_(s.last_node[r] != ROOT, s.last_node[r] != VIRTUAL)
        c.append(x.implies(locks, x.or_(holds_kv(x, s, r), died)))
        if cfg.hicache:
            c.append(x.implies(s.load_back_node[r] != ROOT, x.or_(s.in_last_batch[r], s.status[r] == WAITING)))
    for i in range(len(cfg.streaming_sessions)):
        c.append(x.implies(s.slot_holding[i], x.not_(s.slot_closed[i])))
    c += [s.full_evictable_drift == 0, s.full_protected_drift == 0]
    if cfg.hybrid_swa:
        c += [s.swa_evictable_drift == 0, s.swa_protected_drift == 0]
    return x.and_(*c)


def _holds_lock(x: Ctx, s: State) -> Any:
    return x.or_(*[x.and_(holds_kv(x, s, r), s.last_node[r] != ROOT, s.last_node[r] != VIRTUAL)
                   for r in range(x.cfg.num_reqs)])


def _idle_exact(x: Ctx, s: State) -> Any:
    L = ledger(x, s)
    return x.and_(L.full_ok, L.swa_ok, L.slots_ok, _lock_ledger(x, s))


def _idle_check_sound(x: Ctx, s: State) -> Any:
    i = self_check_during_idle(x, s)
    return x.implies(x.and_(i.idle, _idle_exact(x, s)), x.not_(i.fired))


def _idle_check_complete(x: Ctx, s: State) -> Any:
    i = self_check_during_idle(x, s)
    return x.implies(x.and_(i.idle, x.not_(_idle_exact(x, s))), i.fired)


# -- request lengths, retraction ---------------------------------------------------------------------
def _request_bounds(x: Ctx, s: State) -> Any:
    """Per request: its output stops at its enqueued max_new_tokens (model/enqueue.py: after the
    #25126 clip, which may leave 0; the prefill's first token comes regardless, so max(M, 1)); its
    committed KV covers only tokens it has, all but the one being decoded (C <= |input| + |output| - 1,
    so C <= |input| + max(M, 1) - 1); a request not yet arrived has no output and no KV, and a waiting
    one (never run, retracted: output kept, KV reset, or a session's next turn) no KV. Where the
    scheduler died in the iteration (`oom`) the state is the one it died in, between an extend's
    allocation and its result (a chunk's C already covers the whole prompt, the admitted request
    still waits): there the lengths are not judged, only the output bound; the crash is its own
    property's violation."""
    out = []
    alive = s.oom == OOM_NONE
    for r in range(x.cfg.num_reqs):
        st, n = s.status[r], s.output_len[r]
        A, C = s.kv_allocated_len[r], s.kv_committed_len[r]
        out.append(x.and_(n >= 0, n <= x.max(enqueue.max_new_tokens(x, s, r), 1)))
        out.append(x.implies(alive, C <= s.origin_input_len[r] + n - 1))
        out.append(x.implies(st == NEW, x.and_(n == 0, A == 0, C == 0)))
        out.append(x.implies(x.and_(alive, st == WAITING), x.and_(A == 0, C == 0)))
    return x.and_(*out)


def _some_finished(x: Ctx, s: State) -> Any:
    return x.or_(*[s.status[r] == FINISHED for r in range(x.cfg.num_reqs)])


def _retract_only_when_short(x: Ctx, s: State) -> Any:
    """The ghost `needless_retract` (model/schedule_batch.py::retract_decode) is off: every request
    the last decode retracted or aborted answered a shortfall, available + evictable < need for the
    requests still kept, at the check that chose it (SGLANG_TEST_RETRACT may force the first)."""
    return x.not_(s.needless_retract)


def _recompute_only_when_short(x: Ctx, s: State) -> Any:
    """The ghost `needless_recompute` (model/hicache.py::init_load_back) is off: every host hit the
    last iteration gave up (and prefills again) lacked room in a pool it needs that evicting every
    unlocked node could not make (what `init_load_back` returning None means)."""
    return x.not_(s.needless_recompute)


def _load_back_in_flight(x: Ctx, s: State) -> Any:
    return x.or_(*[s.load_back_node[r] != ROOT for r in range(x.cfg.num_reqs)])


def _decode_mem_checked(x: Ctx, s: State) -> Any:
    """The last iteration ran check_decode_mem: a decode batch ran, or a request was retracted (it
    waits with output kept: only retract_decode puts a request with output back in the waiting queue;
    a session's next turn starts with none). Not "a retraction happened": on the configs without
    memory pressure none does, and the property still constrains every check there."""
    retracted = x.or_(*[x.and_(s.status[r] == WAITING, s.output_len[r] > 0) for r in range(x.cfg.num_reqs)])
    return x.or_(s.last_batch == DECODE_BATCH, retracted)


def _idle_after_serving(x: Ctx, s: State) -> Any:
    served = x.or_(*[s.status[r] == FINISHED for r in range(x.cfg.num_reqs)])
    if x.cfg.chunk_cache:  # no tree to hold tokens: idle after serving
        return x.and_(is_fully_idle(x, s), served)
    return x.and_(is_fully_idle(x, s), served, radix_cache.tree_tokens(x, s)[0] > 0)


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
            "a request and the tree both hold full-pool tokens (without a tree: both requests hold KV, a window "
            "partly released)",
            _conservation_conjuncts,
        ),
        Property(
            "busy_check_sound",
            "SGLang's busy check neither fires nor crashes while the ledger says nothing leaked (no false alarm)",
            _busy_check_sound,
            _busy_nontrivial,
            "the busy check ran with uncached and tree tokens (without a tree: uncached tokens, a window partly released)",
        ),
        Property(
            "busy_check_complete",
            "whenever the ledger shows a leak after a batch ran, SGLang's busy check fires (no missed leak)",
            _busy_check_complete,
            _busy_nontrivial,
            "the busy check ran with uncached and tree tokens (without a tree: uncached tokens, a window partly released)",
        ),
        Property(
            "well_formed",
            "pool and tree counters are non-negative, C <= A, P <= C, P and E and node lengths are page aligned",
            _well_formed,
            _ran,
            "a batch ran",
        ),
        Property(
            "prompt_prefilled",
            "a request whose prefill ended (running, or finished by the extend) computed its whole prompt: "
            "C = |input| + |output| - 1 (no silently truncated prefill)",
            _prompt_prefilled,
            _some_running,
            "a request is running",
        ),
        Property(
            "residency",
            "no use after free: every slot a request holding KV will read is held by it or by a node it locked (its "
            "prefix [0, P) on its locked path, on the device; with SWA, the window's nodes not tombstoned and its own "
            "SWA from no later than the window)",
            _residency,
            _reads_prefix,
            "a request holding KV reads a cached prefix (P > 0; without a tree: its own row past a released window)",
        ),
        Property(
            "lock_ledger",
            "every lock has a live owner (a request holding KV, an in-flight load-back, an open session; after a crash "
            "also the admission it died in) and the evictable/protected counters match the locks",
            _lock_ledger,
            _holds_lock,
            "a request holds a tree lock",
            applies=lambda cfg: not cfg.chunk_cache,
            applies_meaning="configs with a prefix tree (not --disable-radix-cache: no lock exists)",
        ),
        Property(
            "idle_check_sound",
            "SGLang's idle-time check (pool equations, req_to_token pool, tree sanity) does not fire while the ledger "
            "and the lock ledger are exact (no false alarm)",
            _idle_check_sound,
            _idle_after_serving,
            "the server is idle after serving a request, with tokens in the tree (without a tree: idle after serving)",
        ),
        Property(
            "idle_check_complete",
            "whenever the server is idle and the ledger or the lock ledger is not exact, SGLang's idle-time check fires "
            "(no missed leak)",
            _idle_check_complete,
            _idle_after_serving,
            "the server is idle after serving a request, with tokens in the tree (without a tree: idle after serving)",
        ),
        Property(
            "request_bounds",
            "a request's output stops at its max_new_tokens (as enqueued, at least the prefill's token), its committed "
            "KV within |input| + |output| - 1; a request not yet arrived has no output and no KV, a waiting one no KV",
            _request_bounds,
            _some_finished,
            "a request finished",
        ),
        Property(
            "retract_only_when_short",
            "decode retracts or aborts a request only when available + evictable < need at that check "
            "(what check_decode_mem failing means; SGLANG_TEST_RETRACT may force the first retraction)",
            _retract_only_when_short,
            _decode_mem_checked,
            "decode memory was checked (a decode batch ran, or a request was retracted)",
        ),
        Property(
            "recompute_only_when_short",
            "HiCache gives a host hit up (prefills it again) only when, after evicting what it can, a pool the load-back "
            "needs is still short with nothing evictable left in it (what init_load_back returning None means)",
            _recompute_only_when_short,
            _load_back_in_flight,
            "a host hit was loaded back (a load-back is in flight)",
            applies=lambda cfg: bool(cfg.hicache),
            applies_meaning="configs with HiCache",
        ),
        Property(
            "no_scheduler_assertion",
            "no insert of a request's KV into the tree kills the scheduler on SGLang's `assert new_prefix_len <= "
            "len(new_indices)` (UnifiedRadixCache's re-match after the insert, 0.5.18-0.5.22: cache_unfinished_req / "
            "checkpoint_into_tree): the re-match covers what the tree held before the insert",
            _no_scheduler_assertion,
            _request_kv_in_tree,
            "a request's KV went into the tree",
            _no_scheduler_assertion_conjuncts,
            applies=lambda cfg: not cfg.chunk_cache,
            applies_meaning="configs with a prefix tree (not --disable-radix-cache: nothing is inserted)",
        ),
    ]
}


def get(name: str) -> Property:
    try:
        return PROPERTIES[name]
    except KeyError:
        raise KeyError(f"unknown property {name!r}; expected one of {list(PROPERTIES)}") from None
