"""kvmc's `conservation` ledger evaluated on SGLang's real objects (worker side).

specs/properties.py::ledger says who owns every slot of each pool: free (the allocator), a tree
node on the device, the row of a request that holds KV (running or chunked: positions [P, ceil(A)),
SWA from max(P, E)), or the row a streaming-session slot holds while no running turn has taken it
over. Here the same owners are read off the live objects as *sets of page numbers*, not counts:

    free      the allocator's `free_pages` + `release_pages` (+ a pending `free_group`), per pool
    tree      `node.value` of every node on the device (SWA: not a tombstone), through
              `full_to_swa_index_mapping` for the SWA pool (UnifiedRadixCache: the FULL
              component's value, and the SWA component's value, which holds SWA-pool indices)
    requests  `req_to_token[req_pool_idx, P:A]` of every request holding KV (SWA: from max(P, E))
    sessions  `req_to_token[slot.req_pool_idx, slot.P:slot.A]` of every holding slot whose row no
              running turn holds
    rows      `req_to_token_pool.free_slots`, the requests' and the slots' `req_pool_idx`

The ledger is exact when the owners partition each pool: every page owned exactly once. A page
owned by nobody is a leak, a page owned twice a double allocation or a double free; both are named
with the owners. SGLang's own busy check compares *counts* (available + evictable + protected +
uncached + session-held == total); a leak whose count another term absorbs, or one in a row the
check does not read, passes it and is still caught here (the #22862 test).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from model.state import CHUNKED, RUNNING

from .abstraction import _sessions, failed_rows, req_len, row_idx, slot_holds_kv, status, tree_nodes, view


@dataclass
class PoolLedger:
    pool: str
    size: int  # pages
    page_size: int
    owners: dict[str, int]  # owner -> pages
    missing: list[int] = field(default_factory=list)
    doubled: dict[int, list[str]] = field(default_factory=dict)
    stray: list[int] = field(default_factory=list)  # page numbers outside the pool

    @property
    def ok(self) -> bool:
        return not self.missing and not self.doubled and not self.stray

    def describe(self) -> str:
        unit = self.page_size
        parts = " + ".join(f"{k}={v * unit}" for k, v in self.owners.items())
        total = sum(self.owners.values()) * unit
        head = f"{self.pool}: {parts} = {total} {'==' if self.ok else '!='} {self.size * unit}"
        notes = []
        if self.missing:
            notes.append(f"leaked pages {self.missing[:8]}")
        if self.doubled:
            notes.append("owned twice: " + ", ".join(f"{p} by {'+'.join(o)}" for p, o in list(self.doubled.items())[:4]))
        if self.stray:
            notes.append(f"pages outside the pool {self.stray[:8]}")
        return head + (f" ({'; '.join(notes)})" if notes else "")


@dataclass
class RealLedger:
    full: PoolLedger
    swa: PoolLedger | None
    rows: PoolLedger

    @property
    def pools_ok(self) -> bool:
        return self.full.ok and (self.swa is None or self.swa.ok)

    @property
    def ok(self) -> bool:
        return self.pools_ok and self.rows.ok

    def describe(self) -> str:
        parts = [self.full.describe()] + ([self.swa.describe()] if self.swa is not None else []) + [self.rows.describe()]
        return "; ".join(parts)


def _ints(t: Any) -> list[int]:
    if t is None:
        return []
    if hasattr(t, "tolist"):
        v = t.tolist()
        return [int(x) for x in (v if isinstance(v, list) else [v])]
    return [int(x) for x in t]


def _free_pages(alloc: Any) -> list[int]:
    out = _ints(alloc.free_pages) + _ints(getattr(alloc, "release_pages", None))
    # frees deferred by free_group_begin (the list keeps its last contents after free_group_end)
    in_group = not getattr(alloc, "is_not_in_free_group", True)
    for g in (getattr(alloc, "free_group", None) or []) if in_group else []:
        ps = getattr(alloc, "page_size", 1)
        out += sorted({i // ps for i in _ints(g)})
    return out


class _Tally:
    def __init__(self, pool: str, size: int, ps: int) -> None:
        self.pool, self.size, self.ps = pool, size, ps
        self.by_page: dict[int, list[str]] = defaultdict(list)
        self.count: dict[str, int] = {}

    def add(self, owner: str, pages: list[int]) -> None:
        self.count[owner] = self.count.get(owner, 0) + len(pages)
        for p in pages:
            self.by_page[p].append(owner)

    def result(self, first: int) -> PoolLedger:
        domain = range(first, first + self.size)
        missing = [p for p in domain if p not in self.by_page]
        doubled = {p: o for p, o in self.by_page.items() if len(o) > 1}
        stray = sorted(p for p in self.by_page if p not in domain)
        return PoolLedger(self.pool, self.size, self.ps, dict(self.count), missing, doubled, stray)


def _pages(indices: list[int], ps: int) -> list[int]:
    return sorted({i // ps for i in indices})


def real_ledger(h: Any) -> RealLedger:
    cfg, p = h.cfg, h.p
    ps = h.ps
    alloc = h.allocator
    pool = h.req_to_token_pool
    rt = pool.req_to_token
    hyb = h.hybrid
    full_alloc = alloc.full_attn_allocator if hyb else alloc
    swa_alloc = alloc.swa_attn_allocator if hyb else None
    mapping = alloc.full_to_swa_index_mapping if hyb else None

    def to_swa(idx: list[int]) -> list[int]:
        return [int(mapping[i]) for i in idx]

    full = _Tally("full", p.full_tokens // ps, ps)
    swa = _Tally("swa", p.swa_tokens // ps, ps) if hyb else None
    rows = _Tally("req slots", p.req_pool_size, 1)
    full.add("free", _free_pages(full_alloc))
    if swa is not None:
        swa.add("free", _free_pages(swa_alloc))
    tf: list[int] = []
    ts: list[int] = []
    v = view(h)
    for n in tree_nodes(h):
        val = v.value(n)
        if val is None:
            continue
        tf += _ints(val)
        if hyb:
            ts += v.swa_indices(n, mapping)
    full.add("tree", _pages(tf, ps))
    if swa is not None:
        swa.add("tree", _pages(ts, ps))
    rows.add("free", list(pool.free_slots) + failed_rows(h))  # as the model counts them (abstraction.failed_rows)
    held_rows: set[int] = set()
    rf: list[int] = []
    rs: list[int] = []
    nreq: list[int] = []
    for sl in h.slots:
        if sl.req is None or status(h, sl) not in (RUNNING, CHUNKED):
            continue
        req = sl.req
        i = row_idx(req)
        if i is None:
            continue
        held_rows.add(i)
        nreq.append(i)
        P, A = req_len(req, "cache_protected_len"), req_len(req, "kv_allocated_len")
        E = req_len(req, "swa_evicted_seqlen") if hyb else 0
        rf += _pages(_ints(rt[i, P:A]), ps)
        if hyb:
            rs += _pages(to_swa(_ints(rt[i, max(P, E):A])), ps)
    full.add("requests", rf)
    if swa is not None:
        swa.add("requests", rs)
    rows.add("requests", nreq)
    sf: list[int] = []
    ss: list[int] = []
    nses: list[int] = []
    for sid, slot in _sessions(h).items():
        i = row_idx(slot)
        if not slot_holds_kv(slot) or i in held_rows:
            continue
        nses.append(i)
        P, A = req_len(slot, "cache_protected_len"), req_len(slot, "kv_allocated_len")
        E = req_len(slot, "swa_evicted_seqlen") if hyb else 0
        sf += _pages(_ints(rt[i, P:A]), ps)
        if hyb:
            ss += _pages(to_swa(_ints(rt[i, max(P, E):A])), ps)
    full.add("sessions", sf)
    if swa is not None:
        swa.add("sessions", ss)
    rows.add("sessions", nses)
    del cfg
    return RealLedger(full.result(1), swa.result(1) if swa is not None else None,
                      rows.result(1 if _pads_row_zero(pool) else 0))


def _pads_row_zero(pool: Any) -> bool:
    """From 0.5.11 row 0 of req_to_token is padding (rows are 1..size)."""
    return int(pool.req_to_token.shape[0]) == int(pool.size) + 1
