"""The import graph of twin/: no cycle, and no arrow from a lower layer to an upper one.

Every import counts, at module level, inside a function, under TYPE_CHECKING: an
import hidden in a function is a dependency all the same. The layers are written
once, here, lowest first; a module may import its own layer and the ones below.
A module no layer names fails the test, so a new package takes its place on
purpose. docs/architecture.md draws the same order.

The compiled module twin.mrc._fastpath is a module of the graph too: its C imports no
twin module (only the standard library's), and what it uses of twin is handed to it by
twin.mrc.core (`bindings()`, passed to its bind()), so its arrows are read from there:
one to each module a bound value is taken from.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TWIN = Path(__file__).resolve().parents[2] / "twin"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves", ("twin.errors", "twin.registry", "twin.units", "twin.validate", "twin.progress",
                "twin.unixsock", "twin.nsenter", "twin.rundir", "twin.junit", "twin.node",
                "twin.apt")),
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


def imported_from(package: str, node: ast.ImportFrom) -> str:
    """The module a `from ... import` names, its dots resolved against `package`."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """(module imported, line) for every twin import anywhere in the module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = imported_from(package, node)
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


COMPILED = "twin.mrc._fastpath"  # built from twin/mrc/*.c
BINDER = ("mrc", "core.py")  # the module that binds it, under twin/
STDLIB_IMPORTS = {"collections"}  # what the C may import itself


def c_imports(text: str) -> list[tuple[str, int]]:
    """(module, line) for each PyImport_* call of C source `text`: the module its string
    literal names, or the call itself where its argument is not a literal."""
    found = []
    for m in re.finditer(r'\bPyImport_\w+\s*\(\s*(?:"([^"]*)")?', text):
        found.append((m.group(1) if m.group(1) is not None else m.group(0),
                      text.count("\n", 0, m.start()) + 1))
    return found


def bound_modules(root: Path, known: set[str]) -> dict[str, tuple[str, int]]:
    """What the binder's `bindings()` hands the compiled module: {name: (module, line)},
    each value written module.name (an attribute of an imported twin module). A value
    written any other way is an error: the layers could not see where it comes from."""
    path = root.joinpath(*BINDER)
    tree = ast.parse(path.read_text(), str(path))
    names = {}  # the binder's names for twin modules
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if f"{node.module}.{a.name}" in known:
                    names[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known and a.asname:
                    names[a.asname] = a.name
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == "bindings"), None)
    assert fn is not None, f"{path}: no bindings(), the compiled module's dependencies"
    ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), None)
    assert ret is not None and isinstance(ret.value, ast.Dict), \
        f"{path}: bindings() must return a dict literal"
    out = {}
    for key, value in zip(ret.value.keys, ret.value.values, strict=True):
        root_name = value
        while isinstance(root_name, ast.Attribute):
            root_name = root_name.value
        assert (isinstance(key, ast.Constant) and isinstance(value, ast.Attribute)
                and isinstance(root_name, ast.Name) and root_name.id in names), \
            (f"{path}:{value.lineno}: bind each value as module.name (a twin module "
             f"{path.name} imports), so the layers see where it comes from")
        out[key.value] = (names[root_name.id], value.lineno)
    return out


def graph(root: Path) -> dict[str, list[tuple[str, int]]]:
    """Each module's imports; the compiled module's are what its binder binds (where the
    tree has a binder)."""
    mods = modules(root)
    known = set(mods)
    if root.joinpath(*BINDER).exists():
        known.add(COMPILED)
    edges = {n: imports(n, p, known) for n, p in mods.items()}
    if COMPILED in known:
        edges[COMPILED] = sorted(set(bound_modules(root, known).values()))
    return edges


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


def test_the_compiled_module_imports_no_twin_module_itself():
    """Its C takes what it uses of twin from bind(): an import in the C would be a
    dependency the layers cannot see."""
    found = [f"{p.name}:{line} imports {mod}" for p in sorted((TWIN / "mrc").glob("*.c"))
             for mod, line in c_imports(p.read_text()) if mod not in STDLIB_IMPORTS]
    assert not found, ("the compiled module imports, in C (bind it from twin/mrc/core.py "
                       "instead):\n" + "\n".join(found))


# The compiled module's C units, lowest first: `_x.c`, and its header `fp_x.h` where other
# units use it. Each may include the headers of the units before it only
# (docs/transport-core.md), so no unit depends on one that depends on it.
C_UNITS = ("_util", "_sender", "_receiver", "_datapath", "_module")


def c_unit_of(filename: str) -> str:
    """The unit a C file or header belongs to: "_x" for _x.c and fp_x.h."""
    stem = filename.rsplit(".", 1)[0]
    return "_" + stem[3:] if stem.startswith("fp_") else stem


def c_includes(text: str) -> list[str]:
    """The units of the module whose headers C source `text` includes ("_x" for
    #include "fp_x.h")."""
    return [c_unit_of(h) for h in re.findall(r'^\s*#include\s+"(fp_\w+\.h)"', text, re.M)]


def c_order_breaks(sources: dict[str, str]) -> list[str]:
    """Each #include of a unit's header by a unit at or below it in C_UNITS (a unit's own
    header aside), and each C file or header that is not a unit of C_UNITS."""
    found = [f"{name}: not one of the units {C_UNITS}" for name in sources
             if name not in C_UNITS]
    for name, text in sources.items():
        for inc in c_includes(text):
            header = f"fp{inc}.h"
            if inc not in C_UNITS:
                found.append(f"{name} includes {header}: not one of the units")
            elif name in C_UNITS and inc != name and \
                    C_UNITS.index(inc) >= C_UNITS.index(name):
                found.append(f"{name} includes {header}, a unit above it")
    return found


def test_the_c_units_include_only_the_units_below_them():
    sources: dict[str, str] = {}
    mrc = TWIN / "mrc"
    for p in sorted([*mrc.glob("*.c"), *mrc.glob("*.h")]):
        sources[c_unit_of(p.name)] = sources.get(c_unit_of(p.name), "") + p.read_text()
    assert set(sources) == set(C_UNITS)
    assert not c_order_breaks(sources), "\n".join(c_order_breaks(sources))


def test_the_include_check_finds_a_circle():
    ok = {"_util": "", "_sender": '#include "fp_util.h"\n#include "fp_sender.h"\n',
          "_datapath": '#include "fp_sender.h"\n'}
    assert c_order_breaks(ok) == []
    up = dict(ok, _sender='#include "fp_datapath.h"\n')
    assert c_order_breaks(up) == ["_sender includes fp_datapath.h, a unit above it"]
    assert c_order_breaks({"_extra": ""}) == [f"_extra: not one of the units {C_UNITS}"]
    assert c_unit_of("fp_util.h") == c_unit_of("_util.c") == "_util"


def c_private_names(text: str) -> list[tuple[str, int]]:
    """(name, line) for each string literal of C source `text` that starts like a Python
    private name ("_x..."), #include lines aside."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.lstrip().startswith("#include"):
            found += [(m.group(1), number) for m in re.finditer(r'"(_[A-Za-z]\w*)', line)]
    return found


def test_the_compiled_module_reads_no_private_python_name():
    """What the C takes from Python it takes by public names (bind's, and the
    attributes of what is bound): a private one is another module's inside."""
    found = [f"{p.name}:{line} {name}" for p in sorted((TWIN / "mrc").glob("*.c"))
             for name, line in c_private_names(p.read_text())]
    assert not found, "private Python names in the C:\n" + "\n".join(found)


def test_the_compiled_module_depends_on_what_core_binds_and_that_obeys_the_layers():
    edges = graph(TWIN)
    bound = {m for m, _ in edges[COMPILED]}
    assert {"twin.mrc.transport", "twin.mrc.evset", "twin.mrc.dcqcn"} <= bound
    assert any(t == COMPILED for t, _ in edges["twin.mrc.core"])  # the binder imports it
    assert not [c for c in cycles(edges) if COMPILED in c]
    assert not [u for u in upward(edges) if u.startswith(COMPILED)]


def test_bind_takes_exactly_what_core_binds():
    """bind() refuses a name missing or a name no part takes (tests/unit/
    test_transport_core.py): core.compiled() binding at all says core supplies exactly
    its parameters, and the names the layers read are the ones it passes."""
    from twin.mrc import core
    pytest.importorskip(COMPILED)
    assert core.compiled().bound()
    mods = modules(TWIN)
    assert set(bound_modules(TWIN, set(mods) | {COMPILED})) == set(core.bindings())


# -- the checker itself: it must see what it is for ----------------------------------------


def test_checker_finds_an_import_in_the_c_and_a_call_it_cannot_read():
    text = ('#include "fp_util.h"\n'
            'static int lookup(void) {\n'
            '    PyObject *c = PyImport_ImportModule("collections");\n'
            '    PyObject *t = PyImport_ImportModule( "twin.mrc.transport");\n'
            '    return PyImport_Import(name) != NULL;\n}\n')
    assert c_imports(text) == [("collections", 3), ("twin.mrc.transport", 4),
                               ("PyImport_Import(", 5)]


def test_checker_finds_a_private_name_in_the_c_but_not_an_include():
    text = ('#include "_util.h"\n'  # an include is no Python name, whatever it is called
            '    GET(Msg, t, "_Msg");\n'
            '    {&s_state, "state"}, {&s_cursor, "_cursor"},\n')
    assert c_private_names(text) == [("_Msg", 2), ("_cursor", 3)]


def test_checker_sees_the_compiled_module_in_a_cycle_through_what_core_binds(tree):
    files = {"__init__.py": "", "mrc/__init__.py": "", "mrc/evset.py": "",
             "mrc/transport.py": "from twin.mrc import evset\n",
             "mrc/core.py": "from twin.mrc import evset, transport\n\n"
                            "def bindings():\n"
                            "    return {'Sender': transport.Sender,\n"
                            "            'Ev': evset.Ev}\n\n"
                            "def compiled():\n    from twin.mrc import _fastpath\n"}
    edges = graph(tree(files))
    assert edges[COMPILED] == [("twin.mrc.evset", 5), ("twin.mrc.transport", 4)]
    assert ("twin.mrc._fastpath", 8) in edges["twin.mrc.core"]
    assert cycles(edges) == []
    root = tree({"mrc/transport.py": "from twin.mrc import _fastpath\n"})
    assert cycles(graph(root)) == [[COMPILED, "twin.mrc.transport"]]


def test_checker_refuses_a_bound_value_it_cannot_place(tree):
    root = tree({"__init__.py": "", "mrc/__init__.py": "", "mrc/transport.py": "",
                 "mrc/core.py": "from twin.mrc.transport import Sender\n\n"
                                "def bindings():\n    return {'Sender': Sender}\n"})
    with pytest.raises(AssertionError, match="bind each value as module.name"):
        graph(root)




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
