"""Runtimes for a fabric on another machine: `docker-remote` and `kubectl`.

Both attach to a fabric an orchestrator deployed (containerlab on a machine whose
Docker engine answers at a URL, clabernetes in a Kubernetes namespace), whose nodes
configured themselves at boot (images/mrc-twin-boot). They reach a node only by
running a command in it (twin.remote.transport), so:

    exec, set_link_state   through the transport (`ip link set dev IF down|up`)
    configure              the node's program again, on the exec's stdin to the runner
                           its image holds (RemoteKernel): how a link that came back up
                           gets its addresses and routes, as on one machine
    endpoints              started at boot; waited for, and reached, through a relay
                           of their control socket over exec (twin.remote.relay)
    verify's probes        an agent in every host (twin.remote.probe)
    drills                 commands through a persistent stream per node they break,
                           stamped on the nodes' clock (twin.remote.stream, .clock)
    the continuous prober  an agent in every host (twin.remote.continuous), for
                           drills and `twin probe`
    netns_path             none: a LabError naming what asked and why

They never create, restart or remove a node: `twin attach` finds the nodes, and
`twin down` of such a lab reverts twin's faults and forgets it, leaving the nodes
to their orchestrator. What `twin attach` found (the transport, the topology's
name, each node's container or pod) is kept next to lab.json in remote.json.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

from twin import endpoints
from twin.dataplane import program as node_program
from twin.errors import CommandFailed, LabError, UsageError
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan
from twin.fabric.render import CODE_MOUNT
from twin.owner import Owner
from twin.remote import probe as remote_probe
from twin.remote import relay, transport
from twin.remote.clock import Stamp
from twin.remote.continuous import RemoteContinuousProber
from twin.remote.stream import NodeStream, StreamBroken
from twin.remote.transport import NodeRef, Transport
from twin.rundir import read_json, run_root, write_json
from twin.runtime.base import NodeView, Runtime, register
from twin.runtime.clock import Clock, NodesClock
from twin.runtime.kernel import Kernel
from twin.verify.continuous import LabProber

NODE_RUN_DIR = "/run/mrc-twin"  # images/mrc-twin-boot's: booted, boot-failed, endpoint.sock
RECORD = "remote.json"
ENDPOINT_WAIT_S = 60.0
# What `twin` commands cannot do over exec yet, for the error netns_path raises.
NOT_REMOTE = "twin telemetry, top and fuzz hold sockets in nodes' namespaces"


def boot_state_argv() -> list[str]:
    """One command that says whether a node finished mrc-twin-boot, and if not, why."""
    return ["sh", "-c", f"if [ -f {NODE_RUN_DIR}/booted ]; then echo booted; "
            f"elif [ -f {NODE_RUN_DIR}/boot-failed ]; then echo failed; "
            f"cat {NODE_RUN_DIR}/boot-failed; else echo waiting; fi"]


def parse_boot_state(text: str) -> tuple[str, str]:
    """(booted | failed | waiting, the reason a boot failed) from boot_state_argv."""
    first, _, rest = (text or "").strip().partition("\n")
    state = first.strip() if first.strip() in ("booted", "failed", "waiting") else "waiting"
    return state, rest.strip()


class RemoteKernel:
    """Nodes were programmed at boot; twin re-programs (after a fault) and waits, over exec."""

    def configure(self, rt: RemoteRuntime, node: NodePlan) -> None:
        """The node's program again, by the runner its image holds (twin.node.runner)."""
        node_program.push(rt, node_program.load(rt.build_dir, node.name))

    def dataplanes(self) -> dict[str, str | None]:
        why = "an attached fabric runs the data plane its nodes booted with"
        return {"seg6local": why, "ebpf": why}

    def start_endpoints(self, rt: RemoteRuntime, hosts: list[str], steps) -> None:
        endpoints.wait_started(rt, hosts, steps, ENDPOINT_WAIT_S, call_timeout=10,
                               pause_s=0.5, where=rt.transport.where(),
                               log=f"{NODE_RUN_DIR}/endpoint.log")

    def host_limits(self, links: int) -> list[str]:
        return []  # the nodes' machine is the orchestrator's to size, not ours


class RemoteRuntime(Runtime):
    attaches = True
    exec_workers = 8
    kernel: ClassVar[Kernel] = RemoteKernel()
    transport_kind: ClassVar[str]

    def __init__(self, lab: str, build_dir: str | None = None, owner: Owner | None = None):
        super().__init__(lab, build_dir, owner)
        rec = read_json(run_root() / lab / RECORD, None) if lab else None
        self.transport: Transport | None = transport.from_dict(rec["transport"]) if rec else None
        self.topology: str = rec["topology"] if rec else lab
        self.refs: dict[str, NodeRef] = {d["node"]: NodeRef.from_dict(d)
                                         for d in (rec or {}).get("nodes", [])}
        self._streams: dict[str, NodeStream] = {}
        self._stamps = threading.local()

    @classmethod
    def unavailable(cls) -> str | None:
        where = "--docker-host URL" if cls.transport_kind == "docker" else "--namespace NS"
        return (f"it attaches to a fabric deployed elsewhere, it does not create one: "
                f"`twin attach SPEC {where}`")

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        return "it creates nothing on any machine"

    def bind(self, tr: Transport, topology: str, refs: list[NodeRef]) -> None:
        """Record what `twin attach` found (before anything else is done with it)."""
        self.transport, self.topology = tr, topology
        self.refs = {r.node: r for r in refs}
        write_json(run_root() / self.lab / RECORD, {
            "transport": tr.to_dict(), "topology": topology,
            "nodes": [r.to_dict() for r in refs]})

    def ref(self, node: str) -> NodeRef:
        if self.transport is None:
            raise LabError(f"lab {self.lab}: no {RECORD} under {run_root() / self.lab}; "
                           "attach it again with `twin attach`")
        try:
            return self.refs[node]
        except KeyError:
            raise LabError(f"node {node} was not found in topology {self.topology} "
                           f"({self.transport.where()})") from None

    # -- the verbs: attach, never create ----------------------------------------------

    def _refuse(self, what: str) -> None:
        raise UsageError(f"runtime {self.name} cannot {what}: its nodes are deployed by "
                         "their own orchestrator (containerlab, clabernetes); twin attaches")

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        self._refuse("create nodes")

    def wire_links(self, links: list[Link]) -> None:
        self._refuse("wire links")

    def orchestrator(self) -> str:
        return f"their orchestrator ({self.transport.where() if self.transport else self.name})"

    def why_no_restart(self) -> str | None:
        return "a switch-reboot restarts a node, which only the fabric's own orchestrator does"

    def restart_node(self, node: NodePlan) -> None:
        self._refuse(f"restart {node.name} (restart it with its orchestrator, then "
                     f"`twin attach` again)")

    def exec(self, node: str, argv: list[str], *, input: str | None = None,
             check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        proc = self._streamed(node, argv, check, lambda s: s.run(argv, input=input,
                                                                  timeout=timeout))
        if proc is not None:
            return proc
        return transport.exec_in(self.transport, self.ref(node), argv, input=input,
                                 check=check, timeout=timeout)

    def _streamed(self, node: str, argv: list[str], check: bool, ask
                  ) -> subprocess.CompletedProcess | None:
        """`ask` the node's stream, its stamp recorded; None: no stream (any more)."""
        stream = self._streams.get(node)
        if stream is None or not stream.alive:
            return None
        try:
            proc, stamp = ask(stream)
        except StreamBroken:
            self._streams.pop(node, None)  # a one-shot exec from now on
            return None
        record = getattr(self._stamps, "list", None)
        if record is not None:
            record.append(stamp)
        if check and proc.returncode != 0:
            raise CommandFailed([f"{node}:", *argv], proc.returncode, proc.stderr or proc.stdout)
        return proc

    # -- streams: what a drill runs in nodes, stamped on their clock ---------------------

    def continuous_prober(self) -> type[LabProber]:
        """No namespace of the lab is here: an agent in every host (twin.remote.continuous)."""
        return RemoteContinuousProber

    def clock(self, what: str = "twin drill run") -> Clock:
        """The nodes' clock (twin.runtime.clock.NodesClock): a fabric over several
        machines has none, and is refused here with `what` was asked for."""
        return NodesClock(self, self.lab, what)

    def open_streams(self, nodes: list[str]) -> dict[str, str]:
        """A command stream into each node (twin.remote.stream); from now on `exec`
        there goes through it. The nodes none could be opened in, and why."""
        failed: dict[str, str] = {}
        for node in nodes:
            if node in self._streams and self._streams[node].alive:
                continue
            try:
                self._streams[node] = NodeStream(self.transport, self.ref(node))
            except LabError as e:
                failed[node] = str(e)
        return failed

    def stream(self, node: str) -> NodeStream | None:
        s = self._streams.get(node)
        return s if s is not None and s.alive else None

    def close_streams(self) -> None:
        streams, self._streams = list(self._streams.values()), {}
        for s in streams:
            s.close()

    @contextmanager
    def stamping(self) -> Iterator[list[Stamp]]:
        """The stamps of the commands this thread runs through streams, in order."""
        self._stamps.list = stamps = []
        try:
            yield stamps
        finally:
            self._stamps.list = None

    def machines(self) -> dict[str, str]:
        """Each node's machine, as the transport sees it now (whose clock it reads)."""
        return {r.node: r.machine for r in self._live().values() if r.node in self.refs}

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        argv = ["ip", "link", "set", "dev", ifname, "up" if up else "down"]
        if self._streamed(node, argv, True, lambda s: s.set_link(ifname, up)) is None:
            self.exec(node, argv)

    def destroy(self, nodes: list[str]) -> list[str]:
        return []  # never: not ours (twin down reverts faults and forgets the lab)

    def netns_path(self, node: str) -> str:
        where = self.transport.where() if self.transport else self.name
        raise LabError(f"node {node} of lab {self.lab} is reached only through `{where} "
                       f"exec`: there is no network namespace of it on this machine to open "
                       f"({NOT_REMOTE}; verify, probe, fault, stats, traffic, exec and drills work "
                       "remotely)")

    # -- looking ---------------------------------------------------------------------------

    def _live(self) -> dict[str, NodeRef]:
        return {r.node: r for r in self.transport.find(self.topology)} if self.transport \
            else {}

    def existing(self, nodes: list[str]) -> list[str]:
        live = self._live()
        return [n for n in nodes if n in live and live[n].running]

    def describe(self, nodes: list[str]) -> dict[str, dict]:
        try:
            live = self._live()
        except LabError as e:  # status shows an unreachable fabric, it does not fail
            return {n: {"state": f"unreachable ({e})", "image": "-"} for n in nodes}
        return {n: ({"state": live[n].state.lower(), "image": live[n].image,
                     "container": live[n].target} if n in live
                    else {"state": "missing", "image": "-"}) for n in nodes}

    def resource_name(self, node: str) -> str:
        return self.refs[node].target if node in self.refs else node

    def node_view(self, node: str) -> NodeView:
        raise LabError(f"node {node} of lab {self.lab}: its files are inside the node "
                       f"(reach them with `twin exec --lab {self.lab} {node} -- ...`)")

    def shell_argv(self, node: str, argv: list[str]) -> list[str]:
        return self.transport.argv(self.ref(node), argv, stdin=True)

    def python_argv(self) -> list[str]:
        return ["env", f"PYTHONPATH={CODE_MOUNT}", "python3"]  # the node image's, our code

    # -- what runs in the nodes for twin -------------------------------------------------------

    def probe_paths(self, plan, paths, reverse, progress=None):
        return remote_probe.probe_paths(self, plan, paths, reverse, progress)

    def endpoint_relay(self, host: str):
        return relay.open_relay(self.transport, self.ref(host), endpoints.REMOTE_SOCK)

    def boot_state(self, node: str) -> tuple[str, str]:
        proc = self.exec(node, boot_state_argv(), check=False, timeout=30)
        return parse_boot_state(proc.stdout)


@register
class DockerRemoteRuntime(RemoteRuntime):
    name = "docker-remote"
    transport_kind = "docker"


@register
class KubectlRuntime(RemoteRuntime):
    name = "kubectl"
    transport_kind = "kubectl"
