"""Planted bugs of the pool, keyed by the names of the model's mutants (model/mutants/).

A model mutant replaces one transition; its pool counterpart plants the same bug in the pool's
mechanism, so a counterexample found on a mutant design can be replayed. `kvmc replay` refuses a
trace whose mutant has no entry here ("not replayable"), rather than replaying it on a pool that
does not have the bug.
"""

from __future__ import annotations

POOL_MUTANTS: dict[str, str] = {
    "verify_keeps_rejected_page": "EAGLE verify (topk>1) starts freeing the rejected slots one page late "
    "(Scheduler._eagle_verify): the first rejected page stays in req_to_token, owned by nobody",
    "evict_swa_skips_free_swa": "_evict_swa advances swa_evicted_seqlen without free_swa "
    "(Scheduler._evict_swa): the out-of-window SWA slots stay mapped, owned by nobody",
    "spec_v2_records_short_alloc": "spec v2 records kv_allocated_len = A' - 1 after extending a row to A' "
    "(Scheduler.spec_v2_decode_step): the slot at A' - 1 is overwritten by the next extend, owned by nobody",
    "spec_v2_window_from_allocated_len": "spec v2's window release measures the window from the allocated "
    "length A instead of C (Scheduler.maybe_evict_swa): SWA slots of the window the next verify reads are freed",
    "finished_req_keeps_lock": "a non-session request's finish frees and caches its KV but keeps its tree lock "
    "(Scheduler.cache_finished_req / release_kv_cache): the handle stays in the tree with no live owner",
    "idle_check_ignores_session_rows": "the idle check leaves the session slots' KV and rows out of the full pool's "
    "and the row pool's equations (Scheduler.self_check_during_idle): a false alarm at idle",
    "finish_frees_overalloc_from_floor": "release_kv_cache frees the over-allocation from floor(C) "
    "(Scheduler.release_kv_cache): the unaligned tail page goes back to the free list twice",
}


def missing(names: frozenset[str] | set[str]) -> list[str]:
    """Model mutants with no pool counterpart."""
    return sorted(n for n in names if n not in POOL_MUTANTS)
