"""Planted: `alloc_for_extend` gives a new request a req_to_token row without taking it from the pool.

Breaks `alloc_req_slots` (mem_cache/common.py, `ReqToTokenPool.alloc`): each request entering its
first extend takes one row index from `free_slots`. Here the request gets its row but the free list
keeps it, so two requests can be handed the same row and the pool reports more free rows than it
has: the req_to_token ledger is off (`conservation`).
"""

from __future__ import annotations

from model import schedule_batch
from model.state import OOM_NONE, State
from model.transition import Ctx

REPLACES = "alloc_for_extend"


def replacement(x: Ctx, s: State, batch: tuple, prefix: tuple, extend: tuple, fresh_slot: tuple) -> State:
    s2 = schedule_batch.alloc_for_extend.original(x, s, batch, prefix, extend, fresh_slot)
    return s2.set(req_pool_available=x.ite(s2.oom == OOM_NONE, s.req_pool_available, s2.req_pool_available))
