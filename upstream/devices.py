"""`--device cpu|cuda`: the one check of a device name, shared by `kvmc replay` (checker/cli/replay.py
re-exports it) and `kvmc conform` / `python -m upstream.kernels_check` (upstream/conform.py,
upstream/kernels_check.py). It sits here, below the CLI, so that neither imports upward.

Also where the conformance worker makes the real `triton` win over kvmc's stub on a GPU
(`real_triton_first`): upstream/stubs/ is on PYTHONPATH, which comes before site-packages."""

from __future__ import annotations

import sys
from pathlib import Path

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
    return str(where)


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
