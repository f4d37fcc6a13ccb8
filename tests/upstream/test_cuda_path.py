"""`--device cuda`: `kvmc conform` on SGLang's production CUDA path (its objects on the GPU, the real
Triton allocator kernels) and `python -m upstream.kernels_check` (the real kernels vs kvmc's torch
routing, upstream/kernels.py).

On a CPU-only machine (the CI): the device's bad input is one line, exit 2, before any worker
starts; the scheduler-level replay refuses cuda; the kernel check's comparison finds a planted
difference and none where there is none (kvmc's own decode against itself, on cpu tensors).
That the cpu worker still routes the kernels is checked in test_conform.py (its `kernels` field).
With a GPU: a small conform on 0.5.13 has no disagreement and ran the real Triton kernels, and
the kernel check finds every compared batch equal on 0.5.13 and 0.5.21 (skipped where a release
is not installed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from upstream import kernels, kernels_check

REPO = Path(__file__).resolve().parent.parent.parent
CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA device (torch.cuda.is_available() is False)")
no_cuda = pytest.mark.skipif(CUDA, reason="checks the refusal where no CUDA device exists")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO)


def assert_one_line_exit_2(p: subprocess.CompletedProcess, says: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_conform_unknown_device_is_one_line_exit_2(tmp_path: Path) -> None:
    p = _run("-m", "upstream", "conform", "--sglang", "0.5.13", "--device", "tpu", "--dir", str(tmp_path / "sg"))
    assert_one_line_exit_2(p, "unknown device 'tpu'; expected cpu or cuda")
    assert not (tmp_path / "sg").exists()


@no_cuda
def test_conform_cuda_without_a_gpu_is_one_line_exit_2(tmp_path: Path) -> None:
    # a release that is not installed: the device is refused first, before the release is looked at
    p = _run("-m", "upstream", "conform", "--sglang", "0.5.13", "--device", "cuda", "--dir", str(tmp_path))
    assert_one_line_exit_2(p, "no CUDA device is available here")


@pytest.mark.parametrize("device, says", [("cpu", "needs a CUDA device"), ("tpu", "unknown device 'tpu'")])
def test_kernel_check_refuses_cpu_and_unknown_devices(device: str, says: str, tmp_path: Path) -> None:
    p = _run("-m", "upstream.kernels_check", "--sglang", "0.5.13", "--device", device, "--dir", str(tmp_path))
    assert_one_line_exit_2(p, says)


@no_cuda
def test_kernel_check_without_a_gpu_is_one_line_exit_2(sglang_root: Path) -> None:
    p = _run("-m", "upstream.kernels_check", "--sglang", "0.5.13", "--dir", str(sglang_root))
    assert_one_line_exit_2(p, "no CUDA device is available here")


def test_scheduler_replay_refuses_cuda(tmp_path: Path) -> None:
    p = _run("-m", "checker.cli", "replay", str(tmp_path / "t.itf.json"), "--against", "sglang==0.5.13", "--device", "cuda")
    assert_one_line_exit_2(p, "runs on cpu only")


def _planted_decode(seq_lens: Any, last_loc: Any, free_pages: Any, out: Any, bs_upper: int, page_size: int) -> None:
    kernels._alloc_decode(seq_lens, last_loc, free_pages, out, bs_upper, page_size)
    if len(out) > 1:  # the second request's slot off by one
        out[1] += 1


def _same_extend(prefix_lens: Any, seq_lens: Any, last_loc: Any, free_pages: Any, out: Any, bs_upper: int,
                 page_size: int) -> None:
    out.fill_(0)


@pytest.mark.parametrize("planted", [False, True])
def test_kernel_comparison_finds_a_planted_difference_and_only_it(planted: bool) -> None:
    real = (kernels._Launcher(_same_extend), kernels._Launcher(_planted_decode if planted else kernels._alloc_decode))
    stats = kernels_check.compare(60, 3, "cpu", real, (_same_extend, kernels._alloc_decode))
    for k in ("extend", "decode"):
        st = stats[k]
        assert st["compared"] > 0 and st["not_fitting"] > 0 and st["compared"] + st["not_fitting"] == 60, st
    assert stats["extend"]["equal"] == stats["extend"]["compared"]
    dec = stats["decode"]
    if not planted:
        assert dec["equal"] == dec["compared"] and dec["first_difference"] is None, dec
        return
    d = dec["first_difference"]
    assert dec["equal"] < dec["compared"] and d is not None, dec
    assert d["triton"][1] == d["kvmc_torch"][1] + 1 and d["triton"][:1] == d["kvmc_torch"][:1], d
    assert len(d["inputs"]["seq_lens"]) == len(d["triton"]) >= 2, d


def test_batches_are_consistent() -> None:
    """Each batch's last_loc lies in a page its request holds (not free), at the prefix's offset."""
    import random

    rng = random.Random(5)
    for _ in range(200):
        b = kernels_check.batch(rng)
        ps, free = b["page_size"], set(b["free_pages"])
        assert len(free) == len(b["free_pages"]) and 0 not in free
        for p, s, loc in zip(b["prefix_lens"], b["seq_lens"], b["last_loc"]):
            assert s > p >= 0
            if p == 0:
                assert loc == -1
            else:
                assert loc // ps not in free and loc % ps == (p - 1) % ps


# -- on a GPU ----------------------------------------------------------------------------------------------
def _installed(version: str) -> Path:
    from upstream.install import default_dir, is_installed

    root = default_dir()
    if not is_installed(root, version):
        pytest.skip(f"SGLang {version} is not installed under {root} (kvmc sglang install {version})")
    return root


@needs_cuda
def test_conform_on_cuda_runs_the_real_kernels_and_agrees() -> None:
    from upstream import conform

    root = _installed("0.5.13")
    rows = ["PagedTokenToKVPoolAllocator", "SWATokenToKVPoolAllocator", "add_one_req", "add_chunked_req/swa",
            "RadixCache", "busy_check/swa"]
    (res,) = conform.run(["0.5.13"], rows, examples=25, seed=0, root=root, device="cuda")
    assert "error" not in res, res.get("error")
    assert res["device"] == "cuda" and res["kernels"] == "triton", {k: res.get(k) for k in ("device", "kernels")}
    for r in res["rows"]:
        assert "not_applicable" not in r, r
        assert r["errored"] == 0, conform.could_not_run(res, r)
        assert r["disagreed"] == 0, conform.side_by_side(res, r)
        assert r["scenarios"] == 25
    assert "(on cuda)" in conform.table([res])


@needs_cuda
@pytest.mark.parametrize("version", ["0.5.13", "0.5.21"])
def test_kernel_check_finds_the_routing_equal_to_the_real_kernels(version: str) -> None:
    root = _installed(version)
    p = _run("-m", "upstream.kernels_check", "--sglang", version, "--cases", "120", "--dir", str(root), "--json")
    assert p.returncode == 0, (p.returncode, p.stdout[-3000:], p.stderr[-3000:])
    (res,) = json.loads(p.stdout)["results"]
    for k in ("extend", "decode"):
        assert res[k]["compared"] > 0 and res[k]["equal"] == res[k]["compared"], res[k]


# -- the guard against the faulting launch (upstream/devices.py::guard_paged_kernels), on cpu ------------
_GUARD = """
import json, sys
from upstream import real
from upstream.devices import GpuFaultAvoided, guard_paged_kernels
real.configure("cpu")
m = real.setup()
guarded = guard_paged_kernels(m["paged_mod"].PagedTokenToKVPoolAllocator)
alloc = real.allocator("paged", 8, 2)
out = {"guarded": guarded}
def extend(pre, seq, last):
    try:
        r = alloc.alloc_extend(real.ints([pre]), real.cpu_ints([pre]), real.ints([seq]), real.cpu_ints([seq]),
                               real.ints([last]), seq - pre)
        return None if r is None else r.tolist()
    except GpuFaultAvoided:
        return "avoided"
def decode(seq, last):
    try:
        r = alloc.alloc_decode(real.ints([seq]), real.cpu_ints([seq]), real.ints([last]))
        return None if r is None else r.tolist()
    except GpuFaultAvoided:
        return "avoided"
first = extend(0, 3, -1)  # two pages of four
out["fits"] = first
out["rest"] = real.take(alloc, 4, 2).tolist()  # the free list is now empty
out["extend_opens_page"] = extend(0, 2, -1)
out["extend_in_last_page"] = extend(3, 4, first[-1])
out["decode_opens_page"] = decode(5, 4)
out["decode_in_last_page"] = decode(4, first[-1])
print(json.dumps(out))
"""


def _guard_run(root: Path, version: str) -> dict:
    from upstream.install import release_env, release_path

    env = release_env(release_path(root, version))  # cpu, also on a GPU host
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", _GUARD], capture_output=True, text=True, cwd=REPO,
                       env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_guard_stops_only_the_launch_that_reads_an_empty_free_list(request: pytest.FixtureRequest) -> None:
    """0.5.13 launches before its fit check: with no free page, a request that opens a page is
    stopped (GpuFaultAvoided); one that stays in its last page runs (its kernel reads no free page).
    CI installs 0.5.13 (the sglang_root fixture); a GPU machine has no network and runs what its
    bundle carries."""
    root = _installed("0.5.13") if CUDA else request.getfixturevalue("sglang_root")
    out = _guard_run(root, "0.5.13")
    assert out["guarded"] == ["alloc_extend", "alloc_decode"]
    assert len(out["fits"]) == 3 and len(out["rest"]) == 4
    assert out["extend_opens_page"] == "avoided" and out["decode_opens_page"] == "avoided"
    assert out["extend_in_last_page"] == [out["fits"][-1] + 1]
    assert out["decode_in_last_page"] == [out["fits"][-1] + 1]


def test_a_release_that_checks_before_launching_is_not_guarded() -> None:
    """0.5.22 moved the fit check before the launch: nothing to guard, the allocator returns None."""
    root = _installed("0.5.23")
    out = _guard_run(root, "0.5.23")
    assert out["guarded"] == []
    assert out["extend_opens_page"] is None and out["decode_opens_page"] is None
