"""Replays on the SGLang releases the CI does not install (0.5.12.post1, 0.5.18 ... 0.5.23): each
test runs where its release is installed (`kvmc sglang install V`, under $KVMC_SGLANG_DIR) and is
skipped otherwise, so the CI's cost stays the two releases of test_sched_replay.py.

* #27391 (`swa_hostload_budget`) reproduces on 0.5.12.post1, the release before the fix, on
  UnifiedRadixCache with real HiCache (SGLANG_ENABLE_UNIFIED_RADIX_TREE, as 0.5.12.post1 needs it
  for hybrid SWA);
* from 0.5.18 hybrid SWA runs on UnifiedRadixCache (the tree core's nodes, per-component data and
  LRU lists mapped onto the model): the corpus's hybrid-SWA traces pass their events, with the fix
  reverted they reproduce where kvmc has the revert, and random walks of the release's preset
  follow the real scheduler state for state with the choices forced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from upstream.sched import replay as sr
from upstream.sched.table import corpus_files

REPO = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


def _root_with(version: str) -> Path:
    from upstream.install import default_dir, is_installed

    root = default_dir()
    if not is_installed(root, version) or not (sr.extras_dir(root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang {version} is not installed under {root} (kvmc sglang install {version}; not a CI release)")
    return root


def _by_design(res: dict[str, Any]) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    out = {}
    for o in res["outcomes"]:
        design = Path(o["file"]).relative_to(REPO / "counterexamples").parts[0]
        out[(design, tuple(sorted(r.split(" ")[0] for r in o.get("reverted", []))))] = o
    return out


def test_hicache_counterexample_reproduces_before_the_fix() -> None:
    """0.5.12.post1: the host-only warm prefix is loaded back for admission (Full and SWA slots for
    the in-window host hit), the SWA budget did not charge it, and the prefill allocation fails with
    SGLang's own "Out of memory" step for step as the trace records it; the ledger on SGLang's
    objects (host-loaded nodes, the failed batch's row) stays exact."""
    root = _root_with("0.5.12.post1")
    f = next(f for f in corpus_files() if "swa_hostload_budget" in f)
    res = sr.replay("0.5.12.post1", [f], root=root)
    o = res["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "SGLang raised: Out of memory" in o["table"][-1] and "ledger on SGLang's objects: exact" in o["table"][-1]


def test_chunk_cap_finding_reproduces_on_0_5_18_and_not_before_the_hatch() -> None:
    """docs/findings.md #1: on 0.5.18's own scheduler both waiting requests are truncated by the SWA
    chunk-cap hatch in one PrefillAdder pass, the adder keeps only the second as new_chunked_req, and
    the first runs decode with a prefill cut short (kv_committed_len below its fill). 0.5.13 has no
    hatch: it admits neither, and the replay departs from the trace at step 1."""
    f = next(f for f in corpus_files() if f.endswith("current/hybrid_swa/prompt_prefilled.itf.json"))
    o = sr.replay("0.5.18", [f], root=_root_with("0.5.18"))["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "prompt_prefilled violated on SGLang 0.5.18 at step 1" in sr.line(o), sr.line(o)
    old = sr.replay("0.5.13", [f], root=_root_with("0.5.13"))["outcomes"][0]
    assert (old["status"], old["step"]) == (sr.DIVERGED, 1), sr.line(old)


def test_session_row_finding_reproduces_on_0_5_11_and_not_after_the_free_row_bound() -> None:
    """docs/findings.md #4: on 0.5.11's own scheduler a streaming session's slot keeps the only
    request row, the next pass admits a fresh request anyway and `alloc_req_slots` raises, step for
    step as the trace records it. 0.5.13 bounds the pass by the free rows (`admission_free_rows`):
    it admits nothing and the replay departs from the trace at step 2, where the model's prefill
    was (the adder's refusal leaves `batch_is_full` set)."""
    f = next(f for f in corpus_files() if f.endswith("v0.5.11/sessions/no_prefill_oom.itf.json"))
    new = sr.replay("0.5.13", [f], root=_root_with("0.5.13"))["outcomes"][0]
    assert (new["status"], new["step"], new["field"]) == (sr.DIVERGED, 2, "last_batch"), sr.line(new)
    o = sr.replay("0.5.11", [f], root=_root_with("0.5.11"))["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "no_prefill_oom violated on SGLang 0.5.11 at step 2" in sr.line(o), sr.line(o)


def test_parked_chunk_stash_24252_reproduces_on_0_5_11_and_not_after_24318() -> None:
    """SGLang #24252 on 0.5.11's own scheduler (docs/findings.md section 2, "0.5.11"): the chunked
    request parked by #23174 is stashed at the next iteration with its whole prompt, the tree takes
    `req_to_token` entries never allocated (index 0 of a fresh row), SGLang's busy check fires and the
    ledger on its objects finds pages outside the pool, step for step as the trace records it. 0.5.13
    stashes only what was scheduled (#24318, #26938): the replay departs from the trace."""
    f = next(f for f in corpus_files() if f.endswith("v0.5.11/hybrid_swa/conservation.itf.json"))
    o = sr.replay("0.5.11", [f], root=_root_with("0.5.11"))["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "conservation violated on SGLang 0.5.11 at step 4" in sr.line(o), sr.line(o)
    last = o["table"][-1]
    assert "Full Pool Mem Leak Detected" in last and "pages outside the pool [0]" in last, last
    new = sr.replay("0.5.13", [f], root=_root_with("0.5.13"))["outcomes"][0]
    assert new["status"] == sr.DIVERGED and new["step"] <= 4, sr.line(new)


def test_rematch_finding_reproduces_on_0_5_18() -> None:
    """docs/findings.md #3: on 0.5.18's own scheduler (UnifiedRadixCache, page 4, window 5) one
    prefill of 10 tokens stashes [0, 8) as a [0, 4) tombstone and a [4, 8) leaf shorter than the
    window; the re-match falls back to the root, so the request's rows and the tree both own [0, 8):
    SGLang's busy check reports a leak and the ledger on its objects counts those pages twice."""
    f = next(f for f in corpus_files() if f.endswith("v0.5.18/hybrid_swa_page4/conservation.itf.json"))
    o = sr.replay("0.5.18", [f], root=_root_with("0.5.18"))["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "conservation violated on SGLang 0.5.18 at step 1" in sr.line(o), sr.line(o)
    assert "Full Pool Mem Leak Detected" in o["table"][-1] and "owned twice" in o["table"][-1], o["table"][-1]


@pytest.mark.parametrize("version", ["0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"])
def test_corpus_on_the_newest_releases(version: str) -> None:
    """0.5.19 .. 0.5.23 have every fix the corpus names: each trace's events run on the release's own
    scheduler without breaking its property (`passed`), the two findings (no fix in any release)
    reproduce step for step (the stall's loop recurring; finding 12's out of memory), and EAGLE stays not replayable. Each release's API (ReqKvInfo rows,
    runtime-context ranks and groups, lock receipts, the composed streaming session) is what the
    adapter must get right for any of this to run."""
    res = sr.replay(version, corpus_files(), root=_root_with(version))
    got = {Path(o["file"]).relative_to(REPO / "counterexamples").as_posix(): o for o in res["outcomes"]}
    for f, o in got.items():
        if "spec_topk" in f:
            assert o["status"] == sr.NOT_REPLAYABLE, sr.line(o)
        elif f == "current/hybrid_swa/prompt_prefilled.itf.json":
            assert o["status"] == sr.REPRODUCED, sr.line(o)
            assert f"prompt_prefilled violated on SGLang {version} at step 1" in sr.line(o), sr.line(o)
        elif f == "v0.5.13/hybrid_swa/progress.itf.json":  # the #23174 stall (findings #2): no release fixes it
            if version in ("0.5.22", "0.5.23"):
                # v0.5.13's NO_TOKEN sets batch_is_full with nothing running; 0.5.22+ does not
                # (`batch_is_full_needs_running`): a flag the hybrid-SWA pass clears anyway, and the
                # state comparison stops there (test_the_23174_stall_reproduces_on_the_newest_release
                # replays current's own lasso)
                assert (o["status"], o["field"]) == (sr.DIVERGED, "batch_is_full"), sr.line(o)
            else:
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert f"progress violated on SGLang {version}: the loop" in sr.line(o), sr.line(o)
        elif f == "v0.5.18/hybrid_swa_page4/conservation.itf.json":  # findings #3: 0.5.23's inserted path closes it
            if version == "0.5.23":
                assert (o["status"], o["step"]) == (sr.DIVERGED, 1), sr.line(o)
            else:
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert f"conservation violated on SGLang {version} at step 1" in sr.line(o), sr.line(o)
        elif f == "v0.5.22/hybrid_swa_page4/no_scheduler_assertion.itf.json":
            # findings #3's death: only 0.5.22's finish re-matches (checkpoint_into_tree); 0.5.19-0.5.21
            # finish through cache_finished_req and live, 0.5.23 keeps the inserted path
            if version == "0.5.22":
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert "no_scheduler_assertion violated on SGLang 0.5.22 at step 2" in sr.line(o), sr.line(o)
                assert "SGLang raised: AssertionError: new_prefix_len=8, len(new_indices)=0" in o["table"][-1]
            else:
                assert o["status"] == sr.DIVERGED and o["step"] in (1, 2), sr.line(o)
        elif f == "v0.5.11/sessions/no_prefill_oom.itf.json":  # findings #4: closed since 0.5.12.post1
            assert (o["status"], o["step"], o["field"]) == (sr.DIVERGED, 2, "last_batch"), sr.line(o)
        elif f == "v0.5.11/hybrid_swa/conservation.itf.json":  # #24252: #24318 closed it in 0.5.12.post1
            assert o["status"] == sr.DIVERGED and o["step"] <= 4, sr.line(o)
        elif f == "v0.5.10.post1/sessions/busy_check_sound.itf.json":  # findings #5: a finished turn counted once since 0.5.11
            assert (o["status"], o["step"]) == (sr.DIVERGED, 1), sr.line(o)
        elif f == "v0.5.10.post1/mixed/no_decode_oom.itf.json":  # findings #8: #22495's page reserve admits less
            assert (o["status"], o["step"]) == (sr.DIVERGED, 2), sr.line(o)
        elif f == "v0.5.13/hybrid_swa_mixed/no_decode_oom.itf.json":  # findings #9 on v0.5.13's tree (0.5.18+ splits it)
            # step 1 (the first admission) or step 2, where 0.5.23's tree has split the chunk's path
            # past the model's chain (the trace as regenerated with 0.5.13's leaf window cap)
            assert o["status"] == sr.DIVERGED and o["step"] in (1, 2), sr.line(o)
        elif f == "v0.5.21/hybrid_swa_mixed/no_decode_oom.itf.json":  # findings #9: 0.5.22's check makes the batch sit out
            if version in ("0.5.22", "0.5.23"):
                assert (o["status"], o["step"]) == (sr.DIVERGED, 2) and o["field"].startswith("in_last_batch"), sr.line(o)
            else:
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert f"no_decode_oom violated on SGLang {version} at step 2" in sr.line(o), sr.line(o)
        elif f.endswith("/hybrid_swa_chunk_cache/busy_check_sound.itf.json"):  # findings #10: #37502 (0.5.20) counts
            if version == "0.5.19":  # the parked chunked request's KV
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert "busy_check_sound violated on SGLang 0.5.19 at step 3" in sr.line(o), sr.line(o)
            else:
                assert (o["status"], o["step"], o["field"]) == (sr.DIVERGED, 3, "busy_check.fired"), sr.line(o)
        elif f.endswith("/over_long_prompt/no_prefill_oom.itf.json"):  # findings #11: #25126's max(0, ...) (0.5.12.post1)
            # ends the negative max_new_tokens; 0.5.10.post1's trace needs less slack than 0.5.11's page reserve leaves
            if version == "0.5.10.post1" or (version == "0.5.11" and f.startswith("v0.5.11/")):
                assert o["status"] == sr.REPRODUCED, sr.line(o)
                assert f"no_prefill_oom violated on SGLang {version} at step 1" in sr.line(o), sr.line(o)
            else:
                assert (o["status"], o["step"], o["field"]) == (sr.DIVERGED, 1, "full_available"), sr.line(o)
        elif f.startswith("current/aligned_") or f.endswith("/aligned_three/no_prefill_oom.itf.json"):
            # findings #12 (open): every release, with and without a tree, and with three requests
            assert o["status"] == sr.REPRODUCED, sr.line(o)
            assert f"no_prefill_oom violated on SGLang {version} at step 3" in sr.line(o), sr.line(o)
        elif f == "v0.5.23/sessions/progress.itf.json":  # findings #7 (#37583, open): 0.5.12.post1 on
            assert o["status"] == sr.REPRODUCED, sr.line(o)
            assert f"progress violated on SGLang {version}: the loop" in sr.line(o), sr.line(o)
        else:
            assert o["status"] == sr.PASSED, sr.line(o)
    assert len(got) == len(corpus_files())


def test_the_23174_stall_reproduces_on_the_newest_release(tmp_path: Path) -> None:
    """docs/findings.md #2 on 0.5.23 with `current`'s own lasso (the corpus keeps v0.5.13's, whose
    batch_is_full differs from 0.5.22+ in a state the hybrid-SWA pass clears anyway): the smallest
    stall the lasso BMC reports on current/hybrid_swa recurs on SGLang 0.5.23's scheduler."""
    from checker.engines.agreement import pinned
    from checker.engines.liveness import LassoBMC
    from checker.traces import itf
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    root = _root_with("0.5.23")
    cfg = pinned(CONFIGS["hybrid_swa"], full_tokens=(7, 7), swa_tokens=(4, 4), sliding_window_size=(2, 2),
                 chunked_prefill_size=(2, 2), max_prefill_tokens=(8, 8), input_len=(1, 4), max_new_tokens=(1, 1))
    r = LassoBMC(System(cfg, PRESETS["current"]), ["progress"]).run(4)["progress"]
    assert r.trace is not None and r.trace.loop is not None, r
    f = tmp_path / "stall.itf.json"
    itf.write(f, r.trace)
    (o,) = sr.replay("0.5.23", [str(f)], root=root)["outcomes"]
    assert o["status"] == sr.REPRODUCED and "progress violated on SGLang 0.5.23: the loop" in sr.line(o), sr.line(o)


def test_hybrid_swa_mixed_finding_reproduces_on_0_5_21_and_0_5_22_sits_out() -> None:
    """docs/findings.md #9 on the last release without the mixed decode check: 0.5.21's scheduler
    (hybrid SWA on UnifiedRadixCache, --enable-mixed-chunk) follows the trace and raises "Out of
    memory" in the mixed batch's decode at step 2. 0.5.22 checks `check_decode_mem` first: the same
    events (the trace's arrivals, SGLang's own eviction order) never fail there."""
    f = next(f for f in corpus_files() if f.endswith("v0.5.21/hybrid_swa_mixed/no_decode_oom.itf.json"))
    o = sr.replay("0.5.21", [f], root=_root_with("0.5.21"))["outcomes"][0]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "SGLang raised: Out of memory" in o["table"][-1], o["table"][-1]
    (new,) = sr.replay_items("0.5.22", [(f, (), "events")], _root_with("0.5.22"))["outcomes"]
    assert new["status"] == sr.PASSED and "no_decode_oom holds on SGLang 0.5.22 at every step" in new["message"], \
        sr.line(new)


def _walks_cut_at(cfg: Any, design: str, steps: int, params: Any, n: int, hit: Any, tmp: Path) -> list[str]:
    """Up to `n` random walks of `design` (seeds 0..399), each cut at its first step where
    `hit(previous state, state)` holds, written to the test's temporary folder `tmp`."""
    from checker.traces import itf
    from checker.traces.walk import random_walk
    from model.designs import PRESETS

    out: list[str] = []
    for seed in range(400):
        t = random_walk(cfg, PRESETS[design], steps, seed, params)
        prev = t.init
        for k, st in enumerate(t.steps):
            if hit(prev, st.state):
                t.steps = t.steps[:k + 1]
                f = tmp / f"walk{seed}.itf.json"
                itf.write(f, t)
                out.append(str(f))
                break
            prev = st.state
        if len(out) == n:
            break
    return out


def _sit_out_walks(design: str, tmp: Path, n: int = 2) -> list[str]:
    """Random walks of `design` at finding 9's parameters whose last step is a mixed prefill batch
    in which the running requests sit out (0.5.22's `check_decode_mem` before the mixed decode)."""
    from checker.traces import itf
    from model.state import RUNNING

    src = itf.read(next(f for f in corpus_files() if f.endswith("v0.5.21/hybrid_swa_mixed/no_decode_oom.itf.json")))

    def sits_out(prev: Any, s: Any) -> bool:
        run = [r for r in range(src.cfg.num_reqs) if prev.status[r] == RUNNING and s.status[r] == RUNNING]
        return s.last_batch == 1 and bool(run) and not any(s.output_len[r] > prev.output_len[r] for r in run)

    out = _walks_cut_at(src.cfg, design, 4, src.params, n, sits_out, tmp)
    assert out, f"no walk of {design} at finding 9's parameters makes the running batch sit out"
    return out


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_mixed_decode_sit_out_matches_sglang(version: str, tmp_path: Path) -> None:
    """The 0.5.22+ path finding 9 does not take: the mixed decode does not fit, `check_decode_mem`
    fails and the running batch sits out the prefill batch. SGLang's own scheduler follows the
    model's walks state for state (the running requests neither decode nor fail)."""
    root = _root_with(version)
    walks = _sit_out_walks("v" + version, tmp_path)
    res = sr.replay(version, walks, root=root)
    for o in res["outcomes"]:
        assert o["status"] == sr.PASSED and "every state matched" in o["message"], sr.line(o)


def _tombstone_then_delete_walks(design: str, tmp: Path, n: int = 12) -> list[str]:
    """Random walks of `design` on hybrid_swa_mixed, cut at the first step in which a node becomes
    an SWA tombstone while its last device child is deleted (UnifiedRadixCache's SWA pass tombstoning
    a node before the child goes)."""
    from specs.configs import CONFIGS

    cfg = CONFIGS["hybrid_swa_mixed"]
    kids = {a: [c for c in range(cfg.num_atoms) if cfg.parent(c) == a] for a in range(cfg.num_atoms)}

    def tomb_then_delete(prev: Any, s: Any) -> bool:
        return any(s.node_swa_tombstone[a] and not prev.node_swa_tombstone[a] and s.node_len[a] > 0 and kids[a]
                   and any(prev.node_len[c] > 0 for c in kids[a]) and not any(s.node_len[c] > 0 for c in kids[a])
                   for a in range(cfg.num_atoms))

    return _walks_cut_at(cfg, design, 8, None, n, tomb_then_delete, tmp)


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_swa_pass_tombstone_before_child_matches_sglang(version: str, tmp_path: Path) -> None:
    """docs/log/conformance.md "The eviction gap fixed": SGLang's UnifiedRadixCache SWA pass may tombstone a
    node and then delete its last child in one eviction, leaving a Full-only leaf. Walks in which the
    model does that replay on SGLang's own scheduler (the forcing puts such a node ahead of the child in
    the SWA LRU list): some follow state for state, and none disagrees (where the walk's set is not one
    SGLang's pass stops on, SGLang's own is one the model allows: `eviction_superset`)."""
    root = _root_with(version)
    walks = _tombstone_then_delete_walks("v" + version, tmp_path)
    assert len(walks) >= 4, f"only {len(walks)} walks of v{version} tombstone a node whose child goes in the same step"
    res = sr.replay(version, walks, root=root)
    passed = [o for o in res["outcomes"] if o["status"] == sr.PASSED and "every state matched" in o["message"]]
    assert len(passed) >= 2, [sr.line(o) for o in res["outcomes"]]
    for o in res["outcomes"]:
        assert o in passed or o.get("abstraction") == "eviction_superset", sr.line(o)


def test_finding_1_state_frees_swa_slot_0_on_sglang_0_5_23() -> None:
    """docs/findings.md finding 1, what follows it on SGLang's own scheduler: a request the chunk-cap
    hatch left decoding on a cut prompt (kvmc's `prompt_prefilled` is violated after step 1) has a
    `seqlen` (prompt + output) far past its KV, and the next decode's SWA release
    (`maybe_evict_swa` -> `evict_sliding_windows(req, seqlen - 1)`) frees row entries that were never
    written: SWA slot 0, the padding slot, goes to the free list twice. The walk (hybrid_swa_mixed,
    `v0.5.23`, seed 864950491 of the 2,000-walk run) replays on 0.5.23 and SGLang's own SWA ledger is
    no longer exact at step 2; kvmc, which releases from `kv_committed_len`, does not follow it there."""
    from checker.traces import itf
    from model.ops import Concrete
    from model.system import System
    from specs.properties import PROPERTIES

    root = _root_with("0.5.23")
    f = REPO / "tests" / "upstream" / "data" / "finding1_swa_release_slot0.itf.json"
    t = itf.read(f)
    x = System(t.cfg, t.design).ctx(Concrete(), t.params)
    assert not PROPERTIES["prompt_prefilled"].holds(x, t.steps[0].state), \
        "step 1 should be finding 1's state (a request decoding on a cut prompt)"
    (o,) = sr.replay("0.5.23", [str(f)], root=root)["outcomes"]
    assert o["status"] == sr.DIVERGED and o["step"] == 2, sr.line(o)
    assert "ledger on SGLang's objects: exact" in o["table"][0], o["table"][0]
    assert "ledger on SGLang's objects: NOT exact" in o["table"][1] and "owned twice: 0 by free+free" in o["table"][1], o["table"][1]


def _two_objects_walks(design: str, tmp: Path, n: int = 20) -> list[str]:
    """Random walks of `design` on sessions (seeds 0..2999), cut at the first step that admits with
    a request waiting or arriving while the running batch is full only because a session turn runs beside its
    finished previous turn's Req (`unfiltered`): two objects for one request slot."""
    from checker.traces import itf
    from checker.traces.walk import random_walk
    from model.designs import PRESETS
    from model.state import NEW, RUNNING, WAITING
    from specs.configs import CONFIGS

    cfg = CONFIGS["sessions"]
    R = range(cfg.num_reqs)
    out: list[str] = []
    for seed in range(3000):
        t = random_walk(cfg, PRESETS[design], 8, seed)
        prev = t.init
        for k, st in enumerate(t.steps):
            objs = sum(prev.status[r] == RUNNING for r in R) + sum(bool(u) for u in prev.unfiltered)
            both = any(prev.status[r] == RUNNING and prev.unfiltered[r] for r in R)
            waits = any(prev.status[q] == WAITING or (prev.status[q] == NEW and st.state.status[q] != NEW) for q in R)
            if both and objs >= t.params.req_pool_size and waits:
                t.steps = t.steps[:k + 1]
                out.append(str(itf.write(tmp / f"twoobj{seed}.itf.json", t)))
                break
            prev = st.state
        if len(out) == n:
            break
    return out


@pytest.mark.parametrize("version", ["0.5.13", "0.5.22"])
def test_finished_turn_and_next_turn_both_count_in_running_bs(version: str, tmp_path: Path) -> None:
    """docs/conformance.md, `event_loop/sessions` seed 1001: a streaming session's finished turn stays
    in the running batch (unfiltered) while its next turn runs; they are two Req objects and both
    count in `len(running_batch.reqs)`, so the PrefillAdder has one request row less. Walks in which
    that happens before an admission follow SGLang's scheduler state for state (before the fix the
    model counted the request slot once and admitted a request SGLang did not)."""
    root = _root_with(version)
    walks = _two_objects_walks("v" + version, tmp_path)
    assert len(walks) >= 10, f"only {len(walks)} walks of v{version} admit beside a session's two Req objects"
    res = sr.replay(version, walks, root=root)
    for o in res["outcomes"]:
        assert o["status"] == sr.PASSED and "every state matched" in o["message"], sr.line(o)
