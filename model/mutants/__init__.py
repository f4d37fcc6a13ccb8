"""Planted bugs: one small module per mutant, each replacing one transition of the model.

A mutant module has a docstring saying what was planted and which SGLang mechanism it breaks,
`REPLACES = "<transition name>"`, and `def replacement(x, s, ...)` with the transition's signature
(the original is reachable as `<module>.<transition>.original`). `Design.with_mutants({name})`
turns one on; the engines then run the model with that transition replaced.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable


def available() -> dict[str, ModuleType]:
    return dict(_scan())


@functools.lru_cache(maxsize=1)
def _scan() -> tuple[tuple[str, ModuleType], ...]:
    # scanned once per process: every Ctx resolves its design's mutants, and the explicit and
    # random engines build a Ctx per step
    out = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        out.append((info.name, importlib.import_module(f"{__name__}.{info.name}")))
    return tuple(out)


def resolve_overrides(design: Any) -> dict[str, Callable[..., Any]]:
    """Transition name -> replacement, for the design's mutants and reviewer overrides."""
    out: dict[str, Callable[..., Any]] = {}
    if design.mutants:
        mods = available()
        for name in sorted(design.mutants):
            if name not in mods:
                raise KeyError(f"unknown mutant {name!r}; expected one of {sorted(mods)}")
            m = mods[name]
            if m.REPLACES in out:
                raise ValueError(f"mutants {sorted(design.mutants)} replace the same transition {m.REPLACES!r}")
            out[m.REPLACES] = m.replacement
    for k, v in dict(design.overrides).items():
        out[k] = v  # type: ignore[assignment]
    return out
