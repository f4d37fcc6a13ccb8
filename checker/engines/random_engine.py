"""Random engine: a Hypothesis `RuleBasedStateMachine` generated from the model.

Nothing here is written per transition. `machine_for(system, props, points)` builds the class from
the `System` (model/system.py) alone:

* an `@initialize` rule draws one parameter point of the config's explicit bounds (those that
  satisfy `params_ok`) and starts from `System.init`;
* each action in `System.actions` becomes a `@rule`; in a state `System.enabled` refuses (the
  scheduler stopped) it changes nothing and is not a step: the run is over;
  its body runs `System.step` with an oracle that draws every named choice of the step from
  Hypothesis (`pick_int(name, lo, hi)` -> `integers(lo, hi)`, `pick_bool` -> `booleans()`), so
  Hypothesis explores and shrinks the very choices the other engines enumerate. A draw that an
  `assume` of the model rejects (`Infeasible`) is a branch that does not exist: the step leaves the
  state unchanged and is not recorded;
* each property of specs/properties.py becomes an `@invariant`, and its reachability witness is
  tracked so a report can say whether the property was ever exercised.

A failure is the shortest failing run Hypothesis executed (it replays while shrinking; every
failing replay is recorded, the shortest kept). It is re-run through the concrete model
(checker/traces/trace.py::run_concrete) and reported as a `Trace` with engine "random", so the CLI
prints the same report and writes the same ITF file as for BMC.

Verdicts: `violated at depth d`, or `unknown` when no run failed: random testing claims nothing
about the runs it did not try (the reason says how many runs of how many steps were tried and
whether the witness was met).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import strategies as st
from hypothesis.errors import Flaky
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from model.config import Config, Params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.system import System
from checker.engines.applies import for_config, nothing_applies
from specs.properties import PROPERTIES

from checker.engines.results import ConfigReport, Result
from checker.engines.explicit import param_points
from checker.traces.trace import Step, Trace, run_concrete
from checker.verdict import Verdict

DEFAULT_EXAMPLES = 200  # runs per property (each at most `depth` steps)


class DrawOracle:
    """Answers a step's choices with Hypothesis draws, labelled by the choice name."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        return int(self.data.draw(st.integers(lo, hi), label=name))

    def pick_bool(self, name: str) -> bool:
        return bool(self.data.draw(st.booleans(), label=name))


class PropertyFailed(AssertionError):
    """An invariant of the generated machine (a kvmc property) was violated."""


@dataclass
class Recorder:
    """What the generated machines saw: failing runs per property, witnesses, run counts."""

    failures: dict[str, tuple[int, Params, list[tuple[str, dict[str, Any]]]]] = field(default_factory=dict)
    witness: dict[str, int | None] = field(default_factory=dict)
    runs: int = 0
    steps: int = 0
    infeasible: int = 0

    def fail(self, prop: str, params: Params, actions: list[tuple[str, dict[str, Any]]]) -> None:
        old = self.failures.get(prop)
        if old is None or len(actions) <= old[0]:
            self.failures[prop] = (len(actions), params, list(actions))


class HuntOver(Exception):
    """`give_up()` said so: the hunt stops before its next run (not a property failure)."""


def machine_for(system: System, props: list[str], points: list[Params] | None, rec: Recorder, wide: bool = False,
                give_up: Callable[[], bool] | None = None, only_at: int | None = None) -> type[RuleBasedStateMachine]:
    """Generate the state machine class of `system` (see the module docstring). `wide`: with no
    `points`, draw each parameter over the config's symbolic bounds (the BMC's domain) rather than
    its explicit ones. `give_up()` is asked before each run; true raises `HuntOver`. `only_at`:
    check the properties only after that many steps (no witnesses tracked)."""
    ns: dict[str, Any] = {}
    props = for_config(system.cfg, props)
    if points is not None and not points:
        raise ValueError(f"config {system.cfg.name!r} has no parameter point satisfying params_ok in its explicit bounds")

    def begin(self: Any, params: Params) -> None:
        if give_up is not None and give_up():
            raise HuntOver
        self.params = params
        self.state = system.init(system.ctx(Concrete(), self.params))
        self.actions = []
        rec.runs += 1

    if points is not None:
        def start(self: Any, point: int) -> None:
            begin(self, points[point])

        ns["start"] = initialize(point=st.integers(0, len(points) - 1))(start)
    else:  # a domain too large to list: draw each parameter, reject points params_ok refuses
        from hypothesis import assume

        from model.config import PAGE_MULTIPLE, REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS

        cfg = system.cfg

        def draw(data: Any, name: str, label: str) -> Any:
            lo, hi = cfg.bound(name, explicit=not wide)
            step = cfg.page_size if name in PAGE_MULTIPLE else 1
            v = lo + step * data.draw(st.integers(0, (hi - lo) // step), label=label)
            return bool(v) if name in ("warm_device", "warm_host") else v

        def start_drawn(self: Any, data: Any) -> None:
            vals: dict[str, Any] = {n: draw(data, n, n) for n in SCALAR_PARAMS}
            for n in REQ_PARAMS:
                vals[n] = tuple(draw(data, n, f"{n}[{r}]") for r in range(cfg.num_reqs))
            for n in WARM_PARAMS:
                vals[n] = tuple(draw(data, n, f"{n}[{a}]") for a in range(cfg.warm_atoms))
            p = Params(**vals)
            assume(bool(system.params_ok(system.ctx(Concrete(), p))))
            begin(self, p)

        ns["start"] = initialize(data=st.data())(start_drawn)

    def started(self: Any) -> bool:
        return hasattr(self, "state")

    for action in system.actions:

        def take(self: Any, data: Any, action: str = action) -> None:
            x = system.ctx(Concrete(DrawOracle(data)), self.params)
            if not bool(system.enabled(x, self.state, action)):
                # the scheduler stopped (an allocation failure or its assertion): no step leaves this
                # state, so the run is over; the rule stays available, or Hypothesis raises "no
                # progress can be made" until the run's step count is used up (a second, `halted`
                # rule would change every run's draws: the rule choice would cost one)
                return
            try:
                nxt = system.step(x, self.state, action)
            except Infeasible:
                rec.infeasible += 1
                return
            rec.steps += 1
            self.actions.append((action, dict(x.ops.picks)))
            self.state = nxt

        take.__name__ = action
        ns[action] = precondition(started)(rule(data=st.data())(take))

    for name in props:
        prop = PROPERTIES[name]

        def check(self: Any, prop: Any = prop) -> None:
            if not hasattr(self, "state") or (only_at is not None and len(self.actions) != only_at):
                return
            x = system.ctx(Concrete(), self.params)
            if rec.witness.get(prop.name) is None and prop.witness(x, self.state):
                rec.witness[prop.name] = len(self.actions)
            if not prop.holds(x, self.state):
                rec.fail(prop.name, self.params, self.actions)
                raise PropertyFailed(f"{prop.name} violated after {len(self.actions)} steps")

        check.__name__ = f"invariant_{name}"
        ns[check.__name__] = invariant()(check)

    return type(f"KvmcMachine_{system.cfg.name}", (RuleBasedStateMachine,), ns)


MAX_LISTED_POINTS = 20_000


def domain_points(system: System) -> list[Params] | None:
    """The explicit bounds' points (satisfying params_ok), or None when there are too many to list
    (then each run draws its parameters)."""
    from model.config import REQ_PARAMS, SCALAR_PARAMS, WARM_PARAMS, _values

    cfg = system.cfg
    size = 1
    for n in SCALAR_PARAMS:
        size *= len(_values(cfg, n, True))
    for n in REQ_PARAMS:
        size *= len(_values(cfg, n, True)) ** cfg.num_reqs
    for n in WARM_PARAMS:
        size *= len(_values(cfg, n, True)) ** cfg.warm_atoms
    return param_points(system) if size <= MAX_LISTED_POINTS else None


def _run_machine(machine: type[RuleBasedStateMachine], examples: int, depth: int, phases: tuple[Any, ...],
                 give_up: Callable[[], bool] | None = None) -> None:
    """Run the generated machine: `examples` runs of at most `depth` steps, derandomized, quiet; a
    property failure (or `HuntOver`) ends it, and the `Recorder` has what it saw. No `explain`
    phase: it replays a lot."""
    # the @initialize rule counts as one of stateful_step_count's steps: + 1 for `depth` real steps
    conf = settings(max_examples=examples, stateful_step_count=max(depth, 1) + 1, deadline=None, derandomize=True,
                    database=None, verbosity=Verbosity.quiet, report_multiple_bugs=False,
                    suppress_health_check=list(HealthCheck), phases=phases)
    try:
        run_state_machine_as_test(machine, settings=conf)
    except (PropertyFailed, HuntOver):
        pass
    except Flaky:
        # a run `give_up` ended (HuntOver) and Hypothesis replayed it after the clock moved on: the
        # replay drew differently, which is the hunt being over, not a flaky strategy
        if give_up is None or not give_up():
            raise


def hunt(system: System, prop: str, depth: int, examples: int = DEFAULT_EXAMPLES, points: list[Params] | None = None,
         seed_label: str = "") -> tuple[Trace | None, Recorder]:
    """Run the generated machine with `prop` as its only invariant; the shortest failing trace, if any."""
    pts = points if points is not None else domain_points(system)
    rec = Recorder()
    machine = machine_for(system, [prop], pts, rec)
    _run_machine(machine, examples, depth, (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink))
    if prop not in rec.failures:
        return None, rec
    _n, params, actions = rec.failures[prop]
    states, picks = run_concrete(system, params, actions)
    steps = [Step(a, picks[t], states[t + 1]) for t, (a, _p) in enumerate(actions)]
    tr = Trace(system.cfg, system.design, params, states[0], steps, prop, "random")
    tr.meta["random_examples"] = examples
    return tr, rec


SEED_STEPS = 900  # steps per seed hunt: 300 runs at depth 3 (#22213 needs about 180), fewer deeper down,
# so a hunt costs about the same at every depth (0.6-1.8 s with nothing found) while z3's queries grow


@dataclass
class Seed:
    """A concrete run that breaks a property: its parameters and, per step, the choices it made
    (named as the model names them, so they pin the z3 unrolling's `name@t` choice symbols)."""

    params: Params
    picks: list[dict[str, Any]]
    props: list[str]  # the properties it was seen to break
    runs: int  # runs the hunt tried


def seed_run(system: System, props: list[str], depth: int, examples: int | None = None,
             give_up: Callable[[], bool] | None = None) -> Seed | None:
    """A run of exactly `depth` steps that breaks one of `props`, drawn over the config's symbolic
    bounds, or None. The BMC asks for one before a depth's query (checker/engines/bmc.py, `seeder`): pinned
    to its parameters and choices, z3 answers at once, and the model it gives is minimised and
    re-run like any other, so the trace is still z3's and still the shortest (every shorter depth
    was unsat). A failing run shorter than `depth` is not a seed (it cannot happen when the BMC
    has shown depth - 1 safe over the same domain). Unshrunk: the BMC minimises the numbers.
    `examples`: runs to try (default `SEED_STEPS // depth`, at least 30)."""
    if examples is None:
        examples = max(30, SEED_STEPS // max(depth, 1))
    rec = Recorder()
    machine = machine_for(system, props, None, rec, wide=True, give_up=give_up, only_at=depth)
    _run_machine(machine, examples, depth, (Phase.explicit, Phase.reuse, Phase.generate), give_up)  # unshrunk
    found = [(n, p, a) for n, (n_steps, p, a) in rec.failures.items() if n_steps == depth]
    if not found:
        return None
    _n, params, actions = found[0]
    return Seed(params, [dict(picks) for _a, picks in actions], [n for n, p, a in found if a == actions], rec.runs)


def check_config(design: Design, cfg: Config, props: list[str], depth: int, prove: bool = True,
                 timeout_ms: int = 0, progress: Any = None, minimize: bool = True,
                 keep_going: bool = True, examples: int = DEFAULT_EXAMPLES) -> Any:
    """`checker/engines/run.py::check_config` for the random engine: one generated machine per property,
    `examples` runs of at most `depth` steps each (`prove`, `timeout_ms`, `minimize` have no
    effect: Hypothesis shrinks every failure)."""

    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    system = System(cfg, design)
    points = domain_points(system)
    results: dict[str, Result] = {}
    status = {p: "open" for p in props}
    for i, name in enumerate(props):
        ts = time.perf_counter()
        trace, rec = hunt(system, name, depth, examples, points)
        wd = rec.witness.get(name)
        if trace is not None:
            results[name] = Result(name, Verdict.VIOLATED, trace.depth, trace, wd, seconds=time.perf_counter() - ts)
            status[name] = f"violated@{trace.depth}"
        else:
            seen = f"witness met at step {wd}" if wd is not None else "witness never met"
            results[name] = Result(name, Verdict.UNKNOWN, depth, None, wd, seconds=time.perf_counter() - ts,
                                   reason=f"no violation in {rec.runs} random runs of at most {depth} steps ({seen}); "
                                          "random testing proves nothing")
            status[name] = "no failure"
        results[name].meta.update(engine="random", runs=rec.runs, steps=rec.steps, infeasible_draws=rec.infeasible,
                                  parameter_points=len(points) if points is not None else "drawn")
        if progress:
            progress(cfg.name, depth, time.perf_counter() - t0, dict(status))
        if trace is not None and not keep_going:
            for rest in props[i + 1:]:
                results[rest] = Result(rest, Verdict.UNKNOWN, 0, None, None,
                                       reason="not checked: stopped at the first violation")
            break
    return ConfigReport(cfg.name, {p: results[p] for p in props}, time.perf_counter() - t0, {})
