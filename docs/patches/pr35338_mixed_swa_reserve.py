"""Patch of `new_adder`: SGLang PR #35338 (open, "Prevent hybrid-SWA mixed-chunk decode
over-admission"): under mixed chunk with hybrid SWA the adder starts its SWA offset at the running
batch's next-decode demand (`running_batch.new_tokens_required_next_decode()`), so a chunk cannot
take the SWA slots the mixed decode allocates right after it (docs/findings.md finding 9).

Models SGLang's managers/schedule_policy.py::PrefillAdder.__init__ (python/sglang/srt/) as the PR
changes it: the model's own `new_adder`, then the one offset the PR sets. Frame: modifies=().

    kvmc review --base v0.5.21 --head v0.5.21 --head-patch docs/patches/pr35338_mixed_swa_reserve.py \\
        --config hybrid_swa_mixed --property no_decode_oom --depth 2
"""

from __future__ import annotations

from model import prefill_adder
from model.prefill_adder import Adder, Any, Ctx, RUNNING, State
from model.schedule_batch import decode_tokens_needed

REPLACES = "new_adder"


def replacement(x: Ctx, s: State, mixed: Any = 0) -> Adder:
    ad = prefill_adder.new_adder.original(x, s, mixed)
    if not (x.cfg.mixed_chunk and x.cfg.hybrid_swa):
        return ad
    # the PR: the decode batch's page-aligned SWA demand is reserved before any prefill is admitted
    running = tuple(s.status[r] == RUNNING for r in range(x.cfg.num_reqs))
    return ad.set(rem_swa_token_offset=decode_tokens_needed(x, s, running))
