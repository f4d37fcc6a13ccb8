"""`triton.runtime.jit` stand-in: a kernel object that cannot be launched."""

from __future__ import annotations

from typing import Any


class TritonUnavailable(RuntimeError):
    """A Triton kernel was launched on kvmc's CPU stub."""


class KernelInterface:
    def __getitem__(self, grid: Any) -> Any:
        name = getattr(self, "__name__", type(self).__name__)

        def launch(*args: Any, **kwargs: Any) -> Any:
            raise TritonUnavailable(f"Triton kernel {name} launched on kvmc's CPU stub (no GPU); route it to torch code")

        return launch


class JITFunction(KernelInterface):
    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TritonUnavailable(f"Triton kernel {self.__name__} called outside a launch (kvmc CPU stub)")


def jit(fn: Any = None, **kwargs: Any) -> Any:
    if fn is None:
        return lambda f: JITFunction(f)
    return JITFunction(fn)
