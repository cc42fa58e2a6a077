"""spec -> model -> plan -> render: the pure half of the pipeline (no root).

A spec is found by file or by a shipped fabric's name, compiled into a
`Compiled` (spec, fabric, plan) and rendered to lab/build/<lab>/. Unchanged
build files are not rewritten.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from twin.errors import UsageError
from twin.fabric.model import Fabric, Node, build_fabric
from twin.fabric.plan import Plan, build_plan
from twin.fabric.render import render, write_build
from twin.fabric.spec import FabricSpec, find_spec, load_spec, name_problem, with_routing
from twin.routes import formats, tables


def project_root() -> Path:
    """The checkout twin runs from (lab/fabrics lives there), else the cwd."""
    env = os.environ.get("TWIN_HOME")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[2]
    return here if (here / "lab" / "fabrics").is_dir() else Path.cwd()


def fabrics_dir() -> Path:
    return project_root() / "lab" / "fabrics"


def build_root() -> Path:
    return Path(os.environ.get("TWIN_BUILD_DIR") or project_root() / "lab" / "build")


@dataclass(frozen=True)
class Compiled:
    """A compiled spec. `plan` is what the lab's nodes hold: twin's own plan, or, for a
    lab brought up from an operator's tables (`with_tables`), those tables, which
    `routes` keeps as loaded and `own_plan` next to twin's plan they replaced."""

    source: str
    spec: FabricSpec
    fabric: Fabric
    plan: Plan
    routes: tables.Tables | None = None
    own_plan: Plan | None = None

    @property
    def lab(self) -> str:
        return self.spec.name

    def build_dir(self) -> Path:
        return build_root() / self.spec.name


def compile_spec(spec_ref: str, name: str | None = None,
                 routing: str | None = None) -> Compiled:
    """spec -> model -> plan (pure). Raises SpecError naming every problem. `name`
    overrides the spec's own (`twin up SPEC --name lab2`), and `routing` its routing
    mode, with that mode's defaults (`twin plan mrc-4p --routing bgp`)."""
    if name is not None and (problem := name_problem(name)):
        raise UsageError(f"--name: {problem[0]}; {problem[1]}")
    path = find_spec(spec_ref, fabrics_dir())
    spec = load_spec(path)
    if routing is not None:
        spec = with_routing(spec, routing)
    return compile_loaded(str(path), spec, name)


def compile_loaded(source: str, spec: FabricSpec, name: str | None = None) -> Compiled:
    if name is not None and name != spec.name:
        spec = replace(spec, name=name)
    fabric = build_fabric(spec)
    return Compiled(source, spec, fabric, build_plan(fabric))


ROUTES = "routes.json"  # a lab's copy of the operator's tables, in its run directory


def with_tables(compiled: Compiled, loaded: tables.Tables) -> Compiled:
    """The lab programmed from an operator's tables instead of twin's plan: every node's
    routes and local SIDs replaced, the addressing plan kept (twin.routes.tables)."""
    return replace(compiled, plan=tables.apply(compiled.plan, loaded), routes=loaded,
                   own_plan=compiled.plan)


def load_tables(compiled: Compiled, directory: str, fmt: str | None,
                dataplane: str, follow_symlinks: bool = False) -> tables.Tables:
    """An operator's tables for this lab, or the error saying why they cannot program it
    (unreadable: SpecError; not installable: UsageError with every reason)."""
    loaded = formats.load_dir(directory, compiled.fabric, fmt, follow_symlinks=follow_symlinks)
    refused = tables.refusals(loaded, compiled.plan, dataplane)
    if refused:
        head = f"--routes {directory}: {len(refused)} entries cannot be installed"
        more = f"\n  ... and {len(refused) - 20} more" if len(refused) > 20 else ""
        raise UsageError("\n  ".join([head, *refused[:20]]) + more +
                         f"\n  (`twin routes check {compiled.source} {directory}` walks "
                         "them without a lab)")
    return loaded


def render_lab(compiled: Compiled, dataplane: str) -> Path:
    """plan -> files under lab/build/<lab>/ for a data plane (twin.dataplane's names;
    unchanged files are not rewritten)."""
    build_dir = compiled.build_dir()
    code_dir = os.path.relpath(project_root(), build_dir)
    write_build(render(compiled.plan, dataplane, code_dir), build_dir)
    return build_dir


def require_node(fabric: Fabric, name: str) -> Node:
    """The node called `name`, or the one error every command gives for a wrong name."""
    if not fabric.has_node(name):
        raise UsageError(f"no node {name!r} in lab {fabric.name}; "
                         f"nodes look like {fabric.nodes[0].name}, {fabric.hosts[0].name}")
    return fabric.node(name)
