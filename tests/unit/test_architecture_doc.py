"""docs/architecture.md and README.md's layout against the code, so that neither rots
silently (issue 40):

    names      every path the page names (twin/..., tests/..., docs/..., bench/...,
               images/...) exists, and every module it names (twin.x.y, or a name
               defined in module twin.x: twin.lab.pipeline.up) does
    layers     its table of layers is LAYERS (tests/unit/test_layers.py): the layers'
               names in LAYERS' order, each with its packages, in order
    imports    the table's imports column is the package graph, as the layer test
               reads it: every package drawn is imported, and every import between
               packages is drawn (the leaves and the owners aside, as the page says)
    the tree   "Where each capability lives" names files of the packages it lists,
               and every module of twin/ (a subpackage may be named for its modules)
    README     its layout names only files that exist, and every page of docs/

A failure says what to change on the page: the code is the reference.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.unit.test_layers import COMPILED, LAYERS, TWIN, graph, layer_of, modules

ROOT = TWIN.parent
DOC = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"
ROOTS = ("twin", "tests", "docs", "bench", "images", "lab")  # where a named path starts
UNDRAWN = {p for _, prefixes in LAYERS[:2] for p in prefixes}  # leaves and owners
assert [name for name, _ in LAYERS[:2]] == ["leaves", "owners"]

PATH = re.compile(r"(?<![\w./<-])(?:" + "|".join(ROOTS) + r")/[\w./*-]*")
MODULE = re.compile(r"(?<![\w./-])twin(?:\.[A-Za-z_]\w*)+")
BARE = re.compile(r"(?<![\w./<-])(\w[\w.-]*\.(?:py|c|h|md)|\w+/)(?![\w/<])")


def section(text: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of that level."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"no '## {heading}' section"
    return m.group(1)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)


def paths_in(text: str) -> list[str]:
    """The rooted paths `text` names, but those with a part to fill in (lab/build/<lab>/)."""
    return [m.group(0) for m in PATH.finditer(text) if text[m.end():m.end() + 1] != "<"]


def path_exists(name: str) -> bool:
    name = name.rstrip(".,;:")
    if "*" in name:
        return any(ROOT.glob(name))
    return (ROOT / name).exists() or (ROOT / (name + ".py")).exists()


# -- names -------------------------------------------------------------------------


def top_level_names(path: Path) -> set[str]:
    """What module `path` binds at top level: defs, classes, assignments, imports."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def module_problem(dotted: str, mods: dict[str, Path]) -> str | None:
    """Why `dotted` names nothing (None: it names a module, or a name a module defines)."""
    known = set(mods) | {COMPILED}
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        mod = ".".join(parts[:cut])
        if mod not in known:
            continue
        if cut == len(parts):
            return None
        attr = parts[cut]
        if mod != COMPILED and attr not in top_level_names(mods[mod]):
            return f"{dotted}: module {mod} defines no {attr}"
        return None
    return f"{dotted}: no such module"


def unknown_names(text: str) -> list[str]:
    mods = modules(TWIN)
    found = [f"{p}: no such path" for p in sorted(set(paths_in(text)))
             if not path_exists(p)]
    found += [why for m in sorted(set(MODULE.findall(text)))
              if (why := module_problem(m, mods))]
    return found


def test_every_path_and_module_the_page_names_exists():
    found = unknown_names(DOC.read_text())
    assert not found, ("docs/architecture.md names what the code does not have (rename "
                       "or drop it):\n" + "\n".join(found))


def test_the_name_check_sees_a_missing_module_a_missing_name_and_a_missing_path():
    text = ("`twin.lab.pipeline.up` and `twin/lab/pipeline.py`, twin.mrc._fastpath, but "
            "twin.lab.pipeline.nothing_here, twin.nowhere, twin/nowhere.py and "
            "`mrc-twin.lab` (a container label, no module); lab/build/<lab>/ is made")
    assert unknown_names(text) == [
        "twin/nowhere.py: no such path",
        "twin.lab.pipeline.nothing_here: module twin.lab.pipeline defines no nothing_here",
        "twin.nowhere: module twin defines no nowhere",
    ]


# -- layers and imports ------------------------------------------------------------------


def layer_rows(text: str) -> list[tuple[str, str, set[str]]]:
    """(layer, package, packages it imports) for each row of the page's layer table; a
    row with no layer of its own is in the layer above it."""
    rows, layer = [], ""
    table = [line for line in section(text, "Layers, lowest first").splitlines()
             if line.startswith("|")]
    assert len(table) > 2, "no table of layers under '## Layers, lowest first'"
    for line in table[2:]:  # the header and its rule
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"a row of the layer table has 4 cells: {line}"
        layer = cells[0] or layer
        package = cells[1].strip("`")
        drawn = {("twin" if n == "twin" else f"twin.{n}")
                 for n in (x.strip() for x in cells[2].split(",")) if n}
        rows.append((layer, package, drawn))
    return rows


def package_of(module: str) -> str:
    """The LAYERS entry a module belongs to (twin.lab.phases: twin.lab)."""
    best = ""
    for _, prefixes in LAYERS:
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best = p
    return best


def package_imports() -> dict[str, set[str]]:
    """Each LAYERS package's imports of other packages, the leaves and owners aside."""
    out: dict[str, set[str]] = {p: set() for _, prefixes in LAYERS for p in prefixes}
    for name, targets in graph(TWIN).items():
        if layer_of(name) is None:
            continue  # test_layers fails on it
        mine = package_of(name)
        out[mine] |= {package_of(t) for t, _ in targets} - UNDRAWN - {mine}
    return out


def test_the_layers_are_layers_names_in_order():
    rows = layer_rows(DOC.read_text())
    names = [layer for i, (layer, _, _) in enumerate(rows) if i == 0 or rows[i - 1][0] != layer]
    assert names == [name for name, _ in LAYERS], \
        "the page's layers, lowest first, must be LAYERS' (tests/unit/test_layers.py)"
    for name, prefixes in LAYERS:
        assert [p for layer, p, _ in rows if layer == name] == list(prefixes), \
            f"layer {name}: the page's packages must be LAYERS', in its order"


def test_the_imports_drawn_are_the_imports_there_are():
    actual = package_imports()
    wrong = []
    for _, package, drawn in layer_rows(DOC.read_text()):
        for p in sorted(drawn - actual[package]):
            wrong.append(f"{package} does not import {p}: take it out of its row")
        for p in sorted(actual[package] - drawn):
            wrong.append(f"{package} imports {p}: add it to its row")
    assert not wrong, ("docs/architecture.md's layer table draws another graph than the "
                       "code's:\n" + "\n".join(wrong))


def test_the_import_table_is_read_as_written():
    text = ("## Layers, lowest first\n\n| layer | package | imports | what |\n|---|---|---|---|\n"
            "| lab | `twin.lab` | runtime, fabric | the lab |\n"
            "| | `twin.x` | | more |\n"
            "| cli | `twin.cli` | twin, lab | output |\n\n## Next\n| a | b | c | d |\n")
    assert layer_rows(text) == [("lab", "twin.lab", {"twin.runtime", "twin.fabric"}),
                                ("lab", "twin.x", set()),
                                ("cli", "twin.cli", {"twin", "twin.lab"})]
    assert package_of("twin.node.ebpf.tc") == "twin.node" and package_of("twin") == "twin"


# -- the tree ----------------------------------------------------------------------------


def tree_entries(block: str) -> list[tuple[str, list[str]]]:
    """(the directory or file a line at column 0 starts with, every path its lines name)
    for each entry of a layout block: a path from a root (twin/..., docs/...) as written,
    a bare name (spec.py, formats/) as the entry's."""
    entries: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line[:1].strip():
            head = line.split()[0]
            entries.append((head, []))
        elif not entries:
            continue
        names = entries[-1][1]
        names += [p for p in paths_in(line) if p != entries[-1][0]]
        rest = PATH.sub(" ", line)
        names += BARE.findall(rest)
    return entries


def resolve(head: str, name: str) -> list[Path]:
    """Where a name of an entry is: a rooted path as written, a bare one anywhere under
    the entry's directory (asm.py of twin/node/ is twin/node/ebpf/asm.py)."""
    if name.startswith(tuple(r + "/" for r in ROOTS)):
        return [ROOT / name.rstrip("/")] if path_exists(name) else []
    base = ROOT / head
    if not base.is_dir():
        return []
    want = name.rstrip("/")
    return [p for p in [base / want, *base.rglob(want)] if p.exists()]


def tree_problems(block: str) -> tuple[list[str], set[Path]]:
    """(names that are nowhere, the files and directories named)."""
    missing, named = [], set()
    for head, names in tree_entries(block):
        if not path_exists(head) and "<" not in head:
            missing.append(f"{head}: no such path")
        elif (ROOT / head).is_file():
            named.add(ROOT / head)  # a module's own entry (twin/lifecycle.py)
        for name in names:
            if "<" in name:
                continue
            found = resolve(head, name)
            if not found:
                missing.append(f"{name} (under {head}): not there")
            named |= set(found)
    return missing, named


def capability_tree() -> str:
    blocks = code_blocks(section(DOC.read_text(), "Where each capability lives"))
    assert len(blocks) == 1, "one tree under '## Where each capability lives'"
    return blocks[0]


def test_the_tree_names_only_what_exists():
    missing, _ = tree_problems(capability_tree())
    assert not missing, "docs/architecture.md's tree names:\n" + "\n".join(missing)


def test_the_tree_names_every_module():
    _, named = tree_problems(capability_tree())
    left = [str(p.relative_to(ROOT)) for p in sorted(TWIN.rglob("*.py"))
            if p.name not in ("__init__.py", "__main__.py")
            and not any(d in named for d in [p, *p.parents] if d != TWIN and TWIN in d.parents)]
    assert not left, ("modules docs/architecture.md's tree does not name (add each to its "
                      "package's entry under '## Where each capability lives'):\n"
                      + "\n".join(left))


def test_the_tree_is_read_as_written():
    block = ("twin/node/          runner.py, ebpf/ (asm.py, tc.py), nothing.py\n"
             "twin/lab/           compile.py (lab/build/<lab>/), docs/ci.md\n"
             "twin/nowhere/       x.py\n")
    missing, named = tree_problems(block)
    assert missing == ["nothing.py (under twin/node/): not there",
                       "twin/nowhere/: no such path", "x.py (under twin/nowhere/): not there"]
    assert {str(p.relative_to(ROOT)) for p in named} == {
        "twin/node/runner.py", "twin/node/ebpf", "twin/node/ebpf/asm.py",
        "twin/node/ebpf/tc.py", "twin/lab/compile.py", "docs/ci.md"}


# -- README --------------------------------------------------------------------------


def readme_layout() -> str:
    blocks = code_blocks(section(README.read_text(), "Layout"))
    assert len(blocks) == 1, "one tree under README.md's '## Layout'"
    return blocks[0]


def test_readme_layout_names_only_what_exists():
    missing, _ = tree_problems(readme_layout())
    missing += unknown_names(section(README.read_text(), "Layout"))
    assert not missing, "README.md's layout names:\n" + "\n".join(missing)


def test_readme_layout_names_every_page_of_docs():
    _, named = tree_problems(readme_layout())
    left = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p not in named]
    assert not left, f"README.md's layout leaves out docs/{', docs/'.join(left)}"

