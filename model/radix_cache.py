"""The radix tree: `RadixCache`, `SWARadixCache`, and the HiCache residency of `HiRadixCache` /
`UnifiedRadixCache` (host copies, evicted-but-backed-up nodes); the eviction an allocation asks for
(`evict_from_tree_cache`) and the release of a request's out-of-window SWA slots
(`free_swa_out_of_window_slots`).

SGLang files (paths under python/sglang/srt/): `mem_cache/radix_cache.py`, `mem_cache/common.py`;
`mem_cache/swa_radix_cache.py` and `mem_cache/hiradix_cache.py` up to v0.5.20 (removed in 0.5.21);
`mem_cache/unified_radix_cache.py` (v0.5.11+) with `mem_cache/unified_cache/` (v0.5.17+), which
builds the hybrid-SWA tree from v0.5.16 and, in 0.5.23, the tree of every kvmc config
(mem_cache/registry.py::default_radix_cache_factory).

Modelled: node lengths and residency; SWA tombstones; locks with SGLang's walk (full lock from the
node to the root; SWA lock from the node upward while fewer than W SWA tokens are locked, whole
nodes; the node that reaches W carries `swa_uuid_for_lock`); insert with `prev_prefix_len` and
`swa_evicted_seqlen` (a tombstone part and a normal part, nothing inserted when the whole new
range is out of the window); duplicates freed by the inserter; leaf-first eviction, SWA-only
tombstoning of internal nodes (UnifiedRadixCache: also of a node whose last child the same
eviction deletes).

Locks and counters. A lock is held by a *locker*: a running request (`last_node`,
`swa_uuid_for_lock`), a session slot, an in-flight load-back, or the PrefillAdder's temporary
lock. SGLang keeps `lock_ref` per node and `evictable_size_` / `protected_size_` per pool as
counters updated on every 0<->1 transition; when that bookkeeping is right they equal the number
of lockers at or below a node and the sizes of the unlocked / locked device nodes. kvmc derives
them from the lockers, and adds a per-counter *drift* (0 unless a planted bug makes SGLang's
counter wrong), so `evictable_size()` here is what SGLang's counter reports. Deriving them keeps
the solver away from proving the bookkeeping at every step; a bookkeeping bug is modelled as the
drift it causes (model/mutants/).

Abstracted (and why it is sound for the properties checked):
* Nodes sit at fixed positions (atoms, model/config.py). A node split happens in SGLang when a
  match or insert ends inside a node. Matches end at atom boundaries here (a request's key never
  ends inside a node of its own chain, which ends at or before an earlier C, nor inside the warm
  prefix, which its prompt covers). An insert that ends inside a node splits it (`split_node`: the
  head keeps the atom, the tail and everything below it move one atom down the chain, the request's
  private chain or the warm chain, whose `warm_spare_atoms` take the tails). A split that would
  need an atom past the chain's end is outside the bounded instance (an assumption, like the
  chain lengths themselves).
* Eviction order: SGLang evicts LRU leaves one at a time until enough is freed. kvmc lets
  eviction pick *any* set of evictable leaves (leaf-peeling) that is enough, or all there is, and
  whose last node was needed (some evicted node or tombstone the set is not enough without): every
  LRU order under every access history gives such a set; an over-approximation, sound for safety
  properties. (Before `kvmc conform` checked it against SGLang, *every* evicted node had to be
  needed, which excluded LRU evicting a small old leaf and then a large one.)
* SWA locks skip tombstones (as UnifiedRadixCache does; SWARadixCache asserts none is met).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from . import allocator
from .designs import leaf_window_cap
from .state import OOM_ASSERT, ROOT, State
from .transition import Ctx, transition

DRIFT_FIELDS = ("full_evictable_drift", "full_protected_drift", "swa_evictable_drift", "swa_protected_drift")
Locker = tuple  # (active, node, swa_uuid_node)


def on_device(x: Ctx, s: State, a: int) -> Any:
    return x.and_(s.node_len[a] > 0, s.node_device[a])


def _under(x: Ctx, node: Any, a: int) -> Any:
    """Atom a is `node` or one of its ancestors (a lock taken at `node` covers a)."""
    return x.member(node, x.shape.covering[a])


def _at_or_below(x: Ctx, top: Any, a: int) -> Any:
    """Atom a is `top` or below it; everything is below ROOT (a uuid of None: unlock to the root)."""
    return x.member(top, (ROOT, *x.shape.ancestors[a]))


def lockers(x: Ctx, s: State, extra: Sequence[Locker] = ()) -> list[Locker]:
    """Everyone holding a lock: requests, in-flight load-backs, session slots, plus `extra`."""
    out: list[Locker] = []
    for r in range(x.cfg.num_reqs):
        out.append((True, s.last_node[r], s.swa_lock_top[r]))
        if x.cfg.hicache:
            out.append((True, s.load_back_node[r], s.load_back_swa_top[r]))
    for i in range(len(x.cfg.streaming_sessions)):
        out.append((s.slot_holding[i], s.slot_last_node[i], s.slot_swa_lock_top[i]))
    return out + list(extra)


def full_locked(x: Ctx, s: State, extra: Sequence[Locker] = ()) -> list[Any]:
    """Per atom: `full_lock_ref > 0`."""
    ls = lockers(x, s, extra)
    K = x.cfg.num_atoms
    return [x.or_(*[x.and_(act, _under(x, n, a)) for act, n, _t in ls]) for a in range(K)]


def swa_locked(x: Ctx, s: State, extra: Sequence[Locker] = ()) -> list[Any]:
    """Per atom: `swa_lock_ref > 0` (covered from a locker's node up to its uuid node)."""
    if not x.cfg.hybrid_swa:
        return [False] * x.cfg.num_atoms
    ls = lockers(x, s, extra)
    return [
        x.and_(x.not_(s.node_swa_tombstone[a]), x.or_(*[x.and_(act, _under(x, n, a), _at_or_below(x, t, a)) for act, n, t in ls]))
        for a in range(x.cfg.num_atoms)
    ]


def lock_refs(x: Ctx, s: State) -> tuple[list[Any], list[Any]]:
    """`full_lock_ref` and `swa_lock_ref` per atom (for reports and well-formedness)."""
    ls = lockers(x, s)
    K = x.cfg.num_atoms
    full = [x.sum(x.ite(x.and_(act, _under(x, n, a), s.node_len[a] > 0), 1, 0) for act, n, _t in ls) for a in range(K)]
    if not x.cfg.hybrid_swa:
        return full, [0] * K
    seg = x.on("swa_segment_lock")  # since v0.5.20 a tombstone on the walk is locked too
    swa = [
        x.sum(x.ite(x.and_(act, _under(x, n, a), _at_or_below(x, t, a), s.node_len[a] > 0,
                           True if seg else x.not_(s.node_swa_tombstone[a])), 1, 0)
              for act, n, t in ls)
        for a in range(K)
    ]
    return full, swa


@dataclass(frozen=True)
class Counters:
    """`full_evictable_size()`, `full_protected_size()`, `swa_evictable_size()`, `swa_protected_size()`."""

    full_evictable: Any
    full_protected: Any
    swa_evictable: Any
    swa_protected: Any


MEMO_SIZE = 64


def counters(x: Ctx, s: State, extra: Sequence[Locker] = ()) -> Counters:
    """The tree's four size counters for state `s` (with `extra` lockers). Without `extra` the
    result is kept per state in `x.memo`: the adder, the busy check, the properties and the replay
    ask for the same state's counters several times a step."""
    if not extra:
        hit = x.memo.get(("counters", id(s)))
        if hit is not None and hit[0] is s:
            return hit[1]
    c = _counters(x, s, extra)
    if not extra:
        if len(x.memo) >= MEMO_SIZE:
            x.memo.clear()
        x.memo[("counters", id(s))] = (s, c)
    return c


def _counters(x: Ctx, s: State, extra: Sequence[Locker]) -> Counters:
    K = x.cfg.num_atoms
    dev = [on_device(x, s, a) for a in range(K)]
    fl = full_locked(x, s, extra)
    fe = x.sum(x.ite(x.and_(dev[a], x.not_(fl[a])), s.node_len[a], 0) for a in range(K)) + s.full_evictable_drift
    fp = x.sum(x.ite(x.and_(dev[a], fl[a]), s.node_len[a], 0) for a in range(K)) + s.full_protected_drift
    if not x.cfg.hybrid_swa:
        return Counters(fe, fp, 0, 0)
    sl = swa_locked(x, s, extra)
    sdev = [x.and_(dev[a], x.not_(s.node_swa_tombstone[a])) for a in range(K)]
    se = x.sum(x.ite(x.and_(sdev[a], x.not_(sl[a])), s.node_len[a], 0) for a in range(K)) + s.swa_evictable_drift
    sp = x.sum(x.ite(x.and_(sdev[a], sl[a]), s.node_len[a], 0) for a in range(K)) + s.swa_protected_drift
    return Counters(fe, fp, se, sp)


@transition("mem_cache/common.py::free_swa_out_of_window_slots (the release bounds)", modifies=())
def swa_release_bounds(x: Ctx, s: State, r: int, pre_len: Any) -> tuple[Any, Any]:
    """`free_swa_out_of_window_slots` (mem_cache/common.py since v0.5.14; before it
    `ScheduleBatch._evict_swa`): request r's SWA cursor E is first raised to
    `cache_protected_len` (the tree owns [0, P); nothing is freed for it), then the slots
    [E, E') that slid out of the window go, with E' = floor_page(max(E, pre_len - keep)). `keep`
    is the `swa_release_threshold` variant: W + page_size (off, v0.5.11-v0.5.14; W alone before #22470,
    `swa_release_page_margin`), max(W, page_size)
    (#29860, v0.5.15.post1-v0.5.22), ceil_page(max(W, page_size)) (v0.5.23). Returns (E, E').
    `swa_evict_floor` (prefill-aware SWA) is not modelled: it is 0, so the floor is P."""
    W, ps = x.p.sliding_window_size, x.ps
    E = x.max(s.swa_evicted_seqlen[r], s.cache_protected_len[r])
    v = x.variant("swa_release_threshold")
    if v is None:
        keep = W + ps if x.on("swa_release_page_margin") else W
    elif x.cfg.chunk_cache:
        # no tree, so no tombstone leaf to keep a page for: the window alone from 0.5.14
        # (0.5.18:mem_cache/common.py::free_swa_out_of_window_slots `is_chunk_cache`; 0.5.22+
        # `not supports_prefix_sharing`), <= 0.5.13 as for a radix cache
        keep = W
    elif v == "max_w_ps":
        keep = x.max(W, ps)
    else:
        keep = x.ceil_page(x.max(W, ps))
    return E, x.max(E, x.floor_page(pre_len - keep))


@transition("mem_cache/common.py::free_swa_out_of_window_slots", modifies=("swa_evicted_seqlen", "swa_available"))
def free_swa_out_of_window_slots(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    """Release request r's SWA slots that slid out of the window: [E, E') of `swa_release_bounds`,
    E := E'. Decode's `_evict_swa` and (with `unfinished_swa_release`) `cache_unfinished_req`."""
    E, target = swa_release_bounds(x, s, r, pre_len)
    s = allocator.free_swa(x, s, target - E)
    return s.req(r, swa_evicted_seqlen=target)


@transition("mem_cache/swa_radix_cache.py::SWARadixCache.inc_lock_ref", modifies=DRIFT_FIELDS)
def inc_lock_ref(x: Ctx, s: State, node: Any) -> tuple[State, Any]:
    """Lock `node`..root (full) and the nearest >= W SWA tokens; returns swa_uuid_for_lock's node.

    The walk goes up from `node` while fewer than W tokens are covered. Before `swa_segment_lock`
    (<= v0.5.19; UnifiedRadixCache's `skip_lock_node_ids`) a tombstone is skipped and only live SWA
    tokens count; with it (#36848, v0.5.20, `acquire_component_lock`) every node's length counts,
    tombstones included, and each is locked (a tombstone holds no SWA, so the counters see only
    the live nodes of the segment either way). The caller records the lock (the request's
    `last_node` / `swa_uuid_for_lock`); lock refs and the evictable/protected counters follow
    from the lockers (module docstring)."""
    if not x.cfg.hybrid_swa or x.cfg.num_atoms == 0:
        return s, ROOT
    K = x.cfg.num_atoms
    W = x.p.sliding_window_size
    seg = x.on("swa_segment_lock")
    on = [x.and_(_under(x, node, a), s.node_len[a] > 0) for a in range(K)]
    counts = [x.and_(on[a], True if seg else x.not_(s.node_swa_tombstone[a])) for a in range(K)]
    covered = [x.ite(counts[a], s.node_len[a], 0) for a in range(K)]
    top: Any = ROOT
    for a in range(K):
        before = x.sum(covered[b] for b in x.shape.descendants[a])  # tokens counted below a on the walk
        reaches = x.and_(counts[a], before < W, before + s.node_len[a] >= W)
        top = x.ite(reaches, a, top)
    return s, top


@transition("mem_cache/swa_radix_cache.py::SWARadixCache.dec_lock_ref", modifies=DRIFT_FIELDS)
def dec_lock_ref(x: Ctx, s: State, node: Any, swa_uuid_node: Any) -> State:
    """Unlock `node`..root (full) and the SWA locks from `node` up to the uuid node (root if none).
    The caller drops the lock record; nothing else changes when the bookkeeping is right."""
    return s


@dataclass(frozen=True)
class MatchResult:
    """`MatchResult` of `match_prefix`: device prefix, its last node, HiCache host hits."""

    prefix_len: Any  # len(device_indices)
    last_device_node: Any
    best_match_node: Any
    host_hit_length: Any  # Full-KV tokens on host after last_device_node
    swa_host_hit_length: Any  # SWA tokens to load: host nodes in best_match_node's window (#27391)
    host_atoms: tuple  # per atom: part of the host hit
    host_in_window: tuple  # per atom: part of the host hit and inside the SWA window
    cache_protected_len: Any  # MatchResult.cache_protected_len (a session slot's), else prefix_len
    swa_evicted_seqlen: Any  # a restored session row's E, else 0
    swa_branching_seqlen: Any = 0  # floor_page(Full-KV hit) past the SWA-valid prefix, else 0 (v0.5.20)

    def merge(self, ops: Any, c: Any, other: "MatchResult") -> "MatchResult":
        def m(a: Any, b: Any) -> Any:
            if isinstance(a, tuple):
                return tuple(ops.ite(c, u, v) for u, v in zip(a, b))
            return ops.ite(c, a, b)

        return MatchResult(*(m(getattr(self, f), getattr(other, f)) for f in self.__dataclass_fields__))


@transition("mem_cache/swa_radix_cache.py::SWARadixCache.match_prefix", modifies=())
def match_prefix(x: Ctx, s: State, r: int, key_len: Any) -> MatchResult:
    """`match_prefix` for request slot r's key (its fill ids minus the last token).

    SWA rule (`SWARadixCache._match_prefix_helper`): the match ends at the deepest node such that
    the path has no tombstone, or at least W non-tombstone tokens after the last one. HiCache:
    evicted-but-backed-up nodes right after the device match are a host hit; the SWA part of the
    host hit is the host nodes met walking up from the best match until W tokens are covered."""
    if x.cfg.chunk_cache:  # ChunkCache.match_prefix: always a miss
        no = tuple(False for _ in range(x.cfg.num_atoms))
        return MatchResult(0, ROOT, ROOT, 0, 0, no, no, 0, 0)
    K = x.cfg.num_atoms
    key = x.floor_page(key_len)
    hybrid = x.cfg.hybrid_swa
    W = x.p.sliding_window_size if hybrid else 0
    pos: Any = 0
    ok: Any = True  # still walking device nodes
    seen_tomb: Any = False
    after_tomb: Any = 0
    prefix: Any = 0
    last: Any = ROOT
    walk_end: Any = ROOT  # deepest device node walked (physically matched)
    for a in x.shape.path[r]:
        L = s.node_len[a]
        e = L > 0
        end = pos + L
        step_ok = x.and_(ok, x.or_(x.not_(e), x.and_(s.node_device[a], end <= key)))
        if hybrid:
            t = s.node_swa_tombstone[a]
            seen_tomb = x.or_(seen_tomb, x.and_(step_ok, e, t))
            after_tomb = x.ite(x.and_(step_ok, e), x.ite(t, 0, after_tomb + L), after_tomb)
            valid = x.or_(x.not_(seen_tomb), after_tomb >= W)
            if x.cfg.swa_ring:  # a ring is not in the tree: a device tombstone is a valid end (v0.5.20 swa.py:326-338)
                valid = x.or_(valid, t)
        else:
            valid = True
        hit = x.and_(step_ok, e, valid)
        prefix = x.ite(hit, end, prefix)
        last = x.ite(hit, a, last)
        walk_end = x.ite(x.and_(step_ok, e), a, walk_end)
        ok = step_ok
        pos = x.ite(e, end, pos)
    if not x.cfg.hicache:
        zero = tuple(False for _ in range(K))
        return MatchResult(prefix, last, last, 0, 0, zero, zero, prefix, 0, _branching(x, s, r, key, prefix))
    # host continuation: only right after a device match that ended at its physical end
    hpos: Any = prefix
    hok: Any = last == walk_end
    in_host = [False] * K
    host_hit: Any = 0
    best: Any = last
    path = x.shape.path[r]
    for a in path:
        L = s.node_len[a]
        e = L > 0
        below = x.or_(walk_end == ROOT, *[walk_end == b for b in x.shape.ancestors[a][1:]])  # strictly below
        cand = x.and_(hok, below, e)
        take = x.and_(cand, x.not_(s.node_device[a]), s.node_host[a], hpos + L <= key)
        # a device node, or a node without a host copy, ends the host hit
        hok = x.and_(hok, x.or_(x.not_(x.and_(below, e)), take))
        in_host[a] = take
        host_hit = host_hit + x.ite(take, L, 0)
        hpos = x.ite(take, hpos + L, hpos)
        best = x.ite(take, a, best)
    in_window = [False] * K
    swa_host: Any = 0
    if hybrid:
        for a in path:
            deeper = x.sum(x.ite(in_host[b], s.node_len[b], 0) for b in x.shape.descendants[a] if b in path)
            in_window[a] = x.and_(in_host[a], deeper < W)
            swa_host = swa_host + x.ite(in_window[a], s.node_len[a], 0)
    return MatchResult(prefix, last, best, host_hit, swa_host, tuple(in_host), tuple(in_window), prefix, 0,
                       _branching(x, s, r, key, prefix + host_hit))


def _branching(x: Ctx, s: State, r: int, key: Any, boundary: Any) -> Any:
    """`swa_branching_seqlen` of the match (`finalize_match_result_in_tree_core`, v0.5.20,
    `0.5.20:mem_cache/unified_cache/components/swa.py:344-386`): the Full-KV hit (every node the walk
    passes, device or backed-up host, `full_kv_hit_length`) floored to a page, when it reaches past
    the SWA-valid boundary (device prefix + host hit); 0 (None) otherwise or without the flag."""
    if not (x.cfg.hybrid_swa and x.on("swa_branching_insert")):
        return 0
    ok: Any = True
    pos: Any = 0
    hit: Any = 0
    for a in x.shape.path[r]:
        L = s.node_len[a]
        e = L > 0
        live = x.or_(s.node_device[a], s.node_host[a]) if x.cfg.hicache else True
        take = x.and_(ok, e, live, pos + L <= key)
        ok = x.and_(ok, x.or_(x.not_(e), take))
        hit = x.ite(take, pos + L, hit)
        pos = x.ite(e, pos + L, pos)
    full = x.floor_page(hit)
    return x.ite(full > boundary, full, 0)


def _branch_cut(x: Ctx, s: State, r: int) -> Any:
    """`SWAComponent.prepare_for_caching_req` (v0.5.20): the next insert caches only [0, branching)
    when branching > P and the key reaches it (`effective_cache_len <= len(token_ids)`)."""
    if not (x.cfg.hybrid_swa and x.on("swa_branching_insert")):
        return False
    b = s.swa_branching_seqlen[r]
    return x.and_(b > s.cache_protected_len[r], b <= s.kv_committed_len[r])


@transition(
    "mem_cache/swa_radix_cache.py::SWARadixCache.evict",
    modifies=("full_available", "swa_available", "node_len", "node_device", "node_swa_tombstone"),
)
def evict(x: Ctx, s: State, full_need: Any, swa_need: Any, site: str, extra_locks: Sequence[Locker] = ()) -> State:
    """Free at least `full_need` full and `swa_need` SWA tokens from unlocked nodes, if possible.

    Full phase: delete unlocked device leaves (a backed-up node becomes host-only, others are
    removed); a tombstone left childless goes with its last child (SWARadixCache) or stays as a
    Full-only leaf that may go later (`swa_tombstone_parent_kept`: UnifiedRadixCache). SWA phase:
    tombstone SWA-unlocked internal nodes (with `swa_tombstone_parent_kept`, also one whose last
    device child goes in the same eviction: UnifiedRadixCache's SWA pass may tombstone it before
    it deletes that child).
    Which leaves go is a choice (any minimal set: see the module docstring)."""
    K = x.cfg.num_atoms
    if K == 0:
        return s
    with x.scope(site):
        # the nodes' checkpoints below read the eviction's choices on this state's names: a sub-step
        # query then sees one node's eviction (checker/engines/induction.py, `first_break`)
        s = x.checkpoint("eviction", s)
    sh = x.shape
    hybrid = x.cfg.hybrid_swa
    need = x.or_(full_need > 0, swa_need > 0) if hybrid else full_need > 0
    exists = [s.node_len[a] > 0 for a in range(K)]
    dev = [x.and_(exists[a], s.node_device[a]) for a in range(K)]
    host = [s.node_host[a] if x.cfg.hicache else False for a in range(K)]
    tomb = [s.node_swa_tombstone[a] if hybrid else False for a in range(K)]
    locked = full_locked(x, s, extra_locks)
    slocked = swa_locked(x, s, extra_locks)
    d: list[Any] = [False] * K
    elig: list[Any] = [False] * K
    forced: list[Any] = [False] * K  # a tombstone deleted with its last child (SWARadixCache)
    # The atoms are a static tree; one of length 0 is not in SGLang's tree, and its children hang
    # from its nearest existing ancestor. Per subtree top (an atom, or the live children standing
    # in for an absent one): a device node stays / goes / nothing stays after the eviction.
    stays: list[Any] = [False] * K
    went: list[Any] = [False] * K
    empty: list[Any] = [True] * K

    def kids_any(v: list[Any], a: int) -> Any:
        return x.or_(*[v[c] for c in sh.children[a]])

    def kids_all(v: list[Any], a: int) -> Any:
        return x.and_(*[v[c] for c in sh.children[a]])

    with x.scope(site):
        for a in reversed(range(K)):  # children have larger indices: decide them first
            leaf_after = x.not_(kids_any(stays, a))
            gone_after = kids_all(empty, a)
            elig[a] = x.and_(need, dev[a], x.not_(locked[a]), leaf_after, x.or_(host[a], gone_after))
            # SWARadixCache deletes a tombstone whose last device child goes with it ("no leaf is a
            # tombstone"); UnifiedRadixCache keeps it as a Full-only leaf (`swa_tombstone_parent_kept`)
            if hybrid and x.on("swa_tombstone_parent_kept"):
                forced[a] = False
            else:
                forced[a] = x.and_(dev[a], tomb[a], x.not_(locked[a]), gone_after, kids_any(went, a))
            d[a] = x.or_(forced[a], x.choose_bool_when(f"evict[{a}]", elig[a]))
            stays[a] = x.ite(exists[a], x.and_(dev[a], x.not_(d[a])), kids_any(stays, a))
            went[a] = x.ite(exists[a], x.and_(dev[a], d[a]), kids_any(went, a))
            empty[a] = x.ite(exists[a], x.and_(d[a], x.not_(host[a])), kids_all(empty, a))
        t: list[Any] = [False] * K
        if hybrid:
            # UnifiedRadixCache's SWA pass walks the SWA LRU list and, node by node, deletes an
            # evictable leaf or tombstones anything else (0.5.21 unified_cache/components/swa.py
            # `_evict_device_next_node`): a node tombstoned while it still had a device child keeps
            # its Full slots when that child goes later in the same pass (the tombstone stays as a
            # Full-only leaf). The pass stops once the SWA need is met, so that child went after the
            # node alone was not enough (its length < the need). SWARadixCache would then delete it
            # with its last child, which the choice of evicting it already covers.
            parent_kept = x.on("swa_tombstone_parent_kept")
            for a in range(K):
                internal = kids_any(stays, a)
                if parent_kept:
                    internal = x.or_(internal, x.and_(kids_any(went, a), s.node_len[a] < swa_need))
                ok_t = x.and_(swa_need > 0, dev[a], x.not_(tomb[a]), x.not_(slocked[a]), x.not_(d[a]), internal)
                t[a] = x.choose_bool_when(f"tombstone[{a}]", ok_t)
    L = s.node_len
    swa_len = [x.ite(tomb[a], 0, L[a]) for a in range(K)]
    freed_full = x.sum(x.ite(d[a], L[a], 0) for a in range(K))
    freed_swa = x.sum(x.ite(d[a], swa_len[a], 0) for a in range(K)) + x.sum(x.ite(t[a], L[a], 0) for a in range(K))
    freed_full = x.let("evict_freed_full", freed_full)
    more_full = x.or_(*[x.and_(elig[a], x.not_(d[a])) for a in range(K)])
    x.assume(x.or_(freed_full >= full_need, x.not_(more_full)), "eviction stopped early")
    if hybrid:
        freed_swa = x.let("evict_freed_swa", freed_swa)
        more_swa = x.or_(
            *[
                x.or_(
                    # a node tombstoned in this eviction holds no SWA any more, though it may be an
                    # evictable Full-only leaf now (its last child went after it)
                    x.and_(elig[a], x.not_(d[a]), x.not_(tomb[a]), x.not_(t[a])),
                    x.and_(dev[a], x.not_(tomb[a]), x.not_(slocked[a]), x.not_(d[a]), x.not_(t[a]),
                           kids_any(stays, a)),
                )
                for a in range(K)
            ]
        )
        x.assume(x.or_(freed_swa >= swa_need, x.not_(more_swa)), "SWA eviction stopped early")
    # One LRU step evicts one chosen node, and with it (SWARadixCache) the chain of tombstone
    # ancestors it leaves childless: those are the step's too (`chain_up`), never a step of their own.
    # A node is the last step of its subtree unless an ancestor above that forced chain is chosen.
    parent_goes: list[Any] = [False] * K  # the nearest chosen ancestor past forced tombstones goes too
    chain_up: list[Any] = [0] * K  # full tokens of the forced tombstones the node's step deletes
    for a in range(K):  # parents have smaller indices
        p = sh.parent[a]
        if p >= 0:
            chosen_p = x.and_(d[p], x.not_(forced[p]))
            parent_goes[a] = x.ite(exists[p], x.ite(forced[p], parent_goes[p], chosen_p), parent_goes[p])
            chain_up[a] = x.ite(x.and_(exists[p], forced[p]), L[p] + chain_up[p], x.ite(exists[p], 0, chain_up[p]))
    # SGLang evicts LRU leaves one at a time until enough is freed: the *last* node it evicts (or
    # tombstones) was needed, the ones before it were not enough on their own. So some evicted top
    # node (one whose evicted part below it went first) or some tombstone is needed; not every one
    # (`kvmc conform`: LRU evicted a warm leaf of 1 token, then a 2-token leaf for a need of 2,
    # which "every evicted node is needed" excluded)
    # SWARadixCache's SWA pass (0.5.13 swa_radix_cache.py `evict`) walks the SWA LRU list over
    # internal nodes too: it may tombstone a node first and evict its last device child later, and
    # then deletes the tombstone with that child. That node's step freed its own SWA only; the step
    # that was needed is below it: without its subtree's other frees the need is not met
    # (`kvmc conform`, row SWARadixCache: a 1-token warm node, then a finished request's 2-token leaf
    # under it, for an SWA-only need of 2: SGLang frees all three Full slots)
    swa_chain = hybrid and not x.on("swa_tombstone_parent_kept")
    sub_swa: list[Any] = [0] * K
    if swa_chain:
        for a in reversed(range(K)):
            sub_swa[a] = x.sum([x.ite(d[a], swa_len[a], 0), x.ite(t[a], L[a], 0), *[sub_swa[c] for c in sh.children[a]]])
    needed: list[Any] = []
    any_gone: list[Any] = []
    for a in range(K):
        top = x.and_(d[a], x.not_(forced[a]), elig[a], x.not_(parent_goes[a]))
        enough_without = x.and_(freed_full - L[a] - chain_up[a] >= full_need,
                                (freed_swa - swa_len[a] >= swa_need) if hybrid else True)
        needed.append(x.and_(top, x.not_(enough_without)))
        if swa_chain:
            needed.append(x.and_(top, x.not_(tomb[a]), kids_any(went, a), L[a] < swa_need,
                                 freed_swa - sub_swa[a] + L[a] < swa_need))
        any_gone.append(top)
        if hybrid:
            needed.append(x.and_(t[a], freed_swa - L[a] < swa_need))
            any_gone.append(t[a])
    x.assume(x.implies(x.or_(*any_gone), x.or_(*needed)), "eviction freed more nodes than needed")
    # node by node, each node's slots freed with it: the ledger is exact after every node (a
    # checkpoint), so the induction step can ask which node's eviction broke it, if one did
    for a in range(K):
        keep_host = x.and_(d[a], host[a])
        s = s.node(
            a,
            node_len=x.ite(x.and_(d[a], x.not_(host[a])), 0, L[a]),
            node_swa_tombstone=x.ite(d[a], x.ite(keep_host, s.node_swa_tombstone[a], False), x.or_(s.node_swa_tombstone[a], t[a])),
        )
        if x.cfg.hicache:  # without HiCache node_device stays True: a node exists iff its length > 0
            s = s.node(a, node_device=x.ite(d[a], False, s.node_device[a]))
        s = allocator.free(x, s, x.ite(d[a], L[a], 0), x.ite(d[a], swa_len[a], 0) + x.ite(t[a], L[a], 0) if hybrid else 0)
        with x.scope(site):
            s = x.checkpoint(f"evicted[{a}]", s)
    return s


@transition(
    "mem_cache/common.py::evict_from_tree_cache",
    modifies=(
        "full_available",
        "swa_available",
        "node_len",
        "node_device",
        "node_swa_tombstone",
    ),
)
def evict_from_tree_cache(x: Ctx, s: State, num_tokens: Any, site: str, extra_locks: tuple = ()) -> State:
    """Evict from the tree until `num_tokens` fit in each pool, or nothing evictable is left.

    Hybrid SWA: `tree.evict(full=max(0, N - avail_F), swa=max(0, N - avail_S))`. Plain: the
    shortfall `N - avail` (`evict_shortfall`, #32016, v0.5.17); before it the whole `N` whenever
    `avail < N` (mem_cache/common.py::evict_from_tree_cache, v0.5.13), which evicts more."""
    full_need = x.clamp0(num_tokens - s.full_available)
    if not x.cfg.hybrid_swa and not x.on("evict_shortfall"):
        full_need = x.ite(s.full_available < num_tokens, num_tokens, 0)
    swa_need = x.clamp0(num_tokens - allocator.swa_available_size(x, s)) if x.cfg.hybrid_swa else 0
    return evict(x, s, full_need, swa_need, site, extra_locks)


def evictable_left(x: Ctx, s: State, extra_locks: Sequence[Locker] = ()) -> tuple[Any, Any]:
    """(full, SWA): could one more eviction step free tokens of that pool on `s`, with `extra_locks`
    held? The same eligibility `evict` stops on ("eviction stopped early"), read on the state after
    it: a device node nothing locks, with no device node below it, and either backed up or with
    nothing below it at all, frees Full slots (and SWA slots unless tombstoned); an SWA-unlocked
    internal device node that is not a tombstone frees SWA slots by becoming one. Written apart
    from `evict`, its per-node facts included (they repeat `evict`'s first lines on purpose): the
    ghost that compares an eviction's outcome with it must not share code with `evict`, or a mutant
    of that code (`kvmc mutate` mutates transitions only) would move both sides at once."""
    K = x.cfg.num_atoms
    if K == 0:
        return False, False
    sh = x.shape
    hybrid = x.cfg.hybrid_swa
    exists = [s.node_len[a] > 0 for a in range(K)]
    dev = [x.and_(exists[a], s.node_device[a]) for a in range(K)]
    host = [s.node_host[a] if x.cfg.hicache else False for a in range(K)]
    tomb = [s.node_swa_tombstone[a] if hybrid else False for a in range(K)]
    locked = full_locked(x, s, extra_locks)
    slocked = swa_locked(x, s, extra_locks)
    below_dev: list[Any] = [False] * K  # a device node below (through absent atoms)
    nothing: list[Any] = [True] * K  # no node at all in the subtree (an absent atom stands for its children)
    for a in reversed(range(K)):
        kids = sh.children[a]
        below_dev[a] = x.or_(*[x.ite(exists[c], dev[c], below_dev[c]) for c in kids])
        nothing[a] = x.and_(*[x.and_(x.not_(exists[c]), nothing[c]) for c in kids])
    leaf = [x.and_(dev[a], x.not_(locked[a]), x.not_(below_dev[a]), x.or_(host[a], nothing[a])) for a in range(K)]
    full = x.or_(*leaf)
    if not hybrid:
        return full, False
    swa = x.or_(*[x.and_(x.not_(tomb[a]), x.or_(leaf[a], x.and_(dev[a], x.not_(slocked[a]), below_dev[a])))
                  for a in range(K)])
    return full, swa


def _first_free_private(x: Ctx, s: State, r: int, k: int) -> Any:
    """The k-th private atom of r is the first one that does not exist (existing ones are a prefix)."""
    chain = x.shape.private[r]
    prev = s.node_len[chain[k - 1]] > 0 if k > 0 else True
    return x.and_(prev, s.node_len[chain[k]] == 0)


# lock records other than the request's own that a split may move to the tail's atom (the insert
# callers list them too: a lock below the insert's end names a split node's atom)
SPLIT_REMAPS = ("load_back_node", "load_back_swa_top", "slot_last_node", "slot_swa_lock_top")


def _shift_chain(x: Ctx, s0: State, s: State, chain: Sequence[int], split_at: list[Any], starts: list[Any],
                 end: Any, why: str) -> tuple[State, Any, Any] | None:
    """Split the node of `chain` marked in `split_at` at `end`: the head [st, end) keeps the atom,
    the tail and every node below it on the chain move one atom down (the chain's last atom must be
    free: `why` says which bound is hit). Returns the state and the lock remaps (full lock, uuid),
    or None when the chain is one atom long (no split can happen, nothing to remap)."""
    m = len(chain)
    x.assume(x.implies(x.or_(*split_at), s0.node_len[chain[m - 1]] == 0), why)
    if m == 1:  # nowhere to put a tail: the assumption above rules the split out
        return None
    moved: list[Any] = []  # index i now holds what was at i - 1
    for i, a in enumerate(chain):
        moved.append(x.or_(*split_at[:i]) if i > 0 else False)
        if i == 0:
            s = s.node(a, node_len=x.ite(split_at[0], end - starts[0], s0.node_len[a]))
            continue
        b = chain[i - 1]
        tail = split_at[i - 1]
        s = s.node(
            a,
            node_len=x.ite(split_at[i], end - starts[i],
                           x.ite(tail, starts[i - 1] + s0.node_len[b] - end, x.ite(moved[i], s0.node_len[b], s0.node_len[a]))),
            node_device=x.ite(moved[i], s0.node_device[b], s0.node_device[a]),
            node_host=x.ite(moved[i], s0.node_host[b], s0.node_host[a]),
            node_swa_tombstone=x.ite(moved[i], s0.node_swa_tombstone[b], s0.node_swa_tombstone[a]),
        )

    def lock_node(ref: Any) -> Any:  # the split node and those below it move down one atom
        out = ref
        for j in range(m - 1):
            out = x.ite(x.and_(ref == chain[j], x.or_(moved[j], split_at[j])), chain[j + 1], out)
        return out

    def uuid_node(ref: Any) -> Any:  # the head inherits swa_uuid; those below move down
        out = ref
        for j in range(m - 1):
            out = x.ite(x.and_(ref == chain[j], moved[j]), chain[j + 1], out)
        return out

    return s, lock_node, uuid_node


def _remap_locks(x: Ctx, s: State, lock_node: Any, uuid_node: Any, reqs: Sequence[int]) -> State:
    for q in reqs:
        s = s.req(q, last_node=lock_node(s.last_node[q]), swa_lock_top=uuid_node(s.swa_lock_top[q]),
                  load_back_node=lock_node(s.load_back_node[q]), load_back_swa_top=uuid_node(s.load_back_swa_top[q]))
        i = x.cfg.slot_of(q)
        if i is not None:
            s = s.slot(i, slot_last_node=lock_node(s.slot_last_node[i]), slot_swa_lock_top=uuid_node(s.slot_swa_lock_top[i]))
    return s


@transition(
    "mem_cache/swa_radix_cache.py::SWARadixCache._split_node",
    modifies=("node_len", "node_device", "node_host", "node_swa_tombstone", "last_node", "swa_lock_top", *SPLIT_REMAPS),
)
def split_node(x: Ctx, s: State, r: int, end: Any, only: Any = None) -> State:
    """Split the node on r's path that [0, end) ends inside, if there is one (SGLang splits it
    when the insert's key ends there; `_split_node`). `only(a, st, L)`, if given, is a further
    condition on that node (atom a, start st, length L) for the split to happen.

    The head [st, end) keeps the atom and the node's flags, lock counts and `swa_uuid`; the tail
    [end, en) is the original node object, so a lock held on the node now holds the tail, one atom
    further down, and so does everything below it on its chain (the bounded chain must have a free
    last atom). A node of r's private chain is locked only by r; a warm-prefix node (split when a
    chunk of a request whose match stopped before it ends inside it) by anyone, so every lock
    record is remapped."""
    s0 = s
    pos: Any = 0
    past: Any = False  # some node on the path already ends past `end`
    here: dict[int, Any] = {}
    starts: dict[int, Any] = {}
    for a in x.shape.path[r]:
        L = s0.node_len[a]
        here[a] = x.and_(L > 0, x.not_(past), pos < end, pos + L > end, True if only is None else only(a, pos, L))
        starts[a] = pos
        past = x.or_(past, x.and_(L > 0, pos + L > end))
        pos = pos + L
    cfg = x.cfg
    if cfg.shares(r) and cfg.warm_chain_len:
        warm = cfg.warm_chain()
        shifted = _shift_chain(
            x, s0, s, warm, [here[a] for a in warm], [starts[a] for a in warm], end,
            f"request {r} split a warm-prefix node with no free warm atom left "
            f"(warm_atoms={cfg.warm_atoms}, warm_spare_atoms={cfg.warm_spare_atoms})")
        if shifted is not None:
            s = _remap_locks(x, *shifted, range(cfg.num_reqs))
    chain = x.shape.private[r]
    shifted = _shift_chain(
        x, s0, s, chain, [here[a] for a in chain], [starts[a] for a in chain], end,
        f"request {r} split a node with no free atom left in its chain (private_atoms={len(chain)})")
    return s if shifted is None else _remap_locks(x, *shifted, [r])


@transition(
    "mem_cache/swa_radix_cache.py::SWARadixCache.insert | unified_cache/components/swa_component.py (insert hooks)",
    modifies=(
        "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available", "swa_available",
        "last_node", "swa_lock_top", *SPLIT_REMAPS,
    ),
)
def insert(x: Ctx, s: State, r: int, prev_prefix_len: Any, end: Any, swa_evicted_seqlen: Any, site: str) -> tuple[State, Any, Any]:
    """Insert request r's tokens [0, end) (page aligned) whose KV it owns from `prev_prefix_len`.

    Existing nodes in the request's range are duplicates: the request's copy is freed, except a
    tombstone (or a host-only node) whose SWA the request still holds, which is revived with the
    request's slots; one that straddles E (= max(prev, swa_evicted_seqlen)) is first split at E
    and only its tail [E, en) is revived (`update_component_on_insert_overlap` branch 2 /
    `recover_after_unevict`; `SWARadixCache._insert_helper` likewise). The new part becomes a
    tombstone node [.., E) and a normal node [E, end); if it is all below E it is freed (or, with
    `swa_tombstone_leaf_kept`, kept as a Full-only tombstone leaf); with `swa_leaf_window_cap` a
    normal node longer than T = ceil_page(W) is split at end - T. Returns (state, last node, end
    of the part now the tree's: all of [0, end), since a node straddling `end` is split first)."""
    hybrid = x.cfg.hybrid_swa
    has_E = hybrid and swa_evicted_seqlen is not None
    E = x.max(prev_prefix_len, swa_evicted_seqlen) if has_E else prev_prefix_len
    s = split_node(x, s, r, end)  # after it no node on the path straddles `end`
    if has_E:
        # a tombstone / host-only node of the request's own range straddling E: its tail is revived
        def partly_in_window(a: int, st: Any, L: Any) -> Any:
            revivable = x.or_(s.node_swa_tombstone[a], x.not_(s.node_device[a]))
            return x.and_(st >= prev_prefix_len, st + L <= end, revivable)

        s = split_node(x, s, r, E, partly_in_window)
    pos: Any = 0
    last: Any = ROOT
    free_full: Any = 0
    free_swa: Any = 0
    walked_unbacked: list[tuple[int, Any]] = []  # (atom, a device node this insert walks that has no host copy)
    for a in x.shape.path[r]:
        L = s.node_len[a]
        e = L > 0
        st, en = pos, pos + L
        covered = x.and_(e, en <= end)
        if x.cfg.hicache:
            walked_unbacked.append((a, x.and_(covered, s.node_device[a], x.not_(s.node_host[a]))))
        mine = x.and_(covered, st >= prev_prefix_len)
        dev = s.node_device[a]
        tomb = s.node_swa_tombstone[a] if hybrid else False
        holds_all_swa = E <= st
        req_swa = x.clamp0(en - x.max(st, E))
        dup = x.and_(mine, dev, x.not_(tomb))
        revive_tomb = x.and_(mine, dev, tomb, holds_all_swa)
        keep_tomb = x.and_(mine, dev, tomb, x.not_(holds_all_swa))
        revive_host = x.and_(mine, x.not_(dev))
        free_full = free_full + x.ite(x.and_(mine, dev), L, 0)
        free_swa = free_swa + x.ite(x.or_(dup, keep_tomb, x.and_(revive_host, x.not_(holds_all_swa))), req_swa, 0)
        s = s.node(
            a,
            node_device=x.or_(dev, revive_host),
            node_swa_tombstone=x.ite(revive_tomb, False, x.ite(revive_host, x.not_(holds_all_swa), tomb)) if hybrid else tomb,
        )
        last = x.ite(covered, a, last)
        pos = x.ite(covered, en, pos)
    start = pos  # where new nodes begin
    new_len = x.clamp0(end - start)
    if has_E:
        tomb_len = x.min(x.clamp0(x.min(E, end) - start), new_len)
    else:
        tomb_len = 0
    norm_len = new_len - tomb_len
    if hybrid and x.on("swa_tombstone_leaf_kept"):
        nothing: Any = False  # #29351: the all-out-of-window leaf stays, Full only
        create_tomb = tomb_len > 0
    else:
        nothing = x.and_(tomb_len > 0, norm_len == 0)  # all out of window: freed, not inserted
        create_tomb = x.and_(tomb_len > 0, norm_len > 0)
    free_full = free_full + x.ite(nothing, tomb_len, 0)
    create_norm = norm_len > 0
    if hybrid and leaf_window_cap(x.cfg, x.design):
        cap = x.ceil_page(x.p.sliding_window_size)  # #26919: one page-aligned window
        capped = x.and_(create_norm, norm_len > cap)
        head_len, tail_len = x.ite(capped, norm_len - cap, norm_len), cap
    else:
        capped, head_len, tail_len = False, norm_len, 0
    # the new nodes, root side first: (created, length, SWA tombstone)
    segs = [(create_tomb, tomb_len, True), (create_norm, head_len, False), (capped, tail_len, False)]
    chain = x.shape.private[r]
    m = len(chain)
    backup = x.choose_bool(f"{site}.write_backup") if x.cfg.hicache else False
    s0 = s  # placement is decided on the chain as it was before this insert
    if x.cfg.hicache:
        # write-through keeps "on host => parent on host": since #25065 `write_backup` first backs up
        # the node's unbacked ancestors (UnifiedRadixCache.write_backup, "parent must be backuped
        # first"). Every existing node on the request's path is an ancestor of the new ones. An insert
        # that makes no node still counts a hit on each device node it walks (0.5.13
        # `UnifiedRadixCache._insert_helper` -> `_inc_hit_count`; 0.5.23 `unified_tree_core.py::
        # _finish_insert_walk_node` -> `_inc_hit_count_and_check`), and a walked node at the threshold
        # is backed up: at page 16 a prompt whose aligned end is its matched prefix inserts nothing new
        makes = x.or_(create_norm, create_tomb)
        backs_up = x.and_(backup, makes)
        walks_only = x.and_(backup, x.not_(makes))
        for a, unbacked in walked_unbacked:
            s = s.node(a, node_host=x.or_(s.node_host[a], x.and_(backs_up, s0.node_len[a] > 0),
                                          x.and_(walks_only, unbacked)))
    free = [_first_free_private(x, s0, r, k) for k in range(m)]
    placed = [False] * len(segs)
    for k, a in enumerate(chain):
        for i, (made, L, is_tomb) in enumerate(segs):
            if made is False:
                continue
            # segment i lands j atoms after the first free one, j = how many segments before it are made
            at = []
            for j in range(i + 1):
                if k - j < 0:
                    continue
                before = [segs[q][0] for q in range(i)]
                exactly_j = _exactly(x, before, j)
                if exactly_j is not False:
                    at.append(x.and_(exactly_j, free[k - j]))
            here = x.and_(made, x.or_(*at)) if at else False
            if here is False:
                continue
            placed[i] = x.or_(placed[i], here)
            s = s.node(
                a,
                node_len=x.ite(here, L, s.node_len[a]),
                node_device=x.or_(s.node_device[a], here),
                node_host=x.ite(here, backup, s.node_host[a]),
                node_swa_tombstone=x.ite(here, is_tomb, s.node_swa_tombstone[a]),
            )
            last = x.ite(here, a, last)  # the deepest new node is the insert's target node
    # the bounded chain must have room (config.private_atoms bounds the nodes a request creates)
    for i, (made, _L, _t) in enumerate(segs):
        if made is not False:
            x.assume(x.implies(made, placed[i]), f"request {r} inserted more nodes than private_atoms={m}")
    s = allocator.free(x, s, free_full, free_swa)
    return s, last, end


def _exactly(x: Ctx, conds: list[Any], j: int) -> Any:
    """Exactly j of `conds` hold (a handful of conditions: enumerated)."""
    import itertools

    out = []
    for picked in itertools.combinations(range(len(conds)), j):
        if any(conds[i] is False for i in picked):
            continue
        out.append(x.and_(*[conds[i] if i in picked else x.not_(conds[i]) for i in range(len(conds))]))
    return x.or_(*out) if out else False


def tree_tokens(x: Ctx, s: State) -> tuple[Any, Any]:
    """Tokens held by tree nodes on the device: (full, SWA). The ground truth the counters track."""
    K = x.cfg.num_atoms
    full = x.sum(x.ite(x.and_(s.node_len[a] > 0, s.node_device[a]), s.node_len[a], 0) for a in range(K))
    if not x.cfg.hybrid_swa:
        return full, 0
    swa = x.sum(
        x.ite(x.and_(s.node_len[a] > 0, s.node_device[a], x.not_(s.node_swa_tombstone[a])), s.node_len[a], 0) for a in range(K)
    )
    return full, swa


def _tree_prefix(x: Ctx, s: State, r: int, end: Any) -> Any:
    """How much of request r's key [0, end) the tree already holds (`InsertResult.prefix_len` of
    an insert of it): the nodes on r's path, device or host-only, up to `end`."""
    return x.min(x.sum(s.node_len[a] for a in x.shape.path[r]), end)


def _unfinished_insert(x: Ctx, s: State, r: int, site: str) -> tuple[State, Any, Any, Any, Any, Any]:
    """The insert half of `cache_unfinished_req`: the out-of-window release (with
    `unfinished_swa_release`), then the insert of the page-aligned key. Returns (state, the
    insert's last node, the part it made the tree's, the key's end, the branching cut, the tree's
    part of the key before the insert)."""
    v = x.variant("unfinished_swa_release") if x.cfg.hybrid_swa else None
    C = s.kv_committed_len[r]
    cut = _branch_cut(x, s, r)  # swa_branching_insert: the key stops at the branching point
    key_len = x.ite(cut, s.swa_branching_seqlen[r], C) if cut is not False else C
    end = x.floor_page(key_len)
    held = _tree_prefix(x, s, r, end)
    E = None
    if v is not None:
        s = free_swa_out_of_window_slots(x, s, r, key_len - 1)
        E = s.swa_evicted_seqlen[r]
    s, last, owned = insert(x, s, r, s.cache_protected_len[r], end, E, site)
    return s, last, owned, end, cut, held


def _split_at_prompt(x: Ctx, s: State, r: int, end: Any, variant: str | None) -> State:
    """`prompt_boundary_split` (plain trees): after inserting [0, end), the key cut at floor_page(|input|) is
    inserted again, which only splits the node the prompt ends inside. `variant`: the variant that does it
    at this insert (None: any; a finish splits under every variant, a stash only under `checkpoint`)."""
    v = x.variant("prompt_boundary_split")
    if x.cfg.hybrid_swa or v is None or (variant is not None and v != variant):
        return s
    pk = x.floor_page(s.origin_input_len[r])
    return split_node(x, s, r, pk, lambda a, st, L: pk < end)


def rematches(x: Ctx, finished: bool) -> bool:
    """Whether this design's insert of request KV is SGLang's insert-and-re-match, which can die on
    `assert new_prefix_len <= len(new_indices)` (`unfinished_swa_release=rematch`, hybrid SWA): a
    stash (`finished=False`: UnifiedRadixCache.cache_unfinished_req 0.5.18-0.5.21,
    checkpoint_into_tree 0.5.22) and, with `finish_checkpoint` (0.5.22), a finish (checkpoint_into_tree
    from release_kv_cache). A fact about the design, not the state: no state can crash where it is
    False, so the callers add no branch there."""
    if not (x.cfg.hybrid_swa and x.variant("unfinished_swa_release") == "rematch"):
        return False
    return x.on("finish_checkpoint") if finished else True


def assertion_after_rematch(x: Ctx, s: State, r: int, held: Any, end: Any) -> tuple[Any, MatchResult]:
    """SGLang's `assert new_prefix_len <= len(new_indices)` after request r's insert of [0, end):
    `new_prefix_len` is the insert's `prefix_len` (`held`: the part of the key the tree held before
    it), `new_indices` the device path of the re-match of the key in the tree after it (`s`), which
    the SWA validator ends short of a live tail of fewer than W tokens after a tombstone
    (docs/releases.md §0 finding 3). Returns (the assertion fails, the re-match).
    `0.5.20:mem_cache/unified_radix_cache.py::cache_unfinished_req` (lines 1185-1196),
    `0.5.22:mem_cache/unified_radix_cache.py::checkpoint_into_tree` (lines 1201-1209)."""
    m = match_prefix(x, s, r, end)
    return held > m.prefix_len, m


def checkpoint_assertion_fails(x: Ctx, s: State, r: int, finished: bool) -> Any:
    """Whether request r's stash (`finished=False`: `cache_unfinished_req`) or finish (`True`:
    `cache_finished_req`) from state `s` kills the scheduler on SGLang's assertion: the transition's
    own outcome (`oom == OOM_ASSERT`), read without keeping its state (`kvmc conform`'s lifecycle
    rows and the tests ask it before running the call)."""
    if not rematches(x, finished):
        return False
    s2 = cache_finished_req(x, s, r, True, "checkpoint") if finished else cache_unfinished_req(x, s, r, "checkpoint")
    return s2.oom == OOM_ASSERT


@transition(
    "mem_cache/swa_radix_cache.py::SWARadixCache.cache_unfinished_req | unified_radix_cache.py::UnifiedRadixCache.cache_unfinished_req",
    modifies=(
        "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available", "swa_available",
        "cache_protected_len", "swa_evicted_seqlen", "swa_branching_seqlen", "last_node", "swa_lock_top", *SPLIT_REMAPS,
        *DRIFT_FIELDS, "oom",
    ),
)
def cache_unfinished_req(x: Ctx, s: State, r: int, site: str) -> State:
    """Insert the computed, page-aligned part of request r into the tree (after a non-final chunk
    or a finished prefill), free its duplicates, and move its lock to the new last node;
    `cache_protected_len` becomes the tree part.

    Off `unfinished_swa_release`, no SWA is released here (E <= P at every unfinished insert in
    kvmc's states, so passing E, as v0.5.15.post1-v0.5.17 do, changes nothing). With it
    (v0.5.18+: `SGLANG_OPT_UNIFIED_CACHE_FREE_OUT_OF_WINDOW_SLOTS` defaults on, #34653) the
    request first releases its out-of-window SWA with pre_len = |key| - 1 = C - 1 and inserts with
    that E: [P, E') becomes a tombstone node. Then `rematch` (v0.5.18-v0.5.22,
    `0.5.18:mem_cache/unified_radix_cache.py:820-859`) sets P and the lock from a match of the
    inserted key, which the SWA validator can end short of it (a live tail of fewer than W tokens
    after a tombstone): where the match is shorter than what the tree held before the insert,
    SGLang's `assert new_prefix_len <= len(new_indices)` fails and the scheduler dies: the outcome
    `oom = OOM_ASSERT` (assertion_after_rematch), in the state SGLang holds when it raises (after the
    out-of-window release and the insert: the tree took the key and freed the request's duplicates;
    the request's row, lock and cache_protected_len not moved yet; 0.5.20's cache_unfinished_req and
    0.5.22's checkpoint_into_tree raise at the same point). `path` (v0.5.23, `checkpoint_into_tree`)
    keeps the inserted path. With
    `swa_branching_insert` (v0.5.20) a request whose match recorded a branching point past P
    inserts only [0, branching) (and its window release is measured from there)."""
    if x.cfg.chunk_cache:
        # ChunkCache.cache_unfinished_req only records the row as the next chunk's prefix (kvmc: C);
        # a disabled UnifiedRadixCache (0.5.22+) checkpoints nothing for an unfinished request
        return s
    v = x.variant("unfinished_swa_release") if x.cfg.hybrid_swa else None
    C = s.kv_committed_len[r]
    s, last, owned, end, cut, held = _unfinished_insert(x, s, r, site)
    dies: Any = False
    if v == "rematch":
        dies, m = assertion_after_rematch(x, s, r, held, end)
        last, owned = m.last_device_node, m.prefix_len
    inserted = s

    def go_on() -> State:
        s = dec_lock_ref(x, inserted, inserted.last_node[r], inserted.swa_lock_top[r])
        s, top = inc_lock_ref(x, s, last)
        s = s.req(r, cache_protected_len=owned, last_node=last, swa_lock_top=top)
        # after the lock moved (SGLang splits first, then locks the insert's last node, now the tail;
        # a split copies the lock counts to the head, so the order gives the same tree)
        s = _split_at_prompt(x, s, r, end, "checkpoint")
        if cut is not False:
            # `cleanup_after_caching_req`: the branch is inserted, forget it; with the eager release on,
            # release what slid out of the window of the whole fill (pre_len = C - 1) again
            s = s.req(r, swa_branching_seqlen=x.ite(cut, 0, s.swa_branching_seqlen[r]))
            if v is not None:
                s = x.branch(cut, lambda: free_swa_out_of_window_slots(x, s, r, C - 1), lambda: s)
        return s

    if dies is False:
        return go_on()
    # SGLang raises after the out-of-window release and the insert, before the row, the lock and
    # cache_protected_len move: the scheduler dies holding that state (no step follows)
    return x.branch(dies, lambda: inserted.set(oom=OOM_ASSERT), go_on)


@transition(
    "mem_cache/swa_radix_cache.py::SWARadixCache.cache_finished_req",
    modifies=(
        "node_len", "node_device", "node_host", "node_swa_tombstone", "full_available", "swa_available",
        "last_node", "swa_lock_top", *SPLIT_REMAPS, *DRIFT_FIELDS, "oom",
    ),
)
def cache_finished_req(x: Ctx, s: State, r: int, is_insert: bool, site: str) -> State:
    """Finish (or, with is_insert=False, retract) request r: insert [P, floor(C)) with its
    swa_evicted_seqlen (or free it), free the unaligned tail [floor(C), C) as a whole page, unlock
    (with `swa_branching_insert` the insert may stop at the branching point: the rest is freed).
    With `prompt_boundary_split` (plain radix cache, v0.5.20) the key cut at floor(|input|) is
    inserted again, which only splits the node the prompt ends inside (no frees). With
    `finish_checkpoint` and `unfinished_swa_release=rematch` (v0.5.22: release_kv_cache ->
    checkpoint_into_tree) the key is re-matched after the insert and a short re-match kills the
    scheduler (`oom = OOM_ASSERT`, assertion_after_rematch) in the state after the insert: nothing of
    the request freed or unlocked (0.5.22:mem_cache/common.py::release_kv_cache raises before
    free_kv_row). Where the assertion holds the finish goes on as without the flag."""
    C, P = s.kv_committed_len[r], s.cache_protected_len[r]
    E = s.swa_evicted_seqlen[r] if x.cfg.hybrid_swa else 0
    held_from = x.max(P, E)  # the request's SWA slots start here
    end = x.floor_page(C)
    # ChunkCache.cache_finished_req frees the row's committed KV: a finish is a retraction's free
    is_insert = is_insert and not x.cfg.chunk_cache
    cut = _branch_cut(x, s, r) if is_insert else False
    if cut is not False:  # swa_branching_insert: only [0, branching) is cached, the rest freed
        end = x.ite(cut, s.swa_branching_seqlen[r], end)
    dies: Any = False
    if is_insert:
        held = _tree_prefix(x, s, r, end)
        s, _last, owned = insert(x, s, r, P, end, E if x.cfg.hybrid_swa else None, site)
        s = _split_at_prompt(x, s, r, end, None)
        if rematches(x, True):  # finish_checkpoint: 0.5.22's checkpoint_into_tree re-matches and asserts
            dies, _m = assertion_after_rematch(x, s, r, held, end)
    else:
        owned = P
    inserted = s

    def go_on() -> State:
        rest_full = end - owned + x.ceil_page(C) - end  # not taken by the tree, plus the tail page
        rest_swa = x.clamp0(x.ceil_page(C) - x.max(owned, held_from)) if x.cfg.hybrid_swa else 0
        s = allocator.free(x, inserted, rest_full, rest_swa)
        s = dec_lock_ref(x, s, s.last_node[r], s.swa_lock_top[r])
        return s.req(r, last_node=ROOT, swa_lock_top=ROOT)

    if dies is False:
        return go_on()
    # SGLang raises inside checkpoint_into_tree after the insert: nothing of the request is freed or
    # unlocked (release_kv_cache never reaches free_kv_row); the scheduler dies holding that state
    return x.branch(dies, lambda: inserted.set(oom=OOM_ASSERT), go_on)
