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
from typing import Any, Iterator

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


def _reads_differ(config: str, base: Any, mutant: Any) -> bool:
    """Whether what the properties read of a state (checker/mutation/equivalence.py
    `property_reads`) is other terms under the mutant than under the model, from the free state."""
    from checker.engines.substeps import free_state
    from checker.mutation.equivalence import _same, symbolic_reads, unbounded

    so, sm = System(CONFIGS[config], base), System(CONFIGS[config], mutant)
    params = unbounded(so)
    s0 = free_state(so, params, "rd0")
    return not all(_same(a, b) for (_n, a), (_m, b) in zip(symbolic_reads(so, params, s0), symbolic_reads(sm, params, s0)))


def _verdicts(system: System, p: Any, s: State) -> dict[str, bool]:
    """`property_reads` of concrete state `s` (each property's holds and witness)."""
    from checker.mutation.equivalence import property_reads

    return {n: bool(v) for n, v in property_reads(system.ctx(Concrete(), p), s)}


def _walk(config: str, base: Any, mutant: Any, time_limit_s: float, max_depth: int) -> Iterator[tuple]:
    """Breadth first over the model's reachable states of `config`'s explicit points, each state's
    successors under the model and under the mutant: the one walk `divergence` and `inclusion`
    read. Yields, in order: ("init", point, params, model's initial state, mutant's) when the two
    initial states differ (and stops); then per state ("state", point, params, state, path, depth,
    model's successors, mutant's successors), each a dict successor -> the picks that reach it,
    or ("raises", point, params, state, path, depth, states, exception) where the mutant raises (and
    stops), or ("reads", point, params, state, path, depth, {read: (model's, mutant's)}) where a
    property reads the state differently under the mutant (a mutant of SGLang's busy or idle check;
    looked at only when the properties' terms differ at all, `_reads_differ`; it stops);
    ("timeout", depth, states) past `time_limit_s`; finally ("end", depth, states, complete). The
    frontier grows by the model's successors; a consumer stops by leaving the loop."""
    t0 = time.perf_counter()
    cfg = CONFIGS[config]
    so, sm = System(cfg, base), System(cfg, mutant)
    reads = _reads_differ(config, base, mutant)
    points = param_points(so)
    seen: set[tuple[int, State]] = set()
    frontier: list[tuple[int, State, list[dict[str, Any]]]] = []
    for pi, p in enumerate(points):
        s0 = so.init(so.ctx(Concrete(), p))
        sm0 = sm.init(sm.ctx(Concrete(), p))
        if s0 != sm0:
            yield ("init", pi, p, s0, sm0)
            return
        seen.add((pi, s0))
        frontier.append((pi, s0, []))
    depth = 0
    states = 0
    while frontier and depth < max_depth:
        nxt = []
        for pi, s, path in frontier:
            if time.perf_counter() - t0 > time_limit_s:
                yield ("timeout", depth, states)
                return
            if s.oom != OOM_NONE:
                continue
            p = points[pi]
            states += 1
            if reads:
                vo, vm = _verdicts(so, p, s), _verdicts(sm, p, s)
                if vo != vm:
                    yield ("reads", pi, p, s, path, depth, {n: (vo[n], vm[n]) for n in vo if vo[n] != vm[n]})
                    return
            succ_o: dict[State, dict[str, Any]] = {}
            for picks, s2 in successors(so, p, s):
                succ_o.setdefault(s2, picks)
            try:
                succ_m: dict[State, dict[str, Any]] = {}
                for picks, s2 in successors(sm, p, s):
                    succ_m.setdefault(s2, picks)
            except Exception as e:  # the mutant raises from this state
                yield ("raises", pi, p, s, path, depth, states, e)
                return
            yield ("state", pi, p, s, path, depth, succ_o, succ_m)
            for s2, picks in succ_o.items():
                if (pi, s2) not in seen:
                    seen.add((pi, s2))
                    nxt.append((pi, s2, path + [picks]))
        frontier = nxt
        depth += 1
    yield ("end", depth, states, not frontier)


def divergence(config: str, base: Any, mutant: Any, time_limit_s: float, max_depth: int = 8) -> dict[str, Any]:
    """The shallowest reachable state of `config`'s explicit points where the mutant's successors
    differ from the model's (module docstring), or what was searched without finding one."""
    t0 = time.perf_counter()
    for ev in _walk(config, base, mutant, time_limit_s, max_depth):
        if ev[0] == "init":
            _, pi, p, s0, sm0 = ev
            return dict(found=True, depth=0, point=pi, params=p.as_dict(), path=[], state=_brief(s0),
                        fields={k: list(map(str, v)) for k, v in _fields(s0, sm0).items()}, note="initial states differ")
        if ev[0] == "timeout":
            _, depth, states = ev
            return dict(found=False, depth=depth, states=states, complete=False,
                        note=f"time limit {time_limit_s:.0f}s at depth {depth}")
        if ev[0] == "raises":
            _, pi, p, s, path, depth, _states, e = ev
            return dict(found=True, depth=depth, point=pi, params=p.as_dict(), path=path, state=_brief(s),
                        fields={}, note=f"the mutant raises {type(e).__name__}: {e}"[:300])
        if ev[0] == "reads":
            _, pi, p, s, path, depth, props = ev
            return dict(found=True, depth=depth, point=pi, params=p.as_dict(), path=path, state=_brief(s),
                        note="a property reads this reachable state differently (model's -> mutant's)",
                        fields={n: [str(a), str(b)] for n, (a, b) in list(props.items())[:6]},
                        seconds=round(time.perf_counter() - t0, 1))
        if ev[0] == "end":
            _, depth, states, complete = ev
            return dict(found=False, depth=depth, states=states, complete=complete,
                        note="every reachable state of the explicit points compared" if complete else f"compared to depth {depth}",
                        seconds=round(time.perf_counter() - t0, 1))
        _, pi, p, s, path, depth, succ_o, succ_m = ev
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
    raise AssertionError("_walk ends with an 'end' event")


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
    extra = fewer = 0
    first: str | None = None
    for ev in _walk(config, base, mutant, time_limit_s, max_depth):
        if ev[0] == "init":
            return dict(extra=1, fewer=0, states=0, depth=0, complete=False, first_extra="initial states differ")
        if ev[0] == "timeout":
            _, depth, states = ev
            return dict(extra=extra, fewer=fewer, states=states, depth=depth, complete=False, first_extra=first,
                        note=f"time limit {time_limit_s:.0f}s at depth {depth}")
        if ev[0] == "raises":
            _, _pi, _p, _s, _path, depth, states, e = ev
            return dict(extra=extra + 1, fewer=fewer, states=states, depth=depth, complete=False,
                        first_extra=f"the mutant raises {type(e).__name__} at depth {depth}")
        if ev[0] == "reads":  # the same states, read differently: not a restriction a property cannot see
            _, pi, _p, _s, _path, depth, props = ev
            return dict(extra=extra + 1, fewer=fewer, states=0, depth=depth, complete=False,
                        first_extra=f"point {pi}, depth {depth}: {', '.join(props)} read the state differently")
        if ev[0] == "end":
            _, depth, states, complete = ev
            return dict(extra=extra, fewer=fewer, states=states, depth=depth, complete=complete, first_extra=first,
                        seconds=round(time.perf_counter() - t0, 1))
        _, pi, _p, s, _path, depth, succ_o, succ_m = ev
        if set(succ_m) - set(succ_o):
            extra += 1
            if first is None:
                first = f"point {pi}, depth {depth + 1}: {_brief(s)}"
        if set(succ_o) - set(succ_m):
            fewer += 1
    raise AssertionError("_walk ends with an 'end' event")
