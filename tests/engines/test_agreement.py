"""Cross-engine agreement: BMC (z3) and the explicit-state search give the same verdict to the same
depth for every design preset x property x config, and a violation has the same length in both.

Instances (checker/engines/agreement.py::pinned): each named config is pinned to a handful of parameter
points, the same for both engines, small enough that the whole file runs in about a minute and a
half on a 2-core machine (z3 is the slow side: paged and hybrid-SWA encodings cost seconds per
depth, so those run to depth 2, the cheap ones to depth 3). The pins keep every property exercised
where the config allows it (the witness depths are compared too) and include the instances where
pre-fix presets fail (v0.5.10.post1 on sessions and hybrid_swa), so violations are compared, not
only `holds`. Presets that set every fix a config exercises the same way are one model on that
config (checker/engines/agreement.py::equivalent_designs) and are checked once. Per config the suite
checks the covering groups (`covering_designs`: the oldest, the newest, and groups until every variant
of every fix the config exercises is set by one of them), plus one more group, rotating over the
configs, so that every preset is checked on some config; `KVMC_AGREEMENT=all` checks every group
on every config (225 checks, about 20 minutes on 2 cores, against 100 and 9 minutes).
On a disagreement the test fails with both engines' verdicts and traces.
"""

from __future__ import annotations

import os

import pytest

from checker.engines.agreement import compare, covering_designs, equivalent_designs, pinned
from checker.engines.applies import beyond_symbolic_reach
from model.designs import PRESETS
from specs.configs import CONFIGS

# config -> (pins, depth)
INSTANCES: dict[str, tuple[dict[str, tuple[int, int]], int]] = {
    "small": (dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(1, 1)), 3),
    "paged": (dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), warm_len=(2, 2)), 2),
    # two prompts of 7 under a chunk of 6: the first truncated to 4 (not 6), the second's 2 left is OTHER
    "paged_aligned": (dict(full_tokens=(16, 16), input_len=(7, 7), max_new_tokens=(1, 1), warm_len=(0, 0),
                           chunked_prefill_size=(6, 6), max_prefill_tokens=(16, 16)), 2),
    # finding 12's point: a prompt of 18 cut to 8, a prompt of 7 admitted into the chunk budget left
    "aligned_page1": (dict(full_tokens=(24, 24), input_len=(7, 7), max_new_tokens=(2, 2), warm_len=(0, 0),
                           chunked_prefill_size=(15, 15), max_prefill_tokens=(16, 16)), 2),
    "aligned_chunk_cache": (dict(full_tokens=(24, 24), input_len=(7, 7), max_new_tokens=(2, 2),
                                 chunked_prefill_size=(15, 15), max_prefill_tokens=(16, 16)), 2),
    # page 4: two prompts of 27 under a chunk of 24, the first cut to 16 (not 24), the second's 8 left is OTHER
    "aligned_page4": (dict(full_tokens=(48, 48), input_len=(27, 27), max_new_tokens=(1, 1), warm_len=(0, 0),
                           chunked_prefill_size=(24, 24), max_prefill_tokens=(32, 32)), 2),
    # three prompts of 5 under a chunk of 16: the third is cut to 0 (under the alignment), OTHER
    "aligned_three": (dict(full_tokens=(23, 23), input_len=(5, 5), max_new_tokens=(1, 1),
                           max_prefill_tokens=(16, 16)), 2),
    "hybrid_swa": (dict(full_tokens=(12, 12), swa_tokens=(8, 8), sliding_window_size=(1, 1), chunked_prefill_size=(4, 4),
                        input_len=(3, 5), max_new_tokens=(2, 2)), 2),
    # host-only warm prefix: the load-back path (a device-warm prefix is hybrid_swa's tree, and took
    # half of this file's time again on ten preset groups)
    "hybrid_swa_hicache": (dict(input_len=(5, 5), warm_len=(2, 2), warm_device=(0, 0), warm_host=(1, 1)), 2),
    # request 0's cached chain is what request 1's load-back of the host-only warm prefix evicts
    "hicache_evict": (dict(full_tokens=(6, 6), swa_tokens=(5, 5), sliding_window_size=(2, 2), chunked_prefill_size=(4, 4),
                           input_len=(4, 4), max_new_tokens=(1, 1), warm_len=(3, 3), warm_device=(0, 0),
                           warm_host=(1, 1)), 2),
    "sessions": (dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(1, 2)), 3),
    # an unaligned first turn (3 tokens at page 2) whose slot the second turn restores
    "sessions_paged": (dict(full_tokens=(12, 12), input_len=(3, 3), max_new_tokens=(1, 1)), 3),
    "spec_topk": (dict(full_tokens=(32, 32), input_len=(1, 1), max_new_tokens=(4, 4)), 2),
    "small3": (dict(full_tokens=(5, 5), input_len=(2, 2), max_new_tokens=(1, 2), warm_len=(1, 1)), 2),
    "pressure": (dict(full_tokens=(8, 8), input_len=(1, 1), max_new_tokens=(3, 5)), 2),
    "hybrid_swa_page4": (dict(full_tokens=(16, 16), swa_tokens=(8, 8), sliding_window_size=(5, 5), chunked_prefill_size=(4, 4),
                              input_len=(5, 6), max_new_tokens=(1, 1), max_prefill_tokens=(16, 16)), 2),
    "spec_v2": (dict(full_tokens=(24, 24), input_len=(1, 2), max_new_tokens=(2, 2), max_prefill_tokens=(32, 32)), 2),
    # a prompt of 3 (an unaligned page) beside one of 1: A' = ceil_page(C + 2a) at page 2
    # both pools over-allocated to C + 2a, one request finishing (the idle checks), one decoding on
    "hybrid_swa_spec_v2": (dict(full_tokens=(24, 24), swa_tokens=(12, 12), sliding_window_size=(1, 1), input_len=(1, 1),
                                max_new_tokens=(1, 2), max_prefill_tokens=(32, 32)), 2),
    "spec_v2_paged": (dict(full_tokens=(24, 24), input_len=(1, 3), max_new_tokens=(2, 2), max_prefill_tokens=(32, 32)), 2),
    "swa_ring": (dict(full_tokens=(16, 16), input_len=(3, 3), max_new_tokens=(1, 2), chunked_prefill_size=(2, 2),
                      req_pool_size=(1, 2), max_prefill_tokens=(16, 16)), 2),
    # a request admitted at depth 2 runs beside the first one's mixed decode
    "mixed": (dict(full_tokens=(12, 12), input_len=(3, 3), max_new_tokens=(2, 2), chunked_prefill_size=(4, 4),
                   max_prefill_tokens=(26, 26)), 2),
    # a request admitted beside the running ones' mixed decode, SWA tight; about 20 s a preset group (input 2
    # and max_new 1-2 take 50 s, finding 9's own point, input (1, 3, 4), 10x more)
    "hybrid_swa_mixed": (dict(full_tokens=(17, 17), swa_tokens=(7, 7), sliding_window_size=(1, 1),
                              chunked_prefill_size=(5, 5), input_len=(1, 1), max_new_tokens=(2, 2),
                              max_prefill_tokens=(8, 8)), 2),
    # finding 10's point (a chunk parked by #23174 beside a finishing decode) at depth 3
    "hybrid_swa_chunk_cache": (dict(full_tokens=(11, 11), swa_tokens=(5, 5), sliding_window_size=(1, 1),
                                    chunked_prefill_size=(2, 2), input_len=(1, 4), max_new_tokens=(1, 2),
                                    max_prefill_tokens=(8, 8)), 3),
    # finding 11's point: two valid prompts of T - 7 and an over-long one, all arriving at once
    "over_long_prompt": (dict(full_tokens=(14, 14), input_len=(7, 20), max_new_tokens=(1, 1),
                              max_prefill_tokens=(16, 16)), 2),
    # a prompt chunked across a page boundary (chunk 2, prompt 3) beside a second request
    "chunk_cache_paged": (dict(full_tokens=(8, 8), input_len=(3, 3), max_new_tokens=(1, 2), chunked_prefill_size=(2, 2),
                               req_pool_size=(3, 3), max_prefill_tokens=(16, 16)), 2),
    # the real page sizes, prompts around two pages under a chunk of three, the window past a page;
    # beyond the z3 engines' page reach (checker/engines/applies.py): the fast and graph explicit
    # engines are compared on them, not BMC
    "hybrid_swa_page16": (dict(full_tokens=(64, 64), swa_tokens=(32, 32), sliding_window_size=(17, 17),
                               chunked_prefill_size=(48, 48), input_len=(31, 34), max_new_tokens=(1, 2),
                               max_prefill_tokens=(64, 64)), 3),
    "hybrid_swa_page64": (dict(full_tokens=(256, 256), swa_tokens=(128, 128), sliding_window_size=(99, 99),
                               chunked_prefill_size=(192, 192), input_len=(127, 130), max_new_tokens=(1, 2),
                               max_prefill_tokens=(256, 256)), 3),
    # HiCache at those page sizes: a host-only warm prefix (two one-page nodes) that the prompts (two pages
    # and a bit) load back
    "hybrid_swa_hicache_page16": (dict(full_tokens=(96, 96), swa_tokens=(96, 96), sliding_window_size=(20, 20),
                                       chunked_prefill_size=(32, 32), input_len=(33, 34), max_new_tokens=(1, 2),
                                       warm_len=(16, 16), warm_device=(0, 0), warm_host=(1, 1),
                                       max_prefill_tokens=(64, 64)), 3),
    "hybrid_swa_hicache_page64": (dict(full_tokens=(384, 384), swa_tokens=(384, 384), sliding_window_size=(80, 80),
                                       chunked_prefill_size=(128, 128), input_len=(129, 130), max_new_tokens=(1, 2),
                                       warm_len=(64, 64), warm_device=(0, 0), warm_host=(1, 1),
                                       max_prefill_tokens=(256, 256)), 3),
}

# BMC against explicit where z3 checks the config (not at page 16 or 64: beyond_symbolic_reach)
SYMBOLIC = [c for c in CONFIGS if not beyond_symbolic_reach("bmc", CONFIGS[c])]
if os.environ.get("KVMC_AGREEMENT") == "all":
    CASES = [(c, group) for c in SYMBOLIC for group in equivalent_designs(CONFIGS[c])]
else:
    CASES = [(c, group) for k, c in enumerate(SYMBOLIC) for group in covering_designs(CONFIGS[c], rotate=k)]


def test_every_config_and_every_preset_is_covered() -> None:
    assert set(INSTANCES) == set(CONFIGS)
    for c in CONFIGS:
        assert sorted(sum(equivalent_designs(CONFIGS[c]), [])) == sorted(PRESETS)
    # every preset is checked on some config, and on each config every variant of every fix it exercises
    assert {d for _c, g in CASES for d in g} == set(PRESETS)
    from checker.engines.run import FIX_FEATURES, features
    from model.designs import FIXES

    for c in SYMBOLIC:
        feats = features(CONFIGS[c])
        relevant = [f for f in FIXES if f not in FIX_FEATURES or set(FIX_FEATURES[f]) & feats]
        checked = {(f, PRESETS[g[0]].variant(f)) for cc, g in CASES if cc == c for f in relevant}
        every = {(f, PRESETS[d].variant(f)) for d in PRESETS for f in relevant}
        assert checked == every, (c, sorted(every - checked, key=str))


def hybrid(config: str) -> bool:
    """The hybrid-SWA and HiCache configs (z3's slowest): their agreement checks are
    tests/engines/test_agreement_hybrid.py, so that pytest-xdist (--dist loadfile) runs the two
    halves on two workers."""
    return config.startswith(("hybrid_swa", "hicache"))


def disagreements(config: str, group: list[str]) -> list[str]:
    """What BMC and the explicit engine disagree on at the config's pinned instance, for the group's
    first preset (its presets are equivalent on the config): verdict by verdict, and the property sets."""
    pins, depth = INSTANCES[config]
    cfg = pinned(CONFIGS[config], **pins)
    bmc, explicit, bad = compare(PRESETS[group[0]], cfg, depth)
    out = [f"{config} x {group} disagree to depth {depth}:\n{d.describe()}" for d in bad]
    if set(bmc) != set(explicit):
        out.append(f"{config} x {group}: properties checked differ: bmc {sorted(bmc)}, explicit {sorted(explicit)}")
    return out


OTHER = [(c, g) for c, g in CASES if not hybrid(c)]


@pytest.mark.parametrize("config, group", OTHER, ids=[f"{c}-{'+'.join(g)}" for c, g in OTHER])
def test_bmc_and_explicit_agree(config: str, group: list[str]) -> None:
    bad = disagreements(config, group)
    assert bad == [], "\n\n".join(bad)


FAST_CASES = [(c, equivalent_designs(CONFIGS[c])[0][0]) for c in INSTANCES if c in CONFIGS]


@pytest.mark.parametrize("config, design", FAST_CASES, ids=[f"{c}-{d}" for c, d in FAST_CASES])
def test_fast_and_graph_explicit_engines_agree(config: str, design: str) -> None:
    """The fast explicit engine (`--engine explicit`, checker/engines/explicit.py) and the graph engine
    it replaced (checker/engines/explicit_graph.py) on every config's pinned instance, the first preset
    of its first group (the oldest: where the violations are): the same states, verdicts, depths,
    witnesses and counterexample lengths, on the same parameter point."""
    from checker.engines.explicit import Explorer, FastExplorer
    from checker.verdict import Verdict
    from model.system import System

    pins, depth = INSTANCES[config]
    system = System(pinned(CONFIGS[config], **pins), PRESETS[design])
    old = Explorer(system, None).run(depth, keep_going=True)
    new = FastExplorer(system, None).run(depth, keep_going=True)
    assert (new.distinct_states, new.transitions, new.exhausted_at) == (old.distinct_states, old.transitions, old.exhausted_at)
    for p, r in old.results.items():
        q = new.results[p]
        assert (q.verdict, q.depth) == (r.verdict, r.depth), (p, q.words(), r.words())
        if r.verdict is not Verdict.VIOLATED:  # a violated property's witness is moot (the graph engine stops tracking it)
            assert q.witness_depth == r.witness_depth, (p, q.witness_depth, r.witness_depth)
        if r.verdict is Verdict.VIOLATED:
            assert q.trace is not None and r.trace is not None
            assert (q.trace.depth, q.trace.params) == (r.trace.depth, r.trace.params), p
