"""Bounded instances of the model: the static part (`Config`) and the symbolic constants (`Params`).

A `Config` fixes what must be a Python constant for the encoding to stay linear: the number of
request slots, the page size, which features are on (hybrid SWA and its per-request SWA ring,
HiCache, chunked prefill, mixed chunk, the chunk cache, streaming sessions, EAGLE v1 or spec v2,
forced retraction, an over-long prompt), and the *shape* of the radix tree. Everything else
(pool sizes, window, chunk size, prompt and output lengths, the warm prefix) is a `Params` value: a
z3 variable within the config's bounds for the symbolic engine, one concrete point of the bounds
for the others.

Tree shape (an abstraction, see model/radix_cache.py): the tree is a set of *atoms* at fixed
positions. Atoms `0 .. warm_atoms-1` form the warm prefix chain (traffic served before the trace
began; requests that `shares_warm_prefix` start with those tokens), followed by `warm_spare_atoms`
empty atoms that take the tail of a warm node an insert splits. Each request slot r owns a
private chain of `private_atoms` atoms below the warm chain (or below the root): the nodes its own
inserts create. An atom of length 0 does not exist. Prefix sharing between requests therefore goes
through the warm prefix only; a node one request inserted is matched again only by that request
(its next chunk, its re-prefill after retraction).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterator, Mapping

ROOT = -1


@dataclass(frozen=True)
class Spec:
    """EAGLE speculative decoding on the non-overlap scheduler: `speculative_num_steps`,
    `speculative_eagle_topk`, `speculative_num_draft_tokens`, and the worker: version 1 (EAGLE v1,
    SGLang <= v0.5.12.post1, removed by #25464) or 2 (spec v2, v0.5.13+); see model/speculative.py."""

    num_steps: int
    topk: int
    num_draft_tokens: int
    version: int = 1

    def __post_init__(self) -> None:
        if self.version not in (1, 2):
            raise ValueError(f"Spec(version={self.version}) is not a speculative worker kvmc models; expected 1 or 2")


# Names of the scalar parameters and of the per-request / per-warm-atom ones.
SCALAR_PARAMS = (
    "full_tokens",  # F: full-attention pool size (`full_max_total_num_tokens`)
    "swa_tokens",  # S: SWA pool size (hybrid SWA only)
    "sliding_window_size",  # W
    "chunked_prefill_size",  # rem_chunk_tokens at the start of a pass (chunked prefill only)
    "max_prefill_tokens",  # rem_input_tokens at the start of a pass
    "req_pool_size",  # req_to_token_pool.size
)
REQ_PARAMS = ("input_len", "max_new_tokens")
WARM_PARAMS = ("warm_len", "warm_device", "warm_host")
PAGE_MULTIPLE = ("full_tokens", "swa_tokens", "warm_len", "chunked_prefill_size")


@dataclass(frozen=True)
class Config:
    name: str
    doc: str
    num_reqs: int
    page_size: int
    bounds: Mapping[str, tuple[int, int]]
    hybrid_swa: bool = False
    hicache: bool = False
    chunked_prefill: bool = False
    streaming_sessions: tuple[int, ...] = ()  # request slots that are turns of a streaming session
    spec: Spec | None = None
    # DeepSeek-V4 `unified_kv` pools (v0.5.20+): the SWA allocator is a per-request ring
    # (`swa_req_ring_size` = W): SWA capacity is free request rows times ceil_page(W), see model/allocator.py
    swa_ring: bool = False
    test_retract: bool = False  # SGLANG_TEST_RETRACT: retraction may be forced at any decode step
    shares_warm_prefix: tuple[bool, ...] = ()
    warm_atoms: int = 0
    # empty atoms after the warm prefix: SGLang splits a warm node when an insert ends inside it (a
    # chunk of a request whose match stopped before that node), and the tail needs an atom
    warm_spare_atoms: int = 0
    private_atoms: int = 2
    max_turns: int = 2  # session turns per streaming request slot
    turn_tokens: tuple[int, int] = (1, 2)  # new tokens appended by a later session turn
    new_token_ratio: tuple[int, int] = (1, 1)  # a constant fraction (num, den); see prefill_adder
    clip_max_new_tokens: int = 4096  # CLIP_MAX_NEW_TOKENS
    retract_decode_steps: int = 20  # SGLANG_RETRACT_DECODE_STEPS
    # `--truncation-align-size` (server_args; None = off): a chunk admitted by add_one_req is
    # truncated to a multiple of it (deterministic inference), see model/prefill_adder.py
    truncation_align_size: int | None = None
    # `--enable-mixed-chunk` (with chunked prefill; SGLang refuses it with speculative decoding): the
    # running batch decodes inside the prefill batch, and the adder reserves a token per running request
    mixed_chunk: bool = False
    # `--disable-radix-cache` (with chunked prefill): ChunkCache / SWAChunkCache up to 0.5.21
    # (mem_cache/chunk_cache.py), a disabled UnifiedRadixCache from 0.5.22 (mem_cache/registry.py): no
    # prefix tree; a request matches nothing, a chunk's KV stays in its own row, a finished or
    # retracted request frees its whole row, and with hybrid SWA each extend first releases the
    # request's out-of-window SWA (`maybe_evict_swa`'s extend branch), see model/radix_cache.py
    chunk_cache: bool = False
    # request slots whose prompt is over-long: `handle_generate_request` clips its max_new_tokens with
    # the long prompt (`init_req_max_new_tokens`), then `validate_input_length` finds it at least
    # max_req_input_len and `Req.set_finish_with_abort` turns it into the one-token prompt [0] that
    # finishes at its prefill's result (`to_finish`), every release. A config with such a slot
    # validates every prompt as SGLang does with the pool below the context length: max_req_len =
    # T - 1, max_req_input_len = T - 6 (managers/tp_worker.py). Without one, kvmc leaves out the
    # validation (small pools would reject every prompt of 2 tokens or more). At most one slot: two
    # aborted prompts are both [0] and share a tree node, which kvmc's private chains cannot hold
    over_long: tuple[int, ...] = ()
    explicit_bounds: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = []
        if self.page_size < 1:
            problems.append(f"page_size={self.page_size} must be >= 1")
        if self.num_reqs < 1:
            problems.append(f"num_reqs={self.num_reqs} must be >= 1")
        if self.shares_warm_prefix and len(self.shares_warm_prefix) != self.num_reqs:
            problems.append(f"shares_warm_prefix has {len(self.shares_warm_prefix)} entries, expected num_reqs={self.num_reqs}")
        if self.warm_spare_atoms < 0 or (self.warm_spare_atoms and not self.warm_atoms):
            problems.append(f"warm_spare_atoms={self.warm_spare_atoms} must be >= 0, and 0 without a warm prefix (warm_atoms=0)")
        if self.streaming_sessions and self.chunked_prefill:
            problems.append("streaming sessions with chunked prefill are not modelled (the stash of a streaming turn skips the tree)")
        if self.spec is not None and self.hybrid_swa and (self.spec.version != 2 or self.hicache or self.swa_ring):
            problems.append(f"speculative decoding with hybrid SWA is modelled for spec v2 only, without HiCache or the "
                            f"SWA ring, got spec version {self.spec.version}, hicache={self.hicache}, swa_ring={self.swa_ring}")
        if self.swa_ring:
            W = self.bounds.get("sliding_window_size", DEFAULT_BOUNDS["sliding_window_size"])
            if not self.hybrid_swa or self.hicache or self.page_size < 2 or W[0] != W[1] or W[0] < 1:
                problems.append(f"swa_ring needs hybrid_swa, no hicache, page_size >= 2 (the ring allocator is paged) and "
                                f"one sliding_window_size >= 1 (the ring cost is a constant), got hybrid_swa={self.hybrid_swa} "
                                f"hicache={self.hicache} page_size={self.page_size} sliding_window_size={W}")
        if self.mixed_chunk and (not self.chunked_prefill or self.spec is not None):
            problems.append(f"mixed_chunk needs chunked_prefill and no speculative decoding (SGLang's is_mixed_chunk), "
                            f"got chunked_prefill={self.chunked_prefill} spec={self.spec}")
        if self.chunk_cache and (self.warm_atoms or self.streaming_sessions or self.hicache or self.spec is not None
                                 or not self.chunked_prefill):
            problems.append(f"chunk_cache needs chunked_prefill (SGLang builds ChunkCache only with it) and no warm prefix, "
                            f"streaming sessions, HiCache or speculative decoding (none is modelled without a tree), got "
                            f"chunked_prefill={self.chunked_prefill} warm_atoms={self.warm_atoms} "
                            f"streaming_sessions={self.streaming_sessions} hicache={self.hicache} spec={self.spec}")
        if self.over_long and (len(self.over_long) > 1 or not 0 <= self.over_long[0] < self.num_reqs
                               or self.over_long[0] in self.streaming_sessions or self.shares(self.over_long[0])):
            problems.append(f"over_long={self.over_long} must be one request slot (0..{self.num_reqs - 1}) that is not a "
                            f"streaming session's and does not share the warm prefix (its prompt becomes [0])")
        if self.over_long and self.bound("full_tokens")[0] < 7:
            problems.append(f"over_long needs full_tokens >= 7 (SGLang asserts max_req_input_len = T - 6 > 0, "
                            f"'Memory pool size is too small'), got bounds {self.bound('full_tokens')}")
        for r in self.streaming_sessions:
            if not 0 <= r < self.num_reqs:
                problems.append(f"streaming session slot {r} is not a request slot (0..{self.num_reqs - 1})")
        for kind, bounds in (("bounds", self.bounds), ("explicit_bounds", self.explicit_bounds)):
            for name, (lo, hi) in bounds.items():
                if lo > hi:
                    problems.append(f"{kind}[{name!r}]=({lo}, {hi}) is empty")
                if name in PAGE_MULTIPLE and (lo % self.page_size or hi % self.page_size):
                    # (chunked_prefill_size: every release's server_args asserts it divides by the page size)
                    problems.append(f"{kind}[{name!r}]=({lo}, {hi}) must be multiples of page_size={self.page_size}")
        if problems:
            raise ValueError(f"config {self.name!r}: " + "; ".join(problems))

    def not_modelled_by(self, design: Any) -> str | None:
        """Why this config does not apply to `design` (a mechanism its release does not ship), or
        None. `design` is a model.designs.Design (anything with `on(fix)`)."""
        if self.spec is not None:
            v2 = design.on("eagle_v1_removed")
            if self.spec.version == 1 and v2:
                return f"config {self.name!r} runs EAGLE v1, which {design.name} does not ship (removed in v0.5.13, #25464)"
            if self.spec.version == 2 and not v2:
                return f"config {self.name!r} runs spec v2; {design.name} models EAGLE v1 (without eagle_v1_removed)"
        if self.swa_ring and not design.on("swa_req_ring"):
            return f"config {self.name!r} has a per-request SWA ring, which {design.name} does not ship (v0.5.20+, swa_req_ring)"
        return None

    def prompt_len(self, p: "Params", r: int) -> Any:
        """len(origin_input_ids) as the scheduler queues request slot r: an over-long prompt is [0]."""
        return 1 if r in self.over_long else p.input_len[r]

    # -- tree shape ---------------------------------------------------------------------------
    @property
    def num_atoms(self) -> int:
        return self.warm_chain_len + self.num_reqs * self.private_atoms

    @property
    def warm_chain_len(self) -> int:
        return self.warm_atoms + self.warm_spare_atoms

    def shares(self, r: int) -> bool:
        return bool(self.shares_warm_prefix and self.shares_warm_prefix[r])

    def private_chain(self, r: int) -> tuple[int, ...]:
        base = self.warm_chain_len + r * self.private_atoms
        return tuple(range(base, base + self.private_atoms))

    def warm_chain(self) -> tuple[int, ...]:
        return tuple(range(self.warm_chain_len))

    def req_path(self, r: int) -> tuple[int, ...]:
        """Atoms the tokens of request slot r can match, root first."""
        return (self.warm_chain() if self.shares(r) else ()) + self.private_chain(r)

    def parent(self, a: int) -> int:
        W = self.warm_chain_len
        if a < W:
            return a - 1 if a > 0 else ROOT
        r, j = divmod(a - W, self.private_atoms)
        if j > 0:
            return a - 1
        return W - 1 if (self.shares(r) and W) else ROOT

    def children(self, a: int) -> tuple[int, ...]:
        return tuple(c for c in range(self.num_atoms) if self.parent(c) == a)

    def ancestors(self, a: int) -> tuple[int, ...]:
        """a and its ancestors, deepest first (the walk of `inc_lock_ref`)."""
        out = []
        while a != ROOT:
            out.append(a)
            a = self.parent(a)
        return tuple(out)

    def owner(self, a: int) -> int:
        """Request slot whose private chain holds atom a; -1 for the warm prefix."""
        if a < self.warm_chain_len:
            return -1
        return (a - self.warm_chain_len) // self.private_atoms

    def slot_of(self, r: int) -> int | None:
        """Index of the streaming-session slot that request slot r feeds, if any."""
        return self.streaming_sessions.index(r) if r in self.streaming_sessions else None

    # -- parameters -----------------------------------------------------------------------------
    def bound(self, name: str, explicit: bool = False) -> tuple[int, int]:
        if explicit and name in self.explicit_bounds:
            return self.explicit_bounds[name]
        if name in self.bounds:
            return self.bounds[name]
        return DEFAULT_BOUNDS[name]


DEFAULT_BOUNDS: dict[str, tuple[int, int]] = {
    "full_tokens": (8, 8),
    "swa_tokens": (0, 0),
    "sliding_window_size": (0, 0),
    "chunked_prefill_size": (0, 0),
    "max_prefill_tokens": (64, 64),
    "req_pool_size": (4, 4),
    "input_len": (1, 4),
    "max_new_tokens": (1, 3),
    "warm_len": (0, 0),
    "warm_device": (1, 1),
    "warm_host": (0, 0),
}


@dataclass(frozen=True)
class Params:
    """The symbolic constants of one instance (z3 terms, or ints for a concrete instance)."""

    full_tokens: Any
    swa_tokens: Any
    sliding_window_size: Any
    chunked_prefill_size: Any
    max_prefill_tokens: Any
    req_pool_size: Any
    input_len: tuple[Any, ...]
    max_new_tokens: tuple[Any, ...]
    warm_len: tuple[Any, ...]
    warm_device: tuple[Any, ...]
    warm_host: tuple[Any, ...]

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _values(cfg: Config, name: str, explicit: bool) -> range:
    lo, hi = cfg.bound(name, explicit)
    step = cfg.page_size if name in PAGE_MULTIPLE else 1
    return range(lo, hi + 1, step)


def symbolic_params(cfg: Config, z3: Any) -> tuple[Params, list[Any]]:
    """One z3 variable per parameter (a Python constant where the bounds allow one value), and
    the constraints that bound them."""
    cons: list[Any] = []
    Int = z3.Int

    def var(name: str, label: str, boolean: bool = False) -> Any:
        lo, hi = cfg.bound(name)
        if lo == hi:
            return bool(lo) if boolean else lo
        if boolean:
            return z3.Bool(label)
        if name in PAGE_MULTIPLE and cfg.page_size > 1:
            pages = Int(label + "/pages")
            cons.append(pages >= lo // cfg.page_size)
            cons.append(pages <= hi // cfg.page_size)
            return pages * cfg.page_size
        v = Int(label)
        cons.extend([v >= lo, v <= hi])
        return v

    p = Params(
        **{n: var(n, n) for n in SCALAR_PARAMS},
        input_len=tuple(var("input_len", f"input_len[{r}]") for r in range(cfg.num_reqs)),
        max_new_tokens=tuple(var("max_new_tokens", f"max_new_tokens[{r}]") for r in range(cfg.num_reqs)),
        warm_len=tuple(var("warm_len", f"warm_len[{a}]") for a in range(cfg.warm_atoms)),
        warm_device=tuple(var("warm_device", f"warm_device[{a}]", True) for a in range(cfg.warm_atoms)),
        warm_host=tuple(var("warm_host", f"warm_host[{a}]", True) for a in range(cfg.warm_atoms)),
    )
    return p, cons


def enumerate_params(cfg: Config, explicit: bool = True) -> Iterator[Params]:
    """Every concrete parameter point of the config (explicit_bounds narrow the symbolic ones)."""
    scalars = [_values(cfg, n, explicit) for n in SCALAR_PARAMS]
    per_req = [_values(cfg, n, explicit) for n in REQ_PARAMS]
    warm = [_values(cfg, n, explicit) for n in WARM_PARAMS]
    R, K = cfg.num_reqs, cfg.warm_atoms
    req_space = itertools.product(*[per_req[i] for i in range(2) for _ in range(R)])
    req_space = list(req_space)
    warm_space = list(itertools.product(*[warm[i] for i in range(3) for _ in range(K)]))
    for sc in itertools.product(*scalars):
        for rq in req_space:
            for wm in warm_space:
                yield Params(
                    *sc,
                    input_len=tuple(rq[:R]),
                    max_new_tokens=tuple(rq[R:]),
                    warm_len=tuple(wm[:K]),
                    warm_device=tuple(bool(v) for v in wm[K : 2 * K]),
                    warm_host=tuple(bool(v) for v in wm[2 * K :]),
                )


def pinned(cfg: Config, **narrow: tuple[int, int]) -> Config:
    """`cfg` with bounds == explicit bounds (narrowed by `narrow`): BMC and BFS see the same points."""
    eb = {**cfg.explicit_bounds, **narrow}
    return replace(cfg, bounds={**cfg.bounds, **eb}, explicit_bounds=eb)


def concrete_params(cfg: Config, **values: Any) -> Params:
    """A concrete instance; unspecified values take the low end of their bounds."""
    d: dict[str, Any] = {}
    for n in SCALAR_PARAMS:
        d[n] = values.get(n, cfg.bound(n)[0])
    for n in REQ_PARAMS:
        v = values.get(n, cfg.bound(n)[0])
        d[n] = tuple(v) if isinstance(v, (tuple, list)) else (v,) * cfg.num_reqs
    for n in WARM_PARAMS:
        v = values.get(n, cfg.bound(n)[0])
        vals = tuple(v) if isinstance(v, (tuple, list)) else (v,) * cfg.warm_atoms
        d[n] = tuple(bool(b) for b in vals) if n != "warm_len" else vals
    unknown = set(values) - set(d)
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)}; expected one of {sorted(d)}")
    return Params(**d)
