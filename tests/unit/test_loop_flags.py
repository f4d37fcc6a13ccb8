"""The model changes the scheduler-loop conformance rows found (docs/conformance.md, "What the harness changed in the model"), each
shown on the walk its row shrank the disagreement to, run through the concrete model under the
design with and without the change (no SGLang needed: tests/upstream/test_loop_rows.py runs the
rows themselves)."""

from __future__ import annotations

from checker.traces.trace import run_concrete
from checker.traces.walk import random_walk
from model.designs import PRESETS
from model.state import FINISHED, WAITING
from model.system import System
from specs.configs import CONFIGS


def _rerun(trace, design):
    states, _ = run_concrete(System(trace.cfg, design), trace.params, trace.actions)
    return states


def test_a_stash_past_the_prompt_splits_there_from_0_5_22() -> None:
    """sessions, seed 3132362: request 1 (7-token prompt, one output) is retracted by SGLANG_TEST_RETRACT,
    then re-prefills all 8 tokens; 0.5.22's `checkpoint_into_tree` splits the stash's node at the prompt
    (7 + 1, its lock on the tail), the finish-only variant of 0.5.20/0.5.21 leaves one node of 8."""
    d = PRESETS["v0.5.23"]
    assert d.variant("prompt_boundary_split") == "checkpoint"
    walk = random_walk(CONFIGS["sessions"], d, 4, 3132362)
    assert "decode.test_retract" in walk.steps[2].picks  # the retraction the re-prefill follows
    split = _rerun(walk, d)[-1]
    assert split.node_len[2:4] == (7, 1) and split.last_node[1] == 3
    whole = _rerun(walk, d.with_fix("prompt_boundary_split", "on"))[-1]
    assert whole.node_len[2:4] == (8, 0) and whole.last_node[1] == 2


def test_before_0_5_12_free_rows_do_not_bound_admission() -> None:
    """sessions, seed 4: session 0's first turn finishes and its slot keeps the only request row; the
    next turn (which restores that row) is admitted by 0.5.11, whose pass is bounded by
    max_running_requests - running only; with `admission_free_rows` (0.5.12.post1) it waits."""
    d = PRESETS["v0.5.11"]
    assert not d.on("admission_free_rows") and PRESETS["v0.5.12.post1"].on("admission_free_rows")
    walk = random_walk(CONFIGS["sessions"], d, 3, 4)
    old = _rerun(walk, d)[-1]
    assert old.req_pool_available == 0 and old.status[0] == FINISHED and old.turn[0] == 1
    new = _rerun(walk, d.with_fix("admission_free_rows", "on"))[-1]
    assert new.status[0] == WAITING


def test_a_turn_clipped_to_no_output_drops_its_token_from_the_next_turn() -> None:
    """A turn enqueued with max_new_tokens clipped to 0 (`enqueue_clip_max_new`: 5-token pool, 3-token
    prompt) still samples its prefill's token (SGLang appends it: output_len 1), but the next turn's
    input is the context plus output_ids[:max_new_tokens], so that token is not part of it."""
    d = PRESETS["v0.5.21"]
    params = random_walk(CONFIGS["sessions"], d, 2, 75452747).params
    assert (params.full_tokens, params.input_len[0]) == (5, 3)
    for seed in range(300):  # a walk of that point that reaches the session's next turn
        w = random_walk(CONFIGS["sessions"], d, 5, seed, params=params)
        for prev, st in zip([w.init] + [s.state for s in w.steps], w.steps):
            if st.picks.get("recv.next_turn[0]"):
                assert prev.status[0] == FINISHED and prev.output_len[0] == 1 and prev.kv_committed_len[0] == 3
                assert st.state.origin_input_len[0] == 3 + st.picks["recv.turn_tokens[0]"]  # not 3 + 1 + new
                return
    raise AssertionError("no walk of that point reached the session's next turn")


def test_finding_4_the_v0_5_11_preset_dies_on_a_row_a_session_holds() -> None:
    """docs/findings.md finding 4: with a session slot keeping the only request row, v0.5.11 admits a
    fresh request and `alloc_req_slots` fails (depth 2); v0.5.12.post1's free-row bound closes it."""
    from checker.engines.run import run_check
    from checker.verdict import Verdict
    from model.state import OOM_REQ_SLOTS

    res = run_check(PRESETS["v0.5.11"], ["sessions"], ["no_prefill_oom"], 2, prove=False).configs[0].results["no_prefill_oom"]
    assert res.verdict is Verdict.VIOLATED and res.depth == 2, res.words()
    last = res.trace.states[-1]
    assert last.oom == OOM_REQ_SLOTS and last.slot_holding[0], last
    ok = run_check(PRESETS["v0.5.12.post1"], ["sessions"], ["no_prefill_oom"], 2, prove=False).configs[0].results["no_prefill_oom"]
    assert ok.verdict is Verdict.HOLDS_TO_DEPTH and ok.depth == 2, ok.words()


def test_24252_a_parked_chunk_is_stashed_whole_before_24318() -> None:
    """SGLang #24252 (docs/findings.md section 2, "0.5.11"): 0.5.11 stashes the chunked request at every
    iteration, and after #23174 parked it the stash inserts its whole prompt with KV no pool handed
    out. On the corpus instance's pools (full 7, SWA 4, window 2, chunk 2) the explicit engine finds
    it on v0.5.11 at depth 4, the tree holding more than was allocated; with #24318 turned on, and
    on v0.5.12.post1, conservation holds there."""
    from checker.engines.agreement import pinned
    from checker.engines.explicit import Explorer
    from checker.verdict import Verdict
    from model.state import CHUNKED, NO_BATCH

    cfg = pinned(CONFIGS["hybrid_swa"], full_tokens=(7, 7), swa_tokens=(4, 4), sliding_window_size=(2, 2),
                 chunked_prefill_size=(2, 2), max_prefill_tokens=(8, 8), req_pool_size=(2, 2), max_new_tokens=(1, 1))
    d = PRESETS["v0.5.11"]
    assert not d.on("chunked_req_scheduled_last_iter") and PRESETS["v0.5.12.post1"].on("chunked_req_scheduled_last_iter")
    res = Explorer(System(cfg, d), ["conservation"]).run(4).results["conservation"]
    assert res.verdict is Verdict.VIOLATED and res.depth == 4, res
    states = [res.trace.init, *res.trace.states]
    # a parked step (the chunked request ran in no batch), then the stash took its whole prompt
    assert any(CHUNKED in st.status and st.last_batch == NO_BATCH for st in states), [st.status for st in states]
    last = states[-1]
    assert last.full_available + sum(last.node_len) > res.trace.params.full_tokens, last
    for fixed in (d.with_fix("chunked_req_scheduled_last_iter", "on"), PRESETS["v0.5.12.post1"]):
        ok = Explorer(System(cfg, fixed), ["conservation"]).run(4).results["conservation"]
        assert ok.verdict is Verdict.HOLDS_TO_DEPTH and ok.depth == 4, (fixed.name, ok)


def _busy(trace, design, t: int):
    from model.invariant_checker import self_check_during_busy
    from model.ops import Concrete

    system = System(trace.cfg, design)
    return self_check_during_busy(system.ctx(Concrete(), trace.params), _rerun(trace, design)[t])


def test_before_0_5_11_a_finished_turn_still_in_the_running_batch_is_uncached() -> None:
    """sessions, seed 8: session 0's first turn finishes in a decode (step 2) and stays in
    running_batch; step 3 closes the session (its row freed) and prefills request 1. 0.5.10.post1's
    `_get_batch_uncached_size` still counts the finished turn (its KV was never marked freed), so
    SGLang's busy check fires there (a false alarm the replay shows on SGLang 0.5.10.post1, docs/
    findings.md finding 5); with
    `uncached_skips_released_req` (0.5.11) the finished turn counts nowhere and the check is silent."""
    d = PRESETS["v0.5.10.post1"]
    assert not d.on("uncached_skips_released_req") and PRESETS["v0.5.11"].on("uncached_skips_released_req")
    walk = random_walk(CONFIGS["sessions"], d, 3, 8)
    states = _rerun(walk, d)
    assert states[2].status[0] == FINISHED and states[2].last_batch == 2 and states[2].unfiltered[0]
    assert walk.steps[2].picks.get("recv.close_session[0]") and states[3].last_batch == 1  # closed, then a prefill
    assert states[3].unfiltered[0] and not states[3].slot_holding[0]  # still in the running batch
    old = _busy(walk, d, 3)
    assert old.fired and old.terms["uncached"] == states[3].slot_kv_allocated_len[0] - states[3].slot_cache_protected_len[0]
    new_design = d.with_fix("uncached_skips_released_req", "on")
    assert _rerun(walk, new_design)[3].unfiltered[0]  # the same state: only the check differs
    assert not _busy(walk, new_design, 3).fired


def test_from_0_5_11_a_turn_retracted_twice_leaves_its_session() -> None:
    """sessions, seed 5233212 (v0.5.13): session 0's first turn (7-token prompt) is retracted at steps 2
    and 4 and finishes in the re-prefill of step 5. The second retraction's `Session.finish_req` finds
    the turn's own Req in `req_nodes` and sets its session to None (`finish_req_detach`): the turn
    re-prefills through the radix tree and its finish inserts its 2 output tokens there, while the slot
    keeps the 8 tokens of that retraction. Without the flag (0.5.10.post1) the turn stays streaming:
    it restores the slot and saves 9 tokens into it, nothing is inserted. Seed 20 then shows a
    detached turn running beside its slot: the ledger gives each its own row and the busy check
    counts the slot as session-held."""
    from model.ops import Concrete
    from model.invariant_checker import self_check_during_busy
    from model.state import RUNNING, VIRTUAL
    from specs.properties import PROPERTIES, ledger

    d = PRESETS["v0.5.13"]
    assert d.on("finish_req_detach") and not PRESETS["v0.5.10.post1"].on("finish_req_detach")
    walk = random_walk(CONFIGS["sessions"], d, 5, 5233212)
    assert [bool(st.picks.get("decode.test_retract")) for st in walk.steps] == [False, True, False, True, False]
    states = _rerun(walk, d)
    assert not states[2].slot_detached[0] and states[4].slot_detached[0] and states[4].slot_turn_saved[0]
    last = states[5]
    assert last.status[0] == FINISHED and last.slot_kv_committed_len[0] == 8 and last.node_len[1] == 2
    stays = _rerun(walk, d.with_fix("finish_req_detach", None))[5]
    assert stays.status[0] == FINISHED and stays.slot_kv_committed_len[0] == 9 and stays.node_len[1] == 0
    assert not stays.slot_detached[0]

    walk = random_walk(CONFIGS["sessions"], d, 8, 20)
    system = System(walk.cfg, d)
    x = system.ctx(Concrete(), walk.params)
    states = _rerun(walk, d)
    k = next(t for t, s in enumerate(states) if s.slot_detached[0] and s.status[0] == RUNNING and s.slot_holding[0])
    s = states[k]
    assert s.last_node[0] != VIRTUAL and s.kv_committed_len[0] > s.slot_kv_committed_len[0]
    L = ledger(x, s)
    assert L.slots_reqs == 2 and L.slots_sessions == 1 and L.full_ok and L.slots_ok
    busy = self_check_during_busy(x, s)
    assert busy.ran and not busy.fired
    assert busy.terms["session_held"] == s.slot_kv_allocated_len[0] - s.slot_cache_protected_len[0] > 0
    for name in ("conservation", "busy_check_sound", "lock_ledger"):
        assert PROPERTIES[name].holds(x, s), name


def test_the_phantom_stash_abstraction_is_narrow() -> None:
    """upstream/abstractions.py `phantom_stash`: a v0.5.11 walk on hybrid_swa_page4 (seed 8388608) parks
    a chunk at step 3 and stashes it whole at step 4 (SGLang #24252); a difference from step 4 on is
    the documented abstraction, one before it is not, and neither is the same walk under a design
    that stashes only a chunk scheduled in the last iteration (#24318)."""
    from upstream.abstractions import match
    from upstream.sched.loop_rows import Walk

    d = PRESETS["v0.5.11"]
    assert not d.on("chunked_req_scheduled_last_iter") and d.on("chunked_swa_page_reserve")
    sc = Walk("hybrid_swa_page4", 8388608, 4)
    got = [match("event_loop/swa_page4", sc, [(f"step {k}: swa_available", 4, 8)], d, "0.5.11") for k in range(1, 5)]
    assert got == [None, None, None, "phantom_stash"]
    assert match("event_loop/sessions", sc, [("step 4: swa_available", 4, 8)], d, "0.5.11") is None
    later = d.with_fix("chunked_req_scheduled_last_iter", "on")
    assert match("event_loop/swa_page4", sc, [("step 4: swa_available", 4, 8)], later, "0.5.11") is None
