"""The planted bugs (model/mutants/) and the known SGLang bugs, each with the bounded instance on
which every engine is asked to find it: data shared by the quality tests (tests/quality/), the
mutant table (docs/mutants.md, `python -m checker.engines.cases --table`) and the engine benchmark
(bench/engines.py).

Each case pins a named config to a few parameter points (`checker/engines/agreement.py::pinned`: the
same points for z3 and for the explicit search) chosen from BMC's minimised counterexample on the
config's full bounds, and states the depth of the shortest counterexample there. BMC and the
explicit search must both report exactly that depth; the random engine must find it within its
example budget at most `random_depth` steps long, or the case says why it is out of its reach.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.config import Config
from model.designs import PRESETS, Design
from specs.configs import CONFIGS


@dataclass(frozen=True)
class Case:
    name: str  # mutant name, or the fix whose absence is the known bug
    config: str
    prop: str
    depth: int  # length of the shortest counterexample on the pinned instance
    pins: dict[str, tuple[int, int]] = field(default_factory=dict)
    random_examples: int = 300
    random_depth: int = 0  # stateful_step_count for the random engine (0: depth + 2)
    random_out_of_reach: str = ""  # why the random engine is not expected to find it (empty: it must)
    base: str = "current"  # the preset the bug is planted in (EAGLE v1's config needs a release that ships it)

    def cfg(self) -> Config:
        from model.config import pinned

        return pinned(CONFIGS[self.config], **self.pins)

    def design(self) -> Design:
        from model.mutants import available

        if self.name in available():
            return PRESETS[self.base].with_mutants(frozenset({self.name}))
        return PRESETS[self.base].with_fix(self.name, None)

    @property
    def steps_for_random(self) -> int:
        return self.random_depth or self.depth + 2


_SMALL = dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1))
_PAGED = dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(2, 2))
_SWA = dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
            input_len=(3, 3), max_new_tokens=(2, 2))
_SESS = dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2))
_V1 = "v0.5.13"  # the newest preset with EAGLE v1 (spec_topk); `current` runs spec v2 only

MUTANT_CASES: list[Case] = [
    Case("req_slot_not_taken", "small", "conservation", 1, _SMALL),
    Case("unfinished_keeps_protected_len", "small", "conservation", 1, _SMALL),
    Case("dec_lock_ref_forgets_evictable", "small", "well_formed", 1, _SMALL),
    Case("prefill_budget_forgets_extend", "small", "no_prefill_oom", 1,
         dict(full_tokens=(9, 9), input_len=(4, 6), max_new_tokens=(1, 1), warm_len=(0, 0), max_prefill_tokens=(11, 11))),
    Case("evict_keeps_nodes", "small", "conservation", 2,
         dict(full_tokens=(7, 7), input_len=(4, 4), max_new_tokens=(1, 1), warm_len=(0, 0), req_pool_size=(1, 1),
              max_prefill_tokens=(4, 4))),
    Case("session_slot_counted_after_release", "sessions", "conservation", 2, _SESS),
    # save_from_req copies a turn's KV into the slot up to 0.5.21; from 0.5.22 the slot owns the
    # record from the first turn's row allocation (session_record=owned_at_alloc) and nothing is copied
    Case("save_from_req_forgets_protected", "sessions", "conservation", 2, _SESS, base="v0.5.21"),
    Case("retract_forgets_free", "sessions", "conservation", 3, _SESS),
    Case("finished_tail_freed_twice", "paged", "conservation", 1, _PAGED),
    Case("finish_frees_overalloc_from_floor", "paged", "conservation", 1, _PAGED),
    Case("alloc_decode_page_off_by_one", "paged", "conservation", 2,
         dict(full_tokens=(8, 8), chunked_prefill_size=(2, 2), input_len=(1, 1), max_new_tokens=(2, 2), warm_len=(0, 0))),
    Case("swa_alloc_skips_swa_pool", "hybrid_swa", "conservation", 1, _SWA),
    Case("evict_swa_ignores_protected", "hybrid_swa", "conservation", 2,
         dict(full_tokens=(5, 5), swa_tokens=(4, 4), sliding_window_size=(1, 1), chunked_prefill_size=(2, 2),
              input_len=(1, 1), max_new_tokens=(1, 2))),
    Case("evict_ignores_swa_shortfall", "hybrid_swa", "no_prefill_oom", 3,
         dict(input_len=(3, 6), max_new_tokens=(1, 1))),
    Case("chunked_req_ignores_rem_swa", "hybrid_swa", "no_prefill_oom", 2,
         dict(full_tokens=(7, 7), swa_tokens=(4, 4), sliding_window_size=(3, 3), chunked_prefill_size=(3, 3),
              max_prefill_tokens=(8, 8), input_len=(1, 5), max_new_tokens=(1, 1))),
    Case("decode_mem_checks_full_pool_only", "hybrid_swa", "no_decode_oom", 3,
         dict(full_tokens=(16, 16), swa_tokens=(5, 5), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
              input_len=(1, 1), max_new_tokens=(3, 3))),
    Case("evict_swa_skips_free_swa", "hybrid_swa", "conservation", 4,
         dict(full_tokens=(12, 12), swa_tokens=(12, 12), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
              input_len=(2, 2), max_new_tokens=(6, 6), req_pool_size=(1, 1))),
    # 0.5.18+ inserts with swa_evicted_seqlen at the first chunk stash (unfinished_swa_release)
    Case("insert_ignores_swa_evicted", "hybrid_swa", "conservation", 1,
         dict(full_tokens=(7, 7), swa_tokens=(5, 5), sliding_window_size=(1, 1), chunked_prefill_size=(3, 3),
              max_prefill_tokens=(8, 8), input_len=(1, 3), max_new_tokens=(1, 2))),
    Case("load_back_skips_swa_alloc", "hybrid_swa_hicache", "conservation", 1,
         dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 1), warm_host=(1, 1))),
    Case("verify_keeps_rejected_page", "spec_topk", "conservation", 2,
         dict(full_tokens=(32, 32), input_len=(1, 1), max_new_tokens=(4, 4)), base=_V1),
    Case("spec_v2_records_short_alloc", "spec_v2", "conservation", 2,
         dict(full_tokens=(24, 24), input_len=(1, 1), max_new_tokens=(3, 3))),
    Case("inc_lock_ref_forgets_protected", "small", "well_formed", 1, _SMALL),
    Case("finished_prefill_also_cached", "small", "conservation", 1, _SMALL),
    Case("add_one_req_skips_locked_recheck", "small", "no_prefill_oom", 1,
         dict(full_tokens=(4, 4), input_len=(5, 5), max_new_tokens=(1, 1), warm_len=(4, 4), req_pool_size=(1, 1),
              max_prefill_tokens=(4, 4))),
    Case("free_drops_last_page", "small", "conservation", 2,
         dict(full_tokens=(7, 7), input_len=(4, 4), max_new_tokens=(1, 1), warm_len=(0, 0), req_pool_size=(1, 1),
              max_prefill_tokens=(4, 4))),
    # on `small` every row is a running request's, so `pp_max - running_bs` already bounds the loop and
    # the mutant is equivalent; a finished session turn keeps its row outside the running batch
    Case("prefill_loop_reads_pool_size", "sessions", "no_prefill_oom", 2,
         dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 1), req_pool_size=(1, 1))),
    Case("decode_runs_retracted_reqs", "sessions", "conservation", 2,
         dict(full_tokens=(9, 9), input_len=(1, 1), max_new_tokens=(2, 2))),
    Case("restore_forgets_protected_len", "sessions", "conservation", 3, _SESS),
    Case("close_session_while_turn_runs", "sessions", "conservation", 2, _SESS),
    Case("swa_budget_window_unclamped", "hybrid_swa", "no_prefill_oom", 1,
         dict(full_tokens=(10, 10), swa_tokens=(3, 3), sliding_window_size=(8, 8), chunked_prefill_size=(5, 5),
              input_len=(4, 4), max_new_tokens=(1, 1))),
    # a read-only transition: two requests admitted in one pass, each gated against the whole SWA pool
    Case("rem_swa_tokens_forgets_offset", "hybrid_swa", "no_prefill_oom", 1,
         dict(full_tokens=(9, 9), swa_tokens=(4, 4), sliding_window_size=(1, 1), chunked_prefill_size=(5, 5),
              max_prefill_tokens=(8, 8), input_len=(2, 7), max_new_tokens=(1, 1))),
    # free_swa frees nothing until 3 decode steps slide tokens out of the window: max_new_tokens 6 lies
    # outside hybrid_swa's bounds (1-4), so `kvmc check --config hybrid_swa` cannot reach it; the pins can
    Case("free_swa_keeps_index_mapping", "hybrid_swa", "conservation", 4,
         dict(full_tokens=(12, 12), swa_tokens=(12, 12), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
              input_len=(2, 2), max_new_tokens=(6, 6), req_pool_size=(1, 1))),
    Case("load_back_allocs_swa_for_whole_hit", "hybrid_swa_hicache", "conservation", 1,
         dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 1), warm_host=(1, 1))),
    Case("loading_check_skips_evictable_move", "hybrid_swa_hicache", "well_formed", 2,
         dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 1), warm_host=(1, 1), max_new_tokens=(1, 2))),
    Case("verify_keeps_allocated_len", "spec_topk", "conservation", 2,
         dict(full_tokens=(32, 32), input_len=(1, 1), max_new_tokens=(4, 4)), base=_V1),
    Case("adder_reservation_sign_flipped", "spec_topk", "no_prefill_oom", 2,
         dict(full_tokens=(15, 15), input_len=(8, 8), max_new_tokens=(1, 5)), base=_V1),
    # a liveness bug (specs/liveness.py): the depth is the lasso's length (prefix and loop)
    Case("admission_ignores_evictable", "small", "progress", 4,
         dict(full_tokens=(7, 7), input_len=(3, 3), max_new_tokens=(2, 2), warm_len=(0, 0)),
         random_out_of_reach="a liveness violation is an infinite run (a lasso); the random engine checks finite runs "
                             "against state properties only"),
    # bugs only the properties of issue 29 see (the six hold on these instances; tests/quality/test_new_properties.py)
    Case("unfinished_lock_left_behind", "small", "residency", 1, _SMALL),
    Case("evict_swa_forgets_window", "hybrid_swa", "residency", 4,
         dict(full_tokens=(12, 12), swa_tokens=(12, 12), sliding_window_size=(4, 4), chunked_prefill_size=(4, 4),
              input_len=(2, 2), max_new_tokens=(5, 5), req_pool_size=(1, 1))),
    Case("finished_req_keeps_lock", "small", "lock_ledger", 1, _SMALL),
    Case("spec_v2_window_from_allocated_len", "hybrid_swa_spec_v2", "residency", 3,
         dict(full_tokens=(24, 24), swa_tokens=(12, 12), sliding_window_size=(2, 2), input_len=(1, 1),
              max_new_tokens=(4, 4), req_pool_size=(1, 1))),
    Case("idle_check_ignores_session_rows", "sessions", "idle_check_sound", 2, _SESS),
]


def case(name: str) -> Case:
    for c in MUTANT_CASES:
        if c.name == name:
            return c
    raise KeyError(f"no quality case for {name!r}; expected one of {[c.name for c in MUTANT_CASES]}")


def run_case(c: Case, engine: str, **kw: Any) -> Any:
    """One engine on one case: the `bmc.Result` of the case's property."""
    from model.system import System

    cfg, design = c.cfg(), c.design()
    system = System(cfg, design)
    from specs.liveness import LIVENESS

    if c.prop in LIVENESS and engine in ("bmc", "explicit"):  # lassos (checker/engines/liveness.py)
        from checker.engines import liveness

        if engine == "bmc":
            return liveness.LassoBMC(system, [c.prop], minimize=kw.get("minimize", True)).run(c.depth)[c.prop]
        return liveness.explicit_lassos(system, [c.prop], c.depth)[c.prop]
    if engine == "bmc":
        from checker.engines.bmc import BMC

        return BMC(system, [c.prop], **kw).run(c.depth, stop_on_violation=True)[c.prop]
    if engine == "explicit":
        from checker.engines.explicit import Explorer

        return Explorer(system, [c.prop], **kw).run(c.depth, keep_going=False).results[c.prop]
    if engine == "random":
        from checker.engines.random_engine import check_config

        rep = check_config(design, cfg, [c.prop], c.steps_for_random, examples=kw.get("examples", c.random_examples))
        return rep.results[c.prop]
    raise KeyError(f"unknown engine {engine!r}; expected bmc, explicit or random")


def table_cells(c: Case) -> list[str]:
    """Each engine's depth and wall-clock seconds on the case (as the quality tests run it)."""
    import time

    cells = []
    for engine in ("bmc", "explicit", "random"):
        if engine == "random" and c.random_out_of_reach:
            cells.append("out of reach")
            continue
        kw = dict(minimize=False, use_lemmas=False) if engine == "bmc" else {}
        t0 = time.perf_counter()
        r = run_case(c, engine, **kw)
        dt = time.perf_counter() - t0
        found = r.verdict.value == "violated"
        cells.append(f"{r.depth} ({dt:.1f}s)" if found else f"missed: {r.words()}")
    return cells


def table_row(c: Case) -> str:
    """One markdown row: the case and each engine's depth and wall-clock seconds on it."""
    from model.mutants import available

    replaces = available()[c.name].REPLACES
    return f"| `{c.name}` | `{replaces}` | {c.config} | {c.prop} | " + " | ".join(table_cells(c)) + " |"


TABLE_HEAD = """# Planted bugs and the depth at which each engine finds them

Printed by `python -m checker.engines.cases --table`, which runs every case of
`checker/engines/cases.py` (the same cases `tests/quality/test_mutants.py` asserts).
Depth = scheduler iterations of the counterexample each engine reported on the case's pinned instance
(the config's parameters pinned to the listed points, identical for all engines). BMC and explicit report the
shortest counterexample; random reports Hypothesis's shrunk failing run (budget: 300 runs of at most depth+2 steps).

| mutant | replaces | config | property | BMC | explicit | random |
|---|---|---|---|---|---|---|
"""

TABLE_FOOT = """
Times are wall-clock seconds on a shared 2-core machine, for reading only (ratios: bench/engines.py).
"""


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m checker.engines.cases", description="the planted-bug table (docs/mutants.md)")
    ap.add_argument("--table", action="store_true", help="run every case on every engine and print the table")
    ap.add_argument("--json", action="store_true", help="run every case on every engine and print docs/data/planted.json "
                    "(then `python -m docs` puts it in docs/mutants.md)")
    ap.add_argument("--only", nargs="*", default=None, help="only these cases (rows only)")
    args = ap.parse_args(argv)
    if args.json:
        import json

        rows = []
        for c in ([case(n) for n in args.only] if args.only else MUTANT_CASES):
            bmc, explicit, rnd = table_cells(c)
            rows.append({"mutant": c.name, "bmc": bmc, "explicit": explicit, "random": rnd})
        json.dump({"provenance": "the depth (wall-clock seconds) of the counterexample each engine reported on each planted "
                   "bug's pinned instance (times for reading only; ratios: bench/engines.py); refresh with `python -m "
                   "checker.engines.cases --json > docs/data/planted.json`, then `python -m docs`",
                   "command": "python -m checker.engines.cases --json", "rows": rows}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    if not args.table:
        ap.print_help()
        return 2
    cases = [case(n) for n in args.only] if args.only else MUTANT_CASES
    if not args.only:
        sys.stdout.write(TABLE_HEAD)
    for c in cases:
        print(table_row(c), flush=True)
    if not args.only:
        sys.stdout.write(TABLE_FOOT)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
