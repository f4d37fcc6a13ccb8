"""Planted: `cache_unfinished_req` inserts the request's prefix but leaves `cache_protected_len`.

Breaks RadixCache.cache_unfinished_req (mem_cache/radix_cache.py): after inserting the computed
part [P, floor(C)) the request's `cache_protected_len` must advance to the part the tree now owns
(SGLang's comment: the tree owns [0, cache_protected_len), the request the rest). Left behind, the
request still believes it owns what the tree owns: at finish it frees the tree's slots again, and
meanwhile the ledger counts them twice (`conservation`); SGLang's busy check, whose uncached term
is ceil(A) - P, over-counts too.
"""

from __future__ import annotations

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "cache_unfinished_req"


def replacement(x: Ctx, s: State, r: int, site: str) -> State:
    s2 = radix_cache.cache_unfinished_req.original(x, s, r, site)
    return s2.req(r, cache_protected_len=s.cache_protected_len[r])
