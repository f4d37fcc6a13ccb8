"""The reference tables of docs/, rendered from the project's own data.

Each table lives in its page between two marker comments,

    <!-- generated: NAME (python -m docs) -->
    ...
    <!-- end generated: NAME -->

and is rendered here from code (specs.configs.CONFIGS, specs.properties.PROPERTIES,
specs.liveness.LIVENESS, model.designs.PRESETS / FIXES, upstream.rows.ROWS,
upstream.sched.loop_rows.LOOP_ROWS, checker.engines.cases.MUTANT_CASES, upstream.abstractions)
and from recorded results (bench/mutation*.json, docs/data/*.json). Nothing here runs z3, an
engine or SGLang: rendering every page takes a few seconds. The conformance section keeps the
markers `kvmc conform --update-doc` writes (upstream/conform.py), so a live run can still write it.

Layering: this package may import checker, specs, model and upstream; nothing imports it.
"""

from __future__ import annotations

import glob
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
DATA = DOCS / "data"


def begin(name: str) -> str:
    return f"<!-- generated: {name} (python -m docs) -->"


def end(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def _cell(x: object) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[object]], align: list[str] | None = None) -> str:
    align = align or ["---"] * len(head)
    out = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# -- proofs.md -------------------------------------------------------------------------------------


def _features(cfg) -> str:
    f = []
    if cfg.hybrid_swa:
        f.append("hybrid SWA" + (" (per-request ring)" if cfg.swa_ring else ""))
    if cfg.hicache:
        f.append("HiCache")
    if cfg.chunked_prefill:
        f.append("chunked prefill")
    if cfg.mixed_chunk:
        f.append("mixed chunk")
    if cfg.chunk_cache:
        f.append("no radix cache")
    if cfg.streaming_sessions:
        f.append("streaming sessions")
    if cfg.spec:
        sp = cfg.spec
        f.append(f"spec v{sp.version} (steps {sp.num_steps}, topk {sp.topk}, draft tokens {sp.num_draft_tokens})")
    if cfg.truncation_align_size:
        f.append(f"truncation_align_size {cfg.truncation_align_size}")
    if cfg.over_long:
        f.append("over-long prompt")
    return ", ".join(f) or "-"


def configs() -> str:
    from specs.configs import CONFIGS

    rows = [[f"`{n}`", c.num_reqs, c.page_size, _features(c), c.doc] for n, c in CONFIGS.items()]
    return _table(["config", "requests", "page", "features", "what it is"], rows, ["---", "---:", "---:", "---", "---"])


def properties() -> str:
    from specs.liveness import LIVENESS
    from specs.properties import PROPERTIES

    rows = [[f"`{n}`", "safety", p.applies_meaning or "every config", p.meaning] for n, p in PROPERTIES.items()]
    rows += [[f"`{n}`", "liveness", "every config", p.meaning] for n, p in LIVENESS.items()]
    return _table(["property", "kind", "checked on", "meaning"], rows)


def _applies_today(config: str) -> int:
    from specs.configs import CONFIGS
    from specs.properties import PROPERTIES

    cfg = CONFIGS[config]
    return sum(1 for p in PROPERTIES.values() if p.applies is None or p.applies(cfg))


def _verdict(e: dict) -> str:
    parts = []
    if e["proved"]:
        whole = e["proved"] == e["of"]
        parts.append(f"**{'all ' if whole else ''}{e['proved']}{'' if whole else ' of ' + str(e['of'])} proved** ({e['k']})")
    for prop, depth, finding in e.get("violated", []):
        parts.append(f"`{prop}` **violated at depth {depth}** (finding {finding})")
    if e.get("held"):
        depth, n = e["held"]
        parts.append(f"{'the other ' if parts else ''}{n} hold to depth {depth}, not proved")
    if e.get("note"):
        parts.append(e["note"])
    return "; ".join(parts)


def proofs_current() -> str:
    from specs.configs import CONFIGS

    data = _load("proofs.json")
    known = {e["config"]: e for e in data["current"]}
    rows = []
    for name in CONFIGS:
        e = known.get(name)
        if e is None:
            rows.append([f"`{name}`", "no whole-config run recorded", "-", "-", _applies_today(name)])
            continue
        wall = f"{e['wall_s']:,} s" if e.get("wall_s") is not None else "stopped"
        if e.get("where"):
            wall += f" ({e['where']})"
        today = _applies_today(name)
        asked = e["of"] if e["of"] == today else f"{e['of']} (today {today})"
        rows.append([f"`{name}`", _verdict(e), e["engine"], wall, asked])
    unknown = sorted(set(known) - set(CONFIGS))
    rows += [[f"`{n}` (no such config now)", _verdict(known[n]), known[n]["engine"], "-", "-"] for n in unknown]
    return _table(["config", "verdict on `current`", "engine", "wall", "properties asked"], rows)


def proofs_presets() -> str:
    data = _load("proofs.json")
    rows = [[f"`{e['config']}`", ", ".join(f"`{d}`" for d in e["designs"]), e["verdict"]] for e in data["presets"]]
    return _table(["config", "presets", "verdict"], rows)


# -- conformance.md --------------------------------------------------------------------------------


def _conform_results() -> dict:
    return _load("conform.json")


def conform_rows() -> str:
    from upstream.rows import ROWS

    res = _conform_results()["results"]
    na: dict[str, list[str]] = {}
    seen: set[str] = set()
    for r in res:
        for row in r.get("rows", []):
            seen.add(row["row"])
            if "not_applicable" in row:
                na.setdefault(row["row"], []).append(r["version"])
    rows = []
    for name, row in ROWS.items():
        if name not in seen:
            where = "not in the recorded run"
        elif name in na:
            where = "n/a on " + ", ".join(na[name])
        else:
            where = "every release"
        rows.append([f"`{name}`", row.doc, where])
    return _table(["row", "what it runs on SGLang's side", "releases (recorded run)"], rows)


def loop_rows() -> str:
    from specs.configs import CONFIGS
    from upstream.sched.loop_rows import LOOP_ROWS

    rows = [[f"`{r}`", f"`{c}`", CONFIGS[c].doc] for r, c in LOOP_ROWS.items()]
    return _table(["row", "config", "the config"], rows)


def conform_section() -> str:
    from upstream.conform import generated_section

    d = _conform_results()
    return generated_section(d["results"], d["command"], float(d["seconds"]),
                             rerun="Rerun it (the recorded run is docs/data/conform.json), then `python -m docs`, to "
                             "regenerate this section.")


# -- mutants.md ------------------------------------------------------------------------------------


def planted() -> str:
    from checker.engines.cases import MUTANT_CASES
    from model.mutants import available

    rec = {r["mutant"]: r for r in _load("planted.json")["rows"]}
    mods = available()
    rows = []
    for c in MUTANT_CASES:
        r = rec.get(c.name)
        cells = [r["bmc"], r["explicit"], r["random"]] if r else ["not recorded"] * 3
        rows.append([f"`{c.name}`", f"`{mods[c.name].REPLACES}`", c.config, c.prop, *cells])
    return _table(["mutant", "replaces", "config", "property", "BMC", "explicit", "random"], rows)


def _runs() -> list[tuple[str, dict]]:
    return [(Path(f).name, json.loads(Path(f).read_text())) for f in sorted(glob.glob(str(ROOT / "bench" / "mutation*.json")))]


def _killers(outcomes: list[dict]) -> tuple[int, int]:
    eng = sum(1 for o in outcomes if o["status"] == "killed" and (o.get("kill") or {}).get("engine") != "conform")
    sg = sum(1 for o in outcomes if o["status"] == "killed" and (o.get("kill") or {}).get("engine") == "conform")
    return eng, sg


def mutation_runs() -> str:
    rows = []
    for name, d in _runs():
        o = d["outcomes"]
        n = {s: sum(1 for x in o if x["status"] == s) for s in ("survived", "equivalent", "unreached", "invalid", "error")}
        eng, sg = _killers(o)
        decided = eng + sg + n["survived"]
        rate = f"{100 * (eng + sg) / decided:.0f} %" if decided else "-"
        conform = re.search(r"--conform (\S+)", d["command"])
        rows.append([f"bench/{name}", d.get("design", "current"), len(o), eng, sg if conform else "-", n["survived"],
                     n["equivalent"], n["unreached"], n["invalid"] + n["error"], rate,
                     f"{d['budget_s']:.0f} s", f"{d['seconds']:,.0f} s"])
    return _table(["run", "design", "mutants", "killed by the engines", "killed by SGLang", "survived", "equivalent",
                   "unreached", "invalid", "kill rate", "budget each", "wall"], rows,
                  ["---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])


def mutation_modules() -> str:
    d = json.loads((ROOT / "bench" / "mutation.json").read_text())
    rows = [[r["group"], r["mutants"], r["killed"], r["survived"], r["equivalent"], r["unreached"], r["invalid"] + r["error"],
             f"{r['kill_rate']:.0%}" if r["kill_rate"] is not None else "-"] for r in d["by_module"]]
    return f"`{d['command']}`:\n\n" + _table(["module", "mutants", "killed", "survived", "equivalent", "unreached", "invalid",
                                                "kill rate"], rows, ["---"] + ["---:"] * 7)


def survivors() -> str:
    """Mutants some recorded run left alive and no recorded run killed."""
    killed = {o["mutant"]["id"] + "@" + d.get("design", "current") for _, d in _runs() for o in d["outcomes"]
              if o["status"] in ("killed", "equivalent")}
    rows, seen = [], set()
    for name, d in _runs():
        for o in d["outcomes"]:
            key = o["mutant"]["id"] + "@" + d.get("design", "current")
            if o["status"] != "survived" or key in killed or key in seen:
                continue
            seen.add(key)
            m = o["mutant"]
            rows.append([f"`{m['id']}`", d.get("design", "current"), f"`{m['before']}` -> `{m['after']}`", o.get("gap") or "-",
                         f"bench/{name}"])
    return _table(["mutant", "design", "change", "gap", "run"], rows)


# -- releases.md and model.md -----------------------------------------------------------------------------------


def fixes() -> str:
    from model.designs import FIXES

    rows = [[f"`{f.name}`", f"#{f.pr}" if f.pr else "not identified", f.first_tag, ", ".join(f"`{v}`" for v in f.variants),
             f.summary] for f in FIXES.values()]
    return _table(["fix", "SGLang PR", "first release", "variants", "what it changes"], rows)


def preset_flags() -> str:
    from model.designs import FIXES, PRESETS

    names = list(PRESETS)
    head = ["flag"] + [f"`{n}`" for n in names]
    rows = []
    for f in FIXES:
        cells = []
        for n in names:
            v = PRESETS[n].fixes.get(f)
            cells.append("-" if v is None else ("on" if v == "on" else f"`{v}`"))
        rows.append([f"`{f}`", *cells])
    return _table(head, rows)


def releases() -> str:
    from model.designs import CURRENT_RELEASE
    from upstream.releases import RELEASES

    rows = [[r.version, f"`{r.preset}`" if r.preset else "no preset", r.note] for r in RELEASES.values()]
    return f"`current` has the flags of SGLang {CURRENT_RELEASE}.\n\n" + _table(["SGLang release", "kvmc preset", "API family"], rows)


# -- the registry ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    name: str
    page: str  # relative to docs/
    render: Callable[[], str]
    begin: str = ""  # other markers than begin(name) / end(name) (the conformance section's)
    end: str = ""

    def markers(self) -> tuple[str, str]:
        return (self.begin or begin(self.name), self.end or end(self.name))

    @property
    def inclusive(self) -> bool:
        """The render includes its markers (the conformance section)."""
        return bool(self.begin)


def _conform_markers() -> tuple[str, str]:
    from upstream.conform import BEGIN, END

    return BEGIN, END


def sections() -> list[Section]:
    cb, ce = _conform_markers()
    return [
        Section("configs", "proofs.md", configs),
        Section("properties", "proofs.md", properties),
        Section("proofs", "proofs.md", proofs_current),
        Section("proofs_presets", "proofs.md", proofs_presets),
        Section("conform_rows", "conformance.md", conform_rows),
        Section("loop_rows", "conformance.md", loop_rows),
        Section("conform", "conformance.md", conform_section, cb, ce),
        Section("planted", "mutants.md", planted),
        Section("mutation_runs", "mutants.md", mutation_runs),
        Section("mutation_modules", "mutants.md", mutation_modules),
        Section("survivors", "mutants.md", survivors),
        Section("releases", "releases.md", releases),
        Section("fixes", "model.md", fixes),
        Section("preset_flags", "releases.md", preset_flags),
    ]


class StaleMarkers(ValueError):
    pass


def regenerate(text: str, secs: list[Section]) -> str:
    """`text` with every section of `secs` re-rendered between its markers."""
    for s in secs:
        b, e = s.markers()
        if text.count(b) != 1 or text.count(e) != 1 or text.index(b) > text.index(e):
            raise StaleMarkers(f"docs/{s.page}: expected one {b!r} ... {e!r} pair")
        head, rest = text.split(b, 1)
        _old, tail = rest.split(e, 1)
        body = s.render()
        text = head + body + tail if s.inclusive else head + b + "\n" + body + "\n" + e + tail
    return text


def pages(docs: Path | None = None) -> dict[str, tuple[str, str]]:
    """page -> (text on disk, text regenerated), for the pages under `docs` (default docs/)."""
    docs = docs or DOCS
    by: dict[str, list[Section]] = {}
    for s in sections():
        by.setdefault(s.page, []).append(s)
    out = {}
    for page, secs in by.items():
        old = (docs / page).read_text()
        out[page] = (old, regenerate(old, secs))
    return out


# -- dated run logs belong in docs/log/ -------------------------------------------------------------

# A line of a reference page that says when something was run: a date (a PR's merge date, "merged
# 2026-05-16", is a fact about SGLang and allowed), a session number, a HEAD commit, a machine load, a
# clock time. The log pages (docs/log/) and bench/results.md keep those.
DATED = [
    (re.compile(r"(?<!merged )\b20\d\d-\d\d-\d\d\b"), "a date"),
    (re.compile(r"\bsessions? (?:[2-9]|\d\d+)\b", re.I), "a session number"),  # session 0 and 1 are streaming sessions
    (re.compile(r"\bHEAD [0-9a-f]{7,40}\b"), "a HEAD commit"),
    (re.compile(r"\bload (?:of )?\d+(?:\.\d+)?(?:-\d+)?\b"), "a machine load"),
    (re.compile(r"\b\d\d:\d\d(?:-\d\d:\d\d)? UTC\b"), "a clock time"),
]


def dated_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, line) for each line of `text` that carries a run log's date."""
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        for pat, what in DATED:
            if pat.search(line):
                out.append((i, what, line))
                break
    return out


def reference_pages(docs: Path | None = None) -> list[Path]:
    """Every Markdown page of docs/ but the log (docs/log/)."""
    docs = docs or DOCS
    return sorted(p for p in docs.rglob("*.md") if "log" not in p.relative_to(docs).parts)
