"""The work a lab does inside a node that is not one of the runtime's verbs:
programming its plan, starting its endpoint, and saying which data planes it
runs. A runtime hands out its `Kernel` (`Runtime.kernel`): this machine's Linux
(`LINUX`) unless it brings another way (docker-boot's nodes program themselves at
boot; an attached fabric's are reached over exec) or a model of one (the fake's).
"""

from __future__ import annotations

from typing import Protocol

from twin import endpoints
from twin.dataplane import probe
from twin.dataplane import program as node_program
from twin.fabric.plan import NodePlan
from twin.progress import Steps


class Kernel(Protocol):
    """How a runtime's nodes are programmed, get their endpoints, and what they run."""

    def configure(self, rt, node: NodePlan) -> None:
        """Apply (or apply again: it is idempotent) a node's plan."""

    def start_endpoints(self, rt, hosts: list[str], steps: Steps) -> None:
        """Start the MRC endpoint daemon on each host; return once each answers."""

    def host_limits(self, links: int) -> list[str]:
        """Raise the machine-wide limits a lab of `links` links needs; what changed."""

    def dataplanes(self) -> dict[str, str | None]:
        """Which data planes (twin.dataplane) the nodes' kernel runs: name -> None, or
        why not."""


# The IPv6 neighbour table is one table for every namespace on the machine, and its
# gc_thresh sysctls exist only in the initial namespace. Each link end resolves its
# peer's link-local address: 2 entries a link, and a margin for the NIC addresses and
# what else the machine holds. Past gc_thresh3 (1024 by default) the kernel refuses
# new entries ("neighbor table overflow"): on mrc-8p-256 (2,560 links) 7,040 of 8,704
# loopback probes were lost with every route in place.
NEIGH = "/proc/sys/net/ipv6/neigh/default/gc_thresh{}"
NEIGH_PER_LINK = 4


def neighbour_thresholds(links: int, now: tuple[int, int, int]) -> tuple[int, int, int]:
    """gc_thresh1..3 for a lab of `links` links, never lower than they are (pure)."""
    want3 = NEIGH_PER_LINK * links
    return now[0], max(now[1], want3 // 2), max(now[2], want3)


class LinuxKernel:
    def configure(self, rt, node: NodePlan) -> None:
        """The node's rendered program (config/<node>/program.json), by the one runner,
        here on a thread in the node's namespace."""
        node_program.run_inside(rt.netns_path(node.name),
                                node_program.load(rt.build_dir, node.name), rt.owner.tag)

    def dataplanes(self) -> dict[str, str | None]:
        return probe.probe()

    def start_endpoints(self, rt, hosts: list[str], steps: Steps) -> None:
        endpoints.start(rt, hosts, steps)

    def host_limits(self, links: int) -> list[str]:
        try:
            now = tuple(int(open(NEIGH.format(i)).read()) for i in (1, 2, 3))
        except OSError:
            return []  # no IPv6 neighbour table to size: nothing to do here
        want = neighbour_thresholds(links, now)
        changed = []
        for i, (old, new) in enumerate(zip(now, want, strict=True), start=1):
            if new != old:
                with open(NEIGH.format(i), "w") as f:
                    f.write(str(new))
                changed.append(f"net.ipv6.neigh.default.gc_thresh{i} {old} -> {new}")
        return changed


LINUX = LinuxKernel()
