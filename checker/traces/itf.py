"""Counterexamples as ITF JSON (Apalache ADR-015, the format Quint emits), readable by itf-py.

    {"#meta": {... design, fixes, mutants, property, config, depth, engine, kvmc_version,
               sglang_commit, verdict, violation ...},
     "params": ["full_tokens", ...],          # constants; their values are in every state
     "vars": [<state fields>, "mbt::actionTaken", "mbt::nondetPicks"],
     "states": [{"#meta": {"index": 0}, "full_tokens": {"#bigint": "8"}, ...,
                 "mbt::actionTaken": "init", "mbt::nondetPicks": {}}, ...],
     "loop": 3}                               # a lasso only (liveness): the last state equals states[3]

Integers are `{"#bigint": "n"}`, per-request / per-node / per-slot fields are JSON lists, and each
state after the first records the action taken and its named choices (`mbt::nondetPicks`, each a
Quint option `{"tag": "Some", "value": v}`), so a trace replays by action name and choices. The
picks are an ITF `#map` from choice name to option rather than Quint's record, because kvmc's
choice names (`prefill.evict[3]`) are not identifiers, and itf-py turns records into namedtuples.

A lasso (a liveness counterexample) has ADR-015's `loop`: the index of the state its loop starts
at. kvmc's last state is that state again, so every step of the loop is recorded with its choices
and the recurrence can be checked (reading refuses a `loop` whose state is not the last one).

Reading is strict: anything that is not a kvmc trace (bad JSON, a missing or mistyped field, an
unknown action, config, fix or mutant) raises `ItfError` naming the file, the step and the field.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from model.config import Params
from model.designs import FIXES, SGLANG_COMMIT, Design
from model.state import FIELD_NAMES, State
from model.system import ACTIONS

from checker.traces.trace import Step, Trace

KVMC_VERSION = "0.1.0"
ACTION_TAKEN = "mbt::actionTaken"
NONDET_PICKS = "mbt::nondetPicks"
PARAM_NAMES = tuple(Params.__dataclass_fields__)


class ItfError(ValueError):
    """A file that is not a readable kvmc ITF trace."""

    def __init__(self, file: str, where: str, message: str) -> None:
        self.file, self.where = file, where
        super().__init__(f"{file}: {where}: {message}")


# -- values ------------------------------------------------------------------------------------
def enc(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"#bigint": str(v)}
    if isinstance(v, (tuple, list)):
        return [enc(e) for e in v]
    if isinstance(v, dict):
        return {k: enc(e) for k, e in v.items()}
    if isinstance(v, str):
        return v
    return {"#unserializable": repr(v)}


def _dec(v: Any, file: str, where: str) -> Any:
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, dict):
        if "#bigint" in v:
            try:
                return int(v["#bigint"])
            except (TypeError, ValueError):
                raise ItfError(file, where, f"#bigint {v['#bigint']!r} is not an integer") from None
        if "#tup" in v:
            return tuple(_dec(e, file, where) for e in v["#tup"])
        if set(v) == {"tag", "value"}:
            return _dec(v["value"], file, where)
        return {k: _dec(e, file, f"{where}.{k}") for k, e in v.items()}
    if isinstance(v, list):
        return tuple(_dec(e, file, where) for e in v)
    if isinstance(v, int):  # plain JSON numbers are not ITF, but accept them from hand-written traces
        return v
    raise ItfError(file, where, f"value {v!r} is not an ITF value")


# -- write ---------------------------------------------------------------------------------------
def to_itf(trace: Trace, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params = trace.params.as_dict()
    m = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": "kvmc",
        "description": f"kvmc {trace.engine} trace of {trace.prop or 'a run'} on config {trace.cfg.name}, design {trace.design.name}",
        "kvmc_version": KVMC_VERSION,
        "sglang_commit": SGLANG_COMMIT,
        "design": trace.design.name,
        "fixes": {f: v for f, v in trace.design.flags().items()},
        "mutants": sorted(trace.design.mutants),
        "config": trace.cfg.name,
        "page_size": trace.cfg.page_size,
        "property": trace.prop,
        "depth": trace.depth,
        "engine": trace.engine,
    }
    m.update(trace.meta)
    if meta:
        m.update(meta)
    states = []
    for i, st in enumerate(trace.states):
        d: dict[str, Any] = {"#meta": {"index": i}}
        for k, v in params.items():
            d[k] = enc(v)
        for f in FIELD_NAMES:
            d[f] = enc(getattr(st, f))
        if i == 0:
            d[ACTION_TAKEN] = "init"
            d[NONDET_PICKS] = {"#map": []}
        else:
            step = trace.steps[i - 1]
            d[ACTION_TAKEN] = step.action
            d[NONDET_PICKS] = {"#map": [[k, {"tag": "Some", "value": enc(v)}] for k, v in step.picks.items()]}
        states.append(d)
    out = {"#meta": m, "params": list(PARAM_NAMES), "vars": [*FIELD_NAMES, ACTION_TAKEN, NONDET_PICKS], "states": states}
    if trace.loop is not None:  # ADR-015's optional `loop`: the state the lasso's loop starts at
        out["loop"] = trace.loop
    return out


def write(path: str | Path, trace: Trace, meta: dict[str, Any] | None = None) -> Path:
    """Write atomically (a temporary file renamed into place): nothing half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(to_itf(trace, meta), indent=1)
    fd, tmp = tempfile.mkstemp(prefix=".kvmc-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


# -- read ----------------------------------------------------------------------------------------
def _design(m: dict[str, Any], file: str) -> Design:
    fixes = m.get("fixes")
    if not isinstance(fixes, dict):
        raise ItfError(file, "#meta.fixes", "missing or not an object of fix -> variant")
    out: dict[str, str | None] = {}
    for f, v in fixes.items():
        if f not in FIXES:
            raise ItfError(file, f"#meta.fixes.{f}", f"unknown fix; expected one of {sorted(FIXES)}")
        if v is not None and v not in FIXES[f].variants:
            raise ItfError(file, f"#meta.fixes.{f}", f"unknown variant {v!r}; expected null or one of {list(FIXES[f].variants)}")
        out[f] = v
    for f in FIXES:
        out.setdefault(f, None)
    mutants = m.get("mutants", [])
    if not isinstance(mutants, list) or not all(isinstance(x, str) for x in mutants):
        raise ItfError(file, "#meta.mutants", "expected a list of mutant names")
    from model.mutants import available

    known = available()
    for mu in mutants:
        if mu not in known:
            raise ItfError(file, "#meta.mutants", f"unknown mutant {mu!r}; expected one of {sorted(known)}")
    return Design(str(m.get("design", "trace")), out, frozenset(mutants))


def read(path: str | Path) -> Trace:
    file = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ItfError(file, "file", f"cannot read: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ItfError(file, f"line {e.lineno} column {e.colno}", f"not valid JSON ({e.msg})") from None
    return from_itf(data, file)


# State fields added after traces were checked in, with the value they had in every state before
# (the feature did not exist): a trace without them reads as one with them at that value.
LATER_FIELDS = {"swa_branching_seqlen": lambda cfg: {"#tup": [{"#bigint": "0"}] * cfg.num_reqs}}


def from_itf(data: Any, file: str = "<trace>") -> Trace:
    from specs.configs import CONFIGS

    if not isinstance(data, dict):
        raise ItfError(file, "top level", "expected a JSON object with #meta and states")
    m = data.get("#meta")
    if not isinstance(m, dict):
        raise ItfError(file, "#meta", "missing; a kvmc trace records its design, config and property there")
    cfg_name = m.get("config")
    if cfg_name not in CONFIGS:
        raise ItfError(file, "#meta.config", f"unknown config {cfg_name!r}; expected one of {list(CONFIGS)}")
    cfg = CONFIGS[cfg_name]
    design = _design(m, file)
    states = data.get("states")
    if not isinstance(states, list) or not states:
        raise ItfError(file, "states", "missing or empty")
    parsed: list[State] = []
    params: Params | None = None
    steps: list[Step] = []
    for i, raw in enumerate(states):
        where = f"state {i}"
        if not isinstance(raw, dict):
            raise ItfError(file, where, "expected an object")
        vals: dict[str, Any] = {}
        for f in FIELD_NAMES:
            if f not in raw and f in LATER_FIELDS:  # a trace written before the field existed
                raw = {**raw, f: LATER_FIELDS[f](cfg)}
            if f not in raw:
                raise ItfError(file, f"{where} field {f}", "missing")
            vals[f] = _dec(raw[f], file, f"{where} field {f}")
        pv: dict[str, Any] = {}
        for name in PARAM_NAMES:
            if name not in raw:
                raise ItfError(file, f"{where} param {name}", "missing")
            pv[name] = _dec(raw[name], file, f"{where} param {name}")
        try:
            st = State(**vals)
            p = Params(**pv)
        except TypeError as e:
            raise ItfError(file, where, str(e)) from None
        _check_shape(st, p, cfg, file, where)
        if params is None:
            params = p
        elif p != params:
            raise ItfError(file, where, "parameters change between states (they are constants)")
        parsed.append(st)
        if i > 0:
            action = raw.get(ACTION_TAKEN)
            if action not in ACTIONS:
                raise ItfError(file, f"{where} field {ACTION_TAKEN}", f"unknown action {action!r}; expected one of {list(ACTIONS)}")
            picks = raw.get(NONDET_PICKS, {})
            if isinstance(picks, dict) and "#map" in picks:
                pairs = picks["#map"]
                if not isinstance(pairs, list) or not all(
                        isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in pairs):
                    raise ItfError(file, f"{where} field {NONDET_PICKS}", "#map must be a list of [choice name, value] pairs")
                picks = dict((k, v) for k, v in pairs)
            if not isinstance(picks, dict):
                raise ItfError(file, f"{where} field {NONDET_PICKS}", "expected an object of choice -> value")
            dp = {}
            for k, v in picks.items():
                val = _dec(v, file, f"{where} pick {k}")
                if not isinstance(val, (bool, int)):
                    raise ItfError(file, f"{where} pick {k}", f"expected a boolean or an integer, got {val!r}")
                dp[k] = val
            steps.append(Step(action, dp, st))
    assert params is not None
    loop = data.get("loop")
    if loop is not None:  # a lasso: states[loop] recurs as the last state (kvmc records every step of the loop)
        if isinstance(loop, bool) or not isinstance(loop, int) or not 0 <= loop < len(parsed) - 1:
            raise ItfError(file, "loop", f"{loop!r} is not the index of a state before the last (0..{len(parsed) - 2})")
        if parsed[loop] != parsed[-1]:
            raise ItfError(file, "loop", f"the last state (state {len(parsed) - 1}) is not state {loop}: not a lasso")
    meta = {k: v for k, v in m.items() if k not in ("config", "fixes", "mutants", "design", "property", "engine")}
    return Trace(cfg, design, params, parsed[0], steps, m.get("property"), str(m.get("engine", "")), meta, loop)


def _check_shape(st: State, p: Params, cfg: Any, file: str, where: str) -> None:
    from model.state import NODE_FIELDS, REQ_FIELDS, SLOT_FIELDS

    sizes = {**{f: cfg.num_reqs for f in REQ_FIELDS}, **{f: cfg.num_atoms for f in NODE_FIELDS},
             **{f: len(cfg.streaming_sessions) for f in SLOT_FIELDS}}
    for f, n in sizes.items():
        v = getattr(st, f)
        if not isinstance(v, tuple) or len(v) != n:
            raise ItfError(file, f"{where} field {f}", f"expected a list of {n} values for config {cfg.name}")
        for e in v:
            if not isinstance(e, (bool, int)):
                raise ItfError(file, f"{where} field {f}", f"expected integers/booleans, got {e!r}")
    for f in FIELD_NAMES:
        if f in sizes:
            continue
        v = getattr(st, f)
        if not isinstance(v, (bool, int)):
            raise ItfError(file, f"{where} field {f}", f"expected an integer, got {v!r}")
    for name in ("input_len", "max_new_tokens"):
        if len(getattr(p, name)) != cfg.num_reqs:
            raise ItfError(file, f"{where} param {name}", f"expected {cfg.num_reqs} values")
    for name in ("warm_len", "warm_device", "warm_host"):
        if len(getattr(p, name)) != cfg.warm_atoms:
            raise ItfError(file, f"{where} param {name}", f"expected {cfg.warm_atoms} values")
