"""The scheduler that drives the pool: one `event_loop_normal` iteration per `step()`.

Implements (our own code) SGLang 0.5.10.post1 .. 0.5.23, where releases differ as the design's flags
choose (model/designs.py), python/sglang/srt/:
* managers/scheduler.py: `recv_requests` / `process_input_requests`, `get_new_batch_prefill`
  (chunked request first, then the waiting queue in slot order), `update_running_batch`,
  `process_batch_result_prefill` / `_decode`, HiCache `loading_check`;
* managers/schedule_policy.py::PrefillAdder: live budgets, `add_one_req` (gates, temporary lock,
  re-check, `init_load_back`, chunk truncation), `add_chunked_req`, `_update_prefill_budget`,
  `_swa_budget_for_req`, `budget_state`;
* managers/schedule_batch.py: `alloc_for_extend` / `prepare_for_extend`, `check_decode_mem`,
  `retract_decode`, `alloc_for_decode` / `prepare_for_decode`, `_evict_swa`;
* mem_cache/common.py::release_kv_cache, `evict_from_tree_cache`, `cache_unfinished_req`,
  `cache_finished_req`;
* mem_cache/session_aware_cache.py: `SessionSlot.save_from_req` / `restore_to_req`,
  `release_session`;
* speculative/eagle_worker.py + eagle_info.py: EAGLE v1 draft (allocator backed up and restored)
  and verify (paged extend by D, accept, free the rejected pages), topk > 1;
* speculative/eagle_utils.py::eagle_prepare_for_decode (v0.5.13+ spec v2): the row over-allocated
  to max(A, ceil(C + 2a)), verify inside it, [ceil(C), A) freed at the release;
* managers/scheduler_runtime_checker_mixin.py / scheduler_components/invariant_checker.py:
  `self_check_during_busy` and `on_idle`'s checks (`self_check_during_idle`) computed from the live
  objects.

It honours the same fix flags as the model (`model.designs.Design`) and imports nothing from the
model but its Config / Design / Params. Not implemented (as in the model): the overlap loop, mixed
chunk, PD, DP attention, EOS (a request stops at max_new_tokens), aborts other than an over-long
prompt's and "out of memory even after retracting".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import torch

from model.config import Config, Params
from model.designs import Design, leaf_window_cap

from .allocator import I64, HostPool, PlainAllocator, PoolError, ReqToTokenPool, RingSWAAllocator, SWAAllocator
from .choices import Chooser
from .radix_tree import WARM, LockHandle, Match, RadixTree, TreeNode

CONTINUE, NO_TOKEN, OTHER = 0, 1, 2
NO_BATCH, EXTEND_BATCH, DECODE_BATCH = 0, 1, 2
OOM_NONE, OOM_PREFILL, OOM_REQ_SLOTS, OOM_DECODE, OOM_ASSERT = 0, 1, 2, 3, 4
OOM_MESSAGES = ("", "Prefill out of memory", "alloc_req_slots runs out of memory", "Decode out of memory",
                "AssertionError: new_prefix_len <= len(new_indices)")


class _SchedulerAssertion(Exception):
    """UnifiedRadixCache's `assert new_prefix_len <= len(new_indices)` after an insert and its
    re-match (model/radix_cache.py::assertion_after_rematch): the scheduler dies there, holding the
    state the insert left; `step` records OOM_ASSERT and no iteration follows."""


def ceil_page(x: int, ps: int) -> int:
    return -(-x // ps) * ps


def floor_page(x: int, ps: int) -> int:
    return (x // ps) * ps


@dataclass(eq=False)  # a request is itself: queue membership (`req in self.running`) is by identity
class Req:
    rid: int
    origin_input_len: int
    arrived: bool = False
    finished: bool = False
    output_len: int = 0
    turn: int = 0
    kv_allocated_len: int = 0
    kv_committed_len: int = 0
    cache_protected_len: int = 0
    swa_evicted_seqlen: int = 0
    req_pool_idx: int | None = None
    lock: LockHandle | None = None  # persistent tree lock (last_node, swa_uuid_for_lock)
    virtual: bool = False  # last_node is the session's virtual node
    prefix_indices: torch.Tensor | None = None
    in_last_batch: bool = False
    load_back: LockHandle | None = None  # in-flight HiCache load-back lock
    decode_batch_idx: int = 0
    swa_branching_seqlen: int = 0  # the match's SWA branching point (0 = None; swa_branching_insert)
    unfiltered: bool = False  # a finished Req of this slot is still in the running batch (model/state.py)


@dataclass(eq=False)
class SessionSlot:
    rid: int
    req_pool_idx: int | None = None  # None: holds no KV
    kv_allocated_len: int = 0
    kv_committed_len: int = 0
    cache_protected_len: int = 0
    swa_evicted_seqlen: int = 0
    lock: LockHandle | None = None
    virtual: bool = False
    is_active: bool = False
    closed: bool = False
    turn_saved: bool = False  # req_nodes holds the turn's Req (a save of it went through finish_req)
    detached: bool = False  # the running turn's Req has session None (finish_req met it twice)

    @property
    def holding(self) -> bool:
        return self.req_pool_idx is not None


@dataclass
class Admission:
    extend: int
    prefix: int
    new_chunked: bool
    fresh: bool


@dataclass
class BusyCheck:
    ran: bool
    crashed: bool
    fired: bool
    terms: dict[str, int] = field(default_factory=dict)


@dataclass
class IdleCheck:
    idle: bool  # `on_idle` ran its checks (no batch, nothing running, chunked or waiting)
    fired: bool  # a pool equation, the req_to_token pool or the tree sanity check failed
    terms: dict[str, int] = field(default_factory=dict)


class PrefillAdder:
    """One prefill pass's budgets (`PrefillAdder`); the budgets are re-read from the live allocator
    and tree at every use."""

    def __init__(self, sch: "Scheduler") -> None:
        self.sch = sch
        cfg = sch.cfg
        num, den = cfg.new_token_ratio
        self.ratio = Fraction(num, den)
        # sum(ratio * remaining) == ratio * sum(remaining), exactly (one Fraction product)
        # num_mixed_decode_tokens (model/prefill_adder.py::new_adder): the running batch under mixed chunk
        m = sch._running_bs() if cfg.mixed_chunk else 0
        self.rem_total_token_offset: Fraction = self.ratio * sum(sch.max_new_remaining(r) for r in sch.running) + m
        self.cur_rem_token_offset = m
        self.rem_input_tokens = sch.p.max_prefill_tokens - m
        self.rem_chunk_tokens: int | None = sch.p.chunked_prefill_size - m if cfg.chunked_prefill else None
        self.rem_swa_token_offset = 0
        self.can_run: dict[int, Admission] = {}
        self.stopped = False
        self.result = CONTINUE
        self.new_chunked_req: int | None = None  # rid: one slot, as SGLang's adder has

    # live budgets
    def _ae_full(self) -> int:
        sch = self.sch
        full = sch.alloc.full_available_size() + sch.tree.full_evictable_size()
        if sch.cfg.hybrid_swa and not sch.design.on("swa_budget_split"):
            return min(full, sch.alloc.swa_available_size() + sch.tree.swa_evictable_size())
        return full

    def rem_total_tokens(self) -> Fraction:
        return self._ae_full() - self.rem_total_token_offset

    def cur_rem_tokens(self) -> int:
        return self._ae_full() - self.cur_rem_token_offset

    def rem_swa_tokens(self) -> int:
        sch = self.sch
        if sch.cfg.swa_ring:  # free rows x ring cost; the tree's SWA frees no ring space
            return sch.alloc.swa_available_size() - self.rem_swa_token_offset
        return sch.alloc.swa_available_size() + sch.tree.swa_evictable_size() - self.rem_swa_token_offset

    def swa_gate_on(self) -> bool:
        return self.sch.cfg.hybrid_swa and self.sch.design.on("swa_budget_split")

    def _swa_budget_for_req(self, extend: int, max_new: int, swa_host_hit: int) -> int:
        sch = self.sch
        if sch.cfg.swa_ring:  # one ring per request
            return sch.alloc.ring_cost
        ps, W = sch.ps, sch.p.sliding_window_size
        rc = self.rem_chunk_tokens
        capped = min(extend, rc) if rc is not None else extend
        if sch.design.on("swa_window_headroom"):
            budget = max(capped - W, 0) + min(extend + max_new, W) + ps
        else:
            budget = max(capped, W) + ps
        if sch.design.on("swa_hostload_budget") and swa_host_hit > 0:
            budget += ceil_page(swa_host_hit, ps)
        return budget

    def budget_state(self) -> int:
        no_token = self.rem_total_tokens() <= 0 or self.cur_rem_tokens() <= 0
        if self.swa_gate_on():
            no_token = no_token or self.rem_swa_tokens() <= 0
        if no_token:
            return NO_TOKEN
        if self.rem_input_tokens <= 0 or (self.rem_chunk_tokens is not None and self.rem_chunk_tokens <= 0):
            return OTHER
        return CONTINUE

    def _update_prefill_budget(self, extend: int, max_new: int, continuation: bool = False) -> None:
        ps = self.sch.ps
        e = ceil_page(extend, ps)
        swa = self._swa_budget_for_req(e, max_new, 0) if self.swa_gate_on() else 0
        if continuation and self.sch.cfg.swa_ring:  # the ring was charged at the first admission
            swa = 0
        self.rem_total_token_offset += e + max_new + ps
        self.cur_rem_token_offset += e + ps
        self.rem_input_tokens -= e
        self.rem_swa_token_offset += swa
        if self.rem_chunk_tokens is not None:
            self.rem_chunk_tokens -= e

    def _token_gates(self, total_tokens: int, swa_budget: int, max_new: int = 0, swa_host: int = 0) -> tuple[bool, int | None]:
        """(NO_TOKEN, chunk limit): the limit is rem_chunk_tokens, or with the #31681 escape hatch
        (`swa_chunk_cap`) the SWA chunk cap when the SWA gate fails."""
        sch = self.sch
        fails = total_tokens >= self.rem_total_tokens()
        limit = self.rem_chunk_tokens
        if self.swa_gate_on():
            rem = self.rem_swa_tokens()
            swa_fails = swa_budget > rem if sch.cfg.swa_ring else swa_budget >= rem
            hatch = sch.design.variant("swa_chunk_cap")
            if hatch is not None and limit is not None and swa_fails:
                ps = sch.ps
                reserved = min(max_new, sch.p.sliding_window_size) + ps + (ceil_page(swa_host, ps) if swa_host > 0 else 0)
                cap = floor_page(max(rem - reserved, 0), ps)
                size_swa = sch.p.req_pool_size * sch.alloc.ring_cost if sch.cfg.swa_ring else sch.p.swa_tokens
                opens = cap > 0 and (hatch != "never_fits" or swa_budget >= size_swa)
                if opens:
                    swa_fails, limit = False, min(limit, cap)
            fails = fails or swa_fails
        return fails, limit

    def _input_gate(self, tokens: int) -> bool:
        """OTHER when another request would pass max_prefill_tokens; since #25741 only without chunking."""
        if self.sch.design.on("chunked_input_gate") and self.rem_chunk_tokens is not None:
            return False
        return tokens >= self.rem_input_tokens and bool(self.can_run)

    # admission
    def add_one_req(self, req: Req, m: Match, fresh: bool, restored: "Restored | None") -> None:
        sch = self.sch
        ps = sch.ps
        fill = req.origin_input_len + req.output_len
        prefix_len = restored.prefix if restored else m.prefix_len
        host_hit = 0 if restored else m.host_hit_length
        swa_host_raw = 0 if restored else m.swa_host_hit_length
        extend = fill - prefix_len
        max_new = sch.max_new_remaining(req)
        total_tokens = extend + max_new + (ps if sch.design.on("admission_page_reserve") else 0)  # #22495
        swa_host = swa_host_raw if sch.design.on("swa_hostload_budget") else 0
        real_input = ceil_page(extend - host_hit, ps)
        swa_extend = real_input if sch.design.on("swa_gate_fresh_tail") else extend
        swa_budget = self._swa_budget_for_req(swa_extend, max_new, swa_host) if self.swa_gate_on() else 0
        no_token, _limit = self._token_gates(total_tokens, swa_budget, max_new, swa_host)
        other = self._input_gate(real_input)
        if no_token or other:
            self.result = NO_TOKEN if no_token else OTHER
            self.stopped = True
            return
        # `with self._lock_node(req.last_node)`: the temporary lock
        last_dev = None if restored else m.last_device_node
        tmp = sch.tree.inc_lock_ref(last_dev)
        recheck, rc = self._token_gates(total_tokens, swa_budget, max_new, swa_host)
        prefix, last_node = prefix_len, last_dev
        prefix_indices = None if restored else m.device_indices
        loaded = False
        if sch.cfg.hicache and not recheck and (host_hit > 0 or swa_host > 0):
            new = sch.init_load_back(req, m)
            if new is not None:
                loaded = True
                prefix = prefix_len + int(new.numel())
                last_node = m.best_match_node
                prefix_indices = torch.cat([m.device_indices, new])
            elif sch.design.on("load_back_reselect"):  # v0.5.20 (#39283): select again with no host hit
                swa0 = self._swa_budget_for_req(ceil_page(extend, ps), max_new, 0) if self.swa_gate_on() else 0
                again, rc0 = self._token_gates(total_tokens, swa0, max_new, 0)
                recheck, rc = again, (rc if rc is None else rc0)
        protected = prefix if loaded else (restored.protected if restored else m.prefix_len)
        ext = fill - prefix
        in_tokens = ceil_page(ext, ps)
        other2 = self._input_gate(in_tokens)
        whole = rc is None or in_tokens <= rc
        trunc = 0 if rc is None else floor_page(rc, ps)
        align = sch.cfg.truncation_align_size
        if rc is not None and align is not None:  # `--truncation-align-size`
            trunc = 0 if trunc < align else align * (trunc // align)
        if rc is not None and sch.design.on("chunk_end_page_align"):
            trunc = floor_page(trunc + prefix, ps) - prefix  # the chunk ends on a page boundary
        admit = not recheck and not other2 and (whole or trunc > 0)
        if admit:
            if restored:
                req.lock, req.virtual = None, True
            else:
                req.lock, req.virtual = sch.tree.inc_lock_ref(last_node), False  # _req_inc_lock_ref
            req.cache_protected_len = protected
            req.swa_evicted_seqlen = restored.swa_evicted_seqlen if restored else 0
            req.prefix_indices = prefix_indices
            ext_admitted = ext if whole else trunc
            mnt = min(sch.max_new_tokens(req), sch.cfg.clip_max_new_tokens) if whole else 0
            self._update_prefill_budget(ext_admitted, mnt)
            self.can_run[req.rid] = Admission(ext_admitted, prefix, not whole, fresh)
            if not whole:  # `self.new_chunked_req = req`: a request truncated earlier in the pass loses the slot
                if self.new_chunked_req is not None:
                    self.can_run[self.new_chunked_req].new_chunked = False
                self.new_chunked_req = req.rid
        sch.tree.dec_lock_ref(tmp)
        if recheck:
            self.result = NO_TOKEN
        elif admit:
            self.result = self.budget_state()
        else:
            self.result = OTHER
        self.stopped = self.result != CONTINUE

    def add_chunked_req(self, req: Req) -> None:
        sch = self.sch
        ps = sch.ps
        fill = req.origin_input_len + req.output_len
        prefix = req.kv_committed_len
        extend = fill - prefix
        rc = self.rem_chunk_tokens
        assert rc is not None
        budget = min(rc, math.floor(self.rem_total_tokens()))
        deferred = False
        if sch.cfg.hybrid_swa and sch.design.on("swa_budget_split"):
            reserve = ps if sch.design.on("chunked_swa_page_reserve") else 0
            if not sch.cfg.swa_ring:  # a ring holds no chunk tokens
                budget = min(budget, self.rem_swa_tokens() - reserve)
            if sch.design.on("chunked_swa_page_reserve"):
                deferred = budget <= 0  # #23174: leave it for a later pass
        if budget <= 0 and not deferred:
            budget = rc  # "the chunked req must be added or its KV leaks"
        if deferred:
            return
        truncated = extend > budget
        ext = min(extend, budget)
        mnt = 0 if truncated else min(sch.max_new_tokens(req), sch.cfg.clip_max_new_tokens)
        self._update_prefill_budget(ext, mnt, continuation=True)
        self.can_run[req.rid] = Admission(ext, prefix, truncated, False)


@dataclass
class Restored:
    prefix: int
    protected: int
    swa_evicted_seqlen: int


class Scheduler:
    def __init__(self, cfg: Config, design: Design, params: Params, device: str | torch.device = "cpu",
                 max_context_len: int | None = None) -> None:
        self.cfg, self.design, self.p = cfg, design, params
        self.device = torch.device(device)
        self.mutants = frozenset(design.mutants)
        self.ps = ps = cfg.page_size
        self.hybrid = cfg.hybrid_swa
        if cfg.swa_ring:  # the per-request SWA ring counts request rows (v0.5.20+); the row pool comes first
            self.req_pool = ReqToTokenPool(params.req_pool_size, self._context_len(cfg, params, max_context_len), self.device)
            ring_cost = ceil_page(params.sliding_window_size, ps)
            self.alloc: Any = RingSWAAllocator(params.full_tokens, ps, self.device, self.req_pool, ring_cost)
        elif self.hybrid:
            self.alloc = SWAAllocator(params.full_tokens, params.swa_tokens, ps, self.device)
        else:
            self.alloc = PlainAllocator(params.full_tokens, ps, self.device, "full")
        warm_total = sum(params.warm_len)
        self.host = HostPool(4 * (params.full_tokens + warm_total) + 64, self.device) if cfg.hicache else None
        self.tree = RadixTree(self.alloc, ps, self.hybrid, params.sliding_window_size, self.host, self.device,
                              self.mutant, self.next_atom)
        self.tree.segment_lock = design.on("swa_segment_lock")
        self.tree.leaf_window_cap = leaf_window_cap(cfg, design)  # a rule of the unified tree's SWA component
        self.tree.tombstone_leaf_kept = design.on("swa_tombstone_leaf_kept")
        self.tree.tombstone_parent_kept = self.hybrid and design.on("swa_tombstone_parent_kept")
        if not cfg.swa_ring:
            self.req_pool = ReqToTokenPool(params.req_pool_size, self._context_len(cfg, params, max_context_len), self.device)
        self.warm_total = warm_total
        # an over-long prompt is [0] from its arrival on (`set_finish_with_abort`, model/config.py over_long)
        self.reqs = [Req(r, cfg.prompt_len(params, r)) for r in range(cfg.num_reqs)]
        self.slots = [SessionSlot(r) for r in cfg.streaming_sessions]
        self.waiting: list[Req] = []
        self.running: list[Req] = []
        self.chunked: list[Req] = []
        self.last_batch = NO_BATCH
        self.oom = OOM_NONE
        self.batch_is_full = False  # running_batch.batch_is_full (model/system.py::get_new_batch_prefill)
        self.busy: BusyCheck | None = None
        self.idle: IdleCheck | None = None
        # the pool's own record of a retraction / a load-back give-up that no shortage explains
        # (what the model's ghosts `needless_retract` / `needless_recompute` state; written apart)
        self.needless_retract = False
        self.needless_recompute = False
        self.steps = 0
        self._init_warm()

    @classmethod
    def _context_len(cls, cfg: Config, params: Params, max_context_len: int | None) -> int:
        """Row width of `req_to_token` (enough for every turn, the spec over-allocation and pages)."""
        if max_context_len is not None:
            return max_context_len
        ps = cfg.page_size
        warm_total = sum(params.warm_len)
        spec_d = cfg.spec.num_draft_tokens if cfg.spec else 0
        if cfg.spec is not None and cfg.spec.version == 2:  # the row holds C + 2a (+ a page)
            spec_d = 2 * cls._alloc_len_per_decode(cfg) + ps
        per_turn = max(params.input_len) + max(params.max_new_tokens) + cfg.turn_tokens[1] + spec_d + 2 * ps
        max_context_len = ceil_page(per_turn * (cfg.max_turns + 1) + warm_total + 2 * ps, ps)
        return max_context_len

    def mutant(self, name: str) -> bool:
        return name in self.mutants

    # -- tokens ------------------------------------------------------------------------------------
    def token(self, r: int, pos: int) -> int:
        if self.cfg.shares(r) and pos < self.warm_total:
            return 1 + pos
        return 1_000_000 * (r + 1) + pos

    def tokens_of(self, r: int):  # noqa: ANN201
        return lambda lo, hi: tuple(self.token(r, i) for i in range(lo, hi))

    def _init_warm(self) -> None:
        p, cfg = self.p, self.cfg
        parent, pos = self.tree.root, 0
        for a in range(cfg.warm_atoms):
            L = p.warm_len[a]
            if L <= 0:
                continue
            dev = bool(p.warm_device[a]) if cfg.hicache else True
            value = None
            if dev:
                value = self.alloc.alloc(L)
                if value is None:
                    raise PoolError(f"warm prefix atom {a} (len {L}) does not fit the pools")
            key = tuple(1 + i for i in range(pos, pos + L))
            n = self.tree.add_node(parent, key, value, WARM, a, host_copy=bool(p.warm_host[a]) and cfg.hicache)
            parent, pos = n, pos + L

    def next_atom(self, owner: int, atom: int | None) -> int | None:
        """The atom after `atom` in request `owner`'s private chain, or in the warm chain (None
        past its end)."""
        chain = self.cfg.warm_chain() if owner == WARM else self.cfg.private_chain(owner)
        if atom is None or atom not in chain:
            return None
        k = chain.index(atom) + 1
        return chain[k] if k < len(chain) else None

    def atom_for(self, owner: int):  # noqa: ANN201
        """Model atom of a node request `owner` just created: the next atom of its private chain."""
        first = self.cfg.private_chain(owner)[0]

        def f(n: TreeNode) -> int | None:
            par = n.parent
            if par is not None and par.owner == owner and par.atom is not None:
                return self.next_atom(owner, par.atom)
            return first

        return f

    # -- helpers -----------------------------------------------------------------------------------
    def max_new_remaining(self, req: Req) -> int:
        return min(max(self.max_new_tokens(req) - req.output_len, 0), self.cfg.clip_max_new_tokens)

    def max_new_tokens(self, req: Req) -> int:
        """max_new_tokens as enqueued (`init_req_max_new_tokens`, #25126: enqueue_clip_max_new)."""
        m, T, inp = self.p.max_new_tokens[req.rid], self.p.full_tokens, req.origin_input_len
        if self.cfg.over_long:  # max_req_len = T - 1; the over-long prompt is clipped before its abort
            if req.rid in self.cfg.over_long:
                inp = self.p.input_len[req.rid]
            m = min(m, (T - 1) - inp - 1)
        if not self.design.on("enqueue_clip_max_new"):
            return m
        return max(0, min(m, T - ceil_page(inp, self.ps) - self.ps - 1))

    def row(self, req_or_idx: Any, lo: int, hi: int) -> torch.Tensor:
        idx = req_or_idx if isinstance(req_or_idx, int) else req_or_idx.req_pool_idx
        return self.req_pool.row(idx, lo, hi)

    def free(self, idx: torch.Tensor) -> None:
        self.alloc.free(idx)

    def evict_from_tree_cache(self, num_tokens: int, ch: Chooser, site: str) -> None:
        """`evict_from_tree_cache`: SWA: evict(full = N - avail_F, swa = N - avail_S) if short;
        plain: the shortfall N - avail (`evict_shortfall`, #32016), before it the whole N when short."""
        full_need = max(0, num_tokens - self.alloc.full_available_size())
        if not self.hybrid and not self.design.on("evict_shortfall"):
            full_need = num_tokens if self.alloc.full_available_size() < num_tokens else 0
        swa_need = max(0, num_tokens - self.alloc.swa_available_size()) if self.hybrid else 0
        with ch.scope(site):
            self.tree.evict(full_need, swa_need, ch)

    def can_alloc(self, tokens: int) -> bool:
        ok = tokens <= self.alloc.full_available_size()
        if self.hybrid and not self.cfg.swa_ring:  # the ring pages full-attention KV only
            ok = ok and tokens <= self.alloc.swa_available_size()
        return ok

    def status_of(self, req: Req) -> str:
        if req in self.running:
            return "running"
        if req in self.chunked:
            return "chunked"
        if req in self.waiting:
            return "waiting"
        if req.finished:
            return "finished"
        return "new"

    # -- the event loop ----------------------------------------------------------------------------
    def step(self, ch: Chooser) -> None:
        """One iteration of `event_loop_normal`, then the busy check."""
        if self.oom != OOM_NONE:
            raise PoolError(f"the scheduler died ({OOM_MESSAGES[self.oom]}); no iteration follows")
        self._ch = ch
        self.steps += 1
        try:
            self._iteration(ch)
        except _SchedulerAssertion:
            self.oom = OOM_ASSERT  # the state is what it was when the assertion failed
        self.busy = self.self_check_during_busy()
        self.idle = self.self_check_during_idle()

    def _iteration(self, ch: Chooser) -> None:
        self.needless_retract = self.needless_recompute = False
        self.recv_requests(ch)
        self.loading_check()
        self.stash_chunked_req(ch)
        ad = self.get_new_batch_prefill(ch)
        if ad.can_run:
            with ch.scope("prefill"):
                self.run_prefill_batch(ad, ch)
        elif self.running:
            with ch.scope("decode"):
                self.run_decode_batch(ch)
        else:  # a running batch of finished requests only, filtered empty (model/system.py::_batch)
            if self._filter_batch():
                self.batch_is_full = False
            self.last_batch = NO_BATCH

    def _unfiltered_counted(self) -> bool:  # model/session.py::unfiltered_counted
        return bool(self.cfg.streaming_sessions) and not self.design.on("uncached_skips_released_req")

    def _filter_batch(self) -> bool:
        """update_running_batch's filter_batch (model/system.py::_filter_batch): whether any left."""
        left = any(r.unfiltered for r in self.reqs)
        for r in self.reqs:
            r.unfiltered = False
        return left

    def _running_bs(self) -> int:
        return len(self.running) + sum(1 for r in self.reqs if r.unfiltered)

    def _allocatable_reqs(self, ad: PrefillAdder) -> int:  # model/system.py::allocatable_reqs
        pp_budget = self.p.req_pool_size - self._running_bs()
        if not self.design.on("admission_free_rows"):
            return pp_budget
        rows = self.req_pool.available_size()
        if self.design.on("admission_rows_held"):
            rows += sum(1 for a in ad.can_run.values() if not a.fresh)
        return min(pp_budget, rows)

    def recv_requests(self, ch: Chooser) -> None:
        with ch.scope("recv"):
            for req in self.reqs:
                if not req.arrived and ch.bool(f"arrive[{req.rid}]"):
                    req.arrived = True
                    self.waiting.append(req)
            for i, slot in enumerate(self.slots):
                req = self.reqs[slot.rid]
                idle = req.finished and not slot.closed
                close = idle and slot.holding and ch.bool(f"close_session[{i}]")
                if close:
                    self.release_session(slot)
                more = idle and not close and req.turn + 1 < self.cfg.max_turns
                if more and ch.bool(f"next_turn[{req.rid}]"):
                    lo, hi = self.cfg.turn_tokens
                    new_tokens = ch.int(f"turn_tokens[{req.rid}]", lo, hi)
                    req.origin_input_len += min(req.output_len, self.max_new_tokens(req)) + new_tokens  # output_ids[:max_new_tokens]
                    req.output_len = 0
                    req.turn += 1
                    slot.turn_saved = slot.detached = False  # a new Req, streaming again
                    req.kv_allocated_len = req.kv_committed_len = req.cache_protected_len = req.swa_evicted_seqlen = 0
                    req.lock, req.virtual = None, False
                    req.finished = False
                    self.waiting.append(req)

    def loading_check(self) -> None:
        """HiCache: load-backs issued last iteration have completed; release their locks."""
        for req in self.reqs:
            if req.load_back is not None:
                self.tree.dec_lock_ref(req.load_back)
                req.load_back = None

    def stash_chunked_req(self, ch: Chooser) -> None:
        gate = self.design.on("chunked_req_scheduled_last_iter")
        for req in sorted(self.chunked, key=lambda q: q.rid):
            if not gate:  # <= v0.5.11: every iteration; a parked request's fill is its whole prompt
                if not req.in_last_batch:
                    # the row's entries past the KV were never allocated: whatever the row holds there
                    # goes into the tree (model/system.py::stash_chunked_req, SGLang #24252)
                    req.kv_allocated_len = req.kv_committed_len = req.origin_input_len + req.output_len
                self.cache_unfinished_req(req, ch, f"stash[{req.rid}]")
            elif self.last_batch == EXTEND_BATCH:
                self.cache_unfinished_req(req, ch, f"stash[{req.rid}]")
        # the last extend batch drops its finished and chunked requests; v0.5.23 filters the running
        # batch too (model/system.py::_filter_last_batch)
        extend = self.last_batch == EXTEND_BATCH
        left = extend and any(r.in_last_batch and r not in self.running for r in self.reqs)
        was_empty = not any((r in self.running and not r.in_last_batch) or r.unfiltered for r in self.reqs)
        if extend and was_empty and any(r.in_last_batch and r in self.running for r in self.reqs):
            left = True  # the empty running batch is replaced by the extend batch, flag and all
        if self.design.on("filter_running_every_step"):
            left = self._filter_batch() or left
        if left:
            self.batch_is_full = False
        for req in self.reqs:
            req.in_last_batch = False

    # -- prefill ----------------------------------------------------------------------------------
    def match_prefix(self, req: Req) -> tuple[Match, Restored | None]:
        key_len = req.origin_input_len + req.output_len - 1
        if self.cfg.chunk_cache:  # ChunkCache.match_prefix: always a miss (model/radix_cache.py::match_prefix)
            return self.tree.match_prefix(self.tokens_of(req.rid), 0, req.rid, False), None
        m = self.tree.match_prefix(self.tokens_of(req.rid), key_len, req.rid, self.cfg.hicache)
        if self.hybrid and self.design.on("swa_branching_insert"):  # v0.5.20: past the SWA-valid boundary
            full = floor_page(m.full_hit, self.ps)
            req.swa_branching_seqlen = full if full > m.prefix_len + m.host_hit_length else 0
        i = self.cfg.slot_of(req.rid)
        if i is not None:
            slot = self.slots[i]
            if slot.holding and not slot.closed and not slot.detached:
                return m, self.restore_to_req(req, slot, key_len)
        return m, None

    def get_new_batch_prefill(self, ch: Chooser) -> PrefillAdder:
        """The pass and running_batch.batch_is_full (model/system.py::get_new_batch_prefill)."""
        design = self.design
        if self.hybrid and design.on("swa_clears_batch_is_full"):
            self.batch_is_full = False
        running = self._running_bs() > 0
        if design.on("batch_is_full_needs_running") and not running:
            self.batch_is_full = False
        ad = PrefillAdder(self)
        if (self.batch_is_full or not self.waiting) and not self.chunked:
            return ad
        precheck = not self.chunked if design.on("allocatable_precheck_unchunked") else bool(self.chunked)
        if precheck and self._allocatable_reqs(ad) <= 0:
            self.batch_is_full = True
            return ad
        if self.cfg.chunked_prefill:
            for req in sorted(self.chunked, key=lambda q: q.rid):
                ad.add_chunked_req(req)
        served_only = self.cfg.hicache or design.on("batch_is_full_needs_running")
        for req in sorted(self.waiting, key=lambda q: q.rid):
            if ad.stopped or self.batch_is_full:
                break
            if design.on("pass_budget_break") and ad.budget_state() == OTHER:  # v0.5.23
                break
            if len(ad.can_run) >= self._allocatable_reqs(ad):
                self.batch_is_full = True
                break
            with ch.scope(f"admit[{req.rid}]"):
                m, restored = self.match_prefix(req)
                ad.add_one_req(req, m, restored is None, restored)
            if ad.result == NO_TOKEN:
                self.batch_is_full = (running or bool(ad.can_run)) if served_only else True
        return ad

    def init_load_back(self, req: Req, m: Match) -> torch.Tensor | None:
        """`init_load_back`: evict (the device prefix is under the temporary lock) so the host hit
        fits, then load it all or nothing and lock the loaded path until `loading_check`."""
        full_need = m.host_hit_length
        swa_need = m.swa_host_hit_length if self.hybrid else 0
        ch = self._ch
        with ch.scope(f"load_back[{req.rid}]"), ch.scope("evict"):
            self.tree.evict(max(0, full_need - self.alloc.full_available_size()),
                            max(0, swa_need - self.alloc.swa_available_size()) if self.hybrid else 0, ch)
        new = self.tree.load_back(m)
        if new is None:
            more_full, more_swa = self.tree.evictable_left()
            room = full_need <= self.alloc.full_available_size() or more_full
            if self.hybrid:
                room = room and (swa_need <= self.alloc.swa_available_size() or more_swa)
            self.needless_recompute = self.needless_recompute or room
            return None
        req.load_back = self.tree.inc_lock_ref(m.best_match_node)
        return new

    def run_prefill_batch(self, ad: PrefillAdder, ch: Chooser) -> None:
        if not self.alloc_for_extend(ad, ch):
            return
        decoding: list[Req] = []
        if self.cfg.mixed_chunk:
            with ch.scope("mixed"):
                decoding = self.mix_with_running(ch)
            if self.oom != OOM_NONE:
                return
        self.process_batch_result_prefill(ad, ch, decoding)

    def mix_with_running(self, ch: Chooser) -> list[Req]:
        """Mixed chunk (model/system.py::mix_with_running): the filtered running batch decodes in
        the prefill batch, after `check_decode_mem` from v0.5.22; returns the decoding requests."""
        self._filter_batch()
        batch = sorted(self.running, key=lambda q: q.rid)
        if not batch:
            return []
        if self.design.on("mixed_decode_mem_check") and not self.check_decode_mem(batch, ch, "mixed_check"):
            return []  # the running batch sits out this step
        return batch if self.alloc_for_decode(batch, ch) else []

    def alloc_for_extend(self, ad: PrefillAdder, ch: Chooser) -> bool:
        ps = self.ps
        batch = [(self.reqs[r], a) for r, a in sorted(ad.can_run.items())]
        if self.cfg.chunk_cache and self.hybrid:  # maybe_evict_swa's extend branch (model/schedule_batch.py)
            for req, a in batch:
                self.free_swa_out_of_window_slots(req, a.prefix)
        fresh = sum(1 for _r, a in batch if a.fresh)
        if fresh > self.req_pool.available_size():
            self.oom = OOM_REQ_SLOTS
            return False
        ext_total = sum(a.extend for _r, a in batch)
        evict_for = ext_total if ps == 1 else ext_total + len(batch) * ps
        self.evict_from_tree_cache(evict_for, ch, "evict")
        if self.hybrid and not self.cfg.swa_ring and ps > 1 and not self.design.on("swa_extend_exact_pages"):
            # the v0.5.10 SWA alloc_extend refused unless extend + bs * page fit each pool
            if evict_for > self.alloc.full_available_size() or evict_for > self.alloc.swa_available_size():
                self.oom = OOM_PREFILL
                return False
        # rows first (a fresh request's row gets its matched prefix), then one alloc_extend
        rows: list[int] = []
        for req, a in batch:
            if a.fresh:
                rows.append(-1)
            else:
                assert req.req_pool_idx is not None
                rows.append(req.req_pool_idx)
        prefix_lens = [a.prefix for _r, a in batch]
        seq_lens = [a.prefix + a.extend for _r, a in batch]
        last_locs = []
        for (req, a), row in zip(batch, rows):
            if a.prefix == 0:
                last_locs.append(-1)
            elif row >= 0:
                last_locs.append(int(self.req_pool.req_to_token[row, a.prefix - 1]))
            else:
                assert req.prefix_indices is not None
                last_locs.append(int(req.prefix_indices[a.prefix - 1]))
        out = self.alloc.alloc_extend(prefix_lens, seq_lens, last_locs)
        if out is None:
            self.oom = OOM_PREFILL
            return False
        off = 0
        for (req, a), row in zip(batch, rows):
            if row < 0:
                row = self.req_pool.alloc()
                assert row is not None
                req.req_pool_idx = row
                if req.prefix_indices is not None and a.prefix:
                    self.req_pool.write(row, 0, req.prefix_indices[: a.prefix])
            self.req_pool.write(row, a.prefix, out[off : off + a.extend])
            off += a.extend
            req.kv_allocated_len = req.kv_committed_len = a.prefix + a.extend
        return True

    def process_batch_result_prefill(self, ad: PrefillAdder, ch: Chooser, decoding: list[Req] | None = None) -> None:
        decoding = decoding or []
        for req in self.reqs:
            a = ad.can_run.get(req.rid)
            req.in_last_batch = a is not None or req in decoding
            if a is None:
                continue
            if req in self.waiting:
                self.waiting.remove(req)
            if a.new_chunked:
                if req not in self.chunked:
                    self.chunked.append(req)
                continue
            if req in self.chunked:
                self.chunked.remove(req)
            req.output_len += 1
            if req.rid in self.cfg.over_long or req.output_len >= self.max_new_tokens(req):  # (`to_finish`)
                try:
                    self.release_kv_cache(req, True, ch, f"finish[{req.rid}]")
                finally:  # (also where the release dies on the assertion: finished_reason is set before it)
                    req.finished = True
            else:
                self.running.append(req)  # (before the insert, which may die on the assertion)
                if not req.virtual:
                    self.cache_unfinished_req(req, ch, f"unfinished[{req.rid}]")
                    i = self.cfg.slot_of(req.rid)
                    if (i is not None and self.design.variant("session_record") == "owned_at_alloc"
                            and not self.slots[i].detached):
                        self.take(req, self.slots[i])
        for req in decoding:  # the batch's decoding_reqs come after its extend requests
            if req.output_len >= self.max_new_tokens(req):
                try:
                    self.release_kv_cache(req, True, ch, f"finish[{req.rid}]")
                finally:
                    self.running.remove(req)
                    req.finished = True
        self.last_batch = EXTEND_BATCH

    # -- radix cache paths -------------------------------------------------------------------------
    def _backup(self, ch: Chooser, site: str) -> bool:
        return ch.bool(f"{site}.write_backup") if self.cfg.hicache else False

    def cache_unfinished_req(self, req: Req, ch: Chooser, site: str) -> None:
        """Insert the computed page-aligned part, free duplicates, point the row at the tree's
        indices, move the lock to the new last node; P := the tree part. With
        `unfinished_swa_release` the out-of-window SWA goes first (pre_len = C - 1) and the insert
        gets that E; `rematch` then takes P and the lock node from a match of the inserted key
        (and points the row at the tree only that far, as SGLang writes `new_indices[P:]`)."""
        if self.cfg.chunk_cache:  # the row is the next chunk's prefix; nothing is inserted
            return
        C = req.kv_committed_len
        cut = self._branch_cut(req)  # swa_branching_insert: the key stops at the branching point
        key_len = req.swa_branching_seqlen if cut else C
        end = floor_page(key_len, self.ps)
        v = self.design.variant("unfinished_swa_release") if self.hybrid else None
        E = None
        if v is not None:
            self.free_swa_out_of_window_slots(req, key_len - 1)
            E = req.swa_evicted_seqlen
        backup = self._backup(ch, site)
        held = min(self.tree.path_len(self.tokens_of(req.rid), req.rid), end)  # InsertResult.prefix_len
        last, owned, rewrite = self.tree.insert(req.rid, self.tokens_of(req.rid), lambda lo, hi: self.row(req, lo, hi),
                                                req.cache_protected_len, end, E, backup, self.atom_for(req.rid))
        if v == "rematch":
            m = self.tree.match_prefix(self.tokens_of(req.rid), end, req.rid, False)
            if held > m.prefix_len:  # SGLang: assert new_prefix_len <= len(new_indices)
                raise _SchedulerAssertion
            last, owned = m.last_device_node, m.prefix_len
            rewrite = [(pos, idx) for pos, idx in rewrite if pos < owned]
        for pos, idx in rewrite:
            self.req_pool.write(req.req_pool_idx, pos, idx)  # type: ignore[arg-type]
        old = req.lock
        if old is not None:
            self.tree.dec_lock_ref(old)
        req.lock = self.tree.inc_lock_ref(last)
        req.cache_protected_len = owned
        if not self.hybrid and self.design.variant("prompt_boundary_split") == "checkpoint":
            self._split_at_prompt(req, end)  # v0.5.22: checkpoint_into_tree splits a stash too
        if cut:  # the branch is inserted: forget it, and release the whole fill's out-of-window SWA again
            req.swa_branching_seqlen = 0
            if v is not None:
                self.free_swa_out_of_window_slots(req, C - 1)

    def _split_at_prompt(self, req: Req, end: int) -> None:
        """`prompt_boundary_split`: re-insert the key cut at floor_page(|input|) (topology only: the
        output is its own leaf)."""
        pk = floor_page(req.origin_input_len, self.ps)
        if 0 < pk < end:
            self.tree.split_at(req.rid, self.tokens_of(req.rid), pk)

    def _branch_cut(self, req: Req) -> bool:
        """`SWAComponent.prepare_for_caching_req` (v0.5.20): cache only [0, branching) when
        branching > P and the key reaches it."""
        b = req.swa_branching_seqlen
        return bool(self.hybrid and self.design.on("swa_branching_insert") and req.cache_protected_len < b <= req.kv_committed_len)

    def cache_finished_req(self, req: Req, is_insert: bool, ch: Chooser, site: str) -> None:
        """Insert [P, floor(C)) with swa_evicted_seqlen (or free it), free the unaligned tail page,
        unlock."""
        ps = self.ps
        C, P = req.kv_committed_len, req.cache_protected_len
        end = floor_page(C, ps)
        keep = self._keeps_lock(req, is_insert)
        is_insert = is_insert and not self.cfg.chunk_cache  # ChunkCache frees the committed KV
        if is_insert and self._branch_cut(req):  # swa_branching_insert: only [0, branching) is cached
            end = req.swa_branching_seqlen
        owned = P
        if is_insert:
            backup = self._backup(ch, site)
            held = min(self.tree.path_len(self.tokens_of(req.rid), req.rid), end)  # InsertResult.prefix_len
            _last, owned, _ = self.tree.insert(req.rid, self.tokens_of(req.rid), lambda lo, hi: self.row(req, lo, hi), P,
                                               end, req.swa_evicted_seqlen if self.hybrid else None, backup,
                                               self.atom_for(req.rid))
            if not self.hybrid and self.design.on("prompt_boundary_split"):
                self._split_at_prompt(req, end)
            if (self.hybrid and self.design.variant("unfinished_swa_release") == "rematch"
                    and self.design.on("finish_checkpoint")):  # v0.5.22: checkpoint_into_tree re-matches
                if held > self.tree.match_prefix(self.tokens_of(req.rid), end, req.rid, False).prefix_len:
                    raise _SchedulerAssertion
        self.free(self.row(req, owned, C))
        if keep:
            return
        if req.lock is not None:
            self.tree.dec_lock_ref(req.lock)
        req.lock = None

    def _keeps_lock(self, req: Req, is_insert: bool) -> bool:
        """The planted `finished_req_keeps_lock`: a non-session request's finish keeps its tree lock."""
        return is_insert and self.cfg.slot_of(req.rid) is None and self.mutant("finished_req_keeps_lock")

    def release_kv_cache(self, req: Req, is_insert: bool, ch: Chooser, site: str, abort: bool = False) -> None:
        i = self.cfg.slot_of(req.rid)
        if i is not None and not self.slots[i].detached:
            slot = self.slots[i]
            self.save_from_req(req, slot)  # an OOM abort too: `finished_reason` is not set yet (model docstring)
            if self.design.on("finish_req_detach"):  # Session.finish_req (model/session.py)
                slot.detached = slot.detached or slot.turn_saved
                slot.turn_saved = True
        else:
            self.cache_finished_req(req, is_insert, ch, site)
            ps = self.ps
            C, A = req.kv_committed_len, req.kv_allocated_len
            start = floor_page(C, ps) if self.mutant("finish_frees_overalloc_from_floor") else ceil_page(C, ps)
            self.free(self.row(req, start, A))  # over-allocation [ceil(C), A)
            self.req_pool.free(req.req_pool_idx)  # type: ignore[arg-type]
            req.req_pool_idx = None
            if self._keeps_lock(req, is_insert):
                return
        req.lock, req.virtual = None, False

    # -- sessions ---------------------------------------------------------------------------------
    def restore_to_req(self, req: Req, slot: SessionSlot, key_len: int) -> Restored:
        """`restore_to_req` via `match_prefix`: the request takes the slot's row (the slot keeps it
        too, so a rejected request restores again)."""
        ps = self.ps
        C, A, E, P = slot.kv_committed_len, slot.kv_allocated_len, slot.swa_evicted_seqlen, slot.cache_protected_len
        if self.design.on("retract_tail_free"):
            prefix = min(C, key_len)
            self.free(self.row(slot.req_pool_idx, ceil_page(prefix, ps), A))  # _free_tail
            slot.kv_allocated_len, slot.kv_committed_len, slot.swa_evicted_seqlen = prefix, min(C, prefix), min(E, prefix)
            E = slot.swa_evicted_seqlen
        else:
            prefix = min(C, max(key_len - 1, 0))
        slot.is_active = True
        req.req_pool_idx = slot.req_pool_idx
        return Restored(prefix, P, E)

    def take(self, req: Req, slot: SessionSlot) -> None:
        """v0.5.22 `StreamingSession.take`: the slot owns the first turn's record and tree lock; the
        request borrows them (its lock node is the slot's virtual node)."""
        slot.req_pool_idx = req.req_pool_idx
        slot.kv_allocated_len, slot.kv_committed_len = req.kv_allocated_len, req.kv_committed_len
        slot.swa_evicted_seqlen, slot.cache_protected_len = req.swa_evicted_seqlen, req.cache_protected_len
        slot.lock, slot.virtual = req.lock, False
        slot.is_active = True  # its row is the running turn's, as after a restore
        req.lock, req.virtual = None, True

    def save_from_req(self, req: Req, slot: SessionSlot) -> None:
        first = not slot.holding
        slot.req_pool_idx = req.req_pool_idx
        slot.kv_allocated_len, slot.kv_committed_len = req.kv_allocated_len, req.kv_committed_len
        slot.swa_evicted_seqlen = req.swa_evicted_seqlen
        if first:  # the slot keeps the first turn's tree lock
            slot.cache_protected_len = req.cache_protected_len
            slot.lock, slot.virtual = req.lock, req.virtual
        slot.is_active = False
        req.req_pool_idx = None

    def release_session(self, slot: SessionSlot) -> None:
        if slot.lock is not None:
            self.tree.dec_lock_ref(slot.lock)
        self.free(self.row(slot.req_pool_idx, slot.cache_protected_len, slot.kv_allocated_len))
        self.req_pool.free(slot.req_pool_idx)  # type: ignore[arg-type]
        slot.req_pool_idx = None
        slot.closed = True
        slot.turn_saved = slot.detached = False  # the session and its req_nodes are gone

    # -- decode -------------------------------------------------------------------------------------
    def decode_tokens_needed(self, batch: list[Req]) -> int:
        ps, spec = self.ps, self.cfg.spec
        if spec is not None and spec.version == 2:  # _new_tokens_required_next_decode_spec_v2
            return sum(ceil_page(self._spec_v2_alloc_len(r), ps) - ceil_page(r.kv_allocated_len, ps) for r in batch)
        if spec is not None:
            L, k, D = spec.num_steps, spec.topk, spec.num_draft_tokens
            if ps > 1:
                L = ceil_page(L + ps, ps) if k > 1 else ceil_page(L, ps)
                D = ceil_page(D, ps)
            return len(batch) * max(L * k, D)
        if ps == 1:
            return len(batch)
        return ps * sum(1 for r in batch if r.kv_committed_len % ps == 0)

    def check_decode_mem(self, batch: list[Req], ch: Chooser, site: str) -> bool:
        need = self.decode_tokens_needed(batch)
        self.evict_from_tree_cache(need, ch, site)
        return self.alloc.available_size() >= need

    def _short_of_memory(self, batch: list[Req]) -> bool:
        """Even with every evictable tree token evicted, a pool holds less than the next decode step
        of `batch` needs: what a failed `check_decode_mem` means, read from the allocator and the
        tree's counters on the state the check left."""
        need = self.decode_tokens_needed(batch)
        short = self.alloc.full_available_size() + self.tree.full_evictable_size_ < need
        if self.hybrid and not self.cfg.swa_ring:
            short = short or self.alloc.swa_available_size() + self.tree.swa_evictable_size_ < need
        return short

    def _retract_order(self, kept: list[Req], ch: Chooser, it: int) -> Req:
        if self.cfg.spec is not None and not self.design.on("spec_retract_length_order"):
            return max(kept, key=lambda r: r.rid)  # spec retracts from the back of the batch
        # sort by (len(output_ids), -len(origin_input_ids)) descending, pop from the end; a tie is
        # admission order in SGLang, a choice here (model/schedule_batch.py::_retract_victims)
        key = min((r.output_len, -r.origin_input_len) for r in kept)
        tied = sorted((r for r in kept if (r.output_len, -r.origin_input_len) == key), key=lambda r: r.rid)
        passes = {r.rid: ch.bool(f"retract[{it}].tie_pass[{r.rid}]") for r in tied[1:]}
        return next(r for r in reversed(tied) if not passes.get(r.rid, False))

    def retract_decode(self, fits: bool, forced: bool, ch: Chooser) -> None:
        kept = sorted(self.running, key=lambda q: q.rid)
        going = (not fits) or forced
        for it in range(self.cfg.num_reqs):
            if it > 0 and going:
                with ch.scope(f"retract[{it}]"):
                    fits = self.check_decode_mem(kept, ch, "check")
                going = not fits
            if not going:
                break
            last_one = len(kept) == 1
            abort = last_one and not fits
            if not last_one or abort:
                if not (self._short_of_memory(kept) or (forced and it == 0)):
                    self.needless_retract = True
                victim = self._retract_order(kept, ch, it)
                self.release_kv_cache(victim, False, ch, f"retract[{it}].release[{victim.rid}]", abort)
                rest = len(kept) - 1
                with ch.scope(f"retract[{it}].victim[{victim.rid}]"):
                    self.evict_from_tree_cache(rest * self.cfg.retract_decode_steps, ch, "evict")
                # reset_for_retract (output_ids are kept); an abort finishes the request
                victim.kv_allocated_len = victim.kv_committed_len = 0
                victim.cache_protected_len = victim.swa_evicted_seqlen = victim.swa_branching_seqlen = 0
                victim.decode_batch_idx = 0
                self.running.remove(victim)
                if abort:
                    victim.finished = True
                else:
                    self.waiting.append(victim)
                kept.remove(victim)
            if last_one:
                break

    def _swa_keep(self) -> int:
        """Tokens `free_swa_out_of_window_slots` keeps below pre_len, per `swa_release_threshold`:
        W + ps (off, <= v0.5.14), max(W, ps) (v0.5.15.post1+), ceil_page(max(W, ps)) (v0.5.23)."""
        W, ps = self.p.sliding_window_size, self.ps
        v = self.design.variant("swa_release_threshold")
        if v is None:
            return W + ps if self.design.on("swa_release_page_margin") else W
        if self.cfg.chunk_cache:  # no tree: the window alone (model/radix_cache.py::swa_release_bounds)
            return W
        if v == "max_w_ps":
            return max(W, ps)
        return ceil_page(max(W, ps), ps)

    def free_swa_out_of_window_slots(self, req: Req, pre_len: int, skip_free: bool = False) -> None:
        """`free_swa_out_of_window_slots`: E rises to P, then the SWA slots [E, E') that slid out
        of the window are released, E' = floor(max(E, pre_len - keep)). `skip_free`: the planted
        `evict_swa_skips_free_swa` (decode's `_evict_swa` only, as the model's mutant)."""
        E = max(req.swa_evicted_seqlen, req.cache_protected_len)
        target = max(E, floor_page(pre_len - self._swa_keep(), self.ps))
        if target > E and not skip_free:
            self.alloc.free_swa(self.row(req, E, target))
        req.swa_evicted_seqlen = target

    def _evict_swa(self, req: Req, pre_len: int) -> None:
        """Release the SWA slots that slid out of the window (decode)."""
        self.free_swa_out_of_window_slots(req, pre_len, skip_free=self.mutant("evict_swa_skips_free_swa"))

    def run_decode_batch(self, ch: Chooser) -> None:
        shrank = self._filter_batch()
        batch = sorted(self.running, key=lambda q: q.rid)
        fits = self.check_decode_mem(batch, ch, "check")
        forced = ch.bool("test_retract") if self.cfg.test_retract else False
        if not fits or forced:
            self.retract_decode(fits, forced, ch)
        if shrank or len(self.running) < len(batch):  # the batch shrank: batch_is_full clears
            self.batch_is_full = False
        batch = sorted(self.running, key=lambda q: q.rid)
        if not batch:
            self.last_batch = NO_BATCH
            return
        if self.cfg.spec is not None and self.cfg.spec.version == 2:
            ok = self.spec_v2_decode_step(batch, ch)
        elif self.cfg.spec is not None:
            ok = self.eagle_decode_step(batch, ch)
        else:
            ok = self.alloc_for_decode(batch, ch)
        if not ok:
            return
        for req in batch:
            if req.output_len >= self.max_new_tokens(req):
                try:
                    self.release_kv_cache(req, True, ch, f"finish[{req.rid}]")
                finally:  # (also where the release dies on the assertion: finished_reason is set before it)
                    self.running.remove(req)
                    req.finished = True
                    req.unfiltered = True  # still in the running batch (model/system.py::_finish_decoded)
        self.last_batch = DECODE_BATCH

    def maybe_evict_swa(self, batch: list[Req], ch: Chooser) -> None:
        """Each running request may release what slid out of its window, pre_len = C (seqlen - 1);
        `spec_v2_window_from_allocated_len` measures it from A (the model's mutant)."""
        for req in batch:
            if ch.bool(f"evict_swa[{req.rid}]"):
                from_a = self.mutant("spec_v2_window_from_allocated_len")
                self._evict_swa(req, req.kv_allocated_len if from_a else req.kv_committed_len)

    def alloc_for_decode(self, batch: list[Req], ch: Chooser) -> bool:
        ps = self.ps
        if self.hybrid:
            self.maybe_evict_swa(batch, ch)
        need = self.decode_tokens_needed(batch)
        self.evict_from_tree_cache(len(batch) * ps, ch, "evict")
        if not self.can_alloc(need):
            self.oom = OOM_DECODE
            return False
        seq_lens = [r.kv_committed_len + 1 for r in batch]
        last_locs = [int(self.req_pool.req_to_token[r.req_pool_idx, r.kv_committed_len - 1]) for r in batch]
        out = self.alloc.alloc_decode(seq_lens, last_locs)
        if out is None:
            self.oom = OOM_DECODE
            return False
        for req, idx in zip(batch, out):
            self.req_pool.write(req.req_pool_idx, req.kv_committed_len, idx.reshape(1))  # type: ignore[arg-type]
            req.kv_committed_len += 1
            req.kv_allocated_len += 1
            req.output_len += 1
            req.decode_batch_idx += 1
        return True

    def _draft_tokens(self, req: Req) -> int:
        spec = self.cfg.spec
        assert spec is not None
        L, k, ps = spec.num_steps, spec.topk, self.ps
        C = req.kv_committed_len
        if ps == 1:
            return L * k
        if k == 1:
            return ceil_page(C + L, ps) - ceil_page(C, ps)
        return k * (-(-(C - floor_page(C, ps) + L) // ps)) * ps

    def eagle_decode_step(self, batch: list[Req], ch: Chooser) -> bool:
        """Draft (allocator backed up and restored: the slots never persist, but must fit), verify
        (a paged extend from C to C + D), accept a tokens, free the rejected pages."""
        spec = self.cfg.spec
        assert spec is not None
        ps, D = self.ps, spec.num_draft_tokens
        draft = sum(self._draft_tokens(r) for r in batch)
        self.evict_from_tree_cache(draft, ch, "draft.evict")
        saved = self.alloc.backup_state()
        got = self.alloc.alloc(draft) if draft else torch.empty(0, dtype=I64, device=self.device)
        self.alloc.restore_state(saved)
        if got is None:
            self.oom = OOM_DECODE
            return False
        verify = sum(ceil_page(r.kv_committed_len + D, ps) - ceil_page(r.kv_committed_len, ps) for r in batch)
        self.evict_from_tree_cache(verify, ch, "verify.evict")
        if not self.can_alloc(verify):
            self.oom = OOM_DECODE
            return False
        prefix = [r.kv_committed_len for r in batch]
        seq = [c + D for c in prefix]
        last = [int(self.req_pool.req_to_token[r.req_pool_idx, r.kv_committed_len - 1]) for r in batch]
        out = self.alloc.alloc_extend(prefix, seq, last)
        if out is None:
            self.oom = OOM_DECODE
            return False
        for j, req in enumerate(batch):
            s = req.kv_committed_len
            self.req_pool.write(req.req_pool_idx, s, out[j * D : (j + 1) * D])  # type: ignore[arg-type]
            room = max(1, min(D, self.max_new_tokens(req) - req.output_len))
            a = ch.int(f"accept[{req.rid}]", 1, room)
            keep = min(ceil_page(s + a, ps), s + D)
            if self.mutant("verify_keeps_rejected_page"):
                keep = min(ceil_page(s + a, ps) + ps, s + D)
            self.free(self.row(req, keep, s + D))
            req.kv_committed_len = req.kv_allocated_len = s + a
            req.output_len += a
        return True

    # -- spec v2 (v0.5.13+): speculative/eagle_utils.py::eagle_prepare_for_decode -----------------------
    @staticmethod
    def _alloc_len_per_decode(cfg: Config) -> int:
        """allocation_sizing.get_alloc_len_per_decode (v0.5.16+)."""
        spec, ps = cfg.spec, cfg.page_size
        assert spec is not None
        L, k, D = spec.num_steps, spec.topk, spec.num_draft_tokens
        if ps == 1 or k == 1:
            return max(L * k, D)
        return max(((ps - 1) + L + ps - 1) // ps * ps * k, D)

    def _spec_v2_alloc_len(self, req: Req) -> int:
        """A' = max(A, ceil(C + 2a)) (page rounding since v0.5.16: spec_v2_page_align)."""
        target = req.kv_committed_len + 2 * self._alloc_len_per_decode(self.cfg)
        if self.design.on("spec_v2_page_align"):
            target = ceil_page(target, self.ps)
        return max(req.kv_allocated_len, target)

    def spec_v2_decode_step(self, batch: list[Req], ch: Chooser) -> bool:
        """Over-allocate each row to A' (`alloc_for_spec_decode`: evict, paged extend A -> A'), then
        verify inside it: accept a tokens, C += a. Nothing is freed until the release."""
        spec = self.cfg.spec
        assert spec is not None
        ps, D = self.ps, spec.num_draft_tokens
        if self.hybrid:  # eagle_prepare_for_decode's first call
            self.maybe_evict_swa(batch, ch)
        cur = [r.kv_allocated_len for r in batch]
        nxt = [self._spec_v2_alloc_len(r) for r in batch]
        need = sum(ceil_page(n, ps) - ceil_page(c, ps) for c, n in zip(cur, nxt))
        raw = sum(n - c for c, n in zip(cur, nxt))
        if raw > 0:
            self.evict_from_tree_cache(raw if ps == 1 else raw + len(batch) * ps, ch, "alloc.evict")
            if not self.can_alloc(need):
                self.oom = OOM_DECODE
                return False
            last = [int(self.req_pool.req_to_token[r.req_pool_idx, c - 1]) if c > 0 else -1 for r, c in zip(batch, cur)]
            out = self.alloc.alloc_extend(cur, nxt, last)
            if out is None:
                self.oom = OOM_DECODE
                return False
            off = 0
            for req, c, n in zip(batch, cur, nxt):
                if n > c:
                    self.req_pool.write(req.req_pool_idx, c, out[off : off + n - c])  # type: ignore[arg-type]
                    off += n - c
        for req, n in zip(batch, nxt):
            room = max(1, min(D, self.max_new_tokens(req) - req.output_len))
            a = ch.int(f"accept[{req.rid}]", 1, room)
            req.kv_allocated_len = n - 1 if (n > req.kv_allocated_len and self.mutant("spec_v2_records_short_alloc")) else n
            req.kv_committed_len += a
            req.output_len += a
        return True

    # -- SGLang's busy check -------------------------------------------------------------------------
    def holds_kv(self, req: Req) -> bool:
        return req in self.running or req in self.chunked

    def self_check_during_busy(self) -> BusyCheck:
        cfg, ps = self.cfg, self.ps
        ran = self.last_batch != NO_BATCH and self.oom == OOM_NONE
        if cfg.spec is not None and cfg.spec.topk > 1 and not self.design.on("spec_topk_busy_check"):
            return BusyCheck(False, False, False)  # "speculative_eagle_topk > 1: skip"
        if not ran:
            return BusyCheck(False, False, False)
        variant = self.design.variant("swa_busy_check")
        tree = self.tree
        one_total = self.hybrid and variant is None and cfg.chunk_cache  # SWAChunkCache answers 0; min(full, SWA) free
        try:
            if one_total:
                evictable, protected = 0, 0
            elif variant is None:  # v0.5.10.post1: the generic accessors
                evictable, protected = tree.evictable_size(), tree.protected_size()
            else:
                evictable, protected = tree.full_evictable_size(), tree.full_protected_size()
        except NotImplementedError:
            return BusyCheck(True, True, False)
        with_chunked = self.design.on("busy_check_chunked_req")  # #37502: scheduler.chunked_req too
        counted = [r for r in self.reqs
                   if (r.in_last_batch or r in self.running or (with_chunked and r in self.chunked)) and self.holds_kv(r)]
        u_f = sum(ceil_page(r.kv_allocated_len, ps) - r.cache_protected_len for r in counted)
        u_s = sum(max(0, ceil_page(r.kv_allocated_len, ps) - max(r.cache_protected_len, r.swa_evicted_seqlen)) for r in counted)
        h_f = h_s = 0
        sv = self.design.variant("session_active")
        record = self.design.variant("session_record")
        active_rows = {r.req_pool_idx for r in counted}
        for slot in self.slots:
            borrower = self.reqs[slot.rid]
            if self._unfiltered_counted() and (borrower.unfiltered or (borrower.in_last_batch and borrower.finished)):
                # a finished turn still in a batch, its row unfreed: uncached too (model/invariant_checker.py)
                u_f += ceil_page(slot.kv_allocated_len, ps) - slot.cache_protected_len
                u_s += max(0, ceil_page(slot.kv_allocated_len, ps) - max(slot.cache_protected_len, slot.swa_evicted_seqlen))
            if not slot.holding:
                continue
            A, P, E = slot.kv_allocated_len, slot.cache_protected_len, slot.swa_evicted_seqlen
            lent = borrower.virtual and self.holds_kv(borrower)
            if record is not None and lent:  # one shared record (v0.5.19+): the running turn's numbers
                A, P, E = borrower.kv_allocated_len, borrower.cache_protected_len, borrower.swa_evicted_seqlen
            f = ceil_page(A, ps) - P
            w = max(0, ceil_page(A, ps) - max(P, E))
            if record == "owned_at_alloc":  # v0.5.22: every record is session-held; its borrower is not uncached
                if sv is not None and lent and borrower in counted:
                    u_f, u_s = u_f - f, u_s - w
            elif sv == "is_active" and slot.is_active:
                continue
            elif sv == "active_idx" and slot.req_pool_idx in active_rows:
                continue
            h_f += f
            h_s += w
        avail = min(self.alloc.full_available_size(), self.alloc.swa_available_size()) if one_total \
            else self.alloc.full_available_size()
        full_sum = avail + evictable + protected + h_f + u_f
        ok = full_sum == self.p.full_tokens
        terms = dict(available=avail, evictable=evictable, protected=protected,
                     session_held=h_f, uncached=u_f, sum=full_sum, total=self.p.full_tokens)
        if self.hybrid:
            swa_sum = (self.alloc.swa_available_size() + tree.swa_evictable_size() + tree.swa_protected_size() + h_s + u_s)
            terms.update(swa_available=self.alloc.swa_available_size(), swa_evictable=tree.swa_evictable_size(),
                         swa_protected=tree.swa_protected_size(), swa_session_held=h_s, swa_uncached=u_s,
                         swa_sum=swa_sum, swa_total=self.p.swa_tokens)
            if variant == "on" and not cfg.swa_ring:  # the ring: "no token pool to conserve" (v0.5.20)
                ok = ok and swa_sum == self.p.swa_tokens
        return BusyCheck(True, False, not ok, terms)

    def self_check_during_idle(self) -> IdleCheck:
        """`on_idle`'s checks (model/invariant_checker.py::self_check_during_idle), from the live
        objects: with no batch and nothing running, chunked or waiting, each pool's available +
        evictable + protected + session-held is its total, the free rows plus the session slots'
        rows are the row pool, and on the SWA-capable trees (not while a HiCache session holds KV)
        every lock ref is zero and the evictable counters are their recount."""
        quiet = not (self.running or self.chunked or self.waiting)
        if self.last_batch != NO_BATCH or self.oom != OOM_NONE or not quiet:
            return IdleCheck(False, False)
        ps, tree, held = self.ps, self.tree, [s for s in self.slots if s.holding]
        forgets = self.mutant("idle_check_ignores_session_rows")  # the full pool's and the rows' session terms
        h_f = 0 if forgets else sum(ceil_page(s.kv_allocated_len, ps) - s.cache_protected_len for s in held)
        h_s = sum(max(0, ceil_page(s.kv_allocated_len, ps) - max(s.cache_protected_len, s.swa_evicted_seqlen)) for s in held)
        full_sum = self.alloc.full_available_size() + tree.full_evictable_size_ + tree.full_protected_size_ + h_f
        ok = full_sum == self.p.full_tokens
        terms = dict(full_sum=full_sum, full_total=self.p.full_tokens, req_free=self.req_pool.available_size(),
                     session_rows=len(held), req_total=self.p.req_pool_size)
        if self.hybrid and not self.cfg.swa_ring:
            swa_sum = self.alloc.swa_available_size() + tree.swa_evictable_size_ + tree.swa_protected_size_ + h_s
            terms.update(swa_sum=swa_sum, swa_total=self.p.swa_tokens)
            ok = ok and swa_sum == self.p.swa_tokens
        ok = ok and self.req_pool.available_size() + (0 if forgets else len(held)) == self.p.req_pool_size
        if self.hybrid and not (self.cfg.hicache and held):
            fe, _fp, se, _sp = tree.recount()
            ok = ok and all(n.full_lock_ref == 0 and n.swa_lock_ref == 0 for n in tree.nodes())
            ok = ok and tree.full_evictable_size_ == fe and tree.swa_evictable_size_ == se
        return IdleCheck(True, not ok, terms)

    # the chooser of the running step (init_load_back is reached from inside the adder)
    _ch: Chooser
