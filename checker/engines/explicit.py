"""Explicit-state engine (`--engine explicit`): breadth-first search over the concrete interpretation
of the model, fast, over the whole bounds of a config.

The same search as the graph engine (checker/engines/explicit_graph.py, which keeps the reachable graph
as a `networkx.DiGraph` for `kvmc graph`, liveness and `kvmc mutate`), the same verdicts, shortest
counterexamples, minimisation order and traces; what differs is how it is kept and enumerated:

* **Flat storage.** Per parameter point: a dict state -> index, the states in a list, and for each
  index its parent index, the successor index and the picks of the edge that found it. A node is
  (point, index); the states of two points never meet, so each point is its own search, and the
  points are searched level by level side by side (the shortest violation over all points is the
  first level holding one, as in the graph engine).
* **Choice trees without re-running their prefix.** A state's successors are every answer sequence
  to the step's named choices, walked depth-first (`EnumeratingOracle`'s order, so successor
  indices and traces are the graph engine's). The step is a plain Python function, which cannot be
  forked at a choice point; instead each run records every `@transition` call it makes (in the
  order calls start: the call's number, how many choices had been answered when it returned, what it
  returned and the choices it answered), and the next run of the same tree, which answers the same
  choices up to the one that advanced, returns a recorded call's result at once when that call
  returned before the advanced choice was asked: its inputs and every answer it read are those of
  the recorded run, so its result is too (the model is deterministic given its answers). The hook
  is `Ctx.overrides` (model/transition.py), which every transition call consults: each transition
  is wrapped, the design's own override (a planted bug, a patch) inside the wrapper, so the one
  definition of each transition is what runs. Per point one context serves every run (its memo of
  per-state counters, model/radix_cache.py::counters, lasts across the leaves of a tree, or across
  the property checks of a state, and is emptied between them: what it holds was computed, and its
  parameters read, in the same group; see `_ParamReads`).
* **Points share what does not depend on them** (`Shared`). A state's successors and a property's
  answer on it are functions of the state and of the parameters the evaluation reads; a context's
  `x.p` records those (`_ParamReads`: a scalar by name, a per-request or per-atom one by entry), so
  a tree, a single run of a tree (by its forced answers) or a property answer one point computed is
  reused by every point with the same values there. States are interned (one object per distinct
  state over all points) so those tables are keyed by identity. On hybrid_swa_hicache's 220
  explicit points at depth 3 the 12880 (point, state) nodes are 3634 distinct states; the points
  differ mostly in `max_new_tokens`, which the prefill adder reads as soon as a request is admitted.
  Keeping such a read by the outcomes of the comparisons that use it (concolic, instead of its value)
  was measured and does not pay here: the 3292 trees of those states stay 3292, because the step
  compares max_new_tokens in {1, 2, 3} against both 2 and 3 (the finish test at output lengths 1 and
  2, the adder's reservation), so every value takes a path of its own; the symbolic arithmetic made
  the search 1.8x slower.
* **The model compiled for plain values** (`FastPath`, the comment above it). The model is written
  once against `Ops` so z3 can read it: both sides of an `ite` and every operand of an `and_` are
  evaluated, a `branch` takes closures. The fast path compiles the model's own functions again from
  their source with the concrete meaning of those ops inline, lazy where the operand skipped is pure
  (reads, never chooses or assumes: a fixed point over the calls; a transition the design replaces
  is never pure and runs as written). The same runs, choices and results as the eager model, less
  work, and fewer parameters read (so more sharing). The compiled code is specialised to the
  search's config and design (`_Fold`: `x.cfg.*`, `x.ps`, `x.shape.*`, `x.on(...)`, `x.variant(...)`
  written as constants and the branches they decide folded away; `_Inline`: a helper that returns an
  expression of its parameters, `_under`, `on_device`, written in place of its calls, never a
  transition), one compiled path per (config, design). There is no second copy of a transition: each
  is compiled from its one definition, and the z3 engines never see the compiled code.
* **Whole bounds.** `bound_points`: every parameter point of `Config.bounds` up to a cap, the graph
  engine's points first (the explicit grid and its boundary points), then points drawn from the
  boundary values of every parameter at once (a length around a page, the window, the chunk; a pool
  around what the requests need: `boundary_values`), then points drawn from the whole bounds; each
  satisfying `params_ok`. `coverage` says, per parameter, how many of its values in the bounds some
  point searched has. A search over part of the bounds is never `holds` for the config: its words
  say `holds to depth k (not proved) on N of M parameter points` (M: the grid of the bounds, before
  `params_ok`).
* **Shards.** `jobs`: the points dealt in contiguous blocks (neighbouring points share the most)
  over forked processes (`--executor ray`: Ray tasks, checker/executors), each searching its share
  with a `Shared` of its own; the results combine as one search would:
  a property's shortest violation is the least over shards (ties: BMC's readable order, then the
  point's index, then the state's order in its level), its witness the earliest, and a shard that
  stopped (state cap, time) leaves the property unknown.

State reduction: none. Slot symmetry is not one for this model (docs/engines.md, "Symmetry breaking
over request slots": the waiting queue is in slot order while arrivals are free, so the runs are not
closed under renaming the slots); the per-point parameters make two points' states different
nodes; the ghost fields are read by properties. A state is stored as the model's own frozen `State`
(its hash, the tuple of its fields', computed once per object: model/state.py).

This engine models nothing itself; it drives model/system.py. SGLang commit: model/designs.py.
"""

from __future__ import annotations

import ast
import operator
import random
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Iterable

from model.config import PAGE_MULTIPLE, REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS, Config, Params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import OOM_NONE, State
from model.system import System
from model.transition import REGISTRY, TreeShape
from checker.engines.applies import for_config, nothing_applies
from checker.engines.explicit_graph import (  # noqa: F401  (re-exported: the graph engine's names)
    DEFAULT_GRAPH_CAP,
    DEFAULT_MAX_STATES,
    EnumeratingOracle,
    Explorer,
    Search,
    StateCapExceeded,
    boundary_points,
    boundary_values,
    check_config_graph,
    export_graph,
    fair_cycles,
    grid_points,
    param_points,
    readable_key,
    successors,
    to_dot,
)
from checker.engines.results import ConfigReport, Result
from checker.traces.trace import Step, Trace, run_concrete
from checker.verdict import Verdict
from specs.properties import PROPERTIES, Property

DEFAULT_MAX_POINTS = 500
VALUE_MEMO_SIZE = 50_000  # remembered choice-free transition calls per point (cleared when full)  # parameter points of the bounds searched by default (`bound_points`)


# -- one point's step, with the choice tree's prefix remembered ----------------------------------------
class _Oracle:
    """`EnumeratingOracle` that also keeps each answer's qualified name (a skipped call's answers are
    put back in the run's picks)."""

    __slots__ = ("prefix", "trail")

    def __init__(self, prefix: list[Any]) -> None:
        self.prefix = prefix
        self.trail: list[tuple[Any, Any, str]] = []  # (answer, hi, name); hi is True for a boolean choice

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        i = len(self.trail)
        v = int(self.prefix[i]) if i < len(self.prefix) else lo
        self.trail.append((v, hi, name))
        return v

    def pick_bool(self, name: str) -> bool:
        i = len(self.trail)
        v = bool(self.prefix[i]) if i < len(self.prefix) else False
        self.trail.append((v, True, name))
        return v


def _next_prefix(trail: list[tuple[Any, Any, str]]) -> list[Any] | None:
    """`EnumeratingOracle.next_prefix`: the last choice with a larger value left, advanced."""
    for i in range(len(trail) - 1, -1, -1):
        v, hi, _ = trail[i]
        if hi is True:
            if not v:
                return [a for a, _h, _n in trail[:i]] + [True]
        elif v < hi:
            return [a for a, _h, _n in trail[:i]] + [v + 1]
    return None


# -- the concrete fast path: the model's own functions, compiled for plain values ----------------------
# The model is written once against `Ops` (model/ops.py), so that z3 can read it: every operand of an
# `ite`, `and_`, `or_` is evaluated, and a `branch` takes two closures. Concretely most of that work
# is thrown away. `FastPath` compiles each function of the modules below again, from its own source
# (never a second copy of a transition), with the concrete meaning of those ops written inline:
# `x.branch(c, T, O)` becomes `T() if c else O()` (a closure without arguments inlined), which is what
# `Concrete.branch` does; `x.not_(a)` `not a`; `x.member(v, vs)` `v in vs`; `x.and_(*xs)` / `x.or_(*xs)`
# `all(xs)` / `any(xs)`; and an `ite`, `and_`, `or_`, `implies` whose operands that would no longer be
# evaluated are *pure* (they read, they do not choose) becomes Python's lazy `a if c else b`, `and`,
# `or` (as a bool). Pure: no `choose_*`, `assume` or `raise`, calls only to pure functions (the
# fast-path modules' functions, found pure by a fixed point over their calls; the ops; builtins; a
# method of the model's immutable values, and one given the context `x` only where every model method
# of that name is pure; `checkpoint` and `ghost`, which the engine's `Concrete` records nothing for); a
# call the analysis cannot resolve (a function passed as an argument) is not pure, and a transition
# the design overrides (a planted bug, a patch) is never pure and runs as written. Skipping a pure
# operand changes no answer, no choice and no assumption, so the runs, their choices and their results
# are the eager model's; what changes is less work, and fewer parameters read (a point then shares
# more trees: `Shared`). `FastPath.why` says, per function, why it is not pure.
FAST_MODULES = ("model.allocator", "model.allocation_sizing", "model.enqueue", "model.radix_cache", "model.session",
                "model.hicache", "model.prefill_adder", "model.schedule_batch", "model.speculative",
                "model.invariant_checker", "model.system", "specs.properties")
_PURE_OPS = frozenset({"ite", "branch", "and_", "or_", "not_", "member", "implies", "min", "max", "fdiv", "sum", "clamp0",
                       "ceil_page", "floor_page", "pages", "page_aligned", "on", "variant", "let", "checkpoint", "ghost",
                       "scope", "path"})
_IMPURE_OPS = frozenset({"choose_int", "choose_bool", "choose_bool_when", "assume"})
_PURE_BUILTINS = frozenset({"len", "range", "tuple", "list", "sum", "min", "max", "any", "all", "bool", "int", "abs",
                            "enumerate", "zip", "reversed", "sorted", "isinstance", "dict", "set", "frozenset", "id",
                            "getattr", "hasattr", "type", "str", "repr"})
# a `raise` may be an `Infeasible` (a branch that does not exist); an `assert` only stops a run that is
# wrong in both (it is not counted)
_NOT_PURE_NODES = (ast.Raise, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)
_MUTATING = frozenset({"append", "extend", "add", "update", "pop", "clear", "insert", "remove", "setdefault", "sort"})
_PURE_STDLIB = frozenset({"itertools", "operator", "math"})


class FastPath:
    """The fast-path modules compiled for one set of overridden transitions (module comment above):
    `fns[module][name]` the compiled function (a transition's compiled body under its name in
    `transitions`), `step(x, s)` the compiled `event_loop_iteration`, `prop(fn)` a property
    predicate's compiled function (itself where it is not a module function, e.g. a lambda)."""

    _CACHE: dict[frozenset[str], list["FastPath"]] = {}

    @classmethod
    def of(cls, overridden: Iterable[str], cfg: Config | None = None, design: Design | None = None) -> "FastPath":
        """The compiled model for a design that replaces the transitions `overridden` (built once),
        specialised to `cfg` and `design` where given. An entry serves every config and design with
        the same values of what its compilation folded (a pinned instance of a config, a shard's
        unpickled config, another design with the same fixes)."""
        key = frozenset(overridden)
        fps = cls._CACHE.setdefault(key, [])
        for fp in fps:
            if fp.cfg is cfg and fp.design is design:
                return fp
        for fp in fps:  # another config or design with the same values of everything folded (`_Fold.used`)
            if (fp.cfg is None) == (cfg is None) and (cfg is None or _Fold.same(fp.folded, cfg, design)):
                return fp
        if len(fps) >= 16:
            fps.clear()
        fp = cls(key, cfg=cfg, design=design)
        fps.append(fp)
        return fp

    def __init__(self, overridden: frozenset[str], modules: tuple[str, ...] = FAST_MODULES, cfg: Config | None = None,
                 design: Design | None = None) -> None:
        import __future__
        import importlib
        import inspect
        import textwrap
        import types

        self.overridden = overridden
        self.cfg, self.design = cfg, design
        mods = {m: importlib.import_module(m) for m in modules}
        shadow = {m: types.ModuleType(m + "[fast]") for m in mods}
        # per module: name -> (function, is_transition) of the functions it defines
        defs: dict[str, dict[str, tuple[Any, bool]]] = {}
        for m, mod in mods.items():
            d: dict[str, tuple[Any, bool]] = {}
            for name, obj in vars(mod).items():
                orig = getattr(obj, "original", None)
                if orig is not None and getattr(obj, "info", None) is not None and orig.__module__ == m:
                    d[name] = (orig, True)
                elif isinstance(obj, types.FunctionType) and obj.__module__ == m and obj.__closure__ is None \
                        and obj.__name__ == name:
                    d[name] = (obj, False)
            defs[m] = d
        # methods of the model's classes (Adder.at, ...): analysed for purity, not compiled
        methods: dict[str, list[tuple[str, str]]] = {}
        method_trees: dict[tuple[str, str], Any] = {}
        for m, mod in mods.items():
            for cname, cls in vars(mod).items():
                if not (isinstance(cls, type) and cls.__module__ == m):
                    continue
                for mname, meth in vars(cls).items():
                    if isinstance(meth, types.FunctionType) and meth.__code__.co_filename.endswith(".py"):
                        try:
                            t = ast.parse(textwrap.dedent(inspect.getsource(meth)))
                        except (OSError, TypeError, SyntaxError):
                            t = None
                        key = (m, f"{cname}.{mname}")
                        method_trees[key] = t
                        methods.setdefault(mname, []).append(key)
        trees: dict[tuple[str, str], Any] = {}
        for m, d in defs.items():
            for name, (fn, _t) in d.items():
                try:
                    src = textwrap.dedent(inspect.getsource(fn))
                except (OSError, TypeError):
                    continue
                t = ast.parse(src)
                f = t.body[0]
                if not isinstance(f, ast.FunctionDef):
                    continue
                f.decorator_list = []
                ast.increment_lineno(t, fn.__code__.co_firstlineno - 1)
                trees[(m, name)] = t

        def resolve(m: str, node: ast.expr) -> tuple[str, str] | None:
            """The fast-path function a call's target names, if it names one."""
            g = vars(mods[m])
            if isinstance(node, ast.Name):
                obj = g.get(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                mo = g.get(node.value.id)
                if not isinstance(mo, types.ModuleType) or mo.__name__ not in mods:
                    return None
                obj = getattr(mo, node.attr, None)
            else:
                return None
            if obj is None:
                return None
            fn = getattr(obj, "original", obj)
            mm = getattr(fn, "__module__", None)
            nm = getattr(fn, "__name__", None)
            if mm in defs and nm in defs[mm] and defs[mm][nm][0] is fn:
                return (mm, nm)
            return None

        # purity: a fixed point over the calls (a function is pure until one of its calls is not)
        calls: dict[tuple[str, str], set[tuple[str, str]]] = {}
        impure: set[tuple[str, str]] = set()

        def call_ok(m: str, c: ast.Call, locals_: set[str], deps: set[tuple[str, str]], operand: bool = False,
                    bound: frozenset[str] = frozenset()) -> bool:
            """Whether call `c` is pure (its fast-path callees added to `deps`, pure or not). `locals_`: the
            closures defined in the function (their bodies are analysed with it); `bound`: every other
            name the function binds (a call of one is unknown: a function passed in, a local shadowing
            a module's function)."""
            fnode = c.func
            if isinstance(fnode, ast.Attribute):
                v = fnode.value
                if fnode.attr in _IMPURE_OPS:  # whatever it is called on (`ops.assume`, `self.x.choose_bool`)
                    return False
                if isinstance(v, ast.Name) and v.id == "x":
                    return fnode.attr in _PURE_OPS
                root = v
                while isinstance(root, (ast.Attribute, ast.Subscript)):
                    root = root.value
                if isinstance(root, ast.Name) and root.id == "x":  # x.cfg.slot_of(r), x.memo.get(k): they read
                    return isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) and \
                        v.attr in ("memo", "cfg", "shape", "design", "p")
                r = resolve(m, fnode)
                if r is not None:
                    deps.add(r)
                    return True
                if isinstance(v, ast.Name) and isinstance(vars(mods[m]).get(v.id), types.ModuleType):
                    return vars(mods[m])[v.id].__name__ in _PURE_STDLIB  # a library module's function
                if any(isinstance(a, ast.Name) and a.id == "x" for a in [*c.args, *(k.value for k in c.keywords)]):
                    # a method given the context may choose: pure where every model method of the name is
                    keys = methods.get(fnode.attr)
                    if not keys:
                        return False
                    deps.update(keys)
                    return True
                # any other method call: the model's values are immutable (a State, an Adder, a tuple),
                # so a method reads them; a local list's `append` changes the caller's own list only
                return not (operand and fnode.attr in _MUTATING)
            if isinstance(fnode, ast.Name):
                if fnode.id in locals_:
                    return True  # a closure of this function: its body is part of this function's
                if fnode.id in bound:
                    return False
                r = resolve(m, fnode)
                if r is not None:
                    deps.add(r)
                    return True
                g = vars(mods[m])
                obj = g.get(fnode.id)
                if obj is None and fnode.id in _PURE_BUILTINS:
                    return True
                if isinstance(obj, type) and getattr(obj, "__module__", "").startswith(("model.", "specs.")):
                    return True  # a value class of the model (a dataclass): its constructor only builds
                return False
            return False

        def expr_pure(m: str, node: ast.AST, locals_: set[str], deps: set[tuple[str, str]],
                      bound: frozenset[str] = frozenset()) -> bool:
            for n in ast.walk(node):
                if isinstance(n, ast.Call) and not call_ok(m, n, locals_, deps, True, bound):
                    return False
                if isinstance(n, _NOT_PURE_NODES):
                    return False
            return True

        self.why: dict[tuple[str, str], str] = {}  # why a function is not pure: the first call or statement
        for key, t in method_trees.items():
            if t is None:
                impure.add(key)
                self.why[key] = "no source"
        for key, t in [*trees.items(), *((k, t) for k, t in method_trees.items() if t is not None)]:
            m = key[0]
            f = t.body[0]
            locals_ = {n.name for n in ast.walk(f) if isinstance(n, ast.FunctionDef) and n is not f}
            locals_ |= {tg.id for n in ast.walk(f) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Lambda)
                        for tg in n.targets if isinstance(tg, ast.Name)}
            bound = _bound_names(f) - locals_
            deps: set[tuple[str, str]] = set()
            for n in ast.walk(f):
                bad = isinstance(n, _NOT_PURE_NODES) or \
                    (isinstance(n, ast.Call) and not call_ok(m, n, locals_, deps, False, bound))
                if bad and key not in self.why:
                    self.why[key] = f"line {n.lineno}: {ast.unparse(n)[:80]}"
            if key in self.why:
                impure.add(key)
            calls[key] = deps
        for key in trees:
            if key[1] in overridden and defs[key[0]][key[1]][1]:
                impure.add(key)
                self.why[key] = "the design replaces it"
        for key in defs_keys(defs):
            if key not in trees:
                impure.add(key)
                self.why[key] = "no source"
        changed = True
        while changed:
            changed = False
            for key, deps in calls.items():
                if key not in impure and any(d in impure for d in deps):
                    impure.add(key)
                    self.why[key] = "calls " + ", ".join(sorted(d[1] for d in deps if d in impure))
                    changed = True
        self.pure = {k for k in trees if k not in impure}

        pure_set = self.pure

        def operand_pure(m: str, node: ast.AST, bound: frozenset[str]) -> bool:
            """An operand the rewrite may leave unevaluated: every call in it pure (a closure's call is
            not known pure here: `bound` holds every name the function binds)."""
            deps: set[tuple[str, str]] = set()
            if not expr_pure(m, node, set(), deps, bound):
                return False
            return all(d in pure_set for d in deps)

        def as_bool(e: ast.expr) -> ast.expr:
            return ast.IfExp(test=e, body=ast.Constant(True), orelse=ast.Constant(False))

        def inline(fn_node: ast.expr) -> ast.expr:
            """`fn_node()`, a closure without arguments written as its body."""
            if isinstance(fn_node, ast.Lambda):
                a = fn_node.args
                plain = not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg)
                if plain and len(a.defaults) == len(a.args) and all(
                        isinstance(dv, ast.Name) and dv.id == arg.arg for arg, dv in zip(a.args, a.defaults)):
                    return fn_node.body  # no arguments, or each default the same name: the body now
            return ast.Call(func=fn_node, args=[], keywords=[])

        class Rewrite(ast.NodeTransformer):
            def __init__(self, m: str, f: ast.FunctionDef) -> None:
                self.m = m
                self.bound = _bound_names(f)

            def visit_Call(self, c: ast.Call) -> ast.AST:
                c = self.generic_visit(c)  # type: ignore[assignment]
                f = c.func
                if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "x") or c.keywords:
                    return c
                op, args = f.attr, c.args
                starred = any(isinstance(a, ast.Starred) for a in args)
                if op == "branch" and len(args) == 3 and not starred:
                    return ast.IfExp(test=args[0], body=inline(args[1]), orelse=inline(args[2]))
                if op == "not_" and len(args) == 1 and not starred:
                    return ast.UnaryOp(op=ast.Not(), operand=args[0])
                if op == "member" and len(args) == 2 and not starred:
                    return ast.Compare(left=args[0], ops=[ast.In()], comparators=[args[1]])
                if op in ("and_", "or_"):
                    if len(args) == 1 and starred:
                        return ast.Call(func=ast.Name("all" if op == "and_" else "any", ast.Load()), args=[args[0].value],
                                        keywords=[])
                    if starred or not args:
                        return c
                    if len(args) == 1:
                        return ast.Call(func=ast.Name("bool", ast.Load()), args=[args[0]], keywords=[])
                    if all(operand_pure(self.m, a, self.bound) for a in args[1:]):
                        return as_bool(ast.BoolOp(op=ast.And() if op == "and_" else ast.Or(), values=list(args)))
                    return ast.Call(func=ast.Name("all" if op == "and_" else "any", ast.Load()),
                                    args=[ast.Tuple(elts=list(args), ctx=ast.Load())], keywords=[])
                if op == "implies" and len(args) == 2 and not starred:
                    a, b = args
                    if operand_pure(self.m, b, self.bound):
                        return as_bool(ast.BoolOp(op=ast.Or(), values=[ast.UnaryOp(op=ast.Not(), operand=a), b]))
                    return c
                if op == "ite" and len(args) == 3 and not starred:
                    if operand_pure(self.m, args[1], self.bound) and operand_pure(self.m, args[2], self.bound):
                        return ast.IfExp(test=args[0], body=args[1], orelse=args[2])
                    return c
                return c

        flags = __future__.annotations.compiler_flag
        self.fns: dict[str, dict[str, Any]] = {m: {} for m in mods}
        self.transitions: dict[str, Any] = {}
        for m, mod in mods.items():
            ns = vars(shadow[m])
            ns.update(vars(mod))
        rewritten: dict[tuple[str, str], Any] = {}
        fold = _Fold(cfg, design) if cfg is not None and design is not None else None
        for (m, name), t in trees.items():
            t = Rewrite(m, t.body[0]).visit(t)
            if fold is not None:
                t = fold.visit(t)
            rewritten[(m, name)] = t
        # small helpers written in place of their calls (a `return` of an expression of its parameters:
        # `_under`, `on_device`): never a transition, whose calls the engine records
        inlinable: dict[tuple[str, str], tuple[list[str], ast.expr]] = {}
        if cfg is not None and design is not None:
            for key, t in rewritten.items():
                if not defs[key[0]][key[1]][1]:
                    one = _one_expression(t.body[0])
                    if one is not None:
                        inlinable[key] = one
        for (m, name), t in rewritten.items():
            if inlinable:
                t = _Inline(lambda node, m=m: resolve(m, node), inlinable).visit(t)
                t = fold.visit(t)  # type: ignore[union-attr]  # what an inlined constant decides (`swa_gate_on(x)`)
            t = ast.fix_missing_locations(t)
            ns = vars(shadow[m])
            code = compile(t, inspect.getsourcefile(defs[m][name][0]) or m, "exec", flags=flags, dont_inherit=True)
            loc: dict[str, Any] = {}
            exec(code, ns, loc)
            fn = loc[name]
            if defs[m][name][1]:
                self.transitions[name] = fn
                ns[name] = _fast_transition(name, fn, getattr(mods[m], name))
            else:
                ns[name] = fn
            self.fns[m][name] = fn
        for m, mod in mods.items():  # module references and imported functions: their compiled ones
            ns = vars(shadow[m])
            for k, v in list(ns.items()):
                if isinstance(v, types.ModuleType) and v.__name__ in shadow:
                    ns[k] = shadow[v.__name__]
                else:
                    fn = getattr(v, "original", v)
                    mm, nm = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
                    if mm in defs and mm != m and nm in defs[mm] and defs[mm][nm][0] is fn and nm in vars(shadow[mm]):
                        ns[k] = vars(shadow[mm])[nm]
        self.shadow = shadow
        self.folded = dict(fold.used) if fold is not None else {}  # what the compiled code took as constants
        self.step = vars(shadow["model.system"])["event_loop_iteration"] if "model.system" in shadow else None
        props = mods.get("specs.properties")
        self._props = {id(v): vars(shadow["specs.properties"])[k] for k, v in vars(props).items()
                       if isinstance(v, types.FunctionType) and k in self.fns["specs.properties"]} if props else {}

    def prop(self, fn: Any) -> Any:
        return self._props.get(id(fn), fn)


def _constant(v: Any) -> bool:
    """`v` can be written as a constant of compiled code (an immutable plain value)."""
    if v is None or v.__class__ in (bool, int, str):
        return True
    return v.__class__ in (tuple, frozenset) and all(_constant(e) for e in v)


def _is_x(node: ast.AST, attr: str | None = None) -> bool:
    """`node` is the context `x` (or `x.attr`)."""
    if attr is not None:
        return isinstance(node, ast.Attribute) and node.attr == attr and _is_x(node.value)
    return isinstance(node, ast.Name) and node.id == "x"


_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
        ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
        ast.Is: operator.is_, ast.IsNot: operator.is_not}


class _Fold(ast.NodeTransformer):
    """The fast path specialised to one config and design: `x.cfg.NAME`, `x.ps` and `x.shape.NAME`
    (plain values) and `x.on("fix")` / `x.variant("fix")` written as their constants, then what they
    decide folded (`if`, `a if c else b`, `not`, `and` / `or`, a comparison of constants) so the dead
    branch is not compiled. The same values every run of the search reads through `x` (the context's
    config and design are the system's), so the same runs."""

    def __init__(self, cfg: Config, design: Design) -> None:
        self.cfg, self.design = cfg, design
        self.shape = TreeShape.of(cfg)
        self.used: dict[tuple[str, str], Any] = {}  # (where, name) -> the value folded (`value`)

    @staticmethod
    def value(cfg: Config, design: Design, shape: Any, where: str, name: str) -> Any:
        if where == "cfg":
            return getattr(cfg, name, _MISSING)
        if where == "shape":
            return getattr(shape, name, _MISSING)
        return getattr(design, where)(name)  # "on", "variant"

    @staticmethod
    def same(used: dict[tuple[str, str], Any], cfg: Config, design: Design) -> bool:
        """`cfg` and `design` give everything `used` recorded the same value (so the same compiled code)."""
        shape = TreeShape.of(cfg) if any(w == "shape" for w, _n in used) else None
        for (where, name), v in used.items():
            try:
                w = _Fold.value(cfg, design, shape, where, name)
            except KeyError:
                return False
            if w.__class__ is not v.__class__ or w != v:
                return False
        return True

    def _const(self, where: str, name: str) -> Any:
        v = _Fold.value(self.cfg, self.design, self.shape, where, name)
        if v is not _MISSING and _constant(v):
            self.used[(where, name)] = v
            return v
        return _MISSING

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            where = "cfg" if _is_x(node.value, "cfg") else "shape" if _is_x(node.value, "shape") else None
            if node.attr == "ps" and _is_x(node.value):
                where, node_attr = "cfg", "page_size"  # `Ctx.ps` is the config's page size
            else:
                node_attr = node.attr
            if where is not None:
                v = self._const(where, node_attr)
                if v is not _MISSING:
                    return ast.copy_location(ast.Constant(v), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("on", "variant") and _is_x(f.value) and not node.keywords \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            try:
                v = self._const(f.attr, node.args[0].value)
            except KeyError:  # an unknown fix: left to raise where it is asked
                return node
            if v is not _MISSING:
                return ast.copy_location(ast.Constant(v), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant):
            return ast.copy_location(ast.Constant(not node.operand.value), node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if isinstance(node.test, ast.Constant):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If) -> Any:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if isinstance(node.test, ast.Constant):
            return (node.body if node.test.value else node.orelse) or ast.copy_location(ast.Pass(), node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        """`a and b`: a constant that does not decide is dropped; one that decides ends the operands
        (Python's value of the whole is the first deciding operand, else the last)."""
        node = self.generic_visit(node)  # type: ignore[assignment]
        decides = (lambda v: not v) if isinstance(node.op, ast.And) else bool
        vals: list[ast.expr] = []
        for i, v in enumerate(node.values):
            last = i == len(node.values) - 1
            if isinstance(v, ast.Constant) and not last:
                if decides(v.value):
                    vals.append(v)
                    break
                continue
            vals.append(v)
        if len(vals) == 1:
            return vals[0]
        node.values = vals
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        parts = [node.left, *node.comparators]
        if all(isinstance(e, ast.Constant) for e in parts) and all(type(o) in _CMP for o in node.ops) and all(
                _singleton(a.value) or _singleton(b.value)  # `is` of other values asks their identity: left as it is
                for o, a, b in zip(node.ops, parts, parts[1:]) if isinstance(o, (ast.Is, ast.IsNot))):
            out = all(_CMP[type(o)](a.value, b.value) for o, a, b in zip(node.ops, parts, parts[1:]))
            return ast.copy_location(ast.Constant(out), node)
        return node


_MISSING = object()


def _singleton(v: Any) -> bool:
    return v is None or v is True or v is False


def _one_expression(f: ast.FunctionDef) -> tuple[list[str], ast.expr] | None:
    """(parameters, expression) of a function that returns an expression of its plain positional
    parameters only (no global, no closure, no default), else None."""
    a = f.args
    if a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg or a.defaults or f.decorator_list:
        return None
    body = [b for b in f.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return None
    e = body[0].value
    params = [arg.arg for arg in a.args]
    for n in ast.walk(e):
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr,
                          ast.Yield, ast.YieldFrom, ast.Await)):
            return None
        if isinstance(n, ast.Name) and n.id not in params:
            return None
    return params, e


class _Inline(ast.NodeTransformer):
    """A call of an inlinable helper (`_one_expression`) whose arguments are names or constants,
    written as the helper's expression with its parameters replaced by them."""

    def __init__(self, resolve: Callable[[ast.expr], tuple[str, str] | None],
                 inlinable: dict[tuple[str, str], tuple[list[str], ast.expr]], depth: int = 0) -> None:
        self.resolve, self.inlinable, self.depth = resolve, inlinable, depth

    def visit_Call(self, node: ast.Call) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if node.keywords or self.depth > 4:
            return node
        key = self.resolve(node.func)
        hit = self.inlinable.get(key) if key is not None else None
        if hit is None:
            return node
        params, e = hit
        if len(node.args) != len(params) or not all(isinstance(a, (ast.Name, ast.Constant)) for a in node.args):
            return node
        sub = dict(zip(params, node.args))

        class Sub(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.AST:
                return ast.copy_location(_copy(sub[n.id]), n)

        out = Sub().visit(_copy(e))
        return ast.copy_location(_Inline(self.resolve, self.inlinable, self.depth + 1).visit(out), node)


def _copy(node: ast.AST) -> Any:
    import copy

    return copy.deepcopy(node)


def defs_keys(defs: dict[str, dict[str, tuple[Any, bool]]]) -> list[tuple[str, str]]:
    return [(m, n) for m, d in defs.items() for n in d]


def _bound_names(f: ast.FunctionDef) -> frozenset[str]:
    """Every name function `f` (with the functions and lambdas inside it) binds: parameters,
    assignment targets, loop and comprehension variables, inner definitions."""
    out: set[str] = set()
    for n in ast.walk(f):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not f:
            out.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.update((a.asname or a.name).split(".")[0] for a in n.names)
    return frozenset(out)


def _fast_transition(name: str, fn: Callable[..., Any], declared: Any) -> Callable[..., Any]:
    """A compiled transition as the model calls it: through `x.overrides` (the engine's recording
    wrapper, a design's replacement), else its compiled body (no frame check: the engine's contexts
    check none)."""

    def run(x: Any, *args: Any, **kw: Any) -> Any:
        return x.overrides.get(name, fn)(x, *args, **kw)

    run.__name__ = name
    run.original = declared.original  # type: ignore[attr-defined]
    run.info = declared.info  # type: ignore[attr-defined]
    return run


class _ParamReads:
    """The point's `Params` as a transition reads them (`x.p`), recording what one group of
    evaluations (a choice tree, one state's property checks) read: a scalar parameter by its name, an
    entry of a per-request or per-atom one by (name, index). The first read of a field in the group
    goes through `__getattr__`, which records a scalar (and leaves it in the instance's dict, where
    later reads find it) or hands out the tuple as an `_EntryReads`, which records each entry read;
    `reset` starts a group. Anything not a field (a method such as `as_dict`) counts as reading every
    parameter."""

    def __init__(self, p: Params) -> None:
        self.__dict__["_p"] = p
        self.__dict__["_seen"] = {}

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        p = d["_p"]
        v = getattr(p, name)
        if name in _PARAM_FIELDS:
            if isinstance(v, tuple):
                t = _EntryReads(v)
                t._name, t._seen = name, d["_seen"]
                d[name] = t
                return t
            d["_seen"][name] = v
            d[name] = v
        else:
            self.everything()
        return v

    def everything(self) -> None:
        p, seen = self.__dict__["_p"], self.__dict__["_seen"]
        for f in _PARAM_FIELDS:
            v = getattr(p, f)
            if isinstance(v, tuple):
                for i, e in enumerate(v):
                    seen[(f, i)] = e
            else:
                seen[f] = v

    def reset(self) -> None:
        d = self.__dict__
        p = d["_p"]
        d.clear()
        d["_p"] = p
        d["_seen"] = {}

    # a group's reads only grow (an entry, once recorded, keeps its value): the tuples are rebuilt
    # only when there are more
    def names(self) -> tuple[Any, ...]:
        d = self.__dict__
        c = d.get("_names")
        if c is None or len(c) != len(d["_seen"]):
            c = d["_names"] = tuple(d["_seen"])
        return c

    def reads(self) -> tuple[tuple[Any, Any], ...]:
        d = self.__dict__
        c = d.get("_items")
        if c is None or len(c) != len(d["_seen"]):
            c = d["_items"] = tuple(d["_seen"].items())
        return c

    def read(self, names: tuple[Any, ...]) -> None:
        """Count `names` as read in this group (a remembered call that read them is not run again)."""
        seen = self.__dict__["_seen"]
        p = self.__dict__["_p"]
        for n in names:
            if n not in seen:
                seen[n] = getattr(p, n) if n.__class__ is str else getattr(p, n[0])[n[1]]


class _EntryReads(tuple):
    """A per-request or per-atom parameter as `_ParamReads` hands it out: indexing records the
    entry read; any other use of the tuple (iterating, comparing, hashing it) records every entry."""

    _name: str
    _seen: dict[Any, Any]

    def __getitem__(self, i: Any) -> Any:
        v = tuple.__getitem__(self, i)
        if i.__class__ is int and i >= 0:
            self._seen[(self._name, i)] = v
        else:
            self._all()
        return v

    def _all(self) -> None:
        for i in range(len(self)):
            self._seen[(self._name, i)] = tuple.__getitem__(self, i)

    def __iter__(self) -> Any:
        self._all()
        return tuple.__iter__(self)

    def __eq__(self, other: Any) -> Any:
        self._all()
        return tuple.__eq__(self, other)

    def __ne__(self, other: Any) -> Any:
        self._all()
        return tuple.__ne__(self, other)

    def __hash__(self) -> int:
        self._all()
        return tuple.__hash__(self)

    def __contains__(self, v: Any) -> bool:
        self._all()
        return tuple.__contains__(self, v)

    def __add__(self, other: Any) -> Any:
        self._all()
        return tuple.__add__(self, other)

    def __reduce__(self) -> Any:
        self._all()
        return (tuple, (tuple(tuple.__iter__(self)),))


_PARAM_FIELDS = frozenset(f.name for f in fields(Params))


class Shared:
    """What the points of one search share: a state's choice tree and a property's answer on a state
    are functions of the state and of the parameters the evaluation read (`_ParamReads`); the model
    reads nothing else of a point (the config and the design are the search's). Per canonical state
    (`intern`: one object per distinct state over every point, so the tables below are keyed by its
    id), the entries (reads, result) computed so far: a point whose values of those parameters are
    the entry's gets the result without running anything. Two points share most of their states
    (hybrid_swa_hicache's 220 explicit points at depth 3: 12880 (point, state) nodes, 3634 distinct
    states): the points differ in a few parameters a state's step mostly does not read."""

    def __init__(self) -> None:
        self.canon: dict[State, State] = {}
        self.trees: dict[int, list[tuple[tuple[tuple[str, Any], ...], list[tuple[dict[str, Any], State]]]]] = {}
        self.props: dict[tuple[int, Any], list[tuple[tuple[tuple[str, Any], ...], bool]]] = {}  # (state id, predicate)
        # one run of a tree: (state id, the run's forced answers) -> (reads, (picks, next) or None, next answers)
        self.runs: dict[tuple[int, tuple[Any, ...]], list[tuple[Any, Any, Any]]] = {}

    def intern(self, s: State) -> State:
        return self.canon.setdefault(s, s)


def _matches(p: Params, reads: tuple[tuple[Any, Any], ...]) -> bool:
    """The point `p` has the values `reads` recorded (`_ParamReads.reads`)."""
    for n, v in reads:
        if (getattr(p, n) if n.__class__ is str else getattr(p, n[0])[n[1]]) != v:
            return False
    return True


class PointRunner:
    """The step of one system at one parameter point: `successors(s)` walks the choice tree of `s`
    (module docstring: a recorded transition call that returned before the advanced choice is not
    run again), `holds(fn, s)` evaluates a property predicate in the same context. With `shared`
    (the search's `Shared`), a state's tree and a property's answer another point computed are
    reused where the parameters they read agree; the states it returns are then canonical
    (`Shared.intern`), and `s` must be too."""

    def __init__(self, system: System, params: Params, values: bool = True, shared: Shared | None = None,
                 fast: bool = True) -> None:
        self.system = system
        self.params = params
        self.shared = shared
        self.ops = Concrete()
        self.x = system.ctx(self.ops, params)
        # properties and `enabled` read through a context of their own (no transition recording), sharing the memo
        self.px = system.ctx(Concrete(), params)
        self.px.memo = self.x.memo
        # the parameters each group of evaluations reads (`_ParamReads`): a tree's, a state's properties'
        self.reads, self.preads = _ParamReads(params), _ParamReads(params)
        self.x.p, self.px.p = self.reads, self.preads
        self._pstate: State | None = None  # the state whose property checks are the current group
        for c in (self.x, self.px):  # the concrete primitives that are builtins already, bound as such
            c.min, c.max, c.sum, c.not_, c.fdiv = min, max, sum, operator.not_, operator.floordiv
        self.oracle = _Oracle([])
        self.old: dict[int, tuple[int, int, int, Any]] = {}  # call number -> (end number, first answer, answers at return, result)
        self.new: dict[int, tuple[int, int, int, Any]] = {}
        self.prev: list[tuple[Any, Any, str]] = []  # the previous run's trail
        self.seq = 0
        self.j = 0  # the first answer this run may give differently from the previous one
        self.skipped = 0
        self.calls = 0
        self.value_hits = 0
        self.tree_hits = 0
        self.run_hits = 0
        self.prop_hits = 0
        # choice-free transition calls by the value of their arguments (a state, request slot, ...) and
        # whether choices count where they run (`Ops.path`): such a call is a function of those and of
        # the parameters it read, which are among those its group had read when it returned (kept with
        # it, and counted as read by a group that reuses it)
        self.values: dict[Any, tuple[Any, int, tuple[str, ...]]] | None = {} if values else None
        # the compiled model (`FastPath`), where the system is the model's own (a subclass may step otherwise)
        self.fast = FastPath.of(self.x.overrides, system.cfg, system.design) \
            if fast and type(system).step is System.step and self.x.cfg is system.cfg and self.x.design is system.design \
            else None
        compiled = self.fast.transitions if self.fast is not None else {}
        for name, info in list(REGISTRY.items()):
            self.x.overrides[name] = self._wrap(self.x.overrides.get(name, compiled.get(name, info.fn)))
        self._step = (lambda x, s, action: self.fast.step(x, s) if action == "event_loop_iteration"
                      else system.step(x, s, action)) if self.fast is not None else system.step

    def _wrap(self, impl: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(x: Any, *args: Any, **kw: Any) -> Any:
            k = self.seq
            self.seq = k + 1
            e = self.old.get(k)
            if e is not None and e[2] <= self.j:
                end_seq, first, last, out = e
                trail, picks, prev = self.oracle.trail, self.ops.picks, self.prev
                for t in range(first, last):
                    a = prev[t]
                    trail.append(a)
                    picks[a[2]] = a[0]
                new, old = self.new, self.old
                for kk in range(k, end_seq):
                    ee = old.get(kk)
                    if ee is not None:
                        new[kk] = ee
                self.seq = end_seq
                self.skipped += 1
                return out
            first = len(self.oracle.trail)
            vm = self.values
            key: Any = None
            if vm is not None:
                try:
                    key = (impl, args, tuple(kw.items()) if kw else (), all(self.ops._path))
                    hit = vm.get(key)
                except TypeError:  # an argument that is not hashable: not remembered
                    key = hit = None
                if hit is not None:
                    out, nested, names = hit
                    self.reads.read(names)
                    self.seq += nested
                    self.new[k] = (self.seq, first, first, out)
                    self.value_hits += 1
                    return out
            self.calls += 1
            out = impl(x, *args, **kw)
            last = len(self.oracle.trail)
            self.new[k] = (self.seq, first, last, out)
            if key is not None and last == first:  # answered no choice: a function of its arguments
                if len(vm) >= VALUE_MEMO_SIZE:
                    vm.clear()
                vm[key] = (out, self.seq - k - 1, self.reads.names())
            return out

        recorded.__name__ = getattr(impl, "__name__", "transition")
        return recorded

    def successors(self, s: State, action: str = "event_loop_iteration") -> list[tuple[dict[str, Any], State]]:
        """Every (picks, next state) of `s`, in the graph engine's order (`explicit_graph.successors`)."""
        sh = self.shared if action == "event_loop_iteration" else None
        p = self.params
        if sh is not None:
            entries = sh.trees.get(id(s))
            if entries is None:
                entries = sh.trees[id(s)] = []
            for reads, hit in entries:
                if _matches(p, reads):
                    self.tree_hits += 1
                    return hit
        # a new group: the parameters it reads start empty, and so does the per-state memo (a result
        # remembered there was computed by this group, whose reads include what it read)
        self.reads.reset()
        self.x.memo.clear()
        self._pstate = None
        out: list[tuple[dict[str, Any], State]] = []
        ops, x, step = self.ops, self.x, self._step
        prefix: list[Any] | None = []
        self.old, self.prev, self.j = {}, [], 0
        while prefix is not None:
            if sh is not None:  # this run another point made, where the parameters it read agree
                key = (id(s), tuple(prefix))
                runs = sh.runs.get(key)
                if runs is None:
                    runs = sh.runs[key] = []
                hit = None
                for e in runs:
                    if _matches(p, e[0]):
                        hit = e
                        break
                if hit is not None:
                    self.run_hits += 1
                    self.reads.read(tuple(n for n, _v in hit[0]))
                    if hit[1] is not None:
                        out.append(hit[1])
                    prefix = hit[2]
                    self.old, self.prev = {}, []  # the next run replays nothing of this one
                    self.j = len(prefix) - 1 if prefix else 0
                    continue
            self.oracle = _Oracle(prefix)
            ops.oracle = self.oracle
            ops.picks = {}
            self.new, self.seq = {}, 0
            leaf: tuple[dict[str, Any], State] | None = None
            try:
                nxt = step(x, s, action)
            except Infeasible:
                pass
            else:
                leaf = (ops.picks, sh.intern(nxt) if sh is not None else nxt)
                out.append(leaf)
            self.old, self.prev = self.new, self.oracle.trail
            prefix = _next_prefix(self.prev)
            self.j = len(prefix) - 1 if prefix else 0
            if sh is not None:
                # what the group read so far: a superset of what this run read (a run reads nothing
                # of the runs before it but their replayed calls, which this group ran)
                runs.append((self.reads.reads(), leaf, prefix))
        self.old, self.new, self.prev = {}, {}, []
        if sh is not None:
            entries.append((self.reads.reads(), out))
        return out

    def holds(self, fn: Any, s: State) -> bool:
        sh = self.shared
        if self.fast is not None:
            fn = self.fast.prop(fn)
        if sh is None:
            return bool(fn(self.px, s))
        key = (id(s), fn)
        entries = sh.props.get(key)
        if entries is None:
            entries = sh.props[key] = []
        for reads, ok in entries:
            if _matches(self.params, reads):
                self.prop_hits += 1
                return ok
        if self._pstate is not s:  # a new group: this state's property checks
            self.preads.reset()
            self.px.memo.clear()
            self._pstate = s
        ok = bool(fn(self.px, s))
        entries.append((self.preads.reads(), ok))
        return ok

    def init(self) -> State:
        s = self.system.init(self.px)
        return self.shared.intern(s) if self.shared is not None else s

    def live(self, s: State) -> bool:
        return s.oom == OOM_NONE and self.system.enabled(self.px, s) is not False


# -- the parameter points of the whole bounds --------------------------------------------------------
def _values(cfg: Config, name: str) -> list[int]:
    lo, hi = cfg.bound(name)
    step = cfg.page_size if name in PAGE_MULTIPLE else 1
    return list(range(lo, hi + 1, step))


def _arity(cfg: Config, name: str) -> int:
    return cfg.num_reqs if name in REQ_PARAMS else cfg.warm_atoms if name in WARM_PARAMS else 0


def grid_size(cfg: Config) -> int:
    """How many points the grid of the config's bounds has (before `params_ok`)."""
    n = 1
    for name in SCALAR_PARAMS:
        n *= len(_values(cfg, name))
    for name in (*REQ_PARAMS, *WARM_PARAMS):
        n *= len(_values(cfg, name)) ** _arity(cfg, name)
    return n


def _draw(cfg: Config, rng: random.Random, choices: dict[str, list[int]]) -> Params:
    d: dict[str, Any] = {}
    for name in SCALAR_PARAMS:
        d[name] = rng.choice(choices[name])
    for name in (*REQ_PARAMS, *WARM_PARAMS):
        vals = tuple(rng.choice(choices[name]) for _ in range(_arity(cfg, name)))
        d[name] = tuple(bool(v) for v in vals) if name in ("warm_device", "warm_host") else vals
    return Params(**d)


@dataclass
class Points:
    """The points a search runs and how many the bounds hold: `total` is every point satisfying
    `params_ok` where `exact`, else the grid of the bounds before `params_ok`."""

    points: list[Params]
    total: int
    exact: bool


def bound_points(system: System, cap: int = DEFAULT_MAX_POINTS, seed: int = 0) -> Points:
    """Up to `cap` parameter points of the config's bounds satisfying `params_ok` (and at least the
    graph engine's points), in this order: the graph engine's points (`param_points`: the explicit
    grid, then its boundary points), then
    points drawn (seeded, so the list is the same every run) with every parameter at one of its
    boundary values (`boundary_values`, plus the ends of its bounds) at once, then points drawn from
    the whole bounds. Bounds of at most `4 * cap` grid points are enumerated whole (and counted
    exactly); a config whose bounds hold fewer points than the cap gets every one of them."""
    cfg = system.cfg
    ok = lambda p: bool(system.params_ok(system.ctx(Concrete(), p)))  # noqa: E731
    first = param_points(system)
    out: list[Params] = []
    seen: set[Params] = set()
    for p in first:  # every one of them, whatever the cap: a search never checks less than the graph engine's
        if p not in seen:
            seen.add(p)
            out.append(p)
    cap = max(cap, len(out))
    total = grid_size(cfg)
    if total <= cap * 4:  # small bounds: every point, in the grid's order after the first ones
        from model.config import enumerate_params

        valid = [p for p in enumerate_params(cfg, explicit=False) if p in seen or ok(p)]
        for p in valid:
            if len(out) >= cap:
                break
            if p not in seen:
                seen.add(p)
                out.append(p)
        return Points(out, len(set(valid) | seen), True)
    rng = random.Random(seed)
    base = first[len(first) // 2] if first else None
    edge = boundary_values(cfg, base) if base is not None else {}
    every = {n: _values(cfg, n) for n in (*SCALAR_PARAMS, *REQ_PARAMS, *WARM_PARAMS)}
    edge_vals = {n: sorted(set(edge.get(n, set())) | {every[n][0], every[n][-1]}) for n in every}
    for choices, share in ((edge_vals, (cap - len(out) + 1) // 2), (every, cap)):
        want = min(cap, len(out) + share)
        tries = 0
        while len(out) < want and tries < 40 * share + 100:
            tries += 1
            p = _draw(cfg, rng, choices)
            if p not in seen and ok(p):
                seen.add(p)
                out.append(p)
    return Points(out, total, False)


def coverage(cfg: Config, points: Iterable[Params]) -> dict[str, tuple[int, int]]:
    """Per parameter with more than one value in the bounds: (values some point has, values in the bounds)."""
    seen: dict[str, set[Any]] = {n: set() for n in (*SCALAR_PARAMS, *REQ_PARAMS, *WARM_PARAMS)}
    for p in points:
        for n in seen:
            v = getattr(p, n)
            seen[n].update(int(e) for e in v) if isinstance(v, tuple) else seen[n].add(int(v))
    out = {}
    for n, vals in seen.items():
        if (n in REQ_PARAMS or n in WARM_PARAMS) and not _arity(cfg, n):
            continue
        every = set(_values(cfg, n))
        if len(every) > 1:
            out[n] = (len(vals & every), len(every))
    return out


class ExplicitResult(Result):
    """A `Result` whose words say over how much of the bounds it holds (never `holds` for the whole
    config when the points searched are part of its bounds)."""

    def words(self) -> str:
        w = self.verdict.words(self.depth)
        n, m = self.meta.get("parameter_points"), self.meta.get("points_in_bounds")
        if self.verdict is not Verdict.VIOLATED and n is not None and m is not None and n < m:
            cov = self.meta.get("coverage") or {}
            part = ", ".join(f"{k} {a}/{b}" for k, (a, b) in cov.items() if a < b)
            grid = "" if self.meta.get("points_exact") else " grid"
            w += f" on {n} of {m} parameter points of the bounds{grid}" + (f" (values covered: {part})" if part else "")
        return w


# -- the search ----------------------------------------------------------------------------------------
@dataclass
class _Viol:
    depth: int
    key: tuple[Any, ...]  # (readable_key, point index, order in its level)
    point: int
    path: list[int]  # state indices from the root of its point


@dataclass
class ShardResult:
    """What one shard's search found (plain data: crosses a process boundary)."""

    violations: dict[str, tuple[int, tuple[Any, ...], int, list[tuple[dict[str, Any], int]]]]  # prop -> (depth, key, point, [(picks, index)])
    witness: dict[str, int | None]
    reached: int
    stopped: str
    exhausted_at: int | None
    distinct_states: int
    transitions: int
    skipped_calls: int = 0
    run_calls: int = 0
    levels: list[tuple[int, float]] = field(default_factory=list)  # (distinct states by the end of depth d, seconds)
    value_hits: int = 0
    shared_hits: int = 0  # trees, runs and property answers taken from another point (`Shared`)


class FastExplorer:
    """The fast search over (parameter point, state); see the module docstring. `run` returns the
    graph engine's `Search`-shaped results (`results`) without a graph."""

    def __init__(self, system: System, props: list[str] | None = None, points: list[Params] | None = None,
                 max_states: int = DEFAULT_MAX_STATES, time_limit_s: float = 0.0, minimize: bool = True,
                 point_ids: list[int] | None = None) -> None:
        self.system = system
        self.props: list[Property] = [PROPERTIES[p] for p in for_config(system.cfg, props or None)]
        self.points = points if points is not None else param_points(system)
        self.point_ids = point_ids if point_ids is not None else list(range(len(self.points)))
        self.max_states = max_states
        self.time_limit_s = time_limit_s
        self.minimize = minimize

    def search(self, max_depth: int, keep_going: bool = True, progress: Any = None, t0: float | None = None) -> ShardResult:
        t0 = time.perf_counter() if t0 is None else t0
        shared = Shared()
        runners = [PointRunner(self.system, p, shared=shared) for p in self.points]
        ids: list[dict[State, int]] = [{} for _ in self.points]
        states: list[list[State]] = [[] for _ in self.points]
        parent: list[list[int]] = [[] for _ in self.points]
        via: list[list[tuple[dict[str, Any], int]]] = [[] for _ in self.points]
        frontier: list[tuple[int, int]] = []
        for pi, run in enumerate(runners):
            s0 = run.init()
            ids[pi][s0] = 0
            states[pi].append(s0)
            parent[pi].append(-1)
            via[pi].append(({}, -1))
            frontier.append((pi, 0))
        count = len(frontier)
        open_props = list(self.props)
        witness: dict[str, int | None] = {p.name: None for p in self.props}
        found: dict[str, _Viol] = {}
        transitions = 0
        stopped = ""
        exhausted_at: int | None = None
        depth = reached = 0
        levels: list[tuple[int, float]] = []
        while True:
            bad: dict[str, list[tuple[Any, ...]]] = {}
            pending = [p for p in self.props if p in open_props or witness[p.name] is None]
            if pending:
                # per property: (it, checked, witness still wanted); `open_props` does not change within
                # a level (and a `Property`'s `==` compares its fields: membership asked once here)
                checks = [[prop, prop in open_props, witness[prop.name] is None] for prop in pending]
                for pos, (pi, li) in enumerate(frontier):
                    run, s = runners[pi], states[pi][li]
                    for c in checks:
                        prop = c[0]
                        if c[1] and not run.holds(prop.holds, s):
                            bad.setdefault(prop.name, []).append(
                                ((readable_key(self.points[pi]) if self.minimize else ()), self.point_ids[pi], pos, pi, li))
                        elif c[2] and run.holds(prop.witness, s):
                            witness[prop.name] = depth
                            c[2] = False
            for prop in list(open_props):
                if prop.name in bad:
                    open_props.remove(prop)
                    key = min(bad[prop.name]) if self.minimize else bad[prop.name][0]
                    pi, li = key[3], key[4]
                    path = [li]
                    while parent[pi][path[-1]] >= 0:
                        path.append(parent[pi][path[-1]])
                    found[prop.name] = _Viol(depth, key[:3], pi, path[::-1])
            reached = depth
            levels.append((count, time.perf_counter() - t0))
            if progress:
                status = {p.name: (f"violated@{found[p.name].depth}" if p.name in found else "open") for p in self.props}
                progress(depth, time.perf_counter() - t0, status)
            if not frontier:
                exhausted_at = max(depth - 1, 0)
                reached = max(max_depth, reached)
                break
            if depth >= max_depth or not open_props:
                break
            if not keep_going and found:
                stopped = "first violation"
                break
            nxt: list[tuple[int, int]] = []
            for pi, li in frontier:
                run = runners[pi]
                s = states[pi][li]
                if not run.live(s):
                    continue
                seen, st, par, vi = ids[pi], states[pi], parent[pi], via[pi]
                for idx, (picks, s2) in enumerate(run.successors(s)):
                    transitions += 1
                    if s2 not in seen:
                        m = len(st)
                        seen[s2] = m
                        st.append(s2)
                        par.append(li)
                        vi.append((picks, idx))
                        nxt.append((pi, m))
                        count += 1
                if count > self.max_states:
                    stopped = f"state cap: more than {self.max_states} states by depth {depth + 1}"
                    break
                if self.time_limit_s and time.perf_counter() - t0 > self.time_limit_s:
                    stopped = f"time limit: {self.time_limit_s:.0f}s spent by depth {depth + 1}"
                    break
            if stopped:
                break
            frontier = nxt
            depth += 1
        viols = {name: (v.depth, v.key, self.point_ids[v.point], [via[v.point][i] for i in v.path[1:]])
                 for name, v in found.items()}
        return ShardResult(viols, witness, reached, stopped, exhausted_at, count, transitions,
                           sum(r.skipped for r in runners), sum(r.calls for r in runners), levels,
                           sum(r.value_hits for r in runners),
                           sum(r.tree_hits + r.run_hits + r.prop_hits for r in runners))

    def run(self, max_depth: int, keep_going: bool = True, progress: Any = None) -> "FastSearch":
        t0 = time.perf_counter()
        shard = self.search(max_depth, keep_going, progress, t0)
        return combine(self.system, self.props, self.points, [shard], max_depth, time.perf_counter() - t0)


@dataclass
class FastSearch:
    """The outcome of a fast search (the graph engine's `Search` without the graph)."""

    points: list[Params]
    results: dict[str, Result]
    depth_reached: int
    distinct_states: int
    transitions: int
    exhausted_at: int | None
    stopped: str = ""
    shards: list[ShardResult] = field(default_factory=list)


def _trace(system: System, params: Params, edges: list[tuple[dict[str, Any], int]], prop: str) -> Trace:
    # the same concrete re-run every engine's trace goes through (checker/traces/trace.py)
    states, picks = run_concrete(system, params, [("event_loop_iteration", pk) for pk, _ in edges])
    steps = [Step("event_loop_iteration", picks[t], states[t + 1]) for t in range(len(edges))]
    tr = Trace(system.cfg, system.design, params, states[0], steps, prop, "explicit")
    tr.meta["successor_index"] = [i for _, i in edges]
    return tr


def combine(system: System, props: list[Property], points: list[Params], shards: list[ShardResult], max_depth: int,
            elapsed: float, points_in_bounds: int | None = None, points_exact: bool = True) -> FastSearch:
    """The results of one search over every shard's points (module docstring, "Shards")."""
    cfg = system.cfg
    stopped = next((s.stopped for s in shards if s.stopped and s.stopped != "first violation"), "") or \
        next((s.stopped for s in shards if s.stopped), "")
    incomplete = bool(stopped) and stopped != "first violation"
    reached = min(s.reached for s in shards) if shards else 0
    exhausted = all(s.exhausted_at is not None for s in shards)
    exhausted_at = max(s.exhausted_at or 0 for s in shards) if exhausted and shards else None
    states = sum(s.distinct_states for s in shards)
    transitions = sum(s.transitions for s in shards)
    cov = coverage(cfg, points)
    meta = dict(engine="explicit", distinct_states=states, transitions=transitions, parameter_points=len(points),
                points_in_bounds=points_in_bounds if points_in_bounds is not None else len(points), points_exact=points_exact,
                exhausted_at=exhausted_at, coverage=cov, shards=len(shards),
                states_per_s=round(states / elapsed, 1) if elapsed > 0 else None)
    results: dict[str, Result] = {}
    for prop in props:
        name = prop.name
        ws = [s.witness.get(name) for s in shards if s.witness.get(name) is not None]
        w = min(ws) if ws else None
        vs = [s.violations[name] for s in shards if name in s.violations]
        if vs:
            depth, _key, pid, edges = min(vs, key=lambda v: (v[0], v[1]))
            trace = _trace(system, points[pid], edges, name)
            r = ExplicitResult(name, Verdict.VIOLATED, depth, trace, w, seconds=elapsed)
        elif incomplete:
            r = ExplicitResult(name, Verdict.UNKNOWN, reached, None, w, reason=f"search stopped at depth {reached} ({stopped})")
        elif w is not None:
            r = ExplicitResult(name, Verdict.HOLDS_TO_DEPTH, reached, None, w)
        elif stopped == "first violation":
            r = ExplicitResult(name, Verdict.UNKNOWN, reached, None, None,
                               reason=f"not checked past depth {reached}: stopped at the first violation")
        else:
            r = ExplicitResult(name, Verdict.VACUOUS, reached, None, None)
        r.seconds = r.seconds or elapsed
        r.meta.update(meta)
        results[name] = r
    return FastSearch(points, results, reached, states, transitions, exhausted_at, stopped, shards)


# -- shards over processes ----------------------------------------------------------------------------
def _shard_job(design: Design, cfg: Config, props: list[str], points: list[Params], point_ids: list[int], depth: int,
               keep_going: bool, max_states: int, time_limit_s: float, minimize: bool) -> ShardResult:
    system = System(cfg, design)
    return FastExplorer(system, props, points, max_states, time_limit_s, minimize, point_ids).search(depth, keep_going)


def _run_shards(args: list[tuple[Any, ...]]) -> list[ShardResult]:
    from checker import executors

    ex = executors.ACTIVE
    if ex is not None and hasattr(ex, "map"):  # `--executor ray`: one task per shard
        return list(ex.map(_shard_job, args))
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    with ctx.Pool(len(args)) as pool:
        return pool.starmap(_shard_job, args)


def search(design: Design, cfg: Config, props: list[str] | None, depth: int, points: list[Params] | None = None,
           jobs: int = 1, keep_going: bool = True, max_states: int = DEFAULT_MAX_STATES, time_limit_s: float = 0.0,
           minimize: bool = True, progress: Any = None, points_in_bounds: int | None = None,
           points_exact: bool = True) -> FastSearch:
    """The fast search of `cfg`'s `points` (default: the graph engine's) in `jobs` shards."""
    system = System(cfg, design)
    names = for_config(cfg, props or None)
    pts = points if points is not None else param_points(system)
    t0 = time.perf_counter()
    jobs = max(1, min(jobs, len(pts)))
    if jobs == 1:
        ex = FastExplorer(system, names, pts, max_states, time_limit_s, minimize)
        shards = [ex.search(depth, keep_going, progress, t0)]
    else:
        # contiguous blocks: neighbouring points differ in few parameters, so a shard's points share
        # more trees (`Shared`) than points dealt round-robin
        n = len(pts)
        parts = [list(range(k * n // jobs, (k + 1) * n // jobs)) for k in range(jobs)]
        args = [(design, cfg, names, [pts[i] for i in ids], ids, depth, keep_going, max_states, time_limit_s, minimize)
                for ids in parts]
        shards = _run_shards(args)
    return combine(system, [PROPERTIES[n] for n in names], pts, shards, depth, time.perf_counter() - t0,
                   points_in_bounds, points_exact)


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True,
                 keep_going: bool = True, max_states: int = DEFAULT_MAX_STATES, jobs: int | None = None,
                 max_points: int = DEFAULT_MAX_POINTS) -> Any:
    """`checker/engines/run.py::check_config` for the explicit engine: the fast search over
    `bound_points` (up to `max_points` of the config's bounds) in `jobs` shards (default 1; `prove` has
    no effect: an explicit search is bounded; `timeout_ms` limits the whole search)."""
    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    system = System(cfg, design)
    bp = bound_points(system, max_points)
    res = search(design, cfg, props, depth, bp.points, jobs or 1, keep_going, max_states, timeout_ms / 1000.0, minimize,
                 (lambda t, el, st: progress(cfg.name, t, el, st)) if progress and (jobs or 1) == 1 else None,
                 points_in_bounds=bp.total, points_exact=bp.exact)
    # the search statistics are in every result's meta (distinct_states, transitions, coverage, ...); the
    # ConfigReport's `proof` stays empty: an explicit search proves nothing beyond its bound
    return ConfigReport(cfg.name, res.results, time.perf_counter() - t0, {})

