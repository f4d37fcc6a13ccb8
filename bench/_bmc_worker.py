"""One BMC run in its own process, printing a JSON line per depth reached, so that bench/bmc.py can
give it a wall-clock budget (kill it) and still keep every depth it finished.

    python -m bench._bmc_worker '{"config": "hybrid_swa", "design": "current", "depth": 20,
                                  "fresh": false, "scale": null, "without": [], "mutants": [],
                                  "props": null, "relative": false}'

`relative`: the BMC's relative-induction pass (checker/engines/bmc.py).
`scale`: multiply the upper bounds of every token quantity of the config (pools, window, chunk,
prefill budget, prompt and output lengths, warm prefix) so the pool's upper bound becomes `scale`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

TOKEN_BOUNDS = ("full_tokens", "swa_tokens", "sliding_window_size", "chunked_prefill_size", "max_prefill_tokens",
                "input_len", "max_new_tokens", "warm_len")


def scaled(cfg: Any, pool_hi: int) -> Any:
    """The config with its pool's upper bound at `pool_hi` and every token bound scaled alike."""
    from model.config import PAGE_MULTIPLE

    base = cfg.bound("full_tokens")[1]
    factor = pool_hi / base
    bounds = dict(cfg.bounds)
    for name in TOKEN_BOUNDS:
        lo, hi = cfg.bound(name)
        if hi == 0:
            continue
        new_hi = max(lo, int(hi * factor))
        if name in PAGE_MULTIPLE:
            new_hi -= new_hi % cfg.page_size
        bounds[name] = (lo, new_hi)
    return dataclasses.replace(cfg, name=f"{cfg.name}@{pool_hi}", bounds=bounds)


def main(spec: dict[str, Any]) -> None:
    t_import = time.perf_counter()
    from checker.engines.bmc import BMC
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    design = PRESETS[spec.get("design", "current")]
    for f in spec.get("without", []):
        design = design.with_fix(f, None)
    if spec.get("mutants"):
        design = design.with_mutants(frozenset(spec["mutants"]))
    cfg = CONFIGS[spec["config"]]
    if spec.get("scale"):
        cfg = scaled(cfg, int(spec["scale"]))
    system = System(cfg, design)
    bmc = BMC(system, spec.get("props"), fresh_per_depth=bool(spec.get("fresh")), relative=bool(spec.get("relative")))
    t0 = time.perf_counter()
    c0 = time.process_time()  # CPU seconds: steadier than wall clock on a shared machine
    print(json.dumps({"event": "start", "import_s": t0 - t_import, "bounds": dict(cfg.bounds)}), flush=True)

    def progress(t: int, elapsed: float, status: dict[str, str]) -> None:
        done = {k: v for k, v in status.items() if v != "open" and not k.startswith("_")}
        print(json.dumps({"event": "depth", "depth": t, "elapsed": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                          "solver_s": float(status.get("_solver_s", "nan")), "status": done}), flush=True)

    res = bmc.run(int(spec["depth"]), progress=progress)
    print(json.dumps({"event": "end", "elapsed": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                      "results": {k: [r.verdict.value, r.depth] for k, r in res.items()}}), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
