"""`sgl_kernel.kvcacheio` stand-in: host<->device transfer kernels raise (kvmc's harness copies rows in torch)."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"sgl_kernel.kvcacheio.{name} on kvmc's CPU stub")

    return unavailable
