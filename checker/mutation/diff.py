"""Where a mutant first behaves differently from the model, on reachable states.

Breadth first over the model's reachable states of a config's explicit parameter points (the
explicit engine's graph), the successors of each state are computed twice, under the model and
under the mutant (every answer to the step's choices, checker/engines/explicit.py::successors);
the first state whose two successor sets differ is the divergence. It is reachable (its path is a
trace of the model), and one step from it the mutant reaches a state the model does not (or the
reverse). A mutant that survived every engine and diverges here reached that state in its own
search and broke no property there: evidence of a property gap (when its search covered every
reachable state of those points) or of a search too short (when it did not).
"""

from __future__ import annotations

import time
from typing import Any

from model.ops import Concrete
from model.state import FIELD_NAMES, OOM_NONE, STATUS_NAMES, State
from model.system import System
from specs.configs import CONFIGS

from checker.engines.explicit import param_points, successors


def _fields(a: State, b: State) -> dict[str, tuple[Any, Any]]:
    out = {}
    for f in FIELD_NAMES:
        va, vb = getattr(a, f), getattr(b, f)
        if va != vb:
            out[f] = (va, vb)
    return out


def _brief(s: State) -> str:
    reqs = ", ".join(f"r{r} {STATUS_NAMES[s.status[r]]} A={s.kv_allocated_len[r]} C={s.kv_committed_len[r]} "
                     f"P={s.cache_protected_len[r]}" for r in range(len(s.status)))
    return f"F avail {s.full_available}; {reqs}"


def divergence(config: str, base: Any, mutant: Any, time_limit_s: float, max_depth: int = 8) -> dict[str, Any]:
    """The shallowest reachable state of `config`'s explicit points where the mutant's successors
    differ from the model's (module docstring), or what was searched without finding one."""
    t0 = time.perf_counter()
    cfg = CONFIGS[config]
    so, sm = System(cfg, base), System(cfg, mutant)
    points = param_points(so)
    seen: set[tuple[int, State]] = set()
    frontier: list[tuple[int, State, list[dict[str, Any]]]] = []
    for pi, p in enumerate(points):
        s0 = so.init(so.ctx(Concrete(), p))
        sm0 = sm.init(sm.ctx(Concrete(), p))
        if s0 != sm0:
            return dict(found=True, depth=0, point=pi, params=p.as_dict(), path=[], state=_brief(s0),
                        fields={k: list(map(str, v)) for k, v in _fields(s0, sm0).items()}, note="initial states differ")
        seen.add((pi, s0))
        frontier.append((pi, s0, []))
    depth = 0
    states = 0
    while frontier and depth < max_depth:
        nxt = []
        for pi, s, path in frontier:
            if time.perf_counter() - t0 > time_limit_s:
                return dict(found=False, depth=depth, states=states, complete=False,
                            note=f"time limit {time_limit_s:.0f}s at depth {depth}")
            if s.oom != OOM_NONE:
                continue
            p = points[pi]
            states += 1
            succ_o = {}
            for picks, s2 in successors(so, p, s):
                succ_o.setdefault(s2, picks)
            try:
                succ_m = {}
                for picks, s2 in successors(sm, p, s):
                    succ_m.setdefault(s2, picks)
            except Exception as e:  # the mutant raises from this state
                return dict(found=True, depth=depth, point=pi, params=p.as_dict(), path=path, state=_brief(s),
                            fields={}, note=f"the mutant raises {type(e).__name__}: {e}"[:300])
            if set(succ_o) != set(succ_m):
                only_m = [t for t in succ_m if t not in succ_o]
                only_o = [t for t in succ_o if t not in succ_m]
                if only_m:
                    t = only_m[0]
                    near = min(succ_o, key=lambda u: len(_fields(u, t))) if succ_o else None
                    picks = succ_m[t]
                    what = "the mutant reaches a state the model does not"
                else:
                    t = only_o[0]
                    near = min(succ_m, key=lambda u: len(_fields(u, t))) if succ_m else None
                    picks = succ_o[t]
                    what = "the model reaches a state the mutant does not"
                diff = _fields(near, t) if near is not None else {}
                return dict(found=True, depth=depth + 1, point=pi, params=p.as_dict(), path=path + [picks],
                            state=_brief(s), note=what, only_mutant=len(only_m), only_model=len(only_o),
                            fields={k: [str(a), str(b)] for k, (a, b) in list(diff.items())[:6]},
                            seconds=round(time.perf_counter() - t0, 1))
            for s2, picks in succ_o.items():
                if (pi, s2) not in seen:
                    seen.add((pi, s2))
                    nxt.append((pi, s2, path + [picks]))
        frontier = nxt
        depth += 1
    return dict(found=False, depth=depth, states=states, complete=not frontier,
                note="every reachable state of the explicit points compared" if not frontier else f"compared to depth {depth}",
                seconds=round(time.perf_counter() - t0, 1))


def inclusion(config: str, base: Any, mutant: Any, time_limit_s: float, max_depth: int = 8) -> dict[str, Any]:
    """Is the mutant a *restriction* of the model on `config`'s explicit points: from every
    reachable state compared, each successor of the mutant's is one of the model's? Then (by
    induction over the steps) every state the mutant reaches, the model reaches too, and no safety
    property can tell them apart: only a liveness property (`progress`) or a witness the mutant
    no longer meets can. Breadth first over the model's reachable states (which hold the mutant's
    while the inclusion holds), as `divergence` does; `extra` counts states where the mutant has a
    successor the model lacks (the first one is named), `fewer` states where it lacks one of the
    model's. `complete`: every reachable state of the points (to `max_depth`) was compared."""
    t0 = time.perf_counter()
    cfg = CONFIGS[config]
    so, sm = System(cfg, base), System(cfg, mutant)
    points = param_points(so)
    seen: set[tuple[int, State]] = set()
    frontier: list[tuple[int, State]] = []
    for pi, p in enumerate(points):
        s0 = so.init(so.ctx(Concrete(), p))
        if s0 != sm.init(sm.ctx(Concrete(), p)):
            return dict(extra=1, fewer=0, states=0, depth=0, complete=False, first_extra="initial states differ")
        seen.add((pi, s0))
        frontier.append((pi, s0))
    extra = fewer = states = depth = 0
    first: str | None = None
    while frontier and depth < max_depth:
        nxt = []
        for pi, s in frontier:
            if time.perf_counter() - t0 > time_limit_s:
                return dict(extra=extra, fewer=fewer, states=states, depth=depth, complete=False, first_extra=first,
                            note=f"time limit {time_limit_s:.0f}s at depth {depth}")
            if s.oom != OOM_NONE:
                continue
            p = points[pi]
            states += 1
            succ_o = {s2 for _picks, s2 in successors(so, p, s)}
            try:
                succ_m = {s2 for _picks, s2 in successors(sm, p, s)}
            except Exception as e:  # the mutant raises here: not a restriction
                return dict(extra=extra + 1, fewer=fewer, states=states, depth=depth, complete=False,
                            first_extra=f"the mutant raises {type(e).__name__} at depth {depth}")
            if succ_m - succ_o:
                extra += 1
                if first is None:
                    first = f"point {pi}, depth {depth + 1}: {_brief(s)}"
            if succ_o - succ_m:
                fewer += 1
            for s2 in succ_o:
                if (pi, s2) not in seen:
                    seen.add((pi, s2))
                    nxt.append((pi, s2))
        frontier = nxt
        depth += 1
    return dict(extra=extra, fewer=fewer, states=states, depth=depth, complete=not frontier, first_extra=first,
                seconds=round(time.perf_counter() - t0, 1))
