"""`kvmc replay` on bad input (one line, exit 2, never a traceback), on a pool that does not
follow the trace (diverged at step N with both values, exit 1), and the refinement check on
random walks of the model (long traces, every design preset)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from checker.cli import main
from checker.replay.regen import DEFAULT_DIR
from checker.replay.pool import DIVERGED, ERROR, replay_file, replay_trace
from model.designs import PRESETS
from specs.configs import CONFIGS

from checker.traces.walk import random_walk

SOURCE = next(iter(sorted(DEFAULT_DIR.rglob("*.itf.json"))), None)
needs_trace = pytest.mark.skipif(SOURCE is None, reason="no checked-in counterexample to corrupt")


def _load() -> dict:
    assert SOURCE is not None
    return json.loads(SOURCE.read_text())


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["replay", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _edit_number(d: dict) -> None:
    s = d["states"][-1]
    s["full_available"] = {"#bigint": str(int(s["full_available"]["#bigint"]) + 7)}


def _missing_field(d: dict) -> None:
    del d["states"][1]["kv_committed_len"]


def _wrong_type(d: dict) -> None:
    d["states"][1]["full_available"] = "lots"


def _unknown_action(d: dict) -> None:
    d["states"][1]["mbt::actionTaken"] = "teleport"


CORRUPTIONS = {
    "edited number": (_edit_number, "full_available"),
    "missing field": (_missing_field, "field kv_committed_len"),
    "wrong type": (_wrong_type, "field full_available"),
    "unknown action": (_unknown_action, "mbt::actionTaken"),
}


@needs_trace
@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_corrupted_trace_one_line_exit_2(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _load()
    edit, field = CORRUPTIONS[kind]
    edit(d)
    f = tmp_path / "bad.itf.json"
    f.write_text(json.dumps(d))
    rc, out, err = _run(capsys, str(f))
    assert rc == 2
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(f) in lines[0] and "state" in lines[0] and field in lines[0], lines[0]


@needs_trace
def test_truncated_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "cut.itf.json"
    f.write_text(SOURCE.read_text()[:500])  # type: ignore[union-attr]
    rc, _out, err = _run(capsys, str(f))
    assert rc == 2 and "Traceback" not in err
    assert str(f) in err and "not valid JSON" in err and "line" in err


def test_missing_file_and_bad_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _o, err = _run(capsys, str(tmp_path / "nope.itf.json"))
    assert rc == 2 and "cannot read" in err
    rc, _o, err = _run(capsys, "--device", "tpu", str(tmp_path / "nope.itf.json"))
    assert rc == 2 and "unknown device" in err


@needs_trace
def test_divergence_is_reported_with_both_values(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A pool that does not follow the trace (here: an allocator that reports one page too many)."""
    from pool import allocator

    real = allocator.PagedAllocator.available_size
    monkeypatch.setattr(allocator.PagedAllocator, "available_size", lambda self: real(self) + self.page_size)
    o = replay_file(SOURCE)  # type: ignore[arg-type]
    assert o.status == DIVERGED and o.step == 0
    assert o.field in ("full_available", "swa_available") and o.pool == o.model + CONFIGS[json.loads(SOURCE.read_text())["#meta"]["config"]].page_size  # type: ignore[union-attr]
    rc, _out, err = _run(capsys, str(SOURCE))
    assert rc == 1 and "diverged at step 0" in err and "model=" in err and "pool=" in err


def test_mutant_without_pool_counterpart(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pool import mutants

    walk = random_walk(CONFIGS["spec_topk"], PRESETS["current"].with_mutants(frozenset({"verify_keeps_rejected_page"})), 6, 1)
    monkeypatch.setattr(mutants, "POOL_MUTANTS", {})
    o = replay_trace(walk)
    assert o.status == "not replayable" and "verify_keeps_rejected_page has no pool counterpart" in o.message


@pytest.mark.parametrize("cfg", list(CONFIGS))
@pytest.mark.parametrize("design", ["current", "v0.5.10.post1", "v0.5.12.post1"])
def test_random_walks_refine(cfg: str, design: str) -> None:
    """Long random runs of the model replay step by step on the pool (every field, every choice,
    the tree counters and the busy check). A config the design's release does not ship (EAGLE v1
    after v0.5.12.post1, spec v2 before v0.5.13, the SWA ring before v0.5.20) is skipped."""
    why = CONFIGS[cfg].not_modelled_by(PRESETS[design])
    if why:
        pytest.skip(why)
    rng = random.Random(f"{cfg}/{design}")
    checked = 0
    for _ in range(8):
        t = random_walk(CONFIGS[cfg], PRESETS[design], 14, rng.randrange(1 << 30))
        o = replay_trace(t, file=f"walk {cfg} {design}")
        assert o.ok, o.line()
        checked += len(t.steps)
    assert checked > 0


def test_corrupt_is_not_divergence() -> None:
    """A trace the model itself does not follow is bad input (exit 2), not a kvmc bug."""
    t = random_walk(CONFIGS["small"], PRESETS["current"], 5, 3)
    bad = t.steps[-1].state.set(full_available=t.steps[-1].state.full_available + 1)
    t.steps[-1].state = bad
    o = replay_trace(t)
    assert o.status == ERROR and "full_available" in o.message


def test_ownership_checked_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool bug no mapped field shows (decode writes its new slot one row position early: the
    counters balance, the slot at C-1 is orphaned and position C points at the reserved page) is
    caught by the ownership check at the first decode step, not at the end of the trace."""
    from model.state import DECODE_BATCH
    from pool.allocator import ReqToTokenPool

    walks = (random_walk(CONFIGS["small"], PRESETS["current"], 10, seed) for seed in range(50))
    t = next(w for w in walks if any(st.state.last_batch == DECODE_BATCH for st in w.steps))
    assert replay_trace(t).ok
    first_decode = next(i for i, st in enumerate(t.steps, 1) if st.state.last_batch == DECODE_BATCH)
    write = ReqToTokenPool.write

    def early(self: ReqToTokenPool, r: int, lo: int, idx) -> None:  # noqa: ANN001
        decode = sys._getframe(1).f_code.co_name == "alloc_for_decode"
        write(self, r, lo - 1 if decode else lo, idx)

    monkeypatch.setattr(ReqToTokenPool, "write", early)
    o = replay_trace(t)
    assert o.status == DIVERGED and o.field == "ownership.full" and o.step == first_decode, o.line()
    assert replay_trace(t, compare_derived=False).ok  # the mapped fields alone do not see it


# -- the corruptions of issue 30: bad input (exit 2, one line naming file, state and field), never `diverged`
def _valid_source() -> Path | None:
    """The first checked-in trace that follows the model as it is now (a model change in progress
    can leave one stale until `kvmc regen --update`)."""
    from checker.traces import itf

    for p in sorted(DEFAULT_DIR.rglob("*.itf.json")):
        try:
            itf.read(p, warn=False)
            return p
        except itf.ItfError:
            continue
    return None


VALID = _valid_source()
needs_valid = pytest.mark.skipif(VALID is None, reason="no checked-in counterexample follows the model")


def _load_valid() -> dict:
    assert VALID is not None
    return json.loads(VALID.read_text())


def _drop_last_state(d: dict) -> None:
    d["states"].pop()
    d["#meta"].pop("depth", None)  # even with the depth fixed up, the verdict re-check sees it


def _flip_verdict(d: dict) -> None:
    d["#meta"]["verdict"] = "holds"
    d["#meta"].pop("expected", None)


def _delete_vars(d: dict) -> None:
    del d["vars"]


def _delete_params(d: dict) -> None:
    del d["params"]


def _bad_commit(d: dict) -> None:
    d["#meta"]["sglang_commit"] = "not-a-commit"


def _bad_release(d: dict) -> None:
    d["#meta"]["sglang_release"] = "newest"


def _bad_version(d: dict) -> None:
    d["#meta"]["kvmc_version"] = "latest"


ISSUE_30 = {
    "dropped last state": (_drop_last_state, "#meta.verdict"),
    "flipped verdict": (_flip_verdict, "#meta.verdict"),
    "deleted vars": (_delete_vars, ": vars:"),
    "deleted params": (_delete_params, ": params:"),
    "malformed sglang_commit": (_bad_commit, "#meta.sglang_commit"),
    "malformed sglang_release": (_bad_release, "#meta.sglang_release"),
    "malformed kvmc_version": (_bad_version, "#meta.kvmc_version"),
}


@needs_valid
@pytest.mark.parametrize("kind", list(ISSUE_30))
def test_issue_30_corruptions_are_bad_input(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = _load_valid()
    edit, where = ISSUE_30[kind]
    edit(d)
    f = tmp_path / "bad.itf.json"
    f.write_text(json.dumps(d))
    rc, out, err = _run(capsys, str(f))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err and "diverged" not in err + out, (rc, err)
    assert lines[0].startswith(f"kvmc: error: {f}: ") and where in lines[0], lines[0]
    rc = main(["show", str(f)])
    _o, err = capsys.readouterr()
    assert rc == 2 and err.startswith("kvmc: error:") and where in err and len(err.strip().splitlines()) == 1, err


@needs_valid
def test_other_commit_or_version_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A well-formed `sglang_release` / `kvmc_version` other than this kvmc's: the trace is re-run
    through this model, and replays if it follows it; the difference is said, not hidden."""
    d = _load_valid()
    d["#meta"]["sglang_release"] = "0.5.9"
    d["#meta"]["kvmc_version"] = "0.0.9"
    f = tmp_path / "other.itf.json"
    f.write_text(json.dumps(d))
    rc, out, err = _run(capsys, str(f))
    assert rc == 0 and "reproduced" in out, (out, err)
    warnings = [ln for ln in err.splitlines() if ln.startswith("kvmc: warning:")]
    assert len(warnings) == 2 and "sglang_release 0.5.9" in warnings[0] and "kvmc 0.0.9" in warnings[1], err
