"""Mixed chunked prefill (`--enable-mixed-chunk`, config `mixed`): the running batch decodes inside the
prefill batch (model/system.py::mix_with_running), and the flag `mixed_decode_mem_check` (v0.5.22)
lets it do so only when `check_decode_mem` passes.

The corpus trace counterexamples/v0.5.10.post1/mixed/no_decode_oom.itf.json is finding 8 (docs/findings.md): on v0.5.10.post1 a chunk admitted beside two
decoding requests takes the page their decode needs, and the mixed step's unchecked
`prepare_for_decode` fails ("Decode out of memory"). SGLang 0.5.10.post1 raises the same error at the
same step (tests/upstream/test_sched_replay.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from checker.replay.pool import replay_trace
from checker.traces import itf
from checker.traces.trace import run_concrete
from model import prefill_adder
from model.config import Config
from model.designs import Design
from model.ops import Concrete
from model.state import OOM_DECODE, OOM_NONE, RUNNING
from model.system import System, running_bs
from specs.configs import CONFIGS

TRACE = Path(__file__).resolve().parents[2] / "counterexamples/v0.5.10.post1/mixed/no_decode_oom.itf.json"
# finding 9: mixed chunk with hybrid SWA
SWA_TRACE = Path(__file__).resolve().parents[2] / "counterexamples/v0.5.13/hybrid_swa_mixed/no_decode_oom.itf.json"


def _trace():  # noqa: ANN202
    return itf.read(TRACE)  # re-runs every step through the concrete model and compares the states


def _rerun(t, design):  # noqa: ANN001, ANN202
    states, _ = run_concrete(System(t.cfg, design), t.params, [(st.action, st.picks) for st in t.steps])
    return states


def test_the_unchecked_mixed_decode_runs_out_of_memory_on_0_5_10_post1() -> None:
    t = _trace()
    assert t.design.name == "v0.5.10.post1" and t.cfg.mixed_chunk
    before, after = t.states[-2], t.states[-1]
    assert after.oom == OOM_DECODE
    R = range(t.cfg.num_reqs)
    decoding = [r for r in R if before.status[r] == RUNNING]
    # the step's chunk was allocated, then the decode of the running requests found no page
    assert decoding and any(after.kv_allocated_len[r] > before.kv_allocated_len[r] for r in R if r not in decoding)
    assert all(after.kv_allocated_len[r] == before.kv_allocated_len[r] for r in decoding)
    o = replay_trace(t, "cpu", str(TRACE))  # kvmc's torch pool fails the same way at the same step
    assert o.status == "reproduced", o


@pytest.mark.parametrize("which", ["finding 8 (mixed)", "finding 9 (hybrid_swa_mixed)"])
def test_decode_mem_check_of_0_5_22_lets_the_running_batch_sit_out(which: str) -> None:
    """The trace's events with 0.5.22's check: the running batch sits out instead of failing."""
    t = _trace() if which.startswith("finding 8") else itf.read(SWA_TRACE)
    states = _rerun(t, t.design.with_fix("mixed_decode_mem_check", "on"))
    last, before = states[-1], states[-2]
    assert last.oom == OOM_NONE
    sat_out = [r for r in range(t.cfg.num_reqs) if before.status[r] == RUNNING and last.status[r] == RUNNING]
    assert sat_out and not any(last.in_last_batch[r] for r in sat_out)
    assert all(last.output_len[r] == before.output_len[r] for r in sat_out)  # no token this step


def test_adder_takes_the_running_batch_from_every_budget() -> None:
    """PrefillAdder(num_mixed_decode_tokens = running_bs): rem_input and rem_chunk lose it, both
    token offsets start at it (0.5.18:managers/schedule_policy.py:530-540)."""
    t = _trace()
    s = t.states[-2]
    plain = replace(t.cfg, mixed_chunk=False)
    xm, xp = (System(c, t.design).ctx(Concrete(), t.params) for c in (t.cfg, plain))
    m = running_bs(xm, s)
    assert m >= 1
    am, ap = prefill_adder.new_adder(xm, s, m), prefill_adder.new_adder(xp, s)
    den = t.cfg.new_token_ratio[1]
    assert am.rem_input_tokens == ap.rem_input_tokens - m
    assert am.rem_chunk_tokens == ap.rem_chunk_tokens - m
    assert (am.cur_rem_token_offset, am.rem_total_token_offset - ap.rem_total_token_offset) == (m, den * m)


@pytest.mark.parametrize("kw,says", [
    ({"chunked_prefill": False}, "mixed_chunk needs chunked_prefill"),
])
def test_mixed_chunk_without_chunked_prefill_is_refused(kw: dict, says: str) -> None:
    base = CONFIGS["mixed"]
    with pytest.raises(ValueError, match=says):
        Config(**{**{f: getattr(base, f) for f in base.__dataclass_fields__}, **kw})


# -- finding 9: mixed chunk with hybrid SWA (config hybrid_swa_mixed) ----------------------------------

PR35338 = Path(__file__).resolve().parents[2] / "docs/patches/pr35338_mixed_swa_reserve.py"


def test_the_mixed_decode_runs_out_of_swa_slots_not_full_ones() -> None:
    """The chunk is allocated, then the decode of the running requests needs one SWA slot each and
    finds fewer, while the full pool has room: the adder kept the decode's full tokens only."""
    from model import schedule_batch

    t = itf.read(SWA_TRACE)
    assert (t.design.name, t.cfg.name, t.prop) == ("v0.5.13", "hybrid_swa_mixed", "no_decode_oom")
    before, after = t.states[-2], t.states[-1]
    assert after.oom == OOM_DECODE
    R = range(t.cfg.num_reqs)
    decoding = tuple(before.status[r] == RUNNING for r in R)
    x = System(t.cfg, t.design).ctx(Concrete(), t.params)
    need = schedule_batch.decode_tokens_needed(x, after, decoding)
    assert after.swa_available < need <= after.full_available
    assert any(after.kv_allocated_len[r] > before.kv_allocated_len[r] for r in R if not decoding[r])
    # the adder of that step: full offsets carry the mixed tokens, the SWA offset does not
    ad = prefill_adder.new_adder(x, before, running_bs(x, before))
    assert ad.cur_rem_token_offset == running_bs(x, before) >= 1 and ad.rem_swa_token_offset == 0
    o = replay_trace(t, "cpu", str(SWA_TRACE))
    assert o.status == "reproduced", o


def test_before_the_budget_split_the_min_budget_keeps_the_slots() -> None:
    """0.5.10.post1 (no #22597) admits hybrid SWA against min(full, swa) less offsets that include the
    mixed tokens: on the trace's parameters its adder leaves the decode's SWA slots."""
    t = itf.read(SWA_TRACE)
    x = System(t.cfg, t.design.with_fix("swa_budget_split", None)).ctx(Concrete(), t.params)
    s = t.states[-2]
    with_split = System(t.cfg, t.design).ctx(Concrete(), t.params)
    m = running_bs(x, s)
    ad_old, ad_new = prefill_adder.new_adder(x, s, m), prefill_adder.new_adder(with_split, s, m)
    room_old = prefill_adder.rem_total_int(x, s, ad_old)
    room_new = prefill_adder.rem_swa_tokens(with_split, s, ad_new)
    # the split budget offers the chunk every free SWA slot; the min budget holds the mixed tokens back
    assert room_new == s.swa_available and room_old <= s.swa_available - m


def test_pr_35338_reserves_the_decode_s_swa_slots() -> None:
    """The open PR's change as a kvmc patch: on the trace's state the adder starts the SWA offset at
    the running batch's next-decode demand."""
    from model.patch import load_patch

    t = itf.read(SWA_TRACE)
    name, fn = load_patch(PR35338)
    design = Design(t.design.name + "+pr35338", t.design.fixes, t.design.mutants, {name: fn})
    x = System(t.cfg, design).ctx(Concrete(), t.params)
    s = t.states[-2]
    ad = prefill_adder.new_adder(x, s, running_bs(x, s))
    assert ad.rem_swa_token_offset == running_bs(x, s) == 2
