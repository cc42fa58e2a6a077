"""The formats route tables come in, and a directory of them loaded (twin.routes.tables).

    iproute2-json   <node>.json             `ip -j -6 route show` of the node (beside it:
                                            <node>.nexthops.json, <node>.rules.json)
    iproute2-batch  <node>.batch            `ip -6 route show` lines, or `ip -batch`
                                            lines (`route add|replace ...`; beside it:
                                            <node>.nexthops, <node>.rules)
    sonic           <node>/config_db.json   SONiC's SRV6_MY_LOCATORS, SRV6_MY_SIDS and
                                            STATIC_ROUTE tables
    frr             <node>/frr.conf         FRR 10's config (or `show running-config`):
                                            segment-routing srv6 locators and static-sids,
                                            ipv6 route
    nvue            <node>/startup.yaml     Cumulus Linux NVUE's `nv config show -o yaml`:
                                            segment-routing srv6 locators, static srv6-sids,
                                            vrf default static routes

One file per node, named after it; nodes are matched to the fabric's by name, and
a node without a file, or a file for no node, is an error that names it. A
format reads one node's file (`parse`) and writes one (`render`: `twin routes
export`, the shipped examples, the golden files). The contract a format keeps
(`Format`, `register`) is in twin.routes.formats.base.
"""

from __future__ import annotations

from pathlib import Path

from twin.errors import Problem, SpecError
from twin.fabric.model import Fabric
from twin.routes.formats.base import FORMATS, WHAT, Format, get, register
from twin.routes.tables import Tables

__all__ = ["FORMATS", "WHAT", "Format", "detect", "get", "load_dir", "register", "write_dir"]


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def detect(directory: Path) -> Format:
    """The format of a directory's files: the one that claims most of them (ties,
    none, or a directory that is not one: an error saying what was found)."""
    if not directory.is_dir():
        raise SpecError(str(directory), [Problem(str(directory), "is not a directory",
                                                 "give the directory holding one file "
                                                 "per node")], WHAT)
    files = _files(directory)
    claims = {name: sum(1 for f in files if fmt.node_of(f) is not None)
              for name, fmt in FORMATS.items()}
    best = max(claims.values(), default=0)
    winners = [n for n, c in claims.items() if c == best and c > 0]
    if len(winners) != 1:
        seen = ", ".join(files[:4]) + (" ..." if len(files) > 4 else "") or "no files"
        raise SpecError(str(directory), [Problem(
            str(directory), f"cannot tell the tables' format ({seen})",
            "one file per node: " + "; ".join(
                f"{f.file_for('<node>')} ({n})" for n, f in FORMATS.items())
            + "; or name it with --format")], WHAT)
    return FORMATS[winners[0]]


def load_dir(directory: str | Path, fabric: Fabric, fmt: str | None = None) -> Tables:
    """Every node's tables from a directory, all problems at once (SpecError)."""
    directory = Path(directory)
    form = get(fmt) if fmt else detect(directory)
    files = {}
    problems: list[Problem] = []
    for rel in _files(directory):
        node = form.node_of(rel)
        if node is None:
            continue
        if not fabric.has_node(node):
            problems.append(Problem(rel, f"no node {node!r} in fabric {fabric.name}",
                                    f"nodes look like {fabric.nodes[0].name}, "
                                    f"{fabric.hosts[0].name}; remove the file or fix the "
                                    "fabric spec"))
            continue
        files[node] = rel
    for node in fabric.nodes:
        if node.name not in files:
            problems.append(Problem(form.file_for(node.name),
                                    f"missing: no tables for node {node.name}",
                                    f"every node of {fabric.name} needs its file "
                                    f"({form.name})"))
    loaded = {}
    for node, rel in sorted(files.items()):
        try:
            text = (directory / rel).read_text()
            beside = {b: (directory / b).read_text() for b in form.beside(node)
                      if (directory / b).is_file()}
        except (OSError, UnicodeDecodeError) as e:
            problems.append(Problem(rel, f"cannot read it ({e})"))
            continue
        try:
            loaded[node] = form.parse_beside(text, beside, node, rel, fabric)
        except SpecError as e:
            problems.extend(e.problems)
    if problems:
        raise SpecError(str(directory), problems, WHAT)
    return Tables(str(directory), form.name, {n.name: loaded[n.name] for n in fabric.nodes})


def write_dir(directory: str | Path, tables: Tables, fabric: Fabric, fmt: str) -> list[Path]:
    """Every node's file in a format (`twin routes export`); the paths written."""
    form = get(fmt)
    out = []
    for node, t in tables.nodes.items():
        path = Path(directory) / form.file_for(node)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(form.render(t, fabric))
        out.append(path)
    return out


from twin.routes.formats import frr, iproute2, nvue, sonic  # noqa: F401,E402  (register)
