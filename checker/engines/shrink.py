"""Concrete shrinking of a counterexample's numbers, before the BMC's z3 minimisation rounds.

A counterexample's schedule (the choices z3 made at each step) is kept, and each parameter that
can go one step lower is lowered, one at a time, to the smallest value in its bounds (of at most
`EXHAUSTIVE` tried, see `_candidates`) at which the concrete model still runs that schedule
(every choice asked is one the schedule recorded, within the range the step offers now, and no
`assume` rejects it) and still breaks the property at the last step. The parameters are taken in
the order of the BMC's objectives (pools, then lengths, then knobs), and the passes repeat until
none lowers anything: the result is a local minimum, no parameter one step lower still breaks.

Each try is one concrete run of a few steps (milliseconds), where each z3 round is a query over
every number at once (0.1-1 s on hybrid_swa at depth 3: #23174 spent 7 s in 12 rounds, most of
them lowering a sum by one). The result only moves the z3 rounds' starting point: they start from
a model pinned to the shrunk numbers, so the trace is still z3's, re-run like any other. The
concrete model is the same one every engine runs (model/); nothing here decides what a step does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from model.config import PAGE_MULTIPLE, REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS, Params
from model.ops import Concrete, Infeasible
from model.system import System
from specs.properties import PROPERTIES

from checker.traces.trace import TraceMismatch, run_concrete

# the BMC's objectives (checker/engines/bmc.py::BMC._objectives), in order; warm_device / warm_host are
# flags, not sizes, and stay as found
OBJECTIVE_ORDER = (("full_tokens", "swa_tokens", "warm_len", "req_pool_size"),
                   ("input_len", "max_new_tokens"),
                   ("sliding_window_size", "chunked_prefill_size", "max_prefill_tokens"))
MAX_PASSES = 4
EXHAUSTIVE = 32  # values below the current one tried one by one; beyond, a sample (`_candidates`)


class PinnedOracle:
    """The recorded choices of one step, strictly: a choice the schedule did not make, or a value
    outside the range the step offers now, is a different schedule (`Infeasible`)."""

    def __init__(self, picks: dict[str, Any]) -> None:
        self.picks = picks

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        v = self.picks.get(name)
        if v is None or isinstance(v, bool) or not lo <= v <= hi:
            raise Infeasible(f"choice {name}: {v!r} is not a recorded pick in [{lo}, {hi}]")
        return int(v)

    def pick_bool(self, name: str) -> bool:
        if name not in self.picks:
            raise Infeasible(f"choice {name} is not a recorded pick")
        return bool(self.picks[name])


def breaks(system: System, params: Params, picks: list[dict[str, Any]], prop: str) -> bool:
    """Does the schedule `picks` run with `params` and break `prop` at its last step?"""
    if not system.params_ok(system.ctx(Concrete(), params)):
        return False
    actions = [("event_loop_iteration", p) for p in picks]
    try:
        states, _ = run_concrete(system, params, actions, oracle_for=lambda t: PinnedOracle(picks[t]), check_frames=False)
    except (TraceMismatch, Infeasible):
        return False
    return not PROPERTIES[prop].holds(system.ctx(Concrete(), params), states[-1])


def _coordinates(system: System, params: Params, free: set[str] | None) -> list[tuple[str, int | None]]:
    """(parameter, index or None) for each number the bounds leave open (and `free` names), in
    objective order."""
    cfg = system.cfg
    out: list[tuple[str, int | None]] = []
    for group in OBJECTIVE_ORDER:
        for name in group:
            lo, hi = cfg.bound(name)
            if lo == hi or (free is not None and name not in free):
                continue
            val = getattr(params, name)
            if name in SCALAR_PARAMS:
                out.append((name, None))
            elif name in REQ_PARAMS or name in WARM_PARAMS:
                out += [(name, i) for i in range(len(val))]
    return out


def _with(params: Params, name: str, i: int | None, v: int) -> Params:
    if i is None:
        return replace(params, **{name: v})
    vals = list(getattr(params, name))
    vals[i] = v
    return replace(params, **{name: tuple(vals)})


def _candidates(lo: int, cur: int, step: int) -> list[int]:
    """The values below `cur` to try, smallest first: all of them when there are at most
    `EXHAUSTIVE`, else the smallest `EXHAUSTIVE // 2` and as many spread geometrically up to `cur` (a
    pool of 10^7 tokens must not mean 10^7 tries; the next pass, and z3's rounds, go on from the
    value found)."""
    n = (cur - lo) // step
    if n <= EXHAUSTIVE:
        return list(range(lo, cur, step))
    half = EXHAUSTIVE // 2
    spread = {lo + step * int(half * (n / half) ** (k / half)) for k in range(1, half)}  # geometric
    return sorted({lo + step * k for k in range(half)} | spread)


def shrink(system: System, params: Params, picks: list[dict[str, Any]], prop: str, free: set[str] | None = None) -> Params:
    """The smallest numbers, one parameter at a time (see the module docstring), for which the
    schedule `picks` still breaks `prop`; only the parameters named in `free` move (all: None).
    `params` must break it (returned unchanged otherwise)."""
    if not breaks(system, params, picks, prop):
        return params
    cfg = system.cfg
    coords = _coordinates(system, params, free)
    for _ in range(MAX_PASSES):
        moved = False
        for name, i in coords:
            cur = getattr(params, name) if i is None else getattr(params, name)[i]
            lo, _hi = cfg.bound(name)
            step = cfg.page_size if name in PAGE_MULTIPLE else 1
            if cur - step < lo or not breaks(system, _with(params, name, i, cur - step), picks, prop):
                continue  # a local minimum already: one try, not a scan (most parameters, most passes)
            for v in _candidates(lo, cur, step):
                cand = _with(params, name, i, v)
                if breaks(system, cand, picks, prop):
                    params, moved = cand, True
                    break
        if not moved:
            break
    return params
