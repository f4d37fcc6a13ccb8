"""The proof cache (checker/engines/proof_cache.py): a step-case query z3 answered unsat is recorded under
a hash of its exact text, and a later run takes the answer instead of asking again, so a long
proof can be stopped and resumed. Only the same query may hit: another design, lemma set or
candidate is another formula."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker.engines.induction import SPLIT_AFTER_MS, KInduction, _CaseQuery
from checker.engines.proof_cache import ProofCache
from model.designs import PRESETS
from model.system import System
from specs import properties as props_mod
from specs.configs import CONFIGS

from tests.engines.planted_solver import unknown_through

PROPS = ["no_decode_oom"]  # 1-inductive on `small` with no lemma: a quick proof of about 30 case queries
LEMMAS: list[str] = []


@pytest.fixture(autouse=True)
def _whole_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the property's first-break split: its cases' local queries (checker/engines/cone.py) run
    on solvers of their own, which the planted solver does not reach."""
    for n in PROPS:
        monkeypatch.setitem(props_mod.PROPERTIES, n, dataclasses.replace(props_mod.PROPERTIES[n], conjuncts=None))


def _split_everything(monkeypatch: pytest.MonkeyPatch, answerable: bool) -> dict[str, int]:
    """Every query without a case added is unknown (so Houdini goes one candidate at a time and
    splits each), and, unless `answerable`, so is every other: z3 can then settle nothing, and only
    the proof cache can. Counts the checks z3 was asked."""
    asked = {"n": 0}
    unknown_through(monkeypatch, 0 if answerable else -1, asked)
    return asked


@pytest.mark.parametrize("workers", [1, 2])
def test_a_resumed_proof_takes_the_recorded_answers(workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the parent, and in the forked case workers (`_settle_parallel`), which record and read
    the same store."""
    system = System(CONFIGS["small"], PRESETS["current"])
    cache = ProofCache.open(tmp_path / "cache")
    asked = _split_everything(monkeypatch, answerable=True)
    first = KInduction(system, PROPS, LEMMAS, cache=cache, workers=workers).houdini(1)
    assert sorted(first.proved) == sorted(PROPS) and first.cached == 0 and first.split_cases > 0, first
    files = [f for f in (tmp_path / "cache").rglob("*") if f.is_file() and f.parent != tmp_path / "cache"]
    hints = [f for f in files if f.name.endswith(".unknown")]
    stored = len(files) - len(hints)
    assert stored > 0 and (cache.stored == stored or workers > 1) and asked["n"] > 0
    assert len(hints) == len(PROPS), "the whole query, which z3 gave up on, is recorded as a hint"
    assert all(int(f.read_text()) == SPLIT_AFTER_MS for f in hints), "with the time z3 had"

    # z3 now answers nothing: the proof closes all the same, from the recorded answers alone; the
    # query z3 gave up on is split at once from its hint, so z3 is asked only the joint query
    asked = _split_everything(monkeypatch, answerable=False)
    again = KInduction(system, PROPS, LEMMAS, cache=ProofCache(tmp_path / "cache"), workers=workers).houdini(1)
    assert sorted(again.proved) == sorted(PROPS), again
    assert again.cached == stored and again.split_cases == first.split_cases, again
    assert (first.skipped, again.skipped) == (0, len(hints)) and asked["n"] == 1, (again, asked)

    # without the cache the same unanswerable solver proves nothing: the cache did the work
    none = KInduction(system, PROPS, LEMMAS).houdini(1)
    assert none.proved == [], none


def test_another_formula_does_not_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted bug, or one more lemma, changes the formula: nothing recorded for `current` may
    answer it."""
    cache = ProofCache.open(tmp_path / "cache")
    _split_everything(monkeypatch, answerable=True)
    ind = KInduction(System(CONFIGS["small"], PRESETS["current"]), PROPS, LEMMAS, cache=cache)
    assert ind.houdini(1).proved == PROPS and cache.stored > 0
    mutant = PRESETS["current"].with_mutants(frozenset({"unfinished_keeps_protected_len"}))
    others = [KInduction(System(CONFIGS["small"], mutant), PROPS, LEMMAS),
              KInduction(System(CONFIGS["small"], PRESETS["current"]), PROPS, ["typing"])]
    for path in [(), (0,), (3,)]:
        mine = _CaseQuery(ind, 1, PROPS, PROPS[0]).key(path)
        assert cache.settled(mine) == (path != ())  # the whole query was unknown, its cases unsat
        for other in others:
            active = PROPS + [f"lemma:{n}" for n in other.lemmas]
            theirs = _CaseQuery(other, 1, active, PROPS[0]).key(path)
            assert theirs != mine and not cache.settled(theirs)


_KEY_SCRIPT = """
import json, sys
from checker.engines.induction import KInduction, _CaseQuery, LEMMAS
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS
ind = KInduction(System(CONFIGS["small"], PRESETS["current"]), ["conservation"])
active = ["conservation"] + [f"lemma:{n}" for n in LEMMAS]
q = _CaseQuery(ind, 1, active, "conservation")
print(json.dumps([q.key(()), q.key((0, 1))]))
"""


def test_keys_are_the_same_in_another_process_and_differ_by_case() -> None:
    """The key is the query's text, so a new process (a resumed run) computes the same one."""
    ind = KInduction(System(CONFIGS["small"], PRESETS["current"]), ["conservation"])
    from specs.lemmas import LEMMAS

    q = _CaseQuery(ind, 1, ["conservation"] + [f"lemma:{n}" for n in LEMMAS], "conservation")
    here = [q.key(()), q.key((0, 1))]
    there = json.loads(subprocess.run([sys.executable, "-c", _KEY_SCRIPT], capture_output=True, text=True,
                                      check=True, cwd=Path(__file__).resolve().parents[2]).stdout)
    assert here == there
    assert here[0] != here[1] != q.key((0, 2))


def test_cli_proof_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from checker.engines import induction, proof_cache
    from checker.cli import main

    # The joint step query answers unsat in a second or two; on a loaded machine it could run past
    # JOINT_AFTER_MS, and the proof would go on one candidate at a time, split into cases, some of
    # which are the very same query (first-break cases whose conjunct is the same term at two
    # checkpoints): the second is then rightly taken from the cache the first filled, and "no hit
    # in an empty cache" fails. The joint query is given its time, so both runs ask one query.
    monkeypatch.setattr(induction, "JOINT_AFTER_MS", 600_000)

    args = ["check", "--engine", "induction", "--config", "small", "--property", "conservation", "--depth", "2",
            "--no-progress", "--out", str(tmp_path / "out"), "--proof-cache", str(tmp_path / "pc")]
    try:
        assert main(args) == 0
        first = capsys.readouterr().out
        assert main(args) == 0
        again = capsys.readouterr().out
    finally:
        proof_cache.use(None)
    assert "from the proof cache" not in first and "proved (k=1)" in first
    assert "1 of 1 step queries from the proof cache" in again and "proved (k=1)" in again, again
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(args[:-1] + [str(blocker / "sub")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--proof-cache" in err and "expected a writable directory" in err, err
    assert main(["check", "--engine", "explicit", "--config", "small", "--proof-cache", str(tmp_path / "pc")]) == 2
    assert "--proof-cache applies to the proofs" in capsys.readouterr().err


def test_a_hint_with_less_time_than_now_is_asked_again(tmp_path: Path) -> None:
    """A hint says z3 gave up with that much time; a run that gives it more asks again."""
    cache = ProofCache.open(tmp_path / "cache")
    cache.gave_up("ab" * 32, 15_000)
    assert cache.given_up("ab" * 32, 15_000) and cache.given_up("ab" * 32, 10_000)
    assert not cache.given_up("ab" * 32, 60_000) and not cache.given_up("cd" * 32, 1)
    assert not cache.settled("ab" * 32), "a hint is not an answer"
    assert cache.hinted == 2
