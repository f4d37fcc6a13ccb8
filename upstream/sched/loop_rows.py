"""Rows `event_loop`, `event_loop/small3`, `event_loop/pressure`, `event_loop/sessions`, `event_loop/paged`,
`event_loop/paged_aligned`, `event_loop/aligned_page1`, `event_loop/aligned_chunk_cache`, `event_loop/aligned_three`, `event_loop/aligned_page4`, `event_loop/swa`, `event_loop/swa_page4`, `event_loop/mixed`, `event_loop/swa_mixed`, `event_loop/swa_chunk_cache`,
`event_loop/over_long_prompt`, `event_loop/chunk_cache_paged`: the scheduler loop itself, release by release (worker side).

A scenario is a random walk of kvmc's model under the release's preset on one of the project's
configs (checker/traces/walk.py: parameters drawn from the config's bounds, every choice drawn
at random), replayed on SGLang's own `Scheduler` built without a model (upstream/sched/harness.py)
with every choice of the walk forced (upstream/sched/forcing.py: eviction sets, `_evict_swa`
timing, forced retraction, arrivals, session turns and closes). After every iteration the real
state is mapped onto the model's variables and compared with the walk's (upstream/sched/driver.py
`reproduce`), together with the nodes SGLang's evict really removed, SGLang's busy check against
the model's and the ownership ledger on SGLang's objects. This is the row of everything the
transition rows cannot call in isolation: `get_next_batch_to_run` (the stash, the PrefillAdder's
pass, `prepare_for_extend`), `update_running_batch` (`check_decode_mem`, `retract_decode` and its
eviction, `prepare_for_decode`), `process_batch_result_*` (finish, `release_kv_cache`), session
saves, restores and closes.

What a row sees: whether SGLang follows the walk; at the first difference, the step, the field
and both values (`running_batch.batch_is_full` and the finished requests still in the running batch
are state both sides have since session 30; before, a skipped prefill pass was the documented
abstraction `batch_is_full`). Not covered: HiCache and EAGLE configs
(the replay cannot run them: no host transfer engine, no draft model), the per-request SWA ring.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from model.designs import Design

# row -> the config whose walks it replays (specs/configs.py)
LOOP_ROWS = {
    "event_loop": "small",
    "event_loop/small3": "small3",
    "event_loop/pressure": "pressure",
    "event_loop/sessions": "sessions",
    "event_loop/paged": "paged",
    # --enable-deterministic-inference's chunk alignment (truncation_align_size 4) on paged
    "event_loop/paged_aligned": "paged_aligned",
    # the same alignment (8) at page 1, SGLang's default page size (finding 12)
    "event_loop/aligned_page1": "aligned_page1",
    # and without a prefix tree, as --enable-deterministic-inference runs with the flashinfer backend
    "event_loop/aligned_chunk_cache": "aligned_chunk_cache",
    # three requests, the chunk size twice the alignment: a short request ahead leaves the budget unaligned
    "event_loop/aligned_three": "aligned_three",
    # page 4, an alignment of four pages
    "event_loop/aligned_page4": "aligned_page4",
    "event_loop/swa": "hybrid_swa",
    "event_loop/swa_page4": "hybrid_swa_page4",
    # the page sizes SWA models are served with (issue 62): 16 (FA3), 64 (FlashMLA / trtllm)
    "event_loop/swa_page16": "hybrid_swa_page16",
    "event_loop/swa_page64": "hybrid_swa_page64",
    "event_loop/mixed": "mixed",  # --enable-mixed-chunk: the running batch decodes inside the prefill batch
    "event_loop/swa_mixed": "hybrid_swa_mixed",  # the same with hybrid SWA (the decode's _evict_swa and SWA slots)
    # --disable-radix-cache: SWAChunkCache up to 0.5.21, a disabled UnifiedRadixCache from 0.5.22
    "event_loop/swa_chunk_cache": "hybrid_swa_chunk_cache",
    # an over-long prompt aborted at arrival (`validate_input_length`), with max_req_len = T - 1
    "event_loop/over_long_prompt": "over_long_prompt",
    # --disable-radix-cache without SWA (ChunkCache up to 0.5.21) at page 2, three requests
    "event_loop/chunk_cache_paged": "chunk_cache_paged",
}
UNFORCEABLE = "a choice SGLang cannot make here"


@dataclass(frozen=True)
class Walk:
    config: str
    seed: int
    steps: int

    def describe(self) -> str:
        return (f"random walk of config {self.config}, seed {self.seed}, {self.steps} iterations "
                f"(checker.traces.walk.random_walk)")


def walks(config: str) -> Any:
    return st.builds(Walk, st.just(config), st.integers(0, 2**31 - 1), st.integers(2, 14))


def run_walk(sc: Walk, design: Design) -> list[tuple[str, Any, Any]]:
    """One observation: the replay's verdict ("follows the walk"), or the first difference as
    (step and field, SGLang's value, kvmc's value). A walk the replay cannot run raises (an error
    of the row, never a disagreement)."""
    from checker.traces.walk import random_walk
    from specs.configs import CONFIGS

    from . import driver

    trace = random_walk(CONFIGS[sc.config], design, sc.steps, sc.seed)
    out = driver.replay(trace, "reproduce", design.name)
    status = out["status"]
    if status == driver.PASSED:
        return [("replay", "follows the walk", "follows the walk")]
    if status == driver.DIVERGED:
        label = f"step {out['step']}: {out['field']}"
        if out.get("abstraction"):  # a documented abstraction the replay recognised at that step
            label += f" ({out['abstraction']})"
        return [(label, out["sglang"], out["model"])]
    msg = out.get("message", "")
    if status == driver.NOT_REPLAYABLE and "cannot be forced" in msg:
        return [(f"step {out.get('step', '?')}: {UNFORCEABLE}", msg, "a choice the model allows here")]
    raise RuntimeError(f"the replay of {sc.describe()} ended {status}: {msg}")


def scheduler_unavailable() -> str | None:
    """Why SGLang's scheduler cannot be built in this worker, or None: its module's extra
    dependencies are not on the path, or the worker runs on a GPU (the harness is cpu only)."""
    import importlib.util

    from upstream import real

    if real.device() != "cpu":
        return f"on {real.device()}: the row builds SGLang's scheduler (upstream/sched/harness.py), which kvmc runs on cpu only"
    for mod in ("setproctitle", "fastapi", "uvicorn"):
        if importlib.util.find_spec(mod) is None:
            return ("the scheduler module's extra dependencies are not installed (upstream/sched/replay.py SCHED_DEPS; "
                    "`kvmc replay --against sglang==V --install` installs them)")
    return None


def unavailable(design: Design, version: str) -> str | None:
    return scheduler_unavailable()
