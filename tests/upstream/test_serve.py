"""upstream/serve.py: the shared worker process (one per release) answers each call from a fork of
its set-up state, so a call sees nothing an earlier call changed, and a call that fails reports as
a one-shot worker's crash does. Checked on a stand-in server (no SGLang: a few milliseconds)."""

from __future__ import annotations

import os
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
