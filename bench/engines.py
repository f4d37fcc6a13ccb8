"""Engine benchmark (not a test): BMC vs explicit vs random on the same bugs, measured in one run.

1. Time to first counterexample per known SGLang bug (each fix turned off in `current`; #27228 with
   the planted verify leak), each engine on the same instance: the case's config pinned to the
   points of its explicit bounds (checker/engines/agreement.py::pinned), so all three engines search the
   same parameter space. Ratios are engine time / BMC time in this run.
2. Growth with pool size: the #22213 session false alarm (`busy_check_sound`, 3 iterations) with
   the full pool F and the prompt lengths scaled together (F = N, input_len in [1, N/4]) for
   N = 10^2 .. 10^6. BMC keeps them symbolic (its time should stay flat); the explicit engine
   enumerates every point (it grows with the domain until its time limit); the random engine
   draws points (it stays cheap per run but the chance of the needle shrinks).

A run that reaches its time limit or state cap is reported as `limit` with the time spent, never as
a speed. `run(quick=True)` (or KVMC_BENCH_QUICK=1) measures N up to 10^4 and shorter limits.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from checker.engines.cases import Case
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS

# fix -> the instance on which its absence shows (config, property, pins, shortest depth)
KNOWN_BUGS: list[Case] = [
    Case("swa_busy_check", "hybrid_swa", "busy_check_sound", 1,
         dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
              input_len=(3, 3), max_new_tokens=(2, 2))),
    Case("session_active", "sessions", "busy_check_sound", 2, dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))),
    Case("retract_tail_free", "sessions", "conservation", 0, dict(full_tokens=(8, 8), input_len=(1, 2), max_new_tokens=(1, 3))),
    # the two hybrid bugs need pool/window ratios outside their configs' explicit points: pinned to
    # the parameters of the checked-in counterexamples (counterexamples/v0.5.13-without-*/)
    Case("chunked_swa_page_reserve", "hybrid_swa", "no_prefill_oom", 3,
         dict(full_tokens=(9, 9), swa_tokens=(5, 5), sliding_window_size=(3, 3), chunked_prefill_size=(3, 3),
              max_prefill_tokens=(8, 8), input_len=(1, 6), max_new_tokens=(1, 1))),
    Case("swa_hostload_budget", "hybrid_swa_hicache", "no_prefill_oom", 1,
         dict(full_tokens=(10, 10), swa_tokens=(4, 4), sliding_window_size=(2, 2), chunked_prefill_size=(2, 2),
              max_prefill_tokens=(8, 8), input_len=(6, 7), max_new_tokens=(1, 1), warm_len=(1, 3),
              warm_device=(0, 0), warm_host=(1, 1))),
    Case("spec_topk_busy_check", "spec_topk", "busy_check_complete", 0,
         dict(full_tokens=(32, 32), input_len=(1, 1), max_new_tokens=(4, 4))),
]
MAX_DEPTH = 8  # for the cases whose depth is not pinned (0): search up to here


def _design(c: Case) -> Any:
    d = PRESETS["v0.5.13" if c.name == "spec_topk_busy_check" else "current"].with_fix(c.name, None)
    if c.name == "spec_topk_busy_check":
        d = d.with_mutants(frozenset({"verify_keeps_rejected_page"}))
    return d


def _timed(fn: Any) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _first_cex(c: Case, engine: str, limit_s: float) -> tuple[str, int | None, float]:
    """(outcome, depth, seconds) of one engine's search for the case's property."""
    from checker.engines.bmc import BMC
    from checker.engines.explicit import Explorer
    from checker.engines.random_engine import check_config as random_check

    cfg, design = c.cfg(), _design(c)
    depth = c.depth or MAX_DEPTH
    system = System(cfg, design)
    if engine == "bmc":
        r, s = _timed(lambda: BMC(system, [c.prop], timeout_ms=int(limit_s * 1000)).run(depth, stop_on_violation=True)[c.prop])
    elif engine == "explicit":
        r, s = _timed(lambda: Explorer(system, [c.prop], time_limit_s=limit_s, max_states=2_000_000).run(depth, keep_going=False).results[c.prop])
    else:
        r, s = _timed(lambda: random_check(design, cfg, [c.prop], depth, examples=500).results[c.prop])
    if r.verdict.value == "violated":
        return "found", r.depth, s
    return ("limit" if r.verdict.value == "unknown" else r.verdict.value), None, s


def known_bug_rows(limit_s: float) -> list[dict[str, Any]]:
    rows = []
    for c in KNOWN_BUGS:
        res = {e: _first_cex(c, e, limit_s) for e in ("bmc", "explicit", "random")}
        base = res["bmc"][2]
        for e, (outcome, depth, secs) in res.items():
            rows.append({
                "bug": f"without {c.name}", "property": c.prop, "config": c.config, "engine": e, "outcome": outcome,
                "depth": depth, "seconds": round(secs, 2),
                "ratio_to_bmc": round(secs / base, 2) if outcome == "found" and res["bmc"][0] == "found" and base > 0 else None,
                "chart": "time to first counterexample", "series": e, "x": c.name, "y": round(secs, 2),
                "ylabel": "seconds", "logy": True,
            })
    return rows


def growth_rows(sizes: list[int], limit_s: float) -> list[dict[str, Any]]:
    base = CONFIGS["sessions"]
    rows = []
    for n in sizes:
        quarter = max(n // 4, 1)
        bounds = {**base.bounds, "full_tokens": (2, n), "input_len": (1, quarter), "max_new_tokens": (1, 2)}
        explicit = {**base.explicit_bounds, "full_tokens": (n, n), "input_len": (1, quarter), "max_new_tokens": (1, 2)}
        cfg_sym = dataclasses.replace(base, bounds=bounds, explicit_bounds=explicit)
        case = Case("session_active", "sessions", "busy_check_sound", 2)
        design = PRESETS["current"].with_fix("session_active", None)
        system_sym = System(cfg_sym, design)
        from checker.engines.bmc import BMC
        from checker.engines.explicit import Explorer
        from checker.engines.random_engine import check_config as random_check

        out: dict[str, tuple[str, float]] = {}
        r, s = _timed(lambda: BMC(system_sym, [case.prop], timeout_ms=int(limit_s * 1000)).run(3, stop_on_violation=True)[case.prop])
        out["bmc"] = ("found" if r.verdict.value == "violated" else "limit", s)
        points = quarter ** 2 * 2 ** 2  # input_len and max_new_tokens of two requests
        if points > 200_000:  # listing the parameter points alone would not finish
            out["explicit"] = (f"limit ({points:.1e} parameter points)", 0.0)
        else:
            r, s = _timed(lambda: Explorer(system_sym, [case.prop], time_limit_s=limit_s, max_states=2_000_000).run(3, keep_going=False).results[case.prop])
            out["explicit"] = ("found" if r.verdict.value == "violated" else "limit", s)
        r, s = _timed(lambda: random_check(design, cfg_sym, [case.prop], 5, examples=300).results[case.prop])
        out["random"] = ("found" if r.verdict.value == "violated" else "not found", s)
        for e, (outcome, secs) in out.items():
            rows.append({"pool_tokens": n, "engine": e, "outcome": outcome, "seconds": round(secs, 2),
                         "chart": "growth with pool size (#22213, depth 2)", "series": e, "x": n, "y": round(secs, 2),
                         "xlabel": "full pool tokens N (input_len up to N/4)", "ylabel": "seconds", "logx": True, "logy": True})
    return rows


def run(quick: bool = False) -> list[dict[str, Any]]:
    quick = quick or os.environ.get("KVMC_BENCH_QUICK") == "1"
    limit = 30.0 if quick else 120.0
    sizes = [10**2, 10**3, 10**4] if quick else [10**2, 10**3, 10**4, 10**5, 10**6]
    return known_bug_rows(limit) + growth_rows(sizes, limit)


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    found = [r for r in rows if r.get("ratio_to_bmc") is not None and r["engine"] != "bmc"]
    parts = [f"{r['engine']} {r['ratio_to_bmc']}x BMC on {r['bug']}" for r in found]
    return "Time to first counterexample relative to BMC (same run, same instances): " + ("; ".join(parts) or "none comparable") + "."


if __name__ == "__main__":
    for row in run(quick=True):
        print({k: v for k, v in row.items() if k not in ("chart", "series", "x", "y", "xlabel", "ylabel", "logx", "logy")})
