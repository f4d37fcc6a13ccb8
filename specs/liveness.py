"""Liveness: the scheduler keeps making progress. Properties of infinite runs, with the fairness
and environment assumptions under which they are claimed, as data (like specs/properties.py).

Every property here is a *leads-to* per request slot r (TLA+'s `P(r) ~> Q(r)`, LTL `G(P -> F Q)`):
whenever `trigger(r)` holds, `response(r)` holds then or later. Its counterexample is a lasso: a
finite prefix s_0 .. s_l, then a loop s_l .. s_k with s_k = s_l (the whole state, the parameters
being constants), repeated forever; it violates `P ~> Q` iff Q is false at every loop state and P
holds at some position i with Q false from i on. A lasso counts only if every assumption the
property names holds on its loop: a run that is unfair (an arrival that never comes, a session
that never closes, a forced retraction on every pass) is not a counterexample.

Assumptions (`ASSUMPTIONS`), each evaluated on the loop only (the prefix may do anything):
* a *loop-state* condition must hold at every state of the loop;
* a *loop-step* condition must hold at every step of the loop;
* a *strong-fairness* pair (enabled, taken) per instance: if the choice is enabled at some step of
  the loop it is taken at some step of the loop. On a lasso the loop repeats forever, so "enabled
  infinitely often" is "enabled somewhere on the loop".
A choice that changes the state for good (an arrival, a session close, a next turn) can never be
taken on a loop; its fairness is therefore a loop-state condition: never enabled on the loop.

The step conditions read a step's named choices through `pick(name)`: the concrete value (False
when the step did not ask) or, symbolically, the z3 variable `name@t`, which is free on a path
where the step did not ask it; each condition therefore also says which path asked it (from the
states before and after the step: the decode batch ran, the request was in it).

Not a property of SGLang's code but of the kvmc model (model/system.py), like the safety
properties; SGLang release: the design's flags (model/designs.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from model import enqueue
from model.config import Config
from model.state import CHUNKED, DECODE_BATCH, FINISHED, NEW, NO_BATCH, RUNNING, WAITING, State
from model.transition import Ctx

Pick = Callable[[str], Any]
ReqPred = Callable[[Ctx, State, int], Any]
StepPred = Callable[[Ctx, State, State, Pick], Any]


@dataclass(frozen=True)
class Assumption:
    """A fairness or environment assumption, required on a lasso's loop (module docstring)."""

    name: str
    kind: str  # "fairness" (a choice the scheduler or the client must eventually take) or "environment"
    meaning: str
    applies: Callable[[Config], bool]
    loop_state: Callable[[Ctx, State], Any] | None = None
    loop_step: StepPred | None = None
    # per instance (request, session): (enabled, taken) of one step
    strong: Callable[[Ctx, State, State, Pick], list[tuple[Any, Any]]] | None = None


@dataclass(frozen=True)
class Liveness:
    """`trigger(r) ~> response(r)` for every request slot r, under `assumptions`."""

    name: str
    meaning: str
    trigger: ReqPred
    response: ReqPred
    trigger_meaning: str
    response_meaning: str
    assumptions: tuple[str, ...]


# -- assumptions ------------------------------------------------------------------------------------
def _arrivals(x: Ctx, s: State) -> Any:
    return x.and_(*[s.status[r] != NEW for r in range(x.cfg.num_reqs)])


def _sessions_move_on(x: Ctx, s: State) -> Any:
    out = []
    for i, r in enumerate(x.cfg.streaming_sessions):
        idle = x.and_(s.status[r] == FINISHED, x.not_(s.slot_closed[i]))
        out.append(x.not_(x.and_(idle, s.slot_holding[i])))
    return x.and_(*out)


def _decoded(x: Ctx, before: State, after: State, r: int) -> Any:
    """r was in the step's decode batch: running before, the decode ran, and r was not retracted
    by it (a retracted request is WAITING after the step; a finished one is FINISHED)."""
    return x.and_(before.status[r] == RUNNING, after.last_batch == DECODE_BATCH, after.status[r] != WAITING)


def _evict_swa(x: Ctx, before: State, after: State, pick: Pick) -> list[tuple[Any, Any]]:
    out = []
    for r in range(x.cfg.num_reqs):
        en = _decoded(x, before, after, r)
        out.append((en, x.and_(en, pick(f"decode.evict_swa[{r}]"))))
    return out


def _no_forced_retraction(x: Ctx, before: State, after: State, pick: Pick) -> Any:
    return x.not_(x.and_(after.last_batch == DECODE_BATCH, pick("decode.test_retract")))


def fits_alone(x: Ctx, s: State, r: int) -> Any:
    """Request r fits the full pool alone as SGLang lets it in: `Scheduler.init_req_max_new_tokens`
    (managers/scheduler.py, #25126, v0.5.12.post1+) clips max_new_tokens to max_total_num_tokens -
    ceil_page(input) - page_size - 1, "consistent with PrefillAdder's admission budget", so that no
    queued request can never be scheduled. Where the design models the clip (`enqueue_clip_max_new`,
    model/enqueue.py) this only leaves out a prompt that alone fills the pool (SGLang refuses it at
    `_validate_input_length`); before it, it stands for the clip the older releases lack."""
    return x.ceil_page(s.origin_input_len[r]) + enqueue.max_new_tokens(x, s, r) + x.ps + 1 <= x.p.full_tokens


def _requests_fit(x: Ctx, s: State) -> Any:
    return x.and_(*[x.or_(s.status[r] == FINISHED, fits_alone(x, s, r)) for r in range(x.cfg.num_reqs)])


def _swa_pool_holds_window(x: Ctx, s: State) -> Any:
    """The SWA gate's budget of a request on an idle server is at most max(chunk, W) + page
    (`_swa_budget_for_req`, both variants), and admission needs it below the SWA pool."""
    p = x.p
    return x.max(p.chunked_prefill_size, p.sliding_window_size) + x.ps + 1 <= p.swa_tokens


ASSUMPTIONS: dict[str, Assumption] = {
    a.name: a
    for a in [
        Assumption(
            "arrivals", "fairness",
            "every request is eventually sent: no request slot stays NEW on the loop (recv.arrive[r] is enabled "
            "exactly while r is NEW, and taking it leaves NEW for good)",
            lambda cfg: True, loop_state=_arrivals,
        ),
        Assumption(
            "sessions_move_on", "fairness",
            "a streaming session whose turn finished does not hold its KV forever: the client sends the next turn "
            "or closes it (recv.next_turn / recv.close_session change the state for good, so on the loop no "
            "finished, open session holds KV)",
            lambda cfg: bool(cfg.streaming_sessions), loop_state=_sessions_move_on,
        ),
        Assumption(
            "evict_swa_fires", "fairness",
            "_evict_swa (maybe_evict_swa, timed by decode_batch_idx in SGLang) fires for a decoding request: if r "
            "is in a decode batch somewhere on the loop, decode.evict_swa[r] is taken somewhere on the loop "
            "(strong fairness)",
            lambda cfg: cfg.hybrid_swa, strong=_evict_swa,
        ),
        Assumption(
            "no_forced_retraction_forever", "fairness",
            "SGLANG_TEST_RETRACT forces a retraction only finitely often: no step of the loop forces one "
            "(decode.test_retract)",
            lambda cfg: cfg.test_retract, loop_step=_no_forced_retraction,
        ),
        Assumption(
            "requests_fit", "environment",
            "every unfinished request fits the full pool alone as SGLang clips it at arrival: "
            "ceil_page(input) + max_new_tokens + page_size + 1 <= full_tokens (Scheduler.init_req_max_new_tokens, #25126, "
            "v0.5.12.post1; on designs without enqueue_clip_max_new an unclipped request would wait forever on an idle server)",
            lambda cfg: True, loop_state=_requests_fit,
        ),
        Assumption(
            "swa_pool_holds_window", "environment",
            "the SWA pool admits a request on an idle server: max(chunked_prefill_size, sliding_window_size) + "
            "page_size + 1 <= swa_tokens (SGLang checks nothing of the kind at start-up)",
            lambda cfg: cfg.hybrid_swa and cfg.chunked_prefill, loop_state=_swa_pool_holds_window,
        ),
    ]
}

# Eviction needs no assumption: an eviction the model runs frees what is needed whenever unlocked
# nodes can supply it (model/radix_cache.py, `evict`: "eviction stopped early" is ruled out), so it
# is never postponed; only which nodes go is a choice, and every choice is checked (LRU order is
# abstracted). Load-backs in flight end at the next `loading_check` without a choice.
_ALL = tuple(ASSUMPTIONS)


# -- properties -----------------------------------------------------------------------------------
def _pending(x: Ctx, s: State, r: int) -> Any:
    return x.or_(s.status[r] == WAITING, s.status[r] == CHUNKED)


def _batch_ran(x: Ctx, s: State, r: int) -> Any:
    return s.last_batch != NO_BATCH


def _admitted(x: Ctx, s: State, r: int) -> Any:
    return x.or_(s.status[r] == RUNNING, s.status[r] == CHUNKED)


def _finished(x: Ctx, s: State, r: int) -> Any:
    return s.status[r] == FINISHED


def _deferred(x: Ctx, s: State, r: int) -> Any:
    """The chunked request did not run in the last iteration: the pass always takes it first, so it
    was deferred (`add_chunked_req`, #23174's reserve), and a decode batch may have run instead."""
    return x.and_(s.status[r] == CHUNKED, x.not_(s.in_last_batch[r]))


def _chunk_ran(x: Ctx, s: State, r: int) -> Any:
    return x.or_(s.in_last_batch[r], s.status[r] != CHUNKED)


LIVENESS: dict[str, Liveness] = {
    p.name: p
    for p in [
        Liveness(
            "progress",
            "whenever a request is waiting or chunked, some batch (extend or decode) eventually runs; nothing but "
            "the pending requests themselves can hold memory on a fair loop (a running request decodes, an idle "
            "session moves on, the tree is evictable)",
            _pending, _batch_ran, "a request is waiting or chunked", "a batch ran", _ALL,
        ),
        Liveness(
            "no_starvation",
            "every admitted or chunked request eventually finishes",
            _admitted, _finished, "a request is running or chunked", "it finished", _ALL,
        ),
        Liveness(
            "deferred_eventually_admitted",
            "a chunked request that add_chunked_req deferred eventually runs its next chunk",
            _deferred, _chunk_ran, "the chunked request was deferred", "its next chunk ran", _ALL,
        ),
    ]
}


def applicable(prop: Liveness, cfg: Config) -> list[Assumption]:
    """The property's assumptions that mean something on this config."""
    return [ASSUMPTIONS[a] for a in prop.assumptions if ASSUMPTIONS[a].applies(cfg)]


def get(name: str) -> Liveness:
    try:
        return LIVENESS[name]
    except KeyError:
        raise KeyError(f"unknown liveness property {name!r}; expected one of {list(LIVENESS)}") from None
