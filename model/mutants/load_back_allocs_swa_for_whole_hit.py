"""Planted: HiCache load-back takes SWA device slots for the whole host hit, not its window part.

Breaks HybridCacheController.load's device allocation (managers/cache_controller.py, as
UnifiedRadixCache.init_load_back uses it): Full slots are allocated for every loaded token, SWA
slots only for the `swa_host_hit_length` tokens inside best_match_node's window; the older host
nodes come back as SWA tombstones. Allocating the SWA indices with the Full length takes SWA slots
that no tombstone owns: the SWA pool leaks (`conservation`).
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "alloc_pools"


def replacement(x: Ctx, s: State, full: Any, swa: Any) -> State:
    return allocator.alloc_pools.original(x, s, full, full)  # planted: `full` where `swa` belongs
