"""`kvmc explore --compare-model`: the model's step beside SGLang's, on every explored iteration
(worker side; issue 61 item 6).

Conformance for free on every state the search visits: before an explored iteration, SGLang's
objects are mapped onto the model's variables (upstream/sched/abstraction.py::to_state); the model
steps from that state with the same environment events (the `recv.*` and `decode.test_retract`
choices the walk sent), every other choice of the model enumerated (which atoms evict, when
`_evict_swa` runs, the tombstones, the retraction ties: checker/engines/explicit_graph.py::
successors); SGLang's state after the iteration must be one of those successors, compared through
the fields that mean something (driver.py::observable), with the documented warm-prefix relabelling
(`sharing_through_warm_prefix_only`, driver.py::_warm_prefix_relabelled) accepted.

An iteration whose state before or after does not map (a tree shape kvmc's atoms cannot express) is
counted `unmapped`, not compared; so is one whose PrefillAdder pass saw SGLang's waiting queue out of
request-slot order (`renamed`): the model's queue is in slot order, FCFS up to renaming the slots
(upstream/sched/forcing.py::order_queue, which the replay uses to sort SGLang's queue; explore
leaves SGLang's order alone). An iteration the model cannot take from the mapped state (it
raises, or every branch is infeasible) is a departure too: SGLang ran a step the model has no
transition for. A departure names the first differing field of the closest successor (fewest
fields apart), both states side by side, and the model's transitions that ran in that successor
and declare the field in `modifies` (model/transition.py::REGISTRY: the SGLang method each
models), so a source tree that departs from its nearest preset says which transition departs.

What it cannot see: fields the abstraction does not observe (driver.py::observable's don't-cares),
and SGLang's internals between two iterations (the comparison is per scheduler iteration, the
model's `event_loop_iteration`).
"""

from __future__ import annotations

import re
from typing import Any

# the environment's choices: what the explored walk decided, fixed in the model's step
EVENT_PICK = re.compile(r"^(recv\.(arrive|next_turn|turn_tokens|close_session)\[\d+\]|decode\.test_retract)$")
# successors enumerated per iteration at most: a larger choice tree is reported, never truncated silently
MAX_SUCCESSORS = 4096


class Comparer:
    """The model (one design, at the walk's parameter point) beside one explored SGLang run."""

    def __init__(self, cfg: Any, design: Any, params: Any) -> None:
        from model.ops import Concrete
        from model.system import System

        self.system = System(cfg, design)
        self.params = params
        self.x = self.system.ctx(Concrete(), params)
        self.checked = 0
        self.unmapped = 0
        self.too_many = 0
        self.renamed = 0
        self.departure: dict[str, Any] | None = None

    def watch(self, h: Any) -> None:
        """Note, at each PrefillAdder pass of scheduler `h`, whether SGLang's waiting queue is in slot
        order (the harness calls `forcing.order_queue` before each pass; with forcing off it sorts
        nothing)."""
        f = h.forcing
        inner = f.order_queue
        self._out_of_order = False

        def order_queue() -> None:
            slots = [h.slot_of_req(q) for q in h.sch.waiting_queue]
            if slots != sorted(slots):
                self._out_of_order = True
            inner()

        f.order_queue = order_queue

    def begin(self) -> None:
        self._out_of_order = False

    def check(self, t: int, before: Any, events: dict[str, Any], after: Any) -> dict[str, Any] | None:
        """Judge iteration `t` (1-based): None when SGLang's step is one the model allows (or could
        not be compared), else the departure (kept as the run's first)."""
        from checker.engines.explicit_graph import successors

        if before is None or after is None:
            self.unmapped += 1
            return None
        if getattr(self, "_out_of_order", False):
            self.renamed += 1
            return None

        def fixed(name: str, default: Any) -> Any:
            if EVENT_PICK.match(name):
                return events.get(name, default)
            return None

        succ: list[tuple[dict[str, Any], Any]] = []
        error = None
        try:
            for picks, s in successors(self.system, self.params, before, fixed=fixed):
                if self._matches(s, after):
                    self.checked += 1
                    return None
                succ.append((picks, s))
                if len(succ) >= MAX_SUCCESSORS:
                    self.too_many += 1
                    return None
        except Exception as e:  # noqa: BLE001 - the model cannot step from SGLang's state: a departure, with the reason
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        self.checked += 1
        d = self._departure(t, before, events, after, succ, error)
        if self.departure is None:
            self.departure = d
        return d

    def _matches(self, s: Any, real: Any) -> bool:
        from .driver import _warm_prefix_relabelled, first_difference

        return first_difference(s, real, self.x) is None or _warm_prefix_relabelled(self.x, s, real)

    def _departure(self, t: int, before: Any, events: dict[str, Any], after: Any,
                   succ: list[tuple[dict[str, Any], Any]], error: str | None) -> dict[str, Any]:
        from .driver import first_difference, side_by_side

        d: dict[str, Any] = {"step": t, "events": dict(events), "successors": len(succ)}
        asked = {k for picks, _ in succ for k in picks}
        outside = [k for k in events if k not in asked]
        if succ and outside:  # the walk sent an event the model's environment does not offer here
            d.update(field="environment event", model="not offered", sglang=", ".join(outside), transitions=[],
                     side_by_side=[], picks={})
            return d
        if not succ:
            d.update(field="(no model step)", model=error or "every branch of the model's step is infeasible",
                     sglang="ran the iteration", transitions=[], side_by_side=[])
            return d
        picks, best = min(succ, key=lambda ps: len(side_by_side(ps[1], after, self.x)))
        f, a, b = first_difference(best, after, self.x) or ("?", None, None)
        d.update(field=f, model=a, sglang=b, picks=picks, side_by_side=side_by_side(best, after, self.x),
                 transitions=self._writers(before, picks, f.split("[")[0]))
        return d

    def _writers(self, before: Any, picks: dict[str, Any], field: str) -> list[list[str]]:
        """The model's transitions that ran in the step `picks` and declare `field` in `modifies`."""
        from checker.traces.trace import DictOracle
        from model.ops import Concrete
        from model.transition import REGISTRY

        ran: list[str] = []
        x = self.system.ctx(Concrete(DictOracle(picks)), self.params)
        for name, info in REGISTRY.items():
            if field not in info.modifies:
                continue
            impl = x.overrides.get(name, info.fn)

            def rec(cx: Any, *args: Any, _n: str = name, _f: Any = impl, **kw: Any) -> Any:
                if _n not in ran:
                    ran.append(_n)
                return _f(cx, *args, **kw)

            x.overrides[name] = rec
        try:
            self.system.step(x, before)
        except Exception:  # noqa: BLE001 - the names so far are what ran
            pass
        return [[n, REGISTRY[n].models] for n in ran]

    def summary(self) -> dict[str, Any]:
        return {"checked": self.checked, "unmapped": self.unmapped, "too_many": self.too_many, "renamed": self.renamed,
                "departure": self.departure}
