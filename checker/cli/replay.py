"""`kvmc replay FILE...`: the command line of the pool replay (checker/replay/pool.py says what a
replay checks). Exit status: 0 every file behaves as recorded; 1 some file diverged; 2 bad input."""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any

from checker.replay.pool import DIVERGED, ERROR, NOT_REPLAYABLE, Outcome, read_trace, replay_trace
from upstream.devices import check_device  # the one device check, shared with kvmc conform


def expand(patterns: list[str]) -> list[str]:
    out: list[str] = []
    for p in patterns:
        if any(c in p for c in "*?["):
            hits = sorted(glob.glob(p, recursive=True))
            out.extend(hits or [p])
        elif Path(p).is_dir():
            out.extend(sorted(str(f) for f in Path(p).rglob("*.itf.json")))
        else:
            out.append(p)
    return out


def exit_status(outcomes: list[Outcome]) -> int:
    if any(o.status in (ERROR, NOT_REPLAYABLE) for o in outcomes):
        return 2
    if any(o.status == DIVERGED for o in outcomes):
        return 1
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    import json

    if getattr(args, "against", None):  # on SGLang's own scheduler (upstream/sched/replay.py)
        files = expand(args.files)
        if not files:
            print("kvmc: error: no trace files given (expected FILE.itf.json ...)", file=sys.stderr)
            return 2
        from upstream import replay_explored

        if replay_explored.wanted(args.against, files):  # an explore trace, or a source tree named
            return replay_explored.cmd_replay_explored(args, files)
        from upstream.sched.replay import cmd_replay_against

        return cmd_replay_against(args, files)
    if getattr(args, "revert", None):
        print("kvmc: error: --revert FIX needs --against sglang==VERSION (a fix is reverted inside a release)", file=sys.stderr)
        return 2
    try:
        device = check_device(args.device, available=False)
    except ValueError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return 2
    files = expand(args.files)
    if not files:
        print("kvmc: error: no trace files given (expected FILE.itf.json ...)", file=sys.stderr)
        return 2
    # every file read and validated first (checker/traces/itf.py): bad input is exit 2, before torch
    read = [(f, read_trace(f)) for f in files]
    if device != "cpu" and any(not isinstance(t, Outcome) for _f, t in read):
        try:
            check_device(device)
        except ValueError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return 2
    outcomes = [t if isinstance(t, Outcome) else replay_trace(t, device, f, check_model=False) for f, t in read]
    if getattr(args, "json", False):
        print(json.dumps([o.__dict__ for o in outcomes], indent=1, default=str))
    else:
        for o in outcomes:  # bad input as `kvmc: error: FILE: where: what` (one line), like every subcommand
            print(("kvmc: error: " if o.status == ERROR else "") + o.line(), file=sys.stdout if o.ok else sys.stderr)
        steps = sum(o.steps for o in outcomes)
        secs = sum(o.seconds for o in outcomes)
        ok = sum(o.ok for o in outcomes)
        print(f"{ok}/{len(outcomes)} behave as recorded ({steps} steps on {device} in {secs:.2f}s)")
    return exit_status(outcomes)


def add_parser(sub: Any) -> None:
    pr = sub.add_parser("replay", help="replay counterexamples on the torch pool (refinement check)")
    pr.add_argument("files", nargs="+", metavar="FILE", help="ITF traces (globs and directories allowed)")
    pr.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    pr.add_argument("--json", action="store_true", help="one JSON object per file on stdout")
    pr.add_argument("--against", metavar="sglang==VERSION",
                    help="replay on SGLang's own scheduler of that release instead of the pool (upstream/sched/); "
                         "a trace `kvmc explore` wrote also on a source folder or CHECKOUT@REF (upstream/replay_explored.py)")
    pr.add_argument("--revert", action="append", default=[], metavar="FIX",
                    help="with --against: revert this fix inside the release (SGLang's source_patcher; repeatable)")
    pr.add_argument("--dir", help="with --against: SGLang install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    pr.add_argument("--install", action="store_true", help="with --against: install the release first")
    pr.set_defaults(fn=cmd_replay)
