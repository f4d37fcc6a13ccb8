"""Planted: tree `evict` returns the evicted nodes' slots to the allocator but keeps the nodes.

Breaks RadixCache.evict / SWARadixCache.evict (mem_cache/radix_cache.py, swa_radix_cache.py):
evicting a leaf frees its KV and deletes it from the tree (or, for SWA, tombstones it). Here the
slots are freed but the tree still holds the nodes and their lengths, so the same slots are both
free and cached: owned twice (`conservation`), and a later match would read freed KV.
"""

from __future__ import annotations

from typing import Any, Sequence

from model import radix_cache
from model.radix_cache import Locker
from model.state import State
from model.transition import Ctx

REPLACES = "evict"


def replacement(x: Ctx, s: State, full_need: Any, swa_need: Any, site: str, extra_locks: Sequence[Locker] = ()) -> State:
    s2 = radix_cache.evict.original(x, s, full_need, swa_need, site, extra_locks)
    return s2.set(node_len=s.node_len, node_device=s.node_device, node_swa_tombstone=s.node_swa_tombstone)
