"""Properties that follow from the other candidates at one state (checker/engines/induction.py,
`KInduction._consequences`): their step queries are not asked, and the derivations stay acyclic.

`busy_check_sound` and `busy_check_complete` follow from `conservation` and the lemmas (SGLang's
busy check reads the same counters the ledger adds up); a design whose busy check raises a false
alarm on an exact ledger (#22753 turned off) must not get that derivation."""

from __future__ import annotations

import pytest

from checker.engines import induction
from checker.engines.induction import KInduction
from model.designs import PRESETS
from model.system import System
from specs import properties as props_mod
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS

BUSY = ["busy_check_sound", "busy_check_complete"]


def _derived(config: str, props: list[str], design: object = None) -> dict[str, list[str]]:
    system = System(CONFIGS[config], design or PRESETS["current"])
    ind = KInduction(system, props)
    return ind._consequences(props + [f"lemma:{n}" for n in LEMMAS])


@pytest.mark.parametrize("config", ["small", "sessions", "hybrid_swa"])
def test_the_busy_checks_follow_from_conservation(config: str) -> None:
    derived = _derived(config, ["conservation", *BUSY, "no_decode_oom"])
    assert sorted(derived) == sorted(BUSY), derived
    # each rests on the candidates of z3's unsat core: some, never itself
    active = {"conservation", *BUSY, "no_decode_oom", *(f"lemma:{n}" for n in LEMMAS)}
    assert all(derived[p] and set(derived[p]) <= active - {p} for p in BUSY), derived


def test_a_false_alarm_is_not_derived() -> None:
    """Before #22753 the busy check double-counts a session's slot: it fires on an exact ledger, so
    `busy_check_sound` is no consequence of `conservation` there (and the BMC finds the alarm)."""
    design = PRESETS["current"].with_fix("session_active", None)
    derived = _derived("sessions", ["conservation", *BUSY], design)
    assert "busy_check_sound" not in derived and "busy_check_complete" in derived, derived


def test_two_equivalent_candidates_do_not_derive_each_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of `conservation` and the original each follow from the other: only the first asked
    is derived, so one of them is left to its step query (no circular proof)."""
    cons = props_mod.PROPERTIES["conservation"]
    monkeypatch.setitem(props_mod.PROPERTIES, "conservation_copy",
                        props_mod.Property("conservation_copy", "planted: conservation again", cons.holds,
                                           cons.witness, cons.witness_meaning))
    derived = _derived("small", ["conservation", "conservation_copy"])
    assert list(derived) == ["conservation"], derived
    assert derived["conservation"] == ["conservation_copy"] or "conservation_copy" in derived["conservation"]


def test_houdini_proves_a_derived_property_without_its_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the joint query given no time, Houdini goes one candidate at a time: the busy checks are
    proved from `conservation` without a step query of their own, and the proof still holds."""
    monkeypatch.setattr(induction, "JOINT_RLIMIT", 1)
    system = System(CONFIGS["small"], PRESETS["current"])
    asked: list[str] = []
    real = KInduction._settle

    def settle(self: KInduction, k: int, active: list[str], n: str, res: object) -> object:
        asked.append(n)
        return real(self, k, active, n, res)

    monkeypatch.setattr(KInduction, "_settle", settle)
    h = KInduction(system, ["conservation", *BUSY]).houdini(1)
    assert sorted(h.proved) == sorted(["conservation", *BUSY]), (h.proved, h.dropped)
    assert sorted(h.derived) == sorted(BUSY)
    assert "conservation" in asked and not set(BUSY) & set(asked), asked
