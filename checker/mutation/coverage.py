"""Which configs run a given line of the model: the lines one symbolic step executes from a free
state (every field a fresh z3 symbol, the parameters unbounded), and the lines the properties
execute on that state (SGLang's busy and idle checks are read-only transitions the properties
`busy_check_sound` and `idle_check_sound` read, not the step).

The symbolic interpretation runs both sides of every branch on a state value (model/ops.py), so
one step from a free state executes every line the config can reach; what it skips is decided by
the config alone (page size, features, number of request slots, design flags), so a line it does
not execute is dead in that config. A mutant of a line no config executes cannot be killed by
any check: the report lists it as unreached (a gap in the configs, not in the properties), with
the presets whose configs do run it (a line of a fix's "off" side runs only under the releases
before the fix).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

MODEL_DIR = str(Path(__file__).resolve().parents[2] / "model")


@functools.lru_cache(maxsize=None)
def covered_lines(config: str, design: str = "current") -> frozenset[tuple[str, int]]:
    """(file name relative to the repository, line) of every model line one symbolic step of
    `config` executes, or the properties execute on its free state."""
    from model.designs import PRESETS
    from model.ops import Symbolic
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.induction import unbounded_params
    from checker.engines.substeps import free_state
    from checker.mutation.equivalence import property_reads

    system = System(CONFIGS[config], PRESETS[design])
    params, _ = unbounded_params(system)
    s0 = free_state(system, params, "cov")
    hits: set[tuple[str, int]] = set()
    root = str(Path(MODEL_DIR).parent) + "/"

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            hits.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(MODEL_DIR):
            hits.add((frame.f_code.co_filename, frame.f_lineno))
            return local
        return None

    x = system.ctx(Symbolic(0), params)
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        system.step(x, s0)
        property_reads(x, s0)
    finally:
        sys.settrace(old)
    return frozenset((f[len(root):] if f.startswith(root) else f, line) for f, line in hits)


def configs_running(file: str, line: int, configs: list[str], design: str = "current") -> list[str]:
    """The configs (of `configs`) whose step under preset `design` executes `file`:`line`."""
    return [c for c in configs if (file, line) in covered_lines(c, design)]


def presets_running(sites: list[tuple[str, int]], configs: list[str], but: str) -> dict[tuple[str, int], list[str]]:
    """For each (file, line) of `sites`: the presets other than `but` (and the ones with its flags)
    whose step on some config of `configs` executes it, newest first. A line only older releases
    run (a fix turned off, a mechanism since removed) is checked by `kvmc mutate --design` one of them."""
    from model.designs import PRESETS

    out: dict[tuple[str, int], list[str]] = {site: [] for site in sites}
    for name in reversed(list(PRESETS)):
        if name == but or PRESETS[name].fixes == PRESETS[but].fixes:
            continue
        lines = frozenset().union(*(covered_lines(c, name) for c in configs))
        for site, names in out.items():
            if site in lines:
                names.append(name)
    return out
