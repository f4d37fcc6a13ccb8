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

from . import real
from .model_side import Pass, budgets, pass_ctx, slots

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


# -- scenarios -------------------------------------------------------------------------------------
@st.composite
def passes(draw: Any, hybrid: bool | None = None, chunked: bool | None = None, with_chunked_req: bool | None = None) -> Pass:
    ps = draw(st.sampled_from([1, 4]))
    page = lambda lo, hi: ps * draw(st.integers(lo, hi))  # noqa: E731
    if hybrid is None:
        hybrid = draw(st.booleans())
    if chunked is None:
        chunked = draw(st.booleans())
    full = page(4, 48 // ps + 8)
    swa = page(4, 48 // ps + 8) if hybrid else None
    window = draw(st.integers(1, 24)) if hybrid else 0
    chunk = draw(st.integers(ps, 40)) if chunked else None
    cap = min(full, swa) if swa is not None else full
    warm = page(0, max(0, cap // 3) // ps)
    other = page(0, max(0, (cap - warm) // 3) // ps)
    held = page(0, max(0, (cap - warm - other) // 3) // ps)
    running = tuple(
        (mnt, draw(st.integers(0, mnt)))
        for mnt in draw(st.lists(st.integers(1, 24), max_size=2 if held else 0))
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
    return Pass(ps, full, swa, window, chunk, draw(st.integers(1, 64)), ratio, warm, other, held, running,
                chunked_req, tuple(waiting), align)


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
    if sc.swa is not None:
        alloc = real.allocator("swa", sc.full, ps, sc.swa)
    else:
        alloc = real.allocator("token" if ps == 1 else "paged", sc.full, ps)
    pool = real.req_to_token_pool(8)
    tree = real.tree_cache(alloc, ps, sc.window if sc.swa is not None else None, pool)
    warm_tokens = _fresh(sc.warm)
    if sc.warm:
        real.insert(tree, warm_tokens, real.take(alloc, sc.warm, ps))
    if sc.other:
        real.insert(tree, _fresh(sc.other), real.take(alloc, sc.other, ps))
    real.take(alloc, sc.held, ps)
    running = [real.make_req(f"run{i}", _fresh(4), mnt, out) for i, (mnt, out) in enumerate(sc.running)]
    chunked = None
    if sc.chunked:
        n, committed, mnt = sc.chunked
        chunked = real.make_req("chunked", _fresh(n), mnt)
        real.set_committed(chunked, real.take(alloc, committed, ps))
    waiting = []
    for j, (n, mnt, shares) in enumerate(sc.waiting):
        toks = warm_tokens + _fresh(n - len(warm_tokens)) if shares and sc.warm else _fresh(n)
        waiting.append(real.make_req(f"wait{j}", toks, mnt))
    num, den = sc.ratio
    adder = real.prefill_adder(tree, alloc, ps, real.running_batch(running), num / den, sc.max_prefill, sc.chunk)
    return alloc, tree, chunked, waiting, adder


def _real_budgets(adder: Any, den: int) -> dict[str, Any]:
    out = {
        "rem_total_tokens*den": _num(adder.rem_total_tokens * den),
        "cur_rem_tokens": _num(adder.cur_rem_tokens),
        "rem_input_tokens": _num(adder.rem_input_tokens),
        "rem_chunk_tokens": None if adder.rem_chunk_tokens is None else _num(adder.rem_chunk_tokens),
    }
    if getattr(adder, "is_hybrid_swa", False) and hasattr(type(adder), "rem_swa_tokens"):
        out["rem_swa_tokens"] = _num(adder.rem_swa_tokens)
    return out


def _num(v: Any) -> Any:
    f = float(v)
    return int(f) if f == int(f) else f


def run_pass(sc: Pass, design: Design) -> list[tuple[str, Any, Any]]:
    """`add_chunked_req` (if a chunked request exists) then `add_one_req` over the waiting queue
    until a result other than CONTINUE, on both sides; observed after every call."""
    from model import system as msys

    obs: list[tuple[str, Any, Any]] = []
    alloc, tree, chunked, waiting, adder = _real_pass(sc)
    x, s = pass_ctx(sc, design)
    _run_slots, chunk_slot, wait_slots = slots(sc)
    den = sc.ratio[1]
    ad = pa.new_adder(x, s)
    obs.append(("start: budgets", _real_budgets(adder, den), _model_budgets(x, s, ad)))
    if chunked is not None:
        ret = adder.add_chunked_req(chunked)
        ad, stays = pa.add_chunked_req(x, s, ad, chunk_slot)
        obs.append(("add_chunked_req: admitted", chunked in adder.can_run_list, bool(ad.can_run[chunk_slot])))
        obs.append(("add_chunked_req: stays chunked", ret is not None, bool(stays)))
        if chunked in adder.can_run_list:
            obs.append(("add_chunked_req: extend", real.extend_len(chunked), ad.extend[chunk_slot]))
        obs.append(("add_chunked_req: budgets", _real_budgets(adder, den), _model_budgets(x, s, ad)))
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
        obs.append((f"waiting[{j}]: budgets", _real_budgets(adder, den), _model_budgets(x, s, ad)))
        if res != ARR.CONTINUE:
            break
    return obs


def _model_budgets(x: Any, s: Any, ad: Any) -> dict[str, Any]:
    return budgets(x, s, ad)


# -- the rows --------------------------------------------------------------------------------------
def _swa(design: Design) -> bool:
    return True


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
    ]
}
