"""The phases of a lab, each a function over the runtime's verbs that returns
what it did. `twin up` runs them in order (twin.lab.pipeline); `twin restart`
runs the middle ones again for one node and its neighbours.

    limits     machine-wide limits the lab needs  kernel: the IPv6 neighbour table
    create     the nodes                          Runtime.create_nodes
    wire       the links, as veth pairs            Runtime.wire_links
    configure  every node's plan                   kernel: pyroute2, ip, tc
    carrier    wait until every planned link has carrier (exec `ip -j link`)
    routing    routing: bgp only: FRR on every router, until BGP has converged
               to the plan (twin.frr, twin.verify.bgp)
    endpoints  the MRC endpoint on every host      kernel: a daemon per host
    verify     routes read back, every path probed (twin.verify)
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from twin import frr
from twin.errors import LabError
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan, Plan
from twin.progress import Steps
from twin.verify import bgp as B
from twin.verify import run_verify

CARRIER_TIMEOUT_S = 10.0
CONVERGE_S = 60.0  # BGP to the plan on every router: seconds (datacenter timers: ~3 s)
CONVERGE_POLL_S = 0.5


@dataclass(frozen=True)
class Phase:
    """What one phase did: its name, what it acted on (nodes, links, hosts), its time."""

    name: str
    done: tuple[str, ...]
    seconds: float

    def to_dict(self) -> dict:
        return {"phase": self.name, "count": len(self.done), "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class Restarted:
    """A node rebooted: the nodes re-programmed (it and its link peers) and the
    link ends that faults in force hold down or lossy again."""

    node: str
    reprogrammed: tuple[str, ...]
    faults_again: tuple[str, ...]


PARTS, PART_MIN = 20, 16  # create and wire: progress in about 20 steps, 16 items at least


def limits(rt, links: list[Link], steps: Steps) -> Phase:
    """Raise what the machine shares between namespaces to what the lab needs (never
    lowered, not reverted at `down`: a capacity, not a state of the lab)."""
    start = time.monotonic()
    changed = rt.kernel.host_limits(len(links))
    for line in changed:
        steps.note(f"raised {line} (one table for every namespace; {len(links)} links)")
    return Phase("limits", tuple(changed), time.monotonic() - start)


def _in_parts(rt, items: list, label: str, verb, steps: Steps) -> None:
    """Call the runtime's verb on parts of the items (about PARTS of them, PART_MIN
    at least), so a big lab's create and wire show progress and an ETA; a runtime
    that must have them all at once (containerlab deploys the topology) gets one part."""
    steps.start(label, len(items))
    size = len(items) if not rt.incremental else max(PART_MIN, -(-len(items) // PARTS))
    for i in range(0, len(items), max(size, 1)):
        part = items[i:i + size]
        verb(part)
        steps.advance(len(part))


def create(rt, nodes: list[NodePlan], steps: Steps) -> Phase:
    start = time.monotonic()
    _in_parts(rt, nodes, f"creating {len(nodes)} nodes", rt.create_nodes, steps)
    return Phase("create", tuple(n.name for n in nodes), time.monotonic() - start)


def wire(rt, links: list[Link], steps: Steps) -> Phase:
    start = time.monotonic()
    _in_parts(rt, links, f"wiring {len(links)} links", rt.wire_links, steps)
    return Phase("wire", tuple(lk.id for lk in links), time.monotonic() - start)


def configure(rt, nodes: list[NodePlan], steps: Steps) -> Phase:
    """Program each node's plan (idempotent: this is also how a node is re-programmed)."""
    steps.start(f"configuring {len(nodes)} nodes", len(nodes))
    start = time.monotonic()
    kernel = rt.kernel
    for node in nodes:
        kernel.configure(rt, node)
        steps.advance()
    return Phase("configure", tuple(n.name for n in nodes), time.monotonic() - start)


def carrier(rt, nodes: list[NodePlan], steps: Steps,
            timeout_s: float | None = None) -> Phase:
    """Carrier on a fresh veth follows the kernel's link watch, a moment after both
    ends are up: wait for every planned interface, so endpoints start with all
    ports up."""
    timeout_s = CARRIER_TIMEOUT_S if timeout_s is None else timeout_s
    waiting = [n for n in nodes if n.interfaces]
    steps.start("waiting for carrier", len(waiting))
    start = time.monotonic()
    deadline = start + timeout_s
    while waiting:
        still = []
        for node in waiting:
            out = rt.exec(node.name, ["ip", "-j", "link", "show"]).stdout
            up = {e["ifname"] for e in json.loads(out or "[]")
                  if "LOWER_UP" in e.get("flags", ()) and e.get("operstate") == "UP"}
            missing = [i.name for i in node.interfaces if i.name not in up]
            if missing:
                still.append((node, missing))
            else:
                steps.advance()
        waiting = [n for n, _ in still]
        if waiting and time.monotonic() > deadline:
            node, missing = still[0]
            raise LabError(f"no carrier on {node.name} ({', '.join(missing)}) "
                           f"after {timeout_s:.0f}s")
        if waiting:
            time.sleep(0.05)
    return Phase("carrier", tuple(n.name for n in nodes), time.monotonic() - start)


def routing(rt, plan: Plan, steps: Steps, timeout_s: float | None = None) -> Phase:
    """routing: bgp: start FRR on every router, hand it its frr.conf, and wait until
    every router holds what its plan says (sessions Established with the planned peers,
    every remote host link with its ECMP width, nothing more): the first problems are
    the error when it does not within `timeout_s`."""
    start = time.monotonic()
    routers = [n for n in plan.nodes.values() if n.bgp is not None]
    if not routers:
        return Phase("routing", (), 0.0)
    start_frr(rt, plan, routers, steps)
    converged(rt, routers, steps, CONVERGE_S if timeout_s is None else timeout_s)
    return Phase("routing", tuple(n.name for n in routers), time.monotonic() - start)


def start_frr(rt, plan: Plan, routers: list[NodePlan], steps: Steps) -> None:
    """FRR on each router, given its frr.conf (twin.frr); not waited for."""
    bfd = plan.fabric.spec.bgp.bfd is not None
    steps.start(f"starting FRR on {len(routers)} routers", len(routers))
    for node in routers:
        frr.start(rt, node.name, frr.daemons(bfd))
        frr.configure(rt, node.name)
        steps.advance()


def read_router(rt, node: NodePlan, ids: dict[str, str]) -> list[str]:
    """What keeps a router from its plan now (twin.verify.bgp): [] when converged."""
    view = B.RouterView.read(node.name, frr.show(rt, node.name, "show bgp neighbors json"),
                             frr.show(rt, node.name, "show ipv6 route json"))
    return B.problems(node.name, node.bgp, view, ids)


def converged(rt, routers: list[NodePlan], steps: Steps, timeout_s: float) -> None:
    ids = {n.name: n.bgp.router_id for n in routers}
    steps.start("waiting for BGP to converge", len(routers))
    deadline = time.monotonic() + timeout_s
    waiting = routers
    while True:
        still = []
        for node in waiting:
            found = read_router(rt, node, ids)
            if found:
                still.append((node, found))
            else:
                steps.advance()
        if not still:
            return
        if time.monotonic() > deadline:
            shown = [p for _, found in still[:3] for p in found[:3]]
            raise LabError(f"BGP did not converge to the plan within {timeout_s:.0f}s on "
                           f"{len(still)} of {len(routers)} routers:\n  "
                           + "\n  ".join(shown))
        waiting = [n for n, _ in still]
        time.sleep(CONVERGE_POLL_S)


def endpoints(rt, hosts: list[str], steps: Steps) -> Phase:
    start = time.monotonic()
    rt.kernel.start_endpoints(rt, hosts, steps)
    return Phase("endpoints", tuple(hosts), time.monotonic() - start)


def verify(rt, plan: Plan, steps: Steps):
    """Routes read back and every path probed; the VerifyReport (ok or not)."""
    return run_verify(rt, plan, dataplane=True, steps=steps)
