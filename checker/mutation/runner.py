"""Running kvmc's own engines on one mutant, in a process of its own, within a time budget.

For a mutant (checker/mutation/operators.py) and the configs whose step executes its line
(checker/mutation/coverage.py):

1. relevance, config by config: whether the mutant's step builds other terms than the model's
   from the free state (where it builds the same, it is the same step, nothing can kill it there,
   and no engine looks); where every config builds the model's terms, the mutant is `equivalent`
   at once;
2. aim: on each config where it differs, where the mutant first behaves differently from the
   model on a reachable state of the explicit points (checker/mutation/diff.py `divergence`, a
   share of the budget). The engines' time goes to the configs where it diverges, shallowest
   divergence first; a config where it provably does not (every reachable state of the points to
   the explicit depth compared) gets no explicit search, since the mutant's reachable states there
   are the model's; configs whose probe ran out of time come after the diverging ones;
3. the explicit engine (checker/engines/explicit.py): first the parameter point where the mutant
   diverges, alone and deeper (`FOCUS_DEPTH`), then breadth first over the config's parameter
   points (`param_points`), each config with a share of the budget;
4. random runs drawn over each relevant config's full symbolic bounds (the random engine's wide
   machine, deeper than the explicit search goes);
5. BMC (checker/engines/bmc.py, with the lemmas and the random engine's seed hunt, no proof, no
   minimisation) on the full symbolic bounds, the rest of the budget split between the relevant
   configs, each run abandoned at its deadline.

Before this aim (measured at c109011, docs/mutants.md), the explicit time was split evenly over
every config running the line, cheapest first: a mutant of a transition every config runs got 4-5 s
per config, and `retract_decode`'s two retraction mutants, killed at depth 5 on `pressure` in 39 s
when searched there, survived at depth 1.

The first violation of a property kills the mutant, if the model itself holds it: the baseline
runs the model's explicit search (a violation there stops the run; an explicit kill deeper than that
search got, which on a loaded machine may be depth 0, counts only if the model's own search of the
kill's point holds to its depth), and a kill by BMC or random
runs (the full bounds) is confirmed by a BMC of the model on that property to the kill's depth
(`model_check`), or, where that BMC cannot reach the depth in the time and finds no violation,
by the model's explicit search of the kill's own parameters to its depth (`confirm_at`: the
mutant's counterexample is not the model's behaviour there). checker/mutation/mutate.py runs
`model_check` once per config and property, and checks the mutants again without a property the
model breaks, such as the `prompt_prefilled` finding on `hybrid_swa` at depth 1. What the model
breaks in its first step (`model_findings`, a BMC of every property to depth 1 per config) is
known before any mutant is hunted: at c109011 six of thirteen survivors' hunts ended in a
`prompt_prefilled` kill at depth 1 that had to be refused and hunted again. A property left
vacuous where the model meets its witness kills too: the explicit search reached or exhausted the
depth of the model's witness without meeting it (`kvmc check` would exit 3, inconclusive, instead
of 0). A mutant whose step raises a Python error is `invalid` (every engine stops on the error;
no property is needed to see it) and is left out of the kill rate.

The child reports progress (engine, config, depth) on a pipe; the parent (`run_jobs`) stops it
when its budget (plus a grace for the engine to notice its deadline) is spent, so nothing
outlives its budget and Ctrl-C leaves no process behind.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

EXPLICIT_DEPTH = 8
BMC_DEPTH = 10
EXPLICIT_SHARE = 0.4  # of the budget, over all configs; random and BMC get the rest
AIM_SHARE = 0.1  # of the budget, for the divergence probes (step 2), over the configs where the step differs
FOCUS_DEPTH = 12  # the explicit search of the one point where the mutant diverges goes this deep
FOCUS_SHARE = 0.5  # of a diverging config's explicit time, for that point alone
RANDOM_SHARE = 0.25  # of what is left after the explicit search, per config (BMC gets the rest)
RANDOM_DEPTH = 8
RANDOM_EXAMPLES = 400
SAMPLE_POINTS = 24  # explicit points on a config whose full set the model's own search could not finish
GRACE_S = 20.0  # after the budget, for the engines to notice their deadline, before the process is stopped


@dataclass
class Kill:
    engine: str
    config: str
    property: str
    how: str  # "violated" | "vacuous"
    depth: int
    seconds: float  # since the mutant's run began
    point: dict[str, Any] | None = None  # the counterexample's parameters (random and BMC kills)

    def words(self) -> str:
        what = f"{self.property} {self.how}" + (f" at depth {self.depth}" if self.how == "violated" else
                                                 f" (no witness to depth {self.depth})")
        return f"{self.engine} on {self.config}: {what}, {self.seconds:.1f}s"


@dataclass
class Search:
    engine: str
    config: str
    depth: int  # the depth every property holds to
    seconds: float
    exhausted: bool = False  # explicit: every reachable state of its points was seen
    points: int = 0
    states: int = 0
    stopped: str = ""
    lemmas_dropped: list[str] = field(default_factory=list)  # bmc: lemmas that failed ("name@depth")
    point: int | None = None  # explicit: the one parameter point searched (the divergence's), else all


@dataclass
class Aim:
    """Where the mutant's step first differs from the model's on a config's explicit points
    (diff.py `divergence`): `diverges` at `point` (index into `param_points`), `depth`; or
    `same` (no difference on every reachable state of the points to `EXPLICIT_DEPTH`: no explicit
    search can kill it there), or neither (the probe ran out of time)."""

    config: str
    diverges: bool
    same: bool
    depth: int
    point: int | None = None
    seconds: float = 0.0
    note: str = ""

    def rank(self) -> tuple[int, int]:
        return (0, self.depth) if self.diverges else (2, 0) if self.same else (1, 0)


@dataclass
class Baseline:
    """The model's own explicit search on a config: where each property's witness is first met,
    and that nothing is violated (else the mutants' kills there would mean nothing)."""

    config: str
    witness: dict[str, int | None]
    violated: list[str]
    depth: int
    exhausted: bool
    seconds: float = 0.0
    terms: Any = None  # the step's terms from the free state (`_step_terms`)
    # the properties the model itself violates on the config's full bounds, or could not be shown
    # to hold to a kill's depth (`model_check`: findings such as prompt_prefilled on hybrid_swa at
    # depth 1), property -> why; no engine counts these as a mutant's kill there
    model_violates: dict[str, str] = field(default_factory=dict)


def explicit_points(system: Any) -> list[Any]:
    from checker.engines.explicit import param_points

    return param_points(system)


def baseline(config: str, time_limit_s: float, cache: Any = None, design: str = "current") -> Baseline:
    """The explicit search of preset `design` (the model the mutants are made of) on `config`, and
    its step's terms, for `relevant`; read from `cache` (a baseline_cache.BaselineCache) where an
    earlier run on the same sources wrote it. A property the preset itself violates there (an older
    release's finding, such as #22862 on `sessions` before 0.5.11) kills no mutant on `config`
    (`model_violates`), for `current` as for any preset (finding 12 on aligned_page1)."""
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.explicit import Explorer
    from checker.verdict import Verdict

    def finish(b: Baseline, at: dict[str, int]) -> Baseline:
        b.model_violates = {p: f"the model ({design}) violates it on the explicit points at depth {d}"
                            for p, d in at.items()}
        b.terms = _step_terms(config, PRESETS[design])
        return b

    args = (time_limit_s, EXPLICIT_DEPTH, design)
    hit = cache.get("baseline", config, *args) if cache is not None else None
    if hit is not None:
        b = Baseline(config, hit["witness"], hit["violated"], hit["depth"], hit["exhausted"], hit["seconds"])
        return finish(b, hit.get("violated_at") or {})
    t0 = time.perf_counter()
    system = System(CONFIGS[config], PRESETS[design])
    s = Explorer(system, None, points=explicit_points(system), time_limit_s=time_limit_s).run(EXPLICIT_DEPTH)
    at = {p: r.depth for p, r in s.results.items() if r.verdict is Verdict.VIOLATED}
    b = Baseline(config, {p: r.witness_depth for p, r in s.results.items()}, list(at), s.depth_reached,
                 s.exhausted_at is not None, time.perf_counter() - t0)
    if cache is not None:
        cache.put("baseline", config, args, dict(witness=b.witness, violated=b.violated, violated_at=at, depth=b.depth,
                                                 exhausted=b.exhausted, seconds=b.seconds))
    return finish(b, at)


def _model_bmc(config: str, props: list[str], depth: int, time_limit_s: float,
               stop_on_violation: bool, design: str) -> tuple[dict[str, Any], int]:
    """The BMC of the model (preset `design`) of `props` on `config`'s full bounds to `depth`, abandoned after
    `time_limit_s`: its results and the depth it finished."""
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.bmc import BMC

    bmc = BMC(System(CONFIGS[config], PRESETS[design]), props, minimize=False)
    until = time.perf_counter() + time_limit_s
    timer = threading.Timer(time_limit_s, bmc.interrupt_check)
    timer.daemon = True
    timer.start()
    reached = [-1]

    def progress(t: int, el: float, st: dict[str, str]) -> None:
        reached[0] = t

    try:
        res = bmc.run(depth, progress=progress, stop_on_violation=stop_on_violation,
                      abandon=lambda: time.perf_counter() >= until)
    finally:
        timer.cancel()
    return res, reached[0]


def model_check(config: str, prop: str, depth: int, time_limit_s: float, design: str = "current",
                tell: Callable[[dict[str, Any]], None] = lambda d: None) -> dict[str, Any]:
    """Does the model itself hold `prop` on `config`'s full bounds to `depth` (BMC)? A mutant's kill
    by BMC or random runs (the full bounds, where the explicit baseline did not look) counts only
    if it does: the prompt_prefilled finding on hybrid_swa is a violation of the model at depth 1,
    at a point off the explicit grid. Returns `violated` (its depth) or None, and `reached`."""
    from checker.verdict import Verdict

    tell(dict(engine="model bmc", config=config))
    res, reached = _model_bmc(config, [prop], depth, time_limit_s, stop_on_violation=True, design=design)
    r = res.get(prop)
    return dict(violated=r.depth if r is not None and r.verdict is Verdict.VIOLATED else None, reached=reached)


def model_findings(config: str, depth: int, time_limit_s: float, design: str = "current",
                   tell: Callable[[dict[str, Any]], None] = lambda d: None) -> dict[str, Any]:
    """Every property the model itself violates on `config`'s full bounds within `depth` (BMC,
    all properties at once): known before the hunt, such a property kills no mutant there, so no
    mutant's budget is spent on a kill the model shares (prompt_prefilled on hybrid_swa and
    hybrid_swa_hicache at depth 1, findings #1). Returns `violated` {property: depth}, `reached`."""
    from specs.properties import PROPERTIES

    from checker.verdict import Verdict

    tell(dict(engine="model bmc", config=config))
    res, reached = _model_bmc(config, list(PROPERTIES), depth, time_limit_s, stop_on_violation=False, design=design)
    return dict(violated={p: r.depth for p, r in res.items() if r.verdict is Verdict.VIOLATED}, reached=reached)


def _step_terms(config: str, design: Any) -> tuple[list[Any], list[Any]]:
    """One symbolic step of `design` on `config` from the free state (flattened next state and
    what the properties read of the free state, the step's assumptions): equal terms for the model
    and a mutant mean the same step and the same verdicts."""
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.substeps import free_state
    from checker.mutation.equivalence import _flat, step_terms, symbolic_reads, unbounded

    system = System(CONFIGS[config], design)
    params = unbounded(system)
    s0 = free_state(system, params, "eq0")
    post, cons, _ch = step_terms(system, params, s0)
    return [v for _n, v in _flat(post) + symbolic_reads(system, params, s0)], cons


def relevant(config: str, design: Any, base: Baseline) -> bool:
    """Whether the mutant's step on `config` differs from the model's at all (as terms): where it
    does not, no engine can kill it there."""
    from checker.mutation.equivalence import _same

    post, cons = _step_terms(config, design)
    bpost, bcons = base.terms
    return not (len(cons) == len(bcons) and all(_same(a, b) for a, b in zip(post, bpost))
                and all(_same(a, b) for a, b in zip(cons, bcons)))


def _in_model(e: BaseException) -> str:
    """The model line an exception came from (`model/x.py:N`), or "" when it did not."""
    for f in reversed(traceback.extract_tb(e.__traceback__)):
        if "/model/" in f.filename:
            return f"model/{f.filename.rsplit('/', 1)[-1]}:{f.lineno}"
    return ""


def _random_hunt(system: Any, depth: int, give_up: Callable[[], bool], examples: int,
                 props: list[str] | None = None) -> tuple[str, int, dict[str, Any]] | None:
    """Random runs drawn over the config's symbolic bounds (the random engine's wide machine);
    the first property a run breaks, and after how many steps."""
    from specs.properties import PROPERTIES

    from checker.engines.random_engine import Recorder, _run_machine, machine_for
    from hypothesis import Phase

    rec = Recorder()
    machine = machine_for(system, props if props is not None else list(PROPERTIES), None, rec, wide=True, give_up=give_up)
    _run_machine(machine, examples, depth, (Phase.explicit, Phase.reuse, Phase.generate))
    if not rec.failures:
        return None
    prop, (n, params, _a) = min(rec.failures.items(), key=lambda kv: kv[1][0])
    return prop, n, params.as_dict()


def vacuous_kill(prop: str, countable: list[str], model_witness: int | None, witness: int | None, reached: int,
                 exhausted: bool) -> bool:
    """Does a mutant's explicit search kill it by leaving `prop` vacuous? Only where the model met the
    property's witness (at `model_witness`) and the search went that deep (or saw every state)
    without meeting it, and only for a property a kill may name there (`countable`): one the preset
    itself breaks on the config (a finding's) kills nothing, vacuous or violated (session 42: v0.5.13's
    `busy_check_sound` on hybrid_swa_chunk_cache, finding 10, was counted as a vacuous kill)."""
    return prop in countable and model_witness is not None and witness is None and (exhausted or reached >= model_witness)


def hunt(mid: str, configs: list[str], budget_s: float, baselines: dict[str, Baseline], preset: str = "current",
         tell: Callable[[dict[str, Any]], None] = lambda d: None) -> dict[str, Any]:
    """Kill mutant `mid` of preset `preset` on `configs` within `budget_s` (module docstring).
    Returns plain data."""
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.bmc import BMC
    from checker.engines.explicit import Explorer
    from checker.engines.run import _seeder
    from checker.mutation.operators import design_for, parse_id
    from checker.verdict import Verdict

    t0 = time.perf_counter()
    deadline = t0 + budget_s
    m = parse_id(mid)
    design = design_for(m, PRESETS[preset])
    searched: list[Search] = []
    # cheap configs first: the model's own search there was quick, so the mutant's likely is too
    order = sorted(configs, key=lambda c: baselines[c].seconds if c in baselines else 0.0)

    def left() -> float:
        return deadline - time.perf_counter()

    def done(kill: Kill | None, status: str, **extra: Any) -> dict[str, Any]:
        return dict(status=status, kill=kill.__dict__ if kill else None, searched=[s.__dict__ for s in searched],
                    seconds=time.perf_counter() - t0, **extra)

    def props_on(c: str) -> list[str]:
        """The properties a kill on `c` may name: not those the model itself violates there."""
        from specs.properties import PROPERTIES

        b = baselines.get(c)
        return [p for p in PROPERTIES if b is None or p not in b.model_violates]

    def witness_of(c: str, p: str) -> int | None:
        b = baselines.get(c)
        return b.witness.get(p) if b is not None else None

    same: list[str] = []  # configs where the mutant's step builds the model's very terms
    differ: set[str] = set()  # configs where it does not (or there is no baseline to compare with)
    raised: dict[str, BaseException] = {}  # configs where its symbolic step raised (BMC would too)

    def differs(c: str) -> bool:
        """Whether the step on `c` differs from the model's at all (as terms); where it does not,
        nothing can kill the mutant there, so no engine's time is spent on it."""
        if c not in baselines or c in raised or c in differ:
            return True
        try:
            if relevant(c, design, baselines[c]):
                differ.add(c)
                return True
        except Exception as e:  # kept, and raised where the BMC would meet it (step 2)
            if not _in_model(e):
                raise
            raised[c] = e
            return True
        same.append(c)
        return False

    try:
        # 1. relevance (its step's terms, a second at most per config)
        for c in order:
            tell(dict(engine="relevance", config=c))
            differs(c)
        # 2. aim: where the mutant diverges, shallowest first (the engines' time goes there)
        # in rounds, each probe's time doubled, so a shallow divergence anywhere is found first and
        # a deep one (pressure's retraction loop: depth 5, 7 s) still gets time
        aims: dict[str, Aim] = {}
        probe = [c for c in order if c not in same and c not in raised and c in baselines]
        aim_until = time.perf_counter() + budget_s * AIM_SHARE
        limit = 1.0
        while probe and aim_until - time.perf_counter() >= 1.0:
            for c in list(probe):
                t = min(limit, aim_until - time.perf_counter())
                if t < 0.5:
                    break
                tell(dict(engine="divergence", config=c))
                aims[c] = aim(c, design, t, preset)
                if aims[c].diverges or aims[c].same:
                    probe.remove(c)
            limit *= 2
        order.sort(key=lambda c: aims[c].rank() if c in aims else (1, 0))  # stable: cheapest first within a rank
        # 3. explicit: the diverging point alone and deeper, then breadth first over the parameter
        # points, each config with a share of the time (its own baseline time, a few times over,
        # when that is less); none where the mutant's reachable states are the model's
        explicit = [c for c in order if c not in same and not (c in aims and aims[c].same)]
        for i, c in enumerate(explicit):
            base = baselines.get(c)
            share = left() * EXPLICIT_SHARE / (len(explicit) - i)
            a = aims.get(c)
            system = System(CONFIGS[c], design)
            points = explicit_points(system)
            if a is not None and a.diverges and a.point is not None and a.point < len(points) and share >= 2:
                tell(dict(engine="explicit", config=c, point=a.point))
                until = time.perf_counter() + share * FOCUS_SHARE
                s = Explorer(system, None, points=[points[a.point]], time_limit_s=share * FOCUS_SHARE).run(
                    FOCUS_DEPTH, keep_going=False)
                searched.append(Search("explicit", c, s.depth_reached, time.perf_counter() - t0, s.exhausted_at is not None,
                                       1, s.distinct_states, s.stopped, point=a.point))
                for p, r in s.results.items():
                    if r.verdict is Verdict.VIOLATED and p in props_on(c) and model_holds_at(c, points[a.point], p, r.depth, base, design=preset):
                        return done(Kill("explicit", c, p, "violated", r.depth, time.perf_counter() - t0), "killed")
                share = max(0.0, share - share * FOCUS_SHARE - max(0.0, time.perf_counter() - until))
            if base is not None:
                share = min(share, 3 * base.seconds + 5)
            if share < 1:
                continue
            tell(dict(engine="explicit", config=c))
            spread = False
            if base is not None and not base.exhausted and base.depth < EXPLICIT_DEPTH and len(points) > SAMPLE_POINTS:
                # the model's own search did not get deep on every point: a spread of them gets deeper
                points = points[:: -(-len(points) // SAMPLE_POINTS)]
                spread = True
            s = Explorer(system, None, points=points, time_limit_s=share).run(EXPLICIT_DEPTH, keep_going=False)
            exhausted = s.exhausted_at is not None
            searched.append(Search("explicit", c, s.depth_reached, time.perf_counter() - t0, exhausted, len(s.points),
                                   s.distinct_states, s.stopped))
            for p, r in s.results.items():
                # the baseline vouches for the model only to the depth it reached (on a loaded
                # machine that can be 0): deeper, the model's own search of the counterexample's
                # point must hold, or the "kill" may be a finding of the preset's own (session 42:
                # v0.5.13's no_decode_oom on hybrid_swa_mixed, finding 9, counted as 7 kills)
                if r.verdict is Verdict.VIOLATED and p in props_on(c) and r.trace is not None and model_holds_at(
                        c, r.trace.params, p, r.depth, base, time_limit_s=max(1.0, left() * EXPLICIT_SHARE), design=preset):
                    return done(Kill("explicit", c, p, "violated", r.depth, time.perf_counter() - t0,
                                     r.trace.params.as_dict()), "killed")
            for p, r in s.results.items():
                # vacuous only on the baseline's own points: a spread of them may lack the one
                # where the model meets the witness
                if not spread and vacuous_kill(p, props_on(c), witness_of(c, p), r.witness_depth, s.depth_reached,
                                               exhausted):
                    return done(Kill("explicit", c, p, "vacuous", s.depth_reached, time.perf_counter() - t0), "killed")
        # where the mutant's step differs at all (elsewhere nothing can kill it), diverging configs
        # first: 4. random runs over the full symbolic bounds; then 5. BMC, the rest of the time split
        live: list[str] = []
        checked = 0
        for i, c in enumerate(order):
            if left() < 1:
                break
            checked += 1
            if c in same:
                continue
            if c in raised:
                raise raised[c]
            tell(dict(engine="relevance", config=c))
            if not differs(c):
                continue
            live.append(c)
            until = time.perf_counter() + left() * RANDOM_SHARE / (len(order) - i)
            tell(dict(engine="random", config=c))
            try:
                hit = _random_hunt(System(CONFIGS[c], design), RANDOM_DEPTH, lambda until=until: time.perf_counter() >= until,
                                   RANDOM_EXAMPLES, props_on(c))
            except Exception as e:
                if _in_model(e):
                    raise
                hit = None  # Hypothesis refused the run (a flaky draw): the other engines still look
            searched.append(Search("random", c, RANDOM_DEPTH, time.perf_counter() - t0))
            if hit is not None:
                return done(Kill("random", c, hit[0], "violated", hit[1], time.perf_counter() - t0, hit[2]), "killed")
        if not live and checked == len(order):
            return done(None, "equivalent", evidence=f"its step builds the model's very terms on {', '.join(order)}")
        for i, c in enumerate(live):
            if left() < 1:
                break
            until = time.perf_counter() + left() / (len(live) - i)
            tell(dict(engine="bmc", config=c))
            system = System(CONFIGS[c], design)
            seed = _seeder(system)

            def safe_seed(*a: Any, seed: Any = seed) -> Any:
                try:
                    return seed(*a)
                except Exception as e:
                    if _in_model(e):
                        raise
                    return None

            bmc = BMC(system, props_on(c), minimize=False, seeder=safe_seed)
            timer = threading.Timer(max(0.0, until - time.perf_counter()), bmc.interrupt_check)
            timer.daemon = True
            timer.start()
            reached: list[int] = [-1]

            def progress(t: int, el: float, st: dict[str, str], c: str = c) -> None:
                reached[0] = t
                tell(dict(engine="bmc", config=c, depth=t))

            try:
                res = bmc.run(BMC_DEPTH, progress=progress, stop_on_violation=True,
                              abandon=lambda until=until: time.perf_counter() >= until)
            finally:
                timer.cancel()
            searched.append(Search("bmc", c, reached[0], time.perf_counter() - t0,
                                   lemmas_dropped=[d.split(":", 1)[-1] for d in bmc.dropped]))
            for p, r in res.items():
                if r.verdict is Verdict.VIOLATED:
                    return done(Kill("bmc", c, p, "violated", r.depth, time.perf_counter() - t0,
                                     r.trace.params.as_dict() if r.trace is not None else None), "killed")
            for p, r in res.items():
                w = witness_of(c, p)
                if r.verdict is Verdict.VACUOUS and w is not None and reached[0] >= w:
                    return done(Kill("bmc", c, p, "vacuous", reached[0], time.perf_counter() - t0), "killed")
    except Exception as e:
        where = _in_model(e)
        if not where:
            raise
        return done(None, "invalid", error=f"{type(e).__name__}: {e}"[:300], where=where)
    return done(None, "survived", live=live)


def model_holds_at(config: str, point: Any, prop: str, depth: int, base: Baseline | None,
                   time_limit_s: float = 0.0, design: str = "current") -> bool:
    """Does the model (preset `design`) hold `prop` at parameter `point` of `config` to `depth`? The baseline says
    so to the depth its search reached (it stops the run on any violation); deeper, the model's
    own explicit search of that one point answers (the focused search goes past the baseline), on
    every reachable state to `depth`: a search stopped by `time_limit_s` before it says no."""
    from model.designs import PRESETS
    from model.system import System
    from specs.configs import CONFIGS

    from checker.engines.explicit import Explorer
    from checker.verdict import Verdict

    if base is not None and (base.exhausted or depth <= base.depth):
        return True
    search = Explorer(System(CONFIGS[config], PRESETS[design]), [prop], points=[point],
                      time_limit_s=time_limit_s).run(depth, keep_going=False)
    return search.results[prop].verdict is not Verdict.VIOLATED and (
        search.depth_reached >= depth or search.exhausted_at is not None)


def confirm_at(config: str, point: dict[str, Any], prop: str, depth: int, time_limit_s: float, design: str = "current",
               tell: Callable[[dict[str, Any]], None] = lambda d: None) -> dict[str, Any]:
    """A kill on the full bounds whose depth the model's BMC cannot reach there: does the model
    hold `prop` on the kill's own instance (its parameters) to the kill's depth? Then the mutant's
    counterexample is not the model's behaviour (`model_holds_at`)."""
    from model.config import Params

    tell(dict(engine="model explicit", config=config))
    return dict(holds=model_holds_at(config, Params(**{k: tuple(v) if isinstance(v, list) else v for k, v in point.items()}),
                                     prop, depth, None, time_limit_s, design))


def aim(config: str, design: Any, time_limit_s: float, preset: str = "current") -> Aim:
    """Where `design` first diverges from the model (preset `preset`) on `config`'s explicit points
    (diff.py)."""
    from model.designs import PRESETS

    from checker.mutation.diff import divergence

    t0 = time.perf_counter()
    d = divergence(config, PRESETS[preset], design, time_limit_s, max_depth=EXPLICIT_DEPTH)
    same = not d["found"] and (d.get("complete", False) or d["depth"] >= EXPLICIT_DEPTH)
    return Aim(config, bool(d["found"]), same, d["depth"], d.get("point"), time.perf_counter() - t0, d.get("note", ""))


def _child(conn: Any, fn: Callable[..., dict[str, Any]], args: tuple[Any, ...]) -> None:
    try:
        out = fn(*args, tell=lambda d: conn.send(("progress", d)))
        conn.send(("result", out))
    except BaseException as e:  # reported by the parent as a kvmc error, never as a kill
        conn.send(("result", dict(status="error", error=f"{type(e).__name__}: {e}"[:300], kill=None, searched=[],
                                  seconds=0.0)))
    finally:
        conn.close()


@dataclass
class Job:
    """One task in a process of its own: `fn(*args, tell=...)` returning plain data, stopped when
    it runs past `budget_s` plus `GRACE_S`."""

    key: str
    fn: Callable[..., dict[str, Any]]
    args: tuple[Any, ...]
    budget_s: float
    proc: Any = None
    conn: Any = None
    t0: float = 0.0
    last: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] | None = None


def run_jobs(jobs: list[Job], workers: int = 1, on_done: Callable[[Job], None] = lambda j: None) -> list[Job]:
    """Each job in a forked process (it inherits the parent's imports and baselines; nothing is
    pickled but its result), at most `workers` at a time. A job past its budget plus `GRACE_S`
    is stopped: its result says `stopped` with the engine, config and depth it was on."""
    ctx = mp.get_context("fork")
    pending = list(jobs)
    running: list[Job] = []
    try:
        while pending or running:
            while pending and len(running) < workers:
                j = pending.pop(0)
                parent, child = ctx.Pipe(duplex=False)
                j.proc = ctx.Process(target=_child, args=(child, j.fn, j.args), daemon=True)
                j.proc.start()
                child.close()
                j.conn, j.t0 = parent, time.perf_counter()
                running.append(j)
            for j in list(running):
                try:
                    while j.conn.poll(0):
                        kind, msg = j.conn.recv()
                        if kind == "progress":
                            j.last = msg
                        else:
                            j.result = msg
                except (EOFError, OSError):
                    pass
                over = time.perf_counter() - j.t0 > j.budget_s + GRACE_S
                if j.result is None and j.proc.is_alive() and not over:
                    continue
                if j.result is None:
                    _stop(j.proc)
                    if over:
                        where = " ".join(str(j.last[k]) for k in ("engine", "config") if k in j.last)
                        depth = f" at depth {j.last['depth'] + 1}" if "depth" in j.last else ""
                        j.result = dict(status="stopped", kill=None, searched=[], seconds=time.perf_counter() - j.t0,
                                        stopped=f"stopped at its budget ({j.budget_s:.0f}s + {GRACE_S:.0f}s grace)"
                                                + (f" in {where}{depth}" if where else ""))
                    else:
                        j.result = dict(status="error", kill=None, searched=[], seconds=time.perf_counter() - j.t0,
                                        error=f"the process died (exit code {j.proc.exitcode})")
                else:
                    j.proc.join(5)
                    _stop(j.proc)
                j.conn.close()
                running.remove(j)
                on_done(j)
            time.sleep(0.05)
    except BaseException:
        for j in running:
            _stop(j.proc)
        raise
    return jobs


def _stop(proc: Any) -> None:
    if proc.is_alive():
        proc.terminate()
        proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join(5)
