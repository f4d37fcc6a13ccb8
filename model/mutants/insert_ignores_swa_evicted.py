"""Planted: radix `insert` ignores the request's `swa_evicted_seqlen` and inserts the whole range as
SWA-resident.

Breaks SWARadixCache.insert (mem_cache/swa_radix_cache.py), as called by `cache_finished_req`: the
part of the finished request below `swa_evicted_seqlen` already had its SWA slots released by
`_evict_swa`, so it must enter the tree as a tombstone (full KV only). Inserting it as a normal
node makes the tree claim SWA slots that are already free: owned twice (`conservation` on the SWA
pool), and a later SWA eviction frees them again.
"""

from __future__ import annotations

from typing import Any

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "insert"


def replacement(x: Ctx, s: State, r: int, prev_prefix_len: Any, end: Any, swa_evicted_seqlen: Any, site: str) -> tuple[State, Any, Any]:
    # planted: E dropped, so [P, E) becomes a normal node whose SWA slots the allocator counts free
    return radix_cache.insert.original(x, s, r, prev_prefix_len, end, None, site)
