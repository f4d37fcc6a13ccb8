"""Swarm engine (`--engine swarm`, issue 62 item 5): many short randomized depth-first searches of
the concrete model, for configs whose state space exhaustive search cannot cover (SPIN's swarm
verification: Holzmann, Joshi, Groce, "Swarm Verification Techniques", IEEE TSE 2011).

Each run has its own seed, which picks

* a parameter point of the config's whole bounds (`explicit.bound_points`: the graph engine's points,
  then boundary combinations, then points drawn from the whole bounds; runs cycle over the first
  points before drawing, so a short swarm still meets the boundary points);
* the choice order: at every state the successors (every answer sequence to the step's named
  choices, `explicit.PointRunner.successors`: the one definition of each transition runs) are
  shuffled by the run's generator, so two runs of one point go down different branches first;
* nothing else: the search is a depth-first search to the requested depth, each state stored with the
  least depth it was reached at (a state met again at a smaller depth is searched again, so what a
  run explores below its depth bound is exactly what it reached), at most `states_per_run` states.

Every property is evaluated once on every state a run stores. The runs are dealt over `jobs` forked
processes (default: the cores), each with its share of the seeds.

Verdicts: a violation is `violated at depth d` with the usual trace (re-run concretely,
checker/traces/trace.py), minimised as the explicit engine's are: the breadth-first search of the
violating point gives the shortest counterexample there, then the numbers are shrunk with its schedule
kept (checker/engines/shrink.py, the BMC's concrete pre-pass), and the shortest at the shrunk point is
searched again. With no violation the verdict is `unknown`, worded `holds on N states sampled (M runs,
seeds a..b, depth d, P of Q parameter points); a sample proves nothing` (N: distinct (point, state)
pairs met): never `holds` and never proved.

This engine models nothing itself; it drives model/system.py. SGLang commit: model/designs.py.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from model.config import Config, Params
from model.designs import Design
from model.system import System
from checker.engines.applies import for_config, nothing_applies
from checker.engines.explicit import DEFAULT_MAX_POINTS, FastExplorer, PointRunner, bound_points, _trace
from checker.engines.results import ConfigReport, Result
from checker.verdict import Verdict
from specs.properties import PROPERTIES

DEFAULT_RUNS = 64
DEFAULT_STATES_PER_RUN = 2_000
MINIMIZE_STATES = 200_000  # the breadth-first re-search of a violating point stops here (the swarm's trace is kept)


class SwarmResult(Result):
    """A `Result` whose words, without a violation, say how much was sampled (never `holds`)."""

    def words(self) -> str:
        if self.verdict is Verdict.VIOLATED:
            return self.verdict.words(self.depth)
        m = self.meta
        return (f"holds on {m.get('states_sampled', 0)} states sampled ({m.get('runs', 0)} runs, seeds "
                f"{m.get('seeds', '?')}, depth {self.depth}, {m.get('points_sampled', 0)} of "
                f"{m.get('points_in_bounds', '?')} parameter points); a sample proves nothing")


@dataclass
class SwarmShard:
    """One process's runs (plain data: crosses a process boundary)."""

    violations: dict[str, tuple[int, int, list[dict[str, Any]]]] = field(default_factory=dict)  # prop -> (depth, point, picks)
    witness: dict[str, int | None] = field(default_factory=dict)
    sampled: set[tuple[int, int]] = field(default_factory=set)  # (point, hash of state)
    points: set[int] = field(default_factory=set)
    runs: int = 0
    transitions: int = 0
    stopped: str = ""


def point_of_run(seed: int, n_points: int) -> int:
    """The parameter point run `seed` searches: the first points in turn, then drawn."""
    return seed if seed < n_points and seed < 16 else random.Random(seed * 7919 + 1).randrange(n_points)


def one_run(system: System, props: list[str], point: Params, pi: int, seed: int, depth: int, states_per_run: int,
            shard: SwarmShard, runners: dict[int, PointRunner]) -> None:
    """One randomized depth-first search (module docstring), its findings added to `shard`."""
    rng = random.Random(seed)
    run = runners.get(pi)
    if run is None:
        run = runners[pi] = PointRunner(system, point)
    prs = [PROPERTIES[p] for p in props]
    s0 = run.init()
    best: dict[Any, int] = {}

    def visit(s: Any, d: int, path: list[dict[str, Any]]) -> bool:
        """Check `s` (first visit); True when every property is already violated."""
        shard.sampled.add((pi, hash(s)))
        for prop in prs:
            name = prop.name
            old = shard.violations.get(name)
            if (old is None or d < old[0]) and not run.holds(prop.holds, s):
                shard.violations[name] = (d, pi, list(path))
            if shard.witness.get(name) is None and run.holds(prop.witness, s):
                shard.witness[name] = d
        return False

    best[s0] = 0
    visit(s0, 0, [])
    stack: list[tuple[Any, int, list[dict[str, Any]]]] = [(s0, 0, [])]
    while stack:
        s, d, path = stack.pop()
        if d >= depth or not run.live(s) or best.get(s, d) < d:
            continue
        succ = run.successors(s)
        shard.transitions += len(succ)
        rng.shuffle(succ)
        for picks, s2 in reversed(succ):  # pushed in reverse: popped in the shuffled order
            b = best.get(s2)
            if b is not None and b <= d + 1:
                continue
            if b is None:
                if len(best) >= states_per_run:
                    continue
                best[s2] = d + 1
                visit(s2, d + 1, path + [picks])
            else:
                best[s2] = d + 1
            stack.append((s2, d + 1, path + [picks]))


def _shard(design: Design, cfg: Config, props: list[str], points: list[Params], seeds: list[int], depth: int,
           states_per_run: int, deadline: float, keep_going: bool) -> SwarmShard:
    system = System(cfg, design)
    shard = SwarmShard(witness={p: None for p in props})
    runners: dict[int, PointRunner] = {}
    for seed in seeds:
        if deadline and time.time() > deadline:
            shard.stopped = "time limit"
            break
        pi = point_of_run(seed, len(points))
        if len(runners) > 8:  # a runner's memo is per point: keep a few
            runners.clear()
        one_run(system, props, points[pi], pi, seed, depth, states_per_run, shard, runners)
        shard.runs += 1
        shard.points.add(pi)
        if not keep_going and shard.violations:
            shard.stopped = "first violation"
            break
    return shard


def _minimized(system: System, prop: str, point: Params, picks: list[dict[str, Any]], minimize: bool) -> tuple[Params, list[tuple[dict[str, Any], int]]]:
    """The shortest counterexample at the point (breadth-first), its numbers shrunk, the shortest again."""
    edges = [(p, -1) for p in picks]
    if not minimize:
        return point, edges
    from checker.engines.shrink import shrink

    def shortest(p: Params, bound: int) -> list[tuple[dict[str, Any], int]] | None:
        sh = FastExplorer(system, [prop], [p], max_states=MINIMIZE_STATES).search(bound, keep_going=False)
        v = sh.violations.get(prop)
        return v[3] if v is not None else None

    edges = shortest(point, len(picks)) or edges
    try:
        small = shrink(system, point, [pk for pk, _ in edges], prop)
    except Exception:  # noqa: BLE001 - shrinking is an improvement only; the unshrunk trace stands
        small = point
    if small != point:
        again = shortest(small, len(edges))
        if again is not None:
            return small, again
    return point, edges


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True, keep_going: bool = True,
                 runs: int = DEFAULT_RUNS, seed: int = 0, jobs: int | None = None,
                 states_per_run: int = DEFAULT_STATES_PER_RUN, max_points: int = DEFAULT_MAX_POINTS,
                 examples: int | None = None) -> Any:
    """`checker/engines/run.py::check_config` for the swarm engine: `runs` (or `examples`) randomized
    depth-first searches of at most `depth` steps and `states_per_run` states, seeds `seed`..`seed +
    runs - 1`, over `jobs` processes (default: the cores; `prove` has no effect; `timeout_ms` limits
    the whole swarm)."""
    t0 = time.perf_counter()
    props = for_config(cfg, props)
    if not props:
        return nothing_applies(cfg)
    runs = examples or runs
    system = System(cfg, design)
    bp = bound_points(system, max_points)
    points = bp.points
    seeds = list(range(seed, seed + runs))
    jobs = max(1, min(jobs or os.cpu_count() or 1, runs))
    deadline = time.time() + timeout_ms / 1000.0 if timeout_ms else 0.0
    args = [(design, cfg, props, points, seeds[k::jobs], depth, states_per_run, deadline, keep_going) for k in range(jobs)]
    if jobs == 1:
        shards = [_shard(*args[0])]
    else:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(jobs) as pool:
            shards = pool.starmap(_shard, args)
    sampled: set[tuple[int, int]] = set().union(*(s.sampled for s in shards))
    pts: set[int] = set().union(*(s.points for s in shards))
    n_runs = sum(s.runs for s in shards)
    meta = dict(engine="swarm", states_sampled=len(sampled), runs=n_runs, seeds=f"{seed}..{seed + runs - 1}",
                points_sampled=len(pts), points_in_bounds=bp.total, transitions=sum(s.transitions for s in shards),
                states_per_run=states_per_run)
    results: dict[str, Result] = {}
    elapsed = time.perf_counter() - t0
    for name in props:
        ws = [s.witness.get(name) for s in shards if s.witness.get(name) is not None]
        w = min(ws) if ws else None
        vs = [s.violations[name] for s in shards if name in s.violations]
        if vs:
            d, pi, picks = min(vs, key=lambda v: (v[0], v[1]))
            params, edges = _minimized(system, name, points[pi], picks, minimize)
            tr = _trace(system, params, edges, name)
            tr.engine = "swarm"
            r = SwarmResult(name, Verdict.VIOLATED, tr.depth, tr, w, seconds=elapsed)
        else:
            stop = next((s.stopped for s in shards if s.stopped), "")
            why = f"; stopped early ({stop})" if stop else ""
            r = SwarmResult(name, Verdict.UNKNOWN, depth, None, w, seconds=elapsed,
                            reason=f"randomized depth-first runs, {meta['transitions']} transitions{why}")
        r.meta.update(meta)
        results[name] = r
    if progress:
        progress(cfg.name, depth, time.perf_counter() - t0,
                 {n: (f"violated@{r.depth}" if r.verdict is Verdict.VIOLATED else "no failure") for n, r in results.items()})
    return ConfigReport(cfg.name, results, time.perf_counter() - t0, {})
