"""`python -m upstream.sched.worker`: replay many traces on one SGLang release in one process
(worker side; its PYTHONPATH selects the release, upstream/install.py::release_path).

Reads one JSON job on stdin: {"version": V, "reverts": [fix, ...], "jobs": [{"file": F, "mode":
"reproduce" | "events", "label": L}, ...]}; applies the reverts (upstream/sched/reverts.py) once,
before any scheduler is built; prints one JSON document on stdout: {"version", "import_seconds",
"reverted": [...], "outcomes": [{"file", "status", ...}]}. Importing SGLang costs most of a replay
(8-26 s); each trace after the first costs a fraction of a second.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from typing import Any


def main() -> int:
    job = json.loads(sys.stdin.read())
    t0 = time.time()
    from checker.traces import itf
    from checker.traces.itf import ItfError

    from . import driver, harness, reverts

    try:
        harness.setup()
        applied = reverts.apply(job.get("reverts", []))
    except reverts.RevertError as e:
        json.dump({"version": job["version"], "error": str(e)}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    except Exception as e:  # the release does not import or build on this machine
        json.dump({"version": job["version"], "error": f"{type(e).__name__}: {e}",
                   "detail": traceback.format_exc(limit=8).splitlines()[-12:]}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    out: dict[str, Any] = {"version": job["version"], "import_seconds": round(time.time() - t0, 1), "reverted": applied,
                           "family": harness.family(), "outcomes": []}
    for j in job["jobs"]:
        try:
            trace = itf.read(j["file"])
        except ItfError as e:
            o = driver._outcome(driver.ERROR, message=str(e))
        else:
            o = driver.replay(trace, j["mode"], j["label"])
        o["file"] = j["file"]
        o["mode"] = j["mode"]
        o["label"] = j["label"]
        out["outcomes"].append(_jsonable(o))
    json.dump(out, sys.stdout)
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
