"""`kvmc explore` on SGLang's own scheduler (issue 61): seeded walks of kvmc's environment events,
SGLang making its own choices, kvmc's properties as the oracle on the real objects.

On the CI releases (tests/upstream/conftest.py): 0.5.13 with #23174's fix reverted
(`--revert chunked_swa_page_reserve`) fails `no_prefill_oom` within a few walks and 0.5.13 itself
passes the same seeds; 0.5.10.post1's busy check crashes on SWARadixCache (`busy_check_sound`,
`swa_busy_check`'s seeded bug) and 0.5.13's does not. 0.5.23 (not a CI release) runs where
installed. The reproducer explore writes runs on its own and reproduces; an exception inside
SGLang that no property names is an error (exit 4), never a finding; bad input is one line, exit 2,
nothing written. Small budgets, fixed seeds, no wall-clock asserts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

REPO = Path(__file__).resolve().parents[2]
OOM_SEEDS = ["--seed", "120", "--walks", "10", "--depth", "12"]  # seed 125 breaks no_prefill_oom without #23174


@pytest.fixture(scope="module")
def sched_root(sglang_root: Path) -> Path:
    from upstream.sched import replay as sr

    sr.install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _explore(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["explore", *args, "--out", str(out)])
    o, e = capsys.readouterr()
    return code, o, e


@pytest.fixture(scope="module")
def reverted(sched_root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    """One explore of 0.5.13 with #23174's fix reverted, shared by the tests below."""
    out = tmp_path_factory.mktemp("explore") / "reverted"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(["explore", "--sglang", "==0.5.13", "--revert", "chunked_swa_page_reserve", "--config", "hybrid_swa",
                     "--property", "no_prefill_oom", *OOM_SEEDS, "--out", str(out)])
    return code, buf.getvalue(), out


def test_explore_finds_the_23174_oom_with_the_fix_reverted(reverted: tuple[int, str, Path]) -> None:
    code, text, out = reverted
    assert code == 1, text
    assert "no_prefill_oom           violated: SGLang raised: Out of memory" in text, text
    assert "with chunked_swa_page_reserve reverted" in text
    for f in ("no_prefill_oom.itf.json", "no_prefill_oom.txt", "no_prefill_oom_repro.py"):
        assert (out / f).is_file(), f
    from checker.traces import itf

    tr = itf.read(out / "no_prefill_oom.itf.json", check=False)
    assert tr.prop == "no_prefill_oom" and tr.meta["explored_on"] == "sglang==0.5.13"
    assert 1 <= tr.depth <= 6 and any("recv.arrive[" in k for st in tr.steps for k in st.picks)  # shrunk from the walk


def test_the_reproducer_explore_writes_reproduces_on_its_own(reverted: tuple[int, str, Path], tmp_path: Path) -> None:
    _code, _text, out = reverted
    p = subprocess.run([sys.executable, str(out / "no_prefill_oom_repro.py")], capture_output=True, text=True,
                       cwd=str(tmp_path), timeout=300, env=dict(os.environ, KVMC_REPO=str(REPO)))
    assert p.returncode == 0, p.stdout + p.stderr[-2000:]
    assert "reproduced: no_prefill_oom violated on SGLang 0.5.13" in p.stdout


def test_explore_with_the_fix_reports_no_violation_in_the_same_seeds(
        sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fixed"
    code, text, _ = _explore(["--sglang", "==0.5.13", "--config", "hybrid_swa", "--property", "no_prefill_oom",
                              *OOM_SEEDS], out, capsys)
    assert code == 0, text
    assert "no_prefill_oom           no violation in 10 walks of depth 12, seeds 120..129" in text, text
    assert "holds" not in text.split("\n", 1)[1]  # a search of some executions, never a proof
    assert not out.exists()  # nothing to write


BUSY = ["--config", "hybrid_swa", "--property", "busy_check_sound", "--walks", "3", "--depth", "8"]


def test_explore_finds_the_swa_busy_check_crash_on_0_5_10_post1(
        sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.10.post1's busy check calls evictable_size() on SWARadixCache and crashes
    (NotImplementedError) while the ledger is exact: busy_check_sound (the `swa_busy_check` fix,
    0.5.11). Through the property, not as a crash of kvmc's."""
    code, text, _ = _explore(["--sglang", "==0.5.10.post1", *BUSY], tmp_path / "old", capsys)
    assert code == 1 and "busy_check_sound         violated: SGLang's busy check crashed (NotImplementedError" in text, text


def test_explore_0_5_13_busy_check_passes_the_same_seeds(
        sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = _explore(["--sglang", "==0.5.13", *BUSY], tmp_path / "new", capsys)
    assert code == 0 and "busy_check_sound         no violation in 3 walks of depth 8, seeds 0..2" in text, text


def test_explore_0_5_23_same_seeds_no_oom(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from upstream.install import default_dir, is_installed
    from upstream.sched import replay as sr

    root = default_dir()
    if not is_installed(root, "0.5.23") or not (sr.extras_dir(root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang 0.5.23 is not installed under {root} (kvmc sglang install 0.5.23; not a CI release)")
    code, text, _ = _explore(["--sglang", "==0.5.23", "--config", "hybrid_swa", "--property", "no_prefill_oom",
                              *OOM_SEEDS], tmp_path / "o", capsys)
    assert code == 0 and "no violation in 10 walks of depth 12, seeds 120..129" in text, text


def test_a_crash_no_property_names_is_an_error_not_a_finding(sched_root: Path) -> None:
    """An exception raised inside SGLang's iteration (planted in the replaced forward) that is not an
    allocation failure nor the insert assertion: run_events raises ExploreError (the worker reports
    an error; `kvmc explore` exits 4), and no property is judged violated."""
    from upstream.install import release_env
    from upstream.sched.replay import worker_path

    code = (
        "from specs.configs import CONFIGS\n"
        "from model.designs import PRESETS\n"
        "from upstream.sched import harness, explore as ex\n"
        "harness.setup()\n"
        "from model.config import concrete_params\n"
        "def boom(self, batch): raise ValueError('planted inside the iteration')\n"
        "harness.RealScheduler._run_batch = boom\n"
        "cfg = CONFIGS['hybrid_swa']; d = PRESETS['v0.5.13']\n"
        "p = concrete_params(cfg, full_tokens=32, swa_tokens=32, sliding_window_size=4, chunked_prefill_size=8,\n"
        "                    max_prefill_tokens=32, req_pool_size=2, input_len=(2, 2), max_new_tokens=(2, 2))\n"
        "try:\n"
        "    r = ex.run_events(cfg, p, ex.Oracle(list(ex.PROPS), 4, d), steps=[{'recv.arrive[0]': True}, {}, {}])\n"
        "    print('FINDING', r.violation)\n"
        "except ex.ExploreError as e:\n"
        "    print('ERROR', str(e).splitlines()[0])\n"
    )
    env = release_env(worker_path(sched_root, "0.5.13"))
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(REPO), timeout=300)
    assert "ERROR step 1: SGLang raised ValueError: planted inside the iteration (no kvmc property names this crash)" \
        in p.stdout, p.stdout + p.stderr[-2000:]


@pytest.mark.parametrize("args, needle", [
    (["--sglang", "==9.9.9", "--config", "hybrid_swa"], "unknown SGLang release '9.9.9'"),
    (["--sglang", "==0.5.13", "--config", "huge"], "--config 'huge'"),
    (["--sglang", "==0.5.13", "--config", "hybrid_swa", "--walks", "0"], "--walks 0"),
    (["--sglang", "==0.5.13", "--config", "hybrid_swa", "--property", "holds"], "--property 'holds'"),
    (["--sglang", "==0.5.13", "--config", "hybrid_swa", "--revert", "nofix"], "'nofix'"),
    (["--sglang", "==0.5.13", "--config", "spec_topk"], "draft and target models"),
    (["--sglang", "sglang=0.5.13", "--config", "hybrid_swa"], "sglang=0.5.13"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(args: list[str], needle: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    code, text, err = _explore(args, out, capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not text


def test_out_that_is_a_file_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    code, _, err = _explore(["--sglang", "==0.5.13", "--config", "hybrid_swa"], f, capsys)
    assert code == 2 and "is not a folder" in err and f.read_text() == "x"


def _explore_workers(parent: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"upstream.sched.explore" in cmd:
            out.append(int(d.name))
    return out


def test_ctrl_c_ends_the_workers_and_reports_the_walks_so_far(sched_root: Path, tmp_path: Path) -> None:
    import signal
    import time

    code = "import sys; from checker.cli import main; sys.exit(main())"
    p = subprocess.Popen([sys.executable, "-c", code, "explore", "--sglang", "==0.5.13", "--config", "hybrid_swa",
                          "--property", "conservation", "--walks", "1000000", "--jobs", "2", "--budget", "300",
                          "--out", str(tmp_path / "o")], cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    workers: list[int] = []
    for _ in range(600):  # until both workers are running (they import SGLang), at most a minute
        workers = _explore_workers(p.pid)
        if len(workers) == 2:
            break
        time.sleep(0.1)
    assert len(workers) == 2
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err[-2000:]
    assert "INTERRUPTED by SIGINT" in out and "conservation" in out and "no violation in" in out, out
    for w in workers:
        assert not Path(f"/proc/{w}").exists() or "Z" in Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0]
