"""Two questions the first `kvmc conform --device cuda` run (.ci/device) raised, asked one case per
process (a CUDA fault poisons the process that hit it):

A. SGLang's paged `alloc_extend` / `alloc_decode` (0.5.13, 0.5.18) launch their Triton kernel before
   checking that enough pages are free. Asked for more pages than are free, does the launch read
   past `free_pages` and fault on the GPU, or does the allocator return None cleanly?
B. 0.5.21 / 0.5.23's Rust tree core (`UnifiedRadixCache` by default) refused a cuda int64 value
   ("insert value must be an int64 tensor, got Int8"). Does it take the same values on the cpu?

    python .ci/device_probe.py [--device cuda]     (KVMC_SGLANG_DIR: the installed releases)

Prints one line per case. Not a test: a diagnosis whose lines go into docs/conformance.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CASES = [
    # (release, kind, page_size, pool tokens, held tokens, op, request tokens)
    ("0.5.13", "extend", 2, 8, 0, "fits", 4),
    ("0.5.13", "extend", 2, 8, 0, "short", 10),
    ("0.5.13", "extend", 2, 8, 8, "short", 2),
    ("0.5.13", "decode", 2, 8, 8, "short", 1),
    ("0.5.18", "extend", 2, 8, 8, "short", 2),
    ("0.5.18", "extend", 16, 64, 64, "short", 16),
    ("0.5.23", "rust_insert", 1, 16, 0, "cuda", 2),
    ("0.5.23", "rust_insert", 1, 16, 0, "cpu_value", 2),
    ("0.5.21", "rust_insert", 1, 16, 0, "cuda", 2),
]


def _case(release: str, kind: str, ps: int, size: int, held: int, how: str, n: int, device: str) -> str:
    from upstream.devices import real_triton_first

    if device != "cpu":
        real_triton_first()
    import torch

    from upstream import kernels, real

    real.configure(device)
    m = real.setup()
    if device == "cpu":
        kernels.route(m["paged_mod"])
    if kind in ("extend", "decode"):
        alloc = real.allocator("paged", size, ps)
        if held:
            real.take(alloc, held, ps)
        free_pages = alloc.available_size() // ps
        if kind == "extend":
            out = alloc.alloc_extend(real.ints([0]), real.cpu_ints([0]), real.ints([n]), real.cpu_ints([n]), real.ints([-1]), n)
        else:  # one request whose next token opens a new page (seq_len - 1 a page multiple)
            out = alloc.alloc_decode(real.ints([ps + 1]), real.cpu_ints([ps + 1]), real.ints([ps - 1]))
        if device != "cpu":
            torch.cuda.synchronize()
        got = None if out is None else out.tolist()
        return f"{kind} of {n} token(s) at page_size {ps} with {free_pages} free page(s): returned {got}"
    alloc = real.allocator("token", size, 1)
    tree = real.tree_cache(alloc, 1, None, real.req_to_token_pool(4), kind="unified")
    vals = real.take(alloc, n, 1)
    if how == "cpu_value":
        vals = vals.cpu()
    real.insert(tree, list(range(1, n + 1)), vals)
    return (f"insert of a {vals.dtype} {vals.device.type} value into {type(tree).__name__} "
            f"({type(getattr(tree, 'tree_core', None)).__name__}, core device {getattr(getattr(tree, 'tree_core', None), 'device', '?')}): ok")


def main() -> int:
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cuda"
    if "--case" in sys.argv:
        c = json.loads(sys.argv[sys.argv.index("--case") + 1])
        print(_case(*c, device))
        return 0
    from upstream.install import default_dir, release_path

    def one(c: tuple) -> str:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([*release_path(default_dir(), c[0]), str(REPO)]),
                   PYTHONHASHSEED="0")
        try:
            p = subprocess.run([sys.executable, "-W", "ignore", __file__, "--device", device, "--case", json.dumps(c)],
                               check=False, capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
        except subprocess.TimeoutExpired:
            return f"{c[0]} {c[1]} {c[5]}: timed out"
        lines = (p.stdout + p.stderr).strip().splitlines()
        last = lines[-1] if lines else ""
        err = next((ln for ln in lines if "Error" in ln and "Traceback" not in ln), last)
        return f"{c[0]} {c[1]} {c[5]}: " + (last if p.returncode == 0 else f"exit {p.returncode}: {err[:300]}")

    with ThreadPoolExecutor(len(CASES)) as ex:  # one process per case, all at once (each mostly imports)
        for line in ex.map(one, CASES):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
