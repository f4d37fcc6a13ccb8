"""Running a check: designs and configs in, one report out. The CLI, `review` and the benchmarks
all go through here.

Strategy per config (engine "bmc", the default):
1. Bounded model checking, incremental over depth, all selected properties at once (checker/engines/bmc.py).
2. Once every property has its witness (so none is vacuous) and no violation was found, and if
   proofs are on, the 1-induction step case is tried with the lemmas (checker/engines/induction.py), in a
   forked process while the BMC goes on, with the case splits of `--engine induction` (a step
   query z3 cannot answer whole is split into exhaustive cases). If it closes, every open property
   holds at every depth: the verdict is `proved (k=1)` and the BMC stops inside the depth it is on.
   If the BMC ends first with a property still holding, the check waits for the attempt as long
   again as the BMC took (at least PROOF_GRACE_S), then stops it: the verdicts stay `holds to
   depth k`. If nothing is left to prove (every property violated, or the first violation ended
   the check), the attempt is stopped at once.

A violation stops the whole check unless `keep_going` (TLC's default is the same: first error).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Sequence

from model.config import Config
from model.designs import FIXES, Design
from model.system import System
from specs.lemmas import LEMMAS
from specs.configs import CONFIGS
from specs.liveness import LIVENESS
from checker.engines.applies import beyond_symbolic_reach, for_config, nothing_applies
from specs.properties import PROPERTIES

from checker import interrupt
from checker.engines.bmc import BMC
from checker.engines.results import ConfigReport, Report
from checker.progress import NOW
from checker.verdict import Verdict

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
    "finish_checkpoint": ("hybrid_swa",),
    "unified_radix_default": ("hybrid_swa",),
    "swa_leaf_window_cap": ("hybrid_swa",),
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


Progress = Callable[[str, int, float, dict[str, str]], None]


PROOF_ATTEMPT_MS = 30_000  # per step query of the check's own 1-induction attempt, inline (no splits)
# per step query of a background attempt after its last split (a hybrid_swa leaf case takes up to
# about 35 s; one cut short leaves its property unproved); `--timeout` overrides both
PROOF_LEAF_MS = 60_000
PROOF_GRACE_S = 60.0  # least time the attempt may go on after the BMC has ended

# Run the check's proof attempt in a forked process beside the BMC (off inside `--jobs` pool
# workers, whose siblings already use the cores).
BACKGROUND_PROOF = True


def _houdini(system: System, props: list[str], lemmas: list[str], timeout_ms: int, split: bool,
             tell: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Houdini at k=1 over `props` and `lemmas`; the properties left in the inductive set are
    proved even when others are not. Each step query gets `timeout_ms`; with `split` a query z3
    cannot answer whole is split into cases (checker/engines/induction.py), without it the query is
    unknown and nothing is proved (on hybrid_swa the whole step query runs for many minutes)."""
    from checker.engines.induction import KInduction

    h = KInduction(system, props, lemmas=lemmas, timeout_ms=timeout_ms, progress=tell).houdini(1, split_on_unknown=split)
    failed = [p for p in props if p not in h.proved]
    return dict(k=1, closed=not failed, unknown=bool(h.unknown), failed=failed, proved=list(h.proved),
                lemmas=list(h.lemmas), queries=h.queries, split_cases=h.split_cases, cached=h.cached, local=h.local, skipped=h.skipped,
                derived=h.derived or None, pass_invariants=h.pass_invariants or None, seconds=round(h.seconds, 2))


PROOF_NICE = 5  # the forked attempt yields the cores to the BMC and the pool's torch import when they compete


def _houdini_child(conn: Any, *args: Any) -> None:
    try:
        import os

        os.nice(PROOF_NICE)
        conn.send(("result", _houdini(*args, tell=lambda msg: conn.send(("progress", msg)))))
    except BaseException as e:  # reported in the parent, never as a proof
        conn.send(("result", {"error": f"{type(e).__name__}: {e}"}))
    finally:
        conn.close()


class ProofAttempt:
    """The proof attempt, either run at once or in a forked process while the BMC goes on: a bug
    the BMC finds at the next depth does not wait behind it (#23174 on hybrid_swa waited 34 s of
    its 58 s). A thread waits for the child's answer; when it proves every property it was given,
    the thread calls `on_close` (the BMC's `interrupt_check`), so the BMC stops inside the depth it
    is on (`BMC.run`'s `abandon`) instead of finishing it for nothing."""

    def __init__(self, system: System, props: list[str], lemmas: list[str], timeout_ms: int, at_depth: int,
                 on_close: Callable[[], Any], tell: Callable[[str], None] | None = None) -> None:
        import multiprocessing as mp
        import threading

        self.at_depth = at_depth
        self.result: dict[str, Any] | None = None
        self.proc: Any = None
        self.closed = threading.Event()  # set once the answer proves every property
        self.on_close = on_close
        self.tell = tell  # told what each step query of a background attempt is about
        self.last = ""  # the last thing it told (where an interrupted attempt was)
        self.cancelled = False
        self.t0 = time.perf_counter()
        if BACKGROUND_PROOF and "fork" in mp.get_all_start_methods() and not mp.current_process().daemon:
            # in the background the attempt splits the queries z3 cannot answer whole: it may take
            # many minutes, and the check waits for it only for a while after the BMC (`poll`)
            ctx = mp.get_context("fork")  # the child inherits the system; nothing is pickled but the result
            conn, child = ctx.Pipe(duplex=False)
            self.proc = ctx.Process(target=_houdini_child, daemon=True,
                                    args=(child, system, props, lemmas, timeout_ms or PROOF_LEAF_MS, True))
            self.proc.start()
            child.close()
            self.waiter = threading.Thread(target=self._wait, args=(conn,), daemon=True)
            self.waiter.start()
        else:  # inline, the BMC waits: no splits, each query gets `timeout_ms` once
            self._answer(_houdini(system, props, lemmas, timeout_ms or PROOF_ATTEMPT_MS, False))

    def _answer(self, res: dict[str, Any]) -> None:
        self.result = res
        if res.get("closed"):
            self.closed.set()

    def _wait(self, conn: Any) -> None:
        res = None
        try:
            while True:
                kind, msg = conn.recv()
                if kind == "result":
                    res = msg
                    break
                self.last = msg
                if self.tell is not None and not self.cancelled:
                    self.tell(msg)
        except EOFError:
            pass
        self.proc.join()
        if res is None:
            if self.cancelled:
                return
            res = {"error": f"the proof process died (exit code {self.proc.exitcode})"}
        self._answer(res)
        if self.closed.is_set():
            self.on_close()  # the BMC's running query returns unknown; it then asks `abandon`

    def poll(self, wait: bool = False, limit_s: float | None = None) -> dict[str, Any] | None:
        """The attempt's result once it has one. `wait`: block until then, or for at most `limit_s`
        seconds, after which the attempt is stopped and reported unfinished (nothing proved)."""
        if wait and self.proc is not None:
            self.waiter.join(limit_s)
            if self.waiter.is_alive():
                self.cancel()
                return dict(k=1, closed=False, unfinished=True, proved=[], failed=[],
                            seconds=round(time.perf_counter() - self.t0, 2))
        res = self.result
        if res is not None and "error" in res:
            raise RuntimeError(f"the check's 1-induction attempt failed: {res['error']}")
        return res

    def cancel(self) -> None:
        self.cancelled = True
        if self.proc is not None and self.proc.is_alive():
            self.proc.terminate()
        if self.proc is not None:
            self.waiter.join()


def _seeder(system: System) -> Any:
    """The BMC's seed hunt (checker/engines/bmc.py): a random run of the same model, over the same bounds
    (Hypothesis is imported at the first hunt: a check that never needs one does not pay for it)."""

    def hunt(depth: int, props: list[str], give_up: Callable[[], bool]) -> Any:
        from checker.engines.random_engine import seed_run

        return seed_run(system, props, depth, give_up=give_up)

    return hunt


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Progress | None = None, minimize: bool = True,
                 keep_going: bool = True, lemmas: list[str] | None = None) -> ConfigReport:
    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    use = list(LEMMAS) if lemmas is None else lemmas
    system = System(cfg, design)
    bmc = BMC(system, props, timeout_ms=timeout_ms, minimize=minimize, seeder=_seeder(system))
    attempt: list[ProofAttempt] = []
    exercised_at: list[int] = []  # the depth at which every open property first had its witness

    def stop_for_proof(t: int, witness: dict[str, int | None], open_props: list[str]) -> bool:
        if attempt:  # started at an earlier depth: stop once it has closed
            res = attempt[0].poll()
            return bool(res and res["closed"] and set(open_props) <= set(res["proved"]))
        if not prove or not open_props or t < 1:
            return False
        if any(witness[p] is None for p in open_props):
            return False
        exercised_at[:] = exercised_at or [t]
        if t >= depth:  # no deeper depth for a closed proof to save (the report says so)
            return False
        # the lemmas that held in every BMC depth so far (a lemma the BMC dropped failed from the
        # initial state on: assuming it would be unsound)
        gone = {d.split("@")[0][len("lemma:"):] for d in bmc.dropped}
        tell = (lambda msg: progress(cfg.name, t, time.perf_counter() - t0, {"_phase": f"proof: {msg}"})) \
            if progress else None
        attempt.append(ProofAttempt(system, open_props, [n for n in use if n not in gone],
                                    timeout_ms, t, on_close=bmc.interrupt_check, tell=tell))
        res = attempt[0].poll()
        return bool(res and res["closed"])

    try:
        results = bmc.run(depth, progress=(lambda t, el, st: progress(cfg.name, t, el, st)) if progress else None,
                          stop=stop_for_proof, stop_on_violation=not keep_going,
                          abandon=lambda: bool(attempt) and attempt[0].closed.is_set())
    except interrupt.Interrupted as e:
        if attempt:
            attempt[0].cancel()
        e.config_report = ConfigReport(cfg.name, e.results or {}, time.perf_counter() - t0,
                                       _interrupted_proof(attempt, "") if attempt else {})
        raise
    except BaseException:
        if attempt:
            attempt[0].cancel()
        raise
    proof: dict[str, Any] = {}
    if attempt:
        a = attempt[0]
        first_error = not keep_going and any(r.verdict is Verdict.VIOLATED for r in results.values())
        if not first_error and any(r.verdict is Verdict.HOLDS_TO_DEPTH for r in results.values()):
            # it may still prove them: wait as long again as the BMC took, at least PROOF_GRACE_S
            grace = max(PROOF_GRACE_S, time.perf_counter() - t0)
            try:
                proof = dict(a.poll(wait=True, limit_s=grace) or {}, at_depth=a.at_depth)
            except interrupt.Interrupted as e:  # the BMC had finished: its verdicts stand, unproved
                a.cancel()
                e.where = e.where or f"after depth {bmc_depth(results)}, while the 1-induction attempt ran"
                e.results = results
                e.config_report = ConfigReport(cfg.name, results, time.perf_counter() - t0,
                                               _interrupted_proof(attempt, "after the BMC"))
                raise
        else:
            a.cancel()  # nothing left that it could prove, or the check ends at its first error
            if a.result is not None and "error" not in a.result:  # it had answered already
                proof = dict(a.result, at_depth=a.at_depth)
            else:  # the report says it was started, and why it was stopped
                proof = {"k": 1, "closed": False, "proved": [], "failed": [], "at_depth": a.at_depth,
                         "stopped": "the check ended at its first violation" if first_error else "nothing was left to prove"}
    else:
        proof = {"attempted": False, "why": _why_no_proof(results, prove, keep_going, depth, exercised_at)}
    for name in proof.get("proved", []):
        r = results.get(name)
        if r is not None and r.verdict is Verdict.HOLDS_TO_DEPTH:
            r.verdict = Verdict.PROVED
            r.meta["bmc_depth"] = r.depth
            r.depth = 1
            if name in (proof.get("derived") or {}):
                r.meta["derived_from"] = proof["derived"][name]
    return ConfigReport(cfg.name, results, time.perf_counter() - t0, proof)


def bmc_depth(results: dict[str, Any]) -> int:
    return max((r.depth for r in results.values()), default=0)


def _interrupted_proof(attempt: list[ProofAttempt], when: str) -> dict[str, Any]:
    """The proof entry of a config whose check was interrupted while its 1-induction attempt ran."""
    a = attempt[0]
    if a.result is not None and "error" not in a.result:  # it had answered before the signal
        return dict(a.result, at_depth=a.at_depth)
    return {"k": 1, "closed": False, "interrupted": True, "proved": [], "failed": [], "at_depth": a.at_depth,
            "seconds": round(time.perf_counter() - a.t0, 2), "last": a.last or None}


def _why_no_proof(results: dict[str, Any], prove: bool, keep_going: bool, depth: int, exercised_at: list[int]) -> str:
    """Why the check made no 1-induction attempt (the report says so next to `holds to depth k`)."""
    if not prove:
        return "proofs are off (--no-prove)"
    holding = [r for r in results.values() if r.verdict is Verdict.HOLDS_TO_DEPTH]
    if not holding:
        violated = any(r.verdict is Verdict.VIOLATED for r in results.values())
        return "nothing left to prove (a property was violated)" if violated else "no property holds to prove"
    if not keep_going and any(r.verdict is Verdict.VIOLATED for r in results.values()):
        return "the check stopped at its first violation"
    if exercised_at and exercised_at[0] >= depth:
        return (f"every property was first exercised at depth {exercised_at[0]}, the last one checked; the attempt "
                f"starts after such a depth when a deeper one remains (--depth {exercised_at[0] + 1} or more)")
    if any(r.verdict is Verdict.VACUOUS or r.witness_depth is None for r in results.values()):
        return f"not every property was exercised by depth {depth} (the attempt waits for every witness)"
    return "the BMC ended before it could start"


# engine name -> module defining `check_config` with the signature of `check_config` above
ENGINES: dict[str, str] = {
    "bmc": "checker.engines.run",
    "explicit": "checker.engines.explicit",
    "random": "checker.engines.random_engine",
    "swarm": "checker.engines.swarm",  # randomized depth-first runs over whole bounds (swarm.py)
    "induction": "checker.engines.induction",
    "portfolio": "checker.engines.portfolio",  # explicit and bmc side by side (portfolio.py)
}


class EngineUnavailable(LookupError):
    """The engine's module does not exist or defines no `check_config`."""


def engine_check_config(engine: str, props: Sequence[str] = ()) -> Callable[..., ConfigReport]:
    """The engine's per-config check; where `props` names a liveness property, extended with the
    lasso and bounded-progress checks (checker/engines/liveness.py) for those."""
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
    if any(p in LIVENESS for p in props):
        from checker.engines.liveness import with_liveness

        return with_liveness(fn, engine)
    return fn  # type: ignore[no-any-return]


def run_check(design: Design, configs: list[str], props: list[str], depth: int, prove: bool = True,
              keep_going: bool = False, timeout_ms: int = 0, progress: Progress | None = None,
              baseline: Design | None = None, minimize: bool = True, engine: str = "bmc",
              lemmas: list[str] | None = None, examples: int | None = None) -> Report:
    t0 = time.perf_counter()
    out: list[ConfigReport] = []
    stopped = False
    run_one = engine_check_config(engine, props)
    # the configs whose mechanism the design's release does not ship: reported first, whatever stops the rest
    # and those beyond the engine's reach (a z3 engine at page 16 or 64: applies.py)
    def why_not(n: str) -> str | None:
        return CONFIGS[n].not_modelled_by(design) or beyond_symbolic_reach(engine, CONFIGS[n])

    skipped = [ConfigReport(n, {}, 0.0, {}, not_applicable=why) for n in configs if (why := why_not(n))]
    out += skipped
    configs = [n for n in configs if not why_not(n)]
    for name in order_configs(configs, design, baseline):
        extra: dict[str, Any] = {} if lemmas is None else {"lemmas": lemmas}  # the proofs' lemmas (bmc and induction engines)
        if examples is not None:  # the random engine's runs per property
            extra["examples"] = examples
        NOW.config_started(name)
        try:
            rep = run_one(design, CONFIGS[name], props, depth, prove, timeout_ms, progress, minimize, keep_going, **extra)
        except BaseException as e:
            if not interrupt.requested():
                raise
            stop = interrupt.stopped(e)  # the configs finished, and what the engine established of this one
            stop.report = Report(design, out + ([stop.config_report] if stop.config_report is not None else []), depth,
                                 time.perf_counter() - t0, False)
            stop.where = f"{stop.where or 'during the check'} on config {name}"
            raise stop from None
        out.append(rep)
        if not keep_going and any(r.verdict is Verdict.VIOLATED for r in rep.results.values()):
            stopped = len(out) - len(skipped) < len(configs)
            break
    return Report(design, out, depth, time.perf_counter() - t0, stopped)


def counterexample_path(out_dir: str | Path, design: Design, prop: str, config: str) -> Path:
    """`<out>/<design>/<config>/<property>.itf.json`: the same name whatever else the run found."""
    return Path(out_dir) / design.name / config / f"{prop}.itf.json"


def all_property_names() -> list[str]:
    return list(PROPERTIES)
