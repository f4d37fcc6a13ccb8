"""`--executor` / `--ray-address` (checker/cli/executor.py): bad values and a missing ray extra
are one line and exit 2, before any work (no Ray instance is started here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from checker.cli import main


@pytest.mark.parametrize("argv, says", [
    (["--executor", "dask"], "--executor 'dask': expected one of local, ray"),
    (["--ray-address", "auto"], "--ray-address 'auto' needs --executor ray"),
    (["--executor", "ray", "--ray-address", "headnode"], "expected auto or HOST:PORT"),
    (["--executor", "ray", "--engine", "bmc"], "expected --engine induction or --jobs N"),
])
def test_bad_executor_options(argv: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["check", "--config", "small", "--depth", "1", "--out", str(tmp_path)]
    if "--engine" not in argv:
        base += ["--engine", "induction"]
    code = main(base + argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and says in err and len(err.splitlines()) == 1, err
    assert not any(tmp_path.iterdir()), "nothing written"


def test_without_the_ray_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as on an install without the extra
    code = main(["review", "--config", "small", "--depth", "1", "--executor", "ray", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "pip install" in err and "[ray]" in err and len(err.splitlines()) == 1, err
