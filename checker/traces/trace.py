"""Counterexample traces: the data, the concrete re-run that every engine's trace goes through,
and the step table people read.

A `Trace` is a config, a design, the parameters, the initial state and one `Step` per scheduler
iteration (the action name, the named choices it made, the state after it). `run_concrete`
re-executes the action names and choices through the concrete interpretation of the model and
checks each state against the recorded one: a trace found by z3 that the concrete model does not
follow is an encoding bug (`TraceMismatch`), reported with both values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.config import Config, Params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import BATCH_NAMES, FIELD_NAMES, OOM_NAMES, STATUS_NAMES, State
from model.system import System


class TraceMismatch(Exception):
    """The concrete model does not follow a recorded trace."""

    def __init__(self, step: int, field: str, recorded: Any, concrete: Any, why: str = "",
                 recorded_state: State | None = None, concrete_state: State | None = None) -> None:
        self.step, self.field, self.recorded, self.concrete = step, field, recorded, concrete
        self.recorded_state, self.concrete_state = recorded_state, concrete_state
        msg = why or f"diverged at step {step}: {field}: trace={recorded!r}, model={concrete!r}"
        super().__init__(msg)

    def both_states(self) -> str:
        """The recorded and the concrete state at the divergence, every differing field side by side."""
        a, b = self.recorded_state, self.concrete_state
        if a is None or b is None:
            return str(self)
        rows = [f"{f}: trace={getattr(a, f)!r} model={getattr(b, f)!r}" for f in FIELD_NAMES if getattr(a, f) != getattr(b, f)]
        return f"{self}; state {self.step} differs in " + "; ".join(rows)


@dataclass
class Step:
    action: str
    picks: dict[str, Any]
    state: State


@dataclass
class Trace:
    cfg: Config
    design: Design
    params: Params
    init: State
    steps: list[Step]
    prop: str | None = None
    engine: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    # a lasso (a liveness counterexample, checker/engines/liveness.py): the last state equals state
    # `loop`, and steps loop+1 .. depth repeat forever (ITF's `loop` field); None for a finite trace
    loop: int | None = None
    # what reading it found odd but not wrong (checker/traces/itf.py: a `#meta` label that differs from this kvmc's)
    warnings: list[str] = field(default_factory=list)

    @property
    def states(self) -> list[State]:
        return [self.init] + [s.state for s in self.steps]

    @property
    def depth(self) -> int:
        return len(self.steps)

    @property
    def actions(self) -> list[tuple[str, dict[str, Any]]]:
        return [(s.action, s.picks) for s in self.steps]


class DictOracle:
    """Answers choices from a recorded `nondetPicks` map; a choice missing from it is False / lo
    unless `strict`."""

    def __init__(self, picks: dict[str, Any], strict: bool = False) -> None:
        self.picks = picks
        self.strict = strict

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        if name not in self.picks:
            if self.strict:
                raise Infeasible(f"choice {name} is not in the recorded picks")
            return lo
        return int(self.picks[name])

    def pick_bool(self, name: str) -> bool:
        if name not in self.picks:
            if self.strict:
                raise Infeasible(f"choice {name} is not in the recorded picks")
            return False
        return bool(self.picks[name])


def first_difference(a: State, b: State) -> tuple[str, Any, Any] | None:
    for f in FIELD_NAMES:
        va, vb = getattr(a, f), getattr(b, f)
        if va != vb:
            if isinstance(va, tuple):
                for i, (u, v) in enumerate(zip(va, vb)):
                    if u != v:
                        return f"{f}[{i}]", u, v
            return f, va, vb
    return None


def run_concrete(system: System, params: Params, actions: list[tuple[str, Any]], oracle_for: Any = None,
                 expected: list[State] | None = None, check_frames: bool = True) -> tuple[list[State], list[dict[str, Any]]]:
    """Run the actions through the concrete model. `actions` holds (name, picks) pairs, or
    `oracle_for(t)` gives an oracle per step. With `expected`, each state must match."""
    x0 = system.ctx(Concrete(), params, check_frames)
    s = system.init(x0)
    if expected is not None:
        d = first_difference(expected[0], s)
        if d:
            raise TraceMismatch(0, d[0], d[1], d[2], recorded_state=expected[0], concrete_state=s)
    states, picks = [s], []
    for t, (name, recorded) in enumerate(actions):
        oracle = oracle_for(t) if oracle_for is not None else DictOracle(recorded)
        x = system.ctx(Concrete(oracle), params, check_frames)
        if system.enabled(x, s) is False:
            raise TraceMismatch(t + 1, "enabled", True, False, f"diverged at step {t + 1}: action {name} is not enabled (oom={s.oom})")
        try:
            s = system.step(x, s, name)
        except Infeasible as e:
            raise TraceMismatch(t + 1, "choice", "feasible", str(e), f"diverged at step {t + 1}: {e}") from e
        if expected is not None:
            d = first_difference(expected[t + 1], s)
            if d:
                raise TraceMismatch(t + 1, d[0], d[1], d[2], recorded_state=expected[t + 1], concrete_state=s)
        states.append(s)
        picks.append(dict(x.ops.picks))
    return states, picks


# -- rendering ------------------------------------------------------------------------------------
def _fmt(field_name: str, v: Any) -> str:
    base = field_name.split("[")[0]
    if base == "status":
        return STATUS_NAMES[v]
    if base == "last_batch":
        return BATCH_NAMES[v]
    if base == "oom":
        return OOM_NAMES[v]
    if base in ("last_node", "swa_lock_top", "load_back_node", "load_back_swa_top", "slot_last_node", "slot_swa_lock_top"):
        return {-1: "root", -2: "virtual"}.get(v, f"n{v}")
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


SHORT = {
    "kv_allocated_len": "A",
    "kv_committed_len": "C",
    "cache_protected_len": "P",
    "swa_evicted_seqlen": "E",
    "origin_input_len": "input",
    "output_len": "out",
    "slot_kv_allocated_len": "slot.A",
    "slot_kv_committed_len": "slot.C",
    "slot_cache_protected_len": "slot.P",
    "slot_swa_evicted_seqlen": "slot.E",
}


def diff(a: State, b: State, cfg: Config) -> list[str]:
    """The fields that changed, as `name=old->new`, grouped per request / node / slot."""
    out = []
    for f in FIELD_NAMES:
        va, vb = getattr(a, f), getattr(b, f)
        if va == vb:
            continue
        if isinstance(va, tuple):
            for i, (u, v) in enumerate(zip(va, vb)):
                if u != v:
                    if f.startswith("node_"):
                        who = f"n{i}"
                        name = f[5:]
                    elif f.startswith("slot_"):
                        who = f"session{i}"
                        name = SHORT.get(f, f[5:])
                    else:
                        who = f"r{i}"
                        name = SHORT.get(f, f)
                    out.append(f"{who}.{name}={_fmt(f, u)}->{_fmt(f, v)}")
        else:
            out.append(f"{f}={_fmt(f, va)}->{_fmt(f, vb)}")
    return out


def describe_picks(picks: dict[str, Any]) -> str:
    shown = []
    for k, v in picks.items():
        if v is False:
            continue
        shown.append(k if v is True else f"{k}={v}")
    return ", ".join(shown)


def step_table(trace: Trace, verdict_line: str = "") -> str:
    """mypyvy-style: the parameters, then per step the action, its choices and only what changed;
    the violated property last, with its equation and values."""
    lines = []
    p = trace.params.as_dict()
    shown = {k: v for k, v in p.items() if not (isinstance(v, tuple) and len(v) == 0)}
    lines.append(f"design {trace.design.name} | config {trace.cfg.name} | page_size={trace.cfg.page_size}")
    lines.append("params " + " ".join(f"{k}={v}" for k, v in shown.items()))
    lines.append("state 0: " + initial_summary(trace))
    states = trace.states
    for t, st in enumerate(trace.steps, 1):
        if trace.loop is not None and t == trace.loop + 1:
            lines.append(f"loop: steps {t}..{trace.depth} repeat forever (state {trace.depth} = state {trace.loop})")
        mark = "  (loop)" if trace.loop is not None and t > trace.loop else ""
        lines.append(f"step {t}: {st.action}" + (f"  [{describe_picks(st.picks)}]" if describe_picks(st.picks) else "") + mark)
        for d in diff(states[t - 1], states[t], trace.cfg):
            lines.append(f"    {d}")
    if trace.loop is not None:
        lines.append(f"back to state {trace.loop}: the loop repeats")
    if verdict_line:
        lines.append(verdict_line)
    return "\n".join(lines)


def initial_summary(trace: Trace) -> str:
    s = trace.init
    parts = [f"full_available={s.full_available}"]
    if trace.cfg.hybrid_swa:
        parts.append(f"swa_available={s.swa_available}")
    nodes = [f"n{a}:{s.node_len[a]}{'' if s.node_device[a] else '(host)'}" for a in range(trace.cfg.num_atoms) if s.node_len[a]]
    if nodes:
        parts.append("tree " + " ".join(nodes))
    return ", ".join(parts)
