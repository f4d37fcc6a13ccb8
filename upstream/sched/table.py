"""`python -m upstream.sched.table [--releases V...] [--dir DIR] [FILE...]`: the outcome table of the
regression corpus (counterexamples/, MANIFEST.json) on SGLang's own scheduler, trace x release.

For each release and trace: the trace as is (the release before the fix must reproduce it, the
release with the fix must pass its events), and, where the release has the fix and kvmc has a
revert patch for it there, the trace again with the fix reverted (must reproduce). One worker
process per release. Prints a Markdown table; exit status 1 when a cell is not what the plan
expects (diverged or error), 0 otherwise (`not replayable` cells say why and do not fail).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import EXIT_USAGE, UpstreamUsageError
from . import releases
from .replay import DIVERGED, ERROR, REPO, replay_items
from .reverts import available

CORPUS = REPO / "counterexamples"


def corpus_files() -> list[str]:
    manifest = json.loads((CORPUS / "MANIFEST.json").read_text())
    return [str(CORPUS / f) for f in sorted(manifest["files"])]


def items_for(version: str, files: Sequence[str]) -> list[tuple[str, tuple[str, ...]]]:
    from checker.traces import itf

    out: list[tuple[str, tuple[str, ...]]] = []
    for f in files:
        out.append((f, ()))
        try:
            trace = itf.read(f)
        except Exception:  # noqa: BLE001, S112 - reported as an error cell by the replay itself
            continue
        for fix in releases.fixes_off(trace.design):
            if releases.has_fix(version, fix) and available(fix, version) is not None:
                out.append((f, (fix,)))
    return out


def run(versions: Sequence[str], files: Sequence[str], root: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    for v in versions:
        res = replay_items(v, items_for(v, files), root)
        rows.append(res)
    return rows


def _cell(o: dict[str, Any]) -> str:
    st = o["status"]
    if st == DIVERGED:
        return f"diverged at step {o['step']}: {o['field']}"
    if st in ("not replayable", ERROR):
        return f"{st}: {o['message'][:80]}"
    return st


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| trace | SGLang | plan | outcome |", "|---|---|---|---|"]
    for res in rows:
        for o in res["outcomes"]:
            name = str(Path(o["file"]).relative_to(CORPUS)) if str(o["file"]).startswith(str(CORPUS)) else o["file"]
            plan = o.get("why") or o.get("mode", "")
            lines.append(f"| `{name}` | {o.get('label', res['version'])} | {plan} | {_cell(o)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m upstream.sched.table")
    p.add_argument("files", nargs="*", help="traces (default: the corpus of counterexamples/MANIFEST.json)")
    p.add_argument("--releases", nargs="+", default=["0.5.10.post1", "0.5.11", "0.5.13"])
    p.add_argument("--dir", help="SGLang install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    a = p.parse_args(argv)
    try:
        rows = run(a.releases, a.files or corpus_files(), Path(a.dir) if a.dir else None)
    except UpstreamUsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(markdown(rows))
    bad = [o for res in rows for o in res["outcomes"] if o["status"] in (DIVERGED, ERROR)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
