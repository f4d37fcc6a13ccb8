"""The streaming-session record across releases (model/session.py, flag `session_record`) and the
v0.5.19 page rewind of a restore (`session_rewind_page_floor`).

`shared` (v0.5.19-0.5.21) changes no count: the model's traces are the copy model's. With
`owned_at_alloc` (v0.5.22+) the slot owns record and lock from the first turn's prefill, and the
busy check counts the record as session-held while its turn runs (the turn not as uncached):
without #22753's de-duplication that is the double count at depth 2 (one decode), where the copy
model needs the second turn (depth 3)."""

from __future__ import annotations

import random

from model.config import Config
from model.ops import Concrete
from model.state import VIRTUAL
from model.system import System
from model import session
from model.config import concrete_params
from specs.configs import CONFIGS
from checker.traces.walk import random_walk
from tests.unit.scenario import D55F1C28, drive

CURRENT = D55F1C28  # the scenarios were derived on it (tests/unit/scenario.py)
SESS = CONFIGS["sessions"]
OWNED = CURRENT.with_fix("session_record", "owned_at_alloc")
PARAMS = dict(full_tokens=6, req_pool_size=1, input_len=(1, 1), max_new_tokens=(3, 1))
PICKS = [{"recv.arrive[0]": True, "recv.arrive[1]": True}, {}]


def test_shared_record_changes_no_count() -> None:
    rng = random.Random("shared")
    for _ in range(20):
        seed = rng.randrange(1 << 30)
        a = random_walk(SESS, CURRENT, 12, seed)
        b = random_walk(SESS, CURRENT.with_fix("session_record", "shared"), 12, seed)
        assert [s.picks for s in a.steps] == [s.picks for s in b.steps]
        assert a.states == b.states


def test_owned_at_alloc_takes_record_and_lock_at_the_first_prefill() -> None:
    run = drive(SESS, OWNED, PICKS, **PARAMS)
    s = run.states[1]
    assert s.slot_holding[0] and s.last_node[0] == VIRTUAL and s.slot_last_node[0] == 0
    assert (s.slot_kv_allocated_len[0], s.slot_cache_protected_len[0]) == (1, 1)
    b = run.busy(1)
    assert (b.terms["session_held"], b.terms["uncached"]) == (0, 0) and not b.fired  # A = P = 1
    b2 = run.busy(2)  # after a decode: the record (read through its turn) is session-held, not uncached
    assert (b2.terms["session_held"], b2.terms["uncached"], b2.terms["sum"]) == (1, 0, 6) and not b2.fired
    # the copy model: the turn is uncached, the slot holds nothing yet
    c = drive(SESS, CURRENT, PICKS, **PARAMS).busy(2)
    assert (c.terms["session_held"], c.terms["uncached"], c.terms["sum"]) == (0, 1, 6)


def test_owned_at_alloc_without_dedup_double_counts_at_depth_2() -> None:
    b = drive(SESS, OWNED.with_fix("session_active", None), PICKS, **PARAMS).busy(2)
    assert (b.terms["session_held"], b.terms["uncached"], b.terms["sum"]) == (1, 1, 7) and b.fired
    # the copy model needs the second turn for it
    assert not drive(SESS, CURRENT.with_fix("session_active", None), PICKS, **PARAMS).busy(2).fired


HYB4 = Config(name="sessions_swa_page4", doc="", num_reqs=1, page_size=4, hybrid_swa=True, streaming_sessions=(0,),
              private_atoms=2, bounds={"full_tokens": (64, 64), "swa_tokens": (64, 64), "sliding_window_size": (2, 2),
                                       "input_len": (8, 8), "max_new_tokens": (4, 4), "req_pool_size": (1, 1)})


def _restore(rewind: bool) -> tuple:
    design = CURRENT.with_fix("session_rewind_page_floor", "on" if rewind else None)
    system = System(HYB4, design)
    x = system.ctx(Concrete(), concrete_params(HYB4))
    s = system.init(x)
    # the slot holds a row of 12 slots (C = 10), its SWA released below E = 10; the next key is 9 long
    s = s.slot(0, slot_holding=True, slot_kv_allocated_len=12, slot_kv_committed_len=10, slot_swa_evicted_seqlen=10)
    s = s.set(full_available=52, swa_available=62)
    s2, m = session.restore_to_req(x, s, 0, 0, 9)
    return (m.prefix_len, s2.slot_kv_allocated_len[0], s2.slot_kv_committed_len[0], s2.slot_swa_evicted_seqlen[0],
            s2.full_available - 52, s2.swa_available - 62)


def test_restore_rewinds_to_a_page_below_the_swa_cursor() -> None:
    # v0.5.19: E = 10 > prefix 9, so prefix = floor4(9) = 8: [8, 12) freed in both pools (SWA [10, 12))
    assert _restore(True) == (8, 8, 8, 8, 4, 2)
    # before: prefix 9 inside a page: no full page is freed and the SWA count goes *down* by one
    # (the row's SWA would start at 9 < E = 10: the cut inside a page SGLang frees twice)
    assert _restore(False) == (9, 9, 9, 9, 0, -1)


def test_owned_at_alloc_walks_replay_on_the_pool() -> None:
    from checker.replay.pool import replay_trace

    rng = random.Random("owned_at_alloc")
    steps = 0
    for design in (OWNED, OWNED.with_fix("session_active", None), CURRENT.with_fix("session_record", "shared")):
        for _ in range(6):
            t = random_walk(SESS, design, 14, rng.randrange(1 << 30))
            o = replay_trace(t, file=f"walk sessions {design.name}")
            assert o.ok, o.line()
            steps += len(t.steps)
    assert steps > 100
