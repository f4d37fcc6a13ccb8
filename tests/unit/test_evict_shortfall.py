"""Design flag `evict_shortfall` (#32016, v0.5.17): the plain allocator's `evict_from_tree_cache`
asks the tree for the shortfall `num_tokens - available_size()`; before it (0.5.13:
mem_cache/common.py:241-264, `tree_cache.evict(EvictParams(num_tokens=num_tokens))`) for the whole
`num_tokens` whenever the pool is short. Found missing by `kvmc conform`'s `alloc_for_extend` row:
the v0.5.13 preset evicted like 0.5.18.

A warm chain of two 4-token nodes in a 16-token pool (8 available); the batch asks for 12. The
shortfall is 4: one leaf goes (12 available). The whole 12: both nodes go (16 available)."""

from __future__ import annotations

import pytest

from model import radix_cache
from model.designs import preset
from model.ops import Concrete, Infeasible
from model.system import init_state
from model.transition import Ctx
from upstream.lifecycle import Life, _Enumerate, _model


@pytest.mark.parametrize("design, available", [("v0.5.13", 16), ("v0.5.18", 12), ("current", 12)])
def test_evict_from_tree_cache_asks_the_shortfall_from_0_5_17(design: str, available: int) -> None:
    d = preset(design)
    assert d.on("evict_shortfall") == (available == 12)
    sc = Life(page_size=4, swa=False, window=0, pool=16, warm=8, reqs=((5, False), (5, False)), ops=())
    cfg, p = _model(sc, d, (4, 4))
    outcomes = set()
    oracle = _Enumerate()
    while True:
        x = Ctx(Concrete(oracle), cfg, d, p)
        try:
            s = init_state(x)
            assert s.full_available == 8
            outcomes.add(radix_cache.evict_from_tree_cache(x, s, 12, "evict").full_available)
        except Infeasible:
            pass
        if not oracle.next():
            break
    assert outcomes == {available}
