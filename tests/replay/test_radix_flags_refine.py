"""The torch pool implements each radix-cache / SWA-window flag of issue 27 as the model does:
random walks of the model with the flag on replay step by step on the pool (every field, every
choice, the tree counters, the busy check), on the configs the flag touches, including a page-4
hybrid-SWA instance whose window is not a page multiple (where the flags differ most)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from checker.replay.pool import replay_trace
from checker.traces.trace import Step, Trace, run_concrete
from model.config import Config, concrete_params
from model.designs import PRESETS, Design
from model.system import System
from specs.configs import CONFIGS

from checker.traces.walk import random_walk

ROOT = Path(__file__).resolve().parents[2]


def pool_flags() -> set[str]:
    """The fix flags the torch pool reads (pool/*.py `design.on("X")` / `design.variant("X")`, or a
    model/designs.py rule of them)."""
    src = "".join(p.read_text() for p in (ROOT / "pool").glob("*.py"))
    # and through model/designs.py's rules of several flags
    helpers = {"leaf_window_cap": ("swa_leaf_window_cap", "unified_radix_default")}
    read = {f for h, fs in helpers.items() if re.search(rf"\b{h}\(cfg, design\)", src) for f in fs}
    return set(re.findall(r'design\.(?:on|variant)\("([a-z0-9_]+)"\)', src)) | read


# Fixes whose model behaviour the pool does not have yet (it implements them "off"): a walk with
# them on diverges for reasons that have nothing to do with the flags under test. Each is left on
# as soon as the pool reads it (then the pool follows both sides).
POOL_LAGS = ("chunked_input_gate", "chunk_end_page_align", "swa_gate_fresh_tail", "swa_chunk_cap")


def base() -> Design:
    """`current`, less the POOL_LAGS fixes the pool does not read."""
    d, have = PRESETS["current"], pool_flags()
    for f in POOL_LAGS:
        if f in d.fixes and f not in have:
            d = d.with_fix(f, None)
    return d


# hybrid SWA at page 4 with W in 3..9 (W mod 4 != 0 included), chunked prefill, two requests
PAGE4 = Config(
    name="hybrid_swa_page4_walk", doc="", num_reqs=2, page_size=4, hybrid_swa=True, chunked_prefill=True, private_atoms=5,
    bounds={"full_tokens": (16, 96), "swa_tokens": (16, 64), "sliding_window_size": (3, 9), "input_len": (1, 24),
            "max_new_tokens": (1, 10), "chunked_prefill_size": (4, 16), "req_pool_size": (2, 2),
            "max_prefill_tokens": (16, 64)},
)

SWA = (PAGE4, CONFIGS["hybrid_swa"], CONFIGS["hybrid_swa_hicache"])
REMATCH = (("swa_release_threshold", "max_w_ps"), ("unfinished_swa_release", "rematch"))
# the v0.5.20-v0.5.22 and v0.5.23 unified-cache sets, and each flag alone
UNIFIED_20 = (("swa_leaf_window_cap", "on"), ("swa_tombstone_leaf_kept", "on"), *REMATCH,
              ("swa_segment_lock", "on"), ("busy_check_chunked_req", "on"), ("swa_branching_insert", "on"))
UNIFIED_23 = (("swa_leaf_window_cap", "on"), ("swa_tombstone_leaf_kept", "on"), ("swa_release_threshold", "ceil_max_w_ps"),
              ("unfinished_swa_release", "path"), ("swa_segment_lock", "on"), ("busy_check_chunked_req", "on"),
              ("swa_branching_insert", "on"))
CASES: list[tuple[tuple[tuple[str, str], ...], tuple[Config, ...]]] = [
    ((("swa_release_threshold", "max_w_ps"),), SWA),
    ((("swa_release_threshold", "ceil_max_w_ps"),), SWA),
    ((("swa_leaf_window_cap", "on"),), SWA),
    ((("swa_tombstone_leaf_kept", "on"),), SWA),
    (REMATCH, SWA),
    ((("unfinished_swa_release", "path"),), SWA),
    ((("swa_segment_lock", "on"),), SWA),
    ((("busy_check_chunked_req", "on"),), SWA),
    ((("swa_branching_insert", "on"),), SWA),
    ((("prompt_boundary_split", "on"),), (CONFIGS["small"],)),
    (UNIFIED_20, SWA),
    (UNIFIED_23, SWA),
]


def _design(flags: tuple[tuple[str, str], ...]) -> Design:
    d = base()
    for f, v in flags:
        assert f in pool_flags(), f"the pool does not implement {f}"
        d = d.with_fix(f, v)
    return d


@pytest.mark.parametrize("flags, cfg", [(f, c) for f, cs in CASES for c in cs],
                         ids=[f"{'+'.join(f'{n}={v}' for n, v in fl)}-{c.name}" for fl, cs in CASES for c in cs])
def test_walks_refine_with_flag(flags: tuple[tuple[str, str], ...], cfg: Config) -> None:
    design = _design(flags)
    rng = random.Random(f"{cfg.name}/{design.name}")
    checked = 0
    for _ in range(6):
        t = random_walk(cfg, design, 16, rng.randrange(1 << 30))
        o = replay_trace(t, file=f"walk {cfg.name} {design.name}")
        assert o.ok, o.line()
        checked += len(t.steps)
    assert checked > 0


def _scenario_trace(cfg: Config, design: Design, picks: list[dict], **params: object) -> Trace:
    system = System(cfg, design)
    p = concrete_params(cfg, **params)
    states, made = run_concrete(system, p, [("event_loop_iteration", pk) for pk in picks])
    return Trace(cfg, design, p, states[0], [Step("event_loop_iteration", m, s) for m, s in zip(made, states[1:])])


def _scenarios() -> list[tuple[str, Config, Design, list[dict], dict]]:
    from tests.unit import test_radix_flags as U

    f6 = dict(input_len=(20, 4), max_new_tokens=(3, 10))
    return [
        ("threshold max_w_ps", U.S_THR, U.CURRENT.with_fix("swa_release_threshold", "max_w_ps"), U.PICKS_THR, {}),
        ("threshold ceil", U.S_THR, U.CURRENT.with_fix("swa_release_threshold", "ceil_max_w_ps"), U.PICKS_THR, {}),
        ("leaf cap", U.S_CAP, U.CURRENT.with_fix("swa_leaf_window_cap", "on"), [U.ARRIVE0, {}, {}], {}),
        ("finding 3 rematch", U.S_F3, U.F3.with_fix("unfinished_swa_release", "rematch"), [U.ARRIVE0, {}, {}], {}),
        ("unfinished path", U.S_F3, U.F3.with_fix("unfinished_swa_release", "path"), [U.ARRIVE0, {}, {}], {}),
        ("segment lock", U.S_SEG, U.SEG.with_fix("swa_segment_lock", "on"), [U.ARRIVE0, {}, {}], {}),
        ("old lock walk", U.S_SEG, U.SEG, [U.ARRIVE0, {}, {}], {}),
        ("finding 6 pre-#37502", U.S_F6, U.CURRENT, U.PICKS_F6, f6),
        ("finding 6 #37502", U.S_F6, U.CURRENT.with_fix("busy_check_chunked_req", "on"), U.PICKS_F6, f6),
    ]


@pytest.mark.parametrize("i", range(9))
def test_flag_scenarios_replay_on_the_pool(i: int) -> None:
    """The unit scenarios of tests/unit/test_radix_flags.py, step by step on the pool: each flag's
    path through the pool is taken at least once (the random walks reach some of them rarely)."""
    name, cfg, design, picks, params = _scenarios()[i]
    for f in POOL_LAGS:
        if f in design.fixes and f not in pool_flags():
            design = design.with_fix(f, None)
    o = replay_trace(_scenario_trace(cfg, design, picks, **params), file=name)
    assert o.ok, o.line()


# Two walks (found by searching seeds) in which a match records a branching point and the next insert
# stops there (swa_branching_insert): random walks reach it rarely, so these pin it.
BRANCH_DESIGN = (("swa_release_threshold", "max_w_ps"), ("unfinished_swa_release", "path"), ("swa_branching_insert", "on"))


@pytest.mark.parametrize("seed", [166793564, 234119102])
def test_branching_walk_replays_on_the_pool(seed: int) -> None:
    from model.state import CHUNKED, RUNNING

    design = _design(BRANCH_DESIGN)
    t = random_walk(PAGE4, design, 24, seed)
    ps = PAGE4.page_size
    cut = [k for k in range(1, len(t.steps)) for r in range(PAGE4.num_reqs)
           if t.steps[k - 1].state.swa_branching_seqlen[r] > 0 and t.steps[k].state.in_last_batch[r]
           and t.steps[k].state.status[r] in (RUNNING, CHUNKED)
           and t.steps[k].state.cache_protected_len[r] < t.steps[k].state.kv_committed_len[r] // ps * ps]
    assert cut, "the walk no longer reaches a branching insert (the model changed): pick new seeds"
    o = replay_trace(t, file=f"branching walk {seed}")
    assert o.ok, o.line()
