"""Random walks of a release preset replayed on that release's real scheduler, choices forced
(not a test: the numbers of docs/replay-sglang.md).

    python -m bench.sglang_walks --release 0.5.18 [--preset v0.5.18] [--configs hybrid_swa sessions ...]
                                 [--walks 20] [--steps 12] [--tight] [--dir DIR]

For each config, `--walks` random walks of the preset (checker/traces/walk.py; with `--tight`, the
config's explicit bounds, where pools are small enough to evict) are written to a temporary folder
and replayed in one worker process in `reproduce` mode: every recorded choice forced, the real
state compared with the recorded one after every step (upstream/sched/driver.py). Prints, per
config: walks that matched state for state, and each divergence (step, field, model vs SGLang),
grouped by field. Exit 0.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
from pathlib import Path
from typing import Any


def walks(cfg_name: str, preset: str, n: int, steps: int, folder: Path, tight: bool, seed0: int = 0,
          extra: tuple[str, ...] = ()) -> list[str]:
    from checker.traces import itf
    from model.designs import PRESETS
    from model.ops import Concrete
    from model.system import System
    from specs.configs import CONFIGS
    from checker.traces.walk import pick_params, random_walk

    cfg = CONFIGS[cfg_name]
    design = PRESETS[preset]
    for fx in extra:  # FIX or FIX=VARIANT turned on over the preset (a diagnosis: is this flag the difference?)
        name, _, variant = fx.partition("=")
        design = design.with_fix(name, variant or "on")
    files = []
    for seed in range(seed0, seed0 + n):
        rng = random.Random(seed)
        params = pick_params(cfg, rng, wide=not tight)
        system = System(cfg, design)
        for _ in range(2000):  # a point the model accepts and the release's tree can hold (warm_fits)
            if warm_fits(cfg, design, params) and system.params_ok(system.ctx(Concrete(), params)):
                break
            params = pick_params(cfg, rng, wide=not tight)
        t = random_walk(cfg, design, steps, seed, params=params)
        f = folder / f"{cfg_name}-{seed}.itf.json"
        itf.write(f, t)
        files.append(str(f))
    return files


def warm_fits(cfg: Any, design: Any, params: Any) -> bool:
    """With #26919's leaf cap (swa_leaf_window_cap) SGLang's unified tree splits every new leaf
    longer than ceil_page(W) on insertion, so a warm prefix node longer than that is not a tree the
    release can hold; the model's initial state allows it (a model gap, docs/replay-sglang.md).
    Walks are drawn where every warm node fits one window."""
    if not (cfg.hybrid_swa and design.on("swa_leaf_window_cap")):
        return True
    ps = cfg.page_size
    cap = -(-params.sliding_window_size // ps) * ps
    return all(L <= cap for L in params.warm_len)


def summarize(outcomes: list[dict[str, Any]]) -> tuple[int, list[str]]:
    ok = 0
    by_field: dict[str, list[str]] = collections.defaultdict(list)
    for o in outcomes:
        if o["status"] == "passed":
            ok += 1
            continue
        name = Path(o["file"]).name
        if o["status"] == "diverged" and o.get("abstraction"):
            by_field[f"abstraction {o['abstraction']}"].append(f"{name} step {o['step']}: {o['message'][:140]}")
        elif o["status"] == "diverged":
            field = str(o["field"]).split("[")[0]
            by_field[field].append(f"{name} step {o['step']}: {o['field']}: model={o['model']!r} sglang={o['sglang']!r}")
        else:
            by_field[o["status"]].append(f"{name}: {o['message'][:160]}")
    lines = []
    for field, items in sorted(by_field.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(items)} x {field}")
        lines.extend("    " + s for s in items[:4])
    return ok, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sglang_walks")
    ap.add_argument("--release", required=True)
    ap.add_argument("--preset", help="default: v<release>, else current")
    ap.add_argument("--configs", nargs="+", default=["small", "paged", "hybrid_swa", "sessions"])
    ap.add_argument("--walks", type=int, default=20)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tight", action="store_true", help="parameters from the explicit bounds (small pools)")
    ap.add_argument("--dir", help="SGLang install folder")
    ap.add_argument("--with", dest="extra", nargs="*", default=[], metavar="FIX[=VARIANT]",
                    help="flags turned on over the preset (to test whether a flag is the difference)")
    ap.add_argument("--keep", help="write the walks into this folder (kept) instead of a temporary one")
    a = ap.parse_args(argv)
    from model.designs import PRESETS
    from upstream.sched.replay import replay_items

    preset = a.preset or (f"v{a.release}" if f"v{a.release}" in PRESETS else "current")
    with tempfile.TemporaryDirectory(prefix="kvmc-walks-") as tmp:
        d = a.keep or tmp
        Path(d).mkdir(parents=True, exist_ok=True)
        items = []
        per_cfg: dict[str, list[str]] = {}
        for c in a.configs:
            fs = walks(c, preset, a.walks, a.steps, Path(d), a.tight, a.seed, tuple(a.extra))
            per_cfg[c] = fs
            items += [(f, (), "reproduce") for f in fs]
        res = replay_items(a.release, items, Path(a.dir) if a.dir else None)
        by_file = {o["file"]: o for o in res["outcomes"]}
        plus = "".join(f" +{x}" for x in a.extra)
        print(f"SGLang {a.release}, preset {preset}{plus}, {a.walks} walks x {a.steps} steps per config"
              f"{' (tight pools)' if a.tight else ''}, choices forced"
              f" ({res['seconds']} s)")
        for c, fs in per_cfg.items():
            ok, lines = summarize([by_file[f] for f in fs])
            print(f"{c}: {ok}/{len(fs)} follow the model state for state")
            print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
