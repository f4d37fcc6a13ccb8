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

`spawn` is the streaming form, for workers that write events as they go and run side by side
(explore's shards, upstream/sched/explore.py `--serve-spawn`): the server forks a child per call
whose stdout and stderr are a pipe and a file the caller passed with the call (SCM_RIGHTS over a
socket pair), and does not wait for it; the caller reads the child's events as it would a one-shot
worker's, and `Spawned` answers what `subprocess.Popen` does (pid, poll, wait, kill). Several
children of one server run at once; the server reports each child's pid and, when it ends, its
exit status.

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
import signal
import socket
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

            def answer() -> int:
                _child_env({k: call["env"].get(k) for k in PER_CALL_ENV})
                sys.stdout.write(RESULT + json.dumps(run(request)) + "\n")
                return 0

            _exit_child(answer)
        _pid, status = os.waitpid(pid, 0)
        sys.stdout.write(DONE + json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
        sys.stdout.flush()


def _exit_child(body: Callable[[], int]) -> None:
    """A forked child's end: `body()`'s status, SystemExit's code, or 1 with the traceback on
    stderr (as a one-shot worker's crash reads); out without the server's atexit handlers."""
    code = 1
    try:
        code = body()
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


def _child_env(env: dict[str, str | None]) -> None:
    for k, v in env.items():  # the caller's, as its one-shot worker would have them
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


MESSAGE_MAX = 1 << 20  # a call (a worker's job) or a reply, one datagram


def serve_spawned(run: Callable[[Any], int], fd: int) -> int:
    """`spawn`'s server: each call on the socket `fd` (a JSON message with two fds, the child's
    stdout and stderr) runs `run(request)` (its exit status) in a fork whose fds 1 and 2 are those;
    replies {"spawned": pid, "id"} at once and {"exited": pid, "rc"} when the child ends. Exits when
    the caller closes its end."""
    sock = socket.socket(fileno=fd)

    def reap(_signum: int, _frame: Any) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            with contextlib.suppress(OSError):
                sock.send(json.dumps({"exited": pid, "rc": os.waitstatus_to_exitcode(status)}).encode())

    signal.signal(signal.SIGCHLD, reap)
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE_MAX, 2)
        except OSError:
            data, fds = b"", []
        if not data:  # the caller is done (or gone): its children are its own to end
            os._exit(0)
        call = json.loads(data)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:

            def job() -> int:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                os.dup2(fds[0], 1)
                os.dup2(fds[1], 2)
                for f in (null, *fds):
                    os.close(f)
                _child_env(call["env"])
                return run(call["request"])

            _exit_child(job)
        for f in fds:
            os.close(f)
        with contextlib.suppress(OSError):
            sock.send(json.dumps({"spawned": pid, "id": call["id"]}).encode())


# -- client side ----------------------------------------------------------------------------------------------
class _Server:
    def __init__(self, cmd: Sequence[str], env: dict[str, str], cwd: str) -> None:
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(list(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                  text=True, env=env, cwd=cwd, bufsize=1)
        self.lock = threading.Lock()
        self.asked = 0
        self.users = 0  # calls holding it (serve._server)

    def idle(self) -> bool:
        return self.users == 0

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


class _Spawner:
    """The client of one `serve_spawned` server: its socket, and what it has said of its children."""

    def __init__(self, cmd: Sequence[str], env: dict[str, str], cwd: str) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = mine
        self.err = tempfile.TemporaryFile()  # the server's own (its setup's) stderr
        self.p = subprocess.Popen([*cmd, str(theirs.fileno())], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=self.err, env=env, cwd=cwd, start_new_session=True)
        theirs.close()
        self.lock = threading.Lock()
        self.exited: dict[int, int] = {}
        self.children: list[int] = []
        self.calls = 0
        self.users = 0  # spawns under way (serve._server)

    def idle(self) -> bool:
        """No spawn under way and no child running (closing the server would lose their status)."""
        return self.users == 0 and all(self.returncode(pid) is not None or not _alive(pid) for pid in self.children)

    def _read(self, block: bool) -> dict[str, Any] | None:
        self.sock.setblocking(block)
        try:
            data = self.sock.recv(MESSAGE_MAX)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            data = b""
        if not data:
            raise ConnectionError("the spawn server is gone")
        msg = json.loads(data)
        if "exited" in msg:
            self.exited[msg["exited"]] = msg["rc"]
        return msg

    def spawn(self, request: Any, env: dict[str, str]) -> Spawned:
        out_r, out_w = os.pipe()
        err = tempfile.TemporaryFile("w+")
        try:
            with self.lock:
                self.calls += 1
                call = {"id": self.calls, "env": {k: env.get(k) for k in PER_CALL_ENV}, "request": request}
                socket.send_fds(self.sock, [json.dumps(call).encode()], [out_w, err.fileno()])
                while True:
                    msg = self._read(block=True)
                    if msg is not None and msg.get("id") == call["id"]:
                        pid = int(msg["spawned"])
                        self.children.append(pid)
                        break
        except BaseException:
            os.close(out_r)
            err.close()
            raise
        finally:
            os.close(out_w)
        return Spawned(self, pid, os.fdopen(out_r, "r"), err)

    def returncode(self, pid: int) -> int | None:
        with self.lock:
            try:
                while self._read(block=False) is not None:
                    pass
            except ConnectionError:
                if pid not in self.exited and not _alive(pid):
                    self.exited[pid] = -signal.SIGKILL  # its server is gone, and it with it
            return self.exited.get(pid)

    def close(self) -> None:
        self.sock.close()  # the server exits on it
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        finally:
            self.err.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


class _ErrFile:
    """A spawned child's stderr as a Popen's `stderr` reads: all of it (the child writes through
    the same open file, so the offset is the child's)."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def read(self) -> str:
        self.f.seek(0)
        return self.f.read()

    def close(self) -> None:
        self.f.close()


class Spawned:
    """A child of a spawn server, as `_Workers` (upstream/explore.py) uses a `subprocess.Popen`."""

    def __init__(self, server: _Spawner, pid: int, stdout: Any, err: Any) -> None:
        self.server, self.pid, self.stdout, self.stderr = server, pid, stdout, _ErrFile(err)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.returncode(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import time

        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"spawned worker {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_POOLS: list[dict[tuple, Any]] = []  # per shared_workers(), its servers (_Server and _Spawner), least recently used first
_LOCK = threading.Lock()
# servers kept at once per shared_workers(): each holds a release imported (about 0.5 GB); past it the
# least recently used idle one is closed (a later call on it starts it again)
MAX_SERVERS = int(os.environ.get("KVMC_SERVE_MAX", "6"))


@contextlib.contextmanager
def shared_workers(keep: dict[tuple, Any] | None = None) -> Iterator[None]:
    """Within it, `ask` and `spawn` keep one server per (command, environment), at most
    MAX_SERVERS of them; they are closed at the end. `keep`: a pool that outlives the block (its
    servers are reused by the next block given it; `close_pool` ends them)."""
    pool: dict[tuple, Any] = {} if keep is None else keep
    _POOLS.append(pool)
    try:
        yield
    finally:
        with _LOCK:
            _POOLS.remove(pool)
        if keep is None:
            close_pool(pool)


def close_pool(pool: dict[tuple, Any]) -> None:
    for s in list(pool.values()):
        s.close()
    pool.clear()


def active() -> bool:
    return bool(_POOLS)


def _key(cmd: Sequence[str], env: dict[str, str], cwd: str) -> tuple:
    return (tuple(cmd), tuple(sorted((k, v) for k, v in env.items() if k not in PER_CALL_ENV)), cwd)


def _server(kind: Any, cmd: Sequence[str], env: dict[str, str], cwd: str, what: str) -> Any:
    """The innermost pool's server of (cmd, env, cwd), started (or restarted: one that died is
    replaced, as a one-shot call starts afresh) as needed, marked in use; call `_release` after."""
    key = _key(cmd, env, cwd)
    with _LOCK:
        if not _POOLS:
            raise RuntimeError(f"serve.{what} outside serve.shared_workers()")
        pool = _POOLS[-1]
        s = pool.pop(key, None)
        if s is None or s.p.poll() is not None:
            if s is not None:
                s.close()
            idle = [k for k, v in pool.items() if v.idle()]
            while len(pool) >= MAX_SERVERS and idle:
                pool.pop(idle.pop(0)).close()
            s = kind(cmd, env, cwd)
        pool[key] = s  # the most recently used, last
        s.users += 1
        return s


def _release(s: Any) -> None:
    with _LOCK:
        s.users -= 1


def spawn(cmd: Sequence[str], env: dict[str, str], cwd: str, request: Any) -> Spawned:
    """`request` run by a child of the spawn server `cmd` (`cmd` + the socket's fd: a
    `serve_spawned` worker; started in `env` on first use) of the innermost `shared_workers()`;
    the child's stdout is `Spawned.stdout`. Only while `active()`."""
    sp = _server(_Spawner, cmd, env, cwd, "spawn")
    try:
        return sp.spawn(request, env)
    finally:
        _release(sp)


def ask(cmd: Sequence[str], env: dict[str, str], cwd: str, request: Any) -> tuple[Any | None, int, str]:
    """`request` answered by the server `cmd` (started in `env` on first use) of the innermost
    `shared_workers()`: (result or None, exit status, stderr tail). Only while `active()`."""
    s = _server(_Server, cmd, env, cwd, "ask")
    try:
        with s.lock:  # one call at a time per server (calls on other releases run beside it)
            return s.ask(request, env)
    finally:
        _release(s)
