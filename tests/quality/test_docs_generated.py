"""docs/ reference pages are today's facts: their generated tables match the generator (docs/tables.py,
`python -m docs`) and no line carries a dated run log (those live in docs/log/).

The generator reads the project's own data (specs, model.designs, upstream rows, bench/mutation*.json,
docs/data/*.json) and runs neither z3 nor SGLang, so regenerating every page in memory takes seconds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs import __main__ as cli
from docs import tables

ROOT = Path(__file__).resolve().parents[2]


def _copy_docs(tmp_path: Path) -> Path:
    dst = tmp_path / "docs"
    shutil.copytree(tables.DOCS, dst, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return dst


def test_generated_tables_are_current():
    stale = []
    for page, (old, new) in tables.pages().items():
        if old != new:
            o, n = old.splitlines(), new.splitlines()
            i = next((k for k, (a, b) in enumerate(zip(o, n)) if a != b), min(len(o), len(n)))
            stale.append(f"docs/{page}:{i + 1}: on disk {o[i] if i < len(o) else '<end>'!r}, "
                         f"generated {n[i] if i < len(n) else '<end>'!r}")
    assert not stale, "stale generated tables; run `python -m docs`:\n" + "\n".join(stale)


def test_every_section_has_its_page_and_markers():
    names = [s.name for s in tables.sections()]
    assert len(names) == len(set(names))
    for s in tables.sections():
        text = (tables.DOCS / s.page).read_text()
        b, e = s.markers()
        assert text.count(b) == 1 and text.count(e) == 1, f"docs/{s.page}: {s.name}'s markers"


def test_reference_pages_carry_no_dated_run_log():
    pages = tables.reference_pages()
    assert {p.name for p in pages} >= {"proofs.md", "conformance.md", "mutants.md", "engines.md", "releases.md",
                                       "findings.md"}
    assert not any("log" in p.relative_to(tables.DOCS).parts for p in pages)
    bad = [f"{p.relative_to(ROOT)}:{n}: {what}: {line.strip()[:120]}" for p in pages
           for n, what, line in tables.dated_lines(p.read_text())]
    assert not bad, "dated run logs in reference pages (move them to docs/log/):\n" + "\n".join(bad)


def test_the_log_keeps_each_former_page():
    for page in ("proofs", "conformance", "mutants", "engines", "releases", "findings"):
        log = (tables.DOCS / "log" / f"{page}.md").read_text()
        assert log.startswith(f"# Log: {page}.md")
        assert tables.dated_lines(log), f"docs/log/{page}.md should hold the dated history"


@pytest.mark.parametrize("line,dated", [
    ("measured 2026-11-26 12:40-14:10 UTC on the 2-core machine", True),
    ("(#34653, merged 2026-08-13, before d55f1c28)", False),
    ("**Session 46: all 13 proved (k=1)**", True),
    ("in session 39 the configs were added", True),
    ("session 0's one-token first turn arrives", False),
    ("(HEAD 363361d, beside a CI run)", True),
    ("a 2-core machine at load 7-10", True),
    ("a load-back that loads less than promised", False),
    ("16:02-16:27 UTC", True),
    ("every property holds to depth 3 on `current`", False),
])
def test_dated_line_patterns(line, dated):
    assert bool(tables.dated_lines(line)) is dated


def test_a_stale_table_is_caught(tmp_path):
    docs = _copy_docs(tmp_path)
    assert all(old == new for old, new in tables.pages(docs).values())
    page = docs / "proofs.md"
    text = page.read_text()
    row = next(l for l in text.splitlines() if l.startswith("| `small` |") and "proved" in l)
    page.write_text(text.replace(row, row.replace("proved", "violated"), 1))
    stale = [p for p, (old, new) in tables.pages(docs).items() if old != new]
    assert stale == ["proofs.md"]


def test_a_changed_recorded_result_makes_its_table_stale(tmp_path, monkeypatch):
    docs = _copy_docs(tmp_path)
    monkeypatch.setattr(tables, "DATA", docs / "data")
    path = docs / "data" / "proofs.json"
    path.write_text(path.read_text().replace('"wall_s": 1050,', '"wall_s": 999,', 1))
    stale = [p for p, (old, new) in tables.pages(docs).items() if old != new]
    assert stale == ["proofs.md"]


def test_a_removed_marker_is_an_error(tmp_path):
    docs = _copy_docs(tmp_path)
    page = docs / "mutants.md"
    page.write_text(page.read_text().replace(tables.end("planted"), ""))
    with pytest.raises(tables.StaleMarkers, match="planted"):
        tables.pages(docs)


def test_check_exits_1_on_a_stale_table_or_a_dated_line(tmp_path, monkeypatch, capsys):
    docs = _copy_docs(tmp_path)
    monkeypatch.setattr(tables, "DOCS", docs)
    assert cli.main(["--check"]) == 0
    (docs / "engines.md").write_text((docs / "engines.md").read_text() + "\nMeasured in session 48 at load 5.\n")
    assert cli.main(["--check"]) == 1
    assert "a session number" in capsys.readouterr().out
    page = docs / "model.md"
    page.write_text(re.sub(r"(\| `swa_busy_check` \| )#\d+", r"\1#1", page.read_text(), count=1))
    assert cli.main(["--check"]) == 1
    assert "docs/model.md: generated tables are stale" in capsys.readouterr().out
    assert cli.main([]) == 0  # regenerates the copy in place ...
    assert "#1 |" not in page.read_text().split(tables.begin("fixes"))[1].split("\n")[3]
    (docs / "engines.md").write_text((docs / "engines.md").read_text().replace("Measured in session 48 at load 5.", ""))
    assert cli.main(["--check"]) == 0  # ... and then checks clean


def test_nothing_imports_docs():
    pat = re.compile(r"^\s*(from docs\b|import docs\b)", re.M)
    users = [str(p.relative_to(ROOT)) for top in ("model", "specs", "checker", "pool", "upstream", "bench")
             for p in (ROOT / top).rglob("*.py") if pat.search(p.read_text())]
    assert not users, f"docs/ is the top layer; these import it: {users}"


def test_the_command_runs_without_z3_or_sglang():
    code = ("import sys; from docs import tables; tables.pages(); "
            "bad = [m for m in sys.modules if m == 'z3' or m.startswith(('z3.', 'sglang'))]; print(bad); "
            "sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_relative_link_of_docs_resolves(tmp_path):
    def broken(docs: Path) -> list[str]:
        out = []
        for page in sorted(docs.rglob("*.md")):
            for m in re.finditer(r"\]\(([^)\s]+)\)", page.read_text()):
                target = m.group(1)
                if target.startswith(("http:", "https:", "#", "mailto:")):
                    continue
                if not (page.parent / target.split("#")[0]).exists():
                    out.append(f"{page.relative_to(docs)}: ({target})")
        return out

    assert not broken(tables.DOCS), "broken links:\n" + "\n".join(broken(tables.DOCS))
    docs = _copy_docs(tmp_path)
    (docs / "log" / "proofs.md").write_text((docs / "log" / "proofs.md").read_text().replace("](../model.md)", "](model.md)"))
    assert broken(docs) and all(b.startswith("log/proofs.md") for b in broken(docs))
