"""bench/walk_sweep.py: deep random walks of a preset on a config, every safety property on every
state. Its walks are seeded, so a fixed number of them finds the same first violation anywhere."""

from __future__ import annotations

from bench.walk_sweep import sweep_pair


def test_the_sweep_finds_a_known_finding_and_names_its_walk() -> None:
    row = sweep_pair("v0.5.11", "sessions", 0, max_walks=60)  # finding 4: a session's row, no row left
    assert row is not None and row["walks"] == 60 and row["steps"] > 100
    assert row["violated"].startswith("no_prefill_oom (seed "), row


def test_the_fixed_release_shows_nothing_on_the_same_walks() -> None:
    row = sweep_pair("v0.5.12.post1", "sessions", 0, max_walks=60)  # 0.5.12.post1 bounds the pass by the free rows
    assert row is not None and row["violated"] == "-", row


def test_a_config_the_preset_does_not_model_is_skipped() -> None:
    assert sweep_pair("v0.5.11", "spec_v2", 0, max_walks=1) is None  # spec v2 ships from 0.5.13
