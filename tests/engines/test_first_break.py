"""The induction engine's "first sub-step" split (checker/engines/induction.py::first_break).

Its soundness needs nothing from the model: the cases cover the goal's negation for any
checkpoint states (telescoping), which z3 checks here. What makes it pay is that the ledger's
inner reading (specs/properties.py, `ledger(mid=True)`) is exact at every checkpoint the model
marks: then each case asks whether one sub-transition keeps the ledger. That is checked here
on random walks of the concrete model, and two planted leaks' counterexamples to induction are
shown to name the sub-step that leaks (proofs through the split: tests/engines/test_induction.py).
"""

from __future__ import annotations

import pytest
import z3

from checker.engines.induction import FIRST_BREAK, KInduction, case_splits, first_break
from model.designs import PRESETS, Design
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES
from checker.traces.walk import checkpoint_walks

conjuncts = PROPERTIES["conservation"].conjuncts
split_by_sub_step = {n: p.conjuncts for n, p in PROPERTIES.items() if p.conjuncts and n != "conservation"}


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_the_inner_ledger_is_exact_at_every_checkpoint(config: str) -> None:
    cfg = CONFIGS[config]
    system = System(cfg, PRESETS["current"])
    seen: set[str] = set()
    steps = 0
    for seed, t, x, ops, s2 in checkpoint_walks(system, 12):
        for label, st in ops.checkpoints:
            assert all(conjuncts(x, st, True)), f"inner ledger off at {label!r}, step {t} of seed {seed} on {config}"
            for name, read in split_by_sub_step.items():  # the OOM flags: set once, at the failing allocation
                assert all(read(x, st, True)) or not all(read(x, s2, False)), f"{name} off at {label!r}, step {t}"
            seen.add(label)
        # at an iteration's end both readings agree
        for read in (conjuncts, *split_by_sub_step.values()):
            assert read(x, s2, True) == read(x, s2, False), (config, seed, t)
        steps += 1
    assert steps > 100, steps
    assert {"received", "admitted[0]", "prefill.allocated for extend", "prefill.prefill result[0]",
            "iteration done"} <= seen, sorted(seen)


def _encoded(config: str, design: Design = PRESETS["current"]) -> tuple[System, KInduction, tuple]:
    system = System(CONFIGS[config], design)
    ind = KInduction(system, ["conservation"])
    return system, ind, ind._encode(1)


@pytest.mark.parametrize("config", ["small", "hybrid_swa"])
def test_the_first_break_cases_cover_the_goals_negation(config: str) -> None:
    system, ind, (_solver, params, states, goals, _acts) = _encoded(config)
    fb = first_break(system, params, states, goals["conservation"], ind.checkpoints, conjuncts)
    assert fb is not None
    cases, names = fb.cases, fb.names
    n_conj = len(goals["conservation"].children())
    assert len(cases) == len(names) and len(cases) > 10 * n_conj
    s = z3.Solver()
    s.add(z3.Not(z3.Or(*cases)), z3.Not(goals["conservation"]))
    assert s.check() == z3.unsat  # exhaustive, whatever the checkpoint states are
    # and one left out would not be: the first conjunct's sub-step "received" is needed
    last = names.index("conjunct 1 first fails at received")
    s = z3.Solver()
    s.add(z3.Not(z3.Or(*(cases[:last] + cases[last + 1:]))), z3.Not(goals["conservation"]))
    assert s.check() == z3.sat
    dims = case_splits(system, states, goals["conservation"], (params, ind.checkpoints, conjuncts))
    assert dims[0][0] == FIRST_BREAK and len(dims[0][1]) == len(cases)
    # a property without conjuncts keeps the plain conjunct split
    assert case_splits(system, states, goals["lemma:pools_nonnegative"])[0][0] == "goal conjunct"


@pytest.mark.parametrize("mutant, where", [("unfinished_keeps_protected_len", "prefill.prefill result["),
                                           ("retract_forgets_free", "decode.retract[0].victim[")])
def test_a_cti_says_which_sub_step_broke_the_ledger(mutant: str, where: str) -> None:
    """A planted leak's counterexample to induction names the sub-step of the iteration after
    which the ledger first fails: the one the mutant replaced."""
    system = System(CONFIGS["small"], PRESETS["current"].with_mutants(frozenset({mutant})))
    h = KInduction(system, ["conservation"]).houdini(1)
    tr, _failing = h.ctis["conservation"]
    assert where in tr.meta["first_break"]["conservation"], tr.meta.get("first_break")


def test_below_first_break_cases_the_levels_on_the_state_before_come_first() -> None:
    """A first-break case's local query holds the state before the step, not the one after, so
    its further splits read the state before first; other queries keep the usual order."""
    system, ind, (_solver, params, states, goals, _acts) = _encoded("paged")
    split = [n for n, _ in case_splits(system, states, goals["conservation"], (params, ind.checkpoints, conjuncts))]
    plain = [n for n, _ in case_splits(system, states, goals["conservation"])]
    assert split[0] == FIRST_BREAK and plain[0] == "goal conjunct" and sorted(split[1:]) == sorted(plain[1:])
    reads_after = [i for i, n in enumerate(split) if "after the step" in n or "the step ran" in n]
    reads_before = [i for i, n in enumerate(split) if "before the step" in n]
    assert len(reads_before) == 3 and len(reads_after) == 3 and max(reads_before) < min(reads_after), split
    assert plain.index("batch the step ran") < plain.index("batch before the step x page-aligned kv_committed_len"), plain
