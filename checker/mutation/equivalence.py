"""Is a mutant equivalent to the model? One step of each from the same symbolic state, compared.

The state is free (every field a fresh symbol, as in the induction step, checker/engines/induction.py)
and satisfies every lemma of specs/lemmas.py (facts about the reachable states of the model the
lemmas were proved for); the parameters are unbounded but well formed (`params_ok`). Both steps
read the same choice variables (`arrive[0]`, `prefill.evict.evict[3]`, ...: a mutant that asks a
choice the model does not ask gets a free one). z3 is asked for a state and choices where

* the model's assumptions (`x.assume`, the choices' ranges) and the mutant's disagree, or
* both hold and some field of the next state differs, or
* what a property reads of the state differs (`property_reads`: a mutant of SGLang's busy or idle
  check changes no step, only what `busy_check_sound` or `idle_check_sound` sees).

Unsat: from every state the lemmas allow, the mutant has exactly the model's successors, so
(its initial states being the model's) it reaches exactly the model's states: no property can
tell them apart, at any depth. That is `equivalent`, a proof for the config's shape (request
slots, atoms, page size, features) with every pool size and length. Sat is a witness that the
step differs (a state and choices, maybe unreachable: the lemmas are not all that is true);
unknown (the time limit) proves nothing.

Cheap first: when both encodings build the very same terms (the mutation sits on a path the
config's constants cut off, or rewrites a term into an identical one), no solver is needed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import z3

from model.designs import Design
from model.ops import Symbolic
from model.state import FIELD_NAMES, State
from model.system import System
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS

from checker.engines.induction import _parameter_solver
from checker.engines.substeps import free_state


class _Plain(Symbolic):
    """Symbolic without named intermediate values: `let` returns the term itself, so the two
    encodings share no auxiliary names and every constraint is an assumption of the step."""

    def let(self, name: str, v: Any) -> Any:
        return v


@dataclass
class Equivalence:
    config: str
    verdict: str  # "equivalent" | "differs" | "unknown"
    how: str  # "identical terms" | "z3" | ...
    seconds: float
    fields: list[str] = field(default_factory=list)  # fields the step may change differently
    witness: dict[str, Any] = field(default_factory=dict)  # a differing state's fields (sat)
    reason: str = ""


def _flat(s: State) -> list[tuple[str, Any]]:
    out = []
    for f in FIELD_NAMES:
        v = getattr(s, f)
        if isinstance(v, tuple):
            out += [(f"{f}[{i}]", e) for i, e in enumerate(v)]
        else:
            out.append((f, v))
    return out


def _term(v: Any) -> Any:
    if isinstance(v, bool):
        return z3.BoolVal(v)
    if isinstance(v, int):
        return z3.IntVal(v)
    return v


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, (bool, int)) or isinstance(b, (bool, int)):
        return type(a) is type(b) and a == b
    return bool(a.eq(b))


def _and(cs: list[Any]) -> Any:
    cs = [_term(c) for c in cs if c is not True]
    return z3.And(*cs) if cs else z3.BoolVal(True)


def unbounded(system: System) -> Any:
    from checker.engines.induction import unbounded_params

    return unbounded_params(system)[0]


def step_terms(system: System, params: Any, s0: State) -> tuple[State, list[Any], dict[str, Any]]:
    x = system.ctx(_Plain(0, prefix="eq."), params)
    nxt = system.step(x, s0)
    return nxt, list(x.ops.constraints), dict(x.ops.choices)


def property_reads(x: Any, s: State) -> list[tuple[str, Any]]:
    """What the properties read of state `s` through context `x` (its design, its interpretation):
    each of the config's properties' `holds` and `witness`. A read-only transition only the
    properties call (SGLang's busy and idle checks) changes these and not the step; a mutant of it
    is equivalent only if they are equal too."""
    from specs.properties import PROPERTIES

    from checker.engines.applies import for_config

    out = []
    for n in for_config(x.cfg):
        out.append((f"{n}.holds", PROPERTIES[n].holds(x, s)))
        out.append((f"{n}.witness", PROPERTIES[n].witness(x, s)))
    return out


def symbolic_reads(system: System, params: Any, s0: State) -> list[tuple[str, Any]]:
    """`property_reads` of the free state `s0` as terms (no named intermediate values)."""
    return property_reads(system.ctx(_Plain(0, prefix="eqr."), params), s0)


def check(config: str, mutant_design: Design, base: Design, timeout_ms: int = 60_000) -> Equivalence:
    """Whether `mutant_design`'s step equals `base`'s on `config` under the lemmas (module docstring)."""
    t0 = time.perf_counter()
    cfg = CONFIGS[config]
    orig, mut = System(cfg, base), System(cfg, mutant_design)
    solver, params = _parameter_solver(orig, "eqp.")
    s0 = free_state(orig, params, "eq0")
    try:
        post_o, cons_o, ch_o = step_terms(orig, params, s0)
        post_m, cons_m, ch_m = step_terms(mut, params, s0)
        reads_o, reads_m = symbolic_reads(orig, params, s0), symbolic_reads(mut, params, s0)
    except Exception as e:  # the mutant does not encode (a Python error in its symbolic run)
        return Equivalence(config, "differs", "crash", time.perf_counter() - t0,
                           reason=f"the mutant's symbolic step raised {type(e).__name__}: {e}")
    diff = [(n, a, b) for (n, a), (_m, b) in zip(_flat(post_o) + reads_o, _flat(post_m) + reads_m) if not _same(a, b)]
    same_cons = len(cons_o) == len(cons_m) and all(_same(a, b) for a, b in zip(cons_o, cons_m))
    if not diff and same_cons:
        return Equivalence(config, "equivalent", "identical terms", time.perf_counter() - t0)
    x = orig.ctx(Symbolic(0, prefix="eqlem."), params)
    en = orig.enabled(x, s0)
    facts = [_term(lm.holds(x, s0)) for lm in LEMMAS.values()] + [_term(en)] + list(x.ops.constraints)
    solver.add(*facts)
    if timeout_ms:
        solver.set("timeout", timeout_ms)
    a_o, a_m = _and(cons_o), _and(cons_m)
    differs = z3.Or(*[_term(a) != _term(b) for _n, a, b in diff]) if diff else z3.BoolVal(False)
    solver.add(z3.Or(a_o != a_m, z3.And(a_o, a_m, differs)))
    r = solver.check()
    el = time.perf_counter() - t0
    names = [n for n, _a, _b in diff]
    if r == z3.unsat:
        return Equivalence(config, "equivalent", "z3", el, names)
    if r == z3.sat:
        m = solver.model()
        wit = {}
        for n, a, b in diff:
            va, vb = m.eval(_term(a), model_completion=True), m.eval(_term(b), model_completion=True)
            if not va.eq(vb):
                wit[n] = (str(va), str(vb))
        if not wit:
            wit["assumptions"] = (str(m.eval(a_o, model_completion=True)), str(m.eval(a_m, model_completion=True)))
        return Equivalence(config, "differs", "z3", el, names, wit)
    return Equivalence(config, "unknown", "z3", el, names, reason=f"z3: {solver.reason_unknown()}")
