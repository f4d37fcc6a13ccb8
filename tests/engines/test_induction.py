"""The k-induction engine (checker/engines/induction.py): proofs with unbounded parameters, counterexamples
to induction, and lemmas that make a property provable.

Planted here (beside the test, never registered for real runs): the property `output_bounded`
("no request has more output tokens than max_new_tokens") is true but not inductive on its own: a
running request with output_len == max_new_tokens satisfies it and one decode step breaks it. The
lemma `unfinished_below_max` ("a request that has not finished has output_len < max_new_tokens")
rules that state out; with it, the pair is 1-inductive.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import model.system  # noqa: F401
from checker.engines.induction import KInduction, check_config, write_ctis
from checker.engines.results import Report
from checker.verdict import Verdict
from model.designs import PRESETS
from model.state import FINISHED, State
from model.system import System
from model.transition import Ctx
from specs import lemmas as lemmas_mod
from specs import properties as props_mod
from specs.configs import CONFIGS

from tests.engines.planted_solver import unknown_through


def _output_bounded(x: Ctx, s: State) -> Any:
    return x.and_(*[s.output_len[r] <= x.p.max_new_tokens[r] for r in range(x.cfg.num_reqs)])


def _unfinished_below_max(x: Ctx, s: State) -> Any:
    return x.and_(*[x.implies(s.status[r] != FINISHED, s.output_len[r] < x.p.max_new_tokens[r])
                    for r in range(x.cfg.num_reqs)])


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(props_mod.PROPERTIES, "output_bounded", props_mod.Property(
        "output_bounded", "planted: no request has more output tokens than max_new_tokens", _output_bounded,
        lambda x, s: s.status[0] == FINISHED, "request 0 finished"))
    monkeypatch.setitem(lemmas_mod.LEMMAS, "unfinished_below_max", lemmas_mod.Lemma(
        "unfinished_below_max", "planted: an unfinished request has output_len < max_new_tokens", _unfinished_below_max))


def test_planted_property_needs_its_lemma(planted: None) -> None:
    sysm = System(CONFIGS["small"], PRESETS["current"])
    without = KInduction(sysm, ["output_bounded"], lemmas=[]).step_case(1)
    assert not without.closed and not without.unknown
    assert without.failed == ["output_bounded"]
    # the CTI: a state where the property holds and one iteration later it does not
    cti = without.cti
    assert cti is not None and cti.depth == 1
    before, after = cti.states
    p = cti.params
    assert all(before.output_len[r] <= p.max_new_tokens[r] for r in range(2))
    assert any(after.output_len[r] > p.max_new_tokens[r] for r in range(2))
    # the missing lemma is false in that state
    assert any(before.status[r] != FINISHED and before.output_len[r] >= p.max_new_tokens[r] for r in range(2))
    with_lemma = KInduction(sysm, ["output_bounded"], lemmas=["unfinished_below_max"]).step_case(1)
    assert with_lemma.closed, with_lemma.failed


def test_engine_proves_with_lemma_and_writes_cti_without(planted: None, tmp_path: Any) -> None:
    cfg = CONFIGS["small"]
    design = PRESETS["current"]
    rep = check_config(design, cfg, ["output_bounded"], 2, lemmas=["unfinished_below_max"])
    r = rep.results["output_bounded"]
    assert r.verdict is Verdict.PROVED and r.depth == 1, r.words()
    assert r.meta["lemmas"] == ["unfinished_below_max"]

    rep = check_config(design, cfg, ["output_bounded"], 2, lemmas=[])
    r = rep.results["output_bounded"]
    assert r.verdict is Verdict.HOLDS_TO_DEPTH, r.words()  # base case holds; the step case does not close
    assert [a["k"] for a in rep.proof["attempts"]] == [1, 2]
    assert "induction did not close" in r.reason
    written = write_ctis(Report(design, [rep], 2, 0.0), tmp_path)
    path = written[("small", "output_bounded")]
    assert path.endswith("output_bounded.cti.itf.json")
    data = json.loads(open(path).read())
    assert data["#meta"]["verdict"] == "counterexample to induction"
    assert data["#meta"]["failing_after_step"] == ["output_bounded"]
    assert len(data["states"]) == data["#meta"]["k"] + 1


def test_a_lemma_false_in_the_base_case_is_not_assumed(monkeypatch: pytest.MonkeyPatch, planted: None) -> None:
    # a false "lemma" (no request ever finishes) would make anything provable if it were assumed
    monkeypatch.setitem(lemmas_mod.LEMMAS, "never_finishes", lemmas_mod.Lemma(
        "never_finishes", "planted false lemma", lambda x, s: x.and_(*[s.status[r] != FINISHED for r in range(x.cfg.num_reqs)])))
    rep = check_config(PRESETS["current"], CONFIGS["small"], ["output_bounded"], 2, lemmas=["never_finishes"])
    assert rep.results["output_bounded"].verdict is not Verdict.PROVED
    assert all("never_finishes" in a["lemmas_failed_base"] for a in rep.proof["attempts"])


def test_cli_induction_proves_conservation_and_no_prefill_oom(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from checker.cli import main

    rc = main(["check", "--engine", "induction", "--design", "current", "--config", "sessions", "--property", "conservation",
               "--property", "no_prefill_oom", "--depth", "2", "--json", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    (cfg,) = data["configs"]
    verdicts = {r["property"]: (r["verdict"], r["depth"]) for r in cfg["results"]}
    assert verdicts == {"conservation": ("proved", 1), "no_prefill_oom": ("proved", 1)}
    assert cfg["proof"]["engine"] == "induction" and cfg["proof"]["closed"] is True


@pytest.fixture
def encode_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`KInduction._encode` unrolls the model once per (KInduction, k, facts) in this test: every later
    call gets a new z3 solver over the same terms (the encoding is a pure function of those three; z3
    gives the same terms the same ASTs), so a case query's `_fresh` solver has still answered no other
    case, which is what renewing it is for. Only the Python unrolling (0.7 s on `small`) is not
    repeated: the split tests below renew after every planted unknown and for every leaf, 30 times a
    Houdini run (three quarters of their time). The renewal itself is pinned by
    test_a_case_query_renews_its_solver_for_leaves_and_after_many_queries, without this fixture.
    Installed before the tests' own `_encode` wrappers (and `unknown_through`), which wrap it."""
    import z3

    real = KInduction._encode
    memo: dict[tuple[int, int, tuple[str, ...]], tuple[Any, ...]] = {}

    def encode(self: KInduction, k: int, facts: tuple[str, ...] = ()) -> Any:
        key = (id(self), k, tuple(facts))
        if key not in memo:  # `self` kept in the entry: its id is not reused within the test
            solver, params, states, goals, acts = real(self, k, facts)
            memo[key] = (self, solver.assertions(), params, states, goals, acts, self.checkpoints, self.ghosts)
        _self, assertions, params, states, goals, acts, self.checkpoints, self.ghosts = memo[key]
        solver = z3.Solver()
        if self.timeout_ms:  # as `_encode` sets it
            solver.set("timeout", self.timeout_ms)
        solver.add(*assertions)
        return solver, params, states, goals, acts

    monkeypatch.setattr(KInduction, "_encode", encode)


# On `small` with the planted unfinished_keeps_protected_len, the lemmas Houdini keeps with all of
# them as candidates (it drops request_lengths, pools_nonnegative, private_chains): the same
# inductive set, without the one-by-one rounds that dropped those three (case splits for every
# candidate, minutes on a loaded machine), for the tests of the one-by-one and split paths
KEPT_LEMMAS = ["typing", "counters_exact", "tree_shape", "session_slots", "chunked_fits", "swa_locks", "load_backs",
               "request_rows", "warm_prefix"]
MUTANT_PROPS = ["conservation", "no_prefill_oom", "no_decode_oom"]


def _mutant_system() -> System:
    return System(CONFIGS["small"], PRESETS["current"].with_mutants(frozenset({"unfinished_keeps_protected_len"})))


@pytest.fixture(scope="module")
def joint_answer() -> Any:
    """Houdini's joint-mode answer on `small` with the planted bug (no JOINT_AFTER_MS cap, which on
    a loaded machine sent this reference run one candidate at a time too): the reference the two
    split tests below compare with, computed once (no planted solver, nothing patched)."""
    joint = KInduction(_mutant_system(), MUTANT_PROPS, lemmas=KEPT_LEMMAS).houdini(1, split_on_unknown=False)
    assert joint.unknown == "" and "conservation" in joint.dropped and "conservation" not in joint.proved \
        and "no_prefill_oom" in joint.proved, joint
    return joint


def test_houdini_splits_an_unknown_joint_query_per_candidate(monkeypatch: pytest.MonkeyPatch, encode_once: None,
                                                            joint_answer: Any) -> None:
    """When the joint step query is unknown, Houdini asks each candidate alone: on `small` it then
    proves what the joint query proves, and drops what fails (here: a planted bug makes
    `conservation` fail the step), with the same answer as the joint mode."""
    import z3

    system = _mutant_system()
    props = MUTANT_PROPS
    lemmas = KEPT_LEMMAS
    joint = joint_answer  # the joint mode's answer

    real_encode = KInduction._encode
    calls = {"n": 0}

    def encode_first_unknown(self: KInduction, k: int, *facts: Any) -> Any:
        out = real_encode(self, k, *facts)
        calls["n"] += 1
        if calls["n"] == 1:  # the joint query's solver answers unknown
            solver = out[0]

            class Unknown:
                def __getattr__(self, name: str) -> Any:
                    return getattr(solver, name)

                def check(self, *a: Any) -> Any:
                    return z3.unknown

                def reason_unknown(self) -> str:
                    return "planted unknown"

            return (Unknown(),) + tuple(out[1:])
        return out

    monkeypatch.setattr(KInduction, "_encode", encode_first_unknown)
    split = KInduction(system, props, lemmas=lemmas).houdini(1)
    assert calls["n"] > 2, "the per-candidate queries did not run"
    assert sorted(split.proved) == sorted(joint.proved), (split, joint)
    assert "conservation" in split.dropped and "conservation" in split.ctis
    assert split.unknown == ""
    calls["n"] = 0  # without the split, an unknown joint query proves nothing
    none = KInduction(system, props, lemmas=lemmas).houdini(1, split_on_unknown=False)
    assert none.proved == [] and none.unknown == "planted unknown", none


@pytest.mark.parametrize("split", [True, False])
def test_the_joint_query_is_capped_when_candidates_can_be_split(split: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The query with every candidate at once gets at most `JOINT_AFTER_MS` when Houdini may go on
    one candidate at a time with case splits (a long `--timeout` spent on a joint query that z3
    cannot answer left a core idle); without splits it gets the whole `timeout_ms`."""
    from checker.engines import induction

    limits: list[int] = []
    real_encode = KInduction._encode

    def recording(self: KInduction, k: int, *facts: Any) -> Any:
        out = real_encode(self, k, *facts)
        solver = out[0]

        class Recording:
            def __getattr__(self, name: str) -> Any:
                return getattr(solver, name)

            def set(self, key: str, value: Any) -> None:
                if key == "timeout":
                    limits.append(value)
                solver.set(key, value)

        limits.append(self.timeout_ms)  # what _encode gave it
        return (Recording(),) + tuple(out[1:])

    monkeypatch.setattr(KInduction, "_encode", recording)
    system = System(CONFIGS["small"], PRESETS["current"])
    h = KInduction(system, ["no_prefill_oom"], timeout_ms=10 * induction.JOINT_AFTER_MS).houdini(1, split_on_unknown=split)
    assert h.proved == ["no_prefill_oom"], h
    # limits[0] is what _encode gave the joint query's solver; with splits it is capped at once. On a
    # loaded machine the capped joint query may give up, and the per-candidate queries that follow get
    # the whole timeout again (their limits come after these two)
    if split:
        assert limits[:2] == [10 * induction.JOINT_AFTER_MS, induction.JOINT_AFTER_MS], limits
    else:
        assert limits == [10 * induction.JOINT_AFTER_MS], limits


def test_case_splits_cover_every_state() -> None:
    """Each split's cases are exhaustive (their disjunction is valid), which is what makes an unsat
    answer in every case an unsat answer for the whole query."""
    import z3

    from checker.engines.induction import case_splits

    system = System(CONFIGS["hybrid_swa"], PRESETS["current"])
    solver, _params, states, goals, _acts = KInduction(system, ["conservation"])._encode(1)
    dims = case_splits(system, states, goals["conservation"])
    assert [n for n, _ in dims] == ["goal conjunct", "request statuses before the step", "batch the step ran",
                                    "request statuses after the step", "batch before the step"]
    paged = System(CONFIGS["paged"], PRESETS["current"])
    _s, _p, pstates, pgoals, _a = KInduction(paged, ["conservation"])._encode(1)
    pdims = case_splits(paged, pstates, pgoals["conservation"])
    assert [(n, len(c)) for n, c in pdims[-3:]] == [("batch before the step x page-aligned kv_committed_len", 4 * 4),
                                                    ("page-aligned kv_committed_len after the step", 4),
                                                    ("requests holding a tree lock before the step", 4)]
    hic = System(CONFIGS["hybrid_swa_hicache"], PRESETS["current"])
    _s, _p, hstates, hgoals, _a = KInduction(hic, ["conservation"])._encode(1)
    hdims = case_splits(hic, hstates, hgoals["conservation"])
    assert [(n, len(c)) for n, c in hdims[-2:]] == [("warm-prefix atoms on the device before the step", 2 ** 3),
                                                    ("whether the step took a node off the device", 2)]
    for _n, pcases in pdims[-3:] + hdims[-2:]:
        s = z3.Solver()
        s.add(z3.Not(z3.Or(*pcases)))
        assert s.check() == z3.unsat
    for name, cases in dims:
        s = z3.Solver()
        s.add(z3.Not(z3.Or(*cases)))
        if name == "goal conjunct":  # the conjuncts' negations cover the goal's negation
            s.add(z3.Not(goals["conservation"]))
        assert s.check() == z3.unsat, name
    # a lemma's goal is guarded (it holds at an OOM state): its conjuncts are split all the same
    lemma_goal = goals["lemma:pools_nonnegative"]
    (name, cases), *_ = case_splits(system, states, lemma_goal)
    assert name == "goal conjunct" and len(cases) == 3  # full, SWA and slot pools non-negative (page 1: aligned)
    s = z3.Solver()
    s.add(z3.Not(z3.Or(*cases)), z3.Not(lemma_goal))
    assert s.check() == z3.unsat
    # and a split that left a case out would not be: the last case ("none of these") matters
    _name, statuses = dims[1]
    s = z3.Solver()
    s.add(z3.Not(z3.Or(*statuses[:-1])))
    assert s.check() == z3.sat


# two workers only: the sequential case loop is what test_a_level_z3_always_gives_up_on_is_split_without_asking[1]
# runs (and one worker cost CI minutes more for the same code path)
@pytest.mark.parametrize("workers", [2])
def test_an_unknown_step_query_is_settled_case_by_case(workers: int, monkeypatch: pytest.MonkeyPatch, encode_once: None,
                                                       joint_answer: Any) -> None:
    """A per-candidate query the solver cannot answer whole is split into cases: with every whole
    query made unknown, Houdini on `small` still proves what it proves without splitting and still
    finds the planted bug's counterexample to induction, now in one of the cases; the same when
    the cases are asked by two forked processes."""
    system = _mutant_system()
    props = MUTANT_PROPS
    plain = joint_answer  # the joint mode's answer

    unknown_through(monkeypatch, 0)  # every whole query unknown, every case answered
    parallel = {"n": 0}
    real_parallel = KInduction._settle_parallel

    def counted(self: KInduction, *a: Any) -> Any:
        parallel["n"] += 1
        return real_parallel(self, *a)

    monkeypatch.setattr(KInduction, "_settle_parallel", counted)
    split = KInduction(system, props, KEPT_LEMMAS, workers=workers).houdini(1)
    assert (parallel["n"] > 0) == (workers > 1), parallel
    assert split.split_cases >= len(props), split
    assert sorted(split.proved) == sorted(plain.proved), (split, plain)
    assert "conservation" in split.dropped and "conservation" in split.ctis, split
    tr, failing = split.ctis["conservation"]
    assert "conservation" in failing and len(tr.states) == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_a_level_z3_always_gives_up_on_is_split_without_asking(workers: int, monkeypatch: pytest.MonkeyPatch,
                                                               encode_once: None) -> None:
    """Once SKIP_AFTER cases of a split level have come back unknown (SKIP_UNKNOWN of them), the
    rest of that level is split at once: fewer queries, the same proof."""
    from checker.engines import induction

    unknown_through(monkeypatch, 1)  # the whole query and every first-level case unknown
    # without its first-break split: its cases' local queries run on solvers of their own
    monkeypatch.setitem(props_mod.PROPERTIES, "no_decode_oom", dataclasses.replace(props_mod.PROPERTIES["no_decode_oom"], conjuncts=None))
    system = System(CONFIGS["small"], PRESETS["current"])
    skip_after = induction.SKIP_AFTER
    skipping = KInduction(system, ["no_decode_oom"], [], workers=workers).houdini(1)
    monkeypatch.setattr(induction, "SKIP_AFTER", 10**6)
    asking = KInduction(system, ["no_decode_oom"], [], workers=workers).houdini(1)
    assert skipping.proved == asking.proved == ["no_decode_oom"], (skipping, asking)
    assert asking.skipped == 0, asking
    # the first level has 26 status cases: SKIP_AFTER of them answered, the rest split unasked
    # (less the cases the other workers had started before the SKIP_AFTER-th answer came back)
    assert skipping.skipped == 26 - skip_after - (workers - 1), skipping
    assert asking.queries - skipping.queries == skipping.skipped, (skipping, asking)


def test_a_case_query_renews_its_solver_for_leaves_and_after_many_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    """z3 slows down on a solver that has answered many other cases, so a case at the last split
    (the one given the full time limit) is asked on a freshly encoded solver, and so is any case
    after `RENEW_AFTER` queries on one solver; the answers are the same either way."""
    from checker.engines import induction
    from checker.engines.induction import _CaseQuery

    system = System(CONFIGS["small"], PRESETS["current"])
    q = _CaseQuery(KInduction(system, ["conservation"]), 1, ["conservation"], "conservation")
    first = q.solver
    inner = (0,) * (len(q.dims) - 1)  # a case above the last split
    assert str(q.ask(inner)[0]) == "unsat" and q.solver is first  # a new solver answers here
    assert str(q.ask(inner)[0]) == "unsat" and q.solver is first  # and keeps answering
    leaf = (0,) * len(q.dims)
    assert str(q.ask(leaf)[0]) == "unsat"
    assert q.solver is not first  # the leaf was not asked on the used solver
    monkeypatch.setattr(induction, "RENEW_AFTER", 2)
    second = q.solver
    q.ask(inner)
    assert q.solver is second
    q.ask(inner)
    assert q.solver is not second  # two queries on it: encoded again


def test_cli_without_lemma_narrows_what_the_proof_may_assume(planted: None, tmp_path: Any,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`--without-lemma` takes lemmas out of the inductive set: the planted property is proved with
    the lemmas that imply it and not without them; unknown names and other engines are usage errors.
    Depth 1: the 1-induction attempt is the one the lemmas decide (at depth 2 each run without them
    also tried k=2, which fails as well, and cost half of this test)."""
    from checker.cli import main

    def verdict(*extra: str) -> tuple[int, dict[str, Any]]:
        rc = main(["check", "--engine", "induction", "--config", "small", "--property", "output_bounded", "--depth", "1",
                   "--json", "--out", str(tmp_path), *extra])
        out, err = capsys.readouterr()
        assert rc in (0, 3), err
        (cfg,) = json.loads(out)["configs"]
        return rc, cfg

    rc, cfg = verdict()
    assert [r["verdict"] for r in cfg["results"]] == ["proved"]
    # request_lengths also says an unfinished request has output_len < max_new_tokens
    rc, cfg = verdict("--without-lemma", "unfinished_below_max", "--without-lemma", "request_lengths")
    assert [r["verdict"] for r in cfg["results"]] == ["holds to depth"]
    assert all("request_lengths" not in a["lemmas"] and "unfinished_below_max" not in a["lemmas"]
               for a in cfg["proof"]["attempts"]), cfg["proof"]
    # the parallel paths (`--jobs`, `kvmc review`) leave the same lemmas out
    rc = main(["check", "--engine", "induction", "--config", "small", "--property", "output_bounded", "--depth", "1",
               "--json", "--out", str(tmp_path), "--jobs", "1",
               "--without-lemma", "unfinished_below_max", "--without-lemma", "request_lengths"])
    out, err = capsys.readouterr()
    (job,) = json.loads(out)["checks"]
    assert rc == 0 and job["results"]["output_bounded"]["verdict"] == "holds to depth", (out, err)
    rc = main(["review", "--base", "current", "--head", "current", "--engine", "induction", "--config", "small",
               "--property", "output_bounded", "--depth", "1", "--format", "json", "--jobs", "1", "--out", str(tmp_path),
               "--without-lemma", "unfinished_below_max", "--without-lemma", "request_lengths"])
    out, err = capsys.readouterr()
    (row,) = json.loads(out)["properties"]
    assert (row["base"]["verdict"], row["head"]["verdict"]) == ("holds to depth", "holds to depth"), (out, err)
    for cmd, argv in (("check", ["--without-lemma", "no_such_lemma"]),
                      ("check", ["--without-lemma", "typing", "--engine", "explicit"]),
                      ("check", ["--without-lemma", "no_such_lemma", "--jobs", "2"]),
                      ("review", ["--without-lemma", "no_such_lemma"])):
        rc = main([cmd, "--config", "small", "--depth", "1", *argv])
        _out, err = capsys.readouterr()
        assert rc == 2 and len(err.strip().splitlines()) == 1 and ("no_such_lemma" in err or "explicit" in err), (argv, err)


def test_a_lemma_holds_trivially_after_an_allocation_failure() -> None:
    """No step leaves an OOM state, so a lemma is not asked of one (as a goal that would make the
    solver prove `no_prefill_oom` inside every lemma's step); before it, its body must hold."""
    from model.ops import Concrete, Symbolic
    from model.state import OOM_NONE, OOM_PREFILL
    import z3

    system = System(CONFIGS["small"], PRESETS["current"])
    lm = lemmas_mod.LEMMAS["pools_nonnegative"]
    from model.config import concrete_params

    x = system.ctx(Concrete(), concrete_params(system.cfg))
    bad = system.init(x).set(full_available=-1)
    assert lm.body(x, bad) is False and lm.holds(x, bad) is False
    assert lm.holds(x, bad.set(oom=OOM_PREFILL)) is True and lm.body(x, bad.set(oom=OOM_PREFILL)) is False
    # the same in the symbolic interpretation: valid exactly when the body is, or the state is an OOM
    from checker.engines.induction import free_state, unbounded_params

    params, cons = unbounded_params(system)
    s = free_state(system, params, "t")
    xs = system.ctx(Symbolic(0), params)
    solver = z3.Solver()
    solver.add(*cons, z3.Not(z3.Implies(s.oom == OOM_NONE, lm.holds(xs, s) == lm.body(xs, s))))
    assert solver.check() == z3.unsat


def test_a_case_worker_that_dies_is_an_error_not_a_hang(monkeypatch: pytest.MonkeyPatch, encode_once: None) -> None:
    """A case worker killed while asking takes its case with it; the parent says so (RuntimeError)
    instead of waiting for an answer that never comes, and proves nothing."""
    import os

    from checker.engines import induction

    unknown_through(monkeypatch, 0)  # the whole query unknown: its cases go to the workers

    parent = os.getpid()
    real_ask = induction._CaseQuery.ask

    def ask(self: Any, path: Any) -> Any:
        if os.getpid() != parent:  # in a forked case worker
            os._exit(3)
        return real_ask(self, path)

    monkeypatch.setattr(induction._CaseQuery, "ask", ask)
    system = System(CONFIGS["small"], PRESETS["current"])
    with pytest.raises(RuntimeError, match="case worker died"):
        KInduction(system, ["no_decode_oom"], [], workers=2).houdini(1)
