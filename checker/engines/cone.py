"""A first-break case's local queries: the part of a step query that one sub-step depends on.

A first-break case (checker/engines/induction.py, `first_break`) asks whether one sub-step of an iteration,
from checkpoint i-1 to checkpoint i, can break a ledger conjunct that held at i-1. In the induction
step the state at every checkpoint is named (model/ops.py, `Symbolic.checkpoint`: a fresh symbol
per changed field, tied to its value by an equality), so a sub-step's own definitions are a small
part of the query. A local query keeps the case and, following definitions from its symbols,
every assertion it depends on, but does not follow the definitions of the names given at the
checkpoints outside a window: `query(case, i)` follows only checkpoint i's, so the state the
sub-step starts from is free except for what the kept assertions say of it (the lemmas on the
state before the step, the path it was reached on); `query(case, i, back=i)` follows every
checkpoint up to i, and leaves out only the sub-steps after it (on a prefill, the whole decode
branch, which the step query carries on every case).

That is a relaxation: its assertions are a subset of the whole case query's, so when it is unsat
the case is unsat (and is answered so); when it is sat the sub-step relies on something said
where the window does not reach, and the whole case is asked as before. A sat local answer is
never a counterexample.

Measured on hybrid_swa_hicache's `conservation` (k=1, 360 first-break cases), the sub-step alone:
329 unsat at 0.0-0.6 s each, 31 sat at 0.3-2.8 s (the admissions, allocations and prefill
results rely on what came before them); with every sub-step before it, a prefill result's case
is unsat in 6-20 s, where the whole case query was unknown after 15 s and its splits took hours.
"""

from __future__ import annotations

from typing import Any, Iterable

import z3

from checker.engines.dag import fold


def _symbol(e: Any) -> bool:
    return z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED


def _symbols(e: Any, kids: list[frozenset[int]]) -> frozenset[int]:
    return frozenset((e.get_id(),)) if _symbol(e) else frozenset().union(*kids)


class Cone:
    """The assertions of one step query, indexed by the symbols they mention.

    `named[i]` are the ids of the symbols that name the state at checkpoint i (0: the state before
    the step, whose symbols are free and never cut)."""

    def __init__(self, assertions: Iterable[Any], named: list[set[int]]) -> None:
        self._memo: dict[int, tuple[Any, frozenset[int]]] = {}
        self.defs: dict[int, Any] = {}  # symbol id -> its defining `symbol == term` (the first one)
        self.others: list[tuple[Any, frozenset[int]]] = []
        for a in assertions:
            if z3.is_eq(a) and _symbol(a.arg(0)) and a.arg(0).get_id() not in self.defs:
                self.defs[a.arg(0).get_id()] = a
            else:
                self.others.append((a, self.symbols(a)))
        self.mentions: dict[int, list[int]] = {}
        for j, (_a, ss) in enumerate(self.others):
            for v in ss:
                self.mentions.setdefault(v, []).append(j)
        self.free = named[0] if named else set()
        self.named = named

    def symbols(self, root: Any) -> frozenset[int]:
        """Ids of the uninterpreted constants in `root` (memoised over the shared DAG)."""
        return fold(root, self._memo, _symbols)

    def query(self, case: Any, step: int | None, back: int = 0, future: bool = False) -> list[Any]:
        """The case and the assertions it depends on, the other checkpoints' names left free.
        `step`: the checkpoint the case's sub-step ends at, or None; the names of checkpoints
        step - back .. step are followed (`back` widens the query to the sub-steps before), and
        with `future` those of the checkpoints after it."""
        lo = max(1, step - back) if step else 0
        own = set().union(*self.named[lo:step + 1]) - set().union(*self.named[:lo]) if step else set()
        if future and step:
            own |= set().union(*self.named[step + 1:]) - set().union(*self.named[:step + 1])
        cut = set().union(*self.named[1:]) - own - self.free
        keep = [case]
        need: set[int] = set()
        used: set[int] = set()
        frontier = list(self.symbols(case))
        while frontier:
            v = frontier.pop()
            if v in need:
                continue
            need.add(v)
            d = self.defs.get(v)
            if d is not None and v not in cut:
                keep.append(d)
                frontier.extend(self.symbols(d.arg(1)))
            for j in self.mentions.get(v, ()):
                if j not in used:  # a constraint on a needed symbol (a lemma, a path's assumption)
                    used.add(j)
                    keep.append(self.others[j][0])
                    frontier.extend(self.others[j][1])
        return keep


def state_symbols(state: Any, fields: Iterable[str]) -> set[int]:
    """Ids of the symbols a (named) state's fields are."""
    out: set[int] = set()
    for f in fields:
        v = getattr(state, f)
        for e in v if isinstance(v, tuple) else (v,):
            if z3.is_expr(e) and _symbol(e):
                out.add(e.get_id())
    return out

