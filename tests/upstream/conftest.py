"""A session-scoped fixture that installs the two releases the CI conforms (0.5.10.post1, before
the #23174 / #27391 fixes, and 0.5.13, after them) with `kvmc sglang install`, idempotently:
a fresh clone's `python -m pytest` sets them up itself (into `$KVMC_SGLANG_DIR`, default
~/.cache/kvmc/sglang; about 75 s the first time, nothing after).

A test file whose tests start the conformance or replay worker on the same release more than once
opts into one worker process per release with
`pytestmark = pytest.mark.usefixtures("one_worker_per_release")` (upstream/serve.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

CI_RELEASES = ("0.5.10.post1", "0.5.13")


@pytest.fixture(scope="session")
def sglang_root() -> Path:
    from upstream.install import default_dir, install

    root = default_dir()
    install(CI_RELEASES, root, say=lambda m: None)
    return root


@pytest.fixture(scope="session")
def release_servers() -> Iterator[dict]:
    """The servers of `one_worker_per_release`, kept from one module to the next (a release is
    imported once per pytest worker, at most upstream/serve.py::MAX_SERVERS at once)."""
    from upstream.serve import close_pool

    pool: dict = {}
    yield pool
    close_pool(pool)


@pytest.fixture(scope="module")
def one_worker_per_release(release_servers: dict) -> Iterator[None]:
    """Every conformance (`conform.run`, cpu) and replay (`replay.run_worker`, no timeout) worker the
    module starts is a fork of one set-up process per (worker, release) (upstream/serve.py, kept
    for the next module that opts in: `release_servers`): the release is imported once, and each
    call still runs from the state a fresh worker runs it from, so it answers what a one-shot
    worker answers; `kvmc explore`'s shard workers (run in-process by
    `main`) are forks of one such process per release or tree (upstream/serve.py::spawn). Other
    subprocesses (`-c` scripts, reproducers, the CLI run as a process) are as before."""
    from upstream.serve import shared_workers

    with shared_workers(release_servers):
        yield
