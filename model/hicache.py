"""HiCache load-back: `init_load_back` (mem_cache/hiradix_cache.py::HiRadixCache.init_load_back and
mem_cache/unified_radix_cache.py::UnifiedRadixCache.init_load_back, with
managers/cache_controller.py / hybrid_cache/hybrid_cache_controller.py) and `loading_check`.
HiRadixCache up to v0.5.20 (hiradix_cache.py is gone in 0.5.21), UnifiedRadixCache's in 0.5.23;
the SWA accounting is the one #27391 (fe548f36) reasons about.

Modelled: the host hit (nodes evicted from the device but backed up) is loaded back synchronously
for admission: Full device slots for every host node, SWA device slots only for the host nodes
inside best_match_node's window (the others come back as SWA tombstones); a shortfall first evicts
(the device prefix is under the PrefillAdder's temporary lock), and if it still does not fit the
load-back gives up (all-or-nothing). Loaded nodes enter the tree as evictable, then
`inc_lock_ref(best_match_node)` holds them until the transfer is acknowledged.

Abstracted: the host pool is unbounded and every host copy is valid; the H2D transfer completes
within the iteration (`loading_check` at the start of the next one releases the lock);
`load_back_threshold` and `mem_quota` are not modelled (a smaller load is never skipped); storage
(L3) prefetch is not modelled.
"""

from __future__ import annotations

from typing import Any

from . import allocator, radix_cache
from .radix_cache import MatchResult
from .state import ROOT, State
from .transition import Ctx, transition


@transition(
    "mem_cache/unified_radix_cache.py::UnifiedRadixCache.init_load_back",
    modifies=(
        "full_available", "swa_available", "node_len", "node_device", "node_swa_tombstone",
        "load_back_node", "load_back_swa_top", "needless_recompute", *radix_cache.DRIFT_FIELDS,
    ),
)
def init_load_back(x: Ctx, s: State, r: int, m: MatchResult, temporary_lock: tuple = ()) -> tuple[State, Any, Any]:
    """Load request r's host hit back to the device; returns (state, new prefix_len, new last_node).
    `temporary_lock` is the PrefillAdder's lock on the device prefix, which eviction must respect."""
    full_need = m.host_hit_length
    swa_need = m.swa_host_hit_length if x.cfg.hybrid_swa else 0
    with x.scope(f"load_back[{r}]"):
        s = radix_cache.evict(x, s, x.clamp0(full_need - s.full_available), x.clamp0(swa_need - s.swa_available), "evict",
                              temporary_lock)
    fits = full_need <= s.full_available
    if x.cfg.hybrid_swa:
        fits = x.and_(fits, swa_need <= s.swa_available)
    s = ghost_needless_recompute(x, s, full_need, swa_need, fits, temporary_lock)  # not mutated (ghost_)

    def load() -> tuple[State, Any, Any]:
        s1 = allocator.alloc_pools(x, s, full_need, swa_need)
        for a in range(x.cfg.num_atoms):
            if m.host_atoms[a] is False:
                continue
            s1 = s1.node(
                a,
                node_device=x.or_(s1.node_device[a], m.host_atoms[a]),
                node_swa_tombstone=x.ite(m.host_atoms[a], x.not_(m.host_in_window[a]), s1.node_swa_tombstone[a])
                if x.cfg.hybrid_swa
                else s1.node_swa_tombstone[a],
            )
        s1, top = radix_cache.inc_lock_ref(x, s1, m.best_match_node)
        s1 = s1.req(r, load_back_node=m.best_match_node, load_back_swa_top=top)
        return s1, m.prefix_len + full_need, m.best_match_node

    return x.branch(fits, load, lambda: (s, m.prefix_len, m.last_device_node))


def ghost_needless_recompute(x: Ctx, s: State, full_need: Any, swa_need: Any, fits: Any, locks: tuple) -> State:
    """The ghost `needless_recompute` (model/state.py GHOST_FIELDS), read on the state after the
    load-back's eviction: set when the load-back gives up (`fits` false: the host hit will be
    prefilled again) although no pool it needs is both short and out of evictable nodes
    (`radix_cache.evictable_left` with the adder's temporary lock held). Kvmc's own record, not
    SGLang's: `kvmc mutate` does not mutate a statement calling a `ghost_` function."""
    more_full, more_swa = radix_cache.evictable_left(x, s, locks)
    room = x.or_(full_need <= s.full_available, more_full)
    if x.cfg.hybrid_swa:
        room = x.and_(room, x.or_(swa_need <= s.swa_available, more_swa))
    return s.set(needless_recompute=x.or_(s.needless_recompute, x.and_(x.not_(fits), room)))


@transition(
    "mem_cache/hiradix_cache.py::HiRadixCache.loading_check",
    modifies=("load_back_node", "load_back_swa_top", *radix_cache.DRIFT_FIELDS),
)
def loading_check(x: Ctx, s: State) -> State:
    """Release the locks of load-backs whose transfer has completed (all of them, one iteration on)."""
    if not x.cfg.hicache:
        return s
    for r in range(x.cfg.num_reqs):
        s = radix_cache.dec_lock_ref(x, s, s.load_back_node[r], s.load_back_swa_top[r])
        s = s.req(r, load_back_node=ROOT, load_back_swa_top=ROOT)
    return s
