"""`kvmc review --sglang-base REF_OR_DIR --sglang-head REF_OR_DIR`: what a change to SGLang's own
code does to every property kvmc explores (parent side: imports no SGLang; each side's walks run in
`kvmc explore`'s workers, upstream/explore.py).

    kvmc review --sglang-base ==0.5.13 --sglang-head ~/src/sglang [--config C]... [--property P]...
                [--seed S] [--walks N] [--depth D] [--budget SECONDS] [--jobs J] [--out DIR]
                [--executor local|ray [--ray-address auto|HOST:PORT]] [--format text|json|markdown]

REF_OR_DIR is `==VERSION` (an installed release), an SGLang source tree (upstream/source.py:
a checkout's root with python/sglang/, or a folder with sglang/, uncommitted edits included), or a
commit of a git checkout, `CHECKOUT@REF` or `@REF` (the current directory's checkout): its tree is
written into a temporary folder for the review and removed after it, Ctrl-C included.
Both sides are explored on each config with the same walk seeds S .. S+N-1, depth and budget
(`kvmc explore`'s walks, oracle and shrinking), and compared per (config, property):

    newly broken   the head violates it, the base did not in its walks, and the head's
                   counterexample (its reproducer) does not fail on the base either
    fixed          the base violates it, the head did not, and the base's counterexample does not
                   fail on the head
    still broken   both violate it, or one side's counterexample fails on the other side too
                   (that side's walks missed it)
    unchanged      neither side violated it in its walks (a search, never a proof)
    inconclusive   the cross-check could not be run

A walk's events depend on what SGLang did before (a session's next turn follows its finished
one), so the same seed need not give the two sides the same events; running the one side's shrunk
counterexample on the other side is what makes `newly broken` and `fixed` claims about the change
rather than about the walks. `--executor ray`: each side's walk shards are Ray tasks, as
`kvmc explore --executor ray` runs them (one Ray instance or cluster for the whole review; without
--jobs, a shard per CPU of the cluster); the cross-checks run here. Counterexample files (ITF,
step table, reproducer) go under `<out>/head/<config>/` and `<out>/base/<config>/`. Exit status:
0 nothing newly broken, 1 some property newly broken, 2 bad input (one line, nothing written),
3 inconclusive, 4 kvmc could not drive a side (never a finding), 130 / 143 interrupted (no
comparison is made from a part).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .errors import EXIT_USAGE, UpstreamUsageError
from .explore import EXIT_INTERNAL, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, EXIT_VIOLATION, REPO

EXIT_INCONCLUSIVE = 3
DEFAULTS = {"seed": 0, "walks": 200, "depth": 16, "budget": 120.0}
DEFAULT_CONFIG = "hybrid_swa"


def search_args(args: Any) -> SimpleNamespace:
    """The walk options of both sides (explore's names and defaults, the review's budget per side
    and config)."""
    a = SimpleNamespace(**{k: getattr(args, k, None) if getattr(args, k, None) is not None else v
                           for k, v in DEFAULTS.items()})
    a.executor = getattr(args, "executor", "local")
    a.ray_address = getattr(args, "ray_address", None)
    # with --executor ray and no --jobs: the cluster's CPUs, known once Ray is up (cmd_sglang_review)
    a.jobs = args.jobs if args.jobs is not None else (None if a.executor == "ray" else 1)
    a.property = list(args.property)
    a.revert = []
    a.progress_bound = 4
    a.no_shrink = False
    a.shrink_seconds = 120.0
    a.dir = None
    return a


def plan(args: Any, trees: contextlib.ExitStack | None = None) -> dict[str, Any]:
    """Both sides and every config checked: bad input raises UpstreamUsageError, nothing written
    (a git commit's tree is materialised under `trees`, which removes it)."""
    from checker import executors

    from .explore import plan_for
    from .source import target

    try:  # a bad --executor / --ray-address, or the ray extra missing: before anything else
        executors.check_choice(getattr(args, "executor", "local"), getattr(args, "ray_address", None))
    except executors.ExecutorError as e:
        raise UpstreamUsageError(str(e)) from None
    if not args.sglang_base or not args.sglang_head:
        missing = "--sglang-head" if args.sglang_base else "--sglang-base"
        raise UpstreamUsageError(f"{missing}: expected with the other one (==VERSION, an SGLang source folder or "
                                 "CHECKOUT@REF each)")
    sides = {"base": target(args.sglang_base, "--sglang-base", trees),
             "head": target(args.sglang_head, "--sglang-head", trees)}
    sa = search_args(args)
    configs = list(dict.fromkeys(args.config)) or [DEFAULT_CONFIG]
    plans = {(side, c): plan_for(t, c, sa) for c in configs for side, t in sides.items()}
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UpstreamUsageError(f"--out {out}: exists and is not a folder")
    if (REPO / "counterexamples").resolve() in (out.resolve(), *out.resolve().parents):
        raise UpstreamUsageError(f"--out {out}: the regression corpus counterexamples/ is written by `kvmc regen` only")
    for (side, c), p in plans.items():
        p["out"] = out / side / c
    return {"sides": sides, "configs": configs, "plans": plans, "args": sa, "out": out}


def cross_check(repro: str, other: Any) -> str:
    """Run one side's reproducer on the other side's SGLang: `reproduced`, `not reproduced` or
    `error: ...`."""
    # a commit by its hash (the reproducer writes its tree again: a temporary copy has no version to read)
    opt = ["--sglang-source", other.pinned or other.source] if other.source else ["--sglang", f"=={other.version}"]
    p = subprocess.run([sys.executable, repro, *opt], capture_output=True, text=True, cwd=str(REPO))
    if p.returncode == 0:
        return "reproduced"
    if "AssertionError: not reproduced" in p.stderr:
        return "not reproduced"
    tail = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
    return f"error: {tail[:200]}"


def _words(res: dict[str, Any], prop: str) -> str:
    f = res["found"].get(prop)
    if f is not None:
        return f"violated (seed {f['seed']}, {len(f['steps'])} iterations)"
    return f"no violation in {res['walks']} walks"


def compare(pl: dict[str, Any], results: dict[tuple[str, str], dict[str, Any]],
            written: dict[tuple[str, str], dict[str, dict[str, str]]]) -> list[dict[str, Any]]:
    sides = pl["sides"]
    rows = []
    for c in pl["configs"]:
        b, h = results[("base", c)], results[("head", c)]
        for prop in b["props"]:
            bf, hf = prop in b["found"], prop in h["found"]
            row: dict[str, Any] = {"config": c, "property": prop, "base": _words(b, prop), "head": _words(h, prop),
                                   "cross_check": None, "files": None}
            if bf and hf:
                row["change"] = "still broken"
            elif hf or bf:
                mine, other = ("head", "base") if hf else ("base", "head")
                files = written[(mine, c)][prop]
                row["files"] = dict(files, side=mine)
                xc = cross_check(files["reproducer"], sides[other])
                row["cross_check"] = f"{mine}'s counterexample on the {other}: {xc}"
                if xc == "not reproduced":
                    row["change"] = "newly broken" if hf else "fixed"
                elif xc == "reproduced":
                    row["change"] = "still broken"
                else:
                    row["change"] = "inconclusive"
            else:
                row["change"] = "unchanged"
            rows.append(row)
    return rows


def run(pl: dict[str, Any], say: Any, ex: Any = None) -> dict[str, Any]:
    """Explore both sides on every config (`ex`: the Ray executor of `--executor ray`, None for
    this machine's processes), then cross-check each side's counterexamples on the other side."""
    from .explore import explore, write_outputs

    t0 = time.time()
    sa = pl["args"]
    results: dict[tuple[str, str], dict[str, Any]] = {}
    written: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
    doc: dict[str, Any] = {"base": pl["sides"]["base"].to_dict(), "head": pl["sides"]["head"].to_dict(),
                           "configs": pl["configs"], "seeds": [sa.seed, sa.seed + sa.walks - 1], "depth": sa.depth,
                           "budget": sa.budget, "jobs": sa.jobs, "executor": "local" if ex is None else "ray",
                           "sides": [], "rows": [], "interrupted": None,
                           "errors": []}
    for c in pl["configs"]:
        for side in ("base", "head"):
            p = pl["plans"][(side, c)]
            say(f"kvmc review: exploring the {side}, {p['target'].label()}, on {c} "
                f"(seeds {sa.seed}..{sa.seed + sa.walks - 1}, depth {sa.depth}, budget {sa.budget:g} s)")
            res = explore(p, sa, ex=ex)
            results[(side, c)] = res
            doc["sides"].append({"side": side, "config": c, "walks": res["walks"], "steps": res["steps"],
                                 "seconds": res["seconds"], "found": sorted(res["found"]),
                                 "walked_seeds": _span(res["walked_seeds"])})
            doc["errors"] += [dict(e, side=side, config=c) for e in res["errors"]]
            if res["interrupted"]:
                doc["interrupted"] = res["interrupted"]
                doc["seconds"] = round(time.time() - t0, 2)
                return doc
            written[(side, c)] = write_outputs(res, p, sa) if res["found"] else {}
    if not doc["errors"]:
        say("kvmc review: running each side's counterexamples on the other side")
        doc["rows"] = compare(pl, results, written)
    doc["seconds"] = round(time.time() - t0, 2)
    return doc


def _span(seeds: list[int]) -> str:
    s = sorted(seeds)
    if not s:
        return "none"
    return f"{s[0]}..{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else f"{len(s)} seeds in {s[0]}..{s[-1]}"


def exit_code(doc: dict[str, Any]) -> int:
    if doc["interrupted"]:
        return EXIT_SIGINT if doc["interrupted"] == "SIGINT" else EXIT_SIGTERM
    if doc["errors"]:
        return EXIT_INTERNAL
    changes = {r["change"] for r in doc["rows"]}
    if "newly broken" in changes:
        return EXIT_VIOLATION
    if "inconclusive" in changes:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _name(t: dict[str, Any]) -> str:
    if t["source"] is None:
        return f"sglang=={t['version']}"
    if t.get("ref"):
        return f"{t['ref']} (commit {t['commit'][:12]}, {t['version']}, release {t['release']})"
    return f"{t['source']} ({t['version']}, release {t['release']})"


def render_text(doc: dict[str, Any]) -> str:
    out = [f"kvmc review  base: {_name(doc['base'])}  ->  head: {_name(doc['head'])}",
           f"SGLang's own scheduler explored: seeds {doc['seeds'][0]}..{doc['seeds'][1]}, depth {doc['depth']}, "
           f"budget {doc['budget']:g} s per side and config, configs: {', '.join(doc['configs'])}, {doc['jobs']} "
           f"job{'s' if doc['jobs'] != 1 else ''}{' on Ray' if doc['executor'] == 'ray' else ''}  [{doc['seconds']:.1f}s]"]
    for s in doc["sides"]:
        out.append(f"  {s['side']} on {s['config']}: {s['walks']} walks (seeds {s['walked_seeds']}), {s['steps']} "
                   f"SGLang iterations, {s['seconds']} s")
    if doc["interrupted"]:
        out.append(f"INTERRUPTED by {doc['interrupted']}: no comparison is made from a part")
    for e in doc["errors"]:
        out.append(f"error (kvmc could not drive the {e['side']} on {e['config']}; not a finding): "
                   + str(e["message"]).splitlines()[0])
    if not doc["rows"]:
        return "\n".join(out)
    out.append("")
    table = [("config", "property", "base", "head", "change")]
    for r in doc["rows"]:
        table.append((r["config"], r["property"], r["base"], r["head"],
                      r["change"].upper() if r["change"] in ("newly broken", "fixed") else r["change"]))
    w = [max(len(row[i]) for row in table) for i in range(5)]
    out += ["  ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip() for row in table]
    for r in doc["rows"]:
        if r["files"]:
            f = r["files"]
            out += ["", f"{r['property']} {r['change']} on {r['config']}: {r['cross_check']}",
                    f"  {f['side']}'s counterexample: {f['itf']}, {f['table']}, {f['reproducer']}"]
            out += ["  " + ln for ln in Path(f["table"]).read_text().splitlines()[1:]]
    return "\n".join(out)


def render_markdown(doc: dict[str, Any]) -> str:
    icon = {"newly broken": ":x: **newly broken**", "fixed": ":white_check_mark: **fixed**",
            "still broken": ":warning: still broken", "inconclusive": ":grey_question: inconclusive"}
    out = [f"### kvmc review: `{_name(doc['base'])}` → `{_name(doc['head'])}`", "",
           f"SGLang's own scheduler explored: seeds {doc['seeds'][0]}..{doc['seeds'][1]}, depth {doc['depth']}, "
           f"budget {doc['budget']:g} s per side and config", "",
           "| config | property | base | head | change |", "|---|---|---|---|---|"]
    out += [f"| `{r['config']}` | `{r['property']}` | {r['base']} | {r['head']} | {icon.get(r['change'], r['change'])} |"
            for r in doc["rows"]]
    for r in doc["rows"]:
        if r["files"]:
            out += ["", f"<details><summary><code>{r['property']}</code> {r['change']} on <code>{r['config']}</code>"
                    f"</summary>", "", r["cross_check"], "", "```", Path(r["files"]["table"]).read_text().rstrip(),
                    "```", "</details>"]
    out += ["", "_A search of some executions of SGLang's own scheduler on CPU, never a proof._"]
    return "\n".join(out)


def cmd_sglang_review(args: Any) -> int:
    """`kvmc review --sglang-base/--sglang-head` (dispatched by checker/cli/review.py)."""
    from .explore import with_executor

    with contextlib.ExitStack() as trees:  # a CHECKOUT@REF side's temporary tree lives as long as the review
        try:
            pl = plan(args, trees)
        except UpstreamUsageError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        # one Ray instance (or cluster) for both sides (`--executor ray`)
        return with_executor(pl["args"], lambda ex: _review(args, pl, ex))


def _review(args: Any, pl: dict[str, Any], ex: Any = None) -> int:
    quiet = args.progress == "none" or args.format == "json"
    doc = run(pl, (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr, flush=True)), ex)
    if args.format == "json":
        print(json.dumps(doc, indent=1, default=str))
    elif args.format == "markdown":
        print(render_markdown(doc))
    else:
        print(render_text(doc))
    return exit_code(doc)
