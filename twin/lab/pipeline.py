"""The lab pipeline. Read `up` first: it is the table of contents.

    compile -> data plane -> render -> limits -> create -> wire -> configure -> carrier
                                        -> routing (bgp: FRR) -> endpoints [-> verify]
                                                                          (twin up)
    restart_node -> wire -> configure -> carrier -> endpoints
                             (twin restart, with the faults again: twin.lifecycle)

Removing a lab touches its telemetry and faults too, so `down` lives a layer
above, in twin.lifecycle.

The data plane (twin.dataplane) is chosen before render, because every node's
program depends on it: `auto` asks the runtime's kernel once which it runs.
A lab's state is claimed before anything is created (twin.state), so of two
racing `twin up` of one lab only one proceeds, and a failure or interrupt in
any phase of `up` rolls back what was created, its build directory too
(twin.lab.build). Everything created carries the lab's owner (twin.owner):
cleanup takes only what is its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from twin import dataplane as dataplanes
from twin import frr
from twin.errors import UsageError
from twin.fabric.render import NO_DATAPLANE
from twin.lab import build, phases, sweep
from twin.lab.attach import Attached, attach
from twin.lab.compile import (
    ROUTES,
    Compiled,
    compile_spec,
    load_tables,
    render_lab,
    with_tables,
)
from twin.owner import Owner, new_lab_id
from twin.progress import Steps
from twin.routes import tables
from twin.rundir import write_json
from twin.runtime import RUNTIMES, Runtime, get_runtime, pick_runtime
from twin.state import LabState

if TYPE_CHECKING:
    from twin.verify import VerifyReport


@dataclass(frozen=True)
class Up:
    """A lab that came up: its state, what each phase did, and the verify report
    when one was asked for (a lab that fails verify stays up, to be looked at)."""

    state: LabState
    phases: tuple[phases.Phase, ...]
    verify: VerifyReport | None = None

    @property
    def lab(self) -> str:
        return self.state.lab


def up(spec_ref: str, runtime: str = "auto", steps: Steps | None = None, *,
       verify: bool = False, name: str | None = None, dataplane: str | None = None,
       routes: str | None = None, routes_format: str | None = None,
       follow_symlinks: bool = False, routing: str | None = None) -> Up:
    """Bring a lab up; `name` runs the spec under another lab name (several labs
    from one spec side by side); `dataplane` overrides the spec's `srv6.dataplane`;
    `routes` programs the nodes from an operator's tables (a directory, in
    `routes_format` or the format its files show) instead of twin's plan; its files may
    be symlinks out of it only with `follow_symlinks`; `routing` overrides the spec's
    `routing:` (bgp: the same fabric on FRR, twin.fabric.bgp)."""
    steps = steps or Steps()
    compiled = compile_spec(spec_ref, name, routing)
    refuse_if_up(compiled.lab)  # before render: an up lab's build files stay as they are
    if held := build.held_by_another(compiled.build_dir()):
        raise UsageError(f"{compiled.build_dir()} holds the build files of live lab "
                         f"{held.lab} of run directory {held.run_dir}; bring this one up "
                         f"under another name: `twin up {spec_ref} --name {compiled.lab}-2`")
    rt_name, why = pick_runtime(runtime)
    steps.note(f"runtime: {rt_name} ({why})")
    dp_name, dp_why = pick_dataplane(rt_name, dataplane or compiled.spec.dataplane)
    if compiled.spec.bgp is not None:
        if dataplane or routes:
            raise UsageError(f"{'--dataplane' if dataplane else '--routes'} programs SRv6 "
                             "SIDs; a routing: bgp lab has none (its routes come from BGP)")
        if rt_name == "netns":  # the nodes run this machine's binaries; an image has its own
            frr.ensure_installed(steps.note)
        recorded = NO_DATAPLANE, "routing: bgp: plain IPv6 forwarding, no SID"
    else:
        recorded = dp_name, dp_why
    steps.note(f"data plane: {recorded[0]} ({recorded[1]})")
    loaded = None
    if routes:
        loaded = load_tables(compiled, routes, routes_format, dp_name, follow_symlinks)
        compiled = with_tables(compiled, loaded)
        steps.note(f"routes: {routes} ({loaded.format}), instead of twin's plan")
    build_dir = render_lab(compiled, dp_name)
    owner = Owner.here(compiled.lab, new_lab_id())
    rt = get_runtime(rt_name, compiled.lab, str(build_dir), owner)
    _refuse_foreign_nodes(rt, compiled)
    state = record_state(compiled, rt_name, build_dir, owner, *recorded, loaded,
                    routing)  # first
    plan, fabric = compiled.plan, compiled.fabric
    nodes = list(plan.nodes.values())
    try:
        ran = [
            phases.limits(rt, list(fabric.links), steps),
            phases.create(rt, nodes, steps),
            phases.wire(rt, list(fabric.links), steps),
            phases.configure(rt, nodes, steps),
            phases.carrier(rt, nodes, steps),
        ]
        if compiled.spec.bgp is not None:
            ran.append(phases.routing(rt, plan, steps))
        ran.append(phases.endpoints(rt, [h.name for h in fabric.hosts], steps))
    except BaseException as e:
        stopped = "interrupted" if isinstance(e, KeyboardInterrupt) else "failed"
        steps.note(f"{stopped}: rolling back what was created")
        rt.destroy(list(plan.nodes))
        build.remove(build_dir, owner)
        state.remove()
        raise
    state.phase = "up"
    state.phases = [p.to_dict() for p in ran]
    state.save()
    report = phases.verify(rt, plan, steps) if verify else None
    steps.done()
    return Up(state, tuple(ran), report)


def pick_dataplane(runtime: str, requested: str) -> tuple[str, str]:
    """The data plane for a lab on `runtime` (twin.dataplane.pick), asking that runtime's
    kernel once what it runs; (name, why)."""
    return dataplanes.pick(requested, RUNTIMES[runtime].kernel.dataplanes())


def refuse_if_up(lab: str) -> None:
    """A lab already up (or on its way) is not brought up again: say how to take it down."""
    state = LabState.load(lab)
    if state is not None:
        raise UsageError(f"lab {lab} is already {state.phase} (runtime {state.runtime}); "
                         f"run `twin down --lab {lab}` first")


def _refuse_foreign_nodes(rt: Runtime, compiled: Compiled) -> None:
    """Nodes of this name that exist already are not ours to roll back: say whose."""
    clash = rt.existing(list(compiled.plan.nodes))
    if not clash:
        return
    first = rt.resource_name(clash[0])
    owners = {r.name: r.owner for r in type(rt).inventory()}
    owner = owners.get(first)
    head = (f"lab {compiled.lab}: {len(clash)} nodes already exist on runtime {rt.name} "
            f"(e.g. {first})")
    if owner is not None and owner.stray_because() is None:
        raise UsageError(f"{head}, owned by live {owner}; bring this one up under another "
                         f"name: `twin up {compiled.source} --name {compiled.lab}-2`")
    why = owner.stray_because() if owner else "they carry no owner"
    raise UsageError(f"{head}, and nobody owns them ({why}); remove them with "
                     "`twin down --stray`")


def record_state(compiled: Compiled, runtime: str, build_dir: Path, owner: Owner,
                 dataplane: str, dataplane_why: str,
                 loaded: tables.Tables | None = None, routing: str | None = None) -> LabState:
    """The lab's state as `up` (and `adopt`) record it: what it is, where, whose."""
    state = LabState(lab=compiled.lab, runtime=runtime, spec_path=compiled.source,
                     build_dir=str(build_dir), nodes=list(compiled.plan.nodes),
                     id=owner.lab_id, dataplane=dataplane, dataplane_why=dataplane_why,
                     routes=str(Path(loaded.source).resolve()) if loaded else "",
                     routing=routing or "")
    if not state.claim():  # another `twin up` of this lab got here first
        other = LabState.load(compiled.lab)
        raise UsageError(f"lab {compiled.lab} is already "
                         f"{other.phase if other else 'being created'}"
                         f"{f' by pid {other.pid}' if other else ''}; run `twin down "
                         f"--lab {compiled.lab}` first, or use --name for a second lab")
    build.own(build_dir, owner)  # after the claim: what rendered there is this lab's now
    (state.dir / "spec.yml").write_text(Path(compiled.source).read_text())  # for `attach`
    if loaded is not None:
        write_json(state.dir / ROUTES, tables.to_dict(loaded))
    return state


def restart_node(att: Attached, node: str, steps: Steps | None = None) -> phases.Restarted:
    """Reboot one node (a switch reboot): it comes back bare, so its links are
    wired again, it and its link peers are re-programmed, and a host gets its
    endpoint back. The faults in force on its links are not this layer's: the
    caller applies them again (twin.lifecycle.restart, a switch-reboot fault)."""
    steps = steps or Steps()
    att.node(node)
    rt, plan = att.runtime, att.plan
    rt.restart_node(plan[node])
    links = att.fabric.links_of(node)
    phases.wire(rt, links, steps)
    touched = sorted({node} | {lk.peer(node).node for lk in links})
    phases.configure(rt, [plan[n] for n in touched], steps)
    if plan[node].bgp is not None:  # routing: bgp: its FRR died with it; its peers' wait
        phases.start_frr(rt, plan, [plan[node]], steps)
    if not att.fabric.node(node).is_switch:  # a rebooted host needs its endpoint again
        phases.carrier(rt, [plan[n] for n in touched], steps)
        phases.endpoints(rt, [node], steps)
    return phases.Restarted(node, tuple(touched), ())


__all__ = ["Up", "attach", "restart_node", "sweep", "up"]
