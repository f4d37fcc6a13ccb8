"""Quality: the two properties the mutation survivors asked for (docs/mutants.md, issue 29).

`request_bounds` (a request's output within its max_new_tokens, its committed KV within its tokens,
no output or KV before it arrives, no KV while it waits) and `retract_only_when_short` (decode
retracts or aborts only when available + evictable < need at that check; the ghost field
`needless_retract`, model/schedule_batch.py::ghost_needless_retract) each kill two generated
mutants that survived every earlier property in the mutation measurement, and hold on the model
on the same instances.

Each mutant is compiled from model/'s source by `kvmc mutate`'s operators (nothing is written);
the explicit engine searches the instance to the depth where it is caught. A mutant is named here by
what it rewrites (`operators.find`), not by its id, whose line moves whenever the module above it
changes; the test ids are the ids in today's source.
"""

from __future__ import annotations

import pytest

from checker.engines.agreement import pinned
from checker.engines.explicit import Explorer
from checker.mutation.operators import Mutant, design_for, find
from checker.verdict import Verdict
from model.designs import PRESETS
from model.system import System
from specs.configs import CONFIGS
from specs.properties import PROPERTIES

# ((transition, operator, the source it rewrites), the property that kills it, config, pinned to one
# parameter point?, depth)
ROWS = [
    (("spec_v2_decode_step", "minmax", "x.min(D, enqueue.max_new_tokens(x, s1, r) - s1.output_len[r])"),
     "request_bounds", "spec_v2", True, 2),  # accepts max(D, left) drafts
    (("spec_v2_decode_step", "negate", "x.ite(batch[r], x.choose_int(f'accept[{r}]', 1, room), 0)"),
     "request_bounds", "spec_v2", True, 2),  # requests outside the batch accept
    (("check_decode_mem", "drop", "s = radix_cache.evict_from_tree_cache(x, s, need, site)"),
     "retract_only_when_short", "pressure", False, 4),  # no eviction before the check
    (("retract_decode", "drop", "s, fits = x.branch(going, lambda: check_decode_mem(x, s, kept, 'check'), lambda: (s, True))"),
     "retract_only_when_short", "pressure", True, 5),  # no re-check after a retraction
]
MUTANTS = {what: find(*what) for what, *_ in ROWS}


def _instance(config: str, pin: bool):
    cfg = CONFIGS[config]
    return pinned(cfg) if pin else cfg


def test_the_rows_name_the_new_properties() -> None:
    assert {p for _m, p, _c, _pin, _d in ROWS} == {"request_bounds", "retract_only_when_short"} <= set(PROPERTIES)


@pytest.mark.parametrize("what,prop,config,pin,depth", ROWS, ids=[MUTANTS[w].id for w, *_ in ROWS])
def test_the_new_property_kills_the_survivor(what: tuple, prop: str, config: str, pin: bool, depth: int) -> None:
    m: Mutant = MUTANTS[what]
    r = Explorer(System(_instance(config, pin), design_for(m)), [prop]).run(depth, keep_going=False).results[prop]
    assert r.verdict is Verdict.VIOLATED and r.depth == depth, f"{m.id}: {prop} {r.words()}"


@pytest.mark.parametrize("config,pin,depth", [("spec_v2", True, 2), ("pressure", False, 5)])
def test_the_new_properties_hold_on_the_model_there(config: str, pin: bool, depth: int) -> None:
    """On `current`, both hold on every reachable state of those instances and are exercised (a
    request finishes; decode memory is checked). That retractions do happen there, for the
    ghost to judge, the two retraction mutants' kills above show."""
    props = ["request_bounds", "retract_only_when_short"]
    search = Explorer(System(_instance(config, pin), PRESETS["current"]), props).run(depth, keep_going=True)
    for p in props:
        r = search.results[p]
        assert r.verdict is Verdict.HOLDS_TO_DEPTH and r.witness_depth is not None, (config, p, r.words())
