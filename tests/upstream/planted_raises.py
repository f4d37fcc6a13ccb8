"""Planted for the conformance test: `budget_state` raises on every scenario, as a model (or a
release whose compiled core the environment cannot run) that fails before anything is compared.
Loaded by `kvmc conform --override`: the row must count errors, never disagreements."""

from __future__ import annotations

from typing import Any

REPLACES = "budget_state"


def replacement(x: Any, s: Any, ad: Any) -> Any:
    raise RuntimeError(f"planted: budget_state cannot run ({ad.rem_input_tokens=})")
