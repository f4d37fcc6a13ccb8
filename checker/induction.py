"""k-induction over the model, with named lemmas (pySMT's `get_k_induction`, mypyvy's
per-invariant checks).

Base case: bounded model checking to depth k (checker/bmc.py). Step case: from *any* k
consecutive states (not only reachable ones) in which the property and every lemma hold, with
enabled transitions between them, the property and every lemma hold in the next state. The step
case runs with the pool sizes, the window, the chunk size and every length fully symbolic
(unbounded integers, constrained only by `params_ok`); only the config's shape is fixed (number of
request slots, atoms, page size, features). When both close, the verdict is `proved (k=N)`: the
property holds at every depth, for the model under that shape. That is a statement about the
model, not about SGLang.

When the step case fails, the failing state sequence is a counterexample to induction (CTI): a
state that satisfies everything assumed but is probably unreachable; it is returned as a trace so
a person can add a lemma (specs/lemmas.py) that rules it out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import z3

from model.config import Params, symbolic_params
from model.ops import Symbolic
from model.state import BOOL_FIELDS, FIELD_NAMES, State
from model.system import System
from specs.lemmas import LEMMAS
from specs.properties import PROPERTIES

from .encode import _freshen, eval_params, eval_state
from .trace import Step, Trace


def unbounded_params(system: System) -> tuple[Params, list[Any]]:
    """Every parameter a fresh integer: the config's bounds are dropped, page multiples kept."""
    cfg = system.cfg
    ps = cfg.page_size
    cons: list[Any] = []
    bounded, _ = symbolic_params(cfg, z3)

    def free(v: Any, name: str, page: bool) -> Any:
        if isinstance(v, bool):
            return z3.Bool(name + "!")
        if page and ps > 1:
            k = z3.Int(name + "!/pages")
            return k * ps
        return z3.Int(name + "!")

    d = {}
    for k, v in bounded.as_dict().items():
        page = k in ("full_tokens", "swa_tokens", "warm_len")
        if isinstance(v, tuple):
            d[k] = tuple(free(e, f"{k}[{i}]", page) for i, e in enumerate(v))
        else:
            d[k] = free(v, k, page)
    p = Params(**d)
    # features the config does not have keep their constant
    if not cfg.hybrid_swa:
        p = Params(**{**p.as_dict(), "swa_tokens": 0, "sliding_window_size": 0})
    if not cfg.chunked_prefill:
        p = Params(**{**p.as_dict(), "chunked_prefill_size": 0})
    if not cfg.hicache:
        p = Params(**{**p.as_dict(), "warm_host": tuple(False for _ in p.warm_host)})
    return p, cons


def free_state(system: System, params: Params, tag: str) -> State:
    x = system.ctx(Symbolic(0), params)
    shape = system.init(x)
    d = {}
    for f in FIELD_NAMES:
        v = getattr(shape, f)
        mk = z3.Bool if f in BOOL_FIELDS else z3.Int
        d[f] = tuple(mk(f"{f}[{i}]@{tag}") for i in range(len(v))) if isinstance(v, tuple) else mk(f"{f}@{tag}")
    return State(**d)


@dataclass
class StepResult:
    closed: bool
    unknown: bool
    failed: list[str]  # names of the invariants that fail in the CTI
    cti: Trace | None
    seconds: float
    reason: str = ""


class KInduction:
    def __init__(self, system: System, props: list[str], lemmas: list[str] | None = None, timeout_ms: int = 0) -> None:
        self.system = system
        self.props = props
        self.lemmas = list(LEMMAS) if lemmas is None else lemmas
        self.timeout_ms = timeout_ms

    def _invariants(self) -> list[tuple[str, Any]]:
        out = [(p, PROPERTIES[p].holds) for p in self.props]
        out += [(f"lemma:{n}", LEMMAS[n].holds) for n in self.lemmas]
        return out

    def step_case(self, k: int) -> StepResult:
        t0 = time.perf_counter()
        sysm = self.system
        params, cons = unbounded_params(sysm)
        solver = z3.Solver()
        if self.timeout_ms:
            solver.set("timeout", self.timeout_ms)
        for c in cons:
            solver.add(c)
        x0 = sysm.ctx(Symbolic(0, prefix="ind."), params)
        ok = sysm.params_ok(x0)
        if ok is not True:
            solver.add(ok)
        states = [free_state(sysm, params, "k0")]
        invs = self._invariants()
        for t in range(k):
            xi = sysm.ctx(Symbolic(t, prefix=f"inv{t}."), params)
            for _, fn in invs:
                v = fn(xi, states[t])
                if v is not True:
                    solver.add(v)
            solver.add(*xi.ops.constraints)
            x = sysm.ctx(Symbolic(t), params)
            en = sysm.enabled(x, states[t])
            if en is not True:
                solver.add(en)
            nxt = sysm.step(x, states[t])
            step_cons: list[Any] = []
            states.append(_freshen(nxt, t + 1, step_cons, states[t]))
            solver.add(*x.ops.constraints)
            solver.add(*step_cons)
        xk = sysm.ctx(Symbolic(k, prefix="goal."), params)
        goals = []
        for name, fn in invs:
            v = fn(xk, states[k])
            goals.append((name, v))
        solver.add(*xk.ops.constraints)
        solver.push()
        solver.add(z3.Or(*[z3.Not(v) if not isinstance(v, bool) else z3.BoolVal(not v) for _, v in goals]))
        r = solver.check()
        if r == z3.unsat:
            return StepResult(True, False, [], None, time.perf_counter() - t0)
        if r == z3.unknown:
            return StepResult(False, True, [], None, time.perf_counter() - t0, solver.reason_unknown())
        m = solver.model()
        failed = [n for n, v in goals if not isinstance(v, bool) and z3.is_false(m.eval(v, model_completion=True))]
        failed += [n for n, v in goals if v is False]
        cti = self._cti(m, params, states)
        return StepResult(False, False, failed, cti, time.perf_counter() - t0)

    def _cti(self, m: Any, params: Params, states: list[State]) -> Trace:
        p = eval_params(params, m)
        ss = [eval_state(s, m) for s in states]
        steps = [Step("event_loop_iteration", {}, s) for s in ss[1:]]
        return Trace(self.system.cfg, self.system.design, p, ss[0], steps, None, "induction-cti")
