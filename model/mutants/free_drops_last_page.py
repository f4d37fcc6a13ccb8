"""Planted: the allocator's `free` returns one page fewer than it was given.

Breaks TokenToKVPoolAllocator.free / PagedTokenToKVPoolAllocator.free (mem_cache/allocator.py):
every freed index (page) must go back to the free list. An off-by-one when merging `free_index`
into the free pages (`free_index[:-1]`) drops the last page of every non-empty free, so each
release, eviction or duplicate free leaks a page of the full pool (`conservation`).
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "free"


def replacement(x: Ctx, s: State, full: Any, swa: Any = 0) -> State:
    return allocator.free.original(x, s, x.ite(full > 0, full - x.ps, full), swa)  # planted
