"""Patch of `budget_state`: a candidate fix for docs/findings.md finding 12 (no SGLang PR): once a
request of the pass has been cut into a chunk, the pass admits nothing more (OTHER), as it does
without `--truncation-align-size`, where the cut chunk spends all of `rem_chunk_tokens`. The chunk
budget an aligned cut leaves then goes unused instead of admitting a request into memory the
chunked request's later chunks need.

Models SGLang's managers/schedule_policy.py::PrefillAdder.budget_state (python/sglang/srt/) with the
change: the model's own `budget_state`, then OTHER where a request became `new_chunked_req` in this
pass. Frame: modifies=().

    kvmc review --base current --head current --head-patch docs/patches/aligned_cut_ends_pass.py \\
        --config aligned_page1 --config paged_aligned --property no_prefill_oom --depth 4
"""

from __future__ import annotations

from model import prefill_adder
from model.prefill_adder import Adder, Any, Ctx, State

REPLACES = "budget_state"


def replacement(x: Ctx, s: State, ad: Adder) -> Any:
    st = prefill_adder.budget_state.original(x, s, ad)
    cut = x.or_(*[ad.new_chunked[r] for r in range(x.cfg.num_reqs)])
    # a spent token budget still says NO_TOKEN; only a CONTINUE after a cut becomes OTHER
    return x.ite(x.and_(cut, st == prefill_adder.CONTINUE), prefill_adder.OTHER, st)
