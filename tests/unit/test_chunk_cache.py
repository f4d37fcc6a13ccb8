"""The chunk cache (`--disable-radix-cache`; config `hybrid_swa_chunk_cache`, model/config.py
`chunk_cache`): no prefix tree, a request's KV stays in its row until it finishes or is retracted,
and with hybrid SWA each extend first releases the request's out-of-window SWA.

What the tests pin: the model never makes a node and never gives a request a tree part; a chunked
request releases SWA at its next extend (never without the flag: the radix configs' chunked request
keeps E = 0 before 0.5.18); kvmc's torch pool follows the model's walks state for state; the BMC
finds docs/findings.md finding 10 (the busy check misses a parked chunked request's uncached KV) on
the releases before #37502 and proves the properties on `current`."""

from __future__ import annotations

import pytest

from checker.engines.run import run_check
from checker.replay.pool import replay_trace
from checker.traces.walk import random_walk
from checker.verdict import Verdict
from model.designs import PRESETS
from model.state import CHUNKED
from specs.configs import CONFIGS

CFG = CONFIGS["hybrid_swa_chunk_cache"]


def _walks(design: str, n: int = 60, steps: int = 8) -> list:
    return [random_walk(CFG, PRESETS[design], steps, seed) for seed in range(n)]


@pytest.mark.parametrize("design", ["v0.5.13", "current"])
def test_no_tree_and_the_extend_releases_swa(design: str) -> None:
    released_while_chunked = 0
    for t in _walks(design):
        for st in t.steps:
            s = st.state
            assert not any(s.node_len), (t.seed if hasattr(t, "seed") else "", s.node_len)
            assert not any(s.cache_protected_len), s.cache_protected_len
            released_while_chunked += sum(1 for r in range(CFG.num_reqs)
                                          if s.status[r] == CHUNKED and s.swa_evicted_seqlen[r] > 0)
    assert released_while_chunked > 0, "no walk released a chunked request's SWA at its next extend"


def test_a_radix_cache_chunked_request_releases_nothing_before_0_5_18() -> None:
    """The contrast: on `hybrid_swa` (SWARadixCache, v0.5.13) a chunked request's E stays 0 (the
    lemma `request_rows`), so the walks above see the chunk cache's own release."""
    cfg = CONFIGS["hybrid_swa"]
    for seed in range(60):
        t = random_walk(cfg, PRESETS["v0.5.13"], 8, seed)
        for st in t.steps:
            s = st.state
            assert all(s.swa_evicted_seqlen[r] == 0 for r in range(cfg.num_reqs) if s.status[r] == CHUNKED)


@pytest.mark.parametrize("design", ["v0.5.10.post1", "v0.5.11", "v0.5.13", "v0.5.21", "current"])
def test_the_pool_follows_the_model(design: str) -> None:
    for i, t in enumerate(_walks(design, n=25)):
        o = replay_trace(t, "cpu", f"{design} walk {i}")
        assert o.status == "passed", (design, i, o.status, o.step, o.field, o.model, o.pool, o.message)


@pytest.mark.parametrize("design, depth", [("v0.5.13", 3), ("v0.5.19", 3)])
def test_finding_10_parked_chunk_busy_check(design: str, depth: int) -> None:
    rep = run_check(PRESETS[design], ["hybrid_swa_chunk_cache"], ["busy_check_sound"], depth, prove=False)
    res = rep.configs[0].results["busy_check_sound"]
    assert res.verdict is Verdict.VIOLATED and res.depth == depth, res.words()
    last = res.trace.steps[-1].state
    assert CHUNKED in last.status and last.last_batch == 2  # a decode ran; the chunked request sat out


def test_finding_10_absent_with_37502() -> None:
    rep = run_check(PRESETS["v0.5.20"], ["hybrid_swa_chunk_cache"], ["busy_check_sound"], 4, prove=False)
    res = rep.configs[0].results["busy_check_sound"]
    assert res.verdict is Verdict.HOLDS_TO_DEPTH, res.words()


def test_current_is_proved_but_finding_1() -> None:
    props = ["no_prefill_oom", "no_decode_oom", "conservation", "busy_check_sound", "busy_check_complete", "residency"]
    rep = run_check(PRESETS["current"], ["hybrid_swa_chunk_cache"], props, 2, prove=True, engine="induction")
    for p in props:
        res = rep.configs[0].results[p]
        assert res.verdict is Verdict.PROVED, (p, res.words())
