"""Row `spec_v2_alloc_len`: spec v2's decode over-allocation sizing, kvmc's formula against SGLang's.

kvmc (model/speculative.py): `alloc_len_per_decode` (a), `spec_v2_alloc_len` (A' = max(A, ceil_page(C
+ 2a)), the page rounding under `spec_v2_page_align`) and `spec_v2_tokens_needed` (sum over the
batch of ceil_page(A') - ceil_page(A)). SGLang (mem_cache/allocation_sizing.py, 0.5.19+):
`get_alloc_len_per_decode()`, `get_alloc_reserve_per_decode()`, the `nxt_kv_lens` of
`page_aligned_decode_alloc_lens(reqs, reserve=get_alloc_reserve_per_decode(), page_size=...)` (what
`eagle_prepare_for_decode` calls) and `ScheduleBatch._new_tokens_required_next_decode_spec_v2`
(`check_decode_mem`'s estimate), all called on the release's own code with its speculative settings
set on its config bags (upstream/real.py::spec_v2_sizing).

The row `alloc_for_spec_decode` (upstream/lifecycle.py) computes A' once with kvmc's formula and
hands it to both sides; this row is where the formula itself is compared. Pure functions: no pool,
no tree; the two requests are SGLang `Req`s with only their KV lengths set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from model.config import Config, Spec, concrete_params
from model.designs import Design
from model.ops import Concrete
from model.transition import Ctx

from . import real


@dataclass(frozen=True)
class SpecAlloc:
    """Two running requests of a spec v2 batch and the EAGLE settings."""

    page_size: int
    steps: int  # speculative_num_steps L
    topk: int  # speculative_eagle_topk k
    draft: int  # speculative_num_draft_tokens D
    lens: tuple[tuple[int, int], ...]  # (kv_committed_len C, kv_allocated_len A) per request, A >= C
    batch: tuple[bool, ...]  # which requests the decode batch holds (at least one)

    def describe(self) -> str:
        return (f"page_size={self.page_size}, EAGLE steps={self.steps} topk={self.topk} draft_tokens={self.draft}, "
                f"(C, A)={list(self.lens)}, batch={[r for r, b in enumerate(self.batch) if b]}")


def _ceil(n: int, ps: int) -> int:
    return -(-n // ps) * ps


@st.composite
def spec_allocs(draw: Any) -> SpecAlloc:
    ps = draw(st.sampled_from([1, 2, 4]))
    steps = draw(st.integers(1, 4))
    topk = draw(st.integers(1, 3))
    # SGLang's EAGLE: topk 1 forces num_draft_tokens = num_steps + 1 (arg_groups/speculative_hook.py
    # `_handle_eagle_family`); a tree verifies at most topk * steps drafts plus the root
    draft = steps + 1 if topk == 1 else draw(st.integers(2, min(8, topk * steps + 1)))
    reserve = 2 * max(steps * topk, draft, (_ceil(ps - 1 + steps, ps) * topk if ps > 1 and topk > 1 else 0))
    lens = []
    for _ in range(2):
        c = draw(st.integers(1, 40))
        kind = draw(st.sampled_from(["fresh", "aligned", "near", "far"]))
        if kind == "fresh":  # just prefilled: A = C
            a = c
        elif kind == "aligned":  # a page-aligned earlier over-allocation at or above C
            a = _ceil(c + draw(st.integers(0, reserve + ps)), ps)
        elif kind == "near":  # around the reserve: A' = A or the next step's target
            a = c + draw(st.integers(0, reserve + 2 * ps))
        else:  # far above C (e.g. an adaptive step count switched down)
            a = c + reserve + draw(st.integers(0, 60))
        lens.append((c, a))
    batch = draw(st.sampled_from([(True, True), (True, False), (False, True)]))
    return SpecAlloc(ps, steps, topk, draft, tuple(lens), batch)


def _model(sc: SpecAlloc, design: Design) -> tuple[Ctx, Any]:
    """kvmc's context on the preset's design and a concrete state holding the two requests' lengths."""
    from model.system import init_state

    cfg = Config(name="conform-spec-alloc", doc="", num_reqs=2, page_size=sc.page_size, bounds={},
                 hybrid_swa=False, chunked_prefill=False, spec=Spec(sc.steps, sc.topk, sc.draft, version=2))
    x = Ctx(Concrete(), cfg, design, concrete_params(cfg, full_tokens=256 * sc.page_size))
    s = init_state(x).set(kv_committed_len=tuple(c for c, _a in sc.lens),
                          kv_allocated_len=tuple(a for _c, a in sc.lens))
    return x, s


def run_spec_alloc(sc: SpecAlloc, design: Design) -> list[tuple[str, Any, Any]]:
    from model.allocation_sizing import alloc_len_per_decode, spec_v2_alloc_len
    from model.schedule_batch import spec_v2_tokens_needed

    got = real.spec_v2_sizing(sc.page_size, sc.steps, sc.topk, sc.draft, list(sc.lens),
                              [r for r, b in enumerate(sc.batch) if b])
    x, s = _model(sc, design)
    a = int(alloc_len_per_decode(x))
    obs: list[tuple[str, Any, Any]] = [
        ("get_alloc_len_per_decode() (a)", got["a"], a),
        ("get_alloc_reserve_per_decode() (2a)", got["reserve"], 2 * a),
    ]
    for r in range(len(sc.lens)):
        obs.append((f"request {r}: A' (page_aligned_decode_alloc_lens nxt_kv_lens)", got["nxt"][r],
                    int(spec_v2_alloc_len(x, s, r))))
    obs.append(("_new_tokens_required_next_decode_spec_v2 over the batch", got["tokens"],
                int(spec_v2_tokens_needed(x, s, sc.batch))))
    return obs


def unavailable(design: Design, version: str) -> str | None:
    if not design.on("eagle_v1_removed"):
        return "the design models EAGLE v1 (eagle_v1_removed off), this row spec v2"
    if not real.has_spec_v2_alloc_lens():
        return ("no allocation_sizing.page_aligned_decode_alloc_lens (0.5.19+): the release computes A' inline "
                "in eagle_prepare_for_decode, which needs a whole ScheduleBatch")
    return None
