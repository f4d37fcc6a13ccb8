"""The layering the folders promise (docs/ARCHITECTURE.md): model/ imports no other layer, specs/
only model/, checker's folders only those below them, and no two modules import each other, even
through a function-level import (a cycle there is a tangle a newcomer has to untie)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
# lowest first: a unit may import itself and the units before it
ORDER = ["model", "specs", "checker.verdict", "checker.progress", "checker.interrupt", "checker.executors", "checker.traces", "checker.engines", "checker.reports",
         "checker.replay", "checker.mutation", "checker.cli"]
PACKAGES = ("model", "specs", "checker", "pool", "upstream")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    mod = _module(path)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out = set()
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.Import):
            out.update(a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = n.module or ""
            if n.level:
                up = pkg.split(".")[: len(pkg.split(".")) - (n.level - 1)]
                base = ".".join(up + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in n.names)  # `from pkg import module`
    return {m for m in out if m.split(".")[0] in PACKAGES}


def _graph() -> nx.DiGraph:
    mods = {_module(p): p for d in PACKAGES for p in (ROOT / d).rglob("*.py")}
    g = nx.DiGraph()
    for m, p in mods.items():
        g.add_node(m)
        for t in _imports(p):
            if t in mods and t != m:
                g.add_edge(m, t)
    return g


def _unit(mod: str) -> str | None:
    for u in ORDER:
        if mod == u or mod.startswith(u + "."):
            return u
    return None


def test_no_layer_imports_upward() -> None:
    g = _graph()
    upward = []
    for a, b in g.edges:
        ua, ub = _unit(a), _unit(b)
        if ua is None or ub is None or ua == ub:
            if ua in ("model", "specs") and ub is None and b.split(".")[0] in PACKAGES:
                upward.append(f"{a} -> {b}")
            continue
        if ORDER.index(ub) > ORDER.index(ua):
            upward.append(f"{a} -> {b}")
    assert not upward, "imports against the layering:\n" + "\n".join(sorted(upward))


def test_no_import_cycles_in_checker() -> None:
    full = _graph()
    g = full.subgraph(n for n in full if n.startswith("checker"))
    cycles = list(nx.simple_cycles(g))
    assert not cycles, f"import cycles: {cycles[:5]}"
