"""Planted: `PrefillAdder.__init__` subtracts the running batch's decode reservation.

Breaks PrefillAdder.__init__ (managers/schedule_policy.py): `rem_total_token_offset` starts with
the tokens the running requests may still decode (`min(max_new_tokens - len(output_ids), CLIP) *
new_token_ratio` each), so a prefill only gets what they leave. A `-=` for `+=` turns the
reservation into extra budget: `rem_total_tokens` exceeds available + evictable by the running
requests' remaining tokens, a prefill that does not fit is admitted, and `alloc_extend` fails
(`no_prefill_oom`).
"""

from __future__ import annotations

from typing import Any

from model import prefill_adder
from model.prefill_adder import Adder
from model.state import State
from model.transition import Ctx

REPLACES = "new_adder"


def replacement(x: Ctx, s: State, mixed: Any = 0) -> Adder:
    ad = prefill_adder.new_adder.original(x, s, mixed)
    return ad.set(rem_total_token_offset=-ad.rem_total_token_offset)  # planted: the sign
