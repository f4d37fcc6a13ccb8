"""Planted: `_evict_swa` releases the request's SWA slots up to one page before the new token, forgetting the window.

Breaks ScheduleBatch._evict_swa / free_swa_out_of_window_slots (managers/schedule_batch.py,
mem_cache/common.py): only the slots that slid out of the sliding window, [E, pre_len - W ...),
may go back to the SWA allocator; the last W positions are read by the next decode's attention.
Here the threshold drops W, so with W > 3 the next token's window reads SWA slots already freed
(and maybe handed to another request). The slots are freed once and `swa_evicted_seqlen` moves
with them, so the SWA ledger and SGLang's busy check balance: only `residency` sees it.
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "_evict_swa"


def replacement(x: Ctx, s: State, r: int, pre_len: Any) -> State:
    E = x.max(s.swa_evicted_seqlen[r], s.cache_protected_len[r])
    target = x.max(E, x.floor_page(pre_len - x.ps))
    s = allocator.free_swa(x, s, target - E)
    return s.req(r, swa_evicted_seqlen=target)
