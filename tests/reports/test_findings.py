"""The text report's findings (checker/reports/findings.py): a lemma the BMC dropped, an induction
candidate dropped with its CTI, and a pool replay that diverges, each said as what it is."""

from __future__ import annotations

from checker.engines.bmc import BMC
from checker.engines.cases import case
from checker.engines.results import ConfigReport, Report, Result
from checker.reports.findings import changed_design, findings, render
from checker.verdict import Verdict
from model.designs import PRESETS
from model.system import System


def _report(design, results, proof=None) -> Report:  # type: ignore[no-untyped-def]
    return Report(design, [ConfigReport("small", results, 1.0, proof or {})], 3, 1.0)


def test_a_planted_lock_leak_shows_as_a_dropped_lemma() -> None:
    """finished_req_keeps_lock breaks no earlier property but breaks the lemma request_lengths:
    the BMC drops it, and the report says so instead of only `holds to depth`."""
    c = case("finished_req_keeps_lock")
    design = c.design()
    res = BMC(System(c.cfg(), design), ["conservation"], minimize=False).run(2)
    assert res["conservation"].verdict is not Verdict.VIOLATED  # (vacuous on this small instance)
    lines = findings(_report(design, res))
    assert any("lemma request_lengths fails at depth 1" in ln and "property gap" in ln for ln in lines), lines
    assert render(_report(design, res))[0].startswith("findings")


def test_nothing_to_say_about_the_model_itself() -> None:
    c = case("finished_req_keeps_lock")
    res = BMC(System(c.cfg(), PRESETS["current"]), ["conservation"], minimize=False).run(2)
    assert findings(_report(PRESETS["current"], res)) == [] and render(_report(PRESETS["current"], res)) == []


def test_a_dropped_induction_candidate_names_its_cti() -> None:
    r = Result("conservation", Verdict.HOLDS_TO_DEPTH, 5, witness_depth=2,
               meta={"cti": object(), "cti_k": 1, "cti_path": "out/current/small/conservation.cti.itf.json",
                     "cti_suggest": ["request_rows"]})
    proof = {"attempts": [{"dropped": {"conservation": "fails the step case at k=1 (with nothing else failing)"}}]}
    (line,) = findings(_report(PRESETS["current"], {"conservation": r}, proof))
    assert "dropped from the induction" in line and "k=1" in line and "conservation.cti.itf.json" in line
    assert "request_rows" in line and "lemma" in line


def test_a_pool_divergence_is_a_model_change_under_a_changed_design_and_a_bug_under_a_preset() -> None:
    note = "NOT confirmed: diverged at step 2: full_available: model=3, pool=4 (a kvmc bug)"
    r = Result("conservation", Verdict.VIOLATED, 2, meta={"pool_replay": note})
    changed = PRESETS["current"].with_fix("retract_tail_free", None)
    assert changed_design(changed) and not changed_design(PRESETS["current"])
    assert not changed_design(PRESETS["v0.5.11"])
    (a,) = findings(_report(changed, {"conservation": r}))
    assert "model change to look at" in a and "diverged at step 2" in a
    (b,) = findings(_report(PRESETS["current"], {"conservation": r}))
    assert "kvmc bug" in b and "model change" not in b
