"""`--engine portfolio` (checker/engines/portfolio.py), `kvmc check`'s default: explicit and BMC
side by side, one verdict per property naming the engine that established it, never more than
one of them checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checker.engines.portfolio import merge
from checker.engines.results import Result
from checker.engines.run import run_check
from checker.verdict import Verdict
from model.designs import PRESETS

REPO = Path(__file__).resolve().parents[2]


def R(v: Verdict, depth: int, reason: str = "") -> Result:
    return Result("conservation", v, depth, reason=reason)


V, H, P, U, VAC = Verdict.VIOLATED, Verdict.HOLDS_TO_DEPTH, Verdict.PROVED, Verdict.UNKNOWN, Verdict.VACUOUS


@pytest.mark.parametrize("bmc, explicit, want, by", [
    (R(H, 3), R(V, 2), V, "explicit"),  # a violation on a point beats a whole-bounds holds
    (R(V, 2), R(H, 3), V, "bmc"),
    (R(V, 3), R(V, 2), V, "explicit"),  # the shorter counterexample
    (R(V, 2), R(V, 2), V, "bmc"),  # a tie: BMC's is minimal over the whole bounds
    (R(P, 1), R(H, 3), P, "bmc"),
    (R(U, 1, "timeout"), R(H, 5), U, "bmc"),  # a timeout is never safe, however deep the points went
    (R(VAC, 2), R(H, 4), VAC, "bmc"),
    (R(H, 2), R(H, 4), H, "bmc"),  # the whole-bounds verdict, the points' beside it
    (None, R(H, 4), H, "explicit"),  # past z3's page reach
])
def test_merge(bmc: Result | None, explicit: Result, want: Verdict, by: str) -> None:
    m = merge("conservation", bmc, explicit)
    assert m.verdict is want and m.meta["established_by"] == by
    assert m.words().endswith(f"[{by}]")
    other = explicit if by == "bmc" else bmc
    if other is not None:
        assert m.meta["also"].startswith(("explicit: " if by == "bmc" else "bmc: ") + other.words())
        assert m.depth == (bmc if by == "bmc" else explicit).depth  # type: ignore[union-attr]
    else:
        assert "also" not in m.meta


def test_merge_refuses_nothing() -> None:
    with pytest.raises(ValueError, match="neither engine checked prop='conservation'"):
        merge("conservation", None, None)


def test_both_engines_run_and_the_violation_says_which() -> None:
    rep = run_check(PRESETS["v0.5.10.post1"], ["sessions"], ["busy_check_sound", "conservation"], 2,
                    prove=False, keep_going=True, engine="portfolio")
    res = rep.configs[0].results
    v = res["busy_check_sound"]
    assert v.verdict is Verdict.VIOLATED and v.trace is not None
    assert set(v.meta["engines"]) == {"bmc", "explicit"} and v.meta["engines"]["explicit"] == "violated"
    c = res["conservation"]
    assert c.meta["established_by"] == "bmc" and c.meta["also"].startswith("explicit: ")


def test_past_the_symbolic_page_reach_only_the_explicit_engine_runs() -> None:
    rep = run_check(PRESETS["current"], ["hybrid_swa_page16"], ["conservation"], 1, prove=True, engine="portfolio")
    c = rep.configs[0]
    r = c.results["conservation"]
    assert not c.not_applicable and r.meta["engines"] == {"explicit": r.verdict.value}
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and " parameter points of the bounds" in r.words()  # never whole-bounds holds
    assert c.proof == {}
    # the z3 engines alone say why they did not check it
    b = run_check(PRESETS["current"], ["hybrid_swa_page16"], ["conservation"], 1, engine="bmc").configs[0]
    assert b.results == {} and "beyond the symbolic engines' reach" in b.not_applicable


def test_the_cli_default_is_the_portfolio(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "checker.cli", "check", "--config", "small", "--property", "conservation",
                          "--depth", "2", "--no-prove", "--out", str(tmp_path / "o")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.strip().startswith(("conservation", "explicit:"))]
    assert lines[0].split(None, 1)[1] == "holds to depth 2 (not proved) [bmc] (witness at depth 2)", out.stdout
    assert lines[1].strip().startswith("explicit: holds to depth 2 (not proved) on "), out.stdout
