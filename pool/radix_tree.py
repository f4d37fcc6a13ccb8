"""A radix tree of KV indices with SGLang's locking, SWA tombstones, HiCache residency and eviction.

Implements (our own code) the mechanisms of SGLang 0.5.10.post1 .. 0.5.23 (where releases differ,
the design's flags choose, as in model/), python/sglang/srt/mem_cache/:
`radix_cache.py::RadixCache`, `swa_radix_cache.py::SWARadixCache` (`inc_lock_ref` /
`dec_lock_ref` with the SWA lock walking up until >= W SWA tokens are locked, the node that reaches
W carrying `swa_uuid_for_lock`; `insert` with `prev_prefix_len` and `swa_evicted_seqlen`,
duplicates freed by the inserter, tombstone revival; `evict` leaf-first then SWA tombstoning;
`full_/swa_evictable_size_`, `full_/swa_protected_size_` counters updated on every change),
`hiradix_cache.py` / `unified_radix_cache.py` (a node evicted from the device keeps its host copy,
`write_backup`, host hits after the device match, load-back).

Each node holds its token ids (`key`), its device indices (`value`, a tensor; None when it lives
on the host only) and its host indices (`host_value`). The counters are maintained incrementally,
as SGLang does; `recount()` recomputes them from the nodes (the difference is the "drift" the
model tracks).

Where this tree follows kvmc's abstraction rather than SGLang (documented, and needed so that a
model trace replays on it): a match stops at a node boundary; a node a request created is matched
only by that request (prefix sharing goes through the warm prefix, `owner == WARM`). An insert that
ends inside a node splits it (`_split_node`), as SGLang does. Each node records the model atom it
stands for (`atom`) so the pool's state maps onto the model's; a split shifts the atoms of the
split node's tail and of its descendants of the same owner one place down their chain (the
request's private chain, or the warm chain and its spare atoms).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from .allocator import I64, HostPool, PoolError

WARM = -1
_ids = itertools.count(1)


class TreeNode:
    __slots__ = ("id", "key", "value", "host_value", "parent", "children", "full_lock_ref", "swa_lock_ref",
                 "swa_tombstone", "owner", "atom", "last_access_time")

    def __init__(self, key: tuple[int, ...], value: torch.Tensor | None, parent: "TreeNode | None", owner: int, atom: int | None) -> None:
        self.id = next(_ids)
        self.key = key
        self.value = value
        self.host_value: torch.Tensor | None = None
        self.parent = parent
        self.children: list[TreeNode] = []
        self.full_lock_ref = 0
        self.swa_lock_ref = 0
        self.swa_tombstone = False
        self.owner = owner
        self.atom = atom
        self.last_access_time = 0

    def __len__(self) -> int:
        return len(self.key)

    @property
    def on_device(self) -> bool:
        return self.value is not None

    def __repr__(self) -> str:
        return f"Node(atom={self.atom}, len={len(self.key)}, dev={self.on_device}, host={self.host_value is not None}, tomb={self.swa_tombstone}, lock={self.full_lock_ref}/{self.swa_lock_ref})"


@dataclass
class LockHandle:
    """What `inc_lock_ref` returns: the node, `swa_uuid_for_lock`'s node (None: unlock to the root)
    and the nodes whose SWA lock it took (UnifiedRadixCache records skipped tombstones likewise)."""

    node: TreeNode | None
    uuid_node: TreeNode | None = None
    swa_nodes: list[TreeNode] = field(default_factory=list)
    released: bool = False


@dataclass
class Match:
    """`MatchResult`: device prefix, its last node, and the HiCache host continuation."""

    device_indices: torch.Tensor
    last_device_node: TreeNode
    best_match_node: TreeNode
    host_hit_length: int
    swa_host_hit_length: int
    host_nodes: list[TreeNode]
    in_window: set[int]  # ids of host nodes whose SWA is loaded too
    full_hit: int = 0  # `full_kv_hit_length`: every node the walk passes, device or backed-up host

    @property
    def prefix_len(self) -> int:
        return int(self.device_indices.numel())


class RadixTree:
    def __init__(self, allocator: Any, page_size: int, hybrid: bool, window: int, host: HostPool | None,
                 device: torch.device, mutant: Callable[[str], bool] = lambda n: False,
                 next_atom: Callable[[int, int | None], int | None] = lambda owner, atom: None) -> None:
        self.alloc = allocator
        self.ps = page_size
        self.hybrid = hybrid
        self.W = window
        self.host = host
        self.device = device
        self.mutant = mutant
        self.root = TreeNode((), torch.empty(0, dtype=I64, device=device), None, WARM, None)
        self.root.full_lock_ref = self.root.swa_lock_ref = 1
        self.full_evictable_size_ = 0
        self.full_protected_size_ = 0
        self.swa_evictable_size_ = 0
        self.swa_protected_size_ = 0
        self.clock = 0
        self.handles: list[LockHandle] = []  # live locks: a split adds its head to the ones holding the node
        self.next_atom = next_atom  # the model's chain order: a split renumbers the atoms below it
        # design flags of the unified cache (set by the scheduler from its Design; model/designs.py)
        self.segment_lock = False  # swa_segment_lock (#36848): the SWA walk counts and locks tombstones
        self.leaf_window_cap = False  # swa_leaf_window_cap (#26919): a new live leaf is at most ceil_page(W)
        self.tombstone_leaf_kept = False  # swa_tombstone_leaf_kept (#29351): an all-out-of-window leaf stays
        self.tombstone_parent_kept = False  # swa_tombstone_parent_kept (UnifiedRadixCache): a childless tombstone stays

    # -- counters -------------------------------------------------------------------------------
    def _account(self, n: TreeNode, sign: int) -> None:
        """Add (or remove) node n's contribution to the four counters, from its current state."""
        if n is self.root or n.value is None:
            return
        L = len(n) * sign
        if n.full_lock_ref > 0:
            self.full_protected_size_ += L
        else:
            self.full_evictable_size_ += L
        if self.hybrid and not n.swa_tombstone:
            if n.swa_lock_ref > 0:
                self.swa_protected_size_ += L
            else:
                self.swa_evictable_size_ += L

    def nodes(self) -> Iterator[TreeNode]:
        stack = list(self.root.children)
        while stack:
            n = stack.pop()
            yield n
            stack.extend(n.children)

    def postorder(self) -> list[TreeNode]:
        out: list[TreeNode] = []

        def walk(n: TreeNode) -> None:
            for c in list(n.children):
                walk(c)
            out.append(n)

        for c in list(self.root.children):
            walk(c)
        return out

    def recount(self) -> tuple[int, int, int, int]:
        fe = fp = se = sp = 0
        for n in self.nodes():
            if n.value is None:
                continue
            if n.full_lock_ref > 0:
                fp += len(n)
            else:
                fe += len(n)
            if self.hybrid and not n.swa_tombstone:
                if n.swa_lock_ref > 0:
                    sp += len(n)
                else:
                    se += len(n)
        return fe, fp, se, sp

    def evictable_left(self) -> tuple[bool, bool]:
        """(full, SWA): would one more eviction step free slots of that pool? A device node no lock
        holds, with no device child, backed up or with no child at all, frees Full slots (and SWA
        ones unless it is a tombstone); a device node no SWA lock holds, not a tombstone, with a
        device child, frees SWA slots by becoming a tombstone. Read off the locks, not from `evict`
        (the record of a load-back's give-up compares the two)."""
        full = swa = False
        for n in self.nodes():
            if n.value is None:
                continue
            dev_child = any(k.value is not None for k in n.children)
            if n.full_lock_ref == 0 and not dev_child and (n.host_value is not None or not n.children):
                full = True
                swa = swa or (self.hybrid and not n.swa_tombstone)
            if self.hybrid and dev_child and not n.swa_tombstone and n.swa_lock_ref == 0:
                swa = True
        return full, swa

    def full_evictable_size(self) -> int:
        return self.full_evictable_size_

    def full_protected_size(self) -> int:
        return self.full_protected_size_

    def swa_evictable_size(self) -> int:
        return self.swa_evictable_size_

    def swa_protected_size(self) -> int:
        return self.swa_protected_size_

    def evictable_size(self) -> int:
        if self.hybrid:  # SWARadixCache only has the split accessors
            raise NotImplementedError("SWARadixCache.evictable_size: use full_evictable_size / swa_evictable_size")
        return self.full_evictable_size_

    def protected_size(self) -> int:
        if self.hybrid:
            raise NotImplementedError("SWARadixCache.protected_size: use full_protected_size / swa_protected_size")
        return self.full_protected_size_

    # -- building ---------------------------------------------------------------------------------
    def add_node(self, parent: TreeNode, key: tuple[int, ...], value: torch.Tensor | None, owner: int, atom: int | None,
                 tombstone: bool = False, host_copy: bool = False) -> TreeNode:
        n = TreeNode(key, value, parent, owner, atom)
        n.swa_tombstone = tombstone
        parent.children.append(n)
        if host_copy:
            self.write_backup(n, len(key))
        self.clock += 1
        n.last_access_time = self.clock
        self._account(n, +1)
        return n

    def write_backup(self, n: TreeNode, length: int) -> None:
        if self.host is None:
            raise PoolError("write_backup without a host pool (HiCache is off)")
        n.host_value = self.host.alloc(length)

    def _remove(self, n: TreeNode) -> None:
        n.parent.children.remove(n)  # type: ignore[union-attr]

    # -- locks ------------------------------------------------------------------------------------
    def inc_lock_ref(self, node: TreeNode | None) -> LockHandle:
        h = LockHandle(node)
        if node is None or node is self.root:
            return h
        self.handles.append(h)
        n: TreeNode | None = node
        while n is not None and n is not self.root:
            self._account(n, -1)
            n.full_lock_ref += 1
            self._account(n, +1)
            n = n.parent
        if self.hybrid:
            locked = 0
            n = node
            while n is not None and n is not self.root:
                if self.segment_lock or (not n.swa_tombstone and n.value is not None):
                    self._account(n, -1)
                    n.swa_lock_ref += 1
                    self._account(n, +1)
                    h.swa_nodes.append(n)
                    locked += len(n)
                    if locked >= self.W:
                        h.uuid_node = n
                        break
                n = n.parent
        return h

    def dec_lock_ref(self, h: LockHandle) -> None:
        if h.released:
            raise PoolError(f"dec_lock_ref: lock on {h.node} released twice")
        h.released = True
        if h.node is None or h.node is self.root:
            return
        self.handles.remove(h)
        n: TreeNode | None = h.node
        while n is not None and n is not self.root:
            self._account(n, -1)
            n.full_lock_ref -= 1
            if n.full_lock_ref < 0:
                raise PoolError(f"full_lock_ref of {n} went negative")
            self._account(n, +1)
            n = n.parent
        for n in h.swa_nodes:
            self._account(n, -1)
            n.swa_lock_ref -= 1
            if n.swa_lock_ref < 0:
                raise PoolError(f"swa_lock_ref of {n} went negative")
            self._account(n, +1)

    # -- match ------------------------------------------------------------------------------------
    def _child(self, node: TreeNode, tokens: Callable[[int, int], tuple[int, ...]], pos: int, owner: int) -> TreeNode | None:
        for c in node.children:
            if c.owner not in (WARM, owner):
                continue
            if c.key == tokens(pos, pos + len(c)):
                return c
        return None

    def path_len(self, tokens: Callable[[int, int], tuple[int, ...]], owner: int) -> int:
        """Tokens on the tree's path of the request's tokens, device or host-only nodes: what an
        insert of a key that long finds already there (`InsertResult.prefix_len`)."""
        node, pos = self.root, 0
        while (c := self._child(node, tokens, pos, owner)) is not None:
            node, pos = c, pos + len(c)
        return pos

    def match_prefix(self, tokens: Callable[[int, int], tuple[int, ...]], key_len: int, owner: int, hicache: bool) -> Match:
        """Whole nodes only, up to floor(key_len). SWA: the match ends at the deepest node after
        which no tombstone was met, or at least W SWA tokens follow the last tombstone."""
        key = (key_len // self.ps) * self.ps
        node, pos = self.root, 0
        seen_tomb, after_tomb = False, 0
        last, last_pos = self.root, 0
        walk_end = self.root
        path: list[TreeNode] = []
        while True:
            c = self._child(node, tokens, pos, owner)
            if c is None or c.value is None or pos + len(c) > key:
                break
            node, pos = c, pos + len(c)
            path.append(c)
            walk_end = c
            if self.hybrid:
                if c.swa_tombstone:
                    seen_tomb, after_tomb = True, 0
                else:
                    after_tomb += len(c)
            # a per-request SWA ring (v0.5.20+) is not in the tree: a device tombstone is a valid end
            ring_end = c.swa_tombstone and getattr(self.alloc, "ring_cost", None) is not None
            if not seen_tomb or after_tomb >= self.W or ring_end:
                last, last_pos = c, pos
        self.clock += 1
        for n in path:
            n.last_access_time = self.clock
        # device indices up to `last`
        idx: list[torch.Tensor] = []
        for n in path:
            idx.append(n.value)  # type: ignore[arg-type]
            if n is last:
                break
        device_indices = torch.cat(idx) if (idx and last is not self.root) else torch.empty(0, dtype=I64, device=self.device)
        host_nodes: list[TreeNode] = []
        best = last
        if hicache and last is walk_end:
            hpos = last_pos
            n = walk_end
            while True:
                c = self._child(n, tokens, hpos, owner)
                if c is None or c.value is not None or c.host_value is None or hpos + len(c) > key:
                    break
                host_nodes.append(c)
                hpos += len(c)
                best = n = c
        in_window: set[int] = set()
        swa_host = 0
        if self.hybrid:
            deeper = 0
            for c in reversed(host_nodes):
                if deeper < self.W:
                    in_window.add(c.id)
                    swa_host += len(c)
                deeper += len(c)
        full_hit, n, fpos = 0, self.root, 0
        while True:
            c = self._child(n, tokens, fpos, owner)
            if c is None or (c.value is None and c.host_value is None) or fpos + len(c) > key:
                break
            n, fpos = c, fpos + len(c)
            full_hit = fpos
        return Match(device_indices, last, best, sum(len(c) for c in host_nodes), swa_host, host_nodes, in_window, full_hit)

    # -- eviction ---------------------------------------------------------------------------------
    def _delete(self, n: TreeNode) -> None:
        """Evict n from the device: free its KV; a backed-up node stays as host-only."""
        self._account(n, -1)
        assert n.value is not None
        self.alloc.free(n.value)
        n.value = None
        if n.host_value is None:
            self._remove(n)
            n.swa_tombstone = False

    def _tombstone(self, n: TreeNode) -> None:
        self._account(n, -1)
        assert n.value is not None
        self.alloc.free_swa(n.value)
        n.swa_tombstone = True
        self._account(n, +1)

    def evict(self, full_need: int, swa_need: int, chooser: Any) -> None:
        """`evict(full=N_F, swa=N_S)`. Which nodes go: the chooser's picks when it replays a
        trace (`evict[atom]`, `tombstone[atom]`), else SGLang's LRU order."""
        need = full_need > 0 or (self.hybrid and swa_need > 0)
        if not need:
            return
        if chooser.policy_evict:
            self._evict_lru(full_need, swa_need)
            return
        deleted: set[int] = set()
        order = self.postorder()
        for n in order:
            if n.value is None:
                continue
            kids = n.children
            leaf_after = all(k.value is None or k.id in deleted for k in kids)
            gone_after = all(k.id in deleted and k.host_value is None for k in kids)
            unlocked = n.full_lock_ref == 0
            elig = unlocked and leaf_after and (n.host_value is not None or gone_after)
            forced = (n.swa_tombstone and unlocked and gone_after and any(k.id in deleted for k in kids)
                      and not self.tombstone_parent_kept)
            pick = chooser.bool(f"evict[{n.atom}]") if elig else False
            if forced or pick:
                deleted.add(n.id)
        tomb: list[TreeNode] = []
        if self.hybrid and swa_need > 0:
            for n in sorted(order, key=lambda m: (m.atom if m.atom is not None else 1 << 30)):
                if n.value is None or n.swa_tombstone or n.swa_lock_ref > 0 or n.id in deleted:
                    continue
                # UnifiedRadixCache's SWA pass may tombstone a node before it deletes its last child,
                # when the node alone does not meet the need
                kept = self.tombstone_parent_kept and len(n) < swa_need
                if any(k.value is not None and (kept or k.id not in deleted) for k in n.children):
                    if chooser.bool(f"tombstone[{n.atom}]"):
                        tomb.append(n)
        for n in order:  # children first
            if n.id in deleted:
                self._delete(n)
        for n in tomb:
            self._tombstone(n)

    def _evict_lru(self, full_need: int, swa_need: int) -> None:
        """SGLang's order: least recently used evictable leaf first (tombstone parents that become
        childless go with their last child, or with `tombstone_parent_kept` stay as Full-only leaves)
        until the Full need is met, then the SWA pass (`_swa_pass`) for what SWA still needs."""
        freed_full = freed_swa = 0

        def evictable(n: TreeNode) -> bool:
            if n.value is None or n.full_lock_ref > 0:
                return False
            if any(k.value is not None for k in n.children):
                return False
            return n.host_value is not None or not n.children

        while freed_full < full_need or (self.hybrid and freed_swa < swa_need):
            if freed_full >= full_need:
                self._swa_pass(swa_need - freed_swa, evictable)
                return
            cands = [n for n in self.nodes() if evictable(n)]
            if not cands:
                break
            n = min(cands, key=lambda m: (m.last_access_time, m.id))
            freed_swa += 0 if n.swa_tombstone else len(n)
            freed_full += self._delete_leaf(n)
        if self.hybrid and freed_swa < swa_need:  # no evictable leaf left: the SWA pass for the rest
            self._swa_pass(swa_need - freed_swa, evictable)

    def _swa_pass(self, swa_need: int, evictable: Callable[[TreeNode], bool]) -> None:
        """The SWA pass once the Full need is met (UnifiedRadixCache: 0.5.21
        unified_cache/components/swa.py `_evict_device_next_node`; SWARadixCache: 0.5.13
        swa_radix_cache.py `evict`'s second loop): walk the SWA-unlocked nodes holding SWA, least
        recently used first; an evictable leaf is deleted (its Full slots too), anything else is
        tombstoned, until `swa_need` SWA tokens are freed. A tombstone left childless stays as a
        Full-only leaf (`tombstone_parent_kept`), or SWARadixCache deletes it with its last child."""
        freed = 0
        while freed < swa_need:
            cands = [n for n in self.nodes() if n.value is not None and not n.swa_tombstone and n.swa_lock_ref == 0]
            if not cands:
                break
            n = min(cands, key=lambda m: (m.last_access_time, m.id))
            freed += len(n)
            if evictable(n):
                self._delete_leaf(n)
            else:
                self._tombstone(n)

    def _delete_leaf(self, n: TreeNode) -> int:
        """Delete the evictable leaf n and, unless `tombstone_parent_kept`, the tombstone ancestors it
        leaves childless (SWARadixCache `_iteratively_delete_tombstone_leaf`). Returns the Full
        tokens freed."""
        p = n.parent
        freed = len(n)
        self._delete(n)
        while (not self.tombstone_parent_kept and p is not None and p is not self.root and p.value is not None
               and p.swa_tombstone and p.full_lock_ref == 0 and not p.children):
            q = p.parent
            freed += len(p)
            self._delete(p)
            p = q
        return freed

    # -- insert -----------------------------------------------------------------------------------
    def insert(self, owner: int, tokens: Callable[[int, int], tuple[int, ...]], row: Callable[[int, int], torch.Tensor],
               prev_prefix_len: int, end: int, swa_evicted_seqlen: int | None, backup: bool,
               atom_for: Callable[[TreeNode], int | None]) -> tuple[TreeNode, int, list[tuple[int, torch.Tensor]]]:
        """Insert the request's tokens [0, end) whose KV it owns from prev_prefix_len (`row(lo, hi)`
        gives its indices). Returns (last node, end of the part now the tree's, the
        (position, tree indices) segments that replace the request's own copies in its row)."""
        E = max(prev_prefix_len, swa_evicted_seqlen) if (self.hybrid and swa_evicted_seqlen is not None) else prev_prefix_len
        node, pos, last = self.root, 0, self.root
        rewrite: list[tuple[int, torch.Tensor]] = []
        m = self.alloc.full_to_swa_index_mapping if self.hybrid else None
        walked: list[TreeNode] = []  # device nodes of the walk: what an insert that makes no node backs up
        while True:
            c = self._child(node, tokens, pos, owner)
            if c is None:
                break
            st, en = pos, pos + len(c)
            if en > end and st < end:
                c = self._split_node(c, end - st)
                en = end
            if en > end:
                break
            revivable = c.swa_tombstone or c.value is None
            if self.hybrid and swa_evicted_seqlen is not None and st >= prev_prefix_len and st < E < en and revivable:
                # its SWA is out of the request's window only up to E: split there, the tail is revived
                # (update_component_on_insert_overlap branch 2 / recover_after_unevict)
                c = self._split_node(c, E - st)
                en = E
            if c.value is not None:
                walked.append(c)
            if st >= prev_prefix_len:  # the request computed these tokens itself
                mine = row(st, en)
                holds_all_swa = E <= st
                self._account(c, -1)
                if c.value is not None and not c.swa_tombstone:  # duplicate: free the request's copy
                    self.alloc.free(mine)
                elif c.value is not None and holds_all_swa:  # revive the tombstone with the request's SWA
                    assert m is not None
                    m[c.value] = m[mine]
                    m[mine] = 0
                    self.alloc.free(mine)
                    c.swa_tombstone = False
                elif c.value is not None:  # tombstone; the request's SWA is partly released: free its copy
                    self.alloc.free(mine)
                else:  # host-only node: it takes the request's device indices
                    c.value = mine
                    if self.hybrid:
                        if not holds_all_swa:
                            self.alloc.free_swa(mine)
                        c.swa_tombstone = not holds_all_swa
                self._account(c, +1)
                rewrite.append((st, c.value))  # type: ignore[arg-type]
            node, pos, last = c, en, c
        start = pos
        new_len = max(0, end - start)
        tomb_len = min(max(0, min(E, end) - start), new_len) if (self.hybrid and swa_evicted_seqlen is not None) else 0
        norm_len = new_len - tomb_len
        dropped = tomb_len > 0 and norm_len == 0 and not self.tombstone_leaf_kept  # all out of the window: not inserted
        if backup and (dropped or new_len == 0):
            # the walk still counts a hit on each device node it passes, and one at the write-through
            # threshold is backed up (0.5.13 `_insert_helper` -> `_inc_hit_count`; 0.5.23
            # `_finish_insert_walk_node` -> `_inc_hit_count_and_check`)
            for a in walked:
                if a.host_value is None:
                    self.write_backup(a, len(a))
        if dropped:
            self.alloc.free(row(start, start + tomb_len))
        elif new_len > 0:
            parent = node
            if backup:  # write-through: unbacked ancestors first (#25065, "parent must be backuped first")
                up: list[TreeNode] = []
                anc = node
                while anc is not self.root:
                    up.append(anc)
                    anc = anc.parent  # type: ignore[assignment]
                for a in reversed(up):
                    if a.host_value is None:
                        self.write_backup(a, len(a))
            if tomb_len > 0:
                parent = self.add_node(parent, tokens(start, start + tomb_len), row(start, start + tomb_len), owner,
                                       None, tombstone=True, host_copy=backup)
                parent.atom = atom_for(parent)
                last = parent  # a Full-only tombstone leaf when nothing follows (tombstone_leaf_kept)
            lo = start + tomb_len
            cap = -(-self.W // self.ps) * self.ps
            if self.leaf_window_cap and norm_len > cap:  # the older part becomes the capped leaf's parent
                parent = self.add_node(parent, tokens(lo, end - cap), row(lo, end - cap), owner, None, host_copy=backup)
                parent.atom = atom_for(parent)
                lo = end - cap
            if norm_len > 0:
                n = self.add_node(parent, tokens(lo, end), row(lo, end), owner, None, host_copy=backup)
                n.atom = atom_for(n)
                last = n
        return last, end, rewrite

    def split_at(self, owner: int, tokens: Callable[[int, int], tuple[int, ...]], pos: int) -> None:
        """Split the node on `owner`'s path that position `pos` falls strictly inside, if any."""
        node, at = self.root, 0
        while True:
            c = self._child(node, tokens, at, owner)
            if c is None or at >= pos:
                return
            if at + len(c) > pos:
                self._split_node(c, pos - at)
                return
            node, at = c, at + len(c)

    def _split_node(self, c: TreeNode, k: int) -> TreeNode:
        """SGLang's `_split_node`: a new node takes c's first k tokens (its values, flags, lock counts
        and `swa_uuid`) and becomes c's parent; c keeps the rest, and the locks that hold c. Returns
        the new head. The head keeps c's atom; c and its descendants of c's owner (the request's
        chain, or the warm chain) move one atom down the chain."""
        self._account(c, -1)
        head = TreeNode(c.key[:k], None if c.value is None else c.value[:k], c.parent, c.owner, c.atom)
        head.host_value = None if c.host_value is None else c.host_value[:k]
        head.swa_tombstone = c.swa_tombstone
        head.full_lock_ref, head.swa_lock_ref = c.full_lock_ref, c.swa_lock_ref
        head.last_access_time = c.last_access_time
        par = c.parent
        assert par is not None
        par.children[par.children.index(c)] = head
        c.key = c.key[k:]
        c.value = None if c.value is None else c.value[k:]
        c.host_value = None if c.host_value is None else c.host_value[k:]
        c.parent = head
        head.children.append(c)
        for h in self.handles:
            if c in h.swa_nodes:
                h.swa_nodes.append(head)
            if h.uuid_node is c:
                h.uuid_node = head
        stack = [c]
        while stack:  # c and its descendants of the same owner: one atom further down
            n = stack.pop()
            n.atom = self.next_atom(n.owner, n.parent.atom)  # type: ignore[union-attr]
            stack.extend(m for m in n.children if m.owner == c.owner)
        self._account(head, +1)
        self._account(c, +1)
        return head

    # -- HiCache load-back ------------------------------------------------------------------------
    def load_back(self, m: Match) -> torch.Tensor | None:
        """Give the host nodes of a match device KV again: full for all, SWA only inside the
        window (the others come back as SWA tombstones). All or nothing; None when short."""
        full_need = m.host_hit_length
        swa_need = m.swa_host_hit_length if self.hybrid else 0
        if full_need > self.alloc.full_available_size() or (self.hybrid and swa_need > self.alloc.swa_available_size()):
            return None
        new = self.alloc.alloc_full_only(full_need)
        assert new is not None
        off = 0
        for n in m.host_nodes:
            v = new[off : off + len(n)]
            off += len(n)
            if self.hybrid and n.id in m.in_window:
                ok = self.alloc.assign_swa(v)
                assert ok
            n.value = v
            n.swa_tombstone = self.hybrid and n.id not in m.in_window
            self._account(n, +1)
        return new
