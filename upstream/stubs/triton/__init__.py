"""kvmc's CPU stand-in for `triton` (not the real package; see upstream/stubs/README.md).

SGLang imports triton at module level almost everywhere and decorates kernels at import time.
Here a kernel is a `JITFunction` whose launch (`kernel[grid](...)`) raises `TritonUnavailable`,
so a code path that really needs a GPU kernel fails loudly instead of computing something wrong.
The harness (upstream/kernels.py) routes the allocator kernels it needs to torch code.
"""

from __future__ import annotations

from typing import Any

from . import backends, compiler, language, runtime, testing  # noqa: F401
from .runtime.jit import JITFunction, KernelInterface, TritonUnavailable  # noqa: F401

__version__ = "0.0.0+kvmc.stub"


def jit(fn: Any = None, **kwargs: Any) -> Any:
    """`@triton.jit` and `@triton.jit(...)`: a `JITFunction` wrapping `fn`."""
    if fn is None:
        return lambda f: JITFunction(f)
    return JITFunction(fn)


def autotune(*args: Any, **kwargs: Any) -> Any:
    return lambda fn: fn


def heuristics(*args: Any, **kwargs: Any) -> Any:
    return lambda fn: fn


class Config:
    def __init__(self, kwargs: Any = None, num_warps: int = 4, num_stages: int = 2, **rest: Any) -> None:
        self.kwargs = dict(kwargs or {})
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.rest = rest


def cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def __getattr__(name: str) -> Any:
    # CamelCase names are classes (isinstance / subclassing must work); anything else is unknown
    if name[:1].isupper():
        cls = type(name, (), {"__module__": __name__})
        globals()[name] = cls
        return cls
    raise AttributeError(f"module 'triton' (kvmc stub) has no attribute {name!r}")


# Any other `triton.*` submodule (`triton.runtime.autotuner`, `triton.language.extra.libdevice`,
# `triton.tools.tensor_descriptor`, ...) is made on demand: CamelCase names are classes, other
# names inert placeholders. The finder goes last on sys.meta_path, so the stub's own files win.
import importlib.abc as _abc  # noqa: E402
import importlib.machinery as _machinery  # noqa: E402
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


def _submodule_getattr(module: str) -> Any:
    def getattr_(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name[:1].isupper():
            return type(name, (), {"__module__": module})
        return language._Placeholder(f"{module}.{name}")

    return getattr_


class _KvmcTritonFinder(_abc.MetaPathFinder, _abc.Loader):
    def find_spec(self, fullname, path=None, target=None):  # type: ignore[no-untyped-def]
        if fullname.startswith("triton."):
            return _machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        m = _types.ModuleType(spec.name)
        m.__path__ = []
        m.__getattr__ = _submodule_getattr(spec.name)  # type: ignore[attr-defined]
        return m

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        return None


if not any(type(f).__name__ == "_KvmcTritonFinder" for f in _sys.meta_path):
    _sys.meta_path.append(_KvmcTritonFinder())
