"""The guide's change (docs/patches.md), reviewed end to end: `add_chunked_req` with a different SWA
reserve, written with plain `if` / `min` / `max` (docs/patches/swa_reserve.py), is unchanged on
every property checked; the variant that never defers the chunk (swa_reserve_floor.py) newly breaks
`no_prefill_oom`, with a counterexample that `kvmc show` prints and the torch pool reproduces with
the patch in it (`kvmc replay`, the add_chunked_req hook).

The floor variant is reviewed with the BMC (the patch's z3 interpretation, the shortest
counterexample); the safe one with the explicit engine at the same depth, whose search of the same
config breaks the floor variant there too (asserted here), so its "unchanged" can fail. A side of
a BMC review of hybrid_swa at depth 2 costs about four times an explicit one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker.cli import main

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "patches"
COMMON = ["--config", "hybrid_swa", "--property", "no_prefill_oom", "--depth", "2", "--no-prove", "--no-minimize",
          "--jobs", "1", "--format", "json"]


def _review(capsys: pytest.CaptureFixture[str], patch: str, out: Path, engine: str = "bmc") -> tuple[int, dict, str]:
    rc = main(["review", "--head-patch", str(GUIDE / patch), *COMMON, "--engine", engine, "--out", str(out)])
    o, err = capsys.readouterr()
    return rc, json.loads(o) if o.strip().startswith("{") else {}, err


def test_guide_change_reviewed_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # the BMC without specs/lemmas.py's strengthening invariants as extra goals: a lemma is asserted
    # only where it was checked to hold, so it changes no verdict and no counterexample, only how hard
    # the queries are, and at depth 2 asking them costs more than it saves (the BMC review's two sides:
    # 22 s to 4 s). Lemmas only speed up proofs (tests/quality/test_mutants.py);
    # tests/engines/test_lemmas_hold.py checks them. (--jobs 1: the review runs in this process.)
    from checker.engines import bmc as bmc_mod

    monkeypatch.setattr(bmc_mod, "LEMMAS", {})
    rc, data, err = _review(capsys, "swa_reserve.py", tmp_path / "safe", "explicit")
    assert rc == 0, err
    (row,) = data["properties"]
    assert row["change"] == "unchanged" and row["head"]["verdict"] == "holds to depth", row
    assert data["head"] == "current+swa_reserve"
    # the same explicit search breaks the floor variant: the safe one's "unchanged" is not for want of looking
    rc, data, err = _review(capsys, "swa_reserve_floor.py", tmp_path / "floor-explicit", "explicit")
    assert rc == 1, err
    (row,) = data["properties"]
    assert row["change"] == "newly broken" and row["head"]["configs"]["hybrid_swa"]["depth"] == 2, row

    rc, data, err = _review(capsys, "swa_reserve_floor.py", tmp_path / "floor")
    assert rc == 1, err
    (row,) = data["properties"]
    assert row["change"] == "newly broken" and row["base"]["verdict"] == "holds to depth", row
    cx = row["head"]["configs"]["hybrid_swa"]
    assert cx["violation"].startswith("violated: no_prefill_oom") and cx["depth"] == 2
    # replayed on the pool with the patch in it (the add_chunked_req hook), before it was reported
    assert cx["pool_replay"] == "confirmed (reproduced on the pool, cpu)", cx["pool_replay"]
    f = Path(cx["counterexample"])
    meta = json.loads(f.read_text())["#meta"]
    assert [p["transition"] for p in meta["patches"]] == ["add_chunked_req"]
    assert Path(meta["patches"][0]["file"]) == (GUIDE / "swa_reserve_floor.py").resolve()

    rc = main(["show", str(f), "--color", "never"])
    out, err = capsys.readouterr()
    assert rc == 0 and "violated: no_prefill_oom" in out and "design current+swa_reserve_floor" in out, err
    rc = main(["replay", str(f)])
    out, err = capsys.readouterr()
    assert rc == 0 and "reproduced" in out, (out, err)
