"""Planted: `_swa_budget_for_req` drops the `max(..., 0)` around `min(extend, rem_chunk) - W`.

Breaks PrefillAdder._swa_budget_for_req (managers/schedule_policy.py, #32379's window headroom):
the SWA budget is `max(min(e, rc) - W, 0) + min(e + max_new, W) + page_size`. Without the clamp a
short request under a wide window gets a negative first term, so its budget can fall below the
tokens its own extend allocates: the `rem_swa_tokens` gate admits a prefill the SWA pool cannot
hold and `alloc_extend` fails (`no_prefill_oom`). (The issue's other example, dropping the
`+ page_size`, is not observable at page_size 1, the page size of every SWA config.)
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder
from model.prefill_adder import Adder
from model.transition import Ctx

REPLACES = "_swa_budget_for_req"


def replacement(x: Ctx, ad: Adder, extend: Any, max_new: Any, swa_host_hit: Any) -> Any:
    budget = prefill_adder._swa_budget_for_req.original(x, ad, extend, max_new, swa_host_hit)
    if not x.on("swa_window_headroom"):
        return budget
    W = x.p.sliding_window_size
    rc = ad.rem_chunk_tokens
    capped = x.min(extend, rc) if rc is not None else extend
    # the original added max(capped - W, 0); planted: capped - W, negative when capped < W
    return budget - x.clamp0(capped - W) + (capped - W)
