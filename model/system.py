"""The composed system: `Scheduler.event_loop_normal`, one iteration per step.

SGLang, v0.5.10.post1 .. 0.5.23: managers/scheduler.py (`event_loop_normal`,
`process_input_requests`, `get_next_batch_to_run`, `get_new_batch_prefill`,
`update_running_batch`, `run_batch`) and, from v0.5.13, the components under
managers/scheduler_components/ (`recv_requests` in request_receiver.py, `process_batch_result_prefill`
/ `_decode` in batch_result_processor.py; in scheduler.py and its mixins before).

An iteration: receive requests (arrivals, the next turn of a streaming session, session closes);
release finished load-backs; stash the chunked request if the last batch was an extend; run the
PrefillAdder over the chunked request and the waiting queue (FCFS, slot order); if it admitted
anything, allocate and run the extend batch and process its results; otherwise, if requests are
running, check decode memory (retracting if needed) and run one decode step; and remember which
batch ran, for the busy check that follows (model/invariant_checker.py). An allocation failure
is SGLang's RuntimeError: the scheduler dies and nothing follows.

An over-long prompt (`Config.over_long`) is aborted at arrival: it is the one-token prompt [0] with
the max_new_tokens its long prompt was clipped to, and finishes at its prefill's result.

Not modelled: the overlap loop, PD disaggregation, DP attention, aborts other than the over-long
prompt's, EOS (a request stops at max_new_tokens, which is itself symbolic).
"""

from __future__ import annotations

from typing import Any

from . import enqueue, hicache, prefill_adder, radix_cache, schedule_batch, session, speculative
from . import invariant_checker  # noqa: F401  (SGLang's checks: importing the system registers every transition)
from .config import Config, Params
from .designs import Design
from .ops import Ops
from .prefill_adder import Adder
from .state import (
    CHUNKED,
    DECODE_BATCH,
    EXTEND_BATCH,
    FINISHED,
    NEW,
    NO_BATCH,
    OOM_NONE,
    ROOT,
    RUNNING,
    VIRTUAL,
    WAITING,
    State,
)
from .radix_cache import DRIFT_FIELDS
from .transition import Ctx, transition

ACTIONS = ("event_loop_iteration",)


def params_ok(x: Ctx) -> Any:
    """Constraints between parameters that make an instance meaningful."""
    cfg, p = x.cfg, x.p
    warm_dev = x.sum(x.ite(p.warm_device[a], p.warm_len[a], 0) for a in range(cfg.warm_atoms))
    warm_total = x.sum(p.warm_len[a] for a in range(cfg.warm_atoms))
    cons = [p.full_tokens > 0, p.full_tokens >= warm_dev, p.req_pool_size >= 1, p.max_prefill_tokens >= 1]
    if cfg.swa_ring:  # no SWA pool: capacity is request rows (model/allocator.py)
        cons += [p.sliding_window_size >= 1]
    elif cfg.hybrid_swa:
        cons += [p.swa_tokens > 0, p.swa_tokens >= warm_dev, p.sliding_window_size >= 1]
    if cfg.chunked_prefill:
        cons.append(p.chunked_prefill_size >= cfg.page_size)
    for r in range(cfg.num_reqs):
        cons += [p.input_len[r] >= 1, p.max_new_tokens[r] >= 1]
        if cfg.over_long:  # `validate_input_length` against max_req_input_len = (T - 1) - 5
            rejected = p.input_len[r] >= p.full_tokens - 6
            cons.append(rejected if r in cfg.over_long else x.not_(rejected))
        if cfg.shares(r):
            cons.append(p.input_len[r] > warm_total)  # the match never ends inside the warm prefix
    for a in range(cfg.warm_atoms):
        cons.append(p.warm_len[a] >= 0)
        cons.append(x.implies(p.warm_len[a] > 0, x.or_(p.warm_device[a], p.warm_host[a])))
        if a > 0:  # device nodes are a prefix of the chain (eviction is leaf-first)
            cons.append(x.implies(x.and_(p.warm_len[a] > 0, p.warm_device[a]), x.and_(p.warm_len[a - 1] > 0, p.warm_device[a - 1])))
            cons.append(x.implies(p.warm_len[a] > 0, p.warm_len[a - 1] > 0))
            # write-through backs a node up only after its parent (#25065): host copies are a prefix too
            cons.append(x.implies(x.and_(p.warm_len[a] > 0, p.warm_host[a]), p.warm_host[a - 1]))
        if not cfg.hicache:
            cons.append(x.not_(p.warm_host[a]))
    return x.and_(*cons)


def init_state(x: Ctx) -> State:
    """An idle server whose tree holds the warm prefix; every request slot not yet arrived."""
    cfg, p = x.cfg, x.p
    R, K, S = cfg.num_reqs, cfg.num_atoms, len(cfg.streaming_sessions)
    wl = [p.warm_len[a] if a < cfg.warm_atoms else 0 for a in range(K)]
    if cfg.hicache:
        wdev = [x.and_(p.warm_device[a], p.warm_len[a] > 0) if a < cfg.warm_atoms else False for a in range(K)]
    else:  # without HiCache a node is on the device iff it exists (node_len > 0)
        wdev = [True] * K
    # a warm atom of length 0 is not in the tree, so it has no host copy either
    whost = [x.and_(p.warm_host[a], p.warm_len[a] > 0) if a < cfg.warm_atoms else False for a in range(K)]
    on_dev = x.sum(x.ite(x.and_(wdev[a], wl[a] > 0), wl[a], 0) for a in range(K))
    hybrid = cfg.hybrid_swa and not cfg.swa_ring  # the ring pages no SWA tokens
    return State(
        full_available=p.full_tokens - on_dev,
        swa_available=p.swa_tokens - on_dev if hybrid else 0,
        req_pool_available=p.req_pool_size,
        full_evictable_drift=0,
        full_protected_drift=0,
        swa_evictable_drift=0,
        swa_protected_drift=0,
        node_len=tuple(wl),
        node_device=tuple(wdev),
        node_host=tuple(whost),
        node_swa_tombstone=(False,) * K,
        status=(NEW,) * R,
        # an over-long prompt is [0] from its arrival on (`set_finish_with_abort`)
        origin_input_len=tuple(cfg.prompt_len(p, r) for r in range(R)),
        output_len=(0,) * R,
        kv_allocated_len=(0,) * R,
        kv_committed_len=(0,) * R,
        cache_protected_len=(0,) * R,
        swa_evicted_seqlen=(0,) * R,
        swa_branching_seqlen=(0,) * R,
        last_node=(ROOT,) * R,
        swa_lock_top=(ROOT,) * R,
        in_last_batch=(False,) * R,
        load_back_node=(ROOT,) * R,
        load_back_swa_top=(ROOT,) * R,
        turn=(0,) * R,
        unfiltered=(False,) * R,
        slot_holding=(False,) * S,
        slot_kv_allocated_len=(0,) * S,
        slot_kv_committed_len=(0,) * S,
        slot_cache_protected_len=(0,) * S,
        slot_swa_evicted_seqlen=(0,) * S,
        slot_last_node=(ROOT,) * S,
        slot_swa_lock_top=(ROOT,) * S,
        slot_is_active=(False,) * S,
        slot_closed=(False,) * S,
        slot_turn_saved=(False,) * S,
        slot_detached=(False,) * S,
        last_batch=NO_BATCH,
        oom=OOM_NONE, batch_is_full=False, needless_retract=False, needless_recompute=False,  # (a ghost: model/state.py GHOST_FIELDS)
    )


# -- receive -----------------------------------------------------------------------------------
@transition(
    "managers/scheduler.py::Scheduler.recv_requests + process_input_requests",
    modifies=(
        "status", "origin_input_len", "output_len", "turn", "kv_allocated_len", "kv_committed_len",
        "cache_protected_len", "swa_evicted_seqlen", "last_node", "swa_lock_top", "slot_holding", "slot_closed",
        "slot_turn_saved", "slot_detached", "full_available", "swa_available", "req_pool_available", *DRIFT_FIELDS),
)
def recv_requests(x: Ctx, s: State) -> State:
    """New requests arrive (any subset of those not yet sent), a finished streaming turn may be
    followed by the next one (its input = the whole context plus new tokens), and an idle
    session may be closed (`release_session`)."""
    cfg = x.cfg
    with x.scope("recv"):
        for r in range(cfg.num_reqs):
            arrive = x.choose_bool_when(f"arrive[{r}]", s.status[r] == NEW)
            s = s.req(r, status=x.ite(arrive, WAITING, s.status[r]))
        for i, r in enumerate(cfg.streaming_sessions):
            idle = x.and_(s.status[r] == FINISHED, x.not_(s.slot_closed[i]))
            close = x.choose_bool_when(f"close_session[{i}]", x.and_(idle, s.slot_holding[i]))
            s = x.branch(close, lambda i=i: session.release_session(x, s, i), lambda: s)
            more = x.and_(idle, x.not_(close), s.turn[r] + 1 < cfg.max_turns)
            nxt = x.choose_bool_when(f"next_turn[{r}]", more)
            lo, hi = cfg.turn_tokens
            with x.path(nxt):
                new_tokens = x.choose_int(f"turn_tokens[{r}]", lo, hi)
            s = x.branch(
                nxt,
                # the next turn is a new Req of the session: nothing saved it yet, and it is streaming
                lambda r=r, i=i, new_tokens=new_tokens: s.slot(i, slot_turn_saved=False, slot_detached=False).req(
                    r,
                    status=WAITING,
                    # the next turn's input is the context plus output_ids[:max_new_tokens]
                    # (session_controller.py, every release): a turn clipped to max_new_tokens 0 at
                    # enqueue still sampled its prefill's token, which the session drops
                    origin_input_len=s.origin_input_len[r] + x.min(s.output_len[r], enqueue.max_new_tokens(x, s, r))
                    + new_tokens,
                    output_len=0,
                    turn=s.turn[r] + 1,
                    kv_allocated_len=0,
                    kv_committed_len=0,
                    cache_protected_len=0,
                    swa_evicted_seqlen=0,
                    last_node=ROOT,
                    swa_lock_top=ROOT,
                ),
                lambda: s,
            )
    return s


# -- get_next_batch_to_run -------------------------------------------------------------------------
def stash_chunked_req(x: Ctx, s: State) -> State:
    """After an extend batch, the chunked request's computed part goes into the tree
    (`cache_unfinished_req(chunked_req, chunked=True)`), whether or not it ran in that batch.

    Off `chunked_req_scheduled_last_iter` (<= v0.5.11, `0.5.11:managers/scheduler.py:2439-2443`)
    the stash runs at every iteration. After an iteration whose `add_chunked_req` parked the
    request (#23174: `return req` before `fill_ids` is truncated; kvmc: chunked and not in the last
    batch), `fill_ids` is the whole prompt `init_next_round_input` prepared, and the stash inserts it
    with the request's `req_to_token` entries past its KV, which were never allocated: kvmc gives
    the request that phantom KV (`kv_allocated_len = kv_committed_len = fill`, nothing taken from a
    pool), so the tree holds tokens no pool handed out (SGLang #24252)."""
    gate = x.on("chunked_req_scheduled_last_iter")
    for r in range(x.cfg.num_reqs):
        chunked = s.status[r] == CHUNKED
        stash = x.and_(s.last_batch == EXTEND_BATCH, chunked) if gate else chunked
        if radix_cache.rematches(x, False):  # an earlier stash may have killed the scheduler (OOM_ASSERT)
            stash = x.and_(stash, s.oom == OOM_NONE)

        def run(r: int = r) -> State:
            s1 = s
            if not gate:
                fill = s.origin_input_len[r] + s.output_len[r]
                parked = x.not_(s.in_last_batch[r])
                s1 = x.branch(parked, lambda: s.req(r, kv_allocated_len=fill, kv_committed_len=fill), lambda: s)
            return radix_cache.cache_unfinished_req(x, s1, r, f"stash[{r}]")

        s = x.branch(stash, run, lambda: s)
        s = x.checkpoint(f"stashed[{r}]", s)
    return _filter_last_batch(x, s).set(in_last_batch=(False,) * x.cfg.num_reqs)


def _filter_last_batch(x: Ctx, s: State) -> State:
    """`get_next_batch_to_run` after the stash: the last extend batch drops its finished requests and
    the chunked one before it joins the running batch, and a batch that shrank clears batch_is_full;
    it becomes the running batch if that was empty, flag and all (0.5.18:managers/scheduler.py:3068-3092). From v0.5.23 (`filter_running_every_step`) the running
    batch is filtered here too, every iteration: the finished requests a decode left leave, which
    also clears it (0.5.23:managers/scheduler.py:3962-3968)."""
    R = x.cfg.num_reqs
    # a member that is not running finished there or is the chunked request (a session turn that finished
    # may already be its next turn, waiting)
    extend = s.last_batch == EXTEND_BATCH
    left = x.and_(extend, x.or_(*[x.and_(s.in_last_batch[r], s.status[r] != RUNNING) for r in range(R)]))
    # an empty running batch is replaced by the filtered extend batch (`self.running_batch = self.last_batch`),
    # whose batch_is_full is its own (False): a flag set on the empty batch is gone
    was_empty = x.not_(x.or_(*[x.or_(x.and_(s.status[r] == RUNNING, x.not_(s.in_last_batch[r])), s.unfiltered[r])
                               for r in range(R)]))
    joins = x.or_(*[x.and_(s.in_last_batch[r], s.status[r] == RUNNING) for r in range(R)])
    left = x.or_(left, x.and_(extend, was_empty, joins))
    if x.on("filter_running_every_step"):
        left = x.or_(left, *s.unfiltered)
        s = s.set(unfiltered=(False,) * R)
    return s.set(batch_is_full=x.and_(s.batch_is_full, x.not_(left)))


def match_prefix(x: Ctx, s: State, r: int) -> tuple[State, Any, Any]:
    """`init_next_round_input(tree_cache)`: match the fill ids minus the last token. A streaming
    request whose session holds KV restores the slot instead. Returns (state, match, fresh slot)."""
    key_len = s.origin_input_len[r] + s.output_len[r] - 1
    i = x.cfg.slot_of(r)
    tree_match = radix_cache.match_prefix(x, s, r, key_len)
    if x.cfg.hybrid_swa and x.on("swa_branching_insert"):  # `req.swa_branching_seqlen = match_result...` (v0.5.20)
        s = s.req(r, swa_branching_seqlen=tree_match.swa_branching_seqlen)
    if i is None:
        return s, tree_match, True
    restore = x.and_(s.slot_holding[i], x.not_(s.slot_closed[i]), x.not_(s.slot_detached[i]))
    s2, m = x.branch(restore, lambda: session.restore_to_req(x, s, r, i, key_len), lambda: (s, tree_match))
    return s2, m, x.not_(restore)


@transition("managers/scheduler.py::Scheduler.get_new_batch_prefill (len(running_batch.reqs))", modifies=())
def running_bs(x: Ctx, s: State) -> Any:
    """`len(running_batch.reqs)`: the running requests and the finished ones not yet filtered. Both
    count for one request slot of a streaming session whose finished turn's Req is still in the
    batch while its next turn runs: they are two Req objects (session_controller.py makes a new Req
    per turn)."""
    return x.sum(x.ite(s.status[q] == RUNNING, 1, 0) + x.ite(s.unfiltered[q], 1, 0) for q in range(x.cfg.num_reqs))


@transition("managers/scheduler.py::Scheduler.get_num_allocatable_reqs", modifies=())
def allocatable_reqs(x: Ctx, s: State, ad: Adder) -> Any:
    """`get_num_allocatable_reqs(running_bs)`: pp_max_micro_batch_size (= max_running_requests = the
    rows) - running_bs, and from v0.5.12.post1 (`admission_free_rows`) at most the free rows (v0.5.23,
    `admission_rows_held`: plus the rows the admitted requests already hold)."""
    R = x.cfg.num_reqs
    pp_budget = x.p.req_pool_size - running_bs(x, s)
    if not x.on("admission_free_rows"):
        return pp_budget
    rows = s.req_pool_available
    if x.on("admission_rows_held"):
        rows = rows + x.sum(x.ite(x.and_(ad.can_run[q], x.not_(ad.fresh_slot[q])), 1, 0) for q in range(R))
    return x.min(pp_budget, rows)


@transition(
    "managers/scheduler.py::Scheduler.get_new_batch_prefill",
    modifies=( "full_available", "swa_available", "node_len", "node_device", "node_swa_tombstone",
        "cache_protected_len", "swa_branching_seqlen", "last_node", "swa_lock_top", "load_back_node", "load_back_swa_top",
        "needless_recompute", "kv_allocated_len", "kv_committed_len", "swa_evicted_seqlen", "slot_kv_allocated_len",
        "slot_kv_committed_len", "slot_swa_evicted_seqlen", "slot_is_active", "batch_is_full", *DRIFT_FIELDS),
)
def get_new_batch_prefill(x: Ctx, s: State) -> tuple[State, Adder]:
    """One PrefillAdder pass: the chunked request first, then the waiting queue until a result
    other than CONTINUE or until no req_to_token slot is left for another request.

    `running_batch.batch_is_full` (0.5.18:managers/scheduler.py:3198-3230, 3300-3345): hybrid SWA clears
    it at every pass (v0.5.12.post1+, `swa_clears_batch_is_full`), an empty running batch too (v0.5.22+,
    `batch_is_full_needs_running`); while it is set, or nobody waits, a pass with no chunked request
    returns before the adder. No row left for another request sets it, before the adder (no chunked
    request; v0.5.10.post1 tests `chunked_req is not None` there, `allocatable_precheck_unchunked` off)
    or in the loop, and so does a NO_TOKEN verdict (with HiCache, and from v0.5.22 always, only if a
    request was admitted or the running batch is not empty)."""
    cfg = x.cfg
    R = cfg.num_reqs
    chunked = x.or_(*[s.status[r] == CHUNKED for r in range(R)])
    full = s.batch_is_full
    if cfg.hybrid_swa and x.on("swa_clears_batch_is_full"):
        full = False
    running = running_bs(x, s) > 0
    if x.on("batch_is_full_needs_running"):
        full = x.and_(full, running)
    waiting = x.or_(*[s.status[r] == WAITING for r in range(R)])
    ad = prefill_adder.new_adder(x, s, running_bs(x, s) if cfg.mixed_chunk else 0)
    # the pass returns before the adder: nobody to admit, or batch_is_full without a chunked request
    skip = x.and_(x.or_(full, x.not_(waiting)), x.not_(chunked))
    precheck = x.not_(chunked) if x.on("allocatable_precheck_unchunked") else chunked
    no_rows = x.and_(x.not_(skip), precheck, allocatable_reqs(x, s, ad) <= 0)
    full = x.or_(full, no_rows)
    skip = x.or_(skip, no_rows)
    if cfg.chunked_prefill:
        for r in range(R):
            is_chunked = x.and_(s.status[r] == CHUNKED, x.not_(skip))
            ad = x.branch(is_chunked, lambda r=r: prefill_adder.add_chunked_req(x, s, ad, r)[0], lambda: ad)
    served_only = cfg.hicache or x.on("batch_is_full_needs_running")
    for r in range(R):
        admitted = x.sum(x.ite(ad.can_run[q], 1, 0) for q in range(R))
        reached = x.and_(s.status[r] == WAITING, x.not_(ad.stopped), x.not_(skip), x.not_(full))
        if x.on("pass_budget_break"):  # v0.5.23: a spent input or chunk budget admits no one
            reached = x.and_(reached, prefill_adder.budget_state(x, s, ad) != prefill_adder.OTHER)
        full = x.or_(full, x.and_(reached, admitted >= allocatable_reqs(x, s, ad)))
        consider = x.and_(reached, x.not_(full))

        def try_admit(r: int = r) -> tuple[State, Adder]:
            with x.scope(f"admit[{r}]"):
                s1, m, fresh = match_prefix(x, s, r)
                return prefill_adder.add_one_req(x, s1, ad, r, m, fresh)

        s, ad = x.branch(consider, try_admit, lambda: (s, ad))
        no_token = x.and_(consider, ad.result == prefill_adder.NO_TOKEN)
        if served_only:
            no_token = x.and_(no_token, x.or_(running, *ad.can_run))
        full = x.or_(full, no_token)
        s = x.checkpoint(f"admitted[{r}]", s)
        ad = x.ghost(f"admitted[{r}]", ad)
    return s.set(batch_is_full=full), ad


@transition(
    "managers/scheduler.py::Scheduler.process_batch_result_prefill",
    modifies=(
        "status", "output_len", "in_last_batch", "last_batch", "node_len", "node_device", "node_host",
        "node_swa_tombstone", "full_available", "swa_available", "req_pool_available",
        "cache_protected_len", "swa_evicted_seqlen", "swa_branching_seqlen", "last_node", "swa_lock_top", "slot_holding", "slot_kv_allocated_len",
        "slot_kv_committed_len", "slot_swa_evicted_seqlen", "slot_cache_protected_len", "slot_last_node",
        "slot_swa_lock_top", "slot_is_active", "slot_closed", "slot_turn_saved", "slot_detached", "load_back_node",
        "load_back_swa_top", *DRIFT_FIELDS, "oom"),
)
def process_batch_result_prefill(x: Ctx, s: State, ad: Adder, decoding: tuple = ()) -> State:
    """A request whose prefill completed gets its first output token; it finishes
    (`release_kv_cache`) or is cached (`cache_unfinished_req`) and joins the running batch. A
    truncated chunk stays the chunked request. Under mixed chunk the batch's `decoding_reqs` come
    after its extend requests: each got its token in `mix_with_running`; a finished one releases
    its KV, the others are not stashed."""
    R = x.cfg.num_reqs
    decoding = decoding or (False,) * R
    crash = radix_cache.rematches(x, False)  # a request's insert may kill the scheduler (OOM_ASSERT)
    for r in range(R):

        def result(r: int = r, s: State = s) -> State:
            ran = ad.can_run[r]
            chunk = x.and_(ran, ad.new_chunked[r])
            done = x.and_(ran, x.not_(ad.new_chunked[r]))
            out = s.output_len[r] + x.ite(done, 1, 0)
            # an aborted request finishes at its first token whatever its max_new_tokens (`to_finish`)
            finished = done if r in x.cfg.over_long else x.and_(done, out >= enqueue.max_new_tokens(x, s, r))
            s = s.req(r, output_len=out, in_last_batch=x.or_(ran, decoding[r]), status=x.ite(chunk, CHUNKED, s.status[r]))

            def finish() -> State:
                return _finish(x, s, r)

            def keep() -> State:
                # a later streaming turn (restored from its slot) skips the tree
                restored = s.last_node[r] == VIRTUAL
                s1 = x.branch(restored, lambda: s, lambda: radix_cache.cache_unfinished_req(x, s, r, f"unfinished[{r}]"))
                i = x.cfg.slot_of(r)
                if i is not None and x.variant("session_record") == "owned_at_alloc":
                    # v0.5.22: the first turn's prompt is published and the slot owns record and lock
                    # (not a turn detached from its session: its row is its own)
                    takes = x.and_(x.not_(restored), x.not_(s1.slot_detached[i]))
                    s1 = x.branch(takes, lambda: session.take(x, s1, r, i), lambda: s1)
                return s1.req(r, status=RUNNING)  # (also where its insert died: its prefill ended)

            return x.branch(finished, finish, lambda: x.branch(done, keep, lambda: s))

        # after SGLang's assertion killed the scheduler no later request's result is processed
        s = x.branch(s.oom == OOM_NONE, result, lambda: s) if crash else result()
        s = x.checkpoint(f"prefill result[{r}]", s)
    for r in range(R) if x.cfg.mixed_chunk else ():
        fin = x.and_(decoding[r], s.output_len[r] >= enqueue.max_new_tokens(x, s, r))
        if crash:
            fin = x.and_(fin, s.oom == OOM_NONE)
        s = x.branch(fin, lambda r=r: _finish(x, s, r), lambda: s)
        s = x.checkpoint(f"mixed decode result[{r}]", s)
    if crash:
        return s.set(last_batch=x.ite(s.oom == OOM_NONE, EXTEND_BATCH, s.last_batch))  # (never set where it died)
    return s.set(last_batch=EXTEND_BATCH)


def _finish(x: Ctx, s: State, r: int) -> State:
    """Request r finishes (release_kv_cache). Where the release dies on SGLang's assertion (v0.5.22,
    OOM_ASSERT) it is FINISHED too: SGLang set its finished_reason before the release (what
    `req.finished()` says when the scheduler dies), though its row was never freed."""
    return schedule_batch.release_kv_cache(x, s, r, True, f"finish[{r}]").req(r, status=FINISHED)


def _finish_decoded(x: Ctx, s: State, r: int) -> State:
    """A request finished by the decode batch stays in `running_batch.reqs` (`last_batch` after a
    decode) until `filter_batch` takes it out (`unfiltered`)."""
    return _finish(x, s, r).req(r, unfiltered=True)


def _filter_batch(x: Ctx, s: State) -> tuple[State, Any]:
    """`update_running_batch`'s `filter_batch` (0.5.18:managers/scheduler.py:3483-3488): the finished
    requests leave the running batch. Returns the state and whether any left."""
    R = x.cfg.num_reqs
    return s.set(unfiltered=(False,) * R), x.or_(*s.unfiltered)


@transition(
    "managers/scheduler.py::Scheduler.get_new_batch_prefill (mixed chunk) + ScheduleBatch.mix_with_running",
    modifies=("output_len", "kv_allocated_len", "kv_committed_len", "swa_evicted_seqlen", "node_len", "node_device",
              "node_host", "node_swa_tombstone", "full_available", "swa_available", "unfiltered", "oom", *DRIFT_FIELDS),
)
def mix_with_running(x: Ctx, s: State) -> tuple[State, tuple]:
    """Mixed chunked prefill (`--enable-mixed-chunk`; 0.5.18:managers/scheduler.py:3431-3447): once the
    extend batch is allocated, the running batch is filtered and, if any request is left, decodes in
    the same batch (`prepare_for_decode`: `alloc_for_decode` and one more token each), then the
    scheduler's running batch is an empty one. From v0.5.22 (`mixed_decode_mem_check`) only if
    `check_decode_mem()` passes (its eviction stands either way); otherwise the running batch sits
    out this step, still the running batch. Before, nothing checks: the decode may fail ('Decode
    out of memory'). Returns the state and the batch's `decoding_reqs`."""
    R = x.cfg.num_reqs
    s, _shrank = _filter_batch(x, s)
    batch = tuple(s.status[r] == RUNNING for r in range(R))
    go = x.or_(*batch)
    if x.on("mixed_decode_mem_check"):
        s, fits = x.branch(go, lambda: schedule_batch.check_decode_mem(x, s, batch, "mixed_check"), lambda: (s, False))
        go = x.and_(go, fits)

    def decode() -> State:
        s1 = schedule_batch.alloc_for_decode(x, s, batch)
        # a failed allocation raised inside prepare_for_decode: no forward, no token
        ok = s1.oom == OOM_NONE
        return s1.set(output_len=tuple(s1.output_len[r] + x.ite(x.and_(ok, batch[r]), 1, 0) for r in range(R)))

    s = x.branch(go, decode, lambda: s)
    return s, tuple(x.and_(go, batch[r]) for r in range(R))


def run_prefill_batch(x: Ctx, s: State, ad: Adder) -> State:
    s = x.checkpoint("allocated for extend", schedule_batch.alloc_for_extend(x, s, ad.can_run, ad.prefix, ad.extend, ad.fresh_slot))
    decoding: tuple = ()
    if x.cfg.mixed_chunk:
        with x.scope("mixed"):
            s, decoding = x.branch(s.oom == OOM_NONE, lambda: mix_with_running(x, s), lambda: (s, (False,) * x.cfg.num_reqs))
        s = x.checkpoint("mixed decode allocated", s)
    return x.branch(s.oom == OOM_NONE, lambda: process_batch_result_prefill(x, s, ad, decoding), lambda: s)


@transition(
    "managers/scheduler.py::Scheduler.update_running_batch + run_batch(decode) + process_batch_result_decode",
    modifies=(
        "status", "output_len", "kv_allocated_len", "kv_committed_len", "cache_protected_len", "swa_evicted_seqlen", "swa_branching_seqlen",
        "last_node", "swa_lock_top", "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available", "swa_available", "req_pool_available", "slot_holding",
        "slot_kv_allocated_len", "slot_kv_committed_len", "slot_swa_evicted_seqlen", "slot_cache_protected_len",
        "slot_last_node", "slot_swa_lock_top", "slot_is_active", "slot_closed", "slot_turn_saved", "slot_detached",
        "last_batch", "oom",
        "load_back_node", "load_back_swa_top", "needless_retract", "unfiltered", "batch_is_full", *DRIFT_FIELDS),
)
def run_decode_batch(x: Ctx, s: State) -> State:
    """`update_running_batch` (filter_batch, check_decode_mem, retract_decode), one decode (or EAGLE
    verify) step, then finished requests release their KV."""
    cfg = x.cfg
    R = cfg.num_reqs
    s, shrank = _filter_batch(x, s)
    batch = tuple(s.status[r] == RUNNING for r in range(R))
    s, fits = schedule_batch.check_decode_mem(x, s, batch, "check")
    s = x.checkpoint("decode memory checked", s)
    forced = x.choose_bool("test_retract") if cfg.test_retract else False
    s = x.branch(x.or_(x.not_(fits), forced), lambda: schedule_batch.retract_decode(x, s, fits, forced), lambda: s)
    s = x.checkpoint("retracted", s)
    retracted = x.or_(*[x.and_(batch[r], s.status[r] != RUNNING) for r in range(R)])
    # a batch that shrank (filtered or retracted) clears batch_is_full (0.5.18:...scheduler.py:3555-3557)
    s = s.set(batch_is_full=x.and_(s.batch_is_full, x.not_(x.or_(shrank, retracted))))
    batch = tuple(s.status[r] == RUNNING for r in range(R))
    crash = radix_cache.rematches(x, True)  # v0.5.22: a finish's checkpoint may die (OOM_ASSERT)

    def step() -> State:
        if cfg.spec is not None and cfg.spec.version == 2:
            s1 = speculative.spec_v2_decode_step(x, s, batch)
        elif cfg.spec is not None:
            s1 = speculative.eagle_decode_step(x, s, batch)
        else:
            s1 = schedule_batch.alloc_for_decode(x, s, batch)
            s1 = s1.set(output_len=tuple(s1.output_len[r] + x.ite(batch[r], 1, 0) for r in range(R)))
        s1 = x.checkpoint("decoded", s1)

        def results() -> State:
            s2 = s1
            for r in range(R):
                fin = x.and_(batch[r], s2.output_len[r] >= enqueue.max_new_tokens(x, s2, r))
                if crash:  # an earlier finish died on SGLang's assertion (OOM_ASSERT): no result follows
                    fin = x.and_(fin, s2.oom == OOM_NONE)
                s2 = x.branch(fin, lambda r=r: _finish_decoded(x, s2, r), lambda: s2)
                s2 = x.checkpoint(f"decode result[{r}]", s2)
            return s2.set(last_batch=x.ite(s2.oom == OOM_NONE, DECODE_BATCH, s2.last_batch) if crash else DECODE_BATCH)

        return x.branch(s1.oom == OOM_NONE, results, lambda: s1)

    return x.branch(x.or_(*batch), step, lambda: s.set(last_batch=NO_BATCH))


def event_loop_iteration(x: Ctx, s: State) -> State:
    """One iteration of `Scheduler.event_loop_normal`. The ghosts `needless_retract` and
    `needless_recompute` describe this iteration only (retract_decode and init_load_back set them)."""
    s = x.checkpoint("received", recv_requests(x, s.set(needless_retract=False, needless_recompute=False)))
    s = x.checkpoint("loads checked", hicache.loading_check(x, s))
    s = stash_chunked_req(x, s)
    if radix_cache.rematches(x, False):
        # a stash that died on SGLang's assertion (OOM_ASSERT) ends the iteration: no batch is built
        s = x.branch(s.oom == OOM_NONE, lambda: _batch(x, s), lambda: s)
    else:
        s = _batch(x, s)
    return x.checkpoint("iteration done", s)


def _batch(x: Ctx, s: State) -> State:
    """`get_next_batch_to_run` after the stash, `run_batch` and `process_batch_result`."""
    s, ad = get_new_batch_prefill(x, s)
    has_prefill = x.or_(*ad.can_run)
    has_running = x.or_(*[s.status[r] == RUNNING for r in range(x.cfg.num_reqs)])

    def prefill() -> State:
        with x.scope("prefill"):
            return run_prefill_batch(x, s, ad)

    def decode() -> State:
        with x.scope("decode"):
            return run_decode_batch(x, s)

    def idle() -> State:
        # a running batch of finished requests only still reaches update_running_batch: filtered
        # empty, it clears batch_is_full (0.5.18:managers/scheduler.py:3483-3488)
        s1, shrank = _filter_batch(x, s)
        return s1.set(last_batch=NO_BATCH, batch_is_full=x.and_(s1.batch_is_full, x.not_(shrank)))

    return x.branch(has_prefill, prefill, lambda: x.branch(has_running, decode, idle))


class System:
    """A model instance: a bounded config and a design. Engines drive it through `ctx`, `init`,
    `enabled` and `step`; it has one action (an event-loop iteration) whose nondeterminism is in
    its named choices."""

    actions = ACTIONS

    def __init__(self, cfg: Config, design: Design) -> None:
        self.cfg = cfg
        self.design = design

    def ctx(self, ops: Ops, p: Params, check_frames: bool = False) -> Ctx:
        return Ctx(ops, self.cfg, self.design, p, check_frames)

    def params_ok(self, x: Ctx) -> Any:
        return params_ok(x)

    def init(self, x: Ctx) -> State:
        return init_state(x)

    def enabled(self, x: Ctx, s: State, action: str = "event_loop_iteration") -> Any:
        """No step follows an allocation failure (SGLang raised and the scheduler died)."""
        return s.oom == OOM_NONE

    def step(self, x: Ctx, s: State, action: str = "event_loop_iteration") -> State:
        if action != "event_loop_iteration":
            raise KeyError(f"unknown action {action!r}; expected one of {list(ACTIONS)}")
        return event_loop_iteration(x, s)
