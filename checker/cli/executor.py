"""`--executor local|ray` and `--ray-address auto|HOST:PORT` for `kvmc check` and `kvmc review`
(checker/executors/): the options, their validation before any work (one line, exit 2), and the
executor held for the run's duration (a local Ray instance started for it is shut down after)."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any, Iterator


def add_executor_options(p: argparse.ArgumentParser) -> None:
    from checker.executors.options import add_executor_options as add

    add(p, "the induction engine's case queries and the --jobs/--all/review jobs as Ray tasks")


def check_executor(args: Any, jobs: bool) -> None:
    """Bad `--executor` / `--ray-address` / a missing ray extra: UsageError before any work. `jobs`:
    the command runs (design, config) jobs (--jobs, --all, review), which Ray can take whatever
    the engine; otherwise only the induction engine's case queries go to Ray."""
    from checker import executors
    from checker.cli.common import UsageError

    try:
        executors.check_choice(args.executor, args.ray_address)
    except executors.ExecutorError as e:
        raise UsageError(str(e)) from None
    if args.executor == "ray" and not jobs and args.engine != "induction":
        raise UsageError(f"--executor ray runs the induction engine's case queries and the jobs of --jobs/--all; "
                         f"expected --engine induction or --jobs N (got --engine {args.engine})")


@contextlib.contextmanager
def executor_for(args: Any, workers: int | None = None) -> Iterator[Any]:
    """The run's executor (None: local) while the block runs; Ray that cannot start is a UsageError."""
    from checker import executors
    from checker.cli.common import UsageError

    try:
        with executors.use(args.executor, args.ray_address, workers) as ex:
            yield ex
    except executors.ExecutorError as e:
        raise UsageError(str(e)) from None
