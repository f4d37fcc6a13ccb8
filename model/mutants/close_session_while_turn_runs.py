"""Planted: closing a streaming session releases its slot while the session's turn is still running.

Breaks Scheduler.process_input_requests' session close (managers/scheduler.py, with
SessionAwareCache.release_session, mem_cache/session_aware_cache.py): a close that arrives while a
turn of the session is in flight must wait for that turn to finish (#21875 defers it), because the
running request has taken over the slot's req_to_token row. Releasing at once frees the row's KV
and its req_to_token slot under the running request: they are free and owned at once
(`conservation`), and the finish frees them again.
"""

from __future__ import annotations

from model import session, system
from model.state import RUNNING, State
from model.transition import Ctx

REPLACES = "recv_requests"


def replacement(x: Ctx, s: State) -> State:
    s = system.recv_requests.original(x, s)
    with x.scope("recv"):
        for i, r in enumerate(x.cfg.streaming_sessions):
            # planted: the close is not deferred while turn r is in flight
            in_flight = x.and_(s.status[r] == RUNNING, s.slot_holding[i], x.not_(s.slot_closed[i]))
            close = x.choose_bool_when(f"close_session_now[{i}]", in_flight)
            s = x.branch(close, lambda i=i: session.release_session(x, s, i), lambda: s)
    return s
