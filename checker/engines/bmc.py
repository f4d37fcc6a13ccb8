"""Bounded model checking with z3, incremental over depth (after pySMT's BMC: `x@t` symbols).

One solver for the whole run. At depth t one query asks whether any open property or any lemma
(specs/lemmas.py) fails at state t; if none does, all of them are asserted at t: they hold there
on every path, so they are facts, and they make the next depth's query about one step. If some
goal fails, each is asked on its own: a failing property gets its counterexample (the shortest,
since every earlier depth was unsat), a failing lemma is just no longer used.

A found model is made readable (smallest pools first, then lengths, by repeated tightening), then
re-run through the concrete interpretation: a trace the concrete model does not follow is an
encoding bug, raised as `TraceMismatch`, never reported as a counterexample.

A `seeder` (the random engine's `seed_run`, wired by checker/engines/run.py) may be asked for a concrete
run of exactly t steps that breaks a property, before depth t's query, when depth t - 1's queries
cost z3 at least `SEED_AFTER_WORK` units of its `rlimit count` (about 0.1-0.2 s here; the next
depth costs several times as much). A count, not a clock: the same check asks the same hunts and
finds the same counterexample on every machine. The run's parameters and choices are pinned in a
query of their own, which z3 answers at once (it is about one run), and the model it gives is
minimised and re-run like any other: the counterexample is still z3's and still the shortest. A
seed claims nothing else: the goals it does not break are asked as before, unpinned.

Relative induction (`relative`, off by default: see docs/engines.md): once a depth costs z3
`RELATIVE_AFTER_WORK` units, each goal is asked once whether ONE step from ANY state where every
current fact holds (the open properties and the lemmas still in use, the config's bounded
parameters) can break it. A goal for which that is unsat needs no query at any later depth while the
facts stay the same: the facts hold at depth t - 1 on every path (they were checked there), so the
goal holds at t, and it is asserted there as a fact before the other goals are asked. The facts
include goals the BMC itself established at t - 1 without being inductive (on hybrid_swa
`residency`, `lemma:private_chains`), which is what k-induction's Houdini cannot use; those stay
ordinary BMC goals. Each one-step query is capped by z3 work (`RELATIVE_*_RLIMIT`): all goals at
once, then one by one; a goal that follows at one state from those proved so far is proved too (the
single-state query of induction's `_consequences`); one with `conjuncts` whose query z3 gave up on
is split into its first-break cases (checker/engines/substeps.py). A sat or unknown answer only
leaves the goal to the BMC. When a lemma is dropped or a property settled the fact set changes and
the pass runs again for the new set (at the next depth that costs enough).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import z3

from model.config import Params
from model.ops import Symbolic
from model.state import State
from model.system import System
from specs.lemmas import LEMMAS
from checker.engines.applies import for_config
from specs.properties import PROPERTIES, Property

from checker import interrupt
from checker.engines.encode import ModelOracle, Unrolling, _freshen, eval_params, eval_state
from checker.engines.results import Result
from checker.engines.shrink import OBJECTIVE_ORDER, shrink
from checker.engines.substeps import first_break, free_state, term
from checker.progress import NOW
from checker.traces.trace import Step, Trace, TraceMismatch, run_concrete
from checker.verdict import Verdict


Progress = Callable[[int, float, dict[str, str]], None]
Seeder = Callable[[int, list[str], Callable[[], bool]], Any]  # (depth, open properties, give_up) -> Seed | None
SEED_AFTER_WORK = 1_000_000  # z3 `rlimit count` units spent on the previous depth (0.36 s: about 3M)
# Relative induction (module docstring): run once a depth has cost this much z3 work (hybrid_swa's
# depth 1: 7.5M units, 2 s; its depth 2 then costs 300M+, 60 s, without it), so shallow runs and
# the known bugs at depth 1-2 on the small configs never pay for it.
RELATIVE_AFTER_WORK = 5_000_000
# the caps of the pass's queries, in z3 work (about 5M units/s here). On hybrid_swa the joint query is
# unknown after 150M (34 s); one goal at a time, 11 goals are unsat in 1-8 s, four in 12-40 s, two
# are sat (residency, lemma:private_chains: counterexamples to induction, left to the BMC), and
# conservation is unknown after 300 s whole while its 228 first-break cases are each unsat in at
# most 18 s (100 s together).
RELATIVE_JOINT_RLIMIT = 20_000_000
RELATIVE_GOAL_RLIMIT = 40_000_000
RELATIVE_CASE_RLIMIT = 100_000_000


def _value(v: Any) -> Any:
    return bool(z3.is_true(v)) if z3.is_bool(v) else v.as_long()


def _open(sym: Params, val: Params, names: Any = None) -> list[tuple[Any, Any]]:
    """(symbol, value) for each parameter the bounds leave open (of `names`, else all)."""
    out: list[tuple[Any, Any]] = []
    for n in names if names is not None else sym.as_dict():
        sv, cv = getattr(sym, n), getattr(val, n)
        out += [(s, c) for s, c in (zip(sv, cv) if isinstance(sv, tuple) else [(sv, cv)]) if not isinstance(s, (bool, int))]
    return out


def _objective_value(sym: Params, val: Params, names: tuple[str, ...]) -> int:
    """An objective's sum (`BMC._objectives`) at a concrete point."""
    return sum(c for _s, c in _open(sym, val, names))


def param_pins(sym: Params, val: Params) -> list[Any]:
    """Equalities pinning the symbolic parameters to a concrete point."""
    return [s == c for s, c in _open(sym, val)]


class _Abandoned(Exception):
    """The run was told to stop inside a depth (see `BMC.run`'s `abandon`)."""


class BMC:
    def __init__(self, system: System, props: list[str] | None = None, timeout_ms: int = 0, minimize: bool = True,
                 minimize_rounds: int = 12, use_lemmas: bool = True, params: tuple[Any, list[Any]] | None = None,
                 fresh_per_depth: bool = False, seeder: Seeder | None = None, relative: bool = False) -> None:
        self.system = system
        self.relative = relative  # the relative-induction pass (module docstring); never with `params`
        self.seeder = seeder  # see the module docstring; never with `params` (no bounds to draw from)
        self.fresh_per_depth = fresh_per_depth  # non-incremental baseline for bench/: a new solver each depth
        self.params = params  # (Params, constraints) replacing the config's bounds (induction's base case)
        self.props: list[Property] = [PROPERTIES[p] for p in for_config(system.cfg, props or None)]
        self.timeout_ms = timeout_ms
        self.minimize = minimize
        self.minimize_rounds = minimize_rounds
        self.use_lemmas = use_lemmas
        self._guard = threading.Lock()
        self._in_check = False
        self._interrupted = False  # an interrupt_check landed during the current check

    def interrupt_check(self) -> bool:
        """Interrupt the run's current goal or witness query, if one is running (from another
        thread). Only a running check is interrupted: z3 cancels whatever call an interrupt lands
        in, and one that lands in a `push` leaves the context cancelled for every later query.
        Even so an interrupt sent while `check` is returning lands after it: `_Run.check` then
        clears the context (`interrupt.clear_z3`) before anything else runs."""
        with self._guard:
            if self._in_check:
                self._interrupted = True
                z3.main_ctx().interrupt()
                return True
        return False

    def _solver(self) -> Any:
        s = z3.Solver()
        if self.timeout_ms:
            s.set("timeout", self.timeout_ms)
        return s

    def _eval_prop(self, fn: Any, u: Unrolling, t: int, tag: str, solver: Any) -> Any:
        ops = Symbolic(t, prefix=f"{tag}.")
        x = self.system.ctx(ops, u.params)
        phi = fn(x, u.states[t])
        for c in ops.constraints:
            solver.add(c)
        return phi

    def run(self, max_depth: int, progress: Progress | None = None, stop: Callable[..., bool] | None = None,
            stop_on_violation: bool = False, abandon: Callable[[], bool] | None = None) -> dict[str, Result]:
        """Check every property at depths 0..max_depth; see the module docstring. `stop(t, witness,
        open)` may end the run after depth t (a proof has covered the deeper depths); `abandon()`,
        asked before each query and when one comes back unknown (another thread may call
        `interrupt_check` once a proof has closed), ends the run with depth t unfinished: the
        properties hold to t - 1. With `stop_on_violation` the run ends at the first depth where a
        property is violated (TLC's first-error mode); the others then hold only to that depth, and
        one without a witness yet is `unknown`, never vacuous."""
        run = _Run(self, abandon, stop_on_violation)
        self.dropped = run.dropped  # "lemma:name@t"; read by the induction engine's `stop`
        reached, cut_short = max_depth, False
        for t in range(max_depth + 1):
            NOW.depth = t
            try:
                unresolved = run.depth(t)
            except _Abandoned:  # depth t unfinished
                reached = t - 1
                break
            except BaseException as e:
                if not interrupt.requested():
                    raise
                raise run.interrupted(e, t, t - 1, f"at depth {t}") from None
            interrupt.established(self.system.cfg.name, run.account(t))
            try:
                if progress:  # "_solver_s": time inside z3 so far (the rest is encoding and minimising)
                    progress(t, time.perf_counter() - run.t0, {**run.status, "_solver_s": f"{run.solver_time:.1f}"})
                if not run.open_props:
                    break
                if stop_on_violation and any(r.verdict is Verdict.VIOLATED for r in run.results.values()):
                    reached, cut_short = (t - 1 if unresolved else t), True
                    break
                if stop is not None and stop(t, dict(run.witness), [p.name for p in run.open_props]):
                    reached = t
                    break
            except BaseException as e:  # depth t is done; the proof attempted after it (`stop`) was interrupted
                if not interrupt.requested():
                    raise
                raise run.interrupted(e, t, t, f"after depth {t}") from None
        return run.verdicts(reached, cut_short)

    # -- readable counterexamples -------------------------------------------------------------------
    def _objectives(self, u: Unrolling) -> list[tuple[tuple[str, ...], Any]]:
        """(parameter names, their sum) per objective, in `checker/engines/shrink.py`'s order: pools, then
        lengths, then knobs; an objective the bounds leave constant is left out."""
        out = []
        for names in OBJECTIVE_ORDER:
            terms = [sym for sym, _ in _open(u.params, u.params, names)]
            if terms:
                out.append((names, z3.Sum(terms)))
        return out

    def _minimize(self, solver: Any, u: Unrolling, model: Any, prop: str, depth: int) -> tuple[Any, bool]:
        """Smaller numbers for a failing model, objective by objective, within `minimize_rounds`
        queries. Returns (the smallest model found, whether the solver gave up on a query).

        Each objective starts, and each round goes on, from the numbers `checker/engines/shrink.py` finds
        for the schedule concretely (one parameter at a time, milliseconds a try, the objectives
        already tightened left as they are), so a round ends on a local minimum instead of just
        below the last model (#23174: 12 rounds, 7 s, lowering sums one by one, before; 5 rounds
        after). The model returned is z3's, pinned to the numbers found at the end.

        The found model's choices (arrivals, evictions, tombstones, ...) stay pinned: each round
        then asks about one schedule, whose branches depend only on the numbers, instead of
        searching every schedule again (on #23174: 25 s of rounds before, 9 s after, and smaller
        numbers because more rounds finish). The numbers are the smallest for that schedule;
        another schedule might fail with smaller ones."""
        gave_up = False
        budget = self.minimize_rounds
        solver.push()
        picks = [{q: _value(model.eval(v, model_completion=True)) for q, v in choices.items()} for choices in u.step_choices]
        for choices in u.step_choices:
            for v in choices.values():
                solver.add(v == model.eval(v, model_completion=True))
        objectives = self._objectives(u)
        params = eval_params(u.params, model)
        for k, (names, obj) in enumerate(objectives):
            solver.push()
            free = {n for ns, _o in objectives[k:] for n in ns}  # the sums already tightened stay
            params = shrink(self.system, params, picks, prop, free)
            best = _objective_value(u.params, params, names)
            while budget > 0:
                budget -= 1
                solver.push()
                solver.add(obj < best)
                r = solver.check()
                gave_up = gave_up or r == z3.unknown
                if r != z3.sat:
                    solver.pop()
                    break
                model = solver.model()
                solver.pop()
                params = shrink(self.system, eval_params(u.params, model), picks, prop, free)
                best = _objective_value(u.params, params, names)
            solver.add(obj == best)  # keep this objective while tightening the next one
        solver.add(*param_pins(u.params, params))  # z3's model of the numbers found
        r = solver.check()
        gave_up = gave_up or r == z3.unknown
        if r == z3.sat:
            model = solver.model()
        for _ in objectives:
            solver.pop()
        solver.pop()
        return model, gave_up

    def _trace(self, u: Unrolling, model: Any, depth: int, prop: str) -> Trace:
        params = eval_params(u.params, model)
        expected = [eval_state(u.states[t], model) for t in range(depth + 1)]
        states, picks = run_concrete(
            self.system, params, [("event_loop_iteration", None)] * depth, oracle_for=lambda t: ModelOracle(model, t), expected=expected
        )
        steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(depth)]
        return Trace(self.system.cfg, self.system.design, params, states[0], steps, prop, "bmc")


class _Run:
    """One `BMC.run`: the solver, the unrolling and what has been settled so far, one depth at a time."""

    def __init__(self, bmc: BMC, abandon: Callable[[], bool] | None, first_error: bool) -> None:
        self.bmc = bmc
        self.abandon = abandon
        self.first_error = first_error
        self.t0 = time.perf_counter()
        self.u = Unrolling(bmc.system, bmc.params)
        self.solver = bmc._solver()
        for c in self.u.init_cons:
            self.solver.add(c)
        self.results: dict[str, Result] = {}
        self.open_props = list(bmc.props)
        self.lemmas = [(f"lemma:{n}", lm.holds) for n, lm in LEMMAS.items()] if bmc.use_lemmas else []
        self.dropped: list[str] = []
        self.witness: dict[str, int | None] = {p.name: None for p in bmc.props}
        self.status: dict[str, str] = {p.name: "open" for p in bmc.props}
        self.solver_time = 0.0
        self.last_depth_work = 0  # z3 work (rlimit count) of the previous depth: is a seed worth a hunt?
        self.seed_time = 0.0
        self.seeded: dict[str, int] = {}  # property -> runs the hunt tried, for a seeded counterexample
        self.seed_runs = 0
        self.inductive: dict[frozenset[str], set[str]] = {}  # fact set -> its goals proved by one step from it
        self.relative_time = 0.0
        self.relative_used: dict[str, int] = {}  # goal -> the first depth it was assumed without a query

    def rebuild(self) -> None:
        """Go on with a fresh solver holding the same assertions: per depth when measuring
        `fresh_per_depth`, and after an unknown (a z3 solver used past its timeout has later
        answered sat with a model that breaks its assertions)."""
        kept = list(self.solver.assertions())
        self.solver = self.bmc._solver()
        self.solver.add(*kept)

    def check(self, solver: Any = None) -> Any:
        """One timed query (on the run's solver, or `solver`: the relative-induction pass's);
        `_Abandoned` when the run was told to stop (before it, or as the reason it came back
        unknown); `Interrupted` after a SIGINT/SIGTERM (an interrupted query is never an answer)."""
        if self.abandon is not None and self.abandon():
            raise _Abandoned
        interrupt.check()
        ts = time.perf_counter()
        bmc = self.bmc
        with bmc._guard:
            bmc._in_check = True
            bmc._interrupted = False
        NOW.query_started()
        try:
            r = (solver if solver is not None else self.solver).check()
        finally:
            NOW.query_ended()
            with bmc._guard:
                bmc._in_check = False
                hit = bmc._interrupted
            if hit:  # the interrupt may have landed after the check: no later push may see it
                interrupt.clear_z3()
        self.solver_time += time.perf_counter() - ts
        interrupt.check()
        if r == z3.unknown and self.abandon is not None and self.abandon():
            raise _Abandoned
        return r

    def account(self, t: int) -> str:
        """Depth t finished, in words: what a hard stop inside a later z3 query still reports."""
        shut = [f"{n} {v}" for n, v in self.status.items() if v != "open"]
        return (f"the BMC finished depth {t}: the other properties hold to depth {t}; " + ", ".join(shut)) if shut \
            else f"the BMC finished depth {t}: every property holds to depth {t}"

    def interrupted(self, e: BaseException, t: int, reached: int, where: str) -> interrupt.Interrupted:
        """The `Interrupted` for a signal that stopped this run at depth t (`e`: however it surfaced)
        with what was established attached: the open properties hold to `reached` (the depths
        finished; none: unknown), the violations found so far stand."""
        stop = interrupt.stopped(e)
        if reached >= 0:
            results = self.verdicts(reached, False)
        else:
            results = {p.name: self.results.get(p.name) or Result(p.name, Verdict.UNKNOWN, 0, reason="interrupted before depth 0 was checked")
                       for p in self.bmc.props}
        for r in results.values():
            r.meta["interrupted"] = where
        stop.results = results
        stop.where = stop.where or where
        return stop

    def depth(self, t: int) -> list[str]:
        """Unroll to depth t and settle every open goal there; returns the goals left unasked (first-
        error mode stops asking once a property is violated)."""
        bmc = self.bmc
        if t > 0 and bmc.fresh_per_depth:  # same assertions, nothing learned carried over
            self.rebuild()
        if t > 0:
            for c in self.u.extend():
                self.solver.add(c)
        goals = [(p.name, bmc._eval_prop(p.holds, self.u, t, p.name, self.solver)) for p in self.open_props]
        goals += [(n, bmc._eval_prop(fn, self.u, t, n, self.solver)) for n, fn in self.lemmas]
        goals = [(n, g) for n, g in goals if g is not True]
        if any(g is False for _, g in goals):
            bad = [n for n, g in goals if g is False]
            raise AssertionError(f"{bad} are false by construction at depth {t}: the property or the model is malformed")
        assumed = self._relative(t)
        for n, g in goals:
            if n in assumed:  # follows from depth t - 1's facts in one step (module docstring)
                self.solver.add(g)
                self.relative_used.setdefault(n, t)
        goals = [(n, g) for n, g in goals if n not in assumed]
        before = self._work()
        failing, unresolved = self._failing(t, goals, self._seed_pins(t))
        after = self._work()
        self.last_depth_work = after - before if after >= before else after  # a rebuild restarts the count
        for n, g in goals:
            if n not in failing and n not in unresolved:
                self.solver.add(g)  # proven at depth t on every path: a fact from now on
        self._record(t, failing)
        self._witnesses(t)
        return unresolved

    def _relative(self, t: int) -> set[str]:
        """The goals that need no query at depth t: those proved, once per fact set, by one step
        from any state where the facts hold (module docstring). The facts at depth t - 1 are the
        open properties and the lemmas in use now (a goal that failed or was unknown there has left
        them)."""
        bmc = self.bmc
        if not bmc.relative or bmc.params is not None or t == 0:
            return set()
        fns = [(p.name, p.holds) for p in self.open_props] + list(self.lemmas)
        key = frozenset(n for n, _ in fns)
        if key not in self.inductive:
            if self.last_depth_work < RELATIVE_AFTER_WORK:
                return set()
            ts = time.perf_counter()
            NOW.in_phase(f"relative induction: one step from the {len(fns)} facts")
            try:
                self.inductive[key] = _OneStep(bmc.system, self.u, fns).proved(self.check)
            finally:
                NOW.in_phase(None)
                self.relative_time += time.perf_counter() - ts
        return self.inductive[key]

    def _work(self) -> int:
        """z3's `rlimit count` on this solver so far (deterministic, unlike its time)."""
        st = self.solver.statistics()
        return int(st.get_key_value("rlimit count")) if "rlimit count" in st.keys() else 0

    def _seed_pins(self, t: int) -> list[Any]:
        """Equalities pinning the unrolling to a seed run of t steps (see the module docstring), or
        none: no seeder, depth t - 1 was quick, or the hunt found nothing."""
        bmc = self.bmc
        if bmc.seeder is None or bmc.params is not None or t == 0 or self.last_depth_work < SEED_AFTER_WORK:
            return []
        ts = time.perf_counter()
        NOW.in_phase("seed hunt (random runs of the model)")
        try:
            seed = bmc.seeder(t, [p.name for p in self.open_props], self.abandon or (lambda: False))
        finally:
            NOW.in_phase(None)
        self.seed_time += time.perf_counter() - ts
        if seed is None or len(seed.picks) != t:
            return []
        pins = param_pins(self.u.params, seed.params)
        for choices, picks in zip(self.u.step_choices, seed.picks):
            pins += [choices[q] == v for q, v in picks.items() if q in choices]
        self.seed_runs = seed.runs
        return pins

    def _failing(self, t: int, goals: list[tuple[str, Any]], pins: list[Any] = ()) -> tuple[dict[str, Any], list[str]]:
        """One query for all open goals; when it is sat, the goals false in its model are settled
        one by one and the rest asked again together, so a depth costs one query per group of
        failing goals rather than one per goal. In first-error mode the final "the rest hold" query
        is skipped once a property is violated: the rest then hold to depth t - 1. With `pins` (a
        seed run), the properties that run breaks are settled first, pinned to it."""
        failing: dict[str, Any] = {}
        pending = list(goals)
        props = [(n, g) for n, g in pending if not n.startswith("lemma:")]
        if pins and props:
            self.solver.push()
            self.solver.add(*pins)
            self.solver.add(z3.Or(*[z3.Not(g) for _, g in props]))
            r = self.check()
            newly = []
            if r == z3.sat:
                m0 = self.solver.model()
                newly = [(n, g) for n, g in props if z3.is_false(m0.eval(g, model_completion=True))]
            self.solver.pop()
            if r == z3.unknown:
                self.rebuild()
            for n, g in newly:
                self._settle(t, n, g, failing, pins)
                if isinstance(failing.get(n), Trace):
                    self.seeded[n] = self.seed_runs
            pending = [(n, g) for n, g in pending if n not in failing]
        while pending:
            if self.first_error and any(isinstance(w, Trace) for w in failing.values()):
                return failing, [n for n, _ in pending]
            self.solver.push()
            self.solver.add(z3.Or(*[z3.Not(g) for _, g in pending]))
            r = self.check()
            if r == z3.unsat:
                self.solver.pop()
                break
            if r == z3.unknown:  # ask each goal on its own
                self.solver.pop()
                self.rebuild()
                for n, g in pending:
                    self._settle(t, n, g, failing)
                break
            m0 = self.solver.model()
            newly = [(n, g) for n, g in pending if z3.is_false(m0.eval(g, model_completion=True))]
            self.solver.pop()
            if not newly:  # cannot happen for a sat Or(not g); be safe and ask each
                newly = list(pending)
            for n, g in newly:
                self._settle(t, n, g, failing)
            done = {n for n, _ in newly}
            pending = [(n, g) for n, g in pending if n not in done]
        return failing, []

    def _settle(self, t: int, n: str, g: Any, failing: dict[str, Any], pins: list[Any] = ()) -> None:
        """Ask goal n alone; unless it holds, `failing[n]` is its (minimised, concretely re-run)
        counterexample, None for a failing lemma, or the solver's reason when unknown. `pins`: ask
        pinned to a seed run first (the minimisation then runs unpinned but for the choices)."""
        solver = self.solver
        solver.push()
        solver.add(z3.Not(g))
        if pins:
            solver.push()
            solver.add(*pins)
            rp = self.check()
            pinned = solver.model() if rp == z3.sat else None
            solver.pop()
            if rp == z3.sat:
                spent = self._counterexample(t, n, pinned, failing)
                solver.pop()
                if spent:
                    self.rebuild()
                return
            if rp == z3.unknown:  # ask unpinned, on a fresh solver (see `rebuild`)
                solver.pop()
                self.rebuild()
                solver = self.solver
                solver.push()
                solver.add(z3.Not(g))
        ri = self.check()
        spent = ri == z3.unknown  # the solver ran past its timeout on some query
        if ri == z3.sat:
            spent = self._counterexample(t, n, solver.model(), failing)
        elif ri == z3.unknown:
            failing[n] = solver.reason_unknown()
        solver.pop()
        if spent:
            self.rebuild()

    def _counterexample(self, t: int, n: str, model: Any, failing: dict[str, Any]) -> bool:
        """`failing[n]` for a sat goal (the solver holds `Not(g)`): None for a lemma, else the
        minimised trace re-run concretely. Returns whether the minimisation gave up on a query."""
        bmc = self.bmc
        failing[n] = None
        spent = False
        if not n.startswith("lemma:"):
            if bmc.minimize:
                NOW.in_phase(f"minimising the counterexample of {n}")
                try:
                    model, spent = bmc._minimize(self.solver, self.u, model, n, t)
                finally:
                    NOW.in_phase(None)
            try:
                failing[n] = bmc._trace(self.u, model, t, n)
            except TraceMismatch as e:  # never reported as a counterexample
                failing[n] = f"encoding bug: the concrete model does not follow z3's trace: {e.both_states()}"
        return spent

    def _record(self, t: int, failing: dict[str, Any]) -> None:
        """A failing lemma is no longer used; a failing property is violated (or unknown)."""
        for n, what in failing.items():
            if n.startswith("lemma:"):
                self.lemmas = [(m, fn) for m, fn in self.lemmas if m != n]
                self.dropped.append(f"{n}@{t}")
                continue
            p = PROPERTIES[n]
            self.open_props.remove(p)
            if isinstance(what, Trace):
                self.results[n] = Result(n, Verdict.VIOLATED, t, what, self.witness[n], seconds=time.perf_counter() - self.t0)
                if n in self.seeded:  # found pinned to a random run first (the trace is z3's, minimised)
                    self.results[n].meta["seeded_by"] = f"random run ({self.seeded[n]} runs tried)"
                self.status[n] = f"violated@{t}"
            else:
                self.results[n] = Result(n, Verdict.UNKNOWN, t, reason=str(what), seconds=time.perf_counter() - self.t0)
                self.status[n] = "unknown"

    def _witnesses(self, t: int) -> None:
        """Is each property's witness reachable at depth t (once found, not asked again)?"""
        for p in self.bmc.props:
            if self.witness[p.name] is not None or (p.name in self.results and self.results[p.name].verdict is Verdict.VIOLATED):
                continue
            w = self.bmc._eval_prop(p.witness, self.u, t, f"witness.{p.name}", self.solver)
            if w is False:
                continue
            self.solver.push()
            if w is not True:
                self.solver.add(w)
            rw = self.check()
            self.solver.pop()
            if rw == z3.unknown:
                self.rebuild()
            if rw == z3.sat:
                self.witness[p.name] = t

    def verdicts(self, reached: int, cut_short: bool) -> dict[str, Result]:
        """Each property's result: the open ones hold to `reached` (vacuous without a witness;
        unknown when first-error mode stopped before they were asked)."""
        now = time.perf_counter() - self.t0
        for p in self.open_props:
            if self.witness[p.name] is not None:
                self.results[p.name] = Result(p.name, Verdict.HOLDS_TO_DEPTH, reached, None, self.witness[p.name], seconds=now)
            elif cut_short:
                self.results[p.name] = Result(p.name, Verdict.UNKNOWN, reached, None, None, seconds=now,
                                              reason=f"not checked past depth {reached}: stopped at the first violation")
            else:
                self.results[p.name] = Result(p.name, Verdict.VACUOUS, reached, None, None, seconds=now)
        for res in self.results.values():
            res.solver_seconds = self.solver_time
            res.meta["lemmas_dropped"] = list(self.dropped)
            if self.bmc.seeder is not None:
                res.meta["seed_hunt_s"] = round(self.seed_time, 2)
            if self.relative_used:  # goal -> first depth it followed from the facts before it, unasked
                res.meta["relative_induction"] = dict(self.relative_used)
                res.meta["relative_induction_s"] = round(self.relative_time, 2)
            if res.witness_depth is None and res.verdict is not Verdict.VIOLATED:
                res.witness_depth = self.witness[res.property]
        return {p.name: self.results[p.name] for p in self.bmc.props}



class _OneStep:
    """The relative-induction pass's query (module docstring): the config's bounded parameters, a
    free state where every fact `fns` holds, one iteration of the model (its checkpoints named, for
    `first_break`), and each fact read at the state after it as a goal."""

    def __init__(self, system: System, u: Unrolling, fns: list[tuple[str, Any]]) -> None:
        self.system, self.params = system, u.params
        s = z3.Solver()
        s.add(*u.param_cons)
        xp = system.ctx(Symbolic(0, prefix="rel.params."), u.params)
        ok = system.params_ok(xp)
        if ok is not True:
            s.add(ok)
        s.add(*xp.ops.constraints)
        self.pre: State = free_state(system, u.params, "rel")
        xf = system.ctx(Symbolic(0, prefix="rel.fact."), u.params)
        for _n, fn in fns:
            s.add(term(fn(xf, self.pre)))
        s.add(*xf.ops.constraints)
        x = system.ctx(Symbolic(0, name_checkpoints=True), u.params)
        en = system.enabled(x, self.pre)
        if en is not True:
            s.add(term(en))
        nxt = system.step(x, self.pre)
        cons: list[Any] = []
        self.post: State = _freshen(nxt, 1, cons, self.pre)
        s.add(*x.ops.constraints, *cons)
        self.checkpoints = x.ops.checkpoints
        # the goal's prefix and step index are first_break's, which re-reads the conjuncts there
        xg = system.ctx(Symbolic(1, prefix="goal."), u.params)
        self.goals = {n: term(fn(xg, self.post)) for n, fn in fns}
        s.add(*xg.ops.constraints)
        self.solver = s
        self.param_cons = [*u.param_cons, *([ok] if ok is not True else []), *xp.ops.constraints, *xg.ops.constraints]

    def _unsat(self, check: Callable[[Any], Any], cap: int, *assertions: Any, solver: Any = None) -> Any:
        s = solver if solver is not None else self.solver
        s.push()
        s.add(*assertions)
        s.set("rlimit", cap)
        try:
            return check(s)
        finally:
            s.pop()

    def proved(self, check: Callable[[Any], Any]) -> set[str]:
        """The goals whose one-step query is unsat: all at once, dropping those a model breaks
        (counterexamples to induction: left to the BMC) until the rest is unsat or z3 gives up;
        then one by one; then those that follow at the state after the step from the goals proved
        so far (a single-state query: the proved goals hold there, so whatever they imply does);
        then the rest by first-break cases. Only unsat answers are used: a sat or unknown one
        leaves the goal to the BMC."""
        pending = list(self.goals)
        while pending:
            self.solver.push()
            self.solver.add(z3.Or(*[z3.Not(self.goals[n]) for n in pending]))
            self.solver.set("rlimit", RELATIVE_JOINT_RLIMIT)
            r = check(self.solver)
            broken = []
            if r == z3.sat:
                m = self.solver.model()
                broken = [n for n in pending if z3.is_false(m.eval(self.goals[n], model_completion=True))]
            self.solver.pop()
            if r == z3.unsat:
                return set(pending)
            if not broken:  # unknown (a sat model always breaks one)
                break
            pending = [n for n in pending if n not in broken]
        out: set[str] = set()
        hard = []
        for n in pending:
            r = self._unsat(check, RELATIVE_GOAL_RLIMIT, z3.Not(self.goals[n]))
            if r == z3.unsat:
                out.add(n)
            elif r == z3.unknown:
                hard.append(n)
        if out and hard:
            one = z3.Solver()  # the state after the step alone, where the goals in `out` hold
            one.add(*self.param_cons, *[self.goals[n] for n in out])
            for n in list(hard):
                if self._unsat(check, RELATIVE_GOAL_RLIMIT, z3.Not(self.goals[n]), solver=one) == z3.unsat:
                    out.add(n)
                    hard.remove(n)
        out |= {n for n in hard if self._by_cases(n, check)}
        return out

    def _by_cases(self, n: str, check: Callable[[Any], Any]) -> bool:
        """Whether every first-break case of goal n (checker/engines/substeps.py) is unsat."""
        prop = PROPERTIES.get(n)
        if prop is None or prop.conjuncts is None:
            return False
        fb = first_break(self.system, self.params, [self.pre, self.post], self.goals[n], self.checkpoints, prop.conjuncts)
        if fb is None:
            return False
        return all(self._unsat(check, RELATIVE_CASE_RLIMIT, c) == z3.unsat for c in fb.cases)
