"""Route the paged allocator's Triton kernels to torch on a CPU-only host.

Up to 0.5.21 `PagedTokenToKVPoolAllocator.alloc_extend` / `alloc_decode` launch
`alloc_extend_kernel[(bs,)](...)` / `alloc_decode_kernel[(bs,)](...)` (the module-level names
imported from `mem_cache/triton_ops/allocator.py`) *before* checking whether enough pages are free;
from 0.5.22 SGLang picks a torch-native path itself when no Triton device exists.

`route(module)` rebinds those two names in the allocator's module (and nowhere else):
* the extend launch calls SGLang's own torch reference `alloc_extend_naive` from the same module;
* the decode launch calls `_alloc_decode`, kvmc's emulation of `alloc_decode_kernel`, written from
  reading what the kernel computes (not copied): request i, whose new token is at position
  seq_len - 1, gets `last_loc + 1` when that position is inside its last page, else the first
  slot of the next free page, taken in batch order.
Both receive the free pages padded with dummy page numbers, so that a batch needing more pages
than are free does not index past the tensor before the allocator's own check (`num_new_pages >
len(free_pages)` -> None) decides, as it would on a GPU where the kernel reads out of bounds.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

_PAD_PAGE = 1 << 40  # a page number no pool has: visible in any index that leaks through


class _Launcher:
    def __init__(self, run: Any) -> None:
        self._run = run

    def __getitem__(self, grid: Any) -> Any:
        return self._run


def _padded(free_pages: torch.Tensor, extra: int) -> torch.Tensor:
    pad = torch.full((max(extra, 0),), _PAD_PAGE, dtype=free_pages.dtype, device=free_pages.device)
    return torch.cat([free_pages, pad])


def _alloc_decode(seq_lens: torch.Tensor, last_loc: torch.Tensor, free_pages: torch.Tensor, out_indices: torch.Tensor,
                  bs_upper: int, page_size: int) -> None:
    pages = _padded(free_pages, len(seq_lens))
    taken = 0
    for i in range(len(seq_lens)):
        pre = int(seq_lens[i]) - 1
        if pre % page_size == 0:  # the new token opens a page
            out_indices[i] = int(pages[taken]) * page_size
            taken += 1
        else:
            out_indices[i] = int(last_loc[i]) + 1


def torch_kernels(module: Any) -> tuple[Any, Any]:
    """kvmc's torch versions of the module's two kernels, as plain functions with the kernels'
    arguments: (extend or None where the module has no `alloc_extend_naive`, decode).
    `route` launches them on cpu; upstream/kernels_check.py compares them with the real kernels."""
    naive = getattr(module, "alloc_extend_naive", None)
    extend = None
    if naive is not None:

        def extend(prefix_lens: torch.Tensor, seq_lens: torch.Tensor, last_loc: torch.Tensor, free_pages: torch.Tensor,
                   out_indices: torch.Tensor, bs_upper: int, page_size: int) -> None:
            need = int(((seq_lens + page_size - 1) // page_size - (prefix_lens + page_size - 1) // page_size).sum())
            naive(prefix_lens, seq_lens, last_loc, _padded(free_pages, need), out_indices, page_size, free_pages.device)

    return extend, _alloc_decode


def route(module: Any) -> None:
    """Rebind the kernel names in the paged allocator's module (no-op where they do not exist)."""
    extend, decode = torch_kernels(module)
    if hasattr(module, "alloc_extend_kernel") and extend is not None:
        module.alloc_extend_kernel = _Launcher(extend)
    if hasattr(module, "alloc_decode_kernel"):
        module.alloc_decode_kernel = _Launcher(decode)


def launch_kind(module: Any, allocator: Any = None) -> str:
    """What the paged allocator's `alloc_extend` runs in this process: "routed" (kvmc's torch
    versions, `route`), "torch" (0.5.22+: SGLang's own torch path, `use_triton_kernels` False on
    `allocator`), "triton" (the real Triton JITFunction), or "stub" (kvmc's CPU stand-in, whose
    launch raises)."""
    if allocator is not None and getattr(allocator, "use_triton_kernels", True) is False:
        return "torch"
    k = getattr(module, "alloc_extend_kernel", None)
    if isinstance(k, _Launcher):
        return "routed"
    from .devices import _is_stub

    mod = sys.modules.get(type(k).__module__)
    if _is_stub(getattr(mod, "__file__", None)):
        return "stub"
    return "triton" if type(k).__module__.startswith("triton") else f"other ({type(k).__module__}.{type(k).__name__})"
