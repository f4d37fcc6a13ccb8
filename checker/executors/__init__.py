"""Where kvmc's parallel work runs: the induction engine's case queries (checker/engines/induction.py)
and the (design, config) jobs of `kvmc check --jobs/--all` and `kvmc review` (checker/cli/review.py).

Two executors, chosen with `--executor`:

* `local` (the default): today's forked processes on this machine; the engines' own code paths
  (`_settle_parallel`'s fork pool, review's process pool), unchanged. `ACTIVE` is None then.
* `ray` (checker/executors/ray_cluster.py): tasks on a Ray cluster (`--ray-address auto|HOST:PORT`),
  or on a local Ray instance started for the run and shut down after it. Ray is an optional extra
  (`pip install 'kvmc[ray]'`); without it, `--executor ray` is a usage error.

What crosses to a Ray worker is plain data (a case's description: config, design, lemma set, k,
candidate, case path, the driver's digest of the query; a job's `Job`), never a z3 object: the
worker rebuilds the query from the model and refuses when its digest differs
(checker/engines/remote_case.py). The proof cache stays the driver's: it is the only writer.

This folder sits below engines/ (they ask `ACTIVE`); it knows nothing of the model or z3.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from checker.executors.ray_cluster import ExecutorError, RayExecutor  # (ray itself is imported on use)

EXECUTORS = ("local", "ray")
EXTRA = "pip install -e '.[ray]' (or pip install 'kvmc[ray]')"

ACTIVE: Any = None  # the Ray executor of this run (`use`), None: local processes


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def check_choice(kind: str, address: str | None) -> None:
    """Validate `--executor KIND --ray-address ADDRESS` before any work (ExecutorError: one line)."""
    if kind not in EXECUTORS:
        raise ExecutorError(f"--executor {kind!r}: expected one of {', '.join(EXECUTORS)}")
    if address is not None and kind != "ray":
        raise ExecutorError(f"--ray-address {address!r} needs --executor ray (the executor is {kind!r})")
    if address is not None and address != "auto":
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ExecutorError(f"--ray-address {address!r}: expected auto or HOST:PORT (the head's GCS port, e.g. 10.0.0.5:6379)")
    if kind == "ray" and not ray_available():
        raise ExecutorError(f"--executor ray needs the ray extra, which is not installed: {EXTRA}")


@contextlib.contextmanager
def use(kind: str, address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """Make `kind` this run's executor while the block runs; for `ray`, connect to the cluster at
    `address` (or start a local instance of `workers` CPUs) first and disconnect (shut the local
    instance down) after, also on an error or an interrupt."""
    global ACTIVE
    check_choice(kind, address)
    if kind == "local":
        yield None
        return
    ex = RayExecutor(address, workers)
    ex.start()
    ACTIVE = ex
    try:
        yield ex
    finally:
        ACTIVE = None
        ex.shutdown()
