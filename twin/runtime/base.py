"""The runtime contract: the five verbs a lab needs from whatever runs its nodes.

    create_nodes    each node is a network namespace, bare or inside a container
    wire_links      veth pairs between nodes, each end born in its namespace
    exec            run a command inside a node
    set_link_state  one interface admin up or down
    destroy         remove nodes, with their links and processes

and `netns_path(node)`, the file that names a node's network namespace:

    netns          /run/netns/twin-<lab>-<node>
    docker, clab   /proc/<container pid>/ns/net
    docker-remote, kubectl   none: their nodes are on another machine, reached only
                   through exec (twin.runtime.remote); asking is a clear error

Everything else a lab does (configure, carrier wait, endpoints, faults,
restart, verify) is a phase in twin.lab built on these verbs, so the order
of `twin up` is read in one place. The few methods below the verbs only
look (existing, describe, node_view, shell_argv) or have a default a runtime
may do better (restart_node: destroy + create; a container restarts).

Work inside a node's namespace that is not a command (programming it with the
node program's runner, starting its endpoint, saying which data planes it runs)
goes through the runtime's `kernel` (twin.runtime.kernel): the machine's Linux
by default; docker-boot and attached fabrics bring their own ways, and the
in-memory fake brings a model of one, so unit tests run the real phases.

Every resource a runtime creates carries the lab's owner (twin.owner), and
`inventory` lists the runtime's resources on the whole machine with their
owners, so `twin down --all` and `--stray` remove what is theirs only.

Runtimes register by name in RUNTIMES (a twin.registry.Registry); `get_runtime`
names the valid ones when a lookup misses.
"""

from __future__ import annotations

import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from twin import nsenter
from twin.errors import LabError, UsageError
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan, Plan
from twin.owner import Owner
from twin.registry import Registry
from twin.rundir import run_root
from twin.runtime.clock import Clock, LocalClock
from twin.runtime.kernel import LINUX, Kernel
from twin.verify.continuous import ContinuousProber, LabProber
from twin.verify.prober import Prober, probe_hosts, probing_supported

if TYPE_CHECKING:
    from twin.fabric.paths import Path as FabricPath
    from twin.verify.prober import ProbeResult


class Runtime(ABC):
    name: ClassVar[str]
    kernel: ClassVar[Kernel] = LINUX  # how nodes are programmed (twin.runtime.kernel)
    # create_nodes and wire_links may be called on parts of a lab, one after another
    # (`twin up` does, for progress); False: all at once (containerlab deploys in one go)
    incremental: ClassVar[bool] = True
    # True: the runtime finds nodes another orchestrator deployed (`twin attach`) and
    # never creates or removes them; `twin up` does not offer it
    attaches: ClassVar[bool] = False
    exec_workers: ClassVar[int] = 1  # commands verify may run in nodes at once

    def __init__(self, lab: str, build_dir: str | None = None, owner: Owner | None = None):
        self.lab = lab
        self.build_dir = build_dir  # where the rendered topology lives (container runtimes)
        self.owner = owner or Owner.here(lab, "")  # what every resource it makes carries

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this runtime cannot run on this machine, or None if it can."""
        return None

    # -- the five verbs ----------------------------------------------------------

    @abstractmethod
    def create_nodes(self, nodes: list[NodePlan]) -> None:
        """Create the nodes, with their node sysctls set before any interface exists."""

    @abstractmethod
    def wire_links(self, links: list[Link]) -> None:
        """Create each link as a veth pair, its ends inside their nodes (admin down)."""

    def exec(self, node: str, argv: list[str], *, input: str | None = None,
             check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run argv inside the node's network namespace; CommandFailed if check and rc != 0."""
        return nsenter.run(self.netns_path(node), argv, input=input, check=check, timeout=timeout)

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        """In this process, through the node's namespace file: no command started."""
        nsenter.set_admin(self.netns_path(node), ifname, up)

    @abstractmethod
    def destroy(self, nodes: list[str]) -> list[str]:
        """Remove the named nodes (and their links and processes); return what existed."""

    @abstractmethod
    def netns_path(self, node: str) -> str:
        """The file naming the node's network namespace (what kernel code opens)."""

    # -- looking, and defaults a runtime may improve on ---------------------------

    @abstractmethod
    def existing(self, nodes: list[str]) -> list[str]:
        """Which of these nodes exist right now."""

    def restart_node(self, node: NodePlan) -> None:
        """Reboot one node: it comes back with no links and no configuration."""
        self.destroy([node.name])
        self.create_nodes([node])

    def orchestrator(self) -> str:
        """Who deploys and removes the nodes, in words: twin itself, unless the runtime
        attaches to what another orchestrator deployed."""
        return "twin"

    def why_no_restart(self) -> str | None:
        """Why `restart_node` cannot be done here (a switch-reboot fault asks before a
        drill starts); None: it can."""
        return None

    def node_view(self, node: str) -> NodeView:
        """How the node sees the project's code, its config and a run directory."""
        return NodeView(python=sys.executable, pythonpath=str(Path(__file__).parents[2]),
                        config_dir=f"{self.build_dir}/config/{node}",
                        run_dir=str(run_root() / self.lab / "nodes" / node), host_prefix="")

    def shell_argv(self, node: str, argv: list[str]) -> list[str]:
        """How a person runs a command inside the node (`twin exec`)."""
        return ["nsenter", f"--net={self.netns_path(node)}", "--", *argv]

    def python_argv(self) -> list[str]:
        """How a command run by `exec` starts a Python that imports twin.node (the node
        program's runner): this one, where exec runs on this machine's files."""
        return [sys.executable]

    def probe_paths(self, plan: Plan, paths: list[FabricPath], reverse: dict[int, FabricPath],
                    progress=None) -> list[ProbeResult]:
        """Send verify's probes (`reverse[i]`: the path back of paths[i]): by default one
        process here holding a socket in every host's namespace (twin.verify.prober)."""
        missing = probing_supported()
        if missing:
            raise LabError(missing)
        with Prober(probe_hosts(self, plan)) as prober:
            return prober.run(paths, reverse, progress=progress)

    def continuous_prober(self) -> type[LabProber]:
        """The prober `twin probe` and drills run (twin.verify.continuous): by default a
        thread here holding sockets in the hosts' namespaces."""
        return ContinuousProber

    def clock(self, what: str = "twin drill run") -> Clock:
        """The clock a drill's figures are read on (twin.runtime.clock): by default this
        machine's, which is the nodes' too."""
        return LocalClock()

    def describe(self, nodes: list[str]) -> dict[str, dict]:
        """Per-node facts for `twin status` (image, state); runtimes add what they know."""
        present = set(self.existing(nodes))
        return {n: {"state": "running" if n in present else "missing", "image": "-"}
                for n in nodes}

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        """Why leftovers cannot even be looked for (cleanup needs less than deploying)."""
        return cls.unavailable()

    def resource_name(self, node: str) -> str:
        """The machine-wide name of the node's resource (namespace, container)."""
        return node

    @classmethod
    def inventory(cls) -> list[Resource]:
        """Every resource of this runtime on the machine, whoever owns it."""
        return []

    @classmethod
    def remove_resources(cls, resources: list[Resource]) -> None:
        """Remove resources `inventory` listed (with what is inside them)."""
        return None


@dataclass(frozen=True)
class Resource:
    """One thing a twin made, found on the machine: its owner None if it carries none."""

    runtime: str
    kind: str  # namespace | container | process
    name: str
    owner: Owner | None

    def to_dict(self) -> dict:
        return {"runtime": self.runtime, "kind": self.kind, "name": self.name,
                "owner": None if self.owner is None else {
                    "run_dir": self.owner.run_dir, "lab": self.owner.lab,
                    "lab_id": self.owner.lab_id}}


@dataclass(frozen=True)
class NodeView:
    """Paths as a node sees them; `host_prefix` turns one into a path twin can open."""

    python: str
    pythonpath: str
    config_dir: str
    run_dir: str
    host_prefix: str

    def from_host(self, inside: str) -> str:
        return f"{self.host_prefix}{inside}"


# Every runtime by name, as its class (a Runtime is made per lab); `auto` is resolved by
# pick_runtime, and listed first among the valid names of a miss.
RUNTIMES: Registry[type[Runtime]] = Registry("runtime", also=("auto",))
register = RUNTIMES.register

# `auto` tries these in order (container runtimes join the front as they land).
AUTO_ORDER = ["containerlab", "docker", "netns"]


def get_runtime(name: str, lab: str, build_dir: str | None = None,
                owner: Owner | None = None) -> Runtime:
    """The runtime `name` for a lab; UnknownName (a UsageError) listing the valid ones."""
    return RUNTIMES.get(name)(lab, build_dir, owner)


def pick_runtime(requested: str) -> tuple[str, str]:
    """Resolve `auto` to a runtime name; return (name, why)."""
    if requested != "auto":
        cls = RUNTIMES.get(requested)  # a miss raises with the list of valid names
        reason = cls.unavailable()
        if reason:
            raise UsageError(f"runtime {requested} cannot run here: {reason}")
        return requested, "asked for"
    skipped = []
    for name in AUTO_ORDER:
        if name not in RUNTIMES:
            continue
        reason = RUNTIMES[name].unavailable()
        if reason is None:
            why = "first available" + (f" ({'; '.join(skipped)})" if skipped else "")
            return name, why
        skipped.append(f"{name}: {reason}")
    raise UsageError("no runtime can run here: " + "; ".join(skipped))
