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

# (fix turned off, config, property, planted mutants, base preset): one per known SGLang bug (issue
# 2, acceptance 1). The base is v0.5.13, the first release with all six fixes and the release the CI
# replays the corpus on, each fix reverted by SGLang's own source patcher
# (tests/upstream/test_sched_replay.py); tests/unit/test_known_bugs.py finds each on `current` too.
KNOWN_BUGS: list[tuple[str, str, str, tuple[str, ...], str]] = [
    ("chunked_swa_page_reserve", "hybrid_swa", "no_prefill_oom", (), "v0.5.13"),  # #23174
    ("swa_hostload_budget", "hybrid_swa_hicache", "no_prefill_oom", (), "v0.5.13"),  # #27391
    ("session_active", "sessions", "busy_check_sound", (), "v0.5.13"),  # #22213 / #22753
    ("retract_tail_free", "sessions", "conservation", (), "v0.5.13"),  # #22862
    ("swa_busy_check", "hybrid_swa", "busy_check_sound", (), "v0.5.13"),  # #21499
    ("spec_topk_busy_check", "spec_topk", "busy_check_complete", ("verify_keeps_rejected_page",), "v0.5.13"),  # #27228
]

# (preset, config, property[, extra `kvmc check` arguments]): violations of a preset itself, SGLang bugs
# kvmc found with no fix upstream yet (docs/findings.md); their traces replay as `reproduced` with the
# "fixed" design too. Extra arguments pick another engine where the BMC does not reach the trace in minutes.
FINDINGS: list[tuple[str, ...]] = [
    ("current", "hybrid_swa", "prompt_prefilled"),  # the chunk-cap hatch's second truncation (0.5.16+)
    ("v0.5.13", "hybrid_swa", "progress"),  # #23174's deferral stalls a chunked request (a lasso)
    ("v0.5.18", "hybrid_swa_page4", "conservation"),  # the re-match after the unfinished insert (0.5.18-0.5.22)
    ("v0.5.22", "hybrid_swa_page4", "no_scheduler_assertion"),  # finding 3's AssertionError: the scheduler dies
    ("v0.5.11", "sessions", "no_prefill_oom"),  # finding 4: a session's row admits a request with no row left
    ("v0.5.11", "hybrid_swa", "conservation"),  # SGLang #24252 (fixed by #24318): a parked chunk's prompt stashed
    ("v0.5.23", "sessions", "progress"),  # finding 7: a session keeping the last row starves everyone (#37583, open)
    # finding 8: the mixed decode of 0.5.10.post1 (page 2) out of pages; the BMC on `mixed` needs more than
    # 15 minutes for depth 3, the random engine (derandomized: the same runs every time) finds it at depth 4
    ("v0.5.10.post1", "mixed", "no_decode_oom", "--engine", "random", "--examples", "4000"),
    # finding 5: 0.5.10.post1's busy check counts a finished streaming turn twice (a false alarm); the BMC's
    # shortest trace is the same, the explicit engine is the command docs/findings.md gives
    ("v0.5.10.post1", "sessions", "busy_check_sound", "--engine", "explicit"),
    ("v0.5.13", "hybrid_swa_mixed", "no_decode_oom"),  # finding 9: a chunk takes the mixed decode's SWA slots (CI replays it on 0.5.13)
    ("v0.5.21", "hybrid_swa_mixed", "no_decode_oom"),  # finding 9 on the last release without 0.5.22's decode check
    # finding 10: without a radix cache the busy check misses a parked chunked request's KV (CI replays it on 0.5.13)
    ("v0.5.13", "hybrid_swa_chunk_cache", "busy_check_sound"),
    ("v0.5.19", "hybrid_swa_chunk_cache", "busy_check_sound"),  # the last release before #37502
    # finding 11: an over-long prompt's negative max_new_tokens inflates the pass's budget (#25126's max(0, ...) ends it)
    ("v0.5.10.post1", "over_long_prompt", "no_prefill_oom"),
    ("v0.5.11", "over_long_prompt", "no_prefill_oom"),
    # finding 12: a chunk cut to --truncation-align-size leaves chunk budget; the request admitted into it takes
    # memory the chunked request's later chunks need (every release, open). The explicit engine's trace has
    # the chunked request's max_new_tokens unclipped (the BMC's shortest clips it to 0)
    ("current", "aligned_page1", "no_prefill_oom", "--engine", "explicit"),
    # the same without a prefix tree: --enable-deterministic-inference with flashinfer disables the radix cache
    ("current", "aligned_chunk_cache", "no_prefill_oom", "--engine", "explicit"),
    # ... and at a chunk size that is a multiple of the alignment: a short request ahead in the pass
    ("current", "aligned_three", "no_prefill_oom"),
    # ... and at page 4, an alignment of four pages: the leftover is more than the page the gate reserves
    ("current", "aligned_page4", "no_prefill_oom", "--engine", "explicit"),
    # before #25741 (0.5.13) max_prefill_tokens also gated a chunked pass: a larger budget, the same trace
    ("v0.5.12.post1", "aligned_three", "no_prefill_oom"),
]


def traces(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.itf.json"))


def entry(path: Path, directory: Path) -> dict[str, Any]:
    from checker.traces import itf
    from checker.replay.pool import fixed_design, replay_events, replay_trace

    t = itf.read(path)
    o = replay_trace(t, "cpu", str(path))
    fd = fixed_design(t)
    # a lasso's property is judged on its loop (the replay above), not on events' states
    ev = replay_events(t, fd) if t.loop is None else None
    off = sorted(f for f, v in t.design.fixes.items() if v is None and fd.fixes.get(f) is not None)
    return {
        "property": t.prop,
        "config": t.cfg.name,
        "design": t.design.name,
        "fixes_off": off,
        "mutants": sorted(t.design.mutants),
        "length": len(t.steps),
        "expected": o.status,
        "fixed_design": fd.name,
        "fixed_violations": None if ev is None else len(ev.violations),
    }


def build_manifest(directory: Path) -> dict[str, Any]:
    return {
        "about": "pinned results of `kvmc replay` on every trace here; regenerate with kvmc regen --manifest",
        "files": {str(p.relative_to(directory)): entry(p, directory) for p in traces(directory)},
    }


def write_manifest(directory: Path, manifest: dict[str, Any] | None = None) -> Path:
    """Atomically (a temporary file renamed into place)."""
    path = directory / "MANIFEST.json"
    data = json.dumps(manifest or build_manifest(directory), indent=1, sort_keys=True) + "\n"
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
    """Every check writes into a staging directory beside the corpus; only when all of them found
    their counterexample do the traces replace the corpus's (a trace of a bug no longer listed, or
    of a property no longer first, does not linger), and MANIFEST.json is rewritten. Otherwise, or
    on an interrupt, the corpus is left as it was."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kvmc-regen-") as hyp, \
            tempfile.TemporaryDirectory(prefix=".regen-", dir=directory.parent) as stage:
        # the checks' Hypothesis cache goes to a temporary directory, not into the corpus (their --out)
        env = dict(os.environ, HYPOTHESIS_STORAGE_DIRECTORY=hyp)
        rc = _update(Path(stage), depth, env)
        if rc != 0:
            print(f"regen: {directory} left unchanged", file=sys.stderr)
            return rc
        manifest = build_manifest(Path(stage))  # replays every new trace before anything is replaced
        for old in sorted(p for p in directory.iterdir() if p.is_dir()):
            shutil.rmtree(old)
        for new in sorted(p for p in Path(stage).iterdir() if p.is_dir()):
            shutil.move(str(new), str(directory / new.name))
    write_manifest(directory, manifest)
    return 0


def _update(directory: Path, depth: int | None, env: dict[str, str]) -> int:
    rc = 0
    checks: list[tuple[list[str], str, str, str]] = []
    for fix, config, prop, mutants, base in KNOWN_BUGS:
        # the README's command (all configs, the bug's property, first error), so a newcomer running
        # it rewrites the same file; the property is named because a finding on `current` itself
        # (FINDINGS) would otherwise be the first error on the same config
        argv = (["--design", base] if base != "current" else []) + ["--without", fix, "--property", prop]
        for m in mutants:
            argv += ["--mutant", m]
        checks.append((argv, f"{base}-without-" + fix + "".join("+" + m for m in mutants), config, prop))
    for preset, config, prop, *extra in FINDINGS:
        checks.append((["--design", preset, "--config", config, "--property", prop, *extra], preset, config, prop))
    for args, design, config, prop in checks:
        argv = ["check", *args, "--no-progress", "--out", str(directory), "--corpus"]
        if depth:
            argv += ["--depth", str(depth)]
        print("kvmc " + " ".join(argv), flush=True)
        # a fresh process per check: z3's answers depend on its context's history, and a newcomer's
        # `kvmc check` starts fresh
        code = subprocess.run([sys.executable, "-m", "checker.cli", *argv], cwd=ROOT, env=env).returncode
        if code != 1:
            print(f"regen: expected a violation (exit 1) from the line above, got exit {code}", file=sys.stderr)
            rc = 1
        if not (directory / design / config / f"{prop}.itf.json").exists():
            print(f"regen: expected a counterexample of {prop} on config {config} under {design}",
                  file=sys.stderr)
            rc = 1
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
