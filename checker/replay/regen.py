"""`kvmc regen`: check, and on request regenerate, the checked-in counterexamples (counterexamples/,
the regression corpus). The only command that writes there: `kvmc check` and `kvmc review` write
under a run directory (kvmc-out/ by default) and refuse an `--out` inside the corpus.

    kvmc regen              # check: every trace replays as MANIFEST.json pins it (exit 1 if not)
    kvmc regen --manifest   # rewrite MANIFEST.json from the traces on disk (after a review)
    kvmc regen --update     # re-run `kvmc check` for each known bug, then rewrite MANIFEST.json

(`python -m checker.replay.regen` takes the same options.) `--update` re-runs exactly the checks
listed in KNOWN_BUGS through `kvmc check ... --out DIR` (the traces are only ever written by kvmc
check, as `<DIR>/<design>/<config>/<property>.itf.json`), so a change of the model that changes a
verdict or a trace length shows up as a diff of the traces and of MANIFEST.json in review.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repository (this file is checker/replay/regen.py)
DEFAULT_DIR = ROOT / "counterexamples"

# (fix turned off, config, property, planted mutants): one per known SGLang bug (issue 2, acceptance 1)
KNOWN_BUGS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("chunked_swa_page_reserve", "hybrid_swa", "no_prefill_oom", ()),  # #23174
    ("swa_hostload_budget", "hybrid_swa_hicache", "no_prefill_oom", ()),  # #27391
    ("session_active", "sessions", "busy_check_sound", ()),  # #22213 / #22753
    ("retract_tail_free", "sessions", "conservation", ()),  # #22862
    ("swa_busy_check", "hybrid_swa", "busy_check_sound", ()),  # #21499
    ("spec_topk_busy_check", "spec_topk", "busy_check_complete", ("verify_keeps_rejected_page",)),  # #27228
]


def traces(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.itf.json"))


def entry(path: Path, directory: Path) -> dict[str, Any]:
    from checker.traces import itf
    from checker.replay.pool import fixed_design, replay_events, replay_trace

    t = itf.read(path)
    o = replay_trace(t, "cpu", str(path))
    fd = fixed_design(t)
    ev = replay_events(t, fd)
    off = sorted(f for f, v in t.design.fixes.items() if v is None and f in _current_on())
    return {
        "property": t.prop,
        "config": t.cfg.name,
        "design": t.design.name,
        "fixes_off": off,
        "mutants": sorted(t.design.mutants),
        "length": len(t.steps),
        "expected": o.status,
        "fixed_design": fd.name,
        "fixed_violations": len(ev.violations),
    }


def _current_on() -> set[str]:
    from model.designs import PRESETS

    return {f for f, v in PRESETS["current"].fixes.items() if v is not None}


def build_manifest(directory: Path) -> dict[str, Any]:
    return {
        "about": "pinned results of `kvmc replay` on every trace here; regenerate with kvmc regen --manifest",
        "files": {str(p.relative_to(directory)): entry(p, directory) for p in traces(directory)},
    }


def write_manifest(directory: Path) -> Path:
    """Atomically (a temporary file renamed into place)."""
    path = directory / "MANIFEST.json"
    data = json.dumps(build_manifest(directory), indent=1, sort_keys=True) + "\n"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(data)
    os.chmod(tmp, 0o644)
    tmp.replace(path)
    return path


def compare(directory: Path) -> list[str]:
    """Differences between MANIFEST.json and what the traces on disk do now."""
    path = directory / "MANIFEST.json"
    if not path.exists():
        return [f"{path} is missing; create it with kvmc regen --manifest"]
    pinned = json.loads(path.read_text()).get("files", {})
    now = build_manifest(directory)["files"]
    out = []
    for f in sorted(set(pinned) | set(now)):
        if f not in now:
            out.append(f"{f}: pinned in MANIFEST.json but missing on disk")
        elif f not in pinned:
            out.append(f"{f}: on disk but not pinned in MANIFEST.json")
        else:
            for k in sorted(set(pinned[f]) | set(now[f])):
                if pinned[f].get(k) != now[f].get(k):
                    out.append(f"{f}: {k} pinned {pinned[f].get(k)!r}, now {now[f].get(k)!r}")
    return out


def update(directory: Path, depth: int | None = None) -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kvmc-regen-") as hyp:
        # the checks' Hypothesis cache goes to a temporary directory, not into the corpus (their --out)
        env = dict(os.environ, HYPOTHESIS_STORAGE_DIRECTORY=hyp)
        return _update(directory, depth, env)


def _update(directory: Path, depth: int | None, env: dict[str, str]) -> int:
    rc = 0
    for fix, config, prop, mutants in KNOWN_BUGS:
        # the README's command (all configs, all properties, first error), so a newcomer running it
        # rewrites the same file
        argv = ["check", "--without", fix, "--no-progress", "--out", str(directory), "--corpus"]
        for m in mutants:
            argv += ["--mutant", m]
        if depth:
            argv += ["--depth", str(depth)]
        print("kvmc " + " ".join(argv), flush=True)
        # a fresh process per check: z3's answers depend on its context's history, and a newcomer's
        # `kvmc check` starts fresh
        code = subprocess.run([sys.executable, "-m", "checker.cli", *argv], cwd=ROOT, env=env).returncode
        if code != 1:
            print(f"regen: expected a violation (exit 1) from the line above, got exit {code}", file=sys.stderr)
            rc = 1
        design = "current-without-" + fix + "".join("+" + m for m in mutants)
        if not (directory / design / config / f"{prop}.itf.json").exists():
            print(f"regen: expected a counterexample of {prop} on config {config} under {directory / design}",
                  file=sys.stderr)
            rc = 1
    write_manifest(directory)
    return rc


def add_options(ap: Any) -> None:
    """The options of `kvmc regen` (checker/cli/app.py) and of `python -m checker.replay.regen`."""
    ap.add_argument("--dir", default=str(DEFAULT_DIR), help="counterexample directory (default counterexamples/)")
    ap.add_argument("--update", action="store_true", help="re-run kvmc check for every known bug, then rewrite the manifest")
    ap.add_argument("--manifest", action="store_true", help="rewrite MANIFEST.json from the traces on disk")
    ap.add_argument("--depth", type=int, default=None, help="--depth passed to kvmc check with --update")


def run(a: Any) -> int:
    """Check, `--manifest` or `--update` (see the module docstring)."""
    d = Path(a.dir)
    if a.update:
        return update(d, a.depth)
    if a.manifest:
        path = write_manifest(d)
        print(path)
        return 0
    diffs = compare(d)
    for line in diffs:
        print(line)
    print("manifest matches" if not diffs else f"{len(diffs)} difference(s); if intended: kvmc regen --manifest")
    return 1 if diffs else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m checker.replay.regen", description=__doc__.split("\n\n")[0])
    add_options(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
