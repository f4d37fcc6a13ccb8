"""Hybrid SWA at the page sizes SWA models are served with: `hybrid_swa_page16` and
`hybrid_swa_page64`, and with HiCache `hybrid_swa_hicache_page16` / `_page64` (specs/configs.py;
issue 62 item 3).

The concrete engines check them at real page arithmetic: the explicit engine finds #23174 (the
chunked SWA page reserve, 0.5.11) with the fix off at both page sizes and finds nothing with it on
at the counterexample's own numbers; every pool, chunk and warm length in their bounds is a page
multiple, as SGLang's `server_args` requires, and the window and the prompts are not (the page
floor and ceiling of the window release and of an unaligned prompt are what these configs test).
Their scheduler-loop conformance rows against SGLang are `event_loop/swa_page16` and
`event_loop/swa_page64` (upstream/sched/loop_rows.py; tests/upstream/test_loop_rows.py runs rows).
"""

from __future__ import annotations

import pytest

from checker.engines.explicit import Explorer
from checker.engines.run import run_check
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.config import PAGE_MULTIPLE
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

REAL_PAGES = {"hybrid_swa_page16": 16, "hybrid_swa_page64": 64}
# the same with HiCache (UnifiedRadixCache, a warm prefix device or host-only)
HICACHE_PAGES = {"hybrid_swa_hicache_page16": 16, "hybrid_swa_hicache_page64": 64}


@pytest.mark.parametrize("config", sorted({**REAL_PAGES, **HICACHE_PAGES}))
def test_the_bounds_are_page_multiples_where_sglang_requires_them(config: str) -> None:
    cfg = CONFIGS[config]
    ps = {**REAL_PAGES, **HICACHE_PAGES}[config]
    assert cfg.hicache == (config in HICACHE_PAGES)
    assert cfg.page_size == ps and cfg.hybrid_swa and cfg.chunked_prefill
    for name, (lo, hi) in {**cfg.bounds, **cfg.explicit_bounds}.items():
        if name in PAGE_MULTIPLE:
            assert lo % ps == 0 and hi % ps == 0, (name, lo, hi)
    lo, hi = cfg.bound("sliding_window_size")
    assert lo < ps < hi  # windows below, at and above a page
    lo, hi = cfg.bound("input_len")
    assert lo < ps and hi > 2 * ps  # prompts of under a page to several pages


@pytest.mark.parametrize("config", sorted(REAL_PAGES))
def test_23174_found_at_the_real_page_size_and_fixed_on_its_numbers(config: str) -> None:
    fixed = PRESETS["current"]
    buggy = fixed.with_fix("chunked_swa_page_reserve", None)
    rep = run_check(buggy, [config], ["no_prefill_oom"], 3, prove=False, engine="explicit")
    res = rep.configs[0].results["no_prefill_oom"]
    assert res.verdict is Verdict.VIOLATED, res.words()
    t = res.trace
    assert t is not None and t.depth == 3 and t.cfg.page_size == REAL_PAGES[config]
    system = System(t.cfg, t.design)
    states, _ = run_concrete(system, t.params, t.actions, expected=t.states)  # the concrete model's own steps
    x = system.ctx(Concrete(), t.params)
    assert PROPERTIES["no_prefill_oom"].holds(x, states[-1]) is False
    # fixed, on the counterexample's own numbers: every schedule of its parameter point to the same
    # depth (the point alone: check_config over the bounds pinned around it, 10,816 prompt-length
    # pairs at page 64, cost 26 s for the same answer)
    ok = Explorer(System(CONFIGS[config], fixed), ["no_prefill_oom"], points=[t.params]).run(3).results["no_prefill_oom"]
    assert ok.verdict is Verdict.HOLDS_TO_DEPTH and ok.depth == 3, ok.words()
    again = Explorer(System(CONFIGS[config], buggy), ["no_prefill_oom"], points=[t.params]).run(3).results["no_prefill_oom"]
    assert again.verdict is Verdict.VIOLATED and again.depth == 3, again.words()  # the same search sees it with the fix off
