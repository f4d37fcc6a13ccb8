"""Mutants of the model, generated from its source: each a small syntactic change to one
`@transition` function (model/transition.py), compiled into a function that replaces that
transition for one design (`Design.overrides`, the hook planted bugs and review patches use). No
file is written: the mutated function is compiled from the mutated AST in a copy of the module's
namespace, with the module's file name and line numbers (tracebacks and coverage point at the
source line that was changed).

Operators (after mutmut and cosmic-ray, chosen for what goes wrong in a scheduler's memory code):

    cmp          `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`
    minmax       `x.min` <-> `x.max`
    page_drop    `a + ps` -> `a` (also `a - ps`, `ps + a`): a page of slack dropped
    page_double  `a + ps` -> `a + 2 * ps`: a page of slack doubled
    ceilfloor    `x.ceil_page` <-> `x.floor_page`
    negate       the condition of `x.ite` / `x.branch` / `x.choose_bool_when` / `x.assume` /
                 `x.implies`, and a design-flag or feature `if` (`x.on(..)`, `x.cfg.hybrid_swa`),
                 negated; `x.not_(c)` -> `c`
    andor        `x.and_` <-> `x.or_`
    drop         a statement dropped: a re-assignment (`s = f(x, s, ..)`), an augmented
                 assignment, or a call statement (`x.assume(..)`)
    swap         two adjacent positional arguments of a call to a model function swapped
                 (`allocator.free(x, s, full, swa)` -> `(x, s, swa, full)`)
    offset_drop  `a - b` -> `a` for a `b` that is not a constant: an offset, a reservation or a
                 held part not subtracted (`available - rem_swa_token_offset` -> `available`)

A mutant is named `<transition>@<line>:<operator>:<k>` (`k` numbers the mutants of one operator
on one line), stable while the line does not move.
"""

from __future__ import annotations

import ast
import copy
import functools
import importlib
import inspect
import textwrap
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

OPERATORS = ("cmp", "minmax", "page_drop", "page_double", "ceilfloor", "negate", "andor", "drop", "swap", "offset_drop")

_CMP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_GUARD_ARG = {"ite": 0, "branch": 0, "choose_bool_when": 1, "assume": 0, "implies": 0}
_FLAG_READS = ("on", "variant")  # `x.on("fix")`, `x.variant("fix")`


@dataclass(frozen=True)
class Mutant:
    id: str  # `<transition>@<line>:<operator>:<k>`
    transition: str
    module: str  # model.<file>
    op: str
    line: int  # line in the module's file
    before: str  # the changed node, as source
    after: str

    @property
    def file(self) -> str:
        return self.module.replace(".", "/") + ".py"

    def describe(self) -> str:
        return f"{self.file}:{self.line} in {self.transition}: `{self.before}` -> `{self.after}`"

    def as_dict(self) -> dict[str, Any]:
        return dict(id=self.id, transition=self.transition, module=self.module, op=self.op, line=self.line,
                    before=self.before, after=self.after)


# -- reading a transition's source --------------------------------------------------------------
def transitions(module: str | None = None) -> dict[str, Any]:
    """name -> TransitionInfo of every transition (of `module`, e.g. `model.allocator` or `allocator`)."""
    import model.system  # noqa: F401  (registers every transition)
    from model.transition import REGISTRY

    if module is not None and not module.startswith("model."):
        module = "model." + module
    return {n: t for n, t in REGISTRY.items() if module is None or t.fn.__module__ == module}


@functools.lru_cache(maxsize=None)
def _source(name: str) -> tuple[str, int, str]:
    """(dedented source of the undecorated function, line of its first source line, module)."""
    info = transitions()[name]
    fn = info.fn
    lines, start = inspect.getsourcelines(fn)
    return textwrap.dedent("".join(lines)), start, fn.__module__


def _tree(name: str) -> ast.FunctionDef:
    src, start, _mod = _source(name)
    mod = ast.parse(src)
    ast.increment_lineno(mod, start - 1)
    fn = mod.body[0]
    assert isinstance(fn, ast.FunctionDef), f"{name}: expected a function definition"
    fn.decorator_list = []
    return fn


def _is_x_call(node: ast.AST, attrs: tuple[str, ...] | set[str]) -> bool:
    """`x.<attr>(...)` (or `x.ops.<attr>(...)`)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute) or node.func.attr not in attrs:
        return False
    v = node.func.value
    return (isinstance(v, ast.Name) and v.id == "x") or (
        isinstance(v, ast.Attribute) and v.attr == "ops" and isinstance(v.value, ast.Name) and v.value.id == "x")


def _is_ps(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "ps") or (
        isinstance(node, ast.Attribute) and node.attr == "ps" and isinstance(node.value, ast.Name) and node.value.id == "x")


def _not(node: ast.expr) -> ast.expr:
    return ast.Call(func=ast.Attribute(value=ast.Name("x", ast.Load()), attr="not_", ctx=ast.Load()), args=[node], keywords=[])


def _flag_test(node: ast.expr) -> bool:
    """A Python `if` on a design flag or a config feature (a constant in both interpretations)."""
    for n in ast.walk(node):
        if _is_x_call(n, _FLAG_READS):
            return True
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and n.value.attr == "cfg":
            return n.attr in ("hybrid_swa", "hicache", "chunked_prefill", "test_retract", "spec", "streaming_sessions")
    return False


def _model_call(node: ast.Call) -> bool:
    """A call to a function of the model (not to an op of the interpretation or a builtin)."""
    f = node.func
    if isinstance(f, ast.Name):
        return f.id not in ("range", "len", "tuple", "list", "dict", "zip", "sum", "min", "max", "enumerate", "isinstance",
                            "getattr", "any", "all", "bool", "int", "sorted")
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        return f.value.id in ("allocator", "radix_cache", "session", "hicache", "schedule_batch", "prefill_adder",
                              "speculative")
    return False


def _simple_arg(node: ast.expr) -> bool:
    if isinstance(node, ast.Name) and node.id in ("x", "s", "site", "name", "label", "why"):
        return False  # the context, the state, or a choice-scope name
    if isinstance(node, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(node, "value", None), int):
        return False  # a site name or a label
    if isinstance(node, ast.Lambda):
        return False
    return True


# -- where a statement may be dropped -----------------------------------------------------------
def _bound_before(fn: ast.FunctionDef) -> dict[int, set[str]]:
    """id(stmt) -> names already bound when the statement runs (parameters of the enclosing
    functions, names assigned by earlier statements), for the statements `drop` may remove."""
    out: dict[int, set[str]] = {}

    def params(f: ast.FunctionDef | ast.Lambda) -> set[str]:
        a = f.args
        return {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]} | ({a.vararg.arg} if a.vararg else set())

    def stores(st: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(st) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    def block(body: list[ast.stmt], bound: set[str]) -> None:
        b = set(bound)
        for st in body:
            out[id(st)] = set(b)
            if isinstance(st, ast.FunctionDef):
                block(st.body, b | params(st))
                b.add(st.name)
                continue
            for field in ("body", "orelse"):
                sub = getattr(st, field, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    # a loop body sees its target, not the names its own later statements bind:
                    # dropping the first binding of a name in the body leaves it unbound in the
                    # first iteration (a NameError, never a mutant worth checking)
                    loop = isinstance(st, (ast.For, ast.AsyncFor)) and field == "body"
                    block(sub, b | stores(st.target) if loop else b)  # type: ignore[attr-defined]
            b |= stores(st)

    block(fn.body, params(fn))
    return out


def _droppable(st: ast.stmt, bound: set[str]) -> bool:
    if isinstance(st, ast.Expr):
        return isinstance(st.value, ast.Call)  # not the docstring
    if isinstance(st, ast.AugAssign):
        return True
    if isinstance(st, ast.Assign):
        names = [n.id for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        plain = all(isinstance(n, (ast.Name, ast.Tuple)) for t in st.targets for n in [t])
        return plain and bool(names) and all(n in bound for n in names)
    return False


# -- the mutations of one node ----------------------------------------------------------------
def _variants(node: ast.AST, parent_stmt_bound: dict[int, set[str]]) -> Iterator[tuple[str, Callable[[ast.AST], ast.AST | None]]]:
    """(operator, transform) for each mutation of `node`; a transform edits a deep copy of the
    node and returns its replacement (None: remove the statement)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMP:
        if not all(isinstance(v, ast.Constant) for v in (node.left, *node.comparators)):
            def cmp(n: ast.AST) -> ast.AST:
                n.ops = [_CMP[type(n.ops[0])]()]  # type: ignore[attr-defined]
                return n
            yield "cmp", cmp
    if isinstance(node, ast.Call):
        if _is_x_call(node, ("min", "max")):
            def minmax(n: ast.AST) -> ast.AST:
                n.func.attr = "max" if n.func.attr == "min" else "min"  # type: ignore[attr-defined]
                return n
            yield "minmax", minmax
        if _is_x_call(node, ("ceil_page", "floor_page")):
            def ceilfloor(n: ast.AST) -> ast.AST:
                n.func.attr = "floor_page" if n.func.attr == "ceil_page" else "ceil_page"  # type: ignore[attr-defined]
                return n
            yield "ceilfloor", ceilfloor
        if _is_x_call(node, ("and_", "or_")) and len(node.args) >= 2:
            def andor(n: ast.AST) -> ast.AST:
                n.func.attr = "or_" if n.func.attr == "and_" else "and_"  # type: ignore[attr-defined]
                return n
            yield "andor", andor
        if _is_x_call(node, tuple(_GUARD_ARG)) and len(node.args) > _GUARD_ARG[node.func.attr]:  # type: ignore[attr-defined]
            i = _GUARD_ARG[node.func.attr]  # type: ignore[attr-defined]

            def negate(n: ast.AST, i: int = i) -> ast.AST:
                n.args[i] = _not(n.args[i])  # type: ignore[attr-defined]
                return n
            yield "negate", negate
        if _is_x_call(node, ("not_",)) and len(node.args) == 1:
            yield "negate", lambda n: n.args[0]  # type: ignore[attr-defined]
        if _model_call(node):
            args = node.args
            for i in range(len(args) - 1):
                a, b = args[i], args[i + 1]
                if _simple_arg(a) and _simple_arg(b) and ast.dump(a) != ast.dump(b) and not isinstance(a, ast.Starred) \
                        and not isinstance(b, ast.Starred):
                    def swap(n: ast.AST, i: int = i) -> ast.AST:
                        n.args[i], n.args[i + 1] = n.args[i + 1], n.args[i]  # type: ignore[attr-defined]
                        return n
                    yield "swap", swap
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        for side, other in (("right", "left"), ("left", "right")):
            if _is_ps(getattr(node, side)) and not (side == "left" and isinstance(node.op, ast.Sub)):
                yield "page_drop", lambda n, other=other: getattr(n, other)

                def double(n: ast.AST, side: str = side) -> ast.AST:
                    setattr(n, side, ast.BinOp(left=ast.Constant(2), op=ast.Mult(), right=getattr(n, side)))
                    return n
                yield "page_double", double
                break
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and not isinstance(node.right, ast.Constant) \
            and not _is_ps(node.right):  # (a page: page_drop's)
        yield "offset_drop", lambda n: n.left  # type: ignore[attr-defined]
    if isinstance(node, (ast.If, ast.IfExp)) and _flag_test(node.test):
        def flag(n: ast.AST) -> ast.AST:
            n.test = ast.UnaryOp(op=ast.Not(), operand=n.test)  # type: ignore[attr-defined]
            return n
        yield "negate", flag
    if isinstance(node, ast.stmt) and id(node) in parent_stmt_bound and _droppable(node, parent_stmt_bound[id(node)]):
        yield "drop", lambda n: None


def _ghost(node: ast.AST) -> bool:
    """A statement that records a ghost field (`s = ghost_...(...)`, model/state.py GHOST_FIELDS):
    kvmc's own instrumentation, not SGLang's logic, so not a site of mutation."""
    if not isinstance(node, (ast.Assign, ast.Expr)) or not isinstance(node.value, ast.Call):
        return False
    f = node.value.func
    return isinstance(f, ast.Name) and f.id.startswith("ghost_")


def _walk(fn: ast.FunctionDef) -> list[ast.AST]:
    """Every node of the function body in a fixed order (the docstring and decorators excluded):
    `ast.walk`'s breadth-first order, without the ghost statements and what they contain."""
    body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else fn.body
    out: list[ast.AST] = []
    for st in body:
        todo = deque([st])
        while todo:
            node = todo.popleft()
            if _ghost(node):
                continue
            out.append(node)
            todo.extend(ast.iter_child_nodes(node))
    return out


def _sites(name: str) -> list[tuple[int, int, str, Callable[[ast.AST], ast.AST | None]]]:
    """(node index in `_walk`, variant, operator, transform) for every mutation of transition `name`."""
    fn = _tree(name)
    bound = _bound_before(fn)
    out = []
    for i, node in enumerate(_walk(fn)):
        for v, (op, tf) in enumerate(_variants(node, bound)):
            out.append((i, v, op, tf))
    return out


def _unparse(node: ast.AST | None) -> str:
    if node is None:
        return "(statement dropped)"
    text = ast.unparse(node)
    return text if len(text) <= 100 else text[:97] + "..."


def generate(module: str | None = None, transition: str | None = None, ops: tuple[str, ...] = OPERATORS) -> list[Mutant]:
    """Every mutant of the transitions of `module` (default: all), in source order."""
    names = [transition] if transition else list(transitions(module))
    out: list[Mutant] = []
    for name in names:
        if name not in transitions():
            raise KeyError(f"unknown transition {name!r}; expected one of {sorted(transitions())}")
        fn = _tree(name)
        nodes = _walk(fn)
        mod = _source(name)[2]
        seen: dict[tuple[int, str], int] = {}
        for i, v, op, tf in _sites(name):
            if op not in ops:
                continue
            node = nodes[i]
            line = getattr(node, "lineno", fn.lineno)
            k = seen.get((line, op), 0)
            seen[(line, op)] = k + 1
            after = tf(copy.deepcopy(node))
            if isinstance(node, ast.If) and isinstance(after, ast.If):  # show the condition, not the block
                node, after = node.test, after.test
            out.append(Mutant(f"{name}@{line}:{op}:{k}", name, mod, op, line, _unparse(node), _unparse(after)))
    return out


def _locate(m: Mutant) -> tuple[int, int]:
    """The (node index, variant) of mutant `m` in its transition's current source."""
    fn = _tree(m.transition)
    nodes = _walk(fn)
    seen: dict[tuple[int, str], int] = {}
    for i, v, op, _tf in _sites(m.transition):
        line = getattr(nodes[i], "lineno", fn.lineno)
        k = seen.get((line, op), 0)
        seen[(line, op)] = k + 1
        if line == m.line and op == m.op and f"{m.transition}@{line}:{op}:{k}" == m.id:
            return i, v
    raise KeyError(f"mutant {m.id} is not in the current source of {m.transition} ({m.file}); regenerate the mutants")


def parse_id(mid: str) -> Mutant:
    """The mutant with this id, from the current source."""
    name = mid.split("@", 1)[0]
    for m in generate(transition=name):
        if m.id == mid:
            return m
    raise KeyError(f"no mutant {mid!r} in the current source of {name}")


def find(transition: str, op: str, before: str, after: str | None = None) -> Mutant:
    """The one mutant of `transition` by operator `op` that rewrites the source `before` (into
    `after`, where two rewrite the same source): found by what it changes, not by its line, so a
    test or a saved survivor list that names it this way survives edits elsewhere in the module."""
    hits = [m for m in generate(transition=transition, ops=(op,))
            if m.before == before and (after is None or m.after == after)]
    if len(hits) != 1:
        have = [f"{m.before} -> {m.after}" for m in generate(transition=transition, ops=(op,))]
        raise KeyError(f"{len(hits)} {op} mutants of {transition} rewrite {before!r}"
                       f"{f' into {after!r}' if after else ''}; expected exactly one (its {op} mutants: {have})")
    return hits[0]


def by_id(mid: str) -> Mutant:
    """The generated mutant `mid` (`<transition>@<line>:<operator>:<k>`, as `kvmc mutate --list`
    prints it for today's source); KeyError naming the transition's mutants by that operator if none."""
    transition, _, rest = mid.partition("@")
    op = rest.split(":")[1] if rest.count(":") == 2 else ""
    if transition not in transitions() or op not in OPERATORS:
        raise KeyError(f"generated mutant {mid!r}: expected <transition>@<line>:<operator>:<k> "
                       f"as `kvmc mutate --list` prints it")
    hits = [m for m in generate(transition=transition, ops=(op,)) if m.id == mid]
    if not hits:
        have = [m.id for m in generate(transition=transition, ops=(op,))]
        raise KeyError(f"no generated mutant {mid!r} in today's source (its {op} mutants: {have})")
    return hits[0]


def compile_mutant(m: Mutant) -> Callable[..., Any]:
    """The mutated transition as a function with the original's signature (nothing is written)."""
    i, v = _locate(m)
    fn = _tree(m.transition)
    nodes = _walk(fn)
    target = nodes[i]
    tf = list(_variants(target, _bound_before(fn)))[v][1]
    new = tf(copy.deepcopy(target))
    _replace(fn, target, new)
    ast.fix_missing_locations(fn)
    module = importlib.import_module(m.module)
    code = compile(ast.Module(body=[fn], type_ignores=[]), module.__file__ or m.file, "exec")
    ns = dict(vars(module))  # a copy: the module itself is never touched
    exec(code, ns)
    out = ns[m.transition]
    out.__kvmc_mutant__ = m.id  # type: ignore[attr-defined]
    return out  # type: ignore[no-any-return]


def _replace(root: ast.AST, target: ast.AST, new: ast.AST | None) -> None:
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for j, item in enumerate(value):
                    if item is target:
                        if new is None:
                            del value[j]
                            if not value:
                                value.append(ast.Pass())
                        else:
                            value[j] = new
                        return
            elif value is target:
                assert new is not None, "only a statement can be dropped"
                setattr(parent, field, new)
                return
    raise AssertionError("mutation target not found in its own tree")


def design_for(m: Mutant, base: Any = None) -> Any:
    """`base` (default: the `current` preset) with the mutant's transition overridden."""
    from model.designs import PRESETS, Design

    base = base if base is not None else PRESETS["current"]
    overrides = dict(base.overrides)
    overrides[m.transition] = compile_mutant(m)
    return Design(f"{base.name}+{m.id}", base.fixes, base.mutants, overrides)
