"""Planted: `_evict_swa` advances `swa_evicted_seqlen` without freeing the SWA slots.

Breaks ScheduleBatch._evict_swa (managers/schedule_batch.py): the out-of-window range
[E, floor(pre_len - W - ps)) must go back to the SWA allocator via `free_swa`. Here E moves but
nothing is freed, so the SWA pool leaks while every full-pool counter balances. A busy check that
only balances the full pool (#21499's `full_pool_only` variant, or the pre-fix check) misses it.
"""

from __future__ import annotations

from typing import Any

from model.state import State
from model.transition import Ctx

REPLACES = "_evict_swa"


def replacement(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    W, ps = x.p.sliding_window_size, x.ps
    E = x.max(s.swa_evicted_seqlen[r], s.cache_protected_len[r])
    target = x.max(E, x.floor_page(pre_len - W - ps))
    return s.req(r, swa_evicted_seqlen=target)
