"""Liveness (specs/liveness.py, checker/engines/liveness.py): the #23174 stall as a lasso on the
design that has it, its ITF `loop` and its pool replay, a design where progress holds (no fair lasso
to a bound, bounded progress proved), a planted liveness bug found by the lasso BMC and by the
explicit engine's fair cycles, and the fairness assumptions doing their work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker.engines.agreement import pinned
from checker.engines.liveness import (Invariants, LassoBMC, bounded_progress, check_lasso, check_trace, explicit_lassos,
                                      loop_positions, unroll)
from checker.replay.pool import REPRODUCED, replay_file, replay_trace
from checker.traces import itf
from checker.traces.itf import ItfError
from checker.traces.trace import step_table
from checker.verdict import Verdict
from model.designs import PRESETS
from model.state import CHUNKED, NO_BATCH, RUNNING, WAITING
from model.system import System
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS

# the smallest stall kvmc's lasso BMC reports on current/hybrid_swa (depth 4), pinned
STALL = pinned(CONFIGS["hybrid_swa"], full_tokens=(7, 7), swa_tokens=(4, 4), sliding_window_size=(2, 2),
               chunked_prefill_size=(2, 2), max_prefill_tokens=(8, 8), input_len=(1, 4), max_new_tokens=(1, 1))
SMALL = pinned(CONFIGS["small"], full_tokens=(7, 7), input_len=(3, 3), max_new_tokens=(2, 2), warm_len=(0, 0))


@pytest.fixture(scope="module")
def stall():  # type: ignore[no-untyped-def]
    system = System(STALL, PRESETS["current"])
    return system, LassoBMC(system, ["progress"]).run(4)["progress"]


def test_the_23174_stall_is_a_lasso_on_current(stall) -> None:  # type: ignore[no-untyped-def]
    system, r = stall
    assert r.verdict is Verdict.VIOLATED and r.depth == 4, (r.words(), r.reason)
    tr = r.trace
    assert tr is not None and tr.loop is not None and tr.states[-1] == tr.states[tr.loop]
    s = tr.states[tr.loop]
    # the chunked request holds the SWA pool it needs, the other waits, and no batch runs on the loop
    assert CHUNKED in s.status and WAITING in s.status
    assert all(st.last_batch == NO_BATCH for st in tr.states[tr.loop + 1:])
    assert s.swa_available < STALL.page_size + 1
    assert check_trace(system, tr).violated
    table = step_table(tr, tr.meta["violation"])
    assert f"loop: steps {tr.loop + 1}..{tr.depth} repeat forever" in table and "(loop)" in table and "back to state" in table


def test_without_the_fix_the_same_instance_neither_stalls_nor_overflows() -> None:
    # #23174's one-page SWA reserve is what defers the chunk here: without it the last chunk takes the
    # one free SWA token and the request completes (the over-allocation needs larger numbers)
    from checker.engines.explicit import Explorer

    system = System(STALL, PRESETS["current"].with_fix("chunked_swa_page_reserve", None))
    assert explicit_lassos(system, ["progress", "no_starvation"], 6)["progress"].verdict is Verdict.HOLDS_TO_DEPTH
    assert Explorer(system, ["no_prefill_oom"]).run(6).results["no_prefill_oom"].verdict is Verdict.HOLDS_TO_DEPTH


def test_the_lasso_writes_itf_with_loop_and_replays_on_the_pool(stall, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _system, r = stall
    path = itf.write(tmp_path / "progress.itf.json", r.trace, {"verdict": "violated"})
    data = json.loads(path.read_text())
    assert data["loop"] == r.trace.loop and len(data["states"]) == r.trace.depth + 1
    back = itf.read(path)
    assert back.loop == r.trace.loop and back.states == r.trace.states
    o = replay_file(path)
    assert o.status == REPRODUCED, o.line()
    assert "recurring" in o.message and o.steps == len(unroll(r.trace).steps)
    un = unroll(r.trace)
    assert all(un.states[i] == r.trace.states[r.trace.loop] for i in loop_positions(r.trace))


def test_a_replay_that_does_not_recur_diverges(stall) -> None:  # type: ignore[no-untyped-def]
    _system, r = stall
    bad = unroll(r.trace, 0)
    bad.loop = r.trace.loop
    last = bad.steps[-1]
    bad.steps[-1] = type(last)(last.action, last.picks, last.state.set(full_available=last.state.full_available + 1))
    o = replay_trace(bad, check_model=False, expect_violation=True)
    assert o.status != REPRODUCED and o.field == "full_available", o.line()


def test_itf_refuses_a_loop_that_does_not_close(stall, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _system, r = stall
    data = itf.to_itf(r.trace)
    for bad, words in ((0, "not a lasso"), (len(data["states"]) - 1, "before the last"), ("2", "before the last")):
        data["loop"] = bad
        p = tmp_path / "bad.itf.json"
        p.write_text(json.dumps(data))
        with pytest.raises(ItfError, match=words):
            itf.read(p)


def test_explicit_engine_finds_the_stall_as_a_fair_cycle() -> None:
    system = System(STALL, PRESETS["current"])
    r = explicit_lassos(system, ["progress"], 4)["progress"]
    assert r.verdict is Verdict.VIOLATED and r.depth == 4, (r.words(), r.reason)
    assert r.trace is not None and check_trace(system, r.trace).violated


def test_progress_holds_on_current_small_to_a_bound_and_is_proved_by_bounded_progress() -> None:
    system = System(SMALL, PRESETS["current"])
    res = LassoBMC(system, ["progress", "no_starvation"]).run(4)
    assert res["progress"].verdict is Verdict.HOLDS_TO_DEPTH and res["progress"].depth == 4
    assert res["no_starvation"].verdict is Verdict.HOLDS_TO_DEPTH
    assert explicit_lassos(system, ["progress"], 6)["progress"].verdict is Verdict.HOLDS_TO_DEPTH
    # bounded progress over every pool size (the invariants taken as given here; prove_progress
    # first shows them inductive, which takes minutes: bench/liveness.py, docs/liveness.md)
    inv = Invariants(list(LEMMAS), ["conservation", "well_formed"], [], {}, 0.0)
    bp = bounded_progress(System(CONFIGS["small"], PRESETS["current"]), inv, 1)
    assert bp.proved, bp.line()


def test_planted_liveness_bug_is_found_by_both_engines_and_breaks_bounded_progress() -> None:
    design = PRESETS["current"].with_mutants(frozenset({"admission_ignores_evictable"}))
    system = System(SMALL, design)
    b = LassoBMC(system, ["progress"]).run(5)["progress"]
    e = explicit_lassos(system, ["progress"], 5)["progress"]
    assert (b.verdict, e.verdict) == (Verdict.VIOLATED, Verdict.VIOLATED)
    assert b.depth == e.depth == 4
    for r in (b, e):
        assert r.trace is not None and check_trace(system, r.trace).violated
    inv = Invariants(list(LEMMAS), ["conservation", "well_formed"], [], {}, 0.0)
    bp = bounded_progress(System(CONFIGS["small"], design), inv, 1)
    assert not bp.proved and bp.cti is not None


def test_a_request_sglang_would_clip_is_not_a_counterexample() -> None:
    # input 3 + max_new 2 on a 6-token pool: SGLang clips max_new_tokens at arrival (#25126); unclipped
    # it waits for ever on an idle server. That lasso breaks `requests_fit`, so the BMC reports none.
    cfg = pinned(CONFIGS["small"], full_tokens=(6, 6), input_len=(3, 3), max_new_tokens=(2, 2), warm_len=(0, 0))
    system = System(cfg, PRESETS["current"].with_fix("enqueue_clip_max_new", None))  # the model does not clip
    from checker.engines.explicit import param_points
    from checker.traces.trace import run_concrete

    p = param_points(system)[0]
    states, picks = run_concrete(system, p, [("event_loop_iteration", {"recv.arrive[0]": True}), ("event_loop_iteration", {})])
    assert states[2] == states[1] and states[1].status[0] == WAITING
    chk = check_lasso(system, p, states, picks, 1, "progress")
    assert chk.closes and not chk.violated and "requests_fit" in chk.unfair and "arrivals" in chk.unfair
    assert LassoBMC(system, ["progress"]).run(3)["progress"].verdict is Verdict.HOLDS_TO_DEPTH


def test_cli_checks_a_liveness_property_and_writes_the_lasso(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from checker.cli import main

    code = main(["check", "--config", "small", "--mutant", "admission_ignores_evictable", "--property", "progress",
                 "--depth", "4", "--no-prove", "--no-progress", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "progress             violated at depth" in out and "repeat forever" in out
    files = list(tmp_path.rglob("progress.itf.json"))
    assert len(files) == 1 and itf.read(files[0]).loop is not None
    code = main(["check", "--config", "small", "--property", "progres", "--depth", "2"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "progress" in err


# docs/findings.md finding 6: a NO_TOKEN verdict with nothing running latches batch_is_full (<= 0.5.21)
LATCH = pinned(CONFIGS["sessions"], req_pool_size=(2, 2))


def test_a_no_token_with_nothing_running_latches_batch_is_full_until_0_5_22(tmp_path: Path) -> None:
    """Two request rows, so the row starvation of finding 7 is out of the way: on v0.5.18 a refused
    request with nothing running sets batch_is_full and nothing clears it, a fair lasso in which no
    batch runs; on the loop the flag is set and the running batch empty. With
    `batch_is_full_needs_running` (0.5.22) there is no lasso to the bound, and the v0.5.18 lasso
    under that flag does not recur on the pool."""
    r = explicit_lassos(System(LATCH, PRESETS["v0.5.18"]), ["progress"], 5)["progress"]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None and r.trace.loop is not None
    looped = [st.state for st in r.trace.steps[r.trace.loop:]]
    assert all(s.batch_is_full and s.last_batch == NO_BATCH for s in looped), looped
    assert all(WAITING in s.status and RUNNING not in s.status and not any(s.unfiltered) for s in looped), looped
    assert replay_trace(r.trace, "cpu", "latch").status == REPRODUCED
    fixed = PRESETS["v0.5.18"].with_fix("batch_is_full_needs_running", "on")
    assert explicit_lassos(System(LATCH, fixed), ["progress"], 5)["progress"].verdict is Verdict.HOLDS_TO_DEPTH
    assert explicit_lassos(System(LATCH, PRESETS["v0.5.22"]), ["progress"], 5)["progress"].verdict is Verdict.HOLDS_TO_DEPTH
    f = tmp_path / "latch.itf.json"
    itf.write(f, r.trace)
    assert itf.read(f).loop == r.trace.loop
