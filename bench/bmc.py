"""BMC benchmarks (issue 6): time to the first counterexample of each known bug (cold CLI process and
warm in-process) with its length; depth scaling of `current` on hybrid_swa, incremental solver vs a
fresh solver per depth; BMC time as the pool grows from 10^2 to 10^7 token slots.

Every heavy run is a child process with a wall-clock budget, so a case that does not finish in time
is reported as such (with the depths it did reach), never as a number it did not measure.
Targets (issue 6, 2-core machine): each bug found in <= 2 s from the CLI, at the shortest length;
`current` holds to depth 20 on hybrid_swa in <= 60 s, incremental >= 3x faster than fresh at depth
20; BMC time grows <= 2x from 10^3 to 10^7 tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# fix turned off, the SGLang PR, planted mutants, the properties the bug must violate (issue 2)
BUGS: list[tuple[str, str, list[str], set[str]]] = [
    ("swa_busy_check", "#21499", [], {"busy_check_sound", "busy_check_complete"}),
    ("chunked_swa_page_reserve", "#23174", [], {"no_prefill_oom"}),
    ("swa_hostload_budget", "#27391", [], {"no_prefill_oom"}),
    ("session_active", "#22213", [], {"busy_check_sound"}),
    ("retract_tail_free", "#22862", [], {"conservation"}),
    ("spec_topk_busy_check", "#27228", ["verify_keeps_rejected_page"], {"busy_check_complete"}),
]


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


# -- known bugs ------------------------------------------------------------------------------------
def _cli_args(fix: str, mutants: list[str]) -> list[str]:
    return ["check", "--without", fix, *[a for m in mutants for a in ("--mutant", m)]]


def cli_json(args: list[str], budget_s: float) -> tuple[Any, float, float]:
    """`kvmc ARGS --json` in a fresh process (interpreter start, imports, z3, the check): (the
    completed process, or None when it ran past `budget_s`; wall s; CPU s of the child)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "checker.cli", *args, "--json", "--no-progress", "--out", out]
        t0, c0 = time.perf_counter(), _child_cpu()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s, cwd=ROOT, env=_env())
        except subprocess.TimeoutExpired:
            r = None
        return r, time.perf_counter() - t0, _child_cpu() - c0


def bug_cold(fix: str, mutants: list[str], budget_s: float) -> dict[str, Any]:
    """`kvmc check --without FIX` in a fresh process."""
    r, wall, cpu = cli_json(_cli_args(fix, mutants), budget_s)
    if r is None:
        return {"cold_s": None, "note": f"no answer within {budget_s:.0f} s"}
    if r.returncode != 1:
        return {"cold_s": wall, "note": f"exit {r.returncode}, expected 1: {r.stderr.strip()[-200:]}"}
    rep = json.loads(r.stdout)
    found = [(c["config"], res["property"], res["depth"]) for c in rep["configs"] for res in c["results"]
             if res["verdict"] == "violated"]
    if not found:
        return {"cold_s": wall, "note": "no violation in the JSON report"}
    # the check stops at the first depth with a violation; every property failing there is listed
    return {"cold_s": wall, "cold_cpu_s": cpu, "property": ", ".join(p for _, p, _ in found), "config": found[0][0],
            "length": found[0][2], "check_s": rep["seconds"], "_props": [p for _, p, _ in found]}


WARM_SNIPPET = r"""
import json, sys, time
from checker.cli import build_design
from checker.run import run_check
from model.designs import PRESETS
from specs.configs import CONFIGS
from specs.properties import PROPERTIES
fix, mutants = sys.argv[1], json.loads(sys.argv[2])
design = build_design("current", [fix], [], mutants)
def once():
    t0 = time.perf_counter()
    rep = run_check(design, list(CONFIGS), list(PROPERTIES), 10, baseline=PRESETS["current"])
    return time.perf_counter() - t0, [(c.config, r.property, r.depth) for c in rep.configs for r in c.results.values()
                                      if r.verdict.value == "violated"]
first, v1 = once()     # imports and z3 are loaded; caches (if any) filled
second, v2 = once()    # warm: the same check again in the same process
print(json.dumps({"first_s": first, "warm_s": second, "violations": v2}))
"""


def bug_warm(fix: str, mutants: list[str], budget_s: float) -> dict[str, Any]:
    """The same check twice in one process; the second is the warm time (an editor / CI daemon)."""
    cmd = [sys.executable, "-c", WARM_SNIPPET, fix, json.dumps(mutants)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s, cwd=ROOT, env=_env())
    except subprocess.TimeoutExpired:
        return {"warm_s": None}
    if r.returncode != 0:
        return {"warm_s": None, "note": r.stderr.strip().splitlines()[-1][:200] if r.stderr.strip() else f"exit {r.returncode}"}
    d = json.loads(r.stdout.strip().splitlines()[-1])
    return {"warm_s": d["warm_s"], "in_process_first_s": d["first_s"]}


def shortest_bfs(fix: str, mutants: list[str], config: str, prop: str, max_depth: int, budget_s: float) -> dict[str, Any]:
    """Breadth-first search (checker/explicit.py) for the same property on the same config: the
    shortest counterexample over the config's explicit parameter points. None if that engine is
    absent or finds nothing within the bound and budget."""
    snippet = r"""
import json, sys
from checker.cli import build_design
from specs.configs import CONFIGS
try:
    from checker.explicit import check_config
except ImportError as e:
    print(json.dumps({"bfs": None, "why": f"no explicit engine ({e})"})); sys.exit(0)
fix, mutants, config, prop, depth, ms = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
rep = check_config(build_design("current", [fix], [], mutants), CONFIGS[config], [prop], depth, timeout_ms=ms, minimize=False)
r = rep.results[prop]
print(json.dumps({"bfs": r.depth if r.verdict.value == "violated" else None, "why": r.verdict.value + (" " + r.reason if r.reason else "")}))
"""
    cmd = [sys.executable, "-c", snippet, fix, json.dumps(mutants), config, prop, str(max_depth), str(int(budget_s * 1000))]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s + 30, cwd=ROOT, env=_env())
    except subprocess.TimeoutExpired:
        return {"bfs": None, "why": f"no answer within {budget_s:.0f} s"}
    if r.returncode != 0 or not r.stdout.strip():
        return {"bfs": None, "why": (r.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def run_bugs(quick: bool) -> list[dict[str, Any]]:
    rows = []
    for fix, pr, mutants, expected in BUGS:
        row: dict[str, Any] = {"case": f"--without {fix}" + "".join(f" --mutant {m}" for m in mutants), "pr": pr}
        row.update(bug_cold(fix, mutants, budget_s=60 if quick else 120))
        props = row.pop("_props", [])
        row["right_property"] = bool(expected & set(props))
        if not quick:
            row.update(bug_warm(fix, mutants, budget_s=150))
        if row.get("length") is not None and row.get("config"):
            prop = next((p for p in props if p in expected), props[0])
            b = shortest_bfs(fix, mutants, row["config"], prop, row["length"] + (2 if quick else 4),
                             budget_s=10 if quick else 60)
            row["bfs_length"] = b.get("bfs")
            if b.get("bfs") is None:
                row["bfs_note"] = b.get("why")
        row["target_2s"] = row.get("cold_s") is not None and row["cold_s"] <= 2.0
        rows.append(row)
        for series, key in (("cold CLI", "cold_s"), ("warm in-process", "warm_s")):
            if row.get(key) is not None:
                rows[-1].setdefault("_plot", []).append(
                    {"chart": "time to first counterexample (s)", "series": series, "x": fix, "y": row[key],
                     "ylabel": "seconds"})
    return rows


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
    for r in run_bugs(quick):
        rows.append({"benchmark": "known bug", **r})
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
    bugs = [r for r in rows if r.get("benchmark") == "known bug"]
    if bugs:
        ok = [r for r in bugs if r.get("target_2s")]
        right = [r for r in bugs if r.get("right_property")]
        times = [r["cold_s"] for r in bugs if r.get("cold_s") is not None]
        same = [r for r in bugs if r.get("bfs_length") is not None and r.get("length") == r.get("bfs_length")]
        with_bfs = [r for r in bugs if r.get("bfs_length") is not None]
        lines.append(f"- Known bugs: {len(right)}/{len(bugs)} found as the right property; {len(ok)}/{len(bugs)} within "
                     f"2 s cold from the CLI (max {max(times):.1f} s)." if times else "- Known bugs: none measured.")
        lines.append(f"- Counterexample length = BFS shortest for {len(same)}/{len(with_bfs)} bugs where BFS found one "
                     "(BMC's own length is minimal over all parameters in bounds: every shorter depth was unsat).")
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
