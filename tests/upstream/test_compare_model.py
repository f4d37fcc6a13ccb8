"""`kvmc explore --compare-model` (issue 61 item 6): the model's step beside every explored SGLang
iteration, from SGLang's mapped state with the walk's events (upstream/sched/compare.py).

The model side alone (no SGLang): a successor of the model is accepted, a changed one is a
departure naming its field and the transitions that write it, an event the model's environment
does not offer is named as such. On the CI release 0.5.13: its own scheduler agrees with preset
v0.5.13 on the explored iterations of `hybrid_swa` and `sessions`; with #23174's fix reverted (a
developer's change) it departs, and the same seed without the revert agrees, so the departure is
the change's.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from checker.cli import main
from checker.engines.explicit_graph import successors
from model.designs import PRESETS
from model.ops import Concrete
from model.system import System
from model.transition import REGISTRY
from specs.configs import CONFIGS
from upstream.sched.compare import Comparer

pytestmark = pytest.mark.usefixtures("one_worker_per_release")  # explore's workers: forks of one import (conftest.py)


def _model_point(config: str = "hybrid_swa") -> tuple[System, object, object]:
    from checker.engines.explicit_graph import param_points

    system = System(CONFIGS[config], PRESETS["current"])
    p = param_points(system)[0]
    return system, p, system.init(system.ctx(Concrete(), p))


def test_a_model_successor_is_accepted_and_a_changed_one_departs() -> None:
    system, p, s0 = _model_point()
    events = {"recv.arrive[0]": True}
    nxt = [s for picks, s in successors(system, p, s0) if picks.get("recv.arrive[0]") and not picks.get("recv.arrive[1]")]
    assert nxt, "the model offers request 0's arrival from its initial state"
    c = Comparer(system.cfg, system.design, p)
    assert c.check(1, s0, events, nxt[0]) is None
    bad = nxt[0].set(full_available=nxt[0].full_available + 1)
    d = c.check(2, s0, events, bad)
    assert d is not None and d["field"] == "full_available" and d["sglang"] == d["model"] + 1
    assert d["transitions"], "the departure names the model transitions that ran and write the field"
    assert all("full_available" in REGISTRY[n].modifies for n, _ in d["transitions"])
    assert c.summary()["checked"] == 2 and c.summary()["departure"]["step"] == 2


def test_an_event_the_model_does_not_offer_is_named() -> None:
    system, p, s0 = _model_point("sessions")
    c = Comparer(system.cfg, system.design, p)
    # request 0 has not arrived: no next turn of its session can be sent (and SGLang's state changed)
    after = s0.set(full_available=s0.full_available - 1)
    d = c.check(1, s0, {"recv.next_turn[0]": True, "recv.turn_tokens[0]": 1}, after)
    assert d is not None and d["field"] == "environment event" and "recv.next_turn[0]" in d["sglang"]


def test_unmapped_states_are_counted_not_compared() -> None:
    system, p, s0 = _model_point()
    c = Comparer(system.cfg, system.design, p)
    assert c.check(1, None, {}, s0) is None and c.check(2, s0, {}, None) is None
    assert c.summary() == {"checked": 0, "unmapped": 2, "too_many": 0, "renamed": 0, "departure": None}


@pytest.fixture(scope="module")
def sched_root(sglang_root: Path) -> Path:
    from upstream.sched import replay as sr

    sr.install_extras(sglang_root, say=lambda m: None)
    return sglang_root


def _explore(args: list[str], out: Path, version: str = "0.5.13") -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = main(["explore", "--sglang", "==" + version, *args, "--depth", "12", "--compare-model", "--no-shrink",
                     "--property", "no_prefill_oom", "--json", "--out", str(out)])
    return code, json.loads(buf.getvalue())


@pytest.mark.parametrize("config,walks", [("hybrid_swa", "30"), ("sessions", "30")])
def test_sglang_0_5_13_agrees_with_its_preset_on_every_compared_iteration(
        sched_root: Path, tmp_path: Path, config: str, walks: str) -> None:
    code, doc = _explore(["--config", config, "--seed", "0", "--walks", walks], tmp_path)
    c = doc["compare"]
    assert c["first"] is None, c["first"]
    assert c["checked"] > 5 * int(walks) // 2, c  # most iterations map and are compared
    assert doc["preset"] == "v0.5.13" and code in (0, 1)


def test_a_reverted_fix_departs_from_the_preset_and_the_release_does_not(sched_root: Path, tmp_path: Path) -> None:
    seed = ["--config", "hybrid_swa", "--seed", "103", "--walks", "1"]
    code, doc = _explore(["--revert", "chunked_swa_page_reserve", *seed], tmp_path / "reverted")
    d = doc["compare"]["first"]
    assert code == 1 and d is not None, doc["compare"]
    assert d["seed"] == 103 and d["field"] == "full_available" and d["transitions"], d
    _code, plain = _explore(seed, tmp_path / "plain")
    assert plain["compare"]["first"] is None and plain["compare"]["checked"] > 0, plain["compare"]


def test_an_insert_that_makes_no_node_backs_up_the_nodes_it_walks(sched_root: Path, tmp_path: Path) -> None:
    """Page 16, HiCache, 0.5.23 (walk seed 11): request 0's 24-token prompt matches the one-page warm
    node; its aligned insert [0, 16) makes no node, yet SGLang's insert walk counts a hit on the warm
    node and writes it through to the host. The model once backed up only when the insert made a node
    (model/radix_cache.py::insert): this walk departed at iteration 3 on `node_host[0]`."""
    from upstream.install import is_installed
    from upstream.sched import replay as sr

    if not is_installed(sched_root, "0.5.23") or not (sr.extras_dir(sched_root) / ".kvmc-complete").exists():
        pytest.skip(f"SGLang 0.5.23 is not installed under {sched_root} (kvmc sglang install 0.5.23)")
    code, doc = _explore(["--config", "hybrid_swa_hicache_page16", "--seed", "11", "--walks", "1"], tmp_path, "0.5.23")
    c = doc["compare"]
    assert c["first"] is None, c["first"]
    assert c["checked"] >= 5 and doc["preset"] == "v0.5.23" and code in (0, 1), c
