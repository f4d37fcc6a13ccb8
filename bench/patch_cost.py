"""What a patch written in plain Python costs the solver (docs/patches.md, issue 30 item 1).

The guide's change (docs/patches/swa_reserve.py: `add_chunked_req` with statement `if`s, `min`,
`max`) against the same change hand-written in kvmc's ops vocabulary (swa_reserve_ops.py: x.ite,
x.min, x.branch), the model's own transition, and `kvmc patch new add_chunked_req` unchanged (the
model's body as plain Python: conditional expressions, `and`/`not`, `min`). Per design, on
hybrid_swa: the time to unroll `depth` steps for z3 (encoding), the distinct z3 terms of the
unrolling (how much formula the solver sees), the paths the plain-Python calls took, and the BMC's
time to `depth` (no_prefill_oom; a violation is found at the same depth on every broken row).

Each case runs in a child process (CPU seconds of the child; the machine is shared).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .bmc import ROOT, _env, quick_mode

PATCHES = ROOT / "docs" / "patches"
CHILD = r"""
import json, sys, time, resource
import z3
from model.designs import PRESETS, Design
from model.patch import load_patch
from model.system import System
from specs.configs import CONFIGS
from checker.engines.bmc import BMC
from checker.engines.encode import Unrolling
from model import ops

cfg_name, depth, patch, without = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
d = PRESETS["current"]
for f in without:
    d = d.with_fix(f, None)
paths = []
if patch != "-":
    name, fn = load_patch(patch)
    d = Design(d.name + "+patch", d.fixes, d.mutants, {name: fn})
    real = ops.Symbolic._explore
    def explore(self, en, f, args, kw, prefix):
        out = real(self, en, f, args, kw, prefix)
        if not prefix:
            paths.append(en.runs)
        return out
    ops.Symbolic._explore = explore
system = System(CONFIGS[cfg_name], d)
cpu = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_utime + resource.getrusage(resource.RUSAGE_SELF).ru_stime
c0 = cpu()
u = Unrolling(system)
for _ in range(depth):
    u.extend()
enc = cpu() - c0
seen = set()
stack = [c for cs in u.step_cons for c in cs]
while stack:
    e = stack.pop()
    if e.get_id() in seen:
        continue
    seen.add(e.get_id())
    stack.extend(e.children())
c1 = cpu()
res = BMC(system, ["no_prefill_oom"], minimize=False).run(depth)
bmc = cpu() - c1
r = res["no_prefill_oom"]
print(json.dumps({"encode_s": round(enc, 2), "terms": len(seen), "bmc_s": round(bmc, 2), "verdict": r.words(),
                  "calls": len(paths), "paths_max": max(paths, default=0)}))
"""

CASES = [
    ("model (no patch)", "-", []),
    ("ops vocabulary (swa_reserve_ops.py)", "swa_reserve_ops.py", []),
    ("plain Python (swa_reserve.py)", "swa_reserve.py", []),
    ("patch new, unchanged (plain expressions)", "new", []),
    ("model without #23174 (broken)", "-", ["chunked_swa_page_reserve"]),
    ("plain Python, broken (swa_reserve_cut.py)", "swa_reserve_cut.py", []),
]


def _case(patch: str, without: list[str], cfg: str, depth: int, budget_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        if patch == "new":
            f = Path(tmp) / "add_chunked_req_patch.py"
            subprocess.run([sys.executable, "-m", "checker.cli", "patch", "new", "add_chunked_req", "-o", str(f)],
                           cwd=ROOT, env=_env(), capture_output=True, check=True)
            arg = str(f)
        else:
            arg = str(PATCHES / patch) if patch != "-" else "-"
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-c", CHILD, cfg, str(depth), arg, *without], cwd=ROOT, env=_env(),
                               capture_output=True, text=True, timeout=budget_s)
        except subprocess.TimeoutExpired:
            return {"error": f"over {budget_s:.0f} s"}
        if p.returncode != 0:
            return {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}
        out = json.loads(p.stdout.strip().splitlines()[-1])
        out["wall_s"] = round(time.perf_counter() - t0, 1)
        return out


def run(quick: bool | None = None) -> list[dict[str, Any]]:
    quick = quick_mode(quick)
    depth = 2 if quick else 3
    rows = []
    for label, patch, without in CASES:
        r = _case(patch, without, "hybrid_swa", depth, 300.0 if quick else 900.0)
        rows.append({"design": label, "config": "hybrid_swa", "depth": depth, **r})
    return rows


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    by = {r["design"]: r for r in rows}
    ops_row, plain = by.get("ops vocabulary (swa_reserve_ops.py)"), by.get("plain Python (swa_reserve.py)")
    if not ops_row or not plain or "encode_s" not in ops_row or "encode_s" not in plain:
        return ""
    return (f"Plain Python against the same change in the ops vocabulary: encoding x{plain['encode_s'] / max(ops_row['encode_s'], 0.01):.2f}, "
            f"z3 terms x{plain['terms'] / max(ops_row['terms'], 1):.2f}, BMC x{plain['bmc_s'] / max(ops_row['bmc_s'], 0.01):.2f} "
            f"({plain.get('paths_max')} paths per call).")
