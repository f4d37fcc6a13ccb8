"""python -m docs [--check]: regenerate (or check) the generated tables of docs/ (docs/tables.py)."""

from __future__ import annotations

import argparse
import os
import sys

from . import tables


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m docs", description="regenerate the reference tables of docs/ "
                                 "from the project's data (no z3, no SGLang)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is stale or a reference "
                    "page carries a dated run log")
    args = ap.parse_args(argv)
    try:
        result = tables.pages()
    except (tables.StaleMarkers, FileNotFoundError, KeyError) as e:
        print(f"python -m docs: error: {e}", file=sys.stderr)
        return 2
    stale = [p for p, (old, new) in result.items() if old != new]
    if args.check:
        bad = 0
        for p in stale:
            print(f"docs/{p}: generated tables are stale (run `python -m docs`)")
            bad += 1
        for page in tables.reference_pages():
            for n, what, _line in tables.dated_lines(page.read_text()):
                print(f"{page}:{n}: {what} in a reference page (run logs go to docs/log/)")
                bad += 1
        return 1 if bad else 0
    for p in stale:
        path = tables.DOCS / p
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(result[p][1])
        os.replace(tmp, path)
        print(f"docs/{p}: regenerated")
    if not stale:
        print("docs/: every generated table is current")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
