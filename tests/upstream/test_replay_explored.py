"""`kvmc replay --against` on the traces `kvmc explore` writes (issue 61 item 4): the trace's events
re-run on the SGLang named, SGLang making its own choices, the trace's property judged after every
iteration (upstream/sched/replay.py::replay_explored, upstream/sched/explore.py::replay_trace).

Two counterexamples, each from one explore walk on a CI release: #23174's `no_prefill_oom`
(0.5.13 with the fix reverted, walk seed 125) and `swa_busy_check`'s `busy_check_sound`
(0.5.10.post1, walk seed 0). On the SGLang each was explored on it is planned `reproduced`; on any
other SGLang `passed`: on 0.5.13 (both fixes in) both pass, exit 0; on a source tree with #23174's
fix reverted as a file edit (another SGLang with the same bug) no_prefill_oom reproduces, which is
not the plan there: exit 1, as `kvmc explore` finding it there would be. Bad input: one line, exit 2.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

OOM = ["--sglang", "==0.5.13", "--revert", "chunked_swa_page_reserve", "--property", "no_prefill_oom",
       "--seed", "125", "--walks", "1", "--depth", "12"]  # seed 125 breaks no_prefill_oom without #23174
BUSY = ["--sglang", "==0.5.10.post1", "--property", "busy_check_sound", "--walks", "1", "--depth", "8"]


def _quiet(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def traces(sglang_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from upstream.sched import replay as sr

    sr.install_extras(sglang_root, say=lambda m: None)
    d = tmp_path_factory.mktemp("explored")
    out = {}
    for name, args in (("no_prefill_oom", OOM), ("busy_check_sound", BUSY)):
        code, text = _quiet(["explore", *args, "--config", "hybrid_swa", "--out", str(d / name)])
        assert code == 1, text
        out[name] = str(d / name / f"{name}.itf.json")
    return out


def _replay(against: list[str], files: list[str]) -> tuple[int, dict]:
    code, text = _quiet(["replay", "--against", *against, *files, "--json"])
    return code, json.loads(text)


def _by_file(doc: dict) -> dict[str, dict]:
    return {Path(o["file"]).stem.removesuffix(".itf"): o for o in doc["outcomes"]}


def test_each_reproduces_on_the_sglang_it_was_explored_on(traces: dict[str, str]) -> None:
    code, doc = _replay(["sglang==0.5.13", "--revert", "chunked_swa_page_reserve"], [traces["no_prefill_oom"]])
    (o,) = doc["outcomes"]
    assert code == 0 and o["status"] == "reproduced" and o["mode"] == "reproduce", o
    assert o["message"].startswith("no_prefill_oom fails at step ") and "Out of memory" in o["message"], o
    assert "earlier than recorded" not in o["message"]
    code, doc = _replay(["sglang==0.5.10.post1"], [traces["busy_check_sound"]])
    (o,) = doc["outcomes"]
    assert code == 0 and o["status"] == "reproduced" and "busy check crashed (NotImplementedError" in o["message"], o


def test_on_0_5_13_with_the_fixes_neither_fails(traces: dict[str, str]) -> None:
    code, doc = _replay(["==0.5.13"], [traces["no_prefill_oom"], traces["busy_check_sound"]])
    got = _by_file(doc)
    assert code == 0, doc
    for name in ("no_prefill_oom", "busy_check_sound"):
        o = got[name]
        assert o["status"] == "passed" and o["mode"] == "events" and o["as_planned"], o
        assert o["message"].startswith(f"{name} holds at every one of the "), o
    # #23174's fix at work: SGLang departs from the recorded run before the step that failed there
    assert got["no_prefill_oom"]["detail"][0].startswith("SGLang departs from the recorded run first at step "), got


def test_a_failure_that_reproduces_on_another_sglang_is_exit_1(traces: dict[str, str], sglang_root: Path,
                                                                tmp_path: Path) -> None:
    from upstream.sched.reverts import edit_tree
    from upstream.source import tree_from_release

    tree = tree_from_release(sglang_root, "0.5.13", tmp_path / "reverted")
    edit_tree(["chunked_swa_page_reserve"], "0.5.13", str(tree / "python"))
    code, text = _quiet(["replay", "--against", str(tree), traces["no_prefill_oom"]])
    assert code == 1, text
    assert f"{traces['no_prefill_oom']}: reproduced (no_prefill_oom fails at step " in text, text
    assert "plan: explored on sglang==0.5.13 with chunked_swa_page_reserve reverted; on SGLang source " in text
    assert "0/1 behave as planned on SGLang source " in text


@pytest.mark.parametrize("against, needle", [
    ("{tmp}/none", "--against '{tmp}/none': neither ==VERSION"),
    ("sglang=0.5.13", "--against 'sglang=0.5.13': expected sglang==VERSION"),
    ("==9.9.9", "unknown SGLang release '9.9.9'"),
])
def test_bad_against_is_one_line_exit_2(against: str, needle: str, traces: dict[str, str], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--against", against.replace("{tmp}", str(tmp_path)), traces["no_prefill_oom"]])
    o, err = capsys.readouterr()
    assert code == 2 and needle.replace("{tmp}", str(tmp_path)) in err and len(err.strip().splitlines()) == 1, err
    assert not o


def test_a_model_trace_on_a_source_tree_is_bad_input(traces: dict[str, str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from upstream.source import tree_from_release
    from upstream.install import default_dir

    tree = tree_from_release(default_dir(), "0.5.13", tmp_path / "t")
    model = str(Path(__file__).resolve().parents[2] / "counterexamples")
    files = sorted(Path(model).rglob("*.itf.json"))
    assert files
    code = main(["replay", "--against", str(tree), str(files[0]), traces["no_prefill_oom"]])
    err = capsys.readouterr().err
    assert code == 2 and "a model trace replays on an installed release" in err and len(err.strip().splitlines()) == 1, err
