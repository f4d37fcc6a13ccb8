"""Patch of `add_chunked_req`: reserve alloc_extend's page of SWA slack only when the chunk needs it.

#23174 (SGLang v0.5.11) makes `PrefillAdder.add_chunked_req` keep one page of `rem_swa_tokens` back
for every chunk ("alloc_extend needs extend_num_tokens + page_size per request") and defer the
chunk when nothing is left. Proposed: when the rest of the request fits in the SWA budget together
with that page, the chunk is not cut by the SWA budget and nothing needs to be held back; reserve
the page only otherwise. (The walk-through in docs/patches.md; `swa_reserve_cut.py` is the variant
that gets the condition backwards.)

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
        budget = min(budget, max(swa_left - reserve, 0))
        if budget <= 0:
            deferred = True  # leave it for a later pass instead of over-allocating
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
