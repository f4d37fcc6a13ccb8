"""Deep random walks of every release preset on every config it models: every safety property on
every state, 40 steps a walk, a fixed time per (preset, config). `python -m bench --only walk_sweep`.

The BMC covers every parameter point but only a few steps on the bigger configs, the explicit engine
every step of a few points; these walks cover wide random points (the config's symbolic bounds)
deep, cheaply (about 2,000 steps/s here). A violation is not a verdict on its own: each row names
the first walk (seed, step) that breaks each property, to be minimised and explained (a finding of
docs/findings.md, a known bug of a release, or a kvmc issue). Random testing proves nothing: a row
with no violation says only that these walks found none.

Session 45's run (15 s a pair, 10 presets) found no new SGLang finding; it did find two kvmc issues,
both fixed: chunk sizes that are not page multiples (which every release refuses at startup) gave a
false busy-check alarm at page 4, and `lock_ledger` / `request_bounds` judged the half-done state a
crash leaves (docs/findings.md, "Deep random walks"; the run: docs/log/findings.md).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

SECONDS = 15.0  # per (preset, config); KVMC_WALK_SWEEP_SECONDS overrides
QUICK_SECONDS = 1.0
DEPTH = 40


def sweep_pair(preset: str, config: str, seconds: float, depth: int = DEPTH,
               max_walks: int | None = None) -> dict[str, Any] | None:
    """One (preset, config): walks until `seconds` pass (or `max_walks` walks: the same walks on any
    machine); None when the preset does not model the config."""
    from checker.engines.applies import for_config
    from checker.traces.walk import RandomOracle, _valid_params
    from model.designs import PRESETS
    from model.ops import Concrete, Infeasible
    from model.state import OOM_NONE
    from model.system import System
    from specs.configs import CONFIGS
    from specs.properties import PROPERTIES

    cfg, design = CONFIGS[config], PRESETS[preset]
    if cfg.not_modelled_by(design):
        return None
    system = System(cfg, design)
    props = for_config(cfg)
    first: dict[str, tuple[int, int]] = {}
    steps = walks = 0
    t0 = time.perf_counter()
    seed = 0
    while (walks < max_walks) if max_walks is not None else (time.perf_counter() - t0 < seconds):
        rng = random.Random(seed * 7919 + 1)  # (the seeds of /tmp sweeps of session 45: the same walks)
        p = _valid_params(system, rng)
        if p is None:
            break
        x = system.ctx(Concrete(), p)
        s = system.init(x)
        for t in range(depth):
            if s.oom != OOM_NONE:
                break
            for _ in range(30):
                try:
                    s2 = system.step(system.ctx(Concrete(RandomOracle(rng, rng.choice((0.3, 0.5, 0.8)))), p), s)
                    break
                except Infeasible:
                    continue
            else:
                break
            s, steps = s2, steps + 1
            for name in props:
                if name not in first and PROPERTIES[name].holds(x, s) is not True:
                    first[name] = (seed, t + 1)
        walks += 1
        seed += 1
    return dict(preset=preset, config=config, walks=walks, steps=steps,
                violated=", ".join(f"{n} (seed {a}, step {b})" for n, (a, b) in sorted(first.items())) or "-",
                seconds=round(time.perf_counter() - t0, 1))


def run(quick: bool = False) -> list[dict[str, Any]]:
    from model.designs import PRESETS
    from specs.configs import CONFIGS

    seconds = float(os.environ.get("KVMC_WALK_SWEEP_SECONDS", QUICK_SECONDS if quick else SECONDS))
    presets = [p for p in PRESETS if p != "current"]  # current is v0.5.23
    rows = []
    for preset in presets:
        for config in CONFIGS:
            row = sweep_pair(preset, config, seconds)
            if row is not None:
                rows.append(row)
    return rows


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    bad = [r for r in rows if r["violated"] != "-"]
    steps = sum(r["steps"] for r in rows)
    return (f"{len(rows)} (preset, config) pairs, {steps:,} steps of random walks, {len(bad)} pairs with a violation "
            f"(each to be explained: docs/findings.md). Random testing proves nothing.")
