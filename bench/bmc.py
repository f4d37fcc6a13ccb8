"""BMC benchmarks (issue 6): depth scaling of `current` on hybrid_swa, incremental solver vs a fresh
solver per depth; BMC time as the pool grows from 10^2 to 10^7 token slots. (The time to each known
bug's first counterexample is bench/bugs.py.)

Every heavy run is a child process with a wall-clock budget, so a case that does not finish in time
is reported as such (with the depths it did reach), never as a number it did not measure.
Targets (issue 6, 2-core machine): `current` holds to depth 20 on hybrid_swa in <= 60 s, incremental >= 3x faster than fresh at depth
20; BMC time grows <= 2x from 10^3 to 10^7 tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

def quick_mode(quick: bool | None) -> bool:
    return bool(quick) if quick is not None else os.environ.get("KVMC_BENCH_QUICK") == "1"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _child_cpu() -> float:
    """User + system CPU seconds of finished child processes (steadier than wall clock when the
    machine is shared)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# -- depth scaling / pool scaling (child processes with a budget) ----------------------------------
def bmc_worker(spec: dict[str, Any], budget_s: float) -> dict[str, Any]:
    """Run bench/_bmc_worker.py; keep every depth it reports before the budget runs out."""
    cmd = [sys.executable, "-m", "bench._bmc_worker", json.dumps(spec)]
    depths: dict[int, float] = {}
    cpu: dict[int, float] = {}
    solver: dict[int, float] = {}
    status: dict[str, Any] = {}
    end: dict[str, Any] | None = None
    t0 = time.perf_counter()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env()) as p:
        import selectors

        sel = selectors.DefaultSelector()
        assert p.stdout is not None
        sel.register(p.stdout, selectors.EVENT_READ)
        timed_out = False
        while True:
            left = budget_s - (time.perf_counter() - t0)
            if left <= 0:
                timed_out = True
                break
            if not sel.select(timeout=min(left, 1.0)):
                if p.poll() is not None:
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            if ev.get("event") == "depth":
                depths[ev["depth"]] = ev["elapsed"]
                cpu[ev["depth"]] = ev.get("cpu")
                solver[ev["depth"]] = ev["solver_s"]
                status = ev["status"]
            elif ev.get("event") == "end":
                end = ev
        if timed_out:
            p.kill()
        p.wait()
        err = p.stderr.read() if p.stderr else ""
    out = {"depths": depths, "cpu": cpu, "solver": solver, "status": status, "end": end, "timed_out": timed_out}
    if p.returncode not in (0, -9) and not end:
        out["error"] = (err.strip().splitlines() or ["?"])[-1][:200]
    return out


DEPTHS = (1, 2, 3, 5, 10, 15, 20, 30)


def run_depth(quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    max_depth = 10 if quick else 30
    budget = 40.0 if quick else 120.0
    inc = bmc_worker({"config": "hybrid_swa", "design": "current", "depth": max_depth, "fresh": False}, budget)
    fresh = bmc_worker({"config": "hybrid_swa", "design": "current", "depth": max_depth, "fresh": True}, budget)
    rows = []
    for k in DEPTHS:
        if k > max_depth:
            break
        a, b = inc["depths"].get(k), fresh["depths"].get(k)
        ac, bc = inc["cpu"].get(k), fresh["cpu"].get(k)
        rows.append({"case": f"current hybrid_swa holds to depth {k}", "incremental_s": a, "fresh_per_depth_s": b,
                     "fresh/incremental": (b / a) if a and b else None, "incremental_cpu_s": ac,
                     "fresh_cpu_s": bc, "fresh/incremental (cpu)": (bc / ac) if ac and bc else None,
                     "note": "" if a is not None else f"not reached in {budget:.0f} s"})
    common = [k for k in inc["depths"] if k in fresh["depths"] and k > 0]
    info: dict[str, Any] = {"budget_s": budget, "max_inc": max(inc["depths"], default=None),
                            "max_fresh": max(fresh["depths"], default=None), "inc_errors": inc.get("error"),
                            "fresh_errors": fresh.get("error"), "violations": inc["status"]}
    if common:
        k = max(common)
        info["ratio_at"] = k
        info["ratio"] = fresh["depths"][k] / inc["depths"][k] if inc["depths"][k] else None
        ic, fc = inc["cpu"].get(k), fresh["cpu"].get(k)
        info["ratio_cpu"] = fc / ic if ic and fc else None
    plots = []
    for series, res in (("incremental", inc), ("fresh solver per depth", fresh)):
        for k, s in sorted(res["depths"].items()):
            if k > 0:
                plots.append({"chart": "current on hybrid_swa: time to 'holds to depth k'", "series": series, "x": k,
                              "y": s, "xlabel": "depth k", "ylabel": "seconds (cumulative)"})
    rows[0]["_plot"] = plots if rows else []
    return rows, info


POOLS = (10**2, 10**3, 10**4, 10**5, 10**6, 10**7)


def run_pools(quick: bool) -> list[dict[str, Any]]:
    depth = 2 if quick else 3
    budget = 40.0 if quick else 90.0
    rows = []
    for case, spec in (
        ("current holds", {"config": "hybrid_swa", "design": "current", "depth": depth}),
        ("bug #27391 found", {"config": "hybrid_swa_hicache", "design": "current", "without": ["swa_hostload_budget"],
                              "props": ["no_prefill_oom"], "depth": 4}),
    ):
        for n in POOLS:
            if quick and n not in (10**3, 10**7):
                continue
            runs = [bmc_worker({**spec, "scale": n}, budget) for _ in range(1 if quick else 2)]
            done = [r for r in runs if r["end"]]
            res = min(done, key=lambda r: r["end"]["elapsed"]) if done else runs[0]  # best of the repeats: less noise
            reached = max(res["depths"], default=None)
            secs = res["end"]["elapsed"] if res["end"] else None
            cpu = res["end"].get("cpu") if res["end"] else None
            found = {k: v for k, v in (res["end"] or {}).get("results", {}).items() if v[0] == "violated"}
            rows.append({"case": case + (f" to depth {depth}" if "holds" in case else ""), "pool_tokens": n,
                         "bmc_s": secs, "bmc_cpu_s": cpu, "depth_reached": reached,
                         "result": ", ".join(f"{k} violated at {v[1]}" for k, v in found.items()) or
                                   ("holds" if res["end"] else f"not finished in {budget:.0f} s"),
                         "_plot": [{"chart": "BMC time vs pool size", "series": case, "x": n, "y": secs,
                                    "xlabel": "pool tokens (upper bound)", "ylabel": "seconds (log)", "logx": True,
                                    "logy": True}]
                         if secs is not None else []})
    return rows


# -- entry point -------------------------------------------------------------------------------------
_INFO: dict[str, Any] = {}


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    rows: list[dict[str, Any]] = []
    drows, info = run_depth(quick)
    _INFO["depth"] = info
    rows += [{"benchmark": "depth scaling", **r} for r in drows]
    prow = run_pools(quick)
    rows += [{"benchmark": "pool scaling", **r} for r in prow]
    return flatten_plots(rows)


def flatten_plots(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plot points ride along as extra rows (chart/series/x/y only: not shown in the table)."""
    out, pts = [], []
    for r in rows:
        pts += r.pop("_plot", [])
        out.append(r)
    return out + pts


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    lines = []
    d = _INFO.get("depth")
    if d:
        lines.append(f"- Depth scaling (`current`, hybrid_swa, budget {d['budget_s']:.0f} s per mode): incremental reached "
                     f"depth {d['max_inc']}, fresh-per-depth reached {d['max_fresh']}"
                     + (f"; at depth {d['ratio_at']} fresh/incremental = {d['ratio']:.2f}x wall" if d.get("ratio") else "")
                     + (f", {d['ratio_cpu']:.2f}x CPU" if d.get("ratio_cpu") else "")
                     + (f"; violations: {d['violations']}" if d.get("violations") else "") + ".")
    pools = [r for r in rows if r.get("benchmark") == "pool scaling" and r.get("bmc_s") is not None]
    for case in sorted({r["case"] for r in pools}):
        by = {r["pool_tokens"]: r["bmc_s"] for r in pools if r["case"] == case}
        byc = {r["pool_tokens"]: r.get("bmc_cpu_s") for r in pools if r["case"] == case}
        if 10**3 in by and 10**7 in by:
            cpu = (f", {byc[10**7] / byc[10**3]:.2f}x CPU" if byc.get(10**3) and byc.get(10**7) else "")
            lines.append(f"- Pool scaling ({case}): 10^7 / 10^3 time = {by[10**7] / by[10**3]:.2f}x wall{cpu} (target <= 2x).")
    return "\n".join(lines)
