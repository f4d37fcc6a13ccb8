"""`triton.testing` stand-in (benchmark decorators are identity; nothing measures)."""

from __future__ import annotations

from typing import Any


class Benchmark:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


def perf_report(*args: Any, **kwargs: Any) -> Any:
    return lambda fn: fn


def do_bench(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("triton.testing.do_bench on kvmc's CPU stub")


def assert_close(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("triton.testing.assert_close on kvmc's CPU stub")
