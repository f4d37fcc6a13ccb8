"""The conformance worker: one subprocess per SGLang release (its PYTHONPATH selects the release,
the dependencies and the stubs; upstream/conform.py starts it). For each row it runs Hypothesis
twice with the same seed:

1. generate `examples` scenarios, run each on SGLang's objects and on kvmc's model, and count
   agreements, documented abstractions, disagreements and errors (no shrinking: every scenario
   counts). An error is a scenario that raised where the row does not expect it, in SGLang's
   objects, in the model or in the harness (an environment that cannot run a release's Rust core,
   say): nothing was compared, so it is neither an agreement nor a disagreement about the model,
   and it is reported apart, with the first traceback;
2. if some scenario disagreed, run again with shrinking on, failing on the first disagreement:
   Hypothesis shrinks it to a minimal scenario, printed side by side.

Prints one JSON document on stdout: {"version", "design", "device", "kernels", "rows": [{"row",
"scenarios", "agreed", "abstractions": {name: count}, "disagreed", "errored", "minimal": {...} | null,
"first_error": {"scenario", "error"} | null, "seconds"}]}.
`kernels` says what the paged allocator's `alloc_extend` ran here (upstream/kernels.py::launch_kind):
"routed" (kvmc's torch versions, cpu up to 0.5.21), "torch" (SGLang's own torch path, cpu 0.5.22+)
or "triton" (the real kernels: `--device cuda`).

`--device cuda`: SGLang's objects are built on the GPU (upstream/real.py::configure), nothing is
routed, and upstream/stubs moves to the end of sys.path before torch or triton is imported, so the
real triton wins over kvmc's stub (upstream/devices.py::real_triton_first; it fails loudly if not).

`--serve` (upstream/serve.py, inside `shared_workers()`, cpu only): the release is set up once and each
command line, one JSON list per stdin line, runs in a fork of the set-up process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from typing import Any


class Disagreement(AssertionError):
    pass


def _classify(row: Any, sc: Any, design: Any, version: str) -> tuple[str, list, str | None]:
    """("agree" | "abstraction" | "disagree" | "error", differing observations, abstraction name)."""
    from .abstractions import match

    from .devices import GpuFaultAvoided

    try:
        obs = row.run(sc, design)
    except GpuFaultAvoided as e:  # on cuda, a launch that would fault (upstream/devices.py)
        return "abstraction", [("gpu", str(e), None)], "paged_kernel_reads_empty_free_list"
    except Exception:  # a scenario that could not run compared nothing: an error, never a disagreement
        return "error", [("exception", traceback.format_exc(limit=6)[-1500:], None)], None
    diffs = [o for o in obs if o[1] != o[2]]
    if not diffs:
        return "agree", [], None
    name = match(row.name, sc, diffs, design, version)
    return ("abstraction", diffs, name) if name else ("disagree", diffs, None)


def _no_local_constants() -> None:
    """Hypothesis mines integer constants from every "local" module it sees; here that is all of
    SGLang (a PYTHONPATH folder, not site-packages): ~13 s per process and per new import wave,
    for constants irrelevant to the scenarios. Switched off (an internal hook; harmless if gone)."""
    try:
        from hypothesis.internal.conjecture import providers

        providers._get_local_constants = lambda: providers._local_constants
    except Exception:  # noqa: BLE001 (a newer Hypothesis without the hook: just slower)
        pass


def run_row(row: Any, design: Any, version: str, examples: int, seed: int) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

    counts = {"scenarios": 0, "agreed": 0, "disagreed": 0, "errored": 0}
    abstractions: dict[str, int] = {}
    first: dict[str, Any] = {}
    first_error: dict[str, Any] = {}
    common = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=False)

    @hseed(seed)
    @settings(max_examples=examples, phases=[Phase.generate], **common)
    @given(row.strategy())
    def count(sc: Any) -> None:
        counts["scenarios"] += 1
        kind, diffs, name = _classify(row, sc, design, version)
        if kind == "agree":
            counts["agreed"] += 1
        elif kind == "abstraction":
            abstractions[name] = abstractions.get(name, 0) + 1
            first.setdefault(f"abstraction:{name}", {"scenario": sc.describe(), "diffs": _jsonable(diffs)})
        elif kind == "error":
            counts["errored"] += 1
            if not first_error:
                first_error.update(scenario=sc.describe(), error=diffs[0][1])
        else:
            counts["disagreed"] += 1

    t0 = time.time()
    count()
    minimal = None
    if counts["disagreed"]:
        found: list[Any] = []

        @hseed(seed)
        @settings(max_examples=examples, phases=[Phase.generate, Phase.shrink], **common)
        @given(row.strategy())
        def shrink(sc: Any) -> None:
            kind, diffs, _ = _classify(row, sc, design, version)
            if kind == "disagree":
                found.append((sc, diffs))
                raise Disagreement(sc.describe())

        try:
            shrink()
        except Disagreement:
            sc, diffs = found[-1]  # Hypothesis re-runs the minimal example last
            minimal = {"scenario": sc.describe(), "diffs": _jsonable(diffs)}
    return {
        "row": row.name,
        "scenarios": counts["scenarios"],
        "agreed": counts["agreed"],
        "abstractions": abstractions,
        "abstraction_examples": {k.split(":", 1)[1]: v for k, v in first.items()},
        "disagreed": counts["disagreed"],
        "errored": counts["errored"],
        "minimal": minimal,
        "first_error": first_error or None,
        "seconds": round(time.time() - t0, 2),
    }


def _jsonable(diffs: list) -> list:
    return [[str(a), _j(b), _j(c)] for a, b, c in diffs]


def _j(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _j(x) for k, x in v.items()}
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


def _load_override(path: str) -> Any:
    """A transition override file (the format of model/mutants/: `REPLACES`, `replacement`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"kvmc_override_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m upstream.worker")
    p.add_argument("--version", required=True)
    p.add_argument("--design", required=True)
    p.add_argument("--mutant", action="append", default=[])
    p.add_argument("--with", dest="with_", action="append", default=[], help="FIX[=VARIANT] turned on over --design")
    p.add_argument("--without", action="append", default=[], help="FIX turned off over --design")
    p.add_argument("--override", action="append", default=[], help="a file with REPLACES and replacement()")
    p.add_argument("--generated-mutant", action="append", default=[], help="a `kvmc mutate --list` id")
    p.add_argument("--row", action="append", default=[])
    p.add_argument("--examples", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda: SGLang's objects and kernels on the GPU")
    return p


def _setup(device: str) -> tuple[str, float]:
    """Import and set up the release on `device`: (what the paged allocator's kernels are, seconds)."""
    t0 = time.time()
    if device != "cpu":  # before anything imports torch (which imports triton lazily)
        from .devices import real_triton_first

        real_triton_first()
    from . import kernels, real
    from .rows import ROWS  # noqa: F401

    real.configure(device)
    m = real.setup()
    launched = kernels.launch_kind(m["paged_mod"], real.allocator("paged", 8, 4))
    if device != "cpu" and launched != "triton":
        raise RuntimeError(f"--device {device}: the paged allocator would run {launched!r} kernels, not the real "
                           "Triton ones (upstream/kernels.py::launch_kind)")
    _no_local_constants()
    return launched, time.time() - t0


def _run(a: argparse.Namespace, launched: str, import_s: float) -> dict[str, Any]:
    """The rows of `a` on the release `_setup` set up."""
    from checker.designs import build

    from .rows import ROWS

    design = build(a.design, a.without, a.with_).with_mutants(frozenset(a.mutant))
    if a.override:
        from model.designs import Design

        overrides = {}
        for path in a.override:
            mod = _load_override(path)
            overrides[mod.REPLACES] = mod.replacement
        design = Design(design.name + "+override", design.fixes, design.mutants, overrides)
    if a.generated_mutant:  # `kvmc mutate`'s generated mutants, compiled here from today's source
        from checker.mutation.operators import by_id, design_for

        for mid in a.generated_mutant:
            design = design_for(by_id(mid), design)
    rows = [ROWS[r] for r in (a.row or list(ROWS))]
    out = {"version": a.version, "design": design.name, "device": a.device, "kernels": launched,
           "import_seconds": round(import_s, 1), "rows": []}
    for row in rows:
        if not row.applies(design, a.version):
            out["rows"].append({"row": row.name, "not_applicable": row.why_not(design, a.version)})
            continue
        out["rows"].append(run_row(row, design, a.version, a.examples, a.seed))
    return out


def main(argv: list[str] | None = None) -> int:
    """The rows of one command line, their document on stdout; `--serve`: the release set up once on
    cpu, then one command line (a JSON list) per stdin line, each run in a fork of the set-up process
    (upstream/serve.py)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--serve"]:
        from .serve import serve

        launched, import_s = _setup("cpu")

        def one(args: list[str]) -> dict[str, Any]:
            a = _parser().parse_args(args)
            if a.device != "cpu":
                raise RuntimeError(f"--device {a.device} asked of a cpu server (upstream/serve.py serves cpu only)")
            return _run(a, launched, import_s)

        return serve(one)
    a = _parser().parse_args(argv)
    launched, import_s = _setup(a.device)
    json.dump(_run(a, launched, import_s), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
