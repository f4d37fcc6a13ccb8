"""Planted: finishing a request frees its over-allocation from floor(C) instead of ceil(C).

Breaks `release_kv_cache` (mem_cache/common.py): after `cache_finished_req` has inserted
[P, floor(C)) and freed the unaligned tail page [floor(C), ceil(C)), the request's remaining slots
are the over-allocation [ceil(C), ceil(A)). Starting that free at floor(C) frees the tail page a
second time whenever C is not page aligned (page_size > 1): the full pool gains a page nobody gave
back, which the ownership ledger shows as a double free (`conservation`).
"""

from __future__ import annotations

from model import allocator, schedule_batch
from model.state import State
from model.transition import Ctx

REPLACES = "release_kv_cache"


def replacement(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: object = False) -> State:
    # the real release frees [ceil(C), ceil(A)); starting at floor(C) frees [floor(C), ceil(C)) too
    tail = x.ceil_page(s.kv_committed_len[r]) - x.floor_page(s.kv_committed_len[r])
    s = schedule_batch.release_kv_cache.original(x, s, r, is_insert, site, abort)
    if x.cfg.slot_of(r) is not None:  # a streaming turn's row goes to its session slot, not freed
        return s
    return allocator.free(x, s, tail, tail if x.cfg.hybrid_swa else 0)  # planted
