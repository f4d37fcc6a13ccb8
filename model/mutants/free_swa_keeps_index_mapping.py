"""Planted: `free_swa` frees the SWA slots but does not clear `full_to_swa_index_mapping`.

Breaks SWATokenToKVPoolAllocator.free_swa (mem_cache/swa_memory_pool.py): the SWA slots of tokens
that slid out of the window go back to `swa_attn_allocator`, and `full_to_swa_index_mapping
[free_index] = 0` records that those full slots no longer have SWA slots. Without the reset, the
later `free(full_indices)` of the same tokens (finish, retract, or evicting their tombstone) maps
them to the old SWA slots and frees them a second time: a double free of the SWA pool
(`conservation`). kvmc has no index mapping (callers pass the SWA count of a free), so the second
free, which SGLang makes later, is charged here.
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "free_swa"


def replacement(x: Ctx, s: State, n: Any) -> State:
    s = allocator.free_swa.original(x, s, n)
    return allocator.free_swa.original(x, s, n)  # planted: the stale mapping frees them again
