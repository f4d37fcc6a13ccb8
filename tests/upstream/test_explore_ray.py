"""`kvmc explore --executor ray` (issue 61 item 3): the walks' seed shards and the breadth-first
searches' points as Ray tasks (upstream/explore.py::run_shard_on_worker, each running explore's
worker with SGLang imported from the release folder, as `--executor local` does), on a real local
Ray instance. The same walks, counts and counterexamples as the local workers for the same
--jobs; a local instance started for the run is shut down after it, and Ctrl-C leaves no process
behind; bad executor options are one line, exit 2, before any work.

0.5.13 with #23174's fix reverted (`chunked_swa_page_reserve`) on hybrid_swa: seed 125 breaks
no_prefill_oom, the other seeds and conservation hold, so every walk runs on both sides (no early
stop whose count depends on timing). Small budgets, fixed seeds, no wall-clock asserts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]'); .ci/run installs it")

from checker import executors, interrupt  # noqa: E402
from checker.cli import main  # noqa: E402
from checker.executors import ray_cluster  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)

REPO = Path(__file__).resolve().parents[2]
REVERTED = ["--sglang", "==0.5.13", "--revert", "chunked_swa_page_reserve", "--config", "hybrid_swa",
            "--property", "no_prefill_oom", "--property", "conservation"]
TIMING = ("found_after_s", "walks_before", "shrink_seconds", "seconds", "sglang_seconds")


@pytest.fixture(scope="module")
def sched_root(sglang_root: Path) -> Path:
    from upstream.sched import replay as sr

    sr.install_extras(sglang_root, say=lambda m: None)
    return sglang_root


@pytest.fixture
def streamed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The shard jobs handed to Ray (`RayExecutor.stream`), recorded."""
    sent: list[dict[str, Any]] = []
    stream = ray_cluster.RayExecutor.stream

    def recording(self: Any, fn: Any, *args: Any, **kw: Any) -> Any:
        sent.append(dict(args[0], cpus=kw.get("cpus", 1)))
        return stream(self, fn, *args, **kw)

    monkeypatch.setattr(ray_cluster.RayExecutor, "stream", recording)
    return sent


def _json(args: list[str], out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["explore", *args, "--out", str(out), "--json"])
    o = capsys.readouterr().out
    return code, json.loads(o)


def _same(doc: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on the executor: the walks, their counts, the counterexamples."""
    found = {p: {k: v for k, v in f.items() if k not in TIMING and k != "pid"} for p, f in doc["found"].items()}
    return {"walks": doc["walks"], "steps": doc["steps"], "seeds": sorted(doc["walked_seeds"]), "found": found,
            "errors": doc["errors"], "aborted": doc["aborted"]}


def _ray_processes() -> list[int]:
    """This process's descendants that are Ray's (GCS, raylet, workers)."""
    out = []
    for pid in interrupt.descendants():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ray" in cmd and (b"raylet" in cmd or b"gcs_server" in cmd or b"default_worker" in cmd):
            out.append(pid)
    return out


def test_walks_on_ray_match_the_local_workers(sched_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              streamed: list[dict[str, Any]]) -> None:
    import ray

    seeds = ["--seed", "120", "--walks", "12", "--depth", "12", "--jobs", "2"]
    code_l, local = _json([*REVERTED, *seeds], tmp_path / "local", capsys)
    assert ray.is_initialized() is False  # the Ray run below starts its own instance
    code_r, on_ray = _json([*REVERTED, *seeds, "--executor", "ray"], tmp_path / "ray", capsys)
    assert code_l == code_r == 1, (local["errors"], on_ray["errors"])
    assert on_ray["executor"] == "ray" and local["executor"] == "local"
    assert sorted(j["seeds"][0] for j in streamed) == [120, 121] and all(j["cpus"] == 1 for j in streamed), streamed
    assert _same(on_ray) == _same(local)
    assert local["walks"] == 12 and set(local["found"]) == {"no_prefill_oom"}
    assert local["found"]["no_prefill_oom"]["seed"] == 125 and len(local["found"]["no_prefill_oom"]["steps"]) == 3
    for side in ("local", "ray"):  # the counterexample written on either side is the same trace
        assert (tmp_path / side / "no_prefill_oom.itf.json").is_file()
    a, b = (json.loads((tmp_path / s / "no_prefill_oom.itf.json").read_text()) for s in ("local", "ray"))
    assert a["states"] == b["states"]
    # the instance the run started was shut down with it: no Ray process of this one is left
    assert not ray.is_initialized() and _ray_processes() == []


@pytest.fixture(scope="module")
def ray_instance() -> Any:
    """One local Ray instance of two CPUs for the searches below (explore joins it, and leaves it up)."""
    with executors.use("ray", None, 2) as ex:
        yield ex


def test_bfs_points_on_ray_match_the_local_workers(sched_root: Path, ray_instance: Any, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   streamed: list[dict[str, Any]]) -> None:
    pts = ["--search", "bfs", "--seed", "124", "--points", "3", "--depth", "4", "--jobs", "2"]
    code_l, local = _json([*REVERTED, *pts], tmp_path / "local", capsys)
    code_r, on_ray = _json([*REVERTED, *pts, "--executor", "ray"], tmp_path / "ray", capsys)
    assert code_l == code_r == 1, (local["errors"], on_ray["errors"])
    assert sorted(tuple(j["seeds"]) for j in streamed) == [(124, 126), (125,)], streamed
    assert all(j["bfs_jobs"] == 1 for j in streamed)  # a point's search whole in its shard
    per_point = lambda d: [(p["seed"], p["states"], p["abstract_states"], p["successors"], p["complete_depth"])  # noqa: E731
                           for p in d["bfs_points"]]
    assert per_point(on_ray) == per_point(local) and len(per_point(local)) == 3, (per_point(local), per_point(on_ray))
    assert on_ray["bfs_found"] == local["bfs_found"] == [
        {"seed": 125, "property": "no_prefill_oom", "depth": 3, "iterations": 3}], local["bfs_found"]
    assert _same(on_ray) == _same(local)


def test_one_point_bfs_on_ray_holds_its_cpus_and_finds_the_oom(sched_root: Path, ray_instance: Any, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str],
                                                               streamed: list[dict[str, Any]]) -> None:
    code = main(["explore", *REVERTED, "--search", "bfs", "--seed", "125", "--depth", "5", "--jobs", "2",
                 "--executor", "ray", "--out", str(tmp_path / "o")])
    text = capsys.readouterr().out
    assert code == 1, text
    assert len(streamed) == 1 and streamed[0]["cpus"] == 2 and streamed[0]["bfs_jobs"] == 2, streamed
    assert re.search(r"no_prefill_oom +violated: .*shortest counterexample: 3 iterations, breadth-first from the "
                     r"parameter point of seed 125", text), text
    assert re.search(r"conservation +holds to depth 5 on the explored abstract states", text), text
    assert "(2 jobs on Ray;" in text


@pytest.mark.parametrize("args, says", [
    (["--executor", "dask"], "--executor 'dask': expected one of local, ray"),
    (["--ray-address", "auto"], "--ray-address 'auto' needs --executor ray"),
    (["--executor", "ray", "--ray-address", "headnode"], "expected auto or HOST:PORT"),
    (["--executor", "ray", "--points", "2"], "--points 2 without --search bfs"),
])
def test_bad_executor_options_are_one_line_before_any_work(args: list[str], says: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from upstream import explore

    monkeypatch.setattr(explore, "explore", lambda *a, **k: pytest.fail("work started"))
    code = main(["explore", "--sglang", "==0.5.13", "--config", "hybrid_swa", *args, "--out", str(tmp_path / "o")])
    o, err = capsys.readouterr()
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not o and not (tmp_path / "o").exists()


def test_review_bad_executor_is_one_line_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from upstream import explore

    monkeypatch.setattr(explore, "explore", lambda *a, **k: pytest.fail("work started"))
    code = main(["review", "--sglang-base", "==0.5.13", "--sglang-head", "==0.5.13", "--executor", "dask",
                 "--out", str(tmp_path / "o")])
    o, err = capsys.readouterr()
    assert code == 2 and "--executor 'dask': expected one of local, ray" in err and len(err.strip().splitlines()) == 1, err
    assert not o and not (tmp_path / "o").exists()


def test_without_the_ray_extra(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as on an install without the extra
    code = main(["explore", "--sglang", "==0.5.13", "--config", "hybrid_swa", "--executor", "ray",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "pip install" in err and "[ray]" in err and len(err.splitlines()) == 1, err


def _tagged(tag: str, but: int) -> list[tuple[int, bytes]]:
    """Live processes whose environment carries `tag` (every descendant of the command inherits it:
    Ray's GCS, raylet and workers, explore's workers), other than `but`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == but:
            continue
        try:
            env = (d / "environ").read_bytes()
            cmd = (d / "cmdline").read_bytes()
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"KVMC_TEST_TAG={tag}".encode() in env and state != "Z":
            out.append((int(d.name), cmd))
    return out


def test_ctrl_c_on_ray_reports_and_leaves_no_process(sched_root: Path, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    code = "import sys; from checker.cli import main; sys.exit(main())"
    p = subprocess.Popen([sys.executable, "-c", code, "explore", "--sglang", "==0.5.13", "--config", "hybrid_swa",
                          "--property", "conservation", "--walks", "1000000", "--jobs", "2", "--executor", "ray",
                          "--budget", "300", "--out", str(tmp_path / "o")], cwd=str(REPO), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, KVMC_TEST_TAG=tag))
    workers: list[tuple[int, bytes]] = []
    for _ in range(900):  # until both shards' workers run on Ray (Ray starts, they import SGLang): at most 90 s
        workers = [w for w in _tagged(tag, p.pid) if b"upstream.sched.explore" in w[1]]
        if len(workers) == 2 or p.poll() is not None:
            break
        time.sleep(0.1)
    assert len(workers) == 2, workers
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, out + err[-2000:]
    assert "INTERRUPTED by SIGINT" in out and "conservation" in out and "no violation in" in out, out + err[-2000:]
    left: list[tuple[int, bytes]] = []
    for _ in range(50):  # reaped processes may take a moment to go
        left = _tagged(tag, p.pid)
        if not left:
            break
        time.sleep(0.1)
    assert left == [], left
