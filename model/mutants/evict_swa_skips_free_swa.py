"""Planted: `_evict_swa` advances `swa_evicted_seqlen` without freeing the SWA slots.

Breaks ScheduleBatch._evict_swa (managers/schedule_batch.py): the out-of-window range
[E, E') (the threshold of `swa_release_threshold`) must go back to the SWA allocator via `free_swa`. Here E moves but
nothing is freed, so the SWA pool leaks while every full-pool counter balances. A busy check that
only balances the full pool (#21499's `full_pool_only` variant, or the pre-fix check) misses it.
"""

from __future__ import annotations

from typing import Any

from model.radix_cache import swa_release_bounds
from model.state import State
from model.transition import Ctx

REPLACES = "_evict_swa"


def replacement(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    _E, target = swa_release_bounds(x, s, r, pre_len)
    return s.req(r, swa_evicted_seqlen=target)
