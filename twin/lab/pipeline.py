"""The lab pipeline. Read `up` first: it is the table of contents.

    spec -> model -> plan -> render -> runtime -> configure    (twin up)
    state on disk -> runtime -> readback + probes               (twin verify)
    state on disk -> runtime -> destroy                         (twin down)

A lab's state is written before anything is created (twin.state) and a
failure or interrupt anywhere in `up` rolls back what was created.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from twin.errors import LabError, UsageError
from twin.model import Fabric, build_fabric
from twin.plan import Plan, build_plan
from twin.progress import Steps
from twin.render import render, write_build
from twin.runtime import RUNTIMES, Runtime, get_runtime, pick_runtime
from twin.spec import FabricSpec, find_spec, load_spec, parse_spec
from twin.state import LabState, known_labs, run_root


def project_root() -> Path:
    """The checkout twin runs from (lab/fabrics lives there), else the cwd."""
    env = os.environ.get("TWIN_HOME")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent.parent
    return here if (here / "lab" / "fabrics").is_dir() else Path.cwd()


def fabrics_dir() -> Path:
    return project_root() / "lab" / "fabrics"


def build_root() -> Path:
    return Path(os.environ.get("TWIN_BUILD_DIR", project_root() / "lab" / "build"))


@dataclass(frozen=True)
class Compiled:
    source: str
    spec: FabricSpec
    fabric: Fabric
    plan: Plan


def compile_spec(spec_ref: str) -> Compiled:
    """spec -> model -> plan (pure). Raises SpecError naming every problem."""
    path = find_spec(spec_ref, fabrics_dir())
    spec = load_spec(path)
    return _compile(str(path), spec)


def _compile(source: str, spec: FabricSpec) -> Compiled:
    fabric = build_fabric(spec)
    return Compiled(source, spec, fabric, build_plan(fabric))


def render_lab(compiled: Compiled) -> Path:
    """plan -> files under lab/build/<lab>/ (unchanged files are not rewritten)."""
    build_dir = build_root() / compiled.spec.name
    code_dir = os.path.relpath(project_root(), build_dir)
    write_build(render(compiled.plan, code_dir), build_dir)
    return build_dir


def up(spec_ref: str, runtime: str = "auto", steps: Steps | None = None) -> LabState:
    steps = steps or Steps()
    compiled = compile_spec(spec_ref)
    build_dir = render_lab(compiled)
    lab = compiled.spec.name
    _refuse_if_up(lab)
    name, why = pick_runtime(runtime)
    steps.note(f"runtime: {name} ({why})")
    rt = get_runtime(name, lab, str(build_dir))
    plan = compiled.plan
    clash = rt.existing(list(plan.nodes))
    if clash:  # not ours to roll back: another checkout or run dir made them
        raise UsageError(f"lab {lab}: {len(clash)} nodes already exist on runtime {name} "
                         f"(e.g. {rt.netns_path(clash[0])}) but this run directory does not "
                         f"know them; remove them with `twin down --all`")
    state = LabState(lab=lab, runtime=name, spec_path=compiled.source,
                     build_dir=str(build_dir), nodes=list(plan.nodes))
    state.save()  # before anything exists: `twin down` can always find what we made
    (state.dir / "spec.yml").write_text(Path(compiled.source).read_text())
    try:
        steps.start(f"creating {len(plan.nodes)} nodes", 1)
        rt.create_nodes(list(plan.nodes.values()))
        steps.start(f"wiring {len(compiled.fabric.links)} links", 1)
        rt.wire_links(list(compiled.fabric.links))
        configure_all(rt, plan, steps)
        rt.wait_for_carrier(list(plan.nodes.values()), steps)
        rt.start_endpoints([h.name for h in compiled.fabric.hosts], steps)
        state.phase = "up"
        state.save()
        steps.done()
        return state
    except BaseException:
        steps.note("failed: rolling back what was created")
        rt.destroy(list(plan.nodes))
        state.remove()
        raise


def configure_all(rt: Runtime, plan: Plan, steps: Steps) -> None:
    steps.start(f"configuring {len(plan.nodes)} nodes", len(plan.nodes))
    for node in plan.nodes.values():
        rt.configure(node)
        steps.advance()


def _refuse_if_up(lab: str) -> None:
    state = LabState.load(lab)
    if state is not None:
        raise UsageError(f"lab {lab} is already {state.phase} (runtime {state.runtime}); "
                         f"run `twin down {lab}` first")


@dataclass
class Attached:
    state: LabState
    compiled: Compiled
    runtime: Runtime

    @property
    def plan(self) -> Plan:
        return self.compiled.plan

    @property
    def fabric(self) -> Fabric:
        return self.compiled.fabric


def resolve_lab(lab: str | None) -> str:
    labs = known_labs()
    if lab:
        if lab not in labs:
            hint = f"labs up: {', '.join(labs)}" if labs else "no lab is up"
            raise UsageError(f"lab {lab} is not up ({hint})")
        return lab
    if not labs:
        raise UsageError("no lab is up; start one with `twin up mrc-4p`")
    if len(labs) > 1:
        raise UsageError(f"several labs are up ({', '.join(labs)}); name one with --lab")
    return labs[0]


def attach(lab: str | None) -> Attached:
    """The running lab's state, its plan (from the spec copy taken at `up`), its runtime."""
    name = resolve_lab(lab)
    state = LabState.load(name)
    if state is None:
        raise LabError(f"lab {name}: state file is unreadable under {run_root() / name}")
    spec_copy = state.dir / "spec.yml"
    spec = parse_spec(spec_copy.read_text(), state.spec_path)
    return Attached(state, _compile(state.spec_path, spec),
                    get_runtime(state.runtime, name, state.build_dir))


def down(lab: str) -> list[str]:
    """Remove a lab: every node (with its links and processes), then its state."""
    state = LabState.load(lab)
    if state is None:
        raise UsageError(f"lab {lab} is not up (labs up: {', '.join(known_labs()) or 'none'})")
    removed = get_runtime(state.runtime, lab, state.build_dir).destroy(state.nodes)
    state.remove()
    return removed


def down_all() -> dict[str, list[str]]:
    """Remove every lab this run directory knows of, then whatever a runtime can tell
    this run directory left (containers labelled with it). Nothing of another run
    directory's labs is touched: see `foreign_namespaces`."""
    out = {}
    for lab in known_labs():
        out[lab] = down(lab)
    for name, cls in sorted(RUNTIMES.items()):
        if cls.unavailable_for_cleanup():
            continue
        stray = cls.leftovers()
        if stray:
            cls.remove_leftovers(stray)
            out[f"(stray {name} resources)"] = stray
    return out


def foreign_namespaces() -> list[str]:
    """`twin-*` namespaces that no lab of this run directory owns: another checkout's,
    a colleague's or a test run's labs (left alone)."""
    from twin.runtime.netns import NetnsRuntime, leftover_namespaces

    mine = set()
    for lab in known_labs():
        state = LabState.load(lab)
        if state is not None and state.runtime == "netns":
            rt = NetnsRuntime(lab, state.build_dir)
            mine.update(rt.ns_name(n) for n in state.nodes)
    return [n for n in leftover_namespaces() if n not in mine]


def restart(att: Attached, node: str) -> list[str]:
    """Reboot one node (a switch reboot): it comes back bare, so its links are
    wired again and it and its link peers are re-programmed. Returns what was
    re-programmed."""
    if not att.fabric.has_node(node):
        raise UsageError(f"no node {node!r} in lab {att.state.lab}")
    rt, plan = att.runtime, att.plan
    rt.restart_node(plan[node])
    links = att.fabric.links_of(node)
    rt.wire_links(links)
    touched = sorted({node} | {lk.peer(node).node for lk in links})
    for name in touched:
        rt.configure(plan[name])
    if not att.fabric.node(node).is_switch:  # a rebooted host needs its endpoint again
        rt.wait_for_carrier([plan[name] for name in touched])
        rt.start_endpoints([node])
    return touched


def status(lab: str | None = None) -> list[dict]:
    labs = [resolve_lab(lab)] if lab else known_labs()
    out = []
    for name in labs:
        state = LabState.load(name)
        if state is None:
            continue
        rt = get_runtime(state.runtime, name, state.build_dir)
        facts = rt.describe(state.nodes)
        out.append({
            "lab": name,
            "runtime": state.runtime,
            "phase": state.phase,
            "spec": state.spec_path,
            "build_dir": state.build_dir,
            "age_s": round(time.time() - state.created, 1),
            "nodes": [{"node": n, **facts[n]} for n in state.nodes],
        })
    return out
