"""Planted: `_update_prefill_budget` charges an admitted request's new tokens but not its input.

Breaks PrefillAdder._update_prefill_budget (managers/schedule_policy.py): after a request is
appended, `rem_total_token_offset` grows by its extend length, its max_new_tokens and a page, so the
next request of the same pass sees what is left. Forgetting the extend length lets a second request
in whose prefill, together with the first, does not fit: `alloc_extend` fails (`no_prefill_oom`).
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder
from model.prefill_adder import Adder
from model.transition import Ctx

REPLACES = "_update_prefill_budget"


def replacement(x: Ctx, ad: Adder, extend: Any, max_new: Any) -> Adder:
    ps = x.ps
    _num, den = prefill_adder.ratio(x)
    e = x.ceil_page(extend)
    upd = dict(
        rem_total_token_offset=ad.rem_total_token_offset + den * (max_new + ps),  # planted: no e
        cur_rem_token_offset=ad.cur_rem_token_offset + ps,  # planted: no e
        rem_input_tokens=ad.rem_input_tokens - e,
    )
    if prefill_adder.swa_gate_on(x):
        upd["rem_swa_token_offset"] = ad.rem_swa_token_offset + prefill_adder._swa_budget_for_req(x, ad, e, max_new, 0)
    if ad.rem_chunk_tokens is not None:
        upd["rem_chunk_tokens"] = ad.rem_chunk_tokens - e
    return ad.set(**upd)
