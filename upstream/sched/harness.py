"""SGLang's real `Scheduler`, built without a model, driven one kvmc step at a time (worker side:
imported only in the subprocess whose PYTHONPATH selects one release).

Built as SGLang's own tests build a scheduler: `Scheduler.__new__(Scheduler)`, the attributes the
constructor's argument parsing, `init_model_worker` (max_total_num_tokens, max_prefill_tokens,
max_running_requests, max_req_len, device, ...) and the memory-pool construction would set, then
SGLang's own `init_*` methods, release by release:

* family "monolithic" (0.5.10.post1 .. 0.5.12.post1): `init_metrics`, `init_moe_gemm_config`,
  `init_cache_with_memory_pool` (SGLang chooses and wraps the tree cache: RadixCache,
  SWARadixCache, HiRadixCache, SessionAwareCache / StreamingSession), `init_running_status`,
  `init_chunked_prefill`, `init_schedule_policy`, `init_disaggregation`, `init_overlap`,
  `maybe_init_ngram_embedding`, `init_deterministic_inference_config`, `init_request_dispatcher`,
  `GrammarManager`;
* family "components" (0.5.13 .. 0.5.23, whose scheduler is split into components):
  `kv_cache_builder.build_kv_cache` (SGLang chooses the tree cache), then the component `init_*`
  methods (`init_invariant_checker`, `init_pool_stats_observer`, `init_output_streamer`,
  `init_batch_result_processor`, ...). Within it: 0.5.19 moves rows and lengths onto `req.kv` and
  composes the streaming session into UnifiedRadixCache; 0.5.20 retires the global server args
  (`runtime_context`) and keeps the lock in `lock_receipt`; 0.5.21 drops `ParallelState` (ranks from
  the launcher's `publish(..., ranks=SpawnRanks)`) and defaults UnifiedRadixCache to a Rust tree
  core whose nodes are opaque handles (the harness selects SGLang's Python core, ENV); 0.5.22
  reads the process groups from the runtime context and holds locks as `TreeLock`s.

The memory pools are SGLang's: `ReqToTokenPool`, `TokenToKVPoolAllocator` /
`PagedTokenToKVPoolAllocator` / `SWATokenToKVPoolAllocator` over tiny real KV buffers
(upstream/real.py), handed to SGLang through a stand-in of the model worker (`_NoModelWorker`: the
pools and the few model facts the scheduler reads, no model). What is replaced:
* `run_batch`'s model forward: every request gets the token kvmc's position scheme gives the next
  position (`token(r, pos)`); the bookkeeping around the call (`forward_ct`, the model-worker batch,
  `batch.output_ids`, the result's per-request fields) is done as `run_batch` does it;
* the IPC sockets (outputs to the tokenizer / detokenizer are collected by `_Sink`);
* the paged allocator's Triton kernels below 0.5.22 (upstream/kernels.py, B's routing);
* model config: `_ModelFacts` (vocab size, no EOS, not multimodal, context length).

A step is one iteration of `event_loop_normal`: `process_input_requests` (arrivals, session turns
and closes of the trace's picks), `get_next_batch_to_run`, `run_batch` (replaced forward),
`process_batch_result`, `last_batch = batch`, then SGLang's busy check (`self_check_during_busy`,
the runtime checker mixin up to 0.5.12.post1, `invariant_checker` from 0.5.13) and, when no batch
ran, its idle check (`self_check_during_idle`, strict: a leak raises). An allocation failure is
SGLang's RuntimeError: the scheduler died (`oom`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from model.config import Config, Params
from model.state import OOM_ASSERT, OOM_DECODE, OOM_NONE, OOM_PREFILL, OOM_REQ_SLOTS

from .conventions import ENV, RETRACT_INTERVAL, token

HICACHE_RATIO = 4.0  # host pool = 4x the device pool: the model's host tier is unbounded

_SETUP: dict[str, Any] = {}


class HarnessError(RuntimeError):
    """The release cannot be driven this way (a missing attribute, an API the adapter does not know)."""


class NotReplayable(Exception):
    """The trace needs something this replay cannot provide (the reason is the message)."""


def setup() -> dict[str, Any]:
    """Import SGLang's scheduler and its collaborators once per process."""
    if _SETUP:
        return _SETUP
    os.environ.update(ENV)
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from upstream import real

    m = real.setup()
    sched_mod = importlib.import_module("sglang.srt.managers.scheduler")
    io = importlib.import_module("sglang.srt.managers.io_struct")
    sa_mod = importlib.import_module("sglang.srt.server_args")
    utils = importlib.import_module("sglang.srt.managers.utils")
    try:
        kvb = importlib.import_module("sglang.srt.mem_cache.kv_cache_builder")
    except ImportError:
        kvb = None
    _SETUP.update(m)
    _SETUP.update(real=real, sched_mod=sched_mod, io=io, sa_mod=sa_mod, utils=utils, kvb=kvb)
    return _SETUP


def family() -> str:
    """The adapter family of the imported release, by feature test (never by version string)."""
    s = setup()
    if s["kvb"] is not None and hasattr(s["kvb"], "build_kv_cache"):
        return "components"
    if hasattr(s["sched_mod"].Scheduler, "init_cache_with_memory_pool"):
        return "monolithic"
    raise HarnessError("this release's Scheduler has neither init_cache_with_memory_pool nor kv_cache_builder.build_kv_cache")


# -- stand-ins for what a model would provide --------------------------------------------------------
class _Sink:
    """Where the scheduler's outputs to the tokenizer / detokenizer go (no IPC)."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send_output(self, *a: Any, **k: Any) -> None:
        self.sent.append(a)

    def send_pyobj(self, *a: Any, **k: Any) -> None:
        self.sent.append(a)

    def send(self, *a: Any, **k: Any) -> None:
        self.sent.append(a)


class _Group(SimpleNamespace):
    """A one-rank process group (tp/attn/pp/world): never reached by a collective in one process."""


def _group() -> _Group:
    return _Group(world_size=1, rank=0, rank_in_group=0, first_rank=0, is_first_rank=True, last_rank=0,
                  is_last_rank=True, cpu_group=None, device_group=None, device="cpu", ranks=[0],
                  active_ranks=None, active_ranks_cpu=None)


def _model_facts(context_len: int) -> SimpleNamespace:
    """The facts of a model config the scheduler's memory paths read (no weights, no tokenizer)."""
    hf = SimpleNamespace()
    hf.get_text_config = lambda *a, **k: hf  # transformers' PretrainedConfig API (0.5.18's hybrid_arch asks)
    hf.architectures = ["LlamaForCausalLM"]  # 0.5.21's get_hf_text_config reads it (the resolved arch below)
    return SimpleNamespace(
        is_matryoshka=False, is_generation=True, hidden_size=8, num_key_value_heads=1, num_attention_heads=1,
        head_dim=8, hf_config=hf, hf_text_config=hf, is_multimodal=False,
        is_multimodal_gen=False, is_image_gen=False, is_audio_model=False, hf_eos_token_id=None,
        vocab_size=1 << 30, context_len=context_len, is_encoder_decoder=False, is_hybrid_swa=False,
        is_hybrid_swa_compress=False, use_ngram_embedding=False, use_engram=False, ngram_embedding_n=0, attention_arch=None, num_hidden_layers=2,
        model_path="dummy", dtype=torch.bfloat16, model_impl="sglang", think_end_id=None, think_end_ids=None, self_opened_think_start_ids=None,
        matryoshka_dimensions=None, spec_hidden_size=8, image_token_id=None, is_embedding_gemma=False,
        get_num_kv_heads=lambda tp=1: 1, get_num_attention_heads=lambda tp=1: 1, get_default_sampling_params=dict,
        linear_attn_registry_result=None,  # not a linear-attention model (0.5.18's hybrid_arch registry)
    )


class _ModelRunner(SimpleNamespace):
    """The model runner's facts. Every `*_config` / `*_spec` attribute a release asks about (hybrid
    GDN, Mamba, lightning, linear attention, ...) describes a model kind this is not: None. Any
    other unknown attribute is an error, so a release reading something new fails loudly."""

    def __getattr__(self, name: str) -> Any:
        if name.endswith(("_config", "_spec")):
            return None
        raise AttributeError(f"the model-less worker has no {name!r} (upstream/sched/harness.py::_ModelRunner)")


class _NoModelWorker:
    """What `TpModelWorker` hands the scheduler, without a model: the memory pools and the window."""

    def __init__(self, pool: Any, alloc: Any, facts: Any, hybrid: bool, window: int | None, full: int, swa: int) -> None:
        self._pool, self._alloc = pool, alloc
        self.is_hybrid_swa = hybrid
        self.sliding_window_size = window
        self.model_config = facts
        self.model_runner = _ModelRunner(
            model_config=facts, hybrid_gdn_config=None, mamba2_config=None, req_to_token_pool=pool, token_to_kv_pool_allocator=alloc,
            full_max_total_num_tokens=full, swa_max_total_num_tokens=swa, is_hybrid_swa=hybrid,
            sliding_window_size=window, canary_manager=None, attn_backend=None, lora_manager=None,
            hybrid_linear_config=None, kimi_linear_config=None, mambaish_config=None, model=None,
            mtp_draft_device_pools=(), mtp_draft_mamba_pools=(), prefill_aware_swa=None, ngram_embedding_manager=None, eplb_manager=None,
            weight_load_mem_usage=0,
            token_to_kv_pool=getattr(alloc, "_kvcache", None), hisparse_coordinator=None, linear_attn_model_spec=None,
        )

    def get_memory_pool(self) -> tuple[Any, Any]:
        return self._pool, self._alloc

    def forward_batch_generation(self, batch: Any, **kw: Any) -> Any:
        """The model forward, replaced: the harness's fixed tokens (RealScheduler.forward_tokens)."""
        return self.harness.forward_tokens(batch)

    def get_tokens_per_layer_info(self) -> tuple[int, int]:
        return self.model_runner.full_max_total_num_tokens, self.model_runner.swa_max_total_num_tokens

    def get_pad_input_ids_func(self) -> None:
        return None

    def register_hicache_layer_transfer_counter(self, counter: Any) -> None:
        self.layer_transfer_counter = counter


@dataclass
class Check:
    """One run of an SGLang check: ran / fired (its assertion or strict leak error) / crashed (any
    other exception, e.g. NotImplementedError from a cache that lacks the accessor)."""

    ran: bool = False
    fired: bool = False
    crashed: bool = False
    message: str = ""

    def verdict(self) -> str:
        if not self.ran:
            return "-"
        if self.crashed:
            return f"crashed ({self.message})"
        return f"FIRED ({self.message})" if self.fired else "passed"


@dataclass
class Slot:
    """kvmc's request slot r: the real Req of its current turn (None before it arrives)."""

    r: int
    req: Any = None
    turn: int = 0
    arrived: bool = False
    session_id: str | None = None
    closed: bool = False
    reqs: list[Any] = field(default_factory=list)  # every turn's Req (the ledger reads rows held by any)
    aborted: bool = False  # the client aborted it (`recv.abort[r]`: an AbortReq for its rid)


class RealScheduler:
    """SGLang's Scheduler for one trace's config and parameters."""

    def __init__(self, cfg: Config, params: Params, force: bool = True) -> None:
        s = setup()
        if cfg.spec is not None:
            raise NotReplayable("speculative decoding: EAGLE draft/verify needs the draft and target models "
                                "(the scheduler cannot be driven without them)")
        if cfg.swa_ring:
            from .releases import RING_NOT_REPLAYABLE

            raise NotReplayable(RING_NOT_REPLAYABLE)
        if cfg.hicache and cfg.hybrid_swa and not _unified_hicache():
            raise NotReplayable("HiCache with hybrid SWA: this release has no UnifiedRadixCache with HiCache "
                                "(init_hicache, from 0.5.12.post1), and its HiRadixCache refuses an SWA pool")
        self.cfg, self.p = cfg, params
        self.ps = cfg.page_size
        self.force = force
        self.hybrid = cfg.hybrid_swa
        self.family = family()
        self.oom = OOM_NONE
        self.oom_message = ""
        self.busy = Check()
        self.idle = Check()
        self.steps = 0
        self.last_batch: Any = None
        self.pre_status: list[int] = []
        self.failed_reqs: list[Any] = []  # the requests of the batch whose allocation failed
        self.prefill_skipped = ""  # why SGLang ran no prefill this iteration, where kvmc does not model it
        self.last_mode = "none"  # the batch the last completed iteration ran (model's last_batch)
        self.slots = [Slot(r) for r in range(cfg.num_reqs)]
        self.sink_tok, self.sink_detok = _Sink(), _Sink()
        warm_total = sum(params.warm_len)
        per_turn = max(params.input_len) + max(params.max_new_tokens) + cfg.turn_tokens[1] + 2 * self.ps
        ctx = per_turn * (cfg.max_turns + 1) + warm_total + 4 * self.ps
        self.context_len = -(-ctx // self.ps) * self.ps
        self._build(s)
        for i, r in enumerate(cfg.streaming_sessions):
            self.slots[r].session_id = f"session{i}"
            self._open_session(f"session{i}")
        self._init_warm()
        from . import forcing

        self.forcing = forcing.Forcing(self)

    # -- construction ---------------------------------------------------------------------------------
    def _server_args(self) -> Any:
        s = setup()
        cfg, p = self.cfg, self.p
        kw: dict[str, Any] = {
            "model_path": "dummy", "page_size": self.ps, "disable_overlap_schedule": True, "attention_backend": "torch_native",
            "device": "cpu", "max_prefill_tokens": p.max_prefill_tokens,
            "chunked_prefill_size": p.chunked_prefill_size if cfg.chunked_prefill else -1,
            "max_running_requests": p.req_pool_size, "skip_tokenizer_init": True, "enable_streaming_session": bool(cfg.streaming_sessions),
            "schedule_policy": "fcfs", "disable_radix_cache": bool(getattr(cfg, "chunk_cache", False)), "random_seed": 0,
            "enable_mixed_chunk": bool(getattr(cfg, "mixed_chunk", False)),
        }
        if cfg.hicache:  # the host tier: plain CPU tensors, the direct (row copy) transfer, write-through
            kw.update(enable_hierarchical_cache=True, hicache_io_backend="direct", hicache_mem_layout="layer_first",
                      hicache_write_policy="write_through", hicache_ratio=HICACHE_RATIO)
        sa = s["sa_mod"].ServerArgs(**{k: v for k, v in kw.items() if k in _fields(s["sa_mod"].ServerArgs)})
        return sa

    def _pools(self) -> tuple[Any, Any]:
        real = setup()["real"]
        p = self.p
        if self.hybrid:
            alloc = real.allocator("swa", p.full_tokens, self.ps, p.swa_tokens)
        elif self.ps == 1:
            alloc = real.allocator("token", p.full_tokens, 1)
        else:
            alloc = real.allocator("paged", p.full_tokens, self.ps)
        pool = real.req_to_token_pool(p.req_pool_size, self.context_len)
        return pool, alloc

    def _build(self, s: dict[str, Any]) -> None:
        sa = self._server_args()
        _publish(s, sa)
        self.server_args = sa
        pool, alloc = self._pools()
        self.req_to_token_pool, self.allocator = pool, alloc
        facts = _model_facts(self.context_len)
        p = self.p
        worker = _NoModelWorker(pool, alloc, facts, self.hybrid, p.sliding_window_size if self.hybrid else None,
                                p.full_tokens, p.swa_tokens if self.hybrid else 0)
        worker.harness = self
        Scheduler = s["sched_mod"].Scheduler
        sch = Scheduler.__new__(Scheduler)
        self.sch = sch
        # Hybrid SWA with HiCache is UnifiedRadixCache's (`init_hicache`): the default from 0.5.13
        # (mem_cache/registry.py), behind SGLANG_ENABLE_UNIFIED_RADIX_TREE up to 0.5.12.post1, whose
        # HiRadixCache refuses an SWA pool. Set only while SGLang chooses the cache.
        unified = {"SGLANG_ENABLE_UNIFIED_RADIX_TREE": "1"} if self.cfg.hicache and self.hybrid else {}
        if self.cfg.hicache:
            _host_memory_on_cpu()
        with _env(unified):
            if self.family == "monolithic":
                _build_monolithic(sch, sa, worker, facts, self)
            else:
                _build_components(sch, sa, worker, facts, self)
        self.tree = sch.tree_cache
        self.inner_tree = getattr(self.tree, "inner", self.tree)  # SessionAwareCache / StreamingSession wrap
        if self.cfg.truncation_align_size is not None:
            # what init_deterministic_inference_config sets under --enable-deterministic-inference with the
            # flashinfer prefill backend (SGLANG_FLASHINFER_PREFILL_SPLIT_TILE_SIZE); the harness runs
            # torch_native, whose deterministic mode sets none. get_new_batch_prefill passes it to add_one_req
            sch.truncation_align_size = self.cfg.truncation_align_size
        self.load_back_owner: dict[Any, int] = {}  # ongoing_load_back key -> the request slot that started it
        if self.cfg.hicache:
            self._wire_hicache()
        # kvmc's new_token_ratio is a pinned constant (model/prefill_adder.py)
        num, den = self.cfg.new_token_ratio
        self.ratio = num / den
        self._pin_ratio()
        sched_mod = s["sched_mod"]
        if hasattr(sched_mod, "TEST_RETRACT"):  # module constants read from the environment at import
            sched_mod.TEST_RETRACT = bool(self.cfg.test_retract)
            sched_mod.TEST_RETRACT_INTERVAL = RETRACT_INTERVAL
        self._retract_flag_holder = sched_mod

    def _wire_hicache(self) -> None:
        """HiCache as the model has it: every load-back runs (`load_back_threshold` pinned to 1; SGLang
        skips a Full load below 10 or 256 tokens that carries no SWA), and each in-flight load-back
        is attributed to the request whose admission started it (`init_load_back` observed on the
        instance; SGLang's own method runs), as the model's `load_back_node[r]`."""
        t = self.inner_tree
        if getattr(t, "cache_controller", None) is None:
            raise HarnessError(f"SGLang built {type(t).__name__} without a cache controller for a HiCache config")
        t.load_back_threshold = 1
        orig = t.init_load_back

        def init_load_back(params: Any, *a: Any, **k: Any) -> Any:
            before = set(t.ongoing_load_back)
            out = orig(params, *a, **k)
            r = self.slot_of_req(params.req)
            for key in set(t.ongoing_load_back) - before:
                self.load_back_owner[key] = r
            return out

        t.init_load_back = init_load_back

    def _pin_ratio(self) -> None:
        sch = self.sch
        tracker = getattr(sch, "new_token_ratio_tracker", None)
        if tracker is not None:  # 0.5.13+: NewTokenRatioTracker(init, min, decay, current), a slots dataclass
            for a in ("init_new_token_ratio", "min_new_token_ratio", "new_token_ratio", "init", "min", "current"):
                if hasattr(tracker, a):
                    setattr(tracker, a, self.ratio)
            for a in ("new_token_ratio_decay", "decay"):
                if hasattr(tracker, a):
                    setattr(tracker, a, 0.0)
        for a in ("init_new_token_ratio", "min_new_token_ratio", "new_token_ratio"):
            setattr(sch, a, self.ratio)
        sch.new_token_ratio_decay = 0.0

    def _open_session(self, sid: str) -> None:
        io = setup()["io"]
        req = _make(io.OpenSessionReqInput, capacity_of_str_len=1 << 20, session_id=sid, streaming=True)
        self.sch.process_input_requests([req])

    def _init_warm(self) -> None:
        """The warm prefix: traffic served before the trace began, as SGLang's tree would hold it
        (one node per model atom, inserted atom by atom)."""
        cfg, p = self.cfg, self.p
        if not cfg.warm_atoms:
            return
        s = setup()
        real = s["real"]
        pos = 0
        indices = torch.empty((0,), dtype=torch.int64)
        for a in range(cfg.warm_atoms):
            L = p.warm_len[a]
            if L <= 0:
                continue
            new = real.take(self.allocator, L, self.ps)
            indices = torch.cat([indices, new.to(torch.int64)])
            tokens = [1 + i for i in range(pos + L)]
            key = s["rc"].RadixKey(token_ids=real._ids(tokens), extra_key=None)
            ip = s["bpc"].InsertParams
            kw = {"key": key, "value": indices.clone()}
            if "prev_prefix_len" in _fields(ip):
                kw["prev_prefix_len"] = pos
            if cfg.hicache:  # write-through backs the node (and its unbacked ancestors) up iff it has a host copy
                self.inner_tree.write_through_threshold = 1 if p.warm_host[a] else 1 << 30
            self.inner_tree.insert(ip(**kw))
            pos += L
        if cfg.hicache:
            self._warm_host_only()

    def _warm_host_only(self) -> None:
        """Warm nodes with a host copy only: the write-through is acknowledged (SGLang's own
        `check_hicache_events`), then SGLang's evict demotes the device copies of the chain's
        non-device suffix (leaves first, exactly their tokens; nothing else is in the tree yet)."""
        cfg, p = self.cfg, self.p
        t = self.inner_tree
        t.check_hicache_events()
        off = sum(p.warm_len[a] for a in range(cfg.warm_atoms) if p.warm_len[a] > 0 and not p.warm_device[a])
        if off:
            t.evict(setup()["bpc"].EvictParams(num_tokens=off, swa_num_tokens=0))
        t.write_through_threshold = 1

    # -- requests -------------------------------------------------------------------------------------
    def _sampling(self, max_new: int) -> Any:
        # not ignore_eos: from 0.5.22 the PrefillAdder reserves an ignore_eos request's whole remaining
        # output (ratio 1.0, "fixed-length requests cannot benefit from the early-EOS estimate"), while
        # kvmc applies the config's new_token_ratio to every request, as SGLang does to a request that may
        # stop early. The fixed token run_batch returns is no EOS, so the request still stops at
        # max_new_tokens, as the model's requests do.
        sp = setup()["SamplingParams"](max_new_tokens=max_new, ignore_eos=False)
        sp.normalize(None)
        return sp

    def _generate_req(self, slot: Slot, ids: Any, rid: str) -> Any:
        io = setup()["io"]
        ids = setup()["real"]._ids(ids)  # array('q') from 0.5.13, as the tokenizer manager sends them
        kw: dict[str, Any] = {"input_text": "", "input_ids": ids, "mm_inputs": None, "sampling_params": self._sampling(
            self.p.max_new_tokens[slot.r]), "return_logprob": False, "logprob_start_len": -1, "top_logprobs_num": 0,
            "token_ids_logprob": None, "stream": False, "rid": rid, "input_embeds": None, "token_type_ids": None}
        if slot.session_id is not None:
            kw["session_params"] = io.SessionParams(id=slot.session_id)
        return _make(io.TokenizedGenerateReqInput, **kw)

    def _find_req(self, rid: str) -> Any:
        sch = self.sch
        for q in list(sch.waiting_queue) + list(sch.running_batch.reqs):
            if q.rid == rid:
                return q
        raise HarnessError(f"request {rid=} did not reach the waiting queue (aborted at handle_generate_request?)")

    def arrive(self, r: int) -> Any:
        """Request slot r's first turn arrives (`handle_generate_request`)."""
        cfg, p = self.cfg, self.p
        slot = self.slots[r]
        ids = [token(cfg, p, r, i) for i in range(p.input_len[r])]
        return self._generate_req(slot, ids, f"r{r}.t0")

    def next_turn(self, r: int, new_tokens: int) -> Any:
        """The next turn of slot r's streaming session: SGLang's `Session.create_req` prepends the
        previous turn's input and output; the request carries only the new tokens."""
        cfg, p = self.cfg, self.p
        slot = self.slots[r]
        prev = slot.req
        start = len(prev.origin_input_ids) + len(prev.output_ids)
        ids = [token(cfg, p, r, i) for i in range(start, start + new_tokens)]
        return self._generate_req(slot, ids, f"r{r}.t{slot.turn + 1}")

    def close_session(self, r: int) -> Any:
        io = setup()["io"]
        return _make(io.CloseSessionReqInput, session_id=self.slots[r].session_id)

    def abort(self, r: int) -> Any:
        """The client aborts request slot r's current Req (`abort_request`: popped from the waiting
        queue, or `to_finish` set on a running one, which its next batch finishes)."""
        io = setup()["io"]
        return _make(io.AbortReq, rid=self.slots[r].req.rid)

    # -- the step ---------------------------------------------------------------------------------------
    def step(self, picks: dict[str, Any]) -> None:
        """One iteration of `event_loop_normal` with the trace's choices forced."""
        if self.oom != OOM_NONE:
            raise HarnessError(f"the scheduler died ({self.oom_message}); no iteration follows")
        self.steps += 1
        sch = self.sch
        recv, turns = self._recv(picks)
        self._pin_ratio()
        self.forcing.before_step(picks)
        self.busy, self.idle = Check(), Check()
        batch = None
        try:
            if recv:
                sch.process_input_requests(recv)
            for r, rid in turns:
                self.slots[r].req = self._find_req(rid)
                self.slots[r].reqs.append(self.slots[r].req)
            self.forcing.order_queue()
            from .abstraction import status

            # where each request is before the batch is built: a request in a batch whose
            # allocation fails is in no queue afterwards, and the model keeps it where it was
            self.pre_status = [status(self, sl) for sl in self.slots]
            rb = sch.running_batch
            full_before = bool(getattr(rb, "batch_is_full", False))
            finished_before = sum(1 for q in rb.reqs if q.finished())
            waiting_before = len(sch.waiting_queue)
            batch = self._next_batch()
            self.prefill_skipped = _why_no_prefill(self, batch, full_before, finished_before, waiting_before)
            if batch:
                result = self._run_batch(batch)
                sch.process_batch_result(batch, result)
        except RuntimeError as e:
            msg = str(e)
            kind = _oom_kind(msg, e)
            if kind == OOM_NONE:
                raise
            self.oom, self.oom_message = kind, msg.splitlines()[0][:200]
            self.failed_reqs = _failing_batch_reqs(e)
            self.last_batch = None  # nothing ran; `last_mode` keeps the previous iteration's batch
            return
        except AssertionError as e:
            # the unified radix cache's insert-and-re-match (`assert new_prefix_len <= len(new_indices)`,
            # cache_unfinished_req 0.5.18-0.5.21, checkpoint_into_tree 0.5.22): the scheduler dies,
            # the model's OOM_ASSERT. In a stash, before a batch is built; in process_batch_result,
            # after its batch ran (its requests are that batch's; `last_mode` keeps the previous one)
            if "new_prefix_len" not in str(e):
                raise
            self.oom, self.oom_message = OOM_ASSERT, f"AssertionError: {str(e).splitlines()[0][:180]}"
            self.failed_reqs = []
            self.last_batch = batch or None
            # inside process_batch_result_* the allocator's frees are grouped (free_group_begin):
            # SGLang dies with them pending, kvmc counts a free when it is made (an abstraction,
            # docs/conformance.md): the pending group is read as handed back
            alloc = sch.token_to_kv_pool_allocator
            if getattr(alloc, "free_group", None) is not None:
                alloc.free_group_end()
            return
        finally:
            self.forcing.after_step()
        if self.cfg.hicache:
            self._ack_write_through()
        if not batch:  # the event loop's idle housekeeping, with its memory check (strict: a leak raises)
            self.idle = self._check(getattr(sch, "self_check_during_idle", None) or sch.on_idle)
        sch.last_batch = batch
        self.last_batch = batch
        self.last_mode = "none" if not batch else ("extend" if batch.forward_mode.is_extend() else "decode")
        self.busy = self._busy_check()

    def _ack_write_through(self) -> None:
        """A HiCache write-through locks its node until SGLang acknowledges the copy, at the start
        of the next pass (`check_hicache_events` -> `writing_check`); the model has no such lock
        (the copy is done within the iteration). SGLang's own `writing_check` runs here, at the
        end of the iteration, before the checks read the counters (the busy check sums evictable
        and protected either way)."""
        self.inner_tree.writing_check()

    def _next_batch(self) -> Any:
        """`get_next_batch_to_run`; from 0.5.18 it takes the running and last batch and returns a
        plan whose running batch the loop keeps."""
        sch = self.sch
        import inspect

        if "running_batch" in inspect.signature(sch.get_next_batch_to_run).parameters:
            plan = sch.get_next_batch_to_run(running_batch=sch.running_batch, last_batch=sch.last_batch)
            sch.running_batch = plan.running_batch
            batch = plan.batch_to_run
            sch.cur_batch_for_debug = batch
        else:
            batch = sch.get_next_batch_to_run()
        sch.cur_batch = batch
        return batch

    def _recv(self, picks: dict[str, Any]) -> tuple[list[Any], list[tuple[int, str]]]:
        """`recv_requests` as the model orders it: arrivals in slot order, then per session a close or
        its next turn, then the client's aborts (explore's `--aborts`; the model has none). Returns
        the inputs for `process_input_requests` and (slot, rid) of each arrival and turn."""
        cfg = self.cfg
        out: list[Any] = []
        turns: list[tuple[int, str]] = []
        for slot in self.slots:
            if not slot.arrived and picks.get(f"recv.arrive[{slot.r}]"):
                slot.arrived = True
                req = self.arrive(slot.r)
                out.append(req)
                turns.append((slot.r, req.rid))
        for i, r in enumerate(cfg.streaming_sessions):
            slot = self.slots[r]
            if picks.get(f"recv.close_session[{i}]"):
                out.append(self.close_session(r))
                slot.closed = True
                continue
            if picks.get(f"recv.next_turn[{r}]"):
                n = int(picks.get(f"recv.turn_tokens[{r}]", cfg.turn_tokens[0]))
                req = self.next_turn(r, n)
                slot.turn += 1
                out.append(req)
                turns.append((r, req.rid))
        for slot in self.slots:  # aborts last: of requests that had arrived before this iteration
            if picks.get(f"recv.abort[{slot.r}]") and slot.req is not None and not slot.aborted:
                slot.aborted = True
                out.append(self.abort(slot.r))
        return out, turns

    def _run_batch(self, batch: Any) -> Any:
        """SGLang's own `run_batch`; the model worker it calls is `_NoModelWorker`, whose forward
        returns the fixed tokens (`forward_tokens`)."""
        return self.sch.run_batch(batch)

    def forward_tokens(self, batch: Any) -> Any:
        """The replaced model forward: request slot r's next token is `token(r, pos)` for the
        position it will take (the batch's sequence length). `batch` is the ScheduleBatch (0.5.13+)
        or the ModelWorkerBatch it was turned into (up to 0.5.12.post1), whose rows name the
        requests."""
        s = setup()
        reqs = getattr(batch, "reqs", None)
        if reqs is None:
            from .abstraction import row_idx

            by_row = {row_idx(sl.req): sl.req for sl in self.slots if sl.req is not None}
            reqs = [by_row[int(i)] for i in batch.req_pool_indices.tolist()]
        ids = [token(self.cfg, self.p, self.slot_of_req(q), len(q.origin_input_ids) + len(q.output_ids)) for q in reqs]
        return s["utils"].GenerationBatchResult(logits_output=None, next_token_ids=torch.tensor(ids, dtype=torch.int64),
                                                can_run_cuda_graph=False)

    def _check(self, fn: Any) -> Check:
        try:
            fn()
        except (AssertionError, ValueError) as e:
            return Check(True, True, False, _first_line(e))
        except Exception as e:  # noqa: BLE001 - a check that cannot run on this cache (NotImplementedError, ...)
            return Check(True, False, True, f"{type(e).__name__}: {_first_line(e)}")
        return Check(True)

    def _busy_check(self) -> Check:
        """SGLang's own busy check; `ran` is whether it reached its equation (it returns early
        without a last batch, and, up to 0.5.12.post1, with speculative topk > 1)."""
        sch = self.sch
        if sch.last_batch is None:
            return Check(False)
        checker = getattr(sch, "invariant_checker", None)
        fn = checker.self_check_during_busy if checker is not None and hasattr(checker, "self_check_during_busy") \
            else sch.self_check_during_busy
        return self._check(fn)

    # -- views ---------------------------------------------------------------------------------------------
    def live_reqs(self) -> list[Any]:
        return [sl.req for sl in self.slots if sl.req is not None]

    def slot_of_req(self, req: Any) -> int:
        return int(req.rid[1:].split(".")[0])


# -- builders -------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """Environment variables set for a block (SGLang's envs read them at get() time)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_FIELDS: dict[Any, set[str]] = {}


def _fields(cls: Any) -> set[str]:
    """The keyword fields of a class, once per class (ServerArgs' signature costs ~0.4 s to resolve:
    it dominated the conform row add_one_req/hicache, which builds a scheduler per scenario)."""
    if cls in _FIELDS:
        return _FIELDS[cls]
    import dataclasses

    if dataclasses.is_dataclass(cls):
        out = {f.name for f in dataclasses.fields(cls)}
    else:
        import inspect

        out = set(inspect.signature(cls).parameters)
    _FIELDS[cls] = out
    return out


def _make(cls: Any, **kw: Any) -> Any:
    """An io_struct request with the fields this release has (later releases add fields; the
    trace's requests need none of them)."""
    names = _fields(cls)
    return cls(**{k: v for k, v in kw.items() if k in names})


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:240]


def _why_no_prefill(h: RealScheduler, batch: Any, full_before: bool, finished_before: int, waiting_before: int) -> str:
    """Why no prefill ran although a request waited, as a hint for a divergence report: the flag a
    NO_TOKEN verdict or a full row budget set in an earlier pass (kept across passes except with
    hybrid SWA), or finished requests that stay in the running batch until update_running_batch
    filters them and still count against max_running_requests (both are model state: `batch_is_full`,
    `unfiltered`). Empty when a prefill ran or nobody waited. Only names the cause; the replay
    compares the states."""
    if waiting_before == 0 or (batch and batch.forward_mode.is_extend()) or h.sch.chunked_req is not None:
        return ""
    if full_before and not (h.hybrid and _hybrid_clears_batch_is_full()):
        return "running_batch.batch_is_full (set by an earlier pass) skipped admission"
    if finished_before and finished_before + len(h.sch.running_batch.reqs) >= h.p.req_pool_size:
        return (f"{finished_before} finished request(s) still in the running batch counted against "
                "max_running_requests (batch_is_full set)")
    return ""


_HYBRID_CLEARS: list[bool] = []


def _hybrid_clears_batch_is_full() -> bool:
    """Whether this release clears `batch_is_full` at every prefill pass on hybrid SWA (0.5.12.post1+:
    `if self.enable_priority_preemption or self.is_hybrid_swa`; 0.5.10.post1 / 0.5.11 clear it for
    priority preemption only). A feature test on the scheduler's source, never the version string."""
    if not _HYBRID_CLEARS:
        import inspect

        cls = setup()["sched_mod"].Scheduler
        fns = [getattr(cls, n) for n in ("_get_new_batch_prefill_raw", "get_new_batch_prefill") if hasattr(cls, n)]
        _HYBRID_CLEARS.append(any("or self.is_hybrid_swa" in inspect.getsource(f) for f in fns))
    return _HYBRID_CLEARS[0]


def _failing_batch_reqs(e: BaseException) -> list[Any]:
    """The requests of the batch whose allocation raised: the innermost `ScheduleBatch` method on
    the traceback (`prepare_for_extend` / `prepare_for_decode`, or `alloc_for_*`'s `batch`)."""
    tb = e.__traceback__
    found: list[Any] = []
    while tb is not None:
        loc = tb.tb_frame.f_locals
        for name in ("self", "batch"):
            b = loc.get(name)
            if type(b).__name__ == "ScheduleBatch":
                found = list(b.reqs)
        tb = tb.tb_next
    return found


def _oom_kind(msg: str, e: BaseException | None = None) -> int:
    """Which allocation failed: by SGLang's message where it names it, else by where it was raised
    (page size 1 raises "Out of memory. Try to lower your batch size." from `alloc_token_slots` in
    both the extend and the decode path)."""
    if "alloc_req_slots" in msg or "req_to_token_pool" in msg and "memory" in msg:
        return OOM_REQ_SLOTS
    if "Prefill out of memory" in msg:
        return OOM_PREFILL
    if "Decode out of memory" in msg:
        return OOM_DECODE
    if "out of memory" not in msg.lower() or e is None:
        return OOM_NONE
    import traceback

    names = [f.name for f in traceback.extract_tb(e.__traceback__)]
    if any(n in ("alloc_req_slots",) for n in names):
        return OOM_REQ_SLOTS
    if any(n in ("prepare_for_extend", "alloc_for_extend") for n in names):
        return OOM_PREFILL
    if any(n in ("prepare_for_decode", "alloc_for_decode") for n in names):
        return OOM_DECODE
    return OOM_NONE


def _parse_args(sch: Any, sa: Any) -> None:
    """What `Scheduler.__init__`'s argument parsing sets (both families)."""
    s = setup()
    sch.is_initializing = True
    sch.server_args = sa
    sch.schedule_policy = sa.schedule_policy
    sch.enable_priority_scheduling = sa.enable_priority_scheduling
    sch.abort_on_priority_when_disabled = getattr(sa, "abort_on_priority_when_disabled", False)
    sch.schedule_low_priority_values_first = sa.schedule_low_priority_values_first
    sch.priority_scheduling_preemption_threshold = sa.priority_scheduling_preemption_threshold
    sch.enable_lora = sa.enable_lora
    sch.enable_lora_overlap_loading = getattr(sa, "enable_lora_overlap_loading", False)
    sch.max_loras_per_batch = sa.max_loras_per_batch
    sch.enable_overlap = False
    sch.enable_overlap_mlx = False
    sch.enable_pdmux = getattr(sa, "enable_pdmux", False)
    sch.skip_tokenizer_init = sa.skip_tokenizer_init
    sch.stream_interval = sa.stream_interval
    spec = importlib.import_module("sglang.srt.speculative.spec_info")
    sch.spec_algorithm = spec.SpeculativeAlgorithm.from_string(sa.speculative_algorithm)
    sch.gpu_id = 0
    sch.page_size = sa.page_size
    sch.enable_hierarchical_cache = sa.enable_hierarchical_cache
    sch.enable_hicache_storage = sa.hicache_storage_backend is not None
    sch.enable_decode_hicache = False
    sch.max_recv_per_poll = 1 << 20
    sch.enable_hisparse = getattr(sa, "enable_hisparse", False)
    sch.hisparse_coordinator = None
    # added by later releases (0.5.18): read off the server args as the constructor does
    sch.enable_session_radix_cache = getattr(sa, "enable_session_radix_cache", False)
    sch.enable_unified_memory = getattr(sa, "enable_unified_memory", False)
    sch.enable_unified_cache_external_linker = getattr(sa, "enable_unified_cache_external_linker", False)  # 0.5.20+
    sch.enable_lmcache = getattr(sa, "enable_lmcache", False)  # 0.5.22+
    sch.attn_dp_enabled = False  # 0.5.22+: get_parallel().attn_dp_enabled (one rank, no DP attention)
    sch.enable_dp_attention = getattr(sa, "enable_dp_attention", False)
    envs = importlib.import_module("sglang.srt.environ").envs
    if hasattr(envs, "SGLANG_MAX_NEW_TOKENS_LIMIT"):
        sch.max_new_tokens_limit = envs.SGLANG_MAX_NEW_TOKENS_LIMIT.get()
    sch.nccl_port = 0
    sch.forward_ct = 0
    sch.processed_tokens_counter = 0  # 0.5.20+: the HRRN policy's aging axis, set first thing in __init__
    sch.cur_batch_for_debug = None
    sch.cur_batch = None
    del s


def _publish(s: dict[str, Any], sa: Any) -> None:
    """Install the server args as the scheduler process's config. From 0.5.21 the ranks come from
    the launcher's placement (`runtime_context.publish(..., ranks=SpawnRanks(...))`, what
    `run_scheduler_process` does); the harness is rank 0 of a one-process world on device 0."""
    try:
        rc = importlib.import_module("sglang.srt.runtime_context")
    except ImportError:
        rc = None
    if rc is not None and hasattr(rc, "SpawnRanks") and hasattr(rc, "publish"):
        rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0))
        # 0.5.22+ reads the process groups from the runtime context too (what building the groups
        # writes there): the one-rank stand-ins, no CPU (gloo) groups
        names = rc._parallel_fields() if hasattr(rc, "_parallel_fields") else ()
        groups = {n: (None if n.endswith("_cpu_group") else _group()) for n in names if n.endswith("_group")}
        if groups:
            rc.get_parallel().override_permanently(**groups)
    else:
        s["sa_mod"].set_global_server_args_for_scheduler(sa)


def _worker_info(sch: Any, worker: _NoModelWorker, h: RealScheduler) -> None:
    """What `init_model_worker` reads from the model worker (`get_worker_info`) and sets."""
    s = setup()
    p = h.p
    sch.tp_worker = worker
    sch.maybe_init_draft_worker()  # no speculative algorithm: SGLang sets draft_worker (and its corpus) to None
    sch.model_worker = worker
    sch.max_total_num_tokens = p.full_tokens
    sch.max_prefill_tokens = p.max_prefill_tokens
    sch.max_running_requests = p.req_pool_size
    sch.max_queued_requests = None
    if h.cfg.over_long:  # the pool below the context length, as the config assumes (model/config.py over_long)
        sch.max_req_len = min(h.context_len - 1, p.full_tokens - 1)
    else:  # no prompt is validated away: kvmc's small pools would reject every prompt of 2 tokens or more
        sch.max_req_len = h.context_len - 1
    sch.max_req_input_len = sch.max_req_len - 5  # (managers/tp_worker.py)
    sch.random_seed = 0
    sch.device = "cpu"
    sch.forward_stream = None
    for g in ("tp_group", "attn_tp_group", "attn_cp_group", "pp_group", "world_group", "dp_tp_group"):
        setattr(sch, g, _group())
    for g in ("tp_cpu_group", "attn_tp_cpu_group", "attn_cp_cpu_group", "dp_tp_cpu_group"):
        setattr(sch, g, None)
    # `Req.set_finish_with_abort` (an over-long prompt) logs on tensor-parallel rank 0, which it asks
    # the process-wide group for: a world of one rank, as the scheduler's own groups above
    ps = importlib.import_module("sglang.srt.distributed.parallel_state")
    if getattr(ps, "_TP", None) is None:
        ps._TP = _group()
    sch.pad_input_ids_func = None
    try:
        gsa = s["sa_mod"].get_global_server_args()
        gsa.pp_max_micro_batch_size = max(p.req_pool_size, 1)
    except (AttributeError, RuntimeError):  # 0.5.19: read-only server args; 0.5.20: get_global_server_args
        pass  # retired: the runtime context below carries it
    sch.min_free_slots_delayer = None  # 0.5.18: only DFlash or --min-free-slots-delay build one
    try:  # 0.5.18 keeps the micro-batch size in its runtime context, as init_model_worker overrides it
        rc = importlib.import_module("sglang.srt.runtime_context")
    except ImportError:
        rc = None
    if rc is not None and not rc.get_parallel().pp_max_micro_batch_size:
        rc.get_context().override("scheduler.pp_max_micro_batch_size_default",
                                  pp_max_micro_batch_size=max(p.req_pool_size, 1))


def _build_monolithic(sch: Any, sa: Any, worker: _NoModelWorker, facts: Any, h: RealScheduler) -> None:
    s = setup()
    _parse_args(sch, sa)
    for k in ("tp_rank", "moe_ep_rank", "pp_rank", "attn_cp_rank", "moe_dp_rank"):
        setattr(sch, k, 0)
    sch.dp_rank = None
    sch.tp_size, sch.pp_size, sch.dp_size = sa.tp_size, sa.pp_size, sa.dp_size
    sch.moe_ep_size, sch.attn_cp_size, sch.moe_dp_size = sa.ep_size, getattr(sa, "attn_cp_size", 1), getattr(sa, "moe_dp_size", 1)
    sch.attn_tp_rank, sch.attn_tp_size, sch.attn_dp_rank = 0, 1, 0
    sch.enable_kv_cache_events = False
    sch.model_config = facts
    sch.dllm_config = None
    sch.tokenizer = None
    sch.is_generation = True  # init_tokenizer's reading of the model config
    _resolved_impl(facts)
    sch.init_metrics(0, 0, None)
    sch.send_to_tokenizer, sch.send_to_detokenizer = h.sink_tok, h.sink_detok
    sch.recv_from_rpc = None
    sch.idle_sleeper = None
    sch.init_moe_gemm_config()
    _worker_info(sch, worker, h)
    sch.init_cache_with_memory_pool()
    sch.init_running_status()
    sch.init_chunked_prefill()
    if hasattr(sch, "init_diffusion_llm"):
        sch.init_diffusion_llm()
    sch.init_schedule_policy()
    sch.init_profiler()
    sch.init_disaggregation()
    sch.init_overlap()
    sch.maybe_init_ngram_embedding()
    sch.init_deterministic_inference_config()
    sch.init_request_dispatcher()
    from sglang.srt.constrained.grammar_manager import GrammarManager

    sch.grammar_manager = GrammarManager(sch)
    sch.watchdog = None
    sch.is_initializing = False
    del s


def _build_components(sch: Any, sa: Any, worker: _NoModelWorker, facts: Any, h: RealScheduler) -> None:
    s = setup()
    _parse_args(sch, sa)
    comps = importlib.import_module("sglang.srt.managers.scheduler")
    ps_cls = getattr(comps, "ParallelState", None)  # 0.5.21+: none; ranks come from the runtime context
    if ps_cls is None:
        sch.ps = None
    else:
        sch.ps = ps_cls.trivial() if hasattr(ps_cls, "trivial") else _make(
            ps_cls, tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, dp_rank=None, dp_size=1, attn_tp_rank=0,
            attn_tp_size=1, attn_cp_rank=0, attn_cp_size=1, attn_dp_rank=0, attn_dp_size=1, moe_ep_rank=0,
            moe_ep_size=1, moe_dp_rank=0, moe_dp_size=1, gpu_id=0)
    sch.model_config = facts
    sch.dllm_config = None
    sch.tokenizer = None
    sch.is_generation = True  # init_tokenizer's reading of the model config
    _resolved_impl(facts)
    mc = comps.SchedulerMetricsCollector
    sch.metrics_collector_context = _make(mc.init_new, server_args=sa, ps=sch.ps, tp_rank=0, pp_rank=0, dp_rank=None,
                                          enable_priority_scheduling=sch.enable_priority_scheduling,
                                          enable_lora=sch.enable_lora,
                                          enable_hierarchical_cache=sch.enable_hierarchical_cache)
    sch.metrics_collector = sch.metrics_collector_context.collector
    sch.ipc_channels = SimpleNamespace(send_to_tokenizer=h.sink_tok, send_to_detokenizer=h.sink_detok,
                                       recv_from_tokenizer=None, recv_from_rpc=None, send_metrics_from_scheduler=None)
    sch.idle_sleeper = None
    sch.load_snapshot_writer = None  # init_ipc_channels without a rank-zero IPC endpoint
    sch.rust_server = None  # 0.5.18: no Rust ingress server (requests go through process_input_requests)
    for k in ("mm_receiver", "disagg_prefill_bootstrap_queue", "disagg_prefill_inflight_queue",
              "disagg_decode_prealloc_queue", "disagg_decode_transfer_queue"):
        setattr(sch, k, None)
    sch.init_moe_gemm_config()
    _worker_info(sch, worker, h)
    try:  # 0.5.18: the model runner builds an n-gram embedding manager, disabled for a model without one
        ng = importlib.import_module("sglang.srt.model_executor.model_runner_components.ngram_embedding_manager")
    except ImportError:
        ng = None
    if ng is not None:
        worker.model_runner.ngram_embedding_manager = _make(  # 0.5.19 drops server_args
            ng.NgramEmbeddingManager.from_model,
            model=None, model_config=facts, req_to_token_pool=h.req_to_token_pool, server_args=sa,
            max_running_requests=h.p.req_pool_size, device="cpu")
    res = _make(  # the arguments this release's build_kv_cache takes (0.5.21+: no ps)
        s["kvb"].build_kv_cache,
        server_args=sa, model_config=facts, tp_worker=worker, page_size=sch.page_size, spec_algorithm=sch.spec_algorithm,
        attn_tp_cpu_group=None, tp_cpu_group=None, attn_cp_cpu_group=None, enable_metrics=False,
        enable_kv_cache_events=False, ps=sch.ps, tp_group=sch.tp_group, pp_group=sch.pp_group,
        enable_hierarchical_cache=sch.enable_hierarchical_cache)
    for k in ("is_hybrid_swa", "is_hybrid_ssm", "sliding_window_size", "full_tokens_per_layer", "swa_tokens_per_layer",
              "req_to_token_pool", "token_to_kv_pool_allocator", "disable_radix_cache", "tree_cache"):
        setattr(sch, k, getattr(res, k))
    sch.decode_offload_manager = None
    sch.init_running_status()
    sch.init_chunked_prefill()
    if hasattr(sch, "maybe_init_dynamic_chunk_sizer"):  # 0.5.20+: None unless dynamic chunking is on
        sch.maybe_init_dynamic_chunk_sizer()
    if hasattr(sch, "init_diffusion_llm"):
        sch.init_diffusion_llm()
    rep = comps.SchedulerMetricsReporter
    sch.metrics_reporter = _make(rep, scheduler=sch, tp_rank=0, pp_rank=0, dp_rank=None,
                               metrics_collector_context=sch.metrics_collector_context,
                               metrics_collector=sch.metrics_collector)
    if hasattr(sch.metrics_reporter, "scheduler_stage_metrics"):  # 0.5.20+: read by the invariant checker
        sch.scheduler_stage_metrics = sch.metrics_reporter.scheduler_stage_metrics
    sch.init_schedule_policy()
    sch.watchdog = None
    sch.memory_saver_adapter = SimpleNamespace(enabled=False)
    sch.recv_skipper = None
    sch.input_blocker = None
    sch.init_profiler()
    sch.init_disaggregation()
    sch.init_overlap()
    sch.maybe_init_ngram_embedding()
    sch.init_deterministic_inference_config()
    if hasattr(sch, "init_dsa_kpool_truncation_align"):  # 0.5.20+: DSA models only
        sch.init_dsa_kpool_truncation_align()
    sch.init_weight_updater()
    sch.init_request_dispatcher()
    sch.init_lora_drainer()
    sch.init_lora_overlap_loader()
    sch.init_grammar_manager()
    sch.maybe_init_scripted_scheduler_hook()
    sch.init_dp_attn_adapter()
    sch.init_pool_stats_observer()
    sch.init_invariant_checker()
    sch.init_kv_events_publisher()
    if hasattr(sch, "init_load_publisher"):  # 0.5.19+: router-facing load reporting (a no-op off rank 0)
        sch.init_load_publisher()
    sch.init_load_inquirer()
    sch.init_output_streamer()
    sch.init_batch_result_processor()
    sch.is_initializing = False


def _unified_hicache() -> bool:
    """Whether this release's UnifiedRadixCache can carry HiCache (`init_hicache`)."""
    try:
        mod = importlib.import_module("sglang.srt.mem_cache.unified_radix_cache")
    except ImportError:
        return False
    return hasattr(mod.UnifiedRadixCache, "init_hicache")


def _plain_host_tensor(dims: Any, dtype: Any, device: Any, pin_memory: bool = False, allocator: Any = None,
                       **_: Any) -> Any:
    """HiCache's host buffer as a plain CPU tensor: CPU torch cannot `cudaHostRegister` (nor pin);
    later releases' registration options (0.5.19: `registration_granularity_bytes`) mean nothing here."""
    del pin_memory, allocator
    return torch.empty(dims, dtype=dtype, device=device)


def _transfer_kv_direct(src_layers: Any, dst_layers: Any, src_indices: Any, dst_indices: Any, page_size: int = 1,
                        **_: Any) -> None:
    """HiCache's `direct` io backend (`sgl_kernel.kvcacheio.transfer_kv_direct`, a CUDA kernel) as
    the row copy it is: for every layer buffer, dst[dst_indices] = src[src_indices]."""
    del page_size
    src_i, dst_i = src_indices.to(torch.int64), dst_indices.to(torch.int64)
    for src, dst in zip(src_layers, dst_layers):
        dst[dst_i] = src[src_i].to(dst.device)


def _host_memory_on_cpu() -> None:
    """SGLang picks the host-buffer allocator by the device pool's device
    (`ALLOC_MEMORY_FUNCS[device]`, default `alloc_with_host_register`); for "cpu" it gets a plain
    tensor. The registry moved to mem_cache/pool_host/common.py in 0.5.18."""
    for name in ("sglang.srt.mem_cache.pool_host.common", "sglang.srt.mem_cache.memory_pool_host"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        funcs = getattr(mod, "ALLOC_MEMORY_FUNCS", None)
        if funcs is not None:
            funcs["cpu"] = _plain_host_tensor
            break
    else:
        raise HarnessError("this release has no ALLOC_MEMORY_FUNCS registry for HiCache's host buffers")
    import pkgutil
    import sys

    try:  # 0.5.18 split the host pools into mem_cache/pool_host/: import them all before patching
        pkg = importlib.import_module("sglang.srt.mem_cache.pool_host")
        for m in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{m.name}")
    except ImportError:
        pass
    # the host pools call the kernel by its global name, imported from sgl_kernel only on CUDA/HIP
    # from 0.5.13 (kvmc's stub up to 0.5.12.post1): each module that calls it gets the row copy
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None) or ""
        if name.startswith("sglang.srt.mem_cache") and f.endswith(".py") and name not in _SCANNED:
            _SCANNED.add(name)  # each module's source read once per process (conform builds many schedulers)
            with open(f, encoding="utf-8") as fh:
                if "transfer_kv_direct(" in fh.read():
                    mod.transfer_kv_direct = _transfer_kv_direct


_SCANNED: set[str] = set()


def _resolved_impl(facts: Any) -> None:
    """`get_resolved_model_impl` reads the architecture from the HF config; a model-less config
    resolves to SGLang's own implementation."""
    utils = importlib.import_module("sglang.srt.model_loader.utils")
    impl = getattr(utils, "ModelImpl", None)
    if impl is None:
        from sglang.srt.configs.model_config import ModelImpl as impl  # type: ignore[no-redef]
    facts._resolved_model_impl = impl.SGLANG
    facts._resolved_model_arch = "LlamaForCausalLM"
