"""Fuzzing the trace loader and the two commands that read traces (`kvmc show`, `kvmc replay`) with
mutated copies of the checked-in counterexamples: states dropped, duplicated, reordered; variables,
`vars`, `params` and `#meta` fields deleted; types flipped; values out of range; picks added,
dropped or changed; the verdict flipped; `#meta` labels falsified; files truncated or binary.

Whatever the mutation, reading ends in a `Trace` (the mutation left a valid run of the model) or
in one `ItfError` line, `show` and `replay` exit 0 or 2 with no traceback, and `replay` never says
`diverged` for a file the validator would refuse: a corrupted trace is bad input, `diverged` is a
valid trace the pool does not follow (checker/traces/itf.py, checker/replay/pool.py). In-process
for speed (3,000 mutants through the loader, `show` and `replay` each); a few through the real CLI.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checker.cli import main
from checker.replay.regen import DEFAULT_DIR
from checker.traces import itf

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(DEFAULT_DIR.rglob("*.itf.json"))
EXAMPLES = int(os.environ.get("KVMC_FUZZ_EXAMPLES", "3000"))  # fewer while developing


def _valid(p: Path) -> bool:
    try:
        itf.read(p, warn=False)
        return True
    except itf.ItfError:
        return False


SEEDS = [p for p in CORPUS if _valid(p)]
TEXTS = {f"{i}:{p.parent.name}/{p.name}": p.read_text() for i, p in enumerate(SEEDS)}
pytestmark = pytest.mark.skipif(not SEEDS, reason="no valid checked-in counterexample to mutate")


# -- mutations: (name, fn(doc, draw) -> doc or bytes) ---------------------------------------------------
def _state_index(d: dict[str, Any], draw: Any) -> int:
    return draw(st.integers(0, len(d["states"]) - 1))


def _drop_state(d: dict[str, Any], draw: Any) -> Any:
    if len(d["states"]) > 1:
        del d["states"][_state_index(d, draw)]
    return d


def _drop_last_state(d: dict[str, Any], draw: Any) -> Any:
    if len(d["states"]) > 1:
        d["states"].pop()
        if draw(st.booleans()):
            d["#meta"].pop("depth", None)  # the depth fixed up too: only the verdict can tell
    return d


def _duplicate_state(d: dict[str, Any], draw: Any) -> Any:
    i = _state_index(d, draw)
    d["states"].insert(draw(st.integers(0, len(d["states"]))), copy.deepcopy(d["states"][i]))
    return d


def _shuffle_states(d: dict[str, Any], draw: Any) -> Any:
    d["states"] = draw(st.permutations(d["states"]))
    if draw(st.booleans()):
        for i, s in enumerate(d["states"]):
            s["#meta"] = {"index": i}  # indexes renumbered: only the re-run can tell
    return d


def _delete_var(d: dict[str, Any], draw: Any) -> Any:
    keys = sorted(k for k in d["states"][0] if k != "#meta")
    k = draw(st.sampled_from(keys))
    for s in (d["states"] if draw(st.booleans()) else [d["states"][_state_index(d, draw)]]):
        s.pop(k, None)
    if draw(st.booleans()):
        for lst in ("vars", "params"):
            if k in d.get(lst, []):
                d[lst].remove(k)
    return d


def _delete_top(d: dict[str, Any], draw: Any) -> Any:
    d.pop(draw(st.sampled_from(["vars", "params", "#meta", "states"])), None)
    return d


def _delete_meta(d: dict[str, Any], draw: Any) -> Any:
    keys = sorted(d["#meta"])
    for k in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3)):
        d["#meta"].pop(k, None)
    return d


WEIRD = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.text(max_size=8),
                  st.just({"#bigint": "x"}), st.just({"#bigint": "1" * 40}), st.just({"#bigint": "-3"}),
                  st.just([]), st.just({}), st.just({"tag": "Some", "value": {"#tup": []}}), st.just([[[[1]]]]))


def _flip_type(d: dict[str, Any], draw: Any) -> Any:
    s = d["states"][_state_index(d, draw)]
    k = draw(st.sampled_from(sorted(k for k in s if k != "#meta")))
    v = s[k]
    if isinstance(v, list) and v and draw(st.booleans()):
        v[draw(st.integers(0, len(v) - 1))] = draw(WEIRD)
    else:
        s[k] = draw(WEIRD)
    return d


RANGED = ["status", "last_node", "swa_lock_top", "load_back_node", "last_batch", "oom", "full_available", "node_len",
          "kv_allocated_len", "kv_committed_len", "cache_protected_len", "swa_evicted_seqlen", "req_pool_available",
          "full_tokens", "input_len", "turn", "output_len"]


def _out_of_range(d: dict[str, Any], draw: Any) -> Any:
    s = d["states"][_state_index(d, draw)]
    k = draw(st.sampled_from([k for k in RANGED if k in s]))
    bad = {"#bigint": str(draw(st.sampled_from([-1, -2, -3, 5, 7, 99, 10**9, -10**9])))}
    if isinstance(s[k], list):
        if s[k]:
            s[k][draw(st.integers(0, len(s[k]) - 1))] = bad
    else:
        s[k] = bad
    return d


def _edit_number(d: dict[str, Any], draw: Any) -> Any:
    s = d["states"][_state_index(d, draw)]
    ints = [k for k, v in s.items() if isinstance(v, dict) and "#bigint" in v]
    if ints:
        k = draw(st.sampled_from(sorted(ints)))
        s[k] = {"#bigint": str(int(s[k]["#bigint"]) + draw(st.sampled_from([-1, 1, 2])))}
    return d


def _edit_pick(d: dict[str, Any], draw: Any) -> Any:
    if len(d["states"]) < 2:
        return d
    s = d["states"][draw(st.integers(1, len(d["states"]) - 1))]
    pairs = s["mbt::nondetPicks"].get("#map", [])
    how = draw(st.sampled_from(["flip", "drop", "add", "retype"]))
    if how == "add" or not pairs:
        pairs.append([draw(st.sampled_from(["recv.arrive[0]", "prefill.evict[0]", "bogus.choice", "decode.accept[0]"])),
                      draw(st.sampled_from([{"tag": "Some", "value": True}, {"tag": "Some", "value": {"value": {"#bigint": "2"}}},
                                            {"tag": "None", "value": {"#tup": []}}, {"tag": "Maybe", "value": 1}]))])
    elif how == "drop":
        pairs.pop(draw(st.integers(0, len(pairs) - 1)))
    elif how == "flip":
        kv = pairs[draw(st.integers(0, len(pairs) - 1))]
        v = kv[1].get("value") if isinstance(kv[1], dict) else None
        kv[1] = {"tag": "Some", "value": (not v) if isinstance(v, bool) else {"value": {"#bigint": "7"}}}
    else:
        pairs[draw(st.integers(0, len(pairs) - 1))][1] = draw(WEIRD)
    return d


def _flip_verdict(d: dict[str, Any], draw: Any) -> Any:
    m = d["#meta"]
    m["verdict"] = draw(st.sampled_from(["holds", "passed", "violated", "counterexample to induction", "proved", None]))
    if draw(st.booleans()):
        m["expected"] = draw(st.sampled_from(["pass", "violation", "maybe", None]))
    if draw(st.booleans()):
        m["property"] = draw(st.sampled_from(["conservation", "no_prefill_oom", "no_decode_oom", "busy_check_sound",
                                              "busy_check_complete", "nonexistent", None]))
    return d


def _falsify_meta(d: dict[str, Any], draw: Any) -> Any:
    m = d["#meta"]
    k = draw(st.sampled_from(["sglang_commit", "sglang_release", "kvmc_version", "depth", "page_size", "config", "design", "engine",
                              "mutants", "fixes", "format", "patches"]))
    m[k] = draw(st.one_of(WEIRD, st.sampled_from(["0" * 40, "f" * 40, "deadbeef", "9.9.9", "hybrid_swa", "small",
                                                  "sessions", ["verify_keeps_rejected_page"], {"swa_busy_check": None},
                                                  [{"transition": "free", "file": "/nonexistent.py", "sha256": "0"}]])))
    return d


def _edit_vars(d: dict[str, Any], draw: Any) -> Any:
    lst = d.get(draw(st.sampled_from(["vars", "params"])))
    if isinstance(lst, list) and lst:
        how = draw(st.sampled_from(["dup", "extra", "drop"]))
        if how == "dup":
            lst.append(lst[0])
        elif how == "extra":
            lst.append("ghost_variable")
        else:
            lst.pop(draw(st.integers(0, len(lst) - 1)))
    return d


def _truncate(d: dict[str, Any], draw: Any) -> Any:
    text = json.dumps(d).encode()
    return text[: draw(st.integers(0, len(text) - 1))]


def _binary(d: dict[str, Any], draw: Any) -> Any:
    return draw(st.binary(min_size=0, max_size=64))


def _byte_flip(d: dict[str, Any], draw: Any) -> Any:
    text = bytearray(json.dumps(d).encode())
    for _ in range(draw(st.integers(1, 4))):
        text[draw(st.integers(0, len(text) - 1))] = draw(st.integers(0, 255))
    return bytes(text)


MUTATIONS: list[tuple[str, Callable[..., Any]]] = [
    ("drop state", _drop_state), ("drop last state", _drop_last_state), ("duplicate state", _duplicate_state),
    ("shuffle states", _shuffle_states), ("delete variable", _delete_var), ("delete vars/params/#meta", _delete_top),
    ("delete #meta fields", _delete_meta), ("flip a type", _flip_type), ("out of range", _out_of_range),
    ("edit a number", _edit_number), ("edit a pick", _edit_pick), ("flip the verdict", _flip_verdict),
    ("falsify #meta", _falsify_meta), ("edit vars/params", _edit_vars), ("truncate", _truncate), ("binary", _binary),
    ("flip bytes", _byte_flip),
]


@st.composite
def mutants(draw: Any) -> tuple[str, bytes]:
    doc = json.loads(TEXTS[draw(st.sampled_from(sorted(TEXTS)))])
    names = []
    for _ in range(draw(st.integers(1, 2))):  # sometimes two mutations on top of each other
        name, fn = draw(st.sampled_from(MUTATIONS))
        try:
            out = fn(json.loads(json.dumps(doc)), draw)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            break  # a second mutation that needs what the first one removed
        names.append(name)
        doc = out
        if isinstance(doc, bytes):
            break
    return " + ".join(names) or "none", doc if isinstance(doc, bytes) else json.dumps(doc).encode()


class Tally:
    def __init__(self) -> None:
        self.n = 0
        self.valid = 0
        self.replayed: dict[bytes, tuple[int, str]] = {}


TALLY = Tally()


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's --help etc. (not expected here)
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=mutants())
def test_mutated_traces_are_read_or_refused_never_crash(case: tuple[str, bytes], tmp_path_factory: pytest.TempPathFactory,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    name, data = case
    TALLY.n += 1
    f = tmp_path_factory.getbasetemp() / "fuzz.itf.json"
    f.write_bytes(data)
    # the loader: a Trace or one ItfError line, nothing else
    try:
        itf.read(f, warn=False)
        valid = True
    except itf.ItfError as e:
        valid = False
        assert "\n" not in str(e) and str(e).startswith(str(f)), (name, str(e))
    TALLY.valid += valid
    # kvmc show: 0 (valid) or one error line, exit 2
    rc, out, err = _cli(["show", str(f), "--color", "never"], capsys)
    assert "Traceback" not in err and "internal error" not in err, (name, err)
    assert rc == (0 if valid else 2), (name, rc, err)
    if not valid:
        assert len(err.strip().splitlines()) == 1 and err.startswith("kvmc: error:"), (name, err)
    # kvmc replay: bad input is exit 2, never `diverged` (exit 1); a valid trace behaves as recorded
    key = data if valid else b""
    if valid and key in TALLY.replayed:
        rc, err = TALLY.replayed[key]
    else:
        rc, out, err = _cli(["replay", str(f)], capsys)
        if valid:
            TALLY.replayed[key] = (rc, err)
    assert "Traceback" not in err and "internal error" not in err, (name, err)
    assert "diverged" not in err and rc != 1, (name, rc, err)
    assert rc in ((0, 2) if valid else (2,)), (name, rc, err)


def test_fuzz_ran_enough() -> None:
    """Runs after the fuzz test in this file (pytest keeps the file's order): it saw every example."""
    if TALLY.n == 0:
        pytest.skip("the fuzz test did not run in this session")
    assert TALLY.n >= EXAMPLES, TALLY.n


@pytest.mark.parametrize("mutation", ["drop last state", "flip the verdict", "out of range", "binary", "delete vars/params/#meta"])
def test_a_few_mutants_through_the_real_cli(mutation: str, tmp_path: Path) -> None:
    """The installed entry point (a fresh interpreter), for a few kinds of mutant."""
    doc = json.loads(TEXTS[sorted(TEXTS)[0]])
    if mutation == "drop last state":
        doc["states"].pop()
        doc["#meta"].pop("depth")
        data = json.dumps(doc).encode()
    elif mutation == "flip the verdict":
        doc["#meta"]["verdict"] = "holds"
        doc["#meta"].pop("expected", None)
        data = json.dumps(doc).encode()
    elif mutation == "out of range":
        doc["states"][0]["status"][0] = {"#bigint": "9"}
        data = json.dumps(doc).encode()
    elif mutation == "binary":
        data = bytes(range(256))
    else:
        del doc["vars"]
        data = json.dumps(doc).encode()
    f = tmp_path / "m.itf.json"
    f.write_bytes(data)
    for cmd in (["show", str(f)], ["replay", str(f)]):
        p = subprocess.run([sys.executable, "-m", "checker.cli", *cmd], cwd=ROOT, capture_output=True, text=True)
        assert p.returncode == 2, (cmd, p.returncode, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("kvmc: error:"), p.stderr
        assert "Traceback" not in p.stderr and "diverged" not in p.stderr + p.stdout
