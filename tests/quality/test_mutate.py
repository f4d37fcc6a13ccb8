"""`kvmc mutate` (checker/mutation/): generated mutants of the model are killed by kvmc's own
engines, proved equivalent, or explained; nothing is written to model/.

The CI run: two transitions, `alloc` (model/allocator.py) and `evict_from_tree_cache`
(model/radix_cache.py), on the `small` config, a fixed seed, the `drop` and `negate` operators, a
small budget. Dropping `full_available -= tokens` from `alloc` must be killed (the ledger breaks at
the first extend); negating `if x.cfg.hybrid_swa` in `evict_from_tree_cache`'s SWA shortfall
changes nothing on a config without an SWA pool and must come out `equivalent`; the lines only
hybrid configs run are `unreached` on `small`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker.engines.explicit import Explorer
from checker.mutation.mutate import select, summary
from checker.mutation.operators import OPERATORS, compile_mutant, design_for, find, generate, parse_id
from checker.verdict import Verdict
from model.system import System
from model.transition import REGISTRY
from specs.configs import CONFIGS

ROOT = Path(__file__).resolve().parents[2]


def _model_digest() -> str:
    h = hashlib.sha256()
    for p in sorted((ROOT / "model").rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_every_transition_has_mutants_and_each_compiles_without_touching_a_file() -> None:
    before = _model_digest()
    ms = generate()
    assert {m.op for m in ms} == set(OPERATORS), "every operator should apply somewhere in the model"
    assert len({m.id for m in ms}) == len(ms), "mutant ids are unique"
    with_mutants = {m.transition for m in ms}
    assert len(with_mutants) >= 0.8 * len(REGISTRY), sorted(set(REGISTRY) - with_mutants)
    for m in ms[::25]:  # a spread of them: each compiles to the transition's signature, with a design of its own
        fn = compile_mutant(m)
        orig = REGISTRY[m.transition].fn
        assert inspect.signature(fn) == inspect.signature(orig), m.id
        assert fn is not orig and fn.__code__.co_filename == orig.__code__.co_filename
        d = design_for(m)
        assert d.overrides[m.transition] is not None and m.id in d.name
        assert parse_id(m.id) == m
    assert _model_digest() == before, "generating and compiling mutants must not write to model/"


def test_find_names_a_mutant_by_what_it_rewrites_not_by_its_line() -> None:
    """The id's line moves with every edit above it; (transition, operator, source) does not."""
    m = find("alloc_for_extend", "cmp", "ps == 1")
    assert m.after == "ps != 1" and parse_id(m.id) == m
    two = [g for g in generate(transition="spec_v2_decode_step", ops=("minmax",)) if g.before.startswith("x.min(D,")]
    assert [find(g.transition, g.op, g.before, g.after) for g in two] == two
    with pytest.raises(KeyError, match=r"0 cmp mutants of alloc_for_extend rewrite 'ps == 2'.*ps == 1 -> ps != 1"):
        find("alloc_for_extend", "cmp", "ps == 2")


def test_a_seeded_sample_is_the_same_every_time() -> None:
    a = [m.id for m in select(None, 5, 20)]
    b = [m.id for m in select(None, 5, 20)]
    c = [m.id for m in select(None, 6, 20)]
    assert a == b and len(a) == 20 and a != c
    per = select(None, 1, None, per_module=2)
    sizes: dict[str, int] = {}
    for m in generate():
        sizes[m.module] = sizes.get(m.module, 0) + 1
    got: dict[str, int] = {}
    for m in per:
        got[m.module] = got.get(m.module, 0) + 1
    assert got == {mod: min(2, n) for mod, n in sizes.items()}


def _run(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "checker.cli", "mutate", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_bad_input_is_one_line_and_exit_2() -> None:
    for args, what in ((["--module", "nope"], "unknown module 'nope'"), (["--config", "nope"], "unknown config 'nope'"),
                       (["--operator", "nope"], "unknown operator 'nope'"), (["--budget", "0"], "--budget=0.0"),
                       (["--mutant", "alloc@1:drop:9"], "unknown mutant"),
                       (["--conform", "9.9.9"], "--conform 9.9.9: unknown SGLang release '9.9.9'"),
                       (["--conform", "0.5.13", "--conform-examples", "0"], "--conform-examples=0"),
                       (["--design", "v9"], "unknown design 'v9'")):
        p = _run(*args, timeout=300)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and what in lines[0], (args, p.stderr)


def test_ci_run_kills_a_mutant_and_proves_one_equivalent(tmp_path: Path) -> None:
    save = tmp_path / "mutation.json"
    p = _run("--transition", "alloc", "--transition", "evict_from_tree_cache", "--config", "small",
             "--operator", "drop", "--operator", "negate", "--seed", "0", "--budget", "6", "--divergence-time", "10", "--json", "--no-progress", "--save", str(save))
    assert p.returncode == 0, p.stderr[-2000:]
    data = json.loads(p.stdout)
    assert json.loads(save.read_text())["outcomes"] == data["outcomes"]
    out = {o["mutant"]["id"]: o for o in data["outcomes"]}
    statuses = {o["status"] for o in out.values()}
    assert statuses <= {"killed", "survived", "equivalent", "unreached", "invalid"}, statuses
    alloc_drop = [o for o in out.values() if o["mutant"]["transition"] == "alloc" and "full_available" in o["mutant"]["before"]]
    assert alloc_drop and alloc_drop[0]["status"] == "killed", alloc_drop
    kill = alloc_drop[0]["kill"]
    assert kill["config"] == "small" and kill["how"] == "violated" and kill["depth"] >= 1 and kill["property"]
    swa_guard = [o for o in out.values() if o["mutant"]["transition"] == "evict_from_tree_cache" and o["mutant"]["op"] == "negate"
                 and "if x.cfg.hybrid_swa else 0" in o["mutant"]["before"]]
    assert swa_guard and swa_guard[0]["status"] == "equivalent" and swa_guard[0]["evidence"], swa_guard
    unreached = [o for o in out.values() if o["status"] == "unreached"]
    assert unreached and all(o["configs"] == [] for o in unreached)  # the SWA and HiCache lines
    for o in out.values():
        if o["status"] == "survived":
            assert o["gap"] in ("restriction", "property gap", "search gap", "unclassified") and o["evidence"], o
    rows = {r["group"]: r for r in data["by_module"]}
    assert set(rows) == {"allocator", "radix_cache"}, rows
    for group, row in rows.items():
        assert row["killed"] == sum(o["status"] == "killed" for o in out.values() if o["module"] == group), row


def test_summary_counts_and_rate() -> None:
    from checker.mutation.mutate import Outcome

    ms = generate("session")[:4]
    os_ = [Outcome(ms[0], ["sessions"], "killed", 1.0), Outcome(ms[1], ["sessions"], "survived"),
           Outcome(ms[2], ["sessions"], "equivalent"), Outcome(ms[3], [], "unreached")]
    (row,) = summary(os_, lambda o: o.module)
    assert (row["killed"], row["survived"], row["equivalent"], row["unreached"]) == (1, 1, 1, 1)
    assert row["kill_rate"] == pytest.approx(0.5)


def test_an_interrupted_run_saves_what_it_settled_marked_partial(tmp_path: Path) -> None:
    """Ctrl-C after the first mutant: --save and --markdown still get that mutant, marked partial
    (a long measurement stopped at a deadline keeps what it measured); exit 130."""
    import signal

    save, md = tmp_path / "m.json", tmp_path / "m.md"
    p = subprocess.Popen([sys.executable, "-m", "checker.cli", "mutate", "--module", "allocator", "--config", "small",
                          "--operator", "drop", "--budget", "120", "--save", str(save), "--markdown", str(md)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stderr is not None
        for line in p.stderr:  # progress lines; the first settled mutant says "[1/N]"
            if line.startswith("[1/"):
                break
        else:
            pytest.fail("the run ended before settling a mutant")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    data = json.loads(save.read_text())
    assert data["partial"] and "interrupted by SIGINT" in data["partial"]
    settled = [o for o in data["outcomes"] if o["status"] != "unreached"]
    assert settled and all(o["status"] in ("killed", "survived", "equivalent", "invalid") for o in settled)
    assert md.read_text().startswith("**Partial: interrupted by SIGINT")
    assert "kill rate" in out


def test_drop_spares_the_first_binding_of_a_name_in_a_loop_body() -> None:
    """Dropping `y = g(a)`, the body's first binding of `y`, leaves `y` unbound in the first
    iteration (a NameError: 64 such mutants were generated, each `invalid`); dropping the
    re-assignment `s = h(s, y)` of a name bound before the loop is a real mutant."""
    import ast

    from checker.mutation.operators import _bound_before, _droppable

    fn = ast.parse("def f(x, s):\n    for a in range(3):\n        y = g(a)\n        s = h(s, y)\n    return s\n").body[0]
    assert isinstance(fn, ast.FunctionDef) and isinstance(fn.body[0], ast.For)
    bound = _bound_before(fn)
    first, again = fn.body[0].body
    assert not _droppable(first, bound[id(first)])
    assert _droppable(again, bound[id(again)])


def _fake_hunt(mid: str, configs: list[str], budget_s: float, baselines: dict, preset: str = "current",  # type: ignore[no-untyped-def,type-arg]
               tell=None) -> dict:
    """A hunt whose first kill is the model's own finding (prompt_prefilled on hybrid_swa, depth 1):
    checked again without it, it is killed by conservation."""
    again = "prompt_prefilled" in baselines["hybrid_swa"].model_violates
    prop, engine = ("conservation", "explicit") if again else ("prompt_prefilled", "bmc")
    return dict(status="killed", searched=[], seconds=1.0,
                kill=dict(engine=engine, config="hybrid_swa", property=prop, how="violated", depth=1, seconds=1.0))


@pytest.mark.parametrize("before_depth,hunts", [(0, 2), (1, 1)], ids=["after_the_hunt", "before_the_hunt"])
def test_a_kill_the_model_shares_does_not_count(monkeypatch: pytest.MonkeyPatch, before_depth: int, hunts: int) -> None:
    """The model itself violates prompt_prefilled on hybrid_swa at depth 1 (docs/findings.md #1).
    Looked for before the hunt (the model's BMC to `FINDINGS_DEPTH`, real), it is known at once and
    the mutant is hunted once without it; not looked for (depth 0), a mutant's BMC kill by it is
    checked against the model after the hunt (a real BMC of the model), refused, and the mutant
    hunted again without that property there."""
    from checker.mutation import mutate as mm
    from checker.mutation import runner

    monkeypatch.setattr(runner, "baseline", lambda c, t, cache=None, design="current": runner.Baseline(c, {}, [], 0, True))
    monkeypatch.setattr(runner, "hunt", _fake_hunt)
    monkeypatch.setattr(mm, "FINDINGS_DEPTH", before_depth)
    m = next(m for m in generate("allocator") if m.transition == "alloc" and m.op == "drop")
    said: list[str] = []
    (o,) = mm.mutate([m], ["hybrid_swa"], budget_s=120, progress=said.append)
    assert o.status == "killed" and o.kill is not None and o.kill["property"] == "conservation", (o, said)
    # each hunt (in a process of its own) says "[k/n] id: ..." when it ends
    assert sum(f"] {m.id}: killed" in line for line in said) == hunts, said
    assert o.excluded == {"hybrid_swa": ["prompt_prefilled"]}
    assert any("prompt_prefilled on hybrid_swa: the model violates it at depth 1" in s for s in said), said


def test_a_finding_of_current_on_the_explicit_points_kills_nothing_and_stops_nothing() -> None:
    """`current` itself breaks `no_prefill_oom` on aligned_page1's explicit points (finding 12). That
    is SGLang's bug, not the model's: the run goes on (before session 42 it raised "fix the model"),
    says so, and no kill names that property there. Dropping the allocation's `full_available -=`
    breaks conservation at the first extend, so the mutant is still killed, by another property."""
    from checker.mutation import mutate as mm

    m = next(m for m in generate("allocator") if m.transition == "alloc" and m.op == "drop")
    said: list[str] = []
    (o,) = mm.mutate([m], ["aligned_page1"], budget_s=30, progress=said.append)
    assert any("no_prefill_oom on aligned_page1" in line and "do not count" in line for line in said), said
    assert o.status == "killed" and o.kill is not None and o.kill["property"] != "no_prefill_oom", (o, said)


def test_the_hunt_aims_at_the_point_where_the_mutant_diverges() -> None:
    """`runner.aim` (the hunt's step 2): where a mutant first behaves differently from the model on
    the explicit points, so the engines' time goes there; and where it provably does not, no
    explicit search is spent. Dropping the re-check after a retraction diverges only where the
    retraction loop runs, on `pressure` at depth 5: the explicit search of that one point, deeper
    than the even split over eleven configs reached, kills it (the model holds the property there)."""
    from checker.mutation.runner import FOCUS_DEPTH, aim, explicit_points, model_holds_at

    page = aim("hybrid_swa_page4", design_for(find("insert", "ceilfloor", "x.ceil_page(x.p.sliding_window_size)")), 120)
    assert page.diverges and not page.same and page.depth == 1 and page.point is not None, page
    # negating who gets one page of slack in the eviction amount changes no reachable state of paged
    slack = aim("paged", design_for(find("alloc_for_extend", "negate", "x.ite(batch[r], 1, 0)")), 120)
    assert slack.same and not slack.diverges, slack
    m = find("retract_decode", "drop", "s, fits = x.branch(going, lambda: check_decode_mem(x, s, kept, 'check'), "
                                       "lambda: (s, True))")
    a = aim("pressure", design_for(m), 120)
    assert a.diverges and a.depth == 5 and a.point is not None, a
    system = System(CONFIGS["pressure"], design_for(m))
    point = explicit_points(system)[a.point]
    r = Explorer(system, ["retract_only_when_short"], points=[point]).run(FOCUS_DEPTH, keep_going=False).results
    assert r["retract_only_when_short"].verdict is Verdict.VIOLATED, r["retract_only_when_short"].words()
    assert model_holds_at("pressure", point, "retract_only_when_short", r["retract_only_when_short"].depth, None)


def _point_of_model_violation(config: str, prop: str) -> dict:  # type: ignore[type-arg]
    """The parameters of the model's own counterexample to `prop` on `config` (BMC)."""
    from checker.engines.bmc import BMC
    from model.designs import PRESETS

    r = BMC(System(CONFIGS[config], PRESETS["current"]), [prop], minimize=False).run(2, stop_on_violation=True)[prop]
    assert r.verdict is Verdict.VIOLATED and r.trace is not None, r.words()
    return r.trace.params.as_dict()


def test_a_kill_past_the_models_bmc_is_confirmed_on_its_own_instance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the model's BMC cannot reach a random or BMC kill's depth (faked here: it reaches 0),
    the kill counts only if the model holds the property on the kill's own parameters to that depth
    (`runner.confirm_at`, a real explicit search of the model). A conservation kill on `small`
    is confirmed; a prompt_prefilled kill on `hybrid_swa` at the model's own counterexample is not,
    and that mutant is hunted again without it."""
    from checker.mutation import mutate as mm
    from checker.mutation import runner
    from model.config import concrete_params

    small_point = concrete_params(CONFIGS["small"]).as_dict()
    bad_point = _point_of_model_violation("hybrid_swa", "prompt_prefilled")

    def hunt(mid: str, configs: list, budget_s: float, baselines: dict, preset: str = "current",  # type: ignore[no-untyped-def,type-arg]
             tell=None) -> dict:
        if configs == ["small"]:
            k = dict(engine="random", config="small", property="conservation", how="violated", depth=2, seconds=1.0,
                     point=small_point)
        elif "prompt_prefilled" not in baselines["hybrid_swa"].model_violates:
            k = dict(engine="random", config="hybrid_swa", property="prompt_prefilled", how="violated", depth=1,
                     seconds=1.0, point=bad_point)
        else:
            k = dict(engine="explicit", config="hybrid_swa", property="conservation", how="violated", depth=1, seconds=1.0)
        return dict(status="killed", searched=[], seconds=1.0, kill=k)

    monkeypatch.setattr(runner, "baseline", lambda c, t, cache=None, design="current": runner.Baseline(c, {}, [], 0, True))
    monkeypatch.setattr(runner, "hunt", hunt)
    monkeypatch.setattr(runner, "model_check", lambda c, p, d, t, design="current", tell=None: dict(violated=None, reached=0))
    monkeypatch.setattr(mm, "FINDINGS_DEPTH", 0)
    ms = [m for m in generate("allocator") if m.transition == "alloc" and m.op == "drop"][:1]
    said: list[str] = []
    (o,) = mm.mutate(ms, ["small"], budget_s=120, progress=said.append)
    assert o.status == "killed" and o.kill and o.kill["confirmed"], (o, said)
    (o,) = mm.mutate(ms, ["hybrid_swa"], budget_s=120, progress=said.append)
    assert o.status == "killed" and o.kill and o.kill["property"] == "conservation" and o.kill["engine"] == "explicit", said
    assert any("not confirmed on its instance" in line for line in said), said


class _Explored(BaseException):
    """Raised from a hunt's `tell` as it leaves the explicit search (its random runs and BMC come
    next): what a test asserts about the explicit step is settled by then. A BaseException, so the
    hunt's own `except Exception` lets it through."""


def test_an_explicit_kill_deeper_than_the_baseline_is_checked_against_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline vouches for the preset only to the depth its explicit search reached, which on a
    loaded machine can be 0. v0.5.13 itself breaks `no_decode_oom` on `hybrid_swa_mixed` at depth 3
    of the explicit points (docs/findings.md, the mixed-chunk SWA finding): a mutant's explicit
    search that meets it there has met the preset's finding, not killed anything (session 42: seven
    such "kills" before the check). A real search of the model's own point refuses it. The hunt is
    stopped once its explicit search is over: the random runs and the BMC after it (three quarters
    of its 40 s) decide nothing asserted here."""
    from checker.mutation import runner

    m = find("swa_release_bounds", "negate", "W + ps if x.on('swa_release_page_margin') else W")
    from model.designs import PRESETS

    asked: list[tuple[str, int, object, bool]] = []  # (property, depth, point, does the model hold it there)
    real = runner.model_holds_at

    def holds_at(config: str, point: object, prop: str, depth: int, base: object, **kw: object) -> bool:
        held = real(config, point, prop, depth, base, **kw)  # type: ignore[arg-type]
        asked.append((prop, depth, point, held))
        return held

    def tell(d: dict) -> None:  # type: ignore[type-arg]
        if d.get("engine") in ("random", "bmc"):
            raise _Explored

    monkeypatch.setattr(runner, "model_holds_at", holds_at)
    shallow = runner.Baseline("hybrid_swa_mixed", {}, [], 0, False,
                              terms=runner._step_terms("hybrid_swa_mixed", PRESETS["v0.5.13"]))
    try:
        out = runner.hunt(m.id, ["hybrid_swa_mixed"], 40, {"hybrid_swa_mixed": shallow}, "v0.5.13", tell=tell)
    except _Explored:
        out = {}
    k = out.get("kill") or {}
    assert not (k.get("property") == "no_decode_oom" and k.get("engine") == "explicit"), out
    # the mutant's explicit search did meet it at depth 3, and the model's own search of that point refused it
    refused = [(d, pt) for p, d, pt, held in asked if p == "no_decode_oom" and not held]
    assert refused and refused[0][0] == 3, asked
    # the same violation is the preset's own, on the point the mutant's search reported
    system = System(CONFIGS["hybrid_swa_mixed"], PRESETS["v0.5.13"])
    r = Explorer(system, ["no_decode_oom"], points=[refused[0][1]]).run(3, keep_going=False).results["no_decode_oom"]
    assert r.verdict is Verdict.VIOLATED and r.depth == 3, r.words()


def test_the_baseline_cache_reuses_the_models_own_runs_only_for_the_same_sources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--baseline-cache DIR`: the model's explicit baseline is read back as it was written, and an
    edit to the sources it depends on (a new digest) makes the run search again."""
    from checker.engines import explicit
    from checker.mutation import baseline_cache, runner

    cache = baseline_cache.BaselineCache(tmp_path / "cache")
    first = runner.baseline("small", 60, cache)
    assert len(list((tmp_path / "cache").glob("baseline-small-*.json"))) == 1

    def no_search(*a: object, **k: object) -> None:
        raise AssertionError("the baseline searched again although the cache holds it")

    monkeypatch.setattr(explicit.Explorer, "run", no_search)
    again = runner.baseline("small", 60, cache)
    assert (again.witness, again.violated, again.depth, again.exhausted) == \
           (first.witness, first.violated, first.depth, first.exhausted)
    assert again.terms is not None  # rebuilt, not cached: z3 terms are not data
    assert cache.get("baseline", "small", 30, runner.EXPLICIT_DEPTH) is None  # other arguments, other entry
    monkeypatch.setattr(baseline_cache, "source_digest", lambda: "an edited model")
    with pytest.raises(AssertionError, match="searched again"):
        runner.baseline("small", 60, cache)


def test_a_rerun_with_the_baseline_cache_skips_the_models_runs(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    mid = find("alloc", "drop", "s = s.set(full_available=s.full_available - tokens)").id
    args = ("--mutant", mid, "--config", "small", "--budget", "60", "--baseline-cache", str(cache))
    one, two = _run(*args, "--save", str(tmp_path / "1.json")), _run(*args, "--save", str(tmp_path / "2.json"))
    assert one.returncode == 0 and two.returncode == 0, (one.stderr[-1500:], two.stderr[-1500:])
    assert "from the baseline cache" not in one.stderr and "(1 from the baseline cache)" in two.stderr, two.stderr
    o1, o2 = (json.loads((tmp_path / f"{i}.json").read_text())["outcomes"] for i in (1, 2))
    assert [(o["status"], (o["kill"] or {}).get("property")) for o in o1] == \
           [(o["status"], (o["kill"] or {}).get("property")) for o in o2]
    afile = tmp_path / "a-file"
    afile.write_text("")
    p = _run("--mutant", mid, "--baseline-cache", str(afile))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "is a file" in lines[0], p.stderr


def test_a_mutant_of_a_check_only_the_properties_read_is_covered_not_equivalent_and_killed(tmp_path: Path) -> None:
    """SGLang's idle check is a read-only transition that no step calls: `idle_check_sound` reads
    it. Its mutant (the row equation `==` -> `!=`) changes no successor, so a comparison of steps
    alone would call it equivalent (and the coverage of the step alone, unreached). The line is
    covered through the properties, z3 finds the properties' reads differ, the divergence is the
    reachable state they read differently, and the hunt kills it."""
    from checker.mutation import equivalence
    from checker.mutation.coverage import configs_running
    from checker.mutation.diff import divergence
    from model.designs import PRESETS

    m = find("self_check_during_idle", "cmp", "s.req_pool_available + n_held == x.p.req_pool_size")
    assert configs_running(m.file, m.line, ["small", "sessions"]) == ["small", "sessions"]
    e = equivalence.check("sessions", design_for(m), PRESETS["current"], 30_000)
    assert e.verdict == "differs" and any(f.startswith("idle_check_") for f in e.fields), e
    d = divergence("sessions", PRESETS["current"], design_for(m), 30)
    assert d["found"] and "reads this reachable state differently" in d["note"], d
    assert "idle_check_sound.holds" in d["fields"], d
    p = _run("--mutant", m.id, "--config", "sessions", "--budget", "60", "--divergence-time", "10", "--json",
             "--no-progress")
    assert p.returncode == 0, p.stderr[-2000:]
    (o,) = json.loads(p.stdout)["outcomes"]
    assert o["status"] == "killed" and o["kill"]["property"].startswith("idle_check_"), o


def test_a_line_only_an_older_release_runs_is_unreached_on_current_and_checked_under_its_preset(tmp_path: Path) -> None:
    """`restore_to_req`'s pre-#22862 rewind (`min(C, |key| - 1)`) runs only under v0.5.10.post1:
    under `current` its mutant is unreached and the report names the preset that runs it; with
    `--design v0.5.10.post1` it is hunted there, and the properties that release itself violates on
    `sessions` (its findings) kill nothing."""
    from checker.mutation.coverage import configs_running

    m = find("restore_to_req", "minmax", "x.min(C, x.clamp0(key_len - 1))")
    assert configs_running(m.file, m.line, ["sessions"]) == []
    assert configs_running(m.file, m.line, ["sessions"], "v0.5.10.post1") == ["sessions"]
    p = _run("--mutant", m.id, "--config", "sessions", "--budget", "6", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr[-2000:]
    (o,) = json.loads(p.stdout)["outcomes"]
    assert o["status"] == "unreached" and "--design v0.5.10.post1" in o["evidence"], o
    p = _run("--mutant", m.id, "--config", "sessions", "--design", "v0.5.10.post1", "--budget", "6",
             "--divergence-time", "5", "--equiv-timeout", "5", "--json", "--no-progress")
    assert p.returncode == 0, p.stderr[-2000:]
    data = json.loads(p.stdout)
    (o,) = data["outcomes"]
    assert data["design"] == "v0.5.10.post1" and o["configs"] == ["sessions"], o
    assert o["status"] in ("killed", "survived"), o
    # the release's own findings on sessions (#22862: the busy check) are no mutant's kill: the run
    # found them (its explicit baseline stops at the first, at depth 1) and left them out
    assert "busy_check_sound" in (o["excluded"] or {}).get("sessions", []), o
    assert o["status"] != "killed" or not o["kill"]["property"].startswith("busy_check_"), o


def test_a_property_the_preset_breaks_kills_nothing_by_vacuity_either() -> None:
    """v0.5.13 breaks `busy_check_sound` on hybrid_swa_chunk_cache (finding 10). A mutant whose explicit
    search never exercised it was counted as "killed: busy_check_sound vacuous at depth 2" (session
    42): a finding's property kills nothing there, vacuous or violated. The rule `hunt` applies, with
    the witnesses v0.5.13's baseline records there."""
    from checker.mutation import runner

    countable = ["conservation", "busy_check_complete"]  # props_on: busy_check_sound is the preset's finding
    assert not runner.vacuous_kill("busy_check_sound", countable, 2, None, 2, False)
    assert runner.vacuous_kill("busy_check_complete", countable, 2, None, 2, False)
    assert not runner.vacuous_kill("busy_check_complete", countable, 2, 2, 2, False)  # the mutant met it
    assert not runner.vacuous_kill("conservation", countable, 3, None, 2, False)  # not searched that deep
    assert runner.vacuous_kill("conservation", countable, 3, None, 2, True)  # ... but every state was seen
