"""What every `kvmc` subcommand shares: the usage error (one line, exit 2), the parser that raises
it, and the checks of a design, a property/config selection and a lemma set."""

from __future__ import annotations

import argparse
from typing import NoReturn, Sequence

from model.designs import FIXES, PRESETS, Design
from specs.configs import CONFIGS
from specs.lemmas import LEMMAS
from specs.properties import PROPERTIES


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _choices(kind: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise UsageError(f"unknown {kind} {value!r}; expected one of: {', '.join(allowed)}")


def build_design(name: str, without: list[str], with_: list[str], mutants: list[str]) -> Design:
    _choices("design", name, list(PRESETS))
    d = PRESETS[name]
    for f in without:
        _choices("fix", f, list(FIXES))
        d = d.with_fix(f, None)
    for spec in with_:
        if spec.count("=") > 1 or spec.startswith("=") or spec.endswith("="):
            raise UsageError(f"malformed --with {spec!r}; expected FIX or FIX=VARIANT")
        f, _, variant = spec.partition("=")
        _choices("fix", f, list(FIXES))
        v = variant or FIXES[f].variants[0]
        _choices(f"variant of {f}", v, list(FIXES[f].variants))
        d = d.with_fix(f, v)
    if mutants:
        from model.mutants import available

        known = sorted(available())
        for m in mutants:
            _choices("mutant", m, known)
        d = d.with_mutants(frozenset(mutants))
    return d


def add_design_options(p: argparse.ArgumentParser, mutant_help: str = "plant a bug (kvmc list)") -> None:
    """--design/--without/--with/--mutant, as `check` and `graph` take them (see build_design)."""
    p.add_argument("--design", default="current", help=f"release preset: {', '.join(PRESETS)} (default current)")
    p.add_argument("--without", action="append", default=[], metavar="FIX", help="turn a fix off")
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="FIX[=VARIANT]", help="turn a fix on")
    p.add_argument("--mutant", action="append", default=[], metavar="NAME", help=mutant_help)


def validate_selection(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The checks `check`, `check --all` and `review` share: properties, configs, depth, jobs,
    timeout and engine; returns (properties, configs). Raises UsageError (one line, exit 2)."""
    from checker.engines.run import EngineUnavailable, engine_check_config

    props = args.property or list(PROPERTIES)
    for p in props:
        _choices("property", p, list(PROPERTIES))
    configs = args.config or list(CONFIGS)
    for c in configs:
        _choices("config", c, list(CONFIGS))
    if args.depth <= 0:
        raise UsageError(f"--depth {args.depth} must be a positive number of scheduler iterations")
    if getattr(args, "jobs", None) is not None and args.jobs <= 0:
        raise UsageError(f"--jobs {args.jobs} must be a positive number of processes")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout} must be a positive number of seconds")
    try:
        engine_check_config(args.engine)
    except EngineUnavailable as e:
        raise UsageError(str(e)) from e
    return props, configs


def lemma_selection(args: argparse.Namespace) -> list[str] | None:
    """The lemmas the proofs may assume: all, less each `--without-lemma` (None: all)."""
    if not args.without_lemma:
        return None
    for n in args.without_lemma:
        _choices("lemma", n, list(LEMMAS))
    if args.engine not in ("bmc", "induction"):
        raise UsageError(f"--without-lemma applies to the proofs of the bmc and induction engines, not --engine {args.engine}")
    return [n for n in LEMMAS if n not in args.without_lemma]
