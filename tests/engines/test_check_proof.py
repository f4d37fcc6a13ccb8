"""The check's own 1-induction attempt runs in a forked process beside the BMC (checker/engines/run.py):
it proves what it proved inline, a proof that closes stops the BMC inside its current depth, and
a first error stops the attempt."""

from __future__ import annotations

import multiprocessing
import threading

import pytest
import z3
from checker.engines import run
from checker.engines.bmc import BMC, _Run
from checker.verdict import Verdict
from model.config import pinned
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS

# hybrid_swa on its explicit bounds: the BMC's depths cost a third of the symbolic bounds' (9 s to
# depth 2 instead of 32 s on an idle machine), while the 1-induction step case, which drops the
# bounds, is the same minutes-long query
HYBRID_SWA = pinned(CONFIGS["hybrid_swa"])
# ... narrowed to #23174's corpus counterexample (counterexamples/v0.5.13-without-chunked_swa_page_reserve):
# the bug is still at depth 3 there, which the explicit bounds alone miss
HYBRID_SWA_23174 = pinned(CONFIGS["hybrid_swa"], full_tokens=(8, 8), swa_tokens=(5, 5), sliding_window_size=(3, 3),
                          chunked_prefill_size=(3, 3), max_prefill_tokens=(8, 8))


def _interrupt_after_depth(bmc: BMC, stop_at: int) -> tuple[list[int], threading.Event, threading.Thread, object]:
    """A progress callback that, once depth `stop_at` is done, keeps interrupting the BMC's query
    from another thread (as the proof's waiter does) until the run returns."""
    go, done = threading.Event(), threading.Event()
    hits: list[int] = []

    def pester() -> None:
        while not go.wait(0.05) and not done.is_set():
            pass
        while not done.wait(0.05):
            if bmc.interrupt_check():
                hits.append(1)

    th = threading.Thread(target=pester, daemon=True)
    th.start()

    def progress(t: int, _el: float, _st: dict[str, str]) -> None:
        if t == stop_at:
            go.set()

    return hits, done, th, progress


def _z3_usable() -> None:
    """The next query of this process works: no interrupt was left in z3's context (one that
    landed outside a `check` made every later `push` fail with "push canceled")."""
    s = z3.Solver()
    s.push()
    s.add(z3.Int("x") > 0)
    assert s.check() == z3.sat
    s.pop()


def test_an_interrupt_landing_as_a_check_returns_does_not_cancel_later_queries() -> None:
    # the waiter thread's interrupt_check can come just after z3 returned, while the BMC still
    # counts itself in the check: the interrupt then lands outside any query (here, every time)
    system = System(CONFIGS["small"], PRESETS["current"])
    bmc = BMC(system, ["conservation"], minimize=False)
    run = _Run(bmc, None, False)
    real = run.solver.check

    def late() -> object:
        r = real()
        assert bmc.interrupt_check(), "the BMC did not count itself in the check"
        return r

    run.solver.check = late
    assert run.check() == z3.sat
    run.solver.push()  # "push canceled" before the fix
    run.solver.pop()
    _z3_usable()


@pytest.mark.parametrize("abandon", [True, False])
def test_an_interrupted_depth_is_abandoned_only_when_asked(abandon: bool) -> None:
    # hybrid_swa's depth 2 takes seconds (7 s on its explicit bounds, idle; depth 3 40 s), so the
    # interrupts land inside its queries: interrupted after depth 1, not 2, the same code path
    # without the 7 s of depth 2 finished first
    system = System(HYBRID_SWA, PRESETS["current"])
    bmc = BMC(system, ["conservation", "no_prefill_oom"], minimize=False)
    hits, done, pester, progress = _interrupt_after_depth(bmc, 1)  # as if a proof closed after depth 1
    try:
        res = bmc.run(6, progress=progress, abandon=lambda: abandon and bool(hits))
    finally:
        done.set()
        pester.join()
    assert hits, "no interrupt landed in a running query"
    _z3_usable()  # the tests after this one used to fail with "push canceled"
    for r in res.values():
        if abandon:  # depth 2 unfinished: what was checked is depths 0..1
            assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.depth == 1, r.words()
        else:  # an interrupted query is unknown, never "holds"
            assert r.verdict is Verdict.UNKNOWN and r.depth == 2, r.words()


@pytest.mark.parametrize("background", [True, False])
def test_the_background_proof_proves_what_the_inline_one_does(background: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run, "BACKGROUND_PROOF", background)
    # the attempt's time limits are wall-clock tuning (30 s a query inline, a minute's grace after
    # the BMC in the background); on a loaded machine they cut the proof off, which is not what
    # this test is about
    monkeypatch.setattr(run, "PROOF_ATTEMPT_MS", 1_800_000)
    monkeypatch.setattr(run, "PROOF_LEAF_MS", 1_800_000)
    monkeypatch.setattr(run, "PROOF_GRACE_S", 1_800.0)
    # ... and so is the joint query's cap (5 s): the forked attempt, niced beside the BMC, passed it
    # and went on one candidate at a time with case splits (a path tests/engines/test_induction.py
    # pins), three times as long as the joint query it cut short
    from checker.engines import induction

    monkeypatch.setattr(induction, "JOINT_AFTER_MS", 1_800_000)
    # ... and its work cap (JOINT_RLIMIT, which this query fits in a fresh process): after the hybrid_swa tests above
    # (or another file on the same xdist worker) z3's context holds their terms and the same query
    # took over 80M, so the background attempt alone went to 120 split cases (20-48 s instead of 5);
    # the inline attempt has no cap, so without one both ask the same joint query
    monkeypatch.setattr(induction, "JOINT_RLIMIT", 0)
    # not niced: beside another test's process the niced child got a fraction of a core while the
    # BMC went on deepening until the proof closed (12 s idle, 80 s so); the niceness is tuning too
    monkeypatch.setattr(run, "PROOF_NICE", 0)
    rep = run.check_config(PRESETS["current"], CONFIGS["sessions"], ["conservation", "busy_check_sound"], 10)
    assert rep.proof.get("closed") is True, rep.proof
    for r in rep.results.values():
        assert r.verdict is Verdict.PROVED, r.words()
        assert r.meta["bmc_depth"] >= rep.proof["at_depth"]
    assert multiprocessing.active_children() == []


def test_a_first_error_stops_the_background_proof() -> None:
    # #23174 is found at depth 3; the proof attempt started at depth 2 (every witness found) is
    # still running then, and nothing is left for it once the check ends at its first error
    buggy = PRESETS["current"].with_fix("chunked_swa_page_reserve", None)
    rep = run.check_config(buggy, HYBRID_SWA_23174, ["no_prefill_oom", "conservation"], 10, keep_going=False,
                           minimize=False)
    assert rep.results["no_prefill_oom"].verdict is Verdict.VIOLATED
    assert rep.results["conservation"].verdict is Verdict.HOLDS_TO_DEPTH
    assert multiprocessing.active_children() == []
    # the report says an attempt was made (and, unless it had answered, that it was stopped)
    assert rep.proof.get("at_depth") is not None and rep.proof.get("stopped", "the check ended at its first violation") \
        == "the check ended at its first violation", rep.proof


def test_an_attempt_still_running_after_the_bmc_is_stopped_and_proves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # hybrid_swa's conservation step query needs hundreds of split cases after a pass invariant
    # (minutes); the BMC to depth 2 takes seconds, so the check waits PROOF_GRACE_S (or as long as
    # the BMC took), then stops it. Here the wait after the BMC lasts until the niced child has
    # encoded its step query and told us so (about 5 s of CPU; it had 20 s of grace for that on a
    # loaded machine, idle for most of them), then 1 s: far short of what the proof needs, and the
    # same stop (`ProofAttempt.poll` past its limit) as after the whole grace
    phases: list[str] = []
    told = threading.Event()
    waits: list[float | None] = []

    def progress(_c: str, _t: int, _el: float, st: dict[str, str]) -> None:
        phases.append(st.get("_phase", ""))
        if phases[-1].startswith("proof: k=1 step case"):
            told.set()

    real_poll = run.ProofAttempt.poll

    def poll(self: run.ProofAttempt, wait: bool = False, limit_s: float | None = None) -> object:
        if wait:
            waits.append(limit_s)
            told.wait(600.0)  # never told: the assertion on `phases` below fails
            limit_s = 1.0
        return real_poll(self, wait, limit_s)

    monkeypatch.setattr(run.ProofAttempt, "poll", poll)
    rep = run.check_config(PRESETS["current"], HYBRID_SWA, ["conservation"], 2, progress=progress)
    assert len(waits) == 1 and waits[0] is not None and waits[0] >= run.PROOF_GRACE_S, waits  # the check's wait: the grace
    r = rep.results["conservation"]
    assert rep.proof.get("unfinished") is True and rep.proof["at_depth"] == 1, rep.proof
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.depth == 2, r.words()
    assert any(p.startswith("proof: k=1 step case") for p in phases), phases  # the child's progress reached us
    assert multiprocessing.active_children() == []


def test_the_report_says_why_no_proof_was_attempted() -> None:
    # sessions' conservation is first exercised at depth 2: a check to depth 2 has no deeper depth
    # for a proof to save, so none starts ("holds to depth 2 (not proved)" said nothing of it)
    from checker.cli.app import _proof_words

    rep = run.check_config(PRESETS["current"], CONFIGS["sessions"], ["conservation"], 2)
    assert rep.results["conservation"].verdict is Verdict.HOLDS_TO_DEPTH
    assert rep.proof["attempted"] is False and "first exercised at depth 2, the last one checked" in rep.proof["why"], rep.proof
    assert _proof_words(rep.proof).startswith("; no proof attempted: every property was first exercised at depth 2")
    off = run.check_config(PRESETS["current"], CONFIGS["sessions"], ["conservation"], 2, prove=False)
    assert off.proof == {"attempted": False, "why": "proofs are off (--no-prove)"}


def test_the_report_names_the_k_the_proved_properties_closed_at() -> None:
    # the shape induction.py's report gives when a property fails the step case at k=1 and k=2 and
    # the others closed at k=1 (aligned_page1 on a 16-core host): the line said "2-induction proved"
    from checker.cli.app import _proof_words

    proof = {"engine": "induction", "k": 2, "closed": False, "proved": {"conservation": 1, "well_formed": 1},
             "failed": ["no_prefill_oom"], "attempts": [{"k": 1}, {"k": 2}]}
    words = _proof_words(proof)
    assert words.startswith("; 1-induction proved conservation, well_formed, not no_prefill_oom (tried up to k=2)"), words
    proof["proved"]["conservation"] = 2
    assert _proof_words(proof) == "; 2-induction proved conservation, well_formed, not no_prefill_oom", _proof_words(proof)
