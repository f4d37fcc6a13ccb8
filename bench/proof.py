"""Time to a verdict that covers depth 20 (issue 6: "`current` holds to depth 20 on hybrid_swa in
<= 60 s"): the plain `kvmc check --config C` in a fresh process, whose BMC and 1-induction run
side by side. BMC alone reaches depth 3-4 on hybrid_swa in that time (bench/bmc.py, depth
scaling); a `proved (k=1)` verdict holds at every depth, 20 included, for every pool size. A
property left `holds to depth d < 20` does not count.

Each run has a wall-clock budget; one that does not finish is reported so, never as a time.
"""

from __future__ import annotations

import json
from typing import Any

from bench.bmc import quick_mode
from bench.bugs import cli_json

CONFIGS = ["hybrid_swa", "paged"]
QUICK_CONFIGS = ["small"]
TARGET_S = 60.0  # issue 6, on hybrid_swa
BUDGET_S = 900.0


def plain_check(config: str, budget_s: float, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    r, wall, cpu = cli_json(["check", "--config", config, *extra], budget_s)
    if r is None:
        return {"config": config, "wall_s": None, "note": f"no answer within {budget_s:.0f} s"}
    if r.returncode not in (0, 3):
        return {"config": config, "wall_s": wall, "note": f"exit {r.returncode}: {r.stderr.strip()[-200:]}"}
    rep = json.loads(r.stdout)
    res = [x for c in rep["configs"] for x in c["results"]]
    proved = [x["property"] for x in res if x["verdict"] == "proved"]
    covers = all(x["verdict"] == "proved" or (x["verdict"] == "holds to depth" and x["depth"] >= 20) for x in res)
    derived = sorted({p for c in rep["configs"] for p in ((c.get("proof") or {}).get("derived") or {})})
    return {"config": config, "wall_s": wall, "cpu_s": cpu, "proved": f"{len(proved)} of {len(res)}",
            "covers_depth_20": covers, "derived": ", ".join(derived),
            "target_60s": (covers and wall <= TARGET_S) if config == "hybrid_swa" else None}


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    return [{"benchmark": "plain check, BMC + proof", **plain_check(c, BUDGET_S)} for c in (QUICK_CONFIGS if quick else CONFIGS)]


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        if r.get("wall_s") is None:
            lines.append(f"- `kvmc check --config {r.get('config')}`: {r.get('note', 'not measured')}.")
            continue
        lines.append(f"- `kvmc check --config {r['config']}`: {r['proved']} properties proved in {r['wall_s']:.1f} s wall"
                     + (" (covers depth 20)" if r.get("covers_depth_20") else " (does not cover depth 20)")
                     + (f"; target <= {TARGET_S:.0f} s {'met' if r['target_60s'] else 'missed'}" if r.get("target_60s") is not None else "")
                     + ".")
    return "\n".join(lines)
