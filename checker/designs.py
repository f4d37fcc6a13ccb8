"""Naming a design from its parts, as `--design/--without/--with/--mutant` do (kvmc check, graph,
review, conform, the upstream workers).

It lives in the checker, not in model/: `kvmc review --base-rev` runs the working tree's checker
over a git revision's model/ and specs/, and an older revision's model/designs.py has the presets
and fixes (`PRESETS`, `FIXES`, `Design.with_fix`, `with_mutants`) but not this code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from model.designs import Design


class DesignError(ValueError):
    """A design named from parts that do not exist (a preset, a fix, a variant, a mutant)."""


def _choice(kind: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise DesignError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")


def build(name: str, without: Sequence[str] = (), with_: Sequence[str] = (), mutants: Sequence[str] = ()) -> Design:
    """Preset `name` with the fixes in `without` off, those in `with_` on (`FIX`, or `FIX=VARIANT`)
    and the planted bugs `mutants`: what `--design/--without/--with/--mutant` name (kvmc check,
    graph, review, conform). A part that does not exist is a `DesignError` naming it and what
    was expected."""
    from model.designs import FIXES, PRESETS
    from model.mutants import available as available_mutants

    _choice("design", name, list(PRESETS))
    d = PRESETS[name]
    for f in without:
        _choice("fix", f, list(FIXES))
        d = d.with_fix(f, None)
    for spec in with_:
        if spec.count("=") > 1 or spec.startswith("=") or spec.endswith("="):
            raise DesignError(f"malformed --with {spec!r}; expected FIX or FIX=VARIANT")
        f, _, variant = spec.partition("=")
        _choice("fix", f, list(FIXES))
        v = variant or FIXES[f].variants[0]
        _choice(f"variant of {f}", v, list(FIXES[f].variants))
        d = d.with_fix(f, v)
    if mutants:
        known = sorted(available_mutants())
        for m in mutants:
            _choice("mutant", m, known)
        d = d.with_mutants(frozenset(mutants))
    return d
