"""`kvmc replay --against sglang==V`: kvmc's traces on SGLang's own scheduler (upstream/sched/).

One worker process per release replays everything below (importing SGLang is most of the cost):
the regression corpus (counterexamples/MANIFEST.json) on 0.5.10.post1 (before every checked-in
fix) and on 0.5.13 (after them; and with each fix reverted by SGLang's own source_patcher), plus
random walks of the model's v0.5.13 preset on the hybrid-SWA config with pools tight enough that
the tree evicts and tombstones (the eviction set and `_evict_swa` timing forced; then the same
events unforced, to show the forcing is what makes SGLang follow).

The releases come from tests/upstream/conftest.py (`sglang_root`, CI_RELEASES); the scheduler
module's extra dependencies are installed beside them.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from upstream.sched import replay as sr
from upstream.sched.table import corpus_files, items_for

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


@pytest.fixture(scope="module")
def sched_root(sglang_root: Path) -> Path:
    sr.install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _by_fix(res: dict[str, Any]) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """{(design directory, reverted fixes): outcome}."""
    out = {}
    for o in res["outcomes"]:
        if not str(o["file"]).startswith(str(REPO / "counterexamples")):
            continue
        design = Path(o["file"]).relative_to(REPO / "counterexamples").parts[0]
        key = (design, tuple(sorted(r.split(" ")[0] for r in o.get("reverted", []))))
        out[key] = o
    return out


def _tight_walks(tmp: Path, n: int = 3) -> list[str]:
    """Random walks of the v0.5.13 preset on hybrid_swa whose steps evict or tombstone nodes."""
    from checker.traces import itf
    from model.config import concrete_params
    from model.designs import PRESETS
    from specs.configs import CONFIGS
    from checker.traces.walk import random_walk

    cfg = CONFIGS["hybrid_swa"]
    p = concrete_params(cfg, full_tokens=10, swa_tokens=6, sliding_window_size=2, input_len=(4, 4), max_new_tokens=(2, 2),
                        req_pool_size=2, chunked_prefill_size=4, max_prefill_tokens=16)
    files = []
    rng = random.Random(0)
    for seed in rng.sample(range(400), 120):
        t = random_walk(cfg, PRESETS["v0.5.13"], 10, seed, params=p)
        if any(v is True and ("evict[" in k or "tombstone[" in k) for st in t.steps for k, v in st.picks.items()):
            f = tmp / f"walk{seed}.itf.json"
            itf.write(f, t)
            files.append(str(f))
            if len(files) == n:
                break
    assert len(files) == n, "the model's random walks on tight pools no longer evict"
    return files


@pytest.fixture(scope="module")
def runs(sched_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    corpus = corpus_files()
    walks = _tight_walks(tmp_path_factory.mktemp("walks"))
    old = sr.replay_items("0.5.10.post1", items_for("0.5.10.post1", corpus), sched_root)
    new_items = items_for("0.5.13", corpus) + [(w, (), "reproduce") for w in walks] + [(w, (), "events") for w in walks]
    new = sr.replay_items("0.5.13", new_items, sched_root)
    return {"old": old, "new": new, "walks": walks}


def test_release_before_the_fix_reproduces(runs: dict[str, Any]) -> None:
    """#21499: 0.5.10.post1's busy check calls evictable_size() on SWARadixCache and raises, step
    for step as the trace records it."""
    o = _by_fix(runs["old"])[("v0.5.13-without-swa_busy_check", ())]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "crashed (NotImplementedError" in o["table"][0]


@pytest.mark.parametrize("design,fix", [
    ("v0.5.13-without-chunked_swa_page_reserve", "chunked_swa_page_reserve"),  # #23174 (regen.py: on v0.5.13)
    ("v0.5.13-without-retract_tail_free", "retract_tail_free"),  # #22862
    ("v0.5.13-without-session_active", "session_active"),  # #22213 / #22753
])
def test_fix_reverted_reproduces_and_release_with_it_passes(runs: dict[str, Any], design: str, fix: str) -> None:
    by = _by_fix(runs["new"])
    reverted = by[(design, (fix,))]
    assert reverted["status"] == sr.REPRODUCED, sr.line(reverted)
    assert reverted["reverted"] and reverted["reverted"][0].startswith(fix)
    fixed = by[(design, ())]
    assert fixed["status"] == sr.PASSED, sr.line(fixed)
    assert fixed["mode"] == "events"


def test_busy_check_fires_beside_the_ledger_when_it_should(runs: dict[str, Any]) -> None:
    """#22213 on 0.5.13 with #22753 reverted: SGLang's own check fires with the numbers kvmc's
    model computes, while the ledger on SGLang's objects is exact (a false alarm)."""
    import re

    o = _by_fix(runs["new"])[("v0.5.13-without-session_active", ("session_active",))]
    last = o["table"][-1]
    # the model's own account of the failing state, from the corpus' step table
    verdict = (REPO / "counterexamples/v0.5.13-without-session_active/sessions/busy_check_sound.txt").read_text()
    terms = dict(re.findall(r"(session_held|uncached|available|total)=(\d+)", verdict.splitlines()[-1]))
    assert set(terms) == {"session_held", "uncached", "available", "total"}, verdict.splitlines()[-1]
    assert "SGLang busy check: FIRED" in last, last
    for name, value in terms.items():
        assert f"{name}={value}" in last, (name, value, last)
    assert "ledger on SGLang's objects: exact" in last


def test_ledger_on_real_objects_catches_the_22862_leak_sglangs_check_misses(runs: dict[str, Any]) -> None:
    """0.5.10.post1 (before #22862 and before #22753): the re-admitted streaming turn overwrites its
    row and a KV slot is owned by nobody. SGLang's own busy check passes (its session-held term
    counts the active slot once more, which cancels the leaked slot); kvmc's ledger, evaluated on
    the allocator's free list, the tree's values and the req_to_token rows, names the leaked page."""
    o = _by_fix(runs["old"])[("v0.5.13-without-retract_tail_free", ())]
    step3 = o["table"][2]
    assert "SGLang busy check: passed" in step3
    assert "ledger on SGLang's objects: NOT exact" in step3 and "leaked pages" in step3
    # the model (whose check has #22753) expects the check to fire: the first divergence says so
    assert (o["status"], o["step"], o["field"]) == (sr.DIVERGED, 3, "busy_check.fired")


def test_mixed_chunk_decode_runs_out_of_memory_on_sglang_too(runs: dict[str, Any]) -> None:
    """Finding 8 on SGLang 0.5.10.post1 started with --enable-mixed-chunk: every state matches the
    model's, and at the last step the mixed batch's prepare_for_decode raises as the model's does."""
    (o,) = [o for o in runs["old"]["outcomes"] if o["file"].endswith("counterexamples/v0.5.10.post1/mixed/no_decode_oom.itf.json")]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "Decode out of memory" in o["table"][-1] and "violated: no_decode_oom" in o["table"][-1], o["table"][-1]


def test_finished_streaming_turn_false_alarm_on_sglang_0_5_10_post1(runs: dict[str, Any]) -> None:
    """Finding 5 (docs/findings.md): 0.5.10.post1's busy check counts a finished streaming turn as
    uncached and as session-held; SGLang's own check fires at step 1, its ledger exact."""
    (o,) = [o for o in runs["old"]["outcomes"]
            if o["file"].endswith("counterexamples/v0.5.10.post1/sessions/busy_check_sound.itf.json")]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "SGLang busy check: FIRED" in o["table"][0] and "ledger on SGLang's objects: exact" in o["table"][0], o["table"][0]


def test_hybrid_swa_mixed_decode_runs_out_of_swa_on_sglang_0_5_13(runs: dict[str, Any]) -> None:
    """Finding 9 (docs/findings.md) on SGLang 0.5.13 started with --enable-mixed-chunk on hybrid SWA:
    every state matches, and the mixed batch's decode finds no SWA slot after the chunk took them."""
    (o,) = [o for o in runs["new"]["outcomes"]
            if o["file"].endswith("counterexamples/v0.5.13/hybrid_swa_mixed/no_decode_oom.itf.json")]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "SGLang raised: Out of memory" in o["table"][-1] and "violated: no_decode_oom" in o["table"][-1], o["table"][-1]
    assert len(o["table"]) == 2  # at step 2, as the trace records it


def test_aligned_chunk_runs_out_of_memory_on_0_5_10_post1_and_0_5_13(runs: dict[str, Any]) -> None:
    """Finding 12 (docs/findings.md, open) on both CI releases of this module: SGLang started with
    --truncation-align-size (with a radix cache and with --disable-radix-cache; at page 1 and at page 4
    with an alignment of four pages) admits a request into the chunk budget the aligned cut left, every state matches, and the chunked request's last chunk
    raises. With three requests (`aligned_three`, the chunk twice the alignment) `current`'s trace has
    a max_prefill_tokens of 10, which before #25741 (0.5.13) also gated the chunked pass: 0.5.10.post1
    admits only the first request and departs at step 1, and v0.5.12.post1's own trace (19) reproduces."""
    def outcome(key: str, f: str) -> dict[str, Any]:
        (o,) = [o for o in runs[key]["outcomes"] if o["file"].endswith(f"counterexamples/{f}")]
        return o

    def raised(o: dict[str, Any]) -> None:
        assert o["status"] == sr.REPRODUCED, sr.line(o)
        # "Out of memory" at page 1 (alloc_for_extend), "Prefill out of memory" from the paged path
        assert "out of memory. try to lower your batch size" in o["table"][-1].lower() and len(o["table"]) == 3, o["table"]

    for key in ("old", "new"):
        for f in ("current/aligned_page1/no_prefill_oom.itf.json", "current/aligned_chunk_cache/no_prefill_oom.itf.json",
                  "current/aligned_page4/no_prefill_oom.itf.json", "v0.5.12.post1/aligned_three/no_prefill_oom.itf.json"):
            raised(outcome(key, f))
    raised(outcome("new", "current/aligned_three/no_prefill_oom.itf.json"))
    o = outcome("old", "current/aligned_three/no_prefill_oom.itf.json")
    assert (o["status"], o["step"], o["field"]) == (sr.DIVERGED, 1, "full_available"), sr.line(o)


def test_first_divergence_is_named_side_by_side(runs: dict[str, Any]) -> None:
    """#23174's trace on 0.5.10.post1: the release predates the SWA budget split (#22597), admits
    nothing in step 1, and the replay says where and how it departs."""
    o = _by_fix(runs["old"])[("v0.5.13-without-chunked_swa_page_reserve", ())]
    assert (o["status"], o["step"]) == (sr.DIVERGED, 1)
    assert any("model=" in d and "sglang=" in d for d in o["detail"])
    text = sr.report(runs["old"])
    assert "diverged at step 1" in text


def test_not_replayable_says_why(runs: dict[str, Any]) -> None:
    outs = {Path(o["file"]).relative_to(REPO / "counterexamples").as_posix(): o for o in runs["new"]["outcomes"]
            if str(o["file"]).startswith(str(REPO / "counterexamples"))}
    spec = next(o for k, o in outs.items() if "spec_topk" in k and "busy_check_complete" in k)
    assert spec["status"] == sr.NOT_REPLAYABLE and "draft" in spec["message"]
    old = {Path(o["file"]).relative_to(REPO / "counterexamples").as_posix(): o for o in runs["old"]["outcomes"]
           if str(o["file"]).startswith(str(REPO / "counterexamples"))}
    hic = next(o for k, o in old.items() if k.startswith("v0.5.13-without-swa_hostload_budget"))
    assert hic["status"] == sr.NOT_REPLAYABLE and "UnifiedRadixCache with HiCache" in hic["message"], sr.line(hic)


def test_hicache_release_with_the_fix_defers_the_load_back(runs: dict[str, Any]) -> None:
    """#27391 on 0.5.13 (UnifiedRadixCache with real HiCache: HostPoolGroup, HybridCacheController,
    the direct transfer as a row copy): the SWA budget charges the host hit, the request is not
    admitted, nothing is loaded back and no allocation fails."""
    o = _by_fix(runs["new"])[("v0.5.13-without-swa_hostload_budget", ())]
    assert o["status"] == sr.PASSED and o["mode"] == "events", sr.line(o)
    assert "no_prefill_oom holds" in o["message"] and "departs from the trace at step 1" in o["message"]


def test_forced_choices_make_sglang_follow_the_model(runs: dict[str, Any]) -> None:
    """Walks that evict and tombstone: with the eviction set and `_evict_swa` timing forced, SGLang
    0.5.13 matches every state of every walk (and evicts exactly the chosen nodes); running the same
    events with SGLang's own LRU order and timing departs from some walk."""
    walks = set(runs["walks"])
    forced = [o for o in runs["new"]["outcomes"] if o["file"] in walks and o["mode"] == "reproduce"]
    free = [o for o in runs["new"]["outcomes"] if o["file"] in walks and o["mode"] == "events"]
    assert len(forced) == len(free) == len(walks)
    for o in forced:
        assert o["status"] == sr.PASSED and "every state matched" in o["message"], sr.line(o)
    assert any("departs from the trace" in o["message"] for o in free), [o["message"] for o in free]


# -- bad input: one line, exit 2, nothing written --------------------------------------------------------

def _kvmc(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from checker.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, check=False)


def _one_corpus_trace() -> str:
    return next(f for f in corpus_files() if "swa_busy_check" in f)


@pytest.mark.parametrize("args,expect", [
    (["--against", "sglang==9.9.9"], "unknown SGLang release '9.9.9'"),
    (["--against", "sglang==0.5.16"], "SGLang 0.5.16: no scheduler adapter"),
    (["--against", "vllm==0.1"], "expected sglang==VERSION"),
    (["--against", "sglang==0.5.10.post1", "--revert", "chunked_swa_page_reserve"], "does not have it"),
    (["--revert", "chunked_swa_page_reserve"], "--revert FIX needs --against"),
])
def test_bad_input_one_line_exit_2(tmp_path: Path, args: list[str], expect: str) -> None:
    p = _kvmc(["replay", *args, _one_corpus_trace()], REPO)
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and expect in lines[0], p.stderr


def test_release_not_installed(tmp_path: Path) -> None:
    p = _kvmc(["replay", "--against", "sglang==0.5.13", "--dir", str(tmp_path), _one_corpus_trace()], REPO)
    assert p.returncode == 2
    assert "is not installed" in p.stderr and "kvmc sglang install 0.5.13" in p.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_corrupt_and_unreplayable_traces_exit_2_without_a_worker(sched_root: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.itf.json"
    data = json.loads(Path(_one_corpus_trace()).read_text())
    data["states"][1]["full_available"] = {"#bigint": "99"}
    bad.write_text(json.dumps(data))
    spec = next(f for f in corpus_files() if "spec_topk" in f and "busy_check_complete" in f)
    before = sorted(p.name for p in tmp_path.iterdir())
    p = _kvmc(["replay", "--against", "sglang==0.5.13", "--dir", str(sched_root), str(bad), spec], tmp_path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "bad.itf.json: error: " in p.stdout and "edited or corrupted" in p.stdout
    assert "not replayable: speculative decoding" in p.stdout
    assert "imports" not in p.stdout  # decided in the parent: no SGLang process was started
    assert sorted(q.name for q in tmp_path.iterdir()) == before


# -- kvmc check --confirm sglang==V ----------------------------------------------------------------------
def test_confirm_note_reproduces_a_counterexample_kvmc_check_found(sched_root: Path) -> None:
    """What `kvmc check --confirm sglang==V` adds to a counterexample it writes (the trace as the
    engine returns it: no verdict in its meta yet)."""
    from checker.traces import itf

    t = itf.read(_one_corpus_trace())
    t.meta = {}
    note = sr.confirm_note(t, "sglang==0.5.10.post1", sched_root)
    assert note.startswith("confirmed on SGLang 0.5.10.post1") and "#21499" in note, note


def test_check_confirm_bad_release_is_rejected_before_the_search(tmp_path: Path) -> None:
    p = _kvmc(["check", "--without", "swa_busy_check", "--config", "hybrid_swa", "--depth", "1", "--out", str(tmp_path),
               "--confirm", "sglang==0.5.16"], REPO)
    assert p.returncode == 2, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no scheduler adapter" in lines[0], p.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_23174_stall_loops_on_sglang_0_5_13(runs: dict[str, Any]) -> None:
    """docs/findings.md #2: the lasso of `progress` on the v0.5.13 preset runs on SGLang 0.5.13's own
    scheduler, its loop three times, the loop's first state recurring each time (no batch runs)."""
    (o,) = [o for o in runs["new"]["outcomes"] if o["file"].endswith("counterexamples/v0.5.13/hybrid_swa/progress.itf.json")]
    assert o["status"] == sr.REPRODUCED, sr.line(o)
    assert "progress violated on SGLang 0.5.13: the loop" in o["message"] and "recurring after each" in o["message"]
