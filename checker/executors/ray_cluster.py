"""`--executor ray`: kvmc's tasks on a Ray cluster (ray 2.60, the `ray` extra).

`--ray-address auto|HOST:PORT` joins an existing cluster (`ray start --head` on one node,
`ray start --address HEAD:6379` on the others, the same kvmc and z3 installed on each); without
it a local Ray instance of `workers` CPUs (default: this machine's) is started for the run and
shut down after it, its processes (GCS, raylet, workers) children of this one, so an interrupt's
`reap` (checker/interrupt.py) ends them too.

A task is a plain function of plain data, one CPU each (`num_cpus=1`). A worker that dies while
running one (killed, out of memory, node lost) has its task re-run on another worker by Ray, up to
RETRIES times (`KVMC_RAY_RETRIES`); after that, `result` answers ("died", why), and the caller
reports the task unsettled (an `unknown` case, a failed job), never as an answer. An exception the
task itself raised is re-raised here as that exception (Ray's RayTaskError is an instance of it).

A streaming task (`stream`, a generator function: `kvmc explore`'s shards, upstream/explore.py)
hands each value it yields to the driver as it comes (`next_ready`); it is not re-run when its
worker dies (it would yield its values again from the first), and the caller reports that death.

What this module knows: Ray. What the tasks are, and what their answers mean, is the callers'
(checker/engines/induction.py's case queries, checker/cli/review.py's jobs, upstream/explore.py's
shards).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable


class ExecutorError(ValueError):
    """A bad `--executor` / `--ray-address`, or Ray missing or unreachable: one line, exit 2."""


RETRIES = int(os.environ.get("KVMC_RAY_RETRIES", "2"))  # re-runs of a task whose worker died
WAIT_S = 0.5  # a `wait` returns at least this often, so an interrupt lands promptly


def _signal_passes(call: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """`call(*args, **kw)` (a blocking Ray call), with an exception raised by a signal handler while
    it ran surfacing as itself. Ray's `wait` and `get` run Python's signal handlers from inside C++
    and pass only a KeyboardInterrupt through; kvmc's `Interrupted` (checker/interrupt.py) came out as
    "SystemError: ... returned a result with an exception set", which the command line reported as
    a bare interrupt, without the partial report (tests/upstream/test_explore_ray.py's Ctrl-C test,
    whenever the signal landed inside a `wait`)."""
    try:
        return call(*args, **kw)
    except SystemError as e:
        inner = e.__context__
        if inner is not None and not isinstance(inner, Exception):
            raise inner from None
        raise


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers
        self.owned = False  # a local instance this run started (and shuts down)
        self.spared: list[int] = []  # its processes, kept through an interrupt's first reap
        self.pid = os.getpid()  # the driver (a fork of it must not use its connection)
        self._remote: dict[tuple[Callable[..., Any], int], Any] = {}
        self._streams: dict[tuple[Callable[..., Any], int, int], Any] = {}  # generator tasks (`stream`)
        self.submitted = 0
        self.waited_s = 0.0  # time the driver spent in `wait` (the rest of a phase is its own work)
        self.log: list[dict[str, Any]] = []  # per finished task: what the callers recorded (bench/scale.py)

    # -- the cluster ------------------------------------------------------------------------------------
    def start(self) -> None:
        import ray

        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report, no prompt
        kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR, "include_dashboard": False}
        if ray.is_initialized():  # a caller (a test's fixture) connected this process already
            return
        try:
            if self.address is None:
                from checker import interrupt

                before = set(interrupt.descendants())
                ray.init(num_cpus=self.workers or os.cpu_count() or 1, **kw)
                self.owned = True
                # the instance (GCS, raylet, the raylet's agents, which it dies with, its idle
                # workers) lives through an interrupt's first reap, which ends the tasks' own
                # processes: the driver exits (1) when its raylet dies, before its partial report;
                # `shutdown` disconnects first (checker/interrupt.py::spare)
                self.spared = [p for p in interrupt.descendants() if p not in before]
                interrupt.spare(self.spared)
            else:
                ray.init(address=self.address, **kw)
        except (ConnectionError, ValueError, RuntimeError) as e:
            where = f"at {self.address}" if self.address else "locally"
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise ExecutorError(f"--executor ray: cannot start or reach a Ray cluster {where} ({first}); "
                                "for an existing cluster pass --ray-address auto (on a node of it) or HEAD:PORT") from None

    def shutdown(self) -> None:
        """Disconnect; a local instance this run started is stopped with its processes."""
        import ray

        from checker import interrupt

        if self.owned and interrupt.requested():
            # Ctrl-C / SIGTERM: the tasks' workers are ended already (the interrupt's first reap);
            # the driver disconnects before its raylet goes, or the raylet's death ends this
            # process (exit 1) before it has said what was established
            if ray.is_initialized():
                ray.shutdown()
            interrupt.reap(0.5, everything=True)
        elif self.owned and ray.is_initialized():
            ray.shutdown()
        interrupt.unspare(self.spared)
        self.spared = []
        self.owned = False

    def capacity(self) -> int:
        """Tasks that can run at once: the CPUs of the cluster's live nodes."""
        import ray

        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def node_capacity(self) -> int:
        """The most CPUs one live node has: what a task holding several CPUs can ask for and still run."""
        import ray

        try:
            cpus = [int(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")]
        except Exception:  # a cluster that cannot say: one CPU, which any node has
            return 1
        return max([1, *cpus])

    def alive(self) -> int:
        """Worker slots alive now (CPUs of live nodes), for progress lines."""
        import ray

        try:
            return int(sum(n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive")))
        except Exception:  # progress only: a cluster that cannot say is not an error here
            return 0

    # -- tasks --------------------------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], *args: Any, retries: int | None = None) -> Any:
        """Run fn(*args) on a worker; returns Ray's reference to the answer."""
        import ray

        n = RETRIES if retries is None else retries
        rf = self._remote.get((fn, n))
        if rf is None:
            rf = self._remote[(fn, n)] = ray.remote(num_cpus=1, max_retries=n, retry_exceptions=False)(fn)
        self.submitted += 1
        return rf.remote(*args)

    def wait(self, refs: list[Any], timeout_s: float = WAIT_S) -> list[Any]:
        """The references among `refs` whose tasks have ended (at most `timeout_s` later)."""
        import ray

        if not refs:
            return []
        t0 = time.monotonic()
        try:
            ready, _ = _signal_passes(ray.wait, refs, num_returns=len(refs), timeout=timeout_s, fetch_local=True)
        finally:
            self.waited_s += time.monotonic() - t0
        return ready

    def result(self, ref: Any) -> tuple[str, Any]:
        """("ok", the answer) or ("died", why: its worker died every time it was run); an exception
        the task raised is raised here."""
        import ray
        from ray import exceptions as rx

        try:
            return "ok", _signal_passes(ray.get, ref)
        except rx.RayTaskError as e:  # the task's own exception, not a fault of the cluster
            raise e.as_instanceof_cause() from None
        except (rx.WorkerCrashedError, rx.NodeDiedError, rx.OutOfMemoryError, rx.ObjectLostError,
                rx.RaySystemError, rx.TaskCancelledError) as e:
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            return "died", f"{type(e).__name__}: {first[:200]}"

    def cancel(self, refs: list[Any]) -> None:
        """Stop these tasks (their workers are killed: z3 does not look at Python signals)."""
        import ray

        for r in refs:
            try:
                ray.cancel(r, force=True)
            except Exception:  # already finished, or its worker gone: nothing to stop
                pass

    # -- streaming tasks (a generator function: each value it yields reaches the driver as it comes) ----
    def stream(self, fn: Callable[..., Any], *args: Any, cpus: int = 1, retries: int = 0) -> Any:
        """Run the generator fn(*args) on a worker holding `cpus` CPUs; returns Ray's generator of
        references (`next_ready` reads it). Not re-run by default when its worker dies: a re-run
        would yield its values again from the first (the caller reports the death instead)."""
        import ray

        rf = self._streams.get((fn, retries, cpus))
        if rf is None:
            rf = self._streams[(fn, retries, cpus)] = ray.remote(num_cpus=cpus, max_retries=retries,
                                                                  retry_exceptions=False)(fn)
        self.submitted += 1
        return rf.remote(*args)

    def next_ready(self, gens: list[Any], timeout_s: float = WAIT_S) -> list[tuple[Any, str, Any]]:
        """The next value of each generator among `gens` that has one (at most `timeout_s` later):
        (gen, "ok", value), (gen, "end", None) when it has finished, or (gen, "died", why) when its
        worker died; an exception the task raised is raised here."""
        import ray
        from ray import exceptions as rx

        if not gens:
            return []
        t0 = time.monotonic()
        try:
            ready, _ = _signal_passes(ray.wait, gens, num_returns=len(gens), timeout=timeout_s, fetch_local=True)
        finally:
            self.waited_s += time.monotonic() - t0
        out: list[tuple[Any, str, Any]] = []
        for g in ready:
            try:
                ref = next(g)
            except StopIteration:
                out.append((g, "end", None))
                continue
            try:
                out.append((g, "ok", _signal_passes(ray.get, ref)))
            except rx.RayTaskError as e:
                raise e.as_instanceof_cause() from None
            except (rx.WorkerCrashedError, rx.NodeDiedError, rx.OutOfMemoryError, rx.ObjectLostError,
                    rx.RaySystemError, rx.TaskCancelledError) as e:
                first = (str(e).strip().splitlines() or [type(e).__name__])[0]
                out.append((g, "died", f"{type(e).__name__}: {first[:200]}"))
        return out

    def note(self, **rec: Any) -> None:
        rec.setdefault("t", time.monotonic())
        self.log.append(rec)
