"""The verbs that join layers: restarting a node and removing a lab touch its
nodes (twin.lab), the faults in force (twin.faults) and its telemetry
(twin.telemetry), so they live here, above all three.

    restart     L.restart_node -> the faults in force on its links, again (twin restart)
    down        telemetry stopped -> owned processes killed -> nodes destroyed -> build
                directory removed (twin.lab.build: only if it is still the lab's) ->
                state forgotten (twin down); an attached lab's nodes are kept: its
                faults are reverted instead
    down_all    every lab of this run directory, then its leftovers, build directories
                among them (twin down --all)
    down_stray  what `L.sweep.stray()` found, after the caller asked (twin down --stray)
"""

from __future__ import annotations

from dataclasses import dataclass

from twin import faults
from twin import lab as L
from twin.errors import UsageError
from twin.lab import build
from twin.lab.build import BuildRemoved
from twin.owner import Owner, owned_processes
from twin.progress import Steps
from twin.runtime import get_runtime
from twin.runtime.netns import kill_all
from twin.state import LabState, known_labs
from twin.telemetry import grafana_container, stack


def restart(att: L.Attached, node: str, steps: Steps | None = None) -> L.Restarted:
    """Reboot one node (twin.lab.pipeline.restart_node), then apply again the faults in
    force that it lost with its links."""
    done = L.restart_node(att, node, steps)
    again = faults.reapply(att, node)
    return L.Restarted(done.node, done.reprogrammed, tuple(again))


@dataclass(frozen=True)
class Removed:
    """What `down` did to a lab: the nodes it removed, or, for a lab twin attached to,
    the nodes it left with their orchestrator (`kept_with` says which) and the faults it
    reverted on them; and what became of its build directory."""

    lab: str
    nodes: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    kept_with: str = ""
    faults_reverted: int = 0
    build: BuildRemoved | None = None


def down(lab: str) -> Removed:
    """Remove a lab: the processes it runs outside its nodes (a blind drill's traffic),
    every node (with its links and processes), its build directory (if it is still this
    lab's: twin.lab.build), then its state.

    A lab twin attached to (`twin attach`: nodes another orchestrator deployed) keeps its
    nodes: only what twin did to them is undone (every fault reverted, newest first),
    then it is forgotten. If a fault cannot be reverted, the lab is kept, so that
    `twin down` can be run again once its nodes answer."""
    state = LabState.load(lab)
    if state is None:
        raise UsageError(f"lab {lab} is not up (labs up: {', '.join(known_labs()) or 'none'})")
    _stop_telemetry(state)
    _stop_processes(state.owner)
    rt = get_runtime(state.runtime, lab, state.build_dir, state.owner)
    if rt.attaches:
        reverted = _revert_faults(lab)
        rt.destroy(state.nodes)  # an attached runtime forgets; its nodes stay
        files = build.remove(state.build_dir, state.owner)
        state.remove()
        return Removed(lab, kept=tuple(state.nodes), kept_with=rt.orchestrator(),
                       faults_reverted=reverted, build=files)
    removed = rt.destroy(state.nodes)
    files = build.remove(state.build_dir, state.owner)
    state.remove()
    return Removed(lab, nodes=tuple(removed), build=files)


def _revert_faults(lab: str) -> int:
    att = L.attach(lab)
    return len(faults.clear(att)) if faults.active(att) else 0


def _stop_telemetry(state: LabState) -> None:
    """The lab's Prometheus first, by its pid and with time to write its last block (and
    to move its data where `telemetry up --keep-data` said), then its Grafana."""
    stack.down(state.dir)
    grafana_container.stop(state.lab, state.id, state.dir)


def _stop_processes(owner: Owner) -> None:
    """Every process carrying the lab's owner (twin.owner); the endpoints are among
    them, and would go with their nodes anyway."""
    kill_all([pid for pid, o in owned_processes().items() if o == owner])


def down_all() -> dict[str, list[str]]:
    """Remove every lab this run directory knows of, then whatever else carries this
    run directory as its owner (what a killed `twin up` left). Nothing another run
    directory owns is touched, live or not (`L.sweep.others`, `down_stray`)."""
    out = {}
    for lab in known_labs():
        done = down(lab)
        out[lab] = list(done.nodes or done.kept)
    left = L.sweep.leftovers()
    if left:
        L.sweep.remove(left)
    builds = [build.remove(path, owner) for path, owner in build.leftovers()]
    names = [r.name for r in left] + [f"build {b.path}" for b in builds if b.removed]
    if names:
        out["(leftovers of this run directory)"] = names
    return out


def down_stray(found: list[L.sweep.Stray]) -> list[str]:
    """Remove what `L.sweep.stray()` found (the caller showed it and asked first)."""
    L.sweep.remove([s.resource for s in found])
    return [s.resource.name for s in found]


__all__ = ["Removed", "down", "down_all", "down_stray", "restart"]
