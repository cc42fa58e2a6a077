"""The import graph of twin/: no cycle, and no arrow from a lower layer to an upper one.

Every import counts, at module level, inside a function, under TYPE_CHECKING: an
import hidden in a function is a dependency all the same. The layers are written
once, here, lowest first; a module may import its own layer and the ones below.
A module no layer names fails the test, so a new package takes its place on
purpose. docs/architecture.md draws the same order.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TWIN = Path(__file__).resolve().parents[2] / "twin"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves", ("twin.errors", "twin.units", "twin.progress", "twin.unixsock",
                "twin.nsenter", "twin.rundir", "twin.junit", "twin.node", "twin.apt")),
    ("owners", ("twin.owner", "twin.state")),
    ("compiler", ("twin.fabric", "twin.dataplane")),
    ("routes", ("twin.routes",)),
    ("endpoint", ("twin.mrc",)),
    ("endpoints", ("twin.endpoints", "twin.frr")),
    ("kernel-facing", ("twin.readback", "twin.verify", "twin.remote", "twin.dockerd",
                       "twin.images")),
    ("runtimes", ("twin.runtime",)),
    ("lab", ("twin.lab",)),
    ("faults", ("twin.faults",)),
    ("traffic", ("twin.failover", "twin.traffic")),
    ("telemetry", ("twin.telemetry",)),
    ("lifecycle", ("twin.lifecycle",)),
    ("chaos", ("twin.chaos",)),
    ("ci", ("twin.ci",)),
    ("cli", ("twin.cli", "twin.__main__", "twin")),
]


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(module imported, line) for every twin import anywhere in the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from twin.x import y` imports module twin.x.y when there is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t not in known and "." in t:
                t = t.rpartition(".")[0]
            if t in known and t != name:
                found.append((t, node.lineno))
    return found


def layer_of(name: str) -> int | None:
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def graph(root: Path) -> dict[str, list[tuple[str, int]]]:
    mods = modules(root)
    return {n: imports(n, p, set(mods)) for n, p in mods.items()}


def cycles(edges: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted({t for t, _ in edges.get(start, [])})))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted({t for t, _ in edges.get(child, [])}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    scc.append(member)
                    if member == node:
                        break
                if len(scc) > 1:
                    found.append(sorted(scc))
    return found


def upward(edges: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Each import from a lower layer to an upper one, as a line that says where."""
    out = []
    for name, targets in sorted(edges.items()):
        mine = layer_of(name)
        for t, line in targets:
            theirs = layer_of(t)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{name}:{line} imports {t}: layer {LAYERS[mine][0]} is below "
                           f"{LAYERS[theirs][0]}")
    return out


def test_every_module_has_a_layer():
    unplaced = [n for n in modules(TWIN) if layer_of(n) is None]
    assert not unplaced, (f"modules no layer names: {unplaced}; add their package to "
                          "LAYERS in tests/unit/test_layers.py, where it belongs")


def test_twin_imports_have_no_cycle():
    found = cycles(graph(TWIN))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_layer_imports_one_above_it():
    found = upward(graph(TWIN))
    assert not found, "imports running up the layers:\n" + "\n".join(found)


# -- the checker itself: it must see what it is for ----------------------------------------


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "twin"

    def write(files: dict[str, str]) -> Path:
        for rel, text in files.items():
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return root
    return write


def test_checker_finds_a_cycle_hidden_in_a_function(tree):
    root = tree({"__init__.py": "", "lab/__init__.py": "", "faults.py": "",
                 "lab/pipeline.py": "def restart():\n    from twin import faults\n",
                 })
    (root / "faults.py").write_text("from twin.lab.pipeline import restart\n")
    assert cycles(graph(root)) == [["twin.faults", "twin.lab.pipeline"]]


def test_checker_finds_an_import_up_the_layers(tree):
    root = tree({"__init__.py": "", "lab/__init__.py": "", "telemetry/__init__.py": "",
                 "lab/pipeline.py": "def down():\n    from twin.telemetry import stack\n",
                 "telemetry/stack.py": "",
                 "runtime/__init__.py": "", "runtime/base.py":
                 "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                 "    from twin.lab import pipeline\n"})
    found = upward(graph(root))
    assert found == [
        "twin.lab.pipeline:2 imports twin.telemetry.stack: layer lab is below telemetry",
        "twin.runtime.base:3 imports twin.lab.pipeline: layer runtimes is below lab",
    ]


def test_checker_resolves_relative_imports_and_allows_downward_ones(tree):
    root = tree({"__init__.py": "", "lab/__init__.py": "from . import phases\n",
                 "lab/phases.py": "from ..runtime import base\n",
                 "runtime/__init__.py": "", "runtime/base.py": "from twin import errors\n",
                 "errors.py": ""})
    edges = graph(root)
    assert edges["twin.lab"] == [("twin.lab.phases", 1)]
    assert edges["twin.lab.phases"] == [("twin.runtime.base", 1)]
    assert upward(edges) == [] and cycles(edges) == []
