"""Patch of `add_chunked_req`: `swa_reserve.py`, and the chunk never deferred (BROKEN).

A further step from swa_reserve.py, with a reason: since #23174 a chunk the SWA budget cannot hold
is deferred, and a deferred chunked request can wait behind the decode batch pass after pass. So:
never defer it; hold alloc_extend's page back as before, but always prefill at least one page.
When the SWA pool is exhausted that one page is not there: the extend batch fails on the SWA pool
(`no_prefill_oom`), #23174's bug through another door. docs/patches.md shows the review that
finds it.

Models SGLang's managers/schedule_policy.py::PrefillAdder.add_chunked_req (python/sglang/srt/).
Frame: it may change only modifies=().
"""

from __future__ import annotations

from model.prefill_adder import Adder, Any, Ctx, State, _update_prefill_budget, rem_swa_tokens, rem_total_int

REPLACES = "add_chunked_req"


def replacement(x: Ctx, s: State, ad: Adder, r: int) -> tuple[Adder, Any]:
    ps = x.ps
    fill = s.origin_input_len[r] + s.output_len[r]
    prefix = s.kv_committed_len[r]
    extend = fill - prefix
    rc = ad.rem_chunk_tokens
    budget = min(rc, rem_total_int(x, s, ad))
    deferred = False
    if x.cfg.hybrid_swa and x.on("swa_budget_split") and not x.cfg.swa_ring:
        swa_left = rem_swa_tokens(x, s, ad)
        if extend + ps <= swa_left:
            reserve = 0  # the whole rest fits with alloc_extend's page: the SWA budget does not cut it
        else:
            reserve = ps  # #23174's page
        # proposed: never defer the chunked request; it gets at least one page per pass
        budget = max(min(budget, swa_left - reserve), ps)
    if deferred:
        return ad, True
    if budget <= 0:
        budget = rc  # "the chunked req must be added or its KV leaks"
    truncated = extend > budget
    ext = min(extend, budget)
    mnt = 0 if truncated else min(x.p.max_new_tokens[r], x.cfg.clip_max_new_tokens)
    out = _update_prefill_budget(x, ad, ext, mnt)
    if x.cfg.swa_ring:  # the ring was charged at the first admission
        out = out.set(rem_swa_token_offset=ad.rem_swa_token_offset)
    out = out.at("can_run", r, True).at("extend", r, ext).at("prefix", r, prefix).at("new_chunked", r, truncated)
    return out, truncated
