"""`kvmc explore`: search SGLang's own scheduler with kvmc's properties as the oracle (parent side:
imports no SGLang; the walks run in worker subprocesses, upstream/sched/explore.py, one release
each, as `kvmc replay --against` does).

    kvmc explore --sglang ==VERSION --config CONFIG [--seed S] [--walks N] [--depth D] [--jobs J]
                 [--budget SECONDS] [--property P]... [--revert FIX]... [--out DIR] [--no-shrink]
                 [--search bfs [--points N]] [--executor local|ray [--ray-address auto|HOST:PORT]]

kvmc supplies the environment (arrivals with their prompt and output lengths and shared prefixes
within the config's bounds, streaming-session turns and closes, forced retraction where the config
asks for it, idle iterations) and the oracle (docs/explore.md); SGLang's real `Scheduler`, built
on CPU without a model (upstream/sched/harness.py), makes every other choice itself. Walk seeds
S .. S+N-1 are dealt round-robin to J shards, each a worker process (`--executor ray`: each a Ray
task that runs the same worker on its node, `run_shard_on_worker`); each violated property's first
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
`--points N` searches the points of seeds S .. S+N-1, each point's search whole in one shard (the
points dealt to J shards as the walk seeds are): per property `violated` at some points (the
shortest counterexample), `holds to depth D at each of the N points`, or unknown (partial) where a
point's search was cut or not started. A property's counterexample is the lowest seed's (walks) or
the shortest, then the lowest seed's (bfs), whichever shard reports first: the same for either
executor and any timing.
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
    pe.add_argument("--seed", type=int, default=0, help="first walk seed (default 0); with --search bfs, the (first) seed "
                                                        "whose parameter point is searched")
    pe.add_argument("--walks", type=int, default=None, help=f"walks, seeds S .. S+N-1 (default {DEFAULT_WALKS}; not with --search bfs)")
    pe.add_argument("--points", type=int, default=None, metavar="N",
                    help="with --search bfs: search the parameter points of seeds S .. S+N-1, each point's search a "
                         "shard of its own (default 1)")
    pe.add_argument("--depth", type=int, default=None,
                    help=f"scheduler iterations per walk (default {DEFAULT_DEPTH}), or the search's depth bound "
                         f"(default {DEFAULT_BFS_DEPTH} with --search bfs)")
    pe.add_argument("--max-states", type=int, default=DEFAULT_MAX_STATES, metavar="N",
                    help=f"with --search bfs: stop after N distinct states, verdict unknown (default {DEFAULT_MAX_STATES})")
    pe.add_argument("--jobs", type=int, default=None,
                    help="shards (default 1; with --executor ray, the cluster's CPUs): the walk seeds, or the points "
                         "of --search bfs --points N, dealt round-robin, each shard one worker process that imports "
                         "SGLang once; with --search bfs on one point, forked shards of each depth's successors")
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
    from checker.executors.options import add_executor_options

    add_executor_options(pe, "the shards as Ray tasks, each running the worker on a Ray node")
    pe.set_defaults(fn=cmd_explore)


# -- input -------------------------------------------------------------------------------------------------
def _plan(args: Any, trees: contextlib.ExitStack | None = None) -> dict[str, Any]:
    """The checked job: every bad input raises UpstreamUsageError before anything runs or is written
    (a CHECKOUT@REF tree is materialised under `trees`, which removes it)."""
    from checker import executors

    from .source import release_target, tree_target

    try:  # a bad --executor / --ray-address, or the ray extra missing: before anything else
        executors.check_choice(getattr(args, "executor", "local"), getattr(args, "ray_address", None))
    except executors.ExecutorError as e:
        raise UpstreamUsageError(str(e)) from None
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
                                 "--seed (one search per seed; --points N for the points of N seeds)")
    if not bfs and getattr(args, "points", None) is not None:
        raise UpstreamUsageError(f"--points {args.points} without --search bfs: the walks draw a parameter point per "
                                 "walk seed (--walks N); --points N is the breadth-first search's")
    points = getattr(args, "points", None)  # (not set here: a review checks the same options once per side)
    if getattr(args, "jobs", None) is None and getattr(args, "executor", "local") != "ray":
        args.jobs = 1  # with --executor ray: the cluster's CPUs, known once Ray is up (cmd_explore)
    if bfs and getattr(args, "compare_model", False):
        raise UpstreamUsageError("--compare-model with --search bfs: the model beside SGLang runs on walks only (drop one)")
    if args.walks is None:
        args.walks = (points or 1) if bfs else DEFAULT_WALKS  # bfs: the points' seeds S .. S+N-1
    if args.depth is None:
        args.depth = DEFAULT_BFS_DEPTH if bfs else DEFAULT_DEPTH
    if getattr(args, "max_states", None) is None:
        args.max_states = DEFAULT_MAX_STATES
    for name, v in (("--points", points), ("--walks", args.walks), ("--depth", args.depth), ("--jobs", args.jobs),
                    ("--progress-bound", args.progress_bound), ("--max-states", args.max_states)):
        if v is not None and v < 1:
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
def shard_jobs(plan: dict[str, Any], args: Any, deadline: float, cpus: int | None = None) -> list[tuple[dict[str, Any], int]]:
    """The shards' worker jobs, each with the CPUs it holds: the seeds (the walks', or the points'
    of --search bfs) dealt round-robin to --jobs shards, one CPU each; a search of one point is one
    shard that forks --jobs shards of each depth itself (on Ray at most `cpus`, the CPUs of the
    largest node, and it holds them). The same shards for either executor, so the same walks and searches."""
    t = plan["target"]
    seeds = list(range(args.seed, args.seed + args.walks))
    bfs = getattr(args, "search", "walks") == "bfs"
    one_point = bfs and len(seeds) == 1
    n = 1 if one_point else min(args.jobs, len(seeds))
    forks = min(args.jobs, cpus) if cpus is not None else args.jobs
    out = []
    for j in range(n):
        job = {"version": t.release, "source": t.source, "config": plan["cfg"].name, "preset": plan["preset"],
               "seeds": seeds[j::n], "depth": args.depth, "props": plan["props"], "deadline": deadline,
               "shrink": not args.no_shrink, "shrink_seconds": args.shrink_seconds,
               "reverts": list(getattr(args, "revert", [])),
               "progress_bound": args.progress_bound, "compare_model": bool(getattr(args, "compare_model", False)),
               "aborts": bool(getattr(args, "aborts", False))}
        if bfs:  # several points: each point's search whole in its shard; one point: forked depth shards
            job.update(search="bfs", max_states=args.max_states, bfs_jobs=forks if one_point else 1)
        out.append((job, forks if one_point else 1))
    return out


WORKER = [sys.executable, "-W", "ignore", "-m", "upstream.sched.explore"]


class _Workers:
    """The shards as worker processes of this machine, each in its own session (a terminal's Ctrl-C
    reaches the parent only; the parent ends them with SIGTERM). Inside `serve.shared_workers()`
    (the tests' `one_worker_per_release`) each is a fork of a worker that imported SGLang once
    (upstream/serve.py::spawn), which runs its job from the state a fresh worker runs it from."""

    def __init__(self, shards: list[tuple[dict[str, Any], int]], path: list[str]) -> None:
        from . import serve
        from .install import release_env

        env = release_env(path)
        self.procs: list[Any] = []
        self.sel = selectors.DefaultSelector()
        for job, _cpus in shards:
            if serve.active():  # inside serve.shared_workers(): a fork of a worker that imported SGLang once
                p: Any = serve.spawn([*WORKER, "--serve-spawn"], env, str(REPO), job)
            else:
                p = subprocess.Popen(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, cwd=str(REPO), start_new_session=True)
                assert p.stdin is not None
                p.stdin.write(json.dumps(job))
                p.stdin.close()
            assert p.stdout is not None
            self.procs.append(p)
            self.sel.register(p.stdout, selectors.EVENT_READ, p)

    def exit_error(self, p: subprocess.Popen) -> str | None:
        """Why worker `p`, whose output ended, failed (None: it exited 0)."""
        return None if p.wait() == 0 else f"worker exited {p.returncode}: {self.stderr_tail(p)}"

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


class _RayShards:
    """The shards as Ray tasks (`--executor ray`, checker/executors/): each a streaming task that
    runs the shard's worker process on its Ray node (`run_shard_on_worker`) and yields the worker's
    events as they come, read here as `_Workers`' lines are. A shard whose Ray worker dies is not
    re-run (its walks would be reported twice): an error, its remaining seeds not explored."""

    def __init__(self, ex: Any, shards: list[tuple[dict[str, Any], int]], path: list[str]) -> None:
        self.ex = ex
        self.procs = [ex.stream(run_shard_on_worker, job, list(path), cpus=cpus) for job, cpus in shards]
        self.live = list(self.procs)

    def events(self, timeout: float) -> list[tuple[Any, dict[str, Any] | None]]:
        out: list[tuple[Any, dict[str, Any] | None]] = []
        for g, status, value in self.ex.next_ready(self.live, timeout):
            if status == "ok":
                out.append((g, value))
                continue
            self.live.remove(g)
            if status == "died":
                out.append((g, {"kind": "error", "seed": None,
                                "message": f"the Ray worker of shard {self.procs.index(g) + 1} died ({value}); the "
                                           "seeds it had not explored are not reported"}))
            out.append((g, None))
        return out

    def exit_error(self, g: Any) -> str | None:
        return None  # the task reports its worker's exit itself (an `error` event)

    @property
    def open(self) -> int:
        return len(self.live)

    def stop(self) -> None:
        if interrupt.requested() and self.ex.owned:
            return  # Ctrl-C / SIGTERM: kvmc's handler has ended the local instance's processes already
        # (on a cluster the tasks run on, its nodes' workers are cancelled: they are not this process's)
        self.ex.cancel(self.live)
        self.live = []


def run_shard_on_worker(job: dict[str, Any], path: list[str]) -> Any:
    """A Ray task (a generator): shard `job`'s worker process on this node, with SGLang imported
    from `path` (upstream/source.py::worker_path: the release or the source tree, then kvmc's
    pinned dependencies, the scheduler extras and the CPU stubs) as `_Workers` starts it locally;
    yields each of its events. The worker dies with this Ray worker (a cancelled or killed task
    leaves no process); a path this node does not have (a cluster's nodes need kvmc and the SGLang
    explored at the same paths) is an error event, as is a worker that exits otherwise than 0."""
    import socket
    import tempfile

    from .install import release_env

    missing = [d for d in path if not os.path.exists(d)]
    if missing:
        yield {"kind": "error", "seed": None, "message": f"{missing[0]} (the SGLang explored, or kvmc's dependencies "
               f"for it) is not on Ray node {socket.gethostname()}: a cluster's nodes need kvmc and it at the same paths"}
        return
    env = dict(release_env(path), KVMC_EXPLORE_PARENT=str(os.getpid()))
    with tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                             cwd=str(REPO))
        try:
            assert p.stdin is not None and p.stdout is not None
            p.stdin.write(json.dumps(job))
            p.stdin.close()
            for line in p.stdout:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue  # not the worker's channel
                yield ev
            if p.wait() != 0:
                err.seek(0)
                tail = "\n".join(err.read().strip().splitlines()[-12:])
                yield {"kind": "error", "seed": None, "message": f"worker exited {p.returncode} on Ray node "
                       f"{socket.gethostname()}: {tail}"}
        finally:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def explore(plan: dict[str, Any], args: Any, say: Any = None, ex: Any = None) -> dict[str, Any]:
    """Run the walks (or the searches); returns the result document (found counterexamples, walks,
    timings, errors). `ex`: the run's Ray executor (`--executor ray`), None for this machine's
    processes. KeyboardInterrupt / SIGTERM: the workers are ended, and the document so far carries
    `interrupted`."""
    t0 = time.time()
    deadline = t0 + args.budget
    bfs = getattr(args, "search", "walks") == "bfs"
    res: dict[str, Any] = {"version": plan["version"], "target": plan["target"].to_dict(),
                           "label": plan["target"].label(), "config": plan["cfg"].name, "preset": plan["preset"],
                           "reverted": [], "props": plan["props"], "walks": 0, "steps": 0, "seconds": 0.0,
                           "sglang_seconds": 0.0, "walk_seconds": 0.0, "import_seconds": [], "ready_after_s": [],
                           "found": {}, "errors": [],
                           "seeds": [args.seed, args.seed + args.walks - 1], "walked_seeds": [], "depth": args.depth,
                           "jobs": args.jobs, "executor": "local" if ex is None else "ray", "shards": 0,
                           "progress_bound": args.progress_bound, "interrupted": None,
                           "aborts": bool(getattr(args, "aborts", False)), "aborted": [0, 0],
                           "search": getattr(args, "search", "walks"), "bfs": None, "bfs_levels": [], "bfs_points": [], "bfs_found": [],
                           "points": args.walks if bfs else None,
                           "max_states": getattr(args, "max_states", None),
                           "compare": ({"checked": 0, "unmapped": 0, "too_many": 0, "renamed": 0, "departed_walks": 0, "first": None}
                                       if getattr(args, "compare_model", False) else None)}
    shards = shard_jobs(plan, args, deadline, ex.node_capacity() if ex is not None else None)
    res["shards"] = len(shards)
    w: Any = None
    # per shard: the last walk seed it reported, the properties it found, whether its output ended
    last: dict[Any, int] = {}
    found_by: dict[Any, set[str]] = {}
    ended: set[Any] = set()

    def settled() -> bool:
        """Every property found, and no shard can report a lower seed for one (each walks its seeds
        in order and reports a walk's counterexample before its next walk): the same counterexamples
        for any timing of the shards."""
        if len(res["found"]) < len(plan["props"]):
            return False
        return all(h in ended or all(prop in found_by.get(h, ()) or (h in last and last[h] > f["seed"])
                                     for prop, f in res["found"].items()) for h in w.procs)

    handled = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)  # kvmc's handler, or a caller's
    old_term = signal.signal(signal.SIGTERM, _raise_term) if not handled else None
    try:
        w = _RayShards(ex, shards, plan["path"]) if ex is not None else _Workers(shards, plan["path"])
        while w.open:
            if not bfs and settled():  # a search ends with its summaries
                break
            for p, ev in w.events(1.0):
                if ev is None:
                    ended.add(p)
                    why = w.exit_error(p)
                    if why is not None:
                        res["errors"].append({"pid": getattr(p, "pid", None), "message": why})
                    continue
                kind = ev["kind"]
                if kind == "ready":
                    res["import_seconds"].append(ev["import_seconds"])
                    res["ready_after_s"].append(round(time.time() - t0, 2))
                    res["reverted"] = ev.get("reverted", [])
                elif kind == "walk":
                    last[p] = ev["seed"]
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
                        at = f"point of seed {ev['seed']}, " if res["points"] > 1 else ""
                        say(f"kvmc explore: {at}depth {ev['depth']}: {ev['successors']} successors, {ev['new']} new "
                            f"states, {ev['duplicates']} merged, {ev['states']} distinct so far ({ev['seconds']} s)")
                elif kind == "bfs":
                    res["bfs_points"].append(ev)
                    if not ev.get("skipped"):
                        res["walks"] += ev["successors"]
                        res["steps"] += ev["iterations"]
                        res["sglang_seconds"] += ev["sglang_seconds"]
                        res["walk_seconds"] += ev["seconds"]
                        res["walked_seeds"].append(ev["seed"])
                elif kind == "found":
                    ev["found_after_s"] = round(time.time() - t0 - ev.get("shrink_seconds", 0), 2)
                    ev["walks_before"] = res["walks"]
                    found_by.setdefault(p, set()).add(ev["property"])
                    if bfs:  # every point's, for the per-point report (res["found"] keeps the first)
                        res["bfs_found"].append({"seed": ev["seed"], "property": ev["property"],
                                                 "depth": ev["found_at_depth"], "iterations": len(ev["steps"])})
                    prev = res["found"].get(ev["property"])
                    if prev is None or _first(ev, bfs) < _first(prev, bfs):
                        res["found"][ev["property"]] = ev
                    if say and ev.get("search") == "bfs":
                        at = f" at the point of seed {ev['seed']}" if res["points"] > 1 else ""
                        say(f"kvmc explore: {ev['property']} violated at depth {ev['found_at_depth']}{at} (breadth-first: "
                            "the shortest counterexample)")
                    elif say:
                        say(f"kvmc explore: {ev['property']} violated (walk seed {ev['seed']}, after {res['walks']} walks); shrunk to "
                            f"{len(ev['steps'])} iterations")
                elif kind == "error":
                    ev["pid"] = getattr(p, "pid", None)
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
        if w is not None:
            w.stop()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    res["seconds"] = round(time.time() - t0, 2)
    for k in ("sglang_seconds", "walk_seconds"):
        res[k] = round(res[k], 3)
    if bfs:
        res["bfs_points"].sort(key=lambda b: b["seed"])
        res["bfs_levels"].sort(key=lambda lv: (lv["seed"], lv["depth"]))
        res["walked_seeds"].sort()
        from .sched.explore import PROPS

        res["bfs_found"].sort(key=lambda f: (f["seed"], PROPS.index(f["property"])))
        res["bfs"] = bfs_total(res["bfs_points"], res["points"])
    return res


def _first(f: dict[str, Any], bfs: bool) -> tuple[int, ...]:
    """The order in which counterexamples of one property are preferred: the lowest walk seed (as
    one worker walking the seeds in order reports); breadth-first, the shortest, then the lowest seed."""
    return (len(f["steps"]), f["seed"]) if bfs else (f["seed"],)


def bfs_total(points: list[dict[str, Any]], n: int) -> dict[str, Any] | None:
    """The search's summary: the one point's (`--points 1`), else the points' summed, with
    `points` (asked), `searched` (run), the lowest complete depth and any cap or cut. None when no
    point was searched."""
    ran = [b for b in points if not b.get("skipped")]
    if not ran:
        return None
    if n == 1:
        return ran[0]
    tot: dict[str, Any] = {k: sum(b[k] for b in ran) for k in ("states", "abstract_states", "unmapped", "successors",
                                                                 "iterations", "replay_mismatches")}
    tot.update({k: round(sum(b[k] for b in ran), 3) for k in ("sglang_seconds", "seconds")})
    closed = [b["closed_at"] for b in ran]
    tot.update(seed=ran[0]["seed"], points=n, searched=len(ran), capped=any(b["capped"] for b in ran),
               timed_out=any(b["timed_out"] for b in ran) or len(ran) < n,
               complete_depth=min(b["complete_depth"] for b in ran),
               closed_at=max(closed) if None not in closed else None, params=None)
    return tot


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
    if (res.get("points") or 1) > 1:
        return points_verdict_lines(res)
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


def points_verdict_lines(res: dict[str, Any]) -> list[str]:
    """--search bfs --points N: per property violated (the shortest counterexample over the points,
    the lowest seed among equals), holds to the depth at each of the N points (on their explored
    abstract states: never `holds` for the config), or unknown (partial) where a point's search was
    cut (the state cap, the budget) or never started."""
    pts, n, b = res.get("bfs_points", []), res["points"], res.get("bfs")
    span = f"seeds {res['seeds'][0]}..{res['seeds'][1]}"
    ran = [p for p in pts if not p.get("skipped")]
    cut = [p for p in ran if p["capped"] or p["timed_out"]]
    whole = [p for p in ran if p not in cut]
    unstarted = n - len(ran)
    out = []
    for prop in res["props"]:
        f = res["found"].get(prop)
        if f is not None:
            at = sorted({x["seed"] for x in res.get("bfs_found", []) if x["property"] == prop})
            out.append(f"{prop:24s} violated: {f['evidence'][:160]} (shortest counterexample: {len(f['steps'])} iterations, "
                       f"breadth-first from the parameter point of seed {f['seed']}; violated at {len(at)} of the {n} "
                       f"points ({_seed_list(at)}); found after {f['found_after_s']} s)")
            continue
        if b is None:
            out.append(f"{prop:24s} unknown: no point's search ran ({span})")
            continue
        closed = [p for p in whole if p["closed_at"] is not None and p["closed_at"] < res["depth"]]
        closed_s = f"; {len(closed)} closed before it (no new state)" if closed else ""
        states = (f"{sum(p['states'] for p in ran)} distinct states, {sum(p['abstract_states'] for p in ran)} model "
                  f"states, {sum(p['unmapped'] for p in ran)} not mappable and never merged")
        if not cut and not unstarted:
            out.append(f"{prop:24s} holds to depth {res['depth']} at each of the {n} parameter points of {span} on their "
                       f"explored abstract states ({states}{closed_s}): a bounded search of {n} points, not a proof "
                       "for the config")
            continue
        why = []
        capped = [p["seed"] for p in cut if p["capped"]]
        timed = [p["seed"] for p in cut if not p["capped"]]
        if capped:
            why.append(f"the state cap {res['max_states']} was hit at {len(capped)} ({_seed_list(capped)})")
        if timed:
            why.append(f"the budget ran out during {len(timed)} ({_seed_list(timed)})")
        if unstarted:
            why.append(f"{unstarted} not started before the budget ran out")
        held = (f"holds to depth {res['depth']} at {len(whole)} of the {n} points" if whole else f"none of the {n} points complete")
        low = f" (those complete to depth {min(p['complete_depth'] for p in cut)})" if cut else ""
        out.append(f"{prop:24s} unknown (partial): {held}; {'; '.join(why)}{low}; no "
                   f"violation in the {states.split(',')[0]} explored ({span})")
    if b is not None and b.get("replay_mismatches"):
        out.append(f"{'search':24s} WARNING: {b['replay_mismatches']} re-runs of a state's event prefix reached another "
                   "key than when the state was found (SGLang's run is not reproducible there: the dedup is unsound)")
    return out


def _seed_list(seeds: list[int]) -> str:
    s = sorted(seeds)
    return ("seed " if len(s) == 1 else "seeds ") + (", ".join(map(str, s[:8])) + (", ..." if len(s) > 8 else ""))


def bfs_points_lines(res: dict[str, Any]) -> list[str]:
    """--points N: a line per point (its parameters, states, how its search ended)."""
    out = []
    for p in res.get("bfs_points", []):
        if p.get("skipped"):
            out.append(f"  point of seed {p['seed']}: not started (the budget ran out)")
            continue
        found = [f"{x['property']} violated at depth {x['depth']}" for x in res.get("bfs_found", []) if x["seed"] == p["seed"]]
        if p["capped"]:
            end = f"the state cap was hit at depth {p['complete_depth'] + 1}"
        elif p["timed_out"]:
            end = f"the budget ran out at depth {p['complete_depth'] + 1}"
        elif p["closed_at"] is not None:
            end = f"closed at depth {p['closed_at']} (no new state)"
        else:
            end = f"complete to depth {p['complete_depth']}"
        params = ", ".join(f"{k}={v}" for k, v in (p.get("params") or {}).items() if v not in ([], ()))
        out.append(f"  point of seed {p['seed']} ({params}): {'; '.join(found + [end])}; {p['states']} distinct states "
                   f"({p['abstract_states']} model states, {p['unmapped']} not mappable), {p['successors']} successors, "
                   f"{p['seconds']} s")
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
                 f"{res['seconds']} s ({_jobs(res)}; SGLang's import "
                 f"{max(res['import_seconds'] or [0])} s; {_rate(res)} iterations/s walking, "
                 f"{res['sglang_seconds']} s of it inside SGLang's scheduler; {_after_import(res, res['walks'])} walks/s "
                 "after the import)")
    if res.get("search") == "bfs":
        b = res.get("bfs") or {}
        n = res.get("points") or 1
        where = (f"parameter point of seed {res['seeds'][0]}"
                 + (f" ({', '.join(f'{k}={v}' for k, v in b['params'].items() if v not in ([], ()))})"
                    if b.get("params") else "") if n == 1 else
                 f"the parameter points of seeds {res['seeds'][0]}..{res['seeds'][1]} ({n} points, a search each)")
        plan_line = (f"kvmc explore --search bfs: {res['label']}"
                     + (f" with {', '.join(r.split(' ')[0] for r in res['reverted'])} reverted" if res["reverted"] else "")
                     + f", config {res['config']}" + (", with aborts" if res.get("aborts") else "")
                     + f" (model preset {res['preset']}), {where}"
                     + f", depth bound {res['depth']}, state cap {res['max_states']}{' per point' if n > 1 else ''}: "
                     f"{b.get('states', 0)} distinct states{' in all' if n > 1 else ''}, "
                     f"{res['walks']} successors re-run ({res['steps']} SGLang iterations) in {res['seconds']} s "
                     f"({_jobs(res)}; SGLang's import "
                     f"{max(res['import_seconds'] or [0])} s; "
                     + (f"{b['states'] / b['seconds']:.0f} states/s{' per worker' if n > 1 else ''}"
                        if b.get("seconds") else "- states/s")
                     + f", {_after_import(res, b.get('states', 0))} states/s after the import)")
    out = [plan_line]
    if res.get("search") == "bfs":
        out += bfs_levels_lines(res) if (res.get("points") or 1) == 1 else bfs_points_lines(res)
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


def _jobs(res: dict[str, Any]) -> str:
    n = res["jobs"]
    return f"{n} job{'s' if n > 1 else ''}" + (" on Ray" if res.get("executor") == "ray" else "")


def _after_import(res: dict[str, Any], count: int) -> str:
    """`count` per second of the run after its first worker was ready (SGLang imported)."""
    ready = res.get("ready_after_s") or []
    span = res["seconds"] - min(ready) if ready else 0.0
    return f"{count / span:.0f}" if span > 0 else "-"


def _rate(res: dict[str, Any]) -> str:
    return f"{res['steps'] / res['walk_seconds']:.0f}" if res["walk_seconds"] else "-"


def cmd_explore(args: Any) -> int:
    with contextlib.ExitStack() as trees:  # a CHECKOUT@REF tree lives as long as the explore
        try:
            plan = _plan(args, trees)
        except UpstreamUsageError as e:
            print(f"kvmc: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        return with_executor(args, lambda ex: _explore(args, plan, ex))


def with_executor(opts: Any, run: Any) -> int:
    """`run(ex)` with the run's executor (`--executor ray`: the shards as Ray tasks; a local
    instance started here is shut down after the run, also on an error or an interrupt,
    checker/executors/__init__.py::use); `opts.jobs` None: a shard per CPU of the cluster. Ray
    that cannot start or be reached: one line, exit 2."""
    from checker import executors

    try:
        with executors.use(getattr(opts, "executor", "local"), getattr(opts, "ray_address", None)) as ex:
            if opts.jobs is None:
                opts.jobs = ex.capacity() if ex is not None else 1
            return run(ex)
    except executors.ExecutorError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _explore(args: Any, plan: dict[str, Any], ex: Any = None) -> int:
    res = explore(plan, args, say=None if args.json else (lambda m: print(m, file=sys.stderr, flush=True)), ex=ex)
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
