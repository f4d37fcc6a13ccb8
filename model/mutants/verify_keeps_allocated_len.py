"""Planted: EAGLE verify frees the rejected slots but leaves `kv_allocated_len` at the verify end.

Breaks EAGLEWorker.forward_batch_generation's verify step (speculative/eagle_worker.py, with
EagleVerifyInput's free of rejected slots): after accepting `a` of D draft tokens the request
keeps ceil(s + a) slots and its allocated length must come back to the committed length s + a.
Here it stays at s + D, so the request still claims the rejected slots that were just freed: they
are free and owned at once (`conservation`), and the next release would free them again.
"""

from __future__ import annotations

from model import speculative
from model.state import OOM_NONE, State
from model.transition import Ctx

REPLACES = "eagle_decode_step"


def replacement(x: Ctx, s: State, batch: tuple) -> State:
    D = x.cfg.spec.num_draft_tokens  # type: ignore[union-attr]
    seq = [s.kv_committed_len[r] for r in range(x.cfg.num_reqs)]
    s2 = speculative.eagle_decode_step.original(x, s, batch)
    for r in range(x.cfg.num_reqs):
        verified = x.and_(batch[r], s2.oom == OOM_NONE)
        s2 = s2.req(r, kv_allocated_len=x.ite(verified, seq[r] + D, s2.kv_allocated_len[r]))  # planted
    return s2
