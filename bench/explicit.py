"""Explicit-state engine benchmark (not a test): the fast engine (checker/engines/explicit.py) against
the graph engine (checker/engines/explicit_graph.py, today's before issue 62), measured in one run.

1. States per second: both engines on `hybrid_swa_hicache`'s explicit points (the graph engine's
   `param_points`, `current`, every safety property that applies) to the same depth, and the fast
   engine in two shards (`jobs=2`, forked processes). Same states found (checked), so the ratio is
   the speed-up.
2. Depth fully explored within a time budget (every state up to that depth generated and every
   property checked on it) on `hybrid_swa` and `hybrid_swa_hicache`: the fast engine over the old
   points and over the whole-bounds point set (`bound_points`, `WHOLE_POINTS` points: the old ones,
   then boundary combinations, then the whole bounds), the graph engine over the old points.

`KVMC_BENCH_EXPLICIT_BUDGET` (seconds, default 40) sets part 2's budget per run; quick mode: depth
2 in part 1 and a 15 s budget. The machine is shared: the load average is recorded beside the rows.
"""

from __future__ import annotations

import os
import time
from typing import Any

from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS

from checker.engines.explicit import Explorer, FastExplorer, bound_points, param_points, search

WHOLE_POINTS = 2_500
RATE_CONFIG = "hybrid_swa_hicache"


def _load() -> str:
    try:
        return " ".join(f"{v:.1f}" for v in os.getloadavg())
    except OSError:
        return "?"


def _rate(quick: bool) -> list[dict[str, Any]]:
    depth = 2 if quick else 3
    system = System(CONFIGS[RATE_CONFIG], PRESETS["current"])
    pts = param_points(system)
    rows = []
    t = time.perf_counter()
    old = Explorer(system, None, pts).run(depth)
    t_old = time.perf_counter() - t
    t = time.perf_counter()
    new = FastExplorer(system, None, pts).run(depth)
    t_new = time.perf_counter() - t
    t = time.perf_counter()
    two = search(PRESETS["current"], CONFIGS[RATE_CONFIG], None, depth, pts, jobs=2)
    t_two = time.perf_counter() - t
    base = old.distinct_states / t_old
    for name, states, secs in (("graph (old)", old.distinct_states, t_old), ("fast", new.distinct_states, t_new),
                               ("fast, jobs=2", two.distinct_states, t_two)):
        rows.append({"benchmark": "states per second", "config": RATE_CONFIG, "engine": name, "depth": depth,
                     "points": len(pts), "states": states, "seconds": round(secs, 1),
                     "states/s": round(states / secs, 1), "vs old": round(states / secs / base, 2),
                     "same states": states == old.distinct_states, "load": _load()})
    return rows


def _depth_in(budget: float, runner: Any) -> tuple[Any, int, float, str]:
    """The depth fully explored (every state up to it generated and checked); a search whose frontier
    emptied explored every depth: `all (exhausted at d)`."""
    t = time.perf_counter()
    s = runner()
    depth = s.depth_reached if s.exhausted_at is None else f"all (exhausted at {s.exhausted_at})"
    return depth, s.distinct_states, time.perf_counter() - t, s.stopped


def _depths(quick: bool) -> list[dict[str, Any]]:
    budget = float(os.environ.get("KVMC_BENCH_EXPLICIT_BUDGET", "15" if quick else "40"))
    design = PRESETS["current"]
    rows = []
    for name in ("hybrid_swa", "hybrid_swa_hicache"):
        cfg = CONFIGS[name]
        system = System(cfg, design)
        old_pts = param_points(system)
        whole = bound_points(system, WHOLE_POINTS)
        runs = (
            ("graph (old)", "old points", old_pts, lambda p=old_pts: Explorer(system, None, p, time_limit_s=budget).run(30)),
            ("fast", "old points", old_pts, lambda p=old_pts: FastExplorer(system, None, p, time_limit_s=budget).run(30)),
            ("fast", "whole bounds", whole.points,
             lambda p=whole.points: FastExplorer(system, None, p, time_limit_s=budget).run(30)),
        )
        for engine, which, pts, fn in runs:
            depth, states, secs, stopped = _depth_in(budget, fn)
            rows.append({"benchmark": f"depth fully explored in {budget:.0f} s", "config": name, "engine": engine,
                         "points": f"{which}: {len(pts)}", "depth": depth, "states": states, "seconds": round(secs, 1),
                         "stopped": stopped or "-", "load": _load()})
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    quick = quick or os.environ.get("KVMC_BENCH_QUICK") == "1"
    return _rate(quick) + _depths(quick)


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    rate = {r["engine"]: r for r in rows if r.get("benchmark") == "states per second"}
    out = []
    if "fast" in rate:
        x = rate["fast"]["vs old"]
        x2 = rate.get("fast, jobs=2", {}).get("vs old")
        out.append(f"States per second on {RATE_CONFIG} (explicit points, depth {rate['fast']['depth']}): the fast engine "
                   f"{x}x the graph engine in one process" + (f", {x2}x in two shards" if x2 else "") +
                   f" (target 20x: {'met' if x >= 20 else 'not met'}); load average {rate['fast']['load']}.")
    deep = [r for r in rows if str(r.get("benchmark", "")).startswith("depth fully explored")]
    for r in deep:
        out.append(f"{r['config']}, {r['engine']}, {r['points']} points: depth {r['depth']} ({r['states']} states).")
    return " ".join(out)
