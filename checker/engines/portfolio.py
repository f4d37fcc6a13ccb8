"""`--engine portfolio`: the engines side by side on one config, each doing what it is best at
(issue 62 item 4), and a report that says which engine established each verdict.

* **explicit** (checker/engines/explicit.py), in a forked child on the second core: concrete
  exhaustive search over up to `max_points` parameter points of the bounds (boundary points first),
  at any page size. Its `holds` is over the points it searched, never over the whole bounds.
* **bmc** (checker/engines/run.py::check_config), in this process: the shortest counterexample over
  the whole bounds (symbolic sizes) and, unless `--no-prove`, the 1-induction proof. Not run where
  the config is beyond the z3 engines' page reach (applies.py::beyond_symbolic_reach): there the
  explicit engine is the portfolio.

How the two results of a property combine (`merge`), never claiming more than one of them checked:

* a violation found by either is the verdict; of two, the shorter (BMC's on a tie: it is minimal
  over the whole bounds, the explicit one over its points);
* else BMC's proof, where it closed;
* else BMC's whole-bounds verdict (`holds to depth k`, `vacuous`, or `unknown` on a timeout),
  with the explicit engine's verdict on its points beside it; an `unknown` stays `unknown`
  (a timeout is never safe), however much of the bounds the explicit engine searched;
* with no BMC, the explicit engine's verdict as it words it (`on N of M parameter points`).

Both members search to the same `--depth`. The ConfigReport's `proof` is BMC's.
"""

from __future__ import annotations

import time
from typing import Any

from model.config import Config
from model.designs import Design

from checker import interrupt
from checker.engines.applies import beyond_symbolic_reach, for_config, nothing_applies
from checker.engines.results import ConfigReport, Result
from checker.verdict import Verdict

MEMBERS = ("bmc", "explicit")


class PortfolioResult(Result):
    """A merged `Result`: its words name the engine that established the verdict; `meta["also"]`
    says what the other engine found, where it checked the property too (the report's next line)."""

    def words(self) -> str:
        main = self.meta.get("established_words") or self.verdict.words(self.depth)
        return f"{main} [{self.meta.get('established_by', '?')}]"  # the other engine's: meta["also"]


def _words(r: Result) -> str:
    return r.words()


def _as(r: Result, by: str, also: Result | None, also_by: str) -> PortfolioResult:
    meta = dict(r.meta)
    meta.update(established_by=by, established_words=_words(r),
                engines={by: r.verdict.value, **({also_by: also.verdict.value} if also is not None else {})})
    if also is not None:
        meta["also"] = f"{also_by}: {_words(also)}"
    return PortfolioResult(r.property, r.verdict, r.depth, r.trace, r.witness_depth, r.reason, r.seconds,
                           r.solver_seconds, meta)


def merge(prop: str, bmc: Result | None, explicit: Result | None) -> Result:
    """One property's verdict from the two members' (module docstring)."""
    if bmc is None and explicit is None:
        raise ValueError(f"merge: neither engine checked {prop=}")
    if bmc is None:
        assert explicit is not None
        return _as(explicit, "explicit", None, "")
    if explicit is None:
        return _as(bmc, "bmc", None, "")
    b_v, e_v = bmc.verdict is Verdict.VIOLATED, explicit.verdict is Verdict.VIOLATED
    if b_v or e_v:
        if b_v and (not e_v or bmc.depth <= explicit.depth):
            return _as(bmc, "bmc", explicit, "explicit")
        return _as(explicit, "explicit", bmc, "bmc")
    return _as(bmc, "bmc", explicit, "explicit")  # proved, holds, vacuous or unknown over the whole bounds


def _explicit_child(conn: Any, design: Design, cfg: Config, props: list[str], depth: int, timeout_ms: int,
                    minimize: bool, keep_going: bool, max_points: int | None) -> None:
    from checker.engines import explicit

    try:
        kw = {} if max_points is None else {"max_points": max_points}
        rep = explicit.check_config(design, cfg, props, depth, False, timeout_ms, None, minimize, keep_going, **kw)
        conn.send(("ok", rep))
    except BaseException as e:  # the parent reports it as an error of this engine, not a finding
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


class _Background:
    """The explicit member in a forked child (inline where fork is unavailable or in a daemon)."""

    def __init__(self, *args: Any) -> None:
        import multiprocessing as mp

        self.proc: Any = None
        self.answer: tuple[str, Any] | None = None
        if "fork" in mp.get_all_start_methods() and not mp.current_process().daemon:
            ctx = mp.get_context("fork")
            self.conn, child = ctx.Pipe(duplex=False)
            self.proc = ctx.Process(target=_explicit_child, args=(child, *args), daemon=True)
            self.proc.start()
            child.close()
        else:
            self.args = args

    def result(self) -> ConfigReport:
        if self.proc is None:
            from checker.engines import explicit

            design, cfg, props, depth, timeout_ms, minimize, keep_going, max_points = self.args
            kw = {} if max_points is None else {"max_points": max_points}
            return explicit.check_config(design, cfg, props, depth, False, timeout_ms, None, minimize, keep_going, **kw)
        try:
            while not self.conn.poll(0.2):  # a Ctrl-C lands between polls, not inside a blocking recv
                interrupt.check()
                if not self.proc.is_alive() and not self.conn.poll(0):
                    raise RuntimeError(f"the portfolio's explicit engine died (exit code {self.proc.exitcode})")
            kind, msg = self.conn.recv()
        finally:
            self.stop()
        if kind != "ok":
            raise RuntimeError(f"the portfolio's explicit engine failed: {msg}")
        return msg  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.terminate()
        if self.proc is not None:
            self.proc.join(5)


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True,
                 keep_going: bool = True, lemmas: list[str] | None = None,
                 max_points: int | None = None) -> ConfigReport:
    """`checker/engines/run.py::check_config` for the portfolio (module docstring)."""
    t0 = time.perf_counter()
    props = for_config(cfg, props)
    if not props:
        return nothing_applies(cfg)
    symbolic = beyond_symbolic_reach("bmc", cfg) is None
    bg = _Background(design, cfg, props, depth, timeout_ms, minimize, keep_going, max_points)
    try:
        b_rep: ConfigReport | None = None
        if symbolic:
            from checker.engines.run import check_config as bmc_check

            b_rep = bmc_check(design, cfg, props, depth, prove, timeout_ms, progress, minimize, keep_going, lemmas)
        e_rep = bg.result()
    except BaseException:
        bg.stop()
        raise
    b_res = b_rep.results if b_rep is not None else {}
    results = {p: merge(p, b_res.get(p), e_rep.results.get(p)) for p in props if p in b_res or p in e_rep.results}
    return ConfigReport(cfg.name, results, time.perf_counter() - t0, b_rep.proof if b_rep is not None else {})
