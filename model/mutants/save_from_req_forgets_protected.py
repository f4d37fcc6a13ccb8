"""Planted: `save_from_req` does not record the first turn's `cache_protected_len` in the slot.

Breaks SessionSlot.save_from_req (mem_cache/session_aware_cache.py): on the first turn the slot
takes over the request's tree lock, and with it the prefix [0, P) that the tree owns; the slot's
own KV is [P, A). Saving P as 0 makes the slot claim the tree's prefix as well: those slots are
owned twice (`conservation`), and SGLang's session-held term over-counts them (`busy_check_sound`).
"""

from __future__ import annotations

from model import session
from model.state import State
from model.transition import Ctx

REPLACES = "save_from_req"


def replacement(x: Ctx, s: State, r: int, i: int) -> State:
    first = x.not_(s.slot_holding[i])
    s2 = session.save_from_req.original(x, s, r, i)
    return s2.slot(i, slot_cache_protected_len=x.ite(first, 0, s2.slot_cache_protected_len[i]))
