"""Planted: the decode step after `retract_decode` still allocates for the retracted requests.

Breaks Scheduler.update_running_batch + run_batch (managers/scheduler.py): `retract_decode`
releases the victims' KV and filters them out of the running batch, and the decode step that
follows (`prepare_for_decode` / `alloc_for_decode`, or the EAGLE draft and verify) must run on the
filtered batch. Here it runs on the batch as it was before the retraction, so a retracted request,
whose row was just released, gets a decode slot that nobody owns: a leak (`conservation`).
"""

from __future__ import annotations

from typing import Any

from model import schedule_batch, speculative, system
from model.state import RUNNING, State
from model.transition import Ctx

REPLACES = "run_decode_batch"


def replacement(x: Ctx, s: State) -> State:
    before = tuple(s.status[r] == RUNNING for r in range(x.cfg.num_reqs))
    spec = x.cfg.spec
    step = "alloc_for_decode" if spec is None else "spec_v2_decode_step" if spec.version == 2 else "eagle_decode_step"
    real = {"alloc_for_decode": schedule_batch.alloc_for_decode, "eagle_decode_step": speculative.eagle_decode_step,
            "spec_v2_decode_step": speculative.spec_v2_decode_step}[step].original

    def stale(x: Ctx, s: State, batch: tuple) -> Any:
        return real(x, s, before)  # planted: the batch before retract_decode

    saved = x.overrides.get(step)
    x.overrides[step] = stale
    try:
        return system.run_decode_batch.original(x, s)
    finally:
        if saved is None:
            x.overrides.pop(step, None)
        else:
            x.overrides[step] = saved
