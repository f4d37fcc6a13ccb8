"""Planted: `add_one_req` does not re-check the token budget after locking the matched prefix.

Breaks PrefillAdder.add_one_req (managers/schedule_policy.py): the first `rem_total_tokens` gate
counts the request's own matched prefix as evictable; `with self._lock_node(req.last_node)` takes
it out of `evictable_size()`, which is why SGLang re-checks `total_tokens >= rem_total_tokens`
under the lock ("rem_total_tokens may decrease after the lock acquisition"). Here the re-check
reads the budget as it was before the lock, so a request that only fits by evicting its own prefix
is admitted, and `alloc_extend` cannot evict the now-locked prefix: `no_prefill_oom`.
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder
from model.prefill_adder import Adder
from model.radix_cache import MatchResult
from model.state import State
from model.transition import Ctx

REPLACES = "add_one_req"


def replacement(x: Ctx, s: State, ad: Adder, r: int, m: MatchResult, fresh_slot: Any) -> tuple[State, Adder]:
    real = prefill_adder._token_gates

    def gates_before_lock(x: Ctx, s1: State, ad: Adder, total: Any, swa_budget: Any, extra: tuple = (),
                          max_new: Any = 0, swa_host: Any = 0) -> Any:
        # planted: the re-check ignores the lock
        return real(x, s if extra else s1, ad, total, swa_budget, (), max_new, swa_host)

    prefill_adder._token_gates = gates_before_lock  # type: ignore[assignment]
    try:
        return prefill_adder.add_one_req.original(x, s, ad, r, m, fresh_slot)
    finally:
        prefill_adder._token_gates = real  # type: ignore[assignment]
