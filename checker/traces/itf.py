"""Counterexamples as ITF JSON (Apalache ADR-015, the format Quint emits), readable by itf-py.

    {"#meta": {... design, fixes, mutants, property, config, depth, engine, kvmc_version,
               sglang_release, verdict, violation, patches ...},
     "params": ["full_tokens", ...],          # constants; their values are in every state
     "vars": [<state fields>, "mbt::actionTaken", "mbt::nondetPicks"],
     "states": [{"#meta": {"index": 0}, "full_tokens": {"#bigint": "8"}, ...,
                 "mbt::actionTaken": "init", "mbt::nondetPicks": {"#map": []}}, ...],
     "loop": 3}                               # a lasso only (liveness): the last state equals states[3]

Integers are `{"#bigint": "n"}` (ADR-015 since 2023-09: no JSON numbers), per-request / per-node /
per-slot fields are JSON lists, and each state after the first records the action taken and its
named choices (`mbt::nondetPicks`), so a trace replays by action name and choices. The picks are an
ITF `#map` from choice name to a Quint option rather than Quint's record, because kvmc's choice
names (`prefill.evict[3]`) are not identifiers, and itf-py turns records into namedtuples. A boolean
pick is `{"tag": "Some", "value": true}`; an integer pick is `{"tag": "Some", "value": {"value":
{"#bigint": "3"}}}`, a variant whose payload is a one-field record: itf-py 0.5.0 reads any object
payload as a record, so Quint's own `{"tag": "Some", "value": {"#bigint": "3"}}` makes it fail
(`#bigint` is no field name), while this form reads as `Some(value=3)`, the very object it makes of
`Some(true)`. Reading accepts both, and Quint's `None` (a choice not made).

A lasso (a liveness counterexample) has ADR-015's `loop`: the index of the state its loop starts
at. kvmc's last state is that state again, so every step of the loop is recorded with its choices
and the recurrence can be checked (reading refuses a `loop` whose state is not the last one).

Reading is one validator, used by `kvmc show`, `kvmc replay` and every loader (`read`,
`from_itf`): anything that is not a valid kvmc trace raises `ItfError` naming the file, the state
and the field, in this order of checks:
1. structure: a JSON object with `#meta`, `vars` (every state field and the two `mbt::` variables,
   no duplicates), `params` (or the parameters among `vars`: a trace in the shape Quint's
   simulator writes), `states`, each state holding exactly those variables and its `#meta.index`;
2. `#meta`: config, fixes, mutants, patches, property, engine, depth (= the steps), page size,
   verdict, `kvmc_version` and `sglang_release` (older traces: `sglang_commit`) (a malformed one is
   refused; a well-formed one that differs from what this kvmc's design of that name models is a warning: the re-run below, not the label, decides whether the
   trace is one of this model's runs);
3. types and ranges of every value (statuses, batch kinds, node indices of the config's tree,
   non-negative counts and lengths, parameters);
4. the trace re-run through the model (`check=True`, the default): the parameters satisfy
   `params_ok`, state 0 is the initial state, every step from the recorded state with the recorded
   choices gives the next recorded state, and the choices recorded are exactly the ones the model
   asks (a counterexample to induction starts anywhere: its steps are re-run from their states);
5. the recorded verdict re-checked: a `violated` trace breaks its property in its last state and
   in no earlier one, a trace recorded as holding breaks it nowhere.
A trace that fails any of these is bad input (`kvmc replay`: error, exit 2), never a divergence.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from model.config import Params
from model.designs import CURRENT_RELEASE, FIXES, Design, sglang_release
from model.state import BOOL_FIELDS, FIELD_NAMES, State
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


def enc_pick(v: Any) -> dict[str, Any]:
    """A choice made: Quint's `Some`, an integer inside a one-field record (see the module docstring)."""
    if isinstance(v, bool):
        return {"tag": "Some", "value": v}
    return {"tag": "Some", "value": {"value": enc(v)}}


def _patches_meta(design: Design) -> list[dict[str, str]]:
    """The reviewer's patch files a design runs (model/patch.py): enough to load them again."""
    out = []
    for name, fn in sorted(design.overrides.items()):
        where, sha = getattr(fn, "where", None), getattr(fn, "sha", None)
        if where is not None and sha is not None:
            out.append({"transition": name, "file": str(Path(where).resolve()), "sha256": sha})
    return out


# -- write ---------------------------------------------------------------------------------------
def to_itf(trace: Trace, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params = trace.params.as_dict()
    m = {
        "format": "ITF",
        "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
        "source": "kvmc",
        "description": f"kvmc {trace.engine} trace of {trace.prop or 'a run'} on config {trace.cfg.name}, design {trace.design.name}",
        "kvmc_version": KVMC_VERSION,
        "sglang_release": sglang_release(trace.design.name) or CURRENT_RELEASE,
        "design": trace.design.name,
        "fixes": {f: v for f, v in trace.design.flags().items()},
        "mutants": sorted(trace.design.mutants),
        "config": trace.cfg.name,
        "page_size": trace.cfg.page_size,
        "property": trace.prop,
        "depth": trace.depth,
        "engine": trace.engine,
    }
    if trace.design.overrides:
        m["patches"] = _patches_meta(trace.design)
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
            d[NONDET_PICKS] = {"#map": [[k, enc_pick(v)] for k, v in step.picks.items()]}
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
# the recorded verdicts kvmc writes, and what each claims about `#meta.property`
VIOLATED = ("violated", "counterexample to induction")
HOLDS = ("holds", "passed")
EXPECTED = ("violation", "pass")
NODE_REF_FIELDS = frozenset({"last_node", "swa_lock_top", "load_back_node", "load_back_swa_top", "slot_last_node",
                             "slot_swa_lock_top"})
SIGNED_FIELDS = frozenset({"full_evictable_drift", "full_protected_drift", "swa_evictable_drift", "swa_protected_drift"})
ENUM_FIELDS = {"status": 5, "last_batch": 3, "oom": 5}  # field -> number of values (0 .. n-1; model/state.py)
BOOL_PARAMS = frozenset({"warm_device", "warm_host"})
_HEX40 = re.compile(r"[0-9a-f]{40}")
_VERSION = re.compile(r"\d+\.\d+(\.\d+)?([.+-][0-9A-Za-z.]+)?")


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
        out.setdefault(f, LATER_FIXES.get(f))
    mutants = m.get("mutants", [])
    if not isinstance(mutants, list) or not all(isinstance(x, str) for x in mutants):
        raise ItfError(file, "#meta.mutants", "expected a list of mutant names")
    from model.mutants import available

    known = available()
    for mu in mutants:
        if mu not in known:
            raise ItfError(file, "#meta.mutants", f"unknown mutant {mu!r}; expected one of {sorted(known)}")
    name = m.get("design", "trace")
    if not isinstance(name, str):
        raise ItfError(file, "#meta.design", f"expected the design's name (a string), got {name!r}")
    return Design(name, out, frozenset(mutants), _patches(m, file))


def _patches(m: dict[str, Any], file: str) -> dict[str, Any]:
    """`#meta.patches`: the patch files the trace's design ran, loaded again (the same bytes)."""
    raw = m.get("patches")
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise ItfError(file, "#meta.patches", "expected a list of {transition, file, sha256}")
    from model.patch import PatchError, load_patch

    out: dict[str, Any] = {}
    for i, d in enumerate(raw):
        where = f"#meta.patches[{i}]"
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ("transition", "file", "sha256")):
            raise ItfError(file, where, "expected {\"transition\": ..., \"file\": ..., \"sha256\": ...} (strings)")
        try:
            name, fn = load_patch(d["file"])
        except PatchError as e:
            raise ItfError(file, where, f"the trace ran patch {d['file']} and it cannot be loaded now ({e})") from None
        if name != d["transition"]:
            raise ItfError(file, where, f"patch {d['file']} replaces {name}, the trace says {d['transition']}")
        if fn.sha != d["sha256"]:
            raise ItfError(file, where, f"patch {d['file']} changed since the trace was written (sha256 {d['sha256'][:12]} "
                                        f"recorded, {fn.sha[:12]} now): re-run the review that wrote it")
        if name in out:
            raise ItfError(file, where, f"transition {name} patched twice")
        out[name] = fn
    return out


def read(path: str | Path, check: bool = True, warn: bool = True) -> Trace:
    """Read and validate a trace file (the module docstring lists the checks; `check=False` skips
    the model re-run and the verdict). Warnings (a `#meta` label that differs from this kvmc's)
    are in `Trace.warnings`, and printed to stderr when `warn`."""
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ItfError(file, "file", f"cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ItfError(file, "file", f"not UTF-8 text (byte {e.start}): not an ITF trace") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ItfError(file, f"line {e.lineno} column {e.colno}", f"not valid JSON ({e.msg})") from None
    except (RecursionError, ValueError) as e:
        raise ItfError(file, "file", f"not valid JSON ({type(e).__name__})") from None
    tr = from_itf(data, file, check)
    if warn:
        for w in tr.warnings:
            print(f"kvmc: warning: {file}: {w}", file=sys.stderr)
    return tr


# Design flags added after traces were checked in, with the variant every design had before (the
# model behaved so): a trace without the flag reads as one with it at that variant.
LATER_FIXES = {"uncached_skips_released_req": "on", "swa_release_page_margin": "on",
               # before the flag, `swa_leaf_window_cap` alone decided the cap (a1df439 split it by tree)
               "unified_radix_default": "on"}

# State fields added after traces were checked in, with the value they had in every state before
# (the feature did not exist): a trace without them reads as one with them at that value.
LATER_FIELDS = {"swa_branching_seqlen": lambda cfg: [{"#bigint": "0"}] * cfg.num_reqs,
                "needless_retract": lambda cfg: False, "needless_recompute": lambda cfg: False,
                "unfiltered": lambda cfg: [False] * cfg.num_reqs, "batch_is_full": lambda cfg: False,
                "slot_turn_saved": lambda cfg: [False] * len(cfg.streaming_sessions),
                "slot_detached": lambda cfg: [False] * len(cfg.streaming_sessions)}


def _with_later_fields(data: Any, vars_: list[str], cfg: Any) -> tuple[Any, list[str]]:
    """`data` with the LATER_FIELDS it lacks added to `vars` and to every state (at their value)."""
    missing = [f for f in LATER_FIELDS if f not in vars_]
    if not missing or cfg is None or not isinstance(data.get("states"), list):
        return data, vars_
    states = [{**raw, **{f: LATER_FIELDS[f](cfg) for f in missing}} if isinstance(raw, dict) else raw
              for raw in data["states"]]
    return {**data, "vars": [*data["vars"], *missing], "states": states}, [*vars_, *missing]


def from_itf(data: Any, file: str = "<trace>", check: bool = True) -> Trace:
    """Validate a parsed ITF document and return its `Trace` (see `read`)."""
    try:
        return _from_itf(data, file, check)
    except RecursionError:
        raise ItfError(file, "top level", "values nested too deep: not a kvmc trace") from None


def _from_itf(data: Any, file: str, check: bool) -> Trace:
    from specs.configs import CONFIGS

    # 1. structure
    if not isinstance(data, dict):
        raise ItfError(file, "top level", "expected a JSON object with #meta, vars and states")
    m = data.get("#meta")
    if not isinstance(m, dict):
        raise ItfError(file, "#meta", "missing; a kvmc trace records its design, config and property there")
    vars_ = _names(data, "vars", file, required=True)
    cfg_name = m.get("config")
    data, vars_ = _with_later_fields(data, vars_, CONFIGS.get(cfg_name) if isinstance(cfg_name, str) else None)
    params_ = _names(data, "params", file, required=False)
    for f in (*FIELD_NAMES, ACTION_TAKEN, NONDET_PICKS):
        if f not in vars_:
            raise ItfError(file, "vars", f"missing state variable {f!r}")
    for name in PARAM_NAMES:
        if name not in params_ and name not in vars_:
            raise ItfError(file, "params", f"missing parameter {name!r} (in params, or among vars)")
    known = set(vars_) | set(params_) | {"#meta"}
    states = data.get("states")
    if not isinstance(states, list) or not states:
        raise ItfError(file, "states", "missing or empty")
    for i, raw in enumerate(states):
        if not isinstance(raw, dict):
            raise ItfError(file, f"state {i}", "expected an object of variable -> value")
        for k in known - {"#meta"}:
            if k not in raw:
                raise ItfError(file, f"state {i} field {k}", "missing (every state holds every variable of vars and params)")
        extra = sorted(set(raw) - known)
        if extra:
            raise ItfError(file, f"state {i} field {extra[0]}", "not a variable of this trace (not in vars or params)")
        sm = raw.get("#meta")
        if sm is not None:
            if not isinstance(sm, dict):
                raise ItfError(file, f"state {i} #meta", "expected an object")
            if "index" in sm and (type(sm["index"]) is not int or sm["index"] != i):
                raise ItfError(file, f"state {i} #meta.index", f"is {sm['index']!r}; expected {i} (states dropped, "
                                                               "duplicated or reordered)")
    loop = data.get("loop")
    if loop is not None and (isinstance(loop, bool) or not isinstance(loop, int) or not 0 <= loop < len(states) - 1):
        raise ItfError(file, "loop", f"{loop!r} is not the index of a state before the last (0..{len(states) - 2})")

    # 2. #meta
    cfg_name = m.get("config")
    if not isinstance(cfg_name, str) or cfg_name not in CONFIGS:
        raise ItfError(file, "#meta.config", f"unknown config {cfg_name!r}; expected one of {list(CONFIGS)}")
    cfg = CONFIGS[cfg_name]
    design = _design(m, file)
    prop = m.get("property")
    warnings = _check_meta(m, cfg, len(states) - 1, file)

    # 3. values: types and ranges
    parsed: list[State] = []
    params: Params | None = None
    steps: list[Step] = []
    for i, raw in enumerate(states):
        where = f"state {i}"
        st = _state(raw, cfg, file, where)
        p = _params(raw, cfg, file, where)
        if params is None:
            params = p
        elif p != params:
            diff = next(n for n in PARAM_NAMES if getattr(p, n) != getattr(params, n))
            raise ItfError(file, f"{where} param {diff}", f"is {getattr(p, diff)!r} but {getattr(params, diff)!r} in state 0 "
                                                          "(parameters are constants)")
        parsed.append(st)
        action = raw.get(ACTION_TAKEN)
        if i == 0:
            if action != "init":
                raise ItfError(file, f"{where} field {ACTION_TAKEN}", f"is {action!r}; the first state's action is \"init\"")
            continue
        if action not in ACTIONS:
            raise ItfError(file, f"{where} field {ACTION_TAKEN}", f"unknown action {action!r}; expected one of {list(ACTIONS)}")
        steps.append(Step(action, _picks(raw.get(NONDET_PICKS), file, where), st))
    assert params is not None
    if loop is not None and parsed[loop] != parsed[-1]:
        raise ItfError(file, "loop", f"the last state (state {len(parsed) - 1}) is not state {loop}: not a lasso")
    meta = {k: v for k, v in m.items() if k not in ("config", "fixes", "mutants", "design", "property", "engine", "patches")}
    tr = Trace(cfg, design, params, parsed[0], steps, prop, str(m.get("engine", "")), meta, loop)
    tr.warnings = warnings

    # 4. the model re-run, 5. the verdict
    if check:
        _rerun(tr, file)
        _verdict(tr, file)
    return tr


def _names(data: dict[str, Any], key: str, file: str, required: bool) -> list[str]:
    v = data.get(key)
    if v is None:
        if required:
            raise ItfError(file, key, f"missing; an ITF trace lists its {'state variables' if key == 'vars' else 'parameters'}")
        return []
    if not isinstance(v, list) or not all(isinstance(n, str) for n in v):
        raise ItfError(file, key, "expected a list of names")
    dup = next((n for i, n in enumerate(v) if n in v[:i]), None)
    if dup is not None:
        raise ItfError(file, key, f"{dup!r} listed twice")
    return v


def _check_meta(m: dict[str, Any], cfg: Any, depth: int, file: str) -> list[str]:
    """The `#meta` fields kvmc reads or vouches for; returns the warnings."""
    from specs.properties import PROPERTIES

    warnings: list[str] = []
    prop = m.get("property")
    if prop is not None:
        from specs.liveness import LIVENESS

        if not isinstance(prop, str) or (prop not in PROPERTIES and prop not in LIVENESS):
            raise ItfError(file, "#meta.property", f"unknown property {prop!r}; expected null or one of "
                                                    f"{sorted(PROPERTIES) + sorted(LIVENESS)}")
    for key in ("engine", "description", "source", "violation", "design"):
        if key in m and m[key] is not None and not isinstance(m[key], str):
            raise ItfError(file, f"#meta.{key}", f"expected a string, got {m[key]!r}")
    if "format" in m and m["format"] != "ITF":
        raise ItfError(file, "#meta.format", f"is {m['format']!r}; expected \"ITF\"")
    if "depth" in m and (type(m["depth"]) is not int or m["depth"] != depth):
        raise ItfError(file, "#meta.depth", f"is {m['depth']!r} but the trace has {depth} steps (states dropped or added?)")
    if "page_size" in m and (type(m["page_size"]) is not int or m["page_size"] != cfg.page_size):
        raise ItfError(file, "#meta.page_size", f"is {m['page_size']!r}; config {cfg.name} has page size {cfg.page_size}")
    v = m.get("verdict")
    if v is not None and v not in VIOLATED + HOLDS:
        raise ItfError(file, "#meta.verdict", f"unknown verdict {v!r}; expected one of {list(VIOLATED + HOLDS)}")
    e = m.get("expected")
    if e is not None and e not in EXPECTED:
        raise ItfError(file, "#meta.expected", f"is {e!r}; expected one of {list(EXPECTED)}")
    if (v in VIOLATED and e == "pass") or (v in HOLDS and e == "violation"):
        raise ItfError(file, "#meta.expected", f"is {e!r} but #meta.verdict is {v!r}")
    cti = v == "counterexample to induction"
    if cti != (m.get("engine") == "induction-cti"):
        raise ItfError(file, "#meta.engine" if cti else "#meta.verdict",
                       f"a counterexample to induction comes from engine induction-cti (engine {m.get('engine')!r}, "
                       f"verdict {v!r})")
    if (v in VIOLATED or e == "violation") and prop is None:
        raise ItfError(file, "#meta.property", f"missing, but the trace records a violation (verdict {v!r})")
    if "sglang_release" in m:
        r = m["sglang_release"]
        if not isinstance(r, str) or not _VERSION.fullmatch(r):
            raise ItfError(file, "#meta.sglang_release", f"{r!r} is not a release number (like {CURRENT_RELEASE})")
        ours = sglang_release(str(m.get("design", "")))
        if ours is not None and r != ours:
            warnings.append(f"#meta.sglang_release {r}: design {m.get('design')!r} models SGLang {ours} in this kvmc; "
                            "the trace was checked against its own #meta.fixes")
    if "sglang_commit" in m:
        # written by kvmc before 2026-11-26, when `current` modelled SGLang main at a commit
        c = m["sglang_commit"]
        if not isinstance(c, str) or not _HEX40.fullmatch(c):
            raise ItfError(file, "#meta.sglang_commit", f"{c!r} is not a git commit (40 hexadecimal digits)")
        warnings.append(f"#meta.sglang_commit {c[:12]}: written when kvmc modelled an SGLang commit; this kvmc models "
                        f"releases (current = {CURRENT_RELEASE}); the trace was checked against its own #meta.fixes")
    if "kvmc_version" in m:
        kv = m["kvmc_version"]
        if not isinstance(kv, str) or not _VERSION.fullmatch(kv):
            raise ItfError(file, "#meta.kvmc_version", f"{kv!r} is not a version number (like {KVMC_VERSION})")
        if kv != KVMC_VERSION:
            warnings.append(f"written by kvmc {kv}, read by kvmc {KVMC_VERSION}; the trace was checked against this model")
    return warnings


def _value(v: Any, file: str, where: str) -> Any:
    """An ITF boolean or integer (`#bigint`; a plain JSON integer from a hand-written trace)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, dict) and set(v) == {"#bigint"}:
        s = v["#bigint"]
        if not isinstance(s, str) or not re.fullmatch(r"-?[0-9]{1,30}", s):
            raise ItfError(file, where, f"#bigint {s!r} is not an integer")
        return int(s)
    if isinstance(v, int):
        return v
    raise ItfError(file, where, f"expected an integer ({{\"#bigint\": \"n\"}}) or a boolean, got {_short(v)}")


def _short(v: Any) -> str:
    t = json.dumps(v) if not isinstance(v, float) or v == v else repr(v)
    return t if len(t) <= 60 else t[:57] + "..."


def _scalar(v: Any, field: str, file: str, where: str) -> Any:
    x = _value(v, file, where)
    if field in BOOL_FIELDS:
        if not isinstance(x, bool):
            raise ItfError(file, where, f"expected a boolean, got {_short(v)}")
        return x
    if isinstance(x, bool):
        raise ItfError(file, where, f"expected an integer, got {_short(v)}")
    return x


def _state(raw: dict[str, Any], cfg: Any, file: str, where: str) -> State:
    from model.state import NODE_FIELDS, REQ_FIELDS, SLOT_FIELDS, ROOT, VIRTUAL

    sizes = {**{f: cfg.num_reqs for f in REQ_FIELDS}, **{f: cfg.num_atoms for f in NODE_FIELDS},
             **{f: len(cfg.streaming_sessions) for f in SLOT_FIELDS}}
    vals: dict[str, Any] = {}
    for f in FIELD_NAMES:
        at = f"{where} field {f}"
        v = raw[f]
        if f in sizes:
            if not isinstance(v, list) or len(v) != sizes[f]:
                raise ItfError(file, at, f"expected a list of {sizes[f]} values for config {cfg.name}, got {_short(v)}")
            vals[f] = tuple(_scalar(e, f, file, f"{at}[{i}]") for i, e in enumerate(v))
        else:
            vals[f] = _scalar(v, f, file, at)
        for i, x in enumerate(vals[f] if f in sizes else (vals[f],)):
            w = f"{at}[{i}]" if f in sizes else at
            if f in BOOL_FIELDS or f in SIGNED_FIELDS:
                continue
            if f in ENUM_FIELDS and not 0 <= x < ENUM_FIELDS[f]:
                raise ItfError(file, w, f"{x} is out of range 0..{ENUM_FIELDS[f] - 1}")
            if f in NODE_REF_FIELDS:
                if x not in (ROOT, VIRTUAL) and not 0 <= x < cfg.num_atoms:
                    raise ItfError(file, w, f"{x} is not a node of config {cfg.name} (0..{cfg.num_atoms - 1}, or "
                                            f"{ROOT} root, {VIRTUAL} a session's virtual node)")
            elif x < 0:
                raise ItfError(file, w, f"{x} is negative; a count or length is >= 0")
    return State(**vals)


def _params(raw: dict[str, Any], cfg: Any, file: str, where: str) -> Params:
    per = {"input_len": cfg.num_reqs, "max_new_tokens": cfg.num_reqs, "warm_len": cfg.warm_atoms,
           "warm_device": cfg.warm_atoms, "warm_host": cfg.warm_atoms}
    pv: dict[str, Any] = {}
    for name in PARAM_NAMES:
        at = f"{where} param {name}"
        v = raw[name]
        if name in per:
            if not isinstance(v, list) or len(v) != per[name]:
                raise ItfError(file, at, f"expected a list of {per[name]} values for config {cfg.name}, got {_short(v)}")
            xs = [_value(e, file, f"{at}[{i}]") for i, e in enumerate(v)]
        else:
            xs = [_value(v, file, at)]
        for x in xs:
            if name in BOOL_PARAMS:
                if not isinstance(x, bool):
                    raise ItfError(file, at, f"expected booleans, got {x!r}")
            elif isinstance(x, bool) or x < 0:
                raise ItfError(file, at, f"expected a non-negative integer, got {x!r}")
        pv[name] = tuple(xs) if name in per else xs[0]
    return Params(**pv)


def _picks(raw: Any, file: str, where: str) -> dict[str, Any]:
    """`mbt::nondetPicks`: an ITF `#map` (kvmc) or a record (Quint) of choice -> option."""
    at = f"{where} field {NONDET_PICKS}"
    if isinstance(raw, dict) and set(raw) == {"#map"}:
        pairs = raw["#map"]
        if not isinstance(pairs, list) or not all(isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str) for kv in pairs):
            raise ItfError(file, at, "#map must be a list of [choice name, value] pairs")
        keys = [k for k, _ in pairs]
        dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if dup is not None:
            raise ItfError(file, f"{where} pick {dup}", "recorded twice")
        items = pairs
    elif isinstance(raw, dict):
        items = list(raw.items())
    else:
        raise ItfError(file, at, f"expected an ITF #map (or record) of choice -> option, got {_short(raw)}")
    out: dict[str, Any] = {}
    for k, v in items:
        w = f"{where} pick {k}"
        if isinstance(v, dict) and set(v) == {"tag", "value"}:
            if v["tag"] == "None":
                continue  # Quint: a nondeterministic choice this step did not make
            if v["tag"] != "Some":
                raise ItfError(file, w, f"option tag {v['tag']!r}; expected \"Some\" or \"None\"")
            v = v["value"]
            if isinstance(v, dict) and set(v) == {"value"}:  # kvmc's integer form (module docstring)
                v = v["value"]
        out[k] = _value(v, file, w)
    return out


# -- 4 and 5: the model's opinion -------------------------------------------------------------------
def _rerun(tr: Trace, file: str) -> None:
    from model.ops import Concrete, Infeasible
    from model.state import OOM_NAMES, OOM_NONE
    from model.system import System

    from checker.traces.trace import DictOracle, first_difference

    system = System(tr.cfg, tr.design)
    states = tr.states
    cti = tr.engine == "induction-cti"  # (its verdict says so too: _check_meta)
    try:
        x0 = system.ctx(Concrete(), tr.params)
        if not system.params_ok(x0):
            raise ItfError(file, "params", "the parameters break the model's constraint on them (params_ok): "
                                           "not a run of this model")
        if not cti:
            d = first_difference(states[0], system.init(x0))
            if d is not None:
                raise ItfError(file, f"state 0 field {d[0]}", f"the trace records {d[1]!r} but the model's initial state "
                                                             f"has {d[2]!r}: the trace was edited or corrupted")
        elif not tr.meta.get("cti_replays_concretely", False):
            return  # a CTI state may break the model's own assumptions (checker/engines/induction.py)
        for t, step in enumerate(tr.steps, 1):
            s = states[t - 1]
            if s.oom != OOM_NONE:
                raise ItfError(file, f"state {t}", f"follows the scheduler's death in state {t - 1} ({OOM_NAMES[s.oom]}): "
                                                    "the scheduler died, no step follows")
            x = system.ctx(Concrete(DictOracle(step.picks)), tr.params)
            try:
                nxt = system.step(x, s, step.action)
            except Infeasible as e:
                raise ItfError(file, f"state {t} picks", f"the model rejects these choices ({e})") from None
            asked = x.ops.picks
            for k in sorted(set(asked) | set(step.picks)):
                if k not in step.picks:
                    raise ItfError(file, f"state {t} pick {k}", f"missing: the model makes this choice here (it was {asked[k]!r})")
                if k not in asked:
                    raise ItfError(file, f"state {t} pick {k}", "recorded, but the model makes no such choice in this step")
                if type(asked[k]) is not type(step.picks[k]) or asked[k] != step.picks[k]:
                    raise ItfError(file, f"state {t} pick {k}", f"is {step.picks[k]!r}; the model's choice here is a "
                                                                f"{type(asked[k]).__name__}")
            d = first_difference(step.state, nxt)
            if d is not None:
                raise ItfError(file, f"state {t} field {d[0]}", f"the trace records {d[1]!r} but the model computes {d[2]!r}: "
                                                               "the trace was edited or corrupted (regenerate it with kvmc check)")
    except ItfError:
        raise
    except Exception as e:  # a value the model cannot run (a patch's error included)
        raise ItfError(file, "states", f"the model cannot run this trace ({type(e).__name__}: {str(e)[:200]})") from None


def _verdict(tr: Trace, file: str) -> None:
    from model.ops import Concrete
    from model.system import System
    from specs.properties import PROPERTIES

    v, e, prop = tr.meta.get("verdict"), tr.meta.get("expected"), tr.prop
    if prop is None or prop not in PROPERTIES or (v is None and e is None):
        return  # no claim, or a liveness lasso (its loop is checked above; checker/engines/liveness.py judges it)
    x = System(tr.cfg, tr.design).ctx(Concrete(), tr.params)
    try:
        holds = [bool(PROPERTIES[prop].holds(x, s)) for s in tr.states]
    except Exception as ex:
        raise ItfError(file, "states", f"the model cannot evaluate {prop} on this trace ({type(ex).__name__}: {ex})") from None
    n = len(holds) - 1
    claim = v if v is not None else f"expected {e}"
    if v in VIOLATED or e == "violation":
        if holds[-1]:
            raise ItfError(file, "#meta.verdict", f"records {claim!r} for {prop}, but {prop} holds in the last state "
                                                  f"(state {n}): the trace was cut or its verdict edited")
        first = holds.index(False)
        if first < n and v != "counterexample to induction":
            raise ItfError(file, "#meta.verdict", f"{prop} is already violated in state {first}, before the last state "
                                                  f"(state {n}): a counterexample ends at its first violation")
    elif not all(holds):
        raise ItfError(file, "#meta.verdict", f"records {claim!r} for {prop}, but {prop} is violated in state "
                                              f"{holds.index(False)}")
