"""`PrefillAdder` (python/sglang/srt/managers/schedule_policy.py, v0.5.10.post1 .. 0.5.23; its
budgets in mem_cache/prefill_budget.py from v0.5.21): the admission budgets of one prefill pass,
`add_one_req`, `add_chunked_req`, `_update_prefill_budget`, `_swa_budget_for_req` and `budget_state`.

The budgets are live properties of the allocator and the tree (`rem_total_tokens`,
`cur_rem_tokens`, `rem_swa_tokens` re-read at every use), so a temporary lock or a HiCache load-back
in the middle of a pass changes them, as in SGLang. The pass offsets are an `Adder` value that
lives for one iteration.

Abstracted: `new_token_ratio` is a constant fraction of the config (SGLang decays it and resets
it on retraction); offsets are kept multiplied by its denominator so all arithmetic stays integer.
Modelled as config / design flags (each checked against the release by `kvmc conform`):
`truncation_align_size` (Config), #22495's page reserve in the token gate, #25741's input-budget
gate (chunked prefill off only), the chunk end aligned to a page, #39283's gates under the lock only
(`admission_gates_under_lock`, v0.5.20: the order decides NO_TOKEN vs OTHER).
Mixed chunk (`num_mixed_decode_tokens`) is Config.mixed_chunk (`new_adder`'s `mixed`).
Not modelled: priority preemption, the prefill delayer, dLLM, Mamba slots,
`add_one_req_ignore_eos`, `prefill_max_requests`. The #31681/#32700 SWA chunk-cap escape hatch is
the design flag `swa_chunk_cap`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import allocator, enqueue, hicache, radix_cache
from .radix_cache import MatchResult
from .state import CHUNKED, RUNNING, State
from .transition import Ctx, transition

CONTINUE, NO_TOKEN, OTHER = 0, 1, 2
RESULT_NAMES = ("CONTINUE", "NO_TOKEN", "OTHER")


@dataclass(frozen=True)
class Adder:
    """The pass state of a `PrefillAdder`."""

    rem_total_token_offset: Any  # times new_token_ratio's denominator
    cur_rem_token_offset: Any
    rem_input_tokens: Any
    rem_chunk_tokens: Any  # None: chunked prefill off
    rem_swa_token_offset: Any
    stopped: Any  # a result other than CONTINUE ended the pass
    can_run: tuple  # per request slot: appended to can_run_list
    extend: tuple  # per request slot: extend_input_len admitted
    prefix: tuple  # per request slot: len(prefix_indices) at admission
    new_chunked: tuple  # per request slot: became new_chunked_req (truncated chunk)
    fresh_slot: tuple  # per request slot: needs a new req_to_token_pool slot
    result: Any  # last AddReqResult

    def set(self, **kw: Any) -> "Adder":
        return Adder(**{**self.__dict__, **kw})

    def at(self, name: str, r: int, v: Any) -> "Adder":
        t = getattr(self, name)
        return self.set(**{name: t[:r] + (v,) + t[r + 1 :]})

    def merge(self, ops: Any, c: Any, other: "Adder") -> "Adder":
        out = {}
        for k, a in self.__dict__.items():
            b = other.__dict__[k]
            if a is b:
                out[k] = a
            elif isinstance(a, tuple):
                out[k] = tuple(u if u is v else ops.ite(c, u, v) for u, v in zip(a, b))
            elif a is None:
                out[k] = None
            else:
                out[k] = ops.ite(c, a, b)
        return Adder(**out)

    def map_terms(self, fn: Any) -> "Adder":
        """Every value through `fn(name, value)` (`field` or `field[i]`); None stays None."""
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if isinstance(v, tuple):
                out[k] = tuple(fn(f"{k}[{i}]", e) for i, e in enumerate(v))
            else:
                out[k] = v if v is None else fn(k, v)
        return Adder(**out)

    def any_admitted(self, x: Ctx) -> Any:
        return x.or_(*self.can_run)


def ratio(x: Ctx) -> tuple[int, int]:
    return x.cfg.new_token_ratio


@transition("managers/schedule_policy.py::PrefillAdder.add_one_req (the remaining max_new_tokens, clipped)", modifies=())
def max_new_remaining(x: Ctx, s: State, r: int) -> Any:
    """min(max(max_new_tokens - len(output_ids), 0), CLIP_MAX_NEW_TOKENS); max_new_tokens as enqueued
    (model/enqueue.py)."""
    return x.min(x.clamp0(enqueue.max_new_tokens(x, s, r) - s.output_len[r]), x.cfg.clip_max_new_tokens)


@transition("managers/schedule_policy.py::PrefillAdder.__init__", modifies=())
def new_adder(x: Ctx, s: State, mixed: Any = 0) -> Adder:
    """`PrefillAdder.__init__`: offsets from the running batch, and `num_mixed_decode_tokens` m (the
    running batch size under mixed chunk, else 0) taken from the input and chunk budgets and set as
    both token offsets (0.5.18:managers/schedule_policy.py:530-540; 0.5.21+ `PrefillBudget`'s
    `total_offset` / `current_offset`). The SWA offset starts at 0 in every release (0.5.21+:
    `SWAPrefillBudget.swa_offset`; only the unified-memory `SharedSWAPrefillBudget`, not modelled,
    starts it at m), so under hybrid SWA nothing keeps the mixed decode's SWA slots: finding 9
    (docs/findings.md; open PR #35338 would reserve them)."""
    num, den = ratio(x)
    R = x.cfg.num_reqs
    offset = x.sum(x.ite(s.status[r] == RUNNING, num * max_new_remaining(x, s, r), 0) for r in range(R))
    ad = Adder(
        rem_total_token_offset=offset,  # kept scaled by the ratio's denominator
        cur_rem_token_offset=0,
        rem_input_tokens=x.p.max_prefill_tokens,
        rem_chunk_tokens=x.p.chunked_prefill_size if x.cfg.chunked_prefill else None,
        rem_swa_token_offset=0,
        stopped=False,
        can_run=(False,) * R,
        extend=(0,) * R,
        prefix=(0,) * R,
        new_chunked=(False,) * R,
        fresh_slot=(False,) * R,
        result=CONTINUE,
    )
    if not x.cfg.mixed_chunk:  # (the same z3 terms as before mixed chunk was modelled)
        return ad
    return ad.set(rem_total_token_offset=offset + den * mixed, cur_rem_token_offset=mixed,
                  rem_input_tokens=x.p.max_prefill_tokens - mixed,
                  rem_chunk_tokens=x.p.chunked_prefill_size - mixed if x.cfg.chunked_prefill else None)


# -- live budgets ---------------------------------------------------------------------------------
# `extra` is the PrefillAdder's temporary lock while it is held (radix_cache.Locker tuples).
@transition("managers/schedule_policy.py::PrefillAdder.rem_total_tokens (available + evictable)", modifies=())
def full_available_and_evictable(x: Ctx, s: State, extra: tuple = ()) -> Any:
    """`available_size + evictable_size` of the full budget; before #22597 hybrid SWA used the min
    of the two pools here and had no separate SWA budget."""
    c = radix_cache.counters(x, s, extra)
    full = s.full_available + c.full_evictable
    if x.cfg.hybrid_swa and not x.on("swa_budget_split"):
        return x.min(full, s.swa_available + c.swa_evictable)
    return full


@transition("managers/schedule_policy.py::PrefillAdder.rem_total_tokens", modifies=())
def rem_total_scaled(x: Ctx, s: State, ad: Adder, extra: tuple = ()) -> Any:
    """`rem_total_tokens` times the ratio's denominator."""
    _num, den = ratio(x)
    return den * full_available_and_evictable(x, s, extra) - ad.rem_total_token_offset


def rem_total_int(x: Ctx, s: State, ad: Adder) -> Any:
    """`int(rem_total_tokens)` (floor; only its sign matters where SGLang truncates a negative)."""
    return x.fdiv(rem_total_scaled(x, s, ad), ratio(x)[1])


@transition("managers/schedule_policy.py::PrefillAdder.cur_rem_tokens", modifies=())
def cur_rem_tokens(x: Ctx, s: State, ad: Adder) -> Any:
    """`cur_rem_tokens`: available + evictable less the pass's `cur_rem_token_offset` (the admitted
    extends and a page each, not their decode reserve)."""
    return full_available_and_evictable(x, s) - ad.cur_rem_token_offset


@transition("managers/schedule_policy.py::PrefillAdder.rem_swa_tokens", modifies=())
def rem_swa_tokens(x: Ctx, s: State, ad: Adder, extra: tuple = ()) -> Any:
    """`rem_swa_tokens`: SWA available + SWA evictable (with `extra` locks held) less the pass's
    `rem_swa_token_offset`; with the per-request ring, free rows x ring cost less the offset."""
    if x.cfg.swa_ring:
        return ring_rem_swa_tokens(x, s, ad)
    return s.swa_available + radix_cache.counters(x, s, extra).swa_evictable - ad.rem_swa_token_offset


# -- the per-request SWA ring (v0.5.20+, config `swa_ring`) --------------------------------------------
# SGLang managers/schedule_policy.py (v0.5.20:584, 743-801, 886-905, 999-1006, 1138-1146): with a ring
# the SWA budget is counted in request rows: `rem_swa_tokens` = swa_available_size() (free rows x
# ring cost) - offset, with no evictable term (the tree's SWA frees no ring space); each request
# needs one ring (`_swa_budget_for_req` = the ring cost), charged once (not again for a chunked
# continuation); the gate admits on `needed <= rem_swa` ("ring-slot capacity is exact");
# `add_chunked_req` has no SWA term.
def ring_rem_swa_tokens(x: Ctx, s: State, ad: Adder) -> Any:
    return allocator.swa_available_size(x, s) - ad.rem_swa_token_offset


@transition("managers/schedule_policy.py::PrefillAdder.add_one_req (the SWA gate, v0.5.20+ ring)", modifies=())
def ring_swa_gate_fails(x: Ctx, needed: Any, rem_swa: Any) -> Any:
    """The SWA gate refuses: `needed >= rem_swa`, or with the ring `needed > rem_swa`."""
    return needed > rem_swa if x.cfg.swa_ring else needed >= rem_swa


def swa_gate_on(x: Ctx) -> bool:
    return x.cfg.hybrid_swa and x.on("swa_budget_split")


@transition("managers/schedule_policy.py::PrefillAdder._swa_budget_for_req", modifies=())
def _swa_budget_for_req(x: Ctx, ad: Adder, extend: Any, max_new: Any, swa_host_hit: Any) -> Any:
    """`_swa_budget_for_req`: SWA tokens a request may still need in this pass (chunk N+1 of a
    chunked prefill, at least one window for decode headroom, one page of allocator slack, and
    since #27391 the SWA pages its load-back allocates); with the per-request ring, one ring."""
    if x.cfg.swa_ring:
        return allocator.swa_ring_cost(x)
    ps, W = x.ps, x.p.sliding_window_size
    rc = ad.rem_chunk_tokens
    capped = x.min(extend, rc) if rc is not None else extend
    if x.on("swa_window_headroom"):
        budget = x.clamp0(capped - W) + x.min(extend + max_new, W) + ps
    else:
        budget = x.max(capped, W) + ps
    if x.on("swa_hostload_budget"):
        budget = budget + x.ite(swa_host_hit > 0, x.ceil_page(swa_host_hit), 0)
    return budget


@transition("managers/schedule_policy.py::PrefillAdder.budget_state", modifies=())
def budget_state(x: Ctx, s: State, ad: Adder) -> Any:
    """`budget_state()`: NO_TOKEN when a token budget is spent, OTHER when the input or chunk budget is."""
    no_token = x.or_(rem_total_scaled(x, s, ad) <= 0, cur_rem_tokens(x, s, ad) <= 0)
    if swa_gate_on(x):
        no_token = x.or_(no_token, rem_swa_tokens(x, s, ad) <= 0)
    other = ad.rem_input_tokens <= 0
    if ad.rem_chunk_tokens is not None:
        other = x.or_(other, ad.rem_chunk_tokens <= 0)
    return x.ite(no_token, NO_TOKEN, x.ite(other, OTHER, CONTINUE))


@transition("managers/schedule_policy.py::PrefillAdder._update_prefill_budget", modifies=())
def _update_prefill_budget(x: Ctx, ad: Adder, extend: Any, max_new: Any) -> Adder:
    """`__update_prefill_budget(prefix_len, extend_input_len, max_new_tokens)`."""
    ps = x.ps
    _num, den = ratio(x)
    e = x.ceil_page(extend)
    upd = dict(
        rem_total_token_offset=ad.rem_total_token_offset + den * (e + max_new + ps),
        cur_rem_token_offset=ad.cur_rem_token_offset + e + ps,
        rem_input_tokens=ad.rem_input_tokens - e,
    )
    if swa_gate_on(x):
        upd["rem_swa_token_offset"] = ad.rem_swa_token_offset + _swa_budget_for_req(x, ad, e, max_new, 0)
    if ad.rem_chunk_tokens is not None:
        upd["rem_chunk_tokens"] = ad.rem_chunk_tokens - e
    return ad.set(**upd)


# -- admission ------------------------------------------------------------------------------------
@transition("managers/schedule_policy.py::PrefillAdder.add_one_req (the token gates, under the lock)", modifies=())
def _token_gates(x: Ctx, s: State, ad: Adder, total_tokens: Any, swa_budget: Any, extra: tuple = (),
                 max_new: Any = 0, swa_host: Any = 0) -> tuple[Any, Any]:
    """Steps 6-7 (and their re-check under the lock): (NO_TOKEN, chunk limit). The chunk limit is
    `rem_chunk_tokens`, or with the #31681 escape hatch the SWA chunk cap when the SWA gate fails."""
    _num, den = ratio(x)
    fails = den * total_tokens >= rem_total_scaled(x, s, ad, extra)
    limit = ad.rem_chunk_tokens
    if swa_gate_on(x):
        rem_swa = rem_swa_tokens(x, s, ad, extra)
        swa_fails = ring_swa_gate_fails(x, swa_budget, rem_swa)
        hatch_variant = x.variant("swa_chunk_cap")
        if hatch_variant is not None and limit is not None:
            # `_swa_chunk_cap`: the largest page-aligned chunk that leaves the request's decode
            # window (+ page, + host term) in rem_swa_tokens; #32700 opens the hatch only for a
            # request whose budget exceeds the whole SWA pool (`_swa_req_never_fits`)
            reserved = x.min(max_new, x.p.sliding_window_size) + x.ps + x.ite(swa_host > 0, x.ceil_page(swa_host), 0)
            cap = x.floor_page(x.clamp0(rem_swa - reserved))
            opens = x.and_(swa_fails, cap > 0)
            if hatch_variant == "never_fits":
                opens = x.and_(opens, swa_budget >= allocator.swa_size(x))
            swa_fails = x.and_(swa_fails, x.not_(opens))
            limit = x.ite(opens, x.min(limit, cap), limit)
        fails = x.or_(fails, swa_fails)
    return fails, limit


@transition("managers/schedule_policy.py::PrefillAdder.add_one_req (the max_prefill_tokens gate)", modifies=())
def input_gate(x: Ctx, ad: Adder, tokens: Any) -> Any:
    """OTHER when another request would pass `max_prefill_tokens` (the first one always may);
    since #25741 only with chunked prefill off (the chunk budget bounds a chunked pass)."""
    if x.on("chunked_input_gate") and ad.rem_chunk_tokens is not None:
        return False
    return x.and_(tokens >= ad.rem_input_tokens, ad.any_admitted(x))


@transition("managers/schedule_policy.py::PrefillAdder._select_prefill_admission (after init_load_back)", modifies=())
def _reselect_after_failed_load(x: Ctx, s: State, ad: Adder, needs_load: Any, prefix: Any, m: MatchResult, extend: Any,
                                total_tokens: Any, max_new: Any, lock: tuple, recheck: Any, rc: Any) -> tuple[Any, Any]:
    """v0.5.20 (#39283, `_select_prefill_admission` after `init_load_back`): a load-back that loaded
    nothing (kvmc's load is all or nothing: `prefix` stayed the device prefix) selects the admission
    again with host hits 0, still under the temporary lock: the total gate, the SWA gate on
    ceil_page(extend) with no host term (and its chunk cap), then the input gate and the chunk
    decision on the device prefix (which add_one_req computes from `prefix` anyway). Returns the
    (NO_TOKEN, chunk limit) that stand."""
    failed = x.and_(needs_load, prefix == m.prefix_len)
    swa_budget = _swa_budget_for_req(x, ad, x.ceil_page(extend), max_new, 0) if swa_gate_on(x) else 0
    again, rc0 = _token_gates(x, s, ad, total_tokens, swa_budget, lock, max_new, 0)
    return x.ite(failed, again, recheck), (rc if rc is None else x.ite(failed, rc0, rc))


@transition(
    "managers/schedule_policy.py::PrefillAdder.add_one_req",
    modifies=(
        "full_available", "swa_available", "node_len", "node_device", "node_swa_tombstone", "cache_protected_len",
        "last_node", "swa_lock_top", "load_back_node", "load_back_swa_top", "swa_evicted_seqlen", "needless_recompute",
        *radix_cache.DRIFT_FIELDS,
    ),
)
def add_one_req(x: Ctx, s: State, ad: Adder, r: int, m: MatchResult, fresh_slot: Any) -> tuple[State, Adder]:
    """Admit waiting request r (its match `m` just computed) if the budgets allow; appends it to
    can_run_list, locks its prefix, may load its host hit back, and charges the pass budgets."""
    ps = x.ps
    fill = s.origin_input_len[r] + s.output_len[r]
    extend = fill - m.prefix_len
    max_new = max_new_remaining(x, s, r)
    total_tokens = extend + max_new + (ps if x.on("admission_page_reserve") else 0)  # #22495
    swa_host = m.swa_host_hit_length if x.on("swa_hostload_budget") else 0
    real_input = x.ceil_page(extend - m.host_hit_length)
    # since v0.5.17 the SWA gate charges only the freshly prefilled tail (the host hit is loaded
    # back, charged through swa_host); before, the whole extend
    swa_extend = real_input if x.on("swa_gate_fresh_tail") else extend
    swa_budget = _swa_budget_for_req(x, ad, swa_extend, max_new, swa_host) if swa_gate_on(x) else 0
    no_token, _limit = _token_gates(x, s, ad, total_tokens, swa_budget, (), max_new, swa_host)
    # since v0.5.20 (#39283) the input gate runs only under the lock, after the token gates there: a
    # request both refuse is NO_TOKEN (v0.5.20:managers/schedule_policy.py:1345-1380, _select_prefill_admission)
    other = False if x.on("admission_gates_under_lock") else input_gate(x, ad, real_input)
    passes = x.and_(x.not_(no_token), x.not_(other))

    def under_temporary_lock() -> tuple[State, Adder]:
        # `with self._lock_node(req.last_node)`: the match path leaves the evictable budget
        s1, tmp_top = radix_cache.inc_lock_ref(x, s, m.last_device_node)
        lock = ((True, m.last_device_node, tmp_top),)
        recheck, rc = _token_gates(x, s1, ad, total_tokens, swa_budget, lock, max_new, swa_host)
        align = x.cfg.truncation_align_size

        def shape(pfx: Any) -> tuple[Any, Any, Any, Any]:
            """(input tokens, input gate refuses, fits whole, truncated chunk) of an extend from `pfx`,
            under the chunk limit `rc` as it stands when called (a re-selection below replaces it)."""
            in_tokens = x.ceil_page(fill - pfx)
            whole = True if rc is None else in_tokens <= rc
            trunc = 0 if rc is None else x.floor_page(rc)
            if rc is not None and align is not None:  # `--truncation-align-size`: too small a chunk is OTHER
                trunc = x.ite(trunc < align, 0, align * x.fdiv(trunc, align))
            if rc is not None and x.on("chunk_end_page_align"):
                trunc = x.floor_page(trunc + pfx) - pfx  # the chunk ends on a page boundary
            return in_tokens, input_gate(x, ad, in_tokens), whole, trunc

        needs_load = x.and_(x.not_(recheck), x.or_(m.host_hit_length > 0, swa_host > 0)) if x.cfg.hicache else False
        if x.cfg.hicache and x.on("load_back_reselect"):
            # #39283: init_load_back runs only for an admission `_select_prefill_admission` selected on the
            # promised prefix (device + host hit): an input gate that refuses, or a chunk truncated to
            # nothing, is OTHER before any load (v0.5.20:managers/schedule_policy.py:1376-1400, 1459-1530)
            _t, other_sel, whole_sel, trunc_sel = shape(m.prefix_len + m.host_hit_length)
            needs_load = x.and_(needs_load, x.not_(other_sel), x.or_(whole_sel, trunc_sel > 0))
        s2, prefix, last = x.branch(
            needs_load,
            lambda: hicache.init_load_back(x, s1, r, m, lock),
            lambda: (s1, m.prefix_len, m.last_device_node),
        )
        if x.cfg.hicache and x.on("load_back_reselect"):
            recheck, rc = _reselect_after_failed_load(x, s2, ad, needs_load, prefix, m, extend, total_tokens, max_new,
                                                      lock, recheck, rc)
        # the match set cache_protected_len; a load-back resets it to the grown prefix (step 11)
        protected = x.ite(needs_load, prefix, m.cache_protected_len)
        ext = fill - prefix
        _in_tokens, other2, whole, trunc = shape(prefix)
        admit = x.and_(x.not_(recheck), x.not_(other2), x.or_(whole, trunc > 0))
        ext_admitted = x.ite(whole, ext, trunc)

        def append() -> tuple[State, Adder]:
            s3, top = radix_cache.inc_lock_ref(x, s2, last)  # _req_inc_lock_ref: the persistent lock
            s3 = s3.req(r, cache_protected_len=protected, last_node=last, swa_lock_top=top, swa_evicted_seqlen=m.swa_evicted_seqlen)
            mnt = x.ite(whole, x.min(enqueue.max_new_tokens(x, s, r), x.cfg.clip_max_new_tokens), 0)
            ad2 = _update_prefill_budget(x, ad, ext_admitted, mnt)
            ad2 = ad2.at("can_run", r, True).at("extend", r, ext_admitted).at("prefix", r, prefix)
            ad2 = ad2.at("new_chunked", r, x.not_(whole)).at("fresh_slot", r, fresh_slot)
            # `self.new_chunked_req = req` is one slot: a request add_one_req truncated earlier in
            # this pass loses it and its prefill then runs as if whole (the scheduler's chunked_req
            # is the last one). The chunked request of add_chunked_req is the scheduler's own slot.
            for q in range(x.cfg.num_reqs):
                if q != r:
                    keep = x.or_(whole, s.status[q] == CHUNKED)
                    ad2 = ad2.at("new_chunked", q, x.and_(ad2.new_chunked[q], keep))
            return s3, ad2

        s4, ad4 = x.branch(admit, append, lambda: (s2, ad))
        s4 = radix_cache.dec_lock_ref(x, s4, m.last_device_node, tmp_top)
        res = x.ite(recheck, NO_TOKEN, x.ite(admit, budget_state(x, s4, ad4), OTHER))
        return s4, ad4.set(result=res)

    s_out, ad_out = x.branch(passes, under_temporary_lock, lambda: (s, ad.set(result=x.ite(no_token, NO_TOKEN, OTHER))))
    return s_out, ad_out.set(stopped=ad_out.result != CONTINUE)


@transition("managers/schedule_policy.py::PrefillAdder.add_chunked_req", modifies=())
def add_chunked_req(x: Ctx, s: State, ad: Adder, r: int) -> tuple[Adder, Any]:
    """`add_chunked_req` for the scheduler's chunked request r (prefix = its committed length).
    Returns the adder and whether r stays the chunked request (truncated, or deferred)."""
    ps = x.ps
    fill = s.origin_input_len[r] + s.output_len[r]
    prefix = s.kv_committed_len[r]
    extend = fill - prefix
    rc = ad.rem_chunk_tokens
    budget = x.min(rc, rem_total_int(x, s, ad))
    deferred: Any = False
    if x.cfg.hybrid_swa and x.on("swa_budget_split"):
        reserve = ps if x.on("chunked_swa_page_reserve") else 0
        if not x.cfg.swa_ring:  # a ring holds no chunk tokens
            budget = x.min(budget, rem_swa_tokens(x, s, ad) - reserve)
        if x.on("chunked_swa_page_reserve"):
            deferred = budget <= 0  # #23174: leave it for a later pass instead of over-allocating
    budget = x.ite(x.and_(budget <= 0, x.not_(deferred)), rc, budget)  # "must be added or its KV leaks"
    truncated = extend > budget
    ext = x.min(extend, budget)
    mnt = x.ite(truncated, 0, x.min(enqueue.max_new_tokens(x, s, r), x.cfg.clip_max_new_tokens))
    appended = _update_prefill_budget(x, ad, ext, mnt)
    if x.cfg.swa_ring:  # the ring was charged at the first admission
        appended = appended.set(rem_swa_token_offset=ad.rem_swa_token_offset)
    appended = appended.at("can_run", r, True).at("extend", r, ext).at("prefix", r, prefix).at("new_chunked", r, truncated)
    out = x.branch(deferred, lambda: ad, lambda: appended)
    return out, x.or_(deferred, truncated)
