"""`kvmc check --all` / `kvmc check --jobs N`: (design, config) checks in parallel processes, one
combined report.

`--all` checks every release preset (with the command's `--without/--with/--mutant` applied to
each); without it, the one `--design`. Each (design, config) pair is one job (checker/cli/review.py's
`run_job`: the chosen engine on all selected properties, every property to the end, its own
counterexamples written as `<out>/<design>/<property>.<config>.itf.json`), run `--jobs` at a time
(default: the CPU count). Exit status as for `kvmc check` (checker/verdict.py::exit_code).
"""

from __future__ import annotations

import json
import os
from typing import Any

from model.designs import PRESETS

from checker.verdict import Verdict, exit_code


def cmd_check_parallel(args: Any) -> int:
    from checker.cli.common import build_design, validate_selection
    from checker.cli.review import Job, Side, run_jobs

    designs = list(PRESETS) if args.all else [args.design]
    for d in designs:
        build_design(d, args.without, args.with_, args.mutant)  # validates names (UsageError)
    props, configs = validate_selection(args)
    n = args.jobs or os.cpu_count() or 1
    jobs = [Job(Side("", d, tuple(args.without), tuple(args.with_), tuple(args.mutant)), c, tuple(props), args.depth,
                args.engine, not args.no_prove, int((args.timeout or 0) * 1000), args.out, not args.no_minimize,
                without_lemmas=tuple(args.without_lemma))
            for d in designs for c in configs]
    results = run_jobs(jobs, n)
    verdicts = [Verdict(r["verdict"]) for res in results for r in res["results"].values()]
    if args.json:
        print(json.dumps({"depth": args.depth, "engine": args.engine, "jobs": n,
                          "checks": [{k: v for k, v in res.items() if k != "side"} | {"results": {
                              p: {k: v for k, v in d.items() if k != "step_table"} for p, d in res["results"].items()}}
                                     for res in results]}, indent=1))
    else:
        print(render(results, args.depth, args.engine, n))
    return exit_code(verdicts)


def render(results: list[dict[str, Any]], depth: int, engine: str, n: int) -> str:
    out = [f"kvmc check: {len(results)} (design, config) checks, engine {engine}, depth {depth}, {n} processes"]
    design = None
    for res in results:
        if res["design"] != design:
            design = res["design"]
            out.append(f"design {design}")
        out.append(f"  config {res['config']}  [{res['seconds']:.1f}s]")
        for p, d in res["results"].items():
            line = f"    {p:20s} {d['words']}"
            if d.get("counterexample"):
                line += f"  counterexample: {d['counterexample']} (pool: {d.get('pool_replay', 'not replayed')})"
            elif d.get("cti"):
                line += f"  counterexample to induction: {d['cti']}"
            elif d["verdict"] == "unknown" and d.get("reason"):
                line += f" ({d['reason']})"
            out.append(line)
    return "\n".join(out)
