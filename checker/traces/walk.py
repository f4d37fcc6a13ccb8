"""Random walks through the model's concrete interpretation, as `Trace`s: long traces that
exercise the pool far beyond the short counterexamples (used by tests, bench/replay.py and the
scheduler-loop conformance rows, upstream/sched/loop_rows.py).

A step's choices come from a seeded RNG; a step whose choices break one of the model's
assumptions (`Infeasible`: e.g. an eviction set that is not minimal) is retried with fresh
choices, so every recorded step is one the model allows.
"""

from __future__ import annotations

import random
from typing import Any, Iterator

from checker.traces.trace import Step, Trace
from model.config import Config, concrete_params, enumerate_params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import OOM_NONE
from model.system import System


class RandomOracle:
    def __init__(self, rng: random.Random, p_true: float) -> None:
        self.rng, self.p_true = rng, p_true

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick_bool(self, name: str) -> bool:
        return self.rng.random() < self.p_true


def pick_params(cfg: Config, rng: random.Random, wide: bool = True) -> Any:
    """A random point of the config's symbolic bounds (`wide`) or of its explicit bounds."""
    if not wide:
        pts = list(enumerate_params(cfg))
        return rng.choice(pts) if pts else concrete_params(cfg)
    from model.config import PAGE_MULTIPLE, REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS

    def draw(name: str) -> int:
        lo, hi = cfg.bound(name)
        step = cfg.page_size if name in PAGE_MULTIPLE else 1
        return rng.choice(range(lo, hi + 1, step))

    vals: dict[str, Any] = {n: draw(n) for n in SCALAR_PARAMS}
    for n in REQ_PARAMS:
        vals[n] = tuple(draw(n) for _ in range(cfg.num_reqs))
    for n in WARM_PARAMS:
        vals[n] = tuple(draw(n) for _ in range(cfg.warm_atoms))
    return concrete_params(cfg, **vals)


def checkpoint_walks(system: System, seeds: int, steps: int = 40) -> Iterator[tuple[int, int, Any, Concrete, Any]]:
    """Random walks from `seeds` parameter points, each step recording its checkpoints (and the
    ghost values given there): yields (seed, step, ctx, its ops, the state after the step). A step
    whose choices the model rejects is skipped; a walk ends at an allocation failure."""
    for seed in range(seeds):
        rng = random.Random(seed)
        p = _valid_params(system, rng)
        if p is None:
            continue
        s = system.init(system.ctx(Concrete(), p))
        for t in range(steps):
            if s.oom != OOM_NONE:
                break
            ops = Concrete(RandomOracle(rng, rng.choice((0.3, 0.5, 0.8))))
            ops.checkpoints = []
            x = system.ctx(ops, p)
            try:
                s = system.step(x, s)
            except Infeasible:
                continue
            yield seed, t, x, ops, s


def _valid_params(system: System, rng: random.Random, draws: int = 500) -> Any:
    """The first of up to `draws` random points of the config's bounds that satisfies params_ok (a
    config whose constraints relate the bounds, such as `over_long_prompt`'s valid and over-long
    prompts, rejects most single draws), or None."""
    for _ in range(draws):
        p = pick_params(system.cfg, rng)
        if system.params_ok(system.ctx(Concrete(), p)):
            return p
    return None


def random_walk(cfg: Config, design: Design, steps: int, seed: int, params: Any = None, tries: int = 60) -> Trace:
    rng = random.Random(seed)
    system = System(cfg, design)
    if params is not None:
        p = params if system.params_ok(system.ctx(Concrete(), params)) else None
    else:
        p = _valid_params(system, rng)  # (the draws of the walks conformance seeds, unchanged)
    if p is None:
        raise ValueError(f"no parameter point of config {cfg.name} satisfies params_ok")
    x = system.ctx(Concrete(), p)
    s = system.init(x)
    out: list[Step] = []
    for _t in range(steps):
        if s.oom != OOM_NONE:
            break
        for _k in range(tries):
            ops = Concrete(RandomOracle(rng, rng.choice((0.3, 0.5, 0.8))))
            try:
                s2 = system.step(system.ctx(ops, p), s)
            except Infeasible:
                continue
            out.append(Step("event_loop_iteration", dict(ops.picks), s2))
            s = s2
            break
        else:
            break
    return Trace(cfg, design, p, system.init(system.ctx(Concrete(), p)), out, None, "random-walk")
