"""Documented abstractions: disagreements between SGLang and kvmc's model that are deliberate,
each with its reason, an example and the properties it can affect (docs/conformance.md).

`match(row, scenario, diffs, design, version)` names the abstraction a disagreement falls under,
or None (then it is a disagreement the model must fix). Each predicate is narrow: it must
recognise the documented situation from the scenario and the differing fields, never a whole row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from .sched.loop_rows import LOOP_ROWS as _LOOP_ROW_CONFIGS

# marks the lifecycle rows (upstream/lifecycle.py) put on an observation's label: a match or op after
# an eviction took (part of) the shared warm prefix from kvmc's tree, and an op that starts from a
# state whose ownership ledger kvmc's `conservation` already finds broken
WARM_EVICTED = " (after the warm prefix was evicted)"
LEDGER_BROKEN = " (kvmc's ledger already broken)"


@dataclass(frozen=True)
class Abstraction:
    name: str
    reason: str
    properties: str  # which kvmc properties it can affect, or why none
    rows: tuple[str, ...]
    matches: Callable[[Any, list, Any, str], bool]


def _after_failed_decode(sc: Any, diffs: list, design: Any, version: str) -> bool:
    """The first differing observation is the pool sizes right after an `alloc_decode` that
    returned None on both sides (SGLang's SWA allocator took a page from one sub-pool before the
    other refused; kvmc's allocator is all-or-nothing). Everything after follows from it."""
    first = diffs[0][0]
    return " decode: free sizes" in first


def _cross_request_sharing(sc: Any, diffs: list, design: Any, version: str) -> bool:
    """The first difference is a match longer in SGLang than in kvmc, for a request sharing the
    warm prefix, after an eviction: the warm node was evicted and the other request re-inserted
    those tokens in a node of its own, which SGLang's tree shares and kvmc's atoms do not."""
    first = diffs[0][0]
    longer = isinstance(diffs[0][1], int) and isinstance(diffs[0][2], int) and diffs[0][1] > diffs[0][2]
    # the same Full-KV hit past a tombstone is a branching point (v0.5.20+)
    if not longer or not (": prefix" in first or ": swa_branching_seqlen" in first):
        return False
    return _warm_evicted(sc, first)


def _warm_evicted(sc: Any, label: str) -> bool:
    """Both requests share the warm prefix, and at this observation an eviction had taken (part of)
    it from kvmc's tree: the lifecycle rows mark the label (WARM_EVICTED).
    An SWA-only eviction that tombstones the warm node leaves it in both trees: no mark."""
    return WARM_EVICTED in label and sum(1 for r in sc.reqs if r[1]) == 2


def _cross_request_dedup(sc: Any, diffs: list, design: Any, version: str) -> bool:
    """The same sharing, seen at a stash instead of a match: after the warm node was evicted, both
    requests (each sharing the warm prefix) computed those tokens in slots of their own; the other
    request inserted them first, so SGLang's insert of this one's chunk finds them in the tree and
    frees its duplicate slots (more available, the shared node locked) where kvmc keeps both
    requests' copies. The first difference is the pool sizes after a chunk or stash op, with more
    full slots free in SGLang."""
    first, got, want = diffs[0]
    if ": sizes" not in first or not isinstance(got, dict) or not isinstance(want, dict):
        return False
    if got.get("full_available", 0) <= want.get("full_available", 0):
        return False
    op = int(first.split()[1])
    kind = sc.ops[op][0] if op < len(sc.ops) else ""
    return kind in ("chunk", "stash", "finish") and _warm_evicted(sc, first)


ABSTRACTIONS: list[Abstraction] = [
    Abstraction(
        "sharing_through_warm_prefix_only",
        "kvmc's tree is a fixed set of atoms (model/config.py): requests share tokens only through the warm "
        "prefix chain; a node a request inserts is matched again only by that request. When the warm node is "
        "evicted and one request re-inserts the shared tokens in its own chain, SGLang's next request matches "
        "them; kvmc's does not (a shorter prefix: it prefills and allocates more). Likewise when both requests "
        "computed those tokens after the eviction: the second one's stash finds the first one's node and frees its "
        "duplicate slots in SGLang, while kvmc keeps both copies (more allocated, more evictable).",
        "the budgets of the later request (a larger extend; an admission kvmc refuses that SGLang grants, never "
        "the reverse for the same pools), hence no_prefill_oom's and the busy checks' reachable states: kvmc "
        "explores fewer cache-hit states after an eviction of a shared prefix. conservation and well_formed per "
        "state are unaffected (the tokens are accounted either way).",
        ("RadixCache", "SWARadixCache", "UnifiedRadixCache", "UnifiedRadixCache/swa", "UnifiedRadixCache/swa_branching",
         "busy_check", "busy_check/swa", "alloc_for_extend", "alloc_for_extend/swa", "alloc_for_decode", "alloc_for_decode/swa",
         "alloc_for_spec_decode", "alloc_for_spec_decode/swa", *_LOOP_ROW_CONFIGS),
        # the loop rows: the replay relabels the state (upstream/sched/driver.py::_warm_prefix_relabelled)
        lambda sc, diffs, d, v: ("(sharing_through_warm_prefix_only)" in diffs[0][0]
                                 or (hasattr(sc, "ops") and (_cross_request_sharing(sc, diffs, d, v)
                                                                   or _cross_request_dedup(sc, diffs, d, v)))),
    ),
    Abstraction(
        "failed_swa_decode_not_atomic",
        "SWATokenToKVPoolAllocator.alloc_decode allocates from the full sub-allocator, then from the SWA one, "
        "and returns None if either is short without giving the first one's page back (every release through "
        "0.5.23). kvmc's allocator is all-or-nothing. A None from alloc_decode is SGLang's 'Decode out of "
        "memory' RuntimeError: the scheduler dies, and kvmc's model stops there (OOM_DECODE, no step follows), "
        "so the pool sizes after a failed alloc_decode are never read by any property.",
        "none: no_decode_oom is decided by the failure itself (both agree on it); conservation, the busy "
        "checks and well_formed are only evaluated on states from which a step can follow",
        ("SWATokenToKVPoolAllocator",),
        _after_failed_decode,
    ),
]


ABSTRACTIONS.append(Abstraction(
    "after_conservation_violation",
    "Once kvmc's own ownership ledger is broken (a state where `conservation` fails: finding 3's short re-match "
    "leaves the request's prefix in the tree unlocked while its row holds the same slots), both pools are "
    "corrupt: the next eviction or free hands out or frees slots twice. kvmc's model does not follow SGLang "
    "through a corrupted pool (what an eviction picks among doubly owned slots, whether SGLang's allocator asserts).",
    "none: conservation (and, on SGLang's scheduler, its busy check) is violated at the state before, and kvmc "
    "reports that violation first; nothing after it is a separate verdict",
    ("SWARadixCache", "UnifiedRadixCache/swa", "UnifiedRadixCache/swa_branching", "busy_check/swa",
     "alloc_for_extend/swa", "alloc_for_decode/swa", "alloc_for_spec_decode/swa"),
    lambda sc, diffs, d, v: LEDGER_BROKEN in diffs[0][0],
))


ABSTRACTIONS.append(Abstraction(
    "paged_kernel_reads_empty_free_list",
    "On a GPU, up to 0.5.21, PagedTokenToKVPoolAllocator.alloc_extend / alloc_decode launch their Triton kernel "
    "before the fit check (0.5.22 checks first); a request that opens a page reads free_pages[0], and with an "
    "empty free list that is a CUDA illegal memory access (seen on an H200 for 0.5.13 and 0.5.18, "
    ".ci/device_probe.py) where the cpu path and kvmc return None. The conformance worker on cuda does not make "
    "that launch (upstream/devices.py::guard_paged_kernels) and counts the scenario here.",
    "none of kvmc's properties: the allocation fails either way, and its caller's 'Prefill/Decode out of memory' "
    "RuntimeError ends the scheduler either way (no_prefill_oom / no_decode_oom are violated in both); only "
    "the message differs (a CUDA fault, the process's CUDA context lost)",
    ("PagedTokenToKVPoolAllocator", "SWATokenToKVPoolAllocator", "SWATokenToKVPoolAllocator/ring", "RadixCache",
     "SWARadixCache", "UnifiedRadixCache", "UnifiedRadixCache/swa", "UnifiedRadixCache/swa_branching", "busy_check", "busy_check/swa", "alloc_for_extend",
     "alloc_for_extend/swa", "alloc_for_decode", "alloc_for_decode/swa", "alloc_for_spec_decode",
     "alloc_for_spec_decode/swa"),
    lambda sc, diffs, d, v: False,  # assigned by the worker when the guard fires, never from diffs
))


# the scheduler-loop rows (upstream/sched/loop_rows.py)
LOOP_ROWS = tuple(_LOOP_ROW_CONFIGS)


ABSTRACTIONS.append(Abstraction(
    "eviction_superset",
    "kvmc's eviction may take any set of evictable leaves that is enough and whose last node was needed (model/"
    "radix_cache.py): every LRU order gives such a set, but not every such set is an LRU order's. On hybrid SWA "
    "the model may also delete a Full-only tombstone leaf for an SWA-only shortfall, or tombstone past the SWA need "
    "when a Full deletion already covered it; SGLang's component passes do neither. A walk that chose such a set "
    "cannot be forced on SGLang; it is counted here only where SGLang's own eviction in that step is one the model "
    "allows too (the step re-run with SGLang's evicted and tombstoned atoms reaches SGLang's state), as the "
    "lifecycle rows accept an eviction. Restricting the model to exclude these sets was measured: 10x and more on "
    "z3's hybrid_swa_page4 queries, so the superset stays.",
    "none for safety (a superset of SGLang's evictions): a counterexample that needs such a set would not replay on "
    "SGLang, which `kvmc replay --against` reports",
    LOOP_ROWS,
    lambda sc, diffs, d, v: "(eviction_superset)" in diffs[0][0],
))


ABSTRACTIONS.append(Abstraction(
    "swa_evict_timing",
    "kvmc's `_evict_swa` may release a request's out-of-window SWA at any decode step (a choice); up to 0.5.17 "
    "SGLang releases it when `decode_batch_idx % interval == 1`, an interval of max(page, W * multiplier), which "
    "never holds for an interval of 1 (0.5.10.post1 with W = 1). A walk that chose the release there cannot be "
    "forced on SGLang (upstream/sched/forcing.py) and is counted here: the model allows more release timings than "
    "the release has.",
    "none for safety: the model's runs include SGLang's (a superset of release timings); a counterexample that "
    "needs such a release would not replay, which `kvmc replay --against` reports as not replayable",
    LOOP_ROWS,
    lambda sc, diffs, d, v: "a choice SGLang cannot make here" in diffs[0][0] and "evict_swa" in str(diffs[0][1]),
))


ABSTRACTIONS.append(Abstraction(
    "retraction_tie_order",
    "Among decode requests with equal (|output|, |input|) SGLang's stable sort retracts the last in running-batch "
    "order, which is admission order; kvmc keeps no admission order and lets the tie be any of them (model/"
    "schedule_batch.py::_retract_victims). From 0.5.18 the replay forces the walk's choice through "
    "`_get_decode_retraction_order`; before 0.5.18 the sort is inline in `retract_decode`, and a walk whose tie-break "
    "is not SGLang's cannot be forced there and is counted here.",
    "none for safety: the model's retractions include SGLang's (every tie-break); a counterexample that needs another "
    "tie-break than the admission order would not replay on releases before 0.5.18, which `kvmc replay --against` "
    "reports as not replayable",
    LOOP_ROWS,
    lambda sc, diffs, d, v: "a choice SGLang cannot make here" in diffs[0][0] and "tie_pass" in str(diffs[0][1]),
))


def _after_phantom_stash(sc: Any, diffs: list, design: Any, version: str) -> bool:
    """Off `chunked_req_scheduled_last_iter` with `chunked_swa_page_reserve` on (v0.5.11), the walk
    stashed a parked chunk (a request chunked and not in the last batch at an iteration's start)
    before or at the step of the first difference."""
    if design.on("chunked_req_scheduled_last_iter") or not design.on("chunked_swa_page_reserve"):
        return False
    m = re.match(r"step (\d+):", diffs[0][0])
    if m is None:
        return False
    from checker.traces.walk import random_walk
    from model.state import CHUNKED
    from specs.configs import CONFIGS

    t = random_walk(CONFIGS[sc.config], design, sc.steps, sc.seed)
    states = [t.init] + [st.state for st in t.steps]
    return any(s.status[r] == CHUNKED and not s.in_last_batch[r]
               for s in states[:int(m.group(1))] for r in range(t.cfg.num_reqs))


ABSTRACTIONS.append(Abstraction(
    "phantom_stash",
    "SGLang #24252 (0.5.11; #24318 fixed it in 0.5.12.post1): a chunk parked by #23174 is stashed with its whole "
    "prompt, past the KV it was ever given. SGLang's tree takes the request's req_to_token entries there, which "
    "were never written (slot 0), the request's kv_allocated_len and kv_committed_len stay, and its next extend is "
    "0 tokens; later frees hand slot 0 to the allocators, where the full pool takes page 0 as a page it never had "
    "and free_swa drops SWA index 0 (0.5.11:mem_cache/swa_memory_pool.py:463-467). kvmc gives the request phantom "
    "KV instead (kv_allocated_len = kv_committed_len = fill, from no pool; model/system.py::stash_chunked_req): "
    "the tree holds tokens no pool handed out in both, but the lengths, the pool sizes and the ownership differ "
    "afterwards (about half of the page-4 walks with a phantom stash differ). Without a "
    "tree (SWAChunkCache, `hybrid_swa_chunk_cache`) the stash makes those never-written entries the next chunk's "
    "prefix: SGLang's lengths move at that 0-token extend, kvmc's at the stash, and kvmc's conservation is violated "
    "a step before SGLang's row holds the unwritten slot.",
    "conservation and the busy-check properties on v0.5.11's hybrid configs, which the phantom stash itself "
    "already breaks in both (docs/findings.md section 2, `kvmc check --design v0.5.11 --config hybrid_swa "
    "--property conservation`, depth 4, reproduced on SGLang 0.5.11): a verdict after it is about a state SGLang "
    "reaches only through that bug",
    ("event_loop/swa", "event_loop/swa_page4", "event_loop/swa_mixed", "event_loop/swa_chunk_cache"),
    _after_phantom_stash,
))


ABSTRACTIONS.append(Abstraction(
    "after_violated_state",
    "A walk that reaches a state violating one of kvmc's corruption properties (conservation, well_formed, "
    "prompt_prefilled, residency, lock_ledger: upstream/sched/driver.py BROKEN_STATE) on SGLang too, state for state, "
    "is not compared past it: there SGLang's objects are corrupt (docs/findings.md finding 1: a request decoding on "
    "a cut prompt makes SGLang's SWA release free never-written row entries, slot 0 twice; finding 3: a slot owned by "
    "the tree and the free list), and kvmc models the scheduler's intended bookkeeping, not the consequences of a "
    "corrupted one. Counted only when the first difference comes at a later step than the violation.",
    "none for the violated property: the violation itself was reached on SGLang state for state. A counterexample "
    "to another property that runs through such a state is past what the model claims about SGLang; `kvmc replay "
    "--against` reports where it stops following",
    LOOP_ROWS,
    lambda sc, diffs, d, v: "(after_violated_state)" in diffs[0][0],
))


def match(row: str, sc: Any, diffs: list, design: Any, version: str) -> str | None:
    for a in ABSTRACTIONS:
        if row in a.rows and a.matches(sc, diffs, design, version):
            return a.name
    return None
