"""kvmc's traces replayed on SGLang's own scheduler (`kvmc replay --against sglang==V`).

SGLang's real `Scheduler` is built without a model (`Scheduler.__new__` plus the attributes
`init_model_worker` / `build_kv_cache` would set, then SGLang's own `init_*` methods); requests go
through `process_input_requests` / `handle_generate_request`; every step runs the event loop's
`get_next_batch_to_run`, `process_batch_result`, SGLang's busy check and (when nothing ran) its
idle check for real. Only `run_batch`'s model forward is replaced (a fixed token per request
position). kvmc's free choices (eviction set, `_evict_swa` timing, forced retraction, arrivals,
session turns and closes) are forced on the real objects; after every step the real state is mapped
onto the model's variables (upstream/sched/abstraction.py) and compared with the trace, and kvmc's
`conservation` ledger is evaluated on the real objects (upstream/sched/ledger.py).

Modules, lowest first:
    releases.py     which fix each release has, and which fixes can be reverted in which release
                    (parent side: imports no SGLang)
    reverts.py      the revert patches, applied with SGLang's own `debug_utils.source_patcher`
    harness.py      the real scheduler built without a model, one step per model step (worker side)
    forcing.py      kvmc's free choices forced on the real objects
    abstraction.py  real objects -> model State (the refinement map)
    ledger.py       kvmc's ownership ledger on the real objects (allocator free lists, tree values,
                    req_to_token rows, session slots)
    driver.py       one trace: step, compare, first divergence, verdict (worker side)
    worker.py       `python -m upstream.sched.worker`: many traces per process, one release
    replay.py       the parent: `kvmc replay --against`, `kvmc check --confirm sglang==V`
    explore.py      `kvmc explore`'s worker: seeded walks of environment events, SGLang choosing the rest,
                    kvmc's properties judged on the real objects, shrinking (parent: upstream/explore.py)

Layering: like checker/replay/, this package reads traces (checker/traces/) and imports model/ and
specs/; SGLang is imported only inside the worker subprocess, whose PYTHONPATH selects the release
(upstream/install.py::release_path).
"""
