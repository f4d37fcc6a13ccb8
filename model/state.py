"""The state of the scheduler's KV memory between two event-loop iterations.

One frozen dataclass, SGLang's names. Per-request, per-node and per-session fields are tuples
indexed by request slot, atom (see model/config.py) and session slot. A field holds a Python int
or bool in the concrete interpretation and a z3 term in the symbolic one; fields a config never
touches (the SWA pool of a plain model) stay Python constants in both, which keeps them free.

What is abstracted away: token ids (a request's tokens are identified by its slot and position),
the contents of `req_to_token` (a request's row is the range it owns, see specs/properties.py),
timing (one step is one whole iteration of `event_loop_normal`), and the overlap scheduler.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields
from typing import Any, Callable

# Req status (where the request is in the scheduler's queues)
NEW, WAITING, CHUNKED, RUNNING, FINISHED = range(5)
STATUS_NAMES = ("new", "waiting", "chunked", "running", "finished")

# last_node sentinels: the root (no tree lock) and a streaming session's virtual node
ROOT, VIRTUAL = -1, -2

# the batch the last iteration ran (`Scheduler.last_batch`)
NO_BATCH, EXTEND_BATCH, DECODE_BATCH = 0, 1, 2
BATCH_NAMES = ("none", "extend", "decode")

# what killed the scheduler (no step follows): the RuntimeError an allocation raised, or
# OOM_ASSERT, the AssertionError of the unified radix cache's insert-and-re-match
# (`assert new_prefix_len <= len(new_indices)`: UnifiedRadixCache.cache_unfinished_req 0.5.18-0.5.21,
# checkpoint_into_tree 0.5.22; model/radix_cache.py::assertion_after_rematch). The field keeps its
# SGLang-less name `oom` (traces and reports carry it); OOM_NAMES says which death it is.
OOM_NONE, OOM_PREFILL, OOM_REQ_SLOTS, OOM_DECODE, OOM_ASSERT = 0, 1, 2, 3, 4
OOM_NAMES = ("none", "Prefill out of memory", "alloc_req_slots runs out of memory", "Decode out of memory",
             "unified_radix_cache.py: assert new_prefix_len <= len(new_indices)")

REQ_FIELDS = (
    "status",  # NEW/WAITING/CHUNKED/RUNNING/FINISHED
    "origin_input_len",  # len(origin_input_ids) of the current turn
    "output_len",  # len(output_ids)
    "kv_allocated_len",  # A: row positions with KV slots (incl. speculative over-allocation)
    "kv_committed_len",  # C: positions whose KV is computed
    "cache_protected_len",  # P: prefix owned by the radix tree and locked by this request
    "swa_evicted_seqlen",  # E: SWA slots of [.., E) already released by the request
    "swa_branching_seqlen",  # the match's SWA branching point (0 = None; swa_branching_insert, v0.5.20)
    "last_node",  # atom the persistent lock holds (ROOT = none, VIRTUAL = session node)
    "swa_lock_top",  # atom carrying swa_uuid_for_lock (ROOT = None: unlock to the root)
    "in_last_batch",  # member of the extend batch the last iteration ran
    "load_back_node",  # atom locked by an in-flight init_load_back (ROOT = none)
    "load_back_swa_top",  # its swa_uuid_for_lock
    "turn",  # session turn (0 for non-session requests)
    # a finished Req of this request slot is still in running_batch.reqs: a decode finished it and
    # `filter_batch` (the next update_running_batch; from v0.5.23 every get_next_batch_to_run) has not
    # run. It counts in running_bs (get_num_allocatable_reqs) and its leaving clears batch_is_full; for a
    # streaming session it is the previous turn's Req while the next turn may already be here
    "unfiltered",
)
NODE_FIELDS = (
    "node_len",  # tokens of the atom; 0 = the node does not exist
    "node_device",  # full (and SWA, unless tombstone) KV is on the device
    "node_host",  # a host (HiCache) copy exists
    "node_swa_tombstone",  # swa_tombstone: SWA slots freed, full KV kept
)
SLOT_FIELDS = (
    "slot_holding",  # is_holding_kv(): req_pool_idx is not None
    "slot_kv_allocated_len",
    "slot_kv_committed_len",
    "slot_cache_protected_len",  # from the first turn: the tree lock the session keeps
    "slot_swa_evicted_seqlen",
    "slot_last_node",
    "slot_swa_lock_top",
    "slot_is_active",  # #22213's flag
    "slot_closed",
    # `Session.req_nodes` already holds the turn's Req: a save of it (a retraction's or a finish's)
    # went through `finish_req` (v0.5.11+); the turn's next save detaches it (`finish_req_detach`)
    "slot_turn_saved",
    # the turn's Req has `session = None` (finish_req found it as its own previous node): it matches,
    # is cached and finishes through the radix tree with a row of its own; the slot keeps its record
    "slot_detached",
)
POOL_FIELDS = (
    "full_available",  # full allocator available_size()
    "swa_available",  # SWA allocator available_size() (hybrid SWA)
    "req_pool_available",  # len(req_to_token_pool.free_slots)
    # SGLang's evictable/protected counters minus the true sizes (0 unless a planted bug makes the
    # bookkeeping wrong; the true sizes follow from the lockers, see model/radix_cache.py)
    "full_evictable_drift",
    "full_protected_drift",
    "swa_evictable_drift",
    "swa_protected_drift",
)
# batch_is_full: running_batch.batch_is_full, which a NO_TOKEN verdict or a full row budget sets and
# only a leaving request (or, from v0.5.22, an empty running batch) clears; while set, a pass with no
# chunked request skips the PrefillAdder (model/system.py::get_new_batch_prefill)
SCHED_FIELDS = ("last_batch", "oom", "batch_is_full", "needless_retract", "needless_recompute")
BOOL_FIELDS = frozenset(
    {"node_device", "node_host", "node_swa_tombstone", "in_last_batch", "slot_holding", "slot_is_active", "slot_closed",
     "slot_turn_saved", "slot_detached", "unfiltered", "batch_is_full", "needless_retract", "needless_recompute"}
)
# Ghost fields: kvmc's own record of what a step did, for a property that must see the step and not
# only the state (specs/properties.py `retract_only_when_short`, `recompute_only_when_short`). No SGLang object holds them, so
# the refinement checks against the torch pool and SGLang's scheduler do not compare them.
GHOST_FIELDS = frozenset({"needless_retract", "needless_recompute"})


@dataclass(frozen=True, slots=True)
class _StateFields:
    """`State`'s fields and methods (the frozen dataclass); `State` adds only its remembered hash."""

    full_available: Any
    swa_available: Any
    req_pool_available: Any
    full_evictable_drift: Any
    full_protected_drift: Any
    swa_evictable_drift: Any
    swa_protected_drift: Any
    node_len: tuple
    node_device: tuple
    node_host: tuple
    node_swa_tombstone: tuple
    status: tuple
    origin_input_len: tuple
    output_len: tuple
    kv_allocated_len: tuple
    kv_committed_len: tuple
    cache_protected_len: tuple
    swa_evicted_seqlen: tuple
    swa_branching_seqlen: tuple
    last_node: tuple
    swa_lock_top: tuple
    in_last_batch: tuple
    load_back_node: tuple
    load_back_swa_top: tuple
    turn: tuple
    unfiltered: tuple
    slot_holding: tuple
    slot_kv_allocated_len: tuple
    slot_kv_committed_len: tuple
    slot_cache_protected_len: tuple
    slot_swa_evicted_seqlen: tuple
    slot_last_node: tuple
    slot_swa_lock_top: tuple
    slot_is_active: tuple
    slot_closed: tuple
    slot_turn_saved: tuple
    slot_detached: tuple
    last_batch: Any
    oom: Any
    batch_is_full: Any
    # ghost (GHOST_FIELDS): the last iteration's retract_decode retracted or aborted a request while
    # free + evictable tokens covered the decode step (SGLANG_TEST_RETRACT's forced first retraction apart)
    needless_retract: Any
    # ghost: the last iteration's init_load_back gave a host hit up (it will be recomputed) although
    # every pool it needed had room after the eviction, or could have had (evictable nodes were left)
    needless_recompute: Any

    # -- functional updates ---------------------------------------------------------------------
    def set(self, **kw: Any) -> "State":
        return _replace(self, kw)

    def _set_at(self, group: tuple[str, ...], i: int, kw: dict[str, Any]) -> "State":
        """Fields `kw` of entry i; a value that is the very object already there changes nothing
        (identity, never `==`: on z3 terms that builds a formula), and with no change the state
        itself is returned (the eviction rewrites every node, most of them unchanged)."""
        upd = {}
        for k, v in kw.items():
            if k not in group:
                raise AttributeError(f"{k!r} is not one of {group}")
            t = getattr(self, k)
            if t[i] is not v:
                upd[k] = t[:i] + (v,) + t[i + 1 :]
        return _replace(self, upd) if upd else self

    def req(self, r: int, **kw: Any) -> "State":
        """Update fields of request slot r."""
        return self._set_at(REQ_FIELDS, r, kw)

    def node(self, a: int, **kw: Any) -> "State":
        """Update fields of atom a."""
        return self._set_at(NODE_FIELDS, a, kw)

    def slot(self, i: int, **kw: Any) -> "State":
        """Update fields of session slot i."""
        return self._set_at(SLOT_FIELDS, i, kw)

    def merge(self, ops: Any, cond: Any, other: "State") -> "State":
        """`ops.ite(cond, self, other)` field by field; untouched fields are shared, not rebuilt."""
        upd = {}
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a is b:
                continue
            if isinstance(a, tuple):
                upd[f.name] = tuple(x if x is y else ops.ite(cond, x, y) for x, y in zip(a, b))
            else:
                upd[f.name] = ops.ite(cond, a, b)
        return _replace(self, upd) if upd else self

    def map_terms(self, fn: Callable[[str, Any], Any]) -> "State":
        """Every value through `fn(name, value)`, `name` being `field` or `field[i]`."""
        upd: dict[str, Any] = {}
        for f in FIELD_NAMES:
            v = getattr(self, f)
            upd[f] = tuple(fn(f"{f}[{i}]", e) for i, e in enumerate(v)) if isinstance(v, tuple) else fn(f, v)
        return _replace(self, upd)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class State(_StateFields):
    """The state (fields: `_StateFields`). Its hash is the dataclass's, the hash of the tuple of its
    fields, computed once per object: the explicit engines hash a state at every dict lookup (visited
    sets, memo keys holding it), and a state is immutable, so its hash never changes. Equality,
    `fields`, `replace` and pickling are the dataclass's (the remembered hash is not pickled: a hash of
    a str differs between processes)."""

    __slots__ = ("_hash",)

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            h = hash(_ALL_FIELDS(self))
            object.__setattr__(self, "_hash", h)
            return h


FIELD_NAMES = tuple(f.name for f in fields(State))
_ALL_FIELDS = operator.attrgetter(*FIELD_NAMES)
_FIELD_INDEX = {f: i for i, f in enumerate(FIELD_NAMES)}


def _replace(s: State, upd: dict[str, Any]) -> State:
    """`dataclasses.replace(s, **upd)`, without its per-call field introspection (states are
    updated on every transition)."""
    vals = list(_ALL_FIELDS(s))
    for k, v in upd.items():
        i = _FIELD_INDEX.get(k)
        if i is None:
            raise TypeError(f"State has no field {k!r}")
        vals[i] = v
    return type(s)(*vals)
