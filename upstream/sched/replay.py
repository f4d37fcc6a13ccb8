"""`kvmc replay --against sglang==V [--revert FIX]... FILE...` and `kvmc check --confirm sglang==V`
(parent side: reads and checks the traces, plans each one, runs one worker subprocess for the
release, prints the outcomes).

Outcomes, as `kvmc replay` on the pool: `reproduced` (the release before the fix, or with it
reverted, follows the trace step for step and fails the same way), `passed` (the release with the
fix runs the trace's events and the property holds at every step), `diverged at step N` (the first
difference, side by side), `not replayable` (why: EAGLE needs the draft model, a choice that
cannot be forced, ...), `error` (an unreadable or corrupt trace). Each step's line shows SGLang's
own busy / idle check verdict beside kvmc's properties and the ledger on SGLang's objects.

Exit status: 0 every file behaves as planned; 1 some file diverged; 2 bad input (unknown release,
no adapter, release not installed, a revert that does not apply, unreadable trace, not
replayable). Nothing is written.

A trace `kvmc explore` wrote is no model trace: upstream/replay_explored.py re-runs its events
(checker/cli/replay.py dispatches there) and reports in this module's words (`line`, `report`,
`exit_status`: an outcome may carry `as_planned`).

The scheduler module imports `setproctitle`, `fastapi` and `uvicorn`, which the memory-path imports
of `kvmc sglang install` do not need: they go into their own folder beside the releases
(`sched-deps-<hash>`, pinned, `--no-deps`, atomic like upstream/install.py), installed by
`--install` or `install_extras`.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import serve
from ..errors import EXIT_USAGE, UpstreamUsageError
from ..install import (
    MARKER,
    _atomic_folder,
    _pip,
    _pip_error,
    default_dir,
    install,
    release_env,
    release_path,
)
from . import releases

REPO = Path(__file__).resolve().parents[2]
SCHED_DEPS = ("setproctitle==1.3.8", "fastapi==0.140.0", "annotated-doc==0.0.7", "uvicorn==0.54.0", "click==8.5.1")
REPRODUCED, PASSED, DIVERGED, ERROR, NOT_REPLAYABLE = "reproduced", "passed", "diverged", "error", "not replayable"


# -- the scheduler module's extra dependencies ------------------------------------------------------------
def extras_dir(root: Path) -> Path:
    key = hashlib.sha256("\n".join(SCHED_DEPS).encode()).hexdigest()[:10]
    return root / f"sched-deps-{key}"


def install_extras(root: Path, say: Callable[[str], None] = print) -> Path:
    d = extras_dir(root)
    if (d / MARKER).exists():
        return d
    say(f"installing the scheduler module's {len(SCHED_DEPS)} extra dependencies into {d}")
    root.mkdir(parents=True, exist_ok=True)

    def fill(tmp: Path) -> None:
        p = _pip(["--target", str(tmp), *SCHED_DEPS])
        if p.returncode != 0:
            raise UpstreamUsageError(f"could not install the scheduler's dependencies into {d}: {_pip_error(p)}")

    _atomic_folder(d, fill)
    return d


def worker_path(root: Path, version: str) -> list[str]:
    """sys.path for the worker: the release, its dependencies, the scheduler extras, the stubs."""
    path = release_path(root, version)
    extras = extras_dir(root)
    if not (extras / MARKER).exists():
        raise UpstreamUsageError(f"the scheduler module's dependencies ({', '.join(SCHED_DEPS)}) are not installed under "
                                 f"{extras}; run `kvmc replay --against sglang=={version} --install ...`")
    return [path[0], path[1], str(extras), *path[2:]]


# -- traces -------------------------------------------------------------------------------------------------
def _read(file: str) -> tuple[Any, str | None]:
    """The parsed trace, or None and why it is bad input (unreadable, or the model does not follow it)."""
    from checker.traces import itf
    from checker.traces.itf import ItfError
    from checker.traces.trace import TraceMismatch, run_concrete
    from model.system import System

    try:
        trace = itf.read(file)
    except ItfError as e:
        return None, str(e)
    try:
        run_concrete(System(trace.cfg, trace.design), trace.params, trace.actions, expected=trace.states, check_frames=False)
    except TraceMismatch as e:
        return None, (f"{file}: state {e.step} field {e.field}: the trace records {e.recorded!r} but the model computes "
                      f"{e.concrete!r}: the trace was edited or corrupted (regenerate it with kvmc check)")
    except (ValueError, TypeError, ArithmeticError, IndexError, KeyError) as e:
        return None, f"{file}: the model cannot run this trace ({type(e).__name__}: {e})"
    return trace, None


def _plan_file(f: str, version: str, reverts: list[str]) -> tuple[Any, str | None]:
    """(plan, None), or (None, why the file is bad input). What no real scheduler can run is
    decided first (it needs no model re-run); the rest must be a trace the model follows."""
    from checker.traces import itf
    from checker.traces.itf import ItfError

    try:
        trace = itf.read(f)
    except ItfError as e:
        return None, str(e)
    pl = releases.plan(trace, version, reverts)
    if pl.mode == NOT_REPLAYABLE:
        return pl, None
    trace, bad = _read(f)
    return (pl, None) if trace is not None else (None, bad)


# -- running a release --------------------------------------------------------------------------------------
def run_worker(version: str, jobs: list[dict[str, Any]], root: Path, timeout: float | None = None) -> dict[str, Any]:
    env = release_env(worker_path(root, version))  # cpu: SGLang's scheduler runs as on a GPU-less host
    cmd = [sys.executable, "-W", "ignore", "-m", "upstream.sched.worker"]
    if serve.active() and timeout is None:  # the release's server of `serve.shared_workers()`: the same jobs
        out, rc, err = serve.ask([*cmd, "--serve"], env, str(REPO), {"version": version, "jobs": jobs})
        if rc != 0 or out is None:
            tail = "\n".join(err.strip().splitlines()[-15:])
            return {"version": version, "error": f"the replay worker exited {rc}:\n{tail}"}
        return out
    job = json.dumps({"version": version, "jobs": jobs})
    p = subprocess.run(cmd, input=job, capture_output=True, text=True, env=env, cwd=str(REPO), timeout=timeout, check=False)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = "\n".join(p.stderr.strip().splitlines()[-15:])
        return {"version": version, "error": f"the replay worker exited {p.returncode}:\n{tail}"}
    return json.loads(lines[-1])


def replay(version: str, files: Sequence[str], reverts: Sequence[str] = (), root: Path | None = None,
           do_install: bool = False, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict[str, Any]:
    """Plan and run `files` on SGLang `version` with `reverts` applied; returns {"version", "label",
    "outcomes": [...]}. Bad input raises UpstreamUsageError before anything runs."""
    return replay_items(version, [(f, tuple(reverts)) for f in files], root, do_install, say)


def replay_items(version: str, items: Sequence[tuple], root: Path | None = None,
                 do_install: bool = False, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr)) -> dict[str, Any]:
    """Like `replay`, each file with its own reverts, all in one worker process (SGLang is imported
    once; each revert is applied for its trace and undone after it). An item is (file, reverts) or
    (file, reverts, mode): `mode` ("reproduce" / "events") overrides the plan (tests run a trace's
    events without forcing, to show what forcing changes)."""
    root = Path(root) if root is not None else default_dir()
    releases.adapter(version)
    items = [(it[0], tuple(it[1]), it[2] if len(it) > 2 else None) for it in items]
    for _f, rv, _m in items:
        releases.check_reverts(version, list(rv))
    if do_install:
        install([version], root, say=say)
        install_extras(root, say=say)
    worker_path(root, version)  # not installed: one line, exit 2, before anything runs
    labels = {rv: releases.label(version, list(rv)) for _f, rv, _m in items}
    outcomes: list[dict[str, Any] | None] = []
    jobs: list[dict[str, Any]] = []
    index: list[int] = []
    for f, rv, mode in items:
        label = labels[rv]
        pl, bad = _plan_file(f, version, list(rv))
        if pl is not None and mode is not None and pl.mode != NOT_REPLAYABLE:
            pl = releases.Plan(mode, f"{pl.why} (mode {mode} asked)")
        if pl is None:
            outcomes.append({"file": f, "status": ERROR, "message": bad, "table": [], "detail": [], "label": label})
            continue
        if pl.mode == NOT_REPLAYABLE:
            outcomes.append({"file": f, "status": NOT_REPLAYABLE, "message": pl.why, "table": [], "detail": [],
                             "mode": pl.mode, "label": label})
            continue
        index.append(len(outcomes))
        outcomes.append(None)
        jobs.append({"file": f, "mode": pl.mode, "label": label, "why": pl.why, "reverts": list(rv)})
    t0 = time.time()
    single = next(iter(labels.values())) if len(labels) == 1 else version
    res: dict[str, Any] = {"version": version, "label": single, "outcomes": outcomes}
    if jobs:
        out = run_worker(version, jobs, root)
        if "error" in out:
            raise UpstreamUsageError(f"SGLang {version}: {out['error']}")
        for i, j, o in zip(index, jobs, out["outcomes"]):
            o["why"] = j["why"]
            outcomes[i] = o
        res["import_seconds"] = out.get("import_seconds")
    res["seconds"] = round(time.time() - t0, 1)
    return res


# -- reporting -------------------------------------------------------------------------------------------------
def line(o: dict[str, Any]) -> str:
    f = o["file"]
    st = o["status"]
    if st == DIVERGED and o.get("field") is None:  # an explore trace: no model state to set beside SGLang's
        return f"{f}: diverged" + (f" at step {o['step']}" if o.get("step") else "") + f": {o['message']}"
    if st == DIVERGED:
        head = f"{f}: diverged at step {o['step']}: {o['field']}: model={o['model']!r}, sglang={o['sglang']!r}"
        return head + (f" ({o['message']})" if o.get("message") else "")
    if st in (ERROR, NOT_REPLAYABLE):
        return f"{f}: {st}: {o['message']}"
    return f"{f}: {st} ({o['message']})" if o.get("message") else f"{f}: {st}"


def _as_planned(o: dict[str, Any]) -> bool:
    return o.get("as_planned", o["status"] in (REPRODUCED, PASSED))


def exit_status(outcomes: Sequence[dict[str, Any]]) -> int:
    if any(o["status"] in (ERROR, NOT_REPLAYABLE) for o in outcomes):
        return EXIT_USAGE
    if any(o["status"] == DIVERGED or not _as_planned(o) for o in outcomes):
        return 1
    return 0


def report(res: dict[str, Any], steps: bool = True) -> str:
    out = [f"SGLang {res['label']}"]
    for o in res["outcomes"]:
        out.append(line(o))
        for r in o.get("reverted", []):
            out.append(f"  reverted with SGLang's source_patcher: {r}")
        if o.get("why") and o["status"] not in (ERROR, NOT_REPLAYABLE):
            out.append(f"  plan: {o['why']}")
        if steps:
            out.extend("  " + t for t in o.get("table", []))
        out.extend("  " + d for d in o.get("detail", []))
    ok = sum(_as_planned(o) for o in res["outcomes"])
    out.append(f"{ok}/{len(res['outcomes'])} behave as planned on SGLang {res['label']}"
               + (f" ({res['seconds']:.1f} s, imports {res.get('import_seconds')} s)" if res.get("import_seconds") else ""))
    return "\n".join(out)


def cmd_replay_against(args: Any, files: Sequence[str]) -> int:
    """The `kvmc replay --against` entry (checker/cli/replay.py dispatches here lazily)."""
    device = getattr(args, "device", "cpu") or "cpu"
    if device != "cpu":  # the scheduler-level replay builds SGLang's Scheduler on cpu only
        print(f"kvmc: error: --device {device} with --against: the replay on SGLang's own scheduler runs on cpu only "
              "(upstream/sched/); drop --device, or use `kvmc conform --device cuda` for SGLang's CUDA path", file=sys.stderr)
        return EXIT_USAGE
    try:
        version = releases.parse_against(args.against)
        res = replay(version, files, getattr(args, "revert", None) or (), Path(args.dir) if getattr(args, "dir", None) else None,
                     bool(getattr(args, "install", False)))
    except UpstreamUsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "json", False):
        print(json.dumps(res, indent=1, default=str))
    else:
        print(report(res))
    return exit_status(res["outcomes"])


# -- kvmc check --confirm sglang==V ----------------------------------------------------------------------------
def check_confirm(values: Sequence[str], root: Path | None = None) -> None:
    """`--confirm` values are checked before the search: a release with an adapter, installed."""
    root = Path(root) if root is not None else default_dir()
    for v in values:
        version = releases.parse_against(v)
        releases.adapter(version)
        worker_path(root, version)


def confirm_note(trace: Any, against: str, root: Path | None = None) -> str:
    """One phrase for `kvmc check`'s report on a counterexample it just found: reproduced on the
    release (or why not). The trace is written to a temporary file for the worker."""
    import tempfile

    from checker.traces import itf

    try:
        version = releases.parse_against(against)
        releases.adapter(version)
        root = Path(root) if root is not None else default_dir()
        worker_path(root, version)
    except UpstreamUsageError as e:
        return f"not confirmed on SGLang: {e}"
    pl = releases.plan(trace, version, [])
    if pl.mode == NOT_REPLAYABLE:
        return f"not confirmed on SGLang {version}: not replayable: {pl.why}"
    with tempfile.TemporaryDirectory(prefix="kvmc-confirm-") as d:
        f = str(Path(d) / "trace.itf.json")
        itf.write(f, trace, {"verdict": "violated", "expected": "violation"})  # kvmc check found it violated
        out = run_worker(version, [{"file": f, "mode": pl.mode, "label": version, "reverts": []}], root)
    if "error" in out:
        return f"not confirmed on SGLang {version}: {out['error'].splitlines()[-1]}"
    o = out["outcomes"][0]
    if o["status"] == REPRODUCED:
        return f"confirmed on SGLang {version} ({pl.why})"
    if o["status"] == PASSED:
        return f"SGLang {version} has the fix: {o['message']}"
    if o["status"] == DIVERGED:
        return f"NOT confirmed on SGLang {version}: diverged at step {o['step']}: {o['field']}: model={o['model']!r}, sglang={o['sglang']!r}"
    return f"not confirmed on SGLang {version}: {o['status']}: {o['message']}"

