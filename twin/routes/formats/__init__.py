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

A format never opens a file: `load_dir` reads each node's through
twin.routes.formats.reading (no symlink out of the directory unless asked,
regular files only, a bounded read, UTF-8, not empty) and hands `parse` its
text; a JSON format decodes it with `reading.load_json` and quotes what the
file holds with `reading.token`. Whatever a format's problems say, `load_dir`
escapes and clips them (`reading.safe`) and keeps at most Limits.problems of
them, counting the rest, so a garbage file costs memory in proportion to the
size limit, not to what it would print.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from twin.errors import Problem, SpecError, UsageError
from twin.fabric.model import Fabric
from twin.routes.formats.base import FORMATS, WHAT, Format, get, register
from twin.routes.formats.reading import Limits, list_files, read_file, real, safe
from twin.routes.tables import Tables

__all__ = ["FORMATS", "WHAT", "Format", "Limits", "detect", "get", "load_dir", "register",
           "write_dir"]


def _files(directory: Path, limits: Limits | None = None) -> list[str]:
    """Every non-directory entry, as deep as a format's files go (a node's directory)."""
    depth = max((len(PurePosixPath(f.file_for("node")).parts) for f in FORMATS.values()),
                default=1)
    return list_files(directory, depth, limits or Limits())


def detect(directory: Path, limits: Limits | None = None) -> Format:
    """The format of a directory's files: the one that claims most of them (ties,
    none, or a directory that is not one: an error saying what was found)."""
    if not directory.is_dir():
        raise SpecError(str(directory), [Problem(str(directory), "is not a directory",
                                                 "give the directory holding one file "
                                                 "per node")], WHAT)
    files = _files(directory, limits)
    claims = {name: sum(1 for f in files if fmt.node_of(f) is not None)
              for name, fmt in FORMATS.items()}
    best = max(claims.values(), default=0)
    winners = [n for n, c in claims.items() if c == best and c > 0]
    if len(winners) != 1:
        seen = ", ".join(files[:4]) + (" ..." if len(files) > 4 else "") or "no files"
        raise SpecError(str(directory), [safe(Problem(
            str(directory), f"cannot tell the tables' format ({seen})",
            "one file per node: " + "; ".join(
                f"{f.file_for('<node>')} ({n})" for n, f in FORMATS.items())
            + "; or name it with --format"), 400)], WHAT)
    return FORMATS[winners[0]]


def load_dir(directory: str | Path, fabric: Fabric, fmt: str | None = None, *,
             follow_symlinks: bool = False, limits: Limits | None = None) -> Tables:
    """Every node's tables from a directory, all problems at once (SpecError): each file
    read through twin.routes.formats.reading (no link out of the directory unless
    `follow_symlinks`, regular files only, the limits), every problem escaped and
    clipped, at most limits.problems of them kept and the rest counted."""
    directory = Path(directory)
    limits = limits or Limits.from_env()
    form = get(fmt) if fmt else detect(directory, limits)
    files = {}
    problems: list[Problem] = []
    omitted = 0

    def found(more: list[Problem]) -> None:
        nonlocal omitted
        room = max(limits.problems - len(problems), 0)
        problems.extend(safe(p) for p in more[:room])
        omitted += max(len(more) - room, 0)

    for rel in _files(directory, limits):
        node = form.node_of(rel)
        if node is None:
            continue
        if not fabric.has_node(node):
            found([Problem(rel, f"no node {node!r} in fabric {fabric.name}",
                           f"nodes look like {fabric.nodes[0].name}, "
                           f"{fabric.hosts[0].name}; remove the file or fix the fabric spec")])
            continue
        files[node] = rel
    for node in fabric.nodes:
        if node.name not in files:
            found([Problem(form.file_for(node.name),
                           f"missing: no tables for node {node.name}",
                           f"every node of {fabric.name} needs its file ({form.name})")])
    loaded = {}
    for node, rel in sorted(files.items()):
        try:
            text = read_file(directory, rel, limits, follow_symlinks)
            beside = {b: read_file(directory, b, limits, follow_symlinks)
                      for b in form.beside(node) if os.path.lexists(directory / b)}
            loaded[node] = tables = form.parse_beside(text, beside, node, rel, fabric)
        except SpecError as e:
            found(e.problems)
            omitted += e.omitted
            continue
        del text
        entries = len(tables.routes) + len(tables.sids) + len(tables.dropping)
        if entries > limits.entries:
            found([Problem(rel, f"holds {entries:,} entries, over {limits.entries:,}, the "
                                "limit for one node", "a node's tables hold tens; if these "
                                "are right, raise the limit with TWIN_ROUTES_MAX_ENTRIES=<n>")])
    if problems or omitted:
        raise SpecError(str(directory), problems, WHAT, omitted)
    return Tables(str(directory), form.name, {n.name: loaded[n.name] for n in fabric.nodes})


def write_dir(directory: str | Path, tables: Tables, fabric: Fabric, fmt: str) -> list[Path]:
    """Every node's file in a format (`twin routes export`); the paths written. A target
    that cannot be written (a file, or a directory below one, read-only, a node's file
    that is a directory or a symlink out of it) is a UsageError of one line; a file is
    never written through a symlink."""
    form = get(fmt)
    return write_files(directory, {form.file_for(node): lambda t=t: form.render(t, fabric)
                                   for node, t in tables.nodes.items()})


def write_files(directory: str | Path, files: dict[str, Callable[[], str]]) -> list[Path]:
    """Write each relative path's text (made when it is written) under `directory`, by
    the rules of write_dir; the paths written."""
    root = Path(directory)
    out = []
    try:
        _writable(root)
        real_root = real(root)
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if not real(path.parent).is_relative_to(real_root):
                raise UsageError(f"cannot export to {root}: {path.parent} leads out of it "
                                 "(a symlink); give a directory of plain files")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644)
            with os.fdopen(fd, "w") as f:
                f.write(text())
            out.append(path)
    except OSError as e:
        where = e.filename or root
        why = "a symlink: refused" if e.errno == errno.ELOOP else (e.strerror or str(e))
        raise UsageError(f"cannot export to {root}: {where}: {why}") from None
    return out


def _writable(root: Path) -> None:
    """Refuse, before writing anything, a target below a file or one that is not a
    writable directory (what it is judged by: its nearest part that exists)."""
    p = root
    while not (p.exists() or p.is_symlink()) and p != p.parent:
        p = p.parent
    if not p.is_dir():
        raise UsageError(f"cannot export to {root}: " + (
            "it is not a directory" if p == root else f"{p} is not a directory"))
    if not os.access(p, os.W_OK | os.X_OK):
        raise UsageError(f"cannot export to {root}: {p} is not writable")


from twin.routes.formats import frr, iproute2, nvue, sonic  # noqa: F401,E402  (register)
