"""Counterexamples are data: ITF JSON written by kvmc reads back identically, is readable by
itf-py, replays through the concrete model, and a damaged file is rejected naming file, step
and field."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import itf_py
import pytest

from checker.traces import itf
from checker.engines.run import run_check
from checker.traces.trace import TraceMismatch, Trace, run_concrete
from model.designs import PRESETS
from model.system import System

BUGGY = PRESETS["current"].with_fix("swa_busy_check", None)


@pytest.fixture(scope="module")
def trace() -> Trace:
    rep = run_check(BUGGY, ["hybrid_swa"], ["busy_check_sound"], depth=2, prove=False)
    (_, res), = rep.violations()
    assert res.trace is not None
    return res.trace


@pytest.fixture
def doc(trace: Trace) -> dict[str, Any]:
    return itf.to_itf(trace, {"verdict": "violated"})


def test_roundtrip(trace: Trace, tmp_path: Path) -> None:
    path = itf.write(tmp_path / "a" / "t.itf.json", trace, {"verdict": "violated"})
    back = itf.read(path)
    assert back.states == trace.states and back.params == trace.params
    assert [s.picks for s in back.steps] == [s.picks for s in trace.steps]
    assert back.design.flags() == trace.design.flags() and back.cfg.name == trace.cfg.name
    assert back.prop == "busy_check_sound"


def test_meta_and_mbt_convention(doc: dict[str, Any]) -> None:
    m = doc["#meta"]
    for key in ("design", "fixes", "property", "config", "depth", "engine", "kvmc_version", "sglang_release"):
        assert key in m, key
    assert m["fixes"]["swa_busy_check"] is None
    s1 = doc["states"][1]
    assert s1["mbt::actionTaken"] == "event_loop_iteration"
    pairs = s1["mbt::nondetPicks"]["#map"]
    assert pairs and all(isinstance(k, str) and v["tag"] == "Some" for k, v in pairs)
    assert s1["full_tokens"] == {"#bigint": str(doc["states"][0]["full_tokens"]["#bigint"])}


def test_readable_by_itf_py(doc: dict[str, Any]) -> None:
    t = itf_py.trace_from_json(json.loads(json.dumps(doc)))
    assert len(t.states) == len(doc["states"])
    assert t.states[0].values["full_available"] == int(doc["states"][0]["full_available"]["#bigint"])


ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "counterexamples").rglob("*.itf.json"))


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(ROOT / "counterexamples")) for p in CORPUS])
def test_every_checked_in_trace_loads_in_itf_py(path: Path) -> None:
    """itf-py 0.5.0 reads every checked-in trace; its picks are the ones kvmc reads (integers too)."""
    raw = json.loads(path.read_text())
    t = itf_py.trace_from_json(raw)
    ours = itf.read(path, warn=False)
    assert len(t.states) == len(ours.states)
    for st, step in zip(t.states[1:], ours.steps):
        picks = dict(st.values["mbt::nondetPicks"])
        assert {k: v.value for k, v in picks.items()} == step.picks


def test_integer_picks_load_in_itf_py(tmp_path: Path) -> None:
    """An integer inside an option, as kvmc writes it, reads in itf-py as Some(value=n), the same
    object it makes of Some(true); Quint's own form ({"#bigint"} as the payload) does not."""
    from checker.traces.trace import Step

    base = itf.read(CORPUS[0], warn=False) if CORPUS else None
    if base is None:
        pytest.skip("no checked-in trace")
    tr = Trace(base.cfg, base.design, base.params, base.init, [Step("event_loop_iteration", {"a.b[0]": 3, "c": True},
                                                                    base.init)], None, "test")
    d = itf.to_itf(tr)
    pairs = d["states"][1]["mbt::nondetPicks"]["#map"]
    assert pairs[0][1] == {"tag": "Some", "value": {"value": {"#bigint": "3"}}}
    got = dict(itf_py.trace_from_json(d).states[1].values["mbt::nondetPicks"])
    assert got["a.b[0]"].value == 3 and got["c"].value is True and type(got["a.b[0]"]).__name__ == "Some"
    quint = {"tag": "Some", "value": {"#bigint": "3"}}
    with pytest.raises(ValueError):
        itf_py.value_from_json(quint)  # itf-py 0.5.0's limitation this form avoids
    assert itf._picks({"#map": [["a.b[0]", quint]]}, "f", "state 1") == {"a.b[0]": 3}  # kvmc reads both


def test_a_trace_in_the_shape_quint_writes_loads() -> None:
    """tests/unit/data/quint_mbt_sessions.itf.json is written as `quint run --mbt` writes a trace
    (no params list: the constants are among vars; mbt::nondetPicks a record of every choice, Some
    with a #bigint payload or None; Quint's #meta: source, status, timestamp), with the #meta
    fields kvmc needs to run it (config, fixes, property); kvmc reads it, re-runs it through the
    model, and the pool reproduces it."""
    from checker.replay.pool import REPRODUCED, replay_trace

    f = ROOT / "tests" / "unit" / "data" / "quint_mbt_sessions.itf.json"
    raw = json.loads(f.read_text())
    assert "params" not in raw and all(isinstance(s["mbt::nondetPicks"], dict) and "#map" not in s["mbt::nondetPicks"]
                                       for s in raw["states"])
    t = itf.read(f, warn=False)
    assert t.cfg.name == "sessions" and t.prop == "busy_check_sound" and t.depth == len(raw["states"]) - 1
    ints = [v for s in t.steps for v in s.picks.values() if type(v) is int]
    assert ints, "the fixture has an integer pick (recv.turn_tokens)"
    assert all("None" not in json.dumps(v) or k not in s.picks for st, s in zip(raw["states"][1:], t.steps)
               for k, v in st["mbt::nondetPicks"].items())
    o = replay_trace(t, file=str(f), check_model=False)
    assert o.status == REPRODUCED, o.line()


def test_replays_through_the_concrete_model(trace: Trace) -> None:
    states, _ = run_concrete(System(trace.cfg, trace.design), trace.params, trace.actions, expected=trace.states)
    assert states == trace.states


def test_edited_number_diverges_at_its_step(trace: Trace, doc: dict[str, Any]) -> None:
    bad = copy.deepcopy(doc)
    v = int(bad["states"][1]["full_available"]["#bigint"])
    bad["states"][1]["full_available"] = {"#bigint": str(v + 1)}
    # reading re-runs the trace through the model: the edit is named by state and field
    with pytest.raises(itf.ItfError) as err:
        itf.from_itf(bad, "edited.itf.json")
    assert "state 1 field full_available" in str(err.value) and f"records {v + 1} but the model computes {v}" in str(err.value)
    # without the re-run, the concrete model itself diverges at that step
    t = itf.from_itf(bad, "edited.itf.json", check=False)
    with pytest.raises(TraceMismatch) as e:
        run_concrete(System(t.cfg, t.design), t.params, t.actions, expected=t.states)
    assert e.value.step == 1 and e.value.field == "full_available"
    assert (e.value.recorded, e.value.concrete) == (v + 1, v)


def _damage(doc: dict[str, Any], how: str) -> Any:
    bad = copy.deepcopy(doc)
    if how == "missing field":
        del bad["states"][1]["kv_allocated_len"]
    elif how == "wrong type":
        bad["states"][1]["full_available"] = "lots"
    elif how == "wrong list length":
        bad["states"][0]["status"] = bad["states"][0]["status"][:1]
    elif how == "unknown action":
        bad["states"][1]["mbt::actionTaken"] = "defragment"
    elif how == "unknown config":
        bad["#meta"]["config"] = "galaxy"
    elif how == "unknown fix":
        bad["#meta"]["fixes"]["warp_drive"] = "on"
    elif how == "changing params":
        bad["states"][1]["full_tokens"] = {"#bigint": "999"}
    return bad


@pytest.mark.parametrize(
    "how, where",
    [
        ("missing field", "state 1 field kv_allocated_len"),
        ("wrong type", "state 1 field full_available"),
        ("wrong list length", "state 0 field status"),
        ("unknown action", "state 1 field mbt::actionTaken"),
        ("unknown config", "#meta.config"),
        ("unknown fix", "#meta"),
        ("changing params", "state 1"),
    ],
)
def test_damaged_trace_names_file_step_and_field(doc: dict[str, Any], how: str, where: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.itf.json"
    path.write_text(json.dumps(_damage(doc, how)))
    with pytest.raises(itf.ItfError) as e:
        itf.read(path)
    msg = str(e.value)
    assert msg.startswith(str(path)) and where in msg and "\n" not in msg, msg


def test_truncated_json(doc: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "cut.itf.json"
    path.write_text(json.dumps(doc)[:200])
    with pytest.raises(itf.ItfError, match="not valid JSON"):
        itf.read(path)


def test_write_is_atomic(trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t.itf.json"
    path.write_text("old")

    def boom(*a: Any, **k: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(itf.json, "dump", boom)
    monkeypatch.setattr(itf.json, "dumps", boom)
    with pytest.raises(OSError):
        itf.write(path, trace)
    assert path.read_text() == "old" and list(tmp_path.iterdir()) == [path]
