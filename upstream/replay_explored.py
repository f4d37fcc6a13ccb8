"""`kvmc replay --against SGLANG TRACE...` on the traces `kvmc explore` writes (parent side: reads
the traces, plans each one, runs one worker subprocess, prints the outcomes in the words of
upstream/sched/replay.py; checker/cli/replay.py dispatches here when a file is an explore trace or
SGLANG names a source tree).

An explore trace (`#meta.explore`: its events are kvmc's, every other choice was SGLang's) is no
model trace: nothing is forced and no model state is compared. Its events are re-run on the SGLang
`--against` names, a release (`sglang==V`, `==V`, `V`), a source folder or a commit
(`CHECKOUT@REF`, upstream/source.py), with `--revert` applied, as explore re-runs a shrunk walk
(upstream/sched/explore.py::replay_trace), and its property is judged after every iteration:

    reproduced   it fails, at the recorded last step or earlier
    passed       it holds at every step; the first step whose mapped state departs from the
                 recorded one is shown (the change at work)
    diverged     SGLang's scheduler died another way, or raised what no property names

The plan comes from where the trace was explored (`#meta.explore.target` and `reverted`; older
traces: `explored_on`): on that same SGLang (the same release, folder or commit, the same reverts)
it must be `reproduced`; on any other it is planned `passed`, so a failure that reproduces there is
exit 1, as `kvmc explore` finding it there would be. Exit status: 0 every trace behaves as
planned, 1 one does not, 2 bad input (one line). Model traces in the same command replay as
`kvmc replay --against` replays them, on a release only.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from model.designs import FIXES

from .errors import EXIT_USAGE, UpstreamUsageError
from .install import default_dir, install, release_env
from .sched import releases
from .sched.replay import (
    DIVERGED,
    ERROR,
    PASSED,
    REPO,
    REPRODUCED,
    exit_status,
    install_extras,
    replay,
    report,
)


def is_explore_trace(f: str) -> bool:
    """A trace `kvmc explore` wrote (False for a model trace, and for a file that does not read: the
    model replay reports it)."""
    from checker.traces import itf
    from checker.traces.itf import ItfError

    try:
        return "explore" in itf.read(f, check=False, warn=False).meta
    except ItfError:
        return False


def _release_like(spec: str) -> bool:
    s = spec.strip()
    return "==" in s or s.startswith("sglang") or bool(re.fullmatch(r"v?\d+\.\d+\.\d+(\.post\d+)?", s))


def against_target(spec: str, trees: Any) -> Any:
    """`--against` for explore traces: `sglang==V`, `==V` or `V` (a release), a source folder, or
    `CHECKOUT@REF` (upstream/source.py::target)."""
    from .source import release_target, tree_target

    s = spec.strip()
    for lead in ("sglang==", "=="):
        if s.startswith(lead):
            return release_target("==" + s[len(lead):], "--against")
    if s.startswith("sglang") or "==" in s:
        raise UpstreamUsageError(f"--against {spec!r}: expected sglang==VERSION, e.g. sglang==0.5.11")
    if _release_like(s):
        return release_target("==" + s, "--against")
    return tree_target(s, "--against", trees)


def _recorded(meta: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Where an explore trace was found: (the target's record, the fixes reverted)."""
    ex = meta.get("explore") or {}
    t = ex.get("target")
    if t is None:  # written before the target was recorded: read `explored_on`
        on = str(meta.get("explored_on", ""))
        if on.startswith("sglang=="):
            t = {"version": on[len("sglang=="):], "source": None, "commit": None}
        else:
            t = {"version": on.rsplit("(", 1)[-1].rstrip(")"), "source": on[len("sglang source "):].rsplit(" (", 1)[0],
                 "commit": None}
    return t, [r.split(" ")[0] for r in ex.get("reverted", [])]


def _same(rec: dict[str, Any], t: Any) -> bool:
    """The recorded SGLang is `t`: the same commit, the same folder, or the same release."""
    if rec.get("commit") or t.commit:
        return rec.get("commit") == (t.commit or None)
    if rec.get("source") or t.source:
        return bool(rec.get("source") and t.source) and os.path.realpath(rec["source"]) == os.path.realpath(t.source)
    return rec.get("version") == t.version


def _where(rec: dict[str, Any], reverted: list[str]) -> str:
    if rec.get("ref"):
        on = f"{rec['ref']} (commit {str(rec.get('commit'))[:12]})"
    elif rec.get("source"):
        on = f"source {rec['source']}"
    else:
        on = f"sglang=={rec.get('version')}"
    return on + (f" with {', '.join(reverted)} reverted" if reverted else "")


def replay_explored(target: Any, files: Sequence[str], reverts: Sequence[str], root: Path) -> dict[str, Any]:
    """Re-run explore traces on `target` (upstream/source.py::Target) with `reverts`: the result
    document of `replay` ({"label", "outcomes", ...}), each outcome with its plan and `as_planned`.
    Bad input raises UpstreamUsageError before anything runs."""
    from checker.traces import itf
    from checker.traces.itf import ItfError

    from .sched.explore import PROPS
    from .source import worker_path as target_worker_path

    reverts = list(reverts)
    releases.check_reverts(target.release, reverts)
    path = target_worker_path(root, target)  # not installed: one line, exit 2
    label = target.label().removeprefix("SGLang ") + (
        " with " + ", ".join(f"#{FIXES[f].pr} ({f})" for f in reverts) + " reverted" if reverts else "")
    outcomes: list[dict[str, Any] | None] = []
    jobs: list[dict[str, Any]] = []
    index: list[int] = []
    for f in files:
        try:
            tr = itf.read(f, check=False, warn=False)
        except ItfError as e:
            outcomes.append({"file": f, "status": ERROR, "message": str(e), "table": [], "detail": [], "label": label})
            continue
        if tr.prop not in PROPS:
            outcomes.append({"file": f, "status": ERROR, "message": f"property {tr.prop!r}: explore checks "
                             f"{', '.join(PROPS)}", "table": [], "detail": [], "label": label})
            continue
        rec, was_reverted = _recorded(tr.meta)
        same = _same(rec, target) and sorted(was_reverted) == sorted(reverts)
        where = _where(rec, was_reverted)
        why = (f"explored on this SGLang ({where}): its events must fail {tr.prop} again" if same else
               f"explored on {where}; on SGLang {label} its events must not fail {tr.prop} "
               f"(exit 1 when they do: the failure reproduces here)")
        index.append(len(outcomes))
        outcomes.append(None)
        jobs.append({"file": f, "property": tr.prop, "reverts": reverts, "depth": len(tr.steps),
                     "progress_bound": int((tr.meta.get("explore") or {}).get("progress_bound", 4)),
                     "mode": "reproduce" if same else "events", "why": why})
    t0 = time.time()
    res: dict[str, Any] = {"version": target.version, "label": label, "outcomes": outcomes}
    if jobs:
        env = release_env(path)
        job = {"version": target.release, "source": target.source, "traces": jobs}
        p = subprocess.run([sys.executable, "-W", "ignore", "-m", "upstream.sched.explore", "--replay"],
                           input=json.dumps(job), capture_output=True, text=True, env=env, cwd=str(REPO), check=False)
        lines = p.stdout.strip().splitlines()
        out = json.loads(lines[-1]) if p.returncode == 0 and lines else \
            {"error": f"the replay worker exited {p.returncode}: " + "\n".join(p.stderr.strip().splitlines()[-15:])}
        if "error" in out:
            raise UpstreamUsageError(f"SGLang {label}: {out['error']}")
        for i, j, o in zip(index, jobs, out["outcomes"]):
            outcomes[i] = _explored_outcome(j, o, label)
        res["import_seconds"] = out.get("import_seconds")
    res["seconds"] = round(time.time() - t0, 1)
    return res


def _explored_outcome(j: dict[str, Any], o: dict[str, Any], label: str) -> dict[str, Any]:
    n, prop = j["depth"], j["property"]
    base = {"file": j["file"], "mode": j["mode"], "why": j["why"], "label": label, "reverted": o.get("reverted", []),
            "table": o.get("table", []), "detail": [], "step": None, "field": None, "explored": True}
    if "error" in o:
        return dict(base, status=ERROR, message=o["error"], as_planned=False)
    if "crash" in o:
        return dict(base, status=DIVERGED, message=o["crash"], as_planned=False)
    d = o.get("departs")
    if d is not None:
        base["detail"] = [f"SGLang departs from the recorded run first at step {d['step']}: {d['field']}: "
                          f"recorded={d['recorded']!r}, sglang={d['sglang']!r}"]
    if o["failed_at"] is not None:
        k = o["failed_at"]
        when = f"at step {k}" + ("" if k == n else f" of {n} (earlier than recorded)")
        st = dict(base, status=REPRODUCED, step=k, message=f"{prop} fails {when}: {o['evidence']}")
    elif o.get("ended"):
        st = dict(base, status=DIVERGED, step=o["steps"], message=f"{o['ended']}; {prop} held until then")
    else:
        st = dict(base, status=PASSED, message=f"{prop} holds at every one of the {n} steps")
    st["as_planned"] = st["status"] == (REPRODUCED if j["mode"] == "reproduce" else PASSED)
    return st


def wanted(against: str, files: Sequence[str]) -> bool:
    """This module answers `kvmc replay --against`: an explore trace among the files, or a source tree named."""
    return not _release_like(against) or any(is_explore_trace(f) for f in files)


def cmd_replay_explored(args: Any, files: Sequence[str]) -> int:
    """`kvmc replay --against` with explore traces among the files (or a source tree named): those
    re-run on that SGLang (`replay_explored`), the model traces as `replay` runs them (a release only)."""
    device = getattr(args, "device", "cpu") or "cpu"
    if device != "cpu":  # the hollow scheduler runs on cpu only
        print(f"kvmc: error: --device {device} with --against: the replay on SGLang's own scheduler runs on cpu only "
              "(upstream/sched/); drop --device", file=sys.stderr)
        return EXIT_USAGE
    with contextlib.ExitStack() as trees:  # a CHECKOUT@REF tree lives as long as the replay
        try:
            target = against_target(args.against, trees)
            root = Path(args.dir) if getattr(args, "dir", None) else default_dir()
            if getattr(args, "install", False) and target.source is None:
                install([target.version], root)
                install_extras(root)
            ex = [f for f in files if is_explore_trace(f)]
            model = [f for f in files if f not in ex]
            if model and target.source is not None:
                raise UpstreamUsageError(f"{model[0]}: a model trace replays on an installed release (--against "
                                         f"sglang==VERSION), not on the source tree {args.against!r}")
            res = replay_explored(target, ex, getattr(args, "revert", None) or (), root)
            if model:
                mres = replay(target.version, model, getattr(args, "revert", None) or (), root)
                res["outcomes"] += mres["outcomes"]
                res["seconds"] = round(res["seconds"] + mres["seconds"], 1)
        except UpstreamUsageError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        order = {f: i for i, f in enumerate(files)}
        res["outcomes"].sort(key=lambda o: order.get(o["file"], len(order)))
        if getattr(args, "json", False):
            print(json.dumps(res, indent=1, default=str))
        else:
            print(report(res))
        return exit_status(res["outcomes"])
