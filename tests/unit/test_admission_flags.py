"""The smaller release changes of issue 27 (§A.9, §0.5.20 item 3, §0.5.23 items 2-3), each on a
scripted run of the concrete model, before and after its flag:
* `enqueue_clip_max_new` (#25126): max_new_tokens clipped at enqueue to T - ceil_page(|input|) - ps - 1;
* `pass_budget_break` (v0.5.23): a pass whose input budget the resumed chunk spent admits no one;
* `admission_rows_held` (v0.5.23): the chunked request's own row does not count against the free rows;
* `load_back_reselect` (#39283): a load-back that loads nothing is admitted only if the gates pass
  again without the host hit (the random walks of the pool replay cover it on hybrid_swa_hicache)."""

from __future__ import annotations

import random

import pytest

from model import enqueue
from model.state import CHUNKED, FINISHED, RUNNING, WAITING
from specs.configs import CONFIGS
from tests.unit.scenario import D55F1C28, drive

CURRENT = D55F1C28  # the scenarios were derived on it (tests/unit/scenario.py)


@pytest.mark.parametrize("flag, status", [(None, WAITING), ("on", FINISHED)])
def test_enqueue_clip(flag: str | None, status: int) -> None:
    # full pool 8, page 1, input 5: max_new 4 -> min(4, 8 - 5 - 1 - 1) = 1: done after its prefill.
    # Unclipped, 5 + 4 + 1 >= 8: the total gate never passes (the blocked queue #25126 is about)
    design = CURRENT.with_fix("enqueue_clip_max_new", flag)
    run = drive(CONFIGS["small"], design, [{"recv.arrive[0]": True}], full_tokens=8, input_len=(5, 1),
                max_new_tokens=(4, 1), warm_len=0, req_pool_size=2, max_prefill_tokens=16)
    assert enqueue.max_new_tokens(run.ctx(), run.states[1], 0) == (1 if flag else 4)
    assert run.states[1].status[0] == status


def test_enqueue_clip_to_zero_keeps_the_request_waiting() -> None:
    design = CURRENT.with_fix("enqueue_clip_max_new", "on")
    run = drive(CONFIGS["small"], design, [{"recv.arrive[0]": True}, {}], full_tokens=8, input_len=(7, 1),
                max_new_tokens=(4, 1), warm_len=0, req_pool_size=2, max_prefill_tokens=16)
    assert enqueue.max_new_tokens(run.ctx(), run.states[1], 0) == 0  # 8 - 7 - 1 - 1 < 0
    assert run.states[2].status[0] == WAITING  # ceil(7) + 0 + 1 >= 8: the total gate never passes


# paged (page 2, chunked): r0 of 10 tokens is chunked by 8; on the next pass its last 2 tokens
PAGED = CONFIGS["paged"]
STEPS = [{"recv.arrive[0]": True}, {"recv.arrive[1]": True}]


@pytest.mark.parametrize("flag, admitted", [(None, True), ("on", False)])
def test_pass_budget_break(flag: str | None, admitted: bool) -> None:
    # max_prefill_tokens 2: the continuation's 2 tokens spend the pass's input budget (OTHER)
    design = CURRENT.with_fix("pass_budget_break", flag)
    run = drive(PAGED, design, STEPS, full_tokens=32, input_len=(10, 2), max_new_tokens=(2, 2), warm_len=0,
                chunked_prefill_size=8, max_prefill_tokens=2, req_pool_size=3)
    assert run.states[1].status[0] == CHUNKED
    assert (run.states[2].status[1] == RUNNING) is admitted


@pytest.mark.parametrize("flag, admitted", [(None, False), ("on", True)])
def test_admission_rows_held(flag: str | None, admitted: bool) -> None:
    # two rows: the chunked r0 holds one, one is free; before v0.5.23 |can_run| = 1 >= 1 free row
    design = CURRENT.with_fix("admission_rows_held", flag)
    run = drive(PAGED, design, STEPS, full_tokens=32, input_len=(10, 2), max_new_tokens=(2, 2), warm_len=0,
                chunked_prefill_size=8, max_prefill_tokens=32, req_pool_size=2)
    assert run.states[1].status[0] == CHUNKED
    assert (run.states[2].status[1] == RUNNING) is admitted


def test_flags_replay_on_the_pool() -> None:
    """Random walks with the four flags on replay step by step on the pool (hicache included)."""
    from checker.replay.pool import replay_trace
    from checker.traces.walk import random_walk

    design = CURRENT
    for f in ("enqueue_clip_max_new", "load_back_reselect", "pass_budget_break", "admission_rows_held"):
        design = design.with_fix(f, "on")
    rng = random.Random("admission flags")
    steps = 0
    for cfg in ("small", "paged", "hybrid_swa_hicache", "sessions"):
        for _ in range(5):
            t = random_walk(CONFIGS[cfg], design, 14, rng.randrange(1 << 30))
            o = replay_trace(t, file=f"walk {cfg}")
            assert o.ok, o.line()
            steps += len(t.steps)
    assert steps > 100
