"""`kvmc explore --aborts` (issue 61 item 1, aborts among the environment's events): the client
aborts a waiting or running request (`recv.abort[r]`, an AbortReq through SGLang's own
`process_input_requests` -> `abort_request`: popped from the waiting queue, or `to_finish` set on a
running request, which its next batch finishes), the oracle unchanged.

On 0.5.23 (where installed; not a CI release) walks with aborts of both kinds run clean for every
property but `progress`, whose open finding (docs/findings.md #2, a chunked request stalled by a
small SWA pool) walks without aborts find too. The ownership ledger, SGLang's busy and idle checks
and the idle lock counts are judged after every iteration, so a leak or a lock an abort left behind
fails these walks. Bad input: `--aborts` beside `--compare-model` (the model has no abort).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checker.cli import main

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)


def test_walks_with_aborts_run_clean_on_0_5_23(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from upstream.install import default_dir, is_installed
    from upstream.sched import replay as sr
    from upstream.sched.explore import PROPS

    root = default_dir()
    if not is_installed(root, "0.5.23") or not (sr.extras_dir(root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang 0.5.23 is not installed under {root} (kvmc sglang install 0.5.23; not a CI release)")
    props = [a for p in PROPS if p != "progress" for a in ("--property", p)]
    code = main(["explore", "--sglang", "==0.5.23", "--config", "hybrid_swa", "--aborts", *props,
                 "--walks", "60", "--depth", "12", "--out", str(tmp_path / "o")])
    text = capsys.readouterr().out
    assert code == 0, text
    m = re.search(r"with aborts \((\d+) of waiting requests, (\d+) of running ones\)", text)
    assert m is not None and int(m.group(1)) > 0 and int(m.group(2)) > 0, text  # both kinds were sent
    assert "conservation             no violation in 60 walks of depth 12, seeds 0..59" in text, text
    assert "lock_ledger              no violation in 60 walks" in text and "violated" not in text, text


def test_aborts_beside_compare_model_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    code = main(["explore", "--sglang", "==0.5.13", "--config", "hybrid_swa", "--aborts", "--compare-model",
                 "--out", str(out)])
    o, err = capsys.readouterr()
    assert code == 2 and "--aborts with --compare-model" in err and len(err.strip().splitlines()) == 1, err
    assert not o and not out.exists()
