"""Each known SGLang bug is found as a counterexample of the right property on the design with
that one fix off, replays through the concrete model, and is absent with the fix on.

Restricted to the config and property where the bug lives and to its depth (the CLI's default
search, all configs, is measured in the README); the bound for the fixed design is the same depth (for
#23174 on hybrid_swa: at the counterexample's numbers, FIXED_ON_THE_TRACES_NUMBERS)."""

from __future__ import annotations

from typing import Any

import pytest

from checker.engines import bmc as bmc_mod
from checker.engines.run import check_config, run_check
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.config import REQ_PARAMS, SCALAR_PARAMS, Params, pinned
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.properties import PROPERTIES

# (fix, variant off, mutants, config, property, depth, base preset): on `current` (0.5.23) where the
# mechanism still ships; #27228 lives in EAGLE v1's verify, which no release since 0.5.13 ships.
# #22213/#22753 is one step shorter on 0.5.23 than on 0.5.13-0.5.21: the slot takes the session's
# record at the first turn's row allocation (session_record=owned_at_alloc), not at the first save.
KNOWN = [
    ("swa_busy_check", None, (), "hybrid_swa", "busy_check_sound", 1, "current"),
    ("session_active", None, (), "sessions", "busy_check_sound", 2, "current"),
    ("retract_tail_free", None, (), "sessions", "conservation", 3, "current"),
    ("swa_hostload_budget", None, (), "hybrid_swa_hicache", "no_prefill_oom", 1, "current"),
    ("spec_topk_busy_check", None, ("verify_keeps_rejected_page",), "spec_topk", "busy_check_complete", 2, "v0.5.13"),
    ("chunked_swa_page_reserve", None, (), "hybrid_swa", "no_prefill_oom", 3, "current"),
]
# The fixed side of these is checked on the counterexample's own numbers (every schedule to the same
# depth, the bounds pinned to the trace's parameters): on 0.5.23 #23174's fixed hybrid_swa BMC to
# depth 3 over the whole bounds cost CI minutes (21 s here pinned, 150 s+ over the bounds). The whole
# bounds' fixed side is reviewed on v0.5.13 (tests/engines/test_review.py::test_review_each_known_fix).
# retract_tail_free too: that review checks its fixed side on `current`, at the same config,
# property and depth, over the whole bounds (its base side), and the pinned check here costs a third
# of it.
FIXED_ON_THE_TRACES_NUMBERS = {"chunked_swa_page_reserve", "retract_tail_free"}


def _at(cfg: Any, params: Params) -> Any:
    """`cfg` with its bounds pinned to `params` (a request parameter to the range of its values)."""
    narrow = {n: (getattr(params, n), getattr(params, n)) for n in SCALAR_PARAMS if n in cfg.bounds}
    narrow.update({n: (min(getattr(params, n)), max(getattr(params, n))) for n in REQ_PARAMS if n in cfg.bounds})
    return pinned(cfg, **narrow)


@pytest.mark.parametrize("fix, off, mutants, config, prop, depth, base", KNOWN, ids=[k[0] for k in KNOWN])
def test_known_bug_found_and_fixed(fix: str, off: str | None, mutants: tuple[str, ...], config: str, prop: str,
                                   depth: int, base: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the BMC without specs/lemmas.py's strengthening invariants as extra goals: a lemma is asserted
    # only where it was checked to hold, so it changes no verdict and no counterexample (the same
    # trace at the same depth), only how hard the queries are, and at these depths asking them costs
    # more than it saves (#23174 on hybrid_swa: 21 s to 11 s). Lemmas only speed up proofs
    # (tests/quality/test_mutants.py); tests/engines/test_lemmas_hold.py checks them.
    monkeypatch.setattr(bmc_mod, "LEMMAS", {})
    fixed = PRESETS[base].with_mutants(frozenset(mutants))
    buggy = fixed.with_fix(fix, off)
    rep = run_check(buggy, [config], [prop], depth, prove=False)
    res = rep.configs[0].results[prop]
    assert res.verdict is Verdict.VIOLATED, res.words()
    assert res.depth == depth  # the shortest counterexample: BMC goes depth by depth
    t = res.trace
    assert t is not None and t.depth == depth
    system = System(t.cfg, t.design)
    states, _ = run_concrete(system, t.params, t.actions, expected=t.states)
    x = system.ctx(Concrete(), t.params)
    assert PROPERTIES[prop].holds(x, states[-1]) is False
    assert all(PROPERTIES[prop].holds(x, s) is True for s in states[:-1])
    if fix in FIXED_ON_THE_TRACES_NUMBERS:
        ok = check_config(fixed, _at(t.cfg, t.params), [prop], depth, prove=False).results[prop]
    else:
        ok = run_check(fixed, [config], [prop], depth, prove=False).configs[0].results[prop]
    assert ok.verdict is Verdict.HOLDS_TO_DEPTH and ok.depth == depth, ok.words()
