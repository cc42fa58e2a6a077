"""The built-in fault kinds, registered in this order (a blind level draws among its kinds
in it: keep it, or seeds replay other drills).

    link-down   the named end(s) admin down. Revert brings both ends up and
                re-applies both nodes' plans: the kernel deleted the
                interface's addresses and routes when it went down.
    nic-down    one NIC port of a host (HOST:PLANE), down at the host
    switch-down every link of a switch, down at the switch: a dead switch
    plane-down  every link of a plane, down at its switches
                The last three are one fault over several links (`links`);
                revert brings every end up and re-applies every node's plan.
    blackhole   NODE[:IF] silently drops what it forwards (out of IF): an nft
                table in NODE's namespace; links and carrier stay up
    sid-loss    NODE's local SIDs are deleted (a misconfiguration)
    route-corrupt  one of NODE's static routes points out of the wrong port
    link-loss   nftables at the link's switch end drops PCT% of the packets
                forwarded out of or into it (numgen random, per packet).
    link-rate   a link shaped to RATE at its switch end (tbf): a degraded link; on a
                fabric with signals its port's virtual queue is re-attached to drain
                at RATE too (thresholds for RATE), and revert restores the planned one
                sid-loss, route-corrupt and link-rate revert by re-applying the
                node's plan, which is idempotent.
    link-flap   a link down and up COUNT times, PERIOD apart, while the command
                runs; recorded for its whole length, so a crash leaves it
                revertible, and Ctrl-C or SIGTERM bring the link back up
    switch-reboot  `twin restart NODE` as a fault on the timeline
    link-silent a gray failure: the link passes nothing, either way, and keeps its
                carrier (a bad optic): an nft netdev table at each end drops every
                packet it receives, ND, BGP and BFD included; revert deletes them
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, replace
from enum import StrEnum

from twin import validate as V
from twin.errors import UsageError
from twin.fabric.congestion import port_queue, tbf_args
from twin.fabric.model import Endpoint, Fabric, Link
from twin.fabric.plan import NodePlan, Route
from twin.faults.kinds import (
    FaultType,
    Param,
    Progress,
    inject,
    momentary,
    reapply,
    refuse_held,
    reprogram,
    restore_link,
    revert,
)
from twin.faults.record import Fault, forget, log_event
from twin.faults.registry import KINDS, register
from twin.faults.targets import LinkEnd, LinkTarget, NicPort, NodeTarget, PlaneTarget, Target
from twin.lab import Attached, restart_node


class FaultKind(StrEnum):
    """The built-in kinds' names (a kind added later is named by a plain string)."""

    LINK_DOWN = "link-down"
    LINK_LOSS = "link-loss"
    PLANE_LOSS = "plane-loss"
    SWITCH_DOWN = "switch-down"
    NIC_DOWN = "nic-down"
    PLANE_DOWN = "plane-down"
    BLACKHOLE = "blackhole"
    SID_LOSS = "sid-loss"
    ROUTE_CORRUPT = "route-corrupt"
    LINK_RATE = "link-rate"
    LINK_FLAP = "link-flap"
    SWITCH_REBOOT = "switch-reboot"
    LINK_SILENT = "link-silent"


LOSS_PERCENTS = (30, 50, 70)  # a blind drill's: enough that repeated probes see it
RATES = ("2mbit", "5mbit", "10mbit")  # a blind drill's: against unshaped veths, only goodput
MAX_PERIOD_NS = 600 * 10**9  # a drill is at most ten minutes long


def _link(lab: Attached, fault: Fault) -> Link:
    (link,) = fault.on.links(lab.fabric)  # a LinkTarget
    return link


def _ids(links: list[Link]) -> tuple[str, ...]:
    return tuple(lk.id for lk in links)


def _switch_end(fabric: Fabric, link: Link, rng: random.Random) -> Endpoint:
    return rng.choice([e for e in (link.a, link.b) if fabric.node(e.node).is_switch])


# -- down: link-down, nic-down, switch-down, plane-down ---------------------------------


@register
class LinkDown(FaultType):
    name = FaultKind.LINK_DOWN
    help = "Take a link down at NODE:IFNAME, e.g. t0-p0-r0:eth3."
    targets = (LinkEnd,)
    params = (Param("both", "Set both ends down (default: only this end; the other end then "
                    "loses carrier).", flag=True, default=False),)
    levels = ("easy",)
    takes_down = True
    undone_by_reprogram = True

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        link = target.link(lab.fabric)
        ends = (target.end, link.peer(target.node)) if values["both"] else (target.end,)
        return Fault(self.name, LinkTarget(link.id), ends, time.time())

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        link = _link(lab, fault)
        restore_link(lab, link.a, link.b, mending=fault)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """Both ends of a restarted node's link came back up (it was re-programmed,
        and so was its peer): set down again the ends the fault holds down."""
        link = _link(lab, fault)
        if node not in (link.a.node, link.b.node):
            return []
        self.apply(lab, fault)
        return list(fault.ends)

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"link {fault.target} down (set down: {', '.join(map(str, fault.ends))})"


class LinksDown(FaultType):
    """A fault over several links (a switch, a NIC port, a plane): its ends down."""

    takes_down = True
    undone_by_reprogram = True

    def ends(self, fabric: Fabric, target: Target, links: list[Link]) -> list[Endpoint]:
        """Where the links go down."""
        raise NotImplementedError

    def record(self, lab: Attached, target: Target, values: dict) -> Fault:
        links = target.links(lab.fabric)
        return Fault(self.name, target, tuple(self.ends(lab.fabric, target, links)),
                     time.time(), links=_ids(links))

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        held = set(fault.links)
        links = [lk for lk in lab.fabric.links if lk.id in held]
        restore_link(lab, *[e for lk in links for e in (lk.a, lk.b)], mending=fault)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The restarted node and its peers were re-programmed, their links up: set
        down again the ends this fault holds on the restarted node's links."""
        mine = {lk.id for lk in lab.fabric.links_of(node)} & set(fault.links)
        again = [e for e in fault.ends
                 if lab.fabric.link_at(e).id in mine]
        for e in again:
            lab.runtime.set_link_state(e.node, e.ifname, False)
        return again


@register
class NicDown(LinksDown):
    name = FaultKind.NIC_DOWN
    help = ("One NIC port of a host down, e.g. r0h0:2 (plane 2), or several of its ports\n"
            "as one fault, e.g. r0h0:1,3. Revert with `twin fault clear HOST:PLANE`.")
    targets = (NicPort,)
    levels = ("easy",)

    def ends(self, fabric: Fabric, target: NicPort, links: list[Link]) -> list[Endpoint]:
        return [lk.end(target.host) for lk in links]

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        ports = "NIC ports" if len(fault.ends) > 1 else "NIC port"
        return f"{ports} {fault.target} down ({', '.join(map(str, fault.ends))})"


class NodeFault(FaultType):
    """A fault in a whole switch (or node): it holds every link of the node."""

    targets = (NodeTarget,)
    form = "a switch, e.g. t1-p0-0"

    def whole(self, target: Target) -> str | None:
        return str(target)

    def in_switch(self, fault: Fault) -> str | None:
        return fault.on.name  # a NodeTarget


@register
class SwitchDown(LinksDown, NodeFault):
    name = FaultKind.SWITCH_DOWN
    help = ("A dead switch: every link of NODE down at NODE (its peers lose carrier).\n"
            "Revert with `twin fault clear NODE`.")
    levels = ("easy",)

    def check(self, fabric: Fabric, target: NodeTarget) -> None:
        if not target.is_switch(fabric):
            raise UsageError(f"{target} is a host, not a switch; a host's port: "
                             f"`twin fault nic-down {target}:PLANE`")

    def ends(self, fabric: Fabric, target: NodeTarget, links: list[Link]) -> list[Endpoint]:
        return [lk.end(target.name) for lk in links]

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"switch {fault.target} down: {len(fault.links)} links"


@register
class PlaneDown(LinksDown):
    name = FaultKind.PLANE_DOWN
    help = "Every link of plane PLANE down at its switches. Revert with\n`twin fault clear PLANE`."
    targets = (PlaneTarget,)

    def ends(self, fabric: Fabric, target: PlaneTarget, links: list[Link]) -> list[Endpoint]:
        return [e for lk in links for e in (lk.a, lk.b) if fabric.node(e.node).is_switch]

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"plane {fault.target} down: {len(fault.links)} links"


# -- inside a node: blackhole, sid-loss, route-corrupt, (link-rate) ----------------------


class Reprogrammed(FaultType):
    """A fault in a node's kernel state (a table, a route, a qdisc) that re-applying
    the node's plan undoes: revert re-programs the node; a restart (which
    re-programs it) needs the fault applied again."""

    undone_by_reprogram = True

    def revert(self, lab: Attached, fault: Fault) -> None:
        self.undo(lab, fault)
        reprogram(lab, [fault.ends[0].node], mending=fault)

    def undo(self, lab: Attached, fault: Fault) -> None:
        """What re-programming does not undo (an nft table, a qdisc); nothing by default."""

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """A restart re-programs the node and its link peers: either undoes this."""
        mine = fault.ends[0].node
        if mine != node and mine not in {lk.peer(node).node for lk in lab.fabric.links_of(node)}:
            return []
        self.apply(lab, fault)  # idempotent
        return [fault.ends[0]]


class NodeReprogrammed(Reprogrammed, NodeFault):
    def record(self, lab: Attached, target: NodeTarget, values: dict) -> Fault:
        return Fault(self.name, target, (Endpoint(target.name, ""),), time.time(),
                     links=_ids(target.links(lab.fabric)), detail=self.detail(lab, target))

    def detail(self, lab: Attached, target: NodeTarget) -> str:
        """What the record says besides (or why the node cannot have it: UsageError)."""
        return ""


@register
class Blackhole(Reprogrammed):
    name = FaultKind.BLACKHOLE
    help = ("A silent failure: NODE drops every packet it forwards (NODE:IF: out of IF).\n"
            "Links and carrier stay up; no port state reveals it.")
    targets = (LinkEnd, NodeTarget)
    form = "a switch (t1-p0-0) or one of its ports (t1-p0-0:eth1)"
    metavar = "NODE[:IF]"
    levels = ("hard",)
    undone_by_reprogram = False  # an nft table: re-programming leaves it

    def check(self, fabric: Fabric, target: Target) -> None:
        node = target.node if isinstance(target, LinkEnd) else target.name
        if not fabric.node(node).is_switch:
            raise UsageError(f"{node} is a host: it forwards nothing; blackhole a switch")

    def whole(self, target: Target) -> str | None:
        return target.name if isinstance(target, NodeTarget) else None

    def in_switch(self, fault: Fault) -> str | None:
        end = fault.ends[0]
        return None if end.ifname else end.node

    def record(self, lab: Attached, target: Target, values: dict) -> Fault:
        end = target.end if isinstance(target, LinkEnd) else Endpoint(target.name, "")
        return Fault(self.name, target, (end,), time.time(),
                     links=_ids(target.links(lab.fabric)))

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "-f", "-"], input=blackhole_rules(
            end.ifname or None, blackhole_table(end.ifname), lab.runtime.owner.tag))

    def undo(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "delete", "table", "ip6",
                                    blackhole_table(end.ifname)], check=False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        self.undo(lab, fault)  # nothing else changed: no need to re-program

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The table lives in the node's namespace: only its own restart loses it."""
        if fault.ends[0].node != node:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]

    def draw(self, fabric: Fabric, rng: random.Random) -> tuple[str, str]:
        node = NodeTarget.draw(fabric, rng)
        if rng.random() < 0.5:
            return node, ""
        link = rng.choice(sorted(fabric.links_of(node), key=lambda lk: lk.id))
        return str(link.end(node)), ""

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"blackhole {fault.target}: forwarding dropped, links up"


@register
class SidLoss(NodeReprogrammed):
    name = FaultKind.SID_LOSS
    help = ("A misconfiguration: NODE's local SIDs (a switch's uN, a host's decap) are gone:\n"
            "their seg6local routes, or their eBPF programs, as the lab's data plane holds them.")
    levels = ("hard",)

    def detail(self, lab: Attached, target: NodeTarget) -> str:
        if not lab.plan[target.name].sids:
            raise UsageError(f"{target} has no local SID")
        return ""

    def apply(self, lab: Attached, fault: Fault) -> None:
        lab.dataplane.remove_sids(lab.runtime, lab.plan[fault.ends[0].node])

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        what = "routes are" if lab.dataplane.name == "seg6local" else "programs are"
        return f"sid-loss {fault.target}: its local SID {what} removed ({lab.dataplane.name})"


@register
class RouteCorrupt(NodeReprogrammed):
    name = FaultKind.ROUTE_CORRUPT
    help = "A misconfiguration: one of NODE's static routes points out of the wrong port."
    levels = ("hard",)
    named_by_links = True  # the misrouted probes fail on one of its links

    def detail(self, lab: Attached, target: NodeTarget) -> str:
        good, bad = corruption(lab.plan[target.name])
        return f"{good.dst} via {good.via} dev {good.dev} -> via {bad.via} dev {bad.dev}"

    def apply(self, lab: Attached, fault: Fault) -> None:
        node = fault.ends[0].node
        good, bad = corruption(lab.plan[node])
        lab.runtime.exec(node, ["ip", "-6", *bad.iproute2().split()])

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"route-corrupt {fault.target}: {fault.detail}"


def blackhole_table(ifname: str) -> str:
    return "twin_blackhole" + (f"_{ifname}" if ifname else "")


def blackhole_rules(ifname: str | None, table: str, owner_tag: str = "") -> str:
    """nft -f input: drop every packet the node forwards (out of `ifname`, if given)."""
    match = f'oifname "{ifname}" ' if ifname else ""
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    return (f"add table ip6 {table}\ndelete table ip6 {table}\n"  # loaded again: fresh
            f"table ip6 {table} {{\n{comment}"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -5; policy accept;\n"
            f"    {match}counter drop\n"
            f"  }}\n}}\n")


def corruption(node: NodePlan) -> tuple[Route, Route]:
    """The node's first forwarding route, and the same route out of the next port's
    neighbour instead (deterministic, so a drill names it in advance)."""
    forwarding = [r for r in node.routes if r.via]
    if len(forwarding) < 2:
        raise UsageError(f"{node.name} has no second port to misroute out of")
    good = forwarding[0]
    other = next(r for r in forwarding[1:] if r.dev != good.dev)
    return good, replace(good, dev=other.dev, via=other.via, note="corrupted")


# -- on a link's switch end: link-loss, link-rate -----------------------------------------


# (NaN and infinities are no percentage either: a Float refuses them)
PERCENT = V.Float(0, 100, above=True, words=V.ONE, what="a percentage in (0, 100]")


@register
class LinkLoss(FaultType):
    name = FaultKind.LINK_LOSS
    help = ("Drop PERCENT% of the packets on a link, both directions (nftables numgen\n"
            "random at the switch end). Revert with `twin fault link-up NODE:IF`.")
    targets = (LinkEnd,)
    params = (Param("percent", "the share of packets dropped, in (0, 100]", cli_type=float,
                    argument=True, check=PERCENT, drill=True, needed="e.g. percent: 20"),)
    levels = ("hard",)

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        return Fault(self.name, LinkTarget(target.link(lab.fabric).id),
                     (target.switch_end(lab.fabric),), time.time(), values["percent"])

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "-f", "-"],
                         input=loss_rules(end.ifname, fault.percent, loss_table(fault.target),
                                          lab.runtime.owner.tag))

    def revert(self, lab: Attached, fault: Fault) -> None:
        lab.runtime.exec(fault.ends[0].node,
                         ["nft", "delete", "table", "ip6", loss_table(fault.target)],
                         check=False)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The rule lives in the switch end's namespace: only that node's restart
        loses it (its peer's restart leaves the table, which matches by name)."""
        if fault.ends[0].node != node:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]

    def draw(self, fabric: Fabric, rng: random.Random) -> tuple[str, str]:
        link = rng.choice(sorted(fabric.links, key=lambda lk: lk.id))
        return str(_switch_end(fabric, link, rng)), str(rng.choice(LOSS_PERCENTS))

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"link {fault.target}: {fault.percent:g}% loss (nftables at {fault.ends[0]})"

    def reveal(self, fault: Fault) -> str:
        return f"{fault.percent:g}% loss"


@register
class PlaneLoss(FaultType):
    name = FaultKind.PLANE_LOSS
    help = ("Drop PERCENT% of the packets on every T0-T1 link of plane PLANE, each way\n"
            "(nftables numgen random in each T1: a packet crossing a T1 crosses two such\n"
            "links). Random loss over a whole fabric is one step per plane. Revert with\n"
            "`twin fault clear PLANE`.")
    targets = (PlaneTarget,)
    params = (Param("percent", "the share of packets dropped per link, in (0, 100]",
                    cli_type=float, argument=True, check=PERCENT, drill=True,
                    needed="e.g. percent: 20"),)

    def elements(self, fabric: Fabric, target: PlaneTarget) -> tuple[set[str], set[str]]:
        return {lk.id for lk in _t1_links(fabric, target.plane)}, set()

    def record(self, lab: Attached, target: PlaneTarget, values: dict) -> Fault:
        links = _t1_links(lab.fabric, target.plane)
        return Fault(self.name, target, tuple(lk.b for lk in links), time.time(),
                     values["percent"], links=_ids(links))

    def apply(self, lab: Attached, fault: Fault) -> None:
        for node in sorted({e.node for e in fault.ends}):
            self._apply_in(lab, fault, node)

    def _apply_in(self, lab: Attached, fault: Fault, node: str) -> None:
        lab.runtime.exec(node, ["nft", "-f", "-"],
                         input=loss_rules(None, fault.percent, _plane_table(fault),
                                          lab.runtime.owner.tag))

    def revert(self, lab: Attached, fault: Fault) -> None:
        for node in sorted({e.node for e in fault.ends}):
            lab.runtime.exec(node, ["nft", "delete", "table", "ip6", _plane_table(fault)],
                             check=False)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """A restarted T1 of the plane lost its table: put it back there only."""
        ends = [e for e in fault.ends if e.node == node]
        if ends:
            self._apply_in(lab, fault, node)
        return ends

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return (f"plane {fault.target}: {fault.percent:g}% loss on each of its "
                f"{len(fault.links)} T0-T1 links (nftables in its T1s)")

    def reveal(self, fault: Fault) -> str:
        return f"{fault.percent:g}% loss on plane {fault.target}"


def _plane_table(fault: Fault) -> str:
    return loss_table(f"plane-{fault.on.plane}")  # a PlaneTarget


def _t1_links(fabric: Fabric, plane: int) -> list[Link]:
    """Plane `plane`'s T0-T1 links (`b` is the T1 end)."""
    return [lk for lk in fabric.links if lk.plane == plane and lk.kind == "fabric"]


def loss_table(link_id: str) -> str:
    """The nftables table that carries one link's loss rule (named after the link)."""
    return "twin_loss_" + "".join(c if c.isalnum() else "_" for c in link_id)


def loss_rules(ifname: str | None, percent: float, table: str, owner_tag: str = "") -> str:
    """nft -f input: drop `percent`% of packets forwarded out of, or into, `ifname`
    (None: every port of the node, so `percent`% on the way in and again on the way
    out). numgen random draws per packet, so the loss is independent (Bernoulli). The
    table's comment names its owner (twin.owner)."""
    per_million = round(percent * 10_000)
    # numgen's values are 0..999999, and nft refuses a bound it cannot reach: 100% is
    # a plain drop
    draw = "" if per_million >= 1_000_000 else \
        f"numgen random mod 1000000 < {per_million} "
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    out_if = f"oifname \"{ifname}\" " if ifname else ""
    in_if = f"iifname \"{ifname}\" " if ifname else ""
    return (f"table ip6 {table} {{\n{comment}"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -10; policy accept;\n"
            f"    {out_if}{draw}counter drop\n"
            f"    {in_if}{draw}counter drop\n"
            f"  }}\n}}\n")


@register
class LinkRate(Reprogrammed):
    name = FaultKind.LINK_RATE
    help = "A degraded link: shape it to RATE (e.g. 100mbit) at its switch end (tbf)."
    targets = (LinkEnd,)
    # (the check gives bit/s: tc's units, none of them 0)
    params = (Param("rate", "bits per second with a unit, e.g. 100mbit", argument=True,
                    check=V.Rate(), drill=True, needed="e.g. rate: 100mbit"),)
    levels = ("hard",)

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        return Fault(self.name, LinkTarget(target.link(lab.fabric).id),
                     (target.switch_end(lab.fabric),), time.time(), detail=str(values["rate"]))

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        rate = int(fault.detail)
        mtu = next(i.mtu for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        lab.runtime.exec(end.node, ["tc", "qdisc", "replace", "dev", end.ifname, "root", "tbf",
                                    *tbf_args(rate, mtu)])
        planned = next((q for q in lab.plan[end.node].queues if q.dev == end.ifname), None)
        if planned is not None:  # the virtual queue drains at the new rate too
            q = port_queue(lab.fabric.spec.congestion, end.ifname, rate, mtu, planned.mark)
            lab.runtime.exec(end.node, [*lab.runtime.python_argv(), "-m", "twin.node.ebpf",
                                        "queue", json.dumps(asdict(q))])

    def undo(self, lab: Attached, fault: Fault) -> None:
        """The plan re-shapes a link that has a rate (and re-attaches its planned
        queue program, if any); one without loses the qdisc here."""
        end = fault.ends[0]
        planned = next(i for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        if not planned.rate_bps:
            lab.runtime.exec(end.node, ["tc", "qdisc", "del", "dev", end.ifname, "root"],
                             check=False)

    def draw(self, fabric: Fabric, rng: random.Random) -> tuple[str, str]:
        link = rng.choice(sorted((lk for lk in fabric.links if lk.kind == "fabric"),
                                 key=lambda lk: lk.id))
        return str(_switch_end(fabric, link, rng)), rng.choice(RATES)

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"link {fault.target} shaped to {int(fault.detail):,} bit/s at {fault.ends[0]}"

    def reveal(self, fault: Fault) -> str:
        if fault.detail.isdigit():
            return f"shaped to {int(fault.detail) / 1e6:g} Mbit/s"
        return fault.detail


# -- in time: link-flap, switch-reboot ----------------------------------------------------


_FLAP_HINT = "e.g. count: 3, period: 100ms (down half of each period)"


# The command line's flaps run for as long as asked; a drill's fit in its ten minutes,
# where a period is a duration (its ns are the timeline's)
FLAPS = V.Int(1, 10_000, words=V.SPAN, hint="flaps")
FLAP_PERIOD_S = V.Float(0.01, 3600, words=V.SPAN, hint="seconds")
DRILL_FLAPS = V.Int(1, 1000, words=V.SPAN)
DRILL_FLAP_PERIOD = V.Duration(MAX_PERIOD_NS, hi_hint="a drill is a short experiment",
                               lo=10_000_000, lo_hint="each flap runs `ip`")


@register
class LinkFlap(LinkDown):
    """While it runs, the link goes down and up; reverted (or after a crash, cleared),
    the link is up and both ends re-programmed, as for link-down."""

    name = FaultKind.LINK_FLAP
    help = ("Flap a link: down and up COUNT times, PERIOD apart. Runs until done;\n"
            "Ctrl-C or SIGTERM bring the link back up, and after a crash `twin fault\n"
            "clear` does.")
    params = (
        Param("count", "Flaps: down, then up again.", cli_type=int, default=3, check=FLAPS,
              drill=DRILL_FLAPS, needed=_FLAP_HINT),
        Param("period", "One flap: down for half of it, up for the other half.",
              cli_type=float, default=1.0, metavar="SECONDS", check=FLAP_PERIOD_S,
              drill=DRILL_FLAP_PERIOD, needed=_FLAP_HINT),  # a drill's: ns
        Param("both", "Set both ends down (default: this end).", flag=True, default=False),
    )
    levels = ()
    takes_down = False  # only while it flaps: another fault is refused as "a link-flap fault"
    no_for = "count x period is its length"
    blocking = True
    step_word = "flap"

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        down = super().record(lab, target, values)
        return replace(down, kind=self.name, detail=f"{values['count']}x{values['period']:g}s")

    def inject(self, lab: Attached, fault: Fault, what: str, values: dict,
               progress: Progress | None) -> Fault:
        """Take the link down and up `count` times, `period` s apart (down half of each
        period). The fault is recorded before the first flap and dropped after the
        link is back up; an exception, Ctrl-C or SIGTERM (see the CLI) brings it up."""
        refuse_held(lab, fault.all_links, what)
        count, period_s = values["count"], values["period"]
        link = _link(lab, fault)
        fault = inject(lab, fault)
        try:
            for i in range(count):
                LinkDown.apply(self, lab, fault)
                log_event(lab, "down", fault)
                time.sleep(period_s / 2)
                restore_link(lab, link.a, link.b, mending=fault)
                log_event(lab, "up", fault)
                if progress:
                    progress(i + 1, count)
                if i + 1 < count:
                    time.sleep(period_s / 2)
        finally:
            revert(lab, fault)
            forget(lab, fault)
        return fault

    def apply(self, lab: Attached, fault: Fault) -> None:
        """The flapping itself is `inject`'s loop; the record only guards it."""

    def actions(self, step) -> list[tuple[int, bool]]:
        period, count = step.params["period"], step.params["count"]
        return [(step.at_ns + k * period + half, bool(half))
                for k in range(count) for half in (0, period // 2)]

    def length_ns(self, step) -> int:
        return step.params["count"] * step.params["period"]

    def on_timeline(self, lab: Attached, text: str, values: dict) -> Fault:
        """On a drill's timeline each flap is a link-down, reverted half a period later."""
        return KINDS[FaultKind.LINK_DOWN].start(lab, text)

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return (f"link {fault.target} flapped {values['count']} times, {values['period']:g}s "
                "apart; it is up")


@register
class SwitchReboot(NodeFault):
    """A node restarting: in force for as long as the restart takes."""

    name = FaultKind.SWITCH_REBOOT
    help = ("Reboot NODE as a fault on the timeline (`twin fault log`): it comes back\n"
            "re-wired and re-programmed, with the faults on its links applied again.")
    lasting = False
    no_for = "a reboot is over when it is back"

    def record(self, lab: Attached, target: NodeTarget, values: dict) -> Fault:
        return Fault(self.name, target, (Endpoint(target.name, ""),), time.time(),
                     links=_ids(target.links(lab.fabric)))

    def inject(self, lab: Attached, fault: Fault, what: str, values: dict,
               progress: Progress | None) -> Fault:
        """Restart NODE as a fault: on the timeline from the moment it goes to when it is
        back, re-wired, re-programmed, its faults applied again."""
        # Not held against other faults: a reboot re-applies the faults on its links.
        return momentary(lab, fault, what)

    def apply(self, lab: Attached, fault: Fault) -> None:
        restart_node(lab, fault.on.name)
        reapply(lab, fault.on.name)

    def revert(self, lab: Attached, fault: Fault) -> None:
        """A restart interrupted part way: the node gets its plan and links again."""
        restart_node(lab, fault.on.name)
        reapply(lab, fault.on.name)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        return []

    def unsupported(self, lab: Attached) -> str | None:
        why = lab.runtime.why_no_restart()
        return f"lab {lab.lab} is attached ({lab.runtime.name}), and {why}" if why else None

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"{fault.target} rebooted"


# -- a gray failure: link-silent ------------------------------------------------------------


def silent_table(ifname: str) -> str:
    return f"twin_silent_{ifname}"


def silent_rules(ifname: str, owner_tag: str = "") -> str:
    """nft -f input: drop every packet `ifname` receives, before anything sees it
    (netdev ingress: neighbour discovery, BGP and BFD too). Loaded again: fresh."""
    table = silent_table(ifname)
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    return (f"add table netdev {table}\ndelete table netdev {table}\n"
            f"table netdev {table} {{\n{comment}"
            f"  chain ingress {{\n"
            f"    type filter hook ingress device \"{ifname}\" priority -500; policy drop;\n"
            f"    counter\n"
            f"  }}\n}}\n")


@register
class LinkSilent(FaultType):
    """A link whose carrier stays up while it passes nothing (a failing optic, a
    unidirectional fibre cut both ways): neither end's port state says so. Only
    what listens on the link notices: BGP's hold timer (9 s by default), BFD (in its
    detect time), MRC's transport (one loss detection)."""

    name = FaultKind.LINK_SILENT
    help = ("A gray failure: the link passes no packet either way and keeps its carrier\n"
            "(nft netdev ingress drop at both ends). Revert with `twin fault clear`.")
    targets = (LinkEnd,)

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        link = target.link(lab.fabric)
        return Fault(self.name, LinkTarget(link.id), (link.a, link.b), time.time())

    def apply(self, lab: Attached, fault: Fault) -> None:
        for end in fault.ends:
            lab.runtime.exec(end.node, ["nft", "-f", "-"],
                             input=silent_rules(end.ifname, lab.runtime.owner.tag))

    def revert(self, lab: Attached, fault: Fault) -> None:
        for end in fault.ends:
            lab.runtime.exec(end.node, ["nft", "delete", "table", "netdev",
                                        silent_table(end.ifname)], check=False)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The tables live in the ends' namespaces: a restarted end lost its own."""
        mine = [e for e in fault.ends if e.node == node]
        for end in mine:
            lab.runtime.exec(end.node, ["nft", "-f", "-"],
                             input=silent_rules(end.ifname, lab.runtime.owner.tag))
        return mine

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"link {fault.target} silent: passes nothing either way, carrier up"
