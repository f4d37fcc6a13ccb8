"""Planted: `inc_lock_ref` forgets to move a node that becomes locked from evictable to protected.

Breaks RadixCache/SWARadixCache.inc_lock_ref (mem_cache/radix_cache.py, swa_radix_cache.py): when
a node's `lock_ref` goes 0 -> 1 its length must move from `evictable_size_` to `protected_size_`.
Here it stays evictable (kvmc models the wrong counters as drift), so `evictable_size()`
over-reports while the node is locked; when the lock is dropped, `dec_lock_ref` moves it out of
`protected_size_`, which goes negative (`well_formed`). The busy check cannot see it (evictable +
protected is unchanged). Full pool only: the SWA counters are moved as before.

Which nodes go 0 -> 1 is read from the recorded lockers (the caller records its lock after the
call). In a PrefillAdder admission (choice scope `admit[r]`) only the first call, the temporary
`_lock_node` lock, finds unlocked nodes; the request's own lock is taken under it (1 -> 2).
"""

from __future__ import annotations

from typing import Any

from model import radix_cache
from model.state import State
from model.transition import Ctx

REPLACES = "inc_lock_ref"


def replacement(x: Ctx, s: State, node: Any) -> tuple[State, Any]:
    s2, top = radix_cache.inc_lock_ref.original(x, s, node)
    scope = tuple(x.ops._scope)
    if any(n.startswith("admit[") for n in scope):
        seen = x.__dict__.setdefault("_inc_lock_ref_admissions", set())
        if scope in seen:  # a later lock of this admission, taken under the temporary one
            return s2, top
        seen.add(scope)
    full, _swa = radix_cache.lock_refs(x, s)
    moved = x.sum(
        x.ite(x.and_(radix_cache._under(x, node, a), radix_cache.on_device(x, s, a), full[a] == 0), s.node_len[a], 0)
        for a in range(x.cfg.num_atoms)
    )
    return s2.set(full_evictable_drift=s2.full_evictable_drift + moved,
                  full_protected_drift=s2.full_protected_drift - moved), top
