"""`kvmc mutate --conform`: a survivor of every property that SGLang tells apart from the model.

`add_chunked_req`'s clip of the chunked request's `max_new_tokens` by `max` for `min` (an
over-reservation) breaks no safety property: every engine lets it survive (docs/mutants.md). SGLang's
own `PrefillAdder.add_chunked_req` charges the clipped amount, so the conformance rows disagree, where
the unmutated model agrees on the same scenarios. A mutant that changes nothing the rows observe
(the load-back's eviction amounts swapped: the HiCache admission row sees the same decisions) is not killed.

`alloc_for_extend`'s page of slack counted for the requests outside the batch (`not batch[r]`) is a
survivor no engine drove to a failing allocation; in a batch of both requests it evicts less than SGLang's
`alloc_paged_token_slots_extend`, which the `alloc_for_extend` row sees in the tree's sizes. Spec v2's decode
eviction summing the growth A' - A of the requests outside the batch (`spec_v2_decode_step`; in a batch of
both it evicts nothing) is seen by the `alloc_for_spec_decode` row, run on 0.5.13 against
the v0.5.18 flags (the v0.5.13 preset models EAGLE v1; the row's A' is kvmc's, handed to both sides, so the
allocation it compares is the same code in 0.5.13 and 0.5.18: alloc_paged_token_slots_extend from A to A').
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checker.mutation import conformance
from checker.mutation.operators import find, generate

VERSION = "0.5.13"  # a CI release (tests/upstream/conftest.py)
# the chunked request's budget; admissions that load host hits back; two requests in one extend batch; a decode step
ROWS = ("add_chunked_req", "add_one_req/hicache", "alloc_for_extend", "alloc_for_decode")


pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


@pytest.fixture(scope="module")
def base(sglang_root: Path) -> dict[str, Any]:
    b = conformance.baseline(VERSION, 40, 29, ROWS)
    assert b == {r: 0 for r in ROWS}, b  # the model agrees: a disagreement is the mutant's
    return b


def test_conformance_kills_a_survivor_that_sglang_tells_apart(base: dict[str, Any]) -> None:
    m = find("add_chunked_req", "minmax", "x.min(enqueue.max_new_tokens(x, s, r), x.cfg.clip_max_new_tokens)")
    k = conformance.conform_kill(m.id, VERSION, 40, 29, base, ROWS)
    assert k is not None and k["engine"] == "conform" and k["disagreed"] > 0, k
    assert "add_chunked_req" in k["property"] and "SGLang 0.5.13" in k["evidence"], k


def test_a_mutant_the_rows_do_not_observe_is_not_killed(base: dict[str, Any]) -> None:
    [m] = [m for m in generate(transition="init_load_back", ops=("swap",)) if m.before.startswith("radix_cache.evict(")]
    assert conformance.conform_kill(m.id, VERSION, 40, 29, base, ROWS) is None


def test_conformance_kills_the_extend_batch_eviction_survivor(base: dict[str, Any]) -> None:
    m = find("alloc_for_extend", "negate", "x.ite(batch[r], 1, 0)")  # the batch size bs
    k = conformance.conform_kill(m.id, VERSION, 40, 29, base, ROWS)
    assert k is not None and k["property"] == "agrees with SGLang: alloc_for_extend", k
    assert "extend batch" in k["evidence"], k


def test_conformance_kills_the_spec_v2_decode_eviction_survivor(sglang_root: Path) -> None:
    from upstream import conform

    row = "alloc_for_spec_decode"
    [res] = conform.run([VERSION], [row], 40, 29, root=sglang_root, design="v0.5.18", jobs=1)
    [r] = res["rows"]
    assert r["scenarios"] == 40 and r["disagreed"] == 0 and r["errored"] == 0, r
    m = find("spec_v2_decode_step", "negate", "x.ite(batch[r], nxt[r] - s.kv_allocated_len[r], 0)")  # the growth
    [res] = conform.run([VERSION], [row], 40, 29, root=sglang_root, design="v0.5.18", jobs=1, generated=[m.id])
    [r] = res["rows"]
    assert r["disagreed"] > 0 and "spec v2 decode allocation" in conform.side_by_side(res, r), r


def test_conformance_sees_a_decode_step_that_evicts_nothing(base: dict[str, Any]) -> None:
    m = find("alloc_for_decode", "drop", "s = radix_cache.evict_from_tree_cache(x, s, bs * ps, 'evict')")
    k = conformance.conform_kill(m.id, VERSION, 40, 29, base, ROWS)
    assert k is not None and k["property"] == "agrees with SGLang: alloc_for_decode", k
    assert "decode allocation" in k["evidence"], k


def test_the_swa_spec_row_sees_an_over_allocation_that_skips_the_swa_pool(sglang_root: Path) -> None:
    """Spec v2 on hybrid SWA (config hybrid_swa_spec_v2): the row `alloc_for_spec_decode/swa` agrees with
    SGLang's SWA allocator, which takes A' - A from both pools, and tells apart a model that charges the
    full pool only; the plain row cannot."""
    from upstream import conform

    planted = [str(Path(__file__).resolve().parent / "planted_spec_swa_alloc.py")]
    got = {}
    for row, over in (("alloc_for_spec_decode/swa", []), ("alloc_for_spec_decode/swa", planted),
                      ("alloc_for_spec_decode", planted)):
        [res] = conform.run([VERSION], [row], 40, 29, root=sglang_root, design="v0.5.18", jobs=1, overrides=over)
        [r] = res["rows"]
        assert r["scenarios"] == 40 and r["errored"] == 0, r
        got[(row, bool(over))] = (r["disagreed"], conform.side_by_side(res, r) if r["disagreed"] else "")
    assert got[("alloc_for_spec_decode/swa", False)][0] == 0, got
    assert got[("alloc_for_spec_decode/swa", True)][0] > 0 and "swa_available" in got[("alloc_for_spec_decode/swa", True)][1]
    assert got[("alloc_for_spec_decode", True)][0] == 0, got
