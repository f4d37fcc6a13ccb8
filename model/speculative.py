"""EAGLE speculative decoding, one decode step = draft + verify: v1 (`Spec(version=1)`) and spec v2
(`Spec(version=2)`), both on the non-overlap scheduler.

v1 — SGLang <= v0.5.12.post1: speculative/eagle_worker.py, speculative/eagle_info.py
(`EagleVerifyInput`), speculative/triton_ops/cache_locs.py; digest section 7. The v1 worker was
removed in v0.5.13 (#25464: `eagle_worker.py` is absent from the 0.5.13 wheel).

Per running request with committed length s (= C):
* draft: `speculative_num_steps` L steps of `speculative_eagle_topk` k branches; for page_size > 1
  and k > 1 each branch gets its own copy of the last partial page plus ceil((s mod ps + L)/ps)
  pages. The allocator state is backed up and restored right after, so the draft slots never
  persist, but they must fit at that moment;
* verify: a paged extend from s to s + D (`speculative_num_draft_tokens`);
* accept a tokens (1 <= a <= D: a choice), C += a, A := C, and free the rejected slots:
  positions [min(ceil(s + a), s + D), s + D), whole pages. The request keeps ceil(C) slots.

v2 — SGLang v0.5.13+: speculative/eagle_utils.py::eagle_prepare_for_decode (v0.5.18:897-970;
`eagle_info_v2.py::prepare_for_decode` in v0.5.13-0.5.14), the sizing in
mem_cache/allocation_sizing.py (`get_alloc_len_per_decode`, `get_alloc_reserve_per_decode`,
v0.5.18:10-47; model/allocation_sizing.py), the commit in managers/scheduler_components/batch_result_processor.py
(`kv_committed_len += accepted`) and the release in mem_cache/common.py
(`_release_overallocated_kv_indices`). Per running request, with reserve 2a
(a = `get_alloc_len_per_decode()`):
* each decode step over-allocates the row to A' = max(A, ceil(C + 2a)) (the page rounding since
  v0.5.16, flag `spec_v2_page_align`; before it A' = max(A, C + 2a)): a paged extend A -> A';
* draft and verify run inside [C, A') (no transient allocation, nothing freed per step);
* accept a tokens (1 <= a <= D), C += a; A keeps A';
* release (finish, retraction) frees [ceil(C), A) (schedule_batch._release_tokens).

Abstracted: which tokens are accepted (only how many), the draft tree contents, adaptive
speculative decoding (a constant a), the overlap scheduler's committed-length lag (the reason for
the 2x reserve; kvmc runs the non-overlap loop, so the lag is 0).
"""

from __future__ import annotations

from typing import Any

from . import allocator, allocation_sizing, enqueue, radix_cache, schedule_batch
from .state import OOM_DECODE, State
from .transition import Ctx, transition


@transition("speculative/eagle_worker.py::EAGLEWorker.draft (v0.5.16 and before: slots the draft allocates)", modifies=())
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
    s = radix_cache.evict_from_tree_cache(x, s, draft, "draft.evict")
    draft_ok = allocator.can_alloc(x, s, draft)
    verify = x.sum(
        x.ite(batch[r], x.ceil_page(s.kv_committed_len[r] + D) - x.ceil_page(s.kv_committed_len[r]), 0) for r in range(R)
    )

    def run_verify() -> State:
        s1 = radix_cache.evict_from_tree_cache(x, s, verify, "verify.evict")
        ok = allocator.can_alloc(x, s1, verify)

        def accept() -> State:
            s2 = allocator.alloc(x, s1, verify)
            for r in range(R):
                room = x.max(1, x.min(D, enqueue.max_new_tokens(x, s2, r) - s2.output_len[r]))
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


# -- spec v2 -------------------------------------------------------------------------------------
@transition(
    "speculative/eagle_utils.py::eagle_prepare_for_decode (v0.5.18) + the spec v2 verify commit",
    modifies=(
        "full_available", "swa_available", "swa_evicted_seqlen", "node_len", "node_device",
        "node_swa_tombstone", "kv_allocated_len", "kv_committed_len", "output_len", "oom",
    ),
)
def spec_v2_decode_step(x: Ctx, s: State, batch: tuple) -> State:
    """Over-allocate each row to A' (`alloc_for_spec_decode`: evict, then a paged extend; a None is
    the RuntimeError), then verify: accept a tokens, C += a. Nothing is freed."""
    R, D = x.cfg.num_reqs, x.cfg.spec.num_draft_tokens  # type: ignore[union-attr]
    if x.cfg.hybrid_swa:
        s = schedule_batch.maybe_evict_swa(x, s, batch)
    nxt = [allocation_sizing.spec_v2_alloc_len(x, s, r) for r in range(R)]
    need = schedule_batch.spec_v2_tokens_needed(x, s, batch)
    # `if num_needed_tokens > 0`: alloc_token_slots (page 1) evicts exactly Σ(A' - A);
    # alloc_paged_token_slots_extend evicts that plus a page per request
    raw = x.sum(x.ite(batch[r], nxt[r] - s.kv_allocated_len[r], 0) for r in range(R))
    if x.ps > 1:
        raw_paged = raw + x.sum(x.ite(batch[r], x.ps, 0) for r in range(R))
        evict_for = x.ite(raw > 0, raw_paged, 0)
    else:
        evict_for = raw
    s = radix_cache.evict_from_tree_cache(x, s, evict_for, "alloc.evict")
    ok = allocator.can_alloc(x, s, need)

    def verify() -> State:
        s1 = allocator.alloc(x, s, need)
        for r in range(R):
            room = x.max(1, x.min(D, enqueue.max_new_tokens(x, s1, r) - s1.output_len[r]))
            with x.path(batch[r]):
                a = x.ite(batch[r], x.choose_int(f"accept[{r}]", 1, room), 0)
            s1 = s1.req(
                r,
                kv_allocated_len=x.ite(batch[r], nxt[r], s1.kv_allocated_len[r]),
                kv_committed_len=s1.kv_committed_len[r] + a,
                output_len=s1.output_len[r] + a,
            )
        return s1

    return x.branch(ok, verify, lambda: s.set(oom=OOM_DECODE))
