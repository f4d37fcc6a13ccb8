"""Cross-engine agreement: BMC (z3) and the explicit-state search on the same parameter points.

BMC treats the config's parameters as z3 variables within `Config.bounds`; the explicit engine
enumerates the points of `Config.explicit_bounds`. To compare them, `pinned(cfg)` makes a variant
of the config whose bounds *are* its explicit bounds (optionally narrowed further), so both engines
range over exactly the same instances. Then, for every property, they must give the same verdict
to the same depth, and a violation must have the same length: BMC's counterexample is the shortest
(every smaller depth was unsat) and so is BFS's first violating level.

`equivalent_designs(cfg)` groups the release presets that set every fix the config exercises
(`checker/engines/run.py::FIX_FEATURES`) the same way: on that config they are one model, so one check
covers the group. `covering_designs(cfg)` picks, of those groups, a few that between them set
every fix the config exercises to each of its variants (always the oldest group, where the
violations are, and the newest): the test suite's instance of the agreement check; the whole matrix
of groups is `KVMC_AGREEMENT=all` (tests/engines/test_agreement.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.config import Config, pinned  # noqa: F401 (pinned: re-exported for the tests)
from model.designs import FIXES, PRESETS, Design
from model.system import System

from checker.engines.bmc import BMC
from checker.engines.results import Result
from checker.engines.explicit import Explorer
from checker.engines.run import FIX_FEATURES, features
from checker.traces.trace import step_table
from checker.verdict import Verdict


def equivalent_designs(cfg: Config, designs: dict[str, Design] | None = None) -> list[list[str]]:
    """Presets grouped by the variants of the fixes `cfg` exercises (a fix is exercised when the
    config has any of its features); order follows PRESETS."""
    feats = features(cfg)
    # a fix FIX_FEATURES does not place is exercised everywhere (never merged away)
    relevant = [f for f in FIXES if f not in FIX_FEATURES or set(FIX_FEATURES[f]) & feats]
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, d in (designs or PRESETS).items():
        groups.setdefault(tuple(d.variant(f) for f in relevant), []).append(name)
    return list(groups.values())


def covering_designs(cfg: Config, designs: dict[str, Design] | None = None, rotate: int | None = None) -> list[list[str]]:
    """Of `equivalent_designs(cfg)`, the first and the last group, then (greedily, most new pairs
    first, ties in PRESETS order) groups until every (fix, variant) pair some group sets is set by a
    chosen one: each code path a fix's variant selects is run by both engines on the config at
    least once; with `rotate`, one more: the `rotate`-th (cyclically) of the groups left out, so
    that checks numbered 0, 1, 2, ... over many configs reach every group. Interactions of two
    fixes' intermediate variants on one config are left to the whole matrix."""
    groups = equivalent_designs(cfg, designs)
    pool = designs or PRESETS
    feats = features(cfg)
    relevant = [f for f in FIXES if f not in FIX_FEATURES or set(FIX_FEATURES[f]) & feats]
    pairs = [{(f, pool[g[0]].variant(f)) for f in relevant} for g in groups]
    chosen = sorted({0, len(groups) - 1})
    covered = set().union(*(pairs[i] for i in chosen))
    want = set().union(*pairs) if pairs else set()
    while covered != want:
        i = max((i for i in range(len(groups)) if i not in chosen), key=lambda i: (len(pairs[i] - covered), -i))
        chosen.append(i)
        covered |= pairs[i]
    rest = [i for i in range(len(groups)) if i not in chosen]
    if rotate is not None and rest:
        chosen.append(rest[rotate % len(rest)])
    return [groups[i] for i in sorted(chosen)]


@dataclass
class Disagreement:
    property: str
    bmc: Result
    explicit: Result

    def describe(self) -> str:
        def one(tag: str, r: Result) -> str:
            line = f"{tag}: {r.words()}" + (f" ({r.reason})" if r.reason else "") + f", witness at {r.witness_depth}"
            if r.trace is not None:
                line += "\n" + step_table(r.trace)
            return line

        return f"{self.property}:\n" + one("bmc", self.bmc) + "\n" + one("explicit", self.explicit)


def _key(r: Result) -> tuple[Any, ...]:
    if r.verdict is Verdict.VIOLATED:
        return (r.verdict, r.depth)
    return (r.verdict, r.depth if r.verdict is not Verdict.UNKNOWN else None)


def compare(design: Design, cfg: Config, depth: int, props: list[str] | None = None) -> tuple[dict[str, Result], dict[str, Result], list[Disagreement]]:
    """Run both engines on `cfg` (use a `pinned` config) to `depth`; every property checked to the
    full depth (no first-error stop)."""
    system = System(cfg, design)
    b = BMC(system, props, minimize=False).run(depth)
    e = Explorer(system, props).run(depth, keep_going=True).results
    bad = [Disagreement(p, b[p], e[p]) for p in b if _key(b[p]) != _key(e[p]) or
           (b[p].verdict is not Verdict.VIOLATED and b[p].witness_depth != e[p].witness_depth)]
    return b, e, bad
