"""`kvmc show`: the terminal step table (colour only where wanted), the HTML page and the PNG chart,
checked against the model's own ledger on real counterexamples."""

from __future__ import annotations

import io
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from checker.reports import chart

from checker.traces import itf
from checker.reports.html import html, use_color
from model.ops import Concrete
from model.system import System
from specs.properties import ledger

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def kvmc(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "checker.cli", *args], capture_output=True, text=True, timeout=120, env=env)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def png_pixels(path: Path) -> set:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what matplotlib and Chromium write) to a set of colours."""
    data = path.read_bytes()
    w, h = png_size(data)
    depth, ctype, interlace = data[24], data[25], data[28]
    assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unexpected PNG format {depth=} {ctype=} {interlace=}"
    bpp = 3 if ctype == 2 else 4
    idat, pos = b"", 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colours = set()
    for row in range(h):
        f = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1:(row + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        for i in range(0, stride, bpp * 3):  # every third pixel is plenty for colour presence
            colours.add(tuple(line[i:i + 3]))
    return colours


def hex_rgb(h: str) -> tuple[int, int, int]:
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def has_colour(colours: set, rgb: tuple[int, int, int], tol: int = 3) -> bool:
    return any(all(abs(c[i] - rgb[i]) <= tol for i in range(3)) for c in colours)


# -- terminal -------------------------------------------------------------------------------------
def test_show_plain_when_piped_and_coloured_when_asked(swa_trace: Path) -> None:
    plain = kvmc("show", str(swa_trace))
    assert plain.returncode == 0, plain.stderr
    assert not ANSI.search(plain.stdout), "piped output must carry no escape codes"
    assert "step 1: event_loop_iteration" in plain.stdout
    assert plain.stdout.rstrip().splitlines()[-1].startswith("violated: busy_check_sound")
    col = kvmc("show", str(swa_trace), "--color", "always")
    assert col.returncode == 0 and ANSI.search(col.stdout)
    assert ANSI.sub("", col.stdout) == plain.stdout, "colour must not change the text"


def test_use_color_follows_tty_and_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert use_color(Tty()) is True
    assert use_color(io.StringIO()) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(Tty()) is False
    assert use_color(io.StringIO(), "always") is True


# -- the breakdown is the model's ledger ----------------------------------------------------------------
def test_breakdown_matches_ledger_and_shows_the_leak(leak_trace: Path) -> None:
    t = itf.read(leak_trace)
    bd = chart.breakdown(t)
    assert bd.pool_names == (["full", "swa"] if t.cfg.hybrid_swa else ["full"])
    sysm = System(t.cfg, t.design)
    for st, info in zip(t.states, bd.steps):
        L = ledger(sysm.ctx(Concrete(), t.params), st)
        f = info.pools["full"]
        assert f.evictable >= 0 and f.protected >= 0
        assert f.evictable + f.protected == L.full_tree
        assert (f.available, f.request, f.session) == (L.full_free, L.full_reqs, L.full_sessions)
        assert (f.leaked == 0) == bool(L.full_ok)
        assert f.available + f.evictable + f.protected + f.request + f.session + f.leaked == t.params.full_tokens
    assert bd.steps[0].pools["full"].leaked == 0
    last = bd.steps[-1].pools["full"]
    # the violation line written by `kvmc check` has the same equation: "... = owned != F=total"
    m = re.search(r"full: .*= (\d+) != F=(\d+)", str(t.meta["violation"]))
    assert m, t.meta["violation"]
    assert last.owned == int(m.group(1)) and last.total == int(m.group(2)) and last.leaked > 0
    assert chart.summary(bd)["full"]["max_leaked"] == last.leaked


def test_breakdown_exact_ledger_for_a_false_alarm(swa_trace: Path) -> None:
    t = itf.read(swa_trace)
    bd = chart.breakdown(t)
    assert bd.pool_names == ["full", "swa"]
    for info in bd.steps:
        for p in bd.pool_names:
            assert info.pools[p].leaked == 0
    assert bd.steps[-1].busy == "crashed"  # pre-#21499 check on SWARadixCache


# -- HTML -------------------------------------------------------------------------------------------
def test_html_page_is_self_contained_with_table_and_charts(swa_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = kvmc("show", str(swa_trace), "--html", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    t = itf.read(swa_trace)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for external in ("<link", " src=", "@import", "url(", "https://", "http://www.w3.org/1999"):
        assert external not in page, f"page fetches something: {external}"
    # one chart per pool, one row per state, and the violation is the table's last row
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart"') == 2
    assert 'data-pool="full"' in page and 'data-pool="swa"' in page
    assert len(re.findall(r'<tr id="step-\d+"', page)) == t.depth + 1
    body = page[page.index('<table id="trace"'):page.index("</table>")]
    assert body.rstrip().endswith('</tr>\n</tbody>') or body.rstrip().endswith("</tbody>")
    rows = re.findall(r"<tr[^>]*>", body)
    assert 'class="violation"' in rows[-1]
    assert "NotImplementedError" in body[body.rindex('class="violation"'):]
    assert "<script>" in page and "<style>" in page


def test_html_shows_the_leak(leak_trace: Path) -> None:
    t = itf.read(leak_trace)
    page = html(t)
    assert 'class="seg-leaked"' in page
    assert "leaked</span>" in page
    assert 'id="ledger-summary"' in page and "owned by nobody" in page


def test_png_chart_shows_the_leak_colour(leak_trace: Path, swa_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "chart.png"
    r = kvmc("show", str(leak_trace), "--png", str(out))
    assert r.returncode == 0, r.stderr
    w, h = png_size(out.read_bytes())
    assert w > 200 and h > 200
    leaked = hex_rgb(chart.COLORS["leaked"])
    assert has_colour(png_pixels(out), leaked), "the leaked segment is missing from the chart"
    clean = tmp_path / "clean.png"
    assert kvmc("show", str(swa_trace), "--png", str(clean)).returncode == 0
    # the legend has a leaked swatch too, so compare the chart area: the clean trace's bars have none
    assert png_size(clean.read_bytes())[1] > png_size(out.read_bytes())[1], "two pools make a taller figure"


# -- bad input ---------------------------------------------------------------------------------------
def test_show_bad_input_is_one_line_exit_2(tmp_path: Path, swa_trace: Path) -> None:
    bad = tmp_path / "bad.itf.json"
    bad.write_text("{not json")
    out = tmp_path / "never.html"
    r = kvmc("show", str(bad), "--html", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not valid JSON" in r.stderr
    assert not out.exists()
    r = kvmc("show", str(swa_trace), str(swa_trace), "--png", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "one trace" in r.stderr
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    r = kvmc("show", str(swa_trace), "--html", str(blocker / "r.html"))
    assert r.returncode == 2 and "is a file, not a directory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert str(blocker) in r.stderr
    r = kvmc("show", str(swa_trace), "--color", "sometimes")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_double_free_is_drawn_above_the_pool_size(double_free_trace: Path) -> None:
    t = itf.read(double_free_trace)
    bd = chart.breakdown(t)
    last = bd.steps[-1].pools["full"]
    m = re.search(r"full: .*= (\d+) != F=(\d+)", str(t.meta["violation"]))
    assert m, t.meta["violation"]
    owned, total = int(m.group(1)), int(m.group(2))
    assert owned > total and last.leaked == total - owned
    assert chart.summary(bd)["full"]["max_double"] == owned - total
    page = html(t)
    assert 'class="seg-double"' in page and "owned twice</span>" in page
