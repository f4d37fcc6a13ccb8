"""Seeded BMC (checker/engines/bmc.py `seeder`, checker/engines/random_engine.py::seed_run) and the concrete shrink
of a counterexample's numbers (checker/engines/shrink.py).

A seed may only make a counterexample cheaper to find: the depth is still the shortest, the trace
is still z3's (re-run concretely), and a seed that breaks nothing changes no verdict."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from checker.engines import bmc as bmc_mod
from checker.engines.bmc import BMC
from checker.engines.random_engine import Seed, seed_run
from checker.engines.run import _seeder
from checker.engines.shrink import EXHAUSTIVE, PinnedOracle, _candidates, _coordinates, breaks, shrink
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.config import PAGE_MULTIPLE
from model.designs import PRESETS
from model.ops import Concrete, Infeasible
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

SESSIONS = CONFIGS["sessions"]
RETRACT = System(SESSIONS, PRESETS["current"].with_fix("retract_tail_free", None))  # #22862: conservation at depth 3


@pytest.fixture
def always_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hunt before every depth after the first (the real threshold is a z3 work count)."""
    monkeypatch.setattr(bmc_mod, "SEED_AFTER_WORK", 0)


@pytest.fixture(scope="module")
def retract_seed() -> Seed:
    """A random run of #22862's design breaking a property in exactly 3 steps (`seed_run`, seconds
    of Hypothesis): found once, read by the tests below that check it or start from it."""
    seed = seed_run(RETRACT, list(PROPERTIES), 3)
    assert seed is not None
    return seed


@pytest.fixture(scope="module")
def seeded_retract() -> Any:
    """#22862's conservation result from a BMC seeded before every depth after the first (as
    `always_seed`), stopped at its first violation: one run (minutes of z3 on a loaded machine)
    that the two tests reading a seeded, minimised counterexample share."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bmc_mod, "SEED_AFTER_WORK", 0)
        return BMC(RETRACT, ["conservation"], seeder=_seeder(RETRACT)).run(4, stop_on_violation=True)["conservation"]


def _open_coords(system: System, params: Any) -> list[tuple[str, int | None, int]]:
    """(parameter, index, value) for each number the shrink may move (`shrink._coordinates`)."""
    return [(n, i, getattr(params, n) if i is None else getattr(params, n)[i]) for n, i in _coordinates(system, params, None)]


def _lowered(params: Any, name: str, i: int | None, v: int) -> Any:
    if i is None:
        return dataclasses.replace(params, **{name: v})
    vals = list(getattr(params, name))
    vals[i] = v
    return dataclasses.replace(params, **{name: tuple(vals)})


def test_seed_run_is_a_run_of_exactly_the_depth_within_the_bmc_bounds(retract_seed: Seed) -> None:
    seed = retract_seed
    assert len(seed.picks) == 3 and "conservation" in seed.props
    assert breaks(RETRACT, seed.params, seed.picks, "conservation")
    for name, _i, v in _open_coords(RETRACT, seed.params):
        lo, hi = SESSIONS.bound(name)
        assert lo <= v <= hi, (name, v)
    assert seed_run(RETRACT, list(PROPERTIES), 2) is None  # no 2-step violation exists (the BMC proves depth 2)


def test_seed_run_gives_up_when_told() -> None:
    assert seed_run(RETRACT, list(PROPERTIES), 3, give_up=lambda: True) is None


def test_seeded_bmc_finds_the_same_shortest_depth_and_a_z3_trace(seeded_retract: Any) -> None:
    plain = BMC(RETRACT, ["conservation"]).run(4, stop_on_violation=True)["conservation"]
    seeded = seeded_retract
    assert plain.verdict is seeded.verdict is Verdict.VIOLATED
    assert seeded.depth == plain.depth == 3
    assert "seeded_by" in seeded.meta and "seeded_by" not in plain.meta
    tr = seeded.trace
    assert tr is not None and tr.engine == "bmc"
    states, _ = run_concrete(RETRACT, tr.params, tr.actions)
    assert not PROPERTIES["conservation"].holds(RETRACT.ctx(Concrete(), tr.params), states[-1])


def test_a_seed_that_breaks_nothing_changes_no_verdict(always_seed: None, retract_seed: Seed) -> None:
    """A seeder that lies (a run of the right length that breaks nothing, then one of the wrong
    length) must not turn `current` into a violation: the pinned query is unsat and the depth is
    asked unpinned as before."""
    system = System(SESSIONS, PRESETS["current"])
    some = retract_seed
    asked: list[int] = []

    def liar(depth: int, props: list[str], give_up: Any) -> Seed:
        asked.append(depth)
        picks = (some.picks * depth)[:depth] if depth != 2 else some.picks  # depth 2: wrong length
        return Seed(some.params, picks, list(props), 1)

    res = BMC(system, None, seeder=liar).run(3)
    plain = BMC(system, None).run(3)
    assert asked, "the seeder was never asked"
    for p, r in res.items():
        assert r.verdict is plain[p].verdict and r.depth == plain[p].depth, p
        assert r.verdict is not Verdict.VIOLATED


def test_shrink_keeps_the_schedule_breaking_and_reaches_a_local_minimum(retract_seed: Seed) -> None:
    seed = retract_seed
    small = shrink(RETRACT, seed.params, seed.picks, "conservation")
    assert breaks(RETRACT, small, seed.picks, "conservation")
    before = {(n, i): v for n, i, v in _open_coords(RETRACT, seed.params)}
    for name, i, v in _open_coords(RETRACT, small):
        assert v <= before[(name, i)], (name, i)
        lo, _hi = SESSIONS.bound(name)
        step = SESSIONS.page_size if name in PAGE_MULTIPLE else 1
        if v - step >= lo:  # a local minimum: no parameter one step lower still breaks
            assert not breaks(RETRACT, _lowered(small, name, i, v - step), seed.picks, "conservation"), (name, i)
    assert small != seed.params  # the hunt's numbers are not already minimal: the shrink did something


def test_candidates_are_all_values_when_few_and_a_sample_when_many() -> None:
    assert _candidates(4, 20, 1) == list(range(4, 20))
    assert _candidates(8, 40, 4) == list(range(8, 40, 4))
    many = _candidates(4, 10**7, 1)
    assert len(many) <= EXHAUSTIVE and many[:16] == list(range(4, 20)) and max(many) < 10**7
    assert many == sorted(set(many))


def test_breaks_refuses_another_schedule(retract_seed: Seed) -> None:
    """A choice the schedule did not make, or a recorded value the step no longer offers, is
    another schedule: the shrink must not wander into it."""
    o = PinnedOracle({"a": 3, "b": True})
    assert o.pick_int("a", 0, 5) == 3 and o.pick_bool("b") is True
    for ask in (lambda: o.pick_int("a", 0, 2), lambda: o.pick_int("a", 4, 9), lambda: o.pick_int("c", 0, 9),
                lambda: o.pick_bool("c"), lambda: o.pick_int("b", 0, 9)):
        with pytest.raises(Infeasible):
            ask()
    seed = retract_seed
    assert not breaks(RETRACT, seed.params, seed.picks[:2], "conservation")  # two steps break nothing


def test_the_minimised_counterexample_is_a_local_minimum_of_its_schedule(seeded_retract: Any) -> None:
    tr = seeded_retract.trace
    assert tr is not None
    picks = [s.picks for s in tr.steps]
    assert breaks(RETRACT, tr.params, picks, "conservation")
    for name, i, v in _open_coords(RETRACT, tr.params):
        lo, _hi = SESSIONS.bound(name)
        if v > lo:
            assert not breaks(RETRACT, _lowered(tr.params, name, i, v - 1), picks, "conservation"), (name, i)


def test_a_pool_of_ten_million_tokens_is_not_ten_million_tries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shrink samples large ranges (`_candidates`) and skips a parameter one step above a
    failing value: minimising #27391 on a 10^7-token pool takes hundreds of concrete tries (123 at
    10^3, 401-1,816 at 10^7, depending on the model z3 starts from), not one per token."""
    import checker.engines.shrink as shrink_mod
    from bench._bmc_worker import scaled

    real = shrink_mod.breaks
    system_for = lambda n: System(scaled(CONFIGS["hybrid_swa_hicache"], n),  # noqa: E731
                                  PRESETS["current"].with_fix("swa_hostload_budget", None))
    tries: dict[int, int] = {}
    for n in (10**3, 10**7):
        tries[n] = 0

        def counted(*a: Any, n: int = n) -> bool:
            tries[n] += 1
            if tries[n] > 20_000:  # a scan over the range would never end: fail instead
                raise AssertionError(f"more than 20,000 tries at pool {n}")
            return real(*a)

        monkeypatch.setattr(shrink_mod, "breaks", counted)
        r = BMC(system_for(n), ["no_prefill_oom"]).run(1, stop_on_violation=True)["no_prefill_oom"]
        assert r.verdict is Verdict.VIOLATED and r.depth == 1
    assert all(0 < t < 5_000 for t in tries.values()), tries


def test_the_json_report_says_a_counterexample_was_seeded(tmp_path: Any, capsys: pytest.CaptureFixture[str],
                                                          always_seed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from checker.cli import main
    from checker.engines import random_engine

    # the hunts before depths 1 and 2 find nothing (no shorter violation exists: the BMC proves it,
    # and test_seed_run_is_a_run_of_exactly_the_depth_within_the_bmc_bounds checks depth 2), and
    # a hunt that finds nothing is seeded_retract's and the liar's path: here only depth 3's hunt,
    # the one whose seed the report names, runs (two thirds of this test's time were the other two)
    real = random_engine.seed_run
    hunted: list[int] = []

    def at_three(system: System, props: list[str], depth: int, **kw: Any) -> Seed | None:
        hunted.append(depth)
        return real(system, props, depth, **kw) if depth == 3 else None

    monkeypatch.setattr(random_engine, "seed_run", at_three)  # run._seeder's hunt imports it per call

    code = main(["check", "--without", "retract_tail_free", "--config", "sessions", "--property", "conservation",
                 "--depth", "3", "--no-prove", "--json", "--out", str(tmp_path)])
    rep = json.loads(capsys.readouterr().out)
    (r,) = rep["configs"][0]["results"]
    assert code == 1 and r["verdict"] == "violated" and r["depth"] == 3
    assert r["seeded_by"] and "random run" in r["seeded_by"]
    assert 3 in hunted, hunted  # the check's hunt is the patched one


def _flips_after(n: int) -> Any:
    """A `give_up` that is false for its first `n` answers and true from then on: a clock that runs
    out between two of Hypothesis's examples."""
    calls = [0]

    def give_up() -> bool:
        calls[0] += 1
        return calls[0] > n

    return give_up


def test_a_hunt_ended_by_give_up_is_over_even_when_hypothesis_calls_the_replay_flaky(monkeypatch: pytest.MonkeyPatch) -> None:
    # A run that `give_up` ends draws less than an earlier example with the same start drew, and
    # Hypothesis's data tree calls that FlakyStrategyDefinition (seen in a fresh-clone CI run: the
    # background proof's seed hunt on sessions). The hunt is over; nothing was found; no crash.
    from hypothesis.errors import Flaky

    from checker.engines import random_engine

    system = System(SESSIONS, PRESETS["current"])
    for n in range(10, 30):
        assert seed_run(system, ["conservation"], 3, examples=60, give_up=_flips_after(n)) is None
    # the same flips without the give_up check in _run_machine do raise: the loop above is the case
    orig = random_engine._run_machine
    monkeypatch.setattr(random_engine, "_run_machine", lambda m, e, d, p, give_up=None: orig(m, e, d, p, None))
    raised = 0
    for n in range(10, 30):
        try:
            seed_run(system, ["conservation"], 3, examples=60, give_up=_flips_after(n))
        except Flaky:
            raised += 1
    assert raised > 0
