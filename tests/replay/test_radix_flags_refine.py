"""The torch pool implements each radix-cache / SWA-window flag of issue 27 as the model does:
random walks of the model with the flag on replay step by step on the pool (every field, every
choice, the tree counters, the busy check), on the configs the flag touches, including a page-4
hybrid-SWA instance whose window is not a page multiple (where the flags differ most)."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from checker.replay.pool import replay_trace
from model.config import Config
from model.designs import PRESETS, Design
from specs.configs import CONFIGS

from .walk import random_walk

ROOT = Path(__file__).resolve().parents[2]


def pool_flags() -> set[str]:
    """The fix flags the torch pool reads (pool/*.py `design.on("X")` / `design.variant("X")`)."""
    src = "".join(p.read_text() for p in (ROOT / "pool").glob("*.py"))
    return set(re.findall(r'design\.(?:on|variant)\("([a-z0-9_]+)"\)', src))


# Fixes whose model behaviour the pool does not have yet (it implements them "off"): a walk with
# them on diverges for reasons that have nothing to do with the flags under test. Each is left on
# as soon as the pool reads it (then the pool follows both sides).
POOL_LAGS = ("chunked_input_gate", "chunk_end_page_align", "swa_gate_fresh_tail", "swa_chunk_cap")


def base() -> Design:
    """`current`, less the POOL_LAGS fixes the pool does not read."""
    d, have = PRESETS["current"], pool_flags()
    for f in POOL_LAGS:
        if f in d.fixes and f not in have:
            d = d.with_fix(f, None)
    return d


# hybrid SWA at page 4 with W in 3..9 (W mod 4 != 0 included), chunked prefill, two requests
PAGE4 = Config(
    name="hybrid_swa_page4_walk", doc="", num_reqs=2, page_size=4, hybrid_swa=True, chunked_prefill=True, private_atoms=5,
    bounds={"full_tokens": (16, 96), "swa_tokens": (16, 64), "sliding_window_size": (3, 9), "input_len": (1, 24),
            "max_new_tokens": (1, 10), "chunked_prefill_size": (4, 16), "req_pool_size": (2, 2),
            "max_prefill_tokens": (16, 64)},
)

FLAGS: list[tuple[str, str]] = [
    ("swa_release_threshold", "max_w_ps"),
    ("swa_release_threshold", "ceil_max_w_ps"),
]


def _design(flags: list[tuple[str, str]]) -> Design:
    d = base()
    for f, v in flags:
        assert f in pool_flags(), f"the pool does not implement {f}"
        d = d.with_fix(f, v)
    return d


@pytest.mark.parametrize("cfg", [PAGE4, CONFIGS["hybrid_swa"], CONFIGS["hybrid_swa_hicache"]], ids=lambda c: c.name)
@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f"{f[0]}={f[1]}")
def test_walks_refine_with_flag(cfg: Config, flag: tuple[str, str]) -> None:
    design = _design([flag])
    rng = random.Random(f"{cfg.name}/{design.name}")
    checked = 0
    for _ in range(6):
        t = random_walk(cfg, design, 16, rng.randrange(1 << 30))
        o = replay_trace(t, file=f"walk {cfg.name} {design.name}")
        assert o.ok, o.line()
        checked += len(t.steps)
    assert checked > 0
