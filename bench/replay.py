"""Replay throughput and the ownership check's cost (not a test: numbers for bench/results.md).

    python -m bench.replay [--device cpu|cuda] [--slots 1048576]

Rows (`run() -> list[dict]`, aggregated by bench/__main__.py):
* replay steps/s on the pool alone (choices answered from recorded picks, state mapped and compared
  every step), and with the full refinement check (model re-run + counters + busy check + the
  ownership check against the model's ledger every step), over random walks of every named
  config; steady state (a warm-up pass, then the best of 3);
* the ownership check (one `torch.bincount` per pool) on a pool of `--slots` token slots held by
  free pages, tree nodes and request rows, and the same count on the raw index tensor alone.
Measured in one run on whatever machine runs it; compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import torch


def _walks(n_per_config: int, steps: int) -> list[Any]:
    from model.designs import PRESETS
    from specs.configs import CONFIGS
    from checker.traces.walk import random_walk

    out = []
    for name, cfg in CONFIGS.items():
        for seed in range(n_per_config):
            out.append(random_walk(cfg, PRESETS["current"], steps, 1000 + seed))
    return out


def bench_replay(device: str, n_per_config: int = 6, steps: int = 14, repeat: int = 3) -> list[dict[str, Any]]:
    """Steady-state throughput: one untimed pass first (imports, torch's first-call op setup), then
    the best of `repeat` timed passes over the same walks (the machine is shared)."""
    from checker.replay.pool import replay_trace

    walks = _walks(n_per_config, steps)
    total = sum(len(w.steps) for w in walks)
    rows = []
    for label, kw in (("pool only (map + compare state and choices)", dict(check_model=False, compare_derived=False)),
                      ("full refinement check (+ model re-run, counters, busy check, ownership every step)",
                       dict(check_model=True, compare_derived=True))):
        times = []
        for rep in range(repeat + 1):
            t0 = time.perf_counter()
            for w in walks:
                o = replay_trace(w, device, **kw)
                if not o.ok:
                    raise RuntimeError(o.line())
            if rep:
                times.append(time.perf_counter() - t0)
        dt = min(times)
        rows.append({"bench": "replay", "what": label, "device": device, "steps": total, "seconds": round(dt, 3),
                     "steps_per_s": round(total / dt, 1)})
    return rows


def _big_scheduler(slots: int, device: str) -> Any:
    """A plain pool of `slots` tokens, ~90% held: 4096 tree nodes and 256 running request rows."""
    from model.config import concrete_params
    from model.designs import PRESETS
    from pool import Scheduler
    from specs.configs import CONFIGS

    cfg = CONFIGS["small"]
    p = concrete_params(cfg, full_tokens=slots, req_pool_size=256, input_len=1, max_new_tokens=1, warm_len=0)
    sch = Scheduler(cfg, PRESETS["current"], p, device=device, max_context_len=max(8, slots // 4 // 256))
    node_len = max(1, (slots // 2) // 4096)
    parent = sch.tree.root
    for i in range(4096):
        v = sch.alloc.alloc(node_len)
        parent = sch.tree.add_node(sch.tree.root if i % 64 == 0 else parent, (i,) * node_len, v, -1, None)
    row_len = sch.req_pool.req_to_token.shape[1]
    from pool.scheduler import Req

    sch.reqs = []
    for r in range(256):
        req = Req(r, row_len, arrived=True)
        req.req_pool_idx = sch.req_pool.alloc()
        idx = sch.alloc.alloc(row_len)
        sch.req_pool.write(req.req_pool_idx, 0, idx)  # type: ignore[arg-type]
        req.kv_allocated_len = req.kv_committed_len = row_len
        sch.reqs.append(req)
        sch.running.append(req)
    return sch


def bench_ownership(device: str, slots: int, repeat: int = 7) -> list[dict[str, Any]]:
    from pool import ownership

    sch = _big_scheduler(slots, device)
    own = ownership.check(sch)
    if not own.ok:
        raise RuntimeError(own.describe())
    held = slots - sch.alloc.available_size()

    def timed(fn: Any) -> float:
        ts = []
        for _ in range(repeat):
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    full = timed(lambda: ownership.check(sch))
    idx = torch.randperm(slots, device=device) + 1

    def raw() -> None:
        c = torch.bincount(idx, minlength=slots + 1)[1:]
        torch.stack([(c == 0).sum(), (c > 1).sum()]).tolist()

    bare = timed(raw)
    return [
        {"bench": "ownership", "what": "ownership.check (gather owners from tree/rows/free list + bincount)", "device": device,
         "slots": slots, "held": held, "owners": 4096 + 256 + 1, "ms": round(full * 1e3, 2)},
        {"bench": "ownership", "what": "bincount + leak/double count on a ready index tensor", "device": device,
         "slots": slots, "ms": round(bare * 1e3, 2)},
    ]


def run(device: str | None = None, slots: int = 1 << 20) -> list[dict[str, Any]]:
    devices = [device] if device else (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    rows: list[dict[str, Any]] = []
    for d in devices:
        rows += bench_replay(d)
        rows += bench_ownership(d, slots)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.replay")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cpu, and cuda when available)")
    ap.add_argument("--slots", type=int, default=1 << 20)
    a = ap.parse_args(argv)
    for row in run(a.device, a.slots):
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
