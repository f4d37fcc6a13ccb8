"""Sample counterexamples for the report tests, made by the real CLI once per session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _check(out: Path, *args: str) -> Path:
    cmd = [sys.executable, "-m", "checker.cli", "check", "--no-progress", "--out", str(out), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, f"expected a violation (exit 1) from {' '.join(cmd)}, got {r.returncode}:\n{r.stdout}\n{r.stderr}"
    found = sorted(out.rglob("*.itf.json"))
    assert len(found) == 1, f"expected one counterexample under {out}, found {found}"
    return found[0]


@pytest.fixture(scope="session")
def swa_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """#21499 off: the pre-fix busy check crashes on the hybrid SWA radix (two pools, no leak)."""
    return _check(tmp_path_factory.mktemp("swa"), "--without", "swa_busy_check", "--config", "hybrid_swa",
                  "--property", "busy_check_sound", "--depth", "2")


@pytest.fixture(scope="session")
def leak_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted verify_keeps_rejected_page bug (EAGLE topk>1, #27228's setting): a rejected draft
    page is never freed, a real leak in the full pool."""
    return _check(tmp_path_factory.mktemp("leak"), "--design", "v0.5.13", "--without", "spec_topk_busy_check", "--mutant",
                  "verify_keeps_rejected_page", "--config", "spec_topk", "--property", "conservation", "--depth", "4")


@pytest.fixture(scope="session")
def double_free_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The planted finished_tail_freed_twice bug (paged): a page freed twice, slots owned twice."""
    return _check(tmp_path_factory.mktemp("double"), "--mutant", "finished_tail_freed_twice", "--config", "paged",
                  "--property", "conservation", "--depth", "4")
