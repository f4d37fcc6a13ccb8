"""`kvmc explore --search bfs`'s worker side: breadth-first search over SGLang's own scheduler
(any release 0.5.10.post1 .. 0.5.23 the harness drives), its states deduplicated through kvmc's
abstraction (issue 61 item 3). Imported only in the worker subprocess whose PYTHONPATH selects one
release (upstream/sched/explore.py::main hands it the job).

One parameter point per search (the one walk seed draws: explore.py::draw_params; `--points N`
runs a search for each of N seeds' points, one after the other in a worker or in separate
shards: explore.py::_bfs_job, each independent of the others), then, from the
scheduler's initial state, every environment event choice a walk could draw at an iteration
(explore.py::draw_events, enumerated instead of sampled: `choices`): each request not yet sent
arrives or not; each streaming session whose turn finished closes, sends its next turn with each
new-token count of the config's `turn_tokens`, or neither (turns up to `max_turns`); where the
config forces retraction the iteration retracts or not; with `aborts`, each abortable request is
aborted or not. The product of those is the finite choice set of that iteration.

SGLang's Scheduler cannot be copied (locks, closures and torch storage shared across its
components), so each successor is obtained by re-running SGLang from a fresh scheduler along the
state's event prefix, then the choice. Measured on 0.5.13 hybrid_swa (this machine): building a
scheduler 1.3 ms, one iteration about 1 ms, `os.fork` of the worker process at a state plus one
iteration 22 ms, so re-running beats forking per successor below about 20 iterations of depth;
forking is used only to shard a level over `jobs` processes. The oracle (explore.py::Oracle) is
judged on the last iteration only: the prefix's states were judged when they were found, and the
oracle's own state (progress's stall count and the state it compares with) is restored from the
node. Each re-run also checks that the prefix reaches the key it had when found
(`replay_mismatches`: SGLang's behaviour given the events is deterministic but for LRU
timestamps that tie; a mismatch is reported, never hidden).

Deduplication. Two states are merged when their key is equal: the model state SGLang's objects
map onto (abstraction.py::to_state), plus what of SGLang's own state that abstraction drops and
that can change what SGLang does next (`hidden`): the LRU order of the tree's nodes (the dense
rank of each atom's `last_access_time`, and the order of each LRU list the cache keeps:
SWARadixCache's full / SWA lists, UnifiedRadixCache's per-component lists), the order of the
waiting queue and of the running batch (FCFS admission and the retraction tie-break read them),
per request the counters the scheduler reads later (`decode_batch_idx`, which times `_evict_swa`;
`extend_batch_idx`, `is_retracted`, `retraction_count`, `to_finish`, `finished_len`, the freed
flags), whether the client aborted it, and the oracle's stall count. This is sound for what the
properties can observe under these assumptions: (a) KV slot indices are merged up to renaming (the
allocator's free-list order and the rows' physical indices are dropped: every property and every
admission or eviction decision reads sizes and ownership, not which index); (b) exact timestamps
are merged up to their order; (c) SGLang state outside the list above is assumed not to change
scheduling: statistics, metrics and time stats, `forward_ct` (the harness sets it before every
iteration from the retraction event), a node's `hit_count` (read by HiCache's write-through
threshold, which the harness pins to 1, and by the LFU policy, not used). A state the abstraction
does not map (AbstractionError: a node past an owner's chain, mixed tokens) is never merged with
any other (its key is its event prefix). Two different SGLang states that agree on all of that may
still be merged where (c) is wrong; the search is then incomplete, never wrong about a
counterexample (every one is re-run from scratch and judged again before it is reported).

A verdict is therefore `holds to depth k on the explored abstract states` (for this parameter
point, these events, this dedup): never a proof. With the state cap (`max_states`) or the budget
hit the verdict is unknown (partial): no violation among the states explored, every depth below
the one being expanded complete. A counterexample is the first violating successor in breadth-first
order: the shortest in iterations among executions that violate no property earlier (a violating
state is not expanded), reported unshrunk with its length.
"""

from __future__ import annotations

import itertools
import os
import pickle
import time
from typing import Any

from model.state import FINISHED, OOM_NONE

# upstream/sched/explore.py, which runs this search in its worker and hands itself in (`search(ex=...)`):
# its oracle, its event validity and ExploreError, without an import cycle between the two modules
EX: Any = None

# per-Req counters the scheduler reads again later (what to_state drops): missing ones read None
REQ_HIDDEN = ("decode_batch_idx", "extend_batch_idx", "is_retracted", "retraction_count", "finished_len",
              "kv_committed_freed", "kv_overallocated_freed", "swa_prefix_lock_released")


# -- the choice set ---------------------------------------------------------------------------------------
def choices(h: Any, aborts: bool = False) -> list[dict[str, Any]]:
    """Every event set explore.py::draw_events can draw on `h` now, in a fixed order (no event first)."""
    from .abstraction import status

    abortable = EX.abortable
    cfg = h.cfg
    axes: list[list[dict[str, Any]]] = []
    for sl in h.slots:
        if not sl.arrived:
            axes.append([{}, {f"recv.arrive[{sl.r}]": True}])
    for i, r in enumerate(cfg.streaming_sessions):
        sl = h.slots[r]
        if not sl.arrived or sl.closed or status(h, sl) != FINISHED:
            continue
        opts: list[dict[str, Any]] = [{}, {f"recv.close_session[{i}]": True}]
        if sl.turn + 1 < cfg.max_turns:  # turns count from 0, as draw_events
            lo, hi = cfg.turn_tokens
            opts += [{f"recv.next_turn[{r}]": True, f"recv.turn_tokens[{r}]": n} for n in range(lo, hi + 1)]
        axes.append(opts)
    if cfg.test_retract:
        axes.append([{}, {"decode.test_retract": True}])
    if aborts:
        for sl in h.slots:
            if abortable(h, sl):
                axes.append([{}, {f"recv.abort[{sl.r}]": True}])
    out = []
    for combo in itertools.product(*axes):
        picks: dict[str, Any] = {}
        for part in combo:
            picks.update(part)
        out.append(picks)
    return out


# -- the key ----------------------------------------------------------------------------------------------
def _dense_rank(vals: list[Any]) -> tuple[int, ...]:
    order = sorted(set(vals))
    return tuple(order.index(v) for v in vals)


def _lru_lists(h: Any) -> list[Any]:
    """The cache's LRU lists (objects with a head and a tail sentinel), in a fixed order."""
    from .abstraction import view

    v = view(h)
    seen: dict[int, Any] = {}
    for obj in (h.inner_tree, v.core):
        for name in sorted(getattr(obj, "__dict__", {})):
            val = getattr(obj, name, None)
            cands = list(val.values()) if isinstance(val, dict) else list(val) if isinstance(val, (list, tuple)) else [val]
            for c in cands:
                if hasattr(c, "head") and hasattr(c, "tail") and id(c) not in seen:
                    seen[id(c)] = c
    return list(seen.values())


def _lru_order(lst: Any, atom_of: dict[int, int]) -> tuple[int, ...]:
    if hasattr(lst, "_pt"):  # UnifiedLRUList: per-component links lru_next[pt]
        pt = lst._pt

        def nxt(n: Any) -> Any:
            return n.lru_next[pt]
    elif hasattr(lst, "nxt"):  # SWARadixCache's LRUList: the link's attribute name

        def nxt(n: Any) -> Any:
            return getattr(n, lst.nxt, None)
    else:
        return ()
    out, n, guard = [], nxt(lst.head), 0
    while n is not None and n is not lst.tail and guard < 100_000:
        a = atom_of.get(id(n))
        if a is not None:
            out.append(a)
        n, guard = nxt(n), guard + 1
    return tuple(out)


def hidden(h: Any) -> tuple[Any, ...]:
    """What of SGLang's own state to_state drops and that can change what it does next (module
    docstring). Raises AbstractionError where the tree does not map onto atoms."""
    from .abstraction import atom_nodes

    nodes = atom_nodes(h)
    atoms = sorted(nodes)
    atom_of = {id(nodes[a]): a for a in atoms}
    times = _dense_rank([getattr(nodes[a], "last_access_time", 0.0) for a in atoms])
    lists = tuple(_lru_order(lst, atom_of) for lst in _lru_lists(h))
    sch = h.sch
    waiting = tuple(h.slot_of_req(q) for q in sch.waiting_queue)
    running = tuple(h.slot_of_req(q) for q in sch.running_batch.reqs)
    reqs = tuple(None if sl.req is None else tuple(getattr(sl.req, f, None) for f in REQ_HIDDEN)
                 + (getattr(sl.req, "to_finish", None) is not None, sl.aborted) for sl in h.slots)
    return (tuple(atoms), times, lists, waiting, running, reqs)


def key(h: Any, oracle: Any) -> tuple[Any, Any]:
    """(to_state, the dedup key), both None where SGLang's state does not map onto the model's."""
    from .abstraction import AbstractionError

    s = EX._mapped(h)
    if s is None:
        return None, None
    try:
        hid = hidden(h)
    except (AbstractionError, KeyError, IndexError, ValueError, AttributeError):
        return None, None
    return s, (s, hid, oracle.stalled)


# -- one successor ----------------------------------------------------------------------------------------
class Node:
    """A state of the search: its event prefix, key, the oracle's state there, its choice set."""

    __slots__ = ("prefix", "key", "oracle", "choices")

    def __init__(self, prefix: list[dict[str, Any]], key: Any, oracle: tuple[int, Any], choices: list[dict[str, Any]]):
        self.prefix, self.key, self.oracle, self.choices = prefix, key, oracle, choices


def successor(cfg: Any, params: Any, node: Node, choice: dict[str, Any], oracle_args: tuple,
              aborts: bool) -> dict[str, Any]:
    """Re-run SGLang from a fresh scheduler along `node.prefix`, then `choice`; judge the last
    iteration. Returns {"violation", "abstract", "key", "terminal", "choices", "oracle",
    "mismatch", "sglang_seconds", "iterations"}. ExploreError: SGLang raised what no property names."""
    from .harness import RealScheduler

    ExploreError, quiescent = EX.ExploreError, EX.quiescent
    h = RealScheduler(cfg, params, force=False)
    h.forcing.observe = False
    oracle = EX.Oracle(*oracle_args)
    sg = 0.0
    steps = [*node.prefix, choice]
    mismatch = False
    for t, picks in enumerate(steps):
        if t == len(node.prefix):
            # the prefix must reach the state it reached when it was found (determinism of the re-run)
            oracle.stalled, oracle.last_state = node.oracle
            if node.key is not None and key(h, oracle)[1] != node.key:
                mismatch = True
        sg += EX.timed_step(h, picks, t)
        if t < len(node.prefix) and h.oom != OOM_NONE:
            raise ExploreError(f"kvmc internal error: the re-run of a search state's prefix died at step {t + 1} "
                               f"({h.oom_message}) where it did not when the state was found")
    v = oracle.judge(h, choice)
    abstract, k = key(h, oracle)
    terminal = v is not None or h.oom != OOM_NONE or quiescent(h)
    return {"violation": v, "abstract": abstract, "key": k, "terminal": terminal,
            "choices": [] if terminal else choices(h, aborts), "oracle": (oracle.stalled, oracle.last_state),
            "mismatch": mismatch, "sglang_seconds": sg, "iterations": len(steps)}


# -- the search -------------------------------------------------------------------------------------------
def _expand(cfg: Any, params: Any, tasks: list[tuple[Node, dict[str, Any]]], oracle_args: tuple, aborts: bool,
            deadline: float) -> list[dict[str, Any] | None]:
    """The successors of `tasks`, in order (None: the deadline passed before it ran)."""
    out: list[dict[str, Any] | None] = []
    for node, c in tasks:
        if time.time() >= deadline:
            out.append(None)
            continue
        out.append(successor(cfg, params, node, c, oracle_args, aborts))
    return out


def _die_with_parent() -> None:
    """A forked shard ends when the worker does (SIGTERM from explore's parent, Ctrl-C)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _expand_sharded(cfg: Any, params: Any, tasks: list[tuple[Node, dict[str, Any]]], oracle_args: tuple,
                    aborts: bool, deadline: float, jobs: int) -> list[dict[str, Any] | None]:
    """`_expand` over `jobs` forked copies of this (set-up) worker, task i to shard i % jobs; the
    results come back pickled through a pipe and are merged in task order, so the search (which
    state is kept, which counterexample is first) is the same for any `jobs`."""
    if jobs <= 1 or len(tasks) < 2 * jobs:
        return _expand(cfg, params, tasks, oracle_args, aborts, deadline)
    ExploreError = EX.ExploreError

    kids = []
    for j in range(jobs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the shard: compute, send, exit without running the worker's cleanup
            os.close(r)
            _die_with_parent()
            try:
                try:
                    res: Any = ("ok", _expand(cfg, params, tasks[j::jobs], oracle_args, aborts, deadline))
                except ExploreError as e:
                    res = ("error", str(e))
                except Exception as e:  # noqa: BLE001 - kvmc's own failure, reported by the worker
                    import traceback

                    res = ("error", f"kvmc internal error: {type(e).__name__}: {e}\n" + traceback.format_exc(limit=12))
                with os.fdopen(w, "wb") as f:
                    pickle.dump(res, f, protocol=pickle.HIGHEST_PROTOCOL)
            finally:
                os._exit(0)
        os.close(w)
        kids.append((pid, r))
    shards: list[Any] = []
    for pid, r in kids:
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        shards.append(pickle.loads(data) if data else ("error", "kvmc internal error: a search shard died"))
    for kind, res in shards:
        if kind == "error":
            raise ExploreError(res)
    out: list[dict[str, Any] | None] = [None] * len(tasks)
    for j, (_, res) in enumerate(shards):
        for i, x in zip(range(j, len(tasks), jobs), res):
            out[i] = x
    return out


def search(cfg: Any, params: Any, props: list[str], progress_bound: int, design: Any, depth: int, max_states: int,
           deadline: float, aborts: bool = False, jobs: int = 1, emit: Any = None, ex: Any = None) -> dict[str, Any]:
    """Breadth-first search to `depth` iterations. Returns {"found": {prop: (steps, evidence)},
    "levels": [...], "states", "abstract_states", "unmapped", "capped", "timed_out", "closed_at",
    "complete_depth", "successors", "iterations", "sglang_seconds", "seconds", "replay_mismatches"}.
    `ex` is upstream/sched/explore.py (the oracle and the event helpers)."""
    global EX
    from .harness import RealScheduler

    EX = ex
    Oracle = ex.Oracle
    t0 = time.perf_counter()
    active = list(props)
    oracle_args = (active, progress_bound, design)
    h = RealScheduler(cfg, params, force=False)
    h.forcing.observe = False
    o = Oracle(*oracle_args)
    s0, k0 = key(h, o)
    root = Node([], k0, (0, None), choices(h, aborts))
    seen: set[Any] = {k0} if k0 is not None else set()
    abstract: set[Any] = {s0} if s0 is not None else set()
    unmapped = 0 if k0 is not None else 1
    frontier = [root]
    found: dict[str, tuple[list[dict[str, Any]], str, int]] = {}
    levels: list[dict[str, Any]] = []
    res = {"capped": False, "timed_out": False, "closed_at": None, "complete_depth": 0, "successors": 0,
           "iterations": 0, "sglang_seconds": 0.0, "replay_mismatches": 0}
    for t in range(1, depth + 1):
        if not frontier or not active:
            break
        tl = time.perf_counter()
        tasks = [(n, c) for n in frontier for c in n.choices]
        results = _expand_sharded(cfg, params, tasks, (list(active), progress_bound, design), aborts, deadline, jobs)
        nxt: list[Node] = []
        new = dup = term = 0
        for (node, c), r in zip(tasks, results):
            if r is None:
                res["timed_out"] = True
                break
            res["successors"] += 1
            res["iterations"] += r["iterations"]
            res["sglang_seconds"] += r["sglang_seconds"]
            res["replay_mismatches"] += bool(r["mismatch"])
            v = r["violation"]
            if v is not None:
                if v[0] in active and v[0] not in found:
                    found[v[0]] = ([*node.prefix, c], v[1], t)
                continue
            if r["key"] is None:
                unmapped += 1
            elif r["key"] in seen:
                dup += 1
                continue
            if len(seen) + unmapped >= max_states:
                res["capped"] = True
                break
            if r["key"] is not None:
                seen.add(r["key"])
                abstract.add(r["abstract"])
            new += 1
            if r["terminal"]:
                term += 1
            else:
                nxt.append(Node([*node.prefix, c], r["key"], r["oracle"], r["choices"]))
        for p in found:
            if p in active:
                active.remove(p)
        lv = {"depth": t, "successors": sum(1 for r in results if r is not None), "new": new, "duplicates": dup,
              "terminal": term, "states": len(seen) + unmapped, "abstract_states": len(abstract),
              "seconds": round(time.perf_counter() - tl, 3)}
        levels.append(lv)
        if emit is not None:
            emit({"kind": "bfs_level", **lv})
        if res["capped"] or res["timed_out"]:
            break
        res["complete_depth"] = t
        frontier = nxt
        if not frontier and active:
            res["closed_at"] = t
    res.update(found=found, levels=levels, states=len(seen) + unmapped, abstract_states=len(abstract),
               unmapped=unmapped, seconds=round(time.perf_counter() - t0, 3),
               sglang_seconds=round(res["sglang_seconds"], 3))
    return res
