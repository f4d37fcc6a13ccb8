"""EAGLE speculative decoding, v1 (non-overlap scheduler), one decode step = draft + verify.

SGLang: speculative/eagle_worker.py, speculative/eagle_info.py (`EagleVerifyInput`),
speculative/triton_ops/cache_locs.py; sglang @ d55f1c28, digest section 7.

Per running request with committed length s (= C):
* draft: `speculative_num_steps` L steps of `speculative_eagle_topk` k branches; for page_size > 1
  and k > 1 each branch gets its own copy of the last partial page plus ceil((s mod ps + L)/ps)
  pages. The allocator state is backed up and restored right after, so the draft slots never
  persist, but they must fit at that moment;
* verify: a paged extend from s to s + D (`speculative_num_draft_tokens`);
* accept a tokens (1 <= a <= D: a choice), C += a, A := C, and free the rejected slots:
  positions [min(ceil(s + a), s + D), s + D), whole pages. The request keeps ceil(C) slots.

Abstracted: which tokens are accepted (only how many), the draft tree contents, spec v2.
"""

from __future__ import annotations

from typing import Any

from . import allocator
from .state import OOM_DECODE, State
from .transition import Ctx, transition


def draft_tokens(x: Ctx, s: State, r: int) -> Any:
    """Slots the draft phase allocates (and gives back) for request r."""
    spec = x.cfg.spec
    assert spec is not None
    L, k, ps = spec.num_steps, spec.topk, x.ps
    if ps == 1:
        return L * k
    if k == 1:
        return x.ceil_page(s.kv_committed_len[r] + L) - x.ceil_page(s.kv_committed_len[r])
    partial = s.kv_committed_len[r] - x.floor_page(s.kv_committed_len[r])
    return k * x.pages(partial + L) * ps


@transition(
    "speculative/eagle_info.py::EagleVerifyInput (free of rejected slots)",
    modifies=("full_available", "swa_available"),
)
def free_rejected(x: Ctx, s: State, r: int, seq: Any, accepted: Any) -> State:
    """Free positions [min(ceil(seq + accepted), seq + D), seq + D) of request r, whole pages."""
    D = x.cfg.spec.num_draft_tokens  # type: ignore[union-attr]
    keep = x.min(x.ceil_page(seq + accepted), seq + D)
    return allocator.free(x, s, x.ceil_page(seq + D) - x.ceil_page(keep), 0)


@transition(
    "speculative/eagle_worker.py::EAGLEWorker.forward_batch_generation (draft + verify)",
    modifies=(
        "full_available", "swa_available", "node_len", "node_device",
        "node_swa_tombstone", "kv_allocated_len", "kv_committed_len", "output_len", "oom",
    ),
)
def eagle_decode_step(x: Ctx, s: State, batch: tuple) -> State:
    """Draft (transient), verify (allocate s..s+D), accept, free the rejected pages."""
    spec = x.cfg.spec
    assert spec is not None
    R, D = x.cfg.num_reqs, spec.num_draft_tokens
    draft = x.sum(x.ite(batch[r], draft_tokens(x, s, r), 0) for r in range(R))
    s = allocator.evict_from_tree_cache(x, s, draft, "draft.evict")
    draft_ok = allocator.can_alloc(x, s, draft)
    verify = x.sum(
        x.ite(batch[r], x.ceil_page(s.kv_committed_len[r] + D) - x.ceil_page(s.kv_committed_len[r]), 0) for r in range(R)
    )

    def run_verify() -> State:
        s1 = allocator.evict_from_tree_cache(x, s, verify, "verify.evict")
        ok = allocator.can_alloc(x, s1, verify)

        def accept() -> State:
            s2 = allocator.alloc(x, s1, verify)
            for r in range(R):
                room = x.max(1, x.min(D, x.p.max_new_tokens[r] - s2.output_len[r]))
                with x.path(batch[r]):
                    a = x.ite(batch[r], x.choose_int(f"accept[{r}]", 1, room), 0)
                seq = s2.kv_committed_len[r]
                s2 = x.branch(batch[r], lambda r=r, seq=seq, a=a: free_rejected(x, s2, r, seq, a), lambda: s2)
                s2 = s2.req(
                    r,
                    kv_committed_len=seq + a,
                    kv_allocated_len=x.ite(batch[r], seq + a, s2.kv_allocated_len[r]),
                    output_len=s2.output_len[r] + a,
                )
            return s2

        return x.branch(ok, accept, lambda: s1.set(oom=OOM_DECODE))

    return x.branch(draft_ok, run_verify, lambda: s.set(oom=OOM_DECODE))
