"""What a third request slot costs (issue 29): `small` (two slots) against `small3` (the same
shape with three), and `pressure` (three slots, new_token_ratio 1/8).

BMC: CPU seconds to reach each depth with every property (bench/_bmc_worker.py in a child with a
budget; CPU time is steadier than wall clock on the shared machine). Induction: CPU seconds of
`kvmc check --engine induction --depth 1` (base case and the k=1 step case) for every property.
A run that does not finish in its budget is reported so, never as a time.
"""

from __future__ import annotations

import json
from typing import Any

from bench.bmc import bmc_worker, quick_mode
from bench.bugs import cli_json

CONFIGS = ["small", "small3", "pressure"]
DEPTH = 5
BMC_BUDGET_S = 900.0
PROOF_BUDGET_S = 1800.0


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    depth = 2 if quick else DEPTH
    rows: list[dict[str, Any]] = []
    for c in CONFIGS:
        r = bmc_worker({"config": c, "design": "current", "depth": depth}, 120.0 if quick else BMC_BUDGET_S)
        cpu = r.get("cpu") or {}
        row: dict[str, Any] = {"benchmark": "BMC, CPU s to each depth (every property)", "config": c}
        for t in range(depth + 1):
            row[f"d{t}"] = round(cpu[t], 1) if t in cpu and cpu[t] is not None else None
        row["note"] = "budget spent" if r.get("timed_out") else ""
        rows.append(row)
        for t in sorted(cpu):
            if cpu[t] is not None:
                rows.append({"chart": "BMC CPU s per depth: two vs three slots", "series": c, "x": t, "y": cpu[t],
                             "xlabel": "depth", "ylabel": "CPU s", "logy": True})
    if quick:
        return rows
    for c in CONFIGS:
        res, wall, cpu_s = cli_json(["check", "--engine", "induction", "--config", c, "--depth", "1", "--timeout", "120"],
                                    PROOF_BUDGET_S)
        row = {"benchmark": "induction (k=1, every property), CPU s", "config": c, "cpu_s": None, "proved": None}
        if res is None or res.returncode not in (0, 3):
            row["note"] = f"no answer within {PROOF_BUDGET_S:.0f} s" if res is None else f"exit {res.returncode}"
        else:
            rep = json.loads(res.stdout)
            verdicts = [x["verdict"] for cf in rep["configs"] for x in cf["results"]]
            row.update(cpu_s=round(cpu_s, 1), wall_s=round(wall, 1), proved=f"{verdicts.count('proved')} of {len(verdicts)}")
        rows.append(row)
    return rows
