"""Strengthening invariants: facts about the correct model that the properties rely on.

Each lemma is checked like a property (the BMC engine proves it at every depth before asserting it
there, so a lemma that fails in some design is simply not used) and is what makes the deeper
queries local: with the lemmas assumed at step t-1, the query at step t is about one step. The
k-induction engine uses them the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from model.invariant_checker import holds_kv
from model.state import CHUNKED, FINISHED, NEW, OOM_NONE, ROOT, RUNNING, VIRTUAL, WAITING, State
from model.transition import Ctx
from model import enqueue, radix_cache
from specs.properties import locked_path, window_reads


@dataclass(frozen=True)
class Lemma:
    name: str
    meaning: str
    body: Callable[[Ctx, State], Any]

    def holds(self, x: Ctx, s: State) -> Any:
        """The lemma at `s`. A lemma describes the states a step leaves from, and no step leaves an
        allocation failure (`System.enabled`: SGLang raised and the scheduler died), so it holds
        there trivially. Sound: as an assumption it only ever meets enabled states; as a goal it
        no longer asks the solver to rule out the OOM itself, which is `no_prefill_oom`'s own proof
        (a HiCache case whose post-state was a failed extend: see docs/log/proofs.md)."""
        return x.or_(s.oom != OOM_NONE, self.body(x, s))


def _on_path(x: Ctx, node: Any, a: int) -> Any:
    return x.member(node, x.shape.covering[a])  # radix_cache._under's test: a lock at `node` covers a


def counters_exact(x: Ctx, s: State) -> Any:
    """SGLang's evictable/protected counters are exact: no drift from the lock bookkeeping."""
    return x.and_(s.full_evictable_drift == 0, s.full_protected_drift == 0,
                  s.swa_evictable_drift == 0, s.swa_protected_drift == 0)


def tree_shape(x: Ctx, s: State) -> Any:
    """Existing nodes hang off existing nodes; device nodes off device nodes; lengths are pages;
    an evicted node keeps a host copy; a backed-up node's ancestors are backed up (HiCache
    write-through, #25065). Without HiCache every node is on the device, so the parent suffices."""
    K = x.cfg.num_atoms
    c = []
    for a in range(K):
        p = x.shape.parent[a]
        L = s.node_len[a]
        c += [L >= 0, x.page_aligned(L)]
        c.append(x.implies(x.and_(L > 0, x.not_(s.node_device[a])), s.node_host[a]))
        if p >= 0 and x.cfg.owner(a) == x.cfg.owner(p):  # the private chain and the warm chain are prefixes
            c.append(x.implies(L > 0, s.node_len[p] > 0))
        # every present ancestor, not only the atom's parent: an absent atom between them (a spare
        # warm atom) is not a node, and a split can fill it with a node from above
        for b in x.shape.ancestors[a][1:] if x.cfg.hicache else ([p] if p >= 0 else []):
            # eviction takes device leaves only, so a device node's ancestors are on the device
            c.append(x.implies(x.and_(L > 0, s.node_device[a], s.node_len[b] > 0), s.node_device[b]))
            if x.cfg.hicache:  # write-through backs up parents first (#25065)
                c.append(x.implies(x.and_(L > 0, s.node_host[a], s.node_len[b] > 0), s.node_host[b]))
    return x.and_(*c)


def request_lengths(x: Ctx, s: State) -> Any:
    """Per request: what its status says about its lengths and its lock."""
    R = x.cfg.num_reqs
    c = [x.sum(x.ite(s.status[r] == CHUNKED, 1, 0) for r in range(R)) <= 1]  # one chunked_req
    for r in range(R):
        st = s.status[r]
        A, C, P, E = s.kv_allocated_len[r], s.kv_committed_len[r], s.cache_protected_len[r], s.swa_evicted_seqlen[r]
        fill = s.origin_input_len[r] + s.output_len[r]
        run = st == RUNNING
        chunk = st == CHUNKED
        holds = x.or_(run, chunk)
        c.append(x.implies(holds, x.and_(P >= 0, P <= C, C <= A, E >= 0, x.page_aligned(P), x.page_aligned(E), E <= C)))
        if x.cfg.spec is None:
            c.append(x.implies(holds, A == C))
        else:  # only a decode step over-allocates (spec v2's C + 2a): a chunk's extend ends at its C
            c.append(x.implies(chunk, A == C))
        # C = fill - 1 is `prompt_prefilled`'s to say: since the #31681 chunk-cap hatch a request whose
        # truncated chunk lost the adder's new_chunked_req slot runs with C < fill - 1 (a finding)
        c.append(x.implies(run, x.and_(C <= fill - 1, s.output_len[r] >= 1)))
        c.append(_node_present(x, s, s.last_node[r]))
        c.append(_node_present(x, s, s.load_back_node[r]))
        c.append(x.implies(chunk, x.and_(C < fill, C >= 1)))  # its first chunk was not empty (trunc > 0)
        mnt = enqueue.max_new_tokens(x, s, r)
        # (a request enqueued with max_new_tokens clipped to 0 waits, or, with chunked prefill, is admitted
        # as a truncated chunk (the chunk's gate charges no output): no output either way until its
        # prefill ends, when its first token finishes it)
        c.append(x.implies(x.or_(run, chunk, st == WAITING),
                           x.or_(s.output_len[r] < mnt, x.and_(x.or_(st == WAITING, chunk), s.output_len[r] == 0))))
        c.append(x.implies(x.or_(st == NEW, st == WAITING, st == FINISHED), x.or_(s.last_node[r] == ROOT, s.last_node[r] == VIRTUAL)))
        c.append(x.implies(x.or_(st == NEW, st == WAITING), x.not_(s.in_last_batch[r])))
        c.append(x.implies(st == NEW, x.and_(s.output_len[r] == 0, A == 0)))
        c.append(s.output_len[r] >= 0)
        c.append(s.output_len[r] <= x.max(mnt, 1) + (x.cfg.spec.num_draft_tokens if x.cfg.spec else 0))
        # the tree part of a tree-matched request is exactly the path to its lock node
        path = x.shape.path[r]
        plen: Any = 0
        for a in path:
            plen = plen + x.ite(_on_path(x, s.last_node[r], a), s.node_len[a], 0)
        c.append(x.implies(x.and_(holds, s.last_node[r] != VIRTUAL), P == plen))
    return x.and_(*c)


def _path_len(x: Ctx, s: State, r: int, node: Any) -> Any:
    return x.sum(x.ite(_on_path(x, node, a), s.node_len[a], 0) for a in x.shape.path[r])


def session_slots(x: Ctx, s: State) -> Any:
    """Slot lengths are consistent; the slot's tree part is the path to its lock node; a running
    turn uses the slot's row (virtual node, the slot's P) exactly when the slot holds KV and the turn
    has not detached from it; a detached turn was saved before, by a slot that still holds KV."""
    c = []
    for i, r in enumerate(x.cfg.streaming_sessions):
        A, C, P, E = (s.slot_kv_allocated_len[i], s.slot_kv_committed_len[i], s.slot_cache_protected_len[i],
                      s.slot_swa_evicted_seqlen[i])
        c.append(x.implies(s.slot_holding[i], x.and_(P >= 0, P <= C, C <= A, E >= 0)))
        c.append(x.implies(s.slot_closed[i], x.and_(x.not_(s.slot_holding[i]), s.status[r] == FINISHED)))
        c.append(x.implies(s.status[r] == FINISHED, x.or_(s.slot_holding[i], s.slot_closed[i])))
        c.append(x.implies(s.status[r] == NEW, x.and_(x.not_(s.slot_holding[i]), x.not_(s.slot_closed[i]), s.turn[r] == 0)))
        c.append(x.implies(s.slot_holding[i], _node_present(x, s, s.slot_last_node[i])))
        h = holds_kv(x, s, r)
        # a turn detached from its session (v0.5.11+ `finish_req_detach`) runs on a row of its own
        streams = x.and_(s.slot_holding[i], x.not_(s.slot_detached[i]))
        c.append(x.implies(h, streams == (s.last_node[r] == VIRTUAL)))
        c.append(x.implies(x.and_(h, streams), s.cache_protected_len[r] == P))
        c.append(x.implies(s.slot_detached[i], s.slot_turn_saved[i]))
        c.append(x.implies(s.slot_turn_saved[i], s.slot_holding[i]))
        if not x.on("finish_req_detach"):
            c += [x.not_(s.slot_turn_saved[i]), x.not_(s.slot_detached[i])]
        c.append(x.implies(s.slot_holding[i], P == _path_len(x, s, r, s.slot_last_node[i])))
        if x.cfg.spec is None:
            c.append(x.implies(s.slot_holding[i], A == C))
        # the slot's row is a prefix of the request's next fill (a later turn appends, a
        # retracted turn re-prefills input + output)
        fill = s.origin_input_len[r] + s.output_len[r]
        waiting = x.or_(s.status[r] == WAITING, s.status[r] == FINISHED)
        c.append(x.implies(x.and_(s.slot_holding[i], waiting), fill >= C + 1))
        # ... and a detached turn's, whatever it does: the slot took its C at a retraction, fill - 1
        c.append(x.implies(x.and_(s.slot_holding[i], s.slot_detached[i]), fill >= C + 1))
        c.append(x.implies(x.and_(s.turn[r] > 0, x.not_(s.slot_closed[i]), s.status[r] != FINISHED), s.slot_holding[i]))
    return x.and_(*c)


def chunked_fits(x: Ctx, s: State) -> Any:
    """Without hybrid SWA, a chunked request's remaining prefill fits the budget its admission
    reserved: add_one_req admitted it only if e + mnt + page_size < rem_total_tokens (e + mnt before
    #22495), each later chunk allocates exactly what it advances ceil(C), and nothing else runs
    between chunks (a truncated chunk ends the pass; prefill has priority over decode). So
    add_chunked_req never reaches its "must be added" fallback. Not under mixed chunk: there the running batch decodes
    beside every chunk, out of memory the chunk's admission counted (the BMC dropped it at depth 2). Not with
    `--truncation-align-size`: a chunk cut down to the alignment leaves chunk budget, so the pass goes on and
    admits a request after it (SGLang 0.5.23 does too: conformance row event_loop/paged_aligned), whose
    reserve the chunk's admission did not count (tests/engines/test_lemmas_hold.py, paged_aligned seed 16)."""
    from model import prefill_adder as pa

    if x.cfg.hybrid_swa or not x.cfg.chunked_prefill or x.cfg.mixed_chunk or x.cfg.truncation_align_size is not None:
        return True
    num, den = x.cfg.new_token_ratio
    R = x.cfg.num_reqs
    reserved = x.sum(x.ite(s.status[q] == RUNNING, num * pa.max_new_remaining(x, s, q), 0) for q in range(R))
    budget = den * (s.full_available + radix_cache.counters(x, s).full_evictable) - reserved
    c = []
    for r in range(R):
        fill = s.origin_input_len[r] + s.output_len[r]
        # the page the gate reserves since #22495 (v0.5.11); before it the gate charged extend + max_new
        reserve = x.ps if x.on("admission_page_reserve") else 0
        need = fill - x.ceil_page(s.kv_committed_len[r]) + pa.max_new_remaining(x, s, r) + reserve
        c.append(x.implies(s.status[r] == CHUNKED, budget > den * need))
    return x.and_(*c)


def pools_nonnegative(x: Ctx, s: State) -> Any:
    """Not stated: that the free counts stay whole pages. No property needs it (paged proves all six
    without it), and its step was the costly one on paged (unfinished after 50 minutes)."""
    c = [s.full_available >= 0, s.req_pool_available >= 0]
    if x.cfg.hybrid_swa:
        c.append(s.swa_available >= 0)
    return x.and_(*c)


def _one_of(x: Ctx, v: Any, values: list[int]) -> Any:
    return x.or_(*[v == k for k in values])


def _node_present(x: Ctx, s: State, node: Any) -> Any:
    """`node` is the root/virtual node, or an atom that exists on the device."""
    return x.and_(*[x.implies(node == a, x.and_(s.node_len[a] > 0, s.node_device[a])) for a in range(x.cfg.num_atoms)])


def typing(x: Ctx, s: State) -> Any:
    """Every field takes a value of its type: enums in range, node ids on the owner's path, and
    the fields of features the config does not have stay at their constant."""
    cfg = x.cfg
    c = [_one_of(x, s.last_batch, [0, 1, 2]), _one_of(x, s.oom, [0, 1, 2, 3, 4])]
    hyb, hic = cfg.hybrid_swa, cfg.hicache
    if not hyb:
        c += [s.swa_available == 0, s.swa_evictable_drift == 0, s.swa_protected_drift == 0]
    elif cfg.swa_ring:  # no SWA sub-allocator pages anything
        c.append(s.swa_available == 0)
    for a in range(cfg.num_atoms):
        L = s.node_len[a]
        c.append(x.implies(L == 0, x.and_(x.not_(s.node_host[a]), x.not_(s.node_swa_tombstone[a]))))
        if hic:
            c.append(x.implies(L == 0, x.not_(s.node_device[a])))
        else:
            c += [x.not_(s.node_host[a]), s.node_device[a]]
        if not hyb:
            c.append(x.not_(s.node_swa_tombstone[a]))
    for r in range(cfg.num_reqs):
        path = list(x.shape.path[r])
        session = cfg.slot_of(r) is not None
        c.append(_one_of(x, s.status[r], [0, 1, 2, 3, 4]))
        c.append(_one_of(x, s.last_node[r], [ROOT] + path + ([VIRTUAL] if session else [])))
        c.append(_one_of(x, s.swa_lock_top[r], [ROOT] + (path if hyb else [])))
        c.append(_one_of(x, s.load_back_node[r], [ROOT] + (path if hic else [])))
        c.append(_one_of(x, s.load_back_swa_top[r], [ROOT] + (path if (hic and hyb) else [])))
        c.append(x.implies(s.in_last_batch[r], s.last_batch == 1))
        # a finished Req still in the running batch: this request finished by a decode (a session's
        # may be its previous turn, the next one already here); from v0.5.23 only until the next pass
        if session:
            c.append(x.implies(s.unfiltered[r], x.or_(s.status[r] == FINISHED, s.turn[r] > 0)))
        else:
            c.append(x.implies(s.unfiltered[r], x.and_(s.status[r] == FINISHED, x.not_(s.in_last_batch[r]))))
        if x.on("filter_running_every_step"):
            c.append(x.implies(s.unfiltered[r], s.last_batch == 2))
        c.append(s.origin_input_len[r] >= 1)
        if not hyb:
            c.append(s.swa_evicted_seqlen[r] == 0)
        if hyb and x.on("swa_branching_insert"):
            c += [s.swa_branching_seqlen[r] >= 0, x.page_aligned(s.swa_branching_seqlen[r])]
        else:
            c.append(s.swa_branching_seqlen[r] == 0)
        if session:
            c += [s.turn[r] >= 0, s.turn[r] < cfg.max_turns]
        else:
            c.append(s.turn[r] == 0)
            c.append(s.origin_input_len[r] == cfg.prompt_len(x.p, r))
        if not cfg.chunked_prefill:
            c.append(s.status[r] != CHUNKED)
    for i, r in enumerate(cfg.streaming_sessions):
        path = list(x.shape.path[r])
        c.append(_one_of(x, s.slot_last_node[i], [ROOT] + path))
        c.append(_one_of(x, s.slot_swa_lock_top[i], [ROOT] + (path if hyb else [])))
        if not hyb:
            c.append(s.slot_swa_evicted_seqlen[i] == 0)
    return x.and_(*c)


def _at_or_above(x: Ctx, top: Any, node: Any, path: Any) -> Any:
    """`top` is ROOT, or an atom of `path` that is `node` or one of its ancestors."""
    return x.or_(top == ROOT, *[x.and_(top == t, _on_path(x, node, t)) for t in path])


def swa_locks(x: Ctx, s: State) -> Any:
    """Hybrid SWA: a lock's `swa_uuid_for_lock` node is the lock node or one of its ancestors (or
    None): `inc_lock_ref(node)` walks up from `node` and records the node where the window is
    reached, and every locker records the pair (node, uuid) together (ROOT, ROOT when unlocked)."""
    if not x.cfg.hybrid_swa:
        return True
    c = []
    for r in range(x.cfg.num_reqs):
        path = x.shape.path[r]
        c.append(_at_or_above(x, s.swa_lock_top[r], s.last_node[r], path))
        if x.cfg.hicache:
            c.append(_at_or_above(x, s.load_back_swa_top[r], s.load_back_node[r], path))
    for i, r in enumerate(x.cfg.streaming_sessions):
        c.append(_at_or_above(x, s.slot_swa_lock_top[i], s.slot_last_node[i], x.shape.path[r]))
    return x.and_(*c)


def swa_window_locked(x: Ctx, s: State) -> Any:
    """Hybrid SWA: every node of a request's locked path that reaches into the window of its next
    token (ends after C + 1 - W) lies inside its SWA lock (at or below `swa_uuid_for_lock`'s
    node), so no eviction can tombstone it. `inc_lock_ref` locks the nodes from the lock node up
    to the one where W tokens are reached (P - W and earlier), and C >= P only moves the window
    later; a lock re-taken at a stash walks from the new, deeper node."""
    if not x.cfg.hybrid_swa or getattr(x.cfg, "swa_ring", False):
        return True
    c = []
    for r in range(x.cfg.num_reqs):
        ln = s.last_node[r]
        ends = locked_path(x, s, r, ln)[2]
        for a, reads in window_reads(x, s, r, ends, holds_kv(x, s, r), ln != VIRTUAL):  # what `residency` reads
            c.append(x.implies(reads, radix_cache._at_or_below(x, s.swa_lock_top[r], a)))
    return x.and_(*c)


def load_backs(x: Ctx, s: State) -> Any:
    """HiCache: a load-back's lock lives from the prefill pass that loaded it to the next
    iteration's `loading_check`, so between iterations only a request of the last pass holds one:
    one admitted (in the last batch; if it still holds KV, locked at or below the loaded node, as
    its stash only goes deeper) or one still waiting."""
    if not x.cfg.hicache:
        return True
    c = []
    for r in range(x.cfg.num_reqs):
        st = s.status[r]
        loading = s.load_back_node[r] != ROOT
        c.append(x.implies(loading, x.or_(s.in_last_batch[r], st == WAITING)))
        c.append(x.implies(x.and_(loading, s.in_last_batch[r], x.or_(st == RUNNING, st == CHUNKED)),
                           _at_or_above(x, s.load_back_node[r], s.last_node[r], x.shape.path[r])))
    return x.and_(*c)


def request_rows(x: Ctx, s: State) -> Any:
    """A request that does not hold KV has an empty row: NEW and WAITING requests have A = C = P = 0
    and E = 0 (a retraction resets all four, as does the next turn of a session), and so does
    a chunked request's E: the admission sets E from the match (0 outside sessions) and
    `_evict_swa` only runs in a decode step, on running requests. (So the stash of a chunked
    request, which inserts with E = P, never frees SWA slots it released.) With
    `unfinished_swa_release` its stashes release SWA below E' <= floor(C) and (`path`) set
    P := floor(C): E <= P (the `rematch` variant can end P short of E': then the lemma is false and
    not used). With `swa_branching_insert` (v0.5.20) a stash cut at the match's branching point sets
    P := branching and then releases from C - 1, which can pass P (a request re-admitted past its own
    SWA-tombstoned chain, then chunked beyond the branching point by more than the window): then
    P > 0, the branching point is forgotten and E <= floor(C), until the next stash sets
    P := floor(C). A request that has not arrived yet has inserted nothing: its private chain is
    empty (only r inserts into it). Without a tree (`chunk_cache`) each extend first releases the request's
    out-of-window SWA, a chunked one's too: its E is within its C."""
    c = []
    for r in range(x.cfg.num_reqs):
        st = s.status[r]
        idle = x.or_(st == NEW, st == WAITING)
        c.append(x.implies(idle, x.and_(s.kv_allocated_len[r] == 0, s.kv_committed_len[r] == 0,
                                        s.cache_protected_len[r] == 0, s.swa_evicted_seqlen[r] == 0)))
        if x.cfg.slot_of(r) is None:
            if x.cfg.chunk_cache:  # each extend releases the chunked request's out-of-window SWA (P = 0)
                c.append(x.implies(st == CHUNKED, s.swa_evicted_seqlen[r] <= s.kv_committed_len[r]))
            elif x.cfg.hybrid_swa and x.on("unfinished_swa_release") and x.on("swa_branching_insert"):
                # a stash cut at the branching point sets P := branching > 0, forgets the branching
                # point and releases from C - 1: E may pass P, never floor(C); the next stash sets
                # P := floor(C) >= E again
                E, P = s.swa_evicted_seqlen[r], s.cache_protected_len[r]
                cut = x.and_(s.swa_branching_seqlen[r] == 0, P > 0, E <= x.floor_page(s.kv_committed_len[r]))
                c.append(x.implies(st == CHUNKED, x.or_(E <= P, cut)))
            elif x.cfg.hybrid_swa and x.on("unfinished_swa_release"):
                c.append(x.implies(st == CHUNKED, s.swa_evicted_seqlen[r] <= s.cache_protected_len[r]))
            else:
                c.append(x.implies(st == CHUNKED, s.swa_evicted_seqlen[r] == 0))
            c.append(x.implies(st == NEW, x.and_(*[s.node_len[a] == 0 for a in x.shape.private[r]])))
    return x.and_(*c)


def private_chains(x: Ctx, s: State) -> Any:
    """Outside sessions and HiCache, a running request's private chain is exactly the path to its
    lock node: its prefill ended with `cache_unfinished_req` over all of [0, floor(C)), which
    covers every node of its chain (each ends at or before the C of an earlier pass, and C only
    grows) and locks the deepest; eviction only removes unlocked leaves. A request that still
    needs its prefill has a chain no longer than its fill minus one (the chain ends at or before
    an earlier C, and a running C is fill - 1). Between its chunks a chunked request's tree part is
    its whole floor(C). With HiCache only the length bounds: an evicted node of the chain stays on
    the host, off the lock path, but it still holds tokens the request inserted from its own C.
    Without a tree (`chunk_cache`) no node exists and every P is 0."""
    if x.cfg.chunk_cache:  # no tree: no node ever exists, no request holds a tree part
        return x.and_(*[n == 0 for n in s.node_len], *[p == 0 for p in s.cache_protected_len])
    c = []
    hic = x.cfg.hicache
    for r in range(x.cfg.num_reqs):
        if x.cfg.slot_of(r) is not None:
            continue
        st = s.status[r]
        chain = x.shape.private[r]
        for a in chain if not hic else ():
            c.append(x.implies(x.and_(st == RUNNING, s.node_len[a] > 0), _on_path(x, s.last_node[r], a)))
        total = x.sum(s.node_len[a] for a in chain)
        fill = s.origin_input_len[r] + s.output_len[r]
        c.append(x.implies(x.or_(st == WAITING, st == CHUNKED, st == RUNNING), total <= fill - 1))
        # Without output the request was never retracted (only a running request, which has an
        # output token, is): a waiting one has inserted nothing yet, and a chunked one has built
        # its chain only with its own stashes, each of which locked its last node.
        fresh = s.output_len[r] == 0
        c.append(x.implies(x.and_(st == WAITING, fresh), total == 0))
        for a in chain:
            c.append(x.implies(x.and_(st == CHUNKED, fresh, s.node_len[a] > 0), _on_path(x, s.last_node[r], a)))
        # Every stash covers [P, floor(C)) entirely, retracted or not: where it ends inside a node
        # of the request's chain left from before a retraction, the node is split
        # (radix_cache.split_node). Between its chunks (not in the last batch) that is all of C
        # (with `swa_branching_insert` a stash may stop at the match's branching point instead).
        if not (x.cfg.hybrid_swa and x.on("swa_branching_insert")):
            c.append(x.implies(x.and_(st == CHUNKED, x.not_(s.in_last_batch[r])),
                               s.cache_protected_len[r] == x.floor_page(s.kv_committed_len[r])))
    return x.and_(*c)


def warm_prefix(x: Ctx, s: State) -> Any:
    """The warm chain's nodes lie within the warm prefix's tokens (an insert splits a warm node,
    never extends it), and where the chain cannot split (one atom, no spare) a warm node keeps its
    length until it is evicted whole. Outside sessions and HiCache, a request's tokens in the tree
    (the warm prefix on its path, then its private chain) end at or before an earlier C, so within
    its fill minus one: its chain starts after the warm nodes present when it was built, and those
    stay while it hangs below them."""
    cfg = x.cfg
    warm = cfg.warm_chain()
    if len(warm) == 1:
        c = [x.or_(s.node_len[0] == 0, s.node_len[0] == x.p.warm_len[0])]
    else:
        c = [x.sum(s.node_len[a] for a in warm) <= x.sum(x.p.warm_len)] if warm else []
    for r in range(x.cfg.num_reqs):
        if x.cfg.slot_of(r) is not None or x.cfg.hicache or not x.cfg.shares(r):
            continue
        st = s.status[r]
        chain = x.shape.private[r]
        on_path = x.sum(s.node_len[a] for a in x.shape.path[r])
        fill = s.origin_input_len[r] + s.output_len[r]
        c.append(x.implies(x.and_(x.or_(st == WAITING, st == CHUNKED, st == RUNNING), s.node_len[chain[0]] > 0),
                           on_path <= fill - 1))
    return x.and_(*c)


LEMMAS: dict[str, Lemma] = {
    lm.name: lm
    for lm in [
        Lemma("typing", "every field holds a value of its type; absent features keep their constants", typing),
        Lemma("counters_exact", "SGLang's evictable/protected counters have no drift from the lock bookkeeping", counters_exact),
        Lemma("tree_shape", "chains are prefixes, device nodes under device nodes, host copies under host copies, page-aligned lengths", tree_shape),
        Lemma("request_lengths", "a request's status fixes its length relations and its tree prefix", request_lengths),
        Lemma("session_slots", "session slots hold consistent lengths; a restored turn's slot holds KV", session_slots),
        Lemma("chunked_fits", "a chunked request's remaining prefill fits what its admission reserved", chunked_fits),
        Lemma("pools_nonnegative", "allocators never go below zero", pools_nonnegative),
        Lemma("swa_locks", "a lock's swa_uuid_for_lock node is the lock node or one of its ancestors", swa_locks),
        Lemma("swa_window_locked", "hybrid SWA: a request's path nodes inside its next token's window are inside its SWA lock", swa_window_locked),
        Lemma("load_backs", "HiCache: only a request of the last prefill pass holds a load-back lock, at or above its own", load_backs),
        Lemma("request_rows", "NEW/WAITING rows are empty, a chunked request has released no SWA (none beyond P with unfinished_swa_release), a NEW request's chain is empty", request_rows),
        Lemma("private_chains", "a running request's private chain is the path to its lock node; chains are shorter than the fill", private_chains),
        Lemma("warm_prefix", "warm nodes keep their length or are gone; a request's path holds less than its fill", warm_prefix),
    ]
}
