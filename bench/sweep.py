"""The all-preset, all-config sweep (`kvmc check --all`) on N processes: measured, then simulated
for more workers than the machine has (issue 31).

`kvmc check --all` runs one job per (preset, config) (checker/cli/parallel.py), `--jobs` at a time
(`--executor ray`: as Ray tasks). This benchmark builds the same jobs (checker/cli/review.py `Job`)
and runs them on N forked processes, each job timed inside its worker, every finished job written
at once to a JSON-lines record (a run stopped by its budget keeps what finished; a job still
running or queued then is recorded as unfinished, and every prediction from that record is marked
as leaving it out). From the record:

* measured: the sweep's wall time on N processes, and the sum of its jobs (what one process would
  take, as far as the jobs' times under N-way load are the times alone: an upper bound on T(1));
* simulated: list scheduling of the recorded job times in the sweep's own order (what a pool or
  Ray's queue does: the next job goes to the first free worker), plus the driver's measured
  dispatch gap per job, for 1, 4, 16, 64 workers; the predicted speed-up T(1)/T(N) and where it
  flattens (the longest job: no job is split, a BMC job has no case queries to spread);
* the check of the simulator itself: its T(N) for the N that actually ran, against the measured wall.

Target (issue 31): a predicted speed-up >= 0.7 * N at 16 workers. `python -m bench.sweep --record
FILE --jobs N --budget S [--depth D --timeout S --engine E]` records (run it where the cores are:
a GPU host's 16 CPUs, .ci/device); `python -m bench --only sweep` reads bench/sweep.jsonl (the
recorded sweep kept in the repository) and writes the tables; with no record it records a small
sweep here (2 presets x 3 configs, depth 1).
"""

from __future__ import annotations

import argparse
import heapq
import json
import multiprocessing as mp
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORD = HERE / "sweep.jsonl"
SIM_WORKERS = (1, 4, 16, 64)
TARGET_EFFICIENCY = 0.7


def jobs(designs: list[str], configs: list[str], depth: int, engine: str, timeout_s: float | None, out: str) -> list[Any]:
    """The sweep's (design, config) jobs in `kvmc check --all`'s order, every property, no proof."""
    from checker.cli.review import Job, Side
    from checker.engines.run import all_property_names

    props = tuple(all_property_names())
    t_ms = int(timeout_s * 1000) if timeout_s else 0  # 0: no limit (checker/cli/common.py::timeout_ms)
    return [Job(Side("", d, (), (), ()), c, props, depth, engine, False, t_ms, out, False) for d in designs for c in configs]


def _one(arg: tuple[int, Any]) -> dict[str, Any]:
    i, job = arg
    from checker.cli.review import run_job

    t0, w0 = time.perf_counter(), time.time()
    out: dict[str, Any] = {"i": i, "design": job.side.preset, "config": job.config}
    try:
        res = run_job(job)
        out["verdicts"] = sorted({r["verdict"] for r in res["results"].values()})
    except Exception as e:  # noqa: BLE001 (a job that crashes is recorded as such; the sweep goes on)
        out["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return out | {"seconds": round(time.perf_counter() - t0, 3), "start": w0, "end": time.time(), "pid": os.getpid()}


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def record(path: Path, designs: list[str], configs: list[str], n: int, budget_s: float, depth: int, engine: str,
           timeout_s: float | None, out: str) -> dict[str, Any]:
    """Run the sweep on `n` processes, appending each finished job to `path`; the header line first."""
    js = jobs(designs, configs, depth, engine, timeout_s, out)
    head = {"kind": "sweep", "jobs": len(js), "processes": n, "depth": depth, "engine": engine, "timeout_s": timeout_s,
            "designs": designs, "configs": configs, "cpus": os.cpu_count(), "started": time.time()}
    t0 = time.perf_counter()
    done: set[int] = set()
    with open(path, "w") as f:
        f.write(json.dumps(head) + "\n")
        f.flush()
        ctx = mp.get_context("fork")
        pool = ctx.Pool(n)
        # after the fork: SIGTERM stops the parent as Ctrl-C does (the pool is terminated below), while
        # the workers keep the default, so terminating them is quiet
        old = signal.signal(signal.SIGTERM, _interrupt)
        try:
            it = pool.imap_unordered(_one, list(enumerate(js)), chunksize=1)
            while True:
                try:
                    r = it.next(timeout=max(0.1, budget_s - (time.perf_counter() - t0)))
                except (StopIteration, mp.TimeoutError):
                    break
                done.add(r["i"])
                f.write(json.dumps({"kind": "job", **r}) + "\n")
                f.flush()
        finally:
            pool.terminate()
            pool.join()
            signal.signal(signal.SIGTERM, old)
        wall = time.perf_counter() - t0
        for i, j in enumerate(js):  # stopped by the budget (running or never started)
            if i not in done:
                f.write(json.dumps({"kind": "unfinished", "i": i, "design": j.side.preset, "config": j.config}) + "\n")
        f.write(json.dumps({"kind": "end", "wall_s": round(wall, 2), "finished": len(done)}) + "\n")
    return {"wall_s": wall, "finished": len(done), "jobs": len(js)}


def load(path: Path) -> dict[str, Any]:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    head = next(x for x in lines if x["kind"] == "sweep")
    end = next((x for x in lines if x["kind"] == "end"), None)
    return {"head": head, "jobs": sorted((x for x in lines if x["kind"] == "job"), key=lambda x: x["i"]),
            "unfinished": [x for x in lines if x["kind"] == "unfinished"], "wall_s": end["wall_s"] if end else None}


def dispatch_gap(jobs_: list[dict[str, Any]]) -> float:
    """The median gap, on one worker process, between the end of a job and the start of its next:
    the driver's and the pool's cost per dispatched job."""
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for j in jobs_:
        by_pid.setdefault(j["pid"], []).append(j)
    runs = [sorted(js, key=lambda j: j["start"]) for js in by_pid.values()]
    gaps = sorted(max(0.0, b["start"] - a["end"]) for js in runs for a, b in zip(js, js[1:]))
    return gaps[len(gaps) // 2] if gaps else 0.0


def list_schedule(times: list[float], n: int, gap: float = 0.0) -> float:
    """Makespan of `times` run in this order on `n` workers, each job to the first free worker, the
    driver handing out one job per `gap` seconds."""
    if n < 1:
        raise ValueError(f"{n=}: expected at least one worker")
    free = [0.0] * n
    heapq.heapify(free)
    driver, end = 0.0, 0.0
    for t in times:
        w = heapq.heappop(free)
        start = max(w, driver)
        driver = start + gap
        heapq.heappush(free, start + gap + t)
        end = max(end, start + gap + t)
    return end


def simulate(rec: dict[str, Any], workers: tuple[int, ...] = SIM_WORKERS) -> list[dict[str, Any]]:
    js = rec["jobs"]
    if not js:
        return []
    times = [j["seconds"] for j in js]
    gap = dispatch_gap(js)
    t1 = list_schedule(times, 1, gap)
    longest = max(js, key=lambda j: j["seconds"])
    rows = []
    for n in sorted(set(workers) | {rec["head"]["processes"]}):
        tn = list_schedule(times, n, gap)
        row = {"benchmark": "simulated", "workers": n, "predicted_s": round(tn, 1), "speedup": round(t1 / tn, 2),
               "efficiency": round(t1 / tn / n, 2), "jobs": len(js), "sum_of_jobs_s": round(sum(times), 1),
               "longest_job": f"{longest['design']}/{longest['config']} {longest['seconds']:.1f} s",
               "dispatch_gap_s": round(gap, 4), "left_out_unfinished": len(rec["unfinished"]) or None}
        if n == rec["head"]["processes"] and rec["wall_s"] and not rec["unfinished"]:
            row["measured_s"] = rec["wall_s"]
            row["simulated_over_measured"] = round(tn / rec["wall_s"], 2)
        rows.append(row | {"chart": "the all-preset sweep: predicted speed-up", "series": "list scheduling",
                           "x": n, "y": round(t1 / tn, 2), "xlabel": "workers", "ylabel": "speed-up", "logx": True})
    return rows


def measured(rec: dict[str, Any]) -> list[dict[str, Any]]:
    h = rec["head"]
    return [{"benchmark": "recorded sweep", "jobs": h["jobs"], "finished": len(rec["jobs"]),
             "crashed": sum(1 for j in rec["jobs"] if "error" in j),
             "unfinished": len(rec["unfinished"]), "processes": h["processes"], "cpus": h["cpus"],
             "engine": h["engine"], "depth": h["depth"], "query_timeout_s": h["timeout_s"],
             "wall_s": rec["wall_s"], "sum_of_jobs_s": round(sum(j["seconds"] for j in rec["jobs"]), 1),
             "measured_speedup": round(sum(j["seconds"] for j in rec["jobs"]) / rec["wall_s"], 2)
             if rec["wall_s"] and not rec["unfinished"] else None}]


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    path = RECORD
    if not path.exists():  # a small sweep here, so the module runs anywhere
        import tempfile

        path = Path(tempfile.mkdtemp(prefix="kvmc-sweep-")) / "sweep.jsonl"
        record(path, ["v0.5.13", "current"], ["small", "paged", "sessions"], min(2, os.cpu_count() or 1), 600.0, 1,
               "bmc", None, str(path.parent / "out"))
    rec = load(path)
    return measured(rec) + simulate(rec)


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    sim = {r["workers"]: r for r in rows if r.get("benchmark") == "simulated"}
    rec = next((r for r in rows if r.get("benchmark") == "recorded sweep"), None)
    if not sim or rec is None:
        return ""
    s16 = sim.get(16)
    out = [f"- Recorded: {rec['finished']} of {rec['jobs']} (preset, config) jobs ({rec['engine']}, depth {rec['depth']}, "
           f"{rec['query_timeout_s']} s per query) on {rec['processes']} processes ({rec['cpus']} CPUs): "
           f"{rec['wall_s']} s wall, {rec['sum_of_jobs_s']} s of finished jobs"
           + (f" ({rec['measured_speedup']}x)." if rec["measured_speedup"] else " (no measured speed-up: the unfinished jobs' time is not in the sum).")]
    p = sim.get(rec["processes"])
    if p and "measured_s" in p:
        out.append(f"- The simulator on the {rec['processes']} processes that ran: {p['predicted_s']} s predicted, "
                   f"{p['measured_s']} s measured ({p['simulated_over_measured']}x).")
    if rec["unfinished"]:
        out.append(f"- {rec['unfinished']} jobs did not finish within the record's budget: the simulation below "
                   "covers the finished jobs only, so it is no prediction for the whole sweep (the unfinished are the "
                   "longest: with them the longest job, and so the flattening, comes later).")
    if s16:
        ok = s16["efficiency"] >= TARGET_EFFICIENCY
        out.append(f"- {'Finished jobs only: ' if rec['unfinished'] else ''}predicted at 16 workers: {s16['speedup']}x = {s16['efficiency']} N (target >= {TARGET_EFFICIENCY} N: "
                   f"{'met' if ok else 'missed'}); " + ", ".join(f"{n} workers {r['speedup']}x" for n, r in sorted(sim.items()))
                   + f"; the longest job {s16['longest_job']} bounds it.")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    from model.designs import PRESETS
    from specs.configs import CONFIGS

    p = argparse.ArgumentParser(prog="python -m bench.sweep")
    p.add_argument("--record", type=Path, required=True, metavar="FILE.jsonl")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--budget", type=float, default=600.0, help="seconds; jobs still running then are recorded unfinished")
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--engine", default="bmc")
    p.add_argument("--timeout", type=float, default=None, help="z3 seconds per query (kvmc check --timeout)")
    p.add_argument("--design", action="append", default=None, help="default: every preset (kvmc check --all)")
    p.add_argument("--config", action="append", default=None, help="default: every config")
    p.add_argument("--out", default=None, help="counterexample directory (default: beside the record)")
    a = p.parse_args(argv)
    designs, configs = a.design or list(PRESETS), a.config or list(CONFIGS)
    bad = [d for d in designs if d not in PRESETS] + [c for c in configs if c not in CONFIGS]
    if bad or a.jobs < 1 or a.depth < 1:
        print(f"python -m bench.sweep: bad input {bad or dict(jobs=a.jobs, depth=a.depth)}: expected presets "
              f"{list(PRESETS)}, configs {list(CONFIGS)}, --jobs and --depth >= 1", file=sys.stderr)
        return 2
    r = record(a.record, designs, configs, a.jobs, a.budget, a.depth, a.engine, a.timeout,
               a.out or str(a.record.parent / "sweep-out"))
    print(json.dumps(r))
    print(SUMMARY(measured(load(a.record)) + simulate(load(a.record))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
