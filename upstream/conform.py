"""`kvmc conform --sglang VERSION [--transition NAME]... [--examples N] [--seed S] [--json]` and
`kvmc conform --all`: the model answers to SGLang's own code, release by release.

For each release a worker subprocess (upstream/worker.py) imports that release's real objects
and kvmc's concrete model, generates scenarios with Hypothesis for every row (upstream/rows.py),
runs both, and compares every observed field. The parent prints the table transition x release
-> scenarios, agreed, documented abstractions, disagreed, errors, and each disagreement shrunk to
a minimal scenario, side by side (`SGLang 0.5.13: NO_TOKEN / kvmc v0.5.13: CONTINUE`). An error is
a scenario that raised where its row does not expect it (SGLang's objects, the model or the
harness could not run it): nothing was compared, so it is counted apart from the disagreements,
with its first traceback, and never read as a finding about the model.

`--device cuda` builds SGLang's objects on the GPU and lets the paged allocator launch its real
Triton kernels (upstream/worker.py); the table's header then says "on cuda" and each release's
JSON result carries `device` and `kernels` (what `alloc_extend` ran: routed / torch / triton).

Exit status: 0 every scenario agreed or is a documented abstraction; 1 some disagreed or could not
be run (the report says which); 2 bad input (unknown release, release not installed, no adapter for its API, unknown row).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Sequence

from .errors import EXIT_USAGE, UpstreamUsageError
from .install import default_dir, install, release_path, run_in_release
from .releases import preset_pairs, preset_releases, release
from .sched.loop_rows import LOOP_ROWS

ROW_NAMES = (
    "add_one_req", "add_one_req/swa", "add_chunked_req", "add_chunked_req/swa", "add_one_req/swa_ring",
    "add_chunked_req/swa_ring", "add_one_req/hicache", "_swa_budget_for_req", "budget_state",
    "budget_state/swa", "TokenToKVPoolAllocator", "PagedTokenToKVPoolAllocator", "SWATokenToKVPoolAllocator",
    "SWATokenToKVPoolAllocator/ring", "ReqToTokenPool", "RadixCache", "SWARadixCache", "busy_check", "busy_check/swa",
    "UnifiedRadixCache", "UnifiedRadixCache/swa", "UnifiedRadixCache/swa_branching", "alloc_for_extend", "alloc_for_extend/swa",
    "alloc_for_decode", "alloc_for_decode/swa", "alloc_for_spec_decode", "alloc_for_spec_decode/swa", "spec_v2_alloc_len",
    *LOOP_ROWS,
)


def row_names() -> tuple[str, ...]:
    """The rows, without importing SGLang (the worker checks they match upstream/rows.py)."""
    return ROW_NAMES


def _worker(version: str, design: str, mutants: Sequence[str], rows: Sequence[str], examples: int, seed: int,
            root: Path, overrides: Sequence[str] = (), device: str = "cpu", generated: Sequence[str] = (),
            with_: Sequence[str] = (), without: Sequence[str] = ()) -> dict[str, Any]:
    path = release_path(root, version)
    from .install import MARKER
    from .sched.replay import extras_dir

    extras = extras_dir(root)
    if (extras / MARKER).exists():  # the scheduler module's dependencies: the add_one_req/hicache row builds
        path = [path[0], path[1], str(extras), *path[2:]]  # SGLang's tree as its scheduler does
    cmd = ["-m", "upstream.worker", "--version", version, "--design", design,
           "--examples", str(examples), "--seed", str(seed)]
    for m in mutants:
        cmd += ["--mutant", m]
    for f in with_:
        cmd += ["--with", f]
    for f in without:
        cmd += ["--without", f]
    for r in rows:
        cmd += ["--row", r]
    for o in overrides:
        cmd += ["--override", str(Path(o).resolve())]
    for g in generated:
        cmd += ["--generated-mutant", g]
    if device != "cpu":
        cmd += ["--device", device]
    t0 = time.time()
    out = run_in_release(path, cmd, device, served=True)  # a shared release server where one is active
    if isinstance(out, str):
        return {"version": version, "design": design, "device": device, "error": out}
    out["seconds"] = round(time.time() - t0, 1)
    return out


def run(versions: Sequence[str], rows: Sequence[str] = (), examples: int = 2000, seed: int = 0,
        root: Path | None = None, design: str | None = None, mutants: Sequence[str] = (), jobs: int = 2,
        do_install: bool = False, overrides: Sequence[str] = (),
        pairs: Sequence[tuple[str, str]] | None = None, device: str = "cpu",
        generated: Sequence[str] = (), with_: Sequence[str] = (), without: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Conform each release to its preset (or to `design`); `pairs` (release, preset) instead of
    `versions` runs exactly those (`--all`: every preset that names a release, `current` included).
    `with_` (FIX or FIX=VARIANT) and `without` (FIX) edit that design, as `kvmc check --with/--without`
    do: does the release still agree with the preset without this flag?
    A pair whose preset has the same flags as another pair's on the same release is not run twice:
    its result is the other's, relabelled. `device`: where the workers build SGLang's objects."""
    from .devices import check_device

    try:  # a bad name or a missing GPU: one line, exit 2, before any worker starts
        check_device(device)
    except ValueError as e:
        raise UpstreamUsageError(str(e)) from None
    root = Path(root) if root is not None else default_dir()
    if pairs is not None:
        versions = list(dict.fromkeys(v for v, _d in pairs))
    rels = [release(v) for v in versions]
    for r in rels:
        if r.api is None:
            raise UpstreamUsageError(
                f"SGLang {r.version}: no adapter yet for its API ({r.note}); the harness conforms "
                f"{', '.join(x.version for x in preset_releases())}")
        if design is None and r.preset is None:
            raise UpstreamUsageError(f"SGLang {r.version}: no preset claims it; pass --design NAME")
    unknown = [r for r in rows if r not in ROW_NAMES]
    if unknown:
        raise UpstreamUsageError(f"unknown transition row(s) {unknown}; expected some of {list(ROW_NAMES)}")
    if design is not None:
        from model.designs import preset

        preset(design)  # KeyError for an unknown design
    from checker.designs import DesignError, build

    def edited(d: str) -> Any:
        try:
            return build(d, without, with_)
        except DesignError as e:
            raise UpstreamUsageError(str(e)) from None

    if with_ or without:
        edited(design or "current")  # a bad fix or variant: one line, exit 2, before any worker starts
    if mutants:
        from model.mutants import available

        bad = [m for m in mutants if m not in available()]
        if bad:
            raise UpstreamUsageError(f"unknown mutant(s) {bad}; expected some of {sorted(available())}")
    if generated:  # `kvmc mutate`'s ids: checked here, before any worker starts
        from checker.mutation.operators import by_id

        for g in generated:
            try:
                by_id(g)
            except KeyError as e:
                raise UpstreamUsageError(str(e.args[0])) from None
    for o in overrides:
        if not Path(o).is_file():
            raise UpstreamUsageError(f"override file {o!r} does not exist (expected a .py file with REPLACES and replacement)")
    if do_install:
        install([r.version for r in rels], root, say=lambda m: print(m, file=sys.stderr))
    for r in rels:
        release_path(root, r.version)  # not installed: one line, exit 2, before any worker starts
    if pairs is None:
        pairs = [(r.version, design or r.preset) for r in rels]
    runs: dict[tuple, tuple[str, str]] = {}  # (version, flags) -> the pair that runs it
    for v, d in pairs:
        runs.setdefault((v, tuple(sorted(edited(d).flags().items(), key=str))), (v, d))
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        futs = {key: ex.submit(_worker, v, d, mutants, rows, examples, seed, root, overrides, device, generated, with_,
                               without)
                for key, (v, d) in runs.items()}
        out = []
        for v, d in pairs:
            res = futs[(v, tuple(sorted(edited(d).flags().items(), key=str)))].result()
            if (res.get("design") not in (d, None) and not mutants and not overrides and not generated and not with_
                    and not without):
                res = {**res, "design": d, "same_flags_as": res["design"]}
            out.append(res)
        return out


# -- reporting -------------------------------------------------------------------------------------
def table(results: Sequence[dict[str, Any]]) -> str:
    """Markdown: one line per (row, release)."""
    on = _on(results)
    lines = [
        f"| transition | SGLang{on} | kvmc design | scenarios | agreed | documented abstractions | disagreed | errors |",
        "|---|---|---|---:|---:|---|---:|---:|",
    ]
    for res in results:
        if "error" in res:
            lines.append(f"| (all) | {res['version']} | {res['design']} | - | - | - | - | worker failed |")
            continue
        for row in res["rows"]:
            if "not_applicable" in row:
                lines.append(f"| {row['row']} | {res['version']} | {res['design']} | - | - | n/a: {row['not_applicable']} | - | - |")
                continue
            ab = ", ".join(f"{k}: {v}" for k, v in sorted(row["abstractions"].items())) or "-"
            n = row["scenarios"]
            pct = 100.0 * row["agreed"] / n if n else 0.0
            lines.append(f"| {row['row']} | {res['version']} | {res['design']} | {n} | {row['agreed']} ({pct:.1f} %) | {ab} | {row['disagreed']} | {row.get('errored', 0)} |")
    return "\n".join(lines)


def _on(results: Sequence[dict[str, Any]]) -> str:
    """The header's " (on cuda)" where some release ran off the cpu (a cpu run's table is unchanged)."""
    devices = sorted({res.get("device", "cpu") for res in results} - {"cpu"})
    return f" (on {', '.join(devices)})" if devices else ""


def side_by_side(res: dict[str, Any], row: dict[str, Any]) -> str:
    m = row["minimal"]
    out = [f"disagreement: {row['row']} on SGLang {res['version']} vs kvmc {res['design']} (shrunk by Hypothesis)",
           f"  scenario: {m['scenario']}"]
    for label, sg, km in m["diffs"]:
        if isinstance(sg, dict) and isinstance(km, dict):
            keys = [k for k in sg if sg.get(k) != km.get(k)] + [k for k in km if k not in sg]
            for k in keys:
                out.append(f"  {label}.{k}: SGLang {res['version']}: {sg.get(k)} / kvmc {res['design']}: {km.get(k)}")
        else:
            out.append(f"  {label}: SGLang {res['version']}: {sg} / kvmc {res['design']}: {km}")
    return "\n".join(out)


def could_not_run(res: dict[str, Any], row: dict[str, Any]) -> str:
    """A row's errors: how many scenarios raised, the first one and the last line of its traceback."""
    e = row["first_error"]
    lines = [ln.strip() for ln in e["error"].replace("\\n", "\n").strip().splitlines() if ln.strip()]
    # the exception's own line, not the last frame of a native backtrace folded into its message
    said = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Interrupt)\b", ln) or "panicked at" in ln]
    last = (said or lines)[-1:] or ["?"]
    return (f"could not run: {row['row']} on SGLang {res['version']} vs kvmc {res['design']}: {row['errored']} of "
            f"{row['scenarios']} scenario(s) raised (nothing compared; not a disagreement)\n"
            f"  first: {e['scenario']}\n  {last[0].strip()}")


def report(results: Sequence[dict[str, Any]]) -> tuple[str, int]:
    parts = [table(results)]
    worst = 0
    for res in results:
        if "error" in res:
            parts.append(f"SGLang {res['version']}: {res['error']}")
            worst = max(worst, 1)
            continue
        for row in res["rows"]:
            if row.get("minimal"):
                parts.append(side_by_side(res, row))
                worst = max(worst, 1)
            if row.get("errored"):
                parts.append(could_not_run(res, row))
                worst = max(worst, 1)
    total = sum(r.get("scenarios", 0) for res in results for r in res.get("rows", []))
    secs = max((res.get("seconds", 0) for res in results), default=0)
    tail = f"{total} scenarios; the slowest release took {secs:.0f} s"
    if _on(results):
        kinds = ", ".join(f"{res['version']}: {res.get('kernels', '?')}" for res in results if "error" not in res)
        tail += f"{_on(results)}; paged allocator kernels: {kinds or '-'}"
    parts.append(tail)
    return "\n\n".join(parts), worst


BEGIN, END = "<!-- kvmc conform: generated, begin -->", "<!-- kvmc conform: generated, end -->"


def generated_section(results: Sequence[dict[str, Any]], command: str, seconds: float,
                      rerun: str = "Rerun it to regenerate this section.") -> str:
    """The table and the documented abstractions with an example each, as Markdown."""
    from .abstractions import ABSTRACTIONS

    total = sum(r.get("scenarios", 0) for res in results for r in res.get("rows", []))
    out = [BEGIN, "", f"Generated by `{command}` ({total} scenarios, {seconds:.0f} s wall on this project's 2-core "
           f"machine, shared with other jobs). {rerun}", "", table(results), ""]
    examples: dict[str, tuple[str, dict]] = {}
    for res in results:
        for row in res.get("rows", []):
            for name, ex in row.get("abstraction_examples", {}).items():
                examples.setdefault(name, (f"{row['row']} on SGLang {res['version']}", ex))
    out.append("### Documented abstractions")
    out.append("")
    for a in ABSTRACTIONS:
        out += [f"**`{a.name}`** (rows: {', '.join(a.rows)}). {a.reason}", "", f"*Properties it can affect:* {a.properties}", ""]
        if a.name in examples:
            where, ex = examples[a.name]
            out.append(f"*Example* ({where}): `{ex['scenario']}`")
            out.append("")
            for label, sg, km in ex["diffs"][:4]:
                out.append(f"- {label}: SGLang {sg} / kvmc {km}")
            out.append("")
        else:
            out += ["*Example:* none met in this run.", ""]
    dis = [(res, row) for res in results for row in res.get("rows", []) if row.get("minimal")]
    out.append("### Disagreements")
    out.append("")
    if not dis:
        out.append("None: every generated scenario agreed or is one of the documented abstractions above.")
    for res, row in dis:
        out += ["```", side_by_side(res, row), "```"]
    errs = [(res, row) for res in results for row in res.get("rows", []) if row.get("errored")]
    if errs:
        out += ["", "### Scenarios that could not run", ""]
        for res, row in errs:
            out += ["```", could_not_run(res, row), "```"]
    out += ["", END]
    return "\n".join(out)


def update_doc(path: Path, section: str) -> None:
    """Replace the generated section of `path` (between the markers); atomic."""
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise UpstreamUsageError(f"{path} has no generated section (expected the markers {BEGIN!r} ... {END!r})")
    head, rest = text.split(BEGIN, 1)
    _old, tail = rest.split(END, 1)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(head + section + tail)
    os.replace(tmp, path)


def cmd_conform(args: Any) -> int:
    command = "kvmc conform " + " ".join(sys.argv[2:] if sys.argv[1:2] == ["conform"] else sys.argv[1:])
    t0 = time.time()
    try:
        if args.from_json:  # render an earlier run's `--json` output (no SGLang needed)
            data = json.loads(Path(args.from_json).read_text())
            results, command = data["results"], data.get("command", f"kvmc conform (results in {args.from_json})")
            t0 -= float(data.get("seconds", 0))
        else:
            if not args.all and not args.sglang:
                raise UpstreamUsageError("give --sglang VERSION, --all or --from-json FILE")
            pairs = preset_pairs() if args.all and args.design is None else None
            versions = [r.version for r in preset_releases()] if args.all else args.sglang
            results = run(versions, args.transition or (), args.examples, args.seed, Path(args.dir) if args.dir else None,
                          args.design, args.mutant, args.jobs, args.install, args.override or (), pairs=pairs,
                          device=getattr(args, "device", "cpu") or "cpu",
                          generated=getattr(args, "generated_mutant", None) or (),
                          with_=getattr(args, "with_", None) or (), without=getattr(args, "without", None) or ())
    except UpstreamUsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyError as e:
        print(f"kvmc: error: {e.args[0] if e.args else e}", file=sys.stderr)
        return EXIT_USAGE
    text, code = report(results)
    if args.markdown:
        Path(args.markdown).write_text(table(results) + "\n")
    if args.update_doc:
        try:
            update_doc(Path(args.update_doc), generated_section(results, command, time.time() - t0))
        except UpstreamUsageError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
    if args.json:
        json.dump({"command": command, "results": results, "seconds": round(time.time() - t0, 1), "exit": code},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(text)
    return code
