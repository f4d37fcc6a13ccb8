"""k-induction over the model, with named lemmas (pySMT's `get_k_induction`, mypyvy's
per-invariant checks, Houdini's pruning), the `--engine induction` of `kvmc check`.

Parameters. Both cases run with the pool sizes, the window, the chunk size, every prompt and
output length and the warm prefix fully symbolic: unbounded integers constrained only by the
model's well-formedness of parameters (`System.params_ok`: positive pools, lengths >= 1, page
multiples). Only the config's *shape* is fixed (number of request slots, tree atoms, page size,
which features are on). So `proved` covers every pool size and length, for that shape.

Base case: bounded model checking from the initial state to depth k (checker/engines/bmc.py, run with the
same unbounded parameters); it also checks every lemma, and a lemma that fails there is never
assumed. Step case: from *any* k consecutive states (not only reachable ones) in which the
candidate invariants hold, with enabled transitions between them, they all hold in the next state.
The candidates are the open properties and the lemmas (specs/lemmas.py); a candidate that fails
the step is dropped from both sides and the query is repeated (Houdini), so what remains is a
jointly k-inductive set: with the base case, each of its members holds at every depth. k goes
1, 2, ... up to min(depth, MAX_K), one more per BMC depth; each step-case query has a time limit
(`--timeout`, default STEP_TIMEOUT_MS) after which the answer is `unknown` and nothing is proved.

Verdict `proved (k=N)`: the property holds at every depth *of the model* under that shape. That
is a statement about the model, not about SGLang itself.

When the step case fails for a property, the failing state sequence is a counterexample to
induction (CTI): it satisfies everything assumed but is probably unreachable. It is kept as a
trace (written as ITF by `write_ctis`, `<out>/<design>/<config>/<property>.cti.itf.json`) with the names
of the invariants that fail after the step and the known lemmas that are false in it (a lemma
that would exclude it had it been inductive), so a person can add or repair a lemma.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import z3

from model.config import Params, symbolic_params
from model.ops import Concrete, Symbolic
from model.state import BATCH_NAMES, FIELD_NAMES, ROOT, STATUS_NAMES, State
from model.system import System
from specs.lemmas import LEMMAS
from specs.pass_invariants import PASS_INVARIANTS
from checker.engines.applies import for_config, nothing_applies
from specs.properties import PROPERTIES

from checker import executors, interrupt
from checker.engines import proof_cache
from checker.progress import NOW
from checker.engines.cone import Cone, state_symbols
from checker.engines.bmc import BMC
from checker.engines.encode import ModelOracle, _freshen, eval_params, eval_state
from checker.engines.substeps import FirstBreak, checkpoint_states, first_break, free_state
from checker.engines.substeps import term as _term
from checker.traces.trace import Step, Trace, first_difference
from checker.verdict import Verdict


def unbounded_params(system: System) -> tuple[Params, list[Any]]:
    """Every parameter a fresh integer: the config's bounds are dropped, page multiples kept."""
    cfg = system.cfg
    ps = cfg.page_size
    cons: list[Any] = []
    bounded, _ = symbolic_params(cfg, z3)

    def free(v: Any, name: str, page: bool) -> Any:
        if isinstance(v, bool) or z3.is_bool(v):
            return z3.Bool(name + "!")
        if page and ps > 1:
            k = z3.Int(name + "!/pages")
            return k * ps
        return z3.Int(name + "!")

    d = {}
    for k, v in bounded.as_dict().items():
        page = k in ("full_tokens", "swa_tokens", "warm_len")
        if isinstance(v, tuple):
            d[k] = tuple(free(e, f"{k}[{i}]", page) for i, e in enumerate(v))
        else:
            d[k] = free(v, k, page)
    p = Params(**d)
    # features the config does not have keep their constant
    if not cfg.hybrid_swa:
        p = Params(**{**p.as_dict(), "swa_tokens": 0, "sliding_window_size": 0})
    if not cfg.chunked_prefill:
        p = Params(**{**p.as_dict(), "chunked_prefill_size": 0})
    if not cfg.hicache:
        p = Params(**{**p.as_dict(), "warm_host": tuple(False for _ in p.warm_host)})
    return p, cons


def _parameter_solver(system: System, prefix: str) -> tuple[Any, Params]:
    """A solver that knows only the unbounded parameters and their well-formedness (`params_ok`)."""
    params, cons = unbounded_params(system)
    solver = z3.Solver()
    solver.add(*cons)
    x = system.ctx(Symbolic(0, prefix=prefix), params)
    ok = system.params_ok(x)
    if ok is not True:
        solver.add(ok)
    solver.add(*x.ops.constraints)
    return solver, params


@dataclass
class StepResult:
    closed: bool
    unknown: bool
    failed: list[str]  # names of the invariants that fail in the CTI
    cti: Trace | None
    seconds: float
    reason: str = ""


@dataclass
class HoudiniResult:
    """One k: the largest subset of the candidates that is k-inductive, and why the others left."""

    k: int
    proved: list[str]  # properties in the inductive set
    lemmas: list[str]  # lemmas in the inductive set
    dropped: dict[str, str] = field(default_factory=dict)  # candidate -> why it left
    ctis: dict[str, tuple[Trace, list[str]]] = field(default_factory=dict)  # property -> (CTI, failing)
    unknown: str = ""  # the solver gave up: nothing was proved at this k
    queries: int = 0
    split_cases: int = 0  # queries the solver could not answer whole, split into cases
    cached: int = 0  # case queries answered from the proof cache (`--proof-cache`), not by z3
    local: int = 0  # first-break cases closed by a local query (checker/engines/cone.py, `_CaseQuery._local`)
    skipped: int = 0  # cases split without being asked (their level was nearly always unknown, or a run before gave up on them)
    # property -> the candidates it follows from at one state (`KInduction._consequences`): its
    # step query is not asked
    derived: dict[str, list[str]] = field(default_factory=dict)
    # pass invariant -> "" if proved for the step (and asserted in its queries), else why not
    pass_invariants: dict[str, str] = field(default_factory=dict)
    # candidate -> why its query stayed unsettled when that was no solver's unknown (`--executor
    # ray`: a case that kept killing its workers, a worker whose query digest differed)
    why_unknown: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


RENEW_AFTER = 16  # a case query's solver is encoded afresh after this many queries (and for each last-level case)
SPLIT_AFTER_MS = 15_000  # a step query with case splits left gets this long, then it is split
# the step query with every candidate at once, when the candidates can still be asked one by one
# with splits: on hybrid_swa(_hicache) and paged it is unknown after 600 s, so a long `--timeout`
# spent there was a core idle for its length; on small/sessions/spec_topk/spec_v2 it answers in 1-7 s.
# Capped by z3 work (`rlimit`), not time: a time cap made the proof's course depend on the machine's
# load (at load 5 on 2 cores `small`'s joint query, 35M units and 7 s idle, ran past a 5 s cap and
# the proof went one candidate at a time with case splits: 293 s instead of 9). Measured k=1, all
# thirteen properties, current (2026-11-26, idle 2-core machine; units: z3's `rlimit count`):
# small 35M (6.9 s), sessions 38M (7.3 s), spec_topk 3M (1.0 s, sat), spec_v2 26M (5.7 s),
# hybrid_swa 303M and paged 284M still unknown at 60 s (about 5M units/s). 80M answers the first
# four with room and gives up on the others after about 15 s idle, the same on any load.
JOINT_RLIMIT = 80_000_000
# ... and a wall-clock backstop only (an rlimit z3 ignores in some tactic must not hang the proof)
JOINT_AFTER_MS = 300_000
NO_LIMIT_MS = 2**32 - 1  # z3's "no timeout"
# A split level whose cases z3 nearly always gives up on is not asked any more: its cases are split
# at once (splitting is always sound; only the cost changes). On hybrid_swa_hicache's conservation
# step, 40 of 42 request-status cases were unknown after SPLIT_AFTER_MS, 15 s each for nothing.
# a first-break case's local query (checker/engines/cone.py): on hybrid_swa_hicache's conservation most
# are unsat in at most 0.6 s or sat in at most 2.8 s, but the SWA conjunct's last sub-step (the
# iteration's branches merged) is unsat in 18 s locally and unknown after 15 s whole; an unknown
# or sat local answer leaves the case to be asked whole
LOCAL_MS = 30_000
# a property's consequence query (`KInduction._consequences`): one state, no transition; on
# hybrid_swa_hicache `busy_check_sound` follows from `conservation` and the lemmas in about 8 s,
# where its step query took 4,080 s of case splits
CONSEQUENCE_MS = 60_000
# one link of a pass invariant's proof (`KInduction._prove_pass_invariants`): on
# hybrid_swa_hicache, `admitted_fit`'s two links took 95 s (probes: 56 s after the first admission, 25 s after the second)
PASS_MS = 300_000
SKIP_AFTER = 8  # answers at a level before it may be skipped
SKIP_UNKNOWN = 0.8  # ... when at least this share of them were unknown (a few infeasible cases answer at once)


def named_symbols(states: list[State], index: dict[str, int], ghosts: dict[str, Any]) -> list[set[int]]:
    """Per state of `states` (`checkpoint_states`), the ids of the symbols that name it, and those
    of the ghost values recorded there (`x.ghost`): a local query (checker/engines/cone.py) cuts a ghost's
    definition where it cuts its state's."""
    named = [state_symbols(st, FIELD_NAMES) for st in states]
    for label, g in ghosts.items():
        if label in index:
            named[index[label]] |= state_symbols(g, vars(g))
    return named


FIRST_BREAK = "goal conjunct x first sub-step that breaks it"


def case_splits(system: System, states: list[State], goal: Any,
                sub_steps: tuple[Params, list[tuple[str, Any, State]], Callable[..., list[Any]]] | None = None,
                first: FirstBreak | None = None) -> list[tuple[str, list[Any]]]:
    """How to split a step query the solver cannot answer whole, coarsest first: the goal's
    conjuncts (a state failing `a and b` fails one of them; for a property with `conjuncts` and
    `sub_steps` = (params, the last step's checkpoints, the property's conjuncts), each conjunct
    times the sub-step of the iteration after which it first fails, see `first_break`), the statuses of every request before
    the last step, which batch the last step ran, the statuses after it, and the batch before it
    (with, on paged configs, which committed lengths are page aligned; then, on paged configs,
    which are aligned after the step, and which requests held a tree lock before it; on HiCache
    configs, last, which warm-prefix atoms were on the device and whether the step took a node off
    it); below first-break cases, the levels on the state before the step first. Each split is a list
    of cases whose disjunction is valid (a last "none of these" case closes each domain), so a
    query is unsat exactly when it is unsat in every case."""
    pre, post = states[-2], states[-1]
    R = system.cfg.num_reqs
    out: list[tuple[str, list[Any]]] = []
    # `first`: `first_break`'s answer when the caller has it already
    fb = first if first is not None else \
        first_break(system, sub_steps[0], states, goal, sub_steps[1], sub_steps[2]) if sub_steps else None
    if fb is not None:
        out.append((FIRST_BREAK, fb.cases))
    elif z3.is_and(goal) and goal.num_args() > 1:
        out.append(("goal conjunct", [z3.Not(c) for c in goal.children()]))
    elif z3.is_or(goal) and goal.num_args() == 2 and z3.is_and(goal.arg(1)) and goal.arg(1).num_args() > 1:
        # a lemma, `oom != none or (a and b ...)` (specs/lemmas.py::Lemma.holds): its negation is
        # `oom == none and (not a or not b ...)`, covered by one case per conjunct
        guard, body = goal.arg(0), goal.arg(1)
        out.append(("goal conjunct", [z3.And(z3.Not(guard), z3.Not(c)) for c in body.children()]))

    def domain(name: str, terms: list[Any], size: int) -> tuple[str, list[Any]]:
        terms = [z3.IntVal(t) if isinstance(t, int) else t for t in terms]
        cases = [z3.And(*[t == v for t, v in zip(terms, vals)]) for vals in itertools.product(range(size), repeat=len(terms))]
        return name, cases + [z3.Or(*[z3.Or(t < 0, t >= size) for t in terms])]

    # each level reads the state before the step (`pre`) or after it (`post`)
    levels: list[tuple[str, tuple[str, list[Any]]]] = []
    if R:
        levels.append(("pre", domain("request statuses before the step", list(pre.status), len(STATUS_NAMES))))
    levels.append(("post", domain("batch the step ran", [post.last_batch], len(BATCH_NAMES))))
    if R:
        levels.append(("post", domain("request statuses after the step", list(post.status), len(STATUS_NAMES))))
    # the batch before the step (it decides whether a chunked request is stashed) and, with
    # pages, which committed lengths are page aligned (z3 is slow on the floor/ceil arithmetic)
    name, before = domain("batch before the step", [pre.last_batch], len(BATCH_NAMES))
    ps = system.cfg.page_size
    if ps > 1 and R:
        name += " x page-aligned kv_committed_len"
        before = [z3.And(c, *[(pre.kv_committed_len[r] % ps == 0) == bit for r, bit in enumerate(bits)])
                  for c in before for bits in itertools.product([True, False], repeat=R)]
    levels.append(("pre", (name, before)))
    if ps > 1 and R:
        # on paged configs, for the leaves still too hard: which committed lengths are page
        # aligned after the step (two requests admitted together in one extend batch, say)
        levels.append(("post", ("page-aligned kv_committed_len after the step",
                                [z3.And(*[(post.kv_committed_len[r] % ps == 0) == bit for r, bit in enumerate(bits)])
                                 for bits in itertools.product([True, False], repeat=R)])))
        # then which requests held a tree lock before the step (a waiting request re-admitted
        # beside a chunked one's last chunk: unknown after 120 s whole, 11 s in these four cases)
        levels.append(("pre", ("requests holding a tree lock before the step",
                               [z3.And(*[(pre.last_node[r] != ROOT) == bit for r, bit in enumerate(bits)])
                                for bits in itertools.product([True, False], repeat=R)])))
    cfg = system.cfg
    if cfg.hicache and cfg.warm_chain_len:
        # on HiCache, for the leaves still too hard: which warm-prefix atoms were on the device
        # (what a match hits and a load-back fills), then whether the step evicted a device node.
        # Probe (conservation's full pool, both requests waiting, an extend that leaves both
        # running): unknown after 60 s whole; 0.2-50 s in 6 of the 8 device cases; the two with
        # both warm nodes on the device, unknown after 60 s, close in about 30 s per eviction case
        chain = cfg.warm_chain()
        levels.append(("pre", ("warm-prefix atoms on the device before the step",
                               [z3.And(*[pre.node_device[a] == bit for a, bit in zip(chain, bits)])
                                for bits in itertools.product([True, False], repeat=len(chain))])))
        evicted = z3.Or(*[z3.And(pre.node_len[a] > 0, pre.node_device[a],
                                 z3.Not(z3.And(post.node_len[a] > 0, post.node_device[a])))
                          for a in range(cfg.num_atoms)])
        levels.append(("post", ("whether the step took a node off the device", [evicted, z3.Not(evicted)])))
    if fb is not None:
        # below a first-break case the levels on the state before the step come first: its local
        # query (`_CaseQuery._local`) holds that state and the sub-steps up to the case's, not the
        # state after the step, so a level on that one splits it for nothing (on
        # hybrid_swa_hicache's `no_prefill_oom`, 4 and then 26 more cases, each unknown again)
        levels.sort(key=lambda lv: lv[0] == "post")
    out += [lv for _when, lv in levels]
    return out


class KInduction:
    def __init__(self, system: System, props: list[str], lemmas: list[str] | None = None, timeout_ms: int = 0,
                 progress: Callable[[str], None] | None = None, workers: int = 1,
                 cache: proof_cache.ProofCache | None = None) -> None:
        self.system = system
        props = for_config(system.cfg, props)
        # settled case queries (checker/engines/proof_cache.py); default: the one `--proof-cache` opened
        self.cache = cache if cache is not None else proof_cache.ACTIVE
        self.props = props
        self.lemmas = list(LEMMAS) if lemmas is None else lemmas
        self.timeout_ms = timeout_ms
        self.progress = progress  # told what each step-case query is about (before it runs, or its answer)
        self.workers = workers  # processes that ask a split query's cases
        self.checkpoints: list[tuple[str, Any, State]] = []  # the encoded last step's (`_encode`)
        self.ghosts: dict[str, Any] = {}  # ... and its ghost values by checkpoint label
        self._one_state: tuple[Any, dict[str, Any], dict[str, Any]] | None = None  # (`_consequences`)
        self._pass_proofs: dict[frozenset[str], dict[str, str]] = {}  # (`_prove_pass_invariants`)

    def _invariants(self) -> list[tuple[str, Any]]:
        out = [(p, PROPERTIES[p].holds) for p in self.props]
        out += [(f"lemma:{n}", LEMMAS[n].holds) for n in self.lemmas]
        return out

    def _encode(self, k: int, facts: tuple[str, ...] = ()) -> tuple[Any, Params, list[State], dict[str, Any], dict[str, Any]]:
        """k transitions from a free state; each candidate n is assumed on states 0..k-1 under its
        indicator literal, and the goal is that some active candidate fails at state k. `facts`:
        pass invariants proved for this step (`_prove_pass_invariants`), asserted at their
        checkpoints of the last step."""
        sysm = self.system
        solver, params = _parameter_solver(sysm, "ind.")
        if self.timeout_ms:
            solver.set("timeout", self.timeout_ms)
        invs = self._invariants()
        acts = {n: z3.Bool(f"ind.active.{n}") for n, _ in invs}
        states = [free_state(sysm, params, "k0")]
        for t in range(k):
            xi = sysm.ctx(Symbolic(t, prefix=f"inv{t}."), params)
            for n, fn in invs:
                solver.add(z3.Implies(acts[n], _term(fn(xi, states[t]))))
            solver.add(*xi.ops.constraints)
            x = sysm.ctx(Symbolic(t, name_checkpoints=True), params)
            en = sysm.enabled(x, states[t])
            if en is not True:
                solver.add(_term(en))
            nxt = sysm.step(x, states[t])
            step_cons: list[Any] = []
            states.append(_freshen(nxt, t + 1, step_cons, states[t]))
            solver.add(*x.ops.constraints)
            solver.add(*step_cons)
            self.checkpoints = x.ops.checkpoints  # the last step's (`first_break`)
            self.ghosts = x.ops.ghosts
        for name in facts:
            solver.add(*self._pass_links(name, params))
        xk = sysm.ctx(Symbolic(k, prefix="goal."), params)
        goals = {n: _term(fn(xk, states[k])) for n, fn in invs}
        solver.add(*xk.ops.constraints)
        solver.add(z3.Or(*[z3.And(acts[n], z3.Not(g)) for n, g in goals.items()]))
        return solver, params, states, goals, acts

    def step_case(self, k: int) -> StepResult:
        """All candidates at once: closed iff props + lemmas are jointly k-inductive."""
        t0 = time.perf_counter()
        solver, params, states, goals, acts = self._encode(k)
        r = solver.check(*acts.values())
        if r == z3.unsat:
            return StepResult(True, False, [], None, time.perf_counter() - t0)
        if r == z3.unknown:
            return StepResult(False, True, [], None, time.perf_counter() - t0, solver.reason_unknown())
        m = solver.model()
        failed = [n for n, g in goals.items() if z3.is_false(m.eval(g, model_completion=True))]
        return StepResult(False, False, failed, self._cti(m, params, states), time.perf_counter() - t0)

    def houdini(self, k: int, split_on_unknown: bool = True) -> HoudiniResult:
        """Drop the candidates that fail the step case until the rest is k-inductive. When the joint
        query is unknown and `split_on_unknown`, go on with one query per candidate; otherwise
        nothing is proved."""
        t0 = time.perf_counter()
        solver, params, states, goals, acts = self._encode(k)
        if split_on_unknown:
            solver.set("timeout", min(self.timeout_ms or NO_LIMIT_MS, JOINT_AFTER_MS))
            if JOINT_RLIMIT:
                solver.set("rlimit", JOINT_RLIMIT)
        active = [n for n in acts]
        res = HoudiniResult(k, [], [])
        dg = proof_cache.Digest() if self.cache is not None else None
        base = dg.formula(solver) if dg is not None else ""
        one_by_one = False  # after a joint query the solver could not answer
        while any(n in self.props for n in active):
            if one_by_one:
                failed, m = self._one_by_one(k, active, res)
                if not failed:
                    break
            else:
                res.queries += 1
                if self.progress:
                    self.progress(f"k={k} step case, {len(active)} candidates at once")
                key = dg.key(base, *_key_names(k, "joint", active)) if dg is not None else ""
                if key and self.cache.settled(key):
                    res.cached += 1
                    break  # this exact joint query was unsat before: the active set is k-inductive
                r = _timed(lambda: solver.check(*[acts[n] if n in active else z3.Not(acts[n]) for n in acts]))
                if r == z3.unsat and key:
                    self.cache.record(key)
                if r == z3.unknown and not split_on_unknown:
                    res.unknown = solver.reason_unknown()
                    active = []
                    break
                if r == z3.unknown:
                    # the joint query is too hard: ask each active candidate alone (a fresh solver per
                    # query; one used past a timeout has answered sat wrongly). An unknown then drops
                    # only that candidate, so what remains is still shown inductive by unsat answers.
                    res.unknown = solver.reason_unknown()
                    one_by_one = True
                    continue
                if r == z3.unsat:
                    break
                m = solver.model()
                failed = [n for n in active if z3.is_false(m.eval(goals[n], model_completion=True))]
            if not failed:  # cannot happen: the goal says some active candidate fails
                raise AssertionError(f"step case k={k}: a model in which no active candidate fails")
            cti = None
            for n in failed:
                if m is None:  # one-by-one mode, the solver gave up on n
                    res.dropped[n] = f"step case at k={k}: {res.why_unknown.get(n) or 'solver unknown on its own query'} (not proved)"
                    continue
                if n in self.props:
                    cti = cti or self._cti(m, params, states)
                    res.ctis[n] = (cti, failed)
                res.dropped[n] = f"fails the step case at k={k} (with {', '.join(f for f in failed if f != n) or 'nothing else'} failing)"
            if self.progress:
                for n in failed:
                    self.progress(f"dropped {n}: {res.dropped[n]}")
            active = [n for n in active if n not in failed]
        if one_by_one:
            res.unknown = ""  # the per-candidate queries settled it (their unknowns are in `dropped`)
        res.proved = [n for n in active if n in self.props]
        res.lemmas = [n[len("lemma:"):] for n in active if n.startswith("lemma:")]
        res.seconds = time.perf_counter() - t0
        return res

    def _pass_points(self, name: str) -> list[tuple[str, Any, State, Any]]:
        """(label, path condition, state, ghost) of each checkpoint of the last encoded step that
        pass invariant `name` is read at, in the order the step reaches them."""
        kind = PASS_INVARIANTS[name].ghost
        return [(label, cond, st, self.ghosts[label]) for label, cond, st in self.checkpoints
                if label in self.ghosts and label.rsplit(".", 1)[-1].split("[", 1)[0] == kind]

    def _pass_links(self, name: str, params: Params) -> list[Any]:
        """Pass invariant `name` at each of its checkpoints (`_pass_points`):
        `path condition => body(state, ghost)` (specs/pass_invariants.py), then the constraints
        their terms made."""
        x = self.system.ctx(Symbolic(0, prefix=f"pass.{name}."), params)
        body = PASS_INVARIANTS[name].body
        out = [z3.Implies(_term(cond), _term(body(x, st, g))) for _label, cond, st, g in self._pass_points(name)]
        return [*out, *x.ops.constraints] if out else []

    def _prove_pass_invariants(self, k: int, active: list[str]) -> dict[str, str]:
        """Which pass invariants hold at every one of their checkpoints of the step, from states
        where the active candidates hold: name -> "" when proved, else why not. Link by link
        (specs/pass_invariants.py): at the first checkpoint from the state before the step, at
        each later one from the one before, each a local query (checker/engines/cone.py) over the sub-steps
        up to it. Every link unsat: each link is implied by the step query's own assertions, so
        asserting them (`_encode`'s `facts`) removes no model of it. Cached per active set."""
        key = frozenset(active)
        if key in self._pass_proofs:
            return self._pass_proofs[key]
        out: dict[str, str] = {}
        solver, params, states, _goals, acts = self._encode(k)
        cs = checkpoint_states(states[-2], self.checkpoints)
        cone = Cone(solver.assertions(), named_symbols(cs.states, cs.index, self.ghosts))
        assume = [acts[c] if c in active else z3.Not(acts[c]) for c in acts]
        ms = PASS_MS  # not `--timeout`, a step case's: the plain check's 60 s would cut the first link off
        dg = proof_cache.Digest() if self.cache is not None else None
        base = dg.formula(solver) if dg is not None else ""  # the cone below is a function of it and the case
        for name in PASS_INVARIANTS:
            links = self._pass_links(name, params)
            at = [label for label, _c, _s, _g in self._pass_points(name)]
            if not at:
                continue
            t0 = time.perf_counter()
            extra = links[len(at):]  # the constraints of their terms
            why = ""
            for j, label in enumerate(at):
                case = z3.And(z3.Not(links[j]), *(links[j - 1:j] if j else []), *extra)
                i = cs.index[label]
                q = z3.Solver()
                q.set("timeout", ms)
                q.add(*cone.query(case, i, back=i))
                # with --proof-cache: an unsat link is a fact about this exact query, and one z3 gave
                # up on with as much time is not asked again (on hybrid_swa_page4 `admitted_fit`'s
                # first link is unknown after the whole 300 s, every run): not asserted, as before
                ck = dg.key(base, *_key_names(k, f"pass:{name}:{label}", active), case) if dg else ""
                if ck and self.cache.settled(ck):
                    continue
                if ck and self.cache.given_up(ck, ms):
                    why = f"unknown after {ms // 1000} s at {label} (a run before; --proof-cache)"
                    break
                r = _timed(lambda: q.check(*assume))
                if r == z3.unsat and ck:
                    self.cache.record(ck)
                if r == z3.unknown and ck:
                    self.cache.gave_up(ck, ms)
                if r != z3.unsat:
                    why = f"{'unknown after ' + str(ms // 1000) + ' s' if r == z3.unknown else 'fails'} at {label}"
                    break
            out[name] = why
            if self.progress:
                self.progress(f"k={k}: pass invariant {name} " + (f"not proved ({why}): not used" if why else
                              f"proved at {', '.join(at)} ({time.perf_counter() - t0:.1f} s): asserted in the step queries"))
        self._pass_proofs[key] = out
        return out

    def facts_for(self, active: list[str]) -> tuple[str, ...]:
        """The pass invariants proved for the active set (`_prove_pass_invariants`)."""
        return tuple(n for n, why in self._pass_proofs.get(frozenset(active), {}).items() if not why)

    def _consequences(self, active: list[str]) -> dict[str, list[str]]:
        """The active properties that hold in *every* state where the other active candidates hold
        (one state, no transition: `busy_check_sound` follows from `conservation` and the lemmas,
        `busy_check_complete` from `conservation` alone), each with the candidates it follows from.

        Their step queries need not be asked. Soundness: a property is tried in `active`'s order,
        from the active candidates not yet derived, so it may rest on properties derived after it
        but never on one derived before it: the derivations are acyclic. If every candidate holds
        at steps t..t+k-1, the step queries give the underived ones at t+k, and then, in reverse
        order of derivation, each derived one at t+k. A query z3 does not answer unsat within
        CONSEQUENCE_MS (or `--timeout`, if less) derives nothing: the step query is asked."""
        if self._one_state is None:
            sysm = self.system
            solver, params = _parameter_solver(sysm, "one.p.")
            x = sysm.ctx(Symbolic(0, prefix="one."), params)
            st = free_state(sysm, params, "one")
            invs = self._invariants()
            on = {n: z3.Bool(f"one.on.{n}") for n, _ in invs}  # assumed
            neg = {n: z3.Bool(f"one.neg.{n}") for n in self.props}  # asked to fail (properties only)
            for n, fn in invs:
                t = _term(fn(x, st))
                solver.add(z3.Implies(on[n], t))
                if n in neg:
                    solver.add(z3.Implies(neg[n], z3.Not(t)))
            solver.add(*x.ops.constraints)
            self._one_state = (solver, on, neg)
        solver, on, neg = self._one_state
        solver.set("timeout", min(self.timeout_ms or NO_LIMIT_MS, CONSEQUENCE_MS))
        derived: dict[str, list[str]] = {}
        for n in active:
            if n not in self.props:
                continue
            premises = [c for c in active if c != n and c not in derived]
            if self.progress:
                self.progress(f"is {n} a consequence of the other candidates at one state?")
            r = _timed(lambda: solver.check(neg[n], *[on[c] if c in premises else z3.Not(on[c]) for c in on]))
            if r == z3.unsat:  # it rests on the premises in the unsat core alone
                core = {lit.get_id() for lit in solver.unsat_core()}
                derived[n] = [c for c in premises if on[c].get_id() in core]
        return derived

    def _one_by_one(self, k: int, active: list[str], res: HoudiniResult) -> tuple[list[str], Any]:
        """Ask, for each active candidate alone, whether it can fail after k steps from states where
        all active candidates hold; a query the solver cannot answer whole is split into cases
        (`_settle`). A property that follows from the others at one state (`_consequences`) is
        not asked. Returns (the candidates to drop, a model for the first that fails, or None if
        it stayed unknown); ([], None) when every query is unsat."""
        res.derived = self._consequences(active)
        for p, premises in res.derived.items():
            if self.progress:
                self.progress(f"k={k}: {p} follows from {', '.join(premises)} at one state: its step is not asked")
        if any(n not in res.derived for n in active if n in self.props):
            res.pass_invariants = self._prove_pass_invariants(k, active)
        for n in active:
            if n in res.derived:
                continue
            r, m, goals = self._settle(k, active, n, res)
            if r == z3.unsat:
                continue
            if r == z3.unknown:
                return [n], None
            return [c for c in active if z3.is_false(m.eval(goals[c], model_completion=True))] or [n], m
        return [], None

    def _settle(self, k: int, active: list[str], n: str, res: HoudiniResult) -> tuple[Any, Any, dict[str, Any]]:
        """Can candidate n fail after k steps from states where every active candidate holds?
        Asked whole first; if the solver gives up (after SPLIT_AFTER_MS while splits are left, the
        full timeout on the last level), the query is split into cases (`case_splits`), each asked
        the same way. The cases of a split cover every state, so the query is unsat iff every case
        is; a sat case is a CTI; a case still unknown after the last split leaves n unproved.
        With `workers` > 1 the cases are asked in that many forked processes (`_settle_parallel`).
        Returns (z3 result, model when sat, the candidates' goal terms; every encoding names its
        symbols alike, so the model reads on them); `res.split_cases` counts the queries split."""
        q = _CaseQuery(self, k, active, n)
        # `--executor ray`: the cases go to the cluster; a design that overrides transitions (code,
        # not data: `describe_query`) keeps them here
        remote = _remote_executor() if not self.system.design.overrides else None
        parallel = remote is not None or (self.workers > 1 and _can_fork())
        spread = self._settle_remote if remote is not None else self._settle_parallel

        def walk(path: tuple[int, ...]) -> tuple[Any, Any]:
            if q.skip(path):  # z3 (nearly always) gave up on it or its level: split it unasked
                res.skipped += 1
                if parallel:
                    res.split_cases += 1
                    return spread(q, res, [path + (i,) for i in range(q.width(path))])
            else:
                if self.progress:
                    self.progress(f"k={k} step case for {n}{q.where(path)} ({res.queries} queries)")
                res.queries += 1
                r, m = q.ask(path)
                res.cached += q.last_cached
                res.local += q.last_local
                q.note(path, str(r))
                if r != z3.unknown or q.last(path):
                    return r, m
                if parallel:  # the whole query was too hard: its cases go to the workers
                    res.split_cases += 1
                    return spread(q, res, [path + (i,) for i in range(q.width(path))])
            res.split_cases += 1
            for i in range(q.width(path)):
                r2, m2 = walk(path + (i,))
                if r2 != z3.unsat:
                    return r2, m2
            return z3.unsat, None

        r, m = walk(())
        return r, m, q.goals

    def _settle_parallel(self, q: "_CaseQuery", res: HoudiniResult, cases: list[tuple[int, ...]]) -> tuple[Any, Any]:
        """`_settle`'s case tree below `cases`, asked by `workers` forked processes: a case the
        solver gives up on is replaced by its sub-cases in the queue. The first sat case (or one
        unknown after the last split) stops the rest; a sat case is asked again here for its model.
        The queue is kept here and a worker gets its next case only when it is free, so whether a
        case is asked or split unasked (`_CaseQuery.skip`) is decided on the answers so far."""
        import multiprocessing as mp
        import queue
        from collections import deque

        global _CASE_SETUP
        _CASE_SETUP = (self, q.k, q.active, q.n)  # the forked workers build their own query from it
        done: "queue.Queue[Any]" = queue.Queue()
        waiting = deque(cases)
        with _case_pool(self.workers) as pool:
            busy = 0

            def feed() -> int:
                """Give free workers their next cases; returns how many are being asked."""
                nonlocal busy
                while waiting and busy < self.workers:
                    path = waiting.popleft()
                    if q.skip(path):
                        res.split_cases += 1
                        res.skipped += 1
                        waiting.extend(path + (i,) for i in range(q.width(path)))
                        continue
                    pool.apply_async(_ask_case, (path,), callback=done.put, error_callback=done.put)
                    busy += 1
                return busy

            workers = list(pool._pool)  # private, but the only way to see a worker die

            def next_answer() -> Any:
                # a worker killed while asking (a signal, the OOM killer) takes its case with it and
                # the pool never answers for it: say so instead of waiting forever
                while True:
                    try:
                        return done.get(timeout=5.0)
                    except queue.Empty:
                        dead = [w for w in workers if w.exitcode is not None]
                        if dead:
                            raise RuntimeError(f"a case worker died (pid {dead[0].pid}, exit code {dead[0].exitcode}) "
                                               "while asking a step case; nothing was proved by this query") from None

            while feed():
                item = next_answer()
                busy -= 1
                if isinstance(item, BaseException):
                    raise item
                path, answer, how = item
                res.queries += 1
                res.cached += how == "proof cache"
                res.local += how == "local"
                q.note(path, answer)
                if self.progress:
                    self.progress(f"k={q.k} step case for {q.n}{q.where(path)}: {answer}{f' ({how})' if how else ''} "
                                  f"({res.queries} queries, {len(waiting) + busy} cases queued, {self.workers} processes)")
                if answer == "unsat":
                    continue
                if answer == "unknown" and not q.last(path):
                    res.split_cases += 1
                    waiting.extend(path + (i,) for i in range(q.width(path)))
                    continue
                pool.terminate()
                if answer == "sat":
                    r, m = q.ask(path)  # again, here, for the model (the CTI)
                    return (r, m) if r == z3.sat else (z3.unknown, None)
                return z3.unknown, None
        return z3.unsat, None

    def _settle_remote(self, q: "_CaseQuery", res: HoudiniResult, cases: list[tuple[int, ...]]) -> tuple[Any, Any]:
        """`_settle_parallel` on the run's Ray executor (`--executor ray`, checker/executors/): each
        case goes to a worker as plain data (`describe_query` + its path and the driver's digest of
        it), the worker rebuilds the query and answers (`ask_remote_case`). This process keeps the
        queue, decides what is asked or split unasked (`_CaseQuery.skip`), and is the proof cache's
        only writer: an unsat answer is recorded there before the case counts as settled, and a case
        recorded there is not sent. A case whose workers kept dying, or that a worker refused (its
        digest differs: another kvmc or z3), leaves the candidate unknown with that reason
        (`HoudiniResult.why_unknown`), never proved."""
        from collections import deque

        from checker.executors.ray_cluster import RETRIES

        ex = _remote_executor()
        assert ex is not None
        cap = ex.capacity()
        base = describe_query(self, q)
        cfg = self.system.cfg.name
        waiting = deque(cases)
        flying: dict[Any, tuple[tuple[int, ...], str, float]] = {}  # reference -> (path, key, sent at)
        settled = 0
        t0, waited0 = time.monotonic(), ex.waited_s

        def tell(path: tuple[int, ...], what: str) -> None:
            alive = ex.alive()
            NOW.cases = {"settled": settled, "queued": len(waiting), "in_flight": len(flying), "workers_alive": alive,
                         "config": cfg, "property": q.n, "k": q.k, "executor": "ray"}
            if self.progress:
                self.progress(f"k={q.k} step case for {q.n}{q.where(path)}: {what} ({settled} settled, {len(waiting)} queued, "
                              f"{len(flying)} in flight, {alive} workers alive; {res.queries} queries, config {cfg})")

        def unsettled(path: tuple[int, ...], why: str) -> tuple[Any, Any]:
            res.why_unknown[q.n] = why
            tell(path, why)
            return z3.unknown, None

        try:
            while waiting or flying:
                while waiting and len(flying) < cap:
                    path = waiting.popleft()
                    if q.skip(path):
                        res.split_cases += 1
                        res.skipped += 1
                        waiting.extend(path + (i,) for i in range(q.width(path)))
                        continue
                    key = q.key(path)  # the digest the worker's own query must have
                    if self.cache is not None and self.cache.settled(key):
                        res.queries += 1
                        res.cached += 1
                        q.note(path, "unsat")
                        settled += 1
                        continue
                    flying[ex.submit(ask_remote_case, {**base, "path": list(path), "digest": key})] = (path, key, time.monotonic())
                for ref in ex.wait(list(flying)):
                    path, key, sent = flying.pop(ref)
                    status, out = ex.result(ref)
                    if status == "died":
                        return unsettled(path, f"its case{q.where(path)} killed its worker each of the {RETRIES + 1} times "
                                               f"it was run ({out})")
                    if out["answer"] == "refused":
                        return unsettled(path, out["why"])
                    answer, how = out["answer"], out["how"]
                    ex.note(kind="case", config=cfg, k=q.k, candidate=q.n, path=list(path), answer=answer, how=how,
                            solve_s=out["seconds"], build_s=out["build_s"], round_trip_s=round(time.monotonic() - sent, 3),
                            worker=out["worker"])
                    res.queries += 1
                    res.local += how == "local"
                    q.note(path, answer)
                    if answer == "unsat":
                        if self.cache is not None:
                            self.cache.record(key)  # recorded before the case counts as settled
                        settled += 1
                        tell(path, "unsat" + (f" ({how})" if how else ""))
                        continue
                    if answer == "unknown" and not q.last(path):
                        if self.cache is not None:
                            self.cache.gave_up(key, q.budget(path))
                        res.split_cases += 1
                        waiting.extend(path + (i,) for i in range(q.width(path)))
                        tell(path, "unknown: split")
                        continue
                    tell(path, answer)
                    if answer == "sat":
                        r, m = q.ask(path)  # again, here, for the model (the CTI)
                        return (r, m) if r == z3.sat else (z3.unknown, None)
                    return z3.unknown, None
            return z3.unsat, None
        finally:
            ex.cancel(list(flying))  # a sat case, an error or an interrupt: the rest is not needed
            NOW.cases = None
            # the phase's wall time and the driver's share of it (not waiting for answers): bench/scale.py
            ex.note(kind="phase", config=cfg, k=q.k, candidate=q.n, seconds=round(time.monotonic() - t0, 3),
                    driver_s=round(time.monotonic() - t0 - (ex.waited_s - waited0), 3))

    def _cti(self, m: Any, params: Params, states: list[State]) -> Trace:
        """The CTI as a trace; each step's choices are read from the model and the step is re-run
        concretely, so the trace replays by its picks (when the concrete step agrees)."""
        p = eval_params(params, m)
        ss = [eval_state(s, m) for s in states]
        steps = []
        agrees = True
        for t in range(len(ss) - 1):
            picks: dict[str, Any] = {}
            try:
                x = self.system.ctx(Concrete(ModelOracle(m, t)), p)
                nxt = self.system.step(x, ss[t])
                picks = dict(x.ops.picks)
                agrees = agrees and first_difference(ss[t + 1], nxt) is None
            except Exception:  # a CTI state may break the model's own assumptions: keep the states
                agrees = False
            steps.append(Step("event_loop_iteration", picks, ss[t + 1]))
        tr = Trace(self.system.cfg, self.system.design, p, ss[0], steps, None, "induction-cti")
        tr.meta["cti_replays_concretely"] = agrees
        # for a property with conjuncts, the sub-step of the last iteration after which its
        # ledger first fails (the first `first_break` case true in the model): where to look
        where: dict[str, str] = {}
        xg = self.system.ctx(Symbolic(len(states) - 1, prefix="goal."), params)
        for n in self.props:
            prop = PROPERTIES[n]
            if not (prop.conjuncts and self.checkpoints):
                continue
            goal = _term(prop.holds(xg, states[-1]))
            fb = first_break(self.system, params, states, goal, self.checkpoints, prop.conjuncts)
            for case, name in zip(fb.cases, fb.names) if fb else ():
                if z3.is_true(m.eval(case, model_completion=True)):
                    where[n] = name
                    break
        if where:
            tr.meta["first_break"] = where
        return tr


def _timed(check: Callable[[], Any]) -> Any:
    """A z3 check, recorded for the progress heartbeat (checker/progress.py: the query running and
    for how long, the solver time)."""
    NOW.query_started()
    try:
        return check()
    finally:
        NOW.query_ended()


def _key_names(k: int, what: str, active: list[str]) -> tuple[str, str, str]:
    """The names in a proof-cache key (checker/engines/proof_cache.py): k, which query, the active set."""
    return f"k={k}", what, "active=" + ",".join(sorted(active))


class _CaseQuery:
    """One candidate's step query and its case splits; a case is named by its path, the index of
    its case in each split taken so far (() is the whole query)."""

    def __init__(self, ind: KInduction, k: int, active: list[str], n: str) -> None:
        self.ind, self.k, self.active, self.n = ind, k, active, n
        self._fresh()
        prop = PROPERTIES.get(n)
        fb = first_break(ind.system, self.params, self.states, self.goals[n], ind.checkpoints, prop.conjuncts) \
            if prop is not None and prop.conjuncts else None
        self.dims = case_splits(ind.system, self.states, self.goals[n], first=fb)
        self.labels: dict[int, list[str]] = {0: fb.names} if fb is not None else {}  # names of the first-break cases (`where`)
        self.first = fb
        self._cone: Cone | None = None  # built on the first local query (`_local`)
        self.full = ind.timeout_ms or NO_LIMIT_MS
        self.cache = ind.cache
        self._digest = ""  # of the encoded formula; the same for every fresh encoding
        self._dg = proof_cache.Digest()
        self.last_cached = False  # the last `ask` was answered by the proof cache
        self.last_local = False  # ... or by its sub-step's local query (checker/engines/cone.py)
        self.level_answers: dict[int, list[int]] = {}  # split level -> [unknown answers, answers]

    def note(self, path: tuple[int, ...], answer: str) -> None:
        """Count an answer at the case's level (for `skip`)."""
        counts = self.level_answers.setdefault(len(path), [0, 0])
        counts[0] += answer == "unknown"
        counts[1] += 1

    def skip(self, path: tuple[int, ...]) -> bool:
        """Split this case without asking it: z3 gave up on nearly every case asked at its level so
        far (SKIP_AFTER, SKIP_UNKNOWN), or, with a proof cache, on this very case in a run before,
        with as much time as it would get now. A last-level case is always asked, and the whole
        query unless a run before gave up on it or it has first-break cases: their local queries
        (`_local`) are cheaper than the whole (on hybrid_swa, `conservation`'s whole step query
        gave up after 15 s, its 228 cases took 20 s), and are always asked."""
        if self.first is not None and len(path) <= 1:
            return not path
        if self.last(path):
            return False
        if self.cache is not None and self.cache.given_up(self.key(path), self.budget(path)):
            return True
        if not path:
            return False
        unknown, answers = self.level_answers.get(len(path), (0, 0))
        return answers >= SKIP_AFTER and unknown >= SKIP_UNKNOWN * answers

    def budget(self, path: tuple[int, ...]) -> int:
        """The solver's time limit for this case, in ms: SPLIT_AFTER_MS while splits are left."""
        return self.full if self.last(path) else min(self.full, SPLIT_AFTER_MS)

    def _fresh(self) -> None:
        self.solver, self.params, self.states, self.goals, self.acts = self.ind._encode(self.k, self.ind.facts_for(self.active))
        self.asked = 0  # queries answered by this solver

    def last(self, path: tuple[int, ...]) -> bool:
        return len(path) >= len(self.dims)

    def width(self, path: tuple[int, ...]) -> int:
        return len(self.dims[len(path)][1])

    def where(self, path: tuple[int, ...]) -> str:
        return "".join(f", {self.dims[lv][0]} case {i + 1}/{len(self.dims[lv][1])}"
                       + (f" ({self.labels[lv][i]})" if lv in self.labels else "") for lv, i in enumerate(path))

    def key(self, path: tuple[int, ...]) -> str:
        """The proof cache's key of this case query (checker/engines/proof_cache.py)."""
        if not self._digest:
            self._digest = self._dg.formula(self.solver)
        cases = [self.dims[lv][1][i] for lv, i in enumerate(path)]
        return self._dg.key(self._digest, *_key_names(self.k, f"candidate={self.n}", self.active), self.goals[self.n], *cases)

    def ask(self, path: tuple[int, ...]) -> tuple[Any, Any]:
        """(z3 result, model when sat); the time limit is SPLIT_AFTER_MS while splits are left. An
        unsat answer is recorded in the proof cache, and one recorded there is not asked again. A
        first-break case is asked on its local queries first (`_local`), then whole."""
        key = self.key(path) if self.cache is not None else ""
        self.last_cached = bool(key) and self.cache.settled(key)
        if self.last_cached:
            return z3.unsat, None
        cases = [self.dims[lv][1][i] for lv, i in enumerate(path)]
        local = self._local(path, cases) if self.first is not None and path else z3.sat
        self.last_local = local == z3.unsat
        if self.last_local:
            if key:
                self.cache.record(key)
            return z3.unsat, None
        if local == z3.unknown or (key and not self.last(path) and self.cache.given_up(key, self.budget(path))):
            # the whole query holds the local one: z3 would give up on it too (or it did in a run
            # before, as in `skip`)
            if key and not self.last(path):
                self.cache.gave_up(key, self.budget(path))
            return z3.unknown, None
        if self.asked and (self.last(path) or self.asked >= RENEW_AFTER):
            # z3 slows down on a solver that has answered many other cases (a paged leaf: unsat in
            # 10 s on a fresh solver, 18 s after 5 sibling cases, unknown after 120 s in a worker
            # that had answered hundreds); encoding again costs about 0.5 s
            self._fresh()
        self.asked += 1
        self.solver.set("timeout", self.budget(path))
        self.solver.push()
        self.solver.add(z3.Not(self.goals[self.n]), *cases)
        r = _timed(lambda: self.solver.check(*self._assumptions()))
        m = self.solver.model() if r == z3.sat else None
        self.solver.pop()
        if r == z3.unsat and key:
            self.cache.record(key)
        if r == z3.unknown and key and not self.last(path):
            self.cache.gave_up(key, self.budget(path))
        if r == z3.unknown:
            self._fresh()  # a solver used past a timeout has answered sat wrongly: start again
        return r, m


    def _assumptions(self) -> list[Any]:
        return [self.acts[c] if c in self.active else z3.Not(self.acts[c]) for c in self.acts]

    def _local(self, path: tuple[int, ...], cases: list[Any]) -> Any:
        """A first-break case on its local queries (checker/engines/cone.py), parts of the case query: so
        unsat there is unsat here. First, for the first-break case alone, its sub-step with the
        state it starts from left free (LOCAL_MS; an eviction's node: at most 0.6 s); then the
        case (and its further splits) with every sub-step before it, those after it left free
        (on hybrid_swa_hicache, a prefill result's SWA conjunct: unsat in 6-20 s so, unknown after
        15 s whole: the decode branch's sub-steps are most of the query, and no help). Sat says
        nothing (the case is then asked whole); unknown, that the whole would be too."""
        fb = self.first
        assert fb is not None
        end = fb.ends[path[0]]
        if self._cone is None:
            self._cone = Cone(self.solver.assertions(), named_symbols(fb.states, fb.index, self.ind.ghosts))
        queries = [(self._cone.query(cases[0], end), min(self.full, LOCAL_MS))] if len(path) == 1 else []
        if end is not None:
            prefix = self._cone.query(z3.And(*cases), end, back=end)
            queries.append((prefix, min(self.full, max(LOCAL_MS, self.budget(path)))))
        r = z3.sat
        for q, ms in queries:
            s = z3.Solver()
            s.set("timeout", ms)
            s.add(*q)
            r = _timed(lambda: s.check(*self._assumptions()))
            if r == z3.unsat:
                return r
        return r if end is not None else z3.sat  # (the sub-step alone giving up says nothing)


@contextlib.contextmanager
def _case_pool(workers: int) -> Iterator[Any]:
    """A fork pool of case workers, terminated on the way out (as `with Pool()` does). After a
    SIGINT/SIGTERM checker/interrupt.py has killed the workers already: `terminate` then stops the
    pool's thread from forking replacements, but may wait for ever on the task queue's lock if a
    worker died holding it, so it gets a thread of its own and a second; then whatever the pool
    forked meanwhile is ended too."""
    import multiprocessing as mp
    import threading

    pool = mp.get_context("fork").Pool(workers)
    try:
        yield pool
    except BaseException:
        if interrupt.requested():
            stopper = threading.Thread(target=pool.terminate, name="kvmc-case-pool-stop", daemon=True)
            stopper.start()
            stopper.join(1.0)
            interrupt.reap()
        else:
            pool.terminate()
        raise
    pool.terminate()


_CASE_SETUP: tuple[Any, ...] | None = None  # set by _settle_parallel before it forks its workers
_CASE_QUERY: _CaseQuery | None = None  # a worker's own query, built on its first case


def _ask_case(path: tuple[int, ...]) -> tuple[tuple[int, ...], str, bool]:
    global _CASE_QUERY
    if _CASE_QUERY is None:
        assert _CASE_SETUP is not None
        _CASE_QUERY = _CaseQuery(*_CASE_SETUP)
    r, _m = _CASE_QUERY.ask(path)
    return path, str(r), _how(_CASE_QUERY)


def _how(q: _CaseQuery) -> str:
    """How the last case was answered, when not by z3 on the case query itself."""
    return "proof cache" if q.last_cached else "local" if q.last_local else ""


def _can_fork() -> bool:
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


def _remote_executor() -> Any:
    """The run's Ray executor when this process is its driver (not a fork of it: the bmc engine's
    background proof attempt asks its cases locally), else None."""
    ex = executors.ACTIVE
    return ex if ex is not None and ex.pid == os.getpid() else None


def describe_query(ind: KInduction, q: "_CaseQuery") -> dict[str, Any]:
    """What a Ray worker needs to rebuild a candidate's step query: plain data, no z3 object
    (`ask_remote_case`). A design with transition overrides (a reviewer's patch, a generated
    mutant) is code, not data: it stays on local processes."""
    from specs.configs import CONFIGS

    d, cfg = ind.system.design, ind.system.cfg
    if d.overrides:
        raise RuntimeError(f"design {d.name!r} overrides transitions ({', '.join(sorted(d.overrides))}): its step "
                           "queries cannot be rebuilt on a Ray worker; use --executor local")
    return {"config": cfg.name if CONFIGS.get(cfg.name) == cfg else cfg,
            "design": {"name": d.name, "fixes": dict(d.fixes), "mutants": sorted(d.mutants)},
            "props": list(ind.props), "lemmas": list(ind.lemmas), "timeout_ms": ind.timeout_ms,
            "k": q.k, "active": list(q.active), "candidate": q.n, "facts": list(ind.facts_for(q.active))}


_REMOTE_QUERIES: dict[str, "_CaseQuery"] = {}  # a Ray worker's queries, by description (the last few)


def ask_remote_case(desc: dict[str, Any]) -> dict[str, Any]:
    """A Ray worker's task: rebuild the query `desc` describes (`describe_query`) from this
    worker's model, check that its digest of the case equals the driver's (`desc["digest"]`,
    checker/engines/proof_cache.py's key: the encoded formula, the case, the candidate, the active
    set, the z3 version), and ask it. A different digest (another kvmc, model or z3 on this node)
    is refused, not answered. The worker writes no proof cache: the driver records the answer."""
    import socket

    from model.designs import Design
    from specs.configs import CONFIGS

    qid = repr(sorted((k, repr(v)) for k, v in desc.items() if k not in ("path", "digest")))
    q = _REMOTE_QUERIES.get(qid)
    t0 = time.perf_counter()
    if q is None:
        cfg = CONFIGS[desc["config"]] if isinstance(desc["config"], str) else desc["config"]
        dd = desc["design"]
        ind = KInduction(System(cfg, Design(dd["name"], dd["fixes"], frozenset(dd["mutants"]))), list(desc["props"]),
                         list(desc["lemmas"]), timeout_ms=desc["timeout_ms"], workers=1)
        ind.cache = None  # the driver is the proof cache's only writer
        ind._pass_proofs[frozenset(desc["active"])] = {f: "" for f in desc["facts"]}
        q = _CaseQuery(ind, desc["k"], list(desc["active"]), desc["candidate"])
        while len(_REMOTE_QUERIES) >= 2:  # a worker serves one candidate at a time, mostly
            _REMOTE_QUERIES.pop(next(iter(_REMOTE_QUERIES)))
        _REMOTE_QUERIES[qid] = q
    path = tuple(desc["path"])
    worker = f"{socket.gethostname()}:{os.getpid()}"
    mine = q.key(path)
    built = time.perf_counter() - t0  # this worker's encoding of the query (once per candidate) and its digest
    if mine != desc["digest"]:
        return {"answer": "refused", "worker": worker,
                "why": f"Ray worker {worker} refused case {list(path)} of {desc['candidate']}: its query digest {mine[:12]} "
                       f"differs from the driver's {desc['digest'][:12]} (another kvmc, model or z3 there; z3 "
                       f"{z3.get_full_version()}); install the driver's on every node"}
    t0 = time.perf_counter()
    r, _m = q.ask(path)
    return {"answer": str(r), "how": _how(q), "seconds": round(time.perf_counter() - t0, 3), "build_s": round(built, 3),
            "worker": worker}


def false_lemmas(system: System, trace: Trace) -> list[str]:
    """Known lemmas that are false in some state of a CTI but its last: had they been assumed (and
    inductive), the CTI would not exist."""
    out = []
    for n, lm in LEMMAS.items():
        for st in trace.states[:-1]:
            try:
                v = lm.holds(system.ctx(Concrete(), trace.params), st)
            except Exception:
                v = False
            if v is False:
                out.append(n)
                break
    return out


# -- the engine -------------------------------------------------------------------------------------
MAX_K = 4  # k tried at most (a deeper step case is rarely cheaper than a new lemma)
STEP_TIMEOUT_MS = 120_000  # per step-case query when no --timeout is given: then `unknown`, never proved
# processes that ask a split step query's cases (1 inside `--jobs` pool workers, whose siblings use the cores)
CASE_WORKERS = os.cpu_count() or 1


def check_config(design: Any, cfg: Any, props: list[str], depth: int, prove: bool = True, timeout_ms: int = 0,
                 progress: Callable[..., None] | None = None, minimize: bool = True, keep_going: bool = True,
                 max_k: int = MAX_K, lemmas: list[str] | None = None) -> Any:
    """`--engine induction`: base case (BMC from the initial state, unbounded parameters) and
    k-induction step case for k = 1 .. min(depth, max_k); see the module docstring. The BMC stops
    once every property is proved and exercised, or after depth K when the k's are used up (a
    proved property still waits for its witness, up to `depth`). Returns a
    `checker.engines.run.ConfigReport`; a proved property gets `Verdict.PROVED` with depth = k."""
    from checker.engines.results import ConfigReport

    t0 = time.perf_counter()
    props = for_config(cfg, props)  # a property that does not apply to cfg is not checked there
    if not props:
        return nothing_applies(cfg)
    system = System(cfg, design)
    params = unbounded_params(system)
    K = max(1, min(depth, max_k))
    step_timeout = timeout_ms or STEP_TIMEOUT_MS
    use = list(LEMMAS) if lemmas is None else list(lemmas)
    bmc = BMC(system, props, timeout_ms=timeout_ms, minimize=minimize, params=params)
    proved: dict[str, int] = {}
    ctis: dict[str, dict[str, Any]] = {}
    attempts: list[dict[str, Any]] = []
    next_k = [1]
    lemma_of: dict[str, list[str]] = {}
    derived_from: dict[str, list[str]] = {}  # a proved property -> what it follows from at one state

    def stop(t: int, witness: dict[str, int | None], open_props: list[str]) -> bool:
        todo = [p for p in open_props if p not in proved]
        if prove and todo and 1 <= next_k[0] <= min(t, K):
            k = next_k[0]
            next_k[0] += 1
            gone = {d.split("@")[0][len("lemma:"):] for d in bmc.dropped}  # failed in the base case
            lem = [n for n in use if n not in gone]
            tell = (lambda msg: progress(cfg.name, t, time.perf_counter() - t0, {"_phase": msg})) if progress else None
            NOW.in_phase(f"k={k} step case")  # for the progress heartbeat
            try:
                h = KInduction(system, todo, lem, timeout_ms=step_timeout, progress=tell, workers=CASE_WORKERS).houdini(k)
            finally:
                NOW.in_phase(None)
            attempts.append({"k": k, "base_depth": t, "proved": h.proved, "lemmas": h.lemmas,
                             "lemmas_failed_base": sorted(gone & set(use)), "dropped": h.dropped,
                             "unknown": h.unknown or None, "queries": h.queries, "cached": h.cached, "local": h.local, "skipped": h.skipped,
                             "derived": h.derived or None, "pass_invariants": h.pass_invariants or None,
                             **({"unsettled": h.why_unknown} if h.why_unknown else {}),
                             "seconds": round(h.seconds, 2)})
            for p in h.proved:
                proved[p] = k
                lemma_of[p] = h.lemmas
                if p in h.derived:
                    derived_from[p] = h.derived[p]
            for p, (tr, failing) in h.ctis.items():
                ctis[p] = {"k": k, "trace": tr, "failing": failing, "suggest": false_lemmas(system, tr)}
        if all(p in proved and witness.get(p) is not None for p in open_props):
            return True
        # the k's are used up: stop, unless a proved property still waits for its witness
        return t >= K and not any(p in proved and witness.get(p) is None for p in open_props)

    def report(results: dict[str, Any], running_k: int | None) -> Any:
        """The config's report from the BMC's results and the step cases settled so far (an
        interrupted check: `running_k`, the step case it was in)."""
        for name, r in results.items():
            r.meta["engine"] = "induction"
            r.meta["parameters"] = "unbounded"
            if name in proved and r.verdict is Verdict.HOLDS_TO_DEPTH:
                r.meta["bmc_depth"] = r.depth
                r.meta["lemmas"] = lemma_of[name]
                if name in derived_from:
                    r.meta["derived_from"] = derived_from[name]
                r.verdict, r.depth = Verdict.PROVED, proved[name]
            elif name in proved and r.verdict is Verdict.VACUOUS:
                r.reason = f"step case closes at k={proved[name]}, but no state within depth {r.depth} exercises it"
            elif r.verdict is Verdict.HOLDS_TO_DEPTH and prove:
                c = ctis.get(name)
                tried = [a["k"] for a in attempts]
                if c is not None:
                    r.meta["cti"] = c["trace"]
                    r.meta["cti_k"] = c["k"]
                    r.meta["cti_failing"] = c["failing"]
                    r.meta["cti_suggest"] = c["suggest"]
                unk = [a for a in attempts if a["unknown"]]
                fb = c["trace"].meta.get("first_break", {}).get(name) if c is not None else None
                why = [f"k={a['k']}: {a['unsettled'][name]}" for a in attempts if name in a.get("unsettled", {})]
                r.reason = (f"induction did not close for k in {tried or 'none'}"
                            + (f" (solver unknown at k={unk[-1]['k']}: {unk[-1]['unknown']})" if unk else "")
                            + (f" (a case was never settled: {why[-1]})" if why else "")
                            + (f"; in its CTI the ledger's {fb}" if fb else "")
                            + (f"; a lemma excluding its CTI is missing (known lemmas false in it: {', '.join(c['suggest']) or 'none'})"
                               if c is not None else ""))
        proof = {"engine": "induction", "k": max([a["k"] for a in attempts], default=0),
                 "closed": bool(props) and all(p in proved for p in props), "proved": dict(proved),
                 "failed": sorted(p for p in props if p not in proved), "attempts": attempts,
                 "cti": {p: c["trace"] for p, c in ctis.items() if p not in proved}} if attempts else {}
        if running_k is not None:
            proof = dict(proof or {"engine": "induction", "k": running_k, "closed": False, "proved": dict(proved),
                                   "failed": [], "attempts": attempts}, interrupted=f"during the k={running_k} step case")
        return ConfigReport(cfg.name, results, time.perf_counter() - t0, proof)

    try:
        results = bmc.run(depth, progress=(lambda t, el, st: progress(cfg.name, t, el, st)) if progress else None,
                          stop=stop, stop_on_violation=not keep_going)
    except interrupt.Interrupted as e:  # what the base case and the finished step cases established stands
        running = next_k[0] - 1 if next_k[0] - 1 > max((a["k"] for a in attempts), default=0) else None
        if running is not None:
            e.where += f", during the k={running} step case"
        e.config_report = report(e.results or {}, running)
        raise
    return report(results, None)


def cti_path(out_dir: str | Path, design: Any, prop: str, config: str) -> Path:
    """`<out>/<design>/<config>/<property>.cti.itf.json` (beside the counterexamples' names)."""
    return Path(out_dir) / design.name / config / f"{prop}.cti.itf.json"


def write_ctis(report: Any, out_dir: str | Path) -> dict[tuple[str, str], str]:
    """Write every counterexample to induction of a report as ITF; returns (config, property) -> path
    (also stored in the result's meta as `cti_path`)."""
    from checker.traces import itf

    todo = [(c, r) for c in report.configs for r in c.results.values() if r.meta.get("cti") is not None]
    written: dict[tuple[str, str], str] = {}
    for c, r in todo:
        path = cti_path(out_dir, report.design, r.property, c.config)
        tr = r.meta["cti"]
        itf.write(path, tr, {"verdict": "counterexample to induction", "property": r.property,
                             "k": r.meta.get("cti_k"), "failing_after_step": r.meta.get("cti_failing"),
                             "known_lemmas_false_in_cti": r.meta.get("cti_suggest"),
                             "ledger_first_breaks": tr.meta.get("first_break", {}).get(r.property),
                             "note": "the first state satisfies every assumed invariant but is probably unreachable; "
                                     "a true lemma that is false in it rules it out"})
        written[(c.config, r.property)] = str(path)
        r.meta["cti_path"] = str(path)
    return written
