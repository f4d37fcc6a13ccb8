"""CLI contract: bad input is one line naming the value and what was expected, exit status 2,
nothing written; `kvmc list` names everything a user can pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checker.cli import main
from model.designs import FIXES, PRESETS
from specs.configs import CONFIGS
from specs.properties import PROPERTIES


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args, needle, allowed",
    [
        (["check", "--design", "v9"], "'v9'", "current"),
        (["check", "--without", "no_such_fix"], "'no_such_fix'", "swa_busy_check"),
        (["check", "--with", "session_active=bogus"], "bogus", "active_idx"),
        (["check", "--property", "liveness"], "'liveness'", "conservation"),
        (["check", "--config", "huge"], "'huge'", "hybrid_swa"),
        (["check", "--mutant", "nope"], "'nope'", "verify_keeps_rejected_page"),
        (["check", "--depth", "0"], "--depth 0", "positive"),
        (["check", "--depth", "-3"], "--depth -3", "positive"),
        (["check", "--depth", "ten"], "ten", "int"),
        (["check", "--engine", "magic"], "'magic'", "bmc"),
        (["check", "--timeout", "0"], "--timeout", "0.01"),
        (["check", "--timeout", "0.0001"], "--timeout", "0.01"),  # once silently "no limit"
        (["check", "--timeout", "nan"], "'nan'", "finite"),
        (["check", "--timeout", "inf"], "'inf'", "finite"),
        (["review", "--timeout=-inf"], "'-inf'", "finite"),
        (["check", "--engine", "random", "--examples", "0"], "0", "at least 1"),
        (["check", "--examples", "many"], "'many'", "whole number"),
        (["check", "--examples", "500"], "--examples", "--engine random"),  # the bmc engine makes no runs
        (["check", "--property", "recompute_only_when_short", "--config", "small"], "'recompute_only_when_short'",
         "hicache_evict"),  # a property that applies to none of the configs named
        # a config whose mechanism the design's release does not ship (spec v2 before v0.5.13's flag, the SWA ring
        # before v0.5.20): refused, with the designs that ship it
        (["check", "--design", "v0.5.11", "--config", "spec_v2"], "'spec_v2'", "v0.5.18"),
        (["check", "--design", "v0.5.18", "--config", "swa_ring"], "'swa_ring'", "v0.5.20"),
        (["check", "--design", "v0.5.18", "--config", "swa_ring", "--jobs", "1"], "'swa_ring'", "v0.5.20"),
        (["check", "--frobnicate"], "--frobnicate", "--help"),
        (["frob"], "frob", "--help"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str, allowed: str, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    code, out, err = run_cli(args + ["--out", str(tmp_path / "cex")] if args[0] == "check" and len(args) > 1 and
                             not args[1].startswith("--frob") else args, capsys)
    assert code == 2, (args, code, out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert needle in lines[0] and allowed in lines[0], lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "cex").exists()


def test_list_names_every_design_fix_property_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["list", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert set(data["designs"]) == set(PRESETS)
    assert set(data["fixes"]) == set(FIXES)
    assert set(data["properties"]) == set(PROPERTIES)
    assert set(data["configs"]) == set(CONFIGS)
    assert set(data["pass_invariants"]) == {"admitted_fit"}
    for name in ("add_one_req", "add_chunked_req", "init_load_back", "restore_to_req", "save_from_req",
                 "retract_decode", "check_decode_mem", "_evict_swa", "release_kv_cache", "eagle_decode_step"):
        assert name in data["transitions"], name
        assert "::" in data["transitions"][name]["models"]


def test_show_rejects_a_truncated_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "t.itf.json"
    bad.write_text('{"#meta": {"config": "small"}, "states": [')
    code, _, err = run_cli(["show", str(bad)], capsys)
    assert code == 2 and str(bad) in err and "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_entry_point_installed() -> None:
    r = subprocess.run([sys.executable, "-m", "checker.cli", "check", "--depth", "0"], capture_output=True, text=True)
    assert r.returncode == 2 and "--depth 0" in r.stderr


def test_piped_progress_keeps_every_dropped_candidate(capsys: pytest.CaptureFixture[str]) -> None:
    """Piped, proof-phase lines are thinned to one per PHASE_EVERY_S, except a candidate Houdini
    drops (the line that says why a property was not proved)."""
    from checker.cli.app import ProgressPrinter

    pr = ProgressPrinter(True)
    pr.tty = False
    for i in range(3):
        pr("small", 1, 0.1 * i, {"_phase": f"k=1 step case for conservation, case {i}: unsat"})
    pr("small", 1, 0.4, {"_phase": "proof: dropped conservation: step case at k=1: solver unknown"})
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "case 0" in lines[0] and "dropped conservation" in lines[1], lines


# -- exit codes, output paths, startup (issue 30) ---------------------------------------------------
def _blocked(tmp_path: Path) -> Path:
    """A path no one can create a directory at (its parent is a file), even as root."""
    f = tmp_path / "a-file"
    f.write_text("")
    return f / "sub"


@pytest.mark.parametrize("args, what", [
    (["check", "--config", "small", "--out", "{bad}"], "--out"),
    (["check", "--all", "--config", "small", "--out", "{bad}"], "--out"),
    (["review", "--config", "small", "--out", "{bad}"], "--out"),
    (["review", "--config", "small", "--junit", "{bad}/r.xml"], "--junit"),
    (["graph", "--config", "small", "--out", "{bad}/g.dot"], "--out"),
    (["show", "counterexamples/v0.5.13-without-session_active/sessions/busy_check_sound.itf.json", "--html", "{bad}/t.html"], "--html"),
    (["regen", "--manifest", "--dir", "{bad}"], "--dir"),
])
def test_an_unwritable_output_fails_before_any_work(args: list[str], what: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    bad = _blocked(tmp_path)
    argv = [a.replace("{bad}", str(bad)) for a in args]
    if argv[0] == "review" and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    from checker.engines import run as engine_run

    monkeypatch.setattr(engine_run, "run_check", lambda *a, **k: pytest.fail("the check ran before the output was checked"))
    monkeypatch.setattr(engine_run, "engine_check_config", _no_engine(engine_run.engine_check_config))
    code, out, err = run_cli(argv, capsys)
    assert code == 2, (argv, code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and str(bad) in lines[0] and "writable" in lines[0], err
    assert "Traceback" not in err and not bad.parent.is_dir()


def _no_engine(real):  # type: ignore[no-untyped-def]
    """engine_check_config for validation only: the engine it returns must never run."""
    def get(engine: str):  # type: ignore[no-untyped-def]
        real(engine)  # validates the name
        return lambda *a, **k: pytest.fail("an engine ran before the output was checked")
    return get


def test_check_and_review_refuse_to_write_into_the_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Path(__file__).resolve().parents[2] / "counterexamples"
    for argv in (["check", "--config", "small", "--out", str(corpus)],
                 ["review", "--config", "small", "--out", str(corpus / "review")]):
        code, _, err = run_cli(argv, capsys)
        assert code == 2 and "regression corpus" in err and "kvmc regen" in err, err
    assert not (corpus / "review").exists()


def test_an_internal_error_is_one_line_and_a_traceback_file(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from checker.cli import app

    def boom(args):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(app, "cmd_list", boom)
    code, out, err = run_cli(["list"], capsys)
    assert code == 4, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kvmc: internal error, please report: RuntimeError: boom"), err
    path = Path(lines[0].split("(traceback in ")[1].rstrip(")"))
    try:
        text = path.read_text()
        assert "Traceback" in text and "boom" in text and "cmd_list" not in lines[0]
        assert path.stat().st_mode & 0o777 == 0o644 or path.stat().st_mode & 0o044
    finally:
        path.unlink()


def test_usage_errors_have_one_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", "--depth", "ten"], capsys)
    assert code == 2 and err.startswith("kvmc: error: check: ") and "kvmc: error: kvmc" not in err, err


def test_version_names_kvmc_z3_and_the_modelled_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    import z3
    from model.designs import CURRENT_RELEASE

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    assert out.startswith("kvmc ") and f"z3 {z3.get_version_string()}" in out and CURRENT_RELEASE in out, out


def test_help_imports_no_model_z3_or_torch() -> None:
    code = ("import sys\nfrom checker.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('z3', 'torch', 'model', 'specs', 'pool', 'hypothesis')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr


def test_check_leaves_the_repository_clean(tmp_path: Path) -> None:
    """`kvmc check` run from a checkout (here a copy of this working tree, committed) writes only
    under its run directory (kvmc-out/, gitignored) and Hypothesis's cache there too: `git status`
    stays clean and no .hypothesis/ appears in the current directory; files are 0644."""
    root = Path(__file__).resolve().parents[2]
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    repo = tmp_path / "repo"
    for f in filter(None, files):
        src = root / f.decode()
        if src.is_file():
            dst = repo / f.decode()
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=repo,  # noqa: E731
                                    capture_output=True, text=True, check=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "copy")
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    r = subprocess.run([sys.executable, "-m", "checker.cli", "check", "--without", "session_active", "--config", "sessions",
                        "--depth", "3", "--no-progress"], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    cex = repo / "kvmc-out" / "current-without-session_active" / "sessions" / "busy_check_sound.itf.json"
    assert cex.is_file() and f"counterexample: kvmc-out/current-without-session_active/sessions/busy_check_sound.itf.json" in r.stdout
    assert cex.stat().st_mode & 0o777 == 0o644, oct(cex.stat().st_mode)
    assert git("status", "--porcelain").stdout == ""
    assert not (repo / ".hypothesis").exists()


# -- progress (issue 30) ----------------------------------------------------------------------------
def test_progress_json_is_one_json_object_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", "--config", "small", "--property", "conservation", "--depth", "2", "--no-prove",
                              "--progress", "json", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in err.strip().splitlines()]  # every line is JSON
    depths = [e["depth"] for e in events if e["event"] == "depth"]
    assert depths == [0, 1, 2] and all(e["config"] == "small" and "text" in e for e in events), events
    assert "no proof attempted: proofs are off (--no-prove)" in out


def test_jobs_progress_says_done_running_queued(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", "--jobs", "2", "--config", "small", "--config", "sessions", "--property",
                              "conservation", "--depth", "2", "--no-prove", "--progress", "json", "--out", str(tmp_path)], capsys)
    assert code == 0, err
    events = [json.loads(line) for line in err.strip().splitlines()]
    jobs = [e for e in events if e["event"] == "jobs"]
    assert jobs and jobs[-1]["done"] == jobs[-1]["total"] == 2 and jobs[-1]["queued"] == 0, jobs
    assert any((e.get("message") or "").startswith("finished current:small") for e in jobs), jobs
    assert all(e["done"] + len(e["running"]) + e["queued"] == 2 for e in jobs), jobs


def test_a_long_default_run_is_announced(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from checker.engines import run as engine_run

    class Stop(BaseException):  # not an Exception: main would report it as an internal error
        pass

    def stop(*a: object, **k: object) -> None:
        raise Stop

    monkeypatch.setattr(engine_run, "run_check", stop)
    with pytest.raises(Stop):
        from checker.cli.app import main as app_main

        app_main(["check", "--out", str(tmp_path)])  # every config, depth 10
    err = capsys.readouterr().err
    assert err.startswith("kvmc: note: kvmc check runs every config") and "tens of minutes" in err, err


def test_the_heartbeat_names_the_running_query(capsys: pytest.CaptureFixture[str]) -> None:
    from checker.cli.app import ProgressPrinter
    from checker.progress import NOW

    pr = ProgressPrinter("text")
    pr.query_after_s = 0.0
    NOW.config_started("hybrid_swa")
    NOW.depth = 4
    NOW.query_started()
    try:
        pr.beat()
    finally:
        NOW.query_ended()
        NOW.reset()
    line = capsys.readouterr().err.strip()
    assert line.startswith("[hybrid_swa] depth 4: z3 query 1 running for ") and "solver" in line and "elapsed" in line, line


def test_examples_sets_the_random_engine_s_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--examples N`: the random engine's runs per property (finding 8 needs 4,000 on `mixed`)."""
    runs = []
    for n in ("3", "50"):
        code, out, _err = run_cli(["check", "--engine", "random", "--examples", n, "--config", "small", "--property",
                                   "conservation", "--depth", "2", "--out", str(tmp_path), "--no-progress"], capsys)
        assert code == 3, out  # unknown: random testing proves nothing
        line = next(ln for ln in out.splitlines() if "conservation" in ln)
        runs.append(int(line.split("no violation in ")[1].split(" random runs")[0]))
    assert runs[0] == 3 and runs[1] >= 50, runs


def test_a_config_the_release_does_not_ship_is_not_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unnamed configs whose mechanism the design does not ship are reported `not checked` with the
    reason, never with a verdict (the SWA ring on v0.5.18 once "held" there). Two random runs a config:
    what is asserted is the report, and a BMC over every config in this worker's z3 context once sat
    for 15 minutes on hybrid_swa_page4's depth-1 query (1 s in a fresh process; z3's search order)."""
    code, out, err = run_cli(["check", "--design", "v0.5.18", "--property", "conservation", "--depth", "1", "--engine",
                              "random", "--examples", "2", "--no-progress", "--out", str(tmp_path)], capsys)
    line = next(ln for ln in out.splitlines() if ln.startswith("config swa_ring"))
    assert "not checked" in line and "v0.5.20" in line, line
    assert not any(ln.strip().startswith("conservation") for ln in out.split(line)[1].splitlines()[1:2]), out
    code, out, err = run_cli(["check", "--design", "v0.5.18", "--property", "conservation", "--depth", "1", "--engine",
                              "random", "--examples", "2", "--no-progress", "--json", "--out", str(tmp_path)], capsys)
    rep = {c["config"]: c for c in json.loads(out)["configs"]}
    for name, flag in (("swa_ring", "swa_req_ring"), ("spec_topk", "EAGLE v1")):
        assert rep[name]["results"] == [] and flag in rep[name]["not_applicable"], rep[name]
