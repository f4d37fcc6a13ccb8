"""Planted: the waiting-queue loop compares `can_run_list` with the req_to_token pool's size.

Breaks Scheduler.get_new_batch_prefill (managers/scheduler.py): a request is only tried while
`len(adder.can_run_list) < req_to_token_pool.available_size()`, since every admitted request needs
a req_to_token slot. Reading the pool's total `size` instead ignores the slots running requests
hold, so more requests are admitted than there are free slots and `alloc_req_slots` fails
("alloc_req_slots runs out of memory": `no_prefill_oom`).

The loop's bound is `get_num_allocatable_reqs(running_bs) = min(pp_max - running_bs, free rows)`
(v0.5.12.post1+), so the mutant only shows where a row is held outside the running batch: a finished
streaming-session turn whose slot keeps its row (config `sessions`, req_pool_size 1: depth 2).
"""

from __future__ import annotations

from model import system
from model.prefill_adder import Adder
from model.state import State
from model.transition import Ctx

REPLACES = "get_new_batch_prefill"


def replacement(x: Ctx, s: State) -> tuple[State, Adder]:
    # planted: the pass sees req_pool_size free slots; nothing it calls changes or reads it otherwise
    s2, ad = system.get_new_batch_prefill.original(x, s.set(req_pool_available=x.p.req_pool_size))
    return s2.set(req_pool_available=s.req_pool_available), ad
