"""Planted: spec v2 records one slot less of the over-allocation than it allocated.

Breaks `eagle_prepare_for_decode` / `alloc_for_spec_decode` (speculative/eagle_utils.py,
mem_cache/allocation.py, v0.5.18): a decode step extends request r's row from A to
A' = max(A, ceil(C + 2a)) and must record `kv_allocated_len = A'`, so that the release frees
[ceil(C), A'). Here a row that grew records A' - 1: the slot at A' - 1 is allocated but no row
length covers it, and the next step's extend (from A' - 1) writes a fresh slot over it, so it is
owned by nobody (the "stranded tail" SGLang's own comment in that function warns of). It is the
planted leak that shows #27228 under spec v2: with `spec_topk_busy_check` off, SGLang's busy check
is skipped for topk > 1 and the leak goes unreported (`busy_check_complete` fails); with the fix
on, the check fires.
"""

from __future__ import annotations

from model import speculative
from model.state import State
from model.transition import Ctx

REPLACES = "spec_v2_decode_step"


def replacement(x: Ctx, s: State, batch: tuple) -> State:
    s1 = speculative.spec_v2_decode_step.original(x, s, batch)
    for r in range(x.cfg.num_reqs):
        grew = x.and_(batch[r], s1.kv_allocated_len[r] > s.kv_allocated_len[r])
        s1 = s1.req(r, kv_allocated_len=x.ite(grew, s1.kv_allocated_len[r] - 1, s1.kv_allocated_len[r]))
    return s1
