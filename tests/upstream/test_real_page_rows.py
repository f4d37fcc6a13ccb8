"""The scheduler-loop rows at the page sizes SWA models are served with (issue 62 item 3):
`event_loop/swa_page16` and `event_loop/swa_page64` replay random walks of `hybrid_swa_page16` /
`hybrid_swa_page64` (specs/configs.py) on SGLang's own scheduler, page 16 and 64, every state
compared (upstream/sched/loop_rows.py). On 0.5.23, `current`'s release, they agree but for the
documented `eviction_superset` (an eviction set SGLang's LRU would not pick), as the page-1 and
page-4 rows do."""

from __future__ import annotations

from pathlib import Path

import pytest

from upstream import conform
from upstream.install import is_installed

NEWEST = "0.5.23"
EXAMPLES = 40
pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # one worker per release (tests/upstream/conftest.py)


@pytest.mark.parametrize("row", ["event_loop/swa_page16", "event_loop/swa_page64"])
def test_real_page_walks_follow_sglang_0_5_23(sglang_root: Path, row: str) -> None:
    from upstream.sched.replay import install_extras

    if not is_installed(sglang_root, NEWEST):
        pytest.skip(f"SGLang {NEWEST} is not installed (`kvmc sglang install {NEWEST}`; .ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    (res,) = conform.run([NEWEST], rows=(row,), examples=EXAMPLES, seed=0, root=sglang_root, jobs=1)
    assert "error" not in res, res.get("error")
    (r,) = [r for r in res["rows"] if r["row"] == row]
    assert r["disagreed"] == 0 and r["errored"] == 0, r
    assert r["agreed"] >= EXAMPLES * 9 // 10, r
    assert set(r["abstractions"]) <= {"eviction_superset"}, r
