"""Patch of `add_chunked_req`: `swa_reserve.py`, with the SWA cut charged for the window only (BROKEN).

A further step from swa_reserve.py, with a reason: since #23174 a chunk the SWA budget cannot hold
is cut or deferred, and a deferred chunked request can wait behind the decode batch pass after pass.
But the SWA pool keeps only the last W tokens of a request, so (the reasoning goes) a chunk needs SWA
room for at most W tokens and alloc_extend's page: cut the chunk only when even that does not fit,
and then never below one page. The reasoning is wrong: the out-of-window slots are freed after the
chunk has run, while alloc_extend takes SWA slots for the whole chunk first. A chunk longer than
the SWA room left fails on the SWA pool (`no_prefill_oom`), #23174's bug through another door.
docs/patches.md shows the review that finds it.

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
        # proposed: never defer the chunked request. The SWA pool keeps only the window, so the chunk
        # needs SWA room for at most W tokens (and the page); cut it only when even that does not fit
        window_need = min(extend, x.p.sliding_window_size) + ps
        if window_need > swa_left:
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
