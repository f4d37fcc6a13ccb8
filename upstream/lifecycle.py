"""Rows `RadixCache` and `SWARadixCache`: request lifecycles through SGLang's real radix tree,
allocator and ReqToTokenPool, and through kvmc's model of the tree (model/radix_cache.py).

A scenario is a warm prefix already in the tree, two requests (each may share the warm prefix),
and a sequence of operations as the scheduler performs them:

* `chunk r k`: request r prefills k more tokens. The first time: `init_next_round_input` (match,
  compared), a ReqToTokenPool slot, the prefix written to its row, the PrefillAdder's persistent
  `inc_lock_ref(last_node)`; later times: first the stash of the previous chunk
  (`cache_unfinished_req(req, chunked=True)`). Then `alloc_extend` (or `alloc` at page_size 1)
  of the k slots, written to the row.
* `stash r`: `cache_unfinished_req` (a request whose prefill is complete and keeps decoding, or a
  chunk's stash).
* `finish r`: the rest of its prefill if any, then `release_kv_cache` (`cache_finished_req`, the
  ReqToTokenPool slot freed).
* `evict n`: `tree.evict(num_tokens=n, swa_num_tokens=n)`.
* `evict_swa n` (hybrid SWA only): `tree.evict(num_tokens=0, swa_num_tokens=n)`, the SWA-only
  eviction the scheduler asks for when the SWA pool alone is short (`evict_from_tree_cache` with a
  zero FULL demand). It frees SWA from internal nodes as tombstones (their FULL KV stays), which is
  what gives a later match a Full-KV hit past its SWA-valid prefix: from 0.5.20 the match's
  `swa_branching_seqlen` (compared at each first chunk) and the stash's or finish's insert cut at it
  (`swa_branching_insert`). The row `UnifiedRadixCache/swa_branching` opens every scenario that way.
* `batch k0 k1` (rows `alloc_for_extend`, `alloc_for_extend/swa` only): both requests prefill their
  next k0 / k1 tokens in one extend batch, through SGLang's own allocation step of `alloc_for_extend`
  (`alloc_token_slots`, or `alloc_paged_token_slots_extend`: `evict_from_tree_cache` for the batch,
  then the allocator; real.extend_batch) beside the model's `schedule_batch.alloc_for_extend`. What it
  leaves out of `alloc_for_extend`: `maybe_evict_swa` (the `_evict_swa` transition, compared nowhere
  here) and `alloc_req_slots` (a request's row is taken at its first chunk, as for `chunk`).
* `decode` (rows `alloc_for_decode`, `alloc_for_decode/swa` only; the scenario ends there): one
  decode step for the requests whose prefill is done, through SGLang's own allocation step of
  `alloc_for_decode` (`alloc_token_slots(bs)`, or `alloc_paged_token_slots_decode`: evict
  `bs * page_size`, then `alloc_decode`; real.decode_batch) beside the model's
  `schedule_batch.alloc_for_decode`. Not run on SGLang's side: `maybe_evict_swa` (the model's
  `_evict_swa` choices are enumerated with the rest, so an outcome that fires none matches).
  A refusal on hybrid SWA compares the refusal only: SGLang's SWA `alloc_decode` keeps the full
  page it took (upstream/abstractions.py `failed_swa_decode_not_atomic`; the scheduler dies there).
* `spec` (rows `alloc_for_spec_decode`, `alloc_for_spec_decode/swa` only; the scenario ends there):
  a spec v2 decode step's over-allocation for the requests whose prefill is done, each from A to
  A' = max(A, ceil_page(C + 2 * max(L, D))) (kvmc's `spec_v2_alloc_len`, computed once for both
  sides; the row `spec_v2_alloc_len`, upstream/spec_alloc.py, compares the formula), through the
  allocation SGLang's `alloc_for_spec_decode` (0.5.18+; inline in
  `EagleDraftInput.prepare_for_decode` in 0.5.13) makes: `alloc_token_slots(sum(A' - A))` or
  `alloc_paged_token_slots_extend(A, A', sum(A' - A))`, beside the model's `spec_v2_decode_step`.
  On hybrid SWA the same pages come from both pools; `maybe_evict_swa`, which
  `eagle_prepare_for_decode` runs first, is not run on SGLang's side (a request's first decode after
  its prefill, `decode_batch_idx` 0, never fires it; the model's `_evict_swa` choices are enumerated).

After each operation the allocator's free sizes and the tree's evictable / protected sizes are
compared. Eviction: SGLang evicts LRU leaves; kvmc lets eviction pick any minimal set of
evictable leaves (an over-approximation, model/radix_cache.py). The harness enumerates every
eviction the model allows and checks that SGLang's outcome (its sizes) is one of them, then
continues the model from that outcome.

The model's tree is fixed in shape (atoms, model/config.py): warm chain of 1 atom plus 1 spare
(a split's tail), each request a private chain of 4 atoms (its inserts: one per stash, two on a
hybrid-SWA finish).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from model import radix_cache, schedule_batch
from model.config import Config, Spec, concrete_params
from model.designs import Design
from model.ops import Concrete, Infeasible
from model.state import CHUNKED, FINISHED, OOM_ASSERT, OOM_DECODE, OOM_NONE, OOM_PREFILL, RUNNING, WAITING
from model.transition import Ctx
from specs.properties import _conservation

from . import real
from .abstractions import LEDGER_BROKEN, WARM_EVICTED


TREES = {"radix": "RadixCache", "swa_radix": "SWARadixCache", "unified": "UnifiedRadixCache"}


@dataclass(frozen=True)
class Life:
    page_size: int
    swa: bool
    window: int
    pool: int  # full (and SWA) pool size
    warm: int
    reqs: tuple  # (input_len, shares warm)
    ops: tuple
    tree: str = ""  # radix | swa_radix | unified ("": the plain / SWA tree by `swa`)
    busy: bool = False  # also run SGLang's busy-time memory check after each operation
    batch: bool = False  # draw `batch` operations (two requests in one extend batch)
    spec: tuple = ()  # (speculative_num_steps, speculative_num_draft_tokens), topk 1: a `spec` scenario
    decode: bool = False  # a `decode` scenario
    branching: bool = False  # a scenario that opens on a tombstoned warm prefix (`branching_lives`)

    @property
    def kind(self) -> str:
        """The tree class; for a busy-check scenario the release's own default (real.default_tree)."""
        if (self.busy or self.batch or self.spec or self.decode) and not self.tree:
            return real.default_tree(self.swa)
        return self.tree or ("swa_radix" if self.swa else "radix")

    def describe(self) -> str:
        w = f", window={self.window}" if self.swa else ""
        comps = (" (FULL+SWA)" if self.swa else " (FULL)") if self.kind == "unified" else ""
        busy = "busy check on " if self.busy else ("extend batches on " if self.batch else "")
        if self.decode:
            busy = "a decode step on "
        if self.branching:
            busy = "a re-match past a tombstoned warm prefix on "
        if self.spec:
            busy = f"spec v2 decode (steps={self.spec[0]}, draft tokens={self.spec[1]}) on "
        return (f"{busy}{TREES[self.kind]}{comps}, page_size={self.page_size}{w}, pool={self.pool}, "
                f"warm={self.warm}, reqs={list(self.reqs)}, ops={list(self.ops)}")


@st.composite
def lives(draw: Any, swa: bool, tree: str = "", busy: bool = False, batch: bool = False) -> Life:
    ps = draw(st.sampled_from([1, 4, 4] if batch else [1, 4]))  # a batch's page slack needs page_size > 1
    # a batch row: always a warm prefix, the tree's one source of evictable tokens while both
    # requests are in a batch (each locks what it shares)
    warm = ps * draw(st.integers(1 if batch else 0, 3))
    reqs = []
    for _ in range(2):
        if batch:
            shares = draw(st.sampled_from([False, False, True]))
        else:
            shares = warm > 0 and draw(st.booleans())
        lo = warm + 1 if shares else 1
        reqs.append((draw(st.integers(lo, lo + 24)), shares))
    ops = [
        st.tuples(st.just("chunk"), st.integers(0, 1), st.integers(1, 12)),
        st.tuples(st.just("stash"), st.integers(0, 1)),
        st.tuples(st.just("finish"), st.integers(0, 1)),
        st.tuples(st.just("evict"), st.integers(1, 24)),
    ]
    if swa:
        ops.append(st.tuples(st.just("evict_swa"), st.integers(1, 24)))
    window = draw(st.integers(1, 12)) if swa else 0
    if not batch:
        return Life(ps, swa, window, ps * 24, warm, tuple(reqs), tuple(draw(st.lists(st.one_of(*ops), min_size=1,
                                                                                         max_size=8))), tree, busy)
    # the scenario opens with a batch of both requests, in a pool drawn around that batch's demand
    # (its page-rounded extend, less a page to two pages more): where the eviction's amount decides
    # what stays in the tree and whether the allocation fits
    k = (draw(st.integers(1, 12)), draw(st.integers(1, 12)))
    ext = sum(min(k[i], n - (warm if shares else 0)) for i, (n, shares) in enumerate(reqs))
    pool = max(ps * 4, warm + -(-ext // ps) * ps + ps * draw(st.integers(-1, 2)))
    ops.append(st.tuples(st.just("batch"), st.integers(1, 12), st.integers(1, 12)))
    rest = draw(st.lists(st.one_of(*ops), max_size=7))
    return Life(ps, swa, window, pool, warm, tuple(reqs), (("batch", *k), *rest), tree, busy, batch)


@st.composite
def branching_lives(draw: Any) -> Life:
    """A hybrid-SWA scenario that reaches an SWA branching point: request 0 prefills past the shared
    warm prefix and finishes (its chain becomes the warm node's child), an SWA-only eviction
    tombstones the warm node (SGLang's SWA LRU takes it first: request 0's nodes were touched after
    it), and request 1, which shares the warm prefix, matches a Full-KV hit of the warm length over
    an SWA-valid prefix shorter than it (0 when the window exceeds what follows the tombstone). Its
    chunks, stashes and finish then insert only up to the branching point (v0.5.20+). The drawn
    rest (chunks, stashes, evictions) may revive, re-tombstone or evict the warm node in between."""
    ps = draw(st.sampled_from([1, 4]))
    warm = ps * draw(st.integers(1, 3))
    reqs = tuple((draw(st.integers(warm + 1, warm + 16)), True) for _ in range(2))
    window = draw(st.integers(1, 12))
    opening = (("finish", 0), ("evict_swa", draw(st.integers(1, 2 * warm))))
    ops = [
        st.tuples(st.just("chunk"), st.just(1), st.integers(1, 12)),
        st.tuples(st.just("stash"), st.just(1)),
        st.tuples(st.just("evict_swa"), st.integers(1, 24)),
        st.tuples(st.just("evict"), st.integers(1, 24)),
    ]
    rest = draw(st.lists(st.one_of(*ops), max_size=5))
    return Life(ps, True, window, ps * 24, warm, reqs, (*opening, *rest, ("finish", 1)), "unified", branching=True)


@st.composite
def spec_lives(draw: Any, swa: bool = False) -> Life:
    """Both requests prefilled (`chunk`, no eviction), then one spec v2 decode step, in a pool drawn
    around the step's demand (its pages, a page short to two over) with a warm prefix that is the
    tree's one evictable node unless a request shares it. With `swa` the release's hybrid-SWA tree and
    allocator, both pools of that size (the step takes the same pages from each)."""
    ps = draw(st.sampled_from([1, 4, 4]))
    warm = ps * draw(st.integers(1, 3))
    steps, draft = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    reach = 2 * max(steps, draft)  # topk 1: get_alloc_len_per_decode() = max(L, D)
    reqs = []
    for _ in range(2):
        shares = draw(st.sampled_from([False, False, True]))
        lo = warm + 1 if shares else 1
        reqs.append((draw(st.integers(lo, lo + 12)), shares))

    def ceil(n: int) -> int:
        return -(-n // ps) * ps

    prefill = sum(ceil(n) - ceil(warm if shares else 0) for n, shares in reqs)
    step = sum(ceil(n + reach) - ceil(n) for n, _ in reqs)
    pool = max(ps * 4, warm + prefill + step + ps * draw(st.integers(-1, 2)))
    ops = (("chunk", 0, reqs[0][0]), ("chunk", 1, reqs[1][0]), ("spec",))
    return Life(ps, swa, draw(st.integers(1, 12)) if swa else 0, pool, warm, tuple(reqs), ops, spec=(steps, draft))


@st.composite
def decode_lives(draw: Any, swa: bool) -> Life:
    """Both requests prefilled (`chunk`, no eviction), then one decode step, in a pool drawn around the
    step's eviction target (bs * page_size: a page short to two over what the prefills leave), with a
    warm prefix that is the tree's one evictable node unless a request shares it."""
    ps = draw(st.sampled_from([1, 4, 4]))
    warm = ps * draw(st.integers(1, 3))
    reqs = []
    for _ in range(2):
        shares = draw(st.sampled_from([False, False, True]))
        lo = warm + 1 if shares else 1
        reqs.append((draw(st.integers(lo, lo + 12)), shares))
    prefill = sum(-(-n // ps) * ps - (warm if shares else 0) for n, shares in reqs)
    pool = max(ps * 4, warm + prefill + ps * draw(st.integers(1, 4)))
    ops = (("chunk", 0, reqs[0][0]), ("chunk", 1, reqs[1][0]), ("decode",))
    return Life(ps, swa, draw(st.integers(1, 12)) if swa else 0, pool, warm, tuple(reqs), ops, decode=True)


class _Enumerate:
    """An oracle that walks every sequence of boolean choices (depth first)."""

    def __init__(self) -> None:
        self.prefix: list[bool] = []
        self.made: list[bool] = []

    def pick_bool(self, name: str) -> bool:
        i = len(self.made)
        v = self.prefix[i] if i < len(self.prefix) else False
        self.made.append(v)
        return v

    def pick_int(self, name: str, lo: int, hi: int) -> int:
        if lo == hi:  # e.g. a spec step's accepted tokens with max_new_tokens 1
            return lo
        raise Infeasible("integer choice in an eviction")

    def next(self) -> bool:
        while self.made and self.made[-1]:
            self.made.pop()
        if not self.made:
            return False
        self.prefix = self.made[:-1] + [True]
        self.made = []
        return True


def _model(sc: Life, design: Design, warm_nodes: tuple[int, ...] = ()) -> tuple[Config, Any]:
    """The model of a lifecycle scenario; `warm_nodes` = the lengths of the nodes SGLang's tree made of
    the warm prefix (real.path_lengths), one warm atom each."""
    warm_nodes = tuple(warm_nodes) or (sc.warm,)
    spec = Spec(sc.spec[0], 1, sc.spec[1], version=2) if sc.spec else None
    cfg = Config(name="conform-life", doc="", num_reqs=2, page_size=sc.page_size, bounds={}, hybrid_swa=sc.swa,
                 chunked_prefill=True, shares_warm_prefix=tuple(r[1] for r in sc.reqs), warm_atoms=len(warm_nodes),
                 warm_spare_atoms=1, private_atoms=4, spec=spec)
    p = concrete_params(cfg, full_tokens=sc.pool, swa_tokens=sc.pool if sc.swa else 0,
                        sliding_window_size=sc.window if sc.swa else 0, chunked_prefill_size=64, max_prefill_tokens=64,
                        req_pool_size=4, input_len=tuple(r[0] for r in sc.reqs), max_new_tokens=(1, 1),
                        warm_len=warm_nodes, warm_device=(True,) * len(warm_nodes),
                        warm_host=(False,) * len(warm_nodes))
    return cfg, p


def _sizes(x: Ctx, s: Any) -> dict[str, int]:
    c = radix_cache.counters(x, s)
    out = {"full_available": s.full_available, "full_evictable": c.full_evictable, "full_protected": c.full_protected}
    if x.cfg.hybrid_swa:
        out.update(swa_available=s.swa_available, swa_evictable=c.swa_evictable, swa_protected=c.swa_protected)
    return out


# scenario runs one disagreeing scenario may take to try the model's other readings of its evictions
MAX_EVICTION_READINGS = 16


def run_life(sc: Life, design: Design) -> list[tuple[str, Any, Any]]:
    """The scenario's observations under the first reading of its evictions that agrees with SGLang.

    An eviction op is judged by sizes, and several evictions the model allows may leave the same
    sizes with other nodes gone or tombstoned (SGLang's LRU picked one of them: e.g. the warm node or
    the first node of a finished request's chain, both one token, both internal). Which one SGLang
    took shows only later (a match). So where more than one matched, the scenario is run again,
    on fresh SGLang objects, with each other choice, depth first, up to MAX_EVICTION_READINGS runs;
    the model agrees if some reading does (it over-approximates eviction, model/radix_cache.py).
    Where none does, the first reading's observations are returned."""
    first: list[tuple[str, Any, Any]] | None = None
    picks: list[int] = []
    for _ in range(MAX_EVICTION_READINGS):
        counts: list[int] = []
        obs = _run_life_once(sc, design, picks, counts)
        if first is None:
            first = obs
        if all(o[1] == o[2] for o in obs):
            return obs
        # the next reading: the deepest ambiguous eviction with a choice left, later ones reset
        picks = picks[:len(counts)] + [0] * (len(counts) - len(picks))
        while picks and picks[-1] + 1 >= counts[len(picks) - 1]:
            picks.pop()
        if not picks:
            break
        picks[-1] += 1
    return first


def _run_life_once(sc: Life, design: Design, picks: list[int], counts: list[int]) -> list[tuple[str, Any, Any]]:
    """One run of the scenario: at the k-th eviction whose sizes several model outcomes match, the
    outcome `picks[k]` (0 past the list); `counts` gets how many matched at each."""
    ps = sc.page_size
    alloc = real.allocator("swa" if sc.swa else ("token" if ps == 1 else "paged"), sc.pool, ps, sc.pool)
    pool = real.req_to_token_pool(4, max_context_len=128)
    tree = real.tree_cache(alloc, ps, sc.window if sc.swa else None, pool, sc.kind)
    warm_tokens = list(range(900, 900 + sc.warm))
    if sc.warm:
        real.insert(tree, warm_tokens, real.take(alloc, sc.warm, ps))
    reqs = []
    for i, (n, shares) in enumerate(sc.reqs):
        toks = (warm_tokens if shares else []) + list(range(2000 + 100 * i, 2000 + 100 * i + n - (sc.warm if shares else 0)))
        reqs.append(real.make_req(f"life{i}", toks, 1))
    cfg, p = _model(sc, design, real.path_lengths(tree, warm_tokens))
    x = Ctx(Concrete(), cfg, design, p)
    from model.system import init_state, match_prefix

    s = init_state(x)
    s = s.set(status=(WAITING, WAITING))
    state = ["new", "new"]  # new | prefilling | done | finished
    committed = [0, 0]
    obs: list[tuple[str, Any, Any]] = []

    stashed = [False, False]  # stashed since its last prefill progress

    def warm_gone(r: int | None) -> str:
        """WARM_EVICTED where an eviction took (part of) the shared warm prefix from the model's tree
        (and request r, if named, shares it): SGLang's tree may then share those tokens through the
        other request's re-insert of them, kvmc's cannot (`sharing_through_warm_prefix_only`)."""
        if r is not None and not sc.reqs[r][1]:
            return ""
        left = sum(s.node_len[a] for a in cfg.warm_chain() if s.node_device[a])
        return WARM_EVICTED if left < sc.warm else ""

    def dies(label: str, call: Any, model_call: Any) -> None:
        """Run SGLang's stash or release (`call`) and the model's (`model_call`, which returns the
        state after it): where either side's scheduler dies on the assertion of the
        insert-and-re-match (SGLang's AssertionError; the model's outcome `oom == OOM_ASSERT`,
        model/radix_cache.py::assertion_after_rematch), that is compared, then the sizes each side
        holds at that moment, and the scenario ends (agreement only if both die)."""
        nonlocal s
        after = model_call()
        predicted = bool(after.oom == OOM_ASSERT)
        try:
            call()
        except AssertionError as e:
            if _double_free(e):
                # SGLang's SWA allocator refuses a free that would leave more free than its size: slots
                # freed twice. kvmc has no such assertion; agreement is its ownership ledger already
                # broken on the state before the call (finding 3: the tree evicted slots the request holds)
                obs.append((f"{label}: SGLang's allocator asserts on a double free / kvmc's ledger broken before it",
                            True, not bool(_conservation(x, s))))
                raise _SchedulerDied from e
            if "new_prefix_len" not in str(e):
                raise
            obs.append((f"{label}: the scheduler dies (AssertionError: new_prefix_len <= len(new_indices))", True,
                        predicted))
            if predicted:  # what each side holds when it dies (the tree after the insert)
                obs.append((f"{label}: sizes at the scheduler's death", real.tree_sizes(tree, alloc), _sizes(x, after)))
            raise _SchedulerDied from e
        if predicted:
            obs.append((f"{label}: the scheduler dies (AssertionError: new_prefix_len <= len(new_indices))", False,
                        True))
            raise _SchedulerDied
        s = after

    def stash(r: int, label: str) -> None:
        """The scheduler stashes a request once per prefill chunk (`stash_chunked_request`, or
        `maybe_cache_unfinished_req` after its last chunk), never twice without new KV: a second
        stash is no call (UnifiedRadixCache asserts `new_prefix_len <= len(new_indices)` on one,
        0.5.18-0.5.21)."""
        if stashed[r]:
            return
        stashed[r] = True
        dies(label, lambda: real.stash(reqs[r], tree), lambda: radix_cache.cache_unfinished_req(x, s, r, f"stash[{r}]"))

    def admit(r: int, label: str) -> bool:
        """Request r's first chunk: match (compared), a ReqToTokenPool row, the prefix written to
        it, the PrefillAdder's persistent lock; or, for a request with KV, the stash of its last
        chunk. False when the ReqToTokenPool has no row."""
        nonlocal s
        req = reqs[r]
        if state[r] != "new":
            stash(r, label)
            return True
        req.init_next_round_input(tree)
        with x.scope(f"admit[{r}]"):
            s, m, _fresh = match_prefix(x, s, r)
        obs.append((f"{label}: prefix{warm_gone(r)}", real.prefix_len(req), m.prefix_len))
        if sc.swa:  # v0.5.20+: set by the match (None before that release and where it finds none)
            obs.append((f"{label}: swa_branching_seqlen{warm_gone(r)}", getattr(req, "swa_branching_seqlen", None) or 0,
                        s.swa_branching_seqlen[r]))
        if pool.alloc([req]) is None:
            return False
        pre = real.prefix_len(req)
        pool.write((real.row_of(req), slice(0, pre)), real.prefix_indices(req, tree))
        real.persistent_lock(tree, req, sc.swa)
        s, top = radix_cache.inc_lock_ref(x, s, m.last_device_node)
        s = s.req(r, last_node=m.last_device_node, swa_lock_top=top, cache_protected_len=m.prefix_len,
                  kv_committed_len=m.prefix_len, kv_allocated_len=m.prefix_len, status=CHUNKED)
        s = s.set(req_pool_available=s.req_pool_available - 1)
        real.set_protected(req, pre)
        committed[r] = pre
        state[r] = "prefilling"
        return True

    def extended(r: int, k: int, out: Any) -> None:
        """Request r got its next k slots `out` (both sides): written to its row, its lengths."""
        nonlocal s
        req = reqs[r]
        start = committed[r]
        pool.write((real.row_of(req), slice(start, start + k)), out)
        stashed[r] = False
        committed[r] = start + k
        real.set_kv_lens(req, start + k, start + k)
        real.set_fill(req, real.prefix_len(req), start + k)
        done = start + k == sc.reqs[r][0]
        s = s.req(r, kv_committed_len=start + k, kv_allocated_len=start + k, status=RUNNING if done else CHUNKED)
        if done:
            state[r] = "done"

    def chunk(r: int, k: int, label: str) -> bool:
        """Prefill k more tokens of request r (stash first if it already has KV)."""
        nonlocal s
        req = reqs[r]
        fill = sc.reqs[r][0]
        if not admit(r, label):
            return False
        start = committed[r]
        k = min(k, fill - start)
        if k <= 0:
            return True
        row = pool.req_to_token[real.row_of(req)]
        out = real.extend_slots(alloc, row, start, k, ps)
        need = x.ceil_page(start + k) - x.ceil_page(start)
        from model import allocator as ma

        ok = ma.extend_fits(x, s, need, k, 1)
        obs.append((f"{label}: alloc returned None", out is None, not ok))
        if out is None or not ok:
            return False
        s = ma.alloc(x, s, need)
        extended(r, k, out)
        return True

    def allowed(label: str, what: str, out: Any, outcomes: list[Any], refusal: int, sizes_too: bool = True) -> list[Any]:
        """The model's outcomes that are SGLang's (`out` None: refused, with the code `refusal`; and,
        with `sizes_too`, the pool and tree sizes after), the comparison recorded either way."""
        got = real.tree_sizes(tree, alloc)
        match = [o for o in outcomes if (o.oom == refusal) == (out is None) and (not sizes_too or _sizes(x, o) == got)]
        obs.append((f"{label}: SGLang's {what} (refused: {out is None}) is one the model allows", True, bool(match)))
        if not match:
            refused = sorted({bool(o.oom == refusal) for o in outcomes})
            obs.append((f"{label}: refused, sizes (model: first allowed outcome; it may refuse: {refused})",
                        (out is None, got), (bool(outcomes[0].oom == refusal), _sizes(x, outcomes[0])) if outcomes else None))
        return match

    def batch(ks: tuple[int, int], label: str) -> bool:
        """Both unfinished requests prefill their next ks[r] tokens in one extend batch: SGLang's
        allocation step of `alloc_for_extend` (real.extend_batch: its eviction, then the allocator)
        beside the model's `alloc_for_extend`, every eviction the model allows enumerated; SGLang's
        outcome (refused or not, and the sizes after) must be one of them. False ends the scenario
        (a refusal is the scheduler's "Prefill out of memory")."""
        nonlocal s
        members = [r for r in range(2) if state[r] in ("new", "prefilling")]
        for r in members:
            if not admit(r, label):
                return False
        ns = [min(ks[r], sc.reqs[r][0] - committed[r]) if r in members else 0 for r in range(2)]
        members = [r for r in members if ns[r] > 0]
        if not members:
            return True
        out = real.extend_batch(tree, [pool.req_to_token[real.row_of(reqs[r])] for r in members],
                                [committed[r] for r in members], [ns[r] for r in members], ps)
        outcomes = _model_batches(x, s, tuple(r in members for r in range(2)), tuple(committed), tuple(ns))
        match = allowed(label, "extend batch", out, outcomes, OOM_PREFILL)
        if not match:
            return False
        s = match[0]
        if out is None:
            return False
        at = 0
        for r in members:
            extended(r, ns[r], out[at:at + ns[r]])
            at += ns[r]
        s = s.set(oom=OOM_NONE)
        return True

    def decode_step(label: str) -> None:
        """One decode step for the requests whose prefill is done: SGLang's alloc_token_slots /
        alloc_paged_token_slots_decode (real.decode_batch) beside the model's `alloc_for_decode`,
        every choice enumerated; SGLang's outcome must be one of the model's."""
        members = tuple(state[r] == "done" for r in range(2))
        rs = [r for r in range(2) if members[r]]
        if not rs:
            return
        out = real.decode_batch(tree, [pool.req_to_token[real.row_of(reqs[r])] for r in rs], [committed[r] for r in rs],
                                ps)
        outcomes = _enumerated(x, lambda xe: schedule_batch.alloc_for_decode(xe, s, members))
        # a failed SWA alloc_decode keeps a full page (see above): the refusal alone is compared
        allowed(label, "decode allocation", out, outcomes, OOM_DECODE, sizes_too=out is not None or not sc.swa)

    def spec_step(label: str) -> None:
        """One spec v2 decode step's allocation for the requests whose prefill is done (A = C here):
        SGLang's alloc_token_slots / alloc_paged_token_slots_extend from A to A' (real.extend_batch)
        beside the model's `spec_v2_decode_step`, every eviction enumerated; SGLang's outcome
        (refused or not, the sizes after) must be one of them."""
        from model.allocation_sizing import spec_v2_alloc_len
        from model.speculative import spec_v2_decode_step

        members = tuple(state[r] == "done" for r in range(2))
        if not any(members):
            return
        rs = [r for r in range(2) if members[r]]
        nxt = {r: int(spec_v2_alloc_len(x, s, r)) for r in rs}
        grow = [nxt[r] - committed[r] for r in rs]
        out: Any = True
        if sum(grow) > 0:  # `if num_needed_tokens > 0`
            out = real.extend_batch(tree, [pool.req_to_token[real.row_of(reqs[r])] for r in rs],
                                    [committed[r] for r in rs], grow, ps)
        outcomes = _enumerated(x, lambda xe: spec_v2_decode_step(xe, s, members))
        allowed(label, "spec v2 decode allocation", out, outcomes, OOM_DECODE)

    # the release's finish through checkpoint_into_tree (0.5.22+) is the model's `finish_checkpoint`
    obs.append(("release_kv_cache checkpoints into the tree (finish_checkpoint)", real.finish_checkpoints(),
                design.on("finish_checkpoint")))
    last_r: list[int | None] = [None]  # the request of the last chunk / stash / finish (last_batch)
    parked: list[int] = []  # prefilling requests, the most recently chunked last

    def busy_obs(label: str) -> None:
        """SGLang's busy check after this operation (real.busy_check) next to the model's
        (model/invariant_checker.py) on the same state: last_batch = the request the operation ran,
        running_batch = the requests whose prefill is done, chunked_req = the prefilling request
        chunked most recently if the operation did not run it (parked outside every batch)."""
        lr = last_r[0]
        live = [r for r in range(2) if state[r] in ("prefilling", "done")]
        chunked_r = next((r for r in reversed(parked) if state[r] == "prefilling" and r != lr), None)
        last = [r for r in live if r == lr or (state[r] == "prefilling" and r != chunked_r)]
        running = [r for r in live if state[r] == "done" and r not in last]
        got = real.busy_check(tree, alloc, pool, ps, sc.pool, sc.pool if sc.swa else None, [reqs[r] for r in last],
                              [reqs[r] for r in running], reqs[chunked_r] if chunked_r is not None else None)
        from model.invariant_checker import self_check_during_busy
        from model.state import EXTEND_BATCH

        sm = s.set(last_batch=EXTEND_BATCH, in_last_batch=tuple(r in last for r in range(2)))
        bc = self_check_during_busy(x, sm)
        want = {"uncached": bc.terms["uncached"], "swa_uncached": bc.terms["swa_uncached"] if sc.swa else 0,
                "fired": bool(bc.fired)}
        obs.append((f"{label}: busy check (uncached, fired)", {**got, "fired": got["fired"] is not None}, want))

    for i, op in enumerate(sc.ops):
        label = f"op {i} {op}"
        if not _conservation(x, s):  # the pool is corrupt before this op: slots owned twice (finding 3)
            label += LEDGER_BROKEN
        if op[0] in ("chunk", "stash", "finish") and state[op[1]] != "finished":
            last_r[0] = op[1]
        if op[0] == "chunk" and op[1] in parked:
            parked.remove(op[1])
        if op[0] == "chunk":
            parked.append(op[1])
        try:
            if op[0] == "chunk":
                r = op[1]
                if state[r] == "finished":
                    continue
                if not chunk(r, op[2], label):
                    break  # an allocation failure ends the scenario (the scheduler would die)
            elif op[0] == "decode":
                decode_step(label)
                return obs  # SGLang's request does not decode a token here: the scenario ends
            elif op[0] == "spec":
                spec_step(label)
                return obs  # the step's verify is not run on SGLang's side: the scenario ends here
            elif op[0] == "batch":
                last_r[0] = None  # both ran: neither is parked (the busy check is not asked here)
                if not batch((op[1], op[2]), label):
                    break
            elif op[0] == "stash":
                r = op[1]
                if state[r] not in ("prefilling", "done"):
                    continue
                stash(r, label)
            elif op[0] == "finish":
                r = op[1]
                if state[r] == "finished":
                    continue
                while state[r] != "done":
                    if not chunk(r, 64, label):
                        return obs
                dies(label, lambda: real.release_kv_cache(reqs[r], tree, ps),
                     lambda: schedule_batch.release_kv_cache(x, s, r, True, f"finish[{r}]").req(r, status=FINISHED))
                state[r] = "finished"
            else:
                n = op[1]
                full = 0 if op[0] == "evict_swa" else n
                real.evict(tree, full, n if sc.swa else 0)
                got = real.tree_sizes(tree, alloc)
                outcomes = _model_evictions(x, s, full, n)
                match = [o for o in outcomes if _sizes(x, o) == got]
                obs.append((f"{label}: SGLang's eviction is one the model allows", True, bool(match)))
                if not match:
                    obs.append((f"{label}: sizes (model: first allowed outcome)", got,
                                _sizes(x, outcomes[0]) if outcomes else None))
                    return obs
                if len(match) > 1:
                    k = len(counts)
                    counts.append(len(match))
                    s = match[picks[k] if k < len(picks) else 0]
                else:
                    s = match[0]
        except _SchedulerDied:  # SGLang's scheduler died, or the model says it does (compared above)
            return obs
        except Infeasible as e:  # the scenario leaves the bounded model (e.g. more nodes than atoms)
            obs.append((f"{label}: outside the bounded model", "-", "-"))
            obs.append(("outside", str(e), str(e)))
            return obs
        obs.append((f"{label}: sizes{warm_gone(None)}", real.tree_sizes(tree, alloc), _sizes(x, s)))
        if sc.busy:
            busy_obs(label)
    return obs


def _double_free(e: AssertionError) -> bool:
    """The AssertionError is SGLang's SWA allocator refusing a free past its size
    (`SWATokenToKVPoolAllocator._free_swa_pages`: `available_size() <= size`, 0.5.22)."""
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    return bool(frames) and frames[-1].filename.endswith("allocator/swa.py") and "available_size() <=" in (frames[-1].line or "")


class _SchedulerDied(Exception):
    """SGLang's scheduler died (an AssertionError in its insert-and-re-match), or the model says it
    would: the scenario ends there."""


def _enumerated(x: Ctx, step: Any) -> list[Any]:
    """Every state `step(xe)` may reach, its boolean choices (the eviction's) enumerated."""
    out = []
    oracle = _Enumerate()
    for _ in range(4096):
        xe = Ctx(Concrete(oracle), x.cfg, x.design, x.p)
        try:
            out.append(step(xe))
        except Infeasible:
            pass
        if not oracle.next():
            break
    return out


def _model_batches(x: Ctx, s: Any, members: tuple[bool, ...], prefix: tuple[int, ...],
                   extend: tuple[int, ...]) -> list[Any]:
    """Every state the model's `alloc_for_extend` of this batch may reach; rows are already taken
    (fresh_slot False)."""
    return _enumerated(x, lambda xe: schedule_batch.alloc_for_extend(xe, s, members, prefix, extend,
                                                                     (False,) * len(members)))


def _model_evictions(x: Ctx, s: Any, full: int, swa: int) -> list[Any]:
    """Every state the model's `evict_from_tree_cache`-style eviction of (full, swa) may reach."""
    return _enumerated(x, lambda xe: radix_cache.evict(xe, s, full, swa if x.cfg.hybrid_swa else 0, "evict"))
