"""`python -m bench [--quick] [--only NAME]...`: run every benchmark module and write
bench/results.md (a Markdown table per module) and bench/results.png (a plot per chart).

A benchmark module is any `bench/<name>.py` (not starting with `_`) that defines
`run() -> list[dict]` (it may accept `quick: bool`; `KVMC_BENCH_QUICK=1` is set in quick mode too).
Each dict is one row of its module's table; the keys are the columns, in first-seen order. Rows
that carry `chart`, `series`, `x` and `y` are also plotted: one panel per `chart`, one line per
`series` (bars when `x` is a string); `xlabel`, `ylabel`, `logx`, `logy` style the panel. A module
may also define `SUMMARY(rows) -> str`, a paragraph printed above its table (ratios, targets met).

With `--only`, the sections of results.md that were not re-run are written back as they stood,
notes added by hand included.

Speed goals are ratios measured in one run (the machines are noisy); absolute seconds are for
reading, not for asserting.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def discover() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.py") if not p.stem.startswith("_"))


def run_module(name: str, quick: bool) -> tuple[list[dict[str, Any]], str, float]:
    """Rows, summary paragraph, seconds. A module that fails gives one row saying so (the others still run)."""
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(f"bench.{name}")
        fn = getattr(mod, "run", None)
        if fn is None:
            return [], "", 0.0
        kw = {"quick": quick} if "quick" in inspect.signature(fn).parameters else {}
        rows = list(fn(**kw))
        summary = mod.SUMMARY(rows) if callable(getattr(mod, "SUMMARY", None)) else ""
    except Exception as e:  # report, keep going
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        rows, summary = [{"error": f"{type(e).__name__}: {e}", "where": tb}], ""
    return rows, summary, time.perf_counter() - t0


def _cell(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    if v is None:
        return ""
    return str(v).replace("|", "\\|").replace("\n", " ")


PLOT_KEYS = ("chart", "series", "x", "y", "xlabel", "ylabel", "logx", "logy")


def is_plot_only(r: dict[str, Any]) -> bool:
    return all(k in PLOT_KEYS for k in r)


def tables(rows: list[dict[str, Any]]) -> str:
    """One table per value of a row's `benchmark` key (rows without one share a table)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if not is_plot_only(r):
            groups.setdefault(str(r.get("benchmark", "")), []).append(r)
    out = []
    for name, rs in groups.items():
        if name:
            out += [f"### {name}", ""]
        out += [table([{k: v for k, v in r.items() if k != "benchmark"} for r in rs]), ""]
    return "\n".join(out)


def table(rows: list[dict[str, Any]]) -> str:
    rows = [r for r in rows if not is_plot_only(r)]
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols and k not in PLOT_KEYS:
                cols.append(k)
    if not cols:
        return ""
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        out.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
    return "\n".join(out)


def plot(results: dict[str, list[dict[str, Any]]], path: Path) -> bool:
    charts: dict[str, list[dict[str, Any]]] = {}
    for rows in results.values():
        for r in rows:
            if all(k in r for k in ("chart", "series", "x", "y")) and r["y"] is not None:
                charts.setdefault(str(r["chart"]), []).append(r)
    if not charts:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(charts)
    cols = 2 if n > 1 else 1
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 4 * nrows), squeeze=False)
    for ax, (title, rows) in zip(axes.flat, charts.items()):
        series: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            series.setdefault(str(r["series"]), []).append(r)
        categorical = any(isinstance(r["x"], str) for r in rows)
        if categorical:
            cats: list[str] = []
            for r in rows:
                if r["x"] not in cats:
                    cats.append(r["x"])
            width = 0.8 / max(len(series), 1)
            for i, (s, rs) in enumerate(series.items()):
                xs = [cats.index(r["x"]) + (i - (len(series) - 1) / 2) * width for r in rs]
                ax.bar(xs, [r["y"] for r in rs], width=width, label=s)
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels(cats, rotation=25, ha="right", fontsize=8)
        else:
            for s, rs in series.items():
                rs = sorted(rs, key=lambda r: r["x"])
                ax.plot([r["x"] for r in rs], [r["y"] for r in rs], marker="o", label=s)
        first = rows[0]
        if not categorical and all(isinstance(r["x"], int) for r in rows):
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if first.get("logx"):
            ax.set_xscale("log")
        if first.get("logy"):
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(str(first.get("xlabel", "")))
        ax.set_ylabel(str(first.get("ylabel", "")))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    tmp = path.with_name("." + path.name + ".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return True


def machine() -> str:
    try:
        import z3

        zv = z3.get_version_string()
    except Exception:
        zv = "?"
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, z3 {zv}")


def md_sections(text: str) -> dict[str, str]:
    """A results.md's module sections ("## name" up to the next one), as written, by name."""
    lines: dict[str, list[str]] = {}
    name = None
    for line in text.splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            lines[name] = []
        if name is not None:
            lines[name].append(line)
    return {n: "\n".join(ls).rstrip() + "\n" for n, ls in lines.items()}


def render(sections: dict[str, dict[str, Any]], out: Path, kept: dict[str, str] | None = None) -> bool:
    """results.md, results.json and results.png from the modules' sections; True if a plot was drawn.
    `kept`: sections of the previous results.md that were not re-run, written back as they were (with
    whatever was added to them by hand, or written there by a module's own script), not rebuilt
    from results.json."""
    md = ["# kvmc benchmarks", "",
          "Written by `python -m bench` (bench/__main__.py). Speed goals are read as ratios within one run; "
          "absolute seconds depend on the machine's load.", ""]
    kept = kept or {}
    for name in sorted(set(sections) | set(kept)):
        if name in kept:
            md += [kept[name]]
            continue
        sec = sections[name]
        md += [f"## {name}", "", f"`python -m bench{' --quick' if sec['quick'] else ''} --only {name}`: {sec['seconds']:.0f} s "
               f"on {sec['when']} — {sec['machine']}.", ""]
        if sec["summary"]:
            md += [sec["summary"], ""]
        md += [tables(sec["rows"]), ""]
    (out / "results.md").write_text("\n".join(md) + "\n")
    (out / "results.json").write_text(json.dumps(sections, indent=1, default=str) + "\n")
    return plot({name: sec["rows"] for name, sec in sections.items()}, out / "results.png")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller cases (minutes -> a minute or so)")
    ap.add_argument("--only", action="append", default=[], metavar="MODULE", help=f"run only these: {', '.join(discover())}")
    ap.add_argument("--out", default=str(HERE), help="directory for results.md / results.png / results.json (default bench/)")
    args = ap.parse_args(argv)
    names = discover()
    for n in args.only:
        if n not in names:
            print(f"bench: unknown module {n!r}; expected one of: {', '.join(names)}", file=sys.stderr)
            return 2
    if args.quick:
        os.environ["KVMC_BENCH_QUICK"] = "1"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # --only re-runs some modules and keeps the others' last results (results.json), so one module's
    # run never erases another's section
    sections: dict[str, dict[str, Any]] = {}
    kept: dict[str, str] = {}
    prev = out / "results.json"
    if args.only and prev.exists():
        try:
            old = json.loads(prev.read_text())
            sections = {k: v for k, v in old.items() if isinstance(v, dict) and "rows" in v and k in names}
        except (json.JSONDecodeError, AttributeError):
            sections = {}
        if (out / "results.md").exists():  # the sections not re-run keep their text, notes included
            kept = {k: v for k, v in md_sections((out / "results.md").read_text()).items() if k not in args.only}
    for name in args.only or names:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        rows, summary, secs = run_module(name, args.quick)
        if not rows and not summary:
            continue
        sections[name] = {"rows": rows, "summary": summary, "seconds": secs, "quick": args.quick,
                          "when": time.strftime("%Y-%m-%d %H:%M"), "machine": machine()}
    plotted = render(sections, out, kept)
    print(f"bench: wrote {out / 'results.md'}" + (f" and {out / 'results.png'}" if plotted else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
