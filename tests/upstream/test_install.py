"""`kvmc sglang install`: idempotent, atomic; a wheel that cannot be had is one line, exit 2, and
leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from upstream.install import MARKER, deps_dir, install

REPO = Path(__file__).resolve().parent.parent.parent


def test_second_install_has_nothing_to_do(sglang_root: Path) -> None:
    said: list[str] = []
    assert install(["0.5.13", "0.5.10.post1"], sglang_root, say=said.append) == []
    assert said[-1] == "nothing to do"
    assert (sglang_root / "sglang-0.5.13" / MARKER).exists()


def test_wheel_that_will_not_install_leaves_nothing(sglang_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "sg"
    root.mkdir()
    # the dependencies are there (the real folder), the release's wheel cannot be had (no index)
    os.symlink(deps_dir(sglang_root), deps_dir(root))
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty), KVMC_SGLANG_WHEELS=str(empty))
    p = subprocess.run([sys.executable, "-m", "upstream", "sglang", "install", "0.5.11", "--dir", str(root)],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert p.returncode == 2, p.stderr
    assert "could not install sglang==0.5.11" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert sorted(x.name for x in root.iterdir()) == [deps_dir(root).name]  # no sglang-0.5.11, no .partial-*
