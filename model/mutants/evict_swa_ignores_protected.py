"""Planted: `_evict_swa` starts freeing at `swa_evicted_seqlen` without first raising it to
`cache_protected_len`.

Breaks ScheduleBatch._evict_swa (managers/schedule_batch.py): the tree owns [0, P) of the request's
row (inserted by cache_unfinished_req), so the out-of-window release must start at max(E, P).
Starting at E frees SWA slots of [E, P) that belong to the tree: a double free of the SWA pool
(`conservation`).
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "_evict_swa"


def replacement(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    W, ps = x.p.sliding_window_size, x.ps
    E = s.swa_evicted_seqlen[r]  # planted: not max(E, P)
    target = x.max(x.max(E, s.cache_protected_len[r]), x.floor_page(pre_len - W - ps))
    s = allocator.free_swa(x, s, target - E)
    return s.req(r, swa_evicted_seqlen=target)
