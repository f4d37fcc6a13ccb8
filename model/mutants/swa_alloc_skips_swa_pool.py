"""Planted: the SWA allocator's `alloc` takes slots from the full sub-pool only.

Breaks SWATokenToKVPoolAllocator.alloc / alloc_extend / alloc_decode (mem_cache/swa_memory_pool.py):
every full slot allocated for a hybrid-SWA model comes with an SWA slot (the full-to-SWA index
mapping). Skipping the SWA sub-allocator leaves those SWA slots counted free while requests own
them (`conservation` on the SWA pool).
"""

from __future__ import annotations

from typing import Any

from model.state import State
from model.transition import Ctx

REPLACES = "alloc"


def replacement(x: Ctx, s: State, tokens: Any) -> State:
    return s.set(full_available=s.full_available - tokens)
