"""One worker process per SGLang release, shared by many calls: `with shared_workers(): ...`.

Importing a release costs most of a conformance or replay worker's run (8-26 s, upstream/worker.py,
upstream/sched/worker.py); a test file that asks the same release many times paid it every time.
Inside `shared_workers()` the conformance worker (`conform.run`) and the replay worker
(`replay.run_worker`) are started once per (worker, release environment) with `--serve`: the server
imports and sets up the release as a one-shot worker does, then, for each call, forks and runs the
call's request in the child, which starts from the server's state right after the setup, i.e. the
state a fresh one-shot worker runs its request from. Nothing one call changes (SGLang's global server
args, its environment variables, the forcing's patches, the row modules' counters) reaches the next,
so a call answers what the one-shot worker answers; only the import is shared.

cpu only (a fork after CUDA is initialised is not safe): `--device cuda` runs one-shot, as without
`shared_workers()`. Outside `shared_workers()` nothing changes: every call starts its own process.

A server is keyed by its command and environment, except the variables in PER_CALL_ENV (pytest's
PYTEST_CURRENT_TEST), which each call's child takes from its caller.

Protocol (worker side `serve`, client side `ask`): one JSON call ({"env": the PER_CALL_ENV values,
"request": ...}) per line on the server's stdin; the child writes `RESULT <json>` on stdout, then the
server `DONE {"rc": the child's exit status}`; other stdout lines are ignored (as the one-shot callers
read only the last line); stderr goes to a temporary file, and what a call added to it is that call's
error tail. A server takes one call at a time; servers of different releases run side by side.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

RESULT, DONE = "KVMC-SERVE-RESULT ", "KVMC-SERVE-DONE "
# set per call, not per server: pytest names the running test in the environment of every child it starts
PER_CALL_ENV = ("PYTEST_CURRENT_TEST",)


# -- worker side ----------------------------------------------------------------------------------------------
def serve(run: Callable[[Any], Any]) -> int:
    """Answer the requests on stdin, each in a fork of this (set-up) process: `run(request)` is
    its result; an exception is the child's traceback on stderr and exit status 1 (SystemExit: its code)."""
    while True:
        line = sys.stdin.readline()
        if not line:  # the client is done: nothing to finalise (each call's work was its child's)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        if not line.strip():
            continue
        call = json.loads(line)
        request = call["request"]
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: the request, then out without the parent's atexit handlers
            code = 0
            try:
                for k in PER_CALL_ENV:  # the caller's, as its one-shot worker would have them
                    if call["env"].get(k) is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = call["env"][k]
                out = run(request)
                sys.stdout.write(RESULT + json.dumps(out) + "\n")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:  # noqa: BLE001 - reported as a one-shot worker's crash is
                traceback.print_exc()
                code = 1
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        _pid, status = os.waitpid(pid, 0)
        sys.stdout.write(DONE + json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


# -- client side ----------------------------------------------------------------------------------------------
class _Server:
    def __init__(self, cmd: Sequence[str], env: dict[str, str], cwd: str) -> None:
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  text=True, env=env, cwd=cwd, bufsize=1)
        self.lock = threading.Lock()
        self.asked = 0

    def ask(self, request: Any, env: dict[str, str]) -> tuple[Any | None, int, str]:
        """(the child's result or None, its exit status, what was written on stderr meanwhile)."""
        start = 0 if self.asked == 0 else os.fstat(self.err.fileno()).st_size  # the first call: the setup's too
        self.asked += 1
        result, rc = None, None
        try:
            assert self.p.stdin is not None and self.p.stdout is not None
            call = {"env": {k: env.get(k) for k in PER_CALL_ENV}, "request": request}
            self.p.stdin.write(json.dumps(call) + "\n")
            self.p.stdin.flush()
            for line in iter(self.p.stdout.readline, ""):
                if line.startswith(RESULT):
                    result = json.loads(line[len(RESULT):])
                elif line.startswith(DONE):
                    rc = int(json.loads(line[len(DONE):])["rc"])
                    break
        except (BrokenPipeError, OSError):
            pass
        if rc is None:  # the server itself is gone (its setup failed, it was killed): its own status
            rc = self.p.wait()
            result = None
        self.err.seek(start)
        return result, rc, self.err.read().decode(errors="replace")

    def close(self) -> None:
        try:
            if self.p.stdin is not None:
                self.p.stdin.close()
            self.p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.p.kill()
            self.p.wait()
        finally:
            if self.p.stdout is not None:
                self.p.stdout.close()
            self.err.close()


_POOLS: list[dict[tuple, _Server]] = []
_LOCK = threading.Lock()


@contextlib.contextmanager
def shared_workers() -> Iterator[None]:
    """Within it, `ask` keeps one server per (command, environment); they are closed at the end."""
    pool: dict[tuple, _Server] = {}
    _POOLS.append(pool)
    try:
        yield
    finally:
        with _LOCK:
            _POOLS.remove(pool)
        for s in pool.values():
            s.close()


def active() -> bool:
    return bool(_POOLS)


def ask(cmd: Sequence[str], env: dict[str, str], cwd: str, request: Any) -> tuple[Any | None, int, str]:
    """`request` answered by the server `cmd` (started in `env` on first use) of the innermost
    `shared_workers()`: (result or None, exit status, stderr tail). Only while `active()`."""
    key = (tuple(cmd), tuple(sorted((k, v) for k, v in env.items() if k not in PER_CALL_ENV)), cwd)
    with _LOCK:
        if not _POOLS:
            raise RuntimeError("serve.ask outside serve.shared_workers()")
        pool = _POOLS[-1]
        s = pool.get(key)
        if s is None or s.p.poll() is not None:  # a server that died is replaced, as a one-shot call starts afresh
            if s is not None:
                s.close()
            s = pool[key] = _Server(cmd, env, cwd)
    with s.lock:  # one call at a time per server (calls on other releases run beside it)
        return s.ask(request, env)
