"""The scheduler-loop rows (`event_loop*`, upstream/sched/loop_rows.py): random walks of a preset
replayed on its release's own Scheduler, every choice forced, every state compared.

What the tests pin: on 0.5.23 (`current`'s release) the walks follow SGLang state for state on the
fixed profile, through the allocation-time eviction SGLang 0.5.19+ runs through
`UnifiedRadixCache.evict_for_alloc` (which the forcing must order and see: before it did, a walk's
eviction set was never forced and SGLang's own LRU made the choice), the session record's lengths
and the output trim of a finished turn (`_trim_overshoot`); and the row sees the flag it found:
without `prompt_boundary_split=checkpoint` (0.5.22's stash splits at the prompt boundary) it
disagrees and shrinks the disagreement to a four-iteration walk."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from upstream import conform
# (not release_path, which raises: a test of a release CI does not install must skip, not fail)
from upstream.install import is_installed as _installed

EXAMPLES = int(os.environ.get("KVMC_CONFORM_EXAMPLES", "60"))
NEWEST = "0.5.23"


pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


@pytest.fixture(scope="module")
def newest(sglang_root: Path) -> Path:
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, NEWEST):
        pytest.skip(f"SGLang {NEWEST} is not installed (`kvmc sglang install {NEWEST}`; .ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _row(out: list, row: str) -> dict:
    (res,) = out
    assert "error" not in res, res.get("error")
    (r,) = [r for r in res["rows"] if r["row"] == row]
    return r


def _one_row(root: Path, version: str, row: str) -> dict:
    """`row` on `version` at EXAMPLES walks (skipped where the release is not installed)."""
    from upstream.sched.replay import install_extras

    if not _installed(root, version):
        pytest.skip(f"SGLang {version} is not installed (.ci/run installs it)")
    install_extras(root, say=lambda m: None)
    return _row(conform.run([version], rows=(row,), examples=EXAMPLES, seed=0, root=root, jobs=1), row)


def test_walks_follow_sglang_0_5_23(newest: Path) -> None:
    rows = ("event_loop", "event_loop/pressure", "event_loop/sessions", "event_loop/swa", "event_loop/swa_mixed")
    out = conform.run([NEWEST], rows=rows, examples=EXAMPLES, seed=0, root=newest, jobs=1)
    for row in rows:
        r = _row(out, row)
        assert r["disagreed"] == 0 and r["errored"] == 0, r
        assert r["agreed"] >= EXAMPLES * 9 // 10, r  # eviction_superset (documented) may take a few
        assert set(r["abstractions"]) <= {"eviction_superset"}, r


def _override(tmp: Path, name: str, body: str) -> str:
    f = tmp / f"{name}.py"
    f.write_text(body)
    return str(f)


def test_row_sees_the_stash_prompt_split(newest: Path, tmp_path: Path) -> None:
    """0.5.22+ runs the prompt-boundary split in `checkpoint_into_tree`, which a stash runs too: a
    retracted request re-prefilling its output leaves prompt and output in two nodes. The design
    without it (the finish-only variant of 0.5.20/0.5.21) disagrees on the sessions row."""
    out = conform.run([NEWEST], rows=("event_loop/sessions",), examples=200, seed=0, root=newest, jobs=1,
                      with_=("prompt_boundary_split=on",))
    r = _row(out, "event_loop/sessions")
    assert r["disagreed"] > 0, r
    assert "node_len" in str(r["minimal"]["diffs"]), r["minimal"]


# -- a retraction tie (model/schedule_batch.py::_retract_victims, upstream/sched/forcing.py) --------------

class _Fill:
    """The recorded picks, and a seeded coin for a question the recorded run never asked."""

    def __init__(self, picks: dict, seed: int) -> None:
        import random

        self.picks, self.rng = picks, random.Random(seed)

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        return int(self.picks[name]) if name in self.picks else self.rng.randint(lo, hi)

    def pick_bool(self, name: str) -> bool:
        return bool(self.picks[name]) if name in self.picks else self.rng.random() < 0.5


def _both_tie_breaks(design: str, seed: int, tmp: Path) -> list[tuple[str, tuple[int, ...]]]:
    """The pressure walk `seed` up to its first tied retraction, once with each tie-break: the
    written trace and the requests it retracted there."""
    from checker.traces import itf
    from checker.traces.trace import Step, Trace
    from checker.traces.walk import random_walk
    from model.designs import PRESETS
    from model.ops import Concrete, Infeasible
    from model.state import RUNNING, WAITING
    from model.system import System
    from specs.configs import CONFIGS

    t = random_walk(CONFIGS["pressure"], PRESETS[design], 10, seed)
    k = next(i for i, st in enumerate(t.steps) if any(".tie_pass[" in n for n in st.picks))
    system = System(t.cfg, t.design)
    before = t.steps[k - 1].state if k else t.init

    def run(picks: dict) -> tuple[Step, tuple[int, ...]]:
        for fill in range(50):
            ops = Concrete(_Fill(picks, fill))
            try:
                after = system.step(system.ctx(ops, t.params), before)
            except Infeasible:
                continue
            gone = tuple(r for r in range(t.cfg.num_reqs) if before.status[r] == RUNNING and after.status[r] == WAITING)
            return Step(t.steps[k].action, dict(ops.picks), after), gone
        raise AssertionError(f"no completion of {picks}")

    steps = [run(t.steps[k].picks)]
    for name in sorted(n for n in t.steps[k].picks if ".tie_pass[" in n):  # the one that decides the victim
        other = run({n: v for n, v in t.steps[k].picks.items() if n != name} | {name: not t.steps[k].picks[name]})
        if other[1] != steps[0][1]:
            steps.append(other)
            break
    assert len(steps) == 2 and all(g for _, g in steps), steps
    out = []
    for i, (step, gone) in enumerate(steps):
        f = tmp / f"{design}-{seed}-{i}.itf.json"
        itf.write(f, Trace(t.cfg, t.design, t.params, t.init, [*t.steps[:k], step], None, "random-walk"))
        out.append((str(f), gone))
    return out


def test_a_retraction_tie_is_forced_from_0_5_18(newest: Path, tmp_path: Path) -> None:
    """Requests tied on (|output|, |input|): SGLang retracts the last admitted, kvmc may retract any.
    On 0.5.23 the replay forces either tie-break through `_get_decode_retraction_order`, and SGLang
    follows each state for state (without the forcing, SGLang's own order departs from one of them)."""
    from upstream.sched import replay as sr

    traces = _both_tie_breaks("v0.5.23", 351, tmp_path)
    res = sr.replay(NEWEST, [f for f, _ in traces], root=newest)
    for o in res["outcomes"]:
        assert o["status"] == sr.PASSED and "every state matched" in o["message"], sr.line(o)


def test_a_retraction_tie_before_0_5_18_is_reported_not_forceable(sglang_root: Path, tmp_path: Path) -> None:
    """0.5.10.post1 sorts inside `retract_decode`: the tie-break that is SGLang's own (admission order)
    replays, the other is reported not forceable at its step (the row's `retraction_tie_order`)."""
    from upstream.sched import replay as sr
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, "0.5.10.post1"):
        pytest.skip("SGLang 0.5.10.post1 is not installed (.ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    traces = _both_tie_breaks("v0.5.10.post1", 496, tmp_path)
    res = sr.replay("0.5.10.post1", [f for f, _ in traces], root=sglang_root)
    got = sorted(o["status"] for o in res["outcomes"])
    assert got == sorted([sr.PASSED, sr.NOT_REPLAYABLE]), [sr.line(o) for o in res["outcomes"]]
    (no,) = [o for o in res["outcomes"] if o["status"] == sr.NOT_REPLAYABLE]
    assert "tie_pass" in no["message"] and "cannot be forced" in no["message"], sr.line(no)


def test_a_finished_turn_still_in_the_batch_is_counted_by_0_5_10(sglang_root: Path, tmp_path: Path) -> None:
    """0.5.10.post1's busy check counts every batch request whose KV is not freed, a finished streaming
    turn's included (`uncached_skips_released_req` off): the sessions walk of seed 8 finishes session
    0's turn in a decode, closes the session and prefills, and SGLang's check fires there with the
    model's, every state matched (`slot_unfiltered` included). The same walk under the design with
    the 0.5.11 skip departs from SGLang 0.5.10.post1."""
    from checker.traces import itf
    from checker.traces.walk import random_walk
    from model.designs import PRESETS
    from specs.configs import CONFIGS
    from upstream.sched import replay as sr
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, "0.5.10.post1"):
        pytest.skip("SGLang 0.5.10.post1 is not installed (.ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    d = PRESETS["v0.5.10.post1"]
    files = []
    for i, design in enumerate((d, d.with_fix("uncached_skips_released_req", "on"))):
        f = tmp_path / f"w{i}.itf.json"
        itf.write(f, random_walk(CONFIGS["sessions"], design, 3, 8))
        files.append(str(f))
    res = sr.replay("0.5.10.post1", files, root=sglang_root)
    same, skip = res["outcomes"]
    assert same["status"] == sr.PASSED and "every state matched" in same["message"], sr.line(same)
    assert "FIRED" in json.dumps(same["table"]), same["table"]
    assert skip["status"] == sr.DIVERGED, sr.line(skip)


def test_the_batch_is_full_latch_stalls_0_5_13_and_not_0_5_23(sglang_root: Path, tmp_path: Path) -> None:
    """docs/findings.md finding 6 on SGLang's own scheduler: the v0.5.13 lasso (a NO_TOKEN verdict
    with nothing running sets batch_is_full, nothing clears it, no batch runs again) recurs on SGLang
    0.5.13; on 0.5.23 (`batch_is_full_needs_running`, from 0.5.22) the replay departs where the flag
    is no longer set."""
    from checker.engines.agreement import pinned
    from checker.engines.liveness import explicit_lassos
    from checker.traces import itf
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS
    from upstream.sched import replay as sr
    from upstream.sched.replay import install_extras

    for v in ("0.5.13", NEWEST):
        if not _installed(sglang_root, v):
            pytest.skip(f"SGLang {v} is not installed (.ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    cfg = pinned(CONFIGS["sessions"], req_pool_size=(2, 2))
    r = explicit_lassos(System(cfg, PRESETS["v0.5.13"]), ["progress"], 5)["progress"]
    assert r.trace is not None and r.trace.loop is not None, r
    f = tmp_path / "latch.itf.json"
    itf.write(f, r.trace)
    (old,) = sr.replay("0.5.13", [str(f)], root=sglang_root)["outcomes"]
    assert old["status"] == sr.REPRODUCED and "progress violated on SGLang 0.5.13" in sr.line(old), sr.line(old)
    (new,) = sr.replay(NEWEST, [str(f)], root=sglang_root)["outcomes"]
    assert new["status"] == sr.DIVERGED and new["field"] == "batch_is_full", sr.line(new)


def _walk_with_and_without(newest: Path, tmp_path: Path, config: str, fix: str, steps: int, seed: int) -> tuple[Any, Any]:
    """The walk of `config` (`steps` iterations, `seed`) under v0.5.23 and under v0.5.23 without `fix`,
    each replayed on SGLang 0.5.23: ((walk, outcome) with the fix, (walk, outcome) without)."""
    from checker.traces import itf
    from checker.traces.walk import random_walk
    from model.designs import PRESETS
    from specs.configs import CONFIGS
    from upstream.sched import replay as sr

    d = PRESETS["v0.5.23"]
    assert d.fixes[fix] is not None, f"v0.5.23 has no {fix}"
    walks, files = [], []
    for i, design in enumerate((d, d.with_fix(fix, None))):
        t = random_walk(CONFIGS[config], design, steps, seed)
        f = tmp_path / f"w{i}.itf.json"
        itf.write(f, t)
        walks.append(t)
        files.append(str(f))
    with_fix, without = sr.replay(NEWEST, files, root=newest)["outcomes"]
    return (walks[0], with_fix), (walks[1], without)


def test_a_turn_retracted_twice_leaves_its_session_on_0_5_23(newest: Path, tmp_path: Path) -> None:
    """`Session.finish_req` (0.5.11+) takes the session away from the Req its `req_nodes` held before:
    at a turn's second retraction that is the turn itself. The sessions walk of seed 20 retracts
    session 0's first turn twice; the turn re-prefills through the radix tree on a row of its own
    while the slot keeps its record and row (`slot_detached`), and SGLang 0.5.23 follows every state,
    the busy check and the ledger on its objects included. The walk under the design without
    `finish_req_detach` departs from SGLang."""
    from model.state import RUNNING
    from upstream.sched import replay as sr

    (t, same), (_t, stays) = _walk_with_and_without(newest, tmp_path, "sessions", "finish_req_detach", 8, 20)
    # the walk reaches a detached turn running beside its slot
    assert any(st.state.slot_detached[0] and st.state.status[0] == RUNNING and st.state.slot_holding[0]
               for st in t.steps), "seed 20 no longer retracts session 0's turn twice"
    assert same["status"] == sr.PASSED and "every state matched" in same["message"], sr.line(same)
    # (its first departure is the bookkeeping of the first save, step 3: SGLang's req_nodes holds the turn)
    assert "every state matched" not in stays["message"] and "departs from the trace" in stays["message"], sr.line(stays)


def test_a_swa_branching_insert_follows_sglang_0_5_23(newest: Path, tmp_path: Path) -> None:
    """`swa_branching_insert` (v0.5.20+): the match records the SWA branching point, the next insert
    stops there. Random walks reach it about once in 5,000 (hybrid_swa_page4, 24 iterations), so no
    conformance row tells the flag on from off; seed 4200 does: request 0 is retracted at step 8, its
    re-match finds Full KV to 8 past an SWA-valid prefix of 0, and its second chunk inserts [0, 8)
    only. SGLang 0.5.23 follows that walk state for state; the walk of the design without the flag
    departs from SGLang at that match."""
    from upstream.sched import replay as sr

    (t, on), (t_off, off) = _walk_with_and_without(newest, tmp_path, "hybrid_swa_page4", "swa_branching_insert", 24, 4200)
    for walk, reaches in ((t, True), (t_off, False)):
        branching = [k for k, st in enumerate(walk.steps) if st.state.swa_branching_seqlen[0] > 0]
        assert bool(branching) is reaches, ("seed 4200 no longer reaches a SWA branching point: pick another "
                                            "(about 1 in 5,000 walks does)", branching)
    assert on["status"] == sr.PASSED and "every state matched" in on["message"], sr.line(on)
    assert "departs from the trace" in off["message"] and "swa_branching_seqlen[0]" in off["message"], sr.line(off)


# -- the loop judge's documented abstractions (upstream/sched/driver.py, upstream/abstractions.py) ----------

DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("trace,step,name", [
    # paged, v0.5.23, seed 439: the warm node evicted at step 3, request 0 re-inserts its tokens at step 7
    ("warm_prefix_reinserted_paged", 7, "sharing_through_warm_prefix_only"),
    # paged, v0.5.23, seed 1625: the same, in one SGLang node that spans the warm prefix and the request's own
    ("warm_prefix_spanning_node_paged", 4, "sharing_through_warm_prefix_only"),
    # hybrid_swa_mixed, v0.5.23, seed 864950491: finding 1's state at step 1, SGLang's SWA release past it
    ("finding1_swa_release_slot0", 2, "after_violated_state"),
])
def test_loop_judge_names_the_documented_abstraction(newest: Path, trace: str, step: int, name: str) -> None:
    """docs/conformance.md: a walk that departs from SGLang where a documented abstraction explains it is
    counted under that abstraction, not as a disagreement (and only there: the same walks' earlier steps
    match state for state)."""
    from upstream import abstractions
    from upstream.sched import replay as sr
    from upstream.sched.loop_rows import Walk

    (o,) = sr.replay(NEWEST, [str(DATA / f"{trace}.itf.json")], root=newest)["outcomes"]
    assert o["status"] == sr.DIVERGED and o["step"] == step, sr.line(o)
    assert o.get("abstraction") == name, sr.line(o)
    label = f"step {step}: {o['field']} ({o['abstraction']})"
    got = abstractions.match("event_loop/paged", Walk("paged", 0, step), [(label, o["sglang"], o["model"])],
                             None, NEWEST)
    assert got == name, (label, got)



def test_a_warm_prefix_reinserted_whole_is_judged_with_the_chain_renumbered(sglang_root: Path) -> None:
    """paged_aligned, v0.5.10.post1, seed 1758607 (kvmc conform event_loop/paged_aligned, session 40): the
    warm node is evicted, then request 0 inserts [0, 8): the warm tokens [0, 4) fill its first private atom
    whole and [4, 8) its second. SGLang numbers request 0's nodes from the head of its chain, so once the
    first atom goes back to the warm prefix the second is atom 1 there: the judge renumbers the chain
    (upstream/sched/driver.py `_warm_prefix_relabelled`) and names the documented abstraction."""
    from upstream.sched import replay as sr
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, "0.5.10.post1"):
        pytest.skip("SGLang 0.5.10.post1 is not installed (.ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    (o,) = sr.replay("0.5.10.post1", [str(DATA / "warm_prefix_head_moved_0_5_10.itf.json")],
                     root=sglang_root)["outcomes"]
    assert o["status"] == sr.DIVERGED and o["step"] == 5 and o["field"] == "node_len[0]", sr.line(o)
    assert o.get("abstraction") == "sharing_through_warm_prefix_only", sr.line(o)

def test_a_decode_eviction_beside_a_full_batch_is_judged_on_0_5_11(sglang_root: Path) -> None:
    """hybrid_swa_mixed, v0.5.11, seed 8663: with batch_is_full set on both sides no prefill runs, and the
    decode's eviction differs (the walk tombstones a node past the SWA need a deletion already covered).
    The skipped prefill is no difference (the walk skipped it too), so the eviction is judged: SGLang's own
    eviction is one the model allows (`eviction_superset`)."""
    from upstream.sched import replay as sr
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, "0.5.11"):
        pytest.skip("SGLang 0.5.11 is not installed (.ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    (o,) = sr.replay("0.5.11", [str(DATA / "mixed_decode_eviction_superset_0_5_11.itf.json")],
                     root=sglang_root)["outcomes"]
    assert o["status"] == sr.DIVERGED and o["step"] == 9, sr.line(o)
    assert o.get("abstraction") == "eviction_superset", sr.line(o)


@pytest.mark.parametrize("version", ["0.5.10.post1", "0.5.13", NEWEST])
def test_chunk_cache_walks_follow_sglang(sglang_root: Path, version: str) -> None:
    """`--disable-radix-cache` with hybrid SWA (SWAChunkCache on 0.5.10.post1 and 0.5.13, a disabled
    UnifiedRadixCache on 0.5.23): the model's walks of `hybrid_swa_chunk_cache` follow SGLang's scheduler
    state for state (no tree, the extend's SWA release, without #22470's page margin on 0.5.10.post1,
    the finish freeing the whole row, SGLang's busy check; 0.5.10.post1's decode release timing is the
    documented `swa_evict_timing`)."""
    r = _one_row(sglang_root, version, "event_loop/swa_chunk_cache")
    assert r["disagreed"] == 0 and r["errored"] == 0, r
    assert set(r["abstractions"]) <= ({"swa_evict_timing"} if version == "0.5.10.post1" else set()), r
    assert r["agreed"] >= EXAMPLES * 9 // 10, r


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13", NEWEST])
def test_over_long_prompt_walks_follow_sglang(sglang_root: Path, version: str) -> None:
    """An over-long prompt (`over_long_prompt`: max_req_len = T - 1, as SGLang sets it with the pool
    below the context length): SGLang's `handle_generate_request` clips its max_new_tokens with the long
    prompt, `validate_input_length` aborts it into the prompt [0], and it finishes at its prefill; the
    model's walks follow SGLang's scheduler state for state, the 0.5.11 walks that die of finding 11's
    negative reserve ("Prefill out of memory") included."""
    r = _one_row(sglang_root, version, "event_loop/over_long_prompt")
    assert r["disagreed"] == 0 and r["errored"] == 0 and not r["abstractions"], r
    assert r["agreed"] == EXAMPLES, r


@pytest.mark.parametrize("version", ["0.5.10.post1", "0.5.13", NEWEST])
def test_plain_chunk_cache_walks_follow_sglang(sglang_root: Path, version: str) -> None:
    """`--disable-radix-cache` without SWA at page 2 (`chunk_cache_paged`: ChunkCache up to 0.5.21, a
    disabled UnifiedRadixCache on 0.5.23), three requests: the model's walks follow SGLang's scheduler
    state for state (no tree, a chunk's KV in its own row across a page boundary, a finish or retraction
    freeing the whole row)."""
    r = _one_row(sglang_root, version, "event_loop/chunk_cache_paged")
    assert r["disagreed"] == 0 and r["errored"] == 0 and not r["abstractions"], r
    assert r["agreed"] == EXAMPLES, r
