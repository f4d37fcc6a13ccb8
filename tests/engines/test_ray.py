"""`--executor ray` (checker/executors/): a proof's case queries and a sweep's jobs on a real local
Ray instance of two worker processes, started once for the module. The same verdicts as the local
forked processes; the proof cache written by the driver alone, with the same settled cases; a
worker killed mid-proof changes nothing (Ray re-runs its case), a case whose every run kills its
worker is unknown with the reason, never proved; a worker whose query digest differs refuses.

The proofs: `small` at k=1 with no lemma, the joint query given 1 ms so that Houdini asks each
candidate alone and its first-break cases go to the workers (`no_decode_oom`: about 70 cases,
proved; `no_prefill_oom`: a case is sat, a CTI)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]'); .ci/run installs it")

from checker import executors  # noqa: E402
from checker.engines import induction  # noqa: E402
from checker.engines.induction import KInduction  # noqa: E402
from checker.engines.proof_cache import ProofCache  # noqa: E402
from checker.executors import ray_cluster  # noqa: E402
from model.designs import PRESETS  # noqa: E402
from model.system import System  # noqa: E402
from specs.configs import CONFIGS  # noqa: E402

PROVED, REFUTED = "no_decode_oom", "no_prefill_oom"


@pytest.fixture(scope="module")
def ray_ex() -> Any:
    with executors.use("ray", None, 2) as ex:
        executors.ACTIVE = None  # a test turns it on (`on_ray`); the local runs must not see it
        yield ex


@pytest.fixture(autouse=True)
def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(induction, "JOINT_RLIMIT", 1)  # the driver's joint query gives up: cases follow


@pytest.fixture
def on_ray(ray_ex: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(executors, "ACTIVE", ray_ex)
    sent: list[tuple[int, ...]] = []  # every case the driver dispatched, in order
    submit = ray_ex.submit

    def recording(fn: Any, *args: Any, **kw: Any) -> Any:
        a = args[0]
        sent.append(tuple(a["path"]) if isinstance(a, dict) else ("job", a.config, a.side.mutants))
        return submit(fn, *args, **kw)

    monkeypatch.setattr(ray_ex, "submit", recording)
    ray_ex.sent = sent
    ray_ex.log.clear()
    return ray_ex


def _prove(prop: str, cache_dir: Path, workers: int = 2) -> Any:
    system = System(CONFIGS["small"], PRESETS["current"])
    return KInduction(system, [prop], [], timeout_ms=120_000, workers=workers, cache=ProofCache.open(cache_dir)).houdini(1)


def _settled(cache_dir: Path) -> set[str]:
    return {f"{f.parent.name}{f.name}" for f in cache_dir.rglob("*")
            if f.is_file() and f.parent != cache_dir and not f.name.endswith(".unknown")}


@pytest.fixture(scope="module")
def local_proof(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, set[str]]:
    """`no_decode_oom` on the local forked case workers: the reference."""
    d = tmp_path_factory.mktemp("local-cache")
    mp = pytest.MonkeyPatch()
    mp.setattr(induction, "JOINT_RLIMIT", 1)
    try:
        res = _prove(PROVED, d)
    finally:
        mp.undo()
    assert res.proved == [PROVED] and res.split_cases > 0, res
    return res, _settled(d)


def test_a_proof_on_ray_matches_local(on_ray: Any, local_proof: tuple[Any, set[str]], tmp_path: Path) -> None:
    ref, ref_keys = local_proof
    res = _prove(PROVED, tmp_path / "ray")
    assert res.proved == ref.proved and res.dropped == ref.dropped == {}, res
    assert on_ray.log and all(r["worker"] for r in on_ray.log if r["kind"] == "case"), "the cases were answered by Ray workers"
    assert len(set(on_ray.sent)) == len(on_ray.sent), "no case dispatched twice"
    assert _settled(tmp_path / "ray") == ref_keys, "the driver recorded the same settled cases as the local workers"
    # resumed from the proof cache: every case settled there, nothing is sent
    on_ray.sent.clear()
    again = _prove(PROVED, tmp_path / "ray")
    assert again.proved == [PROVED] and on_ray.sent == [] and again.cached > 0, again


def test_a_refuted_candidate_on_ray(on_ray: Any, tmp_path: Path) -> None:
    """A sat case on a worker: the driver asks it again for its model, and the CTI is the answer
    (on the local workers the same candidate is dropped the same way: tests/engines/test_induction.py)."""
    res = _prove(REFUTED, tmp_path / "ray")
    assert res.proved == [] and set(res.dropped) == {REFUTED} and "fails the step case" in res.dropped[REFUTED], res
    assert REFUTED in res.ctis and any(r.get("answer") == "sat" for r in on_ray.log), res


def _kill_a_case_worker(killed: list[int], stop: threading.Event, times: int = 1) -> None:
    """SIGKILL the Ray worker processes running a case (`ray::ask_remote_case`, Ray's process title
    while the task runs), `times` of them."""
    while not stop.is_set() and len(killed) < times:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) in killed:
                continue
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"ray::ask_remote_case"):
                os.kill(int(pid), signal.SIGKILL)
                killed.append(int(pid))
                break
        time.sleep(0.02)


def _with_killer(times: int, run: Any) -> tuple[Any, list[int]]:
    killed: list[int] = []
    stop = threading.Event()
    t = threading.Thread(target=_kill_a_case_worker, args=(killed, stop, times), daemon=True)
    t.start()
    try:
        return run(), killed
    finally:
        stop.set()
        t.join()


def test_a_killed_worker_changes_nothing(on_ray: Any, local_proof: tuple[Any, set[str]], tmp_path: Path) -> None:
    """Ray re-runs the killed worker's case; the verdict and the settled cases are the local run's,
    and the driver dispatched no case twice (the retry is Ray's, not a second dispatch)."""
    ref, ref_keys = local_proof
    res, killed = _with_killer(1, lambda: _prove(PROVED, tmp_path / "ray"))
    assert len(killed) == 1, "a worker was killed while it asked a case"
    assert res.proved == [PROVED] and res.dropped == {} and not res.why_unknown, res
    assert len(set(on_ray.sent)) == len(on_ray.sent) == len([r for r in on_ray.log if r["kind"] == "case"]), "each case dispatched once, answered once"
    assert _settled(tmp_path / "ray") == ref_keys, "no settled case lost"


def test_a_case_that_keeps_killing_workers_is_unknown(on_ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_cluster, "RETRIES", 0)  # one death is every run it gets
    # (a worker killed just after its answer, before it shows idle, dies for no case: kill until one
    # dies mid-case, which ends the candidate's phase)
    res, killed = _with_killer(50, lambda: _prove(PROVED, tmp_path / "ray"))
    assert killed
    assert res.proved == [] and PROVED in res.dropped, res
    assert "killed its worker" in res.why_unknown[PROVED] and "(not proved)" in res.dropped[PROVED], res.dropped


def test_a_worker_with_another_digest_refuses(on_ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker builds its query from what it is told; one more lemma there (a worker on another
    kvmc, say) is another formula: it refuses, and the driver says so in one line."""
    describe = induction.describe_query
    monkeypatch.setattr(induction, "describe_query", lambda ind, q: {**describe(ind, q), "lemmas": ["typing"]})
    res = _prove(PROVED, tmp_path / "ray")
    why = res.why_unknown[PROVED]
    assert res.proved == [] and "refused" in why and "differs from the driver's" in why and "\n" not in why, why
    assert _settled(tmp_path / "ray") == set(), "nothing a refusing worker said was recorded"


def test_a_sweep_on_ray_matches_local(on_ray: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from checker.cli import review

    def jobs(out: Path) -> list[Any]:
        return [review.Job(review.Side("", "current", mutants=m), "small", ("conservation", "no_decode_oom"), 2, "bmc",
                           False, 0, str(out), no_replay="test: no pool replay") for m in ((), ("req_slot_not_taken",))]

    monkeypatch.setattr(review, "_MEMO", {})
    got = review.run_jobs(jobs(tmp_path / "ray"), 2)
    assert sorted(on_ray.sent) == [("job", "small", ()), ("job", "small", ("req_slot_not_taken",))], "both jobs ran on Ray"
    monkeypatch.setattr(review, "_MEMO", {})
    monkeypatch.setattr(executors, "ACTIVE", None)
    ref = review.run_jobs(jobs(tmp_path / "local"), 2)
    verdicts = lambda rs: [(r["design"], {p: d["verdict"] for p, d in r["results"].items()}) for r in rs]  # noqa: E731
    assert verdicts(got) == verdicts(ref), (verdicts(got), verdicts(ref))
    assert verdicts(got)[1][1]["conservation"] == "violated"
    assert Path(got[1]["results"]["conservation"]["counterexample"]).is_file()


@pytest.mark.parametrize("call", ["wait", "result"])
def test_a_signal_inside_a_ray_call_surfaces_as_itself(ray_ex: Any, call: str) -> None:
    """Ray runs Python's signal handlers inside its blocking calls and lets only a KeyboardInterrupt
    through; kvmc's handler raises `Interrupted` (checker/interrupt.py), which came out as a
    SystemError and lost the partial report (`kvmc explore --executor ray`, Ctrl-C). (Ray raises it
    when its call returns, not at once: the driver's waits are short, WAIT_S.)"""
    from checker import interrupt

    def sleeping(s: float) -> None:  # nested: Ray ships it by value (a test module is not on a worker's path)
        time.sleep(s)

    ref = ray_ex.submit(sleeping, 3, retries=0)
    old = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        raise interrupt.Interrupted(signum)

    signal.signal(signal.SIGINT, handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(interrupt.Interrupted):
            ray_ex.wait([ref], timeout_s=3) if call == "wait" else ray_ex.result(ref)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, old)
        ray_ex.cancel([ref])
