"""Every planted bug is a documented module replacing a real transition, and every pool
counterpart names a model mutant."""

from __future__ import annotations

import inspect

import model.system  # noqa: F401  (registers the transitions)
from model.mutants import available
from model.transition import REGISTRY
from pool.mutants import POOL_MUTANTS


def test_each_mutant_replaces_a_transition_with_its_signature() -> None:
    mods = available()
    assert len(mods) >= 15
    for name, m in mods.items():
        assert (m.__doc__ or "").strip(), f"mutant {name} has no docstring"
        assert m.REPLACES in REGISTRY, f"mutant {name} replaces unknown transition {m.REPLACES!r}"
        want = list(inspect.signature(REGISTRY[m.REPLACES].fn).parameters)
        got = list(inspect.signature(m.replacement).parameters)
        assert got == want, (name, got, want)


def test_pool_counterparts_name_model_mutants() -> None:
    assert set(POOL_MUTANTS) <= set(available()), sorted(set(POOL_MUTANTS) - set(available()))
