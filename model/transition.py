"""`@transition`: how a transition declares what SGLang method it models and what it modifies.

Every function of the model that changes the state is declared with

    @transition("mem_cache/swa_radix_cache.py::SWARadixCache.inc_lock_ref",
                modifies=("full_evictable_drift", "full_protected_drift", ...))

A function that only reads the state, but computes something SGLang computes (a budget such as
`rem_swa_tokens`, the decode step's page demand, the enqueue clip of `max_new_tokens`, the busy
check), is declared the same way with `modifies=()`: it is a place where SGLang's logic lives, so
planted bugs, generated mutants (`kvmc mutate`) and reviewers' patches must be able to replace it.
Small accessors of kvmc's own encoding (a node's lockers, a page count) are not declared.

The declaration is data: `kvmc list` prints it, the frame check enforces it (in the concrete
interpretation, after every call, each field not in `modifies` must be unchanged; mypyvy's
`modifies` and TLA+'s UNCHANGED, made executable), and it is the hook through which a planted bug
(`model/mutants/`) or a reviewer's patch (`kvmc review --head file.py`) replaces the transition
for one design without editing the model (a patch's frame error names the patch file's line:
model/patch.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from .config import Config, Params
from .designs import Design
from .ops import Ops
from .state import FIELD_NAMES, State


class FrameViolation(AssertionError):
    """A transition changed a field it does not declare in `modifies`."""


@dataclass(frozen=True)
class TransitionInfo:
    name: str
    models: str  # SGLang file::Class.method (path relative to python/sglang/srt/)
    modifies: tuple[str, ...]
    doc: str
    fn: Callable[..., Any]


REGISTRY: dict[str, TransitionInfo] = {}


def transition(models: str, modifies: tuple[str, ...]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    unknown = [m for m in modifies if m not in FIELD_NAMES]
    if unknown:
        raise ValueError(f"@transition(models={models!r}) modifies unknown field(s) {unknown}; fields are {FIELD_NAMES}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = fn.__name__
        if name in REGISTRY:
            raise ValueError(f"transition {name!r} is defined twice ({REGISTRY[name].models} and {models})")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        REGISTRY[name] = TransitionInfo(name, models, tuple(modifies), doc, fn)
        allowed = frozenset(modifies)

        @functools.wraps(fn)
        def run(x: "Ctx", *args: Any, **kw: Any) -> Any:
            impl = x.overrides.get(name, fn)
            out = impl(x, *args, **kw)
            s = args[0] if args else None
            if x.check_frames and isinstance(s, State):
                new = out[0] if isinstance(out, tuple) else out
                try:
                    if isinstance(new, State):
                        _check_frame(name, allowed, s, new)
                    elif allowed:
                        raise TypeError(f"transition {name} declares modifies={sorted(allowed)} but returned no State")
                except (FrameViolation, TypeError) as e:
                    blame = getattr(impl, "frame_error", None)  # a reviewer's patch (model/patch.py): its file and line
                    if blame is None:
                        raise
                    raise blame(e) from None
            return out

        run.original = fn  # type: ignore[attr-defined]
        run.info = REGISTRY[name]  # type: ignore[attr-defined]
        return run

    return wrap


def _check_frame(name: str, allowed: frozenset[str], before: State, after: State) -> None:
    for f in FIELD_NAMES:
        if f in allowed:
            continue
        if getattr(before, f) != getattr(after, f):
            raise FrameViolation(
                f"{name} changed {f!r} ({getattr(before, f)!r} -> {getattr(after, f)!r}) "
                f"but does not list it in modifies={sorted(allowed)}"
            )


@dataclass(frozen=True)
class TreeShape:
    """The static tree of a config, precomputed: parents, children, ancestors, descendants, and
    each request slot's path (see model/config.py)."""

    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    ancestors: tuple[tuple[int, ...], ...]  # a and its ancestors, deepest first
    descendants: tuple[tuple[int, ...], ...]  # strict descendants
    covering: tuple[tuple[int, ...], ...]  # the nodes a lock at which covers a: a and its descendants
    path: tuple[tuple[int, ...], ...]  # per request slot, root first
    private: tuple[tuple[int, ...], ...]  # per request slot

    @staticmethod
    def of(cfg: Config) -> "TreeShape":
        K = cfg.num_atoms
        anc = tuple(cfg.ancestors(a) for a in range(K))
        return TreeShape(
            parent=tuple(cfg.parent(a) for a in range(K)),
            children=tuple(cfg.children(a) for a in range(K)),
            ancestors=anc,
            descendants=tuple(tuple(b for b in range(K) if b != a and a in anc[b]) for a in range(K)),
            covering=tuple(tuple(n for n in range(K) if a in anc[n]) for a in range(K)),
            path=tuple(cfg.req_path(r) for r in range(cfg.num_reqs)),
            private=tuple(cfg.private_chain(r) for r in range(cfg.num_reqs)),
        )


_SHAPES: dict[int, tuple[Any, TreeShape]] = {}  # id(cfg) -> (cfg, its shape): a Config is frozen but not hashable


def _shape_of(cfg: Config) -> TreeShape:
    """`TreeShape.of(cfg)`, computed once per Config object (a concrete run builds a Ctx per step)."""
    hit = _SHAPES.get(id(cfg))
    if hit is not None and hit[0] is cfg:
        return hit[1]
    if len(_SHAPES) >= 256:
        _SHAPES.clear()
    sh = TreeShape.of(cfg)
    _SHAPES[id(cfg)] = (cfg, sh)
    return sh


class Ctx:
    """Everything a transition reads besides the state: the interpretation, the bounded config,
    the design (fix flags, mutants) and the symbolic constants."""

    def __init__(self, ops: Ops, cfg: Config, design: Design, p: Params, check_frames: bool = False) -> None:
        self.ops = ops
        self.cfg = cfg
        self.design = design
        self.p = p
        self.check_frames = check_frames and not ops.symbolic
        self.overrides: dict[str, Callable[..., Any]] = {}
        from .mutants import resolve_overrides

        self.overrides.update(resolve_overrides(design))
        self.ps = cfg.page_size
        # the arithmetic of the interpretation, bound once (transitions call these a lot)
        self.ite = ops.ite
        self.branch = ops.branch
        self.and_ = ops.and_
        self.or_ = ops.or_
        self.member = ops.member
        self.not_ = ops.not_
        self.implies = ops.implies
        self.min = ops.min
        self.max = ops.max
        self.fdiv = ops.fdiv
        self.sum = ops.sum
        self.clamp0 = ops.clamp0
        self.choose_int = ops.choose_int
        self.choose_bool = ops.choose_bool
        self.assume = ops.assume
        self.let = ops.let
        self.checkpoint = ops.checkpoint
        self.ghost = ops.ghost
        self.scope = ops.scope
        self.path = ops.path
        self.shape: TreeShape = _shape_of(cfg)  # an attribute, not a property: read thousands of times a step
        # results of pure functions of one state, keyed by the state's identity (radix_cache.counters):
        # a state is immutable and its terms do not depend on the path, in either interpretation
        self.memo: dict[Any, tuple[Any, Any]] = {}

    def choose_bool_when(self, name: str, cond: Any) -> Any:
        """A choice that can only be true when `cond` holds. Concretely the oracle is not asked
        when `cond` is false (so enumeration does not branch on impossible choices)."""
        if not self.ops.symbolic:
            return self.choose_bool(name) if cond else False
        if cond is False:
            return False
        v = self.choose_bool(name)
        self.assume(self.implies(v, cond))
        return v

    def ceil_page(self, v: Any) -> Any:
        return self.ops.ceil_page(v, self.ps)

    def floor_page(self, v: Any) -> Any:
        return self.ops.floor_page(v, self.ps)

    def page_aligned(self, v: Any) -> Any:
        return self.ops.page_aligned(v, self.ps)

    def pages(self, v: Any) -> Any:
        return self.ops.pages(v, self.ps)

    def on(self, fix: str) -> bool:
        return self.design.on(fix)

    def variant(self, fix: str) -> str | None:
        return self.design.variant(fix)
