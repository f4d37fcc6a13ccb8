"""The refinement map on real SGLang objects: SGLang's live scheduler -> the model's state variables
(model/state.py), field for field as pool/abstraction.py maps kvmc's torch pool (worker side).

* pools: the allocator's `available_size()` (`full_available_size()` / `swa_available_size()` for
  hybrid SWA), `len(req_to_token_pool.free_slots)`;
* the tree: one model atom per `TreeNode`. A node's tokens say whose it is (kvmc's token scheme,
  conventions.token: warm-prefix tokens are shared, others private to one request slot); the k-th node
  of an owner on its root path is atom k of that owner's chain (`Config.private_chain` /
  `warm_chain`: a split node's head keeps its atom and everything below moves one atom down, as
  the model's `_shift_chain` does). Per atom: length, on device (`value is not None`), host copy
  (`host_value`), SWA tombstone;
* the counters SGLang keeps (`evictable_size_` / `protected_size_`, or the full_ / swa_ ones)
  minus their recount from the nodes' lock references ("drift", 0 unless the bookkeeping is wrong);
* per request slot (its current turn's `Req`): queue (not arrived = new, `finished()`, the chunked
  request, the waiting queue, the running batch or the extend batch just run), `len(origin_input_ids)`,
  `len(output_ids)`, `kv_allocated_len`, `kv_committed_len`, `cache_protected_len`,
  `swa_evicted_seqlen`, and, while it holds its tree lock (running or chunked), the atoms of
  `last_node` and of the node carrying `swa_uuid_for_lock` (the session's `_VirtualNode` is
  VIRTUAL); whether it ran in the last (extend) batch; its session turn;
* per streaming session: the slot's row and lengths, its first turn's lock, `is_active` (0.5.11+;
  derived for 0.5.10.post1, whose slot has no such flag: the slot's row is held by a live turn),
  closed;
* the scheduler: the last batch's forward mode and the allocation failure.

What cannot be expressed raises `AbstractionError` (a node past an owner's chain, a node mixing
warm and private tokens): reported as a divergence at that step.
"""

from __future__ import annotations

import functools
from typing import Any

from model.state import (
    CHUNKED,
    DECODE_BATCH,
    EXTEND_BATCH,
    FINISHED,
    NEW,
    NO_BATCH,
    ROOT,
    RUNNING,
    VIRTUAL,
    WAITING,
    State,
)

from .conventions import owner_of


class AbstractionError(RuntimeError):
    """The real state has a shape the model cannot express."""


class _NoTree:
    """The root of a cache without a tree: no children."""

    children: dict = {}
    id = "none"


_NO_TREE = _NoTree()


class TreeView:
    """One reading of SGLang's tree nodes across its caches: `RadixCache` / `SWARadixCache` (a node
    holds `value`, `host_value`, `lock_ref` or `full_lock_ref` / `swa_lock_ref`, `swa_tombstone`,
    `swa_uuid`) and `UnifiedRadixCache` (0.5.12.post1+: per-component `component_data[ct]` with
    `value`, `host_value`, `lock_ref`, `metadata["uuid"]`; its SWA value holds SWA-pool indices;
    from 0.5.18 the tree core `tree_core` owns the root, the LRU lists and the counters, and a
    request's `last_node` is a NodeId). A tombstone is a node on the device without SWA KV."""

    def __init__(self, tree: Any, hybrid: bool) -> None:
        self.tree = tree
        self.hybrid = hybrid
        self.unified = hasattr(tree, "tree_components") and hasattr(tree, "components")
        self.core = getattr(tree, "tree_core", tree)  # 0.5.18+: the tree core owns the tree's state
        # ChunkCache / SWAChunkCache (`--disable-radix-cache` up to 0.5.21) have no tree at all; from
        # 0.5.22 the option builds a disabled UnifiedRadixCache, whose root stays childless
        self.treeless = not hasattr(self.core, "root_node")
        if self.unified:
            by_name = {ct.name: ct for ct in tree.tree_components}
            self.FULL = by_name["FULL"]
            self.SWA = by_name.get("SWA")

    @property
    def root(self) -> Any:
        return _NO_TREE if self.treeless else self.core.root_node

    def resolve(self, handle: Any) -> Any:
        """A request's lock node: a NodeId from 0.5.18's UnifiedRadixCache, else the node."""
        if isinstance(handle, int) and not isinstance(handle, bool):
            try:
                return self.core.node_by_id(handle)
            except KeyError:
                raise AbstractionError(f"a lock names node id {handle}, which is not in the tree") from None
        return handle

    def value(self, n: Any) -> Any:
        """Full-pool indices on the device, None when evicted."""
        return n.component_data[self.FULL].value if self.unified else n.value

    def host_value(self, n: Any) -> Any:
        return n.component_data[self.FULL].host_value if self.unified else getattr(n, "host_value", None)

    def tombstone(self, n: Any) -> bool:
        """The node is on the device without SWA KV."""
        if not self.hybrid:
            return False
        if self.unified:
            return self.value(n) is not None and n.component_data[self.SWA].value is None
        return bool(n.swa_tombstone)

    def full_lock(self, n: Any) -> int:
        if self.unified:
            return n.component_data[self.FULL].lock_ref
        return n.full_lock_ref if hasattr(n, "full_lock_ref") else n.lock_ref

    def swa_lock(self, n: Any) -> int:
        return n.component_data[self.SWA].lock_ref if self.unified else n.swa_lock_ref

    def swa_uuid(self, n: Any) -> Any:
        if not self.hybrid:
            return None
        if self.unified:
            return n.component_data[self.SWA].metadata.get("uuid")
        return getattr(n, "swa_uuid", None)

    def swa_indices(self, n: Any, mapping: Any) -> list[int]:
        """SWA-pool indices the node owns (none for a tombstone or an evicted node)."""
        if self.value(n) is None or self.tombstone(n):
            return []
        if self.unified:
            return [int(i) for i in n.component_data[self.SWA].value.tolist()]
        return [int(mapping[int(i)]) for i in n.value.tolist()]

    def counters(self) -> tuple[int, int, int, int]:
        """SGLang's own full/SWA evictable and protected counters."""
        t = self.core
        if self.treeless:  # the cache's own answers (BasePrefixCache: 0)
            if self.hybrid:
                return t.full_evictable_size(), t.full_protected_size(), t.swa_evictable_size(), t.swa_protected_size()
            return t.evictable_size(), t.protected_size(), 0, 0
        if self.unified:
            ev, pr = t.component_evictable_size_, t.component_protected_size_
            if self.hybrid:
                return ev[self.FULL], pr[self.FULL], ev[self.SWA], pr[self.SWA]
            return ev[self.FULL], pr[self.FULL], 0, 0
        if self.hybrid:
            return t.full_evictable_size_, t.full_protected_size_, t.swa_evictable_size_, t.swa_protected_size_
        return t.evictable_size_, t.protected_size_, 0, 0


def view(h: Any) -> TreeView:
    v = getattr(h, "_tree_view", None)
    if v is None:
        v = h._tree_view = TreeView(h.inner_tree, h.hybrid)
    return v


def _children(n: Any) -> list[Any]:
    ch = n.children
    return list(ch.values()) if isinstance(ch, dict) else list(ch)


def _tokens(n: Any) -> list[int]:
    k = n.key
    ids = getattr(k, "token_ids", k)
    return [int(t) for t in ids]


def tree_nodes(h: Any) -> list[Any]:
    """Every node but the root, parents before children."""
    root = view(h).root
    out, stack = [], list(reversed(_children(root)))
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(_children(n)))
    return out


def atom_nodes(h: Any) -> dict[int, Any]:
    """Model atom -> the TreeNode standing for it."""
    cfg = h.cfg
    root = view(h).root
    out: dict[int, Any] = {}

    def walk(n: Any, depth: dict[int, int]) -> None:
        for c in _children(n):
            toks = _tokens(c)
            if not toks:
                raise AbstractionError(f"tree node {c.id} has an empty key")
            owners = {owner_of(t, cfg) for t in toks}
            if len(owners) != 1:
                raise AbstractionError(f"tree node {c.id} mixes tokens of owners {sorted(owners)} (kvmc's tree has "
                                       "warm-prefix and private nodes only)")
            o = owners.pop()
            chain = cfg.warm_chain() if o < 0 else cfg.private_chain(o)
            k = depth.get(o, 0)
            if k >= len(chain):
                who = "the warm prefix" if o < 0 else f"request {o}"
                raise AbstractionError(f"{who} has more than {len(chain)} tree nodes on one path (the model's chain "
                                       f"has {len(chain)} atoms)")
            a = chain[k]
            if a in out:
                raise AbstractionError(f"two tree nodes stand for atom {a}: {out[a].id} and {c.id}")
            out[a] = c
            walk(c, {**depth, o: k + 1})

    walk(root, {})
    return out


def counters(h: Any) -> dict[str, tuple[int, int]]:
    """SGLang's counters and their recount from the nodes: {name: (sglang, recount)}."""
    v = view(h)
    fe = fp = se = sp = 0
    for n in tree_nodes(h):
        val = v.value(n)
        if val is None:
            continue
        L = len(val)
        if v.full_lock(n) > 0:
            fp += L
        else:
            fe += L
        if h.hybrid and not v.tombstone(n):
            if v.swa_lock(n) > 0:
                sp += L
            else:
                se += L
    c = v.counters()
    if h.hybrid:
        return {"full_evictable_size": (c[0], fe), "full_protected_size": (c[1], fp),
                "swa_evictable_size": (c[2], se), "swa_protected_size": (c[3], sp)}
    return {"full_evictable_size": (c[0], fe), "full_protected_size": (c[1], fp)}


def row_idx(obj: Any) -> Any:
    """A request's (or session slot's) ReqToTokenPool row: on the object up to 0.5.18, on its
    `kv` record (`ReqKvInfo`, always present) from 0.5.19; None when it holds no row."""
    if hasattr(obj, "req_pool_idx"):
        return obj.req_pool_idx
    kv = getattr(obj, "kv", None)
    return None if kv is None else kv.req_pool_idx


def lock_uuid(obj: Any) -> Any:
    """The SWA lock's uuid a request (or session slot) holds: `swa_uuid_for_lock` on it up to
    0.5.19; on its receipt from 0.5.20 (`lock_receipt.swa_uuid_for_lock`), and from 0.5.22 on its
    `TreeLock`'s receipt (`lock.receipt.component_lock_uuids[SWA]`)."""
    if hasattr(obj, "swa_uuid_for_lock"):
        return obj.swa_uuid_for_lock
    receipt = getattr(obj, "lock_receipt", None)
    if receipt is None:
        receipt = getattr(getattr(obj, "lock", None), "receipt", None)
    if receipt is None:
        return None
    if hasattr(receipt, "swa_uuid_for_lock"):
        return receipt.swa_uuid_for_lock
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

    return (getattr(receipt, "component_lock_uuids", None) or {}).get(ComponentType.SWA)


def _swa_type() -> Any:
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

    return ComponentType.SWA


def lock_node(obj: Any) -> Any:
    """The node a request's (or session slot's) tree lock is on: `last_node`; a 0.5.22+ session
    slot keeps only its `TreeLock` (`lock.node`)."""
    if hasattr(obj, "last_node"):
        return obj.last_node
    lk = getattr(obj, "lock", None)
    return None if lk is None else lk.node


def req_len(req: Any, name: str) -> int:
    """A request's length field: on the Req up to 0.5.15, on `req.kv` (ReqKvInfo; None once the
    KV is released) from 0.5.16 for some of them; the SWA cursor `swa_evicted_seqlen` is
    `kv.get_evicted_seqlen(ComponentType.SWA)` from 0.5.21 (`component_evicted_seqlens`)."""
    if hasattr(req, name):
        return int(getattr(req, name))
    kv = getattr(req, "kv", None)
    if kv is None:
        return 0
    if name == "swa_evicted_seqlen" and not hasattr(kv, name) and hasattr(kv, "get_evicted_seqlen"):
        from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

        return int(kv.get_evicted_seqlen(ComponentType.SWA))
    return int(getattr(kv, name))


def _is_virtual(n: Any) -> bool:
    return type(n).__name__ == "_VirtualNode"


def status(h: Any, sl: Any) -> int:
    req = sl.req
    if req is None:
        return NEW
    sch = h.sch
    if req.finished():
        return FINISHED
    if sch.chunked_req is req:
        return CHUNKED
    if any(q is req for q in sch.waiting_queue):
        return WAITING
    if any(q is req for q in sch.running_batch.reqs):
        return RUNNING
    lb = h.last_batch
    if lb is not None and lb.forward_mode.is_extend() and any(q is req for q in lb.reqs):
        return RUNNING  # merged into the running batch at the next get_next_batch_to_run
    if h.oom and h.pre_status:  # in the batch whose allocation failed: where it was before
        return h.pre_status[sl.r]
    if getattr(req, "to_finish", None) is not None:
        # aborted by retract_decode ("Out of memory even after retracting"): its KV released, dropped
        # from the batch with `to_finish` set (finished_reason follows when its abort is streamed);
        # the model finishes it there
        return FINISHED
    if getattr(sl, "aborted", False):
        # aborted while waiting (explore's `recv.abort`): abort_request popped it from the queue and
        # sent the abort to the tokenizer; it holds nothing, and its client sees it finished
        return FINISHED
    raise AbstractionError(f"request {req.rid} is in no queue (not finished, not chunked, waiting or running)")


def _unfiltered(h: Any, r: int) -> bool:
    """model/state.py `unfiltered`: a finished Req of request slot `r` is still in the running batch
    (filter_batch has not run). The Req is known by the harness's rid `r<slot>.t<turn>`: a session's
    previous turn may still be there when its next turn has arrived."""
    return any(q.finished() and str(q.rid).split(".")[0] == f"r{r}" for q in h.sch.running_batch.reqs)


def _sessions(h: Any) -> dict[str, Any]:
    """Session id -> SessionSlot: the wrapping SessionAwareCache / StreamingSession's `slots`, or,
    from 0.5.19 where UnifiedRadixCache composes the streaming session, `tree.session.slots`."""
    t = h.tree
    slots = getattr(t, "slots", None)
    if not isinstance(slots, dict):
        slots = getattr(getattr(t, "session", None), "slots", None)
    return slots if isinstance(slots, dict) else {}


@functools.lru_cache(maxsize=None)
def unobserved_fields() -> frozenset[str]:
    """State fields the running release has no object for, compared on neither side: before
    `Session.finish_req` (0.5.10.post1) nothing records that a save of a turn went through it, so a
    design with `finish_req_detach` (a v0.5.13-based corpus trace replayed on 0.5.10.post1) differs
    from the release in its bookkeeping only; what the detach does (a turn that no longer restores)
    is compared as behaviour."""
    import importlib

    for mod in ("sglang.srt.session.session_controller", "sglang.srt.managers.session_controller"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        return frozenset() if hasattr(m.Session, "finish_req") else frozenset({"slot_turn_saved", "slot_detached"})
    return frozenset()


def _session(h: Any, r: int) -> Any:
    sid = h.slots[r].session_id
    return getattr(getattr(h.sch, "session_controller", None), "sessions", {}).get(sid) if sid else None


def _turn_saved(h: Any, r: int) -> bool:
    """Session.req_nodes holds request slot r's current Req: a save of this turn called
    `Session.finish_req` (v0.5.11+; 0.5.10.post1 has no finish_req and adds a turn's Req to
    req_nodes when it creates it, which is not this)."""
    sess, req = _session(h, r), h.slots[r].req
    if h.slots[r].closed or sess is None or req is None or not hasattr(sess, "finish_req"):
        return False
    return any(getattr(n, "req", None) is req for n in sess.req_nodes.values())


def _detached(h: Any, r: int) -> bool:
    """Request slot r's current Req of an open session has lost it (`req.session = None`: finish_req
    met it twice)."""
    req = h.slots[r].req
    if h.slots[r].closed:  # closing drops every Req's session (session_controller.close): the session is gone
        return False
    return h.slots[r].session_id is not None and req is not None and getattr(req, "session", None) is None


def slot_holds_kv(slot: Any) -> bool:
    """`SessionSlot.is_holding_kv` (up to 0.5.18: its record is not None); from 0.5.19 the slot
    always has a record and `slot.kv.holds_kv` says whether it holds a row."""
    if hasattr(slot, "is_holding_kv"):
        return bool(slot.is_holding_kv)
    return bool(slot.kv.holds_kv)


def committed_len(h: Any, sl: Any) -> int:
    """The KV request slot `sl`'s current Req committed (`kv_committed_len`). A streaming turn that
    finished and was saved hands its record to its session slot: 0.5.23's (where kvmc met it)
    StreamingSession.try_cache_finished_req calls `req.detach_kv()`, which leaves the Req a fresh empty
    ReqKvInfo (kv_committed_len 0), and sets the slot's committed length to
    min(|input| + finished_len, kv_allocated_len). The turn's KV is then the slot's record, read
    there: the model keeps C on the finished request, as SGLang does for every other one
    (`mark_kv_released` keeps kv_committed_len).

    A turn retracted twice lost its session at its second save (`Session.finish_req` meets the Req
    itself in req_nodes: `req.session = None`); re-prefilled, it runs and releases through the tree
    like any request, on a record of its own, while the slot keeps the stale record of that second
    save. Its KV is then its Req's record, not the slot's: the slot's is read only where the Req's is
    the fresh empty one detach_kv left (a record released through the tree keeps its committed and
    protected lengths). A turn retracted once detaches at its finish's save, after detach_kv: that
    record is the slot's."""
    req = sl.req
    if req is None:
        return 0
    if sl.r in h.cfg.streaming_sessions and req.finished() and _turn_saved(h, sl.r):
        slot = _sessions(h).get(sl.session_id)
        kv, rec = getattr(req, "kv", None), getattr(slot, "kv", None)
        # the record moved to the slot; where the slot and the Req still share one (`rec is kv`), the
        # Req still holds its row, or the Req released a record of its own, the Req's numbers are the turn's
        if (rec is not None and kv is not None and rec is not kv and slot_holds_kv(slot) and not kv.holds_kv
                and _handed_over(kv)):
            return int(rec.kv_committed_len)
    return req_len(req, "kv_committed_len")


def _handed_over(kv: Any) -> bool:
    """The Req's record is the fresh empty ReqKvInfo `Req.detach_kv` leaves: nothing committed or
    protected (a finished Req that released its own record through the tree keeps both)."""
    return int(kv.kv_committed_len) == 0 and int(kv.cache_protected_len) == 0


def failed_rows(h: Any) -> list[int]:
    """Rows `alloc_for_extend` took for the fresh requests of a batch whose KV allocation then
    failed (SGLang takes the rows first and dies holding them; the model's allocation fails as a
    whole, taking nothing): counted free, as the model has them."""
    if not h.oom:
        return []
    pre = {sl.r: st for sl, st in zip(h.slots, h.pre_status)} if h.pre_status else {}
    out = []
    for sl in h.slots:
        q = sl.req
        if q is not None and any(q is f for f in h.failed_reqs) and pre.get(sl.r) in (NEW, WAITING) \
                and row_idx(q) is not None:
            out.append(int(row_idx(q)))
    return out


def load_backs(h: Any, atom: Any, uuid_atom: Any) -> tuple[list[int], list[int]]:
    """The in-flight HiCache load-backs (`ongoing_load_back`: node id -> the node and the lock it
    holds until the transfer is acknowledged) as the model's `load_back_node[r]` /
    `load_back_swa_top[r]`, r the request whose admission started it (harness.py observes
    `init_load_back`)."""
    R = h.cfg.num_reqs
    node, top = [ROOT] * R, [ROOT] * R
    ongoing = getattr(h.inner_tree, "ongoing_load_back", None) or {}
    for key, entry in ongoing.items():
        r = h.load_back_owner.get(key)
        if r is None:
            raise AbstractionError(f"a load-back of node {key} is in flight that no request's admission started")
        n = getattr(entry, "node", None)
        if n is None:
            n = getattr(entry, "node_id", None)
        if n is None:
            n = entry[0]
        params = getattr(entry, "lock_params", None)
        if params is None:
            params = entry[1]
        node[r] = atom(n)
        top[r] = uuid_atom(lock_uuid(params) if not hasattr(params, "component_lock_uuids")
                           else params.component_lock_uuids.get(_swa_type())) if h.hybrid else ROOT
    return node, top


def to_state(h: Any) -> State:
    """The model's variables, read off SGLang's objects."""
    cfg = h.cfg
    K = cfg.num_atoms
    hyb = h.hybrid
    v = view(h)
    nodes = atom_nodes(h)
    node_of = {id(n): a for a, n in nodes.items()}
    uuid_of = {v.swa_uuid(n): a for a, n in nodes.items() if v.swa_uuid(n) is not None}
    root = v.root

    def atom(n: Any) -> int:
        n = v.resolve(n)
        if n is None or n is root:
            return ROOT
        if _is_virtual(n):
            return VIRTUAL
        a = node_of.get(id(n))
        if a is None:
            raise AbstractionError(f"a lock names node {getattr(n, 'id', n)}, which is not in the tree")
        return a

    def uuid_atom(u: Any) -> int:
        if u is None:
            return ROOT
        if u not in uuid_of:
            raise AbstractionError(f"swa_uuid_for_lock={u} is carried by no node")
        return uuid_of[u]

    node_len = [0] * K
    node_device = [not cfg.hicache] * K  # with HiCache an absent atom is not on the device
    node_host = [False] * K
    node_tomb = [False] * K
    for a, n in nodes.items():
        node_len[a] = len(_tokens(n))
        node_device[a] = v.value(n) is not None if cfg.hicache else True
        node_host[a] = v.host_value(n) is not None
        node_tomb[a] = v.tombstone(n)
    cnt = counters(h)
    stats = [status(h, sl) for sl in h.slots]
    lb = h.last_batch
    extend_ran = lb is not None and lb.forward_mode.is_extend()
    sessions = _sessions(h)
    live_rows = {row_idx(sl.req) for sl, st in zip(h.slots, stats)
                 if sl.req is not None and st in (WAITING, RUNNING, CHUNKED) and row_idx(sl.req) is not None}

    def req_field(sl: Any, name: str) -> int:
        return 0 if sl.req is None else req_len(sl.req, name)

    # an allocation that failed (the scheduler dies) leaves its batch's requests admitted: the lock
    # add_one_req took and P stand, status stays where it was (the model's view of that state)
    failed = {id(q) for q in h.failed_reqs} if h.oom else set()

    def admitted(sl: Any) -> bool:
        return sl.req is not None and id(sl.req) in failed

    def holds_lock(sl: Any, st: int) -> bool:
        return st in (RUNNING, CHUNKED) or admitted(sl)

    last_node, swa_top = [], []
    for sl, st in zip(h.slots, stats):
        if sl.req is None or not holds_lock(sl, st):
            last_node.append(ROOT)
            swa_top.append(ROOT)
            continue
        ln = atom(sl.req.last_node)
        last_node.append(ln)
        swa_top.append(ROOT if (not hyb or ln == VIRTUAL) else uuid_atom(lock_uuid(sl.req)))
    slot_objs = []
    for i, r in enumerate(cfg.streaming_sessions):
        sid = h.slots[r].session_id
        slot_objs.append(sessions.get(sid))

    def sv(i: int, name: str, default: Any = 0) -> Any:
        s = slot_objs[i]
        return default if s is None else req_len(s, name)

    def slot_holding(i: int) -> bool:
        s = slot_objs[i]
        return s is not None and slot_holds_kv(s)

    def slot_active(i: int) -> bool:
        s = slot_objs[i]
        if s is None:
            return False
        if hasattr(s, "is_active"):
            return bool(s.is_active)
        return row_idx(s) is not None and row_idx(s) in live_rows

    def slot_last(i: int) -> int:
        s = slot_objs[i]
        return ROOT if s is None or lock_node(s) is None else atom(lock_node(s))

    def slot_uuid(i: int) -> int:
        s = slot_objs[i]
        if s is None or not hyb or lock_node(s) is None or _is_virtual(lock_node(s)):
            return ROOT
        return uuid_atom(lock_uuid(s))

    lb_node, lb_top = load_backs(h, atom, uuid_atom)
    S = len(cfg.streaming_sessions)
    alloc = h.allocator
    last_batch = {"none": NO_BATCH, "extend": EXTEND_BATCH, "decode": DECODE_BATCH}[h.last_mode]
    return State(
        full_available=alloc.full_available_size() if hyb else alloc.available_size(),
        swa_available=alloc.swa_available_size() if hyb else 0,
        req_pool_available=h.req_to_token_pool.available_size() + len(failed_rows(h)),
        full_evictable_drift=cnt["full_evictable_size"][0] - cnt["full_evictable_size"][1],
        full_protected_drift=cnt["full_protected_size"][0] - cnt["full_protected_size"][1],
        swa_evictable_drift=(cnt["swa_evictable_size"][0] - cnt["swa_evictable_size"][1]) if hyb else 0,
        swa_protected_drift=(cnt["swa_protected_size"][0] - cnt["swa_protected_size"][1]) if hyb else 0,
        node_len=tuple(node_len),
        node_device=tuple(node_device),
        node_host=tuple(node_host),
        node_swa_tombstone=tuple(node_tomb),
        status=tuple(stats),
        origin_input_len=tuple(len(sl.req.origin_input_ids) if sl.req is not None else h.cfg.prompt_len(h.p, sl.r)
                               for sl in h.slots),
        output_len=tuple(0 if sl.req is None else len(sl.req.output_ids) for sl in h.slots),
        kv_allocated_len=tuple(req_field(sl, "kv_allocated_len") for sl in h.slots),
        kv_committed_len=tuple(committed_len(h, sl) for sl in h.slots),  # a saved streaming turn's is its slot's
        # P is the tree prefix the request locks: none while it waits (0.5.10.post1's reset_for_retract
        # leaves the old value behind; add_one_req sets it again at admission)
        cache_protected_len=tuple(0 if st in (NEW, WAITING) and not admitted(sl) else req_field(sl, "cache_protected_len")
                                  for sl, st in zip(h.slots, stats)),
        swa_evicted_seqlen=tuple(req_field(sl, "swa_evicted_seqlen") for sl in h.slots),
        # v0.5.20+: the match's SWA branching point on the Req (None before it, and when none)
        swa_branching_seqlen=tuple((getattr(sl.req, "swa_branching_seqlen", None) or 0) if sl.req is not None else 0
                                   for sl in h.slots),
        last_node=tuple(last_node),
        swa_lock_top=tuple(swa_top),
        in_last_batch=tuple(extend_ran and sl.req is not None and any(q is sl.req for q in lb.reqs) for sl in h.slots),
        load_back_node=tuple(lb_node),
        load_back_swa_top=tuple(lb_top),
        turn=tuple(sl.turn for sl in h.slots),
        unfiltered=tuple(_unfiltered(h, r) for r in range(cfg.num_reqs)),
        slot_holding=tuple(slot_holding(i) for i in range(S)),
        slot_kv_allocated_len=tuple(sv(i, "kv_allocated_len") if slot_holding(i) else 0 for i in range(S)),
        slot_kv_committed_len=tuple(sv(i, "kv_committed_len") if slot_holding(i) else 0 for i in range(S)),
        slot_cache_protected_len=tuple(sv(i, "cache_protected_len") if slot_holding(i) else 0 for i in range(S)),
        slot_swa_evicted_seqlen=tuple(sv(i, "swa_evicted_seqlen") if slot_holding(i) else 0 for i in range(S)),
        slot_last_node=tuple(slot_last(i) for i in range(S)),
        slot_swa_lock_top=tuple(slot_uuid(i) for i in range(S)),
        slot_is_active=tuple(slot_active(i) for i in range(S)),
        slot_closed=tuple(h.slots[r].closed for r in cfg.streaming_sessions),
        slot_turn_saved=tuple(_turn_saved(h, r) for r in cfg.streaming_sessions),
        slot_detached=tuple(_detached(h, r) for r in cfg.streaming_sessions),
        last_batch=last_batch,
        oom=h.oom,
        batch_is_full=bool(getattr(h.sch.running_batch, "batch_is_full", False)),
        needless_retract=False, needless_recompute=False,  # ghosts of the model's (model/state.py GHOST_FIELDS): not compared
    )
