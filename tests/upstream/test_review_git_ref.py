"""`kvmc review --sglang-base CHECKOUT@REF --sglang-head CHECKOUT@REF` (issue 61 item 5, REF_OR_DIR):
commits of a git checkout of SGLang as the two sides, each written into a temporary folder with
`git archive` and removed after the command, Ctrl-C included (upstream/source.py::ref_target).

The checkout is made here: 0.5.13's released package committed as `python/sglang/` and tagged
v0.5.13 (its `_version.py` ignored, as in SGLang's own repository: the version comes from the tag),
then #23174's fix reverted as an edit of schedule_policy.py (upstream/sched/reverts.py::edit_tree)
committed on top. The review of the first commit against the second reports no_prefill_oom newly
broken (one walk seed, 125, which breaks it without the fix); the head's reproducer, run on its
own, writes the head commit's tree again and reproduces. A ref that is no commit, a folder outside
git, a commit without the package: one line naming the value, exit 2, nothing written or left.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

REPO = Path(__file__).resolve().parents[2]
SEED = ["--seed", "125", "--walks", "1", "--depth", "12"]  # seed 125 breaks no_prefill_oom without #23174


def _git(d: Path, *argv: str) -> str:
    return subprocess.run(["git", "-C", str(d), "-c", "user.name=kvmc", "-c", "user.email=kvmc@example.invalid",
                           *argv], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def checkout(sglang_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from upstream.sched import replay as sr
    from upstream.sched.reverts import edit_tree
    from upstream.source import tree_from_release

    sr.install_extras(sglang_root, say=lambda m: None)
    d = tree_from_release(sglang_root, "0.5.13", tmp_path_factory.mktemp("git") / "sglang")
    (d / ".gitignore").write_text("__pycache__/\n_version.py\n")
    (d / "README.md").write_text("not SGLang's: a test checkout\n")
    _git(d, "init", "-q")
    _git(d, "add", ".")
    _git(d, "commit", "-qm", "0.5.13 as released")
    _git(d, "tag", "v0.5.13")
    edit_tree(["chunked_swa_page_reserve"], "0.5.13", str(d / "python"))
    _git(d, "commit", "-qam", "revert #23174")
    return d


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("kvmc-sglang-ref-*"))


# -- the ref itself -----------------------------------------------------------------------------------------
def test_a_ref_is_written_to_a_temporary_tree_removed_on_ctrl_c(checkout: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from upstream.source import ref_target

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    policy = Path("sglang", "srt", "managers", "schedule_policy.py")
    with pytest.raises(KeyboardInterrupt), contextlib.ExitStack() as trees:
        base = ref_target(f"{checkout}@v0.5.13", "--sglang-base", trees)
        head = ref_target(f"{checkout / 'python'}@HEAD", "--sglang-head", trees)  # any folder of the work tree
        assert (base.version, base.release, base.version_from) == ("0.5.13", "0.5.13", f"git tag v0.5.13 of commit "
                                                                   f"{base.commit[:12]}")
        assert head.ref == f"{checkout.resolve()}@HEAD" and head.commit == _git(checkout, "rev-parse", "HEAD")
        assert "int(self.rem_swa_tokens) - self.page_size" in (Path(base.source) / policy).read_text()
        assert "int(self.rem_swa_tokens) - self.page_size" not in (Path(head.source) / policy).read_text()
        assert len(_leftovers(tmp_path)) == 2 and head.label().startswith(f"SGLang source {checkout.resolve()}@HEAD")
        raise KeyboardInterrupt  # what Ctrl-C raises in the command
    assert _leftovers(tmp_path) == []
    assert _git(checkout, "status", "--porcelain") == ""  # the checkout is only read


@pytest.mark.parametrize("value, needle", [
    ("{repo}@nope", "--sglang-head '{repo}@nope': 'nope' is not a commit of the git checkout {repo}"),
    ("{tmp}@HEAD", "--sglang-head '{tmp}@HEAD': '{tmp}' is not in a git work tree"),
    ("{tmp}/none@HEAD", "--sglang-head '{tmp}/none@HEAD': '{tmp}/none' is no folder"),
    ("{repo}@", "expected CHECKOUT@REF with a ref after the @"),
    ("{repo}@HEAD:README.md", "is not a commit of the git checkout"),
])
def test_a_bad_ref_is_one_line_exit_2_nothing_written_or_left(value: str, needle: str, checkout: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    value, needle = (x.replace("{repo}", str(checkout.resolve())).replace("{tmp}", str(tmp_path)) for x in (value, needle))
    out = tmp_path / "o"
    code = main(["review", "--sglang-base", "==0.5.13", "--sglang-head", value, "--out", str(out)])
    o, err = capsys.readouterr()
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not o and _leftovers(tmp_path) == []


def test_a_commit_without_the_package_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "other"
    d.mkdir()
    (d / "x.txt").write_text("x\n")
    _git(d, "init", "-q")
    _git(d, "add", ".")
    _git(d, "commit", "-qm", "no sglang here")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(d)
    code = main(["explore", "--sglang-source", "@HEAD", "--config", "hybrid_swa", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "--sglang-source '@HEAD': commit " in err and "holds no SGLang package" in err, err
    assert len(err.strip().splitlines()) == 1 and _leftovers(tmp_path) == []


# -- the review of two commits --------------------------------------------------------------------------------
def test_review_of_two_commits_reports_no_prefill_oom_newly_broken(checkout: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(checkout)  # `@REF`: the current directory's checkout
    out = tmp_path / "o"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(["review", "--sglang-base", "@HEAD~1", "--sglang-head", f"{checkout}@HEAD", "--config", "hybrid_swa",
                     "--property", "no_prefill_oom", *SEED, "--out", str(out), "--format", "json"])
    doc = json.loads(buf.getvalue())
    assert code == 1, doc
    (row,) = doc["rows"]
    assert (row["property"], row["change"]) == ("no_prefill_oom", "newly broken"), row
    assert row["cross_check"] == "head's counterexample on the base: not reproduced"
    head = _git(checkout, "rev-parse", "HEAD")
    assert doc["base"]["ref"] == f"{checkout.resolve()}@HEAD~1" and doc["base"]["commit"] == _git(checkout, "rev-parse", "HEAD~1")
    assert doc["head"]["commit"] == head and doc["head"]["version"] == "0.5.13"
    assert _leftovers(tmp_path) == []  # both temporary trees removed after the review
    from checker.traces import itf

    tr = itf.read(row["files"]["itf"], check=False)
    assert tr.meta["explored_on"] == f"sglang source {checkout.resolve()}@HEAD (commit {head[:12]}, 0.5.13)"
    assert tr.meta["explore"]["target"]["commit"] == head
    # the reproducer names the commit, not the removed folder: run on its own, it writes the tree again
    p = subprocess.run([sys.executable, row["files"]["reproducer"]], capture_output=True, text=True, cwd="/", timeout=300,
                       env=dict(os.environ, KVMC_REPO=str(REPO), TMPDIR=str(tmp_path)))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert f"reproduced: no_prefill_oom violated on SGLang source {checkout.resolve()}@{head}" in p.stdout
    assert _leftovers(tmp_path) == []
