"""Finding 12 (docs/findings.md): with `--truncation-align-size` a chunk cut down to the alignment
leaves chunk budget, the pass goes on and admits a request into memory the chunked request's later
chunks need, and the continuation's fallback to the whole chunk (`available_chunk_tokens` when the
budget is spent) runs the pool out: "Prefill out of memory".

What the tests pin: the BMC and the explicit engine find it on `aligned_page1` (page 1,
alignment 8) at depth 3, the second request admitted in the pass that cut the first; the same
instance without the alignment holds (the cut chunk takes the whole chunk budget and the pass ends),
so the alignment is the cause; and the explicit engine's trace has the chunked request's
max_new_tokens unclipped, so it is not the enqueue clip's corner. (The random engine draws the one
failing point of the 144 about once in 600 runs: too slow for a test.) And on `aligned_three`, the
chunk size twice the alignment as deployments set it (8192 and 4096): the BMC finds it there too, a
short request ahead in the pass making the chunk budget unaligned; with that request's prompt a
multiple of the alignment the same point holds."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from checker.engines import bmc as bmc_mod
from checker.engines.agreement import pinned
from checker.engines.run import run_check
from checker.verdict import Verdict
from model import enqueue
from model.config import concrete_params
from model.designs import PRESETS
from model.ops import Concrete
from model.state import CHUNKED, OOM_PREFILL, RUNNING
from model.system import System
from specs.configs import CONFIGS

CFG = CONFIGS["aligned_page1"]


@pytest.fixture
def no_bmc_lemmas(monkeypatch: pytest.MonkeyPatch) -> None:
    """The BMC without specs/lemmas.py's strengthening invariants as extra goals: a lemma is asserted
    only where it was checked to hold, so it changes no verdict and no counterexample (the same
    trace at the same depth here), only how hard the queries are, and at depth 3 asking them costs
    more than it saves (aligned_page1 7.7 s to 4.5 s, aligned_three 15 s to 12.5 s). Lemmas only
    speed up proofs (as in tests/quality/test_mutants.py); tests/engines/test_lemmas_hold.py checks them."""
    monkeypatch.setattr(bmc_mod, "LEMMAS", {})


def _is_finding_12(res: Any, cfg: Any = CFG) -> None:
    assert res.verdict is Verdict.VIOLATED and res.trace is not None, res.words()
    assert res.depth == 3, res.words()
    first, last = res.trace.states[1], res.trace.states[-1]
    assert last.oom == OOM_PREFILL
    # the pass that cut request 0's chunk also admitted request 1 (it ran beside the chunk)
    assert first.status[0] == CHUNKED and first.status[1] == RUNNING, (first.status, first.kv_committed_len)
    # the chunk's extend (past a warm prefix, which the whole-bounds explicit points include) is the aligned part
    assert (first.kv_committed_len[0] - first.cache_protected_len[0]) % cfg.truncation_align_size == 0, \
        (first.kv_committed_len, first.cache_protected_len)


@pytest.mark.parametrize("config", ["aligned_page1", "aligned_chunk_cache"])
@pytest.mark.parametrize("engine", ["bmc", "explicit"])
def test_finding_12(engine: str, config: str, no_bmc_lemmas: None) -> None:
    res = run_check(PRESETS["current"], [config], ["no_prefill_oom"], 3, prove=False, engine=engine).configs[0] \
        .results["no_prefill_oom"]
    _is_finding_12(res)
    if engine == "explicit":  # a valid prompt (max_new_tokens clipped to at least 1): finding 12, not finding 11
        t = res.trace
        x = System(CFG, PRESETS["current"]).ctx(Concrete(), t.params)
        assert 0 < enqueue.max_new_tokens(x, t.states[0], 0) <= t.params.max_new_tokens[0], t.params


def test_without_the_alignment_the_same_instance_holds() -> None:
    unaligned = replace(pinned(CFG, full_tokens=(24, 24), chunked_prefill_size=(15, 15), input_len=(7, 18),
                               max_new_tokens=(2, 2), warm_len=(0, 0), max_prefill_tokens=(16, 16)),
                        truncation_align_size=None)
    aligned = replace(unaligned, truncation_align_size=CFG.truncation_align_size)
    for cfg, want in ((unaligned, Verdict.HOLDS_TO_DEPTH), (aligned, Verdict.VIOLATED)):
        from checker.engines.explicit import Explorer

        res = Explorer(System(cfg, PRESETS["current"]), ["no_prefill_oom"]).run(4).results["no_prefill_oom"]
        assert res.verdict is want, (cfg.truncation_align_size, res.words())


def test_finding_12_at_a_chunk_size_that_is_a_multiple_of_the_alignment(no_bmc_lemmas: None) -> None:
    cfg = CONFIGS["aligned_three"]
    assert cfg.bound("chunked_prefill_size") == (16, 16) and 16 % cfg.truncation_align_size == 0
    res = run_check(PRESETS["current"], ["aligned_three"], ["no_prefill_oom"], 3, prove=False).configs[0] \
        .results["no_prefill_oom"]
    assert res.verdict is Verdict.VIOLATED and res.depth == 3 and res.trace is not None, res.words()
    p, first = res.trace.params, res.trace.states[1]
    # one request chunked at a multiple of the alignment, admitted behind a prompt that is not one,
    # and another running beside it in the same pass
    (r,) = [i for i in range(3) if first.status[i] == CHUNKED]
    assert first.kv_committed_len[r] % cfg.truncation_align_size == 0, first.kv_committed_len
    assert any(p.input_len[q] % cfg.truncation_align_size for q in range(r)), p.input_len
    assert any(first.status[q] == RUNNING for q in range(r + 1, 3)), first.status


def test_a_short_request_ahead_is_what_unaligns_the_budget() -> None:
    from checker.engines.explicit import Explorer

    cfg = CONFIGS["aligned_three"]
    system = System(cfg, PRESETS["current"])
    point = replace(concrete_params(cfg), full_tokens=23, chunked_prefill_size=16, max_prefill_tokens=10,
                    req_pool_size=3, input_len=(1, 17, 7), max_new_tokens=(1, 1, 2))
    found = Explorer(system, ["no_prefill_oom"], points=[point]).run(4).results["no_prefill_oom"]
    assert found.verdict is Verdict.VIOLATED and found.depth == 3, found.words()
    aligned_ahead = replace(point, input_len=(8, 17, 7))
    held = Explorer(system, ["no_prefill_oom"], points=[aligned_ahead]).run(4).results["no_prefill_oom"]
    assert held.verdict is Verdict.HOLDS_TO_DEPTH, held.words()


def test_at_page_4_the_alignment_must_exceed_the_page() -> None:
    """`aligned_page4` (alignment 16 at page 4): the leftover of an aligned cut (up to 15 tokens) is more
    than the page the admission gate reserves, and finding 12 is back; with an alignment of one page
    (4) the same points hold, as `paged_aligned` does at page 2. The points: the explicit grid's
    corner around the finding (prompts 23-27 and 3-7), not the whole grid (2,116 points, 40 s)."""
    import itertools

    from checker.engines.explicit import Explorer

    cfg = CONFIGS["aligned_page4"]
    c0 = replace(concrete_params(cfg), full_tokens=32, chunked_prefill_size=24, max_prefill_tokens=32, req_pool_size=2)
    points = [replace(c0, input_len=(a, b), max_new_tokens=m)
              for a, b, m in itertools.product(range(23, 28), range(3, 8), itertools.product((1, 2), (1, 2)))]
    res = Explorer(System(cfg, PRESETS["current"]), ["no_prefill_oom"], points=points).run(4).results["no_prefill_oom"]
    _is_finding_12(res, cfg)
    assert res.trace.states[1].kv_committed_len[0] > cfg.page_size
    one_page = replace(cfg, truncation_align_size=cfg.page_size)
    held = Explorer(System(one_page, PRESETS["current"]), ["no_prefill_oom"], points=points).run(4).results["no_prefill_oom"]
    assert held.verdict is Verdict.HOLDS_TO_DEPTH, held.words()


def test_a_chunk_size_that_is_not_a_page_multiple_is_refused() -> None:
    """Every release's server_args asserts `chunked_prefill_size % page_size == 0` (0.5.10.post1 ...
    0.5.23): a config or an instance that allows another chunk size describes a server SGLang does
    not start, so it is refused in one line, and the random draws stay on page multiples."""
    import random

    import pytest

    from checker.traces.walk import pick_params

    page4 = CONFIGS["hybrid_swa_page4"]
    with pytest.raises(ValueError, match=r"explicit_bounds\['chunked_prefill_size'\]=\(5, 5\) must be multiples of page_size=4"):
        pinned(page4, chunked_prefill_size=(5, 5))
    with pytest.raises(ValueError, match=r"bounds\['chunked_prefill_size'\]=\(4, 10\) must be multiples"):
        replace(page4, bounds={**page4.bounds, "chunked_prefill_size": (4, 10)})
    rng = random.Random(0)
    assert {pick_params(page4, rng).chunked_prefill_size % 4 for _ in range(200)} == {0}
