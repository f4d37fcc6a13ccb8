"""The concrete-only shortcuts in model/radix_cache.py (lock sets walked up from each locker) give
the same answers as the one definition every engine shares, evaluated here through the symbolic
interpretation on constant states (z3 folds constants, so no solver is involved)."""

from __future__ import annotations

import pytest

from model import radix_cache
from model.designs import preset
from model.ops import Concrete, Symbolic
from model.system import System
from specs.configs import CONFIGS
from tests.replay.walk import random_walk


@pytest.mark.parametrize("config", ["small", "hybrid_swa", "hybrid_swa_hicache", "sessions"])
def test_lock_sets_agree_with_the_shared_definition(config: str) -> None:
    cfg = CONFIGS[config]
    system = System(cfg, preset("current"))
    checked = locked = 0
    for seed in range(6):
        tr = random_walk(cfg, preset("current"), steps=12, seed=seed)
        for st in [tr.init] + [s.state for s in tr.steps]:
            xc = system.ctx(Concrete(), tr.params)
            xs = system.ctx(Symbolic(0), tr.params)
            for f in (radix_cache.full_locked, radix_cache.swa_locked):
                assert f(xc, st) == f(xs, st), (config, seed, f.__name__, st)
            assert radix_cache.counters(xc, st) == radix_cache.counters(xs, st), (config, seed, st)
            checked += 1
            locked += any(radix_cache.full_locked(xc, st))
    assert checked >= 30
    assert locked >= 5, f"only {locked} states with a locked node: the walks do not exercise the lock sets"
