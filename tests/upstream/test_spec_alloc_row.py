"""The row `spec_v2_alloc_len` (upstream/spec_alloc.py): spec v2's decode over-allocation sizing,
kvmc's `alloc_len_per_decode` / `spec_v2_alloc_len` / `spec_v2_tokens_needed` against SGLang's own
`get_alloc_len_per_decode`, `get_alloc_reserve_per_decode`, `page_aligned_decode_alloc_lens` and
`ScheduleBatch._new_tokens_required_next_decode_spec_v2`.

What the tests pin: on 0.5.23 (`current`'s release) every scenario agrees, and the row sees the
formula: without `spec_v2_page_align` (A' = max(A, C + 2a), the 0.5.13-0.5.15.post1 sizing) kvmc's
A' falls short of SGLang's page-aligned one at page_size > 1 and the row disagrees on A'. Before
0.5.19 the row does not apply (A' is inline in eagle_prepare_for_decode)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from upstream import conform

EXAMPLES = int(os.environ.get("KVMC_CONFORM_EXAMPLES", "60"))
NEWEST = "0.5.23"
ROW = "spec_v2_alloc_len"
pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


@pytest.fixture(scope="module")
def newest(sglang_root: Path) -> Path:
    from upstream.install import MARKER, release_path
    from upstream.errors import UpstreamUsageError

    try:
        installed = (Path(release_path(sglang_root, NEWEST)[0]) / MARKER).exists()
    except UpstreamUsageError:
        installed = False
    if not installed:
        pytest.skip(f"SGLang {NEWEST} is not installed (`kvmc sglang install {NEWEST}`; .ci/run installs it)")
    return sglang_root


def _row(out: list) -> dict:
    (res,) = out
    assert "error" not in res, res.get("error")
    (r,) = [r for r in res["rows"] if r["row"] == ROW]
    return r


def test_spec_v2_alloc_len_agrees_with_0_5_23(newest: Path) -> None:
    out = conform.run([NEWEST], rows=(ROW,), examples=EXAMPLES, seed=0, root=newest, jobs=1)
    r = _row(out)
    assert "not_applicable" not in r, r
    assert r["scenarios"] == EXAMPLES and r["errored"] == 0, conform.could_not_run(out[0], r)
    assert r["disagreed"] == 0, conform.side_by_side(out[0], r)
    assert r["agreed"] == r["scenarios"], r


def test_row_sees_the_page_aligned_reserve(newest: Path) -> None:
    """kvmc without `spec_v2_page_align` sizes A' = max(A, C + 2a) unaligned; SGLang 0.5.23 rounds
    it up to a page: the row disagrees on A' (shrunk to a page_size > 1 scenario)."""
    out = conform.run([NEWEST], rows=(ROW,), examples=EXAMPLES, seed=0, root=newest, jobs=1,
                      without=("spec_v2_page_align",))
    r = _row(out)
    assert r["disagreed"] > 0, r
    assert "A'" in str(r["minimal"]), r["minimal"]
    assert "page_size=1," not in str(r["minimal"]), r["minimal"]
