"""`kvmc explore` on SGLang's own scheduler (issue 61; docs/explore.md): SGLang iterations explored
per second at page 1 (`hybrid_swa`) and page 64 (`hybrid_swa_page64`), on one and two worker
processes, with the share spent inside SGLang's scheduler; and the time to the first
counterexample (and its shrunk length) of bugs found with no model trace as a hint:

* #23174's "Prefill out of memory" on 0.5.13 with the fix reverted (`--revert chunked_swa_page_reserve`);
* 0.5.10.post1's busy check crashing on SWARadixCache (`busy_check_sound`, the `swa_busy_check` fix);
* on 0.5.23 (where installed) the open findings of docs/findings.md: #2's stall (`progress`) and
  #1's cut prompt (`prompt_prefilled`);
* a source tree as "a developer's change": 0.5.13's package copied into a checkout and the #23174
  fix reverted as a file edit (upstream/sched/reverts.py::edit_tree), reviewed against the
  unedited copy (`kvmc review --sglang-base OK --sglang-head REVERTED`, seeds from 0: no hint),
  and explored on its own (`kvmc explore --sglang-source REVERTED`).

Each row is one `kvmc explore --json` run (its own worker processes; SGLang's import, 5-10 s, is
counted in `seconds` but not in the rate). Absolute numbers are for reading (the machine is shared).
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any

RATE_RUNS = [("0.5.13", "hybrid_swa", 1), ("0.5.13", "hybrid_swa_page64", 64)]
HUNTS = [  # (release, reverts, config, property, seeds to search)
    ("0.5.13", ["chunked_swa_page_reserve"], "hybrid_swa", "no_prefill_oom", 2000),
    ("0.5.10.post1", [], "hybrid_swa", "busy_check_sound", 100),
    ("0.5.23", [], "hybrid_swa", "progress", 2000),
    ("0.5.23", [], "hybrid_swa", "prompt_prefilled", 10000),
]


def _explore(args: list[str]) -> tuple[int, dict[str, Any]]:
    from checker.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["explore", *args, "--json", "--out", "/tmp/kvmc-bench-explore"])
    text = out.getvalue()
    return code, (json.loads(text) if text.strip().startswith("{") else {"error": text[-300:]})


def _installed(version: str) -> bool:
    from upstream.install import default_dir, is_installed

    return is_installed(default_dir(), version)


def run(quick: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    walks = 150 if quick else 1000
    for version, cfg, page in RATE_RUNS:
        if not _installed(version):
            continue
        for jobs in (1, 2):
            code, d = _explore(["--sglang", f"=={version}", "--config", cfg, "--walks", str(walks), "--depth", "16",
                                "--jobs", str(jobs), "--property", "conservation", "--budget", "600"])
            if "walks" not in d:
                rows.append({"benchmark": "rate", "release": version, "config": cfg, "error": d.get("error")})
                continue
            wall = d["seconds"] - max(d["import_seconds"] or [0])
            rows.append({"benchmark": "rate", "release": version, "config": cfg, "page": page, "jobs": jobs,
                         "walks": d["walks"], "iterations": d["steps"],
                         "iterations/s (after import)": round(d["steps"] / wall, 1) if wall > 0 else None,
                         "inside SGLang %": round(100 * d["sglang_seconds"] / d["walk_seconds"], 1) if d["walk_seconds"] else None,
                         "import s": max(d["import_seconds"] or [0]), "seconds": d["seconds"], "exit": code,
                         "chart": "explore: SGLang iterations per second", "series": f"page {page}", "x": jobs,
                         "y": round(d["steps"] / wall, 1) if wall > 0 else 0, "xlabel": "worker processes",
                         "ylabel": "iterations/s"})
    for version, reverts, cfg, prop, n in HUNTS:
        if not _installed(version) or (quick and version == "0.5.23" and prop == "prompt_prefilled"):
            continue
        args = ["--sglang", f"=={version}", "--config", cfg, "--property", prop, "--walks", str(n), "--depth", "16",
                "--budget", "300"]
        for r in reverts:
            args += ["--revert", r]
        code, d = _explore(args)
        f = d.get("found", {}).get(prop)
        rows.append({"benchmark": "first counterexample", "release": version + "".join(f" -{r}" for r in reverts),
                     "config": cfg, "property": prop, "verdict": "violated" if f else f"no violation in {d.get('walks')} walks",
                     "walks to find": (f["walks_before"] if f else None),
                     "s to find (import included)": (f["found_after_s"] if f else None),
                     "import s": max(d.get("import_seconds") or [0]),
                     "iterations before shrinking": (f["original_steps"] if f else None),
                     "shrunk iterations": (len(f["steps"]) if f else None), "exit": code})
    rows += _source_tree_rows(quick)
    return rows


def _source_tree_rows(quick: bool) -> list[dict[str, Any]]:
    import tempfile
    import time
    from pathlib import Path

    from upstream.install import default_dir
    from upstream.sched import replay as sr
    from upstream.sched.reverts import edit_tree
    from upstream.source import tree_from_release

    version, fix, cfg, prop = "0.5.13", "chunked_swa_page_reserve", "hybrid_swa", "no_prefill_oom"
    if not _installed(version):
        return []
    root = default_dir()
    sr.install_extras(root, say=lambda m: None)
    rows: list[dict[str, Any]] = []
    walks = "300" if quick else "2000"
    with tempfile.TemporaryDirectory(prefix="kvmc-bench-tree-") as d:
        ok = tree_from_release(root, version, Path(d) / "ok")
        rev = tree_from_release(root, version, Path(d) / "reverted")
        edit_tree([fix], version, str(rev / "python"))
        code, dx = _explore(["--sglang-source", str(rev), "--config", cfg, "--property", prop, "--walks", walks,
                             "--depth", "16", "--budget", "300"])
        f = dx.get("found", {}).get(prop)
        rows.append({"benchmark": "source tree", "release": f"{version} tree -{fix}", "config": cfg, "property": prop,
                     "how": "explore --sglang-source",
                     "verdict": "violated" if f else f"no violation in {dx.get('walks')} walks",
                     "walks to find": (f["walks_before"] if f else None),
                     "s to find (import included)": (f["found_after_s"] if f else None),
                     "shrunk iterations": (len(f["steps"]) if f else None), "exit": code})
        from checker.cli import main
        import contextlib
        import io
        import json

        buf = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
            code = main(["review", "--sglang-base", str(ok), "--sglang-head", str(rev), "--config", cfg,
                         "--property", prop, "--seed", "0", "--walks", walks, "--depth", "16", "--budget", "300",
                         "--out", str(Path(d) / "review"), "--format", "json"])
        took = round(time.perf_counter() - t0, 1)
        text = buf.getvalue()
        doc = json.loads(text) if text.strip().startswith("{") else {}
        row = next(iter(doc.get("rows") or []), {})
        rows.append({"benchmark": "source tree", "release": f"{version} tree vs tree -{fix}", "config": cfg,
                     "property": prop, "how": "review --sglang-base/--sglang-head",
                     "verdict": row.get("change", f"no report ({text[-200:]!r})"), "seconds": took, "exit": code})
    return rows


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    found = [r for r in rows if r.get("benchmark") == "first counterexample" and r.get("verdict") == "violated"]
    rate = [r for r in rows if r.get("benchmark") == "rate" and r.get("iterations/s (after import)")]
    parts = []
    if rate:
        parts.append("SGLang iterations explored per second after the import: "
                     + ", ".join(f"{r['config']} x{r['jobs']}: {r['iterations/s (after import)']}" for r in rate) + ".")
    if found:
        parts.append("First counterexamples, no model trace as a hint: "
                     + "; ".join(f"{r['property']} on {r['release']} after {r['walks to find']} walks "
                                 f"({r['s to find (import included)']} s), shrunk to {r['shrunk iterations']} iterations"
                                 for r in found) + ".")
    tree = [r for r in rows if r.get("benchmark") == "source tree"]
    if tree:
        parts.append("On a source tree with #23174's fix reverted: "
                     + "; ".join(f"{r['how']}: {r['verdict']}" + (f" after {r['walks to find']} walks" if r.get("walks to find") is not None else "")
                                 + (f" ({r['seconds']} s)" if r.get("seconds") else "") for r in tree) + ".")
    return " ".join(parts)
