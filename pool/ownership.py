"""Who owns every slot, computed on the tensors: the pool's ground truth, independent of SGLang's
counter equation (the busy check) and of the model's ledger.

Every page of the full pool (and of the SWA pool, and every req_to_token row) must be owned by
exactly one of: the allocator's free list, a radix-tree node on the device, a request that holds
KV (row positions [P, ceil(A)); SWA from max(P, E), through `full_to_swa_index_mapping`), or a
streaming-session slot that holds KV and has not lent its row to a running turn. The owners'
index tensors are concatenated (one concatenation per kind of owner) and counted with one
`torch.bincount` per KV pool, so a double allocation, a double free or an orphaned (leaked) slot
shows up even when every counter balances. The req_to_token rows' owners are Python ints (the free
row list, the holders' `req_pool_idx`) and are counted in Python, with the same verdict.
Page granularity: a page is owned as a whole (freeing one token of a page frees the page).
Replay runs this after every step (checker/replay/pool.py), as the stateful pool test does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from .allocator import I64

if TYPE_CHECKING:
    from .scheduler import Scheduler


@dataclass
class PoolOwnership:
    name: str
    pages: int  # pages in the pool (page 0, reserved, excluded)
    leaked: int  # pages owned by nobody
    doubled: int  # pages owned more than once (or free and owned)
    reserved_used: int  # the reserved page 0 handed out

    @property
    def ok(self) -> bool:
        return self.leaked == 0 and self.doubled == 0 and self.reserved_used == 0

    def describe(self) -> str:
        if self.ok:
            return f"{self.name}: every page owned once"
        return f"{self.name}: {self.leaked} page(s) owned by nobody, {self.doubled} owned twice or more" + (
            f", reserved page handed out {self.reserved_used}x" if self.reserved_used else "")


@dataclass
class Ownership:
    full: PoolOwnership
    swa: PoolOwnership | None
    rows: PoolOwnership

    @property
    def pools_ok(self) -> bool:
        return self.full.ok and (self.swa is None or self.swa.ok)

    @property
    def ok(self) -> bool:
        return self.pools_ok and self.rows.ok

    def describe(self) -> str:
        parts = [self.full.describe()] + ([self.swa.describe()] if self.swa else []) + [self.rows.describe()]
        return "; ".join(parts)


_SMALL = 1 << 14  # pools up to this many pages read their counts back once instead of more tensor ops


def count_owners(owner_pages: list[torch.Tensor], num_pages: int, device: torch.device, name: str) -> PoolOwnership:
    """One bincount over every owner's page indices (page 0 is the reserved padding page)."""
    if len(owner_pages) == 1:
        allp = owner_pages[0].reshape(-1).to(I64)
    elif owner_pages:
        allp = torch.cat([t.reshape(-1).to(I64) for t in owner_pages])
    else:
        allp = torch.empty(0, dtype=I64, device=device)
    if allp.numel():
        lo, hi = torch.aminmax(allp)
        if lo.item() < 0 or hi.item() > num_pages:
            bad = allp[(allp < 0) | (allp > num_pages)]
            return PoolOwnership(name, num_pages, 0, int(bad.numel()), 0)
    counts = torch.bincount(allp, minlength=num_pages + 1)
    if num_pages <= _SMALL:  # a small pool: read the counts once, count in Python (no more tensor ops)
        c = counts.tolist()
        c0 = c[0]
        leaked = c.count(0) - (c0 == 0)
        doubled = (num_pages + 1) - c.count(0) - c.count(1) - (c0 >= 2)
        return PoolOwnership(name, num_pages, leaked, doubled, c0)
    # how many pages are owned 0, 1, 2+ times (a second bincount, over the counts); page 0 (the
    # reserved one) is taken out of that histogram afterwards
    hist = torch.bincount(counts.clamp(max=2), minlength=3).tolist()
    c0 = int(counts[0].item())
    leaked = hist[0] - (c0 == 0)
    doubled = hist[2] - (c0 >= 2)
    return PoolOwnership(name, num_pages, int(leaked), int(doubled), c0)


def count_rows(owner_rows: list[int], free_rows: list[int], size: int) -> PoolOwnership:
    """req_to_token rows: the owners are Python ints (the free row list and the rows requests and
    session slots hold), counted in Python with `count_owners`'s verdict (row -1 would be the
    reserved slot, anything else outside [0, size) is out of range)."""
    counts = [0] * (size + 1)  # counts[r + 1]: index 0 stands for row -1
    bad = 0
    for rows in (owner_rows, free_rows):
        for r in rows:
            if -1 <= r < size:
                counts[r + 1] += 1
            else:
                bad += 1
    if bad:
        return PoolOwnership("req_to_token rows", size, 0, bad, 0)
    c0 = counts[0]
    leaked = counts.count(0) - (c0 == 0)
    doubled = (size + 1) - counts.count(0) - counts.count(1) - (c0 >= 2)
    return PoolOwnership("req_to_token rows", size, leaked, doubled, c0)


def _page_starts(idx: torch.Tensor, ps: int) -> torch.Tensor:
    """Page indices of a page-aligned run of token indices (or of several concatenated)."""
    if ps == 1 or idx.numel() == 0:
        return idx
    return idx[::ps] // ps


def _cat(ts: list[torch.Tensor], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if not ts:
        return torch.empty(0, dtype=dtype, device=device)
    return ts[0] if len(ts) == 1 else torch.cat(ts)


def check(sch: "Scheduler") -> Ownership:
    """The owners' indices are gathered with one concatenation per kind (tree nodes, request rows)
    rather than several tensor ops per owner. Nodes hold whole pages, so striding their
    concatenation by the page size picks each node's pages exactly as striding each node would (a
    node that is not whole pages is strided on its own); an owned row range is strided on its own
    (a view) before the concatenation."""
    ps = sch.ps
    dev = sch.device
    alloc = sch.alloc
    rows = sch.req_pool.req_to_token
    full_alloc = alloc.full if sch.hybrid else alloc
    mapping = alloc.full_to_swa_index_mapping if sch.hybrid else None
    full_owners: list[torch.Tensor] = [full_alloc.free_pages]
    swa_owners: list[torch.Tensor] = [alloc.swa.free_pages] if sch.hybrid else []
    node_vals: list[torch.Tensor] = []
    node_swa: list[torch.Tensor] = []
    aligned = True
    for n in sch.tree.nodes():
        v = n.value
        if v is None:
            continue
        node_vals.append(v)
        aligned = aligned and v.numel() % ps == 0
        if mapping is not None and not n.swa_tombstone:
            node_swa.append(v)
    if not aligned:  # a node that is not whole pages (a bug elsewhere): take each node's page starts
        node_vals = [v[::ps] for v in node_vals]
        node_swa = [v[::ps] for v in node_swa]
    if node_vals:
        t = _cat(node_vals, I64, dev)
        full_owners.append(_page_starts(t, ps) if aligned else t // ps)
    if node_swa:
        assert mapping is not None
        m = mapping[_cat(node_swa, I64, dev)]
        swa_owners.append(_page_starts(m, ps) if aligned else m // ps)
    row_full: list[torch.Tensor] = []  # int32 slices of req_to_token, each starting on a page
    row_swa: list[torch.Tensor] = []
    owner_rows: list[int] = []

    def own_row(row: int, P: int, A: int, E: int) -> None:
        r = rows[row]
        row_full.append(r[P:A:ps] if ps > 1 else r[P:A])
        if mapping is not None:
            lo = max(P, E)
            row_swa.append(r[lo:A:ps] if ps > 1 else r[lo:A])
        owner_rows.append(row)

    holding = [req for req in sch.reqs if sch.holds_kv(req)]
    for req in holding:
        if req.req_pool_idx is not None:
            own_row(req.req_pool_idx, req.cache_protected_len, req.kv_allocated_len, req.swa_evicted_seqlen)
    lent = {req.req_pool_idx for req in holding}
    for slot in sch.slots:
        if slot.holding and slot.req_pool_idx not in lent:
            own_row(slot.req_pool_idx, slot.cache_protected_len, slot.kv_allocated_len, slot.swa_evicted_seqlen)  # type: ignore[arg-type]
    if row_full:
        t = _cat(row_full, torch.int32, dev).to(I64)
        full_owners.append(t // ps if ps > 1 else t)
    if row_swa:
        assert mapping is not None
        m = mapping[_cat(row_swa, torch.int32, dev).to(I64)]
        swa_owners.append(m // ps if ps > 1 else m)
    full = count_owners(full_owners, full_alloc.num_pages, dev, "full pool")
    # the per-request SWA ring: no SWA page is ever mapped; its rings are the request rows, checked below
    swa = count_owners(swa_owners, alloc.swa.num_pages, dev, "SWA pool") if (sch.hybrid and not sch.cfg.swa_ring) else None
    reqs = count_rows(owner_rows, sch.req_pool.free_slots, sch.req_pool.size)
    return Ownership(full, swa, reqs)
