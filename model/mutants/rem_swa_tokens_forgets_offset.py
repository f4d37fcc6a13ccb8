"""Planted: `rem_swa_tokens` forgets what the pass has already promised in the SWA pool.

Breaks PrefillAdder.rem_swa_tokens (managers/schedule_policy.py, #22597; 0.5.21+ through
`SWAPrefillBudget`): the SWA budget is SWA available + SWA evictable less `rem_swa_token_offset`,
the `_swa_budget_for_req` of every request admitted earlier in the same pass. Without the offset
each request is gated against the whole SWA pool as if it were the first, so a pass admits two
requests whose SWA slots together are not there and the batch's `alloc_extend` fails on the SWA
pool (`no_prefill_oom`). A read-only transition: the state is never touched, only the budget read.
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder, radix_cache
from model.prefill_adder import Adder
from model.state import State
from model.transition import Ctx

REPLACES = "rem_swa_tokens"


def replacement(x: Ctx, s: State, ad: Adder, extra: tuple = ()) -> Any:
    if x.cfg.swa_ring:
        return prefill_adder.ring_rem_swa_tokens(x, s, ad)
    return s.swa_available + radix_cache.counters(x, s, extra).swa_evictable  # planted: no offset
