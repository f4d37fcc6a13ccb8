"""SGLang's own objects, built and driven for one scenario (runs only inside the worker
subprocess, whose PYTHONPATH selects one release: upstream/install.py::release_path).

Everything here is SGLang's code running for real on CPU: `PrefillAdder`, `Req`, `RadixCache` /
`SWARadixCache`, `ReqToTokenPool`, `TokenToKVPoolAllocator`, `PagedTokenToKVPoolAllocator`,
`SWATokenToKVPoolAllocator` over a real `SWAKVPool` of tiny `MHATokenToKVPool` buffers (1 head,
head_dim 8, bfloat16). Nothing is mocked. The only substitution is the allocator kernels
(upstream/kernels.py): up to 0.5.21 the paged `alloc_extend` / `alloc_decode` launch Triton
kernels, which are routed to SGLang's own torch reference `alloc_extend_naive` and to kvmc's
emulation of `alloc_decode_kernel`. With `configure("cuda")` (the worker's `--device cuda`) every
object and every tensor handed to SGLang is on the GPU and nothing is routed: the real Triton
kernels run, as in SGLang's production CUDA path.

Release differences are handled by feature tests on the imported objects (which attribute or
module exists), not by version strings; the families are listed in upstream/releases.py.
"""

from __future__ import annotations

import importlib
import importlib.util
from array import array
from typing import Any

import torch

from . import kernels

_SETUP: dict[str, Any] = {}
_DEVICE = ["cpu"]


def configure(device: str) -> None:
    """The device SGLang's objects live on (before the first `setup()`; the worker's `--device`)."""
    if _SETUP and device != _DEVICE[0]:
        raise RuntimeError(f"real.configure({device=}) after setup() on {_DEVICE[0]}")
    _DEVICE[0] = device


def device() -> str:
    return _DEVICE[0]


def ints(values: Any) -> Any:
    """An int64 tensor on the objects' device (what SGLang's scheduler hands its allocators)."""
    return torch.tensor(values, dtype=torch.int64, device=_DEVICE[0])


def cpu_ints(values: Any) -> Any:
    """An int64 cpu tensor (the allocators' `*_cpu` arguments)."""
    return torch.tensor(values, dtype=torch.int64)


def no_slots() -> Any:
    return torch.empty((0,), dtype=torch.int64, device=_DEVICE[0])


def allocator_modules() -> tuple[Any, Any, Any]:
    """(token, paged, swa) allocator modules of the release."""
    try:  # mem_cache/allocator/ package since #26676 (0.5.13)
        token_mod = importlib.import_module("sglang.srt.mem_cache.allocator.token")
        paged_mod = importlib.import_module("sglang.srt.mem_cache.allocator.paged")
        swa_mod = importlib.import_module("sglang.srt.mem_cache.allocator.swa")
    except ImportError:
        token_mod = paged_mod = importlib.import_module("sglang.srt.mem_cache.allocator")
        swa_mod = importlib.import_module("sglang.srt.mem_cache.swa_memory_pool")
    return token_mod, paged_mod, swa_mod


def setup() -> dict[str, Any]:
    """Import SGLang's modules once per process and set the global server args PrefillAdder reads."""
    if _SETUP:
        return _SETUP
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from sglang.srt.managers import schedule_batch, schedule_policy
    from sglang.srt.mem_cache import base_prefix_cache, memory_pool, radix_cache, swa_memory_pool
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    set_global_server_args_for_scheduler(ServerArgs(model_path="dummy"))
    token_mod, paged_mod, swa_mod = allocator_modules()
    if _DEVICE[0] == "cpu":  # on a GPU the real Triton kernels run
        kernels.route(paged_mod)
    else:  # ... except the launch that faults (upstream/devices.py::guard_paged_kernels)
        from .devices import guard_paged_kernels

        guard_paged_kernels(paged_mod.PagedTokenToKVPoolAllocator)
    _SETUP.update(
        sb=schedule_batch, sp=schedule_policy, bpc=base_prefix_cache, mp=memory_pool, rc=radix_cache,
        swa_pool=swa_memory_pool, swa_rc=_optional("sglang.srt.mem_cache.swa_radix_cache"),  # gone in 0.5.21
        unified_rc=_optional("sglang.srt.mem_cache.unified_radix_cache"),  # 0.5.12.post1+ (default for SWA from 0.5.16)
        CacheInitParams=CacheInitParams,
        SamplingParams=SamplingParams, token_mod=token_mod, paged_mod=paged_mod, swa_mod=swa_mod,
    )
    return _SETUP


def _optional(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# -- the request's KV record, release by release ----------------------------------------------------
# Up to 0.5.18 the lengths live on `Req` (`cache_protected_len`, `req_pool_idx`, `kv_committed_len`;
# `kv_allocated_len` in `req.kv` from 0.5.16). From 0.5.19 (#37108) `req.kv` (`ReqKvInfo`) is always
# present and holds them all. From 0.5.22 `req.prefix_len` / `extend_end` replace `prefix_indices` /
# `set_extend_range`, and the tree lock is a `TreeLock` in `req.lock`.
def kv_record(req: Any) -> Any:
    """The object that holds `cache_protected_len`, `req_pool_idx`, `kv_committed_len`."""
    kv = getattr(req, "kv", None)
    return kv if kv is not None and hasattr(kv, "req_pool_idx") else req


def row_of(req: Any) -> int:
    return kv_record(req).req_pool_idx


def set_protected(req: Any, n: int) -> None:
    kv_record(req).cache_protected_len = n


def has_prefix_len() -> bool:
    """0.5.22+: `Req.prefix_len` is an int the scheduler sets (no `prefix_indices`)."""
    m = setup()
    if "prefix_len_api" not in m:
        req = m["sb"].Req
        m["prefix_len_api"] = not hasattr(req, "set_extend_range") and not hasattr(req, "set_extend_input_len")
    return bool(m["prefix_len_api"])


def persistent_lock(tree: Any, req: Any, swa: bool) -> None:
    """The PrefillAdder's persistent lock on `req.last_node` as the release takes it:
    `req.lock = tree.lock(node)` (0.5.22+), `req.lock_receipt` (0.5.20-0.5.21),
    `req.swa_uuid_for_lock` (hybrid SWA up to 0.5.19)."""
    if hasattr(tree, "lock") and "lock" in vars(req):
        req.lock = tree.lock(req.last_node)
        return
    res = tree.inc_lock_ref(req.last_node)
    if hasattr(req, "lock_receipt"):
        req.lock_receipt = res.to_dec_params()
    elif swa:
        req.swa_uuid_for_lock = res.swa_uuid_for_lock


# -- pools -----------------------------------------------------------------------------------------
def kv_pool(size: int, page_size: int) -> Any:
    m = setup()["mp"]
    return m.MHATokenToKVPool(size, page_size=page_size, dtype=torch.bfloat16, head_num=1, head_dim=8, layer_num=1,
                              device=_DEVICE[0], enable_memory_saver=False)


def swa_kv_pool(size: int, size_swa: int, page_size: int) -> Any:
    m = setup()
    kw = dict(size=size, size_swa=size_swa, page_size=page_size, dtype=torch.bfloat16, head_num=1, head_dim=8,
              swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device=_DEVICE[0])
    try:
        return m["swa_pool"].SWAKVPool(**kw, enable_kvcache_transpose=False)
    except TypeError:  # the keyword went away in a later release
        return m["swa_pool"].SWAKVPool(**kw)


def allocator(kind: str, size: int, page_size: int, size_swa: int = 0, ring: int | None = None,
              pool: Any = None) -> Any:
    """A real allocator: "token" (page_size 1), "paged", or "swa" (over a real SWAKVPool). `ring`:
    the per-request SWA ring (0.5.20+): the pool's `swa_req_ring_size`, which SGLang sets only
    on DeepSeek-V4's pool (`deepseek_v4_memory_pool.py`: `get_swa_ring_size(W)` = W without
    speculative decoding), set here on the real SWAKVPool (the attribute the allocator reads), with
    the ReqToTokenPool `pool` whose free rows count the rings."""
    m = setup()
    if ring is not None:
        kv = swa_kv_pool(size, size_swa, page_size)
        if not hasattr(kv, "swa_req_ring_size"):
            raise RuntimeError("this release has no per-request SWA ring (BaseSWAKVPool.swa_req_ring_size, 0.5.20+)")
        kv.swa_req_ring_size = ring
        return m["swa_mod"].SWATokenToKVPoolAllocator(size, size_swa, page_size=page_size, dtype=torch.bfloat16,
                                                      device=_DEVICE[0], kvcache=kv, need_sort=False, req_to_token_pool=pool)
    if kind == "token":
        return m["token_mod"].TokenToKVPoolAllocator(size, dtype=torch.bfloat16, device=_DEVICE[0],
                                                     kvcache=kv_pool(size, 1), need_sort=False)
    if kind == "paged":
        return m["paged_mod"].PagedTokenToKVPoolAllocator(size, page_size=page_size, dtype=torch.bfloat16, device=_DEVICE[0],
                                                          kvcache=kv_pool(size, page_size), need_sort=False)
    return m["swa_mod"].SWATokenToKVPoolAllocator(size, size_swa, page_size=page_size, dtype=torch.bfloat16, device=_DEVICE[0],
                                                  kvcache=swa_kv_pool(size, size_swa, page_size), need_sort=False)


def take(alloc: Any, n: int, page_size: int) -> Any:
    """n fresh slots (n a page multiple): `alloc(n)`, or for the paged SWA allocator (whose
    `alloc` requires page_size 1) a one-request `alloc_extend` from an empty prefix."""
    if n == 0:
        return no_slots()
    if page_size == 1 or not hasattr(alloc, "swa_attn_allocator"):
        out = alloc.alloc(n)
    else:  # prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu, last_loc
        out = alloc.alloc_extend(ints([0]), cpu_ints([0]), ints([n]), cpu_ints([n]), ints([-1]), n)
    if out is None:
        raise RuntimeError(f"scenario setup: could not allocate {n=} slots (available {alloc.available_size()})")
    return out


def req_to_token_pool(size: int, max_context_len: int = 256) -> Any:
    return setup()["mp"].ReqToTokenPool(size=size, max_context_len=max_context_len, device=_DEVICE[0], enable_memory_saver=False)


def tree_cache(alloc: Any, page_size: int, window: int | None, pool: Any, kind: str | None = None) -> Any:
    """The release's tree: `kind` "radix" (RadixCache), "swa_radix" (SWARadixCache, up to 0.5.20),
    "unified" (UnifiedRadixCache with a FULL, and for a window an SWA, component; the hybrid-SWA
    default from 0.5.16, #30468). Default: what the release builds for a plain / hybrid-SWA model
    (`mem_cache/registry.py::default_radix_cache_factory`)."""
    m = setup()
    params = m["CacheInitParams"](disable=False, req_to_token_pool=pool, token_to_kv_pool_allocator=alloc,
                                  page_size=page_size, sliding_window_size=window)
    if kind is None:
        kind = default_tree(window is not None)
    if kind == "unified":
        ct = importlib.import_module("sglang.srt.mem_cache.unified_cache.components").ComponentType
        params.tree_components = (ct.FULL, ct.SWA) if window is not None else (ct.FULL,)
        return m["unified_rc"].UnifiedRadixCache(params)
    if kind == "swa_radix":
        if m["swa_rc"] is None:
            raise RuntimeError("this release has no SWARadixCache (mem_cache/swa_radix_cache.py, removed in 0.5.21)")
        return m["swa_rc"].SWARadixCache(params)
    return m["rc"].RadixCache(params)


def default_tree(swa: bool) -> str:
    """The tree `mem_cache/registry.py::default_radix_cache_factory` builds for a plain (`swa` False) or
    hybrid-SWA model with the radix cache on: "radix" / "swa_radix" / "unified", read from the release's
    source (not from its version string). Hybrid SWA is UnifiedRadixCache's from 0.5.16 (#30468); every
    radix cache is from 0.5.19 (the factory's last resort became `_create_unified_radix_cache`)."""
    m = setup()
    if "default_tree" not in m:
        spec = importlib.util.find_spec("sglang.srt.mem_cache.registry")
        src = open(spec.origin).read() if spec is not None and spec.origin else ""
        i = src.find("def default_radix_cache_factory")
        body = src[i:src.find("\ndef ", i + 1)] if i >= 0 else ""
        returns = [ln for ln in body.splitlines() if ln.strip().startswith("return ")]
        plain_unified = bool(returns) and "unified_radix_cache" in returns[-1]
        hits = [j for j in range(len(body)) if body.startswith("if ctx.is_hybrid_swa:", j)]
        swa_unified = plain_unified or any("unified_radix_cache" in body[j:j + 400] for j in hits)
        m["default_tree"] = ("unified" if plain_unified else "radix", "unified" if swa_unified else "swa_radix")
    return m["default_tree"][1 if swa else 0]


def unified_is_swa_default() -> bool:
    return default_tree(True) == "unified"


def enqueue_clips_max_new() -> bool:
    """Whether the release's scheduler clips max_new_tokens to memory at enqueue (#25126,
    `Scheduler.init_req_max_new_tokens`; from 0.5.21 through `max_new_tokens_for_memory`): read from
    its source (the scheduler module is not imported here)."""
    m = setup()
    if "enqueue_clip" not in m:
        spec = importlib.util.find_spec("sglang.srt.managers.scheduler")
        src = open(spec.origin).read() if spec is not None and spec.origin else ""
        i = src.find("def init_req_max_new_tokens")
        body = src[i:i + 3000] if i >= 0 else ""
        m["enqueue_clip"] = "max_total_num_tokens" in body or "max_new_tokens_for_memory" in body
    return bool(m["enqueue_clip"])


def enqueued_max_new(alloc: Any, input_len: int, max_new: int, total: int, page_size: int) -> int:
    """`max_new_tokens` as the release's scheduler enqueues a request of `input_len` tokens on a pool
    of `total` tokens (max_total_num_tokens; max_req_len = total - 1): the allocator's
    `max_new_tokens_for_memory` where it exists (0.5.21+), else `init_req_max_new_tokens`'s
    arithmetic (0.5.12.post1-0.5.20), else unchanged. The scheduler itself cannot be built here."""
    if not enqueue_clips_max_new():
        return max_new
    req_len = max(0, min(max_new, (total - 1) - input_len - 1))
    f = getattr(alloc, "max_new_tokens_for_memory", None)
    if f is not None:
        out = f(input_len, req_len, token_capacity=total, sliding_window_size=None, chunk_size=None)
        if out is None:
            raise RuntimeError(f"scenario setup: SGLang would abort a request of {input_len=} on a pool of {total=}")
        return int(out)
    paged = -(-input_len // page_size) * page_size
    return max(0, min(req_len, total - paged - page_size - 1))


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


def prefix_indices(req: Any, tree: Any) -> Any:
    """The matched prefix's KV slots (`req.prefix_indices`; from 0.5.22 the tree's path to `last_node`)."""
    if has_prefix_len():
        return tree.path_device_indices(req.last_node)[: int(req.prefix_len)]
    return req.prefix_indices


def prefix_len(req: Any) -> int:
    if has_prefix_len():
        return int(req.prefix_len)
    return len(req.prefix_indices)


def extend_len(req: Any) -> int:
    """Tokens the request extends by in this pass, as the release records it."""
    if has_prefix_len():
        return int(req.extend_end) - int(req.prefix_len)
    rng = getattr(req, "extend_range", None)
    if rng is not None and hasattr(rng, "length"):
        return int(rng.length)
    if hasattr(req, "fill_len") and not callable(getattr(req, "fill_len")):
        return int(req.fill_len) - prefix_len(req)
    return len(req.fill_ids) - prefix_len(req)


def set_committed(req: Any, indices: Any) -> None:
    """A chunked request with `len(indices)` tokens already computed: its prefix, and its next
    chunk = the rest of its fill ids (what the scheduler sets before `add_chunked_req`)."""
    fill = list(req.origin_input_ids) + list(req.output_ids)
    if hasattr(req, "full_untruncated_fill_ids"):
        req.full_untruncated_fill_ids = _ids(fill)
    if has_prefix_len():
        req.prefix_len = len(indices)
        req.extend_end = len(fill)
        return
    req.prefix_indices = indices
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


# -- the pass budgets: adder attributes up to 0.5.20, `PrefillAdder.memory_budget` from 0.5.21 (#36729) --
def budget_of(adder: Any) -> Any:
    return getattr(adder, "memory_budget", None)


def rem_swa_tokens(adder: Any) -> Any:
    b = budget_of(adder)
    return b.remaining_swa if b is not None else adder.rem_swa_tokens


def has_swa_budget(adder: Any) -> bool:
    if not getattr(adder, "is_hybrid_swa", False):
        return False
    return budget_of(adder) is not None or hasattr(type(adder), "rem_swa_tokens")


def adder_budgets(adder: Any, den: int) -> dict[str, Any]:
    """A PrefillAdder's budgets as the conformance rows compare them (`rem_total_tokens` times the
    new-token ratio's denominator `den`, so that both sides are whole numbers)."""
    out = {
        "rem_total_tokens*den": _num(adder.rem_total_tokens * den),
        "cur_rem_tokens": _num(adder.cur_rem_tokens),
        "rem_input_tokens": _num(adder.rem_input_tokens),
        "rem_chunk_tokens": None if adder.rem_chunk_tokens is None else _num(adder.rem_chunk_tokens),
    }
    if has_swa_budget(adder):
        out["rem_swa_tokens"] = _num(rem_swa_tokens(adder))
    return out


def _num(v: Any) -> Any:
    f = float(v)
    return int(f) if f == int(f) else f


def set_offsets(adder: Any, total: float, cur: int, swa: int) -> None:
    b = budget_of(adder)
    if b is not None:
        b.total_offset, b.current_offset = total, cur
        if hasattr(b, "swa_offset"):
            b.swa_offset = swa
        return
    adder.rem_total_token_offset = total
    adder.cur_rem_token_offset = cur
    if hasattr(adder, "rem_swa_token_offset"):
        adder.rem_swa_token_offset = swa


def swa_budget_for_req(adder: Any, extend: int, max_new: int, swa_host: int) -> tuple[int, bool]:
    """SGLang's SWA budget of one request and whether it took the host term: `_swa_budget_for_req`
    (0.5.11-0.5.20, its signature grew the host hit (#27391) and max_new (#32379)), or
    `SWAPrefillBudget.swa_tokens(extend, max_new, chunk_limit=rem_chunk_tokens, swa_host_hit_length)`
    (0.5.21+)."""
    import inspect

    b = budget_of(adder)
    if b is not None:
        return int(b.swa_tokens(extend, max_new, chunk_limit=adder.rem_chunk_tokens, swa_host_hit_length=swa_host)), True
    params = inspect.signature(adder._swa_budget_for_req).parameters
    if "max_new_tokens" in params:
        return int(adder._swa_budget_for_req(extend, max_new, swa_host_hit_length=swa_host)), True
    if "swa_host_hit_length" in params:
        return int(adder._swa_budget_for_req(extend, swa_host_hit_length=swa_host)), True
    return int(adder._swa_budget_for_req(extend)), False


def set_fill(req: Any, prefix: int, end: int) -> None:
    """The request's fill ids are its first `end` tokens, `prefix` of them cached (what the
    PrefillAdder leaves on an admitted request)."""
    fill = list(req.origin_input_ids) + list(req.output_ids)
    if hasattr(req, "full_untruncated_fill_ids"):
        req.full_untruncated_fill_ids = _ids(fill)
    if has_prefix_len():
        req.prefix_len, req.extend_end = prefix, end
    elif hasattr(req, "set_extend_range"):
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
    last = int(row[prefix - 1]) if prefix else -1
    return alloc.alloc_extend(ints([prefix]), cpu_ints([prefix]), ints([prefix + n]), cpu_ints([prefix + n]), ints([last]), n)


def _allocation_module() -> Any:
    """Where `alloc_token_slots` / `alloc_paged_token_slots_extend` live: mem_cache/common.py up to
    0.5.15.post1, mem_cache/allocation.py from 0.5.16."""
    try:
        return importlib.import_module("sglang.srt.mem_cache.allocation")
    except ImportError:
        return importlib.import_module("sglang.srt.mem_cache.common")


def extend_batch(tree: Any, rows: list[Any], prefixes: list[int], ns: list[int], page_size: int) -> Any:
    """One extend batch's KV, SGLang's own allocation step of `alloc_for_extend`: `alloc_token_slots(
    tree, sum(ns))` at page_size 1, else `alloc_paged_token_slots_extend` (each evicts from the tree
    first: `evict_from_tree_cache`, extend + batch_size * page_size when paged). The slots, or None for
    the RuntimeError ("Prefill out of memory") those raise."""
    mod = _allocation_module()
    total = sum(ns)
    try:
        if page_size == 1:
            return mod.alloc_token_slots(tree, total)
        last = [int(row[p - 1]) if p else -1 for row, p in zip(rows, prefixes)]
        seqs = [p + n for p, n in zip(prefixes, ns)]
        return mod.alloc_paged_token_slots_extend(tree, ints(prefixes), cpu_ints(prefixes), ints(seqs), cpu_ints(seqs),
                                                  ints(last), total)
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            raise
        return None


def decode_batch(tree: Any, rows: list[Any], lens: list[int], page_size: int) -> Any:
    """One decode step's KV for requests whose KV ends at `lens`, SGLang's own allocation step of
    `alloc_for_decode`: `alloc_token_slots(tree, bs)` at page_size 1, else
    `alloc_paged_token_slots_decode` (evict_from_tree_cache(bs * page_size), then `alloc_decode`).
    The slots, or None for the RuntimeError ("Decode out of memory") those raise."""
    mod = _allocation_module()
    try:
        if page_size == 1:
            return mod.alloc_token_slots(tree, len(lens))
        nxt = [n + 1 for n in lens]
        return mod.alloc_paged_token_slots_decode(tree, ints(nxt), cpu_ints(nxt), ints([int(row[n - 1]) for row, n in
                                                                                        zip(rows, lens)]))
    except RuntimeError as e:
        if "out of memory" not in str(e).lower():
            raise
        return None


def set_kv_lens(req: Any, committed: int, allocated: int) -> None:
    """`kv_committed_len` / `kv_allocated_len` as the release keeps them (from 0.5.18 the allocated
    length lives in `req.kv`, a `ReqKvInfo` set by the allocation)."""
    rec = kv_record(req)
    if rec is not req:  # 0.5.19+: one record for every length
        rec.kv_committed_len, rec.kv_allocated_len = committed, allocated
        return
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

    try:  # up to 0.5.18 `_release_overallocated_kv_indices` reads it there; later releases read the
        get_global_server_args().page_size = page_size  # allocator's and make server args read-only
    except (AttributeError, RuntimeError):  # RuntimeError: 0.5.20+ retired get_global_server_args
        pass
    import inspect

    if getattr(req, "finished_reason", None) is None:
        # the scheduler releases a request once check_finished set its reason; 0.5.22's
        # checkpoint_into_tree reads req.finished() to choose between a finish and a stash (a stash
        # frees out-of-window SWA slots first), so a release of an unfinished request is a stash
        req.finished_reason = setup()["sb"].FINISH_LENGTH(length=int(req.sampling_params.max_new_tokens or 0))
    if "checkpoint" in inspect.signature(release).parameters:  # 0.5.22+: the tree keeps what it can key
        release(req, tree, checkpoint=True)
    else:
        release(req, tree)


def finish_checkpoints() -> bool:
    """Whether this release's `release_kv_cache` puts a finished request into the tree through
    `checkpoint_into_tree` (0.5.22+: it re-matches the key after the insert, as a stash does)."""
    import inspect

    from sglang.srt.mem_cache.common import release_kv_cache as release

    return "checkpoint" in inspect.signature(release).parameters


def stash(req: Any, tree: Any) -> None:
    """The scheduler's stash of a chunk (or of a request that keeps decoding): `cache_unfinished_req`
    (`chunked=True` where the release takes it), from 0.5.22 `tree.checkpoint(req, up_to=extend_end)`
    and the prefix advanced to it (`mem_cache/common.py::checkpoint_kv_cache`)."""
    import inspect

    if not hasattr(tree, "cache_unfinished_req"):
        from sglang.srt.mem_cache.common import checkpoint_kv_cache

        checkpoint_kv_cache(req, tree)
        return
    if "chunked" in inspect.signature(tree.cache_unfinished_req).parameters:
        tree.cache_unfinished_req(req, chunked=True)
    else:
        tree.cache_unfinished_req(req)


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


# -- SGLang's busy-time memory check (0.5.13+: managers/scheduler_components/) -----------------------
def has_swa_req_ring() -> bool:
    """The release ships the per-request SWA ring (`BaseSWAKVPool.swa_req_ring_size`, 0.5.20+)."""
    base = _optional("sglang.srt.mem_cache.base_swa_memory_pool")
    cls = getattr(base, "BaseSWAKVPool", None) if base is not None else None
    return cls is not None and hasattr(cls, "swa_req_ring_size")


def has_invariant_checker() -> bool:
    try:  # find_spec raises when the parent package is missing (up to 0.5.12.post1)
        return importlib.util.find_spec("sglang.srt.managers.scheduler_components.invariant_checker") is not None
    except ModuleNotFoundError:
        return False


def has_busy_check_mixin() -> bool:
    """Up to 0.5.12.post1 the busy check is a method of `SchedulerRuntimeCheckerMixin`
    (managers/scheduler_runtime_checker_mixin.py); #25624 (0.5.13) moved it to the checker class."""
    mod = _optional("sglang.srt.managers.scheduler_runtime_checker_mixin")
    cls = getattr(mod, "SchedulerRuntimeCheckerMixin", None) if mod is not None else None
    return cls is not None and hasattr(cls, "self_check_during_busy")


def _busy_check_mixin(tree: Any, alloc: Any, pool: Any, page_size: int, size: int, size_swa: int | None,
                      last_batch: Any, running_batch: Any) -> dict[str, Any]:
    """`busy_check` up to 0.5.12.post1: SGLang's `SchedulerRuntimeCheckerMixin` methods, unchanged, on
    an instance that carries only the scheduler fields they read (no Scheduler is built: its
    constructor loads a model). 0.5.10.post1 has no `_get_total_uncached_sizes` and no SWA equation:
    its uncached term is `_get_batch_uncached_size` of the last batch, plus the running batch's
    after an extend, as its `self_check_during_busy` adds them."""
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.server_args import get_global_server_args

    mixin = importlib.import_module("sglang.srt.managers.scheduler_runtime_checker_mixin").SchedulerRuntimeCheckerMixin
    probe = type("BusyCheckProbe", (mixin,), {})()
    swa = size_swa is not None
    last_batch.forward_mode = ForwardMode.EXTEND  # the lifecycle's operations are prefill chunks
    for k, v in dict(tree_cache=tree, token_to_kv_pool_allocator=alloc, req_to_token_pool=pool, is_hybrid_swa=swa,
                     is_hybrid_ssm=False, enable_hisparse=False, hisparse_coordinator=None,
                     full_tokens_per_layer=size if swa else None, swa_tokens_per_layer=size_swa if swa else None,
                     max_total_num_tokens=size, page_size=page_size, last_batch=last_batch,
                     running_batch=running_batch, server_args=get_global_server_args(),
                     disaggregation_mode=DisaggregationMode.NULL).items():
        setattr(probe, k, v)
    if hasattr(probe, "_get_total_uncached_sizes"):
        full_u, swa_u = probe._get_total_uncached_sizes()
    else:
        full_u, swa_u = probe._get_batch_uncached_size(last_batch), 0
        if not running_batch.is_empty():
            full_u += probe._get_batch_uncached_size(running_batch)
    return _busy_outcome(probe.self_check_during_busy, full_u, swa_u if swa else 0)


def busy_check(tree: Any, alloc: Any, pool: Any, page_size: int, size: int, size_swa: int | None,
               last: list[Any], running: list[Any], chunked: Any) -> dict[str, Any]:
    """SGLang's own `SchedulerInvariantChecker.self_check_during_busy` over these objects, with
    `last_batch` / `running_batch` (real `ScheduleBatch`es) and the scheduler's `chunked_req`
    (read from 0.5.20, #37502): its `_get_total_uncached_sizes()` and whether it fired ("Full/SWA
    Pool Mem Leak Detected!"). The checker and its `SchedulerPoolStatsObserver` are SGLang's
    dataclasses, built with the fields the release declares; what is not memory (the stage-metrics
    recorder, HiSparse) is None, and the session registry is empty (the rows run no session)."""
    import dataclasses
    import types

    sb = setup()["sb"].ScheduleBatch
    last_batch = sb(reqs=list(last))
    running_batch = sb(reqs=list(running))
    if not has_invariant_checker():
        return _busy_check_mixin(tree, alloc, pool, page_size, size, size_swa, last_batch, running_batch)
    ic = importlib.import_module("sglang.srt.managers.scheduler_components.invariant_checker")
    ps_mod = importlib.import_module("sglang.srt.managers.scheduler_components.pool_stats_observer")
    from sglang.srt.disaggregation.utils import DisaggregationMode
    from sglang.srt.server_args import get_global_server_args

    try:
        server_args = get_global_server_args()  # a field of the checker up to 0.5.19
    except RuntimeError:  # 0.5.20+ retired it (and the checker has no such field)
        server_args = None

    swa = size_swa is not None
    values = dict(
        tree_cache=tree, token_to_kv_pool_allocator=alloc, req_to_token_pool=pool,
        session_controller=types.SimpleNamespace(sessions={}), hisparse_coordinator=None, is_hybrid_swa=swa,
        is_hybrid_ssm=False, enable_hisparse=False, full_tokens_per_layer=size if swa else None,
        swa_tokens_per_layer=size_swa if swa else None, max_total_num_tokens=size,
        get_last_batch=lambda: last_batch, get_running_batch=lambda: running_batch,
        disaggregation_mode=DisaggregationMode.NULL, page_size=page_size, server_args=server_args,
        scheduler_stage_metrics=None, get_chunked_req=lambda: chunked,
    )

    def build(cls: Any, **extra: Any) -> Any:
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in extra:
                kw[f.name] = extra[f.name]
            elif f.name in values:
                kw[f.name] = values[f.name]
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RuntimeError(f"{cls.__name__} needs field {f.name!r} the harness does not know")
        return cls(**kw)

    obs = build(ps_mod.SchedulerPoolStatsObserver)
    checker = build(ic.SchedulerInvariantChecker, pool_stats_observer=obs)
    full_u, swa_u = checker._get_total_uncached_sizes()
    return _busy_outcome(checker.self_check_during_busy, full_u, swa_u if swa else 0)


def _busy_outcome(check: Any, full_uncached: int, swa_uncached: int) -> dict[str, Any]:
    """Run SGLang's busy check: the uncached terms and what it asserted ("Full/SWA Pool Mem Leak
    Detected!", "Mem Leak Detected!"), or None when it passed."""
    try:
        check()
        fired = None
    except AssertionError as e:
        fired = str(e).split("!")[0] + "!"
    return {"uncached": int(full_uncached), "swa_uncached": int(swa_uncached), "fired": fired}


def path_lengths(tree: Any, tokens: list[int]) -> tuple[int, ...]:
    """The lengths of the tree's nodes on the path that holds `tokens`, root first: what SGLang made of
    an insert (UnifiedRadixCache's SWA component splits a new leaf longer than one page-aligned window,
    #26919, so a warm prefix can be two nodes). The model is given the same shape (its warm atoms)."""
    if not tokens:
        return ()
    m = setup()
    key = m["rc"].RadixKey(token_ids=_ids(tokens), extra_key=None)
    res = tree.match_prefix(m["bpc"].MatchPrefixParams(key=key))
    node = res.last_device_node
    core = getattr(tree, "tree_core", tree)
    if isinstance(node, int) and not isinstance(node, bool):
        if hasattr(core, "collect_path_info"):  # 0.5.22+: also the Rust tree core (no node objects)
            (path,) = core.collect_path_info([node])
            out = tuple(int(n.path_end) - int(n.path_start) for n in path)
            if sum(out) != len(tokens):
                raise RuntimeError(f"scenario setup: the tree holds {sum(out)} of the {len(tokens)} warm tokens ({out=})")
            return out
        if hasattr(core, "get_component_device_value") and hasattr(core, "_binding"):
            return _rust_path_lengths(core, node, len(tokens))
        node = core.node_by_id(node)
    root = core.root_node
    out = []
    while node is not None and node is not root:
        out.append(len(node.key))
        node = node.parent
    if sum(out) != len(tokens):
        raise RuntimeError(f"scenario setup: the tree holds {sum(out)} of the {len(tokens)} warm tokens ({out=})")
    return tuple(reversed(out))


def _rust_path_lengths(core: Any, leaf: int, n: int) -> tuple[int, ...]:
    """`path_lengths` on 0.5.21's Rust tree core (the default backend there), which has neither
    `node_by_id` nor `collect_path_info` (0.5.22): the path's Full indices root first
    (`collect_full_device_indices(leaf, root)`), then each live node handle whose Full value is a
    contiguous slice of them is a node of the path. Handles are never re-minted and the harness
    asks this only of a fresh tree, so a short scan of handles finds them all."""
    from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

    root = core.root_node_handle()
    path = [int(i) for i in core.collect_full_device_indices(leaf, root).tolist()]
    pos = {v: k for k, v in enumerate(path)}
    spans, misses, h = [], 0, 0
    while misses < 64:
        h += 1
        try:
            val = core.get_component_device_value(h, ComponentType.FULL)
        except KeyError:  # no node with this handle (never minted, or deleted)
            misses += 1
            continue
        misses = 0
        if h == root or val is None or len(val) == 0:
            continue
        vals = [int(i) for i in val.tolist()]
        if vals[0] in pos and vals == path[pos[vals[0]]: pos[vals[0]] + len(vals)]:
            spans.append((pos[vals[0]], len(vals)))
    out = tuple(k for _s, k in sorted(spans))
    if sum(out) != n or len(path) != n:
        raise RuntimeError(f"scenario setup: the tree holds {sum(out)} of the {n} warm tokens ({out=}, {len(path)=})")
    return out


def free_row(alloc: Any, idx: Any, swa_from: int) -> None:
    """Free a request's KV slots `idx` (row positions 0..) whose SWA below `swa_from` was already freed,
    as the release frees a row: `mem_cache/common.py::free_kv_row_segments` (0.5.19+: the part below
    the SWA cursor Full-only; from 0.5.20 a second SWA free of a slot is an error), else `free(idx)`
    (whose SWA side skips slots already released)."""
    from sglang.srt.mem_cache import common

    f = getattr(common, "free_kv_row_segments", None)
    if f is None or not hasattr(alloc, "swa_attn_allocator"):
        alloc.free(idx)
        return
    f(alloc, [(idx, 0)], swa_evicted_seqlen=swa_from)


# -- spec v2's decode over-allocation sizing (mem_cache/allocation_sizing.py) -----------------------
def has_spec_v2_alloc_lens() -> bool:
    """The release computes spec v2's A' in a helper the harness can call:
    `allocation_sizing.page_aligned_decode_alloc_lens` (0.5.19+; up to 0.5.18 the loop is inline in
    `speculative/eagle_utils.py::eagle_prepare_for_decode`, which needs a whole ScheduleBatch)."""
    mod = _optional("sglang.srt.mem_cache.allocation_sizing")
    return mod is not None and hasattr(mod, "page_aligned_decode_alloc_lens")


def spec_v2_sizing(page_size: int, steps: int, topk: int, draft: int, lens: list[tuple[int, int]],
                   batch: list[int]) -> dict[str, Any]:
    """SGLang's own spec v2 decode sizing for EAGLE with (`speculative_num_steps`,
    `speculative_eagle_topk`, `speculative_num_draft_tokens`) = (steps, topk, draft) at `page_size`,
    over requests whose (kv_committed_len, kv_allocated_len) are `lens`: `get_alloc_len_per_decode()`,
    `get_alloc_reserve_per_decode()`, `page_aligned_decode_alloc_lens(reqs, reserve=..., page_size=...)`
    (as eagle_prepare_for_decode calls it) and `ScheduleBatch._new_tokens_required_next_decode_spec_v2`
    over the requests `batch` (it reads only its arguments and the reserve). The settings are set on the
    release's published config bags (`runtime_context.get_context().override`, what `get_spec()` and
    `get_schedule()` read) and put back afterwards."""
    from sglang.srt.mem_cache import allocation_sizing as az
    from sglang.srt import runtime_context as rc

    reqs = []
    for i, (committed, allocated) in enumerate(lens):
        req = make_req(f"spec{i}", list(range(3000 + 100 * i, 3000 + 100 * i + max(1, committed))), 1)
        set_kv_lens(req, committed, allocated)
        reqs.append(req)
    ctx = rc.get_context()
    spec, sched = rc.get_spec(), rc.get_schedule()
    fields = dict(speculative_algorithm="EAGLE", speculative_num_steps=steps, speculative_eagle_topk=topk,
                  speculative_num_draft_tokens=draft, page_size=page_size)
    before = {k: getattr(sched if k == "page_size" else spec, k) for k in fields}
    ctx.override("kvmc conform spec_v2_alloc_len", **fields)
    try:
        a = az.get_alloc_len_per_decode()
        reserve = az.get_alloc_reserve_per_decode()
        cur, nxt, needed = az.page_aligned_decode_alloc_lens(reqs, reserve=reserve, page_size=page_size)
        sb = setup()["sb"].ScheduleBatch
        bare = sb.__new__(sb)  # no state: the method reads only its arguments
        tokens = sb._new_tokens_required_next_decode_spec_v2(bare, [reqs[r] for r in batch], page_size)
    finally:
        ctx.override("kvmc conform spec_v2_alloc_len (restore)", **before)
    return {"a": int(a), "reserve": int(reserve), "cur": [int(v) for v in cur], "nxt": [int(v) for v in nxt],
            "needed": int(needed), "tokens": int(tokens)}
