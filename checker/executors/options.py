"""The `--executor local|ray` and `--ray-address auto|HOST:PORT` options, shared by every command
that offers them: `kvmc check` and `kvmc review` (checker/cli/executor.py, which adds what those
commands' work means on Ray) and `kvmc explore` (upstream/explore.py, a layer below checker/cli).
Their values are validated by `check_choice` (checker/executors/__init__.py), before any work."""

from __future__ import annotations

import argparse


def add_executor_options(p: argparse.ArgumentParser, runs: str) -> None:
    """The two options; `runs` says what goes to Ray with `--executor ray` (the command's help)."""
    p.add_argument("--executor", default="local", metavar="local|ray",
                   help=f"where parallel work runs: local processes (default), or ray: {runs} (the ray extra)")
    p.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                   help="with --executor ray: an existing Ray cluster (auto: the one this node belongs to); "
                        "default: a local Ray instance started for the run and stopped after it")
