"""SGLang's own objects, built and driven for one scenario (runs only inside the worker
subprocess, whose PYTHONPATH selects one release: upstream/install.py::release_path).

Everything here is SGLang's code running for real on CPU: `PrefillAdder`, `Req`, `RadixCache` /
`SWARadixCache`, `ReqToTokenPool`, `TokenToKVPoolAllocator`, `PagedTokenToKVPoolAllocator`,
`SWATokenToKVPoolAllocator` over a real `SWAKVPool` of tiny `MHATokenToKVPool` buffers (1 head,
head_dim 8, bfloat16). Nothing is mocked. The only substitution is the allocator kernels
(upstream/kernels.py): up to 0.5.21 the paged `alloc_extend` / `alloc_decode` launch Triton
kernels, which are routed to SGLang's own torch reference `alloc_extend_naive` and to kvmc's
emulation of `alloc_decode_kernel`.

Release differences are handled by feature tests on the imported objects (which attribute or
module exists), not by version strings; the families are listed in upstream/releases.py.
"""

from __future__ import annotations

import importlib
from array import array
from typing import Any

import torch

from . import kernels

_SETUP: dict[str, Any] = {}


def setup() -> dict[str, Any]:
    """Import SGLang's modules once per process and set the global server args PrefillAdder reads."""
    if _SETUP:
        return _SETUP
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from sglang.srt.managers import schedule_batch, schedule_policy
    from sglang.srt.mem_cache import base_prefix_cache, memory_pool, radix_cache, swa_memory_pool, swa_radix_cache
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(ServerArgs(model_path="dummy"))
    try:  # mem_cache/allocator/ package since #26676 (0.5.13)
        token_mod = importlib.import_module("sglang.srt.mem_cache.allocator.token")
        paged_mod = importlib.import_module("sglang.srt.mem_cache.allocator.paged")
        swa_mod = importlib.import_module("sglang.srt.mem_cache.allocator.swa")
    except ImportError:
        token_mod = paged_mod = importlib.import_module("sglang.srt.mem_cache.allocator")
        swa_mod = swa_memory_pool
    kernels.route(paged_mod)
    _SETUP.update(
        sb=schedule_batch, sp=schedule_policy, bpc=base_prefix_cache, mp=memory_pool, rc=radix_cache,
        swa_pool=swa_memory_pool, swa_rc=swa_radix_cache, CacheInitParams=CacheInitParams,
        SamplingParams=SamplingParams, token_mod=token_mod, paged_mod=paged_mod, swa_mod=swa_mod,
    )
    return _SETUP


# -- pools -----------------------------------------------------------------------------------------
def kv_pool(size: int, page_size: int) -> Any:
    m = setup()["mp"]
    return m.MHATokenToKVPool(size, page_size=page_size, dtype=torch.bfloat16, head_num=1, head_dim=8, layer_num=1,
                              device="cpu", enable_memory_saver=False)


def swa_kv_pool(size: int, size_swa: int, page_size: int) -> Any:
    m = setup()
    kw = dict(size=size, size_swa=size_swa, page_size=page_size, dtype=torch.bfloat16, head_num=1, head_dim=8,
              swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device="cpu")
    try:
        return m["swa_pool"].SWAKVPool(**kw, enable_kvcache_transpose=False)
    except TypeError:  # the keyword went away in a later release
        return m["swa_pool"].SWAKVPool(**kw)


def allocator(kind: str, size: int, page_size: int, size_swa: int = 0) -> Any:
    """A real allocator: "token" (page_size 1), "paged", or "swa" (over a real SWAKVPool)."""
    m = setup()
    if kind == "token":
        return m["token_mod"].TokenToKVPoolAllocator(size, dtype=torch.bfloat16, device="cpu",
                                                     kvcache=kv_pool(size, 1), need_sort=False)
    if kind == "paged":
        return m["paged_mod"].PagedTokenToKVPoolAllocator(size, page_size=page_size, dtype=torch.bfloat16, device="cpu",
                                                          kvcache=kv_pool(size, page_size), need_sort=False)
    return m["swa_mod"].SWATokenToKVPoolAllocator(size, size_swa, page_size=page_size, dtype=torch.bfloat16, device="cpu",
                                                  kvcache=swa_kv_pool(size, size_swa, page_size), need_sort=False)


def take(alloc: Any, n: int, page_size: int) -> Any:
    """n fresh slots (n a page multiple): `alloc(n)`, or for the paged SWA allocator (whose
    `alloc` requires page_size 1) a one-request `alloc_extend` from an empty prefix."""
    if n == 0:
        return torch.empty((0,), dtype=torch.int64)
    if page_size == 1 or not hasattr(alloc, "swa_attn_allocator"):
        out = alloc.alloc(n)
    else:
        z = torch.zeros((1,), dtype=torch.int64)
        seq = torch.tensor([n], dtype=torch.int64)
        out = alloc.alloc_extend(z, z.clone(), seq, seq.clone(), torch.tensor([-1], dtype=torch.int64), n)
    if out is None:
        raise RuntimeError(f"scenario setup: could not allocate {n=} slots (available {alloc.available_size()})")
    return out


def req_to_token_pool(size: int, max_context_len: int = 256) -> Any:
    return setup()["mp"].ReqToTokenPool(size=size, max_context_len=max_context_len, device="cpu", enable_memory_saver=False)


def tree_cache(alloc: Any, page_size: int, window: int | None, pool: Any) -> Any:
    m = setup()
    params = m["CacheInitParams"](disable=False, req_to_token_pool=pool, token_to_kv_pool_allocator=alloc,
                                  page_size=page_size, sliding_window_size=window)
    if window is not None:
        return m["swa_rc"].SWARadixCache(params)
    return m["rc"].RadixCache(params)


def insert(tree: Any, tokens: list[int], indices: Any) -> None:
    m = setup()
    key = m["rc"].RadixKey(token_ids=_ids(tokens), extra_key=None)
    tree.insert(m["bpc"].InsertParams(key=key, value=indices))


def _ids(tokens: list[int]) -> Any:
    """Token ids as the release stores them (`array('q')` from 0.5.13, a list before)."""
    sig = setup()["sb"].Req.__init__.__annotations__.get("origin_input_ids", "")
    return array("q", tokens) if "array" in str(sig) else list(tokens)


# -- requests --------------------------------------------------------------------------------------
def make_req(rid: str, tokens: list[int], max_new_tokens: int, output_len: int = 0) -> Any:
    m = setup()
    sp = m["SamplingParams"](max_new_tokens=max_new_tokens)
    req = m["sb"].Req(rid, "", _ids(tokens), sp)
    if output_len:
        out = list(range(7_000_000, 7_000_000 + output_len))
        req.output_ids = array("q", out) if isinstance(req.output_ids, array) else out
    return req


def prefix_len(req: Any) -> int:
    return len(req.prefix_indices)


def extend_len(req: Any) -> int:
    """Tokens the request extends by in this pass, as the release records it."""
    rng = getattr(req, "extend_range", None)
    if rng is not None and hasattr(rng, "length"):
        return int(rng.length)
    if hasattr(req, "fill_len") and not callable(getattr(req, "fill_len")):
        return int(req.fill_len) - prefix_len(req)
    return len(req.fill_ids) - prefix_len(req)


def set_committed(req: Any, indices: Any) -> None:
    """A chunked request with `len(indices)` tokens already computed: its prefix, and its next
    chunk = the rest of its fill ids (what the scheduler sets before `add_chunked_req`)."""
    req.prefix_indices = indices
    fill = list(req.origin_input_ids) + list(req.output_ids)
    if hasattr(req, "full_untruncated_fill_ids"):
        req.full_untruncated_fill_ids = _ids(fill)
    if hasattr(req, "set_extend_range"):
        req.set_extend_range(len(indices), len(fill))
    else:
        if hasattr(req, "fill_ids"):
            req.fill_ids = _ids(fill) if not hasattr(req, "fill_len") else req.fill_ids
        if hasattr(req, "fill_len") and not callable(getattr(req, "fill_len")):
            req.fill_len = len(fill)
        req.set_extend_input_len(len(fill) - len(indices))


def running_batch(reqs: list[Any]) -> Any:
    """SGLang's ScheduleBatch holding the running requests (PrefillAdder reads `.reqs`)."""
    sb = setup()["sb"].ScheduleBatch
    return sb(reqs=reqs)


def prefill_adder(tree: Any, alloc: Any, page_size: int, running: Any, ratio: float, rem_input: int,
                  rem_chunk: int | None) -> Any:
    return setup()["sp"].PrefillAdder(page_size, tree, alloc, running, ratio, rem_input, rem_chunk)


def set_fill(req: Any, prefix: int, end: int) -> None:
    """The request's fill ids are its first `end` tokens, `prefix` of them cached (what the
    PrefillAdder leaves on an admitted request)."""
    fill = list(req.origin_input_ids) + list(req.output_ids)
    if hasattr(req, "full_untruncated_fill_ids"):
        req.full_untruncated_fill_ids = _ids(fill)
    if hasattr(req, "set_extend_range"):
        req.set_extend_range(prefix, end)
    elif hasattr(req, "fill_len") and not callable(getattr(req, "fill_len")):
        req.fill_len = end
    else:
        req.fill_ids = _ids(fill[:end])


def extend_slots(alloc: Any, row: Any, prefix: int, n: int, page_size: int) -> Any:
    """`n` new KV slots after `prefix` for one request (`alloc_extend` with its last location on
    a paged allocator, `alloc(n)` at page_size 1): what `alloc_for_extend` does for it."""
    if page_size == 1:
        return alloc.alloc(n)
    t = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    last = int(row[prefix - 1]) if prefix else -1
    return alloc.alloc_extend(t(prefix), t(prefix), t(prefix + n), t(prefix + n), t(last), n)


def set_kv_lens(req: Any, committed: int, allocated: int) -> None:
    """`kv_committed_len` / `kv_allocated_len` as the release keeps them (from 0.5.18 the allocated
    length lives in `req.kv`, a `ReqKvInfo` set by the allocation)."""
    req.kv_committed_len = committed
    info = getattr(setup()["sb"], "ReqKvInfo", None)
    if info is not None:
        if getattr(req, "kv", None) is None:
            req.kv = info(kv_allocated_len=allocated, swa_evicted_seqlen=0)
        else:
            req.kv.kv_allocated_len = allocated
    else:
        req.kv_allocated_len = allocated


def release_kv_cache(req: Any, tree: Any, page_size: int) -> None:
    """SGLang's own `mem_cache/common.py::release_kv_cache` (cache_finished_req, the
    over-allocation, the ReqToTokenPool slot); it reads the page size from the global server args,
    which a `ServerArgs(model_path="dummy")` leaves unset."""
    from sglang.srt.mem_cache.common import release_kv_cache as release
    from sglang.srt.server_args import get_global_server_args

    get_global_server_args().page_size = page_size
    release(req, tree)


def evict(tree: Any, full: int, swa: int) -> None:
    params = setup()["bpc"].EvictParams(num_tokens=full, swa_num_tokens=swa)
    tree.evict(params)


def tree_sizes(tree: Any, alloc: Any) -> dict[str, int]:
    if hasattr(alloc, "swa_attn_allocator"):
        return {"full_available": int(alloc.full_available_size()), "swa_available": int(alloc.swa_available_size()),
                "full_evictable": int(tree.full_evictable_size()), "swa_evictable": int(tree.swa_evictable_size()),
                "full_protected": int(tree.full_protected_size()), "swa_protected": int(tree.swa_protected_size())}
    return {"full_available": int(alloc.available_size()), "full_evictable": int(tree.evictable_size()),
            "full_protected": int(tree.protected_size())}


def add_req_result() -> Any:
    return setup()["sp"].AddReqResult
