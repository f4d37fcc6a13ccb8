"""Explicit-state engine benchmark (not a test): the fast engine (checker/engines/explicit.py) against
the graph engine (checker/engines/explicit_graph.py, today's before issue 62), measured in one run.

1. States per second: both engines on `hybrid_swa_hicache`'s explicit points (the graph engine's
   `param_points`, `current`, every safety property that applies) to the same depth, and the fast
   engine in two shards (`jobs=2`, forked processes). Same states found (checked), so the ratio is
   the speed-up.
2. Depth fully explored within a time budget (every state up to that depth generated and every
   property checked on it) on `hybrid_swa`, `hybrid_swa_hicache` and `hybrid_swa_page16`: the fast engine over the old
   points and over the whole-bounds point set (`bound_points`, `WHOLE_POINTS` points: the old ones,
   then boundary combinations, then the whole bounds), the graph engine over the old points.

3. Acceptance 2 of issue 62: `kvmc check --engine explicit --config hybrid_swa_hicache --depth 8`'s
   search (`explicit.check_config`, the default `bound_points`) under a 300 s limit
   (`KVMC_BENCH_EXPLICIT_ACCEPT_S`): the depth it completes, its states and its coverage words.
4. The deep planted bug (tests/engines/test_deep_planted.py: `free_swa_keeps_index_mapping` needing
   depth 6): seconds to find it for the explicit search, the swarm (checker/engines/swarm.py) and BMC
   (to depth 6), and BMC's seconds to show depth 5 safe.

`KVMC_BENCH_EXPLICIT_BUDGET` (seconds, default 300: the issue's "in 5 minutes") sets part 2's budget
per fast-engine run, `KVMC_BENCH_EXPLICIT_GRAPH_BUDGET` (default 40) the graph engine's (the
reference); part 2 runs `hybrid_swa`, `hybrid_swa_hicache` and `hybrid_swa_page16`. Quick mode:
depth 2 in part 1, a 15 s budget, a 30 s limit in part 3 and no BMC in part 4. The machine is shared: the load average is recorded beside the rows.
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


DEPTH_CONFIGS = ("hybrid_swa", "hybrid_swa_hicache", "hybrid_swa_page16")


def _depths(quick: bool) -> list[dict[str, Any]]:
    budget = float(os.environ.get("KVMC_BENCH_EXPLICIT_BUDGET", "15" if quick else "300"))
    # the graph engine is the reference only: its row gets a shorter budget (the whole bench stays under an hour)
    graph_budget = min(budget, float(os.environ.get("KVMC_BENCH_EXPLICIT_GRAPH_BUDGET", "40")))
    design = PRESETS["current"]
    rows = []
    for name in DEPTH_CONFIGS:
        cfg = CONFIGS[name]
        system = System(cfg, design)
        old_pts = param_points(system)
        whole = bound_points(system, WHOLE_POINTS)
        runs = (
            ("graph (old)", "old points", old_pts, graph_budget,
             lambda p=old_pts: Explorer(system, None, p, time_limit_s=graph_budget).run(30)),
            ("fast", "old points", old_pts, budget,
             lambda p=old_pts: FastExplorer(system, None, p, time_limit_s=budget).run(30)),
            ("fast", "whole bounds", whole.points, budget,
             lambda p=whole.points: FastExplorer(system, None, p, time_limit_s=budget).run(30)),
        )
        for engine, which, pts, b, fn in runs:
            depth, states, secs, stopped = _depth_in(b, fn)
            rows.append({"benchmark": "depth fully explored in a budget", "config": name, "engine": engine,
                         "points": f"{which}: {len(pts)}", "budget s": b, "depth": depth, "states": states,
                         "seconds": round(secs, 1), "stopped": stopped or "-", "load": _load()})
    return rows


def _acceptance(quick: bool) -> list[dict[str, Any]]:
    from checker.engines.explicit import check_config

    limit = float(os.environ.get("KVMC_BENCH_EXPLICIT_ACCEPT_S", "30" if quick else "300"))
    cfg = CONFIGS[RATE_CONFIG]
    t = time.perf_counter()
    rep = check_config(PRESETS["current"], cfg, None, 8, timeout_ms=int(limit * 1000))
    secs = time.perf_counter() - t
    r = next(iter(rep.results.values()))
    return [{"benchmark": "acceptance 2", "config": RATE_CONFIG, "depth asked": 8, "limit s": limit,
             "seconds": round(secs, 1), "depth": r.depth, "states": r.meta.get("distinct_states"),
             "points": f"{r.meta.get('parameter_points')} of {r.meta.get('points_in_bounds')}",
             "words": r.words() if r.verdict.value != "unknown" else f"unknown: {r.reason}", "load": _load()}] + _swarm(quick)


def _swarm(quick: bool) -> list[dict[str, Any]]:
    """The swarm where exhaustive search stops: hybrid_swa_hicache to depth 8, two processes."""
    from checker.engines.swarm import check_config

    runs = 8 if quick else 64
    t = time.perf_counter()
    rep = check_config(PRESETS["current"], CONFIGS[RATE_CONFIG], None, 8, runs=runs, jobs=2)
    r = next(iter(rep.results.values()))
    return [{"benchmark": "swarm", "config": RATE_CONFIG, "depth asked": 8, "seconds": round(time.perf_counter() - t, 1),
             "states": r.meta.get("states_sampled"), "words": r.words(), "load": _load()}]


def _deep_bug(quick: bool) -> list[dict[str, Any]]:
    from checker.engines import explicit
    from checker.engines.bmc import BMC
    from checker.engines.swarm import check_config as swarm
    from model.config import pinned

    design = PRESETS["current"].with_mutants(frozenset({"free_swa_keeps_index_mapping"}))
    cfg = pinned(CONFIGS["hybrid_swa"], full_tokens=(12, 12), swa_tokens=(12, 12), sliding_window_size=(3, 3),
                 chunked_prefill_size=(4, 4), input_len=(2, 2), max_new_tokens=(8, 8), req_pool_size=(1, 1))
    runs: list[tuple[str, int, Any]] = [
        ("explicit", 8, lambda: explicit.search(design, cfg, ["conservation"], 8, keep_going=False).results["conservation"]),
        ("swarm (8 runs)", 8, lambda: swarm(design, cfg, ["conservation"], 8, runs=8, jobs=1).results["conservation"]),
    ]
    if not quick:
        for d in (5, 6):
            runs.append(("bmc", d, lambda d=d: BMC(System(cfg, design), ["conservation"], minimize=False).run(d)["conservation"]))
    rows = []
    for engine, bound, fn in runs:
        t = time.perf_counter()
        r = fn()
        rows.append({"benchmark": "deep planted bug", "bug": "free_swa_keeps_index_mapping (window 3)", "engine": engine,
                     "bound": bound, "outcome": r.words(), "seconds": round(time.perf_counter() - t, 2), "load": _load()})
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    quick = quick or os.environ.get("KVMC_BENCH_QUICK") == "1"
    return _rate(quick) + _depths(quick) + _acceptance(quick) + _deep_bug(quick)


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
        out.append(f"{r['config']}, {r['engine']}, {r['points']} points, {r['budget s']:.0f} s: depth {r['depth']} "
                   f"({r['states']} states).")
    for r in rows:
        if r.get("benchmark") == "acceptance 2":
            out.append(f"`kvmc check --engine explicit --config {r['config']} --depth 8` under a {r['limit s']:.0f} s limit: "
                       f"depth {r['depth']} in {r['seconds']} s over {r['points']} points ({r['states']} states): "
                       f"{r['words']} (acceptance 2: {'met' if r['depth'] >= 8 and r['seconds'] < 300 else 'not met'}).")
        if r.get("benchmark") == "swarm":
            out.append(f"Swarm on {r['config']} to depth 8: {r['words']} in {r['seconds']} s.")
        if r.get("benchmark") == "deep planted bug":
            out.append(f"Depth-6 planted bug, {r['engine']} to {r['bound']}: {r['outcome']} in {r['seconds']} s.")
    return " ".join(out)
