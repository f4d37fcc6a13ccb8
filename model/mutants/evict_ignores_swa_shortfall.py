"""Planted: `evict_from_tree_cache` asks the tree for the full-pool shortfall only.

Breaks `evict_from_tree_cache` (mem_cache/common.py): for the SWA allocator it must request
`tree.evict(full=max(0, N - avail_F), swa=max(0, N - avail_S))`. Asking for the full shortfall
alone never tombstones or evicts for the SWA pool, so an allocation the admission budget counted on
(it includes SWA-evictable tokens) finds the SWA pool short (`no_prefill_oom` / `no_decode_oom`).
"""

from __future__ import annotations

from typing import Any

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "evict_from_tree_cache"


def replacement(x: Ctx, s: State, num_tokens: Any, site: str, extra_locks: tuple = ()) -> State:
    full_need = x.clamp0(num_tokens - s.full_available)
    return radix_cache.evict(x, s, full_need, 0, site, extra_locks)  # planted: swa need 0
