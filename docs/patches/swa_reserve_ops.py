"""Patch of `add_chunked_req`: `swa_reserve.py` written in kvmc's ops vocabulary (x.ite, x.min, x.branch).

The same change as swa_reserve.py, in the form the model's own transitions take (model/ops.py):
no Python `if` on a model value. docs/patches.md compares what the two cost the solver.

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
    budget = x.min(rc, rem_total_int(x, s, ad))
    deferred: Any = False
    if x.cfg.hybrid_swa and x.on("swa_budget_split") and not x.cfg.swa_ring:
        swa_left = rem_swa_tokens(x, s, ad)
        reserve = x.ite(extend + ps <= swa_left, 0, ps)
        budget = x.min(budget, x.clamp0(swa_left - reserve))
        deferred = budget <= 0
    budget = x.ite(x.and_(budget <= 0, x.not_(deferred)), rc, budget)
    truncated = extend > budget
    ext = x.min(extend, budget)
    mnt = x.ite(truncated, 0, x.min(x.p.max_new_tokens[r], x.cfg.clip_max_new_tokens))
    out = _update_prefill_budget(x, ad, ext, mnt)
    if x.cfg.swa_ring:  # the ring was charged at the first admission
        out = out.set(rem_swa_token_offset=ad.rem_swa_token_offset)
    out = out.at("can_run", r, True).at("extend", r, ext).at("prefix", r, prefix).at("new_chunked", r, truncated)
    return x.branch(deferred, lambda: ad, lambda: out), x.or_(deferred, truncated)
