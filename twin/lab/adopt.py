"""`twin attach`: take on a fabric another orchestrator deployed, to verify and break it.

    compile -> record -> find -> data plane -> render -> booted -> carrier -> endpoints
                                                    (twin attach; read as `up`)

The data plane is the one the nodes booted with: `--dataplane`, else the spec's
`srv6.dataplane`, else what a node's own /etc/mrc-twin/program.json says.

The spec is the one the fabric was rendered from (`twin render`): it is what the
fabric is checked against. The nodes are found through a transport (twin.remote):
containers labelled containerlab=<topology> on a Docker engine URL, or clabernetes
pods of Topology <topology> in a namespace. Every planned node must be there and
running, and must have configured itself at boot (images/mrc-twin-boot wrote
/run/mrc-twin/booted; a node that wrote boot-failed says why). Then, as after
`twin up`: every planned link has carrier, and every host's endpoint answers.

Nothing is created or changed on the nodes here; a failure forgets the lab again.
`twin down` of an attached lab reverts the faults twin applied and forgets it; the
nodes stay with their orchestrator (twin.lifecycle.down).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

from twin.dataplane import program as node_program
from twin.errors import CommandFailed, LabError, UsageError
from twin.fabric.plan import NodePlan
from twin.fabric.render import CONFIG_MOUNT
from twin.lab import build, phases
from twin.lab.compile import compile_spec, render_lab
from twin.lab.phases import Phase
from twin.lab.pipeline import Up, record_state, refuse_if_up
from twin.owner import Owner, new_lab_id
from twin.progress import Steps
from twin.remote.transport import DockerHost, NodeRef, Transport
from twin.runtime import get_runtime
from twin.runtime.remote import RemoteRuntime

BOOT_WAIT_S = 120.0
BOOT_WORKERS = 8


def runtime_for(tr: Transport) -> str:
    return "docker-remote" if isinstance(tr, DockerHost) else "kubectl"


def adopt(spec_ref: str, tr: Transport, steps: Steps | None = None, *,
          name: str | None = None, topology: str | None = None,
          dataplane: str | None = None) -> Up:
    """Attach to the deployed fabric of `spec_ref`: lab `name` (default: the spec's),
    deployed as topology `topology` (default: the lab's name), whose nodes run
    `dataplane` (default: the spec's, else what the nodes say)."""
    steps = steps or Steps()
    compiled = compile_spec(spec_ref, name)
    refuse_if_up(compiled.lab)
    missing = tr.missing()
    if missing:
        raise UsageError(f"{tr.where()}: {missing}")
    build_dir = compiled.build_dir()
    owner = Owner.here(compiled.lab, new_lab_id())
    rt = get_runtime(runtime_for(tr), compiled.lab, str(build_dir), owner)
    topology = topology or compiled.lab
    plan = compiled.plan
    nodes = list(plan.nodes.values())
    state = record_state(compiled, rt.name, build_dir, owner, "", "")
    try:
        ran = [find(rt, tr, topology, list(plan.nodes), steps)]
        state.dataplane, state.dataplane_why = nodes_dataplane(
            rt, nodes[0].name, dataplane or compiled.spec.dataplane)
        state.save()
        steps.note(f"data plane: {state.dataplane} ({state.dataplane_why})")
        render_lab(compiled, state.dataplane)  # what twin re-applies and verify expects
        ran += [
            booted(rt, nodes, steps),
            phases.carrier(rt, nodes, steps),
            phases.endpoints(rt, [h.name for h in compiled.fabric.hosts], steps),
        ]
    except BaseException:
        build.remove(build_dir, owner)
        state.remove()  # forget it; the nodes were never ours to touch
        raise
    state.phase = "up"
    state.phases = [p.to_dict() for p in ran]
    state.save()
    steps.done()
    return Up(state, tuple(ran))


def nodes_dataplane(rt: RemoteRuntime, node: str, requested: str) -> tuple[str, str]:
    """The data plane of an attached fabric: the one asked for, else the one `node`'s
    own program (rendered with the topology) names."""
    if requested != "auto":
        return requested, "asked for"
    path = f"{CONFIG_MOUNT}/{node_program.FILE}"
    try:
        text = rt.exec(node, ["cat", path], timeout=20).stdout
        return node_program.NodeProgram.from_dict(json.loads(text)).dataplane, \
            f"{node}:{path} says so"
    except (CommandFailed, ValueError, KeyError, TypeError) as e:
        raise LabError(f"cannot tell which data plane the fabric runs: {node}:{path}: {e}; "
                       "name it with --dataplane seg6local|ebpf") from None


def find(rt: RemoteRuntime, tr: Transport, topology: str, planned: list[str],
         steps: Steps) -> Phase:
    steps.start(f"finding {len(planned)} nodes ({tr.where()})", 1)
    start = time.monotonic()
    refs = {r.node: r for r in tr.find(topology)}
    check_found(topology, tr.where(), planned, refs)
    rt.bind(tr, topology, [refs[n] for n in planned])
    return Phase("find", tuple(planned), time.monotonic() - start)


def check_found(topology: str, where: str, planned: list[str], refs: dict[str, NodeRef]
                ) -> None:
    """Every planned node is there and running (pure; the error names the first few)."""
    if not refs:
        raise LabError(f"{where}: no nodes of topology {topology!r} (is it deployed? "
                       "--topology names it when it is not the lab's name)")
    missing = [n for n in planned if n not in refs]
    if missing:
        raise LabError(f"{where}: topology {topology!r} lacks {len(missing)} of the plan's "
                       f"{len(planned)} nodes ({_few(missing)}): was it rendered from "
                       "this spec?")
    down = [f"{n} ({refs[n].state})" for n in planned if not refs[n].running]
    if down:
        raise LabError(f"{where}: {len(down)} nodes of topology {topology!r} are not "
                       f"running: {_few(down)}")


def booted(rt: RemoteRuntime, nodes: list[NodePlan], steps: Steps,
           wait_s: float = BOOT_WAIT_S) -> Phase:
    """Every node configured itself (mrc-twin-boot's marker), waiting up to wait_s."""
    steps.start(f"checking {len(nodes)} nodes booted", len(nodes))
    start = time.monotonic()
    deadline = start + wait_s

    def wait(node: NodePlan) -> None:
        while True:
            state, why = rt.boot_state(node.name)
            if state == "booted":
                return
            if state == "failed":
                raise LabError(f"{node.name} failed to configure itself at boot: {why}")
            if time.monotonic() > deadline:
                raise LabError(f"{node.name} has not configured itself after {wait_s:.0f}s "
                               "(no /run/mrc-twin/booted): was it deployed from `twin "
                               "render` with MRC_TWIN_BOOT=1 and twin's node images?")
            time.sleep(0.5)

    with ThreadPoolExecutor(BOOT_WORKERS) as pool:
        for f in [pool.submit(wait, n) for n in nodes]:
            f.result()
            steps.advance()
    return Phase("booted", tuple(n.name for n in nodes), time.monotonic() - start)


def _few(items: list[str]) -> str:
    return ", ".join(items[:4]) + (" ..." if len(items) > 4 else "")
