"""The random engine (checker/engines/random_engine.py): the Hypothesis state machine is generated from the
System, finds a known bug, reports it as a replayable trace, and never claims a property holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis.stateful import RuleBasedStateMachine

from checker.traces import itf
from checker.engines.agreement import pinned
from checker.cli import main
from checker.engines.random_engine import Recorder, check_config, machine_for
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from checker.engines.applies import for_config
from specs.properties import PROPERTIES

SESSIONS = pinned(CONFIGS["sessions"], full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))


def test_machine_is_generated_from_the_system() -> None:
    system = System(CONFIGS["small"], PRESETS["current"])
    from checker.engines.explicit import param_points

    cls = machine_for(system, list(PROPERTIES), param_points(system), Recorder())
    assert issubclass(cls, RuleBasedStateMachine)
    setup = cls.setup_state()
    assert {r.function.__name__ for r in setup.rules} == set(system.actions)
    assert all(r.preconditions for r in setup.rules)  # guarded by System.enabled
    # every property that applies to the config (the HiCache-only one does not apply to small)
    assert {i.function.__name__ for i in setup.invariants} == {f"invariant_{p}" for p in for_config(system.cfg)}
    assert len(for_config(system.cfg)) == len(PROPERTIES) - 1
    assert len(setup.initializers) == 1


def test_random_finds_the_session_false_alarm_and_the_trace_replays() -> None:
    system = System(SESSIONS, PRESETS["v0.5.10.post1"])
    rep = check_config(system.design, SESSIONS, ["busy_check_sound"], 5, examples=300)
    r = rep.results["busy_check_sound"]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None and r.trace.engine == "random"
    # never shorter than the shortest counterexample (BFS: 1, a turn finished in its own prefill that
    # 0.5.10.post1 counts as uncached and session-held, docs/findings.md finding 5)
    assert 1 <= r.depth <= 5
    states, _ = run_concrete(system, r.trace.params, r.trace.actions)
    assert not PROPERTIES["busy_check_sound"].holds(system.ctx(Concrete(), r.trace.params), states[-1])


def test_no_failure_is_unknown_never_holds() -> None:
    rep = check_config(PRESETS["current"], SESSIONS, ["conservation"], 3, examples=20)
    r = rep.results["conservation"]
    assert r.verdict is Verdict.UNKNOWN and "proves nothing" in r.reason


def test_cli_random_engine_writes_itf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--engine", "random", "--config", "small", "--mutant", "req_slot_not_taken",
                 "--property", "conservation", "--depth", "2", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1 and "conservation" in out and "violated at depth" in out
    tr = itf.read(tmp_path / "current+req_slot_not_taken" / "small" / "conservation.itf.json")
    assert tr.engine == "random" and tr.depth >= 1
