"""The layering the folders promise: docs/ARCHITECTURE.md's `order:` line declares the layers,
lowest first, and a module imports only its own layer and those below it; and no module of the
project imports itself back through others (no import cycle anywhere), counting imports inside
functions too (a late import hides a cycle from Python, not from a newcomer who has to untie it).

The graph is read from the source (ast), every `.py` file under the project's folders, so a new
module is checked the day it is added; a module of no declared layer fails the test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model", "specs", "pool", "checker", "upstream", "bench", "docs")
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def layers(doc: Path = ARCHITECTURE) -> list[str]:
    """The layers, lowest first, from the one line of docs/ARCHITECTURE.md that declares them
    (`order: model < specs < ...`)."""
    found = re.findall(r"^\s*order:\s*(.+)$", doc.read_text(), flags=re.M)
    assert len(found) == 1, f"{doc}: expected exactly one `order: a < b < ...` line, found {len(found)}"
    return [u.strip() for u in found[0].split("<")]


def _module(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(root: Path, path: Path, mods: set[str]) -> set[str]:
    """The project modules `path` imports, at module level or inside a function. `from pkg import
    name` is an edge to `pkg.name` where that is a module, else to `pkg`; the parent packages an
    import initialises on the way are not edges (every import of `a.b` runs `a`)."""
    mod = _module(root, path)
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
            for a in n.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
    return {m for m in out if m in mods and m != mod}


def graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> nx.DiGraph:
    files = {_module(root, p): p for d in packages for p in (root / d).rglob("*.py")}
    g = nx.DiGraph()
    for m, p in files.items():
        g.add_node(m)
        for t in _imports(root, p, set(files)):
            g.add_edge(m, t)
    return g


def unit(mod: str, order: list[str]) -> str | None:
    """The layer of `mod`: the longest declared name it is or lies under."""
    hits = [u for u in order if mod == u or mod.startswith(u + ".")]
    return max(hits, key=len) if hits else None


def upward(g: nx.DiGraph, order: list[str]) -> list[str]:
    out = []
    for a, b in g.edges:
        ua, ub = unit(a, order), unit(b, order)
        if ua is not None and ub is not None and order.index(ub) > order.index(ua):
            out.append(f"{a} ({ua}) -> {b} ({ub})")
    return sorted(out)


def cycles(g: nx.DiGraph) -> list[list[str]]:
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def test_the_order_is_declared_and_the_graph_read() -> None:
    order = layers()
    assert len(set(order)) == len(order), f"a layer named twice in docs/ARCHITECTURE.md's order: {order}"
    assert order[:2] == ["model", "specs"], order
    g = graph()
    # edges of each kind the reader must see: top level, `from . import x`, inside a function
    assert g.has_edge("specs.properties", "model.state")
    assert g.has_edge("pool.abstraction", "pool.ownership")
    assert g.has_edge("checker.cli.replay", "upstream.sched.replay")  # inside cmd_replay


def test_every_module_has_a_layer() -> None:
    order = layers()
    lost = sorted(m for m in graph() if unit(m, order) is None)
    assert not lost, (f"modules of no layer in docs/ARCHITECTURE.md's `order:` line: {lost}; "
                      "add their folder to the order where it belongs")


def test_no_layer_imports_upward() -> None:
    bad = upward(graph(), layers())
    assert not bad, "imports against the layering (docs/ARCHITECTURE.md `order:`, lowest first):\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    found = cycles(graph())
    assert not found, "import cycles (function-level imports count):\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_see_a_planted_cycle_and_arrow(tmp_path: Path) -> None:
    """The two checks fail where they must: a cycle through a function-level import, and an
    import from a lower layer into a higher one."""
    for name, text in {"low/__init__.py": "", "low/a.py": "def f():\n    from . import b\n",
                       "low/b.py": "from low.a import f\nfrom high import c\n",
                       "high/__init__.py": "", "high/c.py": "import low.b\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    g = graph(tmp_path, ("low", "high"))
    assert cycles(g) == [["high.c", "low.b"], ["low.a", "low.b"]]
    assert upward(g, ["low", "high"]) == ["low.b (low) -> high.c (high)"]
