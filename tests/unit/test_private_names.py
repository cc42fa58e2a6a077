"""No module of twin/ imports another module's private (`_`-prefixed) name: what one module
needs of another has a public name, or lives where it is used.

Read from the source (ast), every import anywhere in a module: at module level, in a
function, under TYPE_CHECKING. `from twin.x import _y` counts whether _y is a function,
a constant or a module of the package.

The exceptions, each a module and what it may take of whom:

    twin.mrc._fastpath   the compiled extension module (built from twin/mrc/*.c, as
                         setuptools names one: a leading underscore for the C behind
                         a Python face). It is imported as a module, by twin.mrc.core
                         (which binds it) and by the differential fuzzer that judges it
                         against the Python reference; it is nobody's private name.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_layers import imported_from, module_name

TWIN = Path(__file__).resolve().parents[2] / "twin"

# (importing module, or a package prefix of it; the module whose name it imports; name)
ALLOWED: tuple[tuple[str, str, str], ...] = (
    ("twin.mrc", "twin.mrc", "_fastpath"),
)


def private_imports(name: str, path: Path, text: str) -> list[tuple[str, str, int]]:
    """(module imported from, private name, line) for each twin import of `_x` (a dunder
    aside) in module `name`'s source `text`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.ImportFrom):
            mod = imported_from(package, node)
            pairs = [(mod, a.name) for a in node.names]
        elif isinstance(node, ast.Import):  # import twin.x._y
            pairs = [tuple(a.name.rsplit(".", 1)) for a in node.names if "." in a.name]
        else:
            continue
        for mod, item in pairs:
            if not (mod == "twin" or mod.startswith("twin.")):
                continue
            if item.startswith("_") and not (item.startswith("__") and item.endswith("__")):
                found.append((mod, item, node.lineno))
    return found


def allowed(importer: str, mod: str, item: str) -> bool:
    return any((importer == who or importer.startswith(who + ".")) and (mod, item) == (m, i)
               for who, m, i in ALLOWED)


def offenders(root: Path) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        for mod, item, line in private_imports(name, path, path.read_text()):
            if not allowed(name, mod, item):
                out.append(f"{name}:{line} imports {mod}.{item}")
    return out


def test_no_module_imports_another_modules_private_name():
    found = offenders(TWIN)
    assert not found, ("private names imported across modules (give them a public name, "
                       "or move them to where they are used):\n" + "\n".join(found))


def test_every_exception_is_still_needed():
    """An exception nothing takes any more is taken off the list."""
    taken = {(mod, item) for path in TWIN.rglob("*.py")
             for mod, item, _ in private_imports(module_name(path, TWIN), path,
                                                 path.read_text())}
    assert {(m, i) for _, m, i in ALLOWED} <= taken


# -- the checker sees what it is for ---------------------------------------------------------


def test_checker_finds_every_way_of_importing_a_private_name(tmp_path):
    root = tmp_path / "twin"
    (root / "faults").mkdir(parents=True)
    files = {
        "faults/__init__.py": "from twin.faults.record import Fault, _drop\n",
        "faults/kinds.py": "def f():\n    from .record import _HIDING, __all__\n",
        "faults/catalog.py": "import twin.faults._helpers\nimport os._exit\n",
        "mrc.py": "from twin.mrc import _fastpath\nfrom os import _exit\n",
    }
    for rel, text in files.items():
        (root / rel).write_text(text)
    assert offenders(root) == [
        "twin.faults:1 imports twin.faults.record._drop",
        "twin.faults.catalog:1 imports twin.faults._helpers",
        "twin.faults.kinds:2 imports twin.faults.record._HIDING",
    ]  # twin.mrc's _fastpath is the listed exception; os's names are not twin's
