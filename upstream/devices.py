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


# -- the paged allocator's kernel on an empty free list ------------------------------------------------
# Up to 0.5.21 `PagedTokenToKVPoolAllocator.alloc_extend` / `alloc_decode` launch their Triton kernel
# before checking that enough pages are free (0.5.22 moved the check before the launch). A request
# that needs a new page reads `free_pages[k]`; with an empty free list that read faults on the GPU
# ("an illegal memory access", .ci/device_probe.py on an H200: 0.5.13 and 0.5.18, extend and decode),
# which poisons the process's CUDA context, and every later scenario of the worker would fail. (With
# too few but some free pages the read stays inside the tensor's allocation and the allocator returns
# None, as on the cpu.) So on cuda the worker does not make that launch: the guarded call raises
# GpuFaultAvoided, and the scenario counts as the documented abstraction
# `paged_kernel_reads_empty_free_list` (upstream/abstractions.py).
class GpuFaultAvoided(RuntimeError):
    pass


def launches_before_fit_check(method: Any, kernel: str) -> bool:
    """Does the release's `alloc_extend` / `alloc_decode` launch `kernel` before its `return None`?"""
    import inspect

    try:
        src = inspect.getsource(method)
    except (OSError, TypeError):
        return False
    launch, refuse = src.find(f"{kernel}["), src.find("return None")
    return launch >= 0 and (refuse < 0 or launch < refuse)


def guard_paged_kernels(cls: Any) -> list[str]:
    """Wrap `cls.alloc_extend` / `cls.alloc_decode` where they launch before the fit check: an
    empty free list and a request that opens a page raise GpuFaultAvoided instead of launching.
    Returns the methods guarded."""
    import functools
    import inspect

    def opens_page_extend(self: Any, a: Any) -> bool:
        ps = self.page_size
        pre, seq = a["prefix_lens_cpu"].tolist(), a["seq_lens_cpu"].tolist()
        return any(-(-int(s) // ps) > -(-int(p) // ps) for p, s in zip(pre, seq))

    def opens_page_decode(self: Any, a: Any) -> bool:
        return any((int(s) - 1) % self.page_size == 0 for s in a["seq_lens_cpu"].tolist())

    guarded = []
    for name, kernel, opens in (("alloc_extend", "alloc_extend_kernel", opens_page_extend),
                                ("alloc_decode", "alloc_decode_kernel", opens_page_decode)):
        method = getattr(cls, name, None)
        if method is None or getattr(method, "_kvmc_guarded", False) or not launches_before_fit_check(method, kernel):
            continue
        sig = inspect.signature(method)

        def guarded_call(self: Any, *args: Any, _m: Any = method, _s: Any = sig, _o: Any = opens, _n: str = name,
                         **kwargs: Any) -> Any:
            a = _s.bind(self, *args, **kwargs).arguments
            if len(self.free_pages) == 0 and _o(self, a):
                raise GpuFaultAvoided(f"{type(self).__name__}.{_n} with an empty free list would launch its Triton "
                                      "kernel, which reads free_pages[0] before the fit check: a CUDA fault on a GPU")
            return _m(self, *args, **kwargs)

        functools.update_wrapper(guarded_call, method)
        guarded_call._kvmc_guarded = True  # type: ignore[attr-defined]
        setattr(cls, name, guarded_call)
        guarded.append(name)
    return guarded
