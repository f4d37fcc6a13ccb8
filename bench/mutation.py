"""How strong is the checker: `kvmc mutate` over every transition module (issue 29).

A seeded sample of generated mutants per module (checker/mutation/), each checked by kvmc's own
engines in a fresh process within a budget of `BUDGET_S` seconds: killed (a property violated, or
left vacuous where the model meets its witness), proved equivalent, unreached (no config runs the
line), invalid (the mutated model raises), or survived, with the gap it shows. One row per module;
the whole run is kept in bench/mutation.json (`kvmc mutate --save`), and its tables go to
docs/mutants.md by hand (they are too long for this file).

Target (issue 29): at least 90 % of the non-equivalent mutants killed within 5 minutes each on the
2-core machine. The run takes about an hour (most mutants die in seconds; a survivor uses its
whole budget, then a minute or two to be classified); `--quick` runs the CI selection instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.bmc import quick_mode

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "mutation.json"
PER_MODULE = 5
SEED = 29
BUDGET_S = 300.0
TARGET = 0.90
QUICK_ARGS = ["--module", "allocator", "--config", "small", "--operator", "drop", "--operator", "negate", "--budget", "120"]


def mutate(args: list[str], save: Path, timeout_s: float) -> tuple[dict[str, Any] | None, float, str]:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "checker.cli", "mutate", *args, "--json", "--no-progress", "--save", str(save)],
                           cwd=HERE.parent, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None, time.perf_counter() - t0, f"no answer within {timeout_s:.0f} s"
    if p.returncode != 0:
        return None, time.perf_counter() - t0, f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    return json.loads(p.stdout), time.perf_counter() - t0, ""


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    if quick:
        save = Path(os.environ.get("TMPDIR", "/tmp")) / "kvmc-bench-mutation-quick.json"
        data, wall, err = mutate([*QUICK_ARGS, "--seed", "0"], save, 1800)
    else:
        data, wall, err = mutate(["--per-module", str(PER_MODULE), "--seed", str(SEED), "--budget", str(BUDGET_S)], RESULTS,
                                 6 * 3600)
    if data is None:
        return [{"module": "all", "note": err, "wall_s": round(wall)}]
    return rows_from(data, wall)


def rows_from(data: dict[str, Any], wall: float) -> list[dict[str, Any]]:
    """One row per module and a total row, from a `kvmc mutate --json` / `--save` report (also how
    a measurement made by hand, with other options than this module's, becomes the section)."""
    rows = []
    for r in data["by_module"]:
        rows.append({"module": r["group"], "mutants": r["mutants"], "killed": r["killed"], "survived": r["survived"],
                     "equivalent": r["equivalent"], "unreached": r["unreached"], "invalid": r["invalid"] + r["error"],
                     "kill_rate": r["kill_rate"], "median_kill_s": r["median_kill_s"], "max_kill_s": r["max_kill_s"]})
    k = sum(r["killed"] for r in rows)
    s = sum(r["survived"] for r in rows)
    rows.append({"module": "all", "mutants": sum(r["mutants"] for r in rows), "killed": k, "survived": s,
                 "equivalent": sum(r["equivalent"] for r in rows), "unreached": sum(r["unreached"] for r in rows),
                 "invalid": sum(r["invalid"] for r in rows), "kill_rate": round(k / (k + s), 3) if k + s else None,
                 "weighted_rate": weighted_rate(rows), "wall_s": round(wall), "budget_s": data["budget_s"],
                 "machine": data["machine"]})
    return rows


def weighted_rate(rows: list[dict[str, Any]]) -> float | None:
    """The kill rate of all generated mutants estimated from a sample stratified by module (the
    same number from each module, `--per-module`): each module's killed and survived counts scaled
    by its share of the generated mutants (radix_cache has 40 % of them, allocator 1 %), so a small
    module's sample does not stand for as many mutants as a large one's."""
    from checker.mutation.operators import generate

    sizes: dict[str, int] = {}
    for m in generate():
        key = m.module.split(".", 1)[1]
        sizes[key] = sizes.get(key, 0) + 1
    k = s = 0.0
    for r in rows:
        n = r["mutants"]
        if r["module"] in sizes and n:
            k += sizes[r["module"]] * r["killed"] / n
            s += sizes[r["module"]] * r["survived"] / n
    return round(k / (k + s), 3) if k + s else None


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    total = rows[-1] if rows else {}
    rate = total.get("kill_rate")
    if rate is None:
        return "No kill rate: " + str(total.get("note", "no mutant was killed or survived"))
    met = "met" if rate >= TARGET else "**not met**"
    w = total.get("weighted_rate")
    return (f"Kill rate {rate:.0%} of the non-equivalent mutants (killed / (killed + survived)), budget "
            f"{total.get('budget_s')} s each"
            + (f" ({w:.0%} with each module weighted by its share of the generated mutants)" if w is not None else "")
            + f"; target {TARGET:.0%} {met}. Survivors and their gaps: docs/mutants.md.")
