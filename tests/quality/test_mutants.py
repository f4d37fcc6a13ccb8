"""Quality: every planted bug (model/mutants/) is found by every engine, at the stated depth, with a
minimal trace (after Hypothesis's tests/quality: hard-to-find examples do get found).

The cases (config pinned to a few points, property, depth of the shortest counterexample) are data
in checker/engines/cases.py, shared with docs/mutants.md and bench/engines.py. BMC and the explicit search
run on the same pinned points and must both report exactly the stated depth: BMC's trace is the
shortest because every smaller depth was unsat, BFS's because it expands level by level, so two
independent engines agreeing on the length is the minimality check. The random engine must find
it within its example budget, its shrunk trace no shorter than that minimum (it cannot be) and at
most its step budget; a case the random engine cannot reach says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checker.engines.cases import MUTANT_CASES, Case, run_case
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.mutants import available
from model.ops import Concrete
from model.system import System
from model.transition import REGISTRY
from specs.liveness import LIVENESS
from specs.properties import PROPERTIES

IDS = [c.name for c in MUTANT_CASES]


def test_at_least_fifteen_planted_bugs_each_documented_and_each_with_a_case() -> None:
    mods = available()
    assert len(mods) >= 15
    assert sorted(mods) == sorted(IDS), "every mutant needs a case in checker/engines/cases.py (and no case without a mutant)"
    for name, m in mods.items():
        doc = (m.__doc__ or "").strip()
        assert doc.startswith("Planted:"), f"{name}: docstring must say what was planted"
        assert "Breaks" in doc, f"{name}: docstring must name the SGLang mechanism it breaks"
        assert m.REPLACES in REGISTRY, f"{name}: REPLACES={m.REPLACES!r} is not a transition"
        src = Path(m.__file__).read_text()
        assert len(src.splitlines()) < 80, f"{name}: a planted bug is one small module"
        ast.parse(src)
    assert len({m.REPLACES for m in mods.values()}) >= 15, "planted bugs should spread over the transitions"


def _check_trace(c: Case, r) -> None:  # type: ignore[no-untyped-def]
    assert r.trace is not None
    system = System(c.cfg(), c.design())
    if c.prop in LIVENESS:  # a lasso: its last state is its loop's first, and the property fails on it
        from checker.engines.liveness import check_trace

        assert r.trace.loop is not None
        states, _ = run_concrete(system, r.trace.params, r.trace.actions)
        assert states == r.trace.states and states[-1] == states[r.trace.loop]
        assert check_trace(system, r.trace).violated
        return
    states, _ = run_concrete(system, r.trace.params, r.trace.actions)
    x = system.ctx(Concrete(), r.trace.params)
    assert not PROPERTIES[c.prop].holds(x, states[-1]), "the trace must end in a violating state"
    assert all(PROPERTIES[c.prop].holds(system.ctx(Concrete(), r.trace.params), s) for s in states[:-1]), \
        "a counterexample stops at its first violation"


@pytest.mark.parametrize("c", MUTANT_CASES, ids=IDS)
def test_bmc_and_explicit_find_it_at_the_stated_depth(c: Case) -> None:
    b = run_case(c, "bmc", minimize=False, use_lemmas=False)  # lemmas only speed up proofs; not needed to find a bug
    e = run_case(c, "explicit")
    assert b.verdict is Verdict.VIOLATED, f"BMC missed {c.name}: {b.words()} {b.reason}"
    assert e.verdict is Verdict.VIOLATED, f"explicit missed {c.name}: {e.words()} {e.reason}"
    assert (b.depth, e.depth) == (c.depth, c.depth), f"{c.name}: bmc {b.depth}, explicit {e.depth}, stated {c.depth}"
    _check_trace(c, b)
    _check_trace(c, e)


RANDOM = [c for c in MUTANT_CASES if not c.random_out_of_reach]


@pytest.mark.parametrize("c", RANDOM, ids=[c.name for c in RANDOM])
def test_random_finds_it_within_its_budget(c: Case) -> None:
    r = run_case(c, "random")
    assert r.verdict is Verdict.VIOLATED, f"random missed {c.name} in {c.random_examples} runs: {r.reason}"
    assert c.depth <= r.depth <= c.steps_for_random
    _check_trace(c, r)


def test_out_of_reach_cases_say_why() -> None:
    for c in MUTANT_CASES:
        if c.random_out_of_reach:
            assert len(c.random_out_of_reach) > 20
