"""`triton.runtime` stand-in: `jit.JITFunction`, `KernelInterface`, and a `driver` whose
`active` raises as on a host without a Triton device."""

from __future__ import annotations

from . import driver, jit  # noqa: F401
from .jit import JITFunction, KernelInterface  # noqa: F401


class Autotuner(KernelInterface):
    pass


class Heuristics(KernelInterface):
    pass
