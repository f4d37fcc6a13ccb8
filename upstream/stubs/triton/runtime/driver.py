"""`triton.runtime.driver` stand-in: `active` raises, as it does on a host with no Triton device
(a permissive dummy would make SGLang take GPU-only paths, e.g. srt/layers/attention/fla/utils.py)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "active":
        raise RuntimeError("0 active drivers ([]). There should only be one. (kvmc triton stub: no GPU)")
    raise AttributeError(f"module 'triton.runtime.driver' (kvmc stub) has no attribute {name!r}")
