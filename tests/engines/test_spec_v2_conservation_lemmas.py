"""Why `request_rows` and `request_lengths` read as they do on `hybrid_swa_spec_v2` (spec v2 on
hybrid SWA, chunked prefill, `current`): with them `conservation` is 1-inductive there (session 46;
before, `request_rows` said E <= P of every chunked request, which a stash cut at the branching
point can break, so the lemma was dropped and `conservation` had counterexamples to induction).

The two data files are the counterexamples to induction z3 gave for `conservation` (every lemma
but `private_chains` assumed) on the way:
* `..._chunked_e_past_p`: with request_rows' chunked conjunct weakened to E <= floor(C) only,
  a chunked request with P = 0 < E and a branching point still recorded. No stash leaves that (a
  cut sets P := branching > 0 and forgets the branching point); the kept lemma says so.
* `..._chunked_over_allocated`: a chunked request with A > C. Only a decode step over-allocates
  (C + 2a), so a chunk's extend ends at its C; `request_lengths` now says so for speculative
  configs too. From that state the next chunk's allocation leaves [C, A) counted nowhere.

The proof itself (all 13 safety properties but prompt_prefilled, k=1) takes minutes, so it is
measured, not tested: docs/proofs.md, `hybrid_swa_spec_v2`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from checker.traces import itf
from checker.traces.trace import DictOracle, first_difference
from model.designs import PRESETS
from model.ops import Concrete
from model.state import CHUNKED
from model.system import System
from specs.lemmas import LEMMAS
from specs.properties import PROPERTIES

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name, ruled_out_by", [
    ("conservation_cti_spec_v2_chunked_e_past_p", "request_rows"),
    ("conservation_cti_spec_v2_chunked_over_allocated", "request_lengths"),
])
def test_the_kept_lemmas_rule_out_conservations_counterexamples_to_induction(name: str, ruled_out_by: str) -> None:
    tr = itf.read(DATA / f"{name}.itf.json")
    assert tr.cfg.name == "hybrid_swa_spec_v2" and len(tr.steps) == 1
    system = System(tr.cfg, PRESETS["current"])
    x = system.ctx(Concrete(), tr.params)
    s0 = tr.init
    assert PROPERTIES["conservation"].holds(x, s0) is True
    assert LEMMAS[ruled_out_by].holds(x, s0) is False
    r = 0
    assert s0.status[r] == CHUNKED
    if ruled_out_by == "request_rows":
        assert s0.cache_protected_len[r] == 0 < s0.swa_evicted_seqlen[r] and s0.swa_branching_seqlen[r] > 0
    else:
        assert s0.kv_allocated_len[r] > s0.kv_committed_len[r]
    # one iteration of the concrete model with the CTI's own choices breaks conservation
    x1 = system.ctx(Concrete(DictOracle(tr.steps[0].picks)), tr.params)
    s1 = system.step(x1, s0)
    assert first_difference(tr.steps[0].state, s1) is None
    assert PROPERTIES["conservation"].holds(x, s1) is False

