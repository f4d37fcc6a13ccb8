"""The benchmark harness (`python -m bench`): discovery, the Markdown table, the plot, a failing
module reported rather than fatal, and the pool-size scaling of a config. No timing is asserted."""

from __future__ import annotations

import sys
import types
from pathlib import Path

from bench import __main__ as harness
from bench._bmc_worker import scaled
from specs.configs import CONFIGS

from .test_reports import png_size


def test_discovers_modules_but_not_private_helpers() -> None:
    names = harness.discover()
    assert "bmc" in names
    assert "_bmc_worker" not in names and "__main__" not in names


def test_table_and_plot(tmp_path: Path) -> None:
    rows = [{"case": "a|b", "seconds": 1.23456, "ok": True},
            {"case": "c", "ratio": 3.0, "ok": False},
            {"chart": "speed", "series": "incremental", "x": 5, "y": 1.0},
            {"chart": "speed", "series": "incremental", "x": 10, "y": 2.0},
            {"chart": "bugs", "series": "cold", "x": "swa_busy_check", "y": 0.5}]
    md = harness.table(rows).splitlines()
    assert md[0] == "| case | seconds | ok | ratio |"
    assert md[2] == "| a\\|b | 1.23 | yes |  |" and md[3] == "| c |  | **no** | 3 |"
    out = tmp_path / "r.png"
    assert harness.plot({"m": rows}, out)
    w, h = png_size(out.read_bytes())
    assert w > 500 and h > 300
    assert not harness.plot({"m": rows[:2]}, tmp_path / "none.png")


def test_failing_module_becomes_an_error_row(monkeypatch) -> None:
    mod = types.ModuleType("bench._boom")

    def run() -> list:
        raise RuntimeError("no such engine")

    mod.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bench._boom", mod)
    rows, summary, _ = harness.run_module("_boom", quick=True)
    assert len(rows) == 1 and "RuntimeError: no such engine" in rows[0]["error"]


def test_scaled_config_reaches_the_pool_size() -> None:
    base = CONFIGS["hybrid_swa"]
    for n in (10**2, 10**7):
        c = scaled(base, n)
        assert c.bound("full_tokens") == (base.bound("full_tokens")[0], n)
        assert c.bound("swa_tokens")[1] == n
        assert c.bound("input_len")[1] > base.bound("input_len")[1]
        assert c.num_reqs == base.num_reqs and c.hybrid_swa


def test_render_keeps_every_module_section(tmp_path: Path) -> None:
    import json

    sec = {"when": "now", "machine": "m", "quick": True, "seconds": 1.0}
    sections = {"bmc": {**sec, "rows": [{"case": "a", "s": 1.0}], "summary": "- bmc line"},
                "replay": {**sec, "rows": [{"case": "b", "steps_per_s": 9000.0}], "summary": ""}}
    harness.render(sections, tmp_path)
    md = (tmp_path / "results.md").read_text()
    assert "## bmc" in md and "## replay" in md and "- bmc line" in md and "| b | 9,000 |" in md
    assert set(json.loads((tmp_path / "results.json").read_text())) == {"bmc", "replay"}


def test_only_keeps_the_hand_written_text_of_the_sections_it_did_not_run(tmp_path: Path, monkeypatch) -> None:
    """`--only replay` rebuilds the replay section and writes every other one back as it stood in
    results.md, a note added there by hand included (it is in no results.json)."""
    import json

    sec = {"when": "then", "machine": "m", "quick": False, "seconds": 1.0}
    harness.render({"bmc": {**sec, "rows": [{"case": "a", "s": 1.0}], "summary": "- bmc line"},
                    "replay": {**sec, "rows": [{"case": "b", "steps_per_s": 10.0}], "summary": ""}}, tmp_path)
    md = (tmp_path / "results.md").read_text()
    note = "A note by hand: depth 3 took 530 s on one core."
    (tmp_path / "results.md").write_text(md.replace("- bmc line\n", "- bmc line\n\n" + note + "\n"))
    monkeypatch.setattr(harness, "discover", lambda: ["bmc", "replay"])
    monkeypatch.setattr(harness, "run_module", lambda name, quick: ([{"case": "b", "steps_per_s": 20.0}], "", 2.0))
    assert harness.main(["--only", "replay", "--out", str(tmp_path)]) == 0
    md = (tmp_path / "results.md").read_text()
    assert note in md and "- bmc line" in md and "| a | 1 |" in md
    assert "| b | 20 |" in md and "| b | 10 |" not in md
    assert md.index("## bmc") < md.index(note) < md.index("## replay")
    assert json.loads((tmp_path / "results.json").read_text())["replay"]["rows"][0]["steps_per_s"] == 20.0


def test_the_proof_benchmark_counts_only_verdicts_that_cover_depth_20() -> None:
    """bench/proof.py reads the plain check's JSON: `small` is proved whole (every safety property,
    every depth); a run cut off by its budget is reported so, with no time."""
    from bench import proof
    from specs.configs import CONFIGS
    from checker.engines.applies import for_config

    n = len(for_config(CONFIGS["small"]))  # the HiCache-only property is not checked on small
    # z3's per-query timeout is wall-clock: on a loaded CI machine the default (120 s) can cut a
    # step query of the proof attempt (9 s in all on an idle machine), and the BMC then runs on.
    # --depth 3: the proof starts after depth 2 (every witness met) and closes for every depth; the
    # default depth only has the BMC deepen beside it, for a third more CPU and the same JSON
    row = proof.plain_check("small", 900, ("--timeout", "600", "--depth", "3"))
    assert row.get("proved") == f"{n} of {n}" and row.get("covers_depth_20") is True, row
    assert row["target_60s"] is None  # the target is hybrid_swa's
    assert f"{n} of {n} properties proved" in proof.SUMMARY([row])
    timed_out = proof.plain_check("small", 0.01)
    assert timed_out["wall_s"] is None and "no answer" in timed_out["note"]


def test_the_sweep_simulator_schedules_jobs_in_order_on_the_first_free_worker() -> None:
    from bench.sweep import list_schedule

    assert list_schedule([4, 1, 1, 1, 1], 1) == 8
    assert list_schedule([4, 1, 1, 1, 1], 2) == 4  # the long job on one worker, the four short on the other
    assert list_schedule([1, 1, 1, 1, 4], 2) == 6  # the long job last: it starts at 2
    assert list_schedule([1, 1], 2, gap=0.5) == 2.0  # the driver hands out the second job at 0.5
    assert list_schedule([3, 3, 3], 64) == 3


def test_a_recorded_sweep_runs_real_jobs_and_its_simulation_matches_its_own_wall(tmp_path: Path) -> None:
    """Two real (preset, config) jobs, depth 1, on one process: the record holds both with their
    verdicts, and the simulator's T(1) for that record is the sum of the jobs plus the gaps."""
    from bench import sweep

    path = tmp_path / "sweep.jsonl"
    r = sweep.record(path, ["v0.5.13", "current"], ["small"], 1, 600.0, 1, "bmc", None, str(tmp_path / "out"))
    assert (r["finished"], r["jobs"]) == (2, 2)
    rec = sweep.load(path)
    assert [(j["design"], j["config"]) for j in rec["jobs"]] == [("v0.5.13", "small"), ("current", "small")]
    assert all("holds to depth" in j["verdicts"] for j in rec["jobs"]), rec["jobs"]
    rows = {row["workers"]: row for row in sweep.simulate(rec) if row.get("benchmark") == "simulated"}
    total = sum(j["seconds"] for j in rec["jobs"])
    assert total <= rows[1]["predicted_s"] + 0.1 and rows[1]["measured_s"] == rec["wall_s"]
    assert rows[16]["speedup"] <= 2.0  # two jobs cannot go faster than the longer one
    assert "predicted at 16 workers: " in sweep.SUMMARY(sweep.measured(rec) + sweep.simulate(rec)).lower()


def test_the_depth_benchmark_reports_the_depth_its_run_finished() -> None:
    """bench/depth.py keeps the depths its child process finished before the budget: `small`
    reaches depth 2 well within a minute; a budget too short for any depth reports none and a
    missed target, never a depth it did not finish."""
    from bench import depth

    row = depth.depth_row("small", 2, "test", 120.0)
    assert row["depth_reached"] == 2 and row["met"] is True and not row["error"], row
    assert "2: " in row["seconds_per_depth"]
    cut = depth.depth_row("hybrid_swa_hicache", 6, "test", 0.01)
    assert cut["depth_reached"] is None and cut["met"] is False
    assert "no depth reached, target missed" in depth.SUMMARY([cut])
