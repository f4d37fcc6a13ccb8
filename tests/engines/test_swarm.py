"""The swarm engine (checker/engines/swarm.py, issue 62 item 5): it finds the planted and known bugs
the random engine finds, its counterexamples replay and are the shortest at their point, and with no
violation its words never claim `holds` (only `holds on N states sampled`) nor a proof."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker.cli.app import main
from checker.engines.cases import case
from checker.engines.swarm import check_config
from checker.traces import itf
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES


@pytest.mark.parametrize("name", ["req_slot_not_taken", "retract_forgets_free", "evict_keeps_nodes",
                                  "load_back_skips_swa_alloc"])
def test_swarm_finds_the_planted_bugs_the_random_engine_finds(name: str) -> None:
    c = case(name)
    cfg, design = c.cfg(), c.design()
    rep = check_config(design, cfg, [c.prop], c.steps_for_random, runs=16, jobs=1)
    r = rep.results[c.prop]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None and r.trace.engine == "swarm"
    assert r.depth == c.depth  # minimised: the shortest at its point, which is the case's shortest
    system = System(cfg, design)
    states, _ = run_concrete(system, r.trace.params, r.trace.actions)
    assert not PROPERTIES[c.prop].holds(system.ctx(Concrete(), r.trace.params), states[-1])


def test_swarm_finds_the_known_swa_busy_check_bug_over_whole_bounds() -> None:
    design = PRESETS["current"].with_fix("swa_busy_check", None)
    rep = check_config(design, CONFIGS["hybrid_swa"], ["busy_check_sound"], 3, runs=8, jobs=1)
    assert rep.results["busy_check_sound"].verdict is Verdict.VIOLATED


def test_no_violation_is_a_sample_never_holds() -> None:
    rep = check_config(PRESETS["current"], CONFIGS["small"], ["conservation", "well_formed"], 3, runs=6, jobs=2)
    for r in rep.results.values():
        assert r.verdict is Verdict.UNKNOWN
        w = r.words()
        assert w.startswith("holds on ") and "states sampled (6 runs, seeds 0..5" in w and "proves nothing" in w
        assert "proved" not in w and not w.startswith("holds to depth")
        assert r.meta["states_sampled"] > 0


def test_cli_swarm_writes_itf_and_exits_3_without_a_violation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--engine", "swarm", "--config", "small", "--mutant", "req_slot_not_taken",
                 "--property", "conservation", "--depth", "2", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1 and "violated at depth 1" in out
    tr = itf.read(tmp_path / "current+req_slot_not_taken" / "small" / "conservation.itf.json")
    assert tr.engine == "swarm" and tr.depth == 1
    code = main(["check", "--engine", "swarm", "--config", "small", "--property", "conservation", "--depth", "2",
                 "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 3 and "holds on " in out and "states sampled" in out
