"""BMC depth within a fixed budget on the hybrid configs (issue 29: depth >= 6 on `hybrid_swa` and
`hybrid_swa_hicache` in <= 5 minutes each; issue 27: depth 5 on `hybrid_swa_page4`), on this
machine, `current`, every property and lemma (what `kvmc check --no-prove --keep-going` runs, less
the seed hunts and the minimising of a counterexample).

Each config is one child process (bench/_bmc_worker.py) killed at its budget; the row keeps every
depth it finished, so "depth 2 at 35 s, depth 3 not within 300 s" is measured, not extrapolated.
A violation at some depth (finding 1, `prompt_prefilled`, at depth 1 on the hybrid configs) does
not stop the run: the other properties go on, as with `--keep-going`.
"""

from __future__ import annotations

from typing import Any

from bench.bmc import bmc_worker, quick_mode

TARGETS = (("hybrid_swa", 6, "issue 29"), ("hybrid_swa_hicache", 6, "issue 29"), ("hybrid_swa_page4", 5, "issue 27"))
BUDGET_S = 300.0
QUICK_BUDGET_S = 20.0


def depth_row(config: str, target: int, issue: str, budget_s: float) -> dict[str, Any]:
    res = bmc_worker({"config": config, "design": "current", "depth": target}, budget_s)
    reached = max(res["depths"], default=None)
    times = ", ".join(f"{k}: {v:.1f}" for k, v in sorted(res["depths"].items()) if k > 0)
    violated = sorted(k for k, v in res["status"].items() if v.startswith("violated"))
    return {"config": config, "target_depth": target, "issue": issue, "budget_s": budget_s,
            "depth_reached": reached, "seconds_per_depth": times,
            "met": reached is not None and reached >= target,
            "violated": ", ".join(violated), "error": res.get("error") or ""}


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    budget = QUICK_BUDGET_S if quick else BUDGET_S
    return [depth_row(c, d, i, budget) for c, d, i in TARGETS]


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    lines = []
    for r in rows:
        if "config" not in r:
            continue
        got = "no depth" if r["depth_reached"] is None else f"depth {r['depth_reached']}"
        lines.append(f"- `{r['config']}` ({r['issue']}: depth {r['target_depth']} in {r['budget_s']:.0f} s): "
                     f"{got} reached, target {'met' if r['met'] else 'missed'}.")
    return "\n".join(lines)
