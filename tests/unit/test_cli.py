"""CLI contract: bad input is one line naming the value and what was expected, exit status 2,
nothing written; `kvmc list` names everything a user can pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker.cli import main
from model.designs import FIXES, PRESETS
from specs.configs import CONFIGS
from specs.properties import PROPERTIES


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args, needle, allowed",
    [
        (["check", "--design", "v9"], "'v9'", "current"),
        (["check", "--without", "no_such_fix"], "'no_such_fix'", "swa_busy_check"),
        (["check", "--with", "session_active=bogus"], "bogus", "active_idx"),
        (["check", "--property", "liveness"], "'liveness'", "conservation"),
        (["check", "--config", "huge"], "'huge'", "hybrid_swa"),
        (["check", "--mutant", "nope"], "'nope'", "verify_keeps_rejected_page"),
        (["check", "--depth", "0"], "--depth 0", "positive"),
        (["check", "--depth", "-3"], "--depth -3", "positive"),
        (["check", "--depth", "ten"], "ten", "int"),
        (["check", "--engine", "magic"], "'magic'", "bmc"),
        (["check", "--timeout", "0"], "--timeout", "0.01"),
        (["check", "--timeout", "0.0001"], "--timeout", "0.01"),  # once silently "no limit"
        (["check", "--timeout", "nan"], "'nan'", "finite"),
        (["check", "--timeout", "inf"], "'inf'", "finite"),
        (["review", "--timeout=-inf"], "'-inf'", "finite"),
        (["check", "--frobnicate"], "--frobnicate", "--help"),
        (["frob"], "frob", "--help"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str, allowed: str, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    code, out, err = run_cli(args + ["--out", str(tmp_path / "cex")] if args[0] == "check" and len(args) > 1 and
                             not args[1].startswith("--frob") else args, capsys)
    assert code == 2, (args, code, out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0] and allowed in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "cex").exists()


def test_list_names_every_design_fix_property_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["list", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert set(data["designs"]) == set(PRESETS)
    assert set(data["fixes"]) == set(FIXES)
    assert set(data["properties"]) == set(PROPERTIES)
    assert set(data["configs"]) == set(CONFIGS)
    assert set(data["pass_invariants"]) == {"admitted_fit"}
    for name in ("add_one_req", "add_chunked_req", "init_load_back", "restore_to_req", "save_from_req",
                 "retract_decode", "check_decode_mem", "_evict_swa", "release_kv_cache", "eagle_decode_step"):
        assert name in data["transitions"], name
        assert "::" in data["transitions"][name]["models"]


def test_show_rejects_a_truncated_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.itf.json"
    bad.write_text('{"#meta": {"config": "small"}, "states": [')
    code, _, err = run_cli(["show", str(bad)], capsys)
    assert code == 2 and str(bad) in err and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_entry_point_installed() -> None:
    r = subprocess.run([sys.executable, "-m", "checker.cli", "check", "--depth", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--depth 0" in r.stderr


def test_piped_progress_keeps_every_dropped_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    """Piped, proof-phase lines are thinned to one per PHASE_EVERY_S, except a candidate Houdini
    drops (the line that says why a property was not proved)."""
    from checker.cli.app import ProgressPrinter

    pr = ProgressPrinter(True)
    pr.tty = False
    for i in range(3):
        pr("small", 1, 0.1 * i, {"_phase": f"k=1 step case for conservation, case {i}: unsat"})
    pr("small", 1, 0.4, {"_phase": "proof: dropped conservation: step case at k=1: solver unknown"})
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "case 0" in lines[0] and "dropped conservation" in lines[1], lines
