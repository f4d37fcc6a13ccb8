"""Planted: a session restore reports the restored prefix as the request's `cache_protected_len`.

Breaks SessionSlot.restore_to_req (mem_cache/session_aware_cache.py, via
SessionAwareCache.match_prefix): the restored request takes over the slot's row, whose first
`cache_protected_len` tokens are the tree's (the first turn's locked prefix) and the rest its own;
#22213 carries the slot's `cache_protected_len` in the MatchResult. Forgetting it leaves the
default `len(device_indices)`, the whole committed row: the request believes the tree owns tokens
it holds, so they are owned by nobody (a leak the ownership ledger shows: `conservation`) and the
finish frees and inserts from the wrong offset.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from model import session
from model.radix_cache import MatchResult
from model.state import State
from model.transition import Ctx

REPLACES = "restore_to_req"


def replacement(x: Ctx, s: State, r: int, i: int, key_len: Any) -> tuple[State, MatchResult]:
    s2, m = session.restore_to_req.original(x, s, r, i, key_len)
    return s2, dataclasses.replace(m, cache_protected_len=m.prefix_len)  # planted: not the slot's P
