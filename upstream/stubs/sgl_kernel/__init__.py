"""kvmc's stand-in for `sgl_kernel` (SGLang's CUDA kernels; imported by
`mem_cache/memory_pool_host.py` and, up to 0.5.12.post1, the scheduler module)."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"sgl_kernel.{name} on kvmc's CPU stub")

    return unavailable
