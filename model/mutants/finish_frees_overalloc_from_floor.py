"""Planted: finishing a request frees its over-allocation from floor(C) instead of ceil(C).

Breaks `release_kv_cache` (mem_cache/common.py): after `cache_finished_req` has inserted
[P, floor(C)) and freed the unaligned tail page [floor(C), ceil(C)), the request's remaining slots
are the over-allocation [ceil(C), ceil(A)). Starting that free at floor(C) frees the tail page a
second time whenever C is not page aligned (page_size > 1): the full pool gains a page nobody gave
back, which the ownership ledger shows as a double free (`conservation`).
"""

from __future__ import annotations

from model import allocator, radix_cache, session
from model.state import ROOT, State
from model.transition import Ctx

REPLACES = "release_kv_cache"


def replacement(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: object = False) -> State:
    i = x.cfg.slot_of(r)
    if i is not None:
        s = session.save_from_req(x, s, r, i)
        s = x.branch(abort, lambda: session.release_session(x, s, i), lambda: s)
    else:
        s = radix_cache.cache_finished_req(x, s, r, is_insert, site)
        over = x.ceil_page(s.kv_allocated_len[r]) - x.floor_page(s.kv_committed_len[r])  # planted: floor
        s = allocator.free(x, s, over, over if x.cfg.hybrid_swa else 0)
        s = s.set(req_pool_available=s.req_pool_available + 1)
    return s.req(r, last_node=ROOT, swa_lock_top=ROOT)
