"""Documented abstractions: disagreements between SGLang and kvmc's model that are deliberate,
each with its reason, an example and the properties it can affect (docs/conformance.md).

`match(row, scenario, diffs, design, version)` names the abstraction a disagreement falls under,
or None (then it is a disagreement the model must fix). Each predicate is narrow: it must
recognise the documented situation from the scenario and the differing fields, never a whole row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Abstraction:
    name: str
    reason: str
    properties: str  # which kvmc properties it can affect, or why none
    rows: tuple[str, ...]
    matches: Callable[[Any, list, Any, str], bool]


ABSTRACTIONS: list[Abstraction] = []


def match(row: str, sc: Any, diffs: list, design: Any, version: str) -> str | None:
    for a in ABSTRACTIONS:
        if row in a.rows and a.matches(sc, diffs, design, version):
            return a.name
    return None
