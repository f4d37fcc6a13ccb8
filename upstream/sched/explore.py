"""`kvmc explore`'s worker: seeded random walks of environment events on SGLang's own scheduler,
kvmc's properties as the oracle after every iteration, shrinking of a failing walk (worker side:
imported only in the subprocess whose PYTHONPATH selects one release; the parent is
upstream/explore.py).

`python -m upstream.sched.explore` reads one JSON job on stdin: {"version" (the release, or the
release a source tree maps to: its revert texts), "source" (a source tree's folder, or null), "config", "preset",
"seeds": [...], "depth", "props": [...], "deadline" (epoch seconds), "shrink", "progress_bound",
"compare_model" (upstream/sched/compare.py: the model's step beside each iteration), "aborts",
and for `--search bfs` "search": "bfs", "max_states", "bfs_jobs": upstream/sched/bfs.py on each
seed's parameter point in turn (a point each, independent of the others), emitting per point
{"kind": "bfs_level", "seed", ...} per depth, the `found` events unshrunk and {"kind": "bfs", "seed",
...} (the point's summary; {"kind": "bfs", "seed", "skipped": "budget"} for a point not started)
before `done`; with "KVMC_EXPLORE_PARENT" in its environment (a Ray task started it) the worker
dies with that process},
and prints one JSON line per event on stdout: {"kind": "ready", "import_seconds"}, {"kind": "walk",
"seed", "steps", "seconds", "sglang_seconds", "compare" (with compare_model)}, {"kind": "found", ...} (the shrunk counterexample),
{"kind": "error", ...} (kvmc could not drive the release: never a finding), {"kind": "done"}.

The environment is kvmc's, the scheduler's choices are SGLang's. A walk draws the config's
parameters (its symbolic bounds: pool sizes, window, chunk size, each request's prompt and output
length, the warm prefix its sharing requests start with) as the model's walks do
(checker/traces/walk.py::pick_params, kept where the model's `params_ok` accepts them), then per
iteration the events: each request not yet arrived arrives or not, each streaming session whose
turn finished sends its next turn (its new-token count drawn from the config's `turn_tokens`) or
closes, where the config forces retraction (`SGLANG_TEST_RETRACT`) the iteration retracts or
not, and with `aborts` the client aborts a waiting or running request or not (`recv.abort[r]`, an
AbortReq through `process_input_requests`; not a model event). The events are the trace picks upstream/sched/harness.py already sends (`recv.arrive[r]`,
`recv.next_turn[r]`, `recv.turn_tokens[r]`, `recv.close_session[i]`, `decode.test_retract`), run
with forcing off (harness `force=False`): SGLang's own LRU order and `_evict_swa` timing decide the
rest, as in the replay's `events` mode (upstream/sched/driver.py::_events).

The oracle, after every iteration, on the real objects (each the property of specs/properties.py
or specs/liveness.py with the same name and meaning):
* no_prefill_oom / no_decode_oom / no_scheduler_assertion: SGLang's allocation failure ("Prefill
  out of memory", "Decode out of memory", alloc_req_slots) or its insert assertion killed the
  scheduler (harness.py classifies; driver.py::violated decides);
* conservation: the ownership ledger on the real pools and rows (upstream/sched/ledger.py);
* busy_check_sound / busy_check_complete: SGLang's busy check against the ledger (driver.violated);
* prompt_prefilled: a request past its prefill computed its whole prompt (its committed KV is not short
  of its fill minus one: `_cut_short`);
* idle_check_sound / idle_check_complete: on an idle server (no batch ran, nothing running or
  chunked) SGLang's idle check against the ledger and the locks;
* lock_ledger (its idle part): on an idle server with no session holding KV, every tree node's lock
  count is back to zero;
* progress (bounded): `progress_bound` consecutive iterations ran no batch while a request waits or
  is chunked, and no event in them could free memory (a session close) - SGLang's scheduler is
  deterministic given no new event, so an iteration that changes nothing repeats forever (the
  state is compared through the abstraction where it maps).
Any other exception raised inside SGLang is no finding (no property names it): the walk is reported
as an error with SGLang's traceback, as is any failure of kvmc's own harness.
"""

from __future__ import annotations

import json
import random
import sys
import time
import traceback
from typing import Any

from model.designs import leaf_window_cap
from model.state import CHUNKED, FINISHED, NEW, OOM_NONE, RUNNING, WAITING

# the properties explore checks, in the order a step is judged (the first violated one is reported)
PROPS = ("no_prefill_oom", "no_decode_oom", "no_scheduler_assertion", "conservation", "prompt_prefilled",
         "busy_check_sound", "busy_check_complete", "idle_check_sound", "idle_check_complete", "lock_ledger",
         "progress")
P_ARRIVE, P_TURN, P_CLOSE, P_RETRACT, P_ABORT = 0.45, 0.35, 0.15, 0.3, 0.1
PROGRESS_BOUND = 4
# the lengths shrinking lowers (per request or per warm atom): the environment's, never a pool size
SHRINK_LENGTHS = ("input_len", "max_new_tokens", "warm_len")


class ExploreError(RuntimeError):
    """kvmc could not drive the release for this walk (never a finding)."""


# -- parameters and events ------------------------------------------------------------------------------
def draw_params(cfg: Any, design: Any, rng: random.Random) -> Any:
    """A point of the config's symbolic bounds the model accepts (`params_ok`) and the release's
    tree can hold (a warm node within one window where #26919's leaf cap splits longer ones; the
    whole warm prefix within each device pool, as the harness builds it: `_warm_fits`)."""
    from checker.traces.walk import pick_params
    from model.ops import Concrete
    from model.system import System

    system = System(cfg, design)
    for _ in range(2000):
        p = pick_params(cfg, rng, wide=True)
        if _warm_fits(cfg, design, p) and system.params_ok(system.ctx(Concrete(), p)):
            return p
    raise ExploreError(f"no parameter point of config {cfg.name} that the model accepts in 2000 draws")


def _warm_fits(cfg: Any, design: Any, p: Any) -> bool:
    if cfg.warm_atoms:
        # the harness builds the warm prefix as served traffic: every atom inserted on the device, the
        # host-only ones evicted afterwards (harness.py::_init_warm), so the whole prefix must fit each
        # device pool once (pages rounded up), where the model asks only its device-resident part to
        need = sum(-(-L // cfg.page_size) * cfg.page_size for L in p.warm_len)
        if need > p.full_tokens or (cfg.hybrid_swa and need > p.swa_tokens):
            return False
    if not (leaf_window_cap(cfg, design) and cfg.warm_atoms):
        return True
    cap = -(-p.sliding_window_size // cfg.page_size) * cfg.page_size
    return all(L <= cap for L in p.warm_len)


def params_ok(cfg: Any, design: Any, p: Any) -> bool:
    from model.ops import Concrete
    from model.system import System

    system = System(cfg, design)
    try:
        return bool(_warm_fits(cfg, design, p) and system.params_ok(system.ctx(Concrete(), p)))
    except (ValueError, TypeError, ArithmeticError, KeyError):
        return False


def draw_events(h: Any, rng: random.Random, aborts: bool = False) -> dict[str, Any]:
    """One iteration's environment events, valid on the scheduler `h` as it is now (with `aborts`,
    the client may also abort a request: `abortable`)."""
    from .abstraction import status

    cfg = h.cfg
    picks: dict[str, Any] = {}
    for sl in h.slots:
        if not sl.arrived and rng.random() < P_ARRIVE:
            picks[f"recv.arrive[{sl.r}]"] = True
    for i, r in enumerate(cfg.streaming_sessions):
        sl = h.slots[r]
        if not sl.arrived or sl.closed or status(h, sl) != FINISHED:
            continue
        u = rng.random()
        if u < P_CLOSE:
            picks[f"recv.close_session[{i}]"] = True
        elif u < P_CLOSE + P_TURN and sl.turn + 1 < cfg.max_turns:  # turns count from 0 (model/system.py recv_requests)
            picks[f"recv.next_turn[{r}]"] = True
            lo, hi = cfg.turn_tokens
            picks[f"recv.turn_tokens[{r}]"] = rng.randint(lo, hi)
    if cfg.test_retract and rng.random() < P_RETRACT:
        picks["decode.test_retract"] = True
    if aborts:  # drawn after the others, so that a walk without --aborts draws what it always drew
        for sl in h.slots:
            if abortable(h, sl) and rng.random() < P_ABORT:
                picks[f"recv.abort[{sl.r}]"] = True
    return picks


def abortable(h: Any, sl: Any) -> bool:
    """The client may abort request slot `sl` now: it arrived, was not aborted, and waits or runs
    (a chunked request, mid-prefill, and a streaming session's turn are not aborted: docs/explore.md)."""
    if sl.req is None or sl.aborted or sl.r in h.cfg.streaming_sessions:
        return False
    return _status(h, sl) in (WAITING, RUNNING)


def quiescent(h: Any) -> bool:
    """Nothing more can happen: every request arrived and finished, every session closed or out of
    turns."""
    from .abstraction import status

    cfg = h.cfg
    for sl in h.slots:
        if not sl.arrived or status(h, sl) != FINISHED:
            return False
    return all(h.slots[r].closed or h.slots[r].turn + 1 >= cfg.max_turns for r in cfg.streaming_sessions)


# -- the oracle -------------------------------------------------------------------------------------------------
class Oracle:
    """kvmc's properties on one run's real objects, iteration by iteration."""

    def __init__(self, props: list[str], progress_bound: int = PROGRESS_BOUND, design: Any = None) -> None:
        self.props = [p for p in PROPS if p in props]
        self.bound = progress_bound
        self.design = design  # the model preset: progress's environment assumptions read its enqueue clip
        self.stalled = 0
        self.last_state: Any = None
        self._x: Any = None

    def judge(self, h: Any, picks: dict[str, Any]) -> tuple[str, str] | None:
        """(property, what SGLang's objects show) for the first property violated now, else None."""
        from .driver import violated
        from .ledger import real_ledger

        led = real_ledger(h)
        sts = [_status(h, sl) for sl in h.slots]
        idle = h.oom == OOM_NONE and h.last_batch is None and not any(s in (RUNNING, CHUNKED) for s in sts)
        locks = _idle_locks(h) if idle and not _session_holds(h) else []
        for prop in self.props:
            if prop == "prompt_prefilled":
                if _cut_short(h):
                    return prop, _evidence(h, prop, led)
            elif prop in ("no_prefill_oom", "no_decode_oom", "no_scheduler_assertion", "conservation",
                          "busy_check_sound", "busy_check_complete"):
                if violated(h, prop, led):
                    return prop, _evidence(h, prop, led)
            elif prop == "idle_check_sound":
                fired = h.idle.ran and (h.idle.fired or h.idle.crashed)
                if idle and fired and led.ok and not locks:
                    return prop, f"SGLang's idle check {h.idle.verdict()} while the ledger is exact: {led.describe()}"
            elif prop == "idle_check_complete":
                if idle and h.idle.ran and not (h.idle.fired or h.idle.crashed) and (not led.ok or locks):
                    what = led.describe() if not led.ok else "locks " + ", ".join(locks)
                    return prop, f"SGLang's idle check passed on an idle server while {what}"
            elif prop == "lock_ledger":
                if locks:
                    return prop, "idle server, no session holding KV, tree locks left: " + ", ".join(locks)
            elif prop == "progress":
                if self._stalls(h, picks, sts):
                    return prop, (f"{self.stalled} iterations in a row ran no batch while a request waits or is "
                                  f"chunked ({_queue(h, sts)}), the scheduler's state unchanged: with no new "
                                  "event SGLang repeats this iteration forever (every request sent, each fits "
                                  "the pools alone: specs/liveness.py's assumptions hold)")
        return None

    def _stalls(self, h: Any, picks: dict[str, Any], sts: list[int]) -> bool:
        pending = any(s in (WAITING, CHUNKED) for s in sts)
        frees = any(k.startswith("recv.close_session[") for k in picks)
        now = _mapped(h)
        if (h.oom != OOM_NONE or h.last_batch is not None or not pending or frees or now is None
                or not self._assumed(h, sts, now)):
            self.stalled, self.last_state = 0, None
            return False
        if self.last_state is not None and now != self.last_state:
            self.stalled = 0
        self.last_state = now
        self.stalled += 1
        return self.stalled >= self.bound


    def _assumed(self, h: Any, sts: list[int], state: Any) -> bool:
        """specs/liveness.py's `progress` assumptions, here and now: fairness (every request was sent;
        no finished, open session waits for its client) and the environment (every unfinished
        request fits the full pool alone as SGLang clips it; the SWA pool holds a window), so that
        a stall is one the model's lasso would count."""
        from model.ops import Concrete
        from model.system import System
        from specs.liveness import ASSUMPTIONS, _requests_fit, _swa_pool_holds_window

        if any(s == NEW for s in sts):
            return False
        for r in h.cfg.streaming_sessions:
            sl = h.slots[r]
            if sts[r] == FINISHED and not sl.closed and sl.turn + 1 < h.cfg.max_turns:
                return False
        if self._x is None:
            from model.designs import PRESETS

            design = self.design if self.design is not None else PRESETS["current"]
            self._x = System(h.cfg, design).ctx(Concrete(), h.p)
        x = self._x
        if ASSUMPTIONS["requests_fit"].applies(h.cfg) and not _requests_fit(x, state):
            return False
        if ASSUMPTIONS["swa_pool_holds_window"].applies(h.cfg) and not _swa_pool_holds_window(x, state):
            return False
        return True


def _status(h: Any, sl: Any) -> int:
    from .abstraction import AbstractionError, status

    try:
        return status(h, sl)
    except AbstractionError:
        return -1


def _session_holds(h: Any) -> bool:
    return any(h.slots[r].arrived and not h.slots[r].closed for r in h.cfg.streaming_sessions)


def _idle_locks(h: Any) -> list[str]:
    from .abstraction import tree_nodes, view

    v = view(h)
    out = []
    for n in tree_nodes(h):
        full = v.full_lock(n)
        swa = v.swa_lock(n) if h.hybrid else 0
        if full or swa:
            out.append(f"node {getattr(n, 'id', '?')} full_lock_ref={full}" + (f" swa_lock_ref={swa}" if h.hybrid else ""))
    return out


def _queue(h: Any, sts: list[int]) -> str:
    names = {WAITING: "waiting", CHUNKED: "chunked", RUNNING: "running", FINISHED: "finished"}
    return ", ".join(f"request {sl.r} {names.get(s, 'new')}" for sl, s in zip(h.slots, sts))


def timed_step(h: Any, picks: dict[str, Any], t: int) -> float:
    """Step t + 1 of a run on SGLang (`h.step(picks)`), and the seconds it took inside SGLang's
    scheduler. A crash that no property names is an ExploreError (kvmc could not go on), never a finding."""
    t0 = time.perf_counter()
    try:
        h.step(picks)
    except Exception as e:  # noqa: BLE001 - no property names this crash: an error, never a finding
        raise ExploreError(f"step {t + 1}: SGLang raised {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                           f" (no kvmc property names this crash)\n" + "".join(traceback.format_exc(limit=12))) from e
    return time.perf_counter() - t0


def _cut_short(h: Any) -> list[Any]:
    """prompt_prefilled's violation as SGLang's objects show it: a request past its prefill
    (driver.py::_prefill_cut_short) whose committed KV is short of its fill minus one. A committed
    length above it is no cut prompt: a finished streaming turn's output is trimmed
    (StreamingSession._trim_overshoot, 0.5.11+) while its KV stays, which the replay's `observable`
    maps away too. A saved streaming turn's committed KV is its session slot's record
    (abstraction.py::committed_len)."""
    from .abstraction import committed_len
    from .driver import _prefill_cut_short

    return [sl for sl in h.slots if _prefill_cut_short(h, sl)
            and committed_len(h, sl) < len(sl.req.origin_input_ids) + len(sl.req.output_ids) - 1]


def _evidence(h: Any, prop: str, led: Any) -> str:
    if prop.startswith("no_") and h.oom != OOM_NONE:
        return f"SGLang raised: {h.oom_message}"
    if prop.startswith("busy_check"):
        return f"SGLang's busy check {h.busy.verdict()}; ledger on SGLang's objects: {led.describe()}"
    if prop == "prompt_prefilled":
        from .abstraction import committed_len

        cut = _cut_short(h)
        return "a request past its prefill did not compute its whole prompt: " + "; ".join(
            f"request {sl.r} kv_committed_len {committed_len(h, sl)}, prompt + output "
            f"{len(sl.req.origin_input_ids) + len(sl.req.output_ids)} (expected one less)" for sl in cut)
    return f"ledger on SGLang's objects: {led.describe()}"


# -- one run -----------------------------------------------------------------------------------------------
class Run:
    """One walk's outcome: its steps (events), the violation, the table, the mapped states."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.violation: tuple[str, str] | None = None
        self.table: list[str] = []
        self.states: list[Any] = []  # model State per step (None where the abstraction does not map)
        self.sglang_seconds = 0.0
        self.aborts = [0, 0]  # aborts sent of waiting / of running requests


def run_events(cfg: Any, params: Any, oracle: Oracle, steps: list[dict[str, Any]] | None = None,
               rng: random.Random | None = None, depth: int = 0, record: bool = False, compare: Any = None,
               aborts: bool = False) -> Run:
    """Replay `steps` (events), or draw `depth` iterations of them from `rng`, on a fresh scheduler,
    the oracle judging every iteration (and `compare`, an upstream/sched/compare.py::Comparer,
    setting the model's step beside each). An exception inside SGLang that no property names, or a
    failure of the harness, raises ExploreError."""
    from .driver import _lenient
    from .harness import RealScheduler
    from .ledger import real_ledger

    h = RealScheduler(cfg, params, force=False)
    h.forcing.observe = False  # SGLang's own eviction, not compared with any trace
    out = Run()
    if compare is not None:
        compare.watch(h)
    if record:
        out.states.append(_mapped(h))
    n = len(steps) if steps is not None else depth
    for t in range(n):
        if steps is None and quiescent(h):
            break
        picks = _lenient(h, steps[t]) if steps is not None else draw_events(h, rng, aborts)  # type: ignore[arg-type]
        picks = _valid(h, picks)
        for k in picks:
            if k.startswith("recv.abort["):
                out.aborts[_status(h, h.slots[int(k[11:-1])]) != WAITING] += 1
        before = None
        if compare is not None:
            before = _mapped(h)
            compare.begin()
        out.sglang_seconds += timed_step(h, picks, t)
        out.steps.append(picks)
        if compare is not None:
            compare.check(t + 1, before, picks, _mapped(h))
        v = oracle.judge(h, picks)
        if record:
            out.table.append(row(t + 1, h, real_ledger(h), picks))
            out.states.append(_mapped(h))
        if v is not None:
            out.violation = v
            return out
        if h.oom != OOM_NONE:
            return out
    return out


def _valid(h: Any, picks: dict[str, Any]) -> dict[str, Any]:
    """Drop an arrival of a request that already arrived (a shrunk walk may ask twice), and an abort
    of a request that cannot be aborted now (its arrival shrunk away, or it finished)."""
    return {k: v for k, v in picks.items()
            if not (k.startswith("recv.arrive[") and h.slots[int(k[12:-1])].arrived)
            and not (k.startswith("recv.abort[") and not abortable(h, h.slots[int(k[11:-1])]))}


def _mapped(h: Any) -> Any:
    from .abstraction import AbstractionError, to_state

    try:
        return to_state(h)
    except (AbstractionError, KeyError, IndexError, ValueError):
        return None


def row(t: int, h: Any, led: Any, picks: dict[str, Any]) -> str:
    """One line of the step table: the events, what SGLang ran and its checks, the ledger."""
    if h.oom != OOM_NONE:
        sg = f"SGLang raised: {h.oom_message}"
    else:
        sg = f"SGLang ran {h.last_mode if h.last_batch is not None else 'no batch'}; busy check {h.busy.verdict()}"
        if h.idle.ran:
            sg += f", idle check {h.idle.verdict()}"
    real = "ledger " + ("exact" if led.ok else "NOT exact: " + led.describe())
    return f"step {t}: events {_describe(picks)} | {sg} | {real}"


def _describe(picks: dict[str, Any]) -> str:
    if not picks:
        return "(none)"
    return ", ".join(k if v is True else f"{k}={v}" for k, v in picks.items())


# -- shrinking ---------------------------------------------------------------------------------------------
def shrink(cfg: Any, design: Any, params: Any, steps: list[dict[str, Any]], prop: str, oracle_args: tuple,
           deadline: float) -> tuple[Any, list[dict[str, Any]], int]:
    """A smaller walk that still violates `prop`: drop whole iterations, then single events, then
    lower each request's lengths, to a fixed point (each candidate re-run on a fresh scheduler).
    Returns (params, steps, candidates tried)."""
    tried = 0

    def fails(p: Any, st: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        nonlocal tried
        tried += 1
        try:
            r = run_events(cfg, p, Oracle(*oracle_args), steps=st)
        except ExploreError:
            return None
        return r.steps if r.violation is not None and r.violation[0] == prop else None

    changed = True
    while changed and time.time() < deadline:
        changed = False
        i = len(steps) - 1
        while i >= 0 and time.time() < deadline:  # whole iterations
            cand = steps[:i] + steps[i + 1:]
            got = fails(params, cand)
            if got is not None:
                steps, changed = got, True
            i = min(i, len(steps)) - 1
        i = 0
        while i < len(steps):  # single events (an arrival, a turn, a retraction)
            for k in list(steps[i]):
                if i >= len(steps) or k not in steps[i] or k.startswith("recv.turn_tokens[") or time.time() >= deadline:
                    continue
                cand = [dict(s) for s in steps]
                del cand[i][k]
                if k.startswith("recv.next_turn["):
                    cand[i].pop("recv.turn_tokens[" + k[len("recv.next_turn["):], None)
                got = fails(params, cand)
                if got is not None:
                    steps, changed = got, True
            i += 1
        for name in SHRINK_LENGTHS:  # lengths, each lowered as far as the failure stays
            vals = list(getattr(params, name))
            for j in range(len(vals)):
                lo = cfg.bound(name)[0]
                while vals[j] > lo and time.time() < deadline:
                    trial = list(vals)
                    trial[j] = max(lo, vals[j] // 2) if vals[j] // 2 >= lo and vals[j] > 2 * lo + 1 else vals[j] - 1
                    p2 = _with(params, name, trial)
                    if not params_ok(cfg, design, p2):
                        break
                    got = fails(p2, steps)
                    if got is None:
                        if trial[j] != vals[j] - 1:  # a halving failed: try one less before giving up
                            trial[j] = vals[j] - 1
                            p2 = _with(params, name, trial)
                            if params_ok(cfg, design, p2):
                                got = fails(p2, steps)
                        if got is None:
                            break
                    params, steps, vals, changed = p2, got, trial, True
    return params, steps, tried


def _with(params: Any, name: str, vals: list[int]) -> Any:
    import dataclasses

    return dataclasses.replace(params, **{name: tuple(vals)})


# -- the worker --------------------------------------------------------------------------------------------
class SourceError(RuntimeError):
    """The imported sglang is not the source tree's (another one shadows it on the path)."""


def check_source(source: str | None) -> None:
    """A source tree's run imports that tree's sglang: raise SourceError when another one was imported."""
    if not source:
        return
    import os

    import sglang

    got = os.path.realpath(os.path.dirname(sglang.__file__ or ""))
    want = os.path.realpath(os.path.join(source, "sglang"))
    if got != want:
        raise SourceError(f"sglang was imported from {got}, not from the source tree {want} (another sglang shadows it)")


_CHANNEL: Any = None  # the worker's own stdout; SGLang's prints go to stderr (main)


def _emit(obj: dict[str, Any]) -> None:
    out = _CHANNEL or sys.stdout
    out.write(json.dumps(obj, default=repr) + "\n")
    out.flush()


def main() -> int:
    import os
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; it ends this process with SIGTERM
    parent = os.environ.pop("KVMC_EXPLORE_PARENT", None)
    if parent:  # started by a Ray task (upstream/explore.py::run_shard_on_worker): it dies with that worker
        from .bfs import _die_with_parent

        _die_with_parent()
        if os.getppid() != int(parent):  # the worker died before the line above took effect
            return 0
    return run_job(json.loads(sys.stdin.read()))


def serve_main(fd: int) -> int:
    """`--serve-spawn FD` (upstream/serve.py::spawn, inside `shared_workers()`): SGLang imported and
    set up once, then each job run by `run_job` in a fork, which starts from the set-up state a
    fresh worker runs its job from (its `ready` says so: no import is left to time)."""
    import signal

    from ..serve import serve_spawned
    from . import harness

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        harness.setup()
    except Exception:  # noqa: BLE001 - each job's run_job reports it, as a one-shot worker does
        pass
    return serve_spawned(run_job, fd)


def run_job(job: dict[str, Any]) -> int:
    """One job (the module docstring's), its events on this process's stdout."""
    import os

    global _CHANNEL
    _CHANNEL = os.fdopen(os.dup(1), "w")  # one JSON line per event; whatever SGLang prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    t0 = time.time()
    from model.designs import PRESETS
    from specs.configs import CONFIGS

    from . import harness, reverts
    from .compare import Comparer

    what = f"SGLang source {job['source']}" if job.get("source") else f"SGLang {job['version']}"
    try:
        harness.setup()
        check_source(job.get("source"))
    except SourceError as e:
        _emit({"kind": "error", "seed": None, "message": str(e)})
        return 0
    except Exception as e:  # noqa: BLE001 - the release does not import here: reported, not raised
        _emit({"kind": "error", "seed": None, "message": f"{what} does not import: {type(e).__name__}: {e}\n"
               + traceback.format_exc(limit=12)})
        return 0
    try:  # reverted fixes (upstream/sched/reverts.py, SGLang's own source_patcher): a developer's change
        applied, _states = reverts.apply(job.get("reverts", []), job["version"])
    except reverts.RevertError as e:
        _emit({"kind": "error", "seed": None, "message": str(e)})
        return 0
    _emit({"kind": "ready", "import_seconds": round(time.time() - t0, 2), "reverted": applied})
    cfg, design = CONFIGS[job["config"]], PRESETS[job["preset"]]
    active = [p for p in PROPS if p in job["props"]]
    bound = int(job.get("progress_bound", PROGRESS_BOUND))
    if job.get("search") == "bfs":  # breadth-first from one parameter point (upstream/sched/bfs.py)
        _bfs_job(job, cfg, design, active, bound)
        _emit({"kind": "done"})
        return 0
    for seed in job["seeds"]:
        if time.time() >= job["deadline"] or not active:
            break
        rng = random.Random(seed)
        t1 = time.perf_counter()
        try:
            params = draw_params(cfg, design, rng)
            cmp = Comparer(cfg, design, params) if job.get("compare_model") else None
            r = run_events(cfg, params, Oracle(active, bound, design), rng=rng, depth=int(job["depth"]), compare=cmp,
                           aborts=bool(job.get("aborts")))
        except (ExploreError, harness.HarnessError, harness.NotReplayable) as e:
            _emit({"kind": "error", "seed": seed, "message": str(e)})
            return 0
        except Exception as e:  # noqa: BLE001 - kvmc's own failure: an error, never a finding
            _emit({"kind": "error", "seed": seed, "message": f"kvmc internal error: {type(e).__name__}: {e}\n"
                   + traceback.format_exc(limit=12)})
            return 0
        _emit({"kind": "walk", "seed": seed, "steps": len(r.steps), "seconds": round(time.perf_counter() - t1, 4),
               "sglang_seconds": round(r.sglang_seconds, 4), "aborts": r.aborts,
               **({"compare": cmp.summary()} if cmp is not None else {})})
        if r.violation is None:
            continue
        found = _found(job, cfg, design, seed, params, r, (active, bound, design))
        _emit(found)
        if found["kind"] == "error":
            return 0
        active.remove(found["property"])  # one counterexample per property; the walks go on for the others
    _emit({"kind": "done"})
    return 0


def _bfs_job(job: dict[str, Any], cfg: Any, design: Any, active: list[str], bound: int) -> None:
    """`--search bfs`: the parameter point of each of the job's seeds, searched breadth-first one
    after the other (each from all of `active`: a point's search does not depend on which other
    points share its worker, so the verdict is the same however the points are dealt); per point,
    each property's first (shortest) counterexample re-run on a fresh scheduler and reported as a
    walk's is (`found`, unshrunk), then the point's summary (`bfs`). A point whose turn comes after
    the deadline is reported not started (`bfs` with "skipped")."""
    from . import bfs, harness

    for seed in job["seeds"]:
        if time.time() >= job["deadline"]:
            _emit({"kind": "bfs", "seed": seed, "skipped": "budget"})
            continue
        try:
            params = draw_params(cfg, design, random.Random(seed))
            tagged = (lambda ev, _s=seed: _emit(dict(ev, seed=_s)))
            res = bfs.search(cfg, params, list(active), bound, design, int(job["depth"]), int(job["max_states"]),
                             float(job["deadline"]), aborts=bool(job.get("aborts")), jobs=int(job.get("bfs_jobs", 1)),
                             emit=tagged, ex=sys.modules[__name__])
        except (ExploreError, harness.HarnessError, harness.NotReplayable) as e:
            _emit({"kind": "error", "seed": seed, "message": str(e)})
            return
        except Exception as e:  # noqa: BLE001 - kvmc's own failure: an error, never a finding
            _emit({"kind": "error", "seed": seed, "message": f"kvmc internal error: {type(e).__name__}: {e}\n"
                   + traceback.format_exc(limit=12)})
            return
        for prop, (steps, evidence, depth) in sorted(res.pop("found").items(), key=lambda kv: PROPS.index(kv[0])):
            r = Run()
            r.steps, r.violation = steps, (prop, evidence)
            f = _found(dict(job, shrink=False), cfg, design, seed, params, r, (active, bound, design))
            f["search"], f["found_at_depth"] = "bfs", depth
            _emit(f)
            if f["kind"] == "error":
                return
        _emit({"kind": "bfs", "seed": seed, "params": params.as_dict(), **res})


def _found(job: dict[str, Any], cfg: Any, design: Any, seed: int, params: Any, r: Run, oracle_args: tuple) -> dict[str, Any]:
    """The violation of walk `seed`, shrunk and re-run once more with its table and states."""
    t0 = time.time()
    prop = r.violation[0]  # type: ignore[index]
    steps, tried = r.steps, 0
    # the shrunk walk is judged on its property alone: an earlier step violating another one must not
    # hide it (the original walk reached it first)
    only = ([prop], oracle_args[1], design)
    if job.get("shrink", True):
        params, steps, tried = shrink(cfg, design, params, r.steps, prop, only,
                                      time.time() + float(job.get("shrink_seconds", 120)))
    try:
        final = run_events(cfg, params, Oracle(*only), steps=steps, record=True)
    except ExploreError as e:
        return {"kind": "error", "seed": seed, "message": f"kvmc internal error: the shrunk walk no longer runs: {e}"}
    if final.violation is None or final.violation[0] != prop:
        return {"kind": "error", "seed": seed, "message": "kvmc internal error: the shrunk walk does not fail again"}
    return {"kind": "found", "seed": seed, "property": prop, "evidence": final.violation[1],
            "params": params.as_dict(), "steps": final.steps, "original_steps": len(r.steps),
            "shrink_tried": tried, "shrink_seconds": round(time.time() - t0, 2), "table": final.table,
            "states": [None if s is None else _state_dict(s) for s in final.states]}


def _state_dict(s: Any) -> dict[str, Any]:
    from model.state import FIELD_NAMES

    return {f: getattr(s, f) for f in FIELD_NAMES}


# -- replaying an explore trace (`kvmc replay --against`, upstream/sched/replay.py) ----------------------------------
def replay_trace(j: dict[str, Any]) -> dict[str, Any]:
    """Re-run one explore trace's events on the imported SGLang (its reverts applied by the caller)
    as a walk's shrunk counterexample is re-run (`run_events`), the trace's property judged after
    every iteration, SGLang's mapped state set beside the recorded one. Returns {"failed_at" (the
    step the property failed at, or None), "evidence", "steps" (iterations run), "ended" (why the run
    stopped short: SGLang's scheduler died another way), "departs" (the first step whose mapped state
    differs from the recorded one), "table"}. ExploreError (a crash no property names) propagates."""
    from checker.traces import itf
    from model.ops import Concrete
    from model.system import System

    from .driver import first_difference

    tr = itf.read(j["file"], check=False, warn=False)
    recorded = [dict(st.picks) for st in tr.steps]
    unmapped = set((tr.meta.get("explore") or {}).get("unmapped_states") or [])
    r = run_events(tr.cfg, tr.params, Oracle([j["property"]], int(j["progress_bound"]), tr.design),
                   steps=recorded, record=True)
    x = System(tr.cfg, tr.design).ctx(Concrete(), tr.params)
    table, departs = [], None
    for t, (want, got) in enumerate(zip(recorded, r.steps), 1):
        dropped = sorted(set(want) - set(got))  # a turn or close whose previous turn has not finished here
        table.append(r.table[t - 1] + (f" | not applicable here: {', '.join(dropped)}" if dropped else ""))
        now = r.states[t]
        if departs is None and t not in unmapped and now is not None:
            d = first_difference(tr.states[t], now, x)
            if d is not None:
                departs = {"step": t, "field": d[0], "recorded": d[1], "sglang": d[2]}
    ended = ""
    if r.violation is None and len(r.steps) < len(recorded):
        ended = f"SGLang's scheduler died at step {len(r.steps)} ({r.table[-1].split(' | ')[1]})"
    return {"failed_at": len(r.steps) if r.violation is not None else None,
            "evidence": r.violation[1] if r.violation is not None else "", "steps": len(r.steps), "ended": ended,
            "departs": departs, "table": table}


def replay_main() -> int:
    """`python -m upstream.sched.explore --replay`: one JSON job on stdin, {"version" (the release
    whose revert texts apply), "source", "traces": [{"file", "property", "progress_bound",
    "reverts"}]}; one JSON document on stdout, {"import_seconds", "outcomes": [...]} (or {"error"})."""
    import os

    global _CHANNEL
    _CHANNEL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    job = json.loads(sys.stdin.read())
    t0 = time.time()
    from . import harness, reverts

    try:
        harness.setup()
        check_source(job.get("source"))
    except Exception as e:  # noqa: BLE001 - the SGLang named does not import here: reported, not raised
        _emit({"error": f"{type(e).__name__}: {e}"})
        return 0
    outcomes = []
    for j in job["traces"]:
        try:
            applied, states = reverts.apply(j.get("reverts", []), job["version"])
        except reverts.RevertError as e:
            outcomes.append({"error": str(e)})
            continue
        try:
            o = replay_trace(j)
        except (ExploreError, harness.HarnessError, harness.NotReplayable) as e:
            o = {"crash": str(e).splitlines()[0]}
        except Exception as e:  # noqa: BLE001 - kvmc's own failure: an error, never a finding
            o = {"error": f"kvmc internal error: {type(e).__name__}: {e}"}
        finally:
            reverts.restore(states)
        o["reverted"] = applied
        outcomes.append(o)
    _emit({"import_seconds": round(time.time() - t0, 2), "outcomes": outcomes})
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve-spawn"]:
        sys.exit(serve_main(int(sys.argv[2])))
    sys.exit(replay_main() if sys.argv[1:] == ["--replay"] else main())
