"""A reviewer's patch: one transition rewritten in plain Python, run in both interpretations.

A patch file (docs/patches.md) defines `REPLACES = "<transition>"` and `replacement(x, s, ...)` with
the transition's parameters, like a planted bug in model/mutants/. Unlike the model's own code it
may read like the SGLang code it changes: `if extend > budget:` / `else:`, `a if c else b`, `and`,
`or`, `not`, `min`, `max`, `abs`, `any`, `all`, `//` and `%` by a constant, on the model's values.

How it runs in both interpretations (`load_patch` compiles the file so):

* expressions are rewritten where they are (an AST pass over the file, `_Plain`): `a if c else b`
  becomes a merge of both sides under `c` (the model's `x.branch`), `and` / `or` / `not` and
  chained comparisons become their z3 forms on a model value and keep Python's short-circuit on
  a plain one, `//` and `%` by a positive constant become SMT division, and `min` / `max` / `abs`
  / `any` / `all` in the file are versions that build `If` / `And` / `Or` on a model value.
  Concretely every one of them is exactly the Python operation;
* statements are run as paths: an `if` (or `while`, `assert`, `bool()`) on a model value in the
  file's code asks a decision, the call is repeated once per sequence of decisions under its path
  condition, and the results are merged with `ite` (model/ops.py, `Symbolic.run_plain`); a
  condition tested again on the same path is not a new split. A statement `if` therefore costs a
  re-run of the call and a copy of the code after it in the formula; a conditional expression
  does not (docs/patches.md measures both).

Every error a patch makes, when loaded or when run (an exception in its code, a field it changes
outside the transition's `modifies`, paths that do not merge), is a `PatchError` whose message is
one line `FILE:LINE: what went wrong`.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import operator
import textwrap
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .ops import Infeasible, PlainPathError, active_ops
from .state import FIELD_NAMES, State
from .transition import REGISTRY, FrameViolation


class PatchError(ValueError):
    """A patch file that cannot be used, or that failed while running; the message is `file:line: what`."""


# -- the helpers the rewritten file calls ---------------------------------------------------------------
def _term(ops: Any, *vals: Any) -> bool:
    return ops is not None and any(ops.is_term(v) for v in vals)


def _kv_if(c: Any, then: Callable[[], Any], other: Callable[[], Any]) -> Any:
    """`then() if c else other()`; on a model value both sides, merged under c."""
    ops = active_ops()
    if not _term(ops, c):
        return then() if c else other()
    return ops.branch(ops.truth(c), then, other)


def _is_bool(ops: Any, v: Any) -> bool:
    return isinstance(v, bool) or (ops.is_term(v) and ops.z3.is_bool(v))


def _kv_and(v: Any, *rest: Callable[[], Any]) -> Any:
    """`v and rest[0]() and ...` with Python's short-circuit; on a model value the z3 `And` (or,
    for non-boolean operands, Python's value: the first false one, else the last)."""
    if not rest:
        return v
    ops = active_ops()
    if not _term(ops, v):
        return _kv_and(rest[0](), *rest[1:]) if v else v
    c = ops.truth(v)
    with ops.path(c):
        tail = _kv_and(rest[0](), *rest[1:])
    if _is_bool(ops, v) and _is_bool(ops, tail):
        return ops.and_(v, tail)
    return ops._merge_value(c, tail, v)


def _kv_or(v: Any, *rest: Callable[[], Any]) -> Any:
    """`v or rest[0]() or ...`, as `_kv_and`."""
    if not rest:
        return v
    ops = active_ops()
    if not _term(ops, v):
        return v if v else _kv_or(rest[0](), *rest[1:])
    c = ops.truth(v)
    with ops.path(ops.not_(c)):
        tail = _kv_or(rest[0](), *rest[1:])
    if _is_bool(ops, v) and _is_bool(ops, tail):
        return ops.or_(v, tail)
    return ops._merge_value(c, v, tail)


def _kv_not(v: Any) -> Any:
    ops = active_ops()
    if not _term(ops, v):
        return not v
    return ops.not_(ops.truth(v))


_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
            "!=": operator.ne, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
            "is": operator.is_, "is not": operator.is_not}


def _kv_chain(left: Any, *pairs: Any) -> Any:
    """`left op1 b op2 c ...` (pairs: op name, thunk), each operand evaluated once, short-circuit."""
    op, thunk = pairs[0], pairs[1]
    right = thunk()
    r = _COMPARE[op](left, right)
    if len(pairs) == 2:
        return r
    return _kv_and(r, lambda: _kv_chain(right, *pairs[2:]))


def _kv_floordiv(a: Any, b: Any) -> Any:
    ops = active_ops()
    if not _term(ops, a, b):
        return a // b
    if isinstance(b, int) and not isinstance(b, bool) and b > 0:
        return ops.fdiv(a, b)
    raise TypeError(f"`//` of a model value by {b!r}: kvmc divides model values only by a positive constant "
                    "(a page size, a ratio)")


def _kv_mod(a: Any, b: Any) -> Any:
    ops = active_ops()
    if not _term(ops, a, b):
        return a % b
    if isinstance(b, int) and not isinstance(b, bool) and b > 0:
        return a % b  # SMT-LIB's mod and Python's % agree for a positive constant divisor
    raise TypeError(f"`%` of a model value by {b!r}: kvmc takes remainders only by a positive constant")


def _kv_truediv(a: Any, b: Any) -> Any:
    if isinstance(a, float) or isinstance(b, float):
        return a / b
    raise TypeError("`/` makes a float, and the model's values are integers (token and page counts): "
                    "use `//` (floor) or x.ceil_page / x.pages")


def _kv_min(*args: Any, **kw: Any) -> Any:
    """`min` on model values too: `If(a <= b, a, b)` (the first smallest, as Python's)."""
    ops = active_ops()
    vals = list(args[0]) if len(args) == 1 and not kw else list(args)
    if kw or not vals or not _term(ops, *vals):
        return builtins.min(*args, **kw) if not (len(args) == 1 and not kw) else builtins.min(vals)
    m = vals[0]
    for v in vals[1:]:
        m = ops.min(m, v)
    return m


def _kv_max(*args: Any, **kw: Any) -> Any:
    """`max` on model values too: `If(a >= b, a, b)` (the first largest, as Python's)."""
    ops = active_ops()
    vals = list(args[0]) if len(args) == 1 and not kw else list(args)
    if kw or not vals or not _term(ops, *vals):
        return builtins.max(*args, **kw) if not (len(args) == 1 and not kw) else builtins.max(vals)
    m = vals[0]
    for v in vals[1:]:
        m = ops.max(m, v)
    return m


def _kv_abs(v: Any) -> Any:
    ops = active_ops()
    if not _term(ops, v):
        return builtins.abs(v)
    return ops.ite(v >= 0, v, -v)


def _kv_any(xs: Any) -> Any:
    vals = list(xs)
    ops = active_ops()
    if not _term(ops, *vals):
        return builtins.any(vals)
    return ops.or_(*[ops.truth(v) if ops.is_term(v) else bool(v) for v in vals])


def _kv_all(xs: Any) -> Any:
    vals = list(xs)
    ops = active_ops()
    if not _term(ops, *vals):
        return builtins.all(vals)
    return ops.and_(*[ops.truth(v) if ops.is_term(v) else bool(v) for v in vals])


HELPERS: dict[str, Any] = {
    "_kv_if": _kv_if, "_kv_and": _kv_and, "_kv_or": _kv_or, "_kv_not": _kv_not, "_kv_chain": _kv_chain,
    "_kv_floordiv": _kv_floordiv, "_kv_mod": _kv_mod, "_kv_truediv": _kv_truediv,
    # the builtins a patch's plain Python uses on model values (names a file may still rebind)
    "min": _kv_min, "max": _kv_max, "abs": _kv_abs, "any": _kv_any, "all": _kv_all,
}


# -- the rewrite of expressions ------------------------------------------------------------------------
_CMP_NAMES = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
              ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}


def _scoped(node: ast.AST) -> bool:
    """An expression that cannot move into a lambda unchanged (`:=` binds in the enclosing function,
    `yield` / `await` belong to it)."""
    return any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for n in ast.walk(node))


class _Plain(ast.NodeTransformer):
    """Conditional expressions, `and` / `or` / `not`, chained comparisons and `//`, `%`, `/` into calls
    of the helpers above (same line numbers, so errors name the file's lines)."""

    @staticmethod
    def _call(name: str, args: list[ast.expr], like: ast.AST) -> ast.Call:
        return ast.copy_location(ast.Call(func=ast.Name(name, ast.Load()), args=args, keywords=[]), like)

    @staticmethod
    def _thunk(e: ast.expr) -> ast.Lambda:
        noargs = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        return ast.copy_location(ast.Lambda(args=noargs, body=e), e)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        self.generic_visit(node)
        if _scoped(node):
            return node
        return self._call("_kv_if", [node.test, self._thunk(node.body), self._thunk(node.orelse)], node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if _scoped(node):
            return node
        name = "_kv_and" if isinstance(node.op, ast.And) else "_kv_or"
        return self._call(name, [node.values[0], *[self._thunk(v) for v in node.values[1:]]], node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return self._call("_kv_not", [node.operand], node)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 or _scoped(node):
            return node
        args: list[ast.expr] = [node.left]
        for op, right in zip(node.ops, node.comparators):
            args += [ast.copy_location(ast.Constant(_CMP_NAMES[type(op)]), node), self._thunk(right)]
        return self._call("_kv_chain", args, node)

    _DIV = {ast.FloorDiv: "_kv_floordiv", ast.Mod: "_kv_mod", ast.Div: "_kv_truediv"}

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = self._DIV.get(type(node.op))
        if name is None:
            return node
        return self._call(name, [node.left, node.right], node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        name = self._DIV.get(type(node.op))
        if name is None or not isinstance(node.target, ast.Name):
            return node
        load = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
        return ast.copy_location(ast.Assign(targets=[node.target], value=self._call(name, [load, node.value], node)), node)


def compile_plain(src: str, filename: str) -> Any:
    """Parse and compile a patch file with its expressions rewritten (raises SyntaxError)."""
    tree = ast.parse(src, filename=filename)
    tree = ast.fix_missing_locations(_Plain().visit(tree))
    return tree, compile(tree, filename, "exec")


# -- loading -----------------------------------------------------------------------------------------------
def _signature_text(fn: Callable[..., Any]) -> str:
    return "(" + ", ".join(p.name for p in inspect.signature(fn).parameters.values()) + ")"


def _same_signature(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    pa = list(inspect.signature(a).parameters.values())
    pb = list(inspect.signature(b).parameters.values())
    return [(p.name, p.kind) for p in pa] == [(p.name, p.kind) for p in pb]


def _assign_line(tree: ast.Module, name: str) -> int:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node.lineno
    return 1


def _line_in(e: BaseException, filename: str) -> int:
    """The line of the innermost frame of `filename` in e's traceback (0: none)."""
    line = 0
    for fr in traceback.extract_tb(e.__traceback__):
        if fr.filename == filename:
            line = fr.lineno or 0
    return line


class Patch:
    """The replacement function of a loaded patch file, as the model calls an override: concretely
    the function itself, symbolically run as paths (`Symbolic.run_plain`); any error is a
    `PatchError("FILE:LINE: ...")`. Pickles as its file (re-read, and refused if it changed)."""

    def __init__(self, where: str, transition: str, fn: Callable[..., Any], sha: str) -> None:
        self.where, self.transition, self.fn, self.sha = where, transition, fn, sha
        self.line = getattr(getattr(fn, "__code__", None), "co_firstlineno", 1)
        self.files = frozenset({where})
        self.__signature__ = inspect.signature(fn)
        self.__name__ = f"replacement of {transition}"

    def __call__(self, x: Any, *args: Any, **kw: Any) -> Any:
        try:
            if x.ops.symbolic:
                return x.ops.run_plain(self.fn, self.files, (x, *args), kw)
            out = self.fn(x, *args, **kw)
            self._frame(args[0] if args else None, out)
            return out
        except (Infeasible, PatchError):
            raise
        except PlainPathError as e:
            raise PatchError(f"{self.where}:{e.line}: {e}") from None
        except Exception as e:
            line = _line_in(e, self.where) or self.line
            raise PatchError(f"{self.where}:{line}: {type(e).__name__}: {e}") from None

    def _frame(self, before: Any, out: Any) -> None:
        """Concretely, a patch changes only the fields its transition declares (whether or not the
        run checks frames: `kvmc patch check` runs the random engine, which does not)."""
        after = out[0] if isinstance(out, tuple) and out else out
        if not isinstance(before, State) or not isinstance(after, State) or after is before:
            return
        allowed = REGISTRY[self.transition].modifies
        for f in FIELD_NAMES:
            if f not in allowed and getattr(before, f) != getattr(after, f):
                raise self.frame_error(FrameViolation(
                    f"{self.transition} changed {f!r} ({getattr(before, f)!r} -> {getattr(after, f)!r}) "
                    f"but does not list it in modifies={sorted(allowed)}"))

    def frame_error(self, e: Exception) -> PatchError:
        """The transition wrapper's frame check failed on this patch's result (model/transition.py)."""
        return PatchError(f"{self.where}:{self.line}: {e}; a patch changes only what {self.transition} declares "
                          "(see `kvmc patch new`)")

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return _reload, (self.where, self.sha)

    def __repr__(self) -> str:
        return f"<patch {self.where} replacing {self.transition}>"


def _reload(where: str, sha: str) -> "Patch":
    name, fn = load_patch(where)
    if fn.sha != sha:
        raise PatchError(f"{where}:1: the patch file changed while kvmc was running (sha256 {sha[:12]} -> {fn.sha[:12]})")
    return fn


def load_patch(path: str | Path) -> tuple[str, Patch]:
    """Load a patch file: a Python module that defines

        REPLACES = "<transition name>"          # one of `kvmc list`'s transitions
        def replacement(x, s, ...): ...          # the transition's exact parameters

    (the layout of `model/mutants/*.py`; `kvmc patch new TRANSITION` writes one). Returns
    (transition name, `Patch`). Any problem raises `PatchError("file:line: ...")`."""
    import model.system  # noqa: F401  (registers every transition)

    p = Path(path)
    where = str(path)
    try:
        raw = p.read_bytes()
        src = raw.decode()
    except OSError as e:
        raise PatchError(f"{where}:0: cannot read the patch file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise PatchError(f"{where}:0: not a text file ({e.reason} at byte {e.start})") from None
    try:
        tree, code = compile_plain(src, where)
    except SyntaxError as e:
        raise PatchError(f"{where}:{e.lineno or 0}: syntax error: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise PatchError(f"{where}:0: cannot compile: {e}") from None
    sha = hashlib.sha256(raw).hexdigest()
    mod = ModuleType(f"kvmc_patch_{hashlib.sha1(str(p.resolve()).encode()).hexdigest()[:10]}")
    mod.__file__ = str(p.resolve())
    mod.__dict__.update(HELPERS)
    try:
        exec(code, mod.__dict__)
    except Exception as e:  # an error while importing the file: name the line in the file
        raise PatchError(f"{where}:{_line_in(e, where)}: {type(e).__name__} while loading: {e}") from None
    name = mod.__dict__.get("REPLACES")
    if not isinstance(name, str):
        raise PatchError(f'{where}:{_assign_line(tree, "REPLACES")}: missing REPLACES = "<transition>"; '
                         f"expected one of: {', '.join(sorted(REGISTRY))}")
    if name not in REGISTRY:
        raise PatchError(f"{where}:{_assign_line(tree, 'REPLACES')}: unknown transition {name!r} in REPLACES; "
                         f"expected one of: {', '.join(sorted(REGISTRY))}")
    fn = mod.__dict__.get("replacement")
    if not callable(fn) or isinstance(fn, type):
        raise PatchError(f"{where}:1: no function `replacement{_signature_text(REGISTRY[name].fn)}` defined")
    if not _same_signature(fn, REGISTRY[name].fn):
        line = getattr(getattr(fn, "__code__", None), "co_firstlineno", 1)
        raise PatchError(f"{where}:{line}: replacement{_signature_text(fn)} does not match transition "
                         f"{name}{_signature_text(REGISTRY[name].fn)}")
    return name, Patch(where, name, fn, sha)


# -- a transition's body as plain Python (`kvmc patch new`) -------------------------------------------------
# x.<name>(...) calls that have a plain-Python form; the others (x.member, x.ceil_page, x.choose_*, x.assume,
# x.checkpoint, ...) stay: they are the model's vocabulary for what Python has no syntax for
_PLAIN_CALLS = {"ite", "branch", "min", "max", "clamp0", "and_", "or_", "not_", "implies", "sum", "fdiv"}
# precedence of what an emitted form is, lowest first, to parenthesise only where Python needs it
_PREC_IFEXP, _PREC_OR, _PREC_AND, _PREC_NOT, _PREC_CMP, _PREC_ATOM = range(6)


def _ast_prec(node: ast.AST) -> int:
    if isinstance(node, (ast.IfExp, ast.Lambda, ast.NamedExpr)):
        return _PREC_IFEXP
    if isinstance(node, ast.BoolOp):
        return _PREC_OR if isinstance(node.op, ast.Or) else _PREC_AND
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _PREC_NOT
    if isinstance(node, ast.Compare):
        return _PREC_CMP
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return _PREC_CMP + 0  # arithmetic binds tighter than comparisons; treat as a comparison-level operand
    return _PREC_ATOM


class _ToPlain:
    """Source text of a function with its `x.ite(...)`, `x.min(...)`, ... calls written as plain Python
    (`a if c else b`, `min(...)`), everything else (comments, layout) as written."""

    def __init__(self, src: str, xname: str, root: ast.AST) -> None:
        self.src = src
        self.parent = {c: n for n in ast.walk(root) for c in ast.iter_child_nodes(n)}
        self.lines = src.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))
        self.x = xname

    def off(self, line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        text = self.lines[line - 1].encode()[:col].decode(errors="replace")
        return self.starts[line - 1] + len(text)

    def span(self, n: ast.AST) -> tuple[int, int]:
        return self.off(n.lineno, n.col_offset), self.off(n.end_lineno, n.end_col_offset)  # type: ignore[attr-defined]

    def plain_call(self, n: ast.AST) -> str | None:
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
                and n.func.value.id == self.x and n.func.attr in _PLAIN_CALLS and not n.keywords
                and not any(isinstance(a, ast.Starred) for a in n.args)):
            return n.func.attr
        return None

    def text(self, n: ast.AST) -> str:
        """The source of `n` with every rewritable call inside it rewritten."""
        if self.plain_call(n):
            return self.emit(n)[0]  # type: ignore[arg-type]
        a, b = self.span(n)
        inner = []
        for c in ast.walk(n):
            if c is not n and self.plain_call(c) and hasattr(c, "lineno"):
                inner.append(c)
        # the outermost ones only
        outer = [c for c in inner if not any(o is not c and self._inside(c, o) for o in inner)]
        out, pos = [], a
        for c in sorted(outer, key=lambda c: self.span(c)[0]):
            ca, cb = self.span(c)
            out.append(self.src[pos:ca])
            out.append(self.wrap(c, self.need(c)))
            pos = cb
        out.append(self.src[pos:b])
        return "".join(out)

    def need(self, c: ast.AST) -> int:
        """How tightly the place of `c` in the original code binds (parentheses only where needed)."""
        p = self.parent.get(c)
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr, ast.keyword)):
            return _PREC_IFEXP
        if isinstance(p, ast.Call) and c in p.args:
            return _PREC_IFEXP
        if isinstance(p, (ast.Tuple, ast.List)):
            return _PREC_NOT
        return _PREC_ATOM

    def _inside(self, c: ast.AST, o: ast.AST) -> bool:
        ca, cb = self.span(c)
        oa, ob = self.span(o)
        return oa <= ca and cb <= ob

    def wrap(self, n: ast.AST, need: int) -> str:
        """`n`'s text, parenthesised if what it becomes binds looser than `need`."""
        if self.plain_call(n):
            t, prec = self.emit(n)  # type: ignore[arg-type]
        else:
            t, prec = self.text(n), _ast_prec(n)
            if prec == _PREC_ATOM or "\n" in t:
                return t if prec == _PREC_ATOM else f"({t})"
        return f"({t})" if prec < need else t

    def thunk_body(self, n: ast.AST) -> str:
        """The value side of `x.branch`: a lambda's body, else a call of the function named."""
        if isinstance(n, ast.Lambda) and not n.args.args:
            return self.wrap(n.body, _PREC_OR)
        return f"{self.wrap(n, _PREC_ATOM)}()"

    def emit(self, n: ast.Call) -> tuple[str, int]:
        op = self.plain_call(n)
        a = n.args
        if op == "ite" and len(a) == 3:
            return f"{self.wrap(a[1], _PREC_OR)} if {self.wrap(a[0], _PREC_OR)} else {self.wrap(a[2], _PREC_IFEXP)}", _PREC_IFEXP
        if op == "branch" and len(a) == 3:
            return f"{self.thunk_body(a[1])} if {self.wrap(a[0], _PREC_OR)} else {self.thunk_body(a[2])}", _PREC_IFEXP
        if op in ("min", "max", "sum"):
            if len(a) == 1 and isinstance(a[0], ast.GeneratorExp):
                g = self.text(a[0])  # its span is the call's parentheses
                return f"{op}{g}" if g.startswith("(") else f"{op}({g})", _PREC_ATOM
            return f"{op}({', '.join(self.wrap(e, _PREC_IFEXP) for e in a)})", _PREC_ATOM
        if op == "clamp0" and len(a) == 1:
            return f"max({self.wrap(a[0], _PREC_IFEXP)}, 0)", _PREC_ATOM
        if op == "fdiv" and len(a) == 2:
            return f"{self.wrap(a[0], _PREC_ATOM)} // {self.wrap(a[1], _PREC_ATOM)}", _PREC_CMP
        if op == "not_" and len(a) == 1:
            return f"not {self.wrap(a[0], _PREC_NOT)}", _PREC_NOT
        if op in ("and_", "or_"):
            if not a:
                return ("True" if op == "and_" else "False"), _PREC_ATOM
            if len(a) == 1:
                return f"bool({self.wrap(a[0], _PREC_IFEXP)})", _PREC_ATOM
            prec = _PREC_AND if op == "and_" else _PREC_OR
            word = " and " if op == "and_" else " or "
            return word.join(self.wrap(e, prec + 1) for e in a), prec
        if op == "implies" and len(a) == 2:
            return f"not {self.wrap(a[0], _PREC_NOT)} or {self.wrap(a[1], _PREC_AND)}", _PREC_OR
        return self.text_plain_args(n), _PREC_ATOM

    def text_plain_args(self, n: ast.Call) -> str:
        # an unusual form (keywords, a different arity): left as written
        a, b = self.span(n)
        return self.src[a:b]


def plain_source(transition: str) -> str:
    """A patch file for `transition` that changes nothing: its docstring, the SGLang method it models
    and its frame, `REPLACES`, the imports its body needs, and its body as plain Python (`kvmc patch new`)."""
    import model.system  # noqa: F401

    info = REGISTRY[transition]
    fn = info.fn
    src = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(src)
    fdef = tree.body[0]
    assert isinstance(fdef, ast.FunctionDef), fdef
    xname = fdef.args.args[0].arg
    tp = _ToPlain(src, xname, fdef)
    start = tp.off(fdef.lineno, fdef.col_offset)  # after the decorators
    header_end = tp.off(fdef.body[0].lineno, 0)
    head = src[start:header_end].replace(f"def {fdef.name}(", "def replacement(", 1)
    # the body statement by statement, calls rewritten; what lies between statements (comments,
    # blank lines, trailing comments) is kept as written
    pieces, pos = [], header_end
    for stmt in fdef.body:
        ta, tb = tp.span(stmt)
        pieces += [src[pos:ta], tp.text(stmt)]
        pos = tb
    pieces.append(src[pos:])
    text = head + "".join(pieces)

    # the module-level names the body reads: imported from the transition's module
    mod_globals = fn.__globals__
    nodes = [n for part in (fdef.args, *fdef.body, *([fdef.returns] if fdef.returns else [])) for n in ast.walk(part)]
    local = {a.arg for a in nodes if isinstance(a, ast.arg)}
    local |= {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local |= {n.name for n in nodes if isinstance(n, ast.FunctionDef)}
    used = sorted({n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                   and n.id in mod_globals and n.id not in local and not hasattr(builtins, n.id)})
    modules = sorted(n for n in used if isinstance(mod_globals[n], ModuleType))
    names = [n for n in used if n not in modules]
    imports = []
    for m in modules:
        full = mod_globals[m].__name__
        pkg, _, leaf = full.rpartition(".")
        imports.append(f"from {pkg} import {leaf}" + (f" as {m}" if leaf != m else "") if pkg else f"import {full}")
    if names:
        imports.append(f"from {fn.__module__} import {', '.join(names)}")
    modifies = ", ".join(f'"{m}"' for m in info.modifies)
    doc = (fn.__doc__ or "").strip().splitlines()
    return (
        f'"""Patch of `{transition}`: <say what this change does and why (the SGLang PR, the bug)>.\n\n'
        f"Models SGLang's {info.models} (python/sglang/srt/).\n"
        f"Frame: it may change only modifies=({modifies}{',' if len(info.modifies) == 1 else ''}).\n\n"
        "Plain Python: `if`/`else`, `a if c else b`, `and`/`or`/`not`, `min`/`max`, `//` by a constant work on\n"
        "the model's values in both interpretations (docs/patches.md). Check it with `kvmc patch check FILE`,\n"
        f"review it with `kvmc review --head-patch FILE`.\n\n"
        f"The transition's own description: {doc[0] if doc else '(none)'}\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        + "".join(f"{i}\n" for i in imports)
        + f'\nREPLACES = "{transition}"\n\n\n'
        + text.rstrip() + "\n"
    )
