"""The row `UnifiedRadixCache/swa_branching` and the `evict_swa` operation of the hybrid-SWA
lifecycle rows (upstream/lifecycle.py), on real SGLang.

* An SWA-only eviction (`tree.evict(num_tokens=0, swa_num_tokens=n)`) tombstones the shared warm
  node under a finished request's chain; the other request's match then has a Full-KV hit past its
  SWA-valid prefix: from 0.5.20 `swa_branching_seqlen`, and its inserts cut there
  (`swa_branching_insert`). The row tells the flag on from off, which the scheduler-loop walks
  reach about once in 5,000 (docs/conformance.md).
* Two evictions the model allows may leave the same sizes with other nodes tombstoned (the warm
  node or the first node of request 0's chain); the scenario is re-run with the other reading when
  the first disagrees later.
* SWARadixCache (up to 0.5.15) may tombstone an internal node, then evict its last child and delete
  the tombstone with it, in one SWA-only eviction: the model allows that outcome."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from upstream import conform
from upstream.install import release_path, run_in_release

from .test_loop_rows import NEWEST, _installed, _row

ROW = "UnifiedRadixCache/swa_branching"
pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


def _newest(root: Path) -> None:
    if not _installed(root, NEWEST):
        pytest.skip(f"SGLang {NEWEST} is not installed (`kvmc sglang install {NEWEST}`; .ci/run installs it)")


def test_the_branching_row_agrees_and_tells_the_flag_apart(sglang_root: Path) -> None:
    _newest(sglang_root)
    on = _row(conform.run([NEWEST], rows=(ROW,), examples=60, seed=0, root=sglang_root, jobs=1), ROW)
    assert (on["scenarios"], on["disagreed"], on["errored"]) == (60, 0, 0), on
    off = _row(conform.run([NEWEST], rows=(ROW,), examples=60, seed=0, root=sglang_root, jobs=1,
                           without=["swa_branching_insert"]), ROW)
    assert off["disagreed"] > 0, off
    assert any("swa_branching_seqlen" in d[0] for d in off["minimal"]["diffs"]), off["minimal"]


_SCENARIO = """
import json, sys
from model.designs import preset
from upstream import lifecycle as L
sc = L.Life(1, True, 1, 24, 1, {reqs}, {ops}, {tree!r}, branching={branching})
design = preset({design!r})
counts = []
first = L._run_life_once(sc, design, [], counts)
final = L.run_life(sc, design)
print(json.dumps({{"first": [o[0] for o in first if o[1] != o[2]], "final": [o[0] for o in final if o[1] != o[2]],
                  "counts": counts}}))
"""


def _run(root: Path, version: str, design: str, reqs: tuple, ops: tuple, tree: str, branching: bool = False) -> dict:
    out = run_in_release(release_path(root, version), ["-c", _SCENARIO.format(reqs=reqs, ops=ops, tree=tree,
                                                                               design=design, branching=branching)])
    assert isinstance(out, dict), out
    return out


def test_a_second_reading_of_an_eviction_agrees(sglang_root: Path) -> None:
    """Request 0 (the 1-token warm prefix and 2 of its own, split at its prompt into two 1-token
    nodes) finishes; `evict_swa 1`: SGLang's LRU tombstones the warm node, and the model may
    tombstone it or request 0's first node (the same sizes). Only the first makes request 1's match
    end at 0 with a branching point 1, as SGLang's does."""
    _newest(sglang_root)
    out = _run(sglang_root, NEWEST, "v0.5.23", ((3, True), (2, True)), (("finish", 0), ("evict_swa", 1), ("finish", 1)),
               "unified", True)
    assert out["counts"] == [2], out
    assert any("swa_branching_seqlen" in d for d in out["first"]), out  # the first reading departs at the match
    assert out["final"] == [], out


def test_swa_radix_cache_deletes_a_tombstone_made_in_the_same_eviction(sglang_root: Path) -> None:
    """SGLang 0.5.13's SWARadixCache, an SWA-only need of 2: the 1-token warm node (LRU) is
    tombstoned, then request 0's 2-token leaf goes, and the warm tombstone, childless, with it: every
    Full slot is free. Before the model allowed it, no outcome of its eviction matched."""
    out = _run(sglang_root, "0.5.13", "v0.5.13", ((3, True), (1, False)), (("finish", 0), ("evict_swa", 2)), "swa_radix")
    assert out["final"] == [], out


def _release(root: Path, version: str) -> None:
    if not _installed(root, version):
        pytest.skip(f"SGLang {version} is not installed (`kvmc sglang install {version}`)")


def test_sglang_0_5_22_asserts_on_the_double_free_where_the_ledger_is_broken(sglang_root: Path) -> None:
    """Finding 3's state goes on: request 1 (10 tokens, page 4, window 5) prefills, its stash
    re-matches short, so the tree's [0, 8) is unlocked while its row holds the same slots; `evict 5`
    frees them; the finish frees them again. 0.5.18-0.5.21 double-free silently (the model follows),
    0.5.22's SWA allocator asserts `available_size() <= size`. The row compares that death with
    kvmc's ledger, broken before the finish, instead of raising (a scenario error)."""
    _release(sglang_root, "0.5.22")
    ops = (("evict", 1), ("chunk", 1, 10), ("chunk", 1, 1), ("evict", 5), ("finish", 1))
    out = _run(sglang_root, "0.5.22", "v0.5.22", ((5, True), (10, True)), ops, "unified", True)
    assert out["final"] == [], out


def test_an_eviction_after_the_ledger_broke_is_the_documented_abstraction(sglang_root: Path) -> None:
    """alloc_for_extend/swa on 0.5.18: both requests in one batch, request 1's finish leaves
    finding 3's doubly owned prefix; the next eviction's outcome is one the model does not allow,
    on a state whose ledger kvmc already finds broken: the first difference carries the mark
    `after_conservation_violation` matches."""
    _release(sglang_root, "0.5.18")
    from upstream.abstractions import ABSTRACTIONS

    script = _SCENARIO.replace("sc = L.Life(1, True, 1, 24, 1, {reqs}, {ops}, {tree!r}, branching={branching})",
                               "sc = L.Life(4, True, 5, 16, 4, ((1, False), (11, False)), "
                               "(('batch', 1, 10), ('finish', 1), ('evict', 1)), '', False, True)")
    out = run_in_release(release_path(sglang_root, "0.5.18"), ["-c", script.format(design="v0.5.18")])
    assert isinstance(out, dict), out
    assert out["final"] and "(kvmc's ledger already broken)" in out["final"][0], out
    (ab,) = [a for a in ABSTRACTIONS if a.name == "after_conservation_violation"]
    assert "alloc_for_extend/swa" in ab.rows and ab.matches(None, [(out["final"][0], True, False)], None, "0.5.18")
    assert not ab.matches(None, [("op 2 ('evict', 1): sizes", True, False)], None, "0.5.18")
