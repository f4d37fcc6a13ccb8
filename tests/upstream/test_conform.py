"""`kvmc conform` on real SGLang releases (CPU): the presets agree with their releases on a fixed
Hypothesis profile, a planted off-by-one is caught and shrunk, and bad input is one line, exit 2.

The profile: seed 0, `KVMC_CONFORM_EXAMPLES` scenarios per row (default 60; `kvmc conform --all`
runs 2,000)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from upstream import conform

from .conftest import CI_RELEASES

EXAMPLES = int(os.environ.get("KVMC_CONFORM_EXAMPLES", "60"))
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


# the scheduler-loop rows' open disagreements on the CI releases (docs/conformance.md, "Open
# disagreements"): found by these rows, not yet fixed in the model
OPEN: dict[tuple[str, str], str] = {}  # none since `uncached_skips_released_req` (session 30)


@pytest.fixture(scope="module")
def results(sglang_root: Path) -> dict:
    from upstream.sched.replay import install_extras

    # the add_one_req/hicache row builds SGLang's tree as its scheduler does (the scheduler module's
    # extra dependencies; idempotent, shared with tests/upstream/test_sched_replay.py)
    install_extras(sglang_root, say=lambda m: None)
    out = conform.run(CI_RELEASES, examples=EXAMPLES, seed=0, root=sglang_root, jobs=2)
    return {r["version"]: r for r in out}


@pytest.mark.parametrize("version", CI_RELEASES)
def test_cpu_worker_routes_the_paged_kernels(results: dict, version: str) -> None:
    """On cpu the paged allocator runs kvmc's torch routing (upstream/kernels.py), not a Triton stub
    (tests/upstream/test_cuda_path.py checks the real kernels run on cuda)."""
    res = results[version]
    assert res.get("device") == "cpu" and res.get("kernels") == "routed", {k: res.get(k) for k in ("device", "kernels")}


@pytest.mark.parametrize("version", CI_RELEASES)
@pytest.mark.parametrize("row", conform.ROW_NAMES)
def test_preset_agrees_with_its_release(results: dict, version: str, row: str) -> None:
    res = results[version]
    assert "error" not in res, res.get("error")
    (r,) = [r for r in res["rows"] if r["row"] == row]
    if "not_applicable" in r:
        # the rows these two releases lack: #22597's method and the 0.5.13 busy-check components
        # (0.5.10.post1), the tree classes they do not build by default (UnifiedRadixCache from 0.5.16),
        # the per-request SWA ring (0.5.20-0.5.22), HiCache on UnifiedRadixCache (0.5.12.post1+)
        # and spec v2 (their presets model EAGLE v1; tests/upstream/test_mutate_conform.py runs
        # alloc_for_spec_decode, tests/upstream/test_spec_alloc_row.py spec_v2_alloc_len)
        expected = {"UnifiedRadixCache", "UnifiedRadixCache/swa", "UnifiedRadixCache/swa_branching", "add_one_req/swa_ring", "add_chunked_req/swa_ring",
                    "SWATokenToKVPoolAllocator/ring", "alloc_for_spec_decode", "alloc_for_spec_decode/swa", "spec_v2_alloc_len"}
        if version == "0.5.10.post1":
            # (busy_check/swa: the preset's busy check raises on hybrid SWA, swa_busy_check off)
            expected |= {"_swa_budget_for_req", "busy_check/swa", "add_one_req/hicache"}
        assert row in expected, r
        return
    assert r["scenarios"] == EXAMPLES
    assert r["errored"] == 0, conform.could_not_run(res, r)
    if (version, row) in OPEN:  # strict: a row that starts agreeing must leave the list (and the docs)
        assert r["disagreed"] > 0, f"{row} on {version} agrees now: drop it from OPEN and docs/conformance.md"
        pytest.xfail(f"open disagreement, docs/conformance.md: {OPEN[(version, row)]}")
    assert r["disagreed"] == 0, conform.side_by_side(res, r)
    assert r["agreed"] + sum(r["abstractions"].values()) == r["scenarios"]


def test_planted_off_by_one_is_caught_and_shrunk(sglang_root: Path) -> None:
    (res,) = conform.run(["0.5.13"], ["budget_state"], examples=100, seed=0, root=sglang_root,
                         overrides=[str(HERE / "planted_budget_state.py")])
    (row,) = res["rows"]
    assert row["disagreed"] > 0
    m = row["minimal"]
    assert "rem_input=0," in m["scenario"], m  # shrunk to the boundary the planted gate moved
    assert ["budget_state()", "OTHER", "CONTINUE"] in m["diffs"], m
    text = conform.side_by_side(res, row)
    assert "budget_state(): SGLang 0.5.13: OTHER / kvmc v0.5.13+override: CONTINUE" in text


def test_busy_check_row_before_0_5_13_runs_the_mixin_and_can_disagree(sglang_root: Path) -> None:
    """Up to 0.5.12.post1 the busy check is SchedulerRuntimeCheckerMixin's method (no checker class):
    the row runs SGLang's own method there, and a model that counts the parked chunked request
    (#37502, 0.5.20) is told apart from 0.5.10.post1, whose check does not."""
    (res,) = conform.run(["0.5.10.post1"], ["busy_check"], examples=100, seed=0, root=sglang_root,
                         with_=["busy_check_chunked_req"])
    (row,) = res["rows"]
    assert "not_applicable" not in row, row
    assert row["disagreed"] > 0, row
    text = conform.side_by_side(res, row)
    assert "busy check (uncached, fired).uncached: SGLang 0.5.10.post1:" in text, text


def test_a_scenario_that_raises_is_an_error_not_a_disagreement(sglang_root: Path) -> None:
    """Nothing was compared, so it is no finding about the model: counted apart, with its traceback,
    and the run still fails (exit 1) rather than reading as a pass."""
    (res,) = conform.run(["0.5.13"], ["budget_state"], examples=15, seed=0, root=sglang_root,
                         overrides=[str(HERE / "planted_raises.py")])
    (row,) = res["rows"]
    assert (row["errored"], row["disagreed"], row["agreed"]) == (15, 0, 0), row
    assert row["minimal"] is None and "planted: budget_state cannot run" in row["first_error"]["error"], row
    text, worst = conform.report([res])
    assert worst == 1
    assert "could not run: budget_state on SGLang 0.5.13" in text and "15 of 15 scenario(s) raised" in text, text
    assert "| budget_state | 0.5.13 | v0.5.13+override | 15 | 0 (0.0 %) | - | 0 | 15 |" in conform.table([res])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "upstream", *args], capture_output=True, text=True, cwd=REPO)


@pytest.mark.parametrize(
    "args, says",
    [
        (["conform", "--sglang", "9.9"], "unknown SGLang release '9.9'"),
        (["conform", "--sglang", "0.5.16"], "no adapter yet"),
        (["conform", "--sglang", "0.5.17"], "no preset claims it"),
        (["conform", "--sglang", "0.5.13", "--transition", "nope"], "unknown transition row"),
        (["sglang", "install", "0.5.13", "7.7"], "unknown SGLang release '7.7'"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    p = _cli(*args, "--dir", str(tmp_path / "sg"))
    assert p.returncode == 2, p.stderr
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "sg").exists() or not any((tmp_path / "sg").iterdir())


def test_release_not_installed_is_one_line_exit_2(tmp_path: Path) -> None:
    p = _cli("conform", "--sglang", "0.5.11", "--dir", str(tmp_path))
    assert p.returncode == 2 and "is not installed" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
