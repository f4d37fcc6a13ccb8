"""Invariants of a prefill pass: facts about the PrefillAdder's pass state (model/prefill_adder.py,
`Adder`) and the scheduler state at the checkpoints inside one iteration where the model records
it (`x.ghost` after `admitted[r]` in model/system.py::get_new_batch_prefill).

Why they exist. `no_prefill_oom` says the allocation after an admission cannot fail. Its argument
runs through the whole pass: each `add_one_req` passes its token gates only if its extend fits in
`available + evictable` minus what the requests before it were charged, and the allocation then
evicts and allocates what they were admitted for. As one step query (k-induction), z3 gives up on
it on hybrid_swa_hicache (unknown after 600 s on both requests waiting, two admissions with
load-backs). Stated at each admission, it is one admission at a time: the first holds after the
first admission, each holds after the next given the one before, and the allocation's case closes
given the last (measured in docs/log/proofs.md).

How they are used (checker/engines/induction.py, `KInduction._prove_pass_invariants`). A pass invariant
is never assumed untested: for the step being asked, it is proved at its first checkpoint from the
candidates assumed before the step, and at each later one from the one before; only when every
link is unsat is it asserted at those checkpoints in the step queries that follow, as a fact the
query already implies. One that does not close is simply not used (and said so).

Like the properties, each is data: a name, a meaning, and a predicate written with the model's ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from model import radix_cache
from model.prefill_adder import Adder, swa_gate_on
from model.state import State
from model.transition import Ctx


@dataclass(frozen=True)
class PassInvariant:
    name: str
    meaning: str
    ghost: str  # the label of the checkpoints it is read at, up to its request index: "admitted"
    body: Callable[[Ctx, State, Adder], Any]


def _admitted_need(x: Ctx, ad: Adder) -> Any:
    """Tokens the allocation of the requests admitted so far takes (`alloc_for_extend`: the extend,
    page-rounded past the prefix's partial page)."""
    return x.sum(x.ite(ad.can_run[r], x.ceil_page(ad.prefix[r] + ad.extend[r]) - x.ceil_page(ad.prefix[r]), 0)
                 for r in range(x.cfg.num_reqs))


def admitted_fit(x: Ctx, s: State, ad: Adder) -> Any:
    """What the pass admitted so far fits: its pages are within each pool's free plus evictable
    tokens, within the pass offsets that the next request's gates subtract, and a req_to_token
    slot is free for each request that needs a new one."""
    R = x.cfg.num_reqs
    need = _admitted_need(x, ad)
    _num, den = x.cfg.new_token_ratio
    cnt = radix_cache.counters(x, s)
    c = [ad.rem_total_token_offset >= den * need, s.full_available + cnt.full_evictable >= need]
    if x.cfg.hybrid_swa and not x.cfg.swa_ring:  # a ring is one per row, counted by the slots below
        c.append(s.swa_available + cnt.swa_evictable >= need)
        if swa_gate_on(x):
            c.append(ad.rem_swa_token_offset >= need)
    c.append(x.sum(x.ite(x.and_(ad.can_run[r], ad.fresh_slot[r]), 1, 0) for r in range(R)) <= s.req_pool_available)
    return x.and_(*c)


PASS_INVARIANTS: dict[str, PassInvariant] = {
    p.name: p
    for p in [
        PassInvariant(
            "admitted_fit",
            "after each admission of a prefill pass, what was admitted fits in free + evictable tokens of each pool, "
            "within the pass offsets, with a req_to_token slot for each new request",
            "admitted",
            admitted_fit,
        ),
    ]
}
