"""`python -m upstream.kernels_check --sglang V [--sglang V2 ...] [--device cuda] [--cases N] [--seed S]`:
does kvmc's CPU routing of the paged allocator's kernels (upstream/kernels.py) compute what the
release's real Triton kernels compute?

On a CPU-only host `kvmc conform` runs `PagedTokenToKVPoolAllocator.alloc_extend` / `alloc_decode`
with `alloc_extend_kernel` / `alloc_decode_kernel` rebound to torch (SGLang's `alloc_extend_naive`,
kvmc's `_alloc_decode`). Here, in the release's worker environment (its PYTHONPATH, the real
triton first: upstream/devices.py::real_triton_first), N random batches are given to both: the real
kernels launched as the allocator launches them (`kernel[(bs,)](..., next_power_of_2(bs), page_size)`,
arguments as in `allocator/paged.py` 0.5.13+ / `allocator.py` 0.5.10-0.5.12: prefix_lens, seq_lens,
last_loc, free_pages, out_indices for the extend; seq_lens, last_loc, free_pages, out_indices for
the decode) on cuda, and kvmc's torch versions on cpu copies of the same inputs.

A batch: 1-8 requests, page_size in {1, 2, 4, 16}, each request's prefix (0-40 tokens, its last
page held by it, `last_loc` the slot of its last prefix token, -1 for none) and extend (1-40
tokens; the decode batch is one token after the prefix), free pages of random order and length
(page numbers no request holds). Where a batch needs more pages than are free the allocator
returns None before it uses out_indices (0.5.21-: after the launch; 0.5.22+: before it): such a
batch is counted, launched nowhere, compared on nothing. Every other batch's out_indices are
compared element by element (both start filled with -7, so a slot a kernel never writes shows).

Prints one line per release (cases, compared, equal, per kernel) and the first difference with its
inputs and both outputs. Exit status: 0 every compared batch equal; 1 a difference (or a worker
that failed); 2 bad input: an unknown or uninstalled release, an unknown device, `--device cpu`
(there is no real kernel to compare with), or no CUDA device here.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from .errors import EXIT_USAGE, UpstreamUsageError

PAGE_SIZES = (1, 2, 4, 16)
_UNWRITTEN = -7  # out_indices start filled with it on both sides


# -- the batches (plain data, shared by both sides) -------------------------------------------------------
def batch(rng: random.Random) -> dict[str, Any]:
    ps = rng.choice(PAGE_SIZES)
    bs = rng.randint(1, 8)
    prefix = [rng.choice([0, rng.randint(1, 40)]) for _ in range(bs)]
    seq = [p + rng.randint(1, 40) for p in prefix]
    need_extend = sum(-(-s // ps) - -(-p // ps) for p, s in zip(prefix, seq))
    need_decode = sum(1 for p in prefix if p % ps == 0)  # the new token (position p) opens a page
    need = max(need_extend, need_decode)
    free_len = need + rng.randint(0, 8) if rng.random() < 0.75 else rng.randint(0, max(0, need - 1))
    held = sum(1 for p in prefix if p)
    pages = list(range(1, held + free_len + rng.randint(0, 16) + 1))  # page 0 is SGLang's padding page
    rng.shuffle(pages)
    last_pages, free = pages[:held], pages[held:held + free_len]
    it = iter(last_pages)
    last_loc = [next(it) * ps + (p - 1) % ps if p else -1 for p in prefix]
    return {"page_size": ps, "prefix_lens": prefix, "seq_lens": seq, "last_loc": last_loc, "free_pages": free,
            "need_extend": need_extend, "need_decode": need_decode}


# -- the child: one release, in its worker environment --------------------------------------------------
def _child(cases: int, seed: int, device: str) -> dict[str, Any]:
    from .devices import real_triton_first

    triton_file = real_triton_first()  # before torch (which imports triton lazily)
    from . import kernels, real

    _token, paged, _swa = real.allocator_modules()
    kind = kernels.launch_kind(paged)
    if kind != "triton":
        raise RuntimeError(f"the release's alloc_extend_kernel is {kind!r}, not a Triton JITFunction ({triton_file=})")
    torch_extend, torch_decode = kernels.torch_kernels(paged)
    if torch_extend is None:
        raise RuntimeError("the release's paged allocator module has no alloc_extend_naive to route the extend to")
    out: dict[str, Any] = {"device": device, "triton": triton_file, "cases": cases}
    out.update(compare(cases, seed, device, (paged.alloc_extend_kernel, paged.alloc_decode_kernel),
                       (torch_extend, torch_decode)))
    return out


def compare(cases: int, seed: int, device: str, real: tuple[Any, Any], routed: tuple[Any, Any]) -> dict[str, Any]:
    """`cases` batches on `real` = (extend, decode) launchers (`kernel[grid](...)`) with tensors on
    `device`, and on `routed` = kvmc's (extend, decode) functions with cpu tensors: per kernel the
    batches compared, equal, not fitting, and the first difference."""
    import torch

    rng = random.Random(seed)
    stats = {k: {"compared": 0, "equal": 0, "not_fitting": 0, "first_difference": None} for k in ("extend", "decode")}

    def run(kernel: Any, fn: Any, args: list[Any], n_out: int, bs: int, ps: int) -> tuple[list[int], list[int]]:
        on = lambda v: torch.tensor(v, dtype=torch.int64, device=device)  # noqa: E731
        off = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
        got = torch.full((n_out,), _UNWRITTEN, dtype=torch.int64, device=device)
        want = torch.full((n_out,), _UNWRITTEN, dtype=torch.int64)
        bs_upper = 1 << max(0, bs - 1).bit_length()  # SGLang's next_power_of_2(bs)
        kernel[(bs,)](*[on(a) for a in args], got, bs_upper, ps)
        fn(*[off(a) for a in args], want, bs_upper, ps)
        return [int(v) for v in got.cpu().tolist()], [int(v) for v in want.tolist()]

    ps1_error: dict[str, str] = {}  # kernel -> why it failed at page_size 1
    for _ in range(cases):
        b = batch(rng)
        ps, bs = b["page_size"], len(b["prefix_lens"])
        for i, k in enumerate(("extend", "decode")):
            st = stats[k]
            if b[f"need_{k}"] > len(b["free_pages"]):
                st["not_fitting"] += 1
                continue
            if k == "extend":
                args = [b["prefix_lens"], b["seq_lens"], b["last_loc"], b["free_pages"]]
                n = sum(s - p for p, s in zip(b["prefix_lens"], b["seq_lens"]))
            else:  # one token after the prefix
                args = [[p + 1 for p in b["prefix_lens"]], b["last_loc"], b["free_pages"]]
                n = bs
            if ps == 1 and k in ps1_error:
                st["page_size_1_skipped"] = st.get("page_size_1_skipped", 0) + 1
                continue
            try:
                got, want = run(real[i], routed[i], args, n, bs, ps)
            except Exception as e:  # noqa: BLE001
                # SGLang builds the paged allocator only for page_size > 1 (TokenToKVPoolAllocator at 1), so
                # a kernel that does not compile at page_size 1 is reported, not a conformance failure
                if ps != 1:
                    raise
                ps1_error[k] = st["page_size_1_error"] = f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[-1][:300]}"
                st["page_size_1_skipped"] = st.get("page_size_1_skipped", 0) + 1
                continue
            st["compared"] += 1
            if got == want:
                st["equal"] += 1
            elif st["first_difference"] is None:
                inputs = {kk: b[kk] for kk in ("page_size", "prefix_lens", "last_loc", "free_pages")}
                inputs["seq_lens"] = args[0] if k == "decode" else b["seq_lens"]
                st["first_difference"] = {"inputs": inputs, "triton": got, "kvmc_torch": want}
    return stats


# -- the parent -------------------------------------------------------------------------------------
def _run_release(version: str, root: Path, cases: int, seed: int, device: str) -> dict[str, Any]:
    from .install import release_path, run_in_release

    cmd = ["-m", "upstream.kernels_check", "--child", "--sglang", version, "--device", device, "--cases", str(cases),
           "--seed", str(seed)]
    t0 = time.time()
    res = run_in_release(release_path(root, version), cmd, device)
    if isinstance(res, str):
        return {"version": version, "error": res}
    res.update(version=version, seconds=round(time.time() - t0, 1))
    return res


def line(res: dict[str, Any]) -> str:
    if "error" in res:
        return f"SGLang {res['version']}: {res['error']}"
    parts = []
    for k in ("extend", "decode"):
        st = res[k]
        skipped = f"; {st['page_size_1_skipped']} at page_size 1 skipped" if st.get("page_size_1_skipped") else ""
        parts.append(f"alloc_{k}_kernel {res['cases']} cases, {st['compared']} compared, {st['equal']} equal "
                     f"({st['not_fitting']} need more pages than are free: the allocator returns None, nothing compared"
                     f"{skipped})")
    out = [f"SGLang {res['version']} on {res['device']} (real Triton kernels vs kvmc's torch routing): " + "; ".join(parts)]
    for k in ("extend", "decode"):
        if res[k].get("page_size_1_error"):
            out.append(f"  page_size 1 (SGLang uses TokenToKVPoolAllocator there, not this kernel): alloc_{k}_kernel "
                       f"failed, {res[k]['page_size_1_error']}")
    for k in ("extend", "decode"):
        d = res[k]["first_difference"]
        if d:
            out.append(f"  first difference, alloc_{k}_kernel: inputs {d['inputs']}")
            out.append(f"    triton:     {d['triton']}")
            out.append(f"    kvmc torch: {d['kvmc_torch']}")
    return "\n".join(out)


def differs(res: dict[str, Any]) -> bool:
    return "error" in res or any(res[k]["equal"] != res[k]["compared"] for k in ("extend", "decode"))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m upstream.kernels_check",
                                description="compare the paged allocator's real Triton kernels with kvmc's torch routing")
    p.add_argument("--sglang", action="append", required=True, metavar="VERSION", help="a release (repeatable)")
    p.add_argument("--device", default="cuda", help="cuda (default; the real kernels need it)")
    p.add_argument("--cases", type=int, default=200, help="random batches per release (default 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--dir", help="install folder (default $KVMC_SGLANG_DIR or ~/.cache/kvmc/sglang)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        json.dump(_child(a.cases, a.seed, a.device), sys.stdout)
        sys.stdout.write("\n")
        return 0
    try:
        from .devices import check_device

        if a.cases < 1:
            raise UpstreamUsageError(f"--cases {a.cases}: expected a positive number of batches")
        try:
            check_device(a.device, available=False)
        except ValueError as e:
            raise UpstreamUsageError(str(e)) from None
        if not a.device.startswith("cuda"):
            raise UpstreamUsageError(f"--device {a.device}: the kernel check needs a CUDA device (the real Triton kernels "
                                     "run only there; on cpu there is nothing to compare kvmc's routing with)")
        from .install import default_dir, release_path
        from .releases import release

        root = Path(a.dir) if a.dir else default_dir()
        for v in a.sglang:
            release(v)  # unknown release: UpstreamUsageError
            release_path(root, v)  # not installed: UpstreamUsageError
        import torch

        if not torch.cuda.is_available():
            raise UpstreamUsageError(f"--device {a.device}: no CUDA device is available here (torch.cuda.is_available() "
                                     "is False); the kernel check needs one")
    except UpstreamUsageError as e:
        print(f"kvmc: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    results = [_run_release(v, root, a.cases, a.seed, a.device) for v in a.sglang]
    if a.json:
        json.dump({"results": results}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print("\n".join(line(r) for r in results))
    return 1 if any(differs(r) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
