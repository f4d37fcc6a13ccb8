"""`kvmc check --all` / `kvmc check --jobs N`: (design, config) checks in parallel processes, one
combined report.

`--all` checks every release preset (with the command's `--without/--with/--mutant` applied to
each); without it, the one `--design`. Each (design, config) pair is one job (checker/cli/review.py's
`run_job`: the chosen engine on all selected properties, every property to the end, its own
counterexamples written as `<out>/<design>/<config>/<property>.itf.json`), run `--jobs` at a time
(default: the CPU count). Progress on stderr: jobs done / running / queued and an estimate of the
time left. Exit status as for `kvmc check` (checker/verdict.py::exit_code); interrupted: the jobs
finished so far, exit 130 / 143.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from checker import interrupt
from checker.verdict import Verdict, exit_code


def cmd_check_parallel(args: Any) -> int:
    from model.designs import PRESETS

    from checker.cli.common import build_design, refuse_unshipped, validate_selection

    designs = list(PRESETS) if args.all else [args.design]
    built = [build_design(d, args.without, args.with_, args.mutant) for d in designs]  # validates names (UsageError)
    props, configs = validate_selection(args)
    refuse_unshipped(args, built)
    from checker.cli.executor import executor_for

    with executor_for(args) as ex:  # `--executor ray`: the jobs are tasks on the cluster (checker/cli/review.py)
        return _check_jobs(args, designs, built, props, configs, ex)


def _check_jobs(args: Any, designs: list[str], built_designs: list[Any], props: list[str], configs: list[str],
                ex: Any) -> int:
    from checker.cli.common import JobsProgress, Lines, timeout_ms, warn
    from checker.cli.review import Job, Side, run_jobs

    from specs.configs import CONFIGS

    n = ex.capacity() if ex is not None else args.jobs or os.cpu_count() or 1
    # (design, config) pairs whose release does not ship the config's mechanism: named, not checked
    unshipped = [{"design": d, "config": c, "why": CONFIGS[c].not_modelled_by(b)}
                 for d, b in zip(designs, built_designs) for c in configs if CONFIGS[c].not_modelled_by(b)]
    jobs = [Job(Side("", d, tuple(args.without), tuple(args.with_), tuple(args.mutant)), c, tuple(props), args.depth,
                args.engine, not args.no_prove, timeout_ms(args.timeout), args.out, not args.no_minimize,
                without_lemmas=tuple(args.without_lemma), examples=args.examples)
            for d, built in zip(designs, built_designs) for c in configs if not CONFIGS[c].not_modelled_by(built)]
    lines = Lines("none" if args.json and args.progress == "text" else args.progress)
    if args.depth >= 6 and (args.all or not args.config) and lines.enabled:
        warn(f"kvmc check runs {len(jobs)} (design, config) checks to depth {args.depth}, {min(n, len(jobs))} at a time; "
             "this takes tens of minutes (--config NAME and --depth N narrow it; Ctrl-C stops it with the checks finished)")
    interrupt.quiet_z3()
    tracker = JobsProgress(lines, len(jobs), n, "checks") if lines.enabled else None
    if tracker is not None and ex is not None:
        tracker.alive = ex.alive
    from checker.cli.common import Heartbeat, beat_every, say_interrupted

    try:
        with Heartbeat(lambda: tracker.report(live=lines.tty) if tracker else None, beat_every(lines)):
            results = run_jobs(jobs, n, tracker)
    except interrupt.Interrupted as e:
        lines.end()
        done = e.done or []
        print(render(done, args.depth, args.engine, n,
                     f"kvmc check interrupted by {e.name}: {len(done)} of {len(jobs)} (design, config) checks finished"))
        say_interrupted(f"kvmc: interrupted by {e.name}: {len(done)} of {len(jobs)} checks finished")
        return e.exit_code
    lines.end()
    verdicts = [Verdict(r["verdict"]) for res in results for r in res["results"].values()]
    if args.json:
        print(json.dumps({"depth": args.depth, "engine": args.engine, "jobs": n, "not_applicable": unshipped,
                          "checks": [{k: v for k, v in res.items() if k != "side"} | {"results": {
                              p: {k: v for k, v in d.items() if k != "step_table"} for p, d in res["results"].items()}}
                                     for res in results]}, indent=1))
    else:
        print(render(results, args.depth, args.engine, n))
        for u in unshipped:
            print(f"not checked: {u['config']} on {u['design']} ({u['why']})")
    return exit_code(verdicts)


def render(results: list[dict[str, Any]], depth: int, engine: str, n: int, header: str = "") -> str:
    from checker.cli.review import render_jobs

    return render_jobs([{k: v for k, v in r.items() if k != "side"} for r in results],
                       header or f"kvmc check: {len(results)} (design, config) checks, engine {engine}, depth {depth}, {n} processes")
