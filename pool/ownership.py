"""Who owns every slot, computed on the tensors: the pool's ground truth, independent of SGLang's
counter equation (the busy check) and of the model's ledger.

Every page of the full pool (and of the SWA pool, and every req_to_token row) must be owned by
exactly one of: the allocator's free list, a radix-tree node on the device, a request that holds
KV (row positions [P, ceil(A)); SWA from max(P, E), through `full_to_swa_index_mapping`), or a
streaming-session slot that holds KV and has not lent its row to a running turn. The owners'
index tensors are concatenated and counted with one `torch.bincount` per pool, so a double
allocation, a double free or an orphaned (leaked) slot shows up even when every counter balances.
Page granularity: a page is owned as a whole (freeing one token of a page frees the page).
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


def count_owners(owner_pages: list[torch.Tensor], num_pages: int, device: torch.device, name: str) -> PoolOwnership:
    """One bincount over every owner's page indices (page 0 is the reserved padding page)."""
    if owner_pages:
        allp = torch.cat([t.reshape(-1).to(I64) for t in owner_pages])
    else:
        allp = torch.empty(0, dtype=I64, device=device)
    if allp.numel() and (int(allp.min()) < 0 or int(allp.max()) > num_pages):
        bad = allp[(allp < 0) | (allp > num_pages)]
        return PoolOwnership(name, num_pages, 0, int(bad.numel()), 0)
    counts = torch.bincount(allp, minlength=num_pages + 1)
    real = counts[1:]
    stats = torch.stack([(real == 0).sum(), (real > 1).sum(), counts[0]]).tolist()
    return PoolOwnership(name, num_pages, int(stats[0]), int(stats[1]), int(stats[2]))


def _page_starts(idx: torch.Tensor, ps: int) -> torch.Tensor:
    """Page indices of a page-aligned run of token indices."""
    if ps == 1 or idx.numel() == 0:
        return idx
    return idx[::ps] // ps


def check(sch: "Scheduler") -> Ownership:
    ps = sch.ps
    dev = sch.device
    alloc = sch.alloc
    rows = sch.req_pool.req_to_token
    full_owners: list[torch.Tensor] = []
    swa_owners: list[torch.Tensor] = []
    row_owners: list[torch.Tensor] = []
    full_alloc = alloc.full if sch.hybrid else alloc
    full_owners.append(full_alloc.free_pages)
    mapping = alloc.full_to_swa_index_mapping if sch.hybrid else None
    if sch.hybrid:
        swa_owners.append(alloc.swa.free_pages)
    for n in sch.tree.nodes():
        if n.value is None:
            continue
        full_owners.append(_page_starts(n.value, ps))
        if mapping is not None and not n.swa_tombstone:
            swa_owners.append(_page_starts(mapping[n.value], ps))

    def own_row(row: int, P: int, A: int, E: int) -> None:
        r = rows[row].to(I64)
        full_owners.append(r[P:A:ps] // ps if ps > 1 else r[P:A])
        if mapping is not None:
            lo = max(P, E)
            m = mapping[r[lo:A]]
            swa_owners.append(m[::ps] // ps if ps > 1 else m)
        row_owners.append(torch.tensor([row], dtype=I64, device=dev))

    for req in sch.reqs:
        if sch.holds_kv(req) and req.req_pool_idx is not None:
            own_row(req.req_pool_idx, req.cache_protected_len, req.kv_allocated_len, req.swa_evicted_seqlen)
    lent = {req.req_pool_idx for req in sch.reqs if sch.holds_kv(req)}
    for slot in sch.slots:
        if slot.holding and slot.req_pool_idx not in lent:
            own_row(slot.req_pool_idx, slot.cache_protected_len, slot.kv_allocated_len, slot.swa_evicted_seqlen)  # type: ignore[arg-type]
    row_owners.append(torch.tensor(sch.req_pool.free_slots, dtype=I64, device=dev) + 1)
    row_owners = [t if i == len(row_owners) - 1 else t + 1 for i, t in enumerate(row_owners)]
    full = count_owners(full_owners, full_alloc.num_pages, dev, "full pool")
    swa = count_owners(swa_owners, alloc.swa.num_pages, dev, "SWA pool") if sch.hybrid else None
    reqs = count_owners(row_owners, sch.req_pool.size, dev, "req_to_token rows")
    return Ownership(full, swa, reqs)
