"""Every lemma holds in every state of long random walks through the concrete model, on every
config (induction assumes them; the BMC checks them to its depth, these walks go deeper)."""

from __future__ import annotations

import pytest
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS
from checker.traces.walk import random_walk


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_lemmas_hold_on_random_walks(config: str) -> None:
    cfg = CONFIGS[config]
    system = System(cfg, PRESETS["current"])
    checked = 0
    for seed in range(20):
        tr = random_walk(cfg, PRESETS["current"], 80, seed)
        x = system.ctx(Concrete(), tr.params)
        for t, st in enumerate(tr.states):
            for name, lm in LEMMAS.items():
                assert lm.body(x, st) is True, f"lemma {name} false at step {t} of seed {seed} on {config}"
            checked += 1
    assert checked > 20 * 40, checked  # the walks really ran
