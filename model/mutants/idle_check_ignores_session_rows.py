"""Planted: SGLang's idle-time check forgets the KV and req_to_token rows held by streaming sessions.

Breaks Scheduler.on_idle's pool checks (managers/scheduler_components/invariant_checker.py,
`_check_all_pools` / `_check_req_pool`): at idle every session slot holding KV owns tokens and a
row that neither the allocator nor the tree counts (`session_held_tokens`,
`session_held_req_count`); here they are left out, so an idle server whose finished session keeps
its context reports "memory leak detected" although nothing leaked (the #22213 / #22753 kind of
false alarm, at idle). The model's memory is untouched: only `idle_check_sound` sees it.
"""

from __future__ import annotations

from model import invariant_checker
from model.invariant_checker import IdleCheck
from model.state import State
from model.transition import Ctx

REPLACES = "self_check_during_idle"


def replacement(x: Ctx, s: State) -> IdleCheck:
    i = invariant_checker.self_check_during_idle.original(x, s)
    t = i.terms
    full_ok = t["available"] + t["evictable"] + t["protected"] == x.p.full_tokens
    req_ok = s.req_pool_available == x.p.req_pool_size
    fired = x.and_(i.idle, x.not_(x.and_(full_ok, i.swa_ok, req_ok, i.tree_ok)))
    return IdleCheck(i.idle, full_ok, i.swa_ok, req_ok, i.tree_ok, fired, t)
