"""Planted: `cache_unfinished_req` inserts the request's computed part but leaves its lock where it was.

Breaks RadixCache.cache_unfinished_req (mem_cache/radix_cache.py): after inserting [P, floor(C))
the request must `dec_lock_ref` its old last node and `inc_lock_ref` the new one, so the whole
prefix it now reads from the tree, [0, cache_protected_len), stays locked. Here
`cache_protected_len` advances but the lock stays on the old node (or nowhere): the new nodes
are evictable while the request still reads them, and an eviction frees them under it (a use
after free). Every counter and the ownership ledger still balance (the tree no longer holds
what it freed; the request owns only [P, A)): only `residency` sees it.
"""

from __future__ import annotations

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "cache_unfinished_req"


def replacement(x: Ctx, s: State, r: int, site: str) -> State:
    s2 = radix_cache.cache_unfinished_req.original(x, s, r, site)
    return s2.req(r, last_node=s.last_node[r], swa_lock_top=s.swa_lock_top[r])
