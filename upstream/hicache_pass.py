"""Row `add_one_req/hicache`: PrefillAdder.add_one_req over a waiting queue whose match has a HiCache
host hit, on SGLang's own hierarchical cache, beside kvmc's model (model/hicache.py).

SGLang side (worker only): the tree is the one SGLang's own scheduler builds for hybrid SWA with
`--enable-hierarchical-cache` (UnifiedRadixCache with its HiCache host pools and
HybridCacheController, io_backend `direct`, layout `layer_first`, write-through; host memory as plain
CPU tensors), built through upstream/sched/harness.py's `RealScheduler` (B3's construction: the
scheduler without a model) from the model's own config and parameters, so the warm prefix is the
same chain of atoms on both sides: `warm` tokens on the device (and backed up), then `host` tokens
whose device copy SGLang's own evict demoted (host only). The harness pins `load_back_threshold`
to 1 (the model loads every host hit back; SGLang skips a Full-only load below 10 / 256 tokens),
and observes `init_load_back` on the instance (SGLang's own method runs). Requests are real `Req`s;
`init_next_round_input` fills `prefix_indices` / `last_node` / `host_hit_length` /
`swa_host_hit_length` / `best_match_node` as the scheduler's match does; then SGLang's own
`PrefillAdder.add_one_req` runs (its temporary lock, the gates, `init_load_back`, from 0.5.20
#39283's re-selection when the load-back loads less than promised).

Compared after each call, beside model/prefill_adder.py::add_one_req on the same state: the match
(device prefix, host hit, SWA host hit), the AddReqResult, admitted or not, the extend, whether
`init_load_back` was asked, the prefix after it (what it loaded), every budget, and both pools'
free sizes.

Applies where SGLang builds UnifiedRadixCache with HiCache for hybrid SWA (0.5.12.post1 behind
SGLANG_ENABLE_UNIFIED_RADIX_TREE, the default from 0.5.13) and the scheduler module's extra
dependencies are installed (`kvmc replay --install`, upstream/sched/replay.py). Plain HiCache
(HiRadixCache) asks torch.distributed for its TP group's world size, which needs a process group
the scheduler-without-a-model does not create: no plain row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from model import prefill_adder as pa
from model.designs import Design

from . import real
from .model_side import Pass, budgets, pass_ctx, passes, slots


@dataclass(frozen=True)
class HostPass:
    """A pass scenario (no chunked request) whose warm prefix is `base.warm` device tokens followed
    by `host` host-only tokens (page multiples)."""

    base: Pass
    host: int

    def describe(self) -> str:
        return f"{self.base.describe()}, host_only_warm={self.host} (after the device warm={self.base.warm})"


@st.composite
def host_passes(draw: Any) -> HostPass:
    base = draw(passes(hybrid=True, with_chunked_req=False))
    ps = base.page_size
    cap = min(base.full, base.swa or base.full)
    host = ps * draw(st.integers(1, max(1, (cap // 2) // ps)))
    # a waiting request that shares the warm prefix extends past its host-only part too
    shares = [draw(st.booleans()) for _ in base.waiting]
    waiting = tuple((max(n, base.warm + host + 1) if sh else n, mnt, sh) for (n, mnt, _s), sh in zip(base.waiting, shares))
    return HostPass(Pass(**{**base.__dict__, "waiting": waiting, "truncation_align": base.truncation_align}), host)


_SHAPES: dict[tuple[int, int, int, int], tuple[int, ...]] = {}


def _atoms(sc: HostPass, design: Design) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """The warm chain's atoms (lengths, on the device?): the nodes SGLang's tree makes of the device
    part then the host-only part, inserted one after the other (UnifiedRadixCache's SWA component
    splits a leaf longer than a page-aligned window, #26919; the SWA host hit counts whole nodes in
    the window, so the model is given the same nodes), read off the same tree built with every
    part on the device."""
    from .sched import harness as H

    b = sc.base
    key = (b.page_size, b.window, b.warm, sc.host)  # all the split depends on
    if key not in _SHAPES:
        parts = (b.warm, sc.host) if b.warm else (sc.host,)
        x, _s = pass_ctx(b, design, parts, hicache=True)
        rs = H.RealScheduler(x.cfg, x.p, force=False)
        _SHAPES[key] = real.path_lengths(rs.tree, [1 + i for i in range(b.warm + sc.host)])
    lens = _SHAPES[key]
    dev, pos = [], 0
    for n in lens:
        dev.append(pos + n <= b.warm)
        pos += n
    return lens, tuple(dev)


def model_ctx(sc: HostPass, design: Design) -> tuple[Any, Any]:
    lens, dev = _atoms(sc, design)
    return pass_ctx(sc.base, design, lens, hicache=True, warm_device=dev)


def _shares_total(sc: HostPass) -> int:
    return sc.base.warm + sc.host


def run_host_pass(sc: HostPass, design: Design) -> list[tuple[str, Any, Any]]:
    from model import hicache as mh
    from model import system as msys

    from .sched import harness as H

    x, s = model_ctx(sc, design)
    b = sc.base
    ps = b.page_size
    rs = H.RealScheduler(x.cfg, x.p, force=False)
    tree, alloc = rs.tree, rs.allocator
    asked: list[int] = []
    inner = rs.inner_tree
    wrapped = inner.init_load_back

    def init_load_back(params: Any, *a: Any, **k: Any) -> Any:
        asked.append(1)
        return wrapped(params, *a, **k)

    inner.init_load_back = init_load_back
    warm_tokens = [1 + pos for pos in range(_shares_total(sc))]  # the harness's warm tokens (H.token)
    fresh = iter(range(50_000_000, 60_000_000))

    def new(n: int) -> list[int]:
        return [next(fresh) for _ in range(n)]

    if b.other:  # an unrelated evictable node; its write-through backup acknowledged (no lock left)
        real.insert(tree, new(b.other), real.take(alloc, b.other, ps))
        inner.check_hicache_events()
    real.take(alloc, b.held, ps)

    def enq(n: int, mnt: int) -> int:
        return real.enqueued_max_new(alloc, n, mnt, b.full, ps)

    _run, _chunk, wait_slots = slots(b)
    running = [real.make_req(f"run{i}", new(1), enq(1, mnt), out) for i, (mnt, out) in enumerate(b.running)]
    waiting = []
    for j, (n, mnt, shares) in enumerate(b.waiting):
        toks = warm_tokens + new(n - len(warm_tokens)) if shares else new(n)
        waiting.append(real.make_req(f"r{wait_slots[j]}.0", toks, enq(n, mnt)))  # rid: the harness's slot scheme
    num, den = b.ratio
    adder = real.prefill_adder(tree, alloc, ps, real.running_batch(running), num / den, b.max_prefill, b.chunk)

    model_asked: list[int] = []
    orig = mh.init_load_back

    def counted(*a: Any, **k: Any) -> Any:
        model_asked.append(1)
        return orig(*a, **k)

    obs: list[tuple[str, Any, Any]] = []
    ad = pa.new_adder(x, s)
    obs.append(("start: budgets", real.adder_budgets(adder, den), budgets(x, s, ad)))
    obs.append(("start: free sizes", _sizes(alloc), _model_sizes(s)))
    ARR = real.add_req_result()
    mh.init_load_back = counted
    try:
        for j, req in enumerate(waiting):
            r = wait_slots[j]
            req.init_next_round_input(tree)
            matched = (real.prefix_len(req), int(req.host_hit_length), int(getattr(req, "swa_host_hit_length", 0) or 0))
            asked.clear()
            model_asked.clear()
            res = adder.add_one_req(req, False, b.truncation_align)
            with x.scope(f"admit[{r}]"):
                s, m, fresh_slot = msys.match_prefix(x, s, r)
                # no swa_host_hit_length before #27391 (the model's match computes it; only
                # swa_hostload_budget reads it)
                swa_host = m.swa_host_hit_length if design.on("swa_hostload_budget") else 0
                obs.append((f"waiting[{j}]: match (prefix, host_hit, swa_host_hit)", matched,
                            (m.prefix_len, m.host_hit_length, swa_host)))
                s, ad = pa.add_one_req(x, s, ad, r, m, fresh_slot)
            obs.append((f"waiting[{j}]: init_load_back asked", bool(asked), bool(model_asked)))
            obs.append((f"waiting[{j}]: AddReqResult", res.name if isinstance(res, ARR) else repr(res), pa.RESULT_NAMES[ad.result]))
            admitted = req in adder.can_run_list
            obs.append((f"waiting[{j}]: admitted", admitted, bool(ad.can_run[r])))
            if admitted:
                obs.append((f"waiting[{j}]: prefix after load-back", real.prefix_len(req), ad.prefix[r]))
                obs.append((f"waiting[{j}]: extend", real.extend_len(req), ad.extend[r]))
                obs.append((f"waiting[{j}]: truncated (new_chunked_req)", adder.new_chunked_req is req, bool(ad.new_chunked[r])))
            obs.append((f"waiting[{j}]: budgets", real.adder_budgets(adder, den), budgets(x, s, ad)))
            obs.append((f"waiting[{j}]: free sizes", _sizes(alloc), _model_sizes(s)))
            if res != ARR.CONTINUE:
                break
    finally:
        mh.init_load_back = orig
    return obs


def _sizes(alloc: Any) -> dict[str, int]:
    return {"full": int(alloc.full_available_size()), "swa": int(alloc.swa_available_size())}


def _model_sizes(s: Any) -> dict[str, int]:
    return {"full": s.full_available, "swa": s.swa_available}


def unavailable(design: Design, version: str) -> str | None:
    """Where the row applies: the scheduler module imports (its extra dependencies are on the path)
    and the release builds UnifiedRadixCache with HiCache for hybrid SWA."""
    from .sched.loop_rows import scheduler_unavailable

    why = scheduler_unavailable()
    if why:
        return why
    from .sched.harness import _unified_hicache

    real.setup()
    if not _unified_hicache():
        return ("no UnifiedRadixCache with HiCache (init_hicache: 0.5.12.post1+) in this release; its HiRadixCache refuses "
                "an SWA pool, and plain HiRadixCache needs a torch.distributed process group")
    return None
