"""The fast explicit engine (checker/engines/explicit.py) against the graph engine it replaces
(checker/engines/explicit_graph.py): the same successors in the same order, the same verdicts,
depths, witnesses and counterexample lengths on pinned instances; its coverage of the bounds and
the words that say it; `jobs=2` finding what `jobs=1` finds."""

from __future__ import annotations

import pytest

from checker.engines.agreement import pinned
from checker.engines.applies import for_config
from checker.engines.explicit import (
    Explorer,
    FastExplorer,
    PointRunner,
    bound_points,
    check_config,
    coverage,
    grid_size,
    param_points,
    search,
    successors,
)
from checker.traces.trace import run_concrete
from checker.verdict import Verdict
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

# (config, pins, design, depth): small instances, violations among them (v0.5.10.post1 on sessions and hybrid_swa)
INSTANCES = [
    ("sessions", dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2)), "v0.5.10.post1", 3),
    ("hybrid_swa", dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
                        input_len=(3, 5), max_new_tokens=(2, 2)), "v0.5.10.post1", 2),
    ("small", dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1)), "current", 3),
    ("hybrid_swa_hicache", dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 0), warm_host=(1, 1)), "current", 2),
    ("paged", dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(2, 2)), "current", 2),
]


def _key(r):  # noqa: ANN001, ANN202
    return r.verdict, r.depth, r.witness_depth if r.verdict is not Verdict.VIOLATED else None


@pytest.mark.parametrize("name,pins,design,depth", INSTANCES, ids=[i[0] for i in INSTANCES])
def test_fast_and_graph_engines_agree_on_pinned_instances(name: str, pins: dict, design: str, depth: int) -> None:
    system = System(pinned(CONFIGS[name], **pins), PRESETS[design])
    old = Explorer(system, None).run(depth, keep_going=True)
    new = FastExplorer(system, None).run(depth, keep_going=True)
    assert new.distinct_states == old.distinct_states and new.transitions == old.transitions
    assert {p: _key(r) for p, r in new.results.items()} == {p: _key(r) for p, r in old.results.items()}
    for p, r in new.results.items():
        if r.verdict is Verdict.VIOLATED:
            assert r.trace is not None and r.trace.depth == r.depth == old.results[p].trace.depth
            assert r.trace.params == old.results[p].trace.params  # the same point: BMC's readable order
            states, _ = run_concrete(system, r.trace.params, r.trace.actions)
            assert not PROPERTIES[p].holds(system.ctx(Concrete(), r.trace.params), states[-1])


def test_successors_are_the_graph_engines_in_order_also_under_a_planted_bug() -> None:
    """The recorded-call replay (a transition call that returned before the advanced choice is not
    run again) changes nothing: the successors of every state to depth 2 are the re-run ones."""
    cfg = pinned(CONFIGS["hybrid_swa"], full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1),
                 chunked_prefill_size=(4, 4), input_len=(3, 5), max_new_tokens=(2, 2))
    for design in (PRESETS["current"], PRESETS["current"].with_mutants(frozenset({"finished_tail_freed_twice"}))):
        system = System(cfg, design)
        for p in param_points(system)[:2]:
            run = PointRunner(system, p)
            level = [run.init()]
            skipped = 0
            for _ in range(2):
                nxt = []
                for s in level:
                    fast = run.successors(s)
                    assert fast == list(successors(system, p, s))
                    nxt += [s2 for _, s2 in fast if s2.oom == 0]
                level = nxt
            skipped += run.skipped + run.value_hits
            assert skipped > 0  # the replay was exercised


def test_bound_points_cover_more_than_the_explicit_points_and_say_so() -> None:
    system = System(CONFIGS["hybrid_swa"], PRESETS["current"])
    old = param_points(system)
    bp = bound_points(system, 3 * len(old))
    assert bp.points[: len(old)] == old and len(bp.points) == 3 * len(old) and len(set(bp.points)) == len(bp.points)
    assert not bp.exact and bp.total == grid_size(CONFIGS["hybrid_swa"])
    assert all(system.params_ok(system.ctx(Concrete(), p)) for p in bp.points)
    cov_old, cov = coverage(system.cfg, old), coverage(system.cfg, bp.points)
    assert cov["full_tokens"][1] == 29 and cov_old["full_tokens"][0] < cov["full_tokens"][0] <= 29
    assert all(cov[k][0] >= cov_old[k][0] for k in cov_old)
    assert bound_points(system, 3 * len(old)).points == bp.points  # seeded: the same list every run
    # a search of part of the bounds is never `holds` for the config: its words say how much it covered
    rep = check_config(PRESETS["current"], CONFIGS["hybrid_swa"], ["well_formed"], 1, max_points=len(old) + 20)
    r = rep.results["well_formed"]
    assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.meta["parameter_points"] == len(old) + 20
    assert f"on {len(old) + 20} of {grid_size(CONFIGS['hybrid_swa'])} parameter points of the bounds grid" in r.words()
    assert "values covered: full_tokens " in r.words()


def test_a_pinned_instance_is_searched_whole_and_counted_exactly() -> None:
    cfg = pinned(CONFIGS["small"], full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1))
    system = System(cfg, PRESETS["current"])
    bp = bound_points(system)
    assert bp.exact and bp.total == len(bp.points) == len(param_points(system))
    r = check_config(PRESETS["current"], cfg, ["conservation"], 3).results["conservation"]
    assert r.meta["parameter_points"] == r.meta["points_in_bounds"] and r.words() == r.verdict.words(3)


def test_two_shards_find_what_one_finds() -> None:
    cfg = pinned(CONFIGS["sessions"], full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))
    design = PRESETS["v0.5.10.post1"]
    one = search(design, cfg, None, 3, jobs=1)
    two = search(design, cfg, None, 3, jobs=2)
    assert len(two.shards) == 2 and two.distinct_states == one.distinct_states
    for p, r in one.results.items():
        q = two.results[p]
        assert _key(q) == _key(r)
        if r.verdict is Verdict.VIOLATED:
            assert q.trace.params == r.trace.params and [s.picks for s in q.trace.steps] == [s.picks for s in r.trace.steps]
    assert any(r.verdict is Verdict.VIOLATED for r in one.results.values())


# -- the compiled model (`FastPath`) and the points' sharing (`Shared`) --------------------------------
FAST_INSTANCES = [
    ("hybrid_swa_hicache", dict(input_len=(5, 6), warm_len=(2, 2), warm_device=(0, 1), warm_host=(1, 1)), "current"),
    ("sessions", dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2)), "v0.5.10.post1"),
    ("spec_v2", dict(input_len=(3, 3), max_new_tokens=(2, 2)), "current"),
    ("mixed", dict(input_len=(3, 4), max_new_tokens=(1, 2)), "current"),
    # SWARadixCache: a tombstone goes with its last child, before the choice of evicting it is asked
    # (`x.or_(forced, x.choose_bool_when(...))` must stay eager)
    ("hybrid_swa", dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
                        input_len=(3, 5), max_new_tokens=(2, 2)), "v0.5.10.post1"),
    ("pressure", dict(), "current"),
]


@pytest.mark.parametrize("name,pins,design", FAST_INSTANCES, ids=[i[0] for i in FAST_INSTANCES])
def test_the_compiled_model_steps_and_checks_as_the_model_does(name: str, pins: dict, design: str) -> None:
    """The fast path (lazy where the operand it skips is pure) and the points' shared tables change
    nothing: every state's successors, in order with their picks, and every property's answer are the
    eager model's (`explicit_graph.successors`, the property run on a plain context), also under a
    planted bug (its transition is not pure and runs as written)."""
    from checker.engines.explicit import Shared

    cfg = pinned(CONFIGS[name], **pins)
    for d in (PRESETS[design], PRESETS[design].with_mutants(frozenset({"finished_tail_freed_twice"}))):
        system = System(cfg, d)
        shared = Shared()
        props = [PROPERTIES[p] for p in for_config(cfg, None)]
        for p in param_points(system)[:3]:
            run = PointRunner(system, p, shared=shared)
            assert run.fast is not None
            level, seen = [run.init()], set()
            for depth in range(3):
                nxt = []
                for s in level:
                    plain = system.ctx(Concrete(), p)
                    for prop in props:
                        for fn in (prop.holds, prop.witness):
                            assert run.holds(fn, s) == bool(fn(plain, s)), (prop.name, p)
                    if depth == 2 or not run.live(s):
                        continue
                    fast = run.successors(s)
                    assert fast == list(successors(system, p, s))
                    nxt += [s2 for _, s2 in fast if s2 not in seen and not seen.add(s2)]
                level = nxt


def test_purity_marks_what_chooses_and_what_a_design_replaces() -> None:
    from checker.engines.explicit import FastPath

    fp = FastPath.of(())
    for pure in (("model.radix_cache", "counters"), ("model.prefill_adder", "max_new_remaining"), ("model.enqueue", "max_new_tokens")):
        assert pure in fp.pure, fp.why.get(pure)
    for chooses in (("model.radix_cache", "evict"), ("model.radix_cache", "insert"), ("model.system", "recv_requests"),
                    ("model.system", "event_loop_iteration")):
        assert chooses not in fp.pure
    assert "choose_bool_when" in fp.why[("model.system", "recv_requests")]
    replaced = FastPath.of({"max_new_remaining"})
    assert ("model.prefill_adder", "max_new_remaining") not in replaced.pure
    assert replaced.why[("model.prefill_adder", "max_new_remaining")] == "the design replaces it"
    assert ("model.prefill_adder", "new_adder") not in replaced.pure  # it calls the replaced one


def test_a_skipped_pure_operand_is_neither_run_nor_its_parameters_read() -> None:
    """`new_adder` reserves the remaining output of the running requests with an `ite` over every
    request: eagerly it reads every request's max_new_tokens, compiled only a running one's."""
    from checker.engines.explicit import FastPath, _ParamReads
    from model import prefill_adder
    from model.state import RUNNING

    system = System(CONFIGS["hybrid_swa_hicache"], PRESETS["current"])
    p = param_points(system)[0]
    s = system.init(system.ctx(Concrete(), p))
    fast = FastPath.of(()).fns["model.prefill_adder"]["new_adder"]
    for status, fast_reads in (((0, 0), set()), ((RUNNING, 0), {("max_new_tokens", 0)})):
        st = s.set(status=status)
        reads = {}
        for fn in (prefill_adder.new_adder, fast):
            x = system.ctx(Concrete(), p)
            x.p = _ParamReads(p)
            out = fn(x, st)
            reads[fn] = ({n for n, _ in x.p.reads() if not isinstance(n, str)}, out)
        assert reads[prefill_adder.new_adder][0] == {("max_new_tokens", 0), ("max_new_tokens", 1)}
        assert reads[fast][0] == fast_reads and reads[fast][1] == reads[prefill_adder.new_adder][1]


def test_param_reads_record_entries_and_whole_reads() -> None:
    from checker.engines.explicit import _ParamReads

    system = System(CONFIGS["hybrid_swa_hicache"], PRESETS["current"])
    p = param_points(system)[0]
    r = _ParamReads(p)
    assert r.sliding_window_size == p.sliding_window_size and r.max_new_tokens[1] == p.max_new_tokens[1]
    assert dict(r.reads()) == {"sliding_window_size": p.sliding_window_size, ("max_new_tokens", 1): p.max_new_tokens[1]}
    assert list(r.input_len) == list(p.input_len)  # a whole tuple's use reads every entry
    assert ("input_len", 0) in dict(r.reads()) and ("input_len", 1) in dict(r.reads())
    r.reset()
    assert r.reads() == ()
    r.as_dict()  # not a field: counts as reading everything
    assert len(r.reads()) >= len(p.as_dict())


def test_points_share_trees_and_answers_and_find_what_the_graph_engine_finds() -> None:
    cfg = pinned(CONFIGS["hybrid_swa_hicache"], input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 0), warm_host=(1, 1))
    system = System(cfg, PRESETS["current"])
    pts = param_points(system)
    assert len(pts) > 1
    shard = FastExplorer(system, None, pts).search(3)
    old = Explorer(system, None, pts).run(3)
    assert shard.shared_hits > 0
    assert shard.distinct_states == old.distinct_states and shard.transitions == old.transitions


SYNTHETIC = '''
from model.transition import transition


@transition("synthetic::pick", modifies=())
def fastpath_probe_pick(x, s):
    return x.choose_bool("c")


def read(x, s):
    return s > 0


def chooses_in_operand(x, s):
    return x.or_(s > 5, fastpath_probe_pick(x, s))


def reads_in_operand(x, s):
    return x.or_(s > 5, read(x, s))


def ite_of_closure(x, s):
    def later():
        return x.choose_bool("d")
    return x.ite(s > 5, 1, x.ite(later(), 2, 3))


def plain_branch(x, s):
    return x.branch(s > 5, lambda: "big", lambda: "small")
'''


def test_an_operand_that_chooses_stays_eager_and_one_that_reads_becomes_lazy(tmp_path, monkeypatch) -> None:
    """The rewrite on a module of its own: an `or_` whose skipped operand asks a choice (through a
    transition, or a closure) keeps asking it, as the eager model does; one that only reads is lazy."""
    import sys

    from checker.engines.explicit import FastPath
    from model.transition import REGISTRY

    (tmp_path / "fastpath_probe.py").write_text(SYNTHETIC)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(REGISTRY, "fastpath_probe_pick", raising=False)
    try:
        fp = FastPath(frozenset(), ("fastpath_probe",))
        fns = fp.fns["fastpath_probe"]
        assert ("fastpath_probe", "read") in fp.pure and ("fastpath_probe", "fastpath_probe_pick") not in fp.pure
        system = System(CONFIGS["small"], PRESETS["current"])
        p = param_points(system)[0]
        for name, asked in (("chooses_in_operand", {"c"}), ("reads_in_operand", set()), ("ite_of_closure", {"d"})):
            x = system.ctx(Concrete(), p)
            fns[name](x, 10)
            assert set(x.ops.picks) == asked, name
            y = system.ctx(Concrete(), p)
            getattr(sys.modules["fastpath_probe"], name)(y, 10)  # the eager model asks the same
            assert set(y.ops.picks) == asked
        assert fns["plain_branch"](system.ctx(Concrete(), p), 10) == "big"
    finally:
        REGISTRY.pop("fastpath_probe_pick", None)
        sys.modules.pop("fastpath_probe", None)


# -- the fast path specialised to its config and design (`_Fold`, `_Inline`), the state's remembered hash ---
def _names(code) -> set[str]:  # noqa: ANN001
    out = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            out |= _names(c)
    return out


def test_the_fast_path_is_specialised_to_its_config_and_design() -> None:
    """`x.cfg.*`, `x.on(...)` are constants of the compiled code and `_under` is written in place:
    a fast path per (config, design), never one config's constants for another's."""
    from checker.engines.explicit import FastPath

    cfg, other = CONFIGS["hybrid_swa_hicache"], CONFIGS["small"]
    d = PRESETS["current"]
    fp = FastPath.of((), cfg, d)
    assert FastPath.of((), cfg, d) is fp and FastPath.of((), other, d) is not fp and FastPath.of((), cfg, PRESETS["v0.5.10.post1"]) is not fp
    # a pinned instance folds the same values: the same compiled code; one fix off does not
    assert FastPath.of((), pinned(cfg, input_len=(5, 5)), d) is fp
    assert fp.folded[("on", "swa_segment_lock")] is True
    assert FastPath.of((), cfg, d.with_fix("swa_segment_lock", None)) is not fp
    spec, plain = fp.fns["model.radix_cache"], FastPath.of(()).fns["model.radix_cache"]
    assert "_under" in _names(plain["full_locked"].__code__) and "_under" not in _names(spec["full_locked"].__code__)
    assert "cfg" in _names(plain["lockers"].__code__) and "cfg" not in _names(spec["lockers"].__code__)
    assert "on" in _names(plain["lock_refs"].__code__) and "on" not in _names(spec["lock_refs"].__code__)


def test_another_designs_constants_give_another_search(monkeypatch) -> None:  # noqa: ANN001
    """The folded constants decide the runs: the fast path of `current` stepping v0.5.10.post1's
    system is not v0.5.10.post1's search (so the agreement tests see a wrong fold)."""
    from checker.engines.explicit import FastPath

    name, pins, design, depth = INSTANCES[0]
    system = System(pinned(CONFIGS[name], **pins), PRESETS[design])
    old = Explorer(system, None).run(depth, keep_going=True)
    good = FastExplorer(system, None).run(depth, keep_going=True)
    assert good.distinct_states == old.distinct_states
    orig = FastPath.of.__func__
    monkeypatch.setattr(FastPath, "of", classmethod(lambda cls, ov, cfg=None, d=None: orig(cls, ov, cfg, PRESETS["current"])))
    bad = FastExplorer(system, None).run(depth, keep_going=True)
    assert (bad.distinct_states, {p: _key(r) for p, r in bad.results.items()}) != \
        (old.distinct_states, {p: _key(r) for p, r in old.results.items()})


FOLD_PROBE = '''
def f(x, s):
    if x.cfg.hicache:
        a = 1
    else:
        a = 2
    b = s if not x.cfg.hicache else -s
    return (a, b, x.cfg.num_reqs > 1 and s, 0 or x.cfg.hicache or s, s and x.cfg.hicache and s,
            x.on("swa_segment_lock") or s, x.cfg.num_reqs == 2 == 2, x.ps * s)
'''


@pytest.mark.parametrize("cfg_name", ["hybrid_swa_hicache", "small"])
def test_folding_keeps_pythons_values(cfg_name: str) -> None:
    """`and` / `or` with a constant keep Python's value (the deciding operand, else the last), and a
    folded `if` the branch taken: the folded function returns what the unfolded one does."""
    import ast

    from checker.engines.explicit import _Fold

    cfg, d = CONFIGS[cfg_name], PRESETS["current"]
    system = System(cfg, d)
    x = system.ctx(Concrete(), param_points(system)[0])
    fns = []
    for fold in (False, True):
        t = ast.parse(FOLD_PROBE)
        if fold:
            t = ast.fix_missing_locations(_Fold(cfg, d).visit(t))
            assert "cfg" not in ast.unparse(t) and ".on(" not in ast.unparse(t)
        ns: dict = {}
        exec(compile(t, "<probe>", "exec"), ns)
        fns.append(ns["f"])
    for s in (0, 1, 3, "", "z"):
        if isinstance(s, str) and cfg.hicache:
            continue  # -s of a str
        assert fns[0](x, s) == fns[1](x, s), s


def test_a_states_remembered_hash_is_the_dataclass_hash_and_not_pickled() -> None:
    import pickle
    from dataclasses import fields

    from model.state import FIELD_NAMES

    system = System(CONFIGS["hybrid_swa_hicache"], PRESETS["current"])
    s = system.init(system.ctx(Concrete(), param_points(system)[0]))
    t = s.set(oom=s.oom)  # equal, another object
    assert t is not s and t == s and hash(t) == hash(s) == hash(tuple(getattr(s, f) for f in FIELD_NAMES))
    assert "_hash" not in {f.name for f in fields(s)} and s.set(oom=1) != s and hash(s.set(oom=1)) != hash(s)
    u = pickle.loads(pickle.dumps(s))
    assert u == s and not hasattr(u, "_hash") and hash(u) == hash(s)
