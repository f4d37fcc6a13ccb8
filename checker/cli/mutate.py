"""`kvmc mutate`: mutation testing of the model with kvmc's own engines (checker/mutation/).

    kvmc mutate --module allocator --budget 60 --seed 1
    kvmc mutate --per-module 5 --budget 300 --markdown docs/mutants-generated.md --save bench/mutation.json
    kvmc mutate --list --module session
    kvmc mutate --transition _token_gates --transition decode_tokens_needed --budget 120 --jobs 2
    kvmc mutate --design v0.5.10.post1 --transition cache_unfinished_req --conform 0.5.10.post1

Exit status: 0 when every mutant was run (whatever survived), 1 with `--fail-under RATE` when the
kill rate is below it, 2 on bad input, 130 on Ctrl-C (every child process is stopped first).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from specs.configs import CONFIGS

from checker import interrupt
from checker.cli.common import UsageError


def _write(path: str, text: str) -> None:
    """Atomically: nothing half-written if the run is stopped."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _check_writable(path: str | None, flag: str) -> None:
    if path is None:
        return
    parent = Path(path).resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {path!r}: its folder {str(parent)!r} does not exist or is not writable; give a writable path")


def _report(args: argparse.Namespace, outcomes: list[Any], configs: list[str], seconds: float,
            partial: str = "") -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The kill tables and the JSON report of `outcomes`, written to --save and --markdown
    (atomically); `partial` says why they are not every selected mutant."""
    from checker.mutation.mutate import render_markdown, summary

    argv = " ".join(sys.argv[1:]) if sys.argv[1:2] == ["mutate"] else "mutate ..."
    rows = summary(outcomes, lambda o: o.module)
    data = dict(command=f"kvmc {argv}", design=args.design, budget_s=args.budget, seed=args.seed, configs=configs,
                seconds=round(seconds, 1),
                machine=f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end",
                partial=partial or None, by_module=rows, outcomes=[o.as_dict() for o in outcomes])
    if args.save:
        _write(args.save, json.dumps(data, indent=1) + "\n")
    if args.markdown:
        md = render_markdown(outcomes, args.budget, data["command"], data["machine"])
        _write(args.markdown, (f"**Partial: {partial}.**\n\n" if partial else "") + md + "\n")
    return rows, data


def cmd_mutate(args: argparse.Namespace) -> int:
    from checker.mutation.mutate import mutate, render_text, select
    from checker.mutation.operators import OPERATORS, transitions

    if args.module is not None and not transitions(args.module):
        mods = sorted({t.fn.__module__.split(".", 1)[1] for t in transitions().values()})
        raise UsageError(f"unknown module {args.module!r} (no transition in model/{args.module}.py); expected one of: "
                         f"{', '.join(mods)}")
    for name in args.transition:
        if name not in transitions(args.module):
            where = f" of model/{args.module}.py" if args.module else ""
            raise UsageError(f"unknown transition {name!r}{where}; expected one of: {', '.join(sorted(transitions(args.module)))}"
                             " (kvmc list)")
    for c in args.config:
        if c not in CONFIGS:
            raise UsageError(f"unknown config {c!r}; expected one of: {', '.join(CONFIGS)}")
    for op in args.operator:
        if op not in OPERATORS:
            raise UsageError(f"unknown operator {op!r}; expected one of: {', '.join(OPERATORS)}")
    for name, v, lo in (("--budget", args.budget, 1), ("--jobs", args.jobs, 1), ("--max-mutants", args.max_mutants, 1),
                        ("--per-module", args.per_module, 1)):
        if v is not None and v < lo:
            raise UsageError(f"{name}={v} must be at least {lo}")
    if args.fail_under is not None and not 0 <= args.fail_under <= 1:
        raise UsageError(f"--fail-under={args.fail_under} must be a fraction between 0 and 1")
    from model.designs import PRESETS, sglang_release

    if args.design not in PRESETS:
        raise UsageError(f"unknown design {args.design!r}; expected a preset: {', '.join(PRESETS)} (kvmc list)")
    if args.conform_examples < 1:
        raise UsageError(f"--conform-examples={args.conform_examples} must be at least 1")
    if args.conform is not None:
        from upstream.errors import UpstreamUsageError
        from upstream.install import default_dir, release_path
        from upstream.releases import release

        try:
            if release(args.conform).api is None:
                raise UpstreamUsageError(f"SGLang {args.conform}: the conformance harness has no adapter for it")
            release_path(default_dir(), args.conform)
        except UpstreamUsageError as e:
            raise UsageError(f"--conform {args.conform}: {e}") from None
        if args.conform != sglang_release(args.design):
            raise UsageError(f"--conform {args.conform} with --design {args.design}: conformance runs a preset against its "
                             f"own release; give --conform {sglang_release(args.design)}")
    _check_writable(args.save, "--save")
    _check_writable(args.markdown, "--markdown")
    cache = None
    if args.baseline_cache is not None:
        from checker.mutation.baseline_cache import BaselineCache

        try:
            cache = BaselineCache(args.baseline_cache)
        except ValueError as e:
            raise UsageError(str(e)) from None
    try:
        ms = select(args.module, args.seed, args.max_mutants, tuple(args.operator) or OPERATORS, args.mutant or None,
                    args.per_module, args.transition or None)
    except KeyError as e:
        raise UsageError(str(e.args[0])) from None
    if args.list:
        if args.json:
            print(json.dumps([m.as_dict() for m in ms], indent=1))
        else:
            for m in ms:
                print(f"{m.id:50s} {m.describe()}")
        return 0
    if not ms:
        raise UsageError(f"no mutant selected (module {args.module!r}, transitions {args.transition or 'all'}, "
                         f"operators {args.operator or 'all'})")
    configs = args.config or list(CONFIGS)
    quiet = args.json or args.no_progress
    t0 = time.perf_counter()
    outcomes: list[Any] = []
    try:
        mutate(ms, configs, args.budget, args.jobs, args.equiv_timeout, args.divergence_time,
               progress=None if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True)), into=outcomes,
               cache=cache, conform=args.conform, conform_examples=args.conform_examples, design=args.design)
    except interrupt.Interrupted as e:  # every child is stopped by now: report the mutants settled so far
        done = [o for o in outcomes if o.status != "pending"]
        for o in done:  # a survivor the interrupt caught before its classification
            if o.status == "survived" and not o.gap:
                o.gap, o.evidence = "unclassified", o.evidence or "not classified: the run was interrupted first"
        print(f"kvmc: interrupted by {e.name} after {len(done)} of {len(ms)} mutants; their results follow"
              + (" (and are saved, marked partial)" if args.save or args.markdown else ""), file=sys.stderr, flush=True)
        if done:  # a partial report is still a report: --save and --markdown get it, marked as such
            _report(args, done, configs, time.perf_counter() - t0, partial=f"interrupted by {e.name} after {len(done)} "
                    f"of {len(ms)} mutants")
            if not args.json:
                print(render_text(done, args.budget))
        return e.exit_code
    rows, data = _report(args, outcomes, configs, time.perf_counter() - t0)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(render_text(outcomes, args.budget))
    if args.fail_under is not None:
        k = sum(r["killed"] for r in rows)
        s = sum(r["survived"] for r in rows)
        if k + s and k / (k + s) < args.fail_under:
            return 1
    return 0


def add_parser(sub: Any) -> Any:
    """`kvmc mutate` options (called by checker/cli/app.py::parser)."""
    pm = sub.add_parser("mutate", help="mutation testing: generated mutants of model/, killed or not by kvmc's engines")
    pm.add_argument("--module", default=None, metavar="M", help="only the transitions of model/M.py (default: every module)")
    pm.add_argument("--transition", action="append", default=[], metavar="NAME",
                    help="only the mutants of this transition (repeatable; names as `kvmc list` prints them)")
    pm.add_argument("--design", default="current", metavar="PRESET",
                    help="the preset whose transitions are mutated and checked (kvmc list; default current): a line "
                         "only older releases run is reached under theirs")
    pm.add_argument("--config", action="append", default=[], metavar="C",
                    help="only these configs (default: every config that runs the mutated line)")
    pm.add_argument("--budget", type=float, default=300.0, metavar="S", help="seconds of checking per mutant (default 300)")
    pm.add_argument("--seed", type=int, default=0, help="seed of the sample (--max-mutants, --per-module)")
    pm.add_argument("--max-mutants", type=int, default=None, metavar="K", help="a seeded sample of K mutants")
    pm.add_argument("--per-module", type=int, default=None, metavar="K", help="a seeded sample of K mutants per module")
    pm.add_argument("--operator", action="append", default=[], metavar="OP", help="only this mutation operator")
    pm.add_argument("--mutant", action="append", default=[], metavar="ID", help="only this mutant (an id from --list)")
    pm.add_argument("--jobs", type=int, default=1, help="mutants checked at once, one process each (default 1)")
    pm.add_argument("--equiv-timeout", type=float, default=60.0, metavar="S",
                    help="z3 seconds per config for a survivor's equivalence proof (default 60)")
    pm.add_argument("--divergence-time", type=float, default=60.0, metavar="S",
                    help="seconds per config to look for a survivor's first divergence (default 60)")
    pm.add_argument("--baseline-cache", default=None, metavar="DIR",
                    help="keep the model's own baseline searches here and reuse them while model/, specs/ and the "
                         "engines are unchanged (created if missing)")
    pm.add_argument("--conform", default=None, metavar="VERSION",
                    help="run the survivors through `kvmc conform` against this installed SGLang release: one that "
                         "disagrees with SGLang where the model agrees is killed by conformance")
    pm.add_argument("--conform-examples", type=int, default=100, metavar="N",
                    help="scenarios per conformance row with --conform (default 100)")
    pm.add_argument("--list", action="store_true", help="list the selected mutants and stop")
    pm.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    pm.add_argument("--save", default=None, metavar="FILE.json", help="also write the JSON report (atomically)")
    pm.add_argument("--markdown", default=None, metavar="FILE.md", help="also write the kill tables as Markdown")
    pm.add_argument("--fail-under", type=float, default=None, metavar="RATE", help="exit 1 if the kill rate is below RATE")
    pm.add_argument("--no-progress", action="store_true")
    pm.set_defaults(fn=cmd_mutate)
    return pm
