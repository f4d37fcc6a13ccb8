"""Pass invariants (specs/pass_invariants.py): facts about the PrefillAdder's pass state at the
checkpoints of one iteration, proved link by link before the induction step asserts them
(checker/engines/induction.py, `KInduction._prove_pass_invariants`).

What must hold: each is true at every admission on concrete walks of the model (so asserting it
loses no real behaviour); the engine proves it on the correct design; a design whose admission
charges too little breaks a link and is then not given the fact; a false invariant is never
asserted; and a proved one is asserted in the step query at each of its checkpoints.
"""

from __future__ import annotations

import pytest
import z3

from checker.engines.induction import KInduction
from model.designs import PRESETS
from model.ops import Symbolic
from model.system import System
from specs import pass_invariants as pi
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS
from checker.traces.walk import checkpoint_walks

ACTIVE = ["no_prefill_oom"] + [f"lemma:{n}" for n in LEMMAS]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_admitted_fit_holds_at_every_admission_of_random_walks(config: str) -> None:
    system = System(CONFIGS[config], PRESETS["current"])
    checked = admitted = 0
    for seed, t, x, ops, _after in checkpoint_walks(system, 40):
        states = dict(ops.checkpoints)
        for label, ad in ops.ghosts.items():
            assert pi.admitted_fit(x, states[label], ad), f"admitted_fit false at {label!r}, step {t} of seed {seed}"
            checked += 1
            admitted += any(ad.can_run)
    assert checked > 50 and admitted > 10, (checked, admitted)


def test_the_symbolic_step_names_the_pass_state_it_allocates_from() -> None:
    """The ghost at each admission is named like the state there (fresh symbols), and the step
    after the pass reads those names: a local query can cut the admissions off."""
    system = System(CONFIGS["small"], PRESETS["current"])
    ind = KInduction(system, ["no_prefill_oom"])
    ind._encode(1)
    labels = [f"admitted[{r}]" for r in range(system.cfg.num_reqs)]
    assert sorted(ind.ghosts) == labels
    last = ind.ghosts[labels[-1]]
    assert all(z3.is_const(v) for v in (last.rem_total_token_offset, *last.extend, *last.can_run))


def _prove(config: str, design: object = None) -> tuple[KInduction, dict[str, str]]:
    system = System(CONFIGS[config], design or PRESETS["current"])
    ind = KInduction(system, ["no_prefill_oom"], timeout_ms=120_000)
    return ind, ind._prove_pass_invariants(1, ACTIVE)


def test_admitted_fit_is_proved_and_then_asserted_at_each_admission() -> None:
    ind, why = _prove("small")
    assert why == {"admitted_fit": ""}, why
    assert ind.facts_for(ACTIVE) == ("admitted_fit",)
    plain = len(ind._encode(1)[0].assertions())
    with_facts = len(ind._encode(1, ind.facts_for(ACTIVE))[0].assertions())
    assert with_facts >= plain + ind.system.cfg.num_reqs, (plain, with_facts)
    assert ind.facts_for(ACTIVE[:1]) == ()  # proved for one active set, not for another


def test_an_admission_that_charges_too_little_breaks_a_link() -> None:
    """`prefill_budget_forgets_extend` lets a second request in whose extend, with the first's,
    does not fit: the invariant fails after an admission and is not given to the step query."""
    design = PRESETS["current"].with_mutants(frozenset({"prefill_budget_forgets_extend"}))
    ind, why = _prove("small", design)
    assert why["admitted_fit"].startswith("fails at admitted["), why
    assert ind.facts_for(ACTIVE) == ()


def test_a_false_pass_invariant_is_never_asserted(monkeypatch: pytest.MonkeyPatch) -> None:
    def nothing_admitted(x: object, s: object, ad: object) -> object:
        return x.not_(x.or_(*ad.can_run))  # type: ignore[attr-defined]

    monkeypatch.setitem(pi.PASS_INVARIANTS, "planted_nothing_admitted",
                        pi.PassInvariant("planted_nothing_admitted", "planted: no request is ever admitted",
                                         "admitted", nothing_admitted))
    ind, why = _prove("small")
    assert why["admitted_fit"] == "" and why["planted_nothing_admitted"].startswith("fails at admitted[0]"), why
    assert ind.facts_for(ACTIVE) == ("admitted_fit",)


def test_the_pass_links_read_the_invariant_at_each_checkpoint() -> None:
    system = System(CONFIGS["small"], PRESETS["current"])
    ind = KInduction(system, ["no_prefill_oom"])
    _solver, params, _states, _goals, _acts = ind._encode(1)
    links = ind._pass_links("admitted_fit", params)
    x = system.ctx(Symbolic(0, prefix="t."), params)
    expected = [z3.simplify(z3.Implies(z3.BoolVal(True), pi.admitted_fit(x, st, ind.ghosts[label])))
                for label, _c, st in ind.checkpoints if label in ind.ghosts]
    assert len(links) >= len(expected) == system.cfg.num_reqs
    for got, want in zip(links, expected):
        assert z3.Solver().check(z3.Not(z3.simplify(got) == want)) == z3.unsat


def test_the_proof_cache_keeps_a_proved_link_and_a_link_z3_gave_up_on(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """With `--proof-cache`: a link proved once is taken from the store (not asked again), and a
    link z3 gave up on is not asked again with the same time: still not proved, and said so."""
    from checker.engines import induction, proof_cache

    system = System(CONFIGS["small"], PRESETS["current"])
    store = proof_cache.ProofCache.open(tmp_path / "proved")
    first = KInduction(system, ["no_prefill_oom"], cache=store)
    assert first._prove_pass_invariants(1, ACTIVE) == {"admitted_fit": ""}
    assert store.stored == system.cfg.num_reqs  # one unsat link per admission
    again = KInduction(system, ["no_prefill_oom"], cache=store)
    assert again._prove_pass_invariants(1, ACTIVE) == {"admitted_fit": ""}
    assert store.hits == system.cfg.num_reqs

    monkeypatch.setattr(induction, "PASS_MS", 1)  # z3 gives up on the first link in a millisecond
    store = proof_cache.ProofCache.open(tmp_path / "gave_up")
    why = KInduction(system, ["no_prefill_oom"], cache=store)._prove_pass_invariants(1, ACTIVE)["admitted_fit"]
    assert why == "unknown after 0 s at admitted[0]", why
    why = KInduction(system, ["no_prefill_oom"], cache=store)._prove_pass_invariants(1, ACTIVE)["admitted_fit"]
    assert why.endswith("(a run before; --proof-cache)") and store.hinted == 1, why
    monkeypatch.setattr(induction, "PASS_MS", 300_000)  # more time than the run before had: asked again
    fresh = proof_cache.ProofCache.open(tmp_path / "gave_up")
    assert KInduction(system, ["no_prefill_oom"], cache=fresh)._prove_pass_invariants(1, ACTIVE) == {"admitted_fit": ""}
    assert fresh.hinted == 0
