"""The pool's CUDA path: kvmc's runnable pool (pool/) on torch CUDA tensors replays what it replays
on CPU, step for step, and its ownership check catches a planted double owner and an orphan there.

Runs only where torch sees a CUDA device (a GPU machine: `.ci/device` runs it); elsewhere every
test is skipped and says so. `KVMC_POOL_TEST_DEVICE=cpu` runs the same tests on CPU (a dry run of
their logic on a machine without a GPU; the comparison is then CPU against CPU).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch

from checker.engines.cases import case, run_case
from checker.replay.pool import REPRODUCED, replay_file, replay_trace
from checker.replay.regen import DEFAULT_DIR
from model.designs import PRESETS
from pool.mutants import POOL_MUTANTS
from specs.configs import CONFIGS
from checker.traces.walk import random_walk

DEVICE = os.environ.get("KVMC_POOL_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE.startswith("cuda") and not torch.cuda.is_available(),
                                reason="no CUDA device: the pool's CUDA path runs on a GPU machine (.ci/device)")

FILES = sorted(DEFAULT_DIR.rglob("*.itf.json"))


def _same(cpu, dev) -> None:  # type: ignore[no-untyped-def]
    assert (dev.status, dev.step, dev.field, dev.steps) == (cpu.status, cpu.step, cpu.field, cpu.steps), \
        f"on {DEVICE}: {dev.line()} | on cpu: {cpu.line()}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(DEFAULT_DIR)))
def test_the_corpus_replays_on_the_device_as_on_cpu(path: Path) -> None:
    pinned = json.loads((DEFAULT_DIR / "MANIFEST.json").read_text())["files"][str(path.relative_to(DEFAULT_DIR))]
    dev = replay_file(path, DEVICE)
    assert dev.status == pinned["expected"] == REPRODUCED, dev.line()
    _same(replay_file(path, "cpu"), dev)


@pytest.mark.parametrize("cfg", list(CONFIGS))
def test_random_walks_refine_on_the_device(cfg: str) -> None:
    """Every field, choice, tree counter, busy check and the ownership ledger, every step."""
    design = PRESETS["current"]
    if CONFIGS[cfg].not_modelled_by(design):  # EAGLE v1 (spec_topk): the last release that ships it
        design = PRESETS["v0.5.12.post1"]
    why = CONFIGS[cfg].not_modelled_by(design)
    if why:
        pytest.skip(why)
    rng = random.Random(f"cuda/{cfg}")
    steps = 0
    for _ in range(4):
        t = random_walk(CONFIGS[cfg], design, 16, rng.randrange(1 << 30))
        dev = replay_trace(t, DEVICE, file=f"walk {cfg}")
        assert dev.ok, dev.line()
        _same(replay_trace(t, "cpu", file=f"walk {cfg}"), dev)
        steps += len(t.steps)
    assert steps > 0


@pytest.mark.parametrize("mutant", sorted(POOL_MUTANTS))
def test_planted_pool_bugs_reproduce_on_the_device(mutant: str) -> None:
    """Each planted pool bug's counterexample (the explicit engine on its quality case) breaks
    conservation on the device's pool at the step it does on CPU."""
    res = run_case(case(mutant), "explicit")
    assert res.trace is not None, f"{mutant}: the explicit engine found no counterexample ({res.verdict})"
    dev = replay_trace(res.trace, DEVICE, file=mutant)
    assert dev.status == REPRODUCED, dev.line()
    _same(replay_trace(res.trace, "cpu", file=mutant), dev)


def _held_scheduler():  # type: ignore[no-untyped-def]
    """A small plain pool on the device with two tree nodes and one running request row."""
    from model.config import concrete_params
    from pool import Scheduler
    from pool.scheduler import Req

    cfg = CONFIGS["small"]
    p = concrete_params(cfg, full_tokens=64, req_pool_size=4, input_len=1, max_new_tokens=1, warm_len=0)
    sch = Scheduler(cfg, PRESETS["current"], p, device=DEVICE, max_context_len=8)
    a = sch.tree.add_node(sch.tree.root, (1, 2, 3, 4), sch.alloc.alloc(4), -1, None)
    sch.tree.add_node(a, (5, 6), sch.alloc.alloc(2), -1, None)
    req = Req(0, 8, arrived=True)
    req.req_pool_idx = sch.req_pool.alloc()
    sch.req_pool.write(req.req_pool_idx, 0, sch.alloc.alloc(8))
    req.kv_allocated_len = req.kv_committed_len = 8
    sch.reqs, sch.running = [req], [req]
    return sch


def test_the_tensors_live_on_the_device_and_the_ownership_check_balances() -> None:
    from pool import ownership

    sch = _held_scheduler()
    want = torch.device(DEVICE).type
    assert sch.alloc.free_pages.device.type == want and sch.req_pool.req_to_token.device.type == want
    own = ownership.check(sch)
    assert own.ok, own.describe()
    assert sch.alloc.available_size() == 64 - 14


def test_the_ownership_check_finds_a_planted_double_owner_and_orphan_on_the_device() -> None:
    from pool import ownership

    sch = _held_scheduler()
    node = sch.tree.root.children[0]
    # a slot a tree node owns goes back on the free list as well (a double free)
    sch.alloc.free_pages = torch.cat([sch.alloc.free_pages, node.value[:1].to(sch.alloc.free_pages.dtype)])
    own = ownership.check(sch)
    assert not own.ok and own.full.doubled == 1 and own.full.leaked == 0, own.describe()
    # and a free page taken off the free list by nobody (an orphan)
    sch.alloc.free_pages = sch.alloc.free_pages[1:-1]
    own = ownership.check(sch)
    assert not own.ok and own.full.leaked == 1 and own.full.doubled == 0, own.describe()
