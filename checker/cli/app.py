"""The `kvmc` command line.

    kvmc list                 designs, fixes, properties, lemmas, pass invariants, configs, transitions, mutants
    kvmc check                model-check a design (BMC, then a 1-induction proof when it closes)
    kvmc show FILE            print a counterexample's step table
    kvmc regen                check (or, with --update, rewrite) the regression corpus counterexamples/
    (review, graph, replay, ... : SUBCOMMANDS below)

Exit status (checker/verdict.py), the same for every subcommand:
    0    every property holds (to the bound, or proved); review: nothing newly broken; replay: as recorded
    1    a violation was found; review: a property newly broken; replay: a trace diverged
    2    bad usage or input: one line naming the value and what was expected, nothing written
    3    inconclusive (a solver `unknown`, a timeout, or a vacuous property)
    4    internal error (a kvmc bug): one line, the traceback in a file the line names
    130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: what was established so far is printed

Output goes under a run directory (`--out`, default kvmc-out/), never into the regression corpus
counterexamples/, which only `kvmc regen --update` writes. Every output path is checked before
any work. Startup is lazy: this module imports no model, z3 or torch; a subcommand's module is
imported only when it runs (`kvmc --help` lists them from SUBCOMMANDS).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from checker import interrupt
from checker.cli.common import (Heartbeat, Lines, beat_every, UsageError, _Parser, add_design_options, add_progress_options,
                                build_design, fmt_s, keep_hypothesis_in, lemma_selection, publish, refuse_corpus, refuse_unshipped,
                                positive_int, say_interrupted, timeout_ms, timeout_seconds, validate_selection, warn,
                                writable_dir, writable_file)
from checker.verdict import EXIT_INTERNAL, EXIT_USAGE, exit_code

DEFAULT_OUT = "kvmc-out"  # gitignored; the corpus counterexamples/ is `kvmc regen`'s

# name -> (module, function adding its parser to the subparsers, one-line help for `kvmc --help`).
# Only the subcommand being run is imported: `kvmc --help` and `kvmc replay missing.itf.json`
# import no model, z3 or torch before they answer.
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "list": ("checker.cli.app", "add_list_parser", "designs, fixes, properties, configs, transitions, mutants"),
    "check": ("checker.cli.app", "add_check_parser", "model-check a design"),
    "show": ("checker.cli.app", "add_show_parser", "print a counterexample's step table (or write an HTML / PNG report)"),
    "review": ("checker.cli.review", "add_parser", "compare every property between two designs (or two model revisions)"),
    "graph": ("checker.cli.graph", "add_parser", "write the explicit engine's reachable state graph as graphviz DOT"),
    "replay": ("checker.cli.replay", "add_parser", "replay counterexamples on the torch pool (refinement check)"),
    "regen": ("checker.cli.app", "add_regen_parser", "check or regenerate the regression corpus counterexamples/"),
    "sglang": ("upstream.cli", "add_parsers", "install SGLang releases for `kvmc conform` (CPU, no CUDA)"),
    "conform": ("upstream.cli", "add_parsers", "compare the model with SGLang's own objects, release by release"),
    "explore": ("upstream.cli", "add_parsers", "search SGLang's own scheduler (a release, on CPU) with kvmc's properties as the oracle"),
    "mutate": ("checker.cli.mutate", "add_parser", "mutation testing: generated mutants of model/, killed or not"),
    "patch": ("checker.cli.patch", "add_parser", "write (new) or check (check) a design change written in plain Python"),
}


# -- list -----------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    import model.system  # noqa: F401  (registers every transition)
    from model.designs import CURRENT_RELEASE, FIXES, PRESETS
    from model.mutants import available
    from model.transition import REGISTRY
    from specs.configs import CONFIGS
    from specs.lemmas import LEMMAS
    from specs.liveness import LIVENESS
    from specs.pass_invariants import PASS_INVARIANTS
    from specs.properties import PROPERTIES

    mutants = available()
    data = {
        "current_release": CURRENT_RELEASE,
        "designs": {n: {f: v for f, v in d.fixes.items()} for n, d in PRESETS.items()},
        "fixes": {f.name: {"pr": f.pr, "commit": f.commit, "first_tag": f.first_tag, "summary": f.summary,
                           "variants": list(f.variants), "off": f.off} for f in FIXES.values()},
        "properties": {p.name: p.meaning for p in PROPERTIES.values()},
        "liveness": {lp.name: {"meaning": lp.meaning, "assumptions": list(lp.assumptions)} for lp in LIVENESS.values()},
        "lemmas": {n: lm.meaning for n, lm in LEMMAS.items()},
        "pass_invariants": {n: pi.meaning for n, pi in PASS_INVARIANTS.items()},
        "configs": {c.name: c.doc for c in CONFIGS.values()},
        "transitions": {t.name: {"models": t.models, "modifies": list(t.modifies), "doc": t.doc} for t in REGISTRY.values()},
        "mutants": {n: (m.__doc__ or "").strip().splitlines()[0] for n, m in mutants.items()},
    }
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(f"kvmc models SGLang's scheduler KV memory, release by release (current = {CURRENT_RELEASE})\n")
    print("designs (release presets; fixes on):")
    for n, d in PRESETS.items():
        on = [f if v == FIXES[f].variants[0] else f"{f}={v}" for f, v in d.fixes.items() if v]
        print(f"  {n:15s} {', '.join(on) or '(none of the fixes)'}")
    print("\nfixes (--without FIX, --with FIX[=VARIANT]):")
    for f in FIXES.values():
        extra = f" variants: {', '.join(f.variants)}" if len(f.variants) > 1 else ""
        print(f"  {f.name:26s} #{f.pr} ({f.first_tag}) {f.summary}.{extra}")
    print("\nproperties (--property NAME):")
    for p in PROPERTIES.values():
        only = f" (checked on {p.applies_meaning} only)" if p.applies is not None else ""
        print(f"  {p.name:20s} {p.meaning}{only}")
    print("\nliveness properties (--property NAME; lassos under the fairness assumptions, docs/liveness.md):")
    for lp in LIVENESS.values():
        print(f"  {lp.name:28s} {lp.meaning}")
    print("\nconfigs (--config NAME):")
    for c in CONFIGS.values():
        print(f"  {c.name:20s} {c.doc}")
    print("\nlemmas (checked, then assumed):")
    for n, lm in LEMMAS.items():
        print(f"  {n:20s} {lm.meaning}")
    print("\npass invariants (at checkpoints inside an iteration; proved for each step, then asserted):")
    for n, pi in PASS_INVARIANTS.items():
        print(f"  {n:20s} {pi.meaning}")
    print("\ntransitions (each models one SGLang method):")
    for t in REGISTRY.values():
        if t.modifies:
            print(f"  {t.name:30s} {t.models}")
    print("\nread-only transitions (modifies nothing: a budget, a demand, a check SGLang computes; replaceable like the others):")
    for t in REGISTRY.values():
        if not t.modifies:
            print(f"  {t.name:30s} {t.models}")
    print("\nmutants (--mutant NAME, planted bugs):")
    for n, doc in data["mutants"].items():
        print(f"  {n:40s} {doc}")
    return 0


# -- check ----------------------------------------------------------------------------------------
class ProgressPrinter:
    """`kvmc check`'s progress on stderr: a line per BMC depth (config, depth, elapsed, solver
    time), the proof attempt's phases, and, while one z3 query runs long, a heartbeat with how
    long it has been running (checker/progress.py)."""

    # piped output: at most one proof-phase line this often (a proof asks hundreds of queries), but
    # every candidate Houdini drops, with why
    PHASE_EVERY_S = 5.0
    QUERY_AFTER_S = 5.0  # a query running this long gets heartbeat lines (or one heartbeat, if shorter)

    def __init__(self, mode: bool | str) -> None:
        self.lines = Lines("text" if mode is True else "none" if mode is False else mode)
        self.enabled = self.lines.enabled
        self.tty = self.lines.tty
        self.last_phase = -self.PHASE_EVERY_S
        self.last_config = ""
        self.every_s = beat_every(self.lines)
        self.query_after_s = min(self.QUERY_AFTER_S, self.every_s)

    def __call__(self, config: str, depth: int, elapsed: float, status: dict[str, str]) -> None:
        if not self.enabled:
            return
        self.last_config = config
        done = [f"{k}: {v}" for k, v in status.items() if v != "open" and not k.startswith("_")]
        solver = f" (solver {status['_solver_s']}s)" if "_solver_s" in status else ""
        line = f"[{config}] depth {depth} done, {elapsed:.1f}s{solver}" + (f"; {', '.join(done)}" if done else "")
        fields: dict[str, Any] = {"config": config, "depth": depth, "elapsed_s": round(elapsed, 1)}
        if "_phase" in status:  # a long proof attempt, between BMC depths or beside the BMC
            now = time.monotonic()
            if not self.tty and self.lines.mode == "text" and now - self.last_phase < self.PHASE_EVERY_S \
                    and "dropped " not in status["_phase"]:
                return
            self.last_phase = now
            line = f"[{config}] {elapsed:.1f}s: {status['_phase']}"
            from checker.progress import NOW

            cases = {"cases": dict(NOW.cases)} if NOW.cases else {}  # a case queue on Ray (checker/engines/induction.py)
            self.lines.line(line, "proof", live=self.tty, **fields, message=status["_phase"], **cases)
            return
        self.lines.line(line, "depth", live=self.tty, **fields, solver_s=float(status.get("_solver_s", 0) or 0),
                        status={k: v for k, v in status.items() if not k.startswith("_")})

    def beat(self) -> None:
        """From the heartbeat thread: say that a long query is still running."""
        from checker.progress import NOW

        snap = NOW.snapshot()
        q, ph = snap["query_s"], snap["phase_s"]
        if snap["config"] is None:
            return
        where = f"[{snap['config']}] depth {snap['depth']}: "
        tail = f"(solver {fmt_s(snap['solver_s'])} on this config), {fmt_s(snap['elapsed_s'])} elapsed"
        if q is not None and q >= self.query_after_s:  # inside a phase or not
            text = where + (f"{snap['phase']}: " if snap["phase"] else "") + \
                f"z3 query {snap['queries']} running for {fmt_s(q)} " + tail
        elif ph is not None and ph >= self.query_after_s:
            text = where + f"{snap['phase']} for {fmt_s(ph)} " + tail
        else:
            return
        self.lines.line(text, "query", live=self.tty, **snap)

    def heartbeat(self) -> Heartbeat:
        return Heartbeat(self.beat if self.enabled else (lambda: None), self.every_s)

    def end(self) -> None:
        self.lines.end()


SLOW_DEPTH = 6  # all configs at this depth or more: tens of minutes for a design with no bug there


def _warn_long(args: argparse.Namespace, configs: list[str], what: str = "kvmc check") -> None:
    if not args.config and args.depth >= SLOW_DEPTH and getattr(args, "progress", "text") != "none":
        warn(f"{what} runs every config ({len(configs)}) to depth {args.depth}; on a design without a bug there this "
             "takes tens of minutes (hybrid_swa alone can take minutes a depth). --config NAME and --depth N narrow it; "
             "progress follows on stderr, Ctrl-C stops it with what was established.")


def cmd_check(args: argparse.Namespace) -> int:
    lemmas = lemma_selection(args)
    if args.examples is not None and args.engine != "random":
        raise UsageError(f"--examples applies to --engine random (its runs per property), not --engine {args.engine}")
    if not args.corpus:
        refuse_corpus(args.out)
    writable_dir(args.out, "--out")
    if getattr(args, "confirm", None):  # `--confirm sglang==V`: checked before the search (upstream/sched/replay.py)
        from upstream.errors import UpstreamUsageError
        from upstream.sched.replay import check_confirm

        try:
            check_confirm(args.confirm)
        except UpstreamUsageError as e:
            raise UsageError(str(e)) from None
    keep_hypothesis_in(args.out)
    if args.proof_cache is not None:
        if args.engine not in ("bmc", "induction", "portfolio") or args.no_prove:
            raise UsageError(f"--proof-cache applies to the proofs of the bmc and induction engines, not --engine {args.engine}"
                             + (" --no-prove" if args.no_prove else ""))
        from checker.engines import proof_cache

        try:
            proof_cache.use(args.proof_cache)  # before any fork: the proof processes inherit it
        except ValueError as e:
            raise UsageError(str(e)) from None
    from checker.cli.executor import check_executor, executor_for

    check_executor(args, jobs=args.all or args.jobs is not None)
    if args.all or args.jobs is not None:
        from checker.cli.parallel import cmd_check_parallel

        return cmd_check_parallel(args)
    from model.designs import PRESETS

    design = build_design(args.design, args.without, args.with_, args.mutant)
    props, configs = validate_selection(args)
    refuse_unshipped(args, [design])
    _warn_long(args, configs)
    interrupt.quiet_z3()
    baseline = PRESETS[args.design]
    printer = ProgressPrinter("none" if args.json and args.progress == "text" else args.progress)
    from checker.replay.pool import WarmPool

    # torch loads beside the search, for the counterexamples' pool replay (forked before Ray starts)
    with WarmPool() as warm, executor_for(args):
        return _check_and_report(args, design, props, configs, baseline, printer, warm, lemmas)


def _check_and_report(args: argparse.Namespace, design: Any, props: list[str], configs: list[str],
                      baseline: Any, printer: ProgressPrinter, warm: Any, lemmas: list[str] | None) -> int:
    from checker.engines.run import run_check

    try:
        with printer.heartbeat():
            report = run_check(design, configs, props, args.depth, prove=not args.no_prove, keep_going=args.keep_going,
                               timeout_ms=timeout_ms(args.timeout), progress=printer, baseline=baseline,
                               minimize=not args.no_minimize, engine=args.engine, lemmas=lemmas, examples=args.examples)
    except interrupt.Interrupted as e:
        printer.end()
        interrupt.reap()  # the warm pool's child too, before its `close` waits for it
        return _interrupted_check(args, e)
    printer.end()
    try:
        written = _write_counterexamples(args, report, warm)
    except interrupt.Interrupted as e:  # the check had finished: its report stands, unreplayed
        e.report, e.where = report, "while the counterexamples were replayed on the pool"
        return _interrupted_check(args, e)
    if args.json:
        print(json.dumps(_report_json(report, written), indent=1))
    else:
        print(_report_text(report, written, args.verbose))
    return exit_code(report.verdicts())


def _write_counterexamples(args: argparse.Namespace, report: Any, warm: Any) -> dict[tuple[str, str], str]:
    """Each counterexample as `<out>/<design>/<config>/<property>.itf.json` (a name that does not
    depend on what else the run found), its step table beside it, replayed on the pool first."""
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.run import counterexample_path
    from checker.traces import itf
    from checker.traces.explain import explain
    from checker.traces.trace import step_table

    written: dict[tuple[str, str], str] = {}
    for cfg_name, r in report.violations():
        assert r.trace is not None
        sysm = System(CONFIGS[cfg_name], report.design)
        line = r.trace.meta.get("violation") if r.trace.loop is not None else explain(sysm, r.property, r.trace.params, r.trace.states[-1])
        path = counterexample_path(args.out, report.design, r.property, cfg_name)
        r.meta["pool_replay"] = warm.confirm_note(r.trace)  # replayed on the torch pool before it is reported
        if getattr(args, "confirm", None):  # and on SGLang's own scheduler of each release named
            from upstream.sched.replay import confirm_note

            r.meta["sglang_replay"] = [confirm_note(r.trace, against) for against in args.confirm]
        itf.write(path, r.trace, {"verdict": "violated", "violation": line, "expected": "violation",
                                  "pool_replay": r.meta["pool_replay"],
                                  **({"sglang_replay": r.meta["sglang_replay"]} if "sglang_replay" in r.meta else {})})
        publish(path)
        txt = path.with_suffix("").with_suffix(".txt")
        txt.write_text(step_table(r.trace, line) + "\n")
        written[(cfg_name, r.property)] = str(path)
    if args.engine == "induction":  # counterexamples to induction, for a person to add a lemma
        from checker.engines.induction import write_ctis

        for path in write_ctis(report, args.out).values():
            publish(path)
    return written


def _interrupted_check(args: argparse.Namespace, e: interrupt.Interrupted) -> int:
    """What a SIGINT/SIGTERM left: the configs finished and what the current one established,
    printed as the report is (counterexamples already found are written), and exit 130/143."""
    report = e.report
    summary = f"kvmc: interrupted by {e.name} {e.where or ''}".rstrip()
    if report is not None:
        cur = e.config_report
        if cur is not None and cur.results:  # what the config being checked established
            words = sorted({r.words() for r in cur.results.values()})
            summary += ": " + "; ".join(words)
        with _quiet_replay() as warm:
            try:
                written = _write_counterexamples(args, report, warm)
            except Exception:  # noqa: BLE001 (the interrupt report comes first)
                written = {}
        if args.json:
            data = _report_json(report, written)
            data["interrupted"] = {"signal": e.name, "where": e.where or None}
            print(json.dumps(data, indent=1))
        else:
            print(_report_text(report, written, args.verbose, interrupted=f"{e.name} {e.where}".strip()))
    say_interrupted(summary)
    return e.exit_code


class _quiet_replay:
    """No pool replay after an interrupt (torch would take seconds): the note says so."""

    def __enter__(self) -> "_quiet_replay":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def confirm_note(self, trace: Any) -> str:
        return "not replayed (the check was interrupted)"


def _report_json(report: Any, written: dict[tuple[str, str], str]) -> dict[str, Any]:
    return {
        "design": report.design.name,
        "fixes": report.design.flags(),
        "mutants": sorted(report.design.mutants),
        "depth": report.depth,
        "seconds": round(report.seconds, 2),
        "stopped_at_first_violation": report.stopped_early,
        "configs": [
            {
                "config": c.config,
                **({"not_applicable": c.not_applicable} if c.not_applicable else {}),
                "seconds": round(c.seconds, 2),
                "proof": {k: v for k, v in c.proof.items() if k != "cti"},
                "results": [
                    {
                        "property": r.property,
                        "verdict": r.verdict.value,
                        "depth": r.depth,
                        "words": r.words(),
                        "witness_depth": r.witness_depth,
                        "counterexample": written.get((c.config, r.property)),
                        "pool_replay": r.meta.get("pool_replay"),
                        "reason": r.reason or None,
                        "lemmas_dropped": r.meta.get("lemmas_dropped", []),
                        "seeded_by": r.meta.get("seeded_by"),  # the BMC's query pinned to a random run first
                        "interrupted": r.meta.get("interrupted"),
                    }
                    for r in c.results.values()
                ],
            }
            for c in report.configs
        ],
    }


def _proof_words(proof: dict[str, Any]) -> str:
    """The config line's account of its proof attempt, including that none was made, and why."""
    if not proof:
        return ""
    if proof.get("attempted") is False:
        return f"; no proof attempted: {proof.get('why')}"
    k = proof.get("k", 1)
    if proof.get("stopped"):
        return f"; {k}-induction attempt (from depth {proof.get('at_depth')}) stopped: {proof['stopped']}"
    if proof.get("interrupted"):
        extra = f"; {k}-induction interrupted" + (f" ({proof['interrupted']})" if isinstance(proof["interrupted"], str) else "")
        extra += f", last at: {proof['last']}" if proof.get("last") else ""
        if proof.get("proved"):
            extra += f"; proved before it: {', '.join(proof['proved'])}"
        return extra
    if proof.get("unfinished"):
        extra = (f"; {k}-induction unfinished after {proof.get('seconds')}s (stopped when the BMC had ended "
                 "and as long again had passed; --engine induction runs it to the end)")
    elif proof.get("closed"):
        extra = f"; {k}-induction closed"
    elif proof.get("proved"):
        # `proved` maps each property to the k its step case closed at; `k` is the last k tried,
        # which only the failed ones reached
        proved = proof["proved"]
        kp = max(proved.values()) if isinstance(proved, dict) else k
        failed = proof.get("failed") or []
        extra = (f"; {kp}-induction proved {', '.join(proved)}, not {', '.join(failed)}"
                 + (f" (tried up to k={k})" if failed and k > kp else ""))
    else:
        extra = f"; {k}-induction did not close" + (
            f" ({', '.join(proof.get('failed') or [])})" if proof.get("failed") else "")
    tries = proof.get("attempts") or [proof]
    cached = sum(a.get("cached") or 0 for a in tries)
    local = sum(a.get("local") or 0 for a in tries)
    asked = sum(a.get('queries') or 0 for a in tries)
    if cached:
        extra += f", {cached} of {asked} step queries from the proof cache"
    if local:
        extra += f", {local} of {asked} closed by a local query (the sub-steps up to theirs)"
    used = sorted({n for a in tries for n, why in (a.get("pass_invariants") or {}).items() if not why})
    if used:
        extra += f", pass invariant {', '.join(used)} proved at its checkpoints and asserted in the step queries"
    return extra


def _report_text(report: Any, written: dict[tuple[str, str], str], verbose: bool, interrupted: str = "") -> str:
    from model.designs import sglang_release
    from model.system import System
    from specs.configs import CONFIGS

    from checker.traces.explain import explain
    from checker.traces.trace import step_table
    from checker.verdict import Verdict

    release = sglang_release(report.design.name)
    out = [f"design {report.design.name}  (" + (f"sglang {release}, " if release else "") + f"depth {report.depth})"]
    if interrupted:
        out.append(f"INTERRUPTED by {interrupted}: what follows is what was established before")
    for c in report.configs:
        if c.not_applicable:
            out.append(f"config {c.config}  [not checked: {c.not_applicable}]")
            continue
        if not c.results and not interrupted:  # specs/properties.py `for_config`
            out.append(f"config {c.config}  [not checked: no property asked applies to it]")
            continue
        out.append(f"config {c.config}  [{c.seconds:.1f}s{_proof_words(c.proof)}]")
        for r in c.results.values():
            w = r.words()
            if r.verdict is Verdict.PROVED:
                w += f": holds at every depth (BMC to depth {r.meta.get('bmc_depth')}, witness at {r.witness_depth})"
                if r.meta.get("derived_from"):
                    w += f"; follows at every state from {', '.join(r.meta['derived_from'])} (its step was not asked)"
                if r.meta.get("liveness_proof"):  # specs/liveness.py: no fair lasso to the depth, then bounded progress
                    w += f"; {r.meta['liveness_proof']}"
            elif r.verdict is Verdict.HOLDS_TO_DEPTH:
                w += f" (witness at depth {r.witness_depth})"
                if r.meta.get("exhausted_at") is not None:  # an explicit search that ran out of new states
                    w += (f"; every reachable state of the {r.meta.get('parameter_points')} explicit parameter points"
                          f" explored by depth {r.meta['exhausted_at']}, so it holds at every depth on those points")
                if r.meta.get("engine") == "induction" and r.reason:
                    w += f"; {r.reason}" + (f"; counterexample to induction: {r.meta['cti_path']}" if r.meta.get("cti_path") else "")
            elif r.verdict is Verdict.UNKNOWN:
                w += f" ({r.reason})"
            if r.meta.get("interrupted"):
                w += f"  [interrupted {r.meta['interrupted']}]"
            out.append(f"  {r.property:20s} {w}")
            if r.meta.get("also"):  # --engine portfolio: the other engine's verdict (checker/engines/portfolio.py)
                out.append(f"    {r.meta['also']}")
            if r.verdict is Verdict.VIOLATED and r.trace is not None:
                path = written.get((c.config, r.property))
                out.append(f"    counterexample: {path} (replayed through the concrete model; pool: "
                           f"{r.meta.get('pool_replay', 'not replayed')})")
                for note in r.meta.get("sglang_replay", []):
                    out.append(f"    SGLang: {note}")
                line = r.trace.meta.get("violation") if r.trace.loop is not None else \
                    explain(System(CONFIGS[c.config], report.design), r.property, r.trace.params, r.trace.states[-1])
                out.append("    " + step_table(r.trace, line).replace("\n", "\n    "))
    if report.stopped_early:
        out.append("stopped at the first violation (--keep-going checks the remaining configs)")
    from checker.reports.findings import render as render_findings  # lemmas dropped, CTIs, pool divergences

    out += render_findings(report)
    return "\n".join(out)


# -- show -----------------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace) -> int:
    if (args.html or args.png) and len(args.files) != 1:
        raise UsageError(f"--html/--png take one trace, got {len(args.files)} files; run kvmc show once per file")
    for opt, path in (("--html", args.html), ("--png", args.png)):
        if path:
            writable_file(path, opt)
    from checker.reports.html import show, write_html
    from checker.traces import itf

    for f in args.files:
        t = itf.read(f)
        if args.html or args.png:
            from checker.reports import chart

            for out, write in ((args.html, write_html), (args.png, chart.png)):
                if not out:
                    continue
                try:
                    written = write(t, out)
                except (OSError, RuntimeError) as e:  # unwritable path, or matplotlib missing for --png
                    raise UsageError(f"cannot write {out!r}: {e}; give a writable path (and `pip install matplotlib` for --png)") from e
                publish(written)
                print(f"wrote {written}")
        else:
            show(t, sys.stdout, args.color)
    return 0


# -- parsers --------------------------------------------------------------------------------------
def add_list_parser(sub: Any) -> None:
    pl = sub.add_parser("list", help=SUBCOMMANDS["list"][2])
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(fn=cmd_list)


def add_check_parser(sub: Any) -> None:
    pc = sub.add_parser("check", help=SUBCOMMANDS["check"][2])
    add_design_options(pc)
    pc.add_argument("--property", action="append", default=[], metavar="NAME", help="default: all")
    pc.add_argument("--config", action="append", default=[], metavar="NAME", help="default: all, relevant ones first")
    pc.add_argument("--depth", type=int, default=10, help="scheduler iterations to check (default 10)")
    pc.add_argument("--engine", default="portfolio",
                    help="portfolio (default: explicit and bmc side by side, checker/engines/portfolio.py), bmc, explicit, random, swarm, induction")
    pc.add_argument("--examples", type=positive_int, default=None, metavar="N",
                    help="--engine random: runs per property (default 200); a rare failure needs more")
    pc.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                    help=f"run directory for counterexamples, <DIR>/<design>/<config>/<property>.itf.json (default {DEFAULT_OUT}/)")
    pc.add_argument("--confirm", action="append", default=[], metavar="sglang==VERSION",
                    help="also replay each counterexample on SGLang's own scheduler of that release (repeatable)")
    pc.add_argument("--corpus", action="store_true", help=argparse.SUPPRESS)  # `kvmc regen --update` writes the corpus
    pc.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    pc.add_argument("--keep-going", action="store_true", help="do not stop at the first violation")
    pc.add_argument("--no-prove", action="store_true", help="bounded checking only (no 1-induction proof)")
    pc.add_argument("--no-minimize", action="store_true", help="report the first counterexample found as is")
    pc.add_argument("--timeout", type=timeout_seconds, default=None, metavar="SECONDS",
                    help="per solver query (then: unknown); at least 0.01")
    pc.add_argument("--without-lemma", action="append", default=[], metavar="LEMMA",
                    help="do not assume this lemma in the induction proofs (try a smaller inductive set)")
    pc.add_argument("--proof-cache", metavar="DIR", default=None,
                    help="record the step-case queries z3 proves unsat, and take recorded ones from DIR, so a long "
                         "proof can be stopped and resumed (keyed by a digest of the exact query and the z3 version)")
    add_progress_options(pc)
    from checker.cli.executor import add_executor_options

    add_executor_options(pc)
    pc.add_argument("-v", "--verbose", action="store_true")
    pc.add_argument("--all", action="store_true", help="every preset design (x every config), in parallel; one report")
    pc.add_argument("--jobs", type=int, default=None, help="run (design, config) checks in N parallel processes (default: cores)")
    pc.set_defaults(fn=cmd_check)


def add_show_parser(sub: Any) -> None:
    ps = sub.add_parser("show", help=SUBCOMMANDS["show"][2])
    ps.add_argument("files", nargs="+")
    ps.add_argument("--html", metavar="OUT.html", help="write one self-contained page: the trace table and a chart per pool")
    ps.add_argument("--png", metavar="OUT.png", help="write the per-pool ownership chart alone")
    ps.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                    help="colour the step table (auto: a terminal and NO_COLOR unset)")
    ps.set_defaults(fn=cmd_show)


def add_regen_parser(sub: Any) -> None:
    from checker.replay import regen

    pr = sub.add_parser("regen", help=SUBCOMMANDS["regen"][2], description=(regen.__doc__ or "").split("\n\n")[0])
    regen.add_options(pr)
    pr.set_defaults(fn=cmd_regen)


def cmd_regen(args: argparse.Namespace) -> int:
    from checker.replay import regen

    if args.depth is not None and args.depth <= 0:
        raise UsageError(f"--depth {args.depth} must be a positive number of scheduler iterations")
    if args.update or args.manifest:
        writable_dir(args.dir, "--dir")
    elif not Path(args.dir).is_dir():
        raise UsageError(f"--dir {args.dir!r} is not a directory; expected the counterexample corpus")
    return regen.run(args)


class _Only:
    """The subparsers, as a subcommand's `add_parser` sees them: only `name`'s parser is real; any
    other a module adds beside it (upstream/cli.py adds two) is built and dropped."""

    def __init__(self, sub: Any, name: str) -> None:
        self.sub, self.name = sub, name

    def add_parser(self, name: str, **kw: Any) -> Any:
        if name == self.name:
            return self.sub.add_parser(name, **kw)
        kw.pop("help", None)
        return _Parser(prog=f"kvmc {name}", **kw)


class _Version(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="kvmc, z3 and modelled SGLang versions")

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        print(version_text())
        raise SystemExit(0)


def version_text() -> str:
    from importlib import metadata

    def dist(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    from model.designs import CURRENT_RELEASE, PRESETS

    releases = [n for n in PRESETS if n != "current"]
    return (f"kvmc {dist('kvmc')}\n"
            f"z3 {dist('z3-solver')}\n"
            f"sglang: the `current` design is release {CURRENT_RELEASE} (see kvmc list); "
            f"release presets {', '.join(releases)}")


def parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in `argv` has its options (and its module) loaded."""
    import importlib

    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    p = _Parser(prog="kvmc", description="Model checker for SGLang's scheduler KV-cache memory invariants.",
                epilog="exit status: 0 holds/proved, 1 violation (review: newly broken; replay: diverged), "
                       "2 bad usage or input, 3 inconclusive, 4 internal error, 130/143 interrupted")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser, metavar="COMMAND")
    for name, (module, fn, help_) in SUBCOMMANDS.items():
        if name == chosen:
            getattr(importlib.import_module(module), fn)(_Only(sub, name))
        else:
            sub.add_parser(name, help=help_, add_help=False)
    return p


# -- main -----------------------------------------------------------------------------------------
def internal_error(e: BaseException) -> int:
    """A kvmc bug: one line on stderr, the traceback in a file the line names, exit 4."""
    import os
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    first = (f"{type(e).__name__}: {e}".strip().splitlines() or [type(e).__name__])[0][:300]
    where = ""
    try:
        fd, path = tempfile.mkstemp(prefix="kvmc-crash-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write(f"kvmc {' '.join(sys.argv[1:])}\npython {sys.version.split()[0]}\n\n{text}")
        publish(path)
        where = f" (traceback in {path})"
    except OSError:
        pass
    print(f"kvmc: internal error, please report: {first}{where}", file=sys.stderr, flush=True)
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser(argv).parse_args(argv)
        return int(args.fn(args))
    except UsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except interrupt.Interrupted as e:  # a subcommand with nothing of its own to report
        say_interrupted(f"kvmc: interrupted by {e.name}")
        return e.exit_code
    except BrokenPipeError:  # stdout closed early (`kvmc list | head`): nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:
        itf = sys.modules.get("checker.traces.itf")
        if itf is not None and isinstance(e, itf.ItfError):  # a trace file the user gave us
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        if interrupt.requested():  # however the interrupt surfaced (z3's "canceled", a broken pipe to a child)
            say_interrupted(f"kvmc: interrupted by {interrupt.stopped(e).name}")
            return interrupt.stopped(e).exit_code
        return internal_error(e)


if __name__ == "__main__":
    sys.exit(main())
