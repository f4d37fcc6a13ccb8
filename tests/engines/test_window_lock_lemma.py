"""Why the lemma `swa_window_locked` exists: without it `residency` is not 1-inductive on hybrid SWA.

tests/engines/data/residency_cti_hybrid_swa.itf.json is the counterexample to induction z3 gave for
`residency` on `hybrid_swa` (`current`, parameters within the config's bounds) with every other
safety property but `prompt_prefilled` (finding 1) and every lemma but `private_chains` (not
inductive there) and `swa_window_locked` assumed. Request 0's window reaches into node 1, above
its SWA lock (`swa_uuid_for_lock` at node 2, the last one), so a prefill's eviction tombstones
node 1 while the request still reads it. `inc_lock_ref` never leaves such a lock: it walks up
until W tokens are covered. The lemma says so, and is false in exactly this state.
"""

from __future__ import annotations

from pathlib import Path

from checker.traces import itf
from checker.traces.trace import DictOracle, first_difference
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from specs.lemmas import LEMMAS
from specs.properties import PROPERTIES

CTI = Path(__file__).parent / "data" / "residency_cti_hybrid_swa.itf.json"


def test_the_lemma_rules_out_residencys_counterexample_to_induction() -> None:
    tr = itf.read(CTI)
    assert tr.cfg.name == "hybrid_swa" and tr.design.name == "current" and len(tr.steps) == 1
    system = System(tr.cfg, PRESETS["current"])
    x = system.ctx(Concrete(), tr.params)
    s0 = tr.init
    # the state satisfies everything the proof assumed ...
    for name, prop in PROPERTIES.items():
        if name == "prompt_prefilled" or (prop.applies is not None and not prop.applies(tr.cfg)):
            continue
        assert prop.holds(x, s0) is True, name
    for name, lm in LEMMAS.items():
        if name not in ("private_chains", "swa_window_locked"):
            assert lm.holds(x, s0) is True, name
    # ... but not the new lemma
    assert LEMMAS["swa_window_locked"].holds(x, s0) is False
    # one iteration of the concrete model from it (the CTI's own choices) breaks residency
    x1 = system.ctx(Concrete(DictOracle(tr.steps[0].picks)), tr.params)
    s1 = system.step(x1, s0)
    assert first_difference(tr.steps[0].state, s1) is None
    assert PROPERTIES["residency"].holds(system.ctx(Concrete(), tr.params), s1) is False
    # the node the request reads and did not lock is what the eviction tombstoned
    assert not s0.node_swa_tombstone[1] and s1.node_swa_tombstone[1]
