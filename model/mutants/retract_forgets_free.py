"""Planted: `retract_decode` sends a request back to the waiting queue without releasing its KV.

Breaks ScheduleBatch.retract_decode (managers/schedule_batch.py): each retracted request goes
through `release_kv_cache(req, tree_cache, is_insert=False)`, which frees its slots beyond the
tree's part, unlocks its prefix and returns its req_to_token slot, before `reset_for_retract`.
Here that release is skipped (only the lock record is dropped), so the request's row and KV leak
(`conservation`).
"""

from __future__ import annotations

from typing import Any

from model import schedule_batch
from model.state import ROOT, State
from model.transition import Ctx

REPLACES = "retract_decode"


def _forget(x: Ctx, s: State, r: int, is_insert: bool, site: str, abort: Any = False) -> State:
    return s.req(r, last_node=ROOT, swa_lock_top=ROOT)


def replacement(x: Ctx, s: State, fits: Any, forced: Any) -> State:
    saved = x.overrides.get("release_kv_cache")
    x.overrides["release_kv_cache"] = _forget
    try:
        return schedule_batch.retract_decode.original(x, s, fits, forced)
    finally:
        if saved is None:
            x.overrides.pop("release_kv_cache", None)
        else:
            x.overrides["release_kv_cache"] = saved
