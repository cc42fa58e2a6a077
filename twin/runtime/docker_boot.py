"""`docker-boot`: containers that configure themselves at boot; twin only wires links.

Every node image runs images/mrc-twin-boot. With MRC_TWIN_BOOT=1, which the rendered
containerlab topology sets, a node reads what is mounted at /etc/mrc-twin (its
config/<node>/ of the build directory) and does what twin's configure step does from
the host: sysctls, addresses, static routes, local SIDs, shaping, and on a host its
MRC endpoint. That is what lets containerlab, clabernetes or any orchestrator that
starts the rendered topology bring up a working fabric without twin on the machine.

This runtime is that path on one machine: the docker runtime's containers and links,
with the topology's environment passed on, and a kernel (twin.runtime.kernel's contract)
that programs nothing: `configure` waits until the node says it booted
(/run/mrc-twin/booted; /run/mrc-twin/boot-failed carries why not), and
`start_endpoints` waits until each host's endpoint answers on its control socket.
`twin verify` then checks the self-configured fabric exactly as it checks twin's own.
"""

from __future__ import annotations

import os
import time
from typing import ClassVar

from twin import endpoints, nsenter
from twin.errors import LabError
from twin.fabric.plan import NodePlan
from twin.readback import read_node
from twin.runtime.base import Resource, register
from twin.runtime.docker import NODE_RUN_DIR, DockerRuntime
from twin.runtime.kernel import LINUX, Kernel

BOOT_WAIT_S = 60.0
IFF_UP = 0x1


def _booted(rt, node: str) -> tuple[str, str]:
    view = rt.node_view(node)
    return (view.from_host(f"{NODE_RUN_DIR}/booted"),
            view.from_host(f"{NODE_RUN_DIR}/boot-failed"))


def _all_up(rt, node: NodePlan) -> bool:
    """Every planned interface of the node exists and is admin up."""
    from pyroute2 import IPRoute

    with nsenter.inside(rt.netns_path(node.name)):
        ipr = IPRoute()  # used on this thread only (pyroute2 binds a socket per thread)
    try:
        flags = {m.get_attr("IFLA_IFNAME"): m["flags"] for m in ipr.get_links()}
    finally:
        ipr.close()
    return all(flags.get(i.name, 0) & IFF_UP for i in node.interfaces)


class BootKernel:
    """Nodes program themselves: wait for them. A booted node whose state is not its
    plan is programmed from the host, as the docker runtime does: its boot is long over,
    and nothing else would. That is a node that got new link ends (the peer of a node
    `twin restart` rebooted), or a link brought back up after a fault (an interface set
    down loses its addresses and the routes through it)."""

    def configure(self, rt, node: NodePlan) -> None:
        done, failed = _booted(rt, node.name)
        deadline = time.monotonic() + BOOT_WAIT_S
        while time.monotonic() < deadline:
            if os.path.exists(done):
                if not _all_up(rt, node) or not read_node(rt, node).ok:
                    LINUX.configure(rt, node)  # idempotent: on top of what it booted with
                return
            if os.path.exists(failed):
                with open(failed) as f:
                    why = f.read().strip()
                raise LabError(f"{node.name} failed to configure itself at boot: {why}")
            time.sleep(0.05)
        raise LabError(f"{node.name} did not configure itself within {BOOT_WAIT_S:.0f}s "
                       f"(no {NODE_RUN_DIR}/booted; see `twin exec --lab {rt.lab} {node.name} "
                       f"-- cat {NODE_RUN_DIR}/boot-program.log`)")

    def start_endpoints(self, rt, hosts: list[str], steps) -> None:
        endpoints.wait_started(rt, hosts, steps, BOOT_WAIT_S,
                               log=f"{NODE_RUN_DIR}/endpoint.log")

    def host_limits(self, links: int) -> list[str]:
        return LINUX.host_limits(links)

    def dataplanes(self) -> dict[str, str | None]:
        return LINUX.dataplanes()


@register
class DockerBootRuntime(DockerRuntime):
    name = "docker-boot"
    kernel: ClassVar[Kernel] = BootKernel()
    programs_nodes: ClassVar[bool] = False

    def _environment(self, spec: dict) -> dict[str, str]:
        return {**{k: str(v) for k, v in (spec.get("env") or {}).items()},
                "MRC_TWIN_OWNER": self.owner.tag}

    def restart_node(self, node: NodePlan) -> None:
        for marker in _booted(self, node.name):  # the old boot's word is not the new one's
            try:
                os.unlink(marker)
            except FileNotFoundError:
                pass
        super().restart_node(node)

    @classmethod
    def inventory(cls) -> list[Resource]:
        return []  # the docker runtime's inventory lists every container twin made
