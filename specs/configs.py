"""Named bounded configurations (the `.cfg` / `MC*.tla` of kvmc).

Pool sizes, the window, the chunk size, prompt and output lengths and the warm prefix are
symbolic within `bounds` for the z3 engines; `explicit_bounds` narrows them to the handful of
points the explicit-state and random engines enumerate.
"""

from __future__ import annotations

from dataclasses import replace

from model.config import Config, Spec

_SESSIONS = Config(
    name="sessions",
    doc="streaming session on request slot 0 (two turns), a second request, SGLANG_TEST_RETRACT",
    num_reqs=2,
    page_size=1,
    streaming_sessions=(0,),
    test_retract=True,
    private_atoms=2,
    max_turns=2,
    turn_tokens=(1, 3),
    bounds={
        "full_tokens": (2, 32),
        "input_len": (1, 8),
        "max_new_tokens": (1, 4),
        "req_pool_size": (1, 3),
        "max_prefill_tokens": (8, 32),
    },
    explicit_bounds={"full_tokens": (8, 8), "input_len": (1, 2), "max_new_tokens": (1, 3),
                     "req_pool_size": (2, 2), "max_prefill_tokens": (16, 16)},
)


_SPEC_V2 = Config(
    name="spec_v2",
    doc="spec v2 (v0.5.13+) with topk=2, num_steps=2, num_draft_tokens=3, page_size 1: rows over-allocated to C + 2a",
    num_reqs=2,
    page_size=1,
    spec=Spec(num_steps=2, topk=2, num_draft_tokens=3, version=2),
    test_retract=True,  # retraction order and release of the over-allocation
    private_atoms=2,
    bounds={
        "full_tokens": (2, 40),
        "input_len": (1, 10),
        "max_new_tokens": (1, 6),
        "req_pool_size": (2, 2),
        "max_prefill_tokens": (16, 64),
    },
    explicit_bounds={"full_tokens": (24, 24), "input_len": (1, 4), "max_new_tokens": (1, 4),
                     "max_prefill_tokens": (32, 32)},
)


_HYBRID_SWA_SPEC_V2 = Config(
    name="hybrid_swa_spec_v2",
    doc="spec v2 on hybrid SWA (an SWA model with EAGLE/MTP: gpt-oss, MiMo), page_size 1, topk=2, num_steps=2, "
        "num_draft_tokens=3, chunked prefill: each decode step over-allocates both pools to C + 2a, the window "
        "slides behind C",
    num_reqs=2,
    page_size=1,
    hybrid_swa=True,
    spec=Spec(num_steps=2, topk=2, num_draft_tokens=3, version=2),
    chunked_prefill=True,  # on by default in SGLang (8192): a prompt longer than the SWA budget is chunked
    test_retract=True,
    private_atoms=4,  # the prefill (split at the prompt boundary and the window), a chunk stash, a finish
    bounds={
        "full_tokens": (4, 40),  # hybrid_swa's floor: below it the idle pool admits nothing
        "swa_tokens": (4, 40),
        "sliding_window_size": (1, 8),
        "chunked_prefill_size": (2, 8),
        "input_len": (1, 10),
        "max_new_tokens": (1, 6),
        "req_pool_size": (2, 2),
        "max_prefill_tokens": (16, 64),
    },
    explicit_bounds={"full_tokens": (24, 24), "swa_tokens": (12, 12), "sliding_window_size": (2, 2), "chunked_prefill_size": (4, 4),
                     "input_len": (1, 4), "max_new_tokens": (1, 4), "max_prefill_tokens": (32, 32)},
)


_PAGED = Config(
    name="paged",
    doc="plain radix cache, page_size 2, chunked prefill, two requests",
    num_reqs=2,
    page_size=2,
    chunked_prefill=True,
    warm_atoms=1,
    shares_warm_prefix=(True, False),
    private_atoms=4,
    bounds={
        "full_tokens": (4, 32),
        "input_len": (1, 10),
        "max_new_tokens": (1, 4),
        "warm_len": (0, 4),
        "chunked_prefill_size": (2, 8),
        "req_pool_size": (2, 2),
        "max_prefill_tokens": (8, 32),
    },
    explicit_bounds={"full_tokens": (8, 8), "input_len": (1, 4), "max_new_tokens": (1, 2), "warm_len": (0, 2),
                     "chunked_prefill_size": (2, 2), "max_prefill_tokens": (16, 16)},
)


_PAGED_ALIGNED = replace(
    _PAGED, name="paged_aligned",
    doc="paged with --truncation-align-size 4 (deterministic inference with flashinfer sets it from "
        "SGLANG_FLASHINFER_PREFILL_SPLIT_TILE_SIZE): a truncated chunk is a multiple of 4 tokens, one under 4 is OTHER",
    truncation_align_size=4,
    # SGLang refuses a chunk size under the alignment at start-up (check_truncation_align_fits_chunk)
    bounds={**_PAGED.bounds, "chunked_prefill_size": (4, 8), "full_tokens": (8, 32)},
    explicit_bounds={**_PAGED.explicit_bounds, "full_tokens": (16, 16), "input_len": (3, 8), "max_new_tokens": (1, 1),
                     "chunked_prefill_size": (6, 6)},
)


def _at_page(base: Config, page_size: int, name: str, doc: str, **pins: tuple[int, int]) -> Config:
    """`base` at another page size: the same shape and bounds, but for the parameters `pins` sets
    (a pool of at least a page or two; `x_explicit` for an explicit bound)."""
    bounds = {**base.bounds, **{k: v for k, v in pins.items() if not k.endswith("_explicit")}}
    explicit = {**base.explicit_bounds, **{k[: -len("_explicit")]: v for k, v in pins.items() if k.endswith("_explicit")}}
    return replace(base, name=name, doc=doc, page_size=page_size, bounds=bounds, explicit_bounds=explicit)


_ALIGNED_PAGE1 = replace(
    _at_page(
        _PAGED_ALIGNED, 1, "aligned_page1",
        "--truncation-align-size 8 at page 1, SGLang's default page size: a chunk cut down to the alignment "
        "leaves up to 7 tokens of chunk budget, which can admit a second request into the memory the "
        "chunked request's later chunks need (finding 12)",
        full_tokens=(4, 32), input_len=(1, 20), chunked_prefill_size=(8, 16),
        # finding 12's point: a prompt of 18 cut to 8 by a chunk of 15, then a prompt of 7
        full_tokens_explicit=(24, 24), chunked_prefill_size_explicit=(15, 15), input_len_explicit=(7, 18),
        max_new_tokens_explicit=(2, 2), warm_len_explicit=(0, 0),
    ),
    truncation_align_size=8,
)


# finding 12 at a page size above 1: the leftover of an aligned cut must be more than the page the
# admission gate reserves, so an alignment of several pages (deployments: pages of 16-64, 4096)
_ALIGNED_PAGE4 = replace(
    _at_page(
        _ALIGNED_PAGE1, 4, "aligned_page4",
        "--truncation-align-size 16 at page 4: a chunk cut down to the alignment leaves up to 15 tokens "
        "of chunk budget, more than the page the admission gate reserves (finding 12 at a page size above 1)",
        full_tokens=(4, 64), input_len=(1, 32), chunked_prefill_size=(16, 32), max_prefill_tokens=(16, 64),
        # a prompt of 25 cut to 16 by a chunk of 24 (a page multiple: every release's server_args asserts
        # it), then a prompt of 5 (max_prefill_tokens above both)
        full_tokens_explicit=(32, 32), chunked_prefill_size_explicit=(24, 24), input_len_explicit=(5, 25),
        max_new_tokens_explicit=(1, 2), warm_len_explicit=(0, 0), max_prefill_tokens_explicit=(32, 32),
    ),
    truncation_align_size=16,
)

# --enable-deterministic-inference with the flashinfer backend also disables the radix cache
_ALIGNED_CHUNK_CACHE = replace(
    _ALIGNED_PAGE1, name="aligned_chunk_cache",
    doc="aligned_page1 without a prefix tree: --enable-deterministic-inference with the flashinfer backend "
        "sets the alignment and disables the radix cache (ChunkCache up to 0.5.21, a disabled "
        "UnifiedRadixCache from 0.5.22); page 1, alignment 8, chunked prefill, two requests (finding 12)",
    chunk_cache=True, warm_atoms=0, shares_warm_prefix=(False, False),
    private_atoms=1,  # no node is ever made (the tree stays empty)
    bounds={k: v for k, v in _ALIGNED_PAGE1.bounds.items() if k != "warm_len"},
    explicit_bounds={k: v for k, v in _ALIGNED_PAGE1.explicit_bounds.items() if k != "warm_len"},
)


# finding 12 where --chunked-prefill-size is a multiple of the alignment, as deployments run it (8192
# and 4096): a short request ahead in the pass leaves a chunk budget that is not
_ALIGNED_THREE = replace(
    _ALIGNED_PAGE1, name="aligned_three", warm_atoms=0,
    doc="aligned_page1 with three requests and --chunked-prefill-size 16, twice the alignment: a short "
        "request ahead in the pass leaves a chunk budget that is not a multiple of 8, the long prompt is cut, "
        "and the rest admits a third request (finding 12 at a chunk size that is a multiple of the alignment)",
    num_reqs=3, shares_warm_prefix=(False, False, False),
    bounds={**{k: v for k, v in _ALIGNED_PAGE1.bounds.items() if k != "warm_len"}, "chunked_prefill_size": (16, 16),
            "max_new_tokens": (1, 2), "req_pool_size": (3, 3)},
    explicit_bounds={**{k: v for k, v in _ALIGNED_PAGE1.explicit_bounds.items() if k != "warm_len"},
                     "full_tokens": (23, 23), "chunked_prefill_size": (16, 16),
                     "input_len": (1, 3), "max_new_tokens": (1, 2), "req_pool_size": (3, 3)},
)


_HYBRID_SWA_PAGE4 = Config(
    name="hybrid_swa_page4",
    doc="hybrid SWA at page_size 4 (real page arithmetic: unaligned C, page-floored windows, the chunk's page "
        "reserve), chunked prefill, two requests; W 1..7 (a page multiple or not, below or above a page)",
    num_reqs=2,
    page_size=4,
    hybrid_swa=True,
    chunked_prefill=True,
    private_atoms=3,
    bounds={
        "full_tokens": (8, 48),
        "swa_tokens": (8, 48),
        "sliding_window_size": (1, 7),
        "input_len": (1, 16),
        "max_new_tokens": (1, 4),
        "chunked_prefill_size": (4, 12),
        "req_pool_size": (2, 2),
        "max_prefill_tokens": (8, 32),
    },
    explicit_bounds={"full_tokens": (32, 32), "swa_tokens": (16, 16), "sliding_window_size": (5, 5),
                     "input_len": (1, 10), "max_new_tokens": (1, 2), "chunked_prefill_size": (8, 8),
                     "max_prefill_tokens": (16, 16)},
)


_HYBRID_SWA_HICACHE = Config(
    name="hybrid_swa_hicache",
    doc="hybrid SWA with HiCache (UnifiedRadixCache), page_size 1: a warm prefix of two nodes, device or host-only, one split",
    num_reqs=2,
    page_size=1,
    hybrid_swa=True,
    hicache=True,
    chunked_prefill=True,
    warm_atoms=2,
    warm_spare_atoms=1,  # a chunk that ends inside a warm node splits it
    shares_warm_prefix=(True, True),
    private_atoms=3,
    bounds={
        "full_tokens": (4, 32),
        "swa_tokens": (4, 32),
        "sliding_window_size": (1, 8),
        "input_len": (1, 16),
        "max_new_tokens": (1, 3),
        "warm_len": (0, 8),
        "warm_device": (0, 1),
        "warm_host": (0, 1),
        "chunked_prefill_size": (2, 8),
        "req_pool_size": (2, 2),
        "max_prefill_tokens": (8, 32),
    },
    explicit_bounds={"full_tokens": (16, 16), "swa_tokens": (8, 8), "sliding_window_size": (2, 2),
                     "input_len": (5, 6), "max_new_tokens": (1, 3), "warm_len": (2, 2),
                     "chunked_prefill_size": (4, 4), "max_prefill_tokens": (16, 16)},
)


CONFIGS: dict[str, Config] = {
    c.name: c
    for c in [
        Config(
            name="small",
            doc="plain radix cache, page_size 1, two requests sharing a warm prefix, small pools",
            num_reqs=2,
            page_size=1,
            warm_atoms=1,
            shares_warm_prefix=(True, True),
            private_atoms=2,
            bounds={
                "full_tokens": (2, 24),
                "input_len": (1, 8),
                "max_new_tokens": (1, 4),
                "warm_len": (0, 4),
                "req_pool_size": (1, 3),
                "max_prefill_tokens": (4, 32),
            },
            # max_new_tokens up to 3: a request then holds uncached KV after a decode (the witness of
            # conservation and the busy-check properties); with 2 it finishes in that decode
            explicit_bounds={"full_tokens": (6, 6), "input_len": (1, 3), "max_new_tokens": (1, 3), "warm_len": (0, 1),
                             "req_pool_size": (2, 2), "max_prefill_tokens": (16, 16)},
        ),
        _PAGED,
        _PAGED_ALIGNED,
        _ALIGNED_PAGE1,
        _ALIGNED_PAGE4,
        _ALIGNED_CHUNK_CACHE,
        _ALIGNED_THREE,
        Config(
            name="hybrid_swa",
            doc="hybrid SWA (SWARadixCache), page_size 1, chunked prefill, two requests",
            num_reqs=2,
            page_size=1,
            hybrid_swa=True,
            chunked_prefill=True,
            private_atoms=3,
            bounds={
                "full_tokens": (4, 32),
                "swa_tokens": (4, 32),
                "sliding_window_size": (1, 8),
                "input_len": (1, 12),
                "max_new_tokens": (1, 4),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (2, 2),
                "max_prefill_tokens": (8, 32),
            },
            explicit_bounds={"full_tokens": (16, 16), "swa_tokens": (8, 8), "sliding_window_size": (2, 2),
                             "input_len": (1, 6), "max_new_tokens": (1, 2), "chunked_prefill_size": (4, 4),
                             "max_prefill_tokens": (16, 16)},
        ),
        _HYBRID_SWA_HICACHE,
        Config(
            name="hicache_evict",
            doc="hybrid SWA with HiCache (UnifiedRadixCache), page_size 1: request 0 does not share the warm prefix, so "
                "when request 1 loads it back from the host the pools can be held by request 0's cached chain and "
                "init_load_back evicts first",
            num_reqs=2,
            page_size=1,
            hybrid_swa=True,
            hicache=True,
            chunked_prefill=True,
            warm_atoms=1,
            # hybrid_swa_hicache's requests both share the warm prefix: whoever loads it back finds no other
            # evictable node (the sharer's nodes hang below it), so its load-back never evicts
            shares_warm_prefix=(False, True),
            private_atoms=3,  # with 2, request 0 cannot also hold decode tokens: no decode batch is reachable
            bounds={
                "full_tokens": (4, 24),
                "swa_tokens": (4, 16),
                "sliding_window_size": (1, 8),
                "input_len": (1, 12),
                "max_new_tokens": (1, 3),
                "warm_len": (0, 6),
                "warm_device": (0, 1),
                "warm_host": (0, 1),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (2, 2),
                "max_prefill_tokens": (8, 32),
            },
            # the prefix backed up on the host, on the device or not: request 0's chain fills the pools
            # either way, and request 1's load-back evicts from it (full, SWA or both short)
            explicit_bounds={"full_tokens": (6, 8), "swa_tokens": (5, 6), "sliding_window_size": (2, 2),
                             "input_len": (4, 5), "max_new_tokens": (1, 3), "warm_len": (3, 3), "warm_host": (1, 1),
                             "chunked_prefill_size": (4, 4), "max_prefill_tokens": (16, 16)},
        ),
        _HYBRID_SWA_PAGE4,
        # the page sizes hybrid-SWA models are served with (16 by default for SWA models on FA3, 64 with
        # FlashMLA / trtllm backends): every pool, chunk and warm length a page multiple (server_args);
        # the window and the prompts unaligned. Checked by the concrete engines only (`symbolic=False`):
        # z3 reaches depth 1 on page 4 already (docs/engines.md), and the concrete step does not care
        # about page arithmetic.
        _at_page(_HYBRID_SWA_PAGE4, 16, "hybrid_swa_page16",
                 "hybrid SWA at page_size 16 (SWA models on FA3), chunked prefill, two requests; W 1..40 and "
                 "prompts 1..64 unaligned",
                 full_tokens=(32, 192), swa_tokens=(32, 192), sliding_window_size=(1, 40), input_len=(1, 64),
                 chunked_prefill_size=(16, 48), max_prefill_tokens=(32, 128),
                 full_tokens_explicit=(128, 128), swa_tokens_explicit=(64, 64), sliding_window_size_explicit=(20, 20),
                 input_len_explicit=(15, 18), chunked_prefill_size_explicit=(32, 32), max_prefill_tokens_explicit=(64, 64)),
        _at_page(_HYBRID_SWA_PAGE4, 64, "hybrid_swa_page64",
                 "hybrid SWA at page_size 64 (FlashMLA / trtllm backends), chunked prefill, two requests; W 1..160 and "
                 "prompts 1..256 unaligned",
                 full_tokens=(128, 768), swa_tokens=(128, 768), sliding_window_size=(1, 160), input_len=(1, 256),
                 chunked_prefill_size=(64, 192), max_prefill_tokens=(128, 512),
                 full_tokens_explicit=(512, 512), swa_tokens_explicit=(256, 256), sliding_window_size_explicit=(80, 80),
                 input_len_explicit=(63, 66), chunked_prefill_size_explicit=(128, 128), max_prefill_tokens_explicit=(256, 256)),
        # HiCache at the same page sizes: a warm prefix of two one-page nodes, device or host-only, the prompts
        # two pages and a bit, two of them filling the pools (six pages; with four SWA pages no prompt is admitted)
        _at_page(_HYBRID_SWA_HICACHE, 16, "hybrid_swa_hicache_page16",
                 "hybrid SWA with HiCache (UnifiedRadixCache) at page_size 16, chunked prefill: a warm prefix of "
                 "two nodes, device or host-only, prompts 1..64 unaligned",
                 full_tokens=(32, 192), swa_tokens=(32, 192), sliding_window_size=(1, 40), input_len=(1, 64),
                 warm_len=(0, 48), chunked_prefill_size=(16, 48), max_prefill_tokens=(32, 128),
                 full_tokens_explicit=(96, 96), swa_tokens_explicit=(96, 96), sliding_window_size_explicit=(20, 20),
                 input_len_explicit=(33, 34), warm_len_explicit=(16, 16), chunked_prefill_size_explicit=(32, 32),
                 max_prefill_tokens_explicit=(64, 64)),
        _at_page(_HYBRID_SWA_HICACHE, 64, "hybrid_swa_hicache_page64",
                 "hybrid SWA with HiCache (UnifiedRadixCache) at page_size 64, chunked prefill: a warm prefix of "
                 "two nodes, device or host-only, prompts 1..256 unaligned",
                 full_tokens=(128, 768), swa_tokens=(128, 768), sliding_window_size=(1, 160), input_len=(1, 256),
                 warm_len=(0, 192), chunked_prefill_size=(64, 192), max_prefill_tokens=(128, 512),
                 full_tokens_explicit=(384, 384), swa_tokens_explicit=(384, 384), sliding_window_size_explicit=(80, 80),
                 input_len_explicit=(129, 130), warm_len_explicit=(64, 64), chunked_prefill_size_explicit=(128, 128),
                 max_prefill_tokens_explicit=(256, 256)),
        _SESSIONS,
        _at_page(_SESSIONS, 2, "sessions_paged", "sessions at page_size 2: a turn restored from its slot, a rewind freeing "
                 "the row's tail [ceil(prefix), A) by pages, retraction of a paged session row",
                 full_tokens=(4, 32), full_tokens_explicit=(12, 12), input_len_explicit=(1, 3)),
        Config(
            name="spec_topk",
            doc="EAGLE v1 with topk=2, num_steps=2, num_draft_tokens=3, page_size 1",
            num_reqs=2,
            # page_size 1: z3 needs minutes per depth on the paged draft/verify arithmetic at page 2
            # or 4; the paged topk > 1 path (per-branch partial-page copies) is checked concretely
            # at page 4 in tests/unit/test_digest_scenarios.py (digest 11.4).
            page_size=1,
            spec=Spec(num_steps=2, topk=2, num_draft_tokens=3),
            private_atoms=2,
            bounds={
                "full_tokens": (2, 32),
                "input_len": (1, 10),
                "max_new_tokens": (1, 6),
                "req_pool_size": (2, 2),
                "max_prefill_tokens": (16, 64),
            },
            explicit_bounds={"full_tokens": (32, 32), "input_len": (1, 5), "max_new_tokens": (1, 4),
                             "max_prefill_tokens": (32, 32)},
        ),
        _SPEC_V2,
        _HYBRID_SWA_SPEC_V2,
        _at_page(_SPEC_V2, 2, "spec_v2_paged", "spec v2 (v0.5.13+) as spec_v2 at page_size 2: A' = max(A, ceil_page(C + "
                 "2a)) and the decode step's eviction of a page per request beyond the over-allocation only show at "
                 "page > 1", full_tokens=(4, 40)),
        Config(
            name="swa_ring",
            doc="hybrid SWA with the per-request SWA ring (v0.5.20+, DeepSeek-V4 unified_kv): page_size 2, W 4 (ring cost "
                "4 per request row), chunked prefill, two requests, one to three rows",
            num_reqs=2,
            page_size=2,
            hybrid_swa=True,
            swa_ring=True,
            chunked_prefill=True,
            private_atoms=3,
            bounds={
                "full_tokens": (4, 32),
                "swa_tokens": (0, 0),
                "sliding_window_size": (4, 4),
                "input_len": (1, 12),
                "max_new_tokens": (1, 4),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (1, 3),
                "max_prefill_tokens": (8, 32),
            },
            explicit_bounds={"full_tokens": (16, 16), "input_len": (1, 6), "max_new_tokens": (1, 2),
                             "chunked_prefill_size": (4, 4), "req_pool_size": (2, 2), "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="small3",
            doc="plain radix cache, page_size 1, three requests sharing a warm prefix: batching, retraction and "
                "eviction order with a third request",
            num_reqs=3,
            page_size=1,
            warm_atoms=1,
            shares_warm_prefix=(True, True, True),
            private_atoms=2,
            bounds={
                "full_tokens": (2, 24),
                "input_len": (1, 8),
                "max_new_tokens": (1, 4),
                "warm_len": (0, 4),
                "req_pool_size": (1, 4),
                "max_prefill_tokens": (4, 32),
            },
            explicit_bounds={"full_tokens": (6, 6), "input_len": (1, 2), "max_new_tokens": (1, 2), "warm_len": (0, 1),
                             "req_pool_size": (3, 3), "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="over_long_prompt",
            doc="an over-long prompt aborted at arrival (validate_input_length; it is [0] and finishes at its prefill) "
                "beside two valid requests: plain radix cache, page_size 1, the pool below the context length "
                "(max_req_len = T - 1)",
            num_reqs=3,
            page_size=1,
            private_atoms=2,
            over_long=(1,),
            bounds={
                "full_tokens": (8, 16),
                "input_len": (1, 24),
                "max_new_tokens": (1, 4),
                "req_pool_size": (3, 3),
                "max_prefill_tokens": (8, 32),
            },
            # valid prompts are at most T - 7 tokens; the over-long one at least T - 6, and past T - 2 its
            # clipped max_new_tokens is negative up to 0.5.11. Two valid prompts outgrow the pool in one pass
            # from T = 14 on
            explicit_bounds={"full_tokens": (14, 14), "input_len": (6, 20), "max_new_tokens": (1, 3),
                             "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="pressure",
            doc="memory pressure: new_token_ratio 1/8 (SGLang decays the ratio to about 0.1 and leans on retraction: "
                "admission reserves an eighth of each running request's remaining output), three requests, small pools: "
                "decode runs out and retracts",
            num_reqs=3,
            page_size=1,
            private_atoms=2,
            new_token_ratio=(1, 8),
            bounds={
                "full_tokens": (6, 16),
                "input_len": (1, 4),
                "max_new_tokens": (2, 6),
                "req_pool_size": (3, 3),
                "max_prefill_tokens": (8, 32),
            },
            # a retraction at depth 5 (full 8, max_new 5, 4, 3): see docs/log/mutants.md, "configs"
            explicit_bounds={"full_tokens": (8, 8), "input_len": (1, 1), "max_new_tokens": (3, 5),
                             "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="mixed",
            doc="mixed chunked prefill (--enable-mixed-chunk): the running batch decodes inside the prefill batch; "
                "plain radix cache, page_size 2, chunked prefill, three requests (two decoding beside a chunk), "
                "new_token_ratio 1/8",
            num_reqs=3,
            page_size=2,
            chunked_prefill=True,
            mixed_chunk=True,
            new_token_ratio=(1, 8),
            # no warm prefix: a request that re-inserts an evicted warm prefix would put it in its own
            # chain (kvmc's tree abstraction, docs/model.md), which the event_loop/mixed row reports
            private_atoms=4,
            bounds={
                "full_tokens": (4, 16),
                "input_len": (1, 8),
                "max_new_tokens": (1, 6),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (3, 3),
                "max_prefill_tokens": (8, 32),
            },
            # around the decode OOM of v0.5.10.post1 (docs/findings.md finding 8: two decoding, one chunked)
            explicit_bounds={"full_tokens": (12, 12), "input_len": (1, 7), "max_new_tokens": (1, 5),
                             "chunked_prefill_size": (4, 4), "max_prefill_tokens": (26, 26)},
        ),
        Config(
            name="hybrid_swa_mixed",
            doc="mixed chunked prefill with hybrid SWA (SWARadixCache), page_size 1: the running batch decodes inside the "
                "prefill batch, whose adder keeps its decode tokens off the full budget but not off the SWA one; three "
                "requests, new_token_ratio 1/8",
            num_reqs=3,
            page_size=1,
            hybrid_swa=True,
            chunked_prefill=True,
            mixed_chunk=True,
            new_token_ratio=(1, 8),
            private_atoms=4,
            bounds={
                "full_tokens": (4, 32),
                "swa_tokens": (4, 32),
                "sliding_window_size": (1, 8),
                "input_len": (1, 12),
                "max_new_tokens": (1, 4),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (3, 3),
                "max_prefill_tokens": (8, 32),
            },
            # around the SWA decode OOM of v0.5.11-v0.5.21 (docs/findings.md finding 9)
            explicit_bounds={"full_tokens": (16, 16), "swa_tokens": (6, 8), "sliding_window_size": (2, 2),
                             "input_len": (1, 6), "max_new_tokens": (1, 4), "chunked_prefill_size": (3, 4),
                             "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="hybrid_swa_chunk_cache",
            doc="hybrid SWA without a prefix tree (--disable-radix-cache: SWAChunkCache up to 0.5.21, a disabled "
                "UnifiedRadixCache from 0.5.22), page_size 1, chunked prefill, two requests",
            num_reqs=2,
            page_size=1,
            hybrid_swa=True,
            chunked_prefill=True,
            chunk_cache=True,
            private_atoms=1,  # no node is ever made (the tree stays empty)
            bounds={
                "full_tokens": (4, 32),
                "swa_tokens": (4, 32),
                "sliding_window_size": (1, 8),
                "input_len": (1, 12),
                "max_new_tokens": (1, 4),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (2, 2),
                "max_prefill_tokens": (8, 32),
            },
            explicit_bounds={"full_tokens": (12, 12), "swa_tokens": (6, 8), "sliding_window_size": (2, 2),
                             "input_len": (1, 6), "max_new_tokens": (1, 2), "chunked_prefill_size": (3, 4),
                             "max_prefill_tokens": (16, 16)},
        ),
        Config(
            name="chunk_cache_paged",
            doc="plain attention without a prefix tree (--disable-radix-cache: ChunkCache up to 0.5.21, a disabled "
                "UnifiedRadixCache from 0.5.22), page_size 2, chunked prefill, three requests",
            num_reqs=3,
            page_size=2,
            chunked_prefill=True,
            chunk_cache=True,
            private_atoms=1,  # no node is ever made (the tree stays empty)
            bounds={
                "full_tokens": (4, 32),
                "input_len": (1, 10),
                "max_new_tokens": (1, 4),
                "chunked_prefill_size": (2, 8),
                "req_pool_size": (2, 3),
                "max_prefill_tokens": (8, 32),
            },
            explicit_bounds={"full_tokens": (10, 10), "input_len": (1, 5), "max_new_tokens": (1, 2),
                             "chunked_prefill_size": (2, 4), "req_pool_size": (3, 3), "max_prefill_tokens": (16, 16)},
        ),
    ]
}


def get(name: str) -> Config:
    try:
        return CONFIGS[name]
    except KeyError:
        raise KeyError(f"unknown config {name!r}; expected one of {list(CONFIGS)}") from None
