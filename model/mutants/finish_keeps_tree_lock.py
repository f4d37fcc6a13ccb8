"""Planted: a finished request keeps its radix-tree lock (`dec_lock_ref` is skipped on finish).

Breaks `release_kv_cache` -> `cache_finished_req` (mem_cache/common.py, mem_cache/radix_cache.py /
swa_radix_cache.py): on finish the request inserts its KV and must call
`dec_lock_ref(req.last_node)`, so its path becomes evictable again. Here the lock stays on the
node the request held before the insert. Nothing leaks: the ledger counts tree tokens whoever locks
them, and SGLang's busy check counts them as protected (`conservation` and the busy-check
properties hold); `lock_ledger` sees a lock without a live owner. And the locked path can never be
evicted: once it holds enough of the pool, a waiting request is refused (NO_TOKEN) on every pass
and no batch runs again (`progress`, specs/liveness.py: a lasso).
"""

from __future__ import annotations

from typing import Any

from model import schedule_batch
from model.state import State
from model.transition import Ctx

REPLACES = "release_kv_cache"


def replacement(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: Any = False) -> State:
    out = schedule_batch.release_kv_cache.original(x, s, r, is_insert, site, abort)
    if not is_insert or x.cfg.slot_of(r) is not None:  # a retraction, or a session turn (its slot keeps the lock)
        return out
    return out.req(r, last_node=s.last_node[r], swa_lock_top=s.swa_lock_top[r])
