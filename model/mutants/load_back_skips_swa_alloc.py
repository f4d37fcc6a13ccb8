"""Planted: HiCache load-back allocates the Full slots of the host hit but not its SWA slots.

Breaks UnifiedRadixCache.init_load_back (mem_cache/unified_radix_cache.py, with the hybrid cache
controller's `load`): the host nodes inside best_match_node's window come back with SWA slots,
allocated from the SWA pool (`swa_host_hit_length` of them, the amount #27391 budgets for). This
mutant marks them SWA-resident without taking the slots, so the SWA pool counts them free and the
tree counts them as its own: a slot owned twice (`conservation` on the SWA pool).
"""

from __future__ import annotations

from typing import Any

from model import allocator, hicache
from model.radix_cache import MatchResult
from model.state import State
from model.transition import Ctx

REPLACES = "init_load_back"


def replacement(x: Ctx, s: State, r: int, m: MatchResult, temporary_lock: tuple = ()) -> tuple[State, Any, Any]:
    real_alloc = allocator.alloc_pools.original

    def alloc_full_only(x: Ctx, s: State, full: Any, swa: Any) -> State:
        return real_alloc(x, s, full, 0)

    saved = x.overrides.get("alloc_pools")
    x.overrides["alloc_pools"] = alloc_full_only
    try:
        return hicache.init_load_back.original(x, s, r, m, temporary_lock)
    finally:
        if saved is None:
            x.overrides.pop("alloc_pools", None)
        else:
            x.overrides["alloc_pools"] = saved
