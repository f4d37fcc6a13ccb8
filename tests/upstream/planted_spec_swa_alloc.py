"""Planted for the conformance test: spec v2's over-allocation takes its slots from the full pool only
(the SWA pool is not charged for the tail [A, A')), as if the draft and verify wrote no SWA KV. Every
plain config and the plain `alloc_for_spec_decode` row are blind to it. Loaded by `kvmc conform --override`."""

from __future__ import annotations

from typing import Any

from model import schedule_batch, speculative
from model.state import OOM_NONE

REPLACES = "spec_v2_decode_step"


def replacement(x: Any, s: Any, batch: tuple) -> Any:
    need = schedule_batch.spec_v2_tokens_needed(x, s, batch)
    s1 = speculative.spec_v2_decode_step.original(x, s, batch)
    # the conformance rows run the model concretely: a plain `if` on the outcome
    return s1.set(swa_available=s1.swa_available + need) if s1.oom == OOM_NONE else s1
