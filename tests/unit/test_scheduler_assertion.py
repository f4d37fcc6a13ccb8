"""SGLang's scheduler dies on `assert new_prefix_len <= len(new_indices)` (docs/findings.md #3): the
model's state outcome `oom = OOM_ASSERT` (model/radix_cache.py::assertion_after_rematch) and the
property `no_scheduler_assertion` that sees it.

The conformance scenario (docs/conformance.md, the 0.5.22 disagreement closed on 2026-11-26): page 4,
window 5, one request of 10 prompt tokens prefilled in one chunk, then one decode step that finishes
it. The unfinished insert after the prefill (C = 10) releases [0, 4) of its SWA, inserts [0, 4) as a
tombstone and [4, 8) live, and its re-match stops at the root (a live tail shorter than the window).
0.5.22's finish goes through checkpoint_into_tree: its insert finds [0, 8) in the tree
(new_prefix_len = 8), the re-match ends at 0 again, and SGLang dies. 0.5.18-0.5.21 finish through
cache_finished_req (no re-match: the finish lives), 0.5.23 keeps the inserted path (no re-match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checker.engines.agreement import compare, pinned
from checker.engines.random_engine import check_config as random_check
from checker.replay.pool import replay_trace
from checker.traces import itf
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.config import concrete_params
from model.designs import PRESETS
from model.ops import Concrete
from model.state import OOM_ASSERT, OOM_NONE, RUNNING
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

PINS = {"full_tokens": (20, 20), "swa_tokens": (20, 20), "sliding_window_size": (5, 5), "chunked_prefill_size": (12, 12),
        "max_prefill_tokens": (16, 16), "input_len": (10, 10), "max_new_tokens": (2, 2)}
CFG = pinned(CONFIGS["hybrid_swa_page4"], **PINS)
PARAMS = concrete_params(CFG, **{k: v[0] for k, v in PINS.items()})
ARRIVE0 = {"recv.arrive[0]": True}  # request 1 never arrives
CORPUS = Path(__file__).resolve().parents[2] / "counterexamples" / "v0.5.22" / "hybrid_swa_page4" / "no_scheduler_assertion.itf.json"


def _run(design: str) -> list:
    states, _ = run_concrete(System(CFG, PRESETS[design]), PARAMS, [("event_loop_iteration", ARRIVE0),
                                                                     ("event_loop_iteration", {})])
    return states


def test_the_finish_dies_on_0_5_22_in_the_state_after_the_insert() -> None:
    s1, s2 = _run("v0.5.22")[1:]
    assert s1.oom == OOM_NONE and s1.status[0] == RUNNING and s1.cache_protected_len[0] == 0  # the short re-match
    assert s2.oom == OOM_ASSERT
    # SGLang raises inside checkpoint_into_tree after the insert: it freed the request's copies of
    # [0, 8) (here the very slots the tree holds) and nothing else; the row, the lock and P stand
    assert (s2.full_available, s2.swa_available) == (s1.full_available + 8, s1.swa_available + 4)
    assert s2.node_len == s1.node_len and s2.cache_protected_len[0] == 0 and s2.last_node == s1.last_node
    assert s2.last_batch == s1.last_batch  # process_batch_result never returned
    system = System(CFG, PRESETS["v0.5.22"])
    x = system.ctx(Concrete(), PARAMS)
    assert system.enabled(x, s2) is False  # no step follows
    assert not PROPERTIES["no_scheduler_assertion"].holds(x, s2) and PROPERTIES["no_scheduler_assertion"].holds(x, s1)


@pytest.mark.parametrize("design", ["v0.5.21", "v0.5.23", "current"])
def test_no_death_where_the_finish_does_not_rematch(design: str) -> None:
    """0.5.21 finishes through cache_finished_req (`finish_checkpoint` off), 0.5.23 and `current`
    keep the inserted path: the same schedule ends with the request finished."""
    assert all(s.oom == OOM_NONE for s in _run(design))


@pytest.mark.parametrize("design,violated", [("v0.5.22", True), ("v0.5.23", False)])
def test_bmc_and_explicit_agree_on_the_outcome(design: str, violated: bool) -> None:
    """The one definition in z3 (BMC) and concretely (explicit BFS) at the scenario's numbers."""
    b, _e, bad = compare(PRESETS[design], CFG, 2, ["no_scheduler_assertion"])
    assert not bad, "\n".join(d.describe() for d in bad)
    r = b["no_scheduler_assertion"]
    if violated:
        assert (r.verdict, r.depth) == (Verdict.VIOLATED, 2)
        assert r.trace.states[-1].oom == OOM_ASSERT
    else:
        assert r.verdict is not Verdict.VIOLATED and r.witness_depth is not None


def test_random_engine_finds_it() -> None:
    rep = random_check(PRESETS["v0.5.22"], CFG, ["no_scheduler_assertion"], 3, examples=200)
    r = rep.results["no_scheduler_assertion"]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None and r.trace.states[-1].oom == OOM_ASSERT


def test_corpus_trace_reproduces_on_the_pool_only_where_it_dies(tmp_path: Path) -> None:
    """`kvmc replay`: the pool dies on the same assertion at the same step; with the finish's
    re-match turned off (0.5.21's release) the pool's finish lives and the replay diverges there."""
    t = itf.read(CORPUS)
    assert t.states[-1].oom == OOM_ASSERT
    o = replay_trace(t, "cpu", str(CORPUS), check_model=False)
    assert o.status == "reproduced", o
    off = t.design.with_fix("finish_checkpoint", None)
    from dataclasses import replace

    o2 = replay_trace(replace(t, design=off), "cpu", "finish_checkpoint off", check_model=False)
    assert o2.status == "diverged" and o2.step == len(t.steps), o2
