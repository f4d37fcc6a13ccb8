"""Open the HTML report in headless Chromium and take a screenshot: the page renders, the charts
are drawn (their colours are on screen), and the leak is visible."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from checker.reports import chart

from checker.traces import itf
from checker.reports.html import write_html

from .test_reports import has_colour, hex_rgb, png_pixels, png_size

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str:
    env = os.environ.get("KVMC_CHROMIUM")
    if env:
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    pytest.fail("no headless browser found (looked for $KVMC_CHROMIUM, " + ", ".join(CANDIDATES)
                + "); install Debian's chromium (apt-get install -y chromium) to run the HTML report test")


def screenshot(page: Path, out: Path, tmp: Path, size: str = "1300,1000") -> None:
    browser = find_browser()
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--hide-scrollbars", f"--user-data-dir={tmp / 'profile'}", f"--window-size={size}",
           f"--screenshot={out}", page.resolve().as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and out.exists(), f"{browser} failed ({r.returncode}): {r.stderr[-2000:]}"


def test_html_report_renders_in_headless_chromium(leak_trace: Path, tmp_path: Path) -> None:
    page = write_html(itf.read(leak_trace), tmp_path / "leak.html")
    shot = tmp_path / "shot.png"
    screenshot(page, shot, tmp_path)
    data = shot.read_bytes()
    assert len(data) > 1000
    w, h = png_size(data)
    assert (w, h) == (1300, 1000)
    colours = png_pixels(shot)
    # the chart is drawn: available (green) and the leaked (red) segments are on screen
    assert has_colour(colours, hex_rgb(chart.COLORS["available"]))
    assert has_colour(colours, hex_rgb(chart.COLORS["leaked"]))
    assert len(colours) > 20, "the screenshot is (nearly) blank"
