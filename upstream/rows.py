"""The rows of the conformance table: for each transition SGLang exposes on CPU, a Hypothesis
strategy of scenarios, the run on SGLang's own objects (upstream/real.py), the run on kvmc's
concrete model (upstream/model_side.py), and the field-by-field comparison.

A row's `run(scenario, design)` returns a list of observations `(label, sglang_value,
kvmc_value)`; the scenario agrees when every pair is equal. A disagreement that matches one of
the documented abstractions (docs/conformance.md, `ABSTRACTIONS` below) is counted as such, not
as agreement.

Runs only inside the worker subprocess (it imports SGLang through upstream/real.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st

from model import prefill_adder as pa
from model.designs import Design

from . import hicache_pass, real
from .model_side import Pass, budgets, pass_ctx, passes, slots

RESULT_NAMES = pa.RESULT_NAMES


@dataclass(frozen=True)
class Row:
    name: str
    doc: str
    strategy: Callable[[], Any]
    run: Callable[[Any, Design], list[tuple[str, Any, Any]]]
    # (design, version) -> None when the row applies, else why not (e.g. no such method there)
    unavailable: Callable[[Design, str], str | None] = lambda d, v: None

    def applies(self, design: Design, version: str) -> bool:
        return self.unavailable(design, version) is None

    def why_not(self, design: Design, version: str) -> str:
        return self.unavailable(design, version) or ""


# -- the real pass ---------------------------------------------------------------------------------
_TOKEN = [0]


def _fresh(n: int) -> list[int]:
    """n token ids used nowhere else (so only the warm prefix is ever shared)."""
    start = 10_000 + _TOKEN[0]
    _TOKEN[0] += n
    return list(range(start, start + n))


def _real_pass(sc: Pass) -> tuple[Any, Any, Any, list[Any], Any]:
    """SGLang's allocator, tree, running batch, requests and PrefillAdder for a pass scenario."""
    ps = sc.page_size
    pool = real.req_to_token_pool(8 if sc.ring_rows is None else sc.ring_rows)
    if sc.ring_rows is not None:
        alloc = real.allocator("swa", sc.full, ps, sc.swa, ring=sc.window, pool=pool)
    elif sc.swa is not None:
        alloc = real.allocator("swa", sc.full, ps, sc.swa)
    else:
        alloc = real.allocator("token" if ps == 1 else "paged", sc.full, ps)
    tree = real.tree_cache(alloc, ps, sc.window if sc.swa is not None else None, pool)
    warm_tokens = _fresh(sc.warm)
    if sc.warm:
        real.insert(tree, warm_tokens, real.take(alloc, sc.warm, ps))
    if sc.other:
        real.insert(tree, _fresh(sc.other), real.take(alloc, sc.other, ps))
    real.take(alloc, sc.held, ps)

    def enq(n: int, mnt: int) -> int:  # max_new_tokens as the release's scheduler enqueued it
        return real.enqueued_max_new(alloc, n, mnt, sc.full, ps)

    # a running request's input is one token, as the model's running slots have it (pass_ctx)
    running = [real.make_req(f"run{i}", _fresh(1), enq(1, mnt), out) for i, (mnt, out) in enumerate(sc.running)]
    chunked = None
    if sc.chunked:
        n, committed, mnt = sc.chunked
        chunked = real.make_req("chunked", _fresh(n), enq(n, mnt))
        real.set_committed(chunked, real.take(alloc, committed, ps))
    if sc.ring_rows is not None:  # running and chunked requests hold their rows (and so their rings)
        holders = running + ([chunked] if chunked is not None else [])
        if holders and pool.alloc(holders) is None:
            raise RuntimeError(f"scenario setup: {len(holders)} rows of {sc.ring_rows=}")
    waiting = []
    for j, (n, mnt, shares) in enumerate(sc.waiting):
        toks = warm_tokens + _fresh(n - len(warm_tokens)) if shares and sc.warm else _fresh(n)
        waiting.append(real.make_req(f"wait{j}", toks, enq(n, mnt)))
    num, den = sc.ratio
    adder = real.prefill_adder(tree, alloc, ps, real.running_batch(running), num / den, sc.max_prefill, sc.chunk)
    _WARM_NODES[0] = real.path_lengths(tree, warm_tokens)
    return alloc, tree, chunked, waiting, adder


_WARM_NODES: list[tuple[int, ...]] = [()]  # the warm prefix's node lengths in the last tree _real_pass built


def run_pass(sc: Pass, design: Design) -> list[tuple[str, Any, Any]]:
    """`add_chunked_req` (if a chunked request exists) then `add_one_req` over the waiting queue
    until a result other than CONTINUE, on both sides; observed after every call."""
    from model import system as msys

    obs: list[tuple[str, Any, Any]] = []
    alloc, tree, chunked, waiting, adder = _real_pass(sc)
    x, s = pass_ctx(sc, design, _WARM_NODES[0])
    _run_slots, chunk_slot, wait_slots = slots(sc)
    den = sc.ratio[1]
    ad = pa.new_adder(x, s)
    obs.append(("start: budgets", real.adder_budgets(adder, den), _model_budgets(x, s, ad)))
    if chunked is not None:
        ret = adder.add_chunked_req(chunked)
        ad, stays = pa.add_chunked_req(x, s, ad, chunk_slot)
        obs.append(("add_chunked_req: admitted", chunked in adder.can_run_list, bool(ad.can_run[chunk_slot])))
        obs.append(("add_chunked_req: stays chunked", ret is not None, bool(stays)))
        if chunked in adder.can_run_list:
            obs.append(("add_chunked_req: extend", real.extend_len(chunked), ad.extend[chunk_slot]))
        obs.append(("add_chunked_req: budgets", real.adder_budgets(adder, den), _model_budgets(x, s, ad)))
    ARR = real.add_req_result()
    for j, req in enumerate(waiting):
        r = wait_slots[j]
        req.init_next_round_input(tree)
        res = adder.add_one_req(req, chunked is not None, sc.truncation_align)
        with x.scope(f"admit[{r}]"):
            s, m, fresh = msys.match_prefix(x, s, r)
            obs.append((f"waiting[{j}]: prefix", real.prefix_len(req), m.prefix_len))
            s, ad = pa.add_one_req(x, s, ad, r, m, fresh)
        obs.append((f"waiting[{j}]: AddReqResult", res.name if isinstance(res, ARR) else repr(res), RESULT_NAMES[ad.result]))
        admitted = req in adder.can_run_list
        obs.append((f"waiting[{j}]: admitted", admitted, bool(ad.can_run[r])))
        if admitted:
            obs.append((f"waiting[{j}]: extend", real.extend_len(req), ad.extend[r]))
            obs.append((f"waiting[{j}]: truncated (new_chunked_req)", adder.new_chunked_req is req, bool(ad.new_chunked[r])))
        obs.append((f"waiting[{j}]: budgets", real.adder_budgets(adder, den), _model_budgets(x, s, ad)))
        if res != ARR.CONTINUE:
            break
    return obs


def _model_budgets(x: Any, s: Any, ad: Any) -> dict[str, Any]:
    return budgets(x, s, ad)


# -- allocators ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AllocOps:
    """A sequence of allocator calls on one fresh allocator. Requests are numbered by creation;
    an op names them by position among the live ones (modulo their count)."""

    kind: str  # token | paged | swa | swa_ring
    page_size: int
    full: int
    swa: int
    ops: tuple
    window: int = 0  # swa_ring: swa_req_ring_size
    rows: int = 0  # swa_ring: the ReqToTokenPool's rows (each owns a ring)

    def describe(self) -> str:
        sw = f", swa={self.swa}" if self.kind == "swa" else ""
        if self.kind == "swa_ring":
            sw = f", swa_req_ring_size={self.window}, req_rows={self.rows}"
        return f"{self.kind} allocator, page_size={self.page_size}, full={self.full}{sw}, ops={list(self.ops)}"


@st.composite
def alloc_ops(draw: Any, kind: str) -> AllocOps:
    ring = kind == "swa_ring"
    ps = 1 if kind == "token" else draw(st.sampled_from([1, 4])) if kind == "swa" else draw(st.sampled_from([2, 4]))
    full = ps * draw(st.integers(2, 16))
    swa = ps * draw(st.integers(2, 16)) if kind in ("swa", "swa_ring") else 0
    op = st.one_of(
        st.tuples(st.just("extend"), st.lists(st.tuples(st.integers(0, 5), st.integers(1, 9)), min_size=1, max_size=3)),
        st.tuples(st.just("decode"), st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True)),
        st.tuples(st.just("free"), st.integers(0, 5)),
        *( [st.tuples(st.just("free_swa"), st.integers(0, 5), st.integers(1, 3))] if kind in ("swa", "swa_ring") else []),
    )
    ops = tuple(draw(st.lists(op, min_size=1, max_size=8)))
    if ring:
        return AllocOps(kind, ps, full, swa, ops, draw(st.integers(1, 24)), draw(st.integers(1, 8)))
    return AllocOps(kind, ps, full, swa, ops)


def _model_alloc_ctx(sc: AllocOps, design: Design) -> tuple[Any, Any]:
    from model.config import Config, concrete_params
    from model.ops import Concrete
    from model.system import init_state
    from model.transition import Ctx

    ring = sc.kind == "swa_ring"
    cfg = Config(name="conform-alloc", doc="", num_reqs=1, page_size=sc.page_size,
                 bounds={"sliding_window_size": (sc.window, sc.window)} if ring else {},
                 hybrid_swa=sc.kind in ("swa", "swa_ring"), private_atoms=0, swa_ring=ring)
    p = concrete_params(cfg, full_tokens=sc.full, swa_tokens=sc.swa,
                        sliding_window_size=sc.window if ring else 1 if sc.kind == "swa" else 0,
                        **({"req_pool_size": sc.rows} if ring else {}))
    x = Ctx(Concrete(), cfg, design, p)
    return x, init_state(x)


def run_alloc(sc: AllocOps, design: Design) -> list[tuple[str, Any, Any]]:
    """Each op on SGLang's allocator and on the model's (model/allocator.py); after each: did it
    return None, and the free size of each pool. `extend` on page_size 1 is `alloc(n)` (what
    `alloc_token_slots` calls), else `alloc_extend` with the requests' prefixes; `decode` is
    `alloc_decode` (page_size > 1) or `alloc(bs)`; `free` frees a request's slots (the paged
    allocator frees whole pages); `free_swa` releases the SWA slots of a request's next k pages
    (what `_evict_swa` does)."""
    import torch

    from model import allocator as ma
    from model import schedule_batch as msb

    ps = sc.page_size
    swaish = sc.kind in ("swa", "swa_ring")
    if sc.kind == "swa_ring":  # the ring's rows stay free here: swa_available_size() is rows x ring cost
        alloc = real.allocator("swa", sc.full, ps, sc.swa, ring=sc.window, pool=real.req_to_token_pool(sc.rows))
    else:
        alloc = real.allocator(sc.kind, sc.full, ps, sc.swa)
    x, s = _model_alloc_ctx(sc, design)
    live: list[dict] = []  # {"idx": tensor of slots, "swa_from": first slot whose SWA is still held}
    obs: list[tuple[str, Any, Any]] = []

    def sizes() -> tuple[dict, dict]:
        if swaish:
            r = {"full": int(alloc.full_available_size()), "swa": int(alloc.swa_available_size())}
            return r, {"full": s.full_available, "swa": ma.swa_available_size(x, s)}
        return {"full": int(alloc.available_size())}, {"full": s.full_available}

    for k, op in enumerate(sc.ops):
        name = op[0]
        if name == "extend":
            reqs = []
            for pos, n in op[1]:
                if live and pos < len(live) and all(r is not live[pos % len(live)] for r in reqs):
                    reqs.append(live[pos % len(live)])
                else:
                    reqs.append({"idx": real.no_slots(), "swa_from": 0, "new": True})
            adds = [n for _pos, n in op[1]]
            pre = [len(r["idx"]) for r in reqs]
            seq = [a + b for a, b in zip(pre, adds)]
            if ps == 1:
                out = alloc.alloc(sum(adds))
            else:
                last = [int(r["idx"][-1]) if len(r["idx"]) else -1 for r in reqs]
                out = alloc.alloc_extend(real.ints(pre), real.cpu_ints(pre), real.ints(seq), real.cpu_ints(seq),
                                         real.ints(last), sum(adds))
            needs = [x.ceil_page(b) - x.ceil_page(a) for a, b in zip(pre, seq)] if ps > 1 else adds
            ok = ma.extend_fits(x, s, sum(needs), sum(adds), len(reqs))
            if ok:
                s = ma.alloc(x, s, sum(needs))
            if out is not None:
                off = 0
                for r, n in zip(reqs, adds):
                    r["idx"] = torch.cat([r["idx"], out[off:off + n]])
                    off += n
                    if r.pop("new", False):
                        live.append(r)
            obs.append((f"op {k} extend {op[1]}: returned None", out is None, not ok))
        elif name == "decode":
            if not live:
                continue
            reqs = list({id(live[i % len(live)]): live[i % len(live)] for i in op[1]}.values())
            seq = [len(r["idx"]) + 1 for r in reqs]
            if ps == 1:
                out = alloc.alloc(len(reqs))
            else:
                last = [int(r["idx"][-1]) if len(r["idx"]) else -1 for r in reqs]
                out = alloc.alloc_decode(real.ints(seq), real.cpu_ints(seq), real.ints(last))
            # the model's decode need: a page per request whose KV ends on a page boundary
            from model.config import Config, concrete_params
            from model.ops import Concrete
            from model.transition import Ctx

            cfg = Config(name="conform-decode", doc="", num_reqs=len(reqs), page_size=ps, bounds={},
                         hybrid_swa=sc.kind == "swa", private_atoms=0)  # (the ring's decode need is the same)
            xd = Ctx(Concrete(), cfg, design, concrete_params(cfg, sliding_window_size=1 if sc.kind == "swa" else 0))
            sd = s.__class__(**{**s.as_dict(), "kv_committed_len": tuple(len(r["idx"]) for r in reqs),
                                "status": (0,) * len(reqs)})
            need = msb.decode_tokens_needed(xd, sd, (True,) * len(reqs))
            ok = ma.can_alloc(x, s, need)
            if ok:
                s = ma.alloc(x, s, need)
            if out is not None:
                for r, i in zip(reqs, out):
                    r["idx"] = torch.cat([r["idx"], i.view(1)])
            obs.append((f"op {k} decode ({len(reqs)} reqs): returned None", out is None, not ok))
        elif name == "free":
            if not live:
                continue
            r = live.pop(op[1] % len(live))
            n = len(r["idx"])
            if n:
                real.free_row(alloc, r["idx"], r["swa_from"])
            held_swa = x.clamp0(x.ceil_page(n) - r["swa_from"]) if swaish else 0
            s = ma.free(x, s, x.ceil_page(n), held_swa)
            obs.append((f"op {k} free ({n} slots)", None, None))
        elif name == "free_swa":
            if not live:
                continue
            r = live[op[1] % len(live)]
            n = len(r["idx"])
            lo = r["swa_from"]
            hi = min(lo + op[2] * ps, n // ps * ps)  # whole pages the request has filled
            if hi <= lo:
                continue
            alloc.free_swa(r["idx"][lo:hi])
            r["swa_from"] = hi
            s = ma.free_swa(x, s, hi - lo)
            obs.append((f"op {k} free_swa [{lo}, {hi})", None, None))
        got, want = sizes()
        obs.append((f"op {k} {name}: free sizes", got, want))
    return obs


@dataclass(frozen=True)
class PoolOps:
    size: int
    ops: tuple  # ("alloc", n new requests) | ("free", position)

    def describe(self) -> str:
        return f"ReqToTokenPool(size={self.size}), ops={list(self.ops)}"


@st.composite
def pool_ops(draw: Any) -> PoolOps:
    op = st.one_of(st.tuples(st.just("alloc"), st.integers(1, 4)), st.tuples(st.just("free"), st.integers(0, 7)))
    return PoolOps(draw(st.integers(1, 8)), tuple(draw(st.lists(op, min_size=1, max_size=10))))


def run_pool(sc: PoolOps, design: Design) -> list[tuple[str, Any, Any]]:
    """`ReqToTokenPool.alloc(reqs)` / `free(req)` against the model's slot counter
    (`req_pool_available`: alloc_for_extend's `fresh <= req_pool_available`, release's + 1)."""
    pool = real.req_to_token_pool(sc.size)
    avail = sc.size  # the model's req_pool_available (init: req_pool_size)
    held: list[Any] = []
    obs: list[tuple[str, Any, Any]] = []
    n = 0
    for k, op in enumerate(sc.ops):
        if op[0] == "alloc":
            reqs = []
            for _ in range(op[1]):
                n += 1
                reqs.append(real.make_req(f"p{n}", [1, 2], 1))
            out = pool.alloc(reqs)
            ok = op[1] <= avail
            if ok:
                avail -= op[1]
            if out is not None:
                held.extend(reqs)
            obs.append((f"op {k} alloc {op[1]}: returned None", out is None, not ok))
        else:
            if not held:
                continue
            pool.free(held.pop(op[1] % len(held)))
            avail += 1
        obs.append((f"op {k}: available_size", pool.available_size(), avail))
    return obs


# -- budgets ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Budget:
    """A PrefillAdder's pass state set directly (offsets, remaining budgets) over a scenario's pools."""

    base: Pass
    total_offset: int
    cur_offset: int
    rem_input: int
    rem_chunk: int | None
    swa_offset: int
    extend: int
    max_new: int
    swa_host: int

    def describe(self) -> str:
        return (f"{self.base.describe()}; offsets total={self.total_offset}, cur={self.cur_offset}, swa={self.swa_offset}; "
                f"rem_input={self.rem_input}, rem_chunk={self.rem_chunk}; extend={self.extend}, max_new={self.max_new}, "
                f"swa_host_hit={self.swa_host}")


@st.composite
def budgets_st(draw: Any, hybrid: bool) -> Budget:
    base = draw(passes(hybrid=hybrid, with_chunked_req=False))
    base = Pass(**{**base.__dict__, "running": (), "waiting": ((1, 1, False),), "chunked": None})
    i = st.integers(-8, 80)
    return Budget(base, draw(i), draw(i), draw(st.integers(-8, 64)),
                  draw(st.integers(-8, 40)) if base.chunk is not None else None, draw(i),
                  draw(st.integers(0, 60)), draw(st.integers(0, 30)), draw(st.sampled_from([0, 0, 1, 3, 4, 9])))


def _budget_pair(sc: Budget, design: Design) -> tuple[Any, Any, Any, Any]:
    _a, _t, _c, _w, adder = _real_pass(sc.base)
    x, s = pass_ctx(sc.base, design, _WARM_NODES[0])
    den = sc.base.ratio[1]
    real.set_offsets(adder, sc.total_offset / den, sc.cur_offset, sc.swa_offset)
    adder.rem_input_tokens = sc.rem_input
    adder.rem_chunk_tokens = sc.rem_chunk
    ad = pa.new_adder(x, s).set(rem_total_token_offset=sc.total_offset, cur_rem_token_offset=sc.cur_offset,
                                rem_input_tokens=sc.rem_input, rem_chunk_tokens=sc.rem_chunk,
                                rem_swa_token_offset=sc.swa_offset)
    return adder, x, s, ad


def run_budget_state(sc: Budget, design: Design) -> list[tuple[str, Any, Any]]:
    adder, x, s, ad = _budget_pair(sc, design)
    return [("budget_state()", adder.budget_state().name, RESULT_NAMES[pa.budget_state(x, s, ad)]),
            ("budgets", real.adder_budgets(adder, sc.base.ratio[1]), _model_budgets(x, s, ad))]


def run_swa_budget(sc: Budget, design: Design) -> list[tuple[str, Any, Any]]:
    adder, x, s, ad = _budget_pair(sc, design)
    got, took_host = real.swa_budget_for_req(adder, sc.extend, sc.max_new, sc.swa_host)
    host = sc.swa_host if took_host else 0
    return [("_swa_budget_for_req", got, pa._swa_budget_for_req(x, ad, sc.extend, sc.max_new, host))]


def _no_ring(design: Design, version: str) -> str | None:
    if not real.has_swa_req_ring():
        return "no per-request SWA ring (BaseSWAKVPool.swa_req_ring_size: 0.5.20+ only)"
    if not design.on("swa_req_ring"):
        return f"the design {design.name} has swa_req_ring off"
    return None


def _no_swa_budget(design: Design, version: str) -> str | None:
    if not design.on("swa_budget_split"):
        return "no _swa_budget_for_req before #22597 (the design has swa_budget_split off)"
    return None


def _life(swa: bool, tree: str = "", busy: bool = False, batch: bool = False) -> Any:
    from .lifecycle import lives

    return lives(swa, tree, busy, batch)


def _branching_life() -> Any:
    from .lifecycle import branching_lives

    return branching_lives()


def _no_spec_v2(design: Design, version: str) -> str | None:
    if not design.on("eagle_v1_removed"):
        return "the design models EAGLE v1 (eagle_v1_removed off), this row spec v2"
    return None


def _spec_allocs() -> Any:
    from .spec_alloc import spec_allocs

    return spec_allocs()


def _run_spec_alloc(sc: Any, design: Design) -> list[tuple[str, Any, Any]]:
    from .spec_alloc import run_spec_alloc

    return run_spec_alloc(sc, design)


def _no_spec_v2_alloc_lens(design: Design, version: str) -> str | None:
    from .spec_alloc import unavailable

    return unavailable(design, version)


def _decode_life(swa: bool) -> Any:
    from .lifecycle import decode_lives

    return decode_lives(swa)


def _spec_life(swa: bool) -> Any:
    from .lifecycle import spec_lives

    return spec_lives(swa)


def _busy_row(swa: bool) -> Callable[[Design, str], str | None]:
    def why(design: Design, version: str) -> str | None:
        if not real.has_invariant_checker() and not real.has_busy_check_mixin():
            return "this release has neither SchedulerInvariantChecker (0.5.13+) nor the mixin's self_check_during_busy"
        if swa and design.variant("swa_busy_check") is None:
            return "the design's busy check raises on hybrid SWA (swa_busy_check off)"
        return None

    return why


def _tree_row(kind: str, swa: bool) -> Callable[[Design, str], str | None]:
    """A lifecycle row applies where its tree is the one the release builds by default
    (`real.default_tree`): RadixCache up to 0.5.18, SWARadixCache up to 0.5.15.post1, UnifiedRadixCache
    for hybrid SWA from 0.5.16 (#30468) and for every model from 0.5.19."""

    def why(design: Design, version: str) -> str | None:
        built = real.default_tree(swa)
        if built != kind:
            from .lifecycle import TREES

            return f"this release builds {TREES[built]} for a {'hybrid-SWA' if swa else 'plain'} model"
        return None

    return why


def _run_life(sc: Any, design: Design) -> list[tuple[str, Any, Any]]:
    from .lifecycle import run_life

    return run_life(sc, design)


def _loop_row_names() -> tuple[str, ...]:
    from .sched.loop_rows import LOOP_ROWS

    return tuple(LOOP_ROWS)


def _loop_row(name: str) -> Row:
    from .sched.loop_rows import LOOP_ROWS, run_walk, unavailable, walks

    cfg = LOOP_ROWS[name]
    return Row(name, f"the scheduler loop: random walks of the preset on config {cfg} replayed on SGLang's own Scheduler, "
               "every choice forced, every state compared (upstream/sched/loop_rows.py)", lambda: walks(cfg), run_walk,
               unavailable)


# -- the rows --------------------------------------------------------------------------------------

ROWS: dict[str, Row] = {
    r.name: r
    for r in [
        Row("add_one_req", "PrefillAdder.add_one_req over a waiting queue (plain, chunking off)",
            lambda: passes(hybrid=False, with_chunked_req=False), run_pass),
        Row("add_one_req/swa", "PrefillAdder.add_one_req over a waiting queue (hybrid SWA)",
            lambda: passes(hybrid=True, with_chunked_req=False), run_pass),
        Row("add_chunked_req", "PrefillAdder.add_chunked_req, then add_one_req (plain, chunking on)",
            lambda: passes(hybrid=False, chunked=True, with_chunked_req=True), run_pass),
        Row("add_chunked_req/swa", "PrefillAdder.add_chunked_req, then add_one_req (hybrid SWA, chunking on)",
            lambda: passes(hybrid=True, chunked=True, with_chunked_req=True), run_pass),
        Row("add_one_req/swa_ring", "PrefillAdder.add_one_req over a waiting queue with the per-request SWA ring "
            "(swa_req_ring_size = window; 0.5.20+)", lambda: passes(ring=True, with_chunked_req=False), run_pass,
            _no_ring),
        Row("add_chunked_req/swa_ring", "PrefillAdder.add_chunked_req, then add_one_req, with the per-request SWA ring",
            lambda: passes(ring=True, chunked=True, with_chunked_req=True), run_pass, _no_ring),
        Row("add_one_req/hicache", "PrefillAdder.add_one_req with HiCache host hits (hybrid SWA, UnifiedRadixCache "
            "with its host pools): init_load_back asked, what it loads, #39283's re-selection", hicache_pass.host_passes,
            hicache_pass.run_host_pass, hicache_pass.unavailable),
        Row("_swa_budget_for_req", "PrefillAdder._swa_budget_for_req (extend, max_new, SWA host hit, chunk budget)",
            lambda: budgets_st(hybrid=True), run_swa_budget, _no_swa_budget),
        Row("budget_state", "PrefillAdder.budget_state and the live budgets, pass state set directly (plain)",
            lambda: budgets_st(hybrid=False), run_budget_state),
        Row("budget_state/swa", "PrefillAdder.budget_state and the live budgets, pass state set directly (hybrid SWA)",
            lambda: budgets_st(hybrid=True), run_budget_state),
        Row("TokenToKVPoolAllocator", "alloc / free sequences (page_size 1)", lambda: alloc_ops("token"), run_alloc),
        Row("PagedTokenToKVPoolAllocator", "alloc_extend / alloc_decode / free sequences", lambda: alloc_ops("paged"),
            run_alloc),
        Row("SWATokenToKVPoolAllocator", "alloc_extend / alloc_decode / free / free_swa over a real SWAKVPool",
            lambda: alloc_ops("swa"), run_alloc),
        Row("SWATokenToKVPoolAllocator/ring", "alloc_extend / alloc_decode / free / free_swa (a no-op) with the "
            "per-request SWA ring (swa_req_ring_size; 0.5.20+)", lambda: alloc_ops("swa_ring"), run_alloc, _no_ring),
        Row("ReqToTokenPool", "alloc(reqs) / free(req) sequences", pool_ops, run_pool),
        Row("RadixCache", "request lifecycles: match, lock, chunk stash, finish, evict (plain tree)",
            lambda: _life(False), _run_life, _tree_row("radix", False)),
        Row("SWARadixCache", "request lifecycles: match, lock, chunk stash, finish, evict (hybrid SWA tree)",
            lambda: _life(True), _run_life, _tree_row("swa_radix", True)),
        Row("busy_check", "SGLang's busy-time memory check (self_check_during_busy, _get_total_uncached_sizes) after "
            "each lifecycle operation, on the release's plain tree", lambda: _life(False, "", True), _run_life,
            _busy_row(False)),
        Row("busy_check/swa", "the same on the release's hybrid-SWA tree (both pool equations)",
            lambda: _life(True, "", True), _run_life, _busy_row(True)),
        Row("alloc_for_extend", "both requests' chunks in one extend batch: SGLang's alloc_token_slots / "
            "alloc_paged_token_slots_extend (evict_from_tree_cache, then the allocator) on the release's plain tree",
            lambda: _life(False, "", False, True), _run_life),
        Row("alloc_for_extend/swa", "the same on the release's hybrid-SWA tree and allocator",
            lambda: _life(True, "", False, True), _run_life),
        Row("alloc_for_decode", "one decode step for both prefilled requests: SGLang's alloc_token_slots / "
            "alloc_paged_token_slots_decode (evict_from_tree_cache(bs * page_size), then alloc_decode) on the "
            "release's plain tree", lambda: _decode_life(False), _run_life),
        Row("alloc_for_decode/swa", "the same on the release's hybrid-SWA tree and allocator",
            lambda: _decode_life(True), _run_life),
        Row("alloc_for_spec_decode", "a spec v2 decode step's over-allocation (A to A') for both prefilled requests: "
            "SGLang's alloc_token_slots / alloc_paged_token_slots_extend on the release's plain tree",
            lambda: _spec_life(False), _run_life, _no_spec_v2),
        Row("alloc_for_spec_decode/swa", "the same on the release's hybrid-SWA tree and allocator (both pools "
            "over-allocated to A')", lambda: _spec_life(True), _run_life, _no_spec_v2),
        Row("spec_v2_alloc_len", "spec v2's decode over-allocation sizing: get_alloc_len_per_decode, the "
            "reserve, A' (page_aligned_decode_alloc_lens' nxt_kv_lens) and _new_tokens_required_next_decode_spec_v2 "
            "against kvmc's alloc_len_per_decode / spec_v2_alloc_len / spec_v2_tokens_needed (upstream/spec_alloc.py)",
            _spec_allocs, _run_spec_alloc, _no_spec_v2_alloc_lens),
        Row("UnifiedRadixCache", "request lifecycles on UnifiedRadixCache with a FULL component only",
            lambda: _life(False, "unified"), _run_life, _tree_row("unified", False)),
        Row("UnifiedRadixCache/swa", "request lifecycles on UnifiedRadixCache with FULL and SWA components "
            "(the hybrid-SWA default from 0.5.16)", lambda: _life(True, "unified"), _run_life, _tree_row("unified", True)),
        Row("UnifiedRadixCache/swa_branching", "the same, each scenario opening on a warm prefix an SWA-only "
            "eviction tombstoned under a finished request's chain, so the second request's match has a Full-KV hit "
            "past its SWA-valid prefix (v0.5.20+: swa_branching_seqlen, the insert cut at it)",
            _branching_life, _run_life, _tree_row("unified", True)),
        *[_loop_row(n) for n in _loop_row_names()],
    ]
}
