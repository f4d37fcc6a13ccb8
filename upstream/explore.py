"""`kvmc explore`: search SGLang's own scheduler with kvmc's properties as the oracle (parent side:
imports no SGLang; the walks run in worker subprocesses, upstream/sched/explore.py, one release
each, as `kvmc replay --against` does).

    kvmc explore --sglang ==VERSION --config CONFIG [--seed S] [--walks N] [--depth D] [--jobs J]
                 [--budget SECONDS] [--property P]... [--revert FIX]... [--out DIR] [--no-shrink]

kvmc supplies the environment (arrivals with their prompt and output lengths and shared prefixes
within the config's bounds, streaming-session turns and closes, forced retraction where the config
asks for it, idle iterations) and the oracle (docs/explore.md); SGLang's real `Scheduler`, built
on CPU without a model (upstream/sched/harness.py), makes every other choice itself. Walk seeds
S .. S+N-1 are dealt round-robin to J worker processes; each violated property's first
counterexample is shrunk in its worker (drop iterations, drop events, lower lengths) and written
under --out as

    <property>.itf.json   the events and, per step, SGLang's state mapped onto the model's
                          variables (upstream/sched/abstraction.py) where it maps
    <property>.txt        the step table (SGLang's busy / idle check, the ledger on its objects)
    <property>_repro.py   a standalone reproducer: builds the scheduler as harness.py does, feeds
                          the events, asserts the failure (exit 0 when it reproduces)

Verdicts are `violated` (with the counterexample) or `no violation in N walks of depth D, seeds
A..B` - a search of some executions, never a proof. `--search bfs` (upstream/sched/bfs.py) searches
the parameter point of --seed breadth-first instead, every event choice per iteration, states
deduplicated through the abstraction: `violated` with the shortest counterexample (unshrunk),
`holds to depth k on the explored abstract states`, or `unknown (partial)` where --max-states or
the budget stopped it (exit 3); --jobs forks shards of each depth's successors in its one worker.
Exit status: 0 no violation, 1 a violation, 2 bad input (one line, nothing written), 3 a search
stopped short (bfs), 4 kvmc could not drive the release (an internal error, never a finding),
130 / 143 interrupted (the workers are ended; what was established is printed).
"""

from __future__ import annotations

import contextlib
import json
import os
import pprint
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from checker import interrupt

from .errors import EXIT_USAGE, UpstreamUsageError

REPO = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_VIOLATION, EXIT_INTERNAL, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 4, 130, 143
DEFAULT_OUT = "kvmc-out/explore"
EXIT_UNKNOWN = 3  # --search bfs stopped at its state cap or budget: no verdict (as review's inconclusive)
SEARCHES = ("walks", "bfs")
DEFAULT_WALKS, DEFAULT_DEPTH, DEFAULT_BFS_DEPTH, DEFAULT_MAX_STATES = 2000, 16, 8, 20000


def add_parser(sub: Any) -> None:
    pe = sub.add_parser("explore", help="search SGLang's own scheduler (a release, on CPU) with kvmc's properties as the oracle")
    which = pe.add_mutually_exclusive_group(required=True)
    which.add_argument("--sglang", metavar="==VERSION", help="an installed release, e.g. ==0.5.10.post1")
    which.add_argument("--sglang-source", metavar="DIR",
                       help="an SGLang source tree (its root with python/sglang/, or a folder holding sglang/), "
                            "uncommitted changes included, or CHECKOUT@REF / @REF (a commit of a git checkout, "
                            "written to a temporary folder); its version is read from the tree (upstream/source.py)")
    pe.add_argument("--config", required=True, metavar="NAME", help="a config of `kvmc list` (its bounds bound the walks)")
    pe.add_argument("--search", choices=SEARCHES, default="walks",
                    help="walks: seeded random walks (default); bfs: breadth-first from the parameter point of --seed, "
                         "every event choice per iteration, states deduplicated through the abstraction "
                         "(upstream/sched/bfs.py)")
    pe.add_argument("--seed", type=int, default=0, help="first walk seed (default 0); with --search bfs, the seed whose "
                                                        "parameter point is searched")
    pe.add_argument("--walks", type=int, default=None, help=f"walks, seeds S .. S+N-1 (default {DEFAULT_WALKS}; not with --search bfs)")
    pe.add_argument("--depth", type=int, default=None,
                    help=f"scheduler iterations per walk (default {DEFAULT_DEPTH}), or the search's depth bound "
                         f"(default {DEFAULT_BFS_DEPTH} with --search bfs)")
    pe.add_argument("--max-states", type=int, default=DEFAULT_MAX_STATES, metavar="N",
                    help=f"with --search bfs: stop after N distinct states, verdict unknown (default {DEFAULT_MAX_STATES})")
    pe.add_argument("--jobs", type=int, default=1, help="worker processes (default 1; each imports SGLang once); with "
                                                        "--search bfs, forked shards of each depth's successors")
    pe.add_argument("--budget", type=float, default=300.0, metavar="SECONDS",
                    help="stop starting walks after this long, SGLang's import included (default 300)")
    pe.add_argument("--property", action="append", default=[], metavar="NAME", help="default: every explored property")
    pe.add_argument("--revert", action="append", default=[], metavar="FIX",
                    help="revert a fix in the release first (upstream/sched/reverts.py): a developer's change")
    pe.add_argument("--progress-bound", type=int, default=4, metavar="K",
                    help="progress: K iterations in a row with no batch, a request pending, nothing changing (default 4)")
    pe.add_argument("--compare-model", action="store_true",
                    help="set the model's step beside every explored iteration (the model preset's successors from "
                         "SGLang's mapped state, with the walk's events): report the first iteration SGLang departs "
                         "from the model, its field and the transitions that write it (exit 1)")
    pe.add_argument("--aborts", action="store_true",
                    help="the client may also abort a waiting or running request (SGLang's abort_request; "
                         "the model has no abort, so not with --compare-model)")
    pe.add_argument("--out", default=DEFAULT_OUT, help=f"where counterexamples go (default {DEFAULT_OUT})")
    pe.add_argument("--no-shrink", action="store_true", help="report each counterexample as found")
    pe.add_argument("--shrink-seconds", type=float, default=120.0, help="time for shrinking one counterexample (default 120)")
    pe.add_argument("--dir", help="install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    pe.add_argument("--json", action="store_true", help="one JSON document on stdout")
    pe.set_defaults(fn=cmd_explore)


# -- input -------------------------------------------------------------------------------------------------
def _plan(args: Any, trees: contextlib.ExitStack | None = None) -> dict[str, Any]:
    """The checked job: every bad input raises UpstreamUsageError before anything runs or is written
    (a CHECKOUT@REF tree is materialised under `trees`, which removes it)."""
    from .source import release_target, tree_target

    if getattr(args, "sglang_source", None):
        target = tree_target(args.sglang_source, "--sglang-source", trees)
    else:
        target = release_target(args.sglang)
    plan = plan_for(target, args.config, args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UpstreamUsageError(f"--out {out}: exists and is not a folder")
    if (REPO / "counterexamples").resolve() in (out.resolve(), *out.resolve().parents):
        raise UpstreamUsageError(f"--out {out}: the regression corpus counterexamples/ is written by `kvmc regen` only")
    plan["out"] = out
    return plan


def check_search(args: Any) -> None:
    """The walk options (explore's and `kvmc review --sglang-base/--sglang-head`'s)."""
    from .sched.explore import PROPS

    bfs = getattr(args, "search", "walks") == "bfs"
    if bfs and args.walks is not None:
        raise UpstreamUsageError(f"--walks {args.walks} with --search bfs: the search explores the parameter point of "
                                 "--seed alone (one search per seed)")
    if bfs and getattr(args, "compare_model", False):
        raise UpstreamUsageError("--compare-model with --search bfs: the model beside SGLang runs on walks only (drop one)")
    if args.walks is None:
        args.walks = 1 if bfs else DEFAULT_WALKS
    if args.depth is None:
        args.depth = DEFAULT_BFS_DEPTH if bfs else DEFAULT_DEPTH
    if getattr(args, "max_states", None) is None:
        args.max_states = DEFAULT_MAX_STATES
    for name, v in (("--walks", args.walks), ("--depth", args.depth), ("--jobs", args.jobs),
                    ("--progress-bound", args.progress_bound), ("--max-states", args.max_states)):
        if v < 1:
            raise UpstreamUsageError(f"{name} {v}: expected a positive integer")
    if not args.budget > 0 or not args.shrink_seconds > 0:
        raise UpstreamUsageError("--budget and --shrink-seconds: expected a positive number of seconds")
    if getattr(args, "aborts", False) and getattr(args, "compare_model", False):
        raise UpstreamUsageError("--aborts with --compare-model: the model has no abort event to set beside "
                                 "SGLang's abort_request (drop one of them)")
    bad = [p for p in args.property if p not in PROPS]
    if bad:
        raise UpstreamUsageError(f"--property {bad[0]!r}: explore checks {', '.join(PROPS)}")


def plan_for(target: Any, config: str, args: Any) -> dict[str, Any]:
    """The plan of one explore of `target` (upstream/source.py::Target) on `config` (no --out)."""
    from model.designs import PRESETS
    from specs.configs import CONFIGS

    from .install import default_dir
    from .sched import releases
    from .sched.explore import PROPS
    from .source import worker_path

    if config not in CONFIGS:
        raise UpstreamUsageError(f"--config {config!r}: unknown config; known: {', '.join(CONFIGS)}")
    cfg = CONFIGS[config]
    if cfg.spec is not None:
        raise UpstreamUsageError(f"--config {config}: speculative decoding needs the draft and target models; "
                                 "the hollow scheduler cannot run EAGLE (docs/explore.md)")
    if cfg.swa_ring:
        raise UpstreamUsageError(f"--config {config}: {releases.RING_NOT_REPLAYABLE}")
    check_search(args)
    releases.check_reverts(target.release, list(getattr(args, "revert", [])))
    root = Path(args.dir) if getattr(args, "dir", None) else default_dir()
    path = worker_path(root, target)  # not installed: one line, exit 2
    return {"version": target.version, "target": target, "root": root, "path": path, "cfg": cfg,
            "preset": preset_for(target.release, PRESETS),
            "props": [p for p in PROPS if not args.property or p in args.property]}


def preset_for(version: str, presets: Any) -> str:
    """The model preset of `version`, else the newest preset before it (its parameter constraints)."""
    from .sched.releases import version_key

    if f"v{version}" in presets:
        return f"v{version}"
    older = [n for n in presets if n.startswith("v") and version_key(n) <= version_key(version)]
    return max(older, key=version_key) if older else "current"


# -- running -----------------------------------------------------------------------------------------------
class _Workers:
    """J worker processes, each in its own session (a terminal's Ctrl-C reaches the parent only; the
    parent ends them with SIGTERM)."""

    def __init__(self, plan: dict[str, Any], args: Any, deadline: float) -> None:
        from .install import release_env

        env = release_env(plan["path"])
        t = plan["target"]
        seeds = list(range(args.seed, args.seed + args.walks))
        self.procs: list[subprocess.Popen] = []
        self.sel = selectors.DefaultSelector()
        bfs = getattr(args, "search", "walks") == "bfs"
        for j in range(1 if bfs else min(args.jobs, len(seeds))):  # a search forks its own shards
            job = {"version": t.release, "source": t.source, "config": plan["cfg"].name, "preset": plan["preset"],
                   "seeds": seeds[j::args.jobs], "depth": args.depth, "props": plan["props"], "deadline": deadline,
                   "shrink": not args.no_shrink, "shrink_seconds": args.shrink_seconds,
                   "reverts": list(getattr(args, "revert", [])),
                   "progress_bound": args.progress_bound, "compare_model": bool(getattr(args, "compare_model", False)),
                   "aborts": bool(getattr(args, "aborts", False))}
            if bfs:
                job.update(search="bfs", max_states=args.max_states, bfs_jobs=args.jobs)
            p = subprocess.Popen([sys.executable, "-W", "ignore", "-m", "upstream.sched.explore"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
                                 start_new_session=True)
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(json.dumps(job))
            p.stdin.close()
            self.procs.append(p)
            self.sel.register(p.stdout, selectors.EVENT_READ, p)

    def events(self, timeout: float) -> list[tuple[subprocess.Popen, dict[str, Any] | None]]:
        """The next lines (None: that worker's output ended)."""
        out: list[tuple[subprocess.Popen, dict[str, Any] | None]] = []
        for key, _ in self.sel.select(timeout):
            p = key.data
            line = key.fileobj.readline()  # type: ignore[union-attr]
            if not line:
                self.sel.unregister(key.fileobj)
                out.append((p, None))
                continue
            try:
                out.append((p, json.loads(line)))
            except json.JSONDecodeError:
                continue  # not the worker's channel (it sends SGLang's prints to stderr; a stray line is no event)
        return out

    @property
    def open(self) -> int:
        return len(self.sel.get_map())

    def stderr_tail(self, p: subprocess.Popen) -> str:
        try:
            p.wait(timeout=5)
            return "\n".join((p.stderr.read() if p.stderr else "").strip().splitlines()[-12:])
        except (subprocess.TimeoutExpired, OSError, ValueError):
            return ""

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            for f in (p.stdout, p.stderr):
                if f is not None:
                    f.close()


def explore(plan: dict[str, Any], args: Any, say: Any = None) -> dict[str, Any]:
    """Run the walks; returns the result document (found counterexamples, walks, timings, errors).
    KeyboardInterrupt / SIGTERM: the workers are ended, and the document so far carries `interrupted`."""
    t0 = time.time()
    deadline = t0 + args.budget
    res: dict[str, Any] = {"version": plan["version"], "target": plan["target"].to_dict(),
                           "label": plan["target"].label(), "config": plan["cfg"].name, "preset": plan["preset"],
                           "reverted": [], "props": plan["props"], "walks": 0, "steps": 0, "seconds": 0.0,
                           "sglang_seconds": 0.0, "walk_seconds": 0.0, "import_seconds": [], "found": {}, "errors": [],
                           "seeds": [args.seed, args.seed + args.walks - 1], "walked_seeds": [], "depth": args.depth,
                           "jobs": args.jobs, "progress_bound": args.progress_bound, "interrupted": None,
                           "aborts": bool(getattr(args, "aborts", False)), "aborted": [0, 0],
                           "search": getattr(args, "search", "walks"), "bfs": None, "bfs_levels": [],
                           "max_states": getattr(args, "max_states", None),
                           "compare": ({"checked": 0, "unmapped": 0, "too_many": 0, "renamed": 0, "departed_walks": 0, "first": None}
                                       if getattr(args, "compare_model", False) else None)}
    w = _Workers(plan, args, deadline)
    handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)  # kvmc's handler, or a caller's
    old_term = signal.signal(signal.SIGTERM, _raise_term) if not handled else None
    try:
        while w.open:
            if len(res["found"]) == len(plan["props"]) and res["search"] != "bfs":  # a search ends with its summary
                break
            for p, ev in w.events(1.0):
                if ev is None:
                    if p.wait() != 0:
                        res["errors"].append({"pid": p.pid, "message": f"worker exited {p.returncode}: {w.stderr_tail(p)}"})
                    continue
                kind = ev["kind"]
                if kind == "ready":
                    res["import_seconds"].append(ev["import_seconds"])
                    res["reverted"] = ev.get("reverted", [])
                elif kind == "walk":
                    res["walks"] += 1
                    res["steps"] += ev["steps"]
                    res["sglang_seconds"] += ev["sglang_seconds"]
                    res["walk_seconds"] += ev["seconds"]
                    res["walked_seeds"].append(ev["seed"])
                    for i, n in enumerate(ev.get("aborts", [0, 0])):
                        res["aborted"][i] += n
                    if ev.get("compare") is not None and res["compare"] is not None:
                        _add_compare(res["compare"], ev["seed"], ev["compare"])
                elif kind == "bfs_level":
                    res["bfs_levels"].append(ev)
                    if say:
                        say(f"kvmc explore: depth {ev['depth']}: {ev['successors']} successors, {ev['new']} new states, "
                            f"{ev['duplicates']} merged, {ev['states']} distinct so far ({ev['seconds']} s)")
                elif kind == "bfs":
                    res["bfs"] = ev
                    res["walks"] = ev["successors"]
                    res["steps"] = ev["iterations"]
                    res["sglang_seconds"] = ev["sglang_seconds"]
                    res["walk_seconds"] = ev["seconds"]
                    res["walked_seeds"] = [ev["seed"]]
                elif kind == "found":
                    ev["found_after_s"] = round(time.time() - t0 - ev.get("shrink_seconds", 0), 2)
                    ev["walks_before"] = res["walks"]
                    res["found"].setdefault(ev["property"], ev)
                    if say and ev.get("search") == "bfs":
                        say(f"kvmc explore: {ev['property']} violated at depth {ev['found_at_depth']} (breadth-first: "
                            "the shortest counterexample)")
                    elif say:
                        say(f"kvmc explore: {ev['property']} violated (walk seed {ev['seed']}, after {res['walks']} walks); shrunk to "
                            f"{len(ev['steps'])} iterations")
                elif kind == "error":
                    ev["pid"] = p.pid
                    res["errors"].append(ev)
            if time.time() > deadline + args.shrink_seconds + 60:  # a worker that stopped listening to its deadline
                res["errors"].append({"message": "a worker ran past its budget and was ended"})
                break
    except KeyboardInterrupt:
        res["interrupted"] = "SIGINT"
    except _Terminated:
        res["interrupted"] = "SIGTERM"
    except interrupt.Interrupted as e:  # `kvmc`'s own handler (checker/interrupt.py): the partial report follows
        res["interrupted"] = e.name
    finally:
        w.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    res["seconds"] = round(time.time() - t0, 2)
    for k in ("sglang_seconds", "walk_seconds"):
        res[k] = round(res[k], 3)
    return res


def _add_compare(acc: dict[str, Any], seed: int, c: dict[str, Any]) -> None:
    for k in ("checked", "unmapped", "too_many", "renamed"):
        acc[k] += c.get(k, 0)
    d = c.get("departure")
    if d is not None:
        acc["departed_walks"] += 1
        if acc["first"] is None or seed < acc["first"]["seed"]:  # the lowest seed: the same report for any --jobs
            acc["first"] = dict(d, seed=seed)


def compare_lines(res: dict[str, Any]) -> list[str]:
    """The --compare-model verdict: the model beside every explored iteration."""
    from .sched.compare import MAX_SUCCESSORS as MAX_COMPARE_SUCCESSORS

    c = res.get("compare")
    if c is None:
        return []
    seen = (f"{c['checked']} iterations compared ({c['unmapped']} not mappable onto the model, {c['renamed']} with "
            "SGLang's waiting queue out of request-slot order, which the model's slot-order queue matches only up to "
            "renaming the slots"
            + (f", {c['too_many']} with over {MAX_COMPARE_SUCCESSORS} model successors" if c["too_many"] else "") + ")")
    d = c["first"]
    if d is None:
        return [f"{'model beside SGLang':24s} agrees: every compared SGLang iteration is a step model preset "
                f"{res['preset']} allows; {seen}"]
    out = [f"{'model beside SGLang':24s} DEPARTS in {c['departed_walks']} walk(s): first at walk seed {d['seed']}, "
           f"iteration {d['step']} (events {_events_text(d['events'])}): {d['field']}: model={d['model']!r}, "
           f"sglang={d['sglang']!r} (closest of {d['successors']} model successors of preset {res['preset']}); {seen}"]
    for name, models in d.get("transitions", []):
        out.append(f"  model transition that ran and writes {d['field'].split('[')[0]}: {name} ({models})")
    out.extend("  " + line.strip() for line in d.get("side_by_side", [])[:12])
    return out


def _events_text(ev: dict[str, Any]) -> str:
    return ", ".join(k if v is True else f"{k}={v}" for k, v in ev.items()) or "(none)"


class _Terminated(Exception):
    pass


def _raise_term(signum: int, frame: Any) -> None:
    raise _Terminated()


# -- output ------------------------------------------------------------------------------------------------
def _seeds_line(res: dict[str, Any]) -> str:
    s = sorted(res["walked_seeds"])
    if not s:
        return "no seed walked"
    if s == list(range(s[0], s[-1] + 1)):
        return f"seeds {s[0]}..{s[-1]}"
    return f"{len(s)} seeds in {s[0]}..{s[-1]}"


def verdict_lines(res: dict[str, Any]) -> list[str]:
    if res.get("search") == "bfs":
        return bfs_verdict_lines(res)
    out = []
    for prop in res["props"]:
        f = res["found"].get(prop)
        if f is not None:
            out.append(f"{prop:24s} violated: {f['evidence'][:160]} ({len(f['steps'])} iterations after shrinking "
                       f"from {f['original_steps']}; walk seed {f['seed']}, found after {f['found_after_s']} s)")
        else:
            out.append(f"{prop:24s} no violation in {res['walks']} walks of depth {res['depth']}, {_seeds_line(res)}")
    return out


def bfs_outcome(res: dict[str, Any]) -> str:
    """`holds` (to the depth, on the explored abstract states), `unknown` (the cap or the budget
    stopped the search: partial) or `none` (the search did not run)."""
    b = res.get("bfs")
    if b is None:
        return "none"
    return "unknown" if b["capped"] or b["timed_out"] else "holds"


def bfs_verdict_lines(res: dict[str, Any]) -> list[str]:
    """--search bfs: per property violated (the shortest counterexample), holds to depth k on the
    explored abstract states, or unknown (partial) where the cap or the budget stopped it."""
    b = res.get("bfs")
    out = []
    for prop in res["props"]:
        f = res["found"].get(prop)
        if f is not None:
            out.append(f"{prop:24s} violated: {f['evidence'][:160]} (shortest counterexample: {len(f['steps'])} "
                       f"iterations, breadth-first from the parameter point of seed {f['seed']}; found after "
                       f"{f['found_after_s']} s)")
        elif b is None:
            out.append(f"{prop:24s} unknown: the search did not run")
        elif bfs_outcome(res) == "unknown":
            why = f"the state cap {res['max_states']} was hit" if b["capped"] else "the budget ran out"
            out.append(f"{prop:24s} unknown (partial): {why} at depth {b['complete_depth'] + 1}; no violation in the "
                       f"{b['states']} distinct states explored, every depth up to {b['complete_depth']} complete")
        else:
            closed = (f"; the search closed at depth {b['closed_at']} (no new state)" if b["closed_at"] is not None else "")
            out.append(f"{prop:24s} holds to depth {b['complete_depth']} on the explored abstract states ({b['states']} "
                       f"distinct, {b['abstract_states']} model states, {b['unmapped']} not mappable and never merged; "
                       f"parameter point of seed {b['seed']}{closed}): a bounded search, not a proof")
    if b is not None and b.get("replay_mismatches"):
        out.append(f"{'search':24s} WARNING: {b['replay_mismatches']} re-runs of a state's event prefix reached another "
                   "key than when the state was found (SGLang's run is not reproducible there: the dedup is unsound)")
    return out


def bfs_levels_lines(res: dict[str, Any]) -> list[str]:
    out = []
    for lv in res.get("bfs_levels", []):
        out.append(f"  depth {lv['depth']:2d}: {lv['successors']:6d} successors, {lv['new']:6d} new states "
                   f"({lv['terminal']} terminal), {lv['duplicates']:6d} merged, {lv['states']:6d} distinct "
                   f"({lv['abstract_states']} model states), {lv['seconds']} s")
    return out


def write_outputs(res: dict[str, Any], plan: dict[str, Any], args: Any) -> dict[str, dict[str, str]]:
    """Each counterexample's ITF trace, step table and reproducer, written atomically."""
    from checker.reports.html import write_atomic as _atomic
    from checker.traces import itf

    written: dict[str, dict[str, str]] = {}
    out = plan["out"]
    for prop, f in res["found"].items():
        trace, unmapped = _trace(f, plan, prop)
        base = out / prop
        meta = {"verdict": "violated", "expected": "violation", "explored_on": explored_on(plan["target"]),
                "explore": {"seed": f["seed"], "depth": args.depth, "reverted": res["reverted"], "evidence": f["evidence"],
                            "unmapped_states": unmapped, "progress_bound": int(res["progress_bound"]),
                            "aborts": bool(getattr(args, "aborts", False)), "aborted": [0, 0],
                            "search": res.get("search", "walks"),
                            "target": _recorded_target(plan["target"]),
                            "note": "the events are kvmc's; every other choice was SGLang's own (no choice forced). "
                                    "States are SGLang's objects mapped onto the model's variables where they map "
                                    "(an unmapped state repeats the one before it)"}}
        itf_path = itf.write(str(base) + ".itf.json", trace, meta)
        txt = Path(str(base) + ".txt")
        _atomic(txt, step_table(f, plan, res) + "\n")
        repro = Path(str(base) + "_repro.py")
        _atomic(repro, reproducer(f, plan, res))
        repro.chmod(0o755)
        written[prop] = {"itf": str(itf_path), "table": str(txt), "reproducer": str(repro)}
    return written


def _trace(f: dict[str, Any], plan: dict[str, Any], prop: str) -> tuple[Any, list[int]]:
    from checker.traces.trace import Step, Trace
    from model.config import concrete_params
    from model.designs import PRESETS
    from model.state import State

    cfg = plan["cfg"]
    params = concrete_params(cfg, **{k: tuple(v) if isinstance(v, list) else v for k, v in f["params"].items()})
    states: list[Any] = []
    unmapped: list[int] = []
    for i, d in enumerate(f["states"]):
        if d is None:
            unmapped.append(i)
            states.append(states[-1] if states else None)
            continue
        states.append(State(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}))
    if states and states[0] is None:
        from model.ops import Concrete
        from model.system import System

        system = System(cfg, PRESETS[plan["preset"]])
        init = system.init(system.ctx(Concrete(), params))
        states = [s if s is not None else init for s in states]
    steps = [Step("event_loop_iteration", dict(p), s) for p, s in zip(f["steps"], states[1:])]
    return Trace(cfg, PRESETS[plan["preset"]], params, states[0], steps, prop=prop, engine="explore"), unmapped


def step_table(f: dict[str, Any], plan: dict[str, Any], res: dict[str, Any]) -> str:
    head = [f"kvmc explore: {f['property']} violated on {plan['target'].label()}"
            + (f" with {', '.join(r.split(' ')[0] for r in res['reverted'])} reverted" if res["reverted"] else "")
            + f", config {plan['cfg'].name}",
            f"  {f['evidence']}",
            f"  parameters: " + ", ".join(f"{k}={v}" for k, v in f["params"].items() if v not in ([], ())),
            (f"  breadth-first from the parameter point of seed {f['seed']}: the shortest counterexample, "
             f"{len(f['steps'])} iterations (unshrunk)" if f.get("search") == "bfs" else
             f"  walk seed {f['seed']}, {f['original_steps']} iterations shrunk to {len(f['steps'])} "
             f"({f.get('shrink_tried', 0)} candidates re-run)")]
    return "\n".join(head + ["  " + t for t in f["table"]])


def explored_on(t: Any) -> str:
    """What an ITF trace records as the SGLang explored: `sglang==V`, `sglang source DIR (V)`, or
    `sglang source CHECKOUT@REF (commit H, V)`."""
    if t.source is None:
        return f"sglang=={t.version}"
    if t.ref:
        return f"sglang source {t.ref} (commit {t.commit[:12]}, {t.version})"
    return f"sglang source {t.source} ({t.version})"


def _recorded_target(t: Any) -> dict[str, Any]:
    """The SGLang explored, as `kvmc replay --against` compares it: a release, a folder, or a commit
    (whose temporary folder is gone once explore ends: the commit names it)."""
    d = t.to_dict()
    if t.ref:
        d["source"] = None
    return d


def reproducer(f: dict[str, Any], plan: dict[str, Any], res: dict[str, Any]) -> str:
    reverts = [r.split(" ")[0] for r in res["reverted"]]
    table = "\n".join("    " + t for t in f["table"])
    t = plan["target"]
    label = t.label()
    return REPRO.format(prop=f["property"], label=label, cfg=plan["cfg"].name, evidence=f["evidence"], table=table,
                        repo=repr(str(REPO)), version=repr(t.version), release=repr(t.release),
                        source=repr(None if t.ref else t.source), ref=repr(t.pinned or None),
                        preset=repr(plan["preset"]), reverts=repr(reverts), prop_r=repr(f["property"]),
                        bound=repr(int(res["progress_bound"])), params=pprint.pformat(f["params"], width=100),
                        steps=pprint.pformat(f["steps"], width=100), config_r=repr(plan["cfg"].name),
                        label_r=repr(label))


REPRO = '''#!/usr/bin/env python3
"""Reproducer written by `kvmc explore`: {prop} violated on {label}, config {cfg}.

{evidence}

It builds SGLang's real Scheduler on CPU without a model, as kvmc's upstream/sched/harness.py does
(`Scheduler.__new__` plus what init_model_worker would set, then SGLang's own init_* methods; the
model forward, the IPC sockets and the CUDA kernels replaced), sends the events below through
`process_input_requests`, runs one `event_loop_normal` iteration per step (SGLang making every
choice itself) and asserts that kvmc's property `{prop}` (specs/properties.py) fails on
SGLang's objects at the last step. Exit 0: reproduced; AssertionError (exit 1): not reproduced;
exit 2: the SGLang named cannot be run (one line).

    python {{this file}}                              on the SGLang it was found on
    python {{this file}} --sglang-source DIR          on an SGLang source tree (a checkout's root
                                                    with python/sglang/, or a folder with sglang/;
                                                    CHECKOUT@REF: a commit of a git checkout)
    python {{this file}} --sglang ==VERSION           on an installed release
    (from anywhere; KVMC_REPO names the kvmc checkout, default below)

It re-runs itself with that SGLang, kvmc's pinned dependencies and CPU stubs on the path
(upstream/source.py::worker_path; a release's folders are `kvmc sglang install`'s). The fixes it
reverted at run time (REVERTS, upstream/sched/reverts.py) are reverted on the SGLang it was found
on only.

The steps, as kvmc explore saw them:
{table}
"""

import json
import os
import subprocess
import sys

KVMC = os.environ.get("KVMC_REPO", {repo})
VERSION = {version}  # the SGLang version explored
RELEASE = {release}  # the release it maps to (its revert texts)
SOURCE = {source}  # the source tree explored (None: an installed release, or a commit)
REF = {ref}  # the git commit explored, CHECKOUT@HASH (its tree is written to a temporary folder again)
CONFIG = {config_r}
PRESET = {preset}  # the model preset whose enqueue clip progress's assumptions read
REVERTS = {reverts}
PROPERTY = {prop_r}
PROGRESS_BOUND = {bound}
PARAMS = {params}
STEPS = {steps}


def _target(argv, trees):
    from upstream.source import release_target, source_target, tree_target

    if not argv:
        if REF:
            return tree_target(REF, "REF", trees), True
        return (source_target(SOURCE) if SOURCE else release_target("==" + VERSION)), True
    if len(argv) == 2 and argv[0] == "--sglang-source":
        return tree_target(argv[1], "--sglang-source", trees), False
    if len(argv) == 2 and argv[0] == "--sglang":
        return release_target(argv[1]), False
    raise SystemExit("usage: " + os.path.basename(__file__) + " [--sglang-source DIR | --sglang ==VERSION]")


def main() -> int:
    sys.path.insert(0, KVMC)
    if os.environ.get("KVMC_REPRO_CHILD") != "1":
        import contextlib

        from upstream.errors import UpstreamUsageError
        from upstream.install import default_dir, release_env
        from upstream.source import worker_path

        with contextlib.ExitStack() as trees:  # a commit's temporary tree, removed after the run
            try:
                target, own = _target(sys.argv[1:], trees)
                env = release_env(worker_path(default_dir(), target))
            except UpstreamUsageError as e:
                print(f"error: {{e}}", file=sys.stderr)
                return 2
            env["KVMC_REPRO_CHILD"] = "1"
            env["KVMC_REPRO_TARGET"] = json.dumps(dict(target.to_dict(), label=target.label(),
                                                       reverts=REVERTS if own else []))
            return subprocess.call([sys.executable, "-W", "ignore", os.path.abspath(__file__)], env=env, cwd=KVMC)
    target = json.loads(os.environ["KVMC_REPRO_TARGET"])
    from model.config import concrete_params
    from model.designs import PRESETS
    from specs.configs import CONFIGS
    from upstream.sched import harness, reverts
    from upstream.sched.explore import Oracle, check_source

    harness.setup()
    check_source(target["source"])  # the tree's own sglang, not another one on the path
    reverts.apply(target["reverts"], target["release"])
    cfg = CONFIGS[CONFIG]
    params = concrete_params(cfg, **{{k: tuple(v) if isinstance(v, list) else v for k, v in PARAMS.items()}})
    h = harness.RealScheduler(cfg, params, force=False)  # SGLang's own choices: nothing forced
    h.forcing.observe = False
    oracle = Oracle([PROPERTY], PROGRESS_BOUND, PRESETS[PRESET])
    verdict = None
    t = 0
    for t, picks in enumerate(STEPS, 1):
        h.step(picks)
        verdict = oracle.judge(h, picks)
        print(f"step {{t}}: events {{picks or '(none)'}}: " + (f"{{verdict[0]}} violated: {{verdict[1]}}" if verdict else "holds"))
        if verdict is not None:
            break
    assert verdict is not None and verdict[0] == PROPERTY and t == len(STEPS), \\
        f"not reproduced: {{PROPERTY}} did not fail at step {{len(STEPS)}} on {{target['label']}}"
    print(f"reproduced: {{PROPERTY}} violated on {{target['label']}} at step {{t}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


def report(res: dict[str, Any], written: dict[str, dict[str, str]]) -> str:
    plan_line = (f"kvmc explore: {res['label']}"
                 + (f" with {', '.join(r.split(' ')[0] for r in res['reverted'])} reverted" if res["reverted"] else "")
                 + f", config {res['config']}"
                 + (f", with aborts ({res['aborted'][0]} of waiting requests, {res['aborted'][1]} of running ones)"
                    if res.get("aborts") else "")
                 + f" (model preset {res['preset']} for the parameter bounds), "
                 f"{res['walks']} walks of at most {res['depth']} iterations, {res['steps']} SGLang iterations in "
                 f"{res['seconds']} s ({res['jobs']} job{'s' if res['jobs'] > 1 else ''}; SGLang's import "
                 f"{max(res['import_seconds'] or [0])} s; {_rate(res)} iterations/s walking, "
                 f"{res['sglang_seconds']} s of it inside SGLang's scheduler)")
    if res.get("search") == "bfs":
        b = res.get("bfs") or {}
        plan_line = (f"kvmc explore --search bfs: {res['label']}"
                     + (f" with {', '.join(r.split(' ')[0] for r in res['reverted'])} reverted" if res["reverted"] else "")
                     + f", config {res['config']}" + (", with aborts" if res.get("aborts") else "")
                     + f" (model preset {res['preset']}), parameter point of seed {res['seeds'][0]}"
                     + (f" ({', '.join(f'{k}={v}' for k, v in b['params'].items() if v not in ([], ()))})" if b else "")
                     + f", depth bound {res['depth']}, state cap {res['max_states']}: {b.get('states', 0)} distinct states, "
                     f"{res['walks']} successors re-run ({res['steps']} SGLang iterations) in {res['seconds']} s "
                     f"({res['jobs']} job{'s' if res['jobs'] > 1 else ''}; SGLang's import "
                     f"{max(res['import_seconds'] or [0])} s; "
                     + (f"{b['states'] / b['seconds']:.0f} states/s" if b.get("seconds") else "- states/s") + ")")
    out = [plan_line]
    if res.get("search") == "bfs":
        out += bfs_levels_lines(res)
    if res["interrupted"]:
        out.append(f"INTERRUPTED by {res['interrupted']}: what follows is what was established before")
    out += verdict_lines(res)
    out += compare_lines(res)
    for prop, w in written.items():
        out.append(f"  {prop}: {w['itf']}, {w['table']}, {w['reproducer']}")
        out.extend("    " + t for t in res["found"][prop]["table"])
    for e in res["errors"]:
        out.append(f"error (kvmc could not drive this walk; not a finding): seed {e.get('seed')}: "
                   + str(e["message"]).splitlines()[0])
    return "\n".join(out)


def _rate(res: dict[str, Any]) -> str:
    return f"{res['steps'] / res['walk_seconds']:.0f}" if res["walk_seconds"] else "-"


def cmd_explore(args: Any) -> int:
    with contextlib.ExitStack() as trees:  # a CHECKOUT@REF tree lives as long as the explore
        try:
            plan = _plan(args, trees)
        except UpstreamUsageError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        return _explore(args, plan)


def _explore(args: Any, plan: dict[str, Any]) -> int:
    res = explore(plan, args, say=None if args.json else (lambda m: print(m, file=sys.stderr, flush=True)))
    usage = [e for e in res["errors"] if e.get("seed") is None and "does not import" not in str(e["message"])
             and "revert" in str(e["message"]).lower()]
    if usage:
        print(f"kvmc: error: {str(usage[0]['message']).splitlines()[0]}", file=sys.stderr)
        return EXIT_USAGE
    written = write_outputs(res, plan, args) if res["found"] else {}
    if args.json:
        doc = dict(res, written=written)
        for f in doc["found"].values():
            f.pop("states", None)
        print(json.dumps(doc, indent=1, default=str))
    else:
        print(report(res, written))
    if res["interrupted"]:
        return EXIT_SIGINT if res["interrupted"] == "SIGINT" else EXIT_SIGTERM
    if res["errors"]:
        for e in res["errors"]:
            print(f"kvmc: internal error: {e['message']}", file=sys.stderr)
        return EXIT_INTERNAL
    departs = res["compare"] is not None and res["compare"]["first"] is not None
    if res["found"] or departs:
        return EXIT_VIOLATION
    if res.get("search") == "bfs" and bfs_outcome(res) != "holds":
        return EXIT_UNKNOWN
    return EXIT_OK
