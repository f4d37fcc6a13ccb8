"""upstream/serve.py: the shared worker process (one per release) answers each call from a fork of
its set-up state, so a call sees nothing an earlier call changed, and a call that fails reports as
a one-shot worker's crash does; `spawn`'s children stream their output and run side by side, with
their exit status, stderr and kill as a Popen's. Checked on stand-in servers (no SGLang: a few milliseconds)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from upstream import serve

REPO = Path(__file__).resolve().parents[2]

# a "worker" whose setup sets a global; each request may change it, crash or exit
SERVER = r'''
import os, sys
from upstream.serve import serve

STATE = {"setup": os.getpid(), "calls": 0}

def run(req):
    STATE["calls"] += 1
    leaked = os.environ.get("KVMC_TEST_LEAK")
    os.environ["KVMC_TEST_LEAK"] = "set by an earlier call"
    if req == "raise":
        raise RuntimeError("planted: the call raised")
    if req == "exit3":
        sys.exit(3)
    if req == "die":
        os.kill(STATE["setup"], 9)  # the server itself goes
    print("a stray line on stdout")
    return {"calls": STATE["calls"], "leaked": leaked, "release": os.environ.get("KVMC_TEST_RELEASE"), "pid": os.getpid(),
            "server": STATE["setup"], "test": os.environ.get("PYTEST_CURRENT_TEST")}

serve(run)
'''


def _cmd() -> list[str]:
    return [sys.executable, "-c", SERVER]


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), **extra)


def test_each_call_starts_from_the_set_up_state() -> None:
    with serve.shared_workers():
        assert serve.active()
        got = [serve.ask(_cmd(), _env(), str(REPO), "ok") for _ in range(3)]
    assert not serve.active()
    results = [r for r, _rc, _err in got]
    assert all(rc == 0 for _r, rc, _err in got), got
    assert [r["calls"] for r in results] == [1, 1, 1], results  # no call saw another's change ...
    assert [r["leaked"] for r in results] == [None, None, None], results  # ... to its globals or environment
    assert len({r["server"] for r in results}) == 1, results  # one server ...
    assert len({r["pid"] for r in results}) == 3, results  # ... a fresh child per call


def test_a_call_that_raises_or_exits_reports_its_status_and_stderr() -> None:
    with serve.shared_workers():
        r, rc, err = serve.ask(_cmd(), _env(), str(REPO), "raise")
        assert (r, rc) == (None, 1) and "RuntimeError: planted: the call raised" in err, (r, rc, err)
        r, rc, err = serve.ask(_cmd(), _env(), str(REPO), "exit3")
        assert (r, rc) == (None, 3) and "planted" not in err, (r, rc, err)  # only this call's stderr
        r, rc, _err = serve.ask(_cmd(), _env(), str(REPO), "ok")  # the server still answers
        assert rc == 0 and r["calls"] == 1, r


def test_a_server_that_died_is_replaced() -> None:
    with serve.shared_workers():
        first, _rc, _err = serve.ask(_cmd(), _env(), str(REPO), "ok")
        r, rc, _err = serve.ask(_cmd(), _env(), str(REPO), "die")
        assert r is None and rc != 0, (r, rc)
        again, rc, _err = serve.ask(_cmd(), _env(), str(REPO), "ok")
        assert rc == 0 and again["server"] != first["server"], (first, again)


def test_servers_are_per_environment_and_pytest_s_test_name_is_per_call() -> None:
    with serve.shared_workers():
        a, _, _ = serve.ask(_cmd(), _env(PYTEST_CURRENT_TEST="t1 (call)"), str(REPO), "ok")
        b, _, _ = serve.ask(_cmd(), _env(PYTEST_CURRENT_TEST="t2 (call)"), str(REPO), "ok")
        c, _, _ = serve.ask(_cmd(), _env(KVMC_TEST_RELEASE="another release"), str(REPO), "ok")
    assert a["server"] == b["server"] and (a["test"], b["test"]) == ("t1 (call)", "t2 (call)"), (a, b)
    assert c["server"] != a["server"] and c["release"] == "another release", c


def test_outside_shared_workers_there_is_no_server() -> None:
    assert not serve.active()
    with pytest.raises(RuntimeError, match="outside"):
        serve.ask(_cmd(), _env(), str(REPO), "ok")


# -- spawn: children that stream and run side by side (explore's shard workers) ------------------------------
SPAWNER = r'''
import os, sys, time
from upstream.serve import serve_spawned

STATE = {"setup": os.getpid(), "calls": 0}

def run(req):
    STATE["calls"] += 1
    if req["do"] == "stream":
        for i in range(req["n"]):
            print(f"{req['tag']} {i} calls={STATE['calls']} server={STATE['setup']} test={os.environ.get('PYTEST_CURRENT_TEST')}",
                  flush=True)
            time.sleep(req.get("sleep", 0))
        return 0
    if req["do"] == "raise":
        raise RuntimeError("planted: the spawned call raised")
    if req["do"] == "hang":
        print("hanging", flush=True)
        time.sleep(600)
    return int(req["do"])

serve_spawned(run, int(sys.argv[-1]))
'''


def _spawn_cmd() -> list[str]:
    return [sys.executable, "-c", SPAWNER]


def test_spawned_children_stream_side_by_side_from_the_set_up_state() -> None:
    with serve.shared_workers():
        a = serve.spawn(_spawn_cmd(), _env(PYTEST_CURRENT_TEST="t1 (call)"), str(REPO),
                        {"do": "stream", "tag": "a", "n": 3, "sleep": 0.05})
        b = serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "stream", "tag": "b", "n": 2})
        la, lb = a.stdout.read().splitlines(), b.stdout.read().splitlines()
        assert (a.wait(timeout=30), b.wait(timeout=30)) == (0, 0)
    assert [ln.split()[:2] for ln in la] == [["a", "0"], ["a", "1"], ["a", "2"]], la
    assert [ln.split()[:2] for ln in lb] == [["b", "0"], ["b", "1"]], lb
    assert all("calls=1" in ln for ln in la + lb), (la, lb)  # neither saw the other's call
    assert len({ln.split()[3] for ln in la + lb}) == 1  # one server
    assert a.pid != b.pid and la[0].endswith("test=t1 (call)") and not lb[0].endswith("test=t1 (call)"), (la, lb)


def test_a_spawned_child_reports_its_exit_status_and_stderr_and_can_be_killed() -> None:
    import signal

    with serve.shared_workers():
        bad = serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "raise"})
        three = serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "3"})
        assert bad.stdout.read() == "" and bad.wait(timeout=30) == 1
        assert "RuntimeError: planted: the spawned call raised" in bad.stderr.read()
        assert three.wait(timeout=30) == 3 and "planted" not in three.stderr.read()
        hung = serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "hang"})
        assert hung.stdout.readline() == "hanging\n" and hung.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            hung.wait(timeout=0.2)
        hung.kill()
        assert hung.wait(timeout=30) == -signal.SIGKILL and hung.stdout.read() == ""


def test_spawn_outside_shared_workers_raises() -> None:
    with pytest.raises(RuntimeError, match="outside"):
        serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "0"})


def test_past_max_servers_the_least_recently_used_idle_one_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve, "MAX_SERVERS", 2)
    with serve.shared_workers():
        a, _, _ = serve.ask(_cmd(), _env(KVMC_TEST_RELEASE="a"), str(REPO), "ok")
        hung = serve.spawn(_spawn_cmd(), _env(), str(REPO), {"do": "hang"})  # busy: never closed under it
        assert hung.stdout.readline() == "hanging\n"
        b, _, _ = serve.ask(_cmd(), _env(KVMC_TEST_RELEASE="b"), str(REPO), "ok")  # a's server (idle, oldest) goes
        again, _, _ = serve.ask(_cmd(), _env(KVMC_TEST_RELEASE="a"), str(REPO), "ok")  # b's goes, the spawner stays
        kinds = sorted(type(v).__name__ for v in serve._POOLS[-1].values())
        assert kinds == ["_Server", "_Spawner"] and hung.poll() is None, kinds
        hung.kill()
        assert hung.wait(timeout=30) == -9
    assert again["server"] != a["server"] and b["server"] != a["server"], (a, b, again)
