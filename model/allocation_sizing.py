"""Spec v2's decode over-allocation sizing: SGLang's mem_cache/allocation_sizing.py (v0.5.16+;
`get_alloc_len_per_decode`, and the page-aligned lengths `page_aligned_decode_alloc_lens` of
v0.5.19+), which `ScheduleBatch._new_tokens_required_next_decode_spec_v2`
(model/schedule_batch.py) and `eagle_prepare_for_decode` (model/speculative.py) both read.
Modelled as of SGLang 0.5.23.

Abstracted: adaptive speculative decoding (a is a constant of the config), and the reserve's
reason (the overlap scheduler's committed-length lag; kvmc runs the non-overlap loop).
"""

from __future__ import annotations

from typing import Any

from .state import State
from .transition import Ctx, transition


@transition("mem_cache/allocation_sizing.py::get_alloc_len_per_decode", modifies=())
def alloc_len_per_decode(x: Ctx) -> int:
    """`allocation_sizing.get_alloc_len_per_decode()` (v0.5.16+): max(L*k, D), or for a draft tree
    at page > 1 the page-aligned footprint of each of the k branches, ceil((ps - 1 + L) / ps) pages."""
    spec = x.cfg.spec
    assert spec is not None
    L, k, D, ps = spec.num_steps, spec.topk, spec.num_draft_tokens, x.ps
    if ps == 1 or k == 1:
        return max(L * k, D)
    return max(-(-(ps - 1 + L) // ps) * ps * k, D)


@transition("mem_cache/allocation_sizing.py::page_aligned_decode_alloc_lens (v0.5.19+)", modifies=())
def spec_v2_alloc_len(x: Ctx, s: State, r: int) -> Any:
    """A' = max(A, ceil(C + 2a)): the row length request r is over-allocated to this decode step."""
    target = s.kv_committed_len[r] + 2 * alloc_len_per_decode(x)
    if x.on("spec_v2_page_align"):
        target = x.ceil_page(target)
    return x.max(s.kv_allocated_len[r], target)
