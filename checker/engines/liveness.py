"""Liveness checking (specs/liveness.py): lasso counterexamples, fair cycles, bounded progress.

Lassos by BMC with a loop condition (Biere, Cimatti, Clarke, Zhu: "Symbolic model checking without
BDDs", the loop-closing translation of LTL BMC). The model is unrolled k steps by the BMC's own
encoding (checker/engines/encode.py, `Unrolling`); a lasso of length k is a path s_0 .. s_k whose
last state equals an earlier one, s_k = s_l (every state field; the parameters are constants), so
the steps l+1 .. k repeat forever. For a property `P(r) ~> Q(r)` the query at depth k is

    OR_l [ s_l = s_k  and  assumptions on the loop l..k  and
           OR_r ( not Q(r) at l..k-1  and  OR_i ( P(r) at i  and  not Q(r) at min(i, l)..k-1 ) ) ]

and the depths go 1, 2, ... so the first lasso found is one of the shortest. The assumptions
(fairness, environment) are the property's (specs/liveness.py): a loop-state condition at every
loop state, a loop-step condition at every loop step, a strong-fairness pair "enabled somewhere
on the loop => taken somewhere on the loop". `holds to depth k` means: no fair lasso of at most k
steps; it is not a proof (a longer prefix or loop may exist). `vacuous`: the trigger P was never
reachable within the bound.

A found lasso's numbers are made small by z3 rounds (`obj < best`, pools first, then lengths, then
knobs; the schedule's choices pinned, or free with `deep`: then the rounds show the smallest pools
at which a lasso of that length exists) and a concrete shrink (`shrink_lasso`), re-run through the
concrete model (checker/traces/trace.py, `run_concrete`), and the concrete lasso is checked again
by `check_lasso` (the same predicates, interpreted concretely): a lasso the concrete model does not
close is an encoding bug, never reported.

Fair cycles in the explicit engine's graph (checker/engines/explicit.py, `fair_cycles`): the
reachable (point, state) graph, restricted to states where Q fails and the loop-state assumptions
hold and to edges the loop-step assumptions allow; its strongly connected components that can meet
every strong-fairness pair (Emerson-Lei); a state with P that reaches one through states where Q
fails gives the lasso: shortest path to it, on to the component, and a cycle through a taken edge
of each fairness pair the component can take.

Bounded progress (`bounded_progress`): "from any state where the invariants and the loop-state
assumptions hold and a request is pending, some batch runs within N iterations", as a
k-induction-style query over a free state (checker/engines/induction.py's `free_state` and its
unbounded parameters): unsat proves it for every pool size. The invariants are the lemmas
(specs/lemmas.py) with `conservation` and `well_formed`, shown invariant first through the
induction engine's own API (`proved_invariants`: its base case, then Houdini at k=1). A
counterexample is a state and N no-batch steps from it.

This engine models nothing: it drives model/system.py and reads specs/liveness.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx
import z3

from model.config import PAGE_MULTIPLE, Params
from model.ops import Concrete, Infeasible, Symbolic
from model.state import FIELD_NAMES, NO_BATCH, State
from model.system import System
from model.transition import Ctx
from specs.lemmas import LEMMAS
from specs.liveness import LIVENESS, Assumption, Liveness, applicable
from specs.properties import PROPERTIES

from checker.engines.bmc import BMC
from checker.engines.encode import ModelOracle, Unrolling, _freshen, eval_params, eval_state
from checker.engines.explicit import Explorer, fair_cycles, readable_key
from checker.engines.induction import KInduction, unbounded_params
from checker.engines.substeps import free_state
from checker.engines.applies import beyond_symbolic_reach
from checker.engines.results import ConfigReport, Result
from checker.engines.shrink import MAX_PASSES, OBJECTIVE_ORDER, PinnedOracle, _candidates, _coordinates, _with
from checker.traces.trace import Step, Trace, TraceMismatch, run_concrete
from checker.verdict import Verdict

LOOP_REPEATS = 2  # a replay runs a lasso's loop this many more times (checker/replay/pool.py)


# -- the terms of one unrolling, concrete or symbolic ------------------------------------------------
class _Terms:
    """Per position of a path: each property's P(r) and Q(r), each assumption's loop-state condition;
    per step: each loop-step condition and strong-fairness pair. Built once per position as the path
    grows (the BMC adds one step per depth). `ctx_at(t, tag)` is the context a state's predicates
    are evaluated in; `pick_at(t)` answers step t's choices."""

    def __init__(self, system: System, props: list[Liveness], ctx_at: Callable[[int, str], Ctx],
                 pick_at: Callable[[int], Callable[[str], Any]]) -> None:
        self.system = system
        self.cfg = system.cfg
        self.props = props
        self.ctx_at = ctx_at
        self.pick_at = pick_at
        self.assumptions: list[Assumption] = []
        for p in props:
            for a in applicable(p, self.cfg):
                if a not in self.assumptions:
                    self.assumptions.append(a)
        self.P: dict[str, list[list[Any]]] = {p.name: [] for p in props}
        self.Q: dict[str, list[list[Any]]] = {p.name: [] for p in props}
        self.state_ok: dict[str, list[Any]] = {a.name: [] for a in self.assumptions if a.loop_state}
        self.step_ok: dict[str, list[Any]] = {a.name: [] for a in self.assumptions if a.loop_step}
        self.strong: dict[str, list[list[tuple[Any, Any]]]] = {a.name: [] for a in self.assumptions if a.strong}

    def add_state(self, t: int, s: State) -> None:
        R = self.cfg.num_reqs
        for p in self.props:
            x = self.ctx_at(t, f"live.{p.name}")
            self.P[p.name].append([p.trigger(x, s, r) for r in range(R)])
            self.Q[p.name].append([p.response(x, s, r) for r in range(R)])
        for a in self.assumptions:
            if a.loop_state:
                self.state_ok[a.name].append(a.loop_state(self.ctx_at(t, f"live.{a.name}"), s))

    def add_step(self, t: int, before: State, after: State) -> None:
        pick = self.pick_at(t)
        for a in self.assumptions:
            x = self.ctx_at(t, f"live.step.{a.name}")
            if a.loop_step:
                self.step_ok[a.name].append(a.loop_step(x, before, after, pick))
            if a.strong:
                self.strong[a.name].append(a.strong(x, before, after, pick))

    def fair(self, x: Ctx, prop: Liveness, l: int, k: int) -> Any:
        """The property's assumptions on the loop l..k (states l..k-1, steps l..k-1)."""
        names = {a.name for a in applicable(prop, self.cfg)}
        c: list[Any] = []
        for n, v in self.state_ok.items():
            if n in names:
                c += v[l:k]
        for n, v in self.step_ok.items():
            if n in names:
                c += v[l:k]
        for n, v in self.strong.items():
            if n not in names or k <= l:
                continue
            for i in range(len(v[l])):
                en = x.or_(*[v[t][i][0] for t in range(l, k)])
                tk = x.or_(*[v[t][i][1] for t in range(l, k)])
                c.append(x.implies(en, tk))
        return x.and_(*c)

    def violated(self, x: Ctx, prop: Liveness, l: int, k: int) -> Any:
        """P ~> Q fails on the lasso 0..k looping to l (module docstring)."""
        P, Q = self.P[prop.name], self.Q[prop.name]
        out = []
        for r in range(self.cfg.num_reqs):
            # nq[i]: Q(r) false at i..k-1
            nq: list[Any] = [True] * (k + 1)
            for i in range(k - 1, -1, -1):
                nq[i] = x.and_(x.not_(Q[i][r]), nq[i + 1])
            trig = x.or_(*[x.and_(P[i][r], nq[min(i, l)]) for i in range(k)])
            out.append(x.and_(nq[l], trig))
        return x.or_(*out)

    def which(self, prop: Liveness, l: int, k: int) -> tuple[int, int] | None:
        """Concretely: (request, first position of its trigger) of a violation on the lasso, or None."""
        P, Q = self.P[prop.name], self.Q[prop.name]
        for r in range(self.cfg.num_reqs):
            if any(Q[j][r] for j in range(l, k)):
                continue
            for i in range(k):
                if P[i][r] and not any(Q[j][r] for j in range(min(i, l), k)):
                    return r, i
        return None

    def failed_assumptions(self, prop: Liveness, l: int, k: int) -> list[str]:
        """Concretely: the assumptions the loop breaks (empty: a fair loop)."""
        x = self.ctx_at(0, "")
        out = []
        for a in applicable(prop, self.cfg):
            ok: list[Any] = []
            if a.loop_state:
                ok += self.state_ok[a.name][l:k]
            if a.loop_step:
                ok += self.step_ok[a.name][l:k]
            if a.strong and k > l:
                for i in range(len(self.strong[a.name][l])):
                    en = any(self.strong[a.name][t][i][0] for t in range(l, k))
                    tk = any(self.strong[a.name][t][i][1] for t in range(l, k))
                    ok.append(x.implies(en, tk))
            if not all(bool(v) for v in ok):
                out.append(a.name)
        return out


def states_equal(a: State, b: State) -> Any:
    """s_a = s_b field by field (a z3 conjunction; Python constants compared at once)."""
    c: list[Any] = []
    for f in FIELD_NAMES:
        va, vb = getattr(a, f), getattr(b, f)
        pairs = zip(va, vb) if isinstance(va, tuple) else [(va, vb)]
        for u, v in pairs:
            if u is v:
                continue
            if isinstance(u, (bool, int)) and isinstance(v, (bool, int)):
                if u != v:
                    return False
                continue
            c.append(u == v)
    return z3.And(*c) if c else True


# -- the concrete check of a lasso -----------------------------------------------------------------
@dataclass
class LassoCheck:
    """A lasso checked concretely against a liveness property."""

    closes: bool  # the last state equals state `loop`
    violated: bool  # the property fails on it (the loop is fair and P ~> Q fails)
    request: int | None = None  # the request slot that never gets its response
    trigger_at: int | None = None  # the first position of its trigger with no response after it
    unfair: list[str] = field(default_factory=list)  # assumptions the loop breaks

    def line(self, prop: Liveness) -> str:
        if not self.closes:
            return "not a lasso: the last state is not the loop's first state"
        if self.unfair:
            return f"the loop is unfair: it breaks {', '.join(self.unfair)}"
        if not self.violated:
            return f"{prop.name} holds on this lasso"
        return (f"violated: {prop.name}  r{self.request}: {prop.trigger_meaning} at state {self.trigger_at}, and on the loop "
                f"forever after: never {prop.response_meaning}")


def check_lasso(system: System, params: Params, states: list[State], picks: list[dict[str, Any]], loop: int,
                prop: str) -> LassoCheck:
    """Evaluate `prop` concretely on the lasso states[0..k] (k = len(states) - 1) looping to `loop`;
    `picks[t]` are step t+1's choices. The same predicates the BMC encodes."""
    lp = LIVENESS[prop]
    k = len(states) - 1
    x = system.ctx(Concrete(), params)
    terms = _Terms(system, [lp], lambda t, tag: x, lambda t: (lambda name, _p=picks[t]: _p.get(name, False)))
    for t, s in enumerate(states[:k]):
        terms.add_state(t, s)
    for t in range(k):
        terms.add_step(t, states[t], states[t + 1])
    closes = 0 <= loop < k and states[k] == states[loop]
    if not closes:
        return LassoCheck(False, False)
    unfair = terms.failed_assumptions(lp, loop, k)
    hit = terms.which(lp, loop, k)
    return LassoCheck(True, hit is not None and not unfair, hit[0] if hit else None, hit[1] if hit else None, unfair)


def check_trace(system: System, trace: Trace) -> LassoCheck:
    if trace.loop is None or trace.prop not in LIVENESS:
        raise ValueError(f"not a liveness lasso: loop={trace.loop!r}, property={trace.prop!r}")
    return check_lasso(system, trace.params, trace.states, [s.picks for s in trace.steps], trace.loop, trace.prop)


def unroll(trace: Trace, repeats: int = LOOP_REPEATS) -> Trace:
    """The lasso with its loop run `repeats` more times (the replay's input): a finite trace whose
    states at the end of every pass through the loop are the loop's first state again."""
    if trace.loop is None:
        return trace
    loop_steps = trace.steps[trace.loop:]
    steps = list(trace.steps) + [Step(s.action, dict(s.picks), s.state) for _ in range(repeats) for s in loop_steps]
    return Trace(trace.cfg, trace.design, trace.params, trace.init, steps, trace.prop, trace.engine, dict(trace.meta), None)


def loop_positions(trace: Trace, repeats: int = LOOP_REPEATS) -> list[int]:
    """In `unroll(trace, repeats)`: the positions where the loop's first state must recur."""
    assert trace.loop is not None
    n = trace.depth - trace.loop
    return [trace.loop + n * (i + 1) for i in range(repeats + 1)]


def lasso_breaks(system: System, params: Params, picks: list[dict[str, Any]], loop: int, prop: str) -> bool:
    """Does the schedule `picks` (every choice as recorded, `PinnedOracle`) run with `params` and
    give a fair lasso looping to `loop` that violates `prop`?"""
    if not system.params_ok(system.ctx(Concrete(), params)):
        return False
    try:
        states, _ = run_concrete(system, params, [("event_loop_iteration", q) for q in picks],
                                 oracle_for=lambda t: PinnedOracle(picks[t]), check_frames=False)
    except (TraceMismatch, Infeasible):
        return False
    return check_lasso(system, params, states, picks, loop, prop).violated


def shrink_lasso(system: System, params: Params, picks: list[dict[str, Any]], loop: int, prop: str) -> Params:
    """checker/engines/shrink.py's concrete shrink for a lasso: each number lowered, one at a time
    and in objective order, while the same schedule still closes a fair violating lasso."""
    if not lasso_breaks(system, params, picks, loop, prop):
        return params
    cfg = system.cfg
    for _ in range(MAX_PASSES):
        moved = False
        for name, i in _coordinates(system, params, None):
            cur = getattr(params, name) if i is None else getattr(params, name)[i]
            lo, _hi = cfg.bound(name)
            step = cfg.page_size if name in PAGE_MULTIPLE else 1
            if cur - step < lo or not lasso_breaks(system, _with(params, name, i, cur - step), picks, loop, prop):
                continue
            for v in _candidates(lo, cur, step):
                cand = _with(params, name, i, v)
                if lasso_breaks(system, cand, picks, loop, prop):
                    params, moved = cand, True
                    break
        if not moved:
            break
    return params


# -- BMC with a loop condition ------------------------------------------------------------------------
class LassoBMC:
    """Lasso search to a depth, all selected liveness properties on one unrolling (module docstring)."""

    def __init__(self, system: System, props: list[str], timeout_ms: int = 0, minimize: bool = True,
                 deep: bool = False, minimize_rounds: int = 24) -> None:
        """`minimize`: lower the lasso's numbers, its schedule kept (z3 rounds, then `shrink_lasso`);
        `deep`: the z3 rounds leave the choices free (the smallest pools at which a lasso of that
        length exists; slow: each round is a whole lasso query)."""
        self.system = system
        self.props = [LIVENESS[p] for p in props]
        self.timeout_ms = timeout_ms
        self.minimize = minimize
        self.deep = deep
        self.minimize_rounds = minimize_rounds
        self.minimal = True  # every deep round ended unsat (`_minimize`)

    def run(self, max_depth: int, progress: Callable[[int, float, dict[str, str]], None] | None = None) -> dict[str, Result]:
        t0 = time.perf_counter()
        u = Unrolling(self.system)
        solver = z3.Solver()
        if self.timeout_ms:
            solver.set("timeout", self.timeout_ms)
        solver.add(*u.init_cons)
        extra: list[Any] = []

        def ctx_at(t: int, tag: str) -> Ctx:
            x = self.system.ctx(Symbolic(t, prefix=f"{tag}."), u.params)
            extra.append(x)
            return x

        terms = _Terms(self.system, self.props, ctx_at,
                       lambda t: (lambda name, _c=u.step_choices[t]: _c.get(name, False)))
        x0 = self.system.ctx(Symbolic(0, prefix="live."), u.params)
        open_props = list(self.props)
        results: dict[str, Result] = {}
        witness: dict[str, int | None] = {p.name: None for p in self.props}
        solver_s = 0.0
        reached = 0

        def flush() -> None:
            for x in extra:
                solver.add(*x.ops.constraints)
            extra.clear()

        terms.add_state(0, u.states[0])
        for k in range(1, max_depth + 1):
            solver.add(*u.extend())
            terms.add_step(k - 1, u.states[k - 1], u.states[k])
            terms.add_state(k, u.states[k])  # position k: P/Q at the state the loop closes on (for depth k + 1)
            flush()
            for p in list(open_props):
                if witness[p.name] is None:  # is the trigger reachable at k - 1?
                    w = x0.or_(*terms.P[p.name][k - 1])
                    if w is not False:
                        solver.push()
                        if w is not True:
                            solver.add(w)
                        ts = time.perf_counter()
                        rw = solver.check()
                        solver_s += time.perf_counter() - ts
                        solver.pop()
                        if rw == z3.sat:
                            witness[p.name] = k - 1
                lasso = self._lasso(x0, terms, u, p, k)
                if lasso is False:
                    continue
                solver.push()
                solver.add(lasso)
                ts = time.perf_counter()
                r = solver.check()
                solver_s += time.perf_counter() - ts
                if r == z3.sat:
                    model = solver.model()
                    if self.minimize:
                        model = self._minimize(solver, u, model)
                    results[p.name] = self._result(u, terms, p, k, model, witness, time.perf_counter() - t0)
                    open_props.remove(p)
                elif r == z3.unknown:
                    results[p.name] = Result(p.name, Verdict.UNKNOWN, k, reason=f"solver: {solver.reason_unknown()} at depth {k}",
                                             witness_depth=witness[p.name], seconds=time.perf_counter() - t0)
                    open_props.remove(p)
                solver.pop()
            reached = k
            if progress:
                status = {p.name: ("open" if p in open_props else results[p.name].verdict.value) for p in self.props}
                progress(k, time.perf_counter() - t0, {**status, "_solver_s": f"{solver_s:.1f}"})
            if not open_props:
                break
        now = time.perf_counter() - t0
        for p in open_props:
            v = Verdict.HOLDS_TO_DEPTH if witness[p.name] is not None else Verdict.VACUOUS
            results[p.name] = Result(p.name, v, reached, None, witness[p.name], seconds=now)
        for res in results.values():
            res.solver_seconds = solver_s
            res.meta.update(engine="bmc-lasso", liveness=True,
                            assumptions=[a.name for a in applicable(LIVENESS[res.property], self.system.cfg)])
        return {p.name: results[p.name] for p in self.props}

    def _lasso(self, x: Ctx, terms: _Terms, u: Unrolling, p: Liveness, k: int) -> Any:
        loops = []
        for l in range(k):
            eq = states_equal(u.states[l], u.states[k])
            if eq is False:
                continue
            loops.append(x.and_(eq, terms.fair(x, p, l, k), terms.violated(x, p, l, k)))
        return x.or_(*loops) if loops else False

    def _minimize(self, solver: Any, u: Unrolling, model: Any) -> Any:
        """Smaller numbers, objective by objective (pools, then lengths, then knobs): each round asks
        z3 for a lasso of the same length with a smaller sum. The found model's choices stay pinned
        (a query about one schedule, quick), unless `deep`: then the choices are free and rounds that
        end unsat show the smallest pools at which a lasso of that length exists at all."""
        budget = self.minimize_rounds
        solver.push()
        pushed = 1
        if not self.deep:  # one schedule: each round is a query about one run (BMC's `_minimize` does the same)
            for choices in u.step_choices:
                for v in choices.values():
                    solver.add(v == model.eval(v, model_completion=True))
        for names in OBJECTIVE_ORDER:
            terms = []
            for n in names:
                v = getattr(u.params, n)
                terms += [e for e in (v if isinstance(v, tuple) else (v,)) if not isinstance(e, (bool, int))]
            if not terms:
                continue
            obj = z3.Sum(terms)
            best = model.eval(obj, model_completion=True).as_long()
            while budget > 0:
                budget -= 1
                solver.push()
                solver.add(obj < best)
                r = solver.check()
                m = solver.model() if r == z3.sat else None
                solver.pop()
                if m is None:
                    self.minimal = self.minimal and r == z3.unsat
                    break
                model = m
                best = model.eval(obj, model_completion=True).as_long()
            else:
                self.minimal = False
            solver.push()
            pushed += 1
            solver.add(obj == best)
        r = solver.check()
        if r == z3.sat:
            model = solver.model()
        for _ in range(pushed):
            solver.pop()
        return model

    def _result(self, u: Unrolling, terms: _Terms, p: Liveness, k: int, model: Any, witness: dict[str, int | None],
                secs: float) -> Result:
        x0 = self.system.ctx(Symbolic(0, prefix="live."), u.params)
        def holds(l: int) -> bool:
            v = x0.and_(states_equal(u.states[l], u.states[k]), terms.fair(x0, p, l, k), terms.violated(x0, p, l, k))
            return v if isinstance(v, bool) else z3.is_true(model.eval(v, model_completion=True))

        loop = next(l for l in range(k) if holds(l))
        params = eval_params(u.params, model)
        expected = [eval_state(u.states[t], model) for t in range(k + 1)]
        try:
            states, picks = run_concrete(self.system, params, [("event_loop_iteration", None)] * k,
                                         oracle_for=lambda t: ModelOracle(model, t), expected=expected)
        except TraceMismatch as e:
            return Result(p.name, Verdict.UNKNOWN, k, reason=f"encoding bug: the concrete model does not follow z3's lasso: "
                                                           f"{e.both_states()}", seconds=secs)
        chk = check_lasso(self.system, params, states, picks, loop, p.name)
        if chk.violated and self.minimize:
            params = shrink_lasso(self.system, params, picks, loop, p.name)
            states, picks = run_concrete(self.system, params, [("event_loop_iteration", q) for q in picks])
            chk = check_lasso(self.system, params, states, picks, loop, p.name)
        if not chk.violated:
            return Result(p.name, Verdict.UNKNOWN, k, reason=f"encoding bug: z3's lasso re-run concretely: {chk.line(p)}",
                          seconds=secs)
        steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(k)]
        tr = Trace(self.system.cfg, self.system.design, params, states[0], steps, p.name, "bmc-lasso",
                   {"violation": chk.line(p)}, loop)
        res = Result(p.name, Verdict.VIOLATED, k, tr, witness[p.name], seconds=secs)
        res.meta["loop"] = loop
        if self.deep:
            res.meta["smallest_pools"] = self.minimal  # z3 found no lasso of this length with smaller pools
        return res


# -- fair cycles in the explicit engine's graph ----------------------------------------------------------
def _shortest_fair_cycle(c: Any, a: int, fairness: Callable[[int, int, dict[str, Any]], list[tuple[bool, bool]]]) -> list[int]:
    """A cycle a -> ... -> a inside fair component `c` through one taking edge of every fairness
    instance some edge of `c` takes (so it is fair whatever it enables), as a node list."""
    need: list[tuple[int, int]] = []
    flags = {(u, v): fairness(u, v, e) for u, v, e in c.edges(data=True)}
    n_inst = max((len(f) for f in flags.values()), default=0)
    for i in range(n_inst):
        taking = [uv for uv, f in flags.items() if f[i][1]]
        if taking and not any(uv in need for uv in taking):
            need.append(min(taking, key=lambda uv: nx.shortest_path_length(c, a, uv[0])))
    path = [a]
    for u, v in need:
        path += nx.shortest_path(c, path[-1], u)[1:] + [v]
    if len(path) == 1:  # no edge required: the shortest way round
        best = min(c.successors(a), key=lambda b: 0 if b == a else nx.shortest_path_length(c, b, a))
        path.append(best)
    if path[-1] != a:
        path += nx.shortest_path(c, path[-1], a)[1:]
    return path


CANDIDATES = 64  # trigger states tried per component set (the nearest to a root first)


def explicit_lassos(system: System, props: list[str], depth: int, points: list[Params] | None = None,
                    max_states: int = 200_000, time_limit_s: float = 0.0) -> dict[str, Result]:
    """Lassos in the explicit engine's reachable graph to `depth` (module docstring): per property,
    a trigger state that reaches a fair component through states without the response (or lies in
    one), the shortest prefix plus loop among the CANDIDATES nearest such states. A graph cut at
    `depth` has fewer cycles, never a false one: `holds to depth` says no fair lasso lies within the
    explored states."""
    t0 = time.perf_counter()
    lps = [LIVENESS[p] for p in props]
    search = Explorer(system, ["well_formed"], points=points, max_states=max_states, time_limit_s=time_limit_s,
                      mark_all=True).run(depth)
    g = search.graph
    cfg = system.cfg
    R = cfg.num_reqs
    ctxs = [system.ctx(Concrete(), p) for p in search.points]
    roots = {g.nodes[n]["point"]: n for n in g.nodes if g.nodes[n]["depth"] == 0}
    out: dict[str, Result] = {}
    for lp in lps:
        assumptions = applicable(lp, cfg)

        def x_of(n: int) -> Ctx:
            return ctxs[g.nodes[n]["point"]]

        def st(n: int) -> State:
            return g.nodes[n]["state"]

        def keep_edge(u: int, v: int, e: dict[str, Any]) -> bool:
            pick = (lambda name, _p=e["picks"]: _p.get(name, False))
            return all(bool(a.loop_step(x_of(u), st(u), st(v), pick)) for a in assumptions if a.loop_step)

        def fairness(u: int, v: int, e: dict[str, Any]) -> list[tuple[bool, bool]]:
            pick = (lambda name, _p=e["picks"]: _p.get(name, False))
            return [(bool(en), bool(tk)) for a in assumptions if a.strong for en, tk in a.strong(x_of(u), st(u), st(v), pick)]

        witness = next((g.nodes[n]["depth"] for n in sorted(g.nodes, key=lambda n: g.nodes[n]["depth"])
                        if any(lp.trigger(x_of(n), st(n), r) for r in range(R))), None)
        best: tuple[int, list[int], int] | None = None  # (length, node path, loop index)
        for r in range(R):
            def keep_node(n: int, r: int = r) -> bool:
                x, s = x_of(n), st(n)
                return not lp.response(x, s, r) and all(bool(a.loop_state(x, s)) for a in assumptions if a.loop_state)

            comps = fair_cycles(g, keep_node, keep_edge, fairness)
            if not comps:
                continue
            comp_of = {a: c for c in comps for a in c.nodes}
            # the trigger at i, the response false from i on: i reaches a fair component through
            # states without the response (i itself may lie in the component: distance 0)
            no_q = g.subgraph([n for n in g.nodes if not lp.response(x_of(n), st(n), r)])
            dist, back = nx.multi_source_dijkstra(no_q.reverse(copy=False), set(comp_of))
            trig = sorted((n for n in dist if lp.trigger(x_of(n), st(n), r)), key=lambda n: g.nodes[n]["depth"] + dist[n])
            cycles: dict[int, list[int]] = {}
            for i in trig[:CANDIDATES]:
                a = back[i][0]  # the component state the shortest way from i leads to
                if a not in cycles:
                    cycles[a] = _shortest_fair_cycle(comp_of[a], a, fairness)
                prefix = nx.shortest_path(g, roots[g.nodes[i]["point"]], i) + list(reversed(back[i]))[1:]
                cand = (len(prefix) - 1 + len(cycles[a]) - 1, prefix + cycles[a][1:], len(prefix) - 1)
                key = lambda b: (b[0], readable_key(search.points[g.nodes[b[1][0]]["point"]]))  # noqa: E731
                if best is None or key(cand) < key(best):
                    best = cand
        secs = time.perf_counter() - t0
        meta = dict(engine="explicit-lasso", liveness=True, distinct_states=search.distinct_states,
                    transitions=search.transitions, parameter_points=len(search.points), exhausted_at=search.exhausted_at,
                    assumptions=[a.name for a in assumptions])
        if best is None:
            if search.stopped:
                res = Result(lp.name, Verdict.UNKNOWN, search.depth_reached, None, witness, seconds=secs,
                             reason=f"search stopped at depth {search.depth_reached} ({search.stopped}); no fair lasso among the states seen")
            else:
                res = Result(lp.name, Verdict.HOLDS_TO_DEPTH if witness is not None else Verdict.VACUOUS, search.depth_reached,
                             None, witness, seconds=secs)
        else:
            res = _explicit_trace(system, lp, g, search.points, best, witness, secs)
        res.meta.update(meta)
        out[lp.name] = res
    return out


def _explicit_trace(system: System, lp: Liveness, g: Any, points: list[Params], best: tuple[int, list[int], int],
                    witness: int | None, secs: float) -> Result:
    k, path, loop = best
    params = points[g.nodes[path[0]]["point"]]
    edges = [g.edges[a, b] for a, b in zip(path, path[1:])]
    states, picks = run_concrete(system, params, [("event_loop_iteration", e["picks"]) for e in edges],
                                 expected=[g.nodes[n]["state"] for n in path])
    chk = check_lasso(system, params, states, picks, loop, lp.name)
    if not chk.violated:
        return Result(lp.name, Verdict.UNKNOWN, k, reason=f"kvmc bug: the explicit engine's lasso re-run concretely: {chk.line(lp)}",
                      seconds=secs)
    steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(k)]
    tr = Trace(system.cfg, system.design, params, states[0], steps, lp.name, "explicit-lasso", {"violation": chk.line(lp)}, loop)
    res = Result(lp.name, Verdict.VIOLATED, k, tr, witness, seconds=secs)
    res.meta["loop"] = loop
    return res


# -- bounded progress by induction ---------------------------------------------------------------------
@dataclass
class Invariants:
    """Lemmas (and safety properties) shown to hold in every reachable state of a system: they hold in
    the initial state for every parameter (`base_failed` did not) and are jointly 1-inductive
    (checker/engines/induction.py, Houdini at k=1)."""

    lemmas: list[str]
    props: list[str]
    base_failed: list[str]
    dropped: dict[str, str]
    seconds: float


def proved_invariants(system: System, props: tuple[str, ...] = ("well_formed", "conservation"), timeout_ms: int = 0) -> Invariants:
    """The lemmas (specs/lemmas.py) and `props` that are invariants of `system`, through the induction
    engine's own API: its base case (a BMC at depth 0 over the unbounded parameters, which drops a
    lemma false in some initial state) and `KInduction.houdini(1)` over the rest."""
    t0 = time.perf_counter()
    base = BMC(system, list(props), minimize=False, params=unbounded_params(system))
    res = base.run(0)
    failed_base = sorted({d.split("@")[0][len("lemma:"):] for d in base.dropped})
    ok_props = [p for p in props if res[p].verdict is not Verdict.VIOLATED and res[p].verdict is not Verdict.UNKNOWN]
    lem = [n for n in LEMMAS if n not in failed_base]
    if not ok_props:
        return Invariants([], [], failed_base, {p: "fails in an initial state" for p in props}, time.perf_counter() - t0)
    h = KInduction(system, ok_props, lem, timeout_ms=timeout_ms).houdini(1)
    return Invariants(list(h.lemmas), list(h.proved), failed_base, dict(h.dropped), time.perf_counter() - t0)


@dataclass
class BoundedProgress:
    """`bounded_progress`'s answer: proved, a counterexample (a state where the invariants hold, a
    request is pending, and `steps` iterations run no batch), or unknown."""

    proved: bool
    steps: int
    unknown: str = ""
    cti: Trace | None = None
    seconds: float = 0.0

    def line(self) -> str:
        if self.proved:
            return f"bounded progress proved: a batch runs within {self.steps} iteration(s) of any reachable state with a pending request"
        if self.unknown:
            return f"bounded progress unknown: {self.unknown}"
        return f"bounded progress not proved: a state where the invariants hold runs no batch for {self.steps} iteration(s)"


def _z3(v: Any) -> Any:
    return z3.BoolVal(v) if isinstance(v, bool) else v


def bounded_progress(system: System, invariants: Invariants, steps: int = 1, prop: str = "progress",
                     timeout_ms: int = 0) -> BoundedProgress:
    """From any state where `invariants` hold (with the unbounded parameters of the induction engine),
    where `prop`'s trigger holds for some request and the loop-state assumptions hold, no `steps`
    iterations in a row (each state meeting the loop-state assumptions, each step the loop-step
    ones) may all end with no batch run. Unsat proves `progress` for every fair run (module
    docstring): a fair run that stalls for ever stays, after finitely many arrivals, turns and
    load-backs, in one reachable state with a pending request, and that state would be a
    counterexample here."""
    t0 = time.perf_counter()
    lp = LIVENESS[prop]
    assumptions = applicable(lp, system.cfg)
    params, cons = unbounded_params(system)
    solver = z3.Solver()
    if timeout_ms:
        solver.set("timeout", timeout_ms)
    solver.add(*cons)
    xp = system.ctx(Symbolic(0, prefix="bp.params."), params)
    ok = system.params_ok(xp)
    solver.add(_z3(ok), *xp.ops.constraints)
    states = [free_state(system, params, "bp0")]

    def at(t: int, tag: str) -> Ctx:
        return system.ctx(Symbolic(t, prefix=f"bp.{tag}."), params)

    x0 = at(0, "inv")
    for n in invariants.lemmas:
        solver.add(_z3(LEMMAS[n].holds(x0, states[0])))
    for n in invariants.props:
        solver.add(_z3(PROPERTIES[n].holds(x0, states[0])))
    solver.add(_z3(x0.or_(*[lp.trigger(x0, states[0], r) for r in range(system.cfg.num_reqs)])))
    solver.add(*x0.ops.constraints)
    choices: list[dict[str, Any]] = []
    for t in range(steps):
        x = system.ctx(Symbolic(t), params)
        en = system.enabled(x, states[t])
        nxt = system.step(x, states[t])
        c: list[Any] = [] if en is True else [_z3(en)]
        c += x.ops.constraints
        states.append(_freshen(nxt, t + 1, c, states[t]))
        solver.add(*c)
        choices.append(dict(x.ops.choices))
    stalls = []
    for t, s in enumerate(states):
        xa = at(t, "assume")
        for a in assumptions:
            if a.loop_state:
                solver.add(_z3(a.loop_state(xa, s)))
            if a.loop_step and t < steps:
                solver.add(_z3(a.loop_step(xa, s, states[t + 1], lambda name, _c=choices[t]: _c.get(name, False))))
        if t > 0:
            stalls.append(_z3(s.last_batch == NO_BATCH))
        solver.add(*xa.ops.constraints)
    # not vacuous: such a state and such steps exist at all (the assumptions do not contradict the invariants)
    r0 = solver.check()
    if r0 != z3.sat:
        why = "the invariants and the assumptions admit no state with a pending request" if r0 == z3.unsat else solver.reason_unknown()
        return BoundedProgress(False, steps, unknown=f"vacuous or undecided: {why}", seconds=time.perf_counter() - t0)
    solver.add(*stalls)
    r = solver.check()
    secs = time.perf_counter() - t0
    if r == z3.unsat:
        return BoundedProgress(True, steps, seconds=secs)
    if r == z3.unknown:
        return BoundedProgress(False, steps, unknown=solver.reason_unknown(), seconds=secs)
    m = solver.model()
    pv = eval_params(params, m)
    evs = [eval_state(s, m) for s in states]
    tr_steps = [Step("event_loop_iteration", {q: (bool(z3.is_true(m.eval(v, model_completion=True))) if z3.is_bool(v)
                                                  else m.eval(v, model_completion=True).as_long()) for q, v in ch.items()},
                     evs[t + 1]) for t, ch in enumerate(choices)]
    cti = Trace(system.cfg, system.design, pv, evs[0], tr_steps, prop, "bounded-progress",
                {"cti": True, "invariants": invariants.lemmas + invariants.props})
    return BoundedProgress(False, steps, cti=cti, seconds=secs)


BOUNDED_PROGRESS_STEPS = 2  # N tried: 1, then 2 (a batch within N iterations)


def prove_progress(system: System, timeout_ms: int = 0) -> tuple[BoundedProgress | None, Invariants]:
    """`progress` by bounded progress: the invariants first (`proved_invariants`), then N = 1, 2."""
    inv = proved_invariants(system, timeout_ms=timeout_ms)
    bp = None
    for n in range(1, BOUNDED_PROGRESS_STEPS + 1):
        bp = bounded_progress(system, inv, n, timeout_ms=timeout_ms)
        if bp.proved or bp.unknown:
            break
    return bp, inv


def check_config(design: Any, cfg: Any, props: list[str], depth: int, prove: bool = True, timeout_ms: int = 0,
                 progress: Any = None, minimize: bool = True, keep_going: bool = True, engine: str = "bmc",
                 **_: Any) -> ConfigReport:
    """`checker/engines/run.py::check_config` for liveness properties. Engine `bmc` (and `induction`):
    the lasso BMC to `depth`, then, when `progress` holds to that depth and `prove`, its bounded-
    progress proof (`prove_progress`: `proved (k=N)`, N the bound). Engine `explicit`: lassos in the
    explicit graph (`timeout_ms` limits the search). The random engine runs finite walks and checks no
    liveness property (`unknown`, saying so)."""
    t0 = time.perf_counter()
    system = System(cfg, design)
    if engine == "random":
        res = {p: Result(p, Verdict.UNKNOWN, 0, reason="the random engine runs finite walks; liveness needs --engine bmc or explicit")
               for p in props}
        return ConfigReport(cfg.name, res, time.perf_counter() - t0, {})
    if engine == "explicit":
        res = explicit_lassos(system, props, depth, time_limit_s=timeout_ms / 1000.0)
        return ConfigReport(cfg.name, res, time.perf_counter() - t0, {})
    res = LassoBMC(system, props, timeout_ms=timeout_ms, minimize=minimize).run(
        depth, progress=(lambda t, el, st: progress(cfg.name, t, el, st)) if progress else None)
    r = res.get("progress")
    if prove and r is not None and r.verdict is Verdict.HOLDS_TO_DEPTH:
        if progress:
            progress(cfg.name, depth, time.perf_counter() - t0, {"_phase": "proof: invariants, then bounded progress"})
        bp, inv = prove_progress(system, timeout_ms)
        r.meta["invariants"] = inv.lemmas + inv.props
        if bp is not None and bp.proved:
            r.meta["bmc_depth"] = r.depth
            r.verdict, r.depth = Verdict.PROVED, bp.steps
        elif bp is not None:
            r.reason = bp.line()
        r.meta["liveness_proof"] = (bp.line() if bp is not None else "no proof attempted") + (
            f" (relative to the invariants {', '.join(inv.lemmas + inv.props)}, shown inductive at k=1)" if bp and bp.proved else "")
    return ConfigReport(cfg.name, res, time.perf_counter() - t0, {})


def with_liveness(run_one: Callable[..., ConfigReport], engine: str) -> Callable[..., ConfigReport]:
    """run.py's per-config check extended to liveness properties: the safety properties go to the
    engine as before, the liveness ones to `check_config` here; one ConfigReport with both."""

    def run(design: Any, cfg: Any, props: list[str], depth: int, prove: bool = True, timeout_ms: int = 0,
            progress: Any = None, minimize: bool = True, keep_going: bool = True, **kw: Any) -> ConfigReport:
        t0 = time.perf_counter()
        live = [p for p in props if p in LIVENESS]
        safe = [p for p in props if p not in LIVENESS]
        results: dict[str, Result] = {}
        proof: dict[str, Any] = {}
        if safe:
            rep = run_one(design, cfg, safe, depth, prove, timeout_ms, progress, minimize, keep_going, **kw)
            results.update(rep.results)
            proof = rep.proof
        if live:
            # the portfolio's liveness runs on BMC's lassos, or on the explicit graph past z3's page reach
            eng = engine if engine != "portfolio" else "explicit" if beyond_symbolic_reach("bmc", cfg) else "bmc"
            results.update(check_config(design, cfg, live, depth, prove, timeout_ms, progress, minimize, keep_going,
                                        engine=eng).results)
        return ConfigReport(cfg.name, {p: results[p] for p in props}, time.perf_counter() - t0, proof)

    return run
