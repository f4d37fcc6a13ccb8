"""`kvmc review`: what a design change does to every property.

A reviewer names two sides, base and head. Each side is a release preset plus fix flags
(`--base-without/--base-with`, `--head-without/--head-with`; plain `--without/--with` apply to the
head), planted bugs (`--mutant` on both sides, `--base-mutant/--head-mutant`), a Python file that
overrides one transition (`--base-patch/--head-patch`, see `load_patch`), or a git revision of the
model itself (`--base-rev/--head-rev`: `model/` and `specs/` of that revision are extracted with
`git archive` into a temporary directory and checked there in a subprocess, with this checkout's
`checker/`). Every property is checked on both sides and compared:

    fixed          violated on base, not on head
    newly broken   not violated on base, violated on head (with its counterexample)
    still broken   violated on both
    inconclusive   the head (or the base) has an unknown verdict: nothing is claimed
    unchanged      neither side violated; the proof column says whether a proof was kept,
                   lost or gained

Checks run as (side, config) jobs in parallel processes (`--jobs N`, default: the CPU count);
each job runs the chosen engine on all selected properties of one config and writes its own
counterexamples (`<out>/<side>/<design>/<config>/<property>.itf.json`, default out kvmc-out/review),
so nothing but plain data crosses a process boundary. Progress on stderr: jobs done / running /
queued, the ones running and for how long, an estimate of the time left (`--progress json`: JSON
lines). Output: `--format text|json|markdown` (markdown is ready to paste into a pull-request
comment) and `--junit FILE` (one test case per property; newly broken = failure); both paths are
checked before any work.

Exit status: 0 nothing newly broken, 1 some property newly broken, 2 bad usage or input (a patch
that fails to load or raises while it runs: one `FILE:LINE: ...` line), 3 inconclusive (an
unknown verdict on the head, and nothing newly broken), 4 internal error, 130/143 interrupted
(the jobs finished so far are printed; the running ones are stopped, no process is left).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import model.system  # noqa: F401  (registers every transition)
from model.designs import PRESETS, Design
from model.patch import PatchError, load_patch  # plain-Python patch files, both interpretations

from checker import interrupt
from checker.verdict import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_VIOLATION


# -- sides ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    """One side of a review, as plain data (it crosses process boundaries)."""

    label: str  # "base" or "head"
    preset: str
    without: tuple[str, ...] = ()
    with_: tuple[str, ...] = ()
    mutants: tuple[str, ...] = ()
    patches: tuple[str, ...] = ()  # absolute paths of transition-override files
    rev: str | None = None  # git revision of model/ and specs/

    def design(self) -> Design:
        from checker.cli.common import build_design

        d = build_design(self.preset, list(self.without), list(self.with_), list(self.mutants))
        if self.patches:
            overrides = dict(d.overrides)
            for f in self.patches:
                name, fn = load_patch(f)
                if name in overrides:
                    raise PatchError(f"{f}:1: transition {name!r} is already overridden by another --{self.label}-patch file")
                overrides[name] = fn
            label = d.name + "".join(f"+{Path(f).stem}" for f in self.patches)
            d = Design(label, d.fixes, d.mutants, overrides)
        return d

    def key(self) -> tuple[Any, ...]:
        digest = tuple(hashlib.sha1(Path(f).read_bytes()).hexdigest() for f in self.patches)
        return (self.preset, self.without, self.with_, self.mutants, digest, self.rev)


@dataclass(frozen=True)
class Job:
    side: Side
    config: str
    props: tuple[str, ...]
    depth: int
    engine: str
    prove: bool
    timeout_ms: int
    out: str
    minimize: bool = True
    no_replay: str = ""  # why its counterexamples are not replayed on the pool (empty: they are)
    # lemmas the proofs may not assume (`--without-lemma`); resolved against the side's own
    # specs/lemmas.py, so a lemma a git revision lacks is simply not there to leave out
    without_lemmas: tuple[str, ...] = ()
    examples: int | None = None  # the random engine's runs per property (`--examples`; None: its default)


def run_job(job: Job) -> dict[str, Any]:
    """Check one (side, config) and return plain data; counterexamples are written here."""
    from checker.traces import itf
    from checker.traces.explain import explain
    from checker.replay.pool import confirm_note
    from checker.engines.run import engine_check_config
    from checker.traces.trace import step_table
    from specs.configs import CONFIGS
    from specs.lemmas import LEMMAS

    from checker.cli.common import publish

    design = job.side.design()
    cfg = CONFIGS[job.config]
    # LEMMAS, not a helper: a `--base-rev` side imports an older specs/lemmas.py that has only LEMMAS
    extra = {"lemmas": [n for n in LEMMAS if n not in job.without_lemmas]} if job.without_lemmas else {}
    if job.examples is not None:
        extra["examples"] = job.examples
    # a reviewer's patch that raises while the model runs raises model/patch.py's PatchError
    # (`FILE:LINE: ...`), which crosses the process boundary and is reported as bad input (exit 2)
    # a property this side's specs/ lacks (a `--base-rev` older than the property) is not asked: it
    # shows as "only on head" (`change`), not as a crash of the older side
    from specs.properties import PROPERTIES as side_props
    from specs.liveness import LIVENESS as side_liveness

    props = [p for p in job.props if p in side_props or p in side_liveness]
    check = engine_check_config(job.engine, props)
    rep = check(design, cfg, props, job.depth, job.prove, job.timeout_ms, None, job.minimize, True, **extra)
    out: dict[str, Any] = {"side": job.side.label, "design": design.name, "config": job.config,
                           "seconds": round(rep.seconds, 2), "results": {}}
    sysm = model.system.System(cfg, design)
    for name, r in rep.results.items():
        d: dict[str, Any] = {"verdict": r.verdict.value, "depth": r.depth, "words": r.words(),
                             "witness_depth": r.witness_depth, "reason": r.reason or None}
        if r.trace is not None and r.verdict.value == "violated":
            line = explain(sysm, name, r.trace.params, r.trace.states[-1])
            path = Path(job.out) / job.side.label / design.name / job.config / f"{name}.itf.json"
            # replayed on the torch pool before it is reported, as `kvmc check` does (principle 3)
            note = f"not replayed: {job.no_replay}" if job.no_replay else confirm_note(r.trace)
            itf.write(path, r.trace, {"verdict": "violated", "violation": line, "expected": "violation",
                                      "review_side": job.side.label, "pool_replay": note})
            publish(path)
            d["counterexample"] = str(path)
            d["pool_replay"] = note
            d["violation"] = line
            d["step_table"] = step_table(r.trace, line)
        cti = r.meta.get("cti")
        if cti is not None:
            from checker.engines.induction import cti_path

            path = cti_path(Path(job.out) / job.side.label, design, name, job.config)
            itf.write(path, cti, {"verdict": "counterexample to induction", "property": name})
            publish(path)
            d["cti"] = str(path)
        if "bmc_depth" in r.meta:
            d["bmc_depth"] = r.meta["bmc_depth"]
        out["results"][name] = d
    return out


def _in_pool_worker() -> None:
    from checker.engines import induction
    from checker.engines import run

    run.BACKGROUND_PROOF = False  # the pool's other workers already use the cores
    induction.CASE_WORKERS = 1


def job_label(j: Job) -> str:
    return f"{j.side.label or j.side.preset}:{j.config}"


def _summary(res: dict[str, Any]) -> str:
    """A finished job in a few words: its violations, else how many properties hold / are proved."""
    bad = [p for p, d in res["results"].items() if d["verdict"] == "violated"]
    if bad:
        return "violated " + ", ".join(bad)
    counts: dict[str, int] = {}
    for d in res["results"].values():
        counts[d["verdict"]] = counts.get(d["verdict"], 0) + 1
    return ", ".join(f"{v} {k}" for k, v in counts.items())


def _pool_run(jobs: list[Job], n: int, progress: Any = None) -> list[dict[str, Any]]:
    """The jobs' results in order, `n` processes at a time (in this process when n = 1). On an
    interrupt the jobs finished so far ride on the `Interrupted` (`.done`); no worker is left."""
    done: dict[int, dict[str, Any]] = {}

    def finished(i: int, res: dict[str, Any]) -> None:
        done[i] = res
        if progress is not None:
            progress.finished(job_label(jobs[i]), _summary(res))

    try:
        if _ray() is not None and jobs:  # `--executor ray`: every job is a task on the cluster
            _ray_parallel(jobs, progress, finished)
        elif n <= 1 or len(jobs) <= 1:
            for i, j in enumerate(jobs):
                if progress is not None:
                    progress.started(job_label(j))
                finished(i, run_job(j))
        else:
            _pool_parallel(jobs, n, progress, finished)
    except BaseException as e:
        if not interrupt.requested():
            raise
        stop = interrupt.stopped(e)
        stop.done = [done[i] for i in sorted(done)]
        raise stop from None
    return [done[i] for i in range(len(jobs))]


def _dispatch(jobs: list[Job], cap: int, flying: dict[Any, int], submit: Any, ready: Any, collect: Any,
              progress: Any, finished: Any) -> None:
    """At most `cap` jobs in flight, in order (so `running` is exact): `submit(job)` gives a handle,
    `ready(handles)` the handles that have finished, `collect(i, handle)` job i's result, handed to
    `finished`. `flying` (handle -> job index) is the caller's, to stop what is left on an error."""
    waiting = list(range(len(jobs)))
    while waiting or flying:
        while waiting and len(flying) < cap:
            i = waiting.pop(0)
            flying[submit(jobs[i])] = i
            if progress is not None:
                progress.started(job_label(jobs[i]))
        for h in ready(list(flying)):
            i = flying.pop(h)
            finished(i, collect(i, h))


def _pool_parallel(jobs: list[Job], n: int, progress: Any, finished: Any) -> None:
    """At most `n` jobs in flight in a process pool (so `running` is exact); a failed job or an
    interrupt stops the workers at once instead of waiting for the others in `shutdown`."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    ex = ProcessPoolExecutor(max_workers=min(n, len(jobs)), mp_context=ctx, initializer=_in_pool_worker)
    try:
        _dispatch(jobs, n, {}, lambda j: ex.submit(run_job, j), lambda fs: wait(fs, return_when=FIRST_COMPLETED)[0],
                  lambda i, f: f.result(), progress, finished)
    except BaseException:
        for p in list(getattr(ex, "_processes", {}).values()):  # stop the others now, not after their jobs
            with contextlib.suppress(Exception):
                p.terminate()
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def _ray() -> Any:
    """The run's Ray executor (`--executor ray`, checker/executors/) when this process is its driver."""
    from checker import executors

    ex = executors.ACTIVE
    return ex if ex is not None and ex.pid == os.getpid() else None


def run_job_on_worker(job: Job) -> dict[str, Any]:
    """A Ray task: one job, in a worker process whose siblings use the other CPUs (as a pool
    worker: no background proof, one case process). The job is plain data; its counterexamples
    are written by the worker under `job.out` (on a cluster: a directory every node shares)."""
    _in_pool_worker()
    interrupt.quiet_z3()
    return run_job(job)


def _ray_parallel(jobs: list[Job], progress: Any, finished: Any) -> None:
    """The jobs as Ray tasks, at most the cluster's CPUs in flight (so `running` is exact). A job
    whose worker kept dying (Ray re-runs it RETRIES times) is a failure of the run, named in one
    line; a job's own exception (a patch that raises: PatchError) is raised here as in a pool."""
    from checker.executors.ray_cluster import RETRIES

    ex = _ray()

    def collect(i: int, ref: Any) -> dict[str, Any]:
        status, res = ex.result(ref)
        if status == "died":
            raise RuntimeError(f"job {job_label(jobs[i])} killed its Ray worker each of the {RETRIES + 1} times "
                               f"it was run ({res}); nothing of it is reported")
        return res

    flying: dict[Any, int] = {}
    try:
        _dispatch(jobs, ex.capacity(), flying, lambda j: ex.submit(run_job_on_worker, j), ex.wait, collect, progress,
                  finished)
    finally:
        ex.cancel(list(flying))


_MEMO: dict[tuple[Any, ...], dict[str, Any]] = {}


def run_jobs(jobs: list[Job], n: int, progress: Any = None) -> list[dict[str, Any]]:
    """Run (side, config) jobs, `n` at a time; a job already run in this process (same side, config,
    properties, depth, engine) is not run again (a reversed review reuses both sides). `progress`:
    a checker.cli.common.JobsProgress, told when each job starts and ends."""
    def key(j: Job) -> tuple[Any, ...]:
        return (j.side.key(), j.config, j.props, j.depth, j.engine, j.prove, j.timeout_ms, j.minimize, j.without_lemmas,
                j.examples)

    todo = [j for j in jobs if key(j) not in _MEMO]
    if progress is not None:  # the tracker counts every job: a reused one is done at once
        for j in {key(j): j for j in jobs if key(j) in _MEMO}.values():
            progress.finished(job_label(j), _summary(_MEMO[key(j)]) + " (already checked in this process)")
    try:
        ran = _pool_run(todo, n, progress)
    except interrupt.Interrupted as e:  # report the finished ones with their sides, as below
        e.done = [dict(res, side=j.side.label) for j, res in zip(todo, e.done or [])]
        raise
    for j, res in zip(todo, ran):
        _MEMO[key(j)] = res
    out = []
    for j in jobs:
        res = dict(_MEMO[key(j)])
        res["side"] = j.side.label
        out.append(res)
    return out


# -- a side at a git revision ------------------------------------------------------------------------
def _repo_root() -> Path:
    return Path(model.system.__file__).resolve().parent.parent


def check_rev(rev: str) -> None:
    """A revision that is no commit of this repository is a usage error (PatchError)."""
    root = _repo_root()
    ok = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                        capture_output=True, text=True)
    if ok.returncode != 0:
        raise PatchError(f"git revision {rev!r} is not a commit of {root}")


def extract_rev(rev: str, dest: Path) -> None:
    """`git archive REV model specs` into dest; a bad revision is a usage error."""
    root = _repo_root()
    check_rev(rev)
    arch = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", rev, "model", "specs"], capture_output=True)
    if arch.returncode != 0:
        raise PatchError(f"git archive {rev} model specs failed: {arch.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)


def run_rev_side(side: Side, jobs: list[Job], n: int) -> list[dict[str, Any]]:
    """Run a side's jobs in a subprocess whose `model`/`specs` come from `side.rev`."""
    assert side.rev is not None
    with tempfile.TemporaryDirectory(prefix=f"kvmc-review-{side.label}-") as tmp:
        extract_rev(side.rev, Path(tmp))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([tmp, str(_repo_root())] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        payload = json.dumps({"jobs": [_job_dict(j) for j in jobs], "n": n})
        proc = subprocess.run([sys.executable, "-m", "checker.cli.review", "--run-jobs"], input=payload, text=True,
                              capture_output=True, cwd=tmp, env=env)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise PatchError(f"checking git revision {side.rev} ({side.label}) failed: {tail}")
        data = json.loads(proc.stdout)
        return list(data)


def _job_dict(j: Job) -> dict[str, Any]:
    s = j.side
    return {"side": {"label": s.label, "preset": s.preset, "without": list(s.without), "with_": list(s.with_),
                     "mutants": list(s.mutants), "patches": list(s.patches), "rev": None},
            "config": j.config, "props": list(j.props), "depth": j.depth, "engine": j.engine, "prove": j.prove,
            "timeout_ms": j.timeout_ms, "out": j.out, "minimize": j.minimize, "without_lemmas": list(j.without_lemmas),
            "no_replay": j.no_replay or (f"the model is git revision {s.rev}'s, the pool implements the working tree's"
                                         if s.rev else "")}


def _job_from(d: dict[str, Any]) -> Job:
    sd = d["side"]
    side = Side(sd["label"], sd["preset"], tuple(sd["without"]), tuple(sd["with_"]), tuple(sd["mutants"]),
                tuple(sd["patches"]), None)
    return Job(side, d["config"], tuple(d["props"]), d["depth"], d["engine"], d["prove"], d["timeout_ms"], d["out"],
               d["minimize"], d.get("no_replay", ""), tuple(d.get("without_lemmas", ())))


def _subprocess_main() -> int:
    """`python -m checker.cli.review --run-jobs`: JSON jobs on stdin, JSON results on stdout. A
    terminal's Ctrl-C reaches this process too: the parent decides, and ends it (and its pool)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interrupt.quiet_z3()
    data = json.loads(sys.stdin.read())
    res = _pool_run([_job_from(d) for d in data["jobs"]], int(data["n"]))
    print(json.dumps(res))
    return 0


# -- comparing -----------------------------------------------------------------------------------------
_RANK = {"violated": 4, "unknown": 3, "holds to depth": 2, "vacuous": 1, "proved": 0}


@dataclass
class Summary:
    """One property on one side, over the configs checked."""

    verdict: str  # worst verdict over the configs (a config where it is vacuous does not count if another exercises it)
    words: str
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def violated(self) -> bool:
        return self.verdict == "violated"

    @property
    def proved(self) -> bool:
        return self.verdict == "proved"

    def counterexample(self) -> dict[str, Any] | None:
        for c, d in self.configs.items():
            if d.get("counterexample"):
                return {"config": c, **d}
        return None


def summarize(results: list[dict[str, Any]], prop: str) -> Summary | None:
    per = {r["config"]: r["results"][prop] for r in results if prop in r["results"]}
    if not per:
        return None
    exercised = {c: d for c, d in per.items() if d["verdict"] != "vacuous"} or per
    worst = max(exercised.values(), key=lambda d: _RANK.get(d["verdict"], 3))
    v = worst["verdict"]
    same = [c for c, d in exercised.items() if d["verdict"] == v]
    if v == "violated":
        d = min((d for d in exercised.values() if d["verdict"] == "violated"), key=lambda d: d["depth"])
        c = next(c for c, e in exercised.items() if e is d)
        words = f"violated at depth {d['depth']} ({c})"
    elif v == "proved":
        words = f"proved (k={max(d['depth'] for d in exercised.values())})"
    elif v == "holds to depth":
        words = f"holds to depth {min(d['depth'] for d in exercised.values() if d['verdict'] == v)}"
        n_proved = sum(d["verdict"] == "proved" for d in exercised.values())
        if n_proved:
            words += f" (proved on {n_proved}/{len(exercised)} configs)"
    elif v == "unknown":
        words = f"unknown ({', '.join(same)}: {worst.get('reason') or 'solver gave up'})"
    else:
        words = f"vacuous to depth {worst['depth']}"
    return Summary(v, words, per)


def change(base: Summary | None, head: Summary | None) -> tuple[str, str]:
    """(change, proof status)."""
    if base is None and head is None:  # it applies to none of the configs reviewed (checker/engines/applies.py)
        return "not checked", ""
    if base is None or head is None:
        return ("only on head" if base is None else "only on base"), ""
    if base.violated and head.violated:
        ch = "still broken"
    elif head.violated:
        ch = "newly broken"
    elif base.violated:
        ch = "fixed" if head.verdict != "unknown" else "inconclusive"
    elif "unknown" in (base.verdict, head.verdict):
        ch = "inconclusive"
    else:
        ch = "unchanged"
    if base.proved and head.proved:
        pr = "proved on both"
    elif base.proved:
        pr = "proof lost"
    elif head.proved:
        pr = "newly proved"
    elif head.violated or base.violated:
        pr = "-"
    else:
        pr = "bounded only"
    return ch, pr


@dataclass
class ReviewReport:
    base: str
    head: str
    props: list[str]
    configs: list[str]
    depth: int
    engine: str
    rows: list[dict[str, Any]]
    seconds: float

    def exit_code(self) -> int:
        if any(r["change"] == "newly broken" for r in self.rows):
            return EXIT_VIOLATION
        if any(r["head"] and r["head"].verdict == "unknown" for r in self.rows):
            return EXIT_INCONCLUSIVE
        return EXIT_OK

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base, "head": self.head, "depth": self.depth, "engine": self.engine, "configs": self.configs,
            "seconds": round(self.seconds, 2),
            "properties": [
                {"property": r["property"], "change": r["change"], "proof": r["proof"],
                 "base": _side_json(r["base"]), "head": _side_json(r["head"])}
                for r in self.rows
            ],
        }


def _side_json(s: Summary | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {"verdict": s.verdict, "words": s.words,
            "configs": {c: {k: v for k, v in d.items() if k != "step_table"} for c, d in s.configs.items()}}


def compare(base_res: list[dict[str, Any]], head_res: list[dict[str, Any]], props: list[str]) -> list[dict[str, Any]]:
    rows = []
    for p in props:
        b, h = summarize(base_res, p), summarize(head_res, p)
        ch, pr = change(b, h)
        rows.append({"property": p, "base": b, "head": h, "change": ch, "proof": pr})
    return rows


# -- rendering ----------------------------------------------------------------------------------------
def render_text(rep: ReviewReport) -> str:
    out = [f"kvmc review  base: {rep.base}  ->  head: {rep.head}",
           f"engine {rep.engine}, depth {rep.depth}, configs: {', '.join(rep.configs)}  [{rep.seconds:.1f}s]", ""]
    rows = [("property", "base", "head", "change", "proof")]
    for r in rep.rows:
        rows.append((r["property"], r["base"].words if r["base"] else "-", r["head"].words if r["head"] else "-",
                     r["change"].upper() if r["change"] in ("newly broken", "fixed") else r["change"], r["proof"]))
    w = [max(len(row[i]) for row in rows) for i in range(5)]
    for row in rows:
        out.append("  ".join(c.ljust(w[i]) for i, c in enumerate(row)).rstrip())
    for r in rep.rows:
        if r["change"] == "newly broken":
            cx = r["head"].counterexample()
            if cx:
                out += ["", f"{r['property']} newly broken on {cx['config']}: {cx['counterexample']}",
                        f"  pool replay: {cx.get('pool_replay', 'not replayed')}",
                        "  " + cx["step_table"].replace("\n", "\n  ")]
        elif r["change"] == "fixed":
            cx = r["base"].counterexample()
            if cx:
                out += ["", f"{r['property']} fixed (base counterexample on {cx['config']}: {cx['counterexample']})"]
    return "\n".join(out)


def render_markdown(rep: ReviewReport) -> str:
    icon = {"newly broken": ":x: **newly broken**", "fixed": ":white_check_mark: **fixed**",
            "still broken": ":warning: still broken", "inconclusive": ":grey_question: inconclusive"}
    out = [f"### kvmc review: `{rep.base}` → `{rep.head}`", "",
           f"engine `{rep.engine}`, depth {rep.depth}, configs: {', '.join(f'`{c}`' for c in rep.configs)}", "",
           "| property | base | head | change | proof |", "|---|---|---|---|---|"]
    for r in rep.rows:
        out.append(f"| `{r['property']}` | {r['base'].words if r['base'] else '-'} | {r['head'].words if r['head'] else '-'} "
                   f"| {icon.get(r['change'], r['change'])} | {r['proof']} |")
    for r in rep.rows:
        if r["change"] == "newly broken":
            cx = r["head"].counterexample()
            if cx:
                out += ["", f"<details><summary><code>{r['property']}</code> counterexample on <code>{cx['config']}</code> "
                        f"(<code>{cx['counterexample']}</code>)</summary>", "",
                        f"pool replay: {cx.get('pool_replay', 'not replayed')}", "", "```", cx["step_table"], "```",
                        "</details>"]
    out += ["", "_\"proved\" is about the kvmc model of SGLang's scheduler, not about SGLang itself._"]
    return "\n".join(out)


def render_junit(rep: ReviewReport) -> str:
    cases = []
    failures = skipped = 0
    for r in rep.rows:
        name = quoteattr(r["property"])
        body = ""
        if r["change"] == "newly broken":
            failures += 1
            cx = r["head"].counterexample() or {}
            msg = quoteattr(f"newly broken: {r['head'].words}; counterexample {cx.get('counterexample', '')}")
            body = f"<failure message={msg} type=\"newly broken\">{escape(cx.get('step_table', ''))}</failure>"
        elif r["change"] == "inconclusive":
            skipped += 1
            body = f"<skipped message={quoteattr('inconclusive: ' + (r['head'].words if r['head'] else '-'))}/>"
        out = escape(f"base: {r['base'].words if r['base'] else '-'}\nhead: {r['head'].words if r['head'] else '-'}\n"
                     f"change: {r['change']}\nproof: {r['proof']}")
        cases.append(f"  <testcase classname=\"kvmc.review\" name={name}>{body}<system-out>{out}</system-out></testcase>")
    head = (f"<testsuite name={quoteattr(f'kvmc review {rep.base} -> {rep.head}')} tests=\"{len(rep.rows)}\" "
            f"failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{rep.seconds:.2f}\">")
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + head + "\n" + "\n".join(cases) + "\n</testsuite>\n"


# -- the command -------------------------------------------------------------------------------------
def review(base: Side, head: Side, props: list[str], configs: list[str], depth: int, engine: str = "bmc",
           prove: bool = True, timeout_ms: int = 0, out: str = "kvmc-out/review", jobs: int | None = None,
           minimize: bool = True, without_lemmas: tuple[str, ...] = (), progress: Any = None) -> ReviewReport:
    """Both sides' jobs and the comparison. `progress`: a checker.cli.common.Lines (jobs progress
    on stderr); an interrupt raises `Interrupted` with the finished jobs in `.done`."""
    import time

    t0 = time.perf_counter()
    ray = _ray()  # `--executor ray`: as many jobs at once as the cluster has CPUs
    n = ray.capacity() if ray is not None else jobs or os.cpu_count() or 1
    # validate what can be validated here, before any process starts
    names = {}
    for s in (base, head):
        if s.rev is None:
            names[s.label] = s.design().name
        else:
            names[s.label] = f"{s.design().name}@{s.rev}"
    mk = lambda s: [Job(s, c, tuple(props), depth, engine, prove, timeout_ms, out, minimize,  # noqa: E731
                        without_lemmas=without_lemmas) for c in configs]
    res: dict[str, list[dict[str, Any]]] = {}
    local = [s for s in (base, head) if s.rev is None]
    tracker = None
    if progress is not None and progress.enabled:
        from checker.cli.common import JobsProgress

        tracker = JobsProgress(progress, len(configs) * 2, n, "checks")
        if ray is not None:
            tracker.alive = ray.alive
    beat: Any = contextlib.nullcontext()
    if tracker is not None:
        from checker.cli.common import Heartbeat, beat_every

        beat = Heartbeat(lambda: tracker.report(live=progress.tty), beat_every(progress))
    try:
        with beat:
            if local:
                alljobs = [j for s in local for j in mk(s)]
                done = run_jobs(alljobs, n, tracker)
                for s in local:
                    res[s.label] = [d for d in done if d["side"] == s.label]
            for s in (base, head):
                if s.rev is not None:
                    if tracker is not None:
                        for j in mk(s):
                            tracker.started(job_label(j))
                    res[s.label] = run_rev_side(s, mk(s), n)
                    if tracker is not None:
                        for j, r in zip(mk(s), res[s.label]):
                            tracker.finished(job_label(j), _summary(r))
    except interrupt.Interrupted as e:
        e.done = [d for side in res.values() for d in side] + list(e.done or [])
        raise
    rows = compare(res["base"], res["head"], props)
    return ReviewReport(names["base"], names["head"], props, configs, depth, engine, rows, time.perf_counter() - t0)


def render_jobs(results: list[dict[str, Any]], header: str) -> str:
    """(side or design, config) job results, one line a property (`check --jobs`, an interrupted review)."""
    out = [header]
    design = None
    for res in results:
        label = f"{res['side']}: {res['design']}" if res.get("side") else res["design"]
        if label != design:
            design = label
            out.append(f"design {label}")
        out.append(f"  config {res['config']}  [{res['seconds']:.1f}s]")
        for p, d in res["results"].items():
            line = f"    {p:20s} {d['words']}"
            if d.get("counterexample"):
                line += f"  counterexample: {d['counterexample']} (pool: {d.get('pool_replay', 'not replayed')})"
            elif d.get("cti"):
                line += f"  counterexample to induction: {d['cti']}"
            elif d["verdict"] == "unknown" and d.get("reason"):
                line += f" ({d['reason']})"
            out.append(line)
    return "\n".join(out)


def cmd_review(args: Any) -> int:
    """Entry point from checker/cli/app.py (`kvmc review`)."""
    from checker.cli.common import (Lines, UsageError, keep_hypothesis_in, lemma_selection, refuse_corpus, timeout_ms,
                                    say_interrupted, validate_selection, warn, writable_dir, writable_file)

    if args.sglang_base is not None or args.sglang_head is not None:
        return _sglang_review(args)
    for opt in ("seed", "walks", "budget"):
        if getattr(args, opt) is not None:
            raise UsageError(f"--{opt} applies to `kvmc review --sglang-base/--sglang-head` (SGLang's own code) only")
    if args.depth is None:
        args.depth = 8
    props, configs = validate_selection(args)
    lemma_selection(args)  # validates --without-lemma's names and engine
    refuse_corpus(args.out)
    writable_dir(args.out, "--out")  # before any work: an unwritable path fails in milliseconds
    keep_hypothesis_in(args.out)
    if args.junit:
        writable_file(args.junit, "--junit")
    for f in args.base_patch + args.head_patch:
        if not f.endswith(".py"):
            raise UsageError(f"transition-override file {f!r} must be a Python file (.py)")
    base = Side("base", args.base, tuple(args.base_without), tuple(args.base_with), tuple(args.mutant + args.base_mutant),
                tuple(str(Path(f).resolve()) for f in args.base_patch), args.base_rev)
    head_preset = args.head or args.base
    head = Side("head", head_preset, tuple(args.head_without + args.without), tuple(args.head_with + args.with_),
                tuple(args.mutant + args.head_mutant), tuple(str(Path(f).resolve()) for f in args.head_patch),
                args.head_rev)
    # a patch file is reported with the name the user typed
    for side, given in ((base, args.base_patch), (head, args.head_patch)):
        for f in given:
            try:
                load_patch(f)
            except PatchError as e:
                raise UsageError(str(e)) from None
    for s in (base, head):  # presets, fixes, mutants and revisions: bad input before any work
        try:
            s.design()
            if s.rev is not None:
                check_rev(s.rev)
        except PatchError as e:
            raise UsageError(str(e)) from None
    if not args.config and args.depth >= 6 and args.progress != "none":
        warn(f"kvmc review checks every config ({len(configs)}) on both sides to depth {args.depth}; this takes tens of "
             "minutes (--config NAME and --depth N narrow it; progress follows on stderr, Ctrl-C stops it with the "
             "checks finished so far)")
    from checker.cli.executor import check_executor, executor_for

    check_executor(args, jobs=True)
    interrupt.quiet_z3()
    lines = Lines(args.progress)
    try:
        with executor_for(args):  # `--executor ray`: the (side, config) jobs are tasks on the cluster
            rep = review(base, head, props, configs, args.depth, args.engine, not args.no_prove,
                         timeout_ms(args.timeout), args.out, args.jobs, not args.no_minimize,
                         tuple(args.without_lemma), progress=lines)
    except PatchError as e:
        raise UsageError(str(e)) from None
    except interrupt.Interrupted as e:
        lines.end()
        done = e.done or []
        print(render_jobs(done, f"kvmc review interrupted by {e.name}: {len(done)} of {2 * len(configs)} "
                                f"(side, config) checks finished (no comparison is made from a part)"))
        say_interrupted(f"kvmc: interrupted by {e.name}: {len(done)} of {2 * len(configs)} checks finished")
        return e.exit_code
    lines.end()
    if args.format == "json":
        print(json.dumps(rep.to_json(), indent=1))
    elif args.format == "markdown":
        print(render_markdown(rep))
    else:
        print(render_text(rep))
    if args.junit:
        from checker.cli.common import publish

        path = Path(args.junit)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            fh.write(render_junit(rep))
        publish(tmp)  # mkstemp makes it 0600
        os.replace(tmp, path)
    return rep.exit_code()


# the model review's own options, with their defaults: none of them means anything for SGLang's code
_MODEL_ONLY = {"base": "current", "head": None, "without": [], "with_": [], "base_without": [], "base_with": [],
               "head_without": [], "head_with": [], "mutant": [], "base_mutant": [], "head_mutant": [],
               "base_patch": [], "head_patch": [], "base_rev": None, "head_rev": None, "engine": "bmc",
               "no_prove": False, "no_minimize": False, "timeout": None, "without_lemma": [], "junit": None}


def _sglang_review(args: Any) -> int:
    """`--sglang-base/--sglang-head`: SGLang's own code on both sides (upstream/review.py)."""
    from checker.cli.common import UsageError

    given = [k for k, v in _MODEL_ONLY.items() if getattr(args, k, v) != v]
    if given:
        opt = "--" + given[0].rstrip("_").replace("_", "-")
        raise UsageError(f"{opt} belongs to the model review (designs, patches, revisions); with --sglang-base/--sglang-head "
                         "both sides are SGLang's own code")
    from upstream.review import cmd_sglang_review

    return cmd_sglang_review(args)


def add_parser(sub: Any) -> Any:
    """`kvmc review` options (called by checker/cli/app.py::parser)."""
    from checker.cli.common import add_progress_options, timeout_seconds

    pr = sub.add_parser("review", help="compare every property between two designs (or two model revisions)")
    pr.add_argument("--base", default="current", help=f"base preset: {', '.join(PRESETS)} (default current)")
    pr.add_argument("--head", default=None, help="head preset (default: the base preset)")
    pr.add_argument("--without", action="append", default=[], metavar="FIX", help="turn a fix off on the head")
    pr.add_argument("--with", dest="with_", action="append", default=[], metavar="FIX[=VARIANT]", help="turn a fix on on the head")
    pr.add_argument("--base-without", action="append", default=[], metavar="FIX")
    pr.add_argument("--base-with", action="append", default=[], metavar="FIX[=VARIANT]")
    pr.add_argument("--head-without", action="append", default=[], metavar="FIX")
    pr.add_argument("--head-with", action="append", default=[], metavar="FIX[=VARIANT]")
    pr.add_argument("--mutant", action="append", default=[], metavar="NAME", help="plant a bug on both sides")
    pr.add_argument("--base-mutant", action="append", default=[], metavar="NAME")
    pr.add_argument("--head-mutant", action="append", default=[], metavar="NAME")
    pr.add_argument("--base-patch", action="append", default=[], metavar="FILE.py",
                    help="override one transition on the base (module with REPLACES and replacement)")
    pr.add_argument("--head-patch", action="append", default=[], metavar="FILE.py",
                    help="override one transition on the head (module with REPLACES and replacement)")
    pr.add_argument("--base-rev", default=None, metavar="REV", help="git revision of model/ and specs/ for the base")
    pr.add_argument("--head-rev", default=None, metavar="REV", help="git revision of model/ and specs/ for the head")
    pr.add_argument("--property", action="append", default=[], metavar="NAME", help="default: all")
    pr.add_argument("--config", action="append", default=[], metavar="NAME",
                    help="default: all (with --sglang-base/--sglang-head: hybrid_swa)")
    sg = pr.add_argument_group("review of SGLang's own code (upstream/review.py): both sides explored as `kvmc explore` does")
    sg.add_argument("--sglang-base", default=None, metavar="REF_OR_DIR",
                    help="==VERSION (an installed release), an SGLang source tree (root with python/sglang/, or a folder with "
                         "sglang/), or CHECKOUT@REF / @REF (a commit of a git checkout, written to a temporary folder)")
    sg.add_argument("--sglang-head", default=None, metavar="REF_OR_DIR", help="the changed SGLang, as --sglang-base")
    sg.add_argument("--seed", type=int, default=None, help="first walk seed, the same on both sides (default 0)")
    sg.add_argument("--walks", type=int, default=None, help="walks per side and config (default 200)")
    sg.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="per side and config, SGLang's import included (default 120)")
    pr.add_argument("--depth", type=int, default=None,
                    help="scheduler iterations to check (default 8; with --sglang-base/--sglang-head: per walk, default 16)")
    pr.add_argument("--engine", default="bmc",
                    help="bmc (default: the shortest counterexample over symbolic sizes), induction, explicit, random, swarm or portfolio")
    pr.add_argument("--no-prove", action="store_true", help="bounded checking only")
    pr.add_argument("--no-minimize", action="store_true")
    pr.add_argument("--timeout", type=timeout_seconds, default=None, metavar="SECONDS",
                    help="per solver query (then: unknown); at least 0.01")
    pr.add_argument("--without-lemma", action="append", default=[], metavar="LEMMA",
                    help="do not assume this lemma in either side's proofs (try a smaller inductive set)")
    pr.add_argument("--jobs", type=int, default=None,
                    help="parallel processes (default: the CPU count; with --sglang-base/--sglang-head: explore workers, default 1)")
    from checker.cli.executor import add_executor_options

    add_executor_options(pr)
    pr.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    pr.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report")
    pr.add_argument("--out", default="kvmc-out/review", metavar="DIR",
                    help="run directory: <DIR>/<side>/<design>/<config>/<property>.itf.json (default kvmc-out/review/)")
    add_progress_options(pr)
    pr.set_defaults(fn=cmd_review)
    return pr


if __name__ == "__main__":
    if sys.argv[1:] == ["--run-jobs"]:
        sys.exit(_subprocess_main())
    print("usage: kvmc review ... (this module is run by the CLI)", file=sys.stderr)
    sys.exit(2)
