"""`kvmc check` confirms its counterexamples in a forked process that imported torch while the
search ran (checker/replay/pool.py: WarmPool): the child's note is the in-process one, a trace that
diverges is reported as such through it too, and a dead child falls back to replaying in-process."""

from __future__ import annotations

import dataclasses
import multiprocessing

from checker.traces import itf
from checker.replay.pool import WarmPool, confirm_note

TRACE = "counterexamples/v0.5.13-without-session_active/sessions/busy_check_sound.itf.json"


def test_the_child_confirms_as_the_parent_does() -> None:
    tr = itf.read(TRACE)
    with WarmPool() as warm:
        assert warm.proc is not None and warm.proc.is_alive()
        note = warm.confirm_note(tr)
        assert warm.proc is not None, "the child fell back: it should have answered"
    assert note == confirm_note(tr) and note.startswith("confirmed (reproduced on the pool"), note
    assert multiprocessing.active_children() == []


def test_a_trace_the_pool_does_not_follow_is_not_confirmed_through_the_child() -> None:
    tr = itf.read(TRACE)
    last = tr.steps[-1]
    bad = dataclasses.replace(last, state=dataclasses.replace(last.state, full_available=last.state.full_available + 1))
    tr.steps[-1] = bad
    with WarmPool() as warm:
        note = warm.confirm_note(tr)
    assert not note.startswith("confirmed"), note


def test_a_dead_child_falls_back_to_replaying_here() -> None:
    tr = itf.read(TRACE)
    with WarmPool() as warm:
        warm.proc.kill()
        warm.proc.join()
        note = warm.confirm_note(tr)
        assert warm.proc is None
    assert note.startswith("confirmed (reproduced on the pool"), note
