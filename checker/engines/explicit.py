"""Explicit-state engine (`--engine explicit`): breadth-first search over the concrete interpretation
of the model, fast, over the whole bounds of a config.

The same search as the graph engine (checker/engines/explicit_graph.py, which keeps the reachable graph
as a `networkx.DiGraph` for `kvmc graph`, liveness and `kvmc mutate`), the same verdicts, shortest
counterexamples, minimisation order and traces; what differs is how it is kept and enumerated:

* **Flat storage.** Per parameter point: a dict state -> index, the states in a list, and for each
  index its parent index, the successor index and the picks of the edge that found it. A node is
  (point, index); the states of two points never meet, so each point is its own search, and the
  points are searched level by level side by side (the shortest violation over all points is the
  first level holding one, as in the graph engine).
* **Choice trees without re-running their prefix.** A state's successors are every answer sequence
  to the step's named choices, walked depth-first (`EnumeratingOracle`'s order, so successor
  indices and traces are the graph engine's). The step is a plain Python function, which cannot be
  forked at a choice point; instead each run records every `@transition` call it makes (in the
  order calls start: the call's number, how many choices had been answered when it returned, what it
  returned and the choices it answered), and the next run of the same tree, which answers the same
  choices up to the one that advanced, returns a recorded call's result at once when that call
  returned before the advanced choice was asked: its inputs and every answer it read are those of
  the recorded run, so its result is too (the model is deterministic given its answers). The hook
  is `Ctx.overrides` (model/transition.py), which every transition call consults: each transition
  is wrapped, the design's own override (a planted bug, a patch) inside the wrapper, so the one
  definition of each transition is what runs. Per point one context serves every run (its memo of
  per-state counters, model/radix_cache.py::counters, lasts across the leaves of a tree and the
  property checks of a state).
* **Whole bounds.** `bound_points`: every parameter point of `Config.bounds` up to a cap, the graph
  engine's points first (the explicit grid and its boundary points), then points drawn from the
  boundary values of every parameter at once (a length around a page, the window, the chunk; a pool
  around what the requests need: `boundary_values`), then points drawn from the whole bounds; each
  satisfying `params_ok`. `coverage` says, per parameter, how many of its values in the bounds some
  point searched has. A search over part of the bounds is never `holds` for the config: its words
  say `holds to depth k (not proved) on N of M parameter points` (M: the grid of the bounds, before
  `params_ok`).
* **Shards.** `jobs`: the points dealt round-robin over forked processes (`--executor ray`: Ray
  tasks, checker/executors), each searching its share; the results combine as one search would:
  a property's shortest violation is the least over shards (ties: BMC's readable order, then the
  point's index, then the state's order in its level), its witness the earliest, and a shard that
  stopped (state cap, time) leaves the property unknown.

State reduction: none. Slot symmetry is not one for this model (docs/engines.md, "Symmetry breaking
over request slots": the waiting queue is in slot order while arrivals are free, so the runs are not
closed under renaming the slots); the per-point parameters make two points' states different
nodes; the ghost fields are read by properties. A state is stored as the model's own frozen `State`
(its hash is the tuple of its fields).

This engine models nothing itself; it drives model/system.py. SGLang commit: model/designs.py.
"""

from __future__ import annotations

import operator
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from model.config import PAGE_MULTIPLE, REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS, Config, Params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import OOM_NONE, State
from model.system import System
from model.transition import REGISTRY
from checker.engines.applies import for_config, nothing_applies
from checker.engines.explicit_graph import (  # noqa: F401  (re-exported: the graph engine's names)
    DEFAULT_GRAPH_CAP,
    DEFAULT_MAX_STATES,
    EnumeratingOracle,
    Explorer,
    Search,
    StateCapExceeded,
    boundary_points,
    boundary_values,
    check_config_graph,
    export_graph,
    fair_cycles,
    grid_points,
    param_points,
    readable_key,
    successors,
    to_dot,
)
from checker.engines.results import ConfigReport, Result
from checker.traces.trace import Step, Trace, run_concrete
from checker.verdict import Verdict
from specs.properties import PROPERTIES, Property

DEFAULT_MAX_POINTS = 500
VALUE_MEMO_SIZE = 50_000  # remembered choice-free transition calls per point (cleared when full)  # parameter points of the bounds searched by default (`bound_points`)


# -- one point's step, with the choice tree's prefix remembered ----------------------------------------
class _Oracle:
    """`EnumeratingOracle` that also keeps each answer's qualified name (a skipped call's answers are
    put back in the run's picks)."""

    __slots__ = ("prefix", "trail")

    def __init__(self, prefix: list[Any]) -> None:
        self.prefix = prefix
        self.trail: list[tuple[Any, Any, str]] = []  # (answer, hi, name); hi is True for a boolean choice

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        i = len(self.trail)
        v = int(self.prefix[i]) if i < len(self.prefix) else lo
        self.trail.append((v, hi, name))
        return v

    def pick_bool(self, name: str) -> bool:
        i = len(self.trail)
        v = bool(self.prefix[i]) if i < len(self.prefix) else False
        self.trail.append((v, True, name))
        return v


def _next_prefix(trail: list[tuple[Any, Any, str]]) -> list[Any] | None:
    """`EnumeratingOracle.next_prefix`: the last choice with a larger value left, advanced."""
    for i in range(len(trail) - 1, -1, -1):
        v, hi, _ = trail[i]
        if hi is True:
            if not v:
                return [a for a, _h, _n in trail[:i]] + [True]
        elif v < hi:
            return [a for a, _h, _n in trail[:i]] + [v + 1]
    return None


class PointRunner:
    """The step of one system at one parameter point: `successors(s)` walks the choice tree of `s`
    (module docstring: a recorded transition call that returned before the advanced choice is not
    run again), `holds(fn, s)` evaluates a property predicate in the same context."""

    def __init__(self, system: System, params: Params, values: bool = True) -> None:
        self.system = system
        self.params = params
        self.ops = Concrete()
        self.x = system.ctx(self.ops, params)
        # properties and `enabled` read through a context of their own (no transition recording), sharing the memo
        self.px = system.ctx(Concrete(), params)
        self.px.memo = self.x.memo
        for c in (self.x, self.px):  # the concrete primitives that are builtins already, bound as such
            c.min, c.max, c.sum, c.not_, c.fdiv = min, max, sum, operator.not_, operator.floordiv
        self.oracle = _Oracle([])
        self.old: dict[int, tuple[int, int, int, Any]] = {}  # call number -> (end number, first answer, answers at return, result)
        self.new: dict[int, tuple[int, int, int, Any]] = {}
        self.prev: list[tuple[Any, Any, str]] = []  # the previous run's trail
        self.seq = 0
        self.j = 0  # the first answer this run may give differently from the previous one
        self.skipped = 0
        self.calls = 0
        self.value_hits = 0
        # choice-free transition calls by the value of their arguments (a state, request slot, ...) and
        # whether choices count where they run (`Ops.path`): such a call is a function of those
        self.values: dict[Any, tuple[Any, int]] | None = {} if values else None
        for name, info in list(REGISTRY.items()):
            self.x.overrides[name] = self._wrap(self.x.overrides.get(name, info.fn))

    def _wrap(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(x: Any, *args: Any, **kw: Any) -> Any:
            k = self.seq
            self.seq = k + 1
            e = self.old.get(k)
            if e is not None and e[2] <= self.j:
                end_seq, first, last, out = e
                trail, picks, prev = self.oracle.trail, self.ops.picks, self.prev
                for t in range(first, last):
                    a = prev[t]
                    trail.append(a)
                    picks[a[2]] = a[0]
                new, old = self.new, self.old
                for kk in range(k, end_seq):
                    ee = old.get(kk)
                    if ee is not None:
                        new[kk] = ee
                self.seq = end_seq
                self.skipped += 1
                return out
            first = len(self.oracle.trail)
            vm = self.values
            key: Any = None
            if vm is not None:
                try:
                    key = (impl, args, tuple(kw.items()), all(self.ops._path))
                    hit = vm.get(key)
                except TypeError:  # an argument that is not hashable: not remembered
                    key = hit = None
                if hit is not None:
                    out, nested = hit
                    self.seq += nested
                    self.new[k] = (self.seq, first, first, out)
                    self.value_hits += 1
                    return out
            self.calls += 1
            out = impl(x, *args, **kw)
            last = len(self.oracle.trail)
            self.new[k] = (self.seq, first, last, out)
            if key is not None and last == first:  # answered no choice: a function of its arguments
                if len(vm) >= VALUE_MEMO_SIZE:
                    vm.clear()
                vm[key] = (out, self.seq - k - 1)
            return out

        recorded.__name__ = getattr(impl, "__name__", "transition")
        return recorded

    def successors(self, s: State, action: str = "event_loop_iteration") -> list[tuple[dict[str, Any], State]]:
        """Every (picks, next state) of `s`, in the graph engine's order (`explicit_graph.successors`)."""
        out: list[tuple[dict[str, Any], State]] = []
        ops, x, step = self.ops, self.x, self.system.step
        prefix: list[Any] | None = []
        self.old, self.prev, self.j = {}, [], 0
        while prefix is not None:
            self.oracle = _Oracle(prefix)
            ops.oracle = self.oracle
            ops.picks = {}
            self.new, self.seq = {}, 0
            try:
                nxt = step(x, s, action)
            except Infeasible:
                pass
            else:
                out.append((ops.picks, nxt))
            self.old, self.prev = self.new, self.oracle.trail
            prefix = _next_prefix(self.prev)
            self.j = len(prefix) - 1 if prefix else 0
        self.old, self.new, self.prev = {}, {}, []
        return out

    def holds(self, fn: Any, s: State) -> bool:
        return bool(fn(self.px, s))

    def init(self) -> State:
        return self.system.init(self.px)

    def live(self, s: State) -> bool:
        return s.oom == OOM_NONE and self.system.enabled(self.px, s) is not False


# -- the parameter points of the whole bounds --------------------------------------------------------
def _values(cfg: Config, name: str) -> list[int]:
    lo, hi = cfg.bound(name)
    step = cfg.page_size if name in PAGE_MULTIPLE else 1
    return list(range(lo, hi + 1, step))


def _arity(cfg: Config, name: str) -> int:
    return cfg.num_reqs if name in REQ_PARAMS else cfg.warm_atoms if name in WARM_PARAMS else 0


def grid_size(cfg: Config) -> int:
    """How many points the grid of the config's bounds has (before `params_ok`)."""
    n = 1
    for name in SCALAR_PARAMS:
        n *= len(_values(cfg, name))
    for name in (*REQ_PARAMS, *WARM_PARAMS):
        n *= len(_values(cfg, name)) ** _arity(cfg, name)
    return n


def _draw(cfg: Config, rng: random.Random, choices: dict[str, list[int]]) -> Params:
    d: dict[str, Any] = {}
    for name in SCALAR_PARAMS:
        d[name] = rng.choice(choices[name])
    for name in (*REQ_PARAMS, *WARM_PARAMS):
        vals = tuple(rng.choice(choices[name]) for _ in range(_arity(cfg, name)))
        d[name] = tuple(bool(v) for v in vals) if name in ("warm_device", "warm_host") else vals
    return Params(**d)


@dataclass
class Points:
    """The points a search runs and how many the bounds hold: `total` is every point satisfying
    `params_ok` where `exact`, else the grid of the bounds before `params_ok`."""

    points: list[Params]
    total: int
    exact: bool


def bound_points(system: System, cap: int = DEFAULT_MAX_POINTS, seed: int = 0) -> Points:
    """Up to `cap` parameter points of the config's bounds satisfying `params_ok` (and at least the
    graph engine's points), in this order: the graph engine's points (`param_points`: the explicit
    grid, then its boundary points), then
    points drawn (seeded, so the list is the same every run) with every parameter at one of its
    boundary values (`boundary_values`, plus the ends of its bounds) at once, then points drawn from
    the whole bounds. Bounds of at most `4 * cap` grid points are enumerated whole (and counted
    exactly); a config whose bounds hold fewer points than the cap gets every one of them."""
    cfg = system.cfg
    ok = lambda p: bool(system.params_ok(system.ctx(Concrete(), p)))  # noqa: E731
    first = param_points(system)
    out: list[Params] = []
    seen: set[Params] = set()
    for p in first:  # every one of them, whatever the cap: a search never checks less than the graph engine's
        if p not in seen:
            seen.add(p)
            out.append(p)
    cap = max(cap, len(out))
    total = grid_size(cfg)
    if total <= cap * 4:  # small bounds: every point, in the grid's order after the first ones
        from model.config import enumerate_params

        valid = [p for p in enumerate_params(cfg, explicit=False) if p in seen or ok(p)]
        for p in valid:
            if len(out) >= cap:
                break
            if p not in seen:
                seen.add(p)
                out.append(p)
        return Points(out, len(set(valid) | seen), True)
    rng = random.Random(seed)
    base = first[len(first) // 2] if first else None
    edge = boundary_values(cfg, base) if base is not None else {}
    every = {n: _values(cfg, n) for n in (*SCALAR_PARAMS, *REQ_PARAMS, *WARM_PARAMS)}
    edge_vals = {n: sorted(set(edge.get(n, set())) | {every[n][0], every[n][-1]}) for n in every}
    for choices, share in ((edge_vals, (cap - len(out) + 1) // 2), (every, cap)):
        want = min(cap, len(out) + share)
        tries = 0
        while len(out) < want and tries < 40 * share + 100:
            tries += 1
            p = _draw(cfg, rng, choices)
            if p not in seen and ok(p):
                seen.add(p)
                out.append(p)
    return Points(out, total, False)


def coverage(cfg: Config, points: Iterable[Params]) -> dict[str, tuple[int, int]]:
    """Per parameter with more than one value in the bounds: (values some point has, values in the bounds)."""
    seen: dict[str, set[Any]] = {n: set() for n in (*SCALAR_PARAMS, *REQ_PARAMS, *WARM_PARAMS)}
    for p in points:
        for n in seen:
            v = getattr(p, n)
            seen[n].update(int(e) for e in v) if isinstance(v, tuple) else seen[n].add(int(v))
    out = {}
    for n, vals in seen.items():
        if (n in REQ_PARAMS or n in WARM_PARAMS) and not _arity(cfg, n):
            continue
        every = set(_values(cfg, n))
        if len(every) > 1:
            out[n] = (len(vals & every), len(every))
    return out


class ExplicitResult(Result):
    """A `Result` whose words say over how much of the bounds it holds (never `holds` for the whole
    config when the points searched are part of its bounds)."""

    def words(self) -> str:
        w = self.verdict.words(self.depth)
        n, m = self.meta.get("parameter_points"), self.meta.get("points_in_bounds")
        if self.verdict is not Verdict.VIOLATED and n is not None and m is not None and n < m:
            cov = self.meta.get("coverage") or {}
            part = ", ".join(f"{k} {a}/{b}" for k, (a, b) in cov.items() if a < b)
            grid = "" if self.meta.get("points_exact") else " grid"
            w += f" on {n} of {m} parameter points of the bounds{grid}" + (f" (values covered: {part})" if part else "")
        return w


# -- the search ----------------------------------------------------------------------------------------
@dataclass
class _Viol:
    depth: int
    key: tuple[Any, ...]  # (readable_key, point index, order in its level)
    point: int
    path: list[int]  # state indices from the root of its point


@dataclass
class ShardResult:
    """What one shard's search found (plain data: crosses a process boundary)."""

    violations: dict[str, tuple[int, tuple[Any, ...], int, list[tuple[dict[str, Any], int]]]]  # prop -> (depth, key, point, [(picks, index)])
    witness: dict[str, int | None]
    reached: int
    stopped: str
    exhausted_at: int | None
    distinct_states: int
    transitions: int
    skipped_calls: int = 0
    run_calls: int = 0
    levels: list[tuple[int, float]] = field(default_factory=list)  # (distinct states by the end of depth d, seconds)
    value_hits: int = 0


class FastExplorer:
    """The fast search over (parameter point, state); see the module docstring. `run` returns the
    graph engine's `Search`-shaped results (`results`) without a graph."""

    def __init__(self, system: System, props: list[str] | None = None, points: list[Params] | None = None,
                 max_states: int = DEFAULT_MAX_STATES, time_limit_s: float = 0.0, minimize: bool = True,
                 point_ids: list[int] | None = None) -> None:
        self.system = system
        self.props: list[Property] = [PROPERTIES[p] for p in for_config(system.cfg, props or None)]
        self.points = points if points is not None else param_points(system)
        self.point_ids = point_ids if point_ids is not None else list(range(len(self.points)))
        self.max_states = max_states
        self.time_limit_s = time_limit_s
        self.minimize = minimize

    def search(self, max_depth: int, keep_going: bool = True, progress: Any = None, t0: float | None = None) -> ShardResult:
        t0 = time.perf_counter() if t0 is None else t0
        runners = [PointRunner(self.system, p) for p in self.points]
        ids: list[dict[State, int]] = [{} for _ in self.points]
        states: list[list[State]] = [[] for _ in self.points]
        parent: list[list[int]] = [[] for _ in self.points]
        via: list[list[tuple[dict[str, Any], int]]] = [[] for _ in self.points]
        frontier: list[tuple[int, int]] = []
        for pi, run in enumerate(runners):
            s0 = run.init()
            ids[pi][s0] = 0
            states[pi].append(s0)
            parent[pi].append(-1)
            via[pi].append(({}, -1))
            frontier.append((pi, 0))
        count = len(frontier)
        open_props = list(self.props)
        witness: dict[str, int | None] = {p.name: None for p in self.props}
        found: dict[str, _Viol] = {}
        transitions = 0
        stopped = ""
        exhausted_at: int | None = None
        depth = reached = 0
        levels: list[tuple[int, float]] = []
        while True:
            bad: dict[str, list[tuple[Any, ...]]] = {}
            pending = [p for p in self.props if p in open_props or witness[p.name] is None]
            if pending:
                for pos, (pi, li) in enumerate(frontier):
                    run, s = runners[pi], states[pi][li]
                    for prop in pending:
                        if prop in open_props and not run.holds(prop.holds, s):
                            bad.setdefault(prop.name, []).append(
                                ((readable_key(self.points[pi]) if self.minimize else ()), self.point_ids[pi], pos, pi, li))
                        elif witness[prop.name] is None and run.holds(prop.witness, s):
                            witness[prop.name] = depth
            for prop in list(open_props):
                if prop.name in bad:
                    open_props.remove(prop)
                    key = min(bad[prop.name]) if self.minimize else bad[prop.name][0]
                    pi, li = key[3], key[4]
                    path = [li]
                    while parent[pi][path[-1]] >= 0:
                        path.append(parent[pi][path[-1]])
                    found[prop.name] = _Viol(depth, key[:3], pi, path[::-1])
            reached = depth
            levels.append((count, time.perf_counter() - t0))
            if progress:
                status = {p.name: (f"violated@{found[p.name].depth}" if p.name in found else "open") for p in self.props}
                progress(depth, time.perf_counter() - t0, status)
            if not frontier:
                exhausted_at = max(depth - 1, 0)
                reached = max(max_depth, reached)
                break
            if depth >= max_depth or not open_props:
                break
            if not keep_going and found:
                stopped = "first violation"
                break
            nxt: list[tuple[int, int]] = []
            for pi, li in frontier:
                run = runners[pi]
                s = states[pi][li]
                if not run.live(s):
                    continue
                seen, st, par, vi = ids[pi], states[pi], parent[pi], via[pi]
                for idx, (picks, s2) in enumerate(run.successors(s)):
                    transitions += 1
                    if s2 not in seen:
                        m = len(st)
                        seen[s2] = m
                        st.append(s2)
                        par.append(li)
                        vi.append((picks, idx))
                        nxt.append((pi, m))
                        count += 1
                if count > self.max_states:
                    stopped = f"state cap: more than {self.max_states} states by depth {depth + 1}"
                    break
                if self.time_limit_s and time.perf_counter() - t0 > self.time_limit_s:
                    stopped = f"time limit: {self.time_limit_s:.0f}s spent by depth {depth + 1}"
                    break
            if stopped:
                break
            frontier = nxt
            depth += 1
        viols = {name: (v.depth, v.key, self.point_ids[v.point], [via[v.point][i] for i in v.path[1:]])
                 for name, v in found.items()}
        return ShardResult(viols, witness, reached, stopped, exhausted_at, count, transitions,
                           sum(r.skipped for r in runners), sum(r.calls for r in runners), levels,
                           sum(r.value_hits for r in runners))

    def run(self, max_depth: int, keep_going: bool = True, progress: Any = None) -> "FastSearch":
        t0 = time.perf_counter()
        shard = self.search(max_depth, keep_going, progress, t0)
        return combine(self.system, self.props, self.points, [shard], max_depth, time.perf_counter() - t0)


@dataclass
class FastSearch:
    """The outcome of a fast search (the graph engine's `Search` without the graph)."""

    points: list[Params]
    results: dict[str, Result]
    depth_reached: int
    distinct_states: int
    transitions: int
    exhausted_at: int | None
    stopped: str = ""
    shards: list[ShardResult] = field(default_factory=list)


def _trace(system: System, params: Params, edges: list[tuple[dict[str, Any], int]], prop: str) -> Trace:
    # the same concrete re-run every engine's trace goes through (checker/traces/trace.py)
    states, picks = run_concrete(system, params, [("event_loop_iteration", pk) for pk, _ in edges])
    steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(len(edges))]
    tr = Trace(system.cfg, system.design, params, states[0], steps, prop, "explicit")
    tr.meta["successor_index"] = [i for _, i in edges]
    return tr


def combine(system: System, props: list[Property], points: list[Params], shards: list[ShardResult], max_depth: int,
            elapsed: float, points_in_bounds: int | None = None, points_exact: bool = True) -> FastSearch:
    """The results of one search over every shard's points (module docstring, "Shards")."""
    cfg = system.cfg
    stopped = next((s.stopped for s in shards if s.stopped and s.stopped != "first violation"), "") or \
        next((s.stopped for s in shards if s.stopped), "")
    incomplete = bool(stopped) and stopped != "first violation"
    reached = min(s.reached for s in shards) if shards else 0
    exhausted = all(s.exhausted_at is not None for s in shards)
    exhausted_at = max(s.exhausted_at or 0 for s in shards) if exhausted and shards else None
    states = sum(s.distinct_states for s in shards)
    transitions = sum(s.transitions for s in shards)
    cov = coverage(cfg, points)
    meta = dict(engine="explicit", distinct_states=states, transitions=transitions, parameter_points=len(points),
                points_in_bounds=points_in_bounds if points_in_bounds is not None else len(points), points_exact=points_exact,
                exhausted_at=exhausted_at, coverage=cov, shards=len(shards),
                states_per_s=round(states / elapsed, 1) if elapsed > 0 else None)
    results: dict[str, Result] = {}
    for prop in props:
        name = prop.name
        ws = [s.witness.get(name) for s in shards if s.witness.get(name) is not None]
        w = min(ws) if ws else None
        vs = [s.violations[name] for s in shards if name in s.violations]
        if vs:
            depth, _key, pid, edges = min(vs, key=lambda v: (v[0], v[1]))
            trace = _trace(system, points[pid], edges, name)
            r = ExplicitResult(name, Verdict.VIOLATED, depth, trace, w, seconds=elapsed)
        elif incomplete:
            r = ExplicitResult(name, Verdict.UNKNOWN, reached, None, w, reason=f"search stopped at depth {reached} ({stopped})")
        elif w is not None:
            r = ExplicitResult(name, Verdict.HOLDS_TO_DEPTH, reached, None, w)
        elif stopped == "first violation":
            r = ExplicitResult(name, Verdict.UNKNOWN, reached, None, None,
                               reason=f"not checked past depth {reached}: stopped at the first violation")
        else:
            r = ExplicitResult(name, Verdict.VACUOUS, reached, None, None)
        r.seconds = r.seconds or elapsed
        r.meta.update(meta)
        results[name] = r
    return FastSearch(points, results, reached, states, transitions, exhausted_at, stopped, shards)


# -- shards over processes ----------------------------------------------------------------------------
def _shard_job(design: Design, cfg: Config, props: list[str], points: list[Params], point_ids: list[int], depth: int,
               keep_going: bool, max_states: int, time_limit_s: float, minimize: bool) -> ShardResult:
    system = System(cfg, design)
    return FastExplorer(system, props, points, max_states, time_limit_s, minimize, point_ids).search(depth, keep_going)


def _run_shards(args: list[tuple[Any, ...]]) -> list[ShardResult]:
    from checker import executors

    ex = executors.ACTIVE
    if ex is not None and hasattr(ex, "map"):  # `--executor ray`: one task per shard
        return list(ex.map(_shard_job, args))
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(len(args)) as pool:
        return pool.starmap(_shard_job, args)


def search(design: Design, cfg: Config, props: list[str] | None, depth: int, points: list[Params] | None = None,
           jobs: int = 1, keep_going: bool = True, max_states: int = DEFAULT_MAX_STATES, time_limit_s: float = 0.0,
           minimize: bool = True, progress: Any = None, points_in_bounds: int | None = None,
           points_exact: bool = True) -> FastSearch:
    """The fast search of `cfg`'s `points` (default: the graph engine's) in `jobs` shards."""
    system = System(cfg, design)
    names = for_config(cfg, props or None)
    pts = points if points is not None else param_points(system)
    t0 = time.perf_counter()
    jobs = max(1, min(jobs, len(pts)))
    if jobs == 1:
        ex = FastExplorer(system, names, pts, max_states, time_limit_s, minimize)
        shards = [ex.search(depth, keep_going, progress, t0)]
    else:
        parts = [list(range(k, len(pts), jobs)) for k in range(jobs)]
        args = [(design, cfg, names, [pts[i] for i in ids], ids, depth, keep_going, max_states, time_limit_s, minimize)
                for ids in parts]
        shards = _run_shards(args)
    return combine(system, [PROPERTIES[n] for n in names], pts, shards, depth, time.perf_counter() - t0,
                   points_in_bounds, points_exact)


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True,
                 keep_going: bool = True, max_states: int = DEFAULT_MAX_STATES, jobs: int | None = None,
                 max_points: int = DEFAULT_MAX_POINTS) -> Any:
    """`checker/engines/run.py::check_config` for the explicit engine: the fast search over
    `bound_points` (up to `max_points` of the config's bounds) in `jobs` shards (default 1; `prove` has
    no effect: an explicit search is bounded; `timeout_ms` limits the whole search)."""
    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    system = System(cfg, design)
    bp = bound_points(system, max_points)
    res = search(design, cfg, props, depth, bp.points, jobs or 1, keep_going, max_states, timeout_ms / 1000.0, minimize,
                 (lambda t, el, st: progress(cfg.name, t, el, st)) if progress and (jobs or 1) == 1 else None,
                 points_in_bounds=bp.total, points_exact=bp.exact)
    # the search statistics are in every result's meta (distinct_states, transitions, coverage, ...); the
    # ConfigReport's `proof` stays empty: an explicit search proves nothing beyond its bound
    return ConfigReport(cfg.name, res.results, time.perf_counter() - t0, {})

