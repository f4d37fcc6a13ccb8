"""A first-break case's local query (checker/engines/cone.py): part of the case query, so unsat there is
unsat for the case; small enough that the eviction's node cases close on it; and never unsat for
a case the whole query finds sat (a planted leak's)."""

from __future__ import annotations

import pytest
import z3

from checker.engines.cone import Cone, state_symbols
from checker.engines.induction import KInduction, _CaseQuery
from model.designs import PRESETS
from model.state import FIELD_NAMES
from model.system import System
from specs.configs import CONFIGS


def _query(config: str, mutants: frozenset[str] = frozenset()) -> _CaseQuery:
    design = PRESETS["current"].with_mutants(mutants) if mutants else PRESETS["current"]
    ind = KInduction(System(CONFIGS[config], design), ["conservation"])
    # the lemmas active too, as in a proof (`KInduction.houdini`)
    return _CaseQuery(ind, 1, list(ind._encode(1)[4]), "conservation")


@pytest.mark.parametrize("config", ["small", "hybrid_swa"])
def test_a_local_query_is_part_of_its_case_query(config: str) -> None:
    q = _query(config)
    fb = q.first
    assert fb is not None
    whole = q.solver.assertions()
    ids = {a.get_id() for a in whole}
    cone = Cone(whole, [state_symbols(st, FIELD_NAMES) for st in fb.states])
    sizes = []
    for i, case in enumerate(fb.cases):
        local = cone.query(case, fb.ends[i])
        assert local[0].eq(case)
        outside = [a for a in local[1:] if a.get_id() not in ids]
        assert not outside, (fb.names[i], outside[:1])
        sizes.append(len(local))
    # the point of it: a sub-step's query leaves most of the step out
    assert sorted(sizes)[len(sizes) // 2] < len(whole) // 2, (sorted(sizes)[len(sizes) // 2], len(whole))


def test_an_evicted_nodes_cases_close_locally() -> None:
    q = _query("hybrid_swa")
    fb = q.first
    assert fb is not None
    node_cases = [i for i, name in enumerate(fb.names) if ".evicted[" in name]
    assert len(node_cases) >= 8, fb.names
    open_ = [fb.names[i] for i in node_cases if q._local((i,), [fb.cases[i]]) != z3.unsat]
    assert not open_, open_


@pytest.mark.parametrize("mutant", ["retract_forgets_free", "unfinished_keeps_protected_len"])
def test_a_planted_leaks_case_is_not_closed_locally(mutant: str) -> None:
    """The case the whole query finds sat (the sub-step the mutant broke) stays open locally, and
    the step's answer is still a counterexample to induction."""
    q = _query("small", frozenset({mutant}))
    fb = q.first
    assert fb is not None
    s = z3.Solver()
    s.add(*q.solver.assertions(), z3.Not(q.goals["conservation"]))
    assert s.check(*q._assumptions()) == z3.sat
    m = s.model()
    broken = [i for i, case in enumerate(fb.cases) if z3.is_true(m.eval(case, model_completion=True))]
    assert broken
    assert all(q._local((i,), [fb.cases[i]]) == z3.sat for i in broken), [fb.names[i] for i in broken]
    h = KInduction(System(CONFIGS["small"], PRESETS["current"].with_mutants(frozenset({mutant}))),
                   ["conservation"]).houdini(1)
    assert "conservation" in h.ctis and "conservation" not in h.proved


def test_a_prefill_results_case_closes_on_the_sub_steps_before_it() -> None:
    """A request's prefill result keeps the ledger only given what its admission and allocation
    did (its prefix, its lengths): open with its start state left free, closed with every
    sub-step before it, the decode branch still left out."""
    q = _query("hybrid_swa")
    fb = q.first
    assert fb is not None
    i = fb.names.index("conjunct 2 first fails at prefill.prefill result[1]")
    end = fb.ends[i]
    assert end is not None
    cone = Cone(q.solver.assertions(), [state_symbols(st, FIELD_NAMES) for st in fb.states])
    alone = z3.Solver()
    alone.add(*cone.query(fb.cases[i], end))
    assert alone.check(*q._assumptions()) == z3.sat
    prefix = cone.query(fb.cases[i], end, back=end)
    assert len(prefix) < len(q.solver.assertions()) // 2
    assert q._local((i,), [fb.cases[i]]) == z3.unsat
