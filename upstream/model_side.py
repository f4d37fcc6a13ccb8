"""kvmc's concrete model, set up for one scenario of the conformance harness.

The model's state is normally reached by running the system from its initial state; a
conformance scenario instead starts from the state SGLang's objects were built in (pool sizes,
what is held, what the tree holds, which requests run, which one is chunked, which wait). This
module is that constructor: a `Config` whose request slots are the scenario's requests (running
first, then the chunked request, then the waiting queue in order), whose warm prefix atom is the
tree node the waiting requests may share, and whose evictable-size drift holds the tree's other,
unrelated evictable node (the model derives evictable sizes from its atoms plus a drift:
model/radix_cache.py; an unrelated unlocked node is exactly a constant addend there).

It also draws the PrefillAdder pass scenarios (`passes`, Hypothesis) that the pass rows
(upstream/rows.py) and the HiCache pass row (upstream/hicache_pass.py) both run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from model.config import Config, concrete_params
from model.designs import Design
from model.ops import Concrete
from model.state import CHUNKED, RUNNING, WAITING, State
from model.transition import Ctx


@dataclass(frozen=True)
class Pass:
    """One PrefillAdder pass as a scenario: the pools and what they hold, the requests."""

    page_size: int
    full: int  # full pool size (tokens)
    swa: int | None  # SWA pool size; None: plain (no hybrid SWA)
    window: int  # sliding window (hybrid SWA only)
    chunk: int | None  # chunked_prefill_size (None: off)
    max_prefill: int  # rem_input_tokens at the start of the pass
    ratio: tuple[int, int]  # new_token_ratio (num, den)
    warm: int  # tokens of the shared tree node (page multiple; 0: none)
    other: int  # tokens of an unrelated evictable tree node (page multiple)
    held: int  # tokens allocated to running requests outside the tree (page multiple)
    running: tuple[tuple[int, int], ...]  # (max_new_tokens, output_len) per running request
    chunked: tuple[int, int, int] | None  # (input_len, committed, max_new_tokens) of the chunked request
    waiting: tuple[tuple[int, int, bool], ...]  # (input_len, max_new_tokens, shares warm)
    truncation_align: int | None = None
    extra: dict = field(default_factory=dict)
    # the per-request SWA ring (0.5.20-0.5.22, `swa_req_ring_size` = window): the ReqToTokenPool's rows
    # (running and chunked requests hold one each); None: the SWA pool pages its tokens
    ring_rows: int | None = None

    def describe(self) -> str:
        sw = f", swa={self.swa}, window={self.window}" if self.swa is not None else ""
        if self.ring_rows is not None:
            sw += f", swa_req_ring_size={self.window}, req_rows={self.ring_rows}"
        return (
            f"page_size={self.page_size}, full={self.full}{sw}, chunk={self.chunk}, max_prefill={self.max_prefill}, "
            f"ratio={self.ratio[0]}/{self.ratio[1]}, warm={self.warm}, other_evictable={self.other}, held={self.held}, "
            f"running={list(self.running)}, chunked={self.chunked}, waiting={list(self.waiting)}, "
            f"truncation_align_size={self.truncation_align}"
        )


def pass_ctx(sc: Pass, design: Design, warm_nodes: tuple[int, ...] | None = None, hicache: bool = False,
             warm_device: tuple[bool, ...] | None = None) -> tuple[Ctx, State]:
    """The model's context and state for a pass scenario; `warm_nodes` are the lengths of the nodes
    SGLang's tree made of the warm prefix (real.path_lengths; default one node). `hicache`: the
    HiCache config, every warm node backed up on host, `warm_device[a]` whether node a is also on
    the device (a device prefix of the chain; the rest is host only)."""
    warm_nodes = tuple(warm_nodes) if warm_nodes else ((sc.warm,) if sc.warm else ())
    nr, nc, nw = len(sc.running), 1 if sc.chunked else 0, len(sc.waiting)
    R = nr + nc + nw
    shares = tuple([False] * (nr + nc) + [w[2] and sum(warm_nodes) > 0 for w in sc.waiting])
    cfg = Config(
        name="conform",
        doc="a conformance scenario",
        num_reqs=R,
        page_size=sc.page_size,
        # a ring's cost is a constant of the config: one window (model/config.py)
        bounds={"sliding_window_size": (sc.window, sc.window)} if sc.ring_rows is not None else {},
        hybrid_swa=sc.swa is not None,
        chunked_prefill=sc.chunk is not None,
        shares_warm_prefix=shares,
        warm_atoms=len(warm_nodes),
        private_atoms=1,
        new_token_ratio=sc.ratio,
        truncation_align_size=sc.truncation_align,
        swa_ring=sc.ring_rows is not None,
        hicache=hicache,
    )
    inputs = [1] * nr + ([sc.chunked[0]] if sc.chunked else []) + [w[0] for w in sc.waiting]
    mnts = [r[0] for r in sc.running] + ([sc.chunked[2]] if sc.chunked else []) + [w[1] for w in sc.waiting]
    p = concrete_params(
        cfg,
        full_tokens=sc.full,
        swa_tokens=sc.swa or 0,
        sliding_window_size=sc.window if sc.swa is not None else 0,
        chunked_prefill_size=sc.chunk or 0,
        max_prefill_tokens=sc.max_prefill,
        req_pool_size=R + 8 if sc.ring_rows is None else sc.ring_rows,
        input_len=tuple(inputs),
        max_new_tokens=tuple(mnts),
        warm_len=warm_nodes,
        warm_device=tuple(warm_device) if warm_device is not None else (True,) * len(warm_nodes),
        warm_host=(hicache,) * len(warm_nodes),
    )
    x = Ctx(Concrete(), cfg, design, p)
    from model.system import init_state

    s = init_state(x)
    committed = sc.chunked[1] if sc.chunked else 0
    taken = sc.other + sc.held + committed
    s = s.set(full_available=s.full_available - taken, full_evictable_drift=sc.other)
    if sc.swa is not None:
        s = s.set(swa_available=s.swa_available - taken, swa_evictable_drift=sc.other)
    if sc.ring_rows is not None:  # the running and chunked requests hold a row each (and its ring)
        s = s.set(req_pool_available=sc.ring_rows - nr - nc)
    for i, (_mnt, out) in enumerate(sc.running):
        s = s.req(i, status=RUNNING, output_len=out)
    if sc.chunked:
        s = s.req(nr, status=CHUNKED, kv_committed_len=committed, kv_allocated_len=committed)
    for j in range(nw):
        s = s.req(nr + nc + j, status=WAITING)
    return x, s


def slots(sc: Pass) -> tuple[list[int], int | None, list[int]]:
    nr = len(sc.running)
    nc = 1 if sc.chunked else 0
    return list(range(nr)), (nr if sc.chunked else None), list(range(nr + nc, nr + nc + len(sc.waiting)))


def budgets(x: Ctx, s: State, ad: Any) -> dict[str, Any]:
    """The adder's budgets as SGLang reports them (rem_total_tokens times the ratio's denominator)."""
    from model import prefill_adder as pa

    out = {
        "rem_total_tokens*den": pa.rem_total_scaled(x, s, ad),
        "cur_rem_tokens": pa.cur_rem_tokens(x, s, ad),
        "rem_input_tokens": ad.rem_input_tokens,
        "rem_chunk_tokens": ad.rem_chunk_tokens,
    }
    if pa.swa_gate_on(x):
        out["rem_swa_tokens"] = pa.rem_swa_tokens(x, s, ad)
    return out


# -- the PrefillAdder pass scenarios (Hypothesis) -------------------------------------------------------------------------------------
@st.composite
def passes(draw: Any, hybrid: bool | None = None, chunked: bool | None = None, with_chunked_req: bool | None = None,
           ring: bool = False) -> Pass:
    # the per-request SWA ring is a paged allocator (page_size >= 2; model/config.py checks it)
    ps = 4 if ring else draw(st.sampled_from([1, 4]))
    hybrid = True if ring else hybrid
    page = lambda lo, hi: ps * draw(st.integers(lo, hi))  # noqa: E731
    if hybrid is None:
        hybrid = draw(st.booleans())
    if chunked is None:
        chunked = draw(st.booleans())
    full = page(4, 48 // ps + 8)
    swa = page(4, 48 // ps + 8) if hybrid else None
    window = draw(st.integers(1, 24)) if hybrid else 0
    chunk = draw(st.integers(ps, 40)) if chunked else None
    cap = min(full, swa) if swa is not None and not ring else full  # a ring pages no SWA tokens
    warm = page(0, max(0, cap // 3) // ps)
    other = page(0, max(0, (cap - warm) // 3) // ps)
    held = page(0, max(0, (cap - warm - other) // 3) // ps)
    # a running request was enqueued, so its max_new_tokens is within the enqueue clip (#25126) of a
    # one-token input: its remaining budget is never negative, whatever the release
    running = tuple(
        (mnt, draw(st.integers(0, mnt)))
        for mnt in draw(st.lists(st.integers(1, max(1, min(24, full - 2 * ps - 1))), max_size=2 if held else 0))
    )
    room = cap - warm - other - held
    chunked_req = None
    if chunk is not None and (with_chunked_req if with_chunked_req is not None else draw(st.booleans())):
        committed = page(0, max(0, room // 2) // ps)
        chunked_req = (committed + draw(st.integers(1, 40)), committed, draw(st.integers(1, 24)))
    waiting = []
    for _ in range(draw(st.integers(0 if chunked_req else 1, 3))):
        shares = warm > 0 and draw(st.booleans())
        lo = warm + 1 if shares else 1
        waiting.append((draw(st.integers(lo, lo + 40)), draw(st.integers(1, 24)), shares))
    ratio = draw(st.sampled_from([(1, 1), (1, 2)]))
    align = draw(st.sampled_from([None, None, 2, 3, 8])) if chunked else None
    # ring: the rows the running and chunked requests hold, plus 0-3 free ones (0: no ring is left)
    rows = len(running) + (1 if chunked_req else 0) + draw(st.integers(0, 3)) if ring else None
    return Pass(ps, full, swa, window, chunk, draw(st.integers(1, 64)), ratio, warm, other, held, running,
                chunked_req, tuple(waiting), align, ring_rows=rows)
