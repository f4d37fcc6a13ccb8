"""The two interpretations every transition in `model/` is written against.

A transition is written once. Run with `Concrete` it is ordinary Python over ints and bools (the
explicit-state engine, the random engine, replay, the scenario tests). Run with `Symbolic` the same
code builds z3 terms (bounded model checking). So a transition never branches on a state value
with a Python `if` (a z3 term has no truth value): it uses `ite`, `min`, `max`, `and_` ... from here.
A Python `if` on a *configuration* value (page size, whether the model is hybrid SWA, a design
flag) is fine: those are constants in both interpretations.

Nondeterminism is explicit. A step asks for its choices by name (`choose_int`, `choose_bool`):
concretely an oracle answers (a replayed trace, a depth-first enumerator, Hypothesis); symbolically
each choice is a fresh z3 variable `name@t`. `assume(cond)` restricts the choices; a concrete run
whose choices break an assumption raises `Infeasible` (that branch of the step does not exist).

A reviewer's patch (model/patch.py) may be written in plain Python instead: `if`/`else` on a model
value, `min`, `max`. Concretely that is just Python. Symbolically `Symbolic.run_plain` runs such a
function once per path: a truth test of a z3 term made by the patch's own code asks a decision
(`_Paths.decide`), the run is repeated with each answer under its path condition, and the results
are merged with `ite` at the decision (the explicit engine enumerates a step's choices the same way).

This module imports z3 lazily, so `model/` stays importable and testable without an engine.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol


class Infeasible(Exception):
    """A concrete run made a choice that an `assume` rejects: this branch of the step does not exist."""


class Oracle(Protocol):
    """Answers the choices of a concrete run."""

    def pick_int(self, name: str, lo: int, hi: int) -> int: ...

    def pick_bool(self, name: str) -> bool: ...


class FirstChoice:
    """The oracle of a deterministic run: always the smallest allowed value."""

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        return lo

    def pick_bool(self, name: str) -> bool:
        return False


class ChoiceScope:
    """Qualified choice names (`prefill.evict.evict[3]`): the model's interpretations and the torch
    pool's chooser (pool/choices.py) share this, so a trace's picks name the same questions."""

    def __init__(self) -> None:
        self._scope: list[str] = []

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Prefix the names of the choices made inside (`prefill.evict.del[3]`)."""
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def qualify(self, name: str) -> str:
        return ".".join([*self._scope, name])


class Ops(ChoiceScope):
    """Shared part of both interpretations: name scoping for choices, path conditions."""

    symbolic: bool = False

    def __init__(self) -> None:
        super().__init__()
        self._path: list[Any] = []

    @contextmanager
    def path(self, cond: Any) -> Iterator[None]:
        """Code inside runs in both interpretations, but its `assume`s and choices only count when
        `cond` holds (an assumption made on a path not taken must not constrain anything)."""
        self._path.append(cond)
        try:
            yield
        finally:
            self._path.pop()

    def checkpoint(self, label: str, s: Any) -> Any:
        """Mark a point inside an iteration where the state is whole again (the sub-transitions
        before it are complete). Returns `s` unchanged; the symbolic interpretation records it with
        the path condition it was reached under, so a proof can ask which sub-step of an iteration
        first breaks a ledger (checker/engines/induction.py, "first sub-step")."""
        return s

    def ghost(self, label: str, v: Any) -> Any:
        """A value that lives only inside an iteration (the PrefillAdder's pass state), at the
        checkpoint `label` just marked: returns `v`; the symbolic interpretation names it like the
        state there and records it, for the invariants of a pass (specs/pass_invariants.py)."""
        return v

    # helpers written in terms of the primitives; identical in both interpretations
    def implies(self, a: Any, b: Any) -> Any:
        return self.or_(self.not_(a), b)

    def ceil_page(self, x: Any, ps: int) -> Any:
        """SGLang's `ceil_align` / `ceil_paged_tokens` for a constant page size."""
        if ps == 1:
            return x
        return self.fdiv(x + ps - 1, ps) * ps

    def floor_page(self, x: Any, ps: int) -> Any:
        if ps == 1:
            return x
        return self.fdiv(x, ps) * ps

    def page_aligned(self, x: Any, ps: int) -> Any:
        """x == floor_page(x), written as a remainder: z3 settles `mod` faster than `div * ps`
        (a paged lemma case: unsat in 15 s against 58 s)."""
        if ps == 1:
            return True
        return x % ps == 0  # Python's % and SMT-LIB's mod agree for a positive constant ps

    def pages(self, x: Any, ps: int) -> Any:
        """Number of pages that `x` tokens occupy (ceil)."""
        if ps == 1:
            return x
        return self.fdiv(x + ps - 1, ps)

    def member(self, v: Any, values: tuple[int, ...]) -> Any:
        """`v` equals one of the constants `values` (an `or_` of equalities)."""
        return self.or_(*[v == c for c in values])

    def sum(self, xs: Any) -> Any:
        total: Any = 0
        for v in xs:
            total = total + v
        return total

    def clamp0(self, x: Any) -> Any:
        return self.max(x, 0)


class Concrete(Ops):
    """Python ints and bools; choices answered by an oracle and recorded in order."""

    symbolic = False

    def __init__(self, oracle: Oracle | None = None) -> None:
        super().__init__()
        self.oracle: Oracle = oracle if oracle is not None else FirstChoice()
        self.picks: dict[str, int | bool] = {}
        # set to a list to record (label, state) at each checkpoint the step passes (tests), and
        # the ghost values given there (label -> value)
        self.checkpoints: list[tuple[str, Any]] | None = None
        self.ghosts: dict[str, Any] = {}

    def checkpoint(self, label: str, s: Any) -> Any:
        if self.checkpoints is not None and self._active():
            self.checkpoints.append((self.qualify(label), s))
        return s

    def ghost(self, label: str, v: Any) -> Any:
        if self.checkpoints is not None and self._active():
            self.ghosts[self.qualify(label)] = v
        return v

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    def branch(self, c: Any, then: Callable[[], Any], other: Callable[[], Any]) -> Any:
        """Evaluate only the taken side (the symbolic interpretation evaluates both and merges)."""
        return then() if c else other()

    def _active(self) -> bool:
        return all(self._path)

    def and_(self, *xs: Any) -> bool:
        return all(xs)

    def or_(self, *xs: Any) -> bool:
        return any(xs)

    def not_(self, x: Any) -> bool:
        return not x

    def member(self, v: Any, values: tuple[int, ...]) -> bool:
        return v in values  # the same answer as the or_ of equalities, without building it

    def min(self, a: Any, b: Any) -> Any:
        return a if a <= b else b

    def max(self, a: Any, b: Any) -> Any:
        return a if a >= b else b

    def fdiv(self, x: Any, k: int) -> Any:
        return x // k

    def choose_int(self, name: str, lo: int, hi: int) -> int:
        q = self.qualify(name)
        if not self._active():
            return lo
        if lo > hi:
            raise Infeasible(f"choice {q} has an empty range [{lo}, {hi}]")
        v = self.oracle.pick_int(q, lo, hi)
        if not lo <= v <= hi:
            raise Infeasible(f"choice {q}={v} outside [{lo}, {hi}]")
        self.picks[q] = v
        return v

    def choose_bool(self, name: str) -> bool:
        q = self.qualify(name)
        if not self._active():
            return False
        v = bool(self.oracle.pick_bool(q))
        self.picks[q] = v
        return v

    def assume(self, c: Any, why: str = "") -> None:
        if not c and self._active():
            raise Infeasible(why or "assumption failed")

    def let(self, name: str, v: Any) -> Any:
        return v

    def is_true(self, c: Any) -> bool:
        return bool(c)


class Symbolic(Ops):
    """z3 terms. Constants are folded so that configuration-only branches cost nothing."""

    symbolic = True

    def __init__(self, step: int, prefix: str = "", name_checkpoints: bool = False) -> None:
        """`name_checkpoints`: name the state at each checkpoint (`checkpoint`); the induction
        engine's step does, the BMC does not (on hybrid_swa, depth 3: 16 s without, 23 s with)."""
        super().__init__()
        import z3

        self.z3 = z3
        self.step = step
        self.prefix = prefix
        self.constraints: list[Any] = []
        self.choices: dict[str, Any] = {}
        self._lets = 0
        # (label, path condition, state) in the order the step reached them (`checkpoint`)
        self.checkpoints: list[tuple[str, Any, Any]] = []
        self.ghosts: dict[str, Any] = {}  # checkpoint label -> its ghost value (`ghost`)
        self.name_checkpoints = name_checkpoints
        self._paths: list[_Paths] = []  # plain-Python calls in progress (`run_plain`), innermost last

    # -- constants --------------------------------------------------------------------------
    @staticmethod
    def _const(x: Any) -> bool:
        return isinstance(x, (bool, int))

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(c, bool):
            return a if c else b
        if a is b:
            return a
        if self._const(a) and self._const(b) and type(a) is type(b) and a == b:
            return a
        if a is True and b is False:
            return c
        if a is False and b is True:
            return self.z3.Not(c)
        return self.z3.If(c, a, b)

    def branch(self, c: Any, then: Callable[[], Any], other: Callable[[], Any]) -> Any:
        if isinstance(c, bool):
            return then() if c else other()
        with self.path(c):
            a = then()
        with self.path(self.z3.Not(c)):
            b = other()
        merge = getattr(a, "merge", None)
        if merge is not None:
            return merge(self, c, b)
        if isinstance(a, tuple):
            return tuple(self._merge_value(c, x, y) for x, y in zip(a, b))
        return self._merge_value(c, a, b)

    def _merge_value(self, c: Any, a: Any, b: Any) -> Any:
        merge = getattr(a, "merge", None)
        if merge is not None:
            return merge(self, c, b)
        if isinstance(a, tuple):
            return tuple(self._merge_value(c, x, y) for x, y in zip(a, b))
        return self.ite(c, a, b)

    def and_(self, *xs: Any) -> Any:
        rest = []
        for x in xs:
            if x is True:
                continue
            if x is False:
                return False
            rest.append(x)
        if not rest:
            return True
        return rest[0] if len(rest) == 1 else self.z3.And(*rest)

    def or_(self, *xs: Any) -> Any:
        rest = []
        for x in xs:
            if x is False:
                continue
            if x is True:
                return True
            rest.append(x)
        if not rest:
            return False
        return rest[0] if len(rest) == 1 else self.z3.Or(*rest)

    def not_(self, x: Any) -> Any:
        if isinstance(x, bool):
            return not x
        return self.z3.Not(x)

    def min(self, a: Any, b: Any) -> Any:
        if self._const(a) and self._const(b):
            return a if a <= b else b
        if a is b:
            return a
        return self.z3.If(a <= b, a, b)

    def max(self, a: Any, b: Any) -> Any:
        if self._const(a) and self._const(b):
            return a if a >= b else b
        if a is b:
            return a
        return self.z3.If(a >= b, a, b)

    def fdiv(self, x: Any, k: int) -> Any:
        if self._const(x):
            return x // k
        # SMT-LIB integer division is Euclidean; for a positive constant divisor it is floor.
        return x / k

    def int_var(self, name: str) -> Any:
        return self.z3.Int(name)

    # -- choices and assumptions -------------------------------------------------------------
    def _name(self, name: str) -> str:
        return f"{self.prefix}{self.qualify(name)}@{self.step}"

    def choose_int(self, name: str, lo: Any, hi: Any) -> Any:
        q = self.qualify(name)
        v = self._again(q)
        if v is None:
            v = self.int_var(self._name(name))
            self._made(q, v)
        self.assume(self.z3.And(v >= lo, v <= hi))
        return v

    def choose_bool(self, name: str) -> Any:
        q = self.qualify(name)
        v = self._again(q)
        if v is None:
            v = self.z3.Bool(self._name(name))
            self._made(q, v)
        return v

    def _again(self, q: str) -> Any:
        """The variable of choice `q` when a plain-Python run repeats a choice an earlier run of
        the same call made (each path asks the same question); None for a new choice."""
        if q not in self.choices:
            return None
        en = self._paths[-1] if self._paths else None
        if en is not None and q in en.made and q not in en.run_made:
            en.run_made.add(q)
            return self.choices[q]
        raise ValueError(f"choice {q!r} made twice in one step; give the second a distinct name")

    def _made(self, q: str, v: Any) -> None:
        self.choices[q] = v
        if self._paths:
            self._paths[-1].made.add(q)
            self._paths[-1].run_made.add(q)

    def _path_cond(self) -> Any:
        """The conjunction of the path conditions (True at top level), or False on a path that
        cannot be taken. A plain-Python run's decisions so far are part of it."""
        conds = [p for p in self._path if p is not True]
        for en in self._paths:
            conds += en.decided
        if any(p is False for p in conds):
            return False
        return True if not conds else conds[0] if len(conds) == 1 else self.z3.And(*conds)

    def assume(self, c: Any, why: str = "") -> None:
        if c is True:
            return
        cond = self._path_cond()
        if cond is False:
            return
        self.constraints.append(c if cond is True else self.z3.Implies(cond, c))

    def checkpoint(self, label: str, s: Any) -> Any:
        cond = self._path_cond()
        if cond is False:
            return s  # on a path that cannot be taken
        # named (a fresh symbol per field, tied by an equality), the rest of the step is written
        # over those names, so a query about one sub-step sees a small definition instead of the
        # whole step's term (hybrid_swa_hicache's conservation, both requests waiting, an extend
        # that leaves both running, its 51 first-break cases at 60 s each: 530 s and 5 unknown
        # unnamed, 362 s and 3 unknown named)
        if self.name_checkpoints:
            s = s.map_terms(lambda f, v: self.let(f"{label}.{f}", v))
        self.checkpoints.append((self.qualify(label), cond, s))
        return s

    def ghost(self, label: str, v: Any) -> Any:
        if self._path_cond() is False:
            return v
        if self.name_checkpoints:  # named, so that the rest of the step reads the names
            v = v.map_terms(lambda f, e: self.let(f"{label}.ghost.{f}", e))
        self.ghosts[self.qualify(label)] = v
        return v

    def let(self, name: str, v: Any) -> Any:
        """Name an intermediate value with a fresh symbol (keeps terms small for the solver)."""
        if self._const(v) or self.z3.is_const(v):
            return v
        self._lets += 1
        if self.z3.is_bool(v):
            fresh = self.z3.Bool(f"{self.prefix}{self.qualify(name)}#{self._lets}@{self.step}")
        else:
            fresh = self.int_var(f"{self.prefix}{self.qualify(name)}#{self._lets}@{self.step}")
        self.constraints.append(fresh == v)
        return fresh

    def is_true(self, c: Any) -> bool:
        return c is True

    # -- plain Python (model/patch.py) ----------------------------------------------------------
    def is_term(self, v: Any) -> bool:
        return isinstance(v, self.z3.ExprRef)

    def truth(self, v: Any) -> Any:
        """The truth of `v` as Python would test it: a z3 Bool as is, a z3 Int as `v != 0`, any
        other value `bool(v)`."""
        if isinstance(v, self.z3.ExprRef):
            return v if self.z3.is_bool(v) else v != 0
        return bool(v)

    def run_plain(self, fn: Callable[..., Any], files: frozenset[str], args: tuple, kw: dict[str, Any],
                  max_paths: int = 256, max_decisions: int = 32) -> Any:
        """`fn(*args, **kw)` where `fn`'s code (in `files`) may test the truth of a model value
        (`if extend > budget:`): each such test is a decision; the call is run once per sequence
        of decisions, under the decisions as path condition (assumptions and choices made on a
        path count only there; a choice made again on another path is the same variable), and the
        results are merged with `ite` where the paths split. A test repeated on the same term (or
        its negation) is answered as before without a new split. More than `max_paths` paths, or
        `max_decisions` on one path (a `while` on a model value), raise `PlainPathError`."""
        _install_bool_hook(self.z3)
        en = _Paths(self, files, max_paths, max_decisions)
        self._paths.append(en)
        _ACTIVE.stack.append(en)
        try:
            out, ghosts = self._explore(en, fn, args, kw, [])
        finally:
            _ACTIVE.stack.pop()
            self._paths.pop()
        self.ghosts.update(ghosts)
        return out

    def _explore(self, en: "_Paths", fn: Callable[..., Any], args: tuple, kw: dict[str, Any],
                 prefix: list[bool]) -> tuple[Any, dict[str, Any]]:
        g0 = dict(self.ghosts)
        en.start(prefix)
        try:
            out = fn(*args, **kw)
            en.runs += 1
            ghosts = {k: v for k, v in self.ghosts.items() if g0.get(k) is not v}
            return out, ghosts
        except _Fork as f:
            fork = f
        finally:
            self.ghosts = g0
            en.decided = []
        if en.runs >= en.max_paths:
            raise PlainPathError(fork.line, f"more than {en.max_paths} paths through the tests of model values "
                                 "(is there a `while`/`for` that tests one?); merge values with x.ite / x.branch / min / max")
        a, ga = self._explore(en, fn, args, kw, [*prefix, True])
        b, gb = self._explore(en, fn, args, kw, [*prefix, False])
        c = fork.cond
        try:
            out = self._merge_value(c, a, b)
            ghosts = {k: self._merge_value(c, ga[k], gb[k]) if k in ga and k in gb else ga.get(k, gb.get(k))
                      for k in {**ga, **gb}}
        except Exception as e:  # the two sides of an `if` return values of different shapes
            raise PlainPathError(fork.line, f"the two sides of this test return values that cannot be merged "
                                 f"({type(e).__name__}: {e}); return the same kind of value on both") from None
        return out, ghosts


class PlainPathError(Exception):
    """A plain-Python call that cannot be run as paths (too many, or results that do not merge);
    `line` is the line of the truth test in the patch file."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        super().__init__(message)


class _Fork(BaseException):
    """A truth test the current run has no answer for: the run stops, and is repeated with each
    answer (a BaseException, so a patch's `except Exception` does not swallow it)."""

    def __init__(self, cond: Any, line: int) -> None:
        self.cond, self.line = cond, line


class _Paths:
    """The decisions of one `run_plain` call: the answers the current run follows (`prefix`), the
    terms decided so far on it (their ids, so a repeated test is not a new split)."""

    def __init__(self, ops: Symbolic, files: frozenset[str], max_paths: int, max_decisions: int) -> None:
        self.ops, self.files = ops, files
        self.max_paths, self.max_decisions = max_paths, max_decisions
        self.runs = 0
        self.made: set[str] = set()  # choices made by any run of this call
        self.start([])

    def start(self, prefix: list[bool]) -> None:
        self.prefix, self.pos = prefix, 0
        self.answers: dict[int, bool] = {}
        self.decided: list[Any] = []  # the path condition of the decisions taken (read by _path_cond)
        self.run_made: set[str] = set()

    def decide(self, term: Any, line: int) -> bool:
        z3 = self.ops.z3
        c = term if z3.is_bool(term) else term != 0
        neg = False
        while z3.is_not(c):
            c, neg = c.arg(0), not neg
        if z3.is_true(c) or z3.is_false(c):
            return z3.is_true(c) != neg
        known = self.answers.get(c.get_id())
        if known is not None:
            return known != neg
        if self.pos >= len(self.prefix):
            if self.pos >= self.max_decisions:
                raise PlainPathError(line, f"more than {self.max_decisions} tests of model values on one path "
                                     "(a `while` on a model value?); bound the loop by a configuration value")
            raise _Fork(c, line)
        ans = self.prefix[self.pos]
        self.pos += 1
        self.answers[c.get_id()] = ans
        self.decided.append(c if ans else z3.Not(c))
        return ans != neg


class _Active(threading.local):
    def __init__(self) -> None:
        self.stack: list[_Paths] = []


_ACTIVE = _Active()
_ORIGINAL_BOOL: Any = None


def _install_bool_hook(z3: Any) -> None:
    """Give z3 terms a truth value inside a plain-Python call: a test made by code of the patch
    file asks the call's decision; any other (z3 itself, the model, a dict lookup) behaves as z3
    defines it. Installed once, on first use."""
    global _ORIGINAL_BOOL
    if _ORIGINAL_BOOL is not None:
        return
    original = z3.AstRef.__bool__

    def __bool__(self: Any) -> bool:
        stack = _ACTIVE.stack
        if stack:
            frame = sys._getframe(1)
            fname = frame.f_code.co_filename
            for en in reversed(stack):
                if fname in en.files:
                    return en.decide(self, frame.f_lineno)
        return original(self)

    _ORIGINAL_BOOL = original
    z3.AstRef.__bool__ = __bool__


def active_ops() -> Symbolic | None:
    """The symbolic interpretation of the innermost plain-Python call in progress (model/patch.py's
    helpers merge with it), or None (a concrete run)."""
    stack = _ACTIVE.stack
    return stack[-1].ops if stack else None
