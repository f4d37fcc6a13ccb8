"""Token allocators: `TokenToKVPoolAllocator` (page_size 1), `PagedTokenToKVPoolAllocator`,
`SWATokenToKVPoolAllocator` (hybrid SWA: a full and an SWA sub-allocator of the same page size, or
from v0.5.20 the per-request SWA ring), and the device allocation of a HiCache load-back.

SGLang files, v0.5.10.post1 .. 0.5.23: `mem_cache/allocator.py` and `mem_cache/swa_memory_pool.py`
(`SWATokenToKVPoolAllocator`) up to v0.5.12; `mem_cache/allocator/{token,paged,swa}.py` since
#26676 (v0.5.13; `swa_memory_pool.py` keeps `SWAKVPool`); `managers/cache_controller.py` (the
load-back). `ReqToTokenPool` is its free-row count `req_pool_available` (taken and given back in
model/schedule_batch.py and model/session.py; here it sizes the SWA ring). The eviction an
allocation asks for first, `mem_cache/common.py::evict_from_tree_cache`, is model/radix_cache.py's.

Abstracted: the free lists themselves. An allocator is its available size in tokens (always a page
multiple for paged allocators, since `free` releases whole pages); `need_sort` / release pages and
`free_group_begin/end` only reorder frees and are not modelled. The `full_to_swa_index_mapping`
is implicit: a full slot has an SWA slot iff it lies in a range whose SWA has not been released,
which is what the ownership ranges in specs/properties.py track.
"""

from __future__ import annotations

from typing import Any

from .state import State
from .transition import Ctx, transition


# -- the per-request SWA ring (v0.5.20+, config `swa_ring`) -------------------------------------------
# SGLang mem_cache/allocator/swa.py (v0.5.20:118-170, 230-270, 440-480): with `swa_req_ring_size` set
# (DeepSeek-V4 `unified_kv`), SWA lives in a ring each request row owns; the SWA allocator pages
# full-attention KV only, `free_swa` is a no-op, and `swa_available_size()` is free rows x ring cost.
def swa_paged(x: Ctx) -> bool:
    """SWA tokens are paged by an SWA sub-allocator (hybrid SWA without the per-request ring)."""
    return x.cfg.hybrid_swa and not x.cfg.swa_ring


def swa_ring_cost(x: Ctx) -> Any:
    """`swa_ring_cost_tokens` = ceil_page(ring_size), ring_size = W (`get_swa_ring_size`, no spec); a
    constant of the config (Config checks that W is one value)."""
    return x.ceil_page(x.p.sliding_window_size)


@transition("mem_cache/allocator/swa.py::SWATokenToKVPoolAllocator.swa_available_size", modifies=())
def swa_available_size(x: Ctx, s: State) -> Any:
    """`swa_available_size()`: the SWA sub-allocator's free tokens, or with the ring free rows x cost."""
    if x.cfg.swa_ring:
        return s.req_pool_available * swa_ring_cost(x)
    return s.swa_available


def swa_size(x: Ctx) -> Any:
    """`size_swa`: the SWA pool, or with the ring every request row's ring."""
    if x.cfg.swa_ring:
        return x.p.req_pool_size * swa_ring_cost(x)
    return x.p.swa_tokens


@transition("mem_cache/allocator.py::TokenToKVPoolAllocator.free", modifies=("full_available", "swa_available"))
def free(x: Ctx, s: State, full: Any, swa: Any = 0) -> State:
    """Return `full` full-pool tokens and `swa` SWA-pool tokens (whole pages) to the free lists.

    On the SWA allocator `free(idx)` frees the full slots and, through the index mapping, only the
    SWA slots not already released by `free_swa`; callers pass that count as `swa`."""
    s = s.set(full_available=s.full_available + full)
    if swa_paged(x):
        s = s.set(swa_available=s.swa_available + swa)
    return s


@transition("mem_cache/swa_memory_pool.py::SWATokenToKVPoolAllocator.free_swa", modifies=("swa_available",))
def free_swa(x: Ctx, s: State, n: Any) -> State:
    """Release `n` SWA slots of tokens whose full KV is kept (out-of-window release, tombstoning)."""
    if not swa_paged(x):
        return s
    return s.set(swa_available=s.swa_available + n)


@transition("mem_cache/allocator/token.py::TokenToKVPoolAllocator.alloc (whether it returns None)", modifies=())
def can_alloc(x: Ctx, s: State, tokens: Any) -> Any:
    """`alloc` / `alloc_extend` / `alloc_decode` return None iff a sub-allocator is short.
    `tokens` is already a page multiple for paged allocators (pages needed * page_size)."""
    ok = tokens <= s.full_available
    if swa_paged(x):
        ok = x.and_(ok, tokens <= s.swa_available)
    return ok


@transition("mem_cache/allocator/paged.py::PagedTokenToKVPoolAllocator.alloc_extend (whether it returns None)", modifies=())
def extend_fits(x: Ctx, s: State, need: Any, ext_total: Any, bs: Any) -> Any:
    """`alloc_extend` returns indices (not None): `need` tokens of new pages fit every pool. The
    v0.5.10 SWA allocator (paged) refused unless `extend_num_tokens + bs * page_size` fit each
    pool (an over-reservation; design flag `swa_extend_exact_pages` off)."""
    ok = can_alloc(x, s, need)
    if swa_paged(x) and x.ps > 1 and not x.on("swa_extend_exact_pages"):
        over = ext_total + bs * x.ps
        ok = x.and_(ok, over <= s.full_available, over <= s.swa_available)
    return ok


@transition(
    "mem_cache/allocator.py::TokenToKVPoolAllocator.alloc | PagedTokenToKVPoolAllocator.alloc_extend, alloc_decode",
    modifies=("full_available", "swa_available"),
)
def alloc(x: Ctx, s: State, tokens: Any) -> State:
    """Consume `tokens` from both sub-allocators (the caller checked `can_alloc`: no partial allocation)."""
    s = s.set(full_available=s.full_available - tokens)
    if swa_paged(x):
        s = s.set(swa_available=s.swa_available - tokens)
    return s


@transition("managers/cache_controller.py::HybridCacheController.load (device allocation)", modifies=("full_available", "swa_available"))
def alloc_pools(x: Ctx, s: State, full: Any, swa: Any) -> State:
    """Consume `full` full and `swa` SWA tokens separately (HiCache load-back allocates each pool's
    device indices on its own; the caller checked both fit)."""
    s = s.set(full_available=s.full_available - full)
    if swa_paged(x):
        s = s.set(swa_available=s.swa_available - swa)
    return s


@transition("mem_cache/allocator/swa.py::SWATokenToKVPoolAllocator.available_size", modifies=())
def available_size(x: Ctx, s: State) -> Any:
    """`allocator.available_size()`: min of the two sub-pools on the SWA allocator."""
    if swa_paged(x):
        return x.min(s.full_available, s.swa_available)
    return s.full_available
