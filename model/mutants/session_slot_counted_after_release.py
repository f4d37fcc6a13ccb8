"""Planted: a closed streaming session's slot is still counted as holding KV.

Breaks SessionAwareCache.release_session (mem_cache/session_aware_cache.py): closing a session
drops its tree lock, frees the row's KV and returns its req_to_token slot, and the slot must stop
reporting `is_holding_kv()`. Here the flag stays set, so the freed tokens are still counted as
session-held: the ledger (and SGLang's busy check, whose session term reads the same flag) counts
them twice (`conservation`).
"""

from __future__ import annotations

from model import session
from model.state import State
from model.transition import Ctx

REPLACES = "release_session"


def replacement(x: Ctx, s: State, i: int) -> State:
    s = session.release_session.original(x, s, i)
    return s.slot(i, slot_holding=True)
