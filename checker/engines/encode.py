"""Unrolling the model for z3: one fresh symbol per changed field per step (`field[i]@t`).

The step is the model's own `step`, run with the `Symbolic` interpretation at step t; its result
terms are tied to fresh variables by equalities (no nested if-then-else across steps). A field
whose term did not change in a step keeps its previous variable, so untouched parts of the state
cost nothing.
"""

from __future__ import annotations

from typing import Any

import z3

from model.config import Params, symbolic_params
from model.ops import Symbolic
from model.state import BOOL_FIELDS, FIELD_NAMES, State
from model.system import System
from model.transition import Ctx


def _freshen(s: State, t: int, cons: list[Any], previous: State | None) -> State:
    """Replace every non-constant term that differs from `previous` by a fresh variable."""
    upd: dict[str, Any] = {}
    for f in FIELD_NAMES:
        v = getattr(s, f)
        old = getattr(previous, f) if previous is not None else None
        if isinstance(v, tuple):
            out = []
            for i, e in enumerate(v):
                o = old[i] if old is not None else None
                out.append(_tie(f"{f}[{i}]@{t}", e, o, cons, f in BOOL_FIELDS))
            upd[f] = tuple(out)
        else:
            upd[f] = _tie(f"{f}@{t}", v, old, cons, f in BOOL_FIELDS)
    return State(**upd)


def _tie(name: str, term: Any, old: Any, cons: list[Any], boolean: bool) -> Any:
    if term is old or isinstance(term, (bool, int)):
        return term  # unchanged, or a constant (no variable needed)
    if z3.is_const(term) and term.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        return term  # already a variable
    v = z3.Bool(name) if boolean else z3.Int(name)
    cons.append(v == term)
    return v


class Unrolling:
    """States 0..k of the system as z3 terms, with the constraints that tie them together."""

    def __init__(self, system: System, params: tuple[Params, list[Any]] | None = None) -> None:
        """`params`: (Params, their constraints) to use instead of the config's bounded ones (the
        induction engine's base case runs with unbounded parameters)."""
        self.system = system
        self.cfg = system.cfg
        self.params, self.param_cons = params if params is not None else symbolic_params(self.cfg, z3)
        x0 = self.ctx(0)
        self.init_cons: list[Any] = list(self.param_cons)
        ok = system.params_ok(x0)
        if ok is not True:
            self.init_cons.append(ok)
        self.states: list[State] = [system.init(x0)]
        self.step_cons: list[list[Any]] = []
        self.step_choices: list[dict[str, Any]] = []

    def ctx(self, t: int, prefix: str = "") -> Ctx:
        return self.system.ctx(Symbolic(t, prefix), self.params)

    @property
    def depth(self) -> int:
        return len(self.states) - 1

    def extend(self) -> list[Any]:
        """Add one step; returns its constraints (also kept in step_cons)."""
        t = self.depth
        x = self.ctx(t)
        s = self.states[t]
        enabled = self.system.enabled(x, s)
        nxt = self.system.step(x, s)
        cons: list[Any] = []
        if enabled is not True:
            cons.append(enabled)
        cons += x.ops.constraints
        new = _freshen(nxt, t + 1, cons, s)
        self.states.append(new)
        self.step_cons.append(cons)
        self.step_choices.append(dict(x.ops.choices))
        return cons


def _num(r: Any) -> int:
    return r.as_long()


def eval_params(params: Params, model: Any) -> Params:
    def ev(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(ev(e) for e in v)
        if isinstance(v, (bool, int)):
            return v
        r = model.eval(v, model_completion=True)
        return bool(z3.is_true(r)) if z3.is_bool(r) else _num(r)

    return Params(**{k: ev(v) for k, v in params.as_dict().items()})


def eval_state(s: State, model: Any) -> State:
    def ev(v: Any) -> Any:
        if isinstance(v, (bool, int)):
            return v
        r = model.eval(v, model_completion=True)
        return bool(z3.is_true(r)) if z3.is_bool(r) else _num(r)

    return State(**{f: tuple(ev(e) for e in getattr(s, f)) if isinstance(getattr(s, f), tuple) else ev(getattr(s, f)) for f in FIELD_NAMES})


class ModelOracle:
    """Answers a concrete run's choices at step t from a z3 model."""

    def __init__(self, model: Any, t: int) -> None:
        self.model = model
        self.t = t

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        var = z3.Int(f"{name}@{self.t}")
        v = _num(self.model.eval(var, model_completion=True))
        return v if lo <= v <= hi else lo

    def pick_bool(self, name: str) -> bool:
        return bool(z3.is_true(self.model.eval(z3.Bool(f"{name}@{self.t}"), model_completion=True)))
