"""Planted: `add_one_req`'s token gate counts the tree's evictable tokens as in use.

Breaks `PrefillAdder.add_one_req` (managers/schedule_policy.py): `rem_total_tokens` is
`available_size() + evictable_size()` minus the pass offsets, because the allocation that follows
an admission evicts what it needs (`evict_from_tree_cache`). Here the gate reads the allocator's
free tokens alone. It only ever refuses more, so nothing overflows, leaks or double-frees: every
safety property holds. But eviction happens only when a batch is allocated: once finished requests'
cached prefixes fill the pool and nothing runs, a waiting request is refused (NO_TOKEN) on every
pass, nothing evicts, and no batch runs again, a stall only a liveness property sees (`progress`,
specs/liveness.py: a lasso).
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder, radix_cache
from model.prefill_adder import Adder
from model.radix_cache import MatchResult
from model.state import State
from model.transition import Ctx

REPLACES = "add_one_req"


def replacement(x: Ctx, s: State, ad: Adder, r: int, m: MatchResult, fresh_slot: Any) -> tuple[State, Adder]:
    _num, den = prefill_adder.ratio(x)
    hidden = den * radix_cache.counters(x, s).full_evictable  # charged to the offset for this request's gate
    s2, ad2 = prefill_adder.add_one_req.original(x, s, ad.set(rem_total_token_offset=ad.rem_total_token_offset + hidden), r, m, fresh_slot)
    return s2, ad2.set(rem_total_token_offset=ad2.rem_total_token_offset - hidden)
