"""Planted: `alloc_decode` decides "needs a new page" from the old length instead of the new one.

Breaks PagedTokenToKVPoolAllocator.alloc_decode (mem_cache/allocator.py) as driven by
`alloc_for_decode` (mem_cache/common.py): a request gets a new page when its new length
`seq_len + 1` starts one (new length = 1 mod page_size). Testing `seq_len` instead (= 1 mod
page_size) allocates the page one token late: the request writes its next token into a page it
never got. The ledger shows the row owning a page the allocator still counts free (`conservation`;
page_size > 1 only).
"""

from __future__ import annotations

from typing import Any

from model import allocator, radix_cache
from model.state import OOM_DECODE, State
from model.transition import Ctx

REPLACES = "alloc_for_decode"


def replacement(x: Ctx, s: State, batch: tuple) -> State:
    R, ps = x.cfg.num_reqs, x.ps
    if x.cfg.hybrid_swa:
        from model.schedule_batch import _evict_swa

        for r in range(R):
            fire = x.choose_bool_when(f"evict_swa[{r}]", batch[r])
            s = x.branch(fire, lambda r=r: _evict_swa(x, s, r, s.kv_committed_len[r]), lambda: s)
    bs = x.sum(x.ite(batch[r], 1, 0) for r in range(R))
    if ps == 1:
        need: Any = bs
    else:  # planted: C = 1 (mod ps) instead of C + 1 = 1 (mod ps)
        late = [x.and_(batch[r], x.page_aligned(s.kv_committed_len[r] - 1)) for r in range(R)]
        need = ps * x.sum(x.ite(late[r], 1, 0) for r in range(R))
    s = radix_cache.evict_from_tree_cache(x, s, bs * ps, "evict")
    ok = allocator.can_alloc(x, s, need)

    def done() -> State:
        s1 = allocator.alloc(x, s, need)
        for r in range(R):
            s1 = s1.req(r, kv_allocated_len=s1.kv_allocated_len[r] + x.ite(batch[r], 1, 0),
                        kv_committed_len=s1.kv_committed_len[r] + x.ite(batch[r], 1, 0))
        return s1

    return x.branch(ok, done, lambda: s.set(oom=OOM_DECODE))
