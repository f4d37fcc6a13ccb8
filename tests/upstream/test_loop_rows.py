"""The scheduler-loop rows (`event_loop*`, upstream/sched/loop_rows.py): random walks of a preset
replayed on its release's own Scheduler, every choice forced, every state compared.

What the tests pin: on 0.5.23 (`current`'s release) the walks follow SGLang state for state on the
fixed profile, through the allocation-time eviction SGLang 0.5.19+ runs through
`UnifiedRadixCache.evict_for_alloc` (which the forcing must order and see: before it did, a walk's
eviction set was never forced and SGLang's own LRU made the choice), the session record's lengths
and the output trim of a finished turn (`_trim_overshoot`); and the row sees the flag it found:
without `prompt_boundary_split=checkpoint` (0.5.22's stash splits at the prompt boundary) it
disagrees and shrinks the disagreement to a four-iteration walk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from upstream import conform

EXAMPLES = int(os.environ.get("KVMC_CONFORM_EXAMPLES", "60"))
NEWEST = "0.5.23"


def _installed(root: Path, version: str) -> bool:
    from upstream.install import MARKER, release_path

    return (Path(release_path(root, version)[0]) / MARKER).exists()


@pytest.fixture(scope="module")
def newest(sglang_root: Path) -> Path:
    from upstream.sched.replay import install_extras

    if not _installed(sglang_root, NEWEST):
        pytest.skip(f"SGLang {NEWEST} is not installed (`kvmc sglang install {NEWEST}`; .ci/run installs it)")
    install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _row(out: list, row: str) -> dict:
    (res,) = out
    assert "error" not in res, res.get("error")
    (r,) = [r for r in res["rows"] if r["row"] == row]
    return r


def test_walks_follow_sglang_0_5_23(newest: Path) -> None:
    rows = ("event_loop", "event_loop/pressure", "event_loop/sessions", "event_loop/swa")
    out = conform.run([NEWEST], rows=rows, examples=EXAMPLES, seed=0, root=newest, jobs=1)
    for row in rows:
        r = _row(out, row)
        assert r["disagreed"] == 0 and r["errored"] == 0, r
        assert r["agreed"] >= EXAMPLES // 2, r  # batch_is_full (documented) may take some, never most
        assert set(r["abstractions"]) <= {"batch_is_full", "eviction_superset"}, r


def _override(tmp: Path, name: str, body: str) -> str:
    f = tmp / f"{name}.py"
    f.write_text(body)
    return str(f)


def test_row_sees_the_stash_prompt_split(newest: Path, tmp_path: Path) -> None:
    """0.5.22+ runs the prompt-boundary split in `checkpoint_into_tree`, which a stash runs too: a
    retracted request re-prefilling its output leaves prompt and output in two nodes. The design
    without it (the finish-only variant of 0.5.20/0.5.21) disagrees on the sessions row."""
    out = conform.run([NEWEST], rows=("event_loop/sessions",), examples=200, seed=0, root=newest, jobs=1,
                      with_=("prompt_boundary_split=on",))
    r = _row(out, "event_loop/sessions")
    assert r["disagreed"] > 0, r
    assert "node_len" in str(r["minimal"]["diffs"]), r["minimal"]
