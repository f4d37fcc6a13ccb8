"""`python -m upstream.sched.worker`: replay many traces on one SGLang release in one process
(worker side; its PYTHONPATH selects the release, upstream/install.py::release_path).

Reads one JSON job on stdin: {"version": V, "jobs": [{"file": F, "mode": "reproduce" | "events",
"label": L, "reverts": [fix, ...]}, ...]}. Jobs run in order; each job's reverts
(upstream/sched/reverts.py) are applied before its scheduler is built and undone after it (SGLang's
own PatchState.restore), so one process serves a release with and without a fix. Prints one JSON
document on stdout: {"version", "import_seconds", "family", "outcomes": [{"file", "status",
"reverted", ...}]}. Importing SGLang costs most of a replay (8-26 s); each trace after the first
costs a fraction of a second. `--serve` (upstream/serve.py, inside `shared_workers()`): the release
is set up once and each job, one per stdin line, runs in a fork of the set-up process.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any


def _setup() -> dict[str, Any]:
    """Import and set up the release (what every job shares): {"import_seconds", "family"}, or
    {"error", "detail"} where the release does not import on this machine."""
    t0 = time.time()
    from checker.traces import itf  # noqa: F401 - imported before SGLang, as the jobs' reads need it
    from checker.traces.itf import ItfError  # noqa: F401

    from . import driver, harness, reverts  # noqa: F401

    try:
        harness.setup()
        family = harness.family()
    except Exception as e:  # noqa: BLE001 - the release does not import on this machine: reported, not raised
        return {"error": f"{type(e).__name__}: {e}", "detail": traceback.format_exc(limit=8).splitlines()[-12:]}
    return {"import_seconds": round(time.time() - t0, 1), "family": family}


def _run(job: dict[str, Any], ready: dict[str, Any]) -> dict[str, Any]:
    """The job's outcomes, on the release `_setup` set up (`ready`)."""
    if "error" in ready:
        return {"version": job["version"], "error": ready["error"], "detail": ready["detail"]}
    from checker.traces import itf
    from checker.traces.itf import ItfError

    from . import driver, reverts

    out: dict[str, Any] = {"version": job["version"], "import_seconds": ready["import_seconds"],
                           "family": ready["family"], "outcomes": []}
    for j in job["jobs"]:
        applied: list[str] = []
        states: list = []
        try:
            applied, states = reverts.apply(j.get("reverts", []), job["version"])
        except reverts.RevertError as e:
            o = driver._outcome(driver.ERROR, message=str(e))
        else:
            try:
                trace = itf.read(j["file"])
            except ItfError as e:
                o = driver._outcome(driver.ERROR, message=str(e))
            else:
                o = driver.replay(trace, j["mode"], j["label"])
            finally:
                reverts.restore(states)
        o.update(file=j["file"], mode=j["mode"], label=j["label"], reverted=applied)
        out["outcomes"].append(_jsonable(o))
    return out


def main(argv: list[str] | None = None) -> int:
    """One job on stdin, its document on stdout; `--serve`: the release set up once, then one job
    per stdin line, each run in a fork of the set-up process (upstream/serve.py)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--serve"]:
        from ..serve import serve

        ready = _setup()
        return serve(lambda job: _run(job, ready))
    job = json.loads(sys.stdin.read())
    json.dump(_run(job, _setup()), sys.stdout)
    sys.stdout.write("\n")
    return 0


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    return repr(v)


if __name__ == "__main__":
    sys.exit(main())
