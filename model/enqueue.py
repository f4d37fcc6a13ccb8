"""The `max_new_tokens` a request is enqueued with: `Scheduler.init_req_max_new_tokens`
(managers/scheduler.py, #25126, v0.5.12.post1+; v0.5.18:2176-2210). v0.5.21 moves its memory term
into `BaseTokenToKVPoolAllocator.max_new_tokens_for_memory` (mem_cache/allocator/base.py:79-96),
the same formula for static pools.

With the design flag `enqueue_clip_max_new` the request's max_new_tokens becomes
max(0, min(max_new_tokens, max_req_len - |input| - 1, T - ceil_page(|input|) - page_size - 1)), so
that ceil_page(|input|) + max_new_tokens + page_size stays below T and a request the admission
gate can never pass is not enqueued with a budget it cannot get. T = max_total_num_tokens, here the
full pool (for hybrid SWA inferred: the model runner is not in the unpacked sources), and
max_req_len = min(context_len - 1, T - 1) = T - 1 (kvmc does not bound the context length). It is
a function of the request's input, so a streaming session's later turn (a new request with a
longer input) is clipped by its own input, as SGLang clips each request at its enqueue.

Where the config has an over-long prompt (`Config.over_long`), max_req_len = T - 1 as SGLang sets it
with the pool below the context length, and every release clips with `max_req_len - |input| - 1`
(0.5.10.post1-0.5.11 without the `max(0, ...)`). The over-long request is clipped with its long
prompt, before `set_finish_with_abort` shortens it: that clip can be negative up to 0.5.11.

Abstracted: `SGLANG_MAX_NEW_TOKENS_LIMIT` (unset), DCP (attn_dcp_size = 1), min_new_tokens.
"""

from __future__ import annotations

from typing import Any

from .state import State
from .transition import Ctx, transition


@transition("managers/scheduler.py::Scheduler.init_req_max_new_tokens", modifies=())
def max_new_tokens(x: Ctx, s: State, r: int) -> Any:
    """Request r's `sampling_params.max_new_tokens` after enqueue."""
    m = x.p.max_new_tokens[r]
    T, inp = x.p.full_tokens, s.origin_input_len[r]
    if x.cfg.over_long:
        if r in x.cfg.over_long:
            inp = x.p.input_len[r]  # the prompt as it arrived; the abort comes after the clip
        m = x.min(m, (T - 1) - inp - 1)  # max_req_len - |input| - 1, every release
    if not x.on("enqueue_clip_max_new"):
        return m
    memory = T - x.ceil_page(inp) - x.ps - 1  # <= (T - 1) - inp - 1 = max_req_len - |input| - 1
    return x.clamp0(x.min(m, memory))
