"""`kvmc patch`: write and check a design change in plain Python (docs/patches.md).

    kvmc patch new TRANSITION [-o FILE]   a patch file that changes nothing yet: the transition's body
                                          as plain Python (`a if c else b`, `min`, `and`), its SGLang
                                          citation and its frame (`modifies`), `REPLACES`
    kvmc patch check FILE                 run it on random states of every config it runs in

`check` runs the patched design concretely with the random engine's machinery (a Hypothesis state
machine generated from the model; each run draws a parameter point and every named choice), on
each selected config, and counts the calls of the patched transition: a config where it is never
called does not run it. Then, on states where it was called, it runs the same step symbolically
(a z3 state pinned to the concrete one, the choices pinned to the concrete picks) and compares the
z3 model's next state with the concrete one: the two interpretations of the patch must agree (a
plain-Python construct that means something else on z3 terms shows here, not in a review).

Any error the patch makes, loading or running, in either interpretation, is one line
`FILE:LINE: what went wrong` and exit status 2. Exit 3: the transition never ran (nothing
checked). Exit 0: it ran, without error, and both interpretations agreed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checker.cli.common import UsageError, add_design_options, build_design

EXIT_OK, EXIT_USAGE, EXIT_NOT_RUN = 0, 2, 3
DEFAULT_EXAMPLES = 40  # random runs per config
DEFAULT_DEPTH = 6  # scheduler iterations per run
AGREEMENT_STATES = 12  # states per config re-run symbolically


# -- new ------------------------------------------------------------------------------------------
def cmd_new(args: argparse.Namespace) -> int:
    import model.system  # noqa: F401  (registers every transition)
    from model.patch import plain_source
    from model.transition import REGISTRY

    name = args.transition
    if name not in REGISTRY:
        raise UsageError(f"unknown transition {name!r}; expected one of: {', '.join(sorted(REGISTRY))} (kvmc list)")
    text = plain_source(name)
    out = args.output if args.output is not None else f"{name.lstrip('_')}_patch.py"
    if out == "-":
        sys.stdout.write(text)
        return EXIT_OK
    path = Path(out)
    if not out.endswith(".py"):
        raise UsageError(f"-o {out!r}: a patch file is Python; expected a name ending in .py")
    if path.exists() and not args.force:
        raise UsageError(f"{out} exists; choose another -o FILE or pass --force to overwrite it")
    if path.parent != Path("") and not path.parent.is_dir():
        raise UsageError(f"-o {out!r}: directory {str(path.parent)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=path.parent or Path("."))
    except OSError as e:
        raise UsageError(f"-o {out!r}: cannot write in {str(path.parent or '.')!r} ({e.strerror})") from None
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"wrote {out}: {name} as plain Python; edit it, then `kvmc patch check {out}` and "
          f"`kvmc review --head-patch {out}`")
    return EXIT_OK


# -- check ----------------------------------------------------------------------------------------
class _Counted:
    """The patch as an override, counting its concrete calls (frame errors still name its file)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.calls = 0
        self.frame_error = fn.frame_error

    def __call__(self, x: Any, *args: Any, **kw: Any) -> Any:
        if not x.ops.symbolic:
            self.calls += 1
        return self.fn(x, *args, **kw)


@dataclass
class ConfigCheck:
    config: str
    runs: int = 0
    steps: int = 0
    calls: int = 0
    agreed: int = 0  # states on which the symbolic step gave the concrete next state
    samples: list[tuple[Any, Any, dict[str, Any], Any]] = field(default_factory=list, repr=False)

    def line(self) -> str:
        if not self.calls:
            return f"{self.config}: not run ({self.runs} random runs, {self.steps} steps never called it)"
        return (f"{self.config}: called {self.calls} times in {self.runs} random runs ({self.steps} steps); "
                f"concrete and symbolic agree on {self.agreed} states")


class Disagreement(Exception):
    """The two interpretations of the patched step differ on a state (the message says where)."""


def _concrete(design: Any, cfg: Any, counted: _Counted, examples: int, depth: int, keep: int) -> ConfigCheck:
    """Random runs of the patched design on `cfg` (Hypothesis); a patch error propagates."""
    from hypothesis import HealthCheck, Phase, Verbosity, settings
    from hypothesis.stateful import invariant, run_state_machine_as_test

    from model.system import System

    from checker.engines.random_engine import Recorder, domain_points, machine_for

    system = System(cfg, design)
    rec = Recorder()
    res = ConfigCheck(cfg.name)
    try:
        points = domain_points(system)
    except ValueError:
        return res
    base = machine_for(system, [], points, rec)

    class Sampled(base):  # type: ignore[misc, valid-type]
        @invariant()
        def kvmc_sample(self) -> None:
            # a step that called the patch: (params, state before, its picks, state after)
            if not hasattr(self, "state"):
                return
            prev = getattr(self, "_kvmc_prev", None)
            if prev is not None and len(self.actions) == prev[0] + 1 and counted.calls > prev[2]:
                if len(res.samples) < keep:
                    res.samples.append((self.params, prev[1], dict(self.actions[-1][1]), self.state))
                elif res.calls % 7 == 0:  # later states too, not only the first runs'
                    res.samples[counted.calls % keep] = (self.params, prev[1], dict(self.actions[-1][1]), self.state)
            self._kvmc_prev = (len(self.actions), self.state, counted.calls)
            res.calls = counted.calls

    conf = settings(max_examples=examples, stateful_step_count=max(depth, 1) + 1, deadline=None, derandomize=True,
                    database=None, verbosity=Verbosity.quiet, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), phases=(Phase.explicit, Phase.generate))
    before = counted.calls
    run_state_machine_as_test(Sampled, settings=conf)
    res.runs, res.steps, res.calls = rec.runs, rec.steps, counted.calls - before
    return res


def agree(design: Any, cfg: Any, samples: list[tuple[Any, Any, dict[str, Any], Any]]) -> int:
    """Re-run each sampled step symbolically, from a z3 state pinned to the concrete one with the
    choices pinned to the concrete picks; the z3 model's next state must be the concrete next state.
    Returns the number of states compared; raises `Disagreement` (or the patch's `PatchError`)."""
    import z3

    from model.config import symbolic_params
    from model.ops import Symbolic
    from model.state import FIELD_NAMES
    from model.system import System

    from checker.engines.encode import eval_state
    from checker.engines.substeps import free_state
    from checker.traces.trace import first_difference

    if not samples:
        return 0
    system = System(cfg, design)
    params, _bounds = symbolic_params(cfg, z3)
    x = system.ctx(Symbolic(0), params)
    s0 = free_state(system, params, "patch")
    nxt = system.step(x, s0)
    solver = z3.Solver()
    solver.add(*x.ops.constraints)
    choices = dict(x.ops.choices)

    def pins(sym: Any, val: Any) -> list[Any]:
        if isinstance(sym, tuple):
            return [c for a, b in zip(sym, val) for c in pins(a, b)]
        if isinstance(sym, (bool, int)):
            return []
        return [sym == val]

    n = 0
    for p, s, picks, after in samples:
        solver.push()
        for name, sv in params.as_dict().items():
            solver.add(*pins(sv, getattr(p, name)))
        for f in FIELD_NAMES:
            solver.add(*pins(getattr(s0, f), getattr(s, f)))
        for k, v in picks.items():
            if k in choices:
                solver.add(choices[k] == v)
        r = solver.check()
        if r != z3.sat:
            solver.pop()
            raise Disagreement(f"config {cfg.name}: the symbolic step has no successor for a state and choices the "
                               f"concrete step ran ({r}; picks {picks})")
        got = eval_state(nxt, solver.model())
        solver.pop()
        d = first_difference(after, got)
        if d is not None:
            raise Disagreement(f"config {cfg.name}: after a step that calls the patch, {d[0]} is {d[1]!r} concretely "
                               f"but {d[2]!r} symbolically (picks {picks})")
        n += 1
    return n


def check_patch(path: str, design: Any, configs: list[str], examples: int = DEFAULT_EXAMPLES,
                depth: int = DEFAULT_DEPTH, states: int = AGREEMENT_STATES, log: Any = None) -> list[ConfigCheck]:
    """`kvmc patch check`: per config, random runs with the patch, then the two interpretations
    compared on up to `states` states where it ran. Raises `PatchError` (`FILE:LINE: ...`) for the
    patch's errors and `Disagreement` when the interpretations differ."""
    from model.designs import Design
    from model.patch import PatchError, load_patch
    from specs.configs import CONFIGS

    name, fn = load_patch(path)
    counted = _Counted(fn)
    overrides = dict(design.overrides)
    overrides[name] = counted
    d = Design(f"{design.name}+{Path(path).stem}", design.fixes, design.mutants, overrides)
    out = []
    for c in configs:
        res = _concrete(d, CONFIGS[c], counted, examples, depth, states)
        if res.calls:
            try:
                res.agreed = agree(d, CONFIGS[c], res.samples)
            except Disagreement as e:
                raise PatchError(f"{fn.where}:{fn.line}: the concrete and the symbolic run of the patch disagree: {e}") from None
        if log is not None:
            log(res.line())
        out.append(res)
    return out


def cmd_check(args: argparse.Namespace) -> int:
    from model.patch import PatchError, load_patch
    from specs.configs import CONFIGS

    f = args.file
    if not f.endswith(".py"):
        raise UsageError(f"patch file {f!r} must be a Python file (.py)")
    for c in args.config:
        if c not in CONFIGS:
            raise UsageError(f"unknown config {c!r}; expected one of: {', '.join(CONFIGS)}")
    for n, v in (("--examples", args.examples), ("--depth", args.depth), ("--states", args.states)):
        if v < (0 if n == "--states" else 1):
            raise UsageError(f"{n} {v}: expected a positive number")
    design = build_design(args.design, args.without, args.with_, args.mutant)
    try:
        name, _fn = load_patch(f)
        print(f"{f}: replaces {name}; {args.examples} random runs of {args.depth} steps per config", flush=True)
        res = check_patch(f, design, args.config or list(CONFIGS), args.examples, args.depth, args.states,
                          log=lambda line: print("  " + line, flush=True))
    except PatchError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    ran = [r for r in res if r.calls]
    if not ran:
        print(f"kvmc: {name} never ran in these configs: nothing was checked (try --config, --depth)", file=sys.stderr)
        return EXIT_NOT_RUN
    print(f"ok: no error in {sum(r.calls for r in ran)} calls on {len(ran)} configs; both interpretations agree on "
          f"{sum(r.agreed for r in ran)} states")
    return EXIT_OK


def add_parser(sub: Any) -> Any:
    """`kvmc patch new|check` (registered by checker/cli/app.py)."""
    from checker.cli.common import _Parser

    pp = sub.add_parser("patch", help="write (new) or check (check) a design change written in plain Python")
    ps = pp.add_subparsers(dest="patch_cmd", required=True, parser_class=_Parser, metavar="{new,check}")
    pn = ps.add_parser("new", help="a patch file with a transition's current body as plain Python")
    pn.add_argument("transition", help="the transition to change (kvmc list)")
    pn.add_argument("-o", "--output", default=None, metavar="FILE.py",
                    help="where to write it (default <transition>_patch.py; - for stdout)")
    pn.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    pn.set_defaults(fn=cmd_new)
    pc = ps.add_parser("check", help="run a patch on random states of every config, in both interpretations")
    pc.add_argument("file", metavar="FILE.py")
    add_design_options(pc)
    pc.add_argument("--config", action="append", default=[], metavar="NAME", help="default: all")
    pc.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES, help=f"random runs per config (default {DEFAULT_EXAMPLES})")
    pc.add_argument("--depth", type=int, default=DEFAULT_DEPTH, help=f"steps per run (default {DEFAULT_DEPTH})")
    pc.add_argument("--states", type=int, default=AGREEMENT_STATES,
                    help=f"states per config re-run symbolically (default {AGREEMENT_STATES}; 0: none)")
    pc.set_defaults(fn=cmd_check)
    return pp
