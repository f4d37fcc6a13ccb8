"""Ctrl-C (SIGINT) and SIGTERM for `kvmc`: stop within about a second, say what was established,
exit 130 (SIGINT) or 143 (SIGTERM), leave no process behind, print no traceback.

How a signal travels (`handling()` sets this up for the whole command):

* A Python handler for SIGINT and SIGTERM runs in the main thread between two bytecodes. It
  records the signal, ends every descendant process (`reap`), and raises `Interrupted` there.
  The engines catch it where they know what was established (`BMC.run`: the depths finished;
  `run_check`: the configs finished), attach that, and raise it on; the command line prints the
  partial report and exits with 128 + the signal number.
* While the main thread is inside z3 (one `check` can run for minutes in C, where no Python
  handler runs), a watcher thread, woken through `signal.set_wakeup_fd`, interrupts z3's context
  until the main thread has taken the signal: the query returns and the handler runs. z3's own
  Ctrl-C handler is turned off (`quiet_z3`): it answered `unknown` ("interrupted from keyboard")
  and swallowed the signal, which is how a check ran on through two Ctrl-Cs.
* An interrupt that lands in z3 outside a `check` (a `push`, say) leaves the context cancelled:
  every later `push` fails with "push canceled" until some `check` runs. The main thread does not
  go on solving after a signal (any exception then is the interrupt), and `clear_z3()` runs a
  trivial check after one, so nothing leaks into a later query (a test, an in-process caller).
* Forked children (the check's proof attempt, the warm pool, induction's case workers, review's
  pool workers) ignore SIGINT, which a terminal sends to the whole process group (the parent
  decides), and die silently on SIGTERM, which is how the parent ends them: no child prints a
  KeyboardInterrupt traceback, and none outlives the command (`PR_SET_PDEATHSIG`, or for a child
  forked by another thread a watcher of the parent's pid, also ends them when the parent is killed
  outright).
* A second signal, or a main thread still busy 3 s after the first (a z3 call that never looks at
  its cancel flag), ends the children and the process at once, with one line on stderr; that line
  carries what the engines recorded with `established` (the BMC: each depth it finished), since the
  main thread cannot print its partial report. A main
  thread that has taken the signal gets 20 s to stop (its children, the partial report). Signals
  within half a second of the first are the same stop: `timeout -s INT` sends its signal to the
  command and again to the command's process group, and that is not a person pressing Ctrl-C twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Iterator

SIGNAL_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
SAME_EVENT_S = 0.5  # signals this close to the first are one stop, not a second one (a person is slower)
HARD_AFTER_S = 3.0  # the watcher's backstop: exit this long after a signal the main thread has not taken
# ... and this long after one it has taken but is still stopping (joining children, writing the partial
# report and its counterexamples): 3 s cut that short on a loaded machine, with no report
REPORT_AFTER_S = 20.0
REAP_GRACE_S = 0.5  # SIGTERM, then SIGKILL for a descendant still there after this long


class Interrupted(BaseException):
    """A SIGINT or SIGTERM asked the command to stop. A BaseException, like KeyboardInterrupt, so
    that no `except Exception` on the way treats it as an engine error. Engines attach what was
    established (`results`: property -> Result of the config being checked, `config_report`,
    `report`, `where`: a phrase such as "at depth 3 of config small") as it passes."""

    def __init__(self, signum: int) -> None:
        super().__init__(SIGNAL_NAMES.get(signum, f"signal {signum}"))
        self.signum = signum
        self.where = ""
        self.results: Any = None
        self.config_report: Any = None
        self.report: Any = None
        self.done: Any = None  # finished jobs (review, check --jobs)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return SIGNAL_NAMES.get(self.signum, f"signal {self.signum}")


_signalled: int | None = None  # the first signal of this command
_active = False  # handlers installed (copied into forked children: see _after_fork_in_child)
_taken = threading.Event()  # the main thread has taken the signal (stop interrupting z3)
_finished = threading.Event()  # the command has finished (the watcher's backstop stands down)
_forked_from_main = False


# what the engines of this process have established so far, by config (`established`): the one
# account left when z3 will not let go of the main thread and the watcher has to end the process
_ESTABLISHED: dict[str, str] = {}


def established(config: str, what: str) -> None:
    """Record what is established on `config` (e.g. "the BMC finished depth 2, nothing violated");
    a later record of the same config replaces it."""
    _ESTABLISHED[config] = what


def requested() -> bool:
    """Has a SIGINT or SIGTERM asked the command running under `handling()` to stop?"""
    return _active and _signalled is not None


def signalled() -> int | None:
    """The signal that stopped the last command run under `handling()` (None: none did)."""
    return _signalled


def stopped(e: BaseException | None = None) -> Interrupted:
    """The `Interrupted` to raise for an exception seen after a signal: `e` itself when it is one,
    else a new one (z3's "canceled", a broken pipe to a killed child, ... are the interrupt)."""
    if isinstance(e, Interrupted):
        return e
    return Interrupted(_signalled if _signalled is not None else signal.SIGINT)


def check() -> None:
    """Raise `Interrupted` if a signal asked to stop (for loops that may not see the handler's)."""
    global _raised
    if _active and _signalled is not None:
        _taken.set()
        _raised = True
        raise Interrupted(_signalled)


# -- z3 ---------------------------------------------------------------------------------------------
def quiet_z3() -> None:
    """Turn off z3's own SIGINT handler (it makes the running `check` return unknown and swallows
    the signal); kvmc's handler interrupts z3 itself. Imports z3: call it where z3 is used."""
    import z3

    z3.set_param("ctrl_c", False)


def _interrupt_z3() -> None:
    z3 = sys.modules.get("z3")
    if z3 is not None:
        with contextlib.suppress(Exception):
            z3.main_ctx().interrupt()


def clear_z3() -> None:
    """Undo an interrupt that may have landed outside a `check`: a `check` resets the context's
    cancel flag (see the module docstring). A no-op unless z3 is loaded."""
    z3 = sys.modules.get("z3")
    if z3 is not None:
        with contextlib.suppress(Exception):
            z3.Solver().check()


# -- processes --------------------------------------------------------------------------------------
def _children_by_parent() -> dict[int, list[int]] | None:
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    out: dict[int, list[int]] = {}
    for n in names:
        if not n.isdigit():
            continue
        try:
            with open(f"/proc/{n}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # the command name may hold spaces and parentheses
        if len(fields) > 1 and fields[0] != b"Z":
            out.setdefault(int(fields[1]), []).append(int(n))
    return out


def descendants(pid: int | None = None) -> list[int]:
    """Live (not zombie) descendants of `pid` (default: this process), children first. From /proc
    where there is one, else the multiprocessing children."""
    pid = os.getpid() if pid is None else pid
    kids = _children_by_parent()
    if kids is None:
        import multiprocessing as mp

        return [p.pid for p in mp.active_children() if p.pid] if pid == os.getpid() else []
    out: list[int] = []
    todo = [pid]
    while todo:
        for c in kids.get(todo.pop(0), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return not os.path.isdir("/proc")  # no /proc: assume alive


_SPARED: set[int] = set()  # descendants this process's own runtime needs until it has reported


def spare(pids: list[int]) -> None:
    """Keep `pids` (not their descendants) through an interrupt's first reaps, for the last one
    (`reap(everything=True)`: leaving `handling()`, `exit_now`, an executor's shutdown). Ray's GCS
    and raylet of a local instance (checker/executors/ray_cluster.py): the driver's core worker ends
    the whole process, exit 1, when its raylet dies, and that beat the partial report."""
    _SPARED.update(pids)


def unspare(pids: list[int]) -> None:
    """`pids` are gone without an interrupt (an executor shut down normally): forget them."""
    _SPARED.difference_update(pids)


def reap(grace_s: float = REAP_GRACE_S, everything: bool = False) -> list[int]:
    """End every descendant: SIGTERM (the whole tree is listed first, so a grandchild whose parent
    dies first is not lost), then SIGKILL what is left after `grace_s`. Returns the pids ended.
    Does not wait() for them: multiprocessing does, for its own children. The `spare`d processes
    only with `everything`, after stdout and stderr are flushed (ending one may end this process)."""
    if everything:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    ended: list[int] = []
    for _ in range(3):  # a pool may start a replacement worker while we kill
        pids = [p for p in descendants() if p not in ended and (everything or p not in _SPARED)]
        if not pids:
            break
        for p in pids:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGTERM)
        ended += pids
    deadline = time.monotonic() + grace_s
    while any(_alive(p) for p in ended) and time.monotonic() < deadline:
        time.sleep(0.02)
    for p in ended:
        if _alive(p):
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGKILL)
    if everything:
        _SPARED.clear()
    return ended


# -- handlers ---------------------------------------------------------------------------------------
def _hard_exit(signum: int, why: str) -> None:
    with contextlib.suppress(Exception):
        reap(0.2, everything=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        known = "; ".join(f"{c}: {w}" for c, w in list(_ESTABLISHED.items()))
        why += f"; established before it (not proved): {known}" if known else ""
        sys.stderr.write(f"kvmc: interrupted by {SIGNAL_NAMES.get(signum, signum)}; {why}\n")
        sys.stderr.flush()
    os._exit(128 + signum)


def _record(signum: int) -> bool:
    """Record a signal; True for the first of this command."""
    global _signalled
    if _signalled is None:
        _signalled = signum
        return True
    return False


_raised = False  # the handler has raised Interrupted in the main thread (once per command)
_deferred = False  # the handler ran where an exception is swallowed: the watcher trips it again
_self_trips = 0  # wakeup bytes of those re-trips, not new signals


def _swallowing(frame: Any) -> bool:
    """Is `frame` inside a `__del__`? Python prints and drops an exception raised there ("Exception
    ignored in ..."): z3 frees its terms in `__del__`, so a handler often runs inside one."""
    for _ in range(4):
        if frame is None:
            return False
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _handler(signum: int, frame: Any) -> None:
    global _raised, _deferred
    _record(signum)
    if _raised:  # the main thread is on its way out already (the watcher handles a second signal)
        return
    if _swallowing(frame):
        _deferred = True
        return
    _taken.set()
    _raised = True
    reap()  # now, so that the cleanups on the way out (joins of children) return at once
    raise Interrupted(_signalled if _signalled is not None else signum)


def _watch(rfd: socket.socket) -> None:
    """The watcher thread: woken by the C-level handler of each signal (one byte each)."""
    global _self_trips, _deferred
    first_at: float | None = None
    while not _finished.is_set():
        if first_at is None:
            try:
                data = rfd.recv(16)
            except OSError:
                return
        else:
            rfd.settimeout(0.1)
            try:
                data = rfd.recv(16)
            except socket.timeout:
                data = b""
            except OSError:
                return
        for b in data:
            if b not in SIGNAL_NAMES:
                continue
            if _self_trips > 0:  # our own re-trip of a deferred handler
                _self_trips -= 1
                continue
            if first_at is not None:
                if time.monotonic() - first_at < SAME_EVENT_S:
                    continue  # the same stop, delivered twice (`timeout -s INT` signals the command and its group)
                _hard_exit(_signalled or b, "second signal: stopped at once")  # a second signal: stop now
            _record(b)
            first_at = time.monotonic()
            if not _taken.is_set():
                _interrupt_z3()
            reap()
        if first_at is None or _finished.is_set():
            continue
        if not _taken.is_set():
            _interrupt_z3()  # the main thread is in z3: make the query return
            if _deferred:  # the handler ran inside a __del__: run it again, elsewhere
                _deferred = False
                _self_trips += 1
                import _thread

                _thread.interrupt_main(_signalled or signal.SIGINT)
        limit = REPORT_AFTER_S if _taken.is_set() else HARD_AFTER_S
        if time.monotonic() - first_at > limit:
            _hard_exit(_signalled or signal.SIGINT, f"the command did not stop within {limit:.0f} s; "
                       "nothing more to report")


_fork_parent = 0  # the forking process (read in the child, which may run after the parent is gone)


def _before_fork() -> None:
    global _forked_from_main, _fork_parent
    _forked_from_main = threading.current_thread() is threading.main_thread()
    _fork_parent = os.getpid()


def _after_fork_in_child() -> None:
    """A forked child of a command under `handling()`: SIGINT ignored, SIGTERM fatal and silent,
    no wakeup fd (it is the parent's socket), and killed when its parent dies."""
    global _active
    if not _active:
        return
    _active = False
    with contextlib.suppress(Exception):
        signal.set_wakeup_fd(-1)
    with contextlib.suppress(Exception):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _forked_from_main and sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
            if os.getppid() != _fork_parent:  # the parent died before prctl (the child may run late)
                os._exit(128 + signal.SIGTERM)
    else:
        # PR_SET_PDEATHSIG fires when the forking *thread* ends, so a child of another thread (a
        # fork pool's worker handler replacing a worker the reap just killed) watches its parent
        # process instead: idle pool workers block on the task queue's lock for ever once a killed
        # worker took it with it, and one forked after the last reap outlived the command. The
        # parent's pid is the one recorded before the fork: by the time this runs it may be gone
        threading.Thread(target=_exit_with_parent, args=(_fork_parent,), name="kvmc-parent-watch", daemon=True).start()


PARENT_POLL_S = 0.25


def _exit_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(128 + signal.SIGTERM)


_fork_hooks = False


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Install the SIGINT/SIGTERM handling for one command (main thread only; elsewhere, or nested,
    a no-op). Restores the previous handlers on the way out."""
    global _active, _signalled, _fork_hooks, _raised, _deferred, _self_trips
    if _active or threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _fork_hooks and hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        _fork_hooks = True
    rfd, wfd = socket.socketpair()
    wfd.setblocking(False)
    old = {s: signal.getsignal(s) for s in SIGNAL_NAMES}
    old_fd = signal.set_wakeup_fd(wfd.fileno(), warn_on_full_buffer=False)
    _signalled = None
    _raised = _deferred = False
    _self_trips = 0
    _ESTABLISHED.clear()
    _taken.clear()
    _finished.clear()
    for s in SIGNAL_NAMES:
        signal.signal(s, _handler)
    watcher = threading.Thread(target=_watch, args=(rfd,), name="kvmc-signal-watcher", daemon=True)
    _active = True
    watcher.start()
    try:
        yield
    finally:
        _active = False
        _finished.set()
        for s, h in old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(old_fd)
        wfd.close()  # the watcher's recv returns
        rfd.close()
        if _signalled is not None:
            reap(everything=True)
            clear_z3()


def exit_now(code: int) -> None:
    """End the process after an interrupt without running atexit hooks (an executor's shutdown
    would join its threads; multiprocessing's finalizers would join killed children). A fork pool's
    thread may have started a replacement worker after the reap on leaving `handling()` (seen on a
    loaded machine: two case workers left in the group): they are ended here, last."""
    if _signalled is not None:
        with contextlib.suppress(Exception):
            reap(everything=True)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)
