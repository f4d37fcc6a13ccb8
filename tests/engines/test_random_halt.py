"""The random engine on a model whose scheduler stops: a run that reaches a state no step leaves
(an allocation failure: `System.enabled` is false) ends there quietly, instead of Hypothesis raising
"no progress can be made" out of the engine (found by a sweep: BMC's seeder crashed a
hybrid_swa_hicache job of an old preset)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import Phase

from checker.engines import random_engine
from checker.traces import itf
from model.system import System
from specs.configs import CONFIGS

# #27391's counterexample: step 1 fails the prefill allocation (arrive[1] only), and the scheduler stops
TRACE = Path(__file__).resolve().parents[2] / "counterexamples/v0.5.13-without-swa_hostload_budget/hybrid_swa_hicache/no_prefill_oom.itf.json"


def test_a_run_that_reaches_a_stopped_scheduler_ends_there() -> None:
    tr = itf.read(TRACE)
    system = System(CONFIGS["hybrid_swa_hicache"], tr.design)
    assert tr.steps[0].state.oom and not system.enabled(system.ctx(random_engine.Concrete(), tr.params), tr.steps[0].state)
    rec = random_engine.Recorder()
    machine = random_engine.machine_for(system, ["conservation"], [tr.params], rec)
    random_engine._run_machine(machine, 100, 3, (Phase.generate,))  # raised InvalidDefinition before
    assert rec.runs >= 100 and "conservation" not in rec.failures
    # the stopped runs are still checked: hunting the property the stop breaks finds it at step 1
    found, _rec = random_engine.hunt(system, "no_prefill_oom", 3, examples=100, points=[tr.params])
    assert found is not None and len(found.steps) == 1 and found.steps[0].state.oom
