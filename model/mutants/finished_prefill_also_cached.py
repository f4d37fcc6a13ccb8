"""Planted: a request that finishes at its first token is released and then cached as unfinished.

Breaks Scheduler.process_batch_result_prefill (managers/scheduler.py): a finished request goes to
`release_kv_cache`; only an unfinished one (`elif`) goes to `tree_cache.cache_unfinished_req`.
With the `elif` written as `if`, the finished request's committed tokens, already inserted by
`cache_finished_req`, are inserted again: they are now duplicates of the tree's nodes, so the
request's copy is freed a second time (`conservation`), and the finished request re-locks the tree.
"""

from __future__ import annotations

from model import radix_cache, system
from model.prefill_adder import Adder
from model.state import FINISHED, State
from model.transition import Ctx

REPLACES = "process_batch_result_prefill"


def replacement(x: Ctx, s: State, ad: Adder, decoding: tuple = ()) -> State:
    s = system.process_batch_result_prefill.original(x, s, ad, decoding)
    for r in range(x.cfg.num_reqs):
        if x.cfg.slot_of(r) is not None:  # a streaming turn's row went to its session slot
            continue
        done_here = x.and_(ad.can_run[r], x.not_(ad.new_chunked[r]), s.status[r] == FINISHED)
        s = x.branch(done_here, lambda r=r: radix_cache.cache_unfinished_req(x, s, r, f"unfinished[{r}]"), lambda: s)
    return s
