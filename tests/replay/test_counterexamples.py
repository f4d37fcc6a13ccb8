"""The regression suite: every checked-in counterexample replays on the torch pool as pinned in
counterexamples/MANIFEST.json, and the same events on the fixed design do not violate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checker.traces import itf
from checker.replay.regen import DEFAULT_DIR, FINDINGS, build_manifest
from checker.replay.pool import REPRODUCED, fixed_design, replay_events, replay_file

FILES = sorted(DEFAULT_DIR.rglob("*.itf.json"))
MANIFEST = DEFAULT_DIR / "MANIFEST.json"


def _pinned() -> dict:
    return json.loads(MANIFEST.read_text())["files"] if MANIFEST.exists() else {}


def _id(p: Path) -> str:
    return str(p.relative_to(DEFAULT_DIR))


def test_there_are_counterexamples() -> None:
    assert FILES, f"no *.itf.json under {DEFAULT_DIR}; generate them with python -m checker.replay.regen --update"


@pytest.mark.parametrize("path", FILES, ids=_id)
def test_replays_as_pinned(path: Path) -> None:
    pinned = _pinned().get(_id(path))
    assert pinned is not None, f"{_id(path)} is not pinned in MANIFEST.json (python -m checker.replay.regen --manifest)"
    o = replay_file(path)
    assert o.status == pinned["expected"], o.line()
    assert o.status == REPRODUCED, o.line()
    t = itf.read(path)
    assert len(t.steps) == pinned["length"], f"trace length {len(t.steps)} != pinned {pinned['length']}"
    assert t.prop == pinned["property"]


FINDING_FILES = {f"{d}/{c}/{p}.itf.json" for d, c, p, *_extra in FINDINGS}
FIXED = [f for f in FILES if _id(f) not in FINDING_FILES]


def test_findings_are_in_the_corpus_and_have_no_fix() -> None:
    """A finding (a preset's own violation, docs/findings.md) is checked in, and the release it names
    has no fix to replay it against: its events violate the property on that same design."""
    assert FINDING_FILES and FINDING_FILES <= {_id(f) for f in FILES}
    for f in FILES:
        if _id(f) in FINDING_FILES:
            t = itf.read(f)
            assert fixed_design(t).name == t.design.name
            if t.loop is None:  # a lasso's loop is replayed by test_replays_as_pinned
                assert replay_events(t, fixed_design(t)).violations, _id(f)


@pytest.mark.parametrize("path", FIXED, ids=_id)
def test_fixed_design_does_not_violate(path: Path) -> None:
    t = itf.read(path)
    run = replay_events(t, fixed_design(t))
    assert run.violations == [], f"{_id(path)} on {fixed_design(t).name}: {t.prop} fails at {run.violations}"
    assert not run.stopped, run.stopped


def test_manifest_matches_disk() -> None:
    """What `kvmc regen` checks: every trace on disk does what MANIFEST.json pins, entry by entry (its
    design's fixes turned off included: a flag added after a trace was written reads as off in it,
    and session 41 left four such entries stale because only the file names were compared)."""
    from checker.replay.regen import compare

    assert MANIFEST.exists(), "counterexamples/MANIFEST.json is missing (python -m checker.replay.regen --manifest)"
    assert set(_pinned()) == set(build_manifest(DEFAULT_DIR)["files"])
    assert compare(DEFAULT_DIR) == [], "kvmc regen: the manifest is stale (kvmc regen --manifest after a review)"
