"""Planted: EAGLE verify (topk > 1) forgets to free the first rejected page.

Breaks `EagleVerifyInput`'s free of rejected slots (speculative/eagle_info.py): after accepting
`a` of D draft tokens the request keeps ceil(s + a) slots and must give back
[ceil(s + a), ceil(s + D)). This mutant starts the free one page later, so every verify that
rejects a whole page leaks it. It is the planted leak that shows #27228: with
`spec_topk_busy_check` off, SGLang's busy check is skipped for topk > 1 and the leak goes
unreported (`busy_check_complete` fails); with the fix on, the check fires.
"""

from __future__ import annotations

from typing import Any

from model import allocator
from model.state import State
from model.transition import Ctx

REPLACES = "free_rejected"


def replacement(x: Ctx, s: State, r: int, seq: Any, accepted: Any) -> State:
    D = x.cfg.spec.num_draft_tokens  # type: ignore[union-attr]
    end = x.ceil_page(seq + D)
    keep = x.min(x.ceil_page(seq + accepted) + x.ps, end)
    return allocator.free(x, s, end - keep, 0)
