"""`kvmc explore --search bfs` (issue 61 item 3): breadth-first search over SGLang's own scheduler
from one parameter point, every event choice per iteration, states deduplicated through the
abstraction (upstream/sched/bfs.py), the walks' oracle and counterexample output.

On 0.5.13 with #23174's fix reverted the search finds `no_prefill_oom`, its counterexample no
longer than the walks' shrunk one from the same seed, and the reproducer it writes reproduces; on
the 0.5.13 release the same point holds to a small depth with its count of distinct states; a
state cap that stops the search gives `unknown (partial)`, exit 3, never `holds`. Over several
points (`--points N`) the verdict says at how many points a property held, and a cut point makes it
unknown (partial). Small depths, fixed seeds, no wall-clock asserts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

REPO = Path(__file__).resolve().parents[2]
POINT = ["--config", "hybrid_swa", "--seed", "125", "--property", "no_prefill_oom"]  # seed 125: #23174's OOM


@pytest.fixture(scope="module")
def sched_root(sglang_root: Path) -> Path:
    from upstream.sched import replay as sr

    sr.install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _explore(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["explore", *args, "--out", str(out)])
    return code, capsys.readouterr().out


def test_bfs_finds_the_23174_oom_no_longer_than_the_walks_shrunk_one(
        sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    revert = ["--sglang", "==0.5.13", "--revert", "chunked_swa_page_reserve", *POINT]
    code, text = _explore([*revert, "--search", "bfs", "--depth", "6"], tmp_path / "bfs", capsys)
    assert code == 1, text
    m = re.search(r"no_prefill_oom +violated: SGLang raised: Out of memory.*\(shortest counterexample: (\d+) iterations, "
                  r"breadth-first from the parameter point of seed 125", text)
    assert m is not None, text
    from checker.traces import itf

    tr = itf.read(tmp_path / "bfs" / "no_prefill_oom.itf.json", check=False)
    assert tr.prop == "no_prefill_oom" and tr.depth == int(m.group(1)) and tr.meta["explore"]["search"] == "bfs"
    code, walks = _explore([*revert, "--walks", "1", "--depth", "12"], tmp_path / "walk", capsys)
    assert code == 1, walks
    w = re.search(r"no_prefill_oom +violated: .*\((\d+) iterations after shrinking from (\d+); walk seed 125", walks)
    assert w is not None, walks
    assert int(m.group(1)) <= int(w.group(1)) <= int(w.group(2)), (text, walks)
    p = subprocess.run([sys.executable, str(tmp_path / "bfs" / "no_prefill_oom_repro.py")], capture_output=True,
                       text=True, cwd=str(tmp_path), timeout=300, env=dict(os.environ, KVMC_REPO=str(REPO)))
    assert p.returncode == 0 and "reproduced: no_prefill_oom violated on SGLang 0.5.13 at step" in p.stdout, \
        p.stdout + p.stderr[-2000:]


def test_bfs_on_the_release_holds_to_a_small_depth_with_its_state_count(
        sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _explore(["--sglang", "==0.5.13", *POINT, "--search", "bfs", "--depth", "4"], tmp_path / "o", capsys)
    assert code == 0, text
    m = re.search(r"no_prefill_oom +holds to depth 4 on the explored abstract states \((\d+) distinct, (\d+) model states",
                  text)
    assert m is not None, text
    levels = [int(x) for x in re.findall(r"depth +\d+: .* (\d+) distinct \(", text)]
    assert len(levels) == 4 and levels == sorted(levels) and levels[-1] == int(m.group(1)) >= 5, text
    assert int(m.group(2)) <= int(m.group(1))  # the hidden state splits model states, never merges them
    assert "not a proof" in text and "proved" not in text
    assert not (tmp_path / "o").exists()


def test_the_state_cap_gives_unknown_never_holds(sched_root: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _explore(["--sglang", "==0.5.13", *POINT, "--search", "bfs", "--depth", "6", "--max-states", "5"],
                          tmp_path / "o", capsys)
    assert code == 3, text
    line = next(x for x in text.splitlines() if x.startswith("no_prefill_oom"))
    assert "unknown (partial): the state cap 5 was hit at depth" in line and "holds" not in line, text


def test_bfs_over_points_says_at_how_many_points_it_held(sched_root: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`--points 3`: the parameter points of seeds 124..126, a search each (two shards): #23174's
    OOM at the point of seed 125 alone, conservation held at each point to the depth - for those
    points, never for the config; a state cap that cuts two of the points is unknown (partial)."""
    pts = ["--sglang", "==0.5.13", "--config", "hybrid_swa", "--property", "no_prefill_oom", "--property",
           "conservation", "--search", "bfs", "--seed", "124", "--points", "3", "--depth", "5"]
    code, text = _explore([*pts, "--revert", "chunked_swa_page_reserve", "--jobs", "2"], tmp_path / "o", capsys)
    assert code == 1, text
    assert re.search(r"no_prefill_oom +violated: SGLang raised: Out of memory.*\(shortest counterexample: 3 iterations, "
                     r"breadth-first from the parameter point of seed 125; violated at 1 of the 3 points \(seed 125\)",
                     text), text
    assert re.search(r"conservation +holds to depth 5 at each of the 3 parameter points of seeds 124\.\.126 on their "
                     r"explored abstract states \(\d+ distinct states.*not a proof for the config", text), text
    points = [x for x in text.splitlines() if x.startswith("  point of seed ")]
    assert [int(x.split()[3]) for x in points] == [124, 125, 126], text
    assert "no_prefill_oom violated at depth 3" in points[1] and "violated" not in points[0] + points[2], points
    from checker.traces import itf

    tr = itf.read(tmp_path / "o" / "no_prefill_oom.itf.json", check=False)
    assert tr.depth == 3 and tr.meta["explore"]["seed"] == 125
    code, text = _explore([*pts, "--property", "conservation", "--max-states", "10", "--jobs", "1"], tmp_path / "cap", capsys)
    assert code == 3, text
    line = next(x for x in text.splitlines() if x.startswith("conservation"))
    assert re.search(r"unknown \(partial\): holds to depth 5 at 1 of the 3 points; the state cap 10 was hit at 2 "
                     r"\(seeds 124, 125\)", line), line
    assert "at each of" not in text, text


@pytest.mark.parametrize("args, needle", [
    (["--search", "bfs", "--walks", "3"], "--walks 3 with --search bfs"),
    (["--search", "bfs", "--points", "0"], "--points 0: expected a positive integer"),
    (["--points", "2"], "--points 2 without --search bfs"),
    (["--search", "bfs", "--compare-model"], "--compare-model with --search bfs"),
    (["--search", "bfs", "--max-states", "0"], "--max-states 0"),
    (["--search", "dfs"], "invalid choice: 'dfs'"),
])
def test_bad_search_input_is_one_line_exit_2(args: list[str], needle: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    try:
        code = main(["explore", "--sglang", "==0.5.13", "--config", "hybrid_swa", *args, "--out", str(out)])
    except SystemExit as e:  # argparse's own refusal (an unknown choice)
        code = e.code
    o, err = capsys.readouterr()
    assert code == 2 and needle in err, err
    assert not o and not out.exists()
