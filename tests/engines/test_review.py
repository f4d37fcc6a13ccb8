"""`kvmc review` (checker/cli/review.py): base vs head, fix flags, transition-override files, git
revisions, output formats, and `kvmc check --jobs` (checker/cli/parallel.py)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from checker.cli import main

LEAKY_FREE = '''"""Planted: every free of full-pool tokens loses one slot."""
from model import allocator

REPLACES = "free"


def replacement(x, s, full, swa=0):
    leak = x.ite(full > 0, 1, 0)
    return allocator.free.original(x, s, full - leak, swa)
'''


def _review(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["review", "--no-prove", "--jobs", "1", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# -- transition-override files --------------------------------------------------------------------------
@pytest.mark.parametrize(
    "source, line, words",
    [
        ('REPLACES = "free"\ndef replacement(x, s, full, swa=0)\n    return s\n', 2, "syntax error"),
        ('REPLACES = "free"\n\n\ndef replacement(x, s, full):\n    return s\n', 4, "does not match transition free(x, s, full, swa)"),
        ('"""doc"""\nREPLACES = "fre"\ndef replacement(x, s, full, swa=0):\n    return s\n', 2, "unknown transition 'fre'"),
    ],
    ids=["syntax", "signature", "unknown-transition"],
)
def test_bad_patch_file_is_one_line_naming_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          source: str, line: int, words: str) -> None:
    f = tmp_path / "patch.py"
    f.write_text(source)
    rc, out, err = _review(capsys, "--head-patch", str(f), "--config", "small", "--property", "conservation", "--depth", "1")
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"{f}:{line}:" in lines[0] and words in lines[0], lines[0]


def test_patch_file_overrides_a_transition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "leaky_free.py"
    f.write_text(LEAKY_FREE)
    rc, out, err = _review(capsys, "--head-patch", str(f), "--config", "small", "--property", "conservation",
                           "--depth", "2", "--format", "json", "--out", str(tmp_path / "cx"))
    assert rc == 1, err
    data = json.loads(out)
    rows = {r["property"]: r for r in data["properties"]}
    assert rows["conservation"]["change"] == "newly broken"
    assert rows["conservation"]["base"]["verdict"] == "holds to depth"
    assert data["head"] == "current+leaky_free"
    head = rows["conservation"]["head"]["configs"]["small"]
    assert Path(head["counterexample"]).exists()
    meta = json.loads(Path(head["counterexample"]).read_text())["#meta"]
    assert meta["property"] == "conservation"
    # the pool runs SGLang's transitions, not the reviewer's patch: said, not replayed as a divergence
    assert head["pool_replay"].startswith("not confirmed: not replayable: model only: the pool has no hook for the "
                                          "patched transition free"), head
    assert meta["pool_replay"] == head["pool_replay"]


# -- the six known fixes ----------------------------------------------------------------------------------
# (fix, config where the bug shows, property it breaks, depth that reaches it, extra options for both sides,
# the preset reviewed). #23174 is reviewed on v0.5.13 (its corpus preset): on 0.5.23 the fixed side's
# hybrid_swa BMC to depth 3 took CI minutes; tests/unit/test_known_bugs.py finds it on current.
KNOWN = [
    ("chunked_swa_page_reserve", "hybrid_swa", "no_prefill_oom", 3, [], "v0.5.13"),
    ("swa_hostload_budget", "hybrid_swa_hicache", "no_prefill_oom", 1, [], "current"),
    ("session_active", "sessions", "busy_check_sound", 3, [], "current"),
    ("retract_tail_free", "sessions", "conservation", 3, [], "current"),
    ("swa_busy_check", "hybrid_swa", "busy_check_sound", 1, [], "current"),
    ("spec_topk_busy_check", "spec_topk", "busy_check_complete", 2, ["--mutant", "verify_keeps_rejected_page"], "current"),
]


@pytest.mark.parametrize("fix, config, prop, depth, extra, design", KNOWN, ids=[k[0] for k in KNOWN])
def test_review_each_known_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str], fix: str, config: str, prop: str,
                               depth: int, extra: list[str], design: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the BMC without specs/lemmas.py's strengthening invariants as extra goals (the pool workers are
    # forked from this process, so they inherit it): a lemma is asserted only where it was checked to
    # hold, so it changes no verdict and no counterexample, only how hard the queries are, and at these
    # depths asking them costs more than it saves (#23174 on v0.5.13's hybrid_swa: 12 s to 6 s
    # for both sides, 2 jobs). Lemmas only speed up proofs (tests/quality/test_mutants.py);
    # tests/engines/test_lemmas_hold.py checks them.
    from checker.engines import bmc as bmc_mod

    monkeypatch.setattr(bmc_mod, "LEMMAS", {})
    common = ["--config", config, "--property", prop, "--property", "no_decode_oom", "--depth", str(depth),
              "--no-minimize", "--format", "json", "--out", str(tmp_path), "--jobs", "2", *extra]
    rc, out, err = _review(capsys, "--base", design, "--head", design, "--without", fix, *common)
    assert rc == 1, err
    data = json.loads(out)
    changes = {r["property"]: r["change"] for r in data["properties"]}
    assert changes == {prop: "newly broken", "no_decode_oom": "unchanged"}, changes
    row = next(r for r in data["properties"] if r["property"] == prop)
    cx = row["head"]["configs"][config]["counterexample"]
    assert Path(cx).exists()
    # found in a pool worker, and replayed on the torch pool there before it is reported
    assert row["head"]["configs"][config]["pool_replay"].startswith("confirmed (reproduced on the pool"), row["head"]
    # reversed: the fix fixes exactly that property (both sides are reused from the run above)
    rc, out, err = _review(capsys, "--base", design, "--base-without", fix, "--head", design, *common)
    assert rc == 0, err
    changes = {r["property"]: r["change"] for r in json.loads(out)["properties"]}
    assert changes == {prop: "fixed", "no_decode_oom": "unchanged"}, changes


# -- formats ------------------------------------------------------------------------------------------------
def test_markdown_and_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "leaky_free.py"
    f.write_text(LEAKY_FREE)
    junit = tmp_path / "ci" / "review.xml"
    rc, out, err = _review(capsys, "--head-patch", str(f), "--config", "small", "--property", "conservation",
                           "--depth", "2", "--format", "markdown", "--junit", str(junit),
                           "--out", str(tmp_path / "cx"))
    assert rc == 1, err
    assert "| property | base | head | change | proof |" in out
    assert "| `conservation` |" in out and "**newly broken**" in out
    assert "<details>" in out and "```" in out
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1" and suite.get("failures") == "1"
    failing = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failing == ["conservation"]


def test_text_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "leaky_free.py"
    f.write_text(LEAKY_FREE)
    rc, out, err = _review(capsys, "--base-patch", str(f), "--config", "small", "--property", "conservation",
                           "--depth", "2", "--out", str(tmp_path / "cx"))
    assert rc == 0, err
    header = next(line for line in out.splitlines() if line.startswith("property"))
    assert header.split() == ["property", "base", "head", "change", "proof"]
    row = next(line for line in out.splitlines() if line.startswith("conservation"))
    assert "violated at depth" in row and "FIXED" in row


def test_bad_review_usage(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--head", "nope"], ["--without", "nofix"], ["--format", "html"], ["--jobs", "0"], ["--depth", "0"],
                 ["--head-patch", "x.txt"], ["--config", "nocfg"]):
        rc, out, err = _review(capsys, *argv)
        assert rc == 2, argv
        assert len(err.strip().splitlines()) == 1 and err.startswith("kvmc: error:"), (argv, err)


# -- git revisions ----------------------------------------------------------------------------------------
def _git(*args: str) -> str:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_review_two_git_revisions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        head = _git("rev-parse", "HEAD")
    except (subprocess.CalledProcessError, FileNotFoundError):
        pytest.skip("not a git checkout")
    rc, out, err = _review(capsys, "--base-rev", head, "--head-rev", head, "--config", "small", "--property", "no_prefill_oom",
                           "--depth", "1", "--format", "json", "--out", str(tmp_path))
    assert rc == 0, err
    data = json.loads(out)
    assert data["base"].endswith(f"@{head}") and data["head"].endswith(f"@{head}")
    assert [r["change"] for r in data["properties"]] == ["unchanged"]
    assert data["properties"][0]["head"]["verdict"] == "holds to depth"

    rc, out, err = _review(capsys, "--base-rev", "no-such-revision-xyz", "--config", "small", "--depth", "1")
    assert rc == 2 and "no-such-revision-xyz" in err and len(err.strip().splitlines()) == 1


# -- parallel check -----------------------------------------------------------------------------------------
def test_check_jobs_combined_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", "--jobs", "2", "--config", "small", "--config", "sessions", "--property", "no_prefill_oom",
               "--depth", "1", "--no-prove", "--json", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    assert sorted(c["config"] for c in data["checks"]) == ["sessions", "small"]
    assert all(c["results"]["no_prefill_oom"]["verdict"] == "holds to depth" for c in data["checks"])


def test_check_jobs_replays_its_counterexamples_on_the_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["check", "--jobs", "2", "--without", "swa_busy_check", "--config", "small", "--config", "hybrid_swa",
               "--property", "busy_check_sound", "--depth", "1", "--no-prove", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 1, err
    line = next(ln for ln in out.splitlines() if "counterexample:" in ln)
    assert "hybrid_swa" in line and "(pool: confirmed (reproduced on the pool, cpu))" in line, out
    meta = json.loads(next(tmp_path.rglob("*.itf.json")).read_text())["#meta"]
    assert meta["pool_replay"].startswith("confirmed"), meta


def test_check_all_presets_in_one_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from model.designs import PRESETS

    # `--engine bmc`: what is pinned is the report of every preset; the default portfolio forks an
    # explicit child per job (1.4 s each, 0.1 s for the BMC alone, eleven jobs), and the portfolio in
    # a `--jobs` check is pinned by test_check_jobs_combined_report and the test after it
    rc = main(["check", "--all", "--jobs", "2", "--engine", "bmc", "--config", "small", "--property", "no_prefill_oom",
               "--depth", "1", "--no-prove", "--json", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    assert [c["design"] for c in data["checks"]] == list(PRESETS)


def test_a_patch_that_raises_while_the_model_runs_is_one_file_line_exit_2(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Not "newly broken" (exit 1), not an internal error: the reviewer's line, exit 2."""
    f = tmp_path / "raising.py"
    f.write_text('REPLACES = "free"\n\n\ndef replacement(x, s, full, swa=0):\n    raise ValueError("no free today")\n')
    rc, out, err = _review(capsys, "--head-patch", str(f), "--config", "small", "--property", "conservation",
                           "--depth", "2", "--out", str(tmp_path / "cx"), "--progress", "none")
    assert rc == 2, (rc, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{f}:5:" in lines[0] and "ValueError" in lines[0] and "no free today" in lines[0], err
    assert "Traceback" not in err


def test_review_of_a_revision_older_than_a_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A base revision whose specs/ lack a property the head has: the base side does not ask it (it
    crashed with KeyError before), the row says "only on head"; on a config the property does not
    apply to (the HiCache-only one on `small`) neither side checks it and the row says so."""
    try:
        first = _git("log", "--format=%H", "--reverse", "-S", "recompute_only_when_short", "--", "specs/properties.py")
        older = _git("rev-parse", f"{first.splitlines()[0]}^") if first else ""
    except (subprocess.CalledProcessError, FileNotFoundError):
        older = ""
    if not older:
        pytest.skip("no git history before recompute_only_when_short (not a checkout, or a shallow one)")
    rc, out, err = _review(capsys, "--base-rev", older, "--head-rev", "HEAD", "--config", "small", "--property",
                           "no_prefill_oom", "--property", "recompute_only_when_short", "--config", "hicache_evict",
                           "--depth", "1", "--format", "json", "--out", str(tmp_path))
    assert rc == 0, err
    rows = {r["property"]: r for r in json.loads(out)["properties"]}
    assert rows["no_prefill_oom"]["change"] == "unchanged"
    assert rows["recompute_only_when_short"]["change"] == "only on head", rows["recompute_only_when_short"]
    rc, out, err = _review(capsys, "--base-rev", older, "--head-rev", "HEAD", "--config", "small", "--property",
                           "no_prefill_oom", "--property", "recompute_only_when_short", "--depth", "1", "--format", "json",
                           "--out", str(tmp_path / "small"))
    assert rc == 2 and "recompute_only_when_short" in err  # applies to none of the configs named


def test_review_of_a_liveness_property(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A liveness property goes to the lasso engine on both sides, as `kvmc check --property progress`
    does (before session 42 the review handed it to the BMC, which raised KeyError: 'progress'): the
    planted starvation mutant is newly broken on the head."""
    rc, out, err = _review(capsys, "--head-mutant", "admission_ignores_evictable", "--config", "small",
                           "--property", "progress", "--depth", "4", "--no-prove", "--out", str(tmp_path / "cx"))
    assert rc == 1, err
    row = next(line for line in out.splitlines() if line.startswith("progress"))
    assert "holds to depth 4" in row and "violated at depth" in row and "NEWLY BROKEN" in row, out
