"""Running a check: designs and configs in, one report out. The CLI, `review` and the benchmarks
all go through here.

Strategy per config (engine "bmc", the default):
1. Bounded model checking, incremental over depth, all selected properties at once (checker/bmc.py).
2. Once every property has its witness (so none is vacuous) and no violation was found, and if
   proofs are on, the 1-induction step case is tried with the lemmas (checker/induction.py). If it
   closes, every open property holds at every depth: the verdict is `proved (k=1)` and the BMC
   stops early. If it does not close, the BMC goes on to the requested depth.

A violation stops the whole check unless `keep_going` (TLC's default is the same: first error).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from model.config import Config
from model.designs import FIXES, Design
from model.system import System
from specs.lemmas import LEMMAS
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

from .bmc import BMC, Result
from .verdict import Verdict

# which config features exercise which fix (to look where a bug can be first)
FIX_FEATURES: dict[str, tuple[str, ...]] = {
    "swa_busy_check": ("hybrid_swa",),
    "session_active": ("sessions",),
    "chunked_swa_page_reserve": ("hybrid_swa", "chunked_prefill"),
    "spec_topk_busy_check": ("spec",),
    "swa_hostload_budget": ("hicache", "hybrid_swa"),
    "retract_tail_free": ("sessions",),
    "swa_budget_split": ("hybrid_swa",),
    "swa_window_headroom": ("hybrid_swa",),
}


def features(cfg: Config) -> set[str]:
    out = set()
    if cfg.hybrid_swa:
        out.add("hybrid_swa")
    if cfg.hicache:
        out.add("hicache")
    if cfg.chunked_prefill:
        out.add("chunked_prefill")
    if cfg.streaming_sessions:
        out.add("sessions")
    if cfg.spec is not None:
        out.add("spec")
    return out


def order_configs(names: list[str], design: Design, baseline: Design | None) -> list[str]:
    """Configs that exercise a fix the design changes (relative to `baseline`) come first."""
    changed = [f for f in FIXES if baseline is None or design.variant(f) != baseline.variant(f)]

    def score(name: str) -> int:
        feats = features(CONFIGS[name])
        return -sum(len(set(FIX_FEATURES.get(f, ())) & feats) for f in changed)

    return sorted(names, key=lambda n: (score(n), names.index(n)))


@dataclass
class ConfigReport:
    config: str
    results: dict[str, Result]
    seconds: float
    proof: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    design: Design
    configs: list[ConfigReport]
    depth: int
    seconds: float
    stopped_early: bool = False

    def verdicts(self) -> list[Verdict]:
        return [r.verdict for c in self.configs for r in c.results.values()]

    def violations(self) -> list[tuple[str, Result]]:
        return [(c.config, r) for c in self.configs for r in c.results.values() if r.verdict is Verdict.VIOLATED]


Progress = Callable[[str, int, float, dict[str, str]], None]


PROOF_ATTEMPT_MS = 30_000  # per step query of the check's own 1-induction attempt (`--engine induction` has its own)


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Progress | None = None, minimize: bool = True,
                 keep_going: bool = True) -> ConfigReport:
    t0 = time.perf_counter()
    system = System(cfg, design)
    bmc = BMC(system, props, timeout_ms=timeout_ms, minimize=minimize)
    proof: dict[str, Any] = {}

    def stop_for_proof(t: int, witness: dict[str, int | None], open_props: list[str]) -> bool:
        if not prove or not open_props or t < 1 or t >= depth:
            return False
        if any(witness[p] is None for p in open_props):
            return False
        if proof:  # tried once already
            return False
        from .induction import KInduction

        # Houdini at k=1 over the open properties and the lemmas that held in every BMC depth so far
        # (a lemma the BMC dropped failed from the initial state on: assuming it would be unsound).
        # The properties left in the inductive set are proved even when others are not.
        gone = {d.split("@")[0][len("lemma:"):] for d in bmc.dropped}
        # an opportunistic attempt: without --timeout each step query gets PROOF_ATTEMPT_MS, then it
        # is unknown and nothing is proved (on hybrid_swa the step query runs for many minutes)
        h = KInduction(system, open_props, lemmas=[n for n in LEMMAS if n not in gone],
                       timeout_ms=timeout_ms or PROOF_ATTEMPT_MS).houdini(1, split_on_unknown=False)
        failed = [p for p in open_props if p not in h.proved]
        cti = next((c for c, _f in h.ctis.values()), None)
        proof.update(k=1, closed=not failed, unknown=bool(h.unknown), failed=failed, proved=list(h.proved),
                     seconds=h.seconds, at_depth=t, cti=cti)
        return not failed

    results = bmc.run(depth, progress=(lambda t, el, st: progress(cfg.name, t, el, st)) if progress else None,
                      stop=stop_for_proof, stop_on_violation=not keep_going)
    for name in proof.get("proved", []):
        r = results.get(name)
        if r is not None and r.verdict is Verdict.HOLDS_TO_DEPTH:
            r.verdict = Verdict.PROVED
            r.meta["bmc_depth"] = r.depth
            r.depth = 1
    return ConfigReport(cfg.name, results, time.perf_counter() - t0, proof)


# engine name -> module defining `check_config` with the signature of `check_config` above
ENGINES: dict[str, str] = {
    "bmc": "checker.run",
    "explicit": "checker.explicit",
    "random": "checker.random_engine",
    "induction": "checker.induction",
}


class EngineUnavailable(LookupError):
    """The engine's module does not exist or defines no `check_config`."""


def engine_check_config(engine: str) -> Callable[..., ConfigReport]:
    import importlib

    if engine not in ENGINES:
        raise EngineUnavailable(f"unknown engine {engine!r}; expected one of: {', '.join(ENGINES)}")
    try:
        mod = importlib.import_module(ENGINES[engine])
    except ModuleNotFoundError as e:
        raise EngineUnavailable(f"engine {engine!r} is not available ({e})") from e
    fn = getattr(mod, "check_config", None)
    if fn is None:
        raise EngineUnavailable(f"engine {engine!r}: {ENGINES[engine]} defines no check_config")
    return fn  # type: ignore[no-any-return]


def run_check(design: Design, configs: list[str], props: list[str], depth: int, prove: bool = True,
              keep_going: bool = False, timeout_ms: int = 0, progress: Progress | None = None,
              baseline: Design | None = None, minimize: bool = True, engine: str = "bmc") -> Report:
    t0 = time.perf_counter()
    out: list[ConfigReport] = []
    stopped = False
    run_one = engine_check_config(engine)
    for name in order_configs(configs, design, baseline):
        rep = run_one(design, CONFIGS[name], props, depth, prove, timeout_ms, progress, minimize, keep_going)
        out.append(rep)
        if not keep_going and any(r.verdict is Verdict.VIOLATED for r in rep.results.values()):
            stopped = len(out) < len(configs)
            break
    return Report(design, out, depth, time.perf_counter() - t0, stopped)


def counterexample_path(out_dir: str | Path, design: Design, prop: str, config: str, many: bool) -> Path:
    base = Path(out_dir) / design.name
    return base / (f"{prop}.{config}.itf.json" if many else f"{prop}.itf.json")


def all_property_names() -> list[str]:
    return list(PROPERTIES)
