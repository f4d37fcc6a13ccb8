"""Planted: `add_chunked_req` sizes the next chunk without looking at `rem_swa_tokens`.

Breaks PrefillAdder.add_chunked_req (managers/schedule_policy.py, #22597/#23174): with hybrid SWA
the chunk must fit the SWA budget as well as the full one (R = min(rem_chunk, rem_total, rem_swa
- page)). Taking only the full budget lets a chunk whose SWA slots are not there into the batch,
and `alloc_extend` fails on the SWA pool (`no_prefill_oom`).
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder
from model.prefill_adder import Adder
from model.state import State
from model.transition import Ctx

REPLACES = "add_chunked_req"


def replacement(x: Ctx, s: State, ad: Adder, r: int) -> tuple[Adder, Any]:
    fill = s.origin_input_len[r] + s.output_len[r]
    prefix = s.kv_committed_len[r]
    extend = fill - prefix
    rc = ad.rem_chunk_tokens
    budget = x.min(rc, prefill_adder.rem_total_int(x, s, ad))  # planted: no rem_swa_tokens term
    budget = x.ite(budget <= 0, rc, budget)
    truncated = extend > budget
    ext = x.min(extend, budget)
    mnt = x.ite(truncated, 0, x.min(x.p.max_new_tokens[r], x.cfg.clip_max_new_tokens))
    out = prefill_adder._update_prefill_budget(x, ad, ext, mnt)
    out = out.at("can_run", r, True).at("extend", r, ext).at("prefix", r, prefix).at("new_chunked", r, truncated)
    return out, truncated
