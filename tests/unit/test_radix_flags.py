"""The radix-cache / SWA-window flags of issue 27 (docs/releases.md section A), each on a concrete
scenario through the one model definition, before and after, with numbers derived by hand from
the SGLang source of the release that ships the behaviour (file:line in each test's comment)."""

from __future__ import annotations

import pytest

from model.config import Config
from model.designs import PRESETS

from .scenario import drive

CURRENT = PRESETS["current"]
ARRIVE0 = {"recv.arrive[0]": True}
EVICT0 = {"decode.evict_swa[0]": True}


def _swa_cfg(ps: int, W: int, input_len: int, max_new: int, *, full: int = 256, swa: int = 128, chunk: int | None = None,
             private_atoms: int = 4, num_reqs: int = 1, name: str = "radix_flags") -> Config:
    bounds = {"full_tokens": (full, full), "swa_tokens": (swa, swa), "sliding_window_size": (W, W),
              "input_len": (input_len, input_len), "max_new_tokens": (max_new, max_new), "req_pool_size": (2, 2),
              "max_prefill_tokens": (4096, 4096)}
    if chunk is not None:
        bounds["chunked_prefill_size"] = (chunk, chunk)
    return Config(name=name, doc="", num_reqs=num_reqs, page_size=ps, hybrid_swa=True, chunked_prefill=chunk is not None,
                  private_atoms=private_atoms, bounds=bounds)


# -- swa_release_threshold (#29860 v0.5.15.post1; v0.5.23) -------------------------------------------
# free_swa_out_of_window_slots (0.5.14:mem_cache/common.py:84-100 page_margin: pre_len - W - ps;
# 0.5.18:mem_cache/common.py:78-100 max_w_ps: pre_len - max(W, ps); 0.5.23:mem_cache/common.py:111-120
# ceil_max_w_ps: pre_len - ceil_align(max(W, ps), ps)); E first rises to P; the new E is floored.
# ps=4, W=5, a 5-token prompt: P = floor_4(5) = 4 after its prefill. Decode k (k = 1, 2, ...) runs with
# pre_len = C = 4 + k. The release fires at C = 20 (decode 16) and C = 22 (decode 18):
#   page_margin   floor_4(20 - 9) = 8,  floor_4(22 - 9) = 12
#   max_w_ps      floor_4(20 - 5) = 12, floor_4(22 - 5) = 16
#   ceil_max_w_ps floor_4(20 - 8) = 12, floor_4(22 - 8) = 12
S_THR = _swa_cfg(4, 5, 5, 40)
PICKS_THR = [ARRIVE0] + [{}] * 15 + [EVICT0] + [{}] + [EVICT0]


@pytest.mark.parametrize("variant, e20, e22", [(None, 8, 12), ("max_w_ps", 12, 16), ("ceil_max_w_ps", 12, 12)])
def test_swa_release_threshold(variant: str | None, e20: int, e22: int) -> None:
    design = CURRENT.with_fix("swa_release_threshold", variant)
    run = drive(S_THR, design, PICKS_THR)
    quiet = drive(S_THR, design, PICKS_THR[:-3] + [{}] * 3)  # the same steps, no release
    s16, s18 = run.states[17], run.states[19]
    assert (s16.kv_committed_len[0], s16.cache_protected_len[0], s16.swa_evicted_seqlen[0]) == (21, 4, e20)
    assert (s18.kv_committed_len[0], s18.swa_evicted_seqlen[0]) == (23, e22)
    # the SWA slots [P, E) went back to the SWA allocator, nothing else did
    assert s16.swa_available - quiet.states[17].swa_available == e20 - 4
    assert s18.swa_available - quiet.states[19].swa_available == e22 - 4
    assert s18.full_available == quiet.states[19].full_available
    assert not any(run.busy(t).fired for t in range(len(run.states)))
