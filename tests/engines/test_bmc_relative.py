"""The BMC's relative-induction pass (checker/engines/bmc.py, `relative`): a goal proved by one step
from any state where the facts hold is asserted at each later depth without a query. It must change
no verdict: the same properties hold to the same depth, and a planted bug's counterexample is found
at the same (shortest) depth, re-run concretely as usual."""

from __future__ import annotations

import pytest

from checker.engines import bmc as bmc_mod
from checker.engines.bmc import BMC
from checker.verdict import Verdict
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS

SMALL = System(CONFIGS["small"], PRESETS["current"])


@pytest.fixture
def always_relative(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the pass from depth 1 on (the real threshold is a z3 work count small never reaches)."""
    monkeypatch.setattr(bmc_mod, "RELATIVE_AFTER_WORK", 0)


def _verdicts(res: dict) -> dict:
    return {n: (r.verdict, r.depth) for n, r in res.items()}


def test_relative_pass_changes_no_verdict_and_skips_goals(always_relative: None) -> None:
    plain = BMC(SMALL, minimize=False).run(2)
    rel = BMC(SMALL, minimize=False, relative=True).run(2)
    assert _verdicts(rel) == _verdicts(plain)
    assumed = next(iter(rel.values())).meta.get("relative_induction", {})
    # on small every property is 1-inductive relative to the others (docs/proofs.md): the pass
    # proves some, and those are asserted from depth 1 on, unasked
    assert assumed and all(d == 1 for d in assumed.values()), assumed
    assert "relative_induction" not in next(iter(plain.values())).meta


def test_relative_pass_keeps_the_shortest_counterexample(always_relative: None) -> None:
    """A goal the bug breaks has a counterexample to its one-step query, so the pass leaves it to
    the BMC: found at the depth the plain BMC finds it, and re-run through the concrete model."""
    design = PRESETS["current"].with_fix("retract_tail_free", None)  # #22862: conservation at depth 3
    system = System(CONFIGS["sessions"], design)
    plain = BMC(system, ["conservation"], minimize=False).run(3)["conservation"]
    rel = BMC(system, ["conservation"], minimize=False, relative=True).run(3)["conservation"]
    assert plain.verdict is Verdict.VIOLATED and rel.verdict is Verdict.VIOLATED
    assert rel.depth == plain.depth == 3
    assert rel.trace is not None and len(rel.trace.steps) == 3
