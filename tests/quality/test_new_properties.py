"""Quality: each property issue 29 added (residency, lock_ledger, idle_check_sound,
idle_check_complete) catches a planted bug the six earlier properties miss, and holds on the model.

Each row: a planted bug (model/mutants/, also a case of checker/engines/cases.py, so every engine
finds it there), the new property that catches it at the stated depth, and the instance. The
explicit engine explores every reachable state of the pinned instance two levels past that depth:
the six earlier properties hold on all of them (no other property sees the bug), and on the
model (`current`) every property, the new ones included, holds there too.
"""

from __future__ import annotations

import pytest

from checker.engines.agreement import pinned
from checker.engines.bmc import BMC
from checker.engines.cases import case
from checker.engines.explicit import Explorer
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.state import CHUNKED, OOM_NONE, ROOT, VIRTUAL, WAITING
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

NEW = ("residency", "lock_ledger", "idle_check_sound", "idle_check_complete")
SIX = tuple(p for p in PROPERTIES if p not in NEW)[:6]

# (planted bug, the new property that catches it, depth); the instance is the bug's quality case
ROWS = [
    ("unfinished_lock_left_behind", "residency", 1),
    ("evict_swa_forgets_window", "residency", 4),
    ("finished_req_keeps_lock", "lock_ledger", 1),
    ("finished_req_keeps_lock", "idle_check_complete", 2),  # a plain RadixCache runs no tree sanity check at idle
    ("idle_check_ignores_session_rows", "idle_check_sound", 2),
]


def test_the_six_are_the_earlier_properties() -> None:
    assert SIX == ("no_prefill_oom", "no_decode_oom", "conservation", "busy_check_sound", "busy_check_complete",
                   "well_formed")
    assert set(NEW) <= set(PROPERTIES)
    assert {p for _m, p, _d in ROWS} == set(NEW), "every new property needs a bug that only it catches"


@pytest.mark.parametrize("mutant,prop,depth", ROWS, ids=[f"{m}-{p}" for m, p, _d in ROWS])
def test_only_the_new_property_catches_it(mutant: str, prop: str, depth: int) -> None:
    c = case(mutant)
    cfg, design = c.cfg(), c.design()
    b = BMC(System(cfg, design), [prop], minimize=False, use_lemmas=False).run(depth, stop_on_violation=True)[prop]
    assert b.verdict is Verdict.VIOLATED and b.depth == depth, b.words()
    search = Explorer(System(cfg, design), list(SIX) + [prop]).run(depth + 2, keep_going=True)
    assert search.results[prop].verdict is Verdict.VIOLATED and search.results[prop].depth == depth
    for p in SIX:
        r = search.results[p]
        # not violated on any reachable state (vacuous: its witness is not on this small instance)
        assert r.verdict in (Verdict.HOLDS_TO_DEPTH, Verdict.VACUOUS), f"{p} also catches {mutant}: {r.words()}"


@pytest.mark.parametrize("mutant", sorted({m for m, _p, _d in ROWS}))
def test_the_new_properties_hold_on_the_model_there(mutant: str) -> None:
    c = case(mutant)
    search = Explorer(System(c.cfg(), PRESETS["current"]), list(NEW)).run(c.depth + 2, keep_going=True)
    for p in NEW:
        assert search.results[p].verdict in (Verdict.HOLDS_TO_DEPTH, Verdict.VACUOUS), search.results[p].words()


@pytest.mark.parametrize("config", ["small", "sessions"])
def test_the_new_properties_are_exercised(config: str) -> None:
    """Each new property's witness is met on the plain configs' explicit points (not vacuous)."""
    cfg = CONFIGS[config]
    search = Explorer(System(pinned(cfg), PRESETS["current"]), list(NEW)).run(3, keep_going=True)
    for p in NEW:
        r = search.results[p]
        assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.witness_depth is not None, (p, r.words())


def test_a_crash_is_its_own_property_not_a_lock_without_owner(monkeypatch: pytest.MonkeyPatch) -> None:
    """v0.5.11's session row finding: the pass admits a request with no row left and
    `alloc_req_slots` kills the scheduler with the request's lock taken and no KV yet. That state
    violates `no_prefill_oom` (the finding); `lock_ledger` does not call the in-flight admission's
    lock ownerless (it did before session 45, so a deep random sweep of the old presets reported
    it beside every such crash). The BMC finds such a state through a planted target property."""
    from specs import properties

    def no_locked_waiter_at_a_crash(x, s):  # noqa: ANN001, ANN202
        return x.not_(x.and_(s.oom != OOM_NONE, *[x.or_(*[x.and_(s.last_node[q] != ROOT, s.last_node[q] != VIRTUAL,
                                                                   s.status[q] == WAITING)
                                                            for q in range(x.cfg.num_reqs)])]))

    monkeypatch.setitem(properties.PROPERTIES, "planted_target", properties.Property(
        "planted_target", "no crash with a waiting request holding a lock", no_locked_waiter_at_a_crash,
        lambda x, s: True, "always"))
    system = System(CONFIGS["sessions"], PRESETS["v0.5.11"])
    # without the lemmas as extra goals (as the test above): they only speed up proofs, and here they
    # cost three quarters of the run; the same counterexample at the same depth (5) either way
    r = BMC(system, ["planted_target"], use_lemmas=False).run(6)["planted_target"]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None, r.words()
    last = r.trace.states[-1]
    x = system.ctx(Concrete(), r.trace.params)
    assert PROPERTIES["no_prefill_oom"].holds(x, last) is False
    assert PROPERTIES["lock_ledger"].holds(x, last) is True


def test_a_decode_crash_mid_iteration_is_not_a_request_bounds_violation() -> None:
    """Finding 8's corpus trace dies in the mixed step's decode, after the chunk's extend allocation
    set the chunked request's C to its whole prompt and before its result: `no_decode_oom` is the
    finding; `request_bounds` does not judge the lengths of that half-done iteration (it did before
    session 45: a deep random sweep reported it beside finding 9's crashes)."""
    from checker.traces import itf

    tr = itf.read("counterexamples/v0.5.10.post1/mixed/no_decode_oom.itf.json")
    last = tr.states[-1]
    x = System(tr.cfg, tr.design).ctx(Concrete(), tr.params)
    assert PROPERTIES["no_decode_oom"].holds(x, last) is False
    chunked = [r for r in range(tr.cfg.num_reqs) if last.status[r] == CHUNKED]
    assert any(last.kv_committed_len[r] > last.origin_input_len[r] + last.output_len[r] - 1 for r in chunked), last
    assert PROPERTIES["request_bounds"].holds(x, last) is True
