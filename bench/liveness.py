"""Liveness over the release presets (issue 28): per (design, config), the lasso BMC of
checker/engines/liveness.py for `progress`, `no_starvation` and `deferred_eventually_admitted` to a
depth, then, where `progress` holds to it, its bounded-progress proof (the invariants through the
induction engine, then "a batch within N iterations").

    python -m bench --only liveness            # the quick set: the #23174 stall and one proof
    python -m bench.liveness [--depth D] [--designs ...] [--configs ...] [--timeout S] [--engine explicit]
                                               # the sweep, one JSON row per line on stdout

Each (design, config) runs in a child process with a wall-clock budget, so a slow one is reported
as such instead of holding the rest up. Times are wall seconds on a shared machine, for reading.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import time
from typing import Any

LIVE = ("progress", "no_starvation", "deferred_eventually_admitted")
QUICK = (("current", "hybrid_swa", 4), ("current", "small", 2))


def _job(design: str, config: str, depth: int, timeout_s: float, prove: bool, conn: Any, engine: str = "bmc",
         proof_cache: str | None = None) -> None:
    from model.designs import preset
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.liveness import LassoBMC, explicit_lassos, prove_progress
    from checker.verdict import Verdict

    if proof_cache:  # the invariants' Houdini queries, shared by designs that encode alike on a config
        from checker.engines import proof_cache as pc

        pc.use(proof_cache)
    cfg = CONFIGS[config]
    d = preset(design)
    why = cfg.not_modelled_by(d)
    if why:
        conn.send({"design": design, "config": config, "note": f"not applicable: {why}"})
        return
    system = System(cfg, d)
    t0 = time.perf_counter()
    if engine == "explicit":
        res = explicit_lassos(system, list(LIVE), depth, time_limit_s=timeout_s)
    else:
        res = LassoBMC(system, list(LIVE), timeout_ms=int(timeout_s * 1000)).run(depth)
    row: dict[str, Any] = {"design": design, "config": config, "engine": engine, "depth": depth,
                           "lasso_s": round(time.perf_counter() - t0, 1)}
    if engine == "explicit":
        m = res["progress"].meta
        row["states"] = m.get("distinct_states")
        row["exhausted_at"] = m.get("exhausted_at")
    for n, r in res.items():
        row[n] = r.words() + (f" ({r.reason})" if r.reason else "")
        if r.trace is not None:
            p = r.trace.params
            row[f"{n}_pools"] = f"F={p.full_tokens}" + (f" S={p.swa_tokens} W={p.sliding_window_size}" if cfg.hybrid_swa else "") + \
                (f" chunk={p.chunked_prefill_size}" if cfg.chunked_prefill else "") + f" input={p.input_len} mnt={p.max_new_tokens}"
            row[f"{n}_loop"] = f"{r.trace.loop}..{r.trace.depth}"
    if prove and res["progress"].verdict is Verdict.HOLDS_TO_DEPTH:
        t1 = time.perf_counter()
        bp, inv = prove_progress(system, int(timeout_s * 1000))
        row["bounded_progress"] = bp.line() if bp is not None else "not attempted"
        row["invariants"] = len(inv.lemmas) + len(inv.props)
        row["proof_s"] = round(time.perf_counter() - t1, 1)
    conn.send(row)


def one(design: str, config: str, depth: int, timeout_s: float = 600.0, budget_s: float = 1800.0, prove: bool = True,
        engine: str = "bmc", proof_cache: str | None = None) -> dict[str, Any]:
    ctx = mp.get_context("spawn")  # a fresh interpreter per job: the model as it is on disk now
    recv, send = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_job, args=(design, config, depth, timeout_s, prove, send, engine, proof_cache), daemon=True)
    t0 = time.perf_counter()
    p.start()
    send.close()
    row: dict[str, Any] | None = None
    if recv.poll(budget_s):
        try:
            row = recv.recv()
        except EOFError:
            row = None
    if p.is_alive():
        p.terminate()
    p.join()
    if row is None:
        row = {"design": design, "config": config, "depth": depth,
               "note": f"no answer within {budget_s:.0f}s" if p.exitcode is None or p.exitcode < 0 else f"failed (exit {p.exitcode})"}
    row["wall_s"] = round(time.perf_counter() - t0, 1)
    return row


def run(quick: bool = True) -> list[dict[str, Any]]:
    return [one(d, c, k, budget_s=900.0) for d, c, k in QUICK]


def main(argv: list[str] | None = None) -> int:
    import argparse

    from model.designs import PRESETS
    from specs.configs import CONFIGS

    ap = argparse.ArgumentParser(prog="python -m bench.liveness")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--designs", nargs="*", default=list(PRESETS))
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per solver query")
    ap.add_argument("--budget", type=float, default=1800.0, help="wall seconds per (design, config)")
    ap.add_argument("--no-prove", action="store_true")
    ap.add_argument("--engine", choices=("bmc", "explicit"), default="bmc", help="lasso BMC or the explicit engine's fair cycles")
    ap.add_argument("--proof-cache", default=None, metavar="DIR", help="the step queries' proof cache (kvmc check --proof-cache)")
    a = ap.parse_args(argv)
    for d in a.designs:
        for c in a.configs:
            print(json.dumps(one(d, c, a.depth, a.timeout, a.budget, not a.no_prove, a.engine, a.proof_cache)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
