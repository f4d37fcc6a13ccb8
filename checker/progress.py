"""What a run is doing right now: the config, the depth, whether z3 is on a query and since when,
the solver time so far. The engines record it (a few attribute writes per query, in the process
that runs them); the command line's progress heartbeat reads it from another thread, and an
interrupted command says where it stopped. Plain data; imports nothing of kvmc."""

from __future__ import annotations

import time
from typing import Any


class Activity:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.started = time.monotonic()
        self.config: str | None = None
        self.depth: int | None = None  # the depth being checked
        self.query_since: float | None = None  # monotonic time the running query started, None between queries
        self.queries = 0  # z3 queries of this config so far
        self.solver_s = 0.0  # time inside z3 of this config so far (finished queries)
        self.phase: str | None = None  # a long step that is no query (a seed hunt, minimising)
        self.phase_since: float | None = None
        # a proof's case queue on a Ray executor (checker/engines/induction.py::_settle_remote):
        # settled / queued / in_flight / workers_alive, the config, property and k; None otherwise
        self.cases: dict[str, Any] | None = None

    def config_started(self, name: str) -> None:
        self.config, self.depth, self.query_since, self.queries, self.solver_s = name, None, None, 0, 0.0
        self.phase = self.phase_since = None

    def in_phase(self, what: str | None) -> None:
        """Enter (or, with None, leave) a named step; queries inside it still count as queries."""
        self.phase, self.phase_since = what, (time.monotonic() if what else None)

    def query_started(self) -> None:
        self.query_since = time.monotonic()
        self.queries += 1

    def query_ended(self) -> None:
        if self.query_since is not None:
            self.solver_s += time.monotonic() - self.query_since
        self.query_since = None

    def snapshot(self) -> dict[str, Any]:
        since = self.query_since
        now = time.monotonic()
        ps = self.phase_since
        return {"config": self.config, "depth": self.depth, "queries": self.queries,
                "query_s": None if since is None else round(now - since, 1),
                "phase": self.phase, "phase_s": None if ps is None else round(now - ps, 1),
                "solver_s": round(self.solver_s + (0.0 if since is None else now - since), 1),
                "elapsed_s": round(now - self.started, 1), **({"cases": dict(self.cases)} if self.cases else {})}


NOW = Activity()  # this process's
