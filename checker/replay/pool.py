"""`kvmc replay`: run a counterexample on the torch pool (pool/) as a refinement check.

For each trace file:
1. read it strictly (checker/traces/itf.py; a malformed file is an `ItfError`: one line naming the file,
   the step and the field, exit status 2);
2. refuse a trace planted with a model mutant that has no pool counterpart (pool/mutants.py):
   `not replayable`, exit status 2;
3. re-run it through the concrete model: a trace the model itself does not follow was edited or
   corrupted (exit status 2, naming the step and the field);
4. build the pool for the trace's config, design and parameters on `--device`, run one pool
   scheduler iteration per step with the step's recorded choices, and after every step map the
   pool's live objects to the model's variables (pool/abstraction.py) and compare them with the
   recorded state; also compare the choices the pool asked with the recorded ones, the tree's
   counters and SGLang's busy check (computed by the pool from its objects) with the model's
   values, and the pool's ownership check on its tensors (pool/ownership.py: every page and row
   owned exactly once) with the model's ownership ledger, pool by pool (`ownership.full`, ...: a
   double allocation, double free or orphaned slot shows at the step it happens, even when no
   mapped field does). The first difference is `diverged at step N: field=..., model=...,
   pool=...`: a kvmc bug, exit status 1;
5. at the end, the pool's own verdict (allocator returned None, busy check fired or crashed,
   ownership check failed: pool/ownership.py) must agree with the trace's: `reproduced` for a
   recorded violation, `passed` for a trace recorded as passing.

A trace of a patched design (`kvmc review --head-patch`, model/patch.py) replays where the pool has
the mechanism the patch changes (`POOL_HOOKS`: the pool's own method is replaced, for that replay,
by the reviewer's function run concretely on the pool's model view, and its result applied back to
the pool's objects); for any other transition the answer is `not replayable: model only`.

A lasso (a liveness counterexample, `Trace.loop`) runs its loop LOOP_REPEATS more times
(checker/engines/liveness.py, `unroll`): the loop's first state must recur on the pool after every
pass, compared like every other state; `reproduced` then means the pool runs the same infinite
behaviour.

Exit status: 0 every file behaves as recorded; 1 some file diverged; 2 bad input (unreadable or
corrupt trace, not replayable). Bad input wins over divergence: fix the input first.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from dataclasses import dataclass
from dataclasses import field as dc_field
from pathlib import Path
from typing import Any

from model import designs
from model.designs import PRESETS, Design
from model.state import FIELD_NAMES, GHOST_FIELDS, OOM_ASSERT, State

from checker.traces.itf import ItfError
from checker.traces.trace import Trace, TraceMismatch

REPRODUCED, PASSED, DIVERGED, ERROR, NOT_REPLAYABLE = "reproduced", "passed", "diverged", "error", "not replayable"


@dataclass
class Outcome:
    file: str
    status: str
    step: int | None = None
    field: str | None = None
    model: Any = None
    pool: Any = None
    message: str = ""
    steps: int = 0
    seconds: float = 0.0
    detail: list[str] = dc_field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in (REPRODUCED, PASSED)

    def line(self) -> str:
        if self.status == DIVERGED:
            head = f"{self.file}: diverged at step {self.step}: {self.field}: model={self.model!r}, pool={self.pool!r}"
            return head + (f" ({self.message})" if self.message else "")
        if self.status in (ERROR, NOT_REPLAYABLE):
            return f"{self.file}: {self.status}: {self.message}"
        return f"{self.file}: {self.status} ({self.message})" if self.message else f"{self.file}: {self.status}"


def _first_difference(model: State, pool: State) -> tuple[str, Any, Any] | None:
    model = model.set(**{f: getattr(pool, f) for f in GHOST_FIELDS})  # no pool object holds a ghost
    if model == pool:  # the common case: one tuple comparison over every field (all fields are compared)
        return None
    for f in FIELD_NAMES:
        a, b = getattr(model, f), getattr(pool, f)
        if isinstance(a, tuple):
            for i, (u, v) in enumerate(zip(a, b)):
                if u != v:
                    return f"{f}[{i}]", u, v
            if len(a) != len(b):
                return f, a, b
        elif a != b:
            return f, a, b
    return None


def _picks_difference(recorded: dict[str, Any], asked: dict[str, Any]) -> tuple[str, Any, Any] | None:
    for k in sorted(set(recorded) | set(asked)):
        if k not in asked:
            return f"choice {k}", recorded[k], "(not asked)"
        if k not in recorded:
            return f"choice {k}", "(not made)", asked[k]
        if bool(recorded[k]) != bool(asked[k]) if isinstance(asked[k], bool) else recorded[k] != asked[k]:
            return f"choice {k}", recorded[k], asked[k]
    return None


def _derived_ctx(trace: Trace) -> Any:
    """The model's concrete context for `_derived_difference` (asks no choices: built once per trace)."""
    from model.ops import Concrete
    from model.system import System

    return System(trace.cfg, trace.design).ctx(Concrete(), trace.params)


def _derived_difference(trace: Trace, state: State, sch: Any, x: Any = None) -> tuple[str, Any, Any] | None:
    """The tree counters, SGLang's busy and idle checks, and the ghosts (a needless retraction or
    load-back give-up): model (from the recorded state) vs pool (from its live objects). `x`: the
    trace's `_derived_ctx` (built here when not given)."""
    from model import radix_cache
    from model.invariant_checker import self_check_during_busy, self_check_during_idle

    if x is None:
        x = _derived_ctx(trace)
    c = radix_cache.counters(x, state)
    t = sch.tree
    pairs = [("full_evictable_size", c.full_evictable, t.full_evictable_size_),
             ("full_protected_size", c.full_protected, t.full_protected_size_)]
    if trace.cfg.hybrid_swa:
        pairs += [("swa_evictable_size", c.swa_evictable, t.swa_evictable_size_),
                  ("swa_protected_size", c.swa_protected, t.swa_protected_size_)]
    for name, m, p in pairs:
        if m != p:
            return name, m, p
    b = self_check_during_busy(x, state)
    pb = sch.busy
    i = self_check_during_idle(x, state)
    pi = sch.idle
    for name, m, p in (("busy_check.ran", bool(b.ran), bool(pb and pb.ran)),
                       ("busy_check.crashed", bool(b.crashed), bool(pb and pb.crashed)),
                       ("busy_check.fired", bool(b.fired), bool(pb and pb.fired)),
                       ("idle_check.idle", bool(i.idle), bool(pi and pi.idle)),
                       ("idle_check.fired", bool(i.fired), bool(pi and pi.fired)),
                       # the model's ghosts against the pool's own record of the same thing
                       ("needless_retract", bool(state.needless_retract), sch.needless_retract),
                       ("needless_recompute", bool(state.needless_recompute), sch.needless_recompute)):
        if m != p:
            return name, m, p
    return None


def _ownership_difference(x: Any, state: State, own: Any) -> tuple[str, Any, Any] | None:
    """The pool's ownership check on its tensors (every page and row owned exactly once) against the
    model's ownership ledger of the recorded state (specs/properties.py), pool by pool: a double
    allocation, a double free or an orphaned slot is reported at the step it happens."""
    from specs.properties import ledger

    L = ledger(x, state)
    pairs = [("ownership.full", L.full_ok, own.full)]
    if own.swa is not None:
        pairs.append(("ownership.swa", L.swa_ok, own.swa))
    pairs.append(("ownership.rows", L.slots_ok, own.rows))
    for name, m, p in pairs:
        if bool(m) != p.ok:
            return name, "exact" if m else "not exact", p.describe()
    return None


def _expects_violation(trace: Trace) -> bool:
    """What the trace claims; a trace that claims nothing (no `#meta.verdict` or `expected`) is held to
    the model's own verdict on its last state, so the pool is compared with the model either way."""
    from model.ops import Concrete
    from model.system import System
    from specs.properties import PROPERTIES

    from checker.traces.itf import VIOLATED

    v, e = trace.meta.get("verdict"), trace.meta.get("expected")
    if v is None and e is None and trace.prop in PROPERTIES:
        x = System(trace.cfg, trace.design).ctx(Concrete(), trace.params)
        return not bool(PROPERTIES[trace.prop].holds(x, trace.states[-1]))
    return v in VIOLATED or e == "violation"


def validate(trace: Trace, file: str) -> None:
    """Re-run the trace through the concrete model: a trace the model does not follow is corrupt."""
    from model.system import System

    from checker.traces.trace import run_concrete

    try:
        run_concrete(System(trace.cfg, trace.design), trace.params, trace.actions, expected=trace.states, check_frames=False)
    except TraceMismatch as e:
        raise ItfError(file, f"state {e.step} field {e.field}",
                       f"the trace records {e.recorded!r} but the model computes {e.concrete!r}: the trace was edited or "
                       "corrupted (regenerate it with kvmc check)") from None
    except (ValueError, TypeError, ArithmeticError, IndexError, KeyError) as e:
        raise ItfError(file, "states", f"the model cannot run this trace ({type(e).__name__}: {e})") from None


@contextlib.contextmanager
def _gc_frozen() -> Any:
    """Keep the objects that exist before a replay (torch, the model, the trace) out of the cyclic
    garbage collector's passes while it runs: a replay allocates many small tuples (states), and
    full collections over the whole heap cost more than the pool's step itself. Objects the replay
    creates are collected as usual; nothing changes if someone already froze the heap (nesting)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def replay_trace(trace: Trace, device: str = "cpu", file: str = "<trace>", check_model: bool = True,
                 compare_derived: bool = True, expect_violation: bool | None = None) -> Outcome:
    """Replay one parsed trace on the pool; never raises for a pool problem (that is a divergence)."""
    with _gc_frozen():
        return _replay_trace(trace, device, file, check_model, compare_derived, expect_violation)


def _replay_trace(trace: Trace, device: str, file: str, check_model: bool, compare_derived: bool,
                  expect_violation: bool | None) -> Outcome:
    from pool import ReplayChooser, Scheduler, ownership, to_state, violated
    from pool.mutants import missing

    t0 = time.perf_counter()
    gone = missing(trace.design.mutants)
    if gone:
        return Outcome(file, NOT_REPLAYABLE, message=f"mutant {', '.join(gone)} has no pool counterpart (pool/mutants.py)")
    if trace.engine == "induction-cti":
        return Outcome(file, NOT_REPLAYABLE, message="a counterexample to induction starts from a state the solver chose, "
                                                     "not from the initial state the pool starts from")
    lacking = sorted(n for n in trace.design.overrides if n not in POOL_HOOKS)
    if lacking:  # a reviewer's patch of a mechanism the pool cannot take it in: the model's answer only
        return Outcome(file, NOT_REPLAYABLE, message=f"model only: the pool has no hook for the patched transition "
                                                     f"{', '.join(lacking)} (hooks: {', '.join(sorted(POOL_HOOKS))})")
    if check_model:
        try:
            validate(trace, file)
        except ItfError as e:
            return Outcome(file, ERROR, message=str(e).split(": ", 1)[1] if ": " in str(e) else str(e))
    lasso = trace if trace.loop is not None else None
    if lasso is not None:  # a liveness lasso: its loop runs LOOP_REPEATS more times, compared step by step
        from checker.engines.liveness import LOOP_REPEATS, unroll

        trace = unroll(lasso, LOOP_REPEATS)
    prop = trace.prop
    step = 0
    hooks = contextlib.ExitStack()
    try:
        for name, fn in trace.design.overrides.items():
            hooks.enter_context(POOL_HOOKS[name](trace, fn))
        sch = Scheduler(trace.cfg, trace.design, trace.params, device=device)
        x = _derived_ctx(trace) if compare_derived else None
        own = None  # the last ownership check (reused by the verdict)
        d = _first_difference(trace.init, to_state(sch))
        if d is None and compare_derived:
            own = ownership.check(sch)
            d = _ownership_difference(x, trace.init, own)
        if d:
            return Outcome(file, DIVERGED, 0, d[0], d[1], d[2], "initial state", 0, time.perf_counter() - t0)
        ch = ReplayChooser()
        for step, st in enumerate(trace.steps, 1):
            if st.action != "event_loop_iteration":
                return Outcome(file, ERROR, step, message=f"state {step}: unknown action {st.action!r}")
            ch.set_picks(st.picks)
            sch.step(ch)
            pool_state = to_state(sch)
            d = _first_difference(st.state, pool_state)
            if d is None:
                d = _picks_difference(st.picks, ch.asked)
            if d is None and compare_derived:
                d = _derived_difference(trace, st.state, sch, x)
            if d is None and compare_derived and st.state.oom != OOM_ASSERT:
                # (not where the scheduler died on the insert's assertion: it dies inside the insert,
                # after it freed the request's duplicates, which can be the very slots the tree holds,
                # and before the row is repointed; the pool's tensors then hold that double free slot
                # by slot, which the ledger's counts of a whole state do not describe)
                own = ownership.check(sch)
                d = _ownership_difference(x, st.state, own)
            if d:
                return Outcome(file, DIVERGED, step, d[0], d[1], d[2], "", step, time.perf_counter() - t0)
    except Exception as e:  # a pool failure on a trace the model follows is a kvmc bug, reported as such
        return Outcome(file, DIVERGED, step, "pool", "(runs)", f"{type(e).__name__}: {e}", "the pool raised", step,
                       time.perf_counter() - t0)
    finally:
        hooks.close()
    secs = time.perf_counter() - t0
    n = len(trace.steps)
    if lasso is not None:  # every pass through the loop ended in the loop's first state, on the pool too
        return Outcome(file, REPRODUCED, steps=n, seconds=secs,
                       message=f"{prop}: the loop (steps {lasso.loop + 1}..{lasso.depth}) ran {LOOP_REPEATS + 1} times on the "
                               f"pool, state {lasso.loop} recurring after each, {device}")
    if prop is None:
        return Outcome(file, PASSED, steps=n, seconds=secs, message="no property recorded; every state matched")
    try:
        bad = violated(sch, prop, own)
    except KeyError:
        return Outcome(file, ERROR, message=f"#meta.property: unknown property {prop!r}")
    if expect_violation is None:
        expect_violation = _expects_violation(trace)
    if expect_violation:
        if bad:
            return Outcome(file, REPRODUCED, steps=n, seconds=secs, message=f"{prop} violated on the pool at step {n}, {device}")
        return Outcome(file, DIVERGED, n, f"verdict {prop}", "violated", "holds", "the pool does not fail the same way",
                       n, secs)
    if bad:
        return Outcome(file, DIVERGED, n, f"verdict {prop}", "holds", "violated", "", n, secs)
    return Outcome(file, PASSED, steps=n, seconds=secs, message=f"{prop} holds on the pool, {device}")


def read_trace(path: str | Path) -> Trace | Outcome:
    """The trace of a file, validated (checker/traces/itf.py), or its `error` outcome."""
    from checker.traces import itf

    try:
        return itf.read(path)
    except ItfError as e:
        return Outcome(str(path), ERROR, message=f"{e.where}: {str(e).split(': ', 2)[-1]}")


def replay_file(path: str | Path, device: str = "cpu") -> Outcome:
    t = read_trace(path)
    if isinstance(t, Outcome):
        return t
    return replay_trace(t, device, str(path), check_model=False)  # reading re-ran it through the model


# -- patched designs on the pool -------------------------------------------------------------------
@contextlib.contextmanager
def _hook_add_chunked_req(trace: Trace, fn: Any) -> Any:
    """The pool's `PrefillAdder.add_chunked_req` replaced, while the replay runs, by the reviewer's
    function: it runs concretely on the pool's model view at that point of the pass (`to_state`,
    the adder's offsets as the model keeps them) and its admission of the chunked request is applied
    back to the pool's adder, so the pool then allocates, and fails or not, on its own tensors."""
    from fractions import Fraction

    from model.ops import Concrete
    from model.prefill_adder import Adder
    from model.system import System
    from pool import to_state
    from pool import scheduler as pool_scheduler

    cls = pool_scheduler.PrefillAdder
    original = cls.add_chunked_req
    system = System(trace.cfg, trace.design)
    _num, den = trace.cfg.new_token_ratio
    R = trace.cfg.num_reqs

    def view(pad: Any) -> Adder:
        adm = pad.can_run
        return Adder(rem_total_token_offset=int(pad.rem_total_token_offset * den), cur_rem_token_offset=pad.cur_rem_token_offset,
                     rem_input_tokens=pad.rem_input_tokens, rem_chunk_tokens=pad.rem_chunk_tokens,
                     rem_swa_token_offset=pad.rem_swa_token_offset, stopped=pad.stopped,
                     can_run=tuple(r in adm for r in range(R)),
                     extend=tuple(adm[r].extend if r in adm else 0 for r in range(R)),
                     prefix=tuple(adm[r].prefix if r in adm else 0 for r in range(R)),
                     new_chunked=tuple(adm[r].new_chunked if r in adm else False for r in range(R)),
                     fresh_slot=tuple(adm[r].fresh if r in adm else False for r in range(R)), result=pad.result)

    def patched(pad: Any, req: Any) -> None:
        x = system.ctx(Concrete(), trace.params)
        ad, _stays = fn(x, to_state(pad.sch), view(pad), req.rid)
        pad.rem_total_token_offset = Fraction(ad.rem_total_token_offset, den)
        pad.cur_rem_token_offset, pad.rem_input_tokens = ad.cur_rem_token_offset, ad.rem_input_tokens
        pad.rem_chunk_tokens, pad.rem_swa_token_offset = ad.rem_chunk_tokens, ad.rem_swa_token_offset
        pad.stopped, pad.result = bool(ad.stopped), ad.result
        pad.can_run = {r: pool_scheduler.Admission(ad.extend[r], ad.prefix[r], bool(ad.new_chunked[r]), bool(ad.fresh_slot[r]))
                       for r in range(R) if ad.can_run[r]}

    cls.add_chunked_req = patched
    try:
        yield
    finally:
        cls.add_chunked_req = original


# transition -> a context manager that makes the pool run a patch of it (see _hook_add_chunked_req)
POOL_HOOKS: dict[str, Any] = {"add_chunked_req": _hook_add_chunked_req}


# -- the same events on another design ------------------------------------------------------------
def base_preset(name: str) -> str:
    """The preset a design name starts from (`v0.5.13-without-x+m` -> `v0.5.13`); `current` for a
    name that starts from none."""
    return designs.base_preset(name) or "current"


def fixed_design(trace: Trace) -> Design:
    """The preset the trace's fixes were turned off from (`current` unless the design's name starts
    from another). A planted mutant stays when the property is about SGLang's busy check (the leak is
    still there and the fixed check must report it: #27228), and goes otherwise (no fix flag repairs
    a planted leak)."""
    base = base_preset(trace.design.name)
    keep = trace.prop in ("busy_check_sound", "busy_check_complete")
    mutants = trace.design.mutants if keep else frozenset()
    name = base + "".join(f"+{m}" for m in sorted(mutants))
    return Design(name, dict(PRESETS[base].fixes), mutants)


@dataclass
class EventsRun:
    steps: int
    violations: list[tuple[int, str]]  # (step, what) where the property fails on the pool
    stopped: str = ""  # why the run ended early (the scheduler died)


def replay_events(trace: Trace, design: Design, device: str = "cpu", props: list[str] | None = None) -> EventsRun:
    """Run the trace's recorded events (arrivals, turns, accepted tokens, forced retractions, ...)
    on the pool built for `design`; eviction follows the pool's LRU policy (recorded eviction
    picks name nodes of the other run). Returns where any of `props` fails on the pool."""
    from pool import ReplayChooser, Scheduler, violated

    props = props or ([trace.prop] if trace.prop else [])
    sch = Scheduler(trace.cfg, design, trace.params, device=device)
    ch = ReplayChooser(lenient=True)
    out: list[tuple[int, str]] = []
    for t, st in enumerate(trace.steps, 1):
        ch.set_picks(st.picks)
        sch.step(ch)
        for p in props:
            if violated(sch, p):
                out.append((t, p))
        if sch.oom:
            return EventsRun(t, out, f"the scheduler died at step {t}")
    return EventsRun(len(trace.steps), out)


# -- kvmc check's confirmation -----------------------------------------------------------------------
def confirm(trace: Trace, device: str = "cpu") -> Outcome:
    """Replay a counterexample `kvmc check` just found (no model re-run: the engine already did)."""
    return replay_trace(trace, device, f"{trace.design.name}/{trace.prop}", check_model=False, expect_violation=True)


def confirm_note(trace: Trace, device: str = "cpu") -> str:
    """One phrase for `kvmc check`'s report: `confirmed (reproduced on the pool, cpu)`, or the
    divergence (a kvmc bug), or why it could not be replayed."""
    o = confirm(trace, device)
    if o.status == REPRODUCED:
        return f"confirmed (reproduced on the pool, {device})"
    if o.status == DIVERGED:
        print(f"kvmc: warning: kvmc bug: the pool does not follow this counterexample: {o.line()}", file=sys.stderr)
        return f"NOT confirmed: diverged at step {o.step}: {o.field}: model={o.model!r}, pool={o.pool!r} (a kvmc bug)"
    return f"not confirmed: {o.status}: {o.message}"


class WarmPool:
    """A forked process that imports torch and the pool while `kvmc check` searches, and confirms
    the counterexamples it is sent (`confirm_note`). `import torch` takes about 1.8 s, most of a
    cold check that finds a shallow bug; in the parent it would follow the search, here it runs
    beside it on another core. Where fork is unavailable, or the child is gone, the parent replays
    in-process: the confirmation is the same either way."""

    def __init__(self, device: str = "cpu") -> None:
        import multiprocessing as mp

        self.device = device
        self.proc: Any = None
        self.conn: Any = None
        if "fork" in mp.get_all_start_methods() and not mp.current_process().daemon:
            ctx = mp.get_context("fork")
            self.conn, child = ctx.Pipe(duplex=True)
            self.proc = ctx.Process(target=_warm_pool_child, args=(child, device), daemon=True)
            self.proc.start()
            child.close()

    def confirm_note(self, trace: Trace) -> str:
        if self.proc is not None:
            if self.proc.is_alive():
                try:
                    self.conn.send(trace)
                    kind, note = self.conn.recv()
                    if kind == "note":
                        return str(note)
                except (EOFError, OSError):
                    pass
            self.close()  # the child is gone or failed: replay here (an error shows again, in-process)
        return confirm_note(trace, self.device)

    def close(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.conn.close()
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join()
        self.proc = None

    def __enter__(self) -> "WarmPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _warm_pool_child(conn: Any, device: str) -> None:
    import importlib

    importlib.import_module("pool")  # the point: torch and the pool are loaded before the first trace arrives

    while True:
        try:
            trace = conn.recv()
        except EOFError:
            return
        if trace is None:
            return
        try:
            conn.send(("note", confirm_note(trace, device)))
        except BaseException as e:  # the parent replays in-process and reports it there
            conn.send(("error", f"{type(e).__name__}: {e}"))
