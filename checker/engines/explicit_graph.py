"""The graph explicit-state engine: breadth-first search over the concrete interpretation of the model,
the reachable graph kept as a `networkx.DiGraph` (`kvmc graph`, liveness's fair cycles, `kvmc mutate`'s
focused searches; checker/engines/explicit.py is the fast engine `--engine explicit` runs, and is checked
against this one: tests/engines/test_explicit_fast.py).

The bounded config's parameters are enumerated (`param_points`: the grid of `Config.explicit_bounds`,
`model.config.enumerate_params`, and the boundary points around it: a length around a page, the
window, the chunk; a pool around what the requests need; those failing `params_ok` are dropped;
a pinned instance, whose bounds are its explicit bounds, has only its grid), and from each point's initial
state the search expands, level by level, every successor of every state. A state's successors
are all the outcomes of the one action `event_loop_iteration` under every sequence of answers to
its named choices: `EnumeratingOracle` walks that choice tree depth-first (answer the forced
prefix, then the smallest value; after the run, advance the last choice point that has a larger
value left and re-run), so the successor order is deterministic and a trace can be replayed by
index. A run that hits `Infeasible` is a branch that does not exist.

Nodes of the `networkx.DiGraph` are integers; node attributes hold the parameter point index, the
state, its BFS depth. A node is the pair (parameter point, state): the same state under different
pool sizes is a different node. Since the search is breadth-first over all points at once, the
first level holding a violating state is the length of the shortest counterexample, the same
length BMC reports (bmc.py asks depth t only after every smaller depth was unsat). Among the
violating states of that level the one with the smallest pools, then lengths, then knobs is
reported (BMC's minimisation order), and its path is the graph's shortest path from its root.

Verdicts are BMC's: violated at depth d; holds to depth k when the property's reachability
witness was met; vacuous when it never was; unknown when the state cap or the time limit stopped
the search first. A search whose frontier empties before the requested depth has explored every
reachable state of the explicit bounds: the result says so in `meta["exhausted_at"]`, but the
verdict stays `holds to depth k` (the explicit bounds are narrower than the config's).

This engine models nothing itself; it drives model/system.py. SGLang commit: model/designs.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import networkx as nx

from model.config import PAGE_MULTIPLE, Config, Params, concrete_params, enumerate_params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import OOM_NONE, State
from model.system import System
from checker.engines.applies import for_config, nothing_applies
from specs.properties import PROPERTIES, Property

from checker.engines.results import ConfigReport, Result
from checker.traces.trace import Step, Trace, run_concrete
from checker.verdict import Verdict

DEFAULT_MAX_STATES = 400_000


class EnumeratingOracle:
    """Answers a concrete run's choices from a forced prefix, then with the smallest value, and
    records every choice point (value, largest value) so the caller can advance to the next run."""

    def __init__(self, prefix: list[Any], fixed: Callable[[str, Any], Any] | None = None) -> None:
        self.prefix = prefix
        self.trail: list[tuple[Any, Any]] = []  # (answer, hi); hi is True for a boolean choice
        # the answers decided outside the tree (`fixed(name, default)`, None: enumerate this choice)
        self.fixed = fixed

    def _answer(self, default: Any, hi: Any, name: str = "") -> Any:
        if self.fixed is not None:
            v = self.fixed(name, default)
            if v is not None:
                return v
        i = len(self.trail)
        v = self.prefix[i] if i < len(self.prefix) else default
        self.trail.append((v, hi))
        return v

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        return int(self._answer(lo, hi, name))

    def pick_bool(self, name: str) -> bool:
        return bool(self._answer(False, True, name))

    def next_prefix(self) -> list[Any] | None:
        """The forced prefix of the next run in depth-first order, or None when the tree is done."""
        trail = list(self.trail)
        while trail:
            v, hi = trail[-1]
            if hi is True:
                if not v:
                    trail[-1] = (True, hi)
                    return [a for a, _ in trail]
            elif v < hi:
                trail[-1] = (v + 1, hi)
                return [a for a, _ in trail]
            trail.pop()
        return None


def successors(system: System, params: Params, s: State, action: str = "event_loop_iteration",
               fixed: Callable[[str, Any], Any] | None = None) -> Iterator[tuple[dict[str, Any], State]]:
    """Every (choices, next state) of one action from `s`, in the deterministic depth-first order of
    the choice tree. Equal next states reached by different choices are all yielded. `fixed(name,
    default)` answers the choices it knows (e.g. the environment's events of an explored SGLang
    iteration) and returns None for those to enumerate."""
    prefix: list[Any] | None = []
    while prefix is not None:
        oracle = EnumeratingOracle(prefix, fixed)
        x = system.ctx(Concrete(oracle), params)
        try:
            nxt = system.step(x, s, action)
        except Infeasible:
            pass
        else:
            yield dict(x.ops.picks), nxt
        prefix = oracle.next_prefix()


def grid_points(system: System) -> list[Params]:
    """The parameter points of the config's explicit bounds that satisfy `params_ok`."""
    out = []
    for p in enumerate_params(system.cfg, explicit=True):
        if system.params_ok(system.ctx(Concrete(), p)):
            out.append(p)
    return out


def _around(v: int) -> set[int]:
    return {v - 1, v, v + 1}


def boundary_values(cfg: Config, base: Params) -> dict[str, set[int]]:
    """Per parameter, the values where the model's arithmetic changes its answer, as seen from
    `base`: a length around one, two and three pages, around the window and the chunk size, and
    the ends of its symbolic bounds; a pool around what one request and what every request of
    `base` needs (prompt + output, page-rounded, plus a page), where admission, eviction and
    retraction decide; the window and the chunk around a page and the prompts; the prefill
    budget around the prompts."""
    ps = cfg.page_size
    W = base.sliding_window_size if cfg.hybrid_swa else 0
    chunk = base.chunked_prefill_size if cfg.chunked_prefill else 0
    marks = {ps, 2 * ps, 3 * ps} | ({W} if W else set()) | ({chunk} if chunk else set())
    lengths: set[int] = set()
    for m in marks:
        lengths |= _around(m)
    one = [-(-(i + n) // ps) * ps + ps for i, n in zip(base.input_len, base.max_new_tokens)]
    pools = {max(one)} | {sum(one)} | ({sum(one) + sum(base.warm_len)} if base.warm_len else set())
    pool_vals = {v + d * ps for v in pools for d in (-1, 0, 1)}
    prompts = set(base.input_len)
    out = {
        "input_len": lengths | {1},
        "max_new_tokens": {1, 2, 3, ps + 1} | ({W, W + 1} if W else set()),
        "warm_len": {0, ps, 2 * ps},
        "full_tokens": pool_vals,
        "swa_tokens": {v for v in pool_vals} | ({W + ps, W + 2 * ps, 2 * (W + ps)} if W else set()),
        "sliding_window_size": {1, ps} | {i for p in prompts for i in _around(p)},
        "chunked_prefill_size": {ps, 2 * ps} | {i for p in prompts for i in _around(p)},
        "max_prefill_tokens": {i for p in prompts for i in _around(p)} | {sum(base.input_len)},
        "req_pool_size": {1, 2, 3},
    }
    for name, vals in out.items():  # the ends of the symbolic bounds, then only values inside them
        lo, hi = cfg.bound(name)
        step = ps if name in PAGE_MULTIPLE else 1
        vals |= {lo, hi}
        out[name] = {v for v in vals if lo <= v <= hi and (v - lo) % step == 0}
    return out


def boundary_points(system: System, grid: list[Params] | None = None) -> list[Params]:
    """Points off the grid at the boundaries (`boundary_values`): from the grid's middle point,
    one parameter at a time (a per-request parameter for request 0, and for every request at
    once), each kept when it satisfies `params_ok`."""
    cfg = system.cfg
    grid = grid if grid is not None else grid_points(system)
    base = grid[len(grid) // 2] if grid else concrete_params(cfg)
    seen = set(grid)
    out: list[Params] = []

    def add(p: Params) -> None:
        if p not in seen and system.params_ok(system.ctx(Concrete(), p)):
            seen.add(p)
            out.append(p)

    d = base.as_dict()
    for name, vals in boundary_values(cfg, base).items():
        cur = d[name]
        for v in sorted(vals):
            if isinstance(cur, tuple):
                if not cur:
                    continue
                add(Params(**{**d, name: (v,) + cur[1:]}))
                add(Params(**{**d, name: (v,) * len(cur)}))
            elif v != cur and cfg.bound(name)[0] != cfg.bound(name)[1]:
                add(Params(**{**d, name: v}))
    return out


def param_points(system: System, boundary: bool = True) -> list[Params]:
    """The points the explicit and random engines run: the grid of the config's explicit bounds,
    then (`boundary`) the boundary points around it (`boundary_points`), all satisfying `params_ok`.
    A pinned instance (bounds == explicit bounds) has no point off its grid."""
    grid = grid_points(system)
    return grid + boundary_points(system, grid) if boundary else grid


def readable_key(p: Params) -> tuple[int, int, int]:
    """BMC's minimisation order: pools, then lengths, then knobs (smaller reads better)."""
    pools = p.full_tokens + p.swa_tokens + sum(p.warm_len) + p.req_pool_size
    lengths = sum(p.input_len) + sum(p.max_new_tokens)
    knobs = p.sliding_window_size + p.chunked_prefill_size + p.max_prefill_tokens
    return pools, lengths, knobs


class StateCapExceeded(RuntimeError):
    """The reachable graph grew past the state cap."""


@dataclass
class Search:
    """The outcome of one breadth-first search."""

    graph: nx.DiGraph
    points: list[Params]
    results: dict[str, Result]
    depth_reached: int
    distinct_states: int
    transitions: int
    exhausted_at: int | None
    stopped: str = ""  # why the search stopped before the requested depth (cap, time), if it did
    violating: dict[str, list[int]] = field(default_factory=dict)  # property -> nodes violating it


class Explorer:
    """BFS over (parameter point, state) for one system; see the module docstring."""

    def __init__(self, system: System, props: list[str] | None = None, points: list[Params] | None = None,
                 max_states: int = DEFAULT_MAX_STATES, time_limit_s: float = 0.0, minimize: bool = True,
                 mark_all: bool = False) -> None:
        self.system = system
        self.props: list[Property] = [PROPERTIES[p] for p in for_config(system.cfg, props or None)]
        self.points = points if points is not None else param_points(system)
        self.max_states = max_states
        self.time_limit_s = time_limit_s
        self.minimize = minimize
        self.mark_all = mark_all  # keep expanding past violations and record every violating node (graph export)

    def _eval(self, fn: Any, p: Params, s: State) -> bool:
        return bool(fn(self.system.ctx(Concrete(), p), s))

    def run(self, max_depth: int, keep_going: bool = True, progress: Any = None) -> Search:
        t0 = time.perf_counter()
        g = nx.DiGraph()
        ids: dict[tuple[int, State], int] = {}
        roots: list[int] = []

        def node(pi: int, s: State, depth: int) -> tuple[int, bool]:
            key = (pi, s)
            n = ids.get(key)
            if n is not None:
                return n, False
            n = len(ids)
            ids[key] = n
            g.add_node(n, point=pi, state=s, depth=depth)
            return n, True

        open_props = list(self.props)
        results: dict[str, Result] = {}
        witness: dict[str, int | None] = {p.name: None for p in self.props}
        violating: dict[str, list[int]] = {p.name: [] for p in self.props}
        frontier: list[int] = []
        for pi, p in enumerate(self.points):
            s0 = self.system.init(self.system.ctx(Concrete(), p))
            n, _ = node(pi, s0, 0)
            roots.append(n)
            frontier.append(n)
        transitions = 0
        reached = 0
        stopped = ""
        exhausted_at: int | None = None
        depth = 0
        while True:
            # check the level
            for prop in list(self.props):
                bad: list[int] = []
                check = prop in open_props or self.mark_all
                if not check and witness[prop.name] is not None:
                    continue
                for n in frontier:
                    d = g.nodes[n]
                    p = self.points[d["point"]]
                    if check and not self._eval(prop.holds, p, d["state"]):
                        bad.append(n)
                    elif witness[prop.name] is None and self._eval(prop.witness, p, d["state"]):
                        witness[prop.name] = depth
                violating[prop.name].extend(bad)
                if bad and prop in open_props:
                    open_props.remove(prop)
                    target = min(bad, key=lambda n: (readable_key(self.points[g.nodes[n]["point"]]), n)) if self.minimize else bad[0]
                    trace = self._trace(g, roots, target, prop.name)
                    results[prop.name] = Result(prop.name, Verdict.VIOLATED, depth, trace, witness[prop.name],
                                                seconds=time.perf_counter() - t0)
            reached = depth
            status = {p.name: (f"violated@{results[p.name].depth}" if p.name in results else "open") for p in self.props}
            if progress:
                progress(depth, time.perf_counter() - t0, status)
            if not frontier:  # every reachable state was seen: deeper levels hold nothing new
                exhausted_at = max(depth - 1, 0)
                reached = max(max_depth, reached)
                break
            if depth >= max_depth or (not open_props and not self.mark_all):
                break
            if not keep_going and results:
                stopped = "first violation"
                break
            # expand the level
            nxt: list[int] = []
            for n in frontier:
                d = g.nodes[n]
                s, pi = d["state"], d["point"]
                x = self.system.ctx(Concrete(), self.points[pi])
                if self.system.enabled(x, s) is False or s.oom != OOM_NONE:
                    continue
                for idx, (picks, s2) in enumerate(successors(self.system, self.points[pi], s)):
                    transitions += 1
                    m, new = node(pi, s2, depth + 1)
                    if not g.has_edge(n, m):
                        g.add_edge(n, m, picks=picks, index=idx)
                    if new:
                        nxt.append(m)
                if len(ids) > self.max_states:
                    stopped = f"state cap: more than {self.max_states} states by depth {depth + 1}"
                    break
                if self.time_limit_s and time.perf_counter() - t0 > self.time_limit_s:
                    stopped = f"time limit: {self.time_limit_s:.0f}s spent by depth {depth + 1}"
                    break
            if stopped:
                break
            frontier = nxt
            depth += 1
        incomplete = stopped and stopped != "first violation"
        for prop in self.props:
            if prop.name in results:
                continue
            if incomplete:
                results[prop.name] = Result(prop.name, Verdict.UNKNOWN, reached, None, witness[prop.name],
                                            reason=f"search stopped at depth {reached} ({stopped})")
            elif witness[prop.name] is not None:
                results[prop.name] = Result(prop.name, Verdict.HOLDS_TO_DEPTH, reached, None, witness[prop.name])
            elif stopped == "first violation":
                results[prop.name] = Result(prop.name, Verdict.UNKNOWN, reached, None, None,
                                            reason=f"not checked past depth {reached}: stopped at the first violation")
            else:
                results[prop.name] = Result(prop.name, Verdict.VACUOUS, reached, None, None)
        elapsed = time.perf_counter() - t0
        for r in results.values():
            r.seconds = r.seconds or elapsed
            r.meta.update(engine="explicit", distinct_states=len(ids), transitions=transitions,
                          parameter_points=len(self.points), exhausted_at=exhausted_at)
            if r.witness_depth is None and r.verdict is not Verdict.VIOLATED:
                r.witness_depth = witness[r.property]
        ordered = {p.name: results[p.name] for p in self.props}
        return Search(g, self.points, ordered, reached, len(ids), transitions, exhausted_at, stopped,
                      {k: v for k, v in violating.items() if v})

    def _trace(self, g: nx.DiGraph, roots: list[int], target: int, prop: str) -> Trace:
        pi = g.nodes[target]["point"]
        path = nx.shortest_path(g, roots[pi], target)
        params = self.points[pi]
        edges = [g.edges[a, b] for a, b in zip(path, path[1:])]
        expected = [g.nodes[n]["state"] for n in path]
        # the same concrete re-run every engine's trace goes through (checker/traces/trace.py)
        states, picks = run_concrete(self.system, params, [("event_loop_iteration", e["picks"]) for e in edges],
                                     expected=expected)
        steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(len(edges))]
        tr = Trace(self.system.cfg, self.system.design, params, states[0], steps, prop, "explicit")
        tr.meta["successor_index"] = [e["index"] for e in edges]
        return tr


def fair_cycles(g: nx.DiGraph, keep_node: Callable[[int], bool], keep_edge: Callable[[int, int, dict[str, Any]], bool],
                fairness: Callable[[int, int, dict[str, Any]], list[tuple[bool, bool]]]) -> list[nx.DiGraph]:
    """The parts of the graph where an infinite fair run can stay (liveness, checker/engines/liveness.py):
    the strongly connected components of the subgraph of `keep_node` nodes and `keep_edge` edges
    that hold a cycle (two nodes or more, or a self-loop) and can meet every strong-fairness pair of
    `fairness(u, v, edge)` (one (enabled, taken) per instance, the same instances on every edge): a
    component where some edge enables an instance but none takes it loses its enabling edges and is
    split again (Emerson and Lei's algorithm for Streett conditions). On each component returned, a
    cycle through one taking edge of every instance any of its edges takes is fair."""
    sub = g.subgraph([n for n in g.nodes if keep_node(n)])
    work = [nx.DiGraph(((u, v, e) for u, v, e in sub.edges(data=True) if keep_edge(u, v, e)))]
    out: list[nx.DiGraph] = []
    while work:
        h = work.pop()
        for comp in nx.strongly_connected_components(h):
            c = h.subgraph(comp).copy()
            if len(comp) == 1 and not c.has_edge(next(iter(comp)), next(iter(comp))):
                continue  # one node without a self-loop: no cycle
            flags = {(u, v): fairness(u, v, e) for u, v, e in c.edges(data=True)}
            n_inst = max((len(f) for f in flags.values()), default=0)
            drop = set()
            for i in range(n_inst):
                if not any(f[i][1] for f in flags.values()):  # never taken here: its enabling edges must go
                    drop |= {uv for uv, f in flags.items() if f[i][0]}
            if not drop:
                out.append(c)
            else:
                c.remove_edges_from(drop)
                work.append(c)
    return out


def check_config_graph(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True,
                 keep_going: bool = True, max_states: int = DEFAULT_MAX_STATES) -> Any:
    """`checker/engines/run.py::check_config` for this graph engine (the fast one, checker/engines/explicit.py, is
    what `--engine explicit` runs) (`prove` has no effect: an explicit
    search is bounded; `timeout_ms` limits the whole search)."""

    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    system = System(cfg, design)
    ex = Explorer(system, props, max_states=max_states, time_limit_s=timeout_ms / 1000.0, minimize=minimize)
    search = ex.run(depth, keep_going=keep_going,
                    progress=(lambda t, el, st: progress(cfg.name, t, el, st)) if progress else None)
    # the search statistics are in every result's meta (distinct_states, transitions, ...); the
    # ConfigReport's `proof` stays empty: an explicit search proves nothing beyond its bound
    return ConfigReport(cfg.name, search.results, time.perf_counter() - t0, {})


# -- graphviz export ---------------------------------------------------------------------------
def _label(s: State, cfg: Config) -> str:
    R = cfg.num_reqs
    from model.state import STATUS_NAMES

    reqs = " ".join(f"r{r}:{STATUS_NAMES[s.status[r]][0]}{s.kv_committed_len[r]}/{s.kv_allocated_len[r]}" for r in range(R))
    pools = f"F{s.full_available}" + (f" S{s.swa_available}" if cfg.hybrid_swa else "")
    return f"{pools}\\n{reqs}"


def to_dot(search: Search, cfg: Config, design: Design) -> str:
    """The reachable graph in graphviz DOT: violating states filled red and labelled with the
    property, initial states as boxes, edges labelled with the successor index."""
    bad: dict[int, list[str]] = {}
    for prop, nodes in search.violating.items():
        for n in nodes:
            bad.setdefault(n, []).append(prop)
    lines = [f'digraph "kvmc {design.name} {cfg.name}" {{', "  node [fontsize=9, shape=ellipse];"]
    g = search.graph
    for n, d in g.nodes(data=True):
        attrs = [f'label="p{d["point"]} d{d["depth"]}\\n{_label(d["state"], cfg)}' +
                 (f'\\n{", ".join(bad[n])}' if n in bad else "") + '"']
        if d["depth"] == 0:
            attrs.append("shape=box")
        if n in bad:
            attrs.append('style=filled, fillcolor="#f4a6a6"')
        lines.append(f"  {n} [{', '.join(attrs)}];")
    for a, b, e in g.edges(data=True):
        lines.append(f'  {a} -> {b} [label="{e["index"]}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


DEFAULT_GRAPH_CAP = 2_000


def export_graph(design: Design, cfg: Config, props: list[str], depth: int, out: str, max_states: int = DEFAULT_GRAPH_CAP) -> Search:
    """Explore to `depth` and write the reachable graph as DOT to `out` (atomically). Raises
    `StateCapExceeded` (nothing written) when the graph has more than `max_states` states."""
    import os
    import tempfile
    from pathlib import Path

    system = System(cfg, design)
    search = Explorer(system, props, max_states=max_states, mark_all=True).run(depth, keep_going=True)
    if search.stopped:
        raise StateCapExceeded(
            f"the reachable graph of config {cfg.name!r} has more than max_states={max_states} states by depth "
            f"{search.depth_reached + 1} ({len(search.points)} parameter points); nothing written. Lower --depth "
            f"(the graph to depth {search.depth_reached} fits) or raise --max-states"
        )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(to_dot(search, cfg, design))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return search
