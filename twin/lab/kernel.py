"""The work a lab does inside a node that is not one of the runtime's verbs:
programming its plan and starting its endpoint. Both need a real namespace,
so a runtime may bring a model of a kernel instead (`Runtime.kernel`, the
fake's); every real runtime gets Linux's, here.
"""

from __future__ import annotations

from typing import Protocol

from twin import endpoints
from twin.configure import configure_node
from twin.fabric.plan import NodePlan
from twin.progress import Steps


class Kernel(Protocol):
    def configure(self, rt, node: NodePlan) -> None:
        """Apply (or apply again: it is idempotent) a node's plan."""

    def start_endpoints(self, rt, hosts: list[str], steps: Steps) -> None:
        """Start the MRC endpoint daemon on each host; return once each answers."""


class LinuxKernel:
    def configure(self, rt, node: NodePlan) -> None:
        configure_node(node, rt.netns_path(node.name), rt.owner.tag)

    def start_endpoints(self, rt, hosts: list[str], steps: Steps) -> None:
        endpoints.start(rt, hosts, steps)


LINUX = LinuxKernel()


def kernel_of(rt) -> Kernel:
    return rt.kernel or LINUX
