"""Design changes written like SGLang code (model/patch.py, `kvmc patch`, docs/patches.md).

A patch in plain Python (`if`/`else`, `min`, `max`, `and`/`not`, conditional expressions) runs in
both interpretations: concretely it is Python; symbolically statement `if`s are paths merged with
`ite`, expressions are merged in place. The tests: the two interpretations agree on random states
(and a patch whose interpretations differ is caught), `kvmc patch new` writes a transition that
changes nothing (concretely on every checked-in trace, and term for term in z3), errors are one
`FILE:LINE:` line with exit 2, and a patched design replays on the pool where the pool has a hook.
"""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
import z3

from checker.cli import main
from checker.cli.patch import check_patch
from checker.traces import itf
from checker.traces.trace import run_concrete
from model.designs import PRESETS, Design
from model.mutants import available
from model.patch import PatchError, load_patch, plain_source
from model.system import System
from model.transition import REGISTRY
from specs.configs import CONFIGS

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "patches"
CORPUS = sorted(glob.glob(str(ROOT / "counterexamples" / "**" / "*.itf.json"), recursive=True))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _patched(fn_file: Path | str, base: Design = PRESETS["current"]) -> Design:
    name, fn = load_patch(fn_file)
    return Design(f"{base.name}+p", base.fixes, base.mutants, {name: fn})


# -- both interpretations ---------------------------------------------------------------------------------
def test_guide_patch_interpretations_agree_on_random_states() -> None:
    """docs/patches/swa_reserve.py (statement ifs, min, max) on random reachable states of hybrid_swa:
    the z3 step pinned to each state and its picks gives the concrete next state."""
    res = check_patch(str(GUIDE / "swa_reserve.py"), PRESETS["current"], ["hybrid_swa"], examples=25, depth=5, states=6)
    (r,) = res
    assert r.calls > 0 and r.agreed == len(r.samples) > 0, r


def test_interpretations_that_differ_are_caught(tmp_path: Path) -> None:
    """A patch that asks Python about the value's type runs differently on z3 terms: caught."""
    f = tmp_path / "typed.py"
    f.write_text(
        "from model import allocator\n"
        "REPLACES = 'free'\n\n"
        "def replacement(x, s, full, swa=0):\n"
        "    s = allocator.free.original(x, s, full, swa)\n"
        "    if isinstance(s.full_available, int):  # true concretely only\n"
        "        s = s.set(full_available=s.full_available + 1)\n"
        "    return s\n")
    with pytest.raises(PatchError) as e:
        check_patch(str(f), PRESETS["current"], ["small"], examples=10, depth=3, states=3)
    assert str(e.value).startswith(f"{f}:4: the concrete and the symbolic run of the patch disagree"), e.value


def test_statement_if_forks_and_merges(tmp_path: Path) -> None:
    """A statement `if` on a model value: one run per path, merged; the same test again is no new path."""
    f = tmp_path / "clamp.py"
    f.write_text(
        "REPLACES = '_swa_budget_for_req'\n\n"
        "def replacement(x, ad, extend, max_new, swa_host_hit):\n"
        "    if extend > 3:\n"
        "        b = 3\n"
        "    else:\n"
        "        b = max(extend, 1)\n"
        "    if extend > 3:  # the same test: answered as before\n"
        "        return b + 1\n"
        "    return b\n")
    _name, fn = load_patch(f)
    from model.config import symbolic_params
    from model.ops import Concrete, Symbolic

    cfg = CONFIGS["hybrid_swa"]
    system = System(cfg, PRESETS["current"])
    e = z3.Int("e")
    x = system.ctx(Symbolic(0), symbolic_params(cfg, z3)[0])
    out = fn(x, None, e, 0, 0)
    for v in range(-2, 7):
        want = fn(system.ctx(Concrete(), symbolic_params(cfg, z3)[0]), None, v, 0, 0)
        assert want == (4 if v > 3 else max(v, 1))
        assert z3.simplify(z3.substitute(out, (e, z3.IntVal(v)))).as_long() == want, v


# -- kvmc patch new ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def unchanged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("new")
    out = {}
    for name in sorted(REGISTRY):
        f = d / f"{name}.py"
        f.write_text(plain_source(name))
        out[name] = f
    return out


def test_patch_new_changes_nothing_on_the_checked_in_traces(unchanged: dict[str, Path]) -> None:
    """Every transition's plain-Python body, as a patch, follows every checked-in trace exactly."""
    traces = []
    for f in CORPUS:
        try:
            traces.append(itf.read(f, warn=False))
        except itf.ItfError:
            pass  # a stale trace is the corpus test's business
    assert traces
    for name, f in unchanged.items():
        n, fn = load_patch(f)
        for tr in traces:
            if any(available()[m].REPLACES == n for m in tr.design.mutants):
                continue  # a planted bug replaces this transition in that trace
            d = Design(tr.design.name, tr.design.fixes, tr.design.mutants, {n: fn})
            run_concrete(System(tr.cfg, d), tr.params, tr.actions, expected=tr.states)


@pytest.mark.parametrize("name", ["add_chunked_req", "_swa_budget_for_req", "budget_state", "new_adder"])
def test_patch_new_is_the_same_formula(unchanged: dict[str, Path], name: str) -> None:
    """Symbolically too: one step of hybrid_swa with the unchanged patch builds the very z3 terms
    (hash-consed: the same ids) the model's own transition builds."""
    from checker.engines.encode import Unrolling

    cfg = CONFIGS["hybrid_swa"]
    a = Unrolling(System(cfg, PRESETS["current"]))
    b = Unrolling(System(cfg, _patched(unchanged[name])))
    ca, cb = a.extend(), b.extend()
    assert len(ca) == len(cb) and all(x.eq(y) for x, y in zip(ca, cb))


def test_patch_new_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "acr.py"
    rc, out, err = _cli(capsys, "patch", "new", "add_chunked_req", "-o", str(f))
    assert rc == 0 and f.exists(), err
    text = f.read_text()
    info = REGISTRY["add_chunked_req"]
    assert 'REPLACES = "add_chunked_req"' in text and info.models in text and "modifies=()" in text
    assert "x.ite(" not in text and "x.min(" not in text and " if " in text and "min(" in text
    assert load_patch(f)[0] == "add_chunked_req"
    rc, out, err = _cli(capsys, "patch", "new", "add_chunked_req", "-o", str(f))
    assert rc == 2 and "exists" in err and len(err.strip().splitlines()) == 1
    rc, out, err = _cli(capsys, "patch", "new", "no_such_transition")
    assert rc == 2 and "unknown transition 'no_such_transition'" in err and len(err.strip().splitlines()) == 1


# -- errors: one FILE:LINE line, exit 2 ------------------------------------------------------------------
RAISES = """from model.prefill_adder import rem_total_int
REPLACES = "add_chunked_req"


def replacement(x, s, ad, r):
    budget = min(ad.rem_chunk_tokens, rem_total_int(x, s, ad))
    if budget > 2:
        raise RuntimeError(f"budget {budget} too big")
    return ad, False
"""


def test_patch_that_raises_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "raises.py"
    f.write_text(RAISES)
    rc, out, err = _cli(capsys, "patch", "check", str(f), "--config", "hybrid_swa", "--examples", "20", "--depth", "4")
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, err
    assert lines[0].startswith(f"kvmc: error: {f}:8: RuntimeError: budget "), lines[0]
    # the same patch in a review: exit 2 and one line (never 1, "newly broken"), no traceback
    rc, out, err = _cli(capsys, "review", "--head-patch", str(f), "--config", "hybrid_swa", "--property", "no_prefill_oom",
                        "--depth", "1", "--no-prove", "--jobs", "1", "--out", str(tmp_path / "out"))
    lines = [ln for ln in err.strip().splitlines() if ln.startswith("kvmc: error:")]
    assert rc == 2 and len(lines) == 1 and f"{f.name}:" in lines[0] and "Traceback" not in err, err


@pytest.mark.parametrize("body, line, words", [
    ("    s = s.set(full_evictable_drift=s.full_evictable_drift + 1)\n    return s\n", 4, "does not list it in modifies"),
    ("    n = 0\n    while full > n:\n        n += 1\n    return s.set(full_available=s.full_available + n)\n", 6,
     "tests of model values on one path"),
    ("    return s.set(full_available=s.full_available + full / 2)\n", 5, "`/` makes a float"),
])
def test_patch_errors_name_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, line: int,
                                         words: str) -> None:
    f = tmp_path / "bad_free.py"
    f.write_text("REPLACES = 'free'\n\n\ndef replacement(x, s, full, swa=0):\n" + body)
    rc, out, err = _cli(capsys, "patch", "check", str(f), "--config", "small", "--examples", "10", "--depth", "3")
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(f"kvmc: error: {f}:{line}:") and words in lines[0], err


def test_patch_check_ok_and_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _cli(capsys, "patch", "check", str(GUIDE / "swa_reserve.py"), "--config", "hybrid_swa", "--config", "small",
                        "--examples", "15", "--depth", "4", "--states", "3")
    assert rc == 0, err
    assert "small: not run" in out and "hybrid_swa: called" in out and "agree on" in out
    rc, out, err = _cli(capsys, "patch", "check", str(GUIDE / "swa_reserve.py"), "--config", "small", "--examples", "5")
    assert rc == 3 and "never ran" in err


# -- the pool -----------------------------------------------------------------------------------------------
def test_unchanged_patch_replays_on_the_pool_through_its_hook(unchanged: dict[str, Path]) -> None:
    """The pool runs a patch of add_chunked_req (its hook): the unchanged body replays random walks
    exactly, and a patch of a transition without a hook is 'model only'."""
    from checker.replay.pool import NOT_REPLAYABLE, PASSED, REPRODUCED, replay_trace
    from checker.traces.walk import random_walk

    d = _patched(unchanged["add_chunked_req"])
    for cfg in ("hybrid_swa", "paged"):
        for seed in range(3):
            tr = random_walk(CONFIGS[cfg], d, 12, seed)
            o = replay_trace(tr, file=f"{cfg}-{seed}")
            assert o.status in (PASSED, REPRODUCED), o.line()
    tr = random_walk(CONFIGS["small"], _patched(unchanged["free"]), 4, 0)
    o = replay_trace(tr, file="free")
    assert o.status == NOT_REPLAYABLE and o.message.startswith("model only:"), o.line()
