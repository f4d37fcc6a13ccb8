"""Planted: `dec_lock_ref` forgets to move a node that becomes unlocked from protected to evictable.

Breaks RadixCache/SWARadixCache.dec_lock_ref (mem_cache/radix_cache.py, swa_radix_cache.py): when
a node's `lock_ref` drops 1 -> 0 its length must move from `protected_size_` to
`evictable_size_`. Here it stays counted as protected, so `evictable_size()` under-reports and
`protected_size()` over-reports (kvmc models the wrong counters as drift). Once the node is evicted
(it is unlocked, so eviction may take it) the evictable counter goes negative: `well_formed`.
The busy check cannot see it (evictable + protected is unchanged).

Which nodes go 1 -> 0 is read from the lockers: the caller still holds its lock when it calls
(its record is dropped after), so those are the nodes under `node` with exactly one locker; for
the PrefillAdder's temporary lock (released inside add_one_req, choice scope `admit[r]`), which is
not a recorded locker, those with none.
"""

from __future__ import annotations

from typing import Any

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "dec_lock_ref"


def replacement(x: Ctx, s: State, node: Any, swa_uuid_node: Any) -> State:
    K = x.cfg.num_atoms
    if K == 0:
        return s
    full, _swa = radix_cache.lock_refs(x, s)
    # the PrefillAdder's temporary lock is released inside add_one_req (choice scope `admit[r]`)
    temporary = any(name.startswith("admit[") for name in x.ops._scope)
    last = 0 if temporary else 1
    moved = x.sum(
        x.ite(x.and_(radix_cache._under(x, node, a), radix_cache.on_device(x, s, a), full[a] == last), s.node_len[a], 0)
        for a in range(K)
    )
    return s.set(full_evictable_drift=s.full_evictable_drift - moved, full_protected_drift=s.full_protected_drift + moved)
