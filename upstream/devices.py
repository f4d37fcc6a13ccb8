"""`--device cpu|cuda`: the one check of a device name, shared by `kvmc replay` (checker/cli/replay.py
re-exports it) and `kvmc conform` / `python -m upstream.kernels_check` (upstream/conform.py,
upstream/kernels_check.py). It sits here, below the CLI, so that neither imports upward.

Also where the conformance worker makes the real `triton` win over kvmc's stub on a GPU
(`real_triton_first`): upstream/stubs/ is on PYTHONPATH, which comes before site-packages."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

STUBS = Path(__file__).resolve().parent / "stubs"


def check_device(device: str, available: bool = True) -> str:
    """`--device`: its name always; with `available`, that it is there (imports torch, so it is
    asked only once the rest of the input is valid: bad input is answered before torch loads)."""
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ValueError(f"unknown device {device!r}; expected cpu or cuda")
    if available and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ValueError(f"--device {device}: no CUDA device is available here (torch.cuda.is_available() is False); "
                             "use --device cpu")
    return device


def real_triton_first() -> str:
    """Move every upstream/stubs entry of sys.path to its end (call before anything imports torch
    or triton; torch imports triton lazily), then import triton and check it is not kvmc's stub.
    The other stubs (IPython, sgl_kernel, torchvision) stay as fallbacks for what the image lacks.
    Returns triton's file; raises RuntimeError when only the stub is importable."""
    if "triton" in sys.modules and _is_stub(getattr(sys.modules["triton"], "__file__", None)):
        raise RuntimeError("triton was imported from kvmc's stub before the worker could move upstream/stubs "
                           "to the end of sys.path; the real kernels cannot run in this process")
    stubs = [p for p in sys.path if _is_stub_dir(p)]
    sys.path[:] = [p for p in sys.path if not _is_stub_dir(p)] + stubs
    import importlib

    importlib.invalidate_caches()
    import triton

    where = getattr(triton, "__file__", None)
    if _is_stub(where):
        raise RuntimeError(f"--device cuda needs the real triton, but only kvmc's stub is importable ({where}); "
                           "install triton next to torch (pip install triton matching torch's CUDA build)")
    absent_cuda_extensions()
    return str(where)


# -- SGLang's CUDA-only extensions, absent ------------------------------------------------------------
# On a CUDA host SGLang's module-level imports take their CUDA branch (`is_cuda()`): the quantization
# and attention layers that `configs/model_config.py` and `mem_cache/memory_pool.py` import pull
# `sgl_kernel.<sub>` and `flashinfer` names. kvmc never installs those (CUDA builds of their own),
# and the rows never call them: the allocators run Triton kernels and torch. So on cuda the worker
# serves them as absent: importable, every attribute a stand-in usable where an import needs it (a
# base class, a subscript, an attribute chain), raising `AbsentCudaExtension` when called, so a row
# that did reach one fails with its name instead of computing anything.
ABSENT = ("sgl_kernel", "flashinfer")


class AbsentCudaExtension(RuntimeError):
    pass


class _Absent:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise AbsentCudaExtension(f"{self._name} was called, but it is a CUDA extension kvmc does not install "
                                  "(upstream/devices.py::ABSENT); this conformance row reached a kernel it does not model")

    def __getitem__(self, key: Any) -> Any:
        return self

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (type(self._name.rsplit(".", 1)[-1], (), {"__doc__": f"absent {self._name}"}),)

    def __repr__(self) -> str:
        return f"<absent CUDA extension {self._name}>"


class _AbsentModule(types.ModuleType):
    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{self.__name__}.{attr}")


class _AbsentFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: answers only for ABSENT names nothing before it found."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not any(name == a or name.startswith(a + ".") for a in ABSENT):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        m = _AbsentModule(spec.name)
        m.__path__ = []  # a package: its submodules come here too
        m.__file__ = None
        return m

    def exec_module(self, module: Any) -> None:
        pass


def absent_cuda_extensions() -> None:
    if not any(isinstance(f, _AbsentFinder) for f in sys.meta_path):
        sys.meta_path.append(_AbsentFinder())


def _is_stub_dir(p: str) -> bool:
    try:
        return Path(p or ".").resolve() == STUBS
    except OSError:
        return False


def _is_stub(file: str | None) -> bool:
    if not file:
        return False
    try:
        return STUBS in Path(file).resolve().parents
    except OSError:
        return False
