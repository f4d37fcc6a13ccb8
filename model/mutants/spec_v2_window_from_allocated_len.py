"""Planted: spec v2's window release measures the window back from the allocated length A instead of C.

Breaks ScheduleBatch.maybe_evict_swa as `eagle_prepare_for_decode` calls it (speculative/eagle_utils.py,
mem_cache/common.py::free_swa_out_of_window_slots): pre_len is `req.seqlen - 1`, the committed length C.
Under spec v2 each row is over-allocated to A' >= C + 2a, and [C, A) holds no attended token yet; a
release from A frees up to 2a SWA slots of the window [C - W, C) the next draft and verify read. The
slots are freed once and `swa_evicted_seqlen` moves with them, so both ledgers and SGLang's busy
check balance: `residency` sees it (the request reads SWA it no longer holds). A plain decode has
A = C at page 1, so only the spec v2 configs tell the two apart.
"""

from __future__ import annotations

from model import schedule_batch
from model.state import State
from model.transition import Ctx

REPLACES = "maybe_evict_swa"


def replacement(x: Ctx, s: State, batch: tuple) -> State:
    for r in range(x.cfg.num_reqs):
        fire = x.choose_bool_when(f"evict_swa[{r}]", batch[r])
        s = x.branch(fire, lambda r=r: schedule_batch._evict_swa(x, s, r, s.kv_allocated_len[r]), lambda: s)
    return s
