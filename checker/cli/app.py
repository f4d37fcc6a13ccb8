"""The `kvmc` command line.

    kvmc list                 designs, fixes, properties, lemmas, pass invariants, configs, transitions, mutants
    kvmc check                model-check a design (BMC, then a 1-induction proof when it closes)
    kvmc show FILE            print a counterexample's step table

Exit status of `check`: 0 every property holds (to the bound, or proved), 1 a violation was found,
2 bad usage or input, 3 inconclusive (a solver `unknown`, a timeout, or a vacuous property).
Bad input always gets one line naming the value and what was expected, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Sequence

import model.system  # noqa: F401  (registers every transition)
from model.designs import FIXES, PRESETS, SGLANG_COMMIT, Design
from model.transition import REGISTRY
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS
from specs.pass_invariants import PASS_INVARIANTS
from specs.properties import PROPERTIES

from checker.cli.common import UsageError, _Parser, add_design_options, build_design, lemma_selection, validate_selection
from checker.verdict import EXIT_USAGE, Verdict, exit_code


# -- list -----------------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    from model.mutants import available

    mutants = available()
    data = {
        "sglang_commit": SGLANG_COMMIT,
        "designs": {n: {f: v for f, v in d.fixes.items()} for n, d in PRESETS.items()},
        "fixes": {f.name: {"pr": f.pr, "commit": f.commit, "first_tag": f.first_tag, "summary": f.summary,
                           "variants": list(f.variants), "off": f.off} for f in FIXES.values()},
        "properties": {p.name: p.meaning for p in PROPERTIES.values()},
        "lemmas": {n: lm.meaning for n, lm in LEMMAS.items()},
        "pass_invariants": {n: pi.meaning for n, pi in PASS_INVARIANTS.items()},
        "configs": {c.name: c.doc for c in CONFIGS.values()},
        "transitions": {t.name: {"models": t.models, "modifies": list(t.modifies), "doc": t.doc} for t in REGISTRY.values()},
        "mutants": {n: (m.__doc__ or "").strip().splitlines()[0] for n, m in mutants.items()},
    }
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(f"kvmc models SGLang's scheduler KV memory at sglang {SGLANG_COMMIT[:12]}\n")
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
        print(f"  {p.name:20s} {p.meaning}")
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
        print(f"  {t.name:30s} {t.models}")
    print("\nmutants (--mutant NAME, planted bugs):")
    for n, doc in data["mutants"].items():
        print(f"  {n:40s} {doc}")
    return 0


# -- check ----------------------------------------------------------------------------------------
class ProgressPrinter:
    # piped output: at most one proof-phase line this often (a proof asks hundreds of queries), but
    # every candidate Houdini drops, with why
    PHASE_EVERY_S = 5.0

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.last_phase = -self.PHASE_EVERY_S

    def __call__(self, config: str, depth: int, elapsed: float, status: dict[str, str]) -> None:
        if not self.enabled:
            return
        done = [f"{k}: {v}" for k, v in status.items() if v != "open" and not k.startswith("_")]
        solver = f" (solver {status['_solver_s']}s)" if "_solver_s" in status else ""
        line = f"[{config}] depth {depth} done, {elapsed:.1f}s{solver}" + (f"; {', '.join(done)}" if done else "")
        if "_phase" in status:  # a long proof attempt, between BMC depths or beside the BMC
            now = time.monotonic()
            if not self.tty and now - self.last_phase < self.PHASE_EVERY_S and "dropped " not in status["_phase"]:
                return
            self.last_phase = now
            line = f"[{config}] {elapsed:.1f}s: {status['_phase']}"
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
            sys.stderr.flush()
        else:
            print(line, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")


def cmd_check(args: argparse.Namespace) -> int:
    lemmas = lemma_selection(args)
    if args.proof_cache is not None:
        if args.engine not in ("bmc", "induction") or args.no_prove:
            raise UsageError(f"--proof-cache applies to the proofs of the bmc and induction engines, not --engine {args.engine}"
                             + (" --no-prove" if args.no_prove else ""))
        from checker.engines import proof_cache

        try:
            proof_cache.use(args.proof_cache)  # before any fork: the proof processes inherit it
        except ValueError as e:
            raise UsageError(str(e)) from None
    if args.all or args.jobs is not None:
        from checker.cli.parallel import cmd_check_parallel

        return cmd_check_parallel(args)
    design = build_design(args.design, args.without, args.with_, args.mutant)
    props, configs = validate_selection(args)
    baseline = PRESETS[args.design]
    printer = ProgressPrinter(not args.no_progress and not args.json)
    from checker.replay.pool import WarmPool

    with WarmPool() as warm:  # torch loads beside the search, for the counterexamples' pool replay
        return _check_and_report(args, design, props, configs, baseline, printer, warm, lemmas)


def _check_and_report(args: argparse.Namespace, design: Design, props: list[str], configs: list[str],
                      baseline: Design, printer: ProgressPrinter, warm: Any, lemmas: list[str] | None) -> int:
    from checker.traces import itf
    from checker.traces.explain import explain
    from checker.engines.run import counterexample_path, run_check
    from checker.traces.trace import step_table

    report = run_check(design, configs, props, args.depth, prove=not args.no_prove, keep_going=args.keep_going,
                       timeout_ms=int((args.timeout or 0) * 1000), progress=printer, baseline=baseline,
                       minimize=not args.no_minimize, engine=args.engine, lemmas=lemmas)
    printer.end()
    violations = report.violations()
    written: dict[tuple[str, str], str] = {}
    for cfg_name, r in violations:
        assert r.trace is not None
        system_cfg = CONFIGS[cfg_name]
        from model.system import System

        sysm = System(system_cfg, design)
        line = explain(sysm, r.property, r.trace.params, r.trace.states[-1])
        path = counterexample_path(args.out, design, r.property, cfg_name, many=len(violations) > 1)
        r.meta["pool_replay"] = warm.confirm_note(r.trace)  # replayed on the torch pool before it is reported
        itf.write(path, r.trace, {"verdict": "violated", "violation": line, "expected": "violation",
                                  "pool_replay": r.meta["pool_replay"]})
        path.with_suffix("").with_suffix(".txt").write_text(step_table(r.trace, line) + "\n")
        written[(cfg_name, r.property)] = str(path)
    if args.engine == "induction":  # counterexamples to induction, for a person to add a lemma
        from checker.engines.induction import write_ctis

        write_ctis(report, args.out)
    if args.json:
        print(json.dumps(_report_json(report, written), indent=1))
    else:
        print(_report_text(report, written, args.verbose))
    return exit_code(report.verdicts())


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
                    }
                    for r in c.results.values()
                ],
            }
            for c in report.configs
        ],
    }


def _report_text(report: Any, written: dict[tuple[str, str], str], verbose: bool) -> str:
    from checker.traces.trace import step_table

    out = [f"design {report.design.name}  (sglang {SGLANG_COMMIT[:12]}, depth {report.depth})"]
    for c in report.configs:
        extra = ""
        if c.proof:
            k = c.proof.get("k", 1)
            if c.proof.get("unfinished"):
                extra = (f"; {k}-induction unfinished after {c.proof.get('seconds')}s (stopped when the BMC had ended "
                         "and as long again had passed; --engine induction runs it to the end)")
            elif c.proof.get("closed"):
                extra = f"; {k}-induction closed"
            elif c.proof.get("proved"):
                extra = (f"; {k}-induction proved {', '.join(c.proof['proved'])}, not "
                         f"{', '.join(c.proof.get('failed') or [])}")
            else:
                extra = f"; {k}-induction did not close" + (
                    f" ({', '.join(c.proof.get('failed') or [])})" if c.proof.get("failed") else "")
        if c.proof:
            tries = c.proof.get("attempts") or [c.proof]
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
        out.append(f"config {c.config}  [{c.seconds:.1f}s{extra}]")
        for r in c.results.values():
            w = r.words()
            if r.verdict is Verdict.PROVED:
                w += f": holds at every depth (BMC to depth {r.meta.get('bmc_depth')}, witness at {r.witness_depth})"
                if r.meta.get("derived_from"):
                    w += f"; follows at every state from {', '.join(r.meta['derived_from'])} (its step was not asked)"
            elif r.verdict is Verdict.HOLDS_TO_DEPTH:
                w += f" (witness at depth {r.witness_depth})"
                if r.meta.get("exhausted_at") is not None:  # an explicit search that ran out of new states
                    w += (f"; every reachable state of the {r.meta.get('parameter_points')} explicit parameter points"
                          f" explored by depth {r.meta['exhausted_at']}, so it holds at every depth on those points")
                if r.meta.get("engine") == "induction" and r.reason:
                    w += f"; {r.reason}" + (f"; counterexample to induction: {r.meta['cti_path']}" if r.meta.get("cti_path") else "")
            elif r.verdict is Verdict.UNKNOWN:
                w += f" ({r.reason})"
            out.append(f"  {r.property:20s} {w}")
            if r.verdict is Verdict.VIOLATED and r.trace is not None:
                path = written.get((c.config, r.property))
                out.append(f"    counterexample: {path} (replayed through the concrete model; pool: "
                           f"{r.meta.get('pool_replay', 'not replayed')})")
                from checker.traces.explain import explain
                from model.system import System

                line = explain(System(CONFIGS[c.config], report.design), r.property, r.trace.params, r.trace.states[-1])
                out.append("    " + step_table(r.trace, line).replace("\n", "\n    "))
    if report.stopped_early:
        out.append("stopped at the first violation (--keep-going checks the remaining configs)")
    return "\n".join(out)


# -- show -----------------------------------------------------------------------------------------
def cmd_show(args: argparse.Namespace) -> int:
    from checker.traces import itf
    from checker.reports.html import show, write_html

    if (args.html or args.png) and len(args.files) != 1:
        raise UsageError(f"--html/--png take one trace, got {len(args.files)} files; run kvmc show once per file")
    for f in args.files:
        t = itf.read(f)
        if args.html or args.png:
            from checker.reports import chart

            for out, write in ((args.html, write_html), (args.png, chart.png)):
                if not out:
                    continue
                try:
                    print(f"wrote {write(t, out)}")
                except (OSError, RuntimeError) as e:  # unwritable path, or matplotlib missing for --png
                    raise UsageError(f"cannot write {out!r}: {e}; give a writable path (and `pip install matplotlib` for --png)") from e
        else:
            show(t, sys.stdout, args.color)
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kvmc", description="Model checker for SGLang's scheduler KV-cache memory invariants.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    pl = sub.add_parser("list", help="designs, fixes, properties, configs, transitions, mutants")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(fn=cmd_list)

    pc = sub.add_parser("check", help="model-check a design")
    add_design_options(pc)
    pc.add_argument("--property", action="append", default=[], metavar="NAME", help="default: all")
    pc.add_argument("--config", action="append", default=[], metavar="NAME", help="default: all, relevant ones first")
    pc.add_argument("--depth", type=int, default=10, help="scheduler iterations to check (default 10)")
    pc.add_argument("--engine", default="bmc", help="bmc (default), explicit, random, induction")
    pc.add_argument("--out", default="counterexamples", help="where counterexamples go (default counterexamples/)")
    pc.add_argument("--json", action="store_true", help="machine-readable report on stdout")
    pc.add_argument("--keep-going", action="store_true", help="do not stop at the first violation")
    pc.add_argument("--no-prove", action="store_true", help="bounded checking only (no 1-induction proof)")
    pc.add_argument("--no-minimize", action="store_true", help="report the first counterexample found as is")
    pc.add_argument("--timeout", type=float, default=None, help="seconds per solver query (then: unknown)")
    pc.add_argument("--without-lemma", action="append", default=[], metavar="LEMMA",
                    help="do not assume this lemma in the induction proofs (try a smaller inductive set)")
    pc.add_argument("--proof-cache", metavar="DIR", default=None,
                    help="record the step-case queries z3 proves unsat, and take recorded ones from DIR, so a long "
                         "proof can be stopped and resumed (keyed by a digest of the exact query and the z3 version)")
    pc.add_argument("--no-progress", action="store_true")
    pc.add_argument("-v", "--verbose", action="store_true")
    pc.add_argument("--all", action="store_true", help="every preset design (x every config), in parallel; one report")
    pc.add_argument("--jobs", type=int, default=None, help="run (design, config) checks in N parallel processes (default: cores)")
    pc.set_defaults(fn=cmd_check)

    ps = sub.add_parser("show", help="print a counterexample's step table (or write an HTML / PNG report)")
    ps.add_argument("files", nargs="+")
    ps.add_argument("--html", metavar="OUT.html", help="write one self-contained page: the trace table and a chart per pool")
    ps.add_argument("--png", metavar="OUT.png", help="write the per-pool ownership chart alone")
    ps.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                    help="colour the step table (auto: a terminal and NO_COLOR unset)")
    ps.set_defaults(fn=cmd_show)

    from checker.cli.review import add_parser as add_review_parser

    add_review_parser(sub)
    from checker.cli.graph import add_parser as add_graph_parser

    add_graph_parser(sub)
    from checker.cli.replay import add_parser as add_replay_parser

    add_replay_parser(sub)
    from upstream.cli import add_parsers as add_upstream_parsers  # `kvmc sglang install`, `kvmc conform`

    add_upstream_parsers(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return int(args.fn(args))
    except UsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (KeyError,) as e:
        print(f"kvmc: error: {e.args[0] if e.args else e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # an ITF or config problem in a file the user gave us
        from checker.traces.itf import ItfError

        if isinstance(e, ItfError):
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        raise


if __name__ == "__main__":
    sys.exit(main())
