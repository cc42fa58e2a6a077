"""The lab pipeline. Read `up` first: it is the table of contents.

    compile -> render -> create -> wire -> configure -> carrier -> endpoints [-> verify]
                                                                          (twin up)
    restart_node -> wire -> configure -> carrier -> endpoints -> faults again
                                                                     (twin restart)
    state on disk -> runtime -> destroy                              (twin down)

A lab's state is written before anything is created (twin.state), and a
failure or interrupt in any phase of `up` rolls back what was created.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from twin.errors import UsageError
from twin.lab import phases
from twin.lab.attach import Attached, attach
from twin.lab.compile import Compiled, compile_spec, render_lab
from twin.progress import Steps
from twin.runtime import RUNTIMES, Runtime, get_runtime, pick_runtime
from twin.state import LabState, known_labs

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
       verify: bool = False) -> Up:
    steps = steps or Steps()
    compiled = compile_spec(spec_ref)
    _refuse_if_up(compiled.lab)  # before render: an up lab's build files stay as they are
    build_dir = render_lab(compiled)
    name, why = pick_runtime(runtime)
    steps.note(f"runtime: {name} ({why})")
    rt = get_runtime(name, compiled.lab, str(build_dir))
    _refuse_foreign_nodes(rt, compiled)
    state = _record(compiled, name, build_dir)  # before anything exists
    plan, fabric = compiled.plan, compiled.fabric
    nodes = list(plan.nodes.values())
    try:
        ran = [
            phases.create(rt, nodes, steps),
            phases.wire(rt, list(fabric.links), steps),
            phases.configure(rt, nodes, steps),
            phases.carrier(rt, nodes, steps),
            phases.endpoints(rt, [h.name for h in fabric.hosts], steps),
        ]
    except BaseException:
        steps.note("failed: rolling back what was created")
        rt.destroy(list(plan.nodes))
        state.remove()
        raise
    state.phase = "up"
    state.phases = [p.to_dict() for p in ran]
    state.save()
    report = phases.verify(rt, plan, steps) if verify else None
    steps.done()
    return Up(state, tuple(ran), report)


def _refuse_if_up(lab: str) -> None:
    state = LabState.load(lab)
    if state is not None:
        raise UsageError(f"lab {lab} is already {state.phase} (runtime {state.runtime}); "
                         f"run `twin down {lab}` first")


def _refuse_foreign_nodes(rt: Runtime, compiled: Compiled) -> None:
    clash = rt.existing(list(compiled.plan.nodes))
    if clash:  # not ours to roll back: another checkout or run dir made them
        raise UsageError(f"lab {compiled.lab}: {len(clash)} nodes already exist on runtime "
                         f"{rt.name} (e.g. {rt.netns_path(clash[0])}) but this run directory "
                         f"does not know them; remove them with `twin down --all`")


def _record(compiled: Compiled, runtime: str, build_dir: Path) -> LabState:
    state = LabState(lab=compiled.lab, runtime=runtime, spec_path=compiled.source,
                     build_dir=str(build_dir), nodes=list(compiled.plan.nodes))
    state.save()  # `twin down` can always find what we made
    (state.dir / "spec.yml").write_text(Path(compiled.source).read_text())
    return state


def restart(att: Attached, node: str, steps: Steps | None = None) -> phases.Restarted:
    """Reboot one node (a switch reboot): it comes back bare, so its links are
    wired again, it and its link peers are re-programmed, a host gets its
    endpoint back, and the faults in force on its links are applied again."""
    from twin import faults  # faults build on the lab; the lab only calls back here

    steps = steps or Steps()
    att.node(node)
    rt, plan = att.runtime, att.plan
    rt.restart_node(plan[node])
    links = att.fabric.links_of(node)
    phases.wire(rt, links, steps)
    touched = sorted({node} | {lk.peer(node).node for lk in links})
    phases.configure(rt, [plan[n] for n in touched], steps)
    if not att.fabric.node(node).is_switch:  # a rebooted host needs its endpoint again
        phases.carrier(rt, [plan[n] for n in touched], steps)
        phases.endpoints(rt, [node], steps)
    again = faults.reapply(att, node)
    return phases.Restarted(node, tuple(touched), tuple(again))


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


__all__ = ["Up", "attach", "down", "down_all", "foreign_namespaces", "restart", "up"]
