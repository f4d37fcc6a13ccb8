"""Planted: a finished request's release frees and caches its KV but never drops its tree lock.

Breaks release_kv_cache / cache_finished_req (mem_cache/common.py, mem_cache/radix_cache.py):
`dec_lock_ref(req.last_node)` must run once the request is done, so its prefix becomes evictable
again. Here the lock outlives the request: its nodes stay protected forever (until no admission
fits). Nothing leaks and every counter agrees with the locks, so the ledger and the busy check
balance; only `lock_ledger` (a lock with no live owner) sees it, and SGLang's own idle check sees
it only where it runs the tree sanity check (SWA caches), not on a plain RadixCache
(`idle_check_complete`).
"""

from __future__ import annotations

from typing import Any

from model import schedule_batch
from model.state import State
from model.transition import Ctx

REPLACES = "release_kv_cache"


def replacement(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: Any = False) -> State:
    s2 = schedule_batch.release_kv_cache.original(x, s, r, is_insert, site, abort)
    if x.cfg.slot_of(r) is not None or not is_insert:  # only a non-session request's finish
        return s2
    return s2.req(r, last_node=s.last_node[r], swa_lock_top=s.swa_lock_top[r])
