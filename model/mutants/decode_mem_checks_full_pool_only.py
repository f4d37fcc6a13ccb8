"""Planted: `check_decode_mem` compares only the full pool's available size with the need.

Breaks ScheduleBatch.check_decode_mem (managers/schedule_batch.py): on the SWA allocator
`available_size()` is the minimum of the full and SWA sub-pools, so a decode step is admitted only
if both have the next step's slots. Reading the full pool alone admits a step the SWA pool cannot
serve; no request is retracted and `alloc_decode` fails (`no_decode_oom`).
"""

from __future__ import annotations

from typing import Any

from model import radix_cache
from model.schedule_batch import decode_tokens_needed
from model.state import State
from model.transition import Ctx

REPLACES = "check_decode_mem"


def replacement(x: Ctx, s: State, batch: tuple, site: str) -> tuple[State, Any]:
    need = decode_tokens_needed(x, s, batch)
    s = radix_cache.evict_from_tree_cache(x, s, need, site)
    return s, s.full_available >= need  # planted: not min(full, swa)
