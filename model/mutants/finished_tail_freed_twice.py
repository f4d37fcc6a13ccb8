"""Planted: `cache_finished_req` frees the unaligned tail page twice.

Breaks RadixCache.cache_finished_req (mem_cache/radix_cache.py): only [P, floor(C)) goes into the
tree; the partial last page [floor(C), ceil(C)) is freed once. This mutant frees it a second time
(as if both the insert path and the tail path released it), so with page_size > 1 and an unaligned
C the full pool gains a page: a double free the ownership ledger shows (`conservation`).
"""

from __future__ import annotations

from model import allocator, radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "cache_finished_req"


def replacement(x: Ctx, s: State, r: int, is_insert: bool, site: str) -> State:
    C = s.kv_committed_len[r]
    tail = x.ceil_page(C) - x.floor_page(C)
    s = radix_cache.cache_finished_req.original(x, s, r, is_insert, site)
    return allocator.free(x, s, tail, tail if x.cfg.hybrid_swa else 0)
