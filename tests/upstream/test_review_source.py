"""`kvmc explore --sglang-source DIR` and `kvmc review --sglang-base/--sglang-head` (issue 61 items
1 and 5): a developer's SGLang source tree as the system under test.

Two trees are made from the installed CI release 0.5.13 (its `sglang` package copied into
TMP/python/sglang/): one as released, one with #23174's fix (`chunked_swa_page_reserve`) reverted
as a real edit of schedule_policy.py (upstream/sched/reverts.py::edit_tree, the runtime revert's
text applied to the file). The review of the one against the other reports no_prefill_oom newly
broken; the head's reproducer fails on the head tree (exit 0: reproduced) and does not reproduce
on the base tree (AssertionError, exit 1). The review's walks run as Ray tasks (`--executor ray`,
a local instance started for the review and shut down after it) where the ray extra is installed
(.ci/run installs it), else in local workers: the same walks either way
(tests/upstream/test_explore_ray.py); tests/upstream/test_review_git_ref.py reviews locally. Bad input: one line, exit 2, nothing written. Small
budgets, fixed seeds, no wall-clock asserts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

REPO = Path(__file__).resolve().parents[2]
OOM_SEEDS = ["--seed", "120", "--walks", "10", "--depth", "12"]  # seed 125 breaks no_prefill_oom without #23174
POLICY = Path("python", "sglang", "srt", "managers", "schedule_policy.py")
ON_RAY = importlib.util.find_spec("ray") is not None


# -- without SGLang: versions, the mapping, the tree edit ------------------------------------------------
def test_a_tree_version_maps_to_the_newest_adapted_release_at_or_before_it() -> None:
    from upstream.source import nearest_release, version_key

    assert version_key("0.5.13.dev4") < version_key("0.5.13") < version_key("0.5.13.post1") \
        < version_key("0.5.13.post2.dev1") < version_key("0.5.13.post2")
    assert nearest_release("0.5.13") == "0.5.13"
    assert nearest_release("0.5.14.dev3+g1a2b3c") == "0.5.13"  # after 0.5.13, before 0.5.14
    assert nearest_release("0.5.13.dev2") == "0.5.12.post1"  # setuptools-scm: commits after v0.5.12.post1
    assert nearest_release("0.5.16") == "0.5.13"  # no adapter was run on 0.5.16: the one before
    assert nearest_release("0.6.0") == "0.5.23"


def test_the_version_is_read_from_the_tree(tmp_path: Path) -> None:
    from upstream.errors import UpstreamUsageError
    from upstream.source import source_target

    pkg = tmp_path / "python" / "sglang"
    (pkg / "srt" / "managers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "srt" / "managers" / "scheduler.py").write_text("")
    (pkg / "version.py").write_text("try:\n    from sglang._version import __version__\nexcept ImportError:\n"
                                    "    __version__ = '0.0.0.dev0'\n")
    with pytest.raises(UpstreamUsageError, match="cannot read its version"):
        source_target(str(tmp_path))  # no literal at module level, no git tag
    (pkg / "version.py").write_text('__version__ = "0.5.11"\n')
    t = source_target(str(tmp_path))
    assert (t.version, t.release, t.source) == ("0.5.11", "0.5.11", str((tmp_path / "python").resolve()))
    (pkg / "_version.py").write_text("__version__ = version = '0.5.19.dev7+gdeadbee'\n")  # pip install -e's
    t = source_target(str(tmp_path / "python"))  # the folder holding sglang/ names the same tree
    assert (t.version, t.release) == ("0.5.19.dev7+gdeadbee", "0.5.18")
    assert "_version.py" in t.mapping() and "maps to release 0.5.18" in t.mapping()


@pytest.fixture(scope="module")
def trees(sglang_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from upstream.sched import replay as sr
    from upstream.sched.reverts import edit_tree
    from upstream.source import tree_from_release

    sr.install_extras(sglang_root, say=lambda m: None)
    d = tmp_path_factory.mktemp("trees")
    ok = tree_from_release(sglang_root, "0.5.13", d / "ok")
    rev = tree_from_release(sglang_root, "0.5.13", d / "reverted")
    edit_tree(["chunked_swa_page_reserve"], "0.5.13", str(rev / "python"))
    return ok, rev


def test_the_revert_is_a_file_edit_of_the_copy_only(trees: tuple[Path, Path], sglang_root: Path) -> None:
    ok, rev = trees
    released = (sglang_root / "sglang-0.5.13" / "sglang" / "srt" / "managers" / "schedule_policy.py").read_text()
    assert (ok / POLICY).read_text() == released  # the release's file is not written through a hard link
    edited = (rev / POLICY).read_text()
    assert "int(self.rem_swa_tokens) - self.page_size" in released
    assert "_rem_tokens = min(_rem_tokens, int(self.rem_swa_tokens))" in edited
    assert "int(self.rem_swa_tokens) - self.page_size" not in edited
    compile(edited, str(rev / POLICY), "exec")


# -- the review -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reviewed(trees: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict, Path]:
    ok, rev = trees
    out = tmp_path_factory.mktemp("review") / "o"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(["review", "--sglang-base", str(ok), "--sglang-head", str(rev), "--config", "hybrid_swa",
                     "--property", "no_prefill_oom", *OOM_SEEDS, "--out", str(out), "--format", "json",
                     *(["--executor", "ray", "--jobs", "1"] if ON_RAY else [])])
    return code, json.loads(buf.getvalue()), out


def test_review_of_the_reverted_tree_reports_no_prefill_oom_newly_broken(reviewed: tuple[int, dict, Path],
                                                                      trees: tuple[Path, Path]) -> None:
    code, doc, out = reviewed
    assert code == 1, doc
    assert (doc["executor"], doc["jobs"]) == ("ray" if ON_RAY else "local", 1), doc
    (row,) = doc["rows"]
    assert (row["config"], row["property"], row["change"]) == ("hybrid_swa", "no_prefill_oom", "newly broken"), row
    assert row["base"] == "no violation in 10 walks" and row["head"].startswith("violated (seed 125")
    assert row["cross_check"] == "head's counterexample on the base: not reproduced"
    assert doc["head"]["source"] == str((trees[1] / "python").resolve()) and doc["head"]["version"] == "0.5.13"
    files = row["files"]
    assert files["side"] == "head"
    for k in ("itf", "table", "reproducer"):
        assert Path(files[k]).is_file() and Path(files[k]).parent == out / "head" / "hybrid_swa"
    from checker.traces import itf

    tr = itf.read(files["itf"], check=False)
    assert tr.meta["explored_on"] == f"sglang source {doc['head']['source']} (0.5.13)"


def _repro(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True, cwd="/",
                          timeout=300, env=dict(os.environ, KVMC_REPO=str(REPO)))


def test_the_heads_reproducer_fails_on_the_head_and_not_on_the_base(reviewed: tuple[int, dict, Path],
                                                                   trees: tuple[Path, Path]) -> None:
    ok, rev = trees
    script = reviewed[1]["rows"][0]["files"]["reproducer"]
    head = _repro(script)  # the tree it was found on
    assert head.returncode == 0, head.stdout + head.stderr[-2000:]
    assert f"reproduced: no_prefill_oom violated on SGLang source {(rev / 'python').resolve()} (0.5.13)" in head.stdout
    base = _repro(script, "--sglang-source", str(ok))
    assert base.returncode == 1, base.stdout + base.stderr[-2000:]
    assert "AssertionError: not reproduced: no_prefill_oom did not fail" in base.stderr


# -- bad input --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, needle", [
    (["review", "--sglang-base", "{tmp}", "--sglang-head", "==0.5.13"], "--sglang-base '{tmp}': not an SGLang source tree"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "{tmp}/none"], "neither ==VERSION"),
    (["review", "--sglang-base", "==0.5.13"], "--sglang-head: expected with the other one"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "==9.9.9"], "unknown SGLang release '9.9.9'"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "==0.5.13", "--config", "spec_topk"], "draft and target"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "==0.5.13", "--walks", "0"], "--walks 0"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "==0.5.13", "--engine", "induction"],
     "--engine belongs to the model review"),
    (["review", "--sglang-base", "==0.5.13", "--sglang-head", "==0.5.13", "--head-without", "x"],
     "--head-without belongs to the model review"),
    (["review", "--base", "current", "--walks", "5"], "--walks applies to `kvmc review --sglang-base"),
    (["explore", "--sglang-source", "{tmp}", "--config", "hybrid_swa"], "--sglang-source '{tmp}': not an SGLang source tree"),
    (["explore", "--sglang-source", "{tmp}", "--sglang", "==0.5.13", "--config", "hybrid_swa"], "not allowed with"),
    (["explore", "--config", "hybrid_swa"], "one of the arguments --sglang --sglang-source is required"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(args: list[str], needle: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    code = main([a.replace("{tmp}", str(tmp_path)) for a in args] + ["--out", str(out)])
    o, err = capsys.readouterr()
    assert code == 2 and needle.replace("{tmp}", str(tmp_path)) in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not o
