"""Planted: `loading_check` releases a finished load-back's lock without the protected -> evictable move.

Breaks HiRadixCache.loading_check (mem_cache/hiradix_cache.py): when the H2D transfer of a
load-back is acknowledged, `dec_lock_ref(end_node)` releases the lock `init_load_back` took, and a
node whose `lock_ref` drops 1 -> 0 moves from `protected_size_` to `evictable_size_`. Here the
lock refs are decremented along the path in place, without the counter move: the released nodes
stay counted as protected (kvmc models the wrong counters as drift), so `evictable_size()`
under-reports, and once such a node is locked again or evicted it goes negative (`well_formed`).
"""

from __future__ import annotations

from model import hicache, radix_cache
from model.state import ROOT, State
from model.transition import Ctx

REPLACES = "loading_check"


def replacement(x: Ctx, s: State) -> State:
    if not x.cfg.hicache:
        return hicache.loading_check.original(x, s)
    t, moved = s, 0
    for r in range(x.cfg.num_reqs):  # the releases in order, each seeing the locks still held
        full, _swa = radix_cache.lock_refs(x, t)
        node = t.load_back_node[r]
        moved = moved + x.sum(
            x.ite(x.and_(radix_cache._under(x, node, a), radix_cache.on_device(x, t, a), full[a] == 1), t.node_len[a], 0)
            for a in range(x.cfg.num_atoms)
        )
        t = t.req(r, load_back_node=ROOT, load_back_swa_top=ROOT)
    s2 = hicache.loading_check.original(x, s)
    return s2.set(full_evictable_drift=s2.full_evictable_drift - moved, full_protected_drift=s2.full_protected_drift + moved)
