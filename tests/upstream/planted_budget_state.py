"""Planted for the conformance test: `budget_state` says OTHER only once `rem_input_tokens < 0`
(SGLang: `<= 0`), an off-by-one in one gate. Loaded by `kvmc conform --override`."""

from __future__ import annotations

from typing import Any

from model import prefill_adder as pa

REPLACES = "budget_state"


def replacement(x: Any, s: Any, ad: Any) -> Any:
    no_token = x.or_(pa.rem_total_scaled(x, s, ad) <= 0, pa.cur_rem_tokens(x, s, ad) <= 0)
    if pa.swa_gate_on(x):
        no_token = x.or_(no_token, pa.rem_swa_tokens(x, s, ad) <= 0)
    other = ad.rem_input_tokens < 0  # planted: SGLang's gate is <= 0
    if ad.rem_chunk_tokens is not None:
        other = x.or_(other, ad.rem_chunk_tokens <= 0)
    return x.ite(no_token, pa.NO_TOKEN, x.ite(other, pa.OTHER, pa.CONTINUE))
