"""Start-up and stop: how long `kvmc` takes to answer before any work (issue 30: `kvmc --help` under
0.3 s, `replay` of a missing file answered without waiting for torch), and how long a Ctrl-C takes
to stop a check while z3 solves (target: about a second).

Each command runs in a new process, `RUNS` times; the median and the fastest are reported, with
`python -c pass` (the interpreter alone) measured the same way in the same run, so the ratio says
what kvmc adds on this machine today. Two byte-code settings: `cached` (a warmed
PYTHONPYCACHEPREFIX, as a normal install has) and `none` (PYTHONDONTWRITEBYTECODE=1, every module
compiled at each start: how this sandbox runs by default)."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUNS = 7

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass", ["-c", "pass"]),
    ("kvmc --help", ["-m", "checker.cli", "--help"]),
    ("kvmc --version", ["-m", "checker.cli", "--version"]),
    ("kvmc check --depth 0 (usage error)", ["-m", "checker.cli", "check", "--depth", "0"]),
    ("kvmc replay missing.itf.json", ["-m", "checker.cli", "replay", "missing.itf.json"]),
    ("kvmc list", ["-m", "checker.cli", "list"]),
]


def _time(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True)
    return time.perf_counter() - t0


def _env(pyc: str, prefix: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if pyc == "none":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def _stop_time() -> dict[str, Any]:
    """SIGINT to a hybrid_swa check once a z3 query has run half a second; seconds to exit."""
    env = dict(os.environ, KVMC_HEARTBEAT_S="0.5")
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.Popen([sys.executable, "-m", "checker.cli", "check", "--config", "hybrid_swa", "--property",
                              "conservation", "--depth", "8", "--out", out, "--progress", "json"], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert p.stderr is not None
        for line in p.stderr:
            if line.startswith("{"):
                ev = json.loads(line)
                if ev.get("event") == "query" and (ev.get("depth") or 0) >= 2:
                    break
        t0 = time.perf_counter()
        os.killpg(p.pid, signal.SIGINT)
        rc = p.wait()
        took = time.perf_counter() - t0
    return {"command": "kvmc check --config hybrid_swa (SIGINT while z3 solves at depth >= 2)", "pyc": "cached",
            "median_s": round(took, 3), "min_s": round(took, 3), "runs": 1, "x python": None, "exit": rc}


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs = 3 if quick else RUNS
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as prefix:
        for pyc in ("cached", "none"):
            env = _env(pyc, prefix)
            base = None
            for name, args in COMMANDS:
                _time(args, env)  # warm the byte-code cache and the page cache
                ts = sorted(_time(args, env) for _ in range(runs))
                med = statistics.median(ts)
                base = med if base is None else base
                rows.append({"command": name, "pyc": pyc, "median_s": round(med, 3), "min_s": round(ts[0], 3),
                             "runs": runs, "x python": round(med / base, 2)})
    rows.append(_stop_time())
    return rows


def SUMMARY(rows: list[dict[str, Any]]) -> str:
    def med(cmd: str, pyc: str) -> float | None:
        return next((r["median_s"] for r in rows if r["command"] == cmd and r.get("pyc") == pyc), None)

    helps = med("kvmc --help", "cached")
    stop = rows[-1]["median_s"] if rows and "SIGINT" in rows[-1]["command"] else None
    return (f"`kvmc --help` {helps} s with cached byte code (target 0.3 s; `python -c pass` {med('python -c pass', 'cached')} s "
            f"on the same machine in the same run); a Ctrl-C during a z3 query stopped the check in {stop} s.")


if __name__ == "__main__":
    out = run(quick="--quick" in sys.argv)
    for r in out:
        print(r)
    print(SUMMARY(out))
