"""One trace on SGLang's real scheduler: step, map, compare, verdict (worker side).

Two modes, chosen by the parent (upstream/sched/replay.py) from the trace's design and the release:

* `reproduce` (the release lacks the trace's fix, or it was reverted): every recorded choice is
  forced (upstream/sched/forcing.py); after every step the real state is mapped onto the model's
  variables (upstream/sched/abstraction.py) and compared with the recorded state, then the choices
  SGLang really made (the nodes its evict removed), the tree's counters, SGLang's busy check
  (ran / crashed / fired) against the model's, and the ownership ledger on the real objects
  (upstream/sched/ledger.py) against the model's, pool by pool. The first difference is
  `diverged at step N: field: model=..., sglang=...` with both states side by side. At the end
  SGLang's own verdict on the trace's property (allocation failure, busy check fired or crashed,
  real ledger) must be the recorded one: `reproduced`;
* `events` (the release has the fix): the trace's events (arrivals, session turns and closes,
  forced retractions) run on the release with its own LRU order and timing; the property is
  evaluated on the real objects after every step. `passed` if it never fails (the first step where
  the release departs from the trace is reported: that is the fix at work), else `diverged`.

Every step also records SGLang's own busy- and idle-check verdicts beside kvmc's properties, read
off the real objects (`table`).
"""

from __future__ import annotations

import re
import time
import traceback
from typing import Any

from model.state import (
    EXTEND_BATCH,
    FIELD_NAMES,
    FINISHED,
    GHOST_FIELDS,
    OOM_ASSERT,
    OOM_DECODE,
    OOM_NONE,
    OOM_PREFILL,
    OOM_REQ_SLOTS,
    RUNNING,
    WAITING,
    State,
)

REPRODUCED, PASSED, DIVERGED, ERROR, NOT_REPLAYABLE = "reproduced", "passed", "diverged", "error", "not replayable"


_SLOT_DONT_CARE = ("slot_kv_allocated_len", "slot_kv_committed_len", "slot_cache_protected_len",
                   "slot_swa_evicted_seqlen", "slot_last_node", "slot_swa_lock_top")


_REQ_DONT_CARE = ("kv_allocated_len", "kv_committed_len", "cache_protected_len", "swa_evicted_seqlen")
# A waiting request holds no KV of its own. From 0.5.13 SGLang's FCFS pass matches every waiting
# request (`calc_priority` -> match_prefix_for_req), and a streaming turn's match restores the
# session slot's lengths onto the waiting Req; the model restores them at admission.
_WAITING_DONT_CARE = ("kv_allocated_len", "kv_committed_len", "swa_evicted_seqlen")


def observable(s: State, x: Any = None) -> State:
    """The state without the fields that mean nothing: a finished request holds no KV (the model
    keeps its last lengths; from 0.5.16 SGLang drops `req.kv`), nor does a waiting one
    (`_WAITING_DONT_CARE`), and a session slot that holds no KV (never filled, or closed: SGLang
    drops the slot object) has no lengths and no lock. With the model's context `x`, a session slot's
    lengths are its KV record's (`session.record`): from 0.5.19 (`session_record`) the slot and the
    turn borrowing it share one `ReqKvInfo`, whose numbers move with the turn, while kvmc keeps the
    slot's copy from the save (0.5.22+: the take) and reads a lent record through the request."""
    from model.state import ROOT

    from .abstraction import unobserved_fields

    upd: dict[str, Any] = {f: False for f in GHOST_FIELDS}  # kvmc's own record; no SGLang object has it
    for f in unobserved_fields():  # ... nor any of this release's (`finish_req` bookkeeping before 0.5.11)
        upd[f] = tuple(False for _ in getattr(s, f))
    if x is not None and FINISHED in s.status:
        # a finished streaming turn keeps output_ids[:finished_len] (StreamingSession._trim_overshoot,
        # 0.5.11+): the prefill's token of a turn clipped to max_new_tokens 0 is dropped there, while
        # kvmc keeps the count and drops it when it builds the next turn (model/system.py)
        from model import enqueue

        sess = set(x.cfg.streaming_sessions)
        upd["output_len"] = tuple(min(n, enqueue.max_new_tokens(x, s, r)) if (r in sess and st == FINISHED) else n
                                  for r, (n, st) in enumerate(zip(s.output_len, s.status)))
        s = s.set(**upd)
    if x is not None and x.variant("session_record") is not None and s.slot_holding:
        from model import session

        recs = [session.record(x, s, i) for i in range(len(s.slot_holding))]
        for k, f in enumerate(("slot_kv_allocated_len", "slot_kv_committed_len", "slot_cache_protected_len",
                               "slot_swa_evicted_seqlen")):
            upd[f] = tuple(rec[k] for rec in recs)
        s = s.set(**upd)
    if FINISHED in s.status:
        for f in _REQ_DONT_CARE:
            upd[f] = tuple(0 if st == FINISHED else v for v, st in zip(getattr(s, f), s.status))
    # the SWA cursor E below P means nothing (the tree owns [0, P); every use reads max(P, E)): the
    # model raises E to P whenever its `_evict_swa` runs, 0.5.18+ runs it only once a token slid out
    E = upd.get("swa_evicted_seqlen", s.swa_evicted_seqlen)
    P = upd.get("cache_protected_len", s.cache_protected_len)
    upd["swa_evicted_seqlen"] = tuple(max(e, p) for e, p in zip(E, P))
    if WAITING in s.status:  # see _WAITING_DONT_CARE
        for f in _WAITING_DONT_CARE:
            upd[f] = tuple(0 if st == WAITING else v for v, st in zip(upd.get(f, getattr(s, f)), s.status))
    if not s.slot_holding or all(s.slot_holding):
        return s.set(**upd) if upd else s
    for f in _SLOT_DONT_CARE:
        v = getattr(s, f)
        blank = ROOT if f in ("slot_last_node", "slot_swa_lock_top") else 0
        upd[f] = tuple(x if held else blank for x, held in zip(v, s.slot_holding))
    return s.set(**upd)


def first_difference(model: State, real: State, x: Any = None) -> tuple[str, Any, Any] | None:
    model, real = observable(model, x), observable(real, x)
    if model == real:
        return None
    for f in FIELD_NAMES:
        a, b = getattr(model, f), getattr(real, f)
        if isinstance(a, tuple):
            for i, (u, v) in enumerate(zip(a, b)):
                if u != v:
                    return f"{f}[{i}]", u, v
            if len(a) != len(b):
                return f, a, b
        elif a != b:
            return f, a, b
    return None


def side_by_side(model: State, real: State, x: Any = None) -> list[str]:
    model, real = observable(model, x), observable(real, x)
    out = []
    for f in FIELD_NAMES:
        a, b = getattr(model, f), getattr(real, f)
        if a != b:
            out.append(f"    {f}: model={a!r} sglang={b!r}")
    return out


def violated(h: Any, prop: str, led: Any) -> bool:
    """SGLang's own verdict on `prop`, from its objects (allocation failure, its busy check, the
    ledger on its pools), as pool/abstraction.py::violated decides it for kvmc's pool."""
    if prop == "no_prefill_oom":
        return h.oom in (OOM_PREFILL, OOM_REQ_SLOTS)
    if prop == "no_decode_oom":
        return h.oom == OOM_DECODE
    if prop == "no_scheduler_assertion":
        return h.oom == OOM_ASSERT
    if prop == "conservation":
        return not led.ok
    fired = h.busy.fired or h.busy.crashed
    if prop == "busy_check_sound":
        return led.pools_ok and fired
    if prop == "busy_check_complete":
        ran = h.last_batch is not None and h.oom == OOM_NONE
        return ran and not led.pools_ok and not fired
    if prop == "well_formed":
        return False
    if prop == "prompt_prefilled":  # a request past its prefill holds the KV of all of its fill but one token
        return any(_prefill_cut_short(h, sl) for sl in h.slots)
    raise KeyError(f"unknown property {prop!r}")


def _prefill_cut_short(h: Any, sl: Any) -> bool:
    from .abstraction import committed_len, status

    req = sl.req
    if req is None:
        return False
    st = status(h, sl)
    lb = h.last_batch
    just_done = (st == FINISHED and lb is not None and lb.forward_mode.is_extend() and any(q is req for q in lb.reqs))
    fill = len(req.origin_input_ids) + len(req.output_ids)
    return (st == RUNNING or just_done) and committed_len(h, sl) != fill - 1


def _model_ctx(trace: Any) -> Any:
    from model.ops import Concrete
    from model.system import System

    return System(trace.cfg, trace.design).ctx(Concrete(), trace.params)


def _derived_difference(x: Any, state: State, h: Any) -> tuple[str, Any, Any] | None:
    """Tree counters and SGLang's busy check: model (recorded state) vs SGLang (its objects)."""
    from model import radix_cache
    from model.invariant_checker import self_check_during_busy

    from .abstraction import counters

    c = radix_cache.counters(x, state)
    real = counters(h)
    pairs = [("full_evictable_size", c.full_evictable, real["full_evictable_size"][0]),
             ("full_protected_size", c.full_protected, real["full_protected_size"][0])]
    if h.hybrid:
        pairs += [("swa_evictable_size", c.swa_evictable, real["swa_evictable_size"][0]),
                  ("swa_protected_size", c.swa_protected, real["swa_protected_size"][0])]
    for name, m, r in pairs:
        if m != r:
            return name, m, r
    b = self_check_during_busy(x, state)
    for name, m, r in (("busy_check.ran", bool(b.ran), h.busy.ran), ("busy_check.crashed", bool(b.crashed), h.busy.crashed),
                       ("busy_check.fired", bool(b.fired), h.busy.fired)):
        if m != r:
            return name, m, f"{r} ({h.busy.verdict()})"
    return None


def _ownership_difference(x: Any, state: State, led: Any) -> tuple[str, Any, Any] | None:
    from specs.properties import ledger

    if state.oom == OOM_ASSERT:
        # SGLang dies inside the insert, after it freed the request's duplicates (which can be the
        # very slots the tree holds) and before the row is repointed: its objects then hold that
        # double free slot by slot, which the ledger's counts of a whole state do not describe
        return None
    L = ledger(x, state)
    pairs = [("ownership.full", L.full_ok, led.full)]
    if led.swa is not None:
        pairs.append(("ownership.swa", L.swa_ok, led.swa))
    pairs.append(("ownership.rows", L.slots_ok, led.rows))
    for name, m, pl in pairs:
        if bool(m) != pl.ok:
            return name, "exact" if m else "not exact", pl.describe()
    return None


_EVICT_PICK = re.compile(r"^(.*)\.(evict|tombstone)\[(\d+)\]$")


def _warm_prefix_relabelled(x: Any, model: State, real: State) -> bool:
    """The documented `sharing_through_warm_prefix_only` at a state: the model's warm chain lost
    atoms that SGLang has (the warm node was evicted, then a request whose prompt starts with those
    tokens inserted them again), and moving those tokens from the head of one sharing request's
    private chain back into the warm atoms makes the states equal. SGLang's abstraction maps a node
    by its tokens, so the re-inserted warm tokens are the warm atom there; kvmc's insert puts them in
    the request's own chain (model/config.py: requests share only through the warm prefix)."""
    cfg = x.cfg
    warm = [w for w in cfg.warm_chain() if model.node_len[w] == 0 and real.node_len[w] > 0]
    if not warm:
        return False
    for r in range(cfg.num_reqs):
        if not cfg.shares(r):
            continue
        lens, moved = list(model.node_len), {}
        flags = {f: list(getattr(model, f)) for f in ("node_device", "node_host", "node_swa_tombstone")}
        head = next((a for a in cfg.private_chain(r) if lens[a] > 0), None)
        for w in warm:
            if head is None or lens[head] < real.node_len[w]:
                break
            lens[w], lens[head] = real.node_len[w], lens[head] - real.node_len[w]
            for f in flags:
                flags[f][w] = flags[f][head]
            if lens[head] == 0:
                moved[head] = w
                head = next((a for a in cfg.private_chain(r) if lens[a] > 0), None)
        else:
            # SGLang's map numbers an owner's nodes from the head of its chain (k-th node = atom k): a head
            # moved whole into the warm atoms leaves the rest of the chain one atom down there
            chain = cfg.private_chain(r)
            for i, a in enumerate([a for a in chain if lens[a] > 0]):
                if a != chain[i]:
                    lens[chain[i]], lens[a] = lens[a], 0
                    for f in flags:
                        flags[f][chain[i]] = flags[f][a]
                    moved[a] = chain[i]

            def relabel(v: tuple) -> tuple:
                return tuple(moved.get(a, a) for a in v)

            m = model.set(node_len=tuple(lens), **{f: tuple(v) for f, v in flags.items()},
                          last_node=relabel(model.last_node), swa_lock_top=relabel(model.swa_lock_top),
                          slot_last_node=relabel(model.slot_last_node), slot_swa_lock_top=relabel(model.slot_swa_lock_top))
            if first_difference(m, real, x) is None:
                return True
    return False


def _warm_node_spans_reinsert(x: Any, model: State, error: str) -> bool:
    """The same abstraction where the relabelling cannot apply: SGLang's node holds warm-prefix tokens
    and request r's own (`mixes tokens of owners [-1, r]`: upstream/sched/abstraction.py), the model's
    warm chain has lost an atom, and r shares the warm prefix: r inserted the evicted warm tokens
    again together with its own in one node, which kvmc's atoms cannot express."""
    m = re.search(r"mixes tokens of owners \[-1, (\d+)\]", error)
    if m is None:
        return False
    r = int(m.group(1))
    cfg = x.cfg
    return r < cfg.num_reqs and cfg.shares(r) and any(model.node_len[w] == 0 for w in cfg.warm_chain()[:cfg.warm_atoms])


def _sglang_eviction_allowed(trace: Any, before: State, picks: dict[str, Any], h: Any, real: State) -> bool:
    """Whether SGLang's step is one the model allows: the step's choices with the eviction picks
    replaced by the atoms SGLang evicted and tombstoned, run through the concrete model from the
    state `before`, reach SGLang's state (as the lifecycle rows accept an eviction). SGLang may
    evict more than once in a step (a mixed batch: the extend's allocation, then the decode's):
    its calls that freed something go, in order, to the eviction sites the model's re-run asks
    about, in order (found by re-running until the sites stop changing). A step in which SGLang
    evicted nothing is not judged (False)."""
    from checker.traces.trace import DictOracle
    from model.ops import Concrete, Infeasible
    from model.system import System

    f = h.forcing
    if _choice_difference(h, before, None) is None and sorted(f.tomb_rank) == sorted(set(f.tombstoned)):
        return False  # SGLang took the walk's eviction: the difference lies elsewhere
    calls = [c for c in f.calls if c[0] or c[1]]
    if not calls:
        return False
    base = {k: v for k, v in picks.items() if not _EVICT_PICK.match(k)}
    system = System(trace.cfg, trace.design)
    x = _model_ctx(trace)
    sites: list[str] = []
    for _ in range(len(calls) + 2):
        alt = dict(base)
        for (evicted, tombstoned), site in zip(calls, sites):
            alt.update({f"{site}.evict[{a}]": True for a in set(evicted)})
            alt.update({f"{site}.tombstone[{a}]": True for a in set(tombstoned)})
        ops = Concrete(DictOracle(alt))
        try:
            after = system.step(system.ctx(ops, trace.params), before)
        except (Infeasible, ValueError, KeyError):
            after = None
        if after is not None and len(sites) >= len(calls) and first_difference(after, real, x) is None:
            return True
        asked: list[str] = []
        for k in ops.picks:
            m = _EVICT_PICK.match(k)
            if m and m.group(1) not in asked:
                asked.append(m.group(1))
        if asked[:len(calls)] == sites[:len(calls)]:
            return False
        sites = asked
    return False


def _choice_difference(h: Any, before: State | None = None, after: State | None = None) -> tuple[str, Any, Any] | None:
    """The atoms SGLang's evict removed against the walk's eviction set: the chosen atoms, plus the
    tombstones the model deleted with their last child in that step (SWARadixCache's chain, no choice
    of its own: the nodes that held KV `before` and none `after` without being chosen)."""
    f = h.forcing
    if not f.enabled:
        return None
    chosen = set(f.rank)
    if before is not None and after is not None:
        chosen |= {a for a, (was, now, tomb) in enumerate(zip(before.node_len, after.node_len, before.node_swa_tombstone))
                   if was > 0 and now == 0 and tomb}
    chosen = sorted(chosen)
    got = sorted(set(f.evicted))
    if chosen != got:
        return "choice evict (eviction set)", chosen, got
    return None


def _kvmc_props(x: Any, state: State) -> str:
    from specs.properties import PROPERTIES

    bad = [name for name in ("no_prefill_oom", "no_decode_oom", "no_scheduler_assertion", "conservation", "busy_check_sound", "busy_check_complete")
           if name in PROPERTIES and not _holds(PROPERTIES[name], x, state)]
    return "all hold" if not bad else "violated: " + ", ".join(bad)


# kvmc's properties whose violation leaves the scheduler's objects corrupt (a slot owned twice or by
# nobody, a lock nobody owns, KV read that was never written): what either side does after such a
# state is not a question of conformance (upstream/abstractions.py `after_violated_state`)
BROKEN_STATE = ("conservation", "well_formed", "prompt_prefilled", "residency", "lock_ledger")


def _prop(name: str) -> Any:
    from specs.properties import PROPERTIES

    return PROPERTIES[name]


def _holds(prop: Any, x: Any, state: State) -> bool:
    try:
        return bool(prop.holds(x, state))
    except TypeError:
        return bool(prop.holds(x, None, state))


def _row(t: int, h: Any, led: Any, model_line: str) -> str:
    sg = f"SGLang busy check: {h.busy.verdict()}"
    if h.idle.ran:
        sg += f", idle check: {h.idle.verdict()}"
    if h.oom != OOM_NONE:
        sg = f"SGLang raised: {h.oom_message}"
    real = "ledger on SGLang's objects: " + ("exact" if led.ok else "NOT exact: " + led.describe())
    return f"step {t}: {sg} | {real} | kvmc on the recorded state: {model_line}"


def _outcome(status: str, **kw: Any) -> dict[str, Any]:
    out = {"status": status, "step": None, "field": None, "model": None, "sglang": None, "message": "", "steps": 0,
           "table": [], "detail": []}
    out.update(kw)
    return out


def replay(trace: Any, mode: str, label: str) -> dict[str, Any]:
    """Replay one parsed trace; never raises for an SGLang problem (that is the outcome)."""
    from .forcing import Unforceable
    from .harness import NotReplayable, RealScheduler

    t0 = time.perf_counter()
    try:
        h = RealScheduler(trace.cfg, trace.params, force=(mode == "reproduce"))
    except NotReplayable as e:
        return _outcome(NOT_REPLAYABLE, message=str(e))
    except Unforceable as e:
        return _outcome(NOT_REPLAYABLE, message=f"a choice cannot be forced: {e}")
    except Exception as e:  # noqa: BLE001 - a release the adapter cannot build is an error outcome, not a crash
        return _outcome(ERROR, message=f"{label}: cannot build the scheduler: {type(e).__name__}: {e}",
                        detail=traceback.format_exc(limit=8).splitlines()[-12:])
    if trace.loop is not None and mode != "reproduce":
        return _outcome(NOT_REPLAYABLE, message="a liveness lasso replays only where the release has its mechanism "
                                                "(reproduce); a fixed release has no events-only check for a loop")
    if mode == "reproduce":
        out = _reproduce(trace, h, label)
    else:
        out = _events(trace, h, label)
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def _reproduce(trace: Any, h: Any, label: str) -> dict[str, Any]:
    from .abstraction import AbstractionError, to_state
    from .forcing import Unforceable
    from .ledger import real_ledger

    x = _model_ctx(trace)
    lasso = trace if trace.loop is not None else None
    if lasso is not None:  # its loop runs LOOP_REPEATS more times, every state compared (as on the pool)
        from checker.engines.liveness import LOOP_REPEATS, unroll

        trace = unroll(lasso, LOOP_REPEATS)
    table: list[str] = []
    step = 0
    try:
        real = to_state(h)
        d = first_difference(trace.init, real)
        if d:
            return _outcome(DIVERGED, step=0, field=d[0], model=d[1], sglang=d[2], message="initial state",
                            detail=side_by_side(trace.init, real))
        led = real_ledger(h)
        prev = trace.init
        broken: tuple[int, str] | None = None  # the first step whose state violates a BROKEN_STATE property
        for step, st in enumerate(trace.steps, 1):
            if st.action != "event_loop_iteration":
                return _outcome(ERROR, step=step, message=f"state {step}: unknown action {st.action!r}")
            h.step(st.picks)
            real = to_state(h)
            led = real_ledger(h)
            table.append(_row(step, h, led, _kvmc_props(x, st.state)))
            d = _choice_difference(h, prev, st.state)
            before = prev
            prev = st.state
            if d is None:
                d = first_difference(st.state, real, x)
            if d is None:
                d = _derived_difference(x, st.state, h)
            if d is None:
                d = _ownership_difference(x, st.state, led)
            if d:
                # a hint only: the model has batch_is_full (model/system.py::get_new_batch_prefill), so a
                # skipped prefill it did not predict is a disagreement like any other
                # (only where the walk ran one: a pass both sides skipped explains nothing)
                skipped = h.prefill_skipped and st.state.last_batch == EXTEND_BATCH
                why = f"SGLang ran no prefill: {h.prefill_skipped}" if skipped else ""
                abstraction = ""
                if not why and _sglang_eviction_allowed(trace, before, st.picks, h, real):
                    abstraction = "eviction_superset"
                    why = ("the walk's eviction is one SGLang's LRU cannot take; SGLang's own is one the model allows "
                           "too (the model's eviction over-approximates LRU: model/radix_cache.py)")
                elif not why and _warm_prefix_relabelled(x, st.state, real):
                    abstraction = "sharing_through_warm_prefix_only"
                    why = ("after the warm prefix was evicted a sharing request inserted those tokens again: SGLang's "
                           "node is the warm prefix's, kvmc's is in the request's own chain (with that relabelled "
                           "the states agree)")
                elif broken is not None:
                    abstraction = "after_violated_state"
                    why = (f"{broken[1]} was violated at step {broken[0]}, a state SGLang reached too (it matched); "
                           "neither side is compared past a violated state")
                return _outcome(DIVERGED, step=step, field=d[0], model=d[1], sglang=d[2], steps=step, table=table,
                                detail=side_by_side(st.state, real, x), message=why, abstraction=abstraction)
            if broken is None:
                bad = [n for n in BROKEN_STATE if not _holds(_prop(n), x, st.state)]
                broken = (step, ", ".join(bad)) if bad else None
    except Unforceable as e:
        return _outcome(NOT_REPLAYABLE, step=step, message=f"step {step}: a choice cannot be forced on SGLang: {e}",
                        table=table)
    except AbstractionError as e:
        abstraction, why = "", ""
        if step and _warm_node_spans_reinsert(x, trace.steps[step - 1].state, str(e)):
            abstraction = "sharing_through_warm_prefix_only"
            why = ("after the warm prefix was evicted a sharing request inserted its tokens again in one node with "
                   "its own: SGLang's node spans the warm prefix, kvmc's tree cannot (warm and private atoms)")
        return _outcome(DIVERGED, step=step, field="tree shape", model="expressible", sglang=str(e), steps=step,
                        table=table, message=why, abstraction=abstraction)
    except Exception as e:  # noqa: BLE001 - SGLang raised where the model does not: a divergence, reported as such
        return _outcome(DIVERGED, step=step, field="sglang", model="(runs)", sglang=f"{type(e).__name__}: {e}",
                        message="SGLang raised", steps=step, table=table,
                        detail=traceback.format_exc(limit=10).splitlines()[-14:])
    n = len(trace.steps)
    prop = trace.prop
    if lasso is not None:  # every pass through the loop ended in the loop's first state on SGLang too
        return _outcome(REPRODUCED, steps=n, table=table,
                        message=f"{prop} violated on SGLang {label}: the loop (steps {lasso.loop + 1}..{lasso.depth}) ran "
                                f"{LOOP_REPEATS + 1} times, state {lasso.loop} recurring after each")
    if prop is None:
        return _outcome(PASSED, steps=n, table=table, message="no property recorded; every state matched")
    bad = violated(h, prop, led)
    expect = trace.meta.get("verdict") == "violated" or trace.meta.get("expected") == "violation"
    if expect and bad:
        return _outcome(REPRODUCED, steps=n, table=table, message=f"{prop} violated on SGLang {label} at step {n}")
    if expect:
        return _outcome(DIVERGED, step=n, field=f"verdict {prop}", model="violated", sglang="holds", steps=n, table=table,
                        message="SGLang does not fail the same way")
    if bad:
        return _outcome(DIVERGED, step=n, field=f"verdict {prop}", model="holds", sglang="violated", steps=n, table=table)
    return _outcome(PASSED, steps=n, table=table, message=f"{prop} holds on SGLang {label}")


def _events(trace: Any, h: Any, label: str) -> dict[str, Any]:
    """The trace's events on a release with the fix: the property must hold at every step."""
    from .abstraction import AbstractionError, to_state
    from .ledger import real_ledger

    x = _model_ctx(trace)
    prop = trace.prop
    table: list[str] = []
    departed: tuple[int, str, Any, Any] | None = None
    step = 0
    try:
        for step, st in enumerate(trace.steps, 1):
            picks = _lenient(h, st.picks)
            h.step(picks)
            led = real_ledger(h)
            table.append(_row(step, h, led, _kvmc_props(x, st.state)))
            if departed is None:
                try:
                    d = first_difference(st.state, to_state(h), x)
                except AbstractionError as e:
                    d = ("tree shape", "expressible", str(e))
                if d:
                    departed = (step, d[0], d[1], d[2])
            if prop is not None and violated(h, prop, led):
                return _outcome(DIVERGED, step=step, field=f"verdict {prop}", model="holds with the fix",
                                sglang="violated", steps=step, table=table,
                                message=f"the release with the fix still violates {prop}")
            if h.oom != OOM_NONE:
                break
    except Exception as e:  # noqa: BLE001 - SGLang raised on the fixed release: a divergence, reported as such
        return _outcome(DIVERGED, step=step, field="sglang", model="(runs)", sglang=f"{type(e).__name__}: {e}",
                        message="SGLang raised", steps=step, table=table,
                        detail=traceback.format_exc(limit=10).splitlines()[-14:])
    where = (f"departs from the trace at step {departed[0]}: {departed[1]}: model={departed[2]!r}, sglang={departed[3]!r}"
             if departed else "follows the trace step for step")
    what = f"{prop} holds" if prop else "the trace's events run"
    return _outcome(PASSED, steps=step, table=table, message=f"{what} on SGLang {label} at every step; {where}")


def _lenient(h: Any, picks: dict[str, Any]) -> dict[str, Any]:
    """The events of a step that still make sense on a run that departed from the trace: a slot
    arrives once; a session turn or close only after the previous turn finished."""
    from .abstraction import status

    out = {}
    for k, v in picks.items():
        if k.startswith(("recv.next_turn[", "recv.close_session[")):
            r = int(k[k.index("[") + 1:-1])
            if k.startswith("recv.close_session["):
                r = h.cfg.streaming_sessions[r]
            if status(h, h.slots[r]) != FINISHED:
                continue
        out[k] = v
    return out
