"""The explicit-state engine (checker/engines/explicit.py): successor enumeration, shortest counterexamples,
replay by successor index, the CLI report and ITF file, and `kvmc graph`."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker.traces import itf
from checker.engines.agreement import pinned
from checker.cli import main
from checker.engines.explicit import EnumeratingOracle, Explorer, param_points, successors
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.state import NEW
from model.system import System
from specs.configs import CONFIGS
from checker.engines.applies import for_config
from specs.properties import PROPERTIES

SESSIONS = pinned(CONFIGS["sessions"], full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))


def test_enumerating_oracle_walks_every_choice_sequence() -> None:
    seen = []
    prefix: list | None = []
    while prefix is not None:
        o = EnumeratingOracle(prefix)
        a = o.pick_bool("a")
        b = o.pick_int("b", 0, 2) if a else None
        seen.append((a, b))
        prefix = o.next_prefix()
    assert seen == [(False, None), (True, 0), (True, 1), (True, 2)]


def test_successors_of_the_initial_state_are_every_arrival_subset_in_a_fixed_order() -> None:
    system = System(CONFIGS["small"], PRESETS["current"])
    p = param_points(system)[0]
    s0 = system.init(system.ctx(Concrete(), p))
    first = list(successors(system, p, s0))
    assert [(pk.get("recv.arrive[0]"), pk.get("recv.arrive[1]")) for pk, _ in first] == [
        (False, False), (False, True), (True, False), (True, True)]
    assert first == list(successors(system, p, s0))  # deterministic: replay by index is stable
    assert first[0][1].status == (NEW, NEW)  # nobody arrived: the server stays idle
    assert all(s.status != (NEW, NEW) for _, s in first[1:])


def test_bfs_reports_the_shortest_violation_and_it_replays_by_index() -> None:
    system = System(SESSIONS, PRESETS["v0.5.10.post1"])
    search = Explorer(system, ["busy_check_sound", "conservation"]).run(4)
    r = search.results["busy_check_sound"]
    # depth 1: a streaming turn that finishes in its own prefill is uncached and session-held at once
    # (v0.5.10.post1's `_get_batch_uncached_size`, `uncached_skips_released_req` off; it reproduces on
    # SGLang 0.5.10.post1); with that flag on, #22213's restored turn at depth 3
    assert r.verdict is Verdict.VIOLATED and r.depth == 1 and r.trace is not None
    assert r.trace.engine == "explicit" and r.trace.depth == 1
    later = Explorer(System(SESSIONS, PRESETS["v0.5.10.post1"].with_fix("uncached_skips_released_req", "on")),
                     ["busy_check_sound"]).run(3).results["busy_check_sound"]
    assert later.verdict is Verdict.VIOLATED and later.depth == 3
    # #22862's leak (v0.5.10.post1 has no retract_tail_free) at depth 3 too: the forced retraction takes
    # the session's request out of a tie (equal keys: SGLang's admission order, any request in kvmc)
    c = search.results["conservation"]
    assert c.verdict is Verdict.VIOLATED and c.depth == 3 and c.trace is not None
    assert any(".tie_pass[" in k and v for st in c.trace.steps for k, v in st.picks.items()), c.trace.steps
    assert search.distinct_states == r.meta["distinct_states"] > 0 and search.transitions >= search.distinct_states - 4
    # the successor indices alone rebuild the same states
    s = r.trace.init
    for idx, step in zip(r.trace.meta["successor_index"], r.trace.steps):
        s = list(successors(system, r.trace.params, s))[idx][1]
        assert s == step.state
    # and so does the concrete re-run of its picks
    states, _ = run_concrete(system, r.trace.params, r.trace.actions)
    assert states[-1] == r.trace.states[-1]


def test_a_property_never_exercised_is_vacuous_and_a_cap_is_unknown() -> None:
    system = System(pinned(CONFIGS["small"], full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 1), warm_len=(1, 1)),
                    PRESETS["current"])
    res = Explorer(system, ["no_decode_oom"]).run(2).results["no_decode_oom"]
    assert res.verdict is Verdict.VACUOUS  # every request finishes in its prefill: no decode batch ever runs
    capped = Explorer(System(CONFIGS["small"], PRESETS["current"]), ["conservation"], max_states=60).run(3).results
    assert capped["conservation"].verdict is Verdict.UNKNOWN and "state cap" in capped["conservation"].reason


def test_cli_explicit_engine_prints_the_report_and_writes_itf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--engine", "explicit", "--design", "v0.5.10.post1", "--config", "sessions",
                 "--property", "busy_check_sound", "--depth", "3", "--out", str(tmp_path), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1
    assert "busy_check_sound     violated at depth 1" in out
    path = tmp_path / "v0.5.10.post1" / "sessions" / "busy_check_sound.itf.json"
    tr = itf.read(path)
    assert tr.engine == "explicit" and tr.depth == 1 and tr.prop == "busy_check_sound"


def test_graph_export_marks_violations_and_refuses_past_the_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "g.dot"
    code = main(["graph", "--config", "small", "--mutant", "req_slot_not_taken", "--property", "conservation",
                 "--depth", "1", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    dot = out.read_text()
    assert dot.startswith("digraph") and "fillcolor" in dot and "conservation" in dot and "->" in dot
    big = tmp_path / "big.dot"
    code = main(["graph", "--config", "spec_topk", "--depth", "3", "--max-states", "50", "--out", str(big)])
    err = capsys.readouterr().err
    assert code == 2 and not big.exists()
    assert len(err.strip().splitlines()) == 1 and "max_states=50" in err and "--max-states" in err


def test_cli_says_when_the_explicit_search_explored_every_reachable_state(capsys: pytest.CaptureFixture[str]) -> None:
    """On `small`'s explicit points the frontier empties before depth 10: the report says every
    reachable state was explored (and by which depth), and no property there is vacuous."""
    rc = main(["check", "--engine", "explicit", "--design", "current", "--config", "small", "--depth", "10", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    lines = [ln for ln in out.splitlines() if ln.startswith("  ")]
    assert len(lines) == len(for_config(CONFIGS["small"])) and all("holds to depth 10" in ln for ln in lines), out
    assert all("explored by depth" in ln and "holds at every depth on those points" in ln for ln in lines), out
