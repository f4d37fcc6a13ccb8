"""Frame declarations compose: a transition that calls another transition declares at least what
the callee may modify (mypyvy's `modifies`). The concrete run checks each frame only where a
field really changes, so a missing field on a path no test reaches (a node split under a held
load-back lock) would stay unnoticed; this reads the call graph from the source instead."""

from __future__ import annotations

import inspect
import re

import model.system  # noqa: F401  (registers every transition)
from model.transition import REGISTRY


def _callees() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for name, info in REGISTRY.items():
        body = inspect.getsource(info.fn).split("\n", 1)[1]  # past the decorator's first line
        body = body[body.index("def "):]
        out[name] = {m for m in REGISTRY if m != name and re.search(rf"(?<![\w.])(\w+\.)?{m}\(", body)}
    return out


def _reach(calls: dict[str, set[str]], name: str) -> set[str]:
    seen: set[str] = set()
    todo = [name]
    while todo:
        for c in calls[todo.pop()]:
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def test_the_call_graph_is_read() -> None:
    calls = _callees()
    assert "split_node" in calls["insert"] and "insert" in calls["cache_finished_req"]
    assert "split_node" in _reach(calls, "release_kv_cache")


def test_every_caller_declares_what_its_callees_modify() -> None:
    calls = _callees()
    missing = {}
    for name in REGISTRY:
        need = set().union(*(set(REGISTRY[c].modifies) for c in _reach(calls, name)))
        gap = need - set(REGISTRY[name].modifies)
        if gap:
            missing[name] = sorted(gap)
    assert not missing, f"transitions that do not declare fields their callees modify: {missing}"
