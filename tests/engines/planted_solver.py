"""A planted z3 solver for the induction tests: it answers `unknown` to the queries of the first
split levels, so the case-split machinery (checker/engines/induction.py) runs on `small`, whose queries z3
otherwise answers whole.

A `_CaseQuery` pushes a scope and adds the negated goal plus one constraint per split level taken,
so a scope of n constraints is a case at level n - 1; `unknown_through(level)` makes every query
whose case is at that level or above unknown (-1: every query)."""

from __future__ import annotations

from typing import Any

import pytest
import z3

from checker.engines.induction import KInduction


def unknown_through(monkeypatch: pytest.MonkeyPatch, level: int, asked: dict[str, int] | None = None) -> None:
    """Every solver Houdini encodes answers unknown to the whole query (no scope: the joint one, or a
    scope with only the goal) and to a case of split level <= `level` (0: the whole query only);
    `asked["n"]` counts the checks."""
    real_encode = KInduction._encode

    def encode(self: KInduction, k: int, *facts: Any) -> Any:
        out = real_encode(self, k, *facts)
        return (_Planted(out[0], level, asked),) + tuple(out[1:])

    monkeypatch.setattr(KInduction, "_encode", encode)


class _Planted:
    def __init__(self, solver: Any, level: int, asked: dict[str, int] | None) -> None:
        self.solver, self.level, self.asked = solver, level, asked
        self.scopes: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.solver, name)

    def push(self) -> None:
        self.scopes.append(0)
        self.solver.push()

    def pop(self) -> None:
        self.scopes.pop()
        self.solver.pop()

    def add(self, *cs: Any) -> None:
        if self.scopes:
            self.scopes[-1] += len(cs)
        self.solver.add(*cs)

    def check(self, *a: Any) -> Any:
        if self.asked is not None:
            self.asked["n"] = self.asked.get("n", 0) + 1
        if self.level < 0 or not self.scopes or self.scopes[-1] <= self.level + 1:
            return z3.unknown
        return self.solver.check(*a)

    def reason_unknown(self) -> str:
        return "planted unknown"
