"""kvmc's free choices forced on SGLang's real objects (worker side).

kvmc's model leaves open what SGLang decides by timing or policy; a trace records one choice per
question (`prefill.evict.evict[3]`, `decode.evict_swa[0]`, `decode.test_retract`, `recv.arrive[1]`,
...). A replay on SGLang forces each one through the knob SGLang itself reads, never by replacing
SGLang's code:

* the eviction set: SGLang evicts least-recently-used leaves first. Right before each of SGLang's
  own `evict` calls (the tree's `evict`, and `evict_for_alloc` where the tree has its own: from
  0.5.19 `UnifiedRadixCache.evict_for_alloc` goes to `_evict` without passing through `evict`, so a
  wrapper on `evict` alone neither orders nor sees the allocation's eviction; each wrapped on the
  instance, the outermost call only: the real method runs), the nodes
  standing for the atoms the step chose are made the least recently used, in the order the trace
  chose them, and every other node more recent: `last_access_time` for RadixCache, the position in
  the full / SWA LRU lists for SWARadixCache. The atoms SGLang's evict really removed are recorded
  (`evicted`), so a set SGLang would not take is reported at its step;
* `_evict_swa` timing: up to 0.5.17 SGLang frees out-of-window SWA slots in a decode step when
  `req.decode_batch_idx % interval == 1`; `decode_batch_idx` is set before the step so that the
  condition holds exactly for the requests the trace chose (interval = W up to 0.5.10.post1, then
  page-aligned `max(page, W * SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER)`; an interval of 1 cannot
  fire and is reported as not forceable). From 0.5.18 it frees once `SGLANG_SWA_EVICTION_INTERVAL`
  tokens slid out of the window (`decode_batch_idx >= 1 and seqlen - 1 - W >= E + interval`): the
  interval is 1 (conventions.ENV), so it frees exactly when the model's `_evict_swa` moves E, and
  `decode_batch_idx` (1 or 0) says whether the trace chose it;
* forced retraction: `SGLANG_TEST_RETRACT` retracts when `forward_ct % TEST_RETRACT_INTERVAL == 0`;
  `forward_ct` is set before the step accordingly (an event: forced in both modes);
* arrivals, session turns (their new-token count) and closes are the requests harness.py sends;
* a tie among the requests `retract_decode` would retract (equal output and input lengths): SGLang's
  stable sort leaves them in running-batch order, which is admission order, and pops the last; the
  model keeps no admission order and chooses (`retract[i].tie_pass[r]`: model/schedule_batch.py::
  _retract_victims). From 0.5.18 the order comes from `ScheduleBatch._get_decode_retraction_order`,
  and its result is reordered within each tie so that the trace's choice is popped (SGLang's own
  sort runs first; nothing else moves). Before 0.5.18 the sort is inline in `retract_decode`: each
  `release_req` of a retraction is compared with the trace's choice and a different tie-break is
  not forceable (reported at its step);
* HiCache backups: the `*.write_backup` choice of a cache_finished_req / cache_unfinished_req
  call, through `write_through_threshold` for that call (1: the insert backs up; else never);
* the waiting queue's order: the model keeps it in request-slot order; SGLang's FCFS list is put
  in slot order before each pass (`order_queue`).

With `enabled=False` (the run of a trace's events on a release with the fix, where the recorded
eviction picks name nodes of another run) only the events are forced: SGLang's own LRU order and
`_evict_swa` timing decide the rest.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from .conventions import ENV, RETRACT_INTERVAL

_EVICT = re.compile(r"(?:^|\.)evict\[(\d+)\]$")
_BACKUP = re.compile(r"\[(\d+)\]\.write_backup$")
_TOMB = re.compile(r"(?:^|\.)tombstone\[(\d+)\]$")
_TIE = re.compile(r"(?:^|\.)retract\[(\d+)\]\.tie_pass\[(\d+)\]$")

# the Forcing of the step being run in this process: the retraction hooks sit on SGLang's class
_ACTIVE: Forcing | None = None


class Unforceable(Exception):
    """A recorded choice SGLang's code offers no knob for here (message: which and why)."""


class Forcing:
    def __init__(self, h: Any, enabled: bool = True) -> None:
        self.h = h
        self.enabled = enabled and h.force
        self.rank: dict[int, int] = {}  # atom -> eviction order chosen by the trace for this step
        self.tomb_rank: dict[int, int] = {}
        self.evicted: list[int] = []  # atoms SGLang's evict removed from the device in this step
        self.tombstoned: list[int] = []
        self.calls: list[tuple[list[int], list[int]]] = []  # per outermost evict call: (evicted, tombstoned)
        # whether each evict call records the atoms it removed (mapping the tree onto the model's atoms);
        # `kvmc explore` turns it off: its walks grow trees the model's atoms cannot express, and it
        # compares no state with a trace (upstream/sched/explore.py)
        self.observe = True
        tree = h.inner_tree
        self._depth = 0  # evict_for_alloc may call evict: only the outermost call orders and records
        for name in ("evict", "evict_for_alloc"):
            if hasattr(tree, name):  # instance attribute: SGLang's own method runs inside
                setattr(tree, name, self._evicting(getattr(tree, name)))
        self.interval = self._swa_interval()
        self.tie_pass: dict[tuple[int, int], bool] = {}  # (retraction, request slot) -> passed over
        self._popped: list[int] | None = None  # batch indices released by the retraction in progress
        _hook_retraction()
        self.backups: dict[int, list[bool]] = {}  # request slot -> this step's write_backup picks, in order
        if h.cfg.hicache:
            # the finish's insert is `cache_finished_req` up to 0.5.20, `insert_req` in 0.5.21
            for name in ("cache_finished_req", "insert_req", "cache_unfinished_req"):
                if hasattr(tree, name):
                    setattr(tree, name, self._backup_forced(getattr(tree, name)))

    # -- before / after a step --------------------------------------------------------------------------
    def before_step(self, picks: dict[str, Any]) -> None:
        global _ACTIVE
        self.evicted, self.tombstoned = [], []
        self.calls = []
        self.tie_pass = {}
        self.rank, self.tomb_rank = {}, {}
        h = self.h
        if h.cfg.test_retract:  # a forced retraction is one of the trace's events: forced in both modes
            retract = bool(picks.get("decode.test_retract"))
            h.sch.forward_ct = RETRACT_INTERVAL * (h.steps + 1) + (0 if retract else 1)
        if not self.enabled:
            return
        _ACTIVE = self
        self.backups = {}
        for name, v in picks.items():
            m = _TIE.search(name)
            if m:
                self.tie_pass[(int(m.group(1)), int(m.group(2)))] = bool(v)
            m = _BACKUP.search(name)
            if m:
                self.backups.setdefault(int(m.group(1)), []).append(bool(v))
            m = _EVICT.search(name)
            if m and v:
                self.rank.setdefault(int(m.group(1)), len(self.rank))
            m = _TOMB.search(name)
            if m and v:
                self.tomb_rank.setdefault(int(m.group(1)), len(self.tomb_rank))
        if h.hybrid:
            self._force_evict_swa(picks)

    def after_step(self) -> None:
        global _ACTIVE
        if _ACTIVE is self:
            _ACTIVE = None

    # -- retraction order -------------------------------------------------------------------------------
    def _victim(self, reqs: list[Any], rest: list[int], it: int) -> int:
        """The batch index the model retracts `it`-th among `rest`: the least (|output|, -|input|),
        among equal keys the highest request slot not passed over (the lowest cannot pass)."""
        def key(i: int) -> tuple[int, int]:
            return (len(reqs[i].output_ids), -len(reqs[i].origin_input_ids))

        least = min(key(i) for i in rest)
        tied = sorted((i for i in rest if key(i) == least), key=lambda i: self.h.slot_of_req(reqs[i]))
        return next((i for i in reversed(tied[1:]) if not self.tie_pass.get((it, self.h.slot_of_req(reqs[i])), False)),
                    tied[0])

    def retraction_order(self, order: list[int], reqs: list[Any]) -> list[int]:
        """SGLang's keep-order (`_get_decode_retraction_order`, popped from the end) with each tie
        broken as the trace chose; requests of different keys keep SGLang's order."""
        rest, popped = list(order), []
        for it in range(len(order)):
            v = self._victim(reqs, rest, it)
            rest.remove(v)
            popped.append(v)
        return popped[::-1]

    def releasing(self, reqs: list[Any], idx: int) -> None:
        """Before 0.5.18: the `release_req` of one retraction, checked against the trace's choice."""
        if self._popped is None:
            return
        it = len(self._popped)
        rest = [i for i in range(len(reqs)) if i not in self._popped]
        want = self._victim(reqs, rest, it)
        self._popped.append(idx)
        if idx != want:
            got, chose = self.h.slot_of_req(reqs[idx]), self.h.slot_of_req(reqs[want])
            raise Unforceable(f"retract[{it}].tie_pass: SGLang retracts request {got} (the last admitted of the tied "
                              f"requests), the walk chose request {chose}; this release sorts inside retract_decode "
                              "(no _get_decode_retraction_order before 0.5.18), so its tie-break cannot be forced")

    def order_queue(self) -> None:
        """The model's waiting queue is in request-slot order (FCFS up to renaming the slots; the
        model's parameters are per slot, so either arrival order is some slot order); SGLang's FCFS
        policy keeps `waiting_queue` in arrival and retraction order and never sorts it. Before
        each pass the queue is put in slot order (a stable sort of SGLang's own list)."""
        if not self.enabled:
            return
        h = self.h
        h.sch.waiting_queue.sort(key=h.slot_of_req)

    # -- _evict_swa ---------------------------------------------------------------------------------------
    def _swa_interval(self) -> int:
        h = self.h
        if not h.hybrid:
            return 0
        from sglang.srt.managers.schedule_batch import ScheduleBatch

        W, ps = h.p.sliding_window_size, h.ps
        src = inspect.getsource(ScheduleBatch.maybe_evict_swa)
        self.slid_rule = "SGLANG_SWA_EVICTION_INTERVAL.get()" in src
        if self.slid_rule:  # 0.5.18+: fires once SGLANG_SWA_EVICTION_INTERVAL tokens slid out (harness: 1)
            return 1
        if "EVICTION_INTERVAL_MULTIPLIER" in src:
            mult = float(ENV["SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER"])
            return (max(ps, int(W * mult)) // ps) * ps
        return W

    def _force_evict_swa(self, picks: dict[str, Any]) -> None:
        h = self.h
        for sl in h.slots:
            req = sl.req
            if req is None or not hasattr(req, "decode_batch_idx"):
                continue
            # a decode step's choice, or (mixed chunk) the one of the decode inside a prefill batch
            fire = bool(picks.get(f"decode.evict_swa[{sl.r}]") or picks.get(f"prefill.mixed.evict_swa[{sl.r}]"))
            if self.slid_rule:
                # `decode_batch_idx >= 1 and seqlen - 1 - W >= E + interval`: with interval 1 the
                # release frees exactly when the model's _evict_swa would move E; 0 holds it back
                req.decode_batch_idx = 1 if fire else 0
                continue
            if fire and self.interval <= 1:
                raise Unforceable(f"decode.evict_swa[{sl.r}]=True: SGLang frees the window when decode_batch_idx % "
                                  f"{self.interval} == 1, which never holds")
            if self.interval >= 2:
                req.decode_batch_idx = self.interval + 1 if fire else self.interval

    # -- HiCache write-through ---------------------------------------------------------------------------------
    def _backup_forced(self, orig: Any) -> Any:
        """`cache_finished_req` / `cache_unfinished_req` with the trace's `*.write_backup` choice for
        that request: SGLang backs the inserted node up (with its unbacked ancestors) once its hit
        count reaches `write_through_threshold`; the threshold is 1 for a backup and out of reach
        otherwise, for this call only. The picks of a request are taken in the order the model
        made them (stash, then the prefill's or decode's own insert)."""

        def call(req: Any, *a: Any, **k: Any) -> Any:
            queue = self.backups.get(self.h.slot_of_req(req)) if self.enabled else None
            if not queue:
                return orig(req, *a, **k)
            backup = queue.pop(0)
            if backup and k.get("chunked"):
                raise Unforceable(f"a write_backup of request {self.h.slot_of_req(req)}'s chunked insert: SGLang never "
                                  "backs up a chunked insert (_inc_hit_count returns before the hit count for chunked)")
            tree = self.h.inner_tree
            before = tree.write_through_threshold
            tree.write_through_threshold = 1 if backup else 1 << 30
            try:
                return orig(req, *a, **k)
            finally:
                tree.write_through_threshold = before

        return call

    # -- eviction ---------------------------------------------------------------------------------------------
    def _evicting(self, real: Any) -> Any:
        def wrapped(*a: Any, **k: Any) -> Any:
            if self._depth:
                return real(*a, **k)
            self._depth += 1
            try:
                return self._evict(real, *a, **k)
            finally:
                self._depth -= 1

        return wrapped

    def _evict(self, real: Any, *a: Any, **k: Any) -> Any:
        from .abstraction import atom_nodes, view

        if not self.observe and not self.enabled:
            return real(*a, **k)
        h = self.h
        v = view(h)
        before = atom_nodes(h)
        was_tomb = {atom: v.tombstone(n) for atom, n in before.items()}
        if self.enabled and (self.rank or self.tomb_rank):
            self._order(before)
        out = real(*a, **k)
        after = atom_nodes(h)
        call: tuple[list[int], list[int]] = ([], [])
        for atom, n in before.items():
            if v.value(n) is None:
                continue
            m = after.get(atom)
            if m is None or v.value(m) is None:
                call[0].append(atom)
            elif v.tombstone(m) and not was_tomb[atom]:
                call[1].append(atom)
        self.evicted += call[0]
        self.tombstoned += call[1]
        self.calls.append(call)
        return out

    def _order(self, nodes: dict[int, Any]) -> None:
        """Make the chosen atoms' nodes the least recently used, shortest first (ties in the trace's
        order). The model's eviction set holds a node it is not enough without (model/radix_cache.py:
        "whose last node was needed"); if any is, the longest is, so SGLang evicting them in this
        order takes the whole set and stops there. The trace's own order of the picks is only the
        order the model asked its questions in (a set does not say which node went last)."""
        from .abstraction import _tokens, view

        v = view(self.h)
        tree = self.h.inner_tree
        chosen = sorted((a for a in nodes if a in self.rank), key=lambda a: (len(_tokens(nodes[a])), self.rank[a]))
        tomb = sorted((a for a in nodes if a in self.tomb_rank), key=lambda a: self.tomb_rank[a])
        if v.unified:  # UnifiedRadixCache: Full evicts a heap of device leaves by last_access_time,
            # SWA walks its LRU list from the tail (the tree core's from 0.5.18)
            base = min((n.last_access_time for n in nodes.values()), default=0.0)
            for i, a in enumerate(chosen):
                nodes[a].last_access_time = base - 1_000_000.0 + i
            if v.hybrid:
                # its SWA pass deletes an evictable leaf and tombstones anything else: a node the trace
                # tombstones while a leaf below it goes must come first, while it still has that child
                rest = [t for t in tomb if t not in chosen]
                first = [t for t in rest if any(_below(nodes[c], nodes[t]) for c in chosen)]
                order = first + chosen + [t for t in rest if t not in first]
                swa = [nodes[a] for a in order if not v.tombstone(nodes[a])]
                _to_unified_lru_end(v.core.lru_lists[v.SWA], swa)
            return
        full_lru = getattr(tree, "full_lru_list", None)
        if full_lru is not None:  # SWARadixCache: doubly linked LRU lists, the tail side is the LRU
            _to_lru_end(full_lru, [nodes[a] for a in chosen])
            swa_lru = tree.swa_lru_list
            _to_lru_end(swa_lru, [nodes[a] for a in chosen + [t for t in tomb if t not in chosen]
                                  if not nodes[a].swa_tombstone])
            return
        base = min((n.last_access_time for n in nodes.values()), default=0.0)
        for i, a in enumerate(chosen):  # RadixCache: a heap of leaves by last_access_time
            nodes[a].last_access_time = base - 1_000_000.0 + i


def _below(n: Any, top: Any) -> bool:
    """SGLang node `n` lies strictly below `top` (through the parent links)."""
    p = getattr(n, "parent", None)
    while p is not None:
        if p is top:
            return True
        p = getattr(p, "parent", None)
    return False


def _to_unified_lru_end(lru: Any, nodes: list[Any]) -> None:
    """The same for UnifiedRadixCache's `UnifiedLRUList` (its links are per-component slots
    `lru_prev[pt]` / `lru_next[pt]`)."""
    pt = lru._pt
    for n in reversed(nodes):
        if n.id not in lru.cache:
            continue
        lru._remove_node(n)
        lru._add_node_after(lru.tail.lru_prev[pt], n)


def _to_lru_end(lru: Any, nodes: list[Any]) -> None:
    """Put `nodes` at the least-recently-used end of an SGLang `LRUList`, nodes[0] the LRU
    (through the list's own link helpers; only nodes already in the list move)."""
    for n in reversed(nodes):
        if n.id not in lru.cache:
            continue
        lru._remove_node(n)
        lru._add_node_after(getattr(lru.tail, lru.prv), n)


def _hook_retraction() -> None:
    """Put the retraction hooks on SGLang's ScheduleBatch once per process. Each calls SGLang's own
    method and acts only while a Forcing is running a step (`_ACTIVE`)."""
    from sglang.srt.managers.schedule_batch import ScheduleBatch as SB

    if SB.__dict__.get("_kvmc_retraction_hooked"):
        return
    SB._kvmc_retraction_hooked = True
    raw = SB.__dict__.get("_get_decode_retraction_order")
    if raw is not None:
        real_order = raw.__func__ if isinstance(raw, staticmethod) else raw

        def order(reqs: Any, *a: Any, **k: Any) -> Any:
            out = real_order(reqs, *a, **k)
            f = _ACTIVE
            return f.retraction_order(out, reqs) if f is not None else out

        SB._get_decode_retraction_order = staticmethod(order)
        return
    real_retract, real_release = SB.retract_decode, SB.release_req

    def retract(self: Any, *a: Any, **k: Any) -> Any:
        f = _ACTIVE
        if f is not None:
            f._popped = []
        try:
            return real_retract(self, *a, **k)
        finally:
            if f is not None:
                f._popped = None

    def release(self: Any, idx: int, *a: Any, **k: Any) -> Any:
        f = _ACTIVE
        if f is not None:
            f.releasing(self.reqs, idx)
        return real_release(self, idx, *a, **k)

    SB.retract_decode, SB.release_req = retract, release
