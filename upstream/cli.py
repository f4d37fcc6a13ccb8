"""Subcommands `kvmc sglang install`, `kvmc conform` and `kvmc explore` (registered by checker/cli.py through
`add_parsers`; also runnable as `python -m upstream ...`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence


def add_parsers(sub: Any) -> None:
    ps = sub.add_parser("sglang", help="install SGLang releases for `kvmc conform` (CPU, no CUDA)")
    ssub = ps.add_subparsers(dest="sglang_cmd", required=True)
    pi = ssub.add_parser("install", help="install releases, each into its own folder (idempotent, atomic)")
    pi.add_argument("versions", nargs="+", metavar="VERSION", help="e.g. 0.5.10.post1 0.5.13")
    pi.add_argument("--dir", help="install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    pi.set_defaults(fn=_lazy("install", "cmd_install"))

    pc = sub.add_parser("conform", help="compare the model with SGLang's own objects, release by release")
    g = pc.add_mutually_exclusive_group()
    g.add_argument("--sglang", action="append", metavar="VERSION", help="a release (repeatable)")
    g.add_argument("--all", action="store_true", help="every release a preset names")
    g.add_argument("--from-json", metavar="FILE", help="render an earlier run's --json output instead of running")
    pc.add_argument("--transition", action="append", metavar="NAME", help="a row (repeatable; default all)")
    pc.add_argument("--examples", type=int, default=2000, help="generated scenarios per row (default 2000)")
    pc.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    pc.add_argument("--design", help="compare against this design instead of the release's preset (with --mutant)")
    pc.add_argument("--mutant", action="append", default=[], help="plant a model mutant (model/mutants/)")
    pc.add_argument("--with", dest="with_", action="append", default=[], metavar="FIX[=VARIANT]",
                    help="turn a design flag on over the preset (or --design): does SGLang still agree?")
    pc.add_argument("--without", action="append", default=[], metavar="FIX",
                    help="turn a design flag off over the preset (or --design)")
    pc.add_argument("--generated-mutant", action="append", default=[], metavar="ID",
                    help="a generated mutant of `kvmc mutate --list` (e.g. a survivor: does SGLang tell it apart?)")
    pc.add_argument("--override", action="append", metavar="FILE",
                    help="replace a transition (a .py file with REPLACES and replacement, as model/mutants/)")
    pc.add_argument("--dir", help="install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    pc.add_argument("--install", action="store_true", help="install missing releases first")
    pc.add_argument("--jobs", type=int, default=2, help="releases run in parallel (default 2)")
    pc.add_argument("--device", default="cpu",
                    help="cpu (default) or cuda: SGLang's objects on the GPU, the real Triton allocator kernels")
    pc.add_argument("--json", action="store_true", help="one JSON document on stdout")
    pc.add_argument("--markdown", metavar="FILE", help="also write the agreement table as Markdown")
    pc.add_argument("--update-doc", metavar="FILE",
                    help="rewrite FILE's generated section (table, abstractions, disagreements), e.g. docs/conformance.md")
    pc.set_defaults(fn=_lazy("conform", "cmd_conform"))

    from .explore import add_parser as add_explore  # imports no SGLang, model or torch

    add_explore(sub)


def _lazy(module: str, name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        import importlib

        return int(getattr(importlib.import_module(f"upstream.{module}"), name)(args))

    return run


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kvmc")
    add_parsers(p.add_subparsers(dest="cmd", required=True))
    args = p.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
