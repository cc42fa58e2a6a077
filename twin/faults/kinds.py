"""The fault types: what each kind of fault does to a running lab (apply, revert,
reapply), registered under its kind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import ClassVar

from twin.dataplane.program import tbf_burst
from twin.errors import UsageError
from twin.fabric.model import Endpoint, Link
from twin.fabric.plan import NodePlan, Route
from twin.faults.record import Fault, FaultKind, active
from twin.lab import Attached, phases, restart_node
from twin.progress import Steps


def _link(lab: Attached, fault: Fault) -> Link:
    return next(lk for lk in lab.fabric.links if lk.id == fault.link)


# -- the fault types --------------------------------------------------------------------


class FaultType(ABC):
    kind: ClassVar[FaultKind]

    @abstractmethod
    def apply(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def revert(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """After `node` restarted: apply again what it lost; the ends touched."""


TYPES: dict[FaultKind, FaultType] = {}


def fault_type(cls: type[FaultType]) -> type[FaultType]:
    TYPES[cls.kind] = cls()
    return cls


@fault_type
class LinkDown(FaultType):
    kind = FaultKind.LINK_DOWN

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        link = _link(lab, fault)
        _restore_link(lab, link.a, link.b)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """Both ends of a restarted node's link came back up (it was re-programmed,
        and so was its peer): set down again the ends the fault holds down."""
        link = _link(lab, fault)
        if node not in (link.a.node, link.b.node):
            return []
        self.apply(lab, fault)
        return list(fault.ends)


class LinksDown(FaultType):
    """A fault over several links (a switch, a NIC port, a plane): its ends down."""

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        held = set(fault.links)
        links = [lk for lk in lab.fabric.links if lk.id in held]
        _restore_link(lab, *[e for lk in links for e in (lk.a, lk.b)])

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The restarted node and its peers were re-programmed, their links up: set
        down again the ends this fault holds on the restarted node's links."""
        mine = {lk.id for lk in lab.fabric.links_of(node)} & set(fault.links)
        again = [e for e in fault.ends
                 if lab.fabric.link_at(e).id in mine]
        for e in again:
            lab.runtime.set_link_state(e.node, e.ifname, False)
        return again


@fault_type
class SwitchDown(LinksDown):
    kind = FaultKind.SWITCH_DOWN


@fault_type
class NicDown(LinksDown):
    kind = FaultKind.NIC_DOWN


@fault_type
class PlaneDown(LinksDown):
    kind = FaultKind.PLANE_DOWN


class Reprogrammed(FaultType):
    """A fault in a node's kernel state (a table, a route, a qdisc) that re-applying
    the node's plan undoes: revert re-programs the node; a restart (which
    re-programs it) needs the fault applied again."""

    def revert(self, lab: Attached, fault: Fault) -> None:
        self.undo(lab, fault)
        node = fault.ends[0].node
        phases.configure(lab.runtime, [lab.plan[node]], Steps())

    def undo(self, lab: Attached, fault: Fault) -> None:
        """What re-programming does not undo (an nft table, a qdisc); nothing by default."""

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """A restart re-programs the node and its link peers: either undoes this."""
        mine = fault.ends[0].node
        if mine != node and mine not in {lk.peer(node).node for lk in lab.fabric.links_of(node)}:
            return []
        self.apply(lab, fault)  # idempotent
        return [fault.ends[0]]


@fault_type
class Blackhole(Reprogrammed):
    kind = FaultKind.BLACKHOLE

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


@fault_type
class SidLoss(Reprogrammed):
    kind = FaultKind.SID_LOSS

    def apply(self, lab: Attached, fault: Fault) -> None:
        lab.dataplane.remove_sids(lab.runtime, lab.plan[fault.ends[0].node])


@fault_type
class RouteCorrupt(Reprogrammed):
    kind = FaultKind.ROUTE_CORRUPT

    def apply(self, lab: Attached, fault: Fault) -> None:
        node = fault.ends[0].node
        good, bad = _corruption(lab.plan[node])
        lab.runtime.exec(node, ["ip", "-6", *bad.iproute2().split()])


@fault_type
class LinkRate(Reprogrammed):
    kind = FaultKind.LINK_RATE

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        rate = int(fault.detail)
        mtu = next(i.mtu for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        lab.runtime.exec(end.node, ["tc", "qdisc", "replace", "dev", end.ifname, "root", "tbf",
                                    "rate", f"{rate}bit", "burst", str(tbf_burst(rate, mtu)),
                                    "latency", "20ms"])

    def undo(self, lab: Attached, fault: Fault) -> None:
        """The plan re-shapes a link that has a rate; one without loses the qdisc here."""
        end = fault.ends[0]
        planned = next(i for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        if not planned.rate_bps:
            lab.runtime.exec(end.node, ["tc", "qdisc", "del", "dev", end.ifname, "root"],
                             check=False)


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


def _corruption(node: NodePlan) -> tuple[Route, Route]:
    """The node's first forwarding route, and the same route out of the next port's
    neighbour instead (deterministic, so a drill names it in advance)."""
    forwarding = [r for r in node.routes if r.via]
    if len(forwarding) < 2:
        raise UsageError(f"{node.name} has no second port to misroute out of")
    good = forwarding[0]
    other = next(r for r in forwarding[1:] if r.dev != good.dev)
    return good, replace(good, dev=other.dev, via=other.via, note="corrupted")


@fault_type
class LinkFlap(LinkDown):
    """While it runs, the link goes down and up; reverted (or after a crash, cleared),
    the link is up and both ends re-programmed, as for link-down."""

    kind = FaultKind.LINK_FLAP

    def apply(self, lab: Attached, fault: Fault) -> None:
        """The flapping itself is `link_flap`'s loop; the record only guards it."""


@fault_type
class SwitchReboot(FaultType):
    """A node restarting: in force for as long as the restart takes."""

    kind = FaultKind.SWITCH_REBOOT

    def apply(self, lab: Attached, fault: Fault) -> None:
        restart_node(lab, fault.target)
        reapply(lab, fault.target)

    def revert(self, lab: Attached, fault: Fault) -> None:
        """A restart interrupted part way: the node gets its plan and links again."""
        restart_node(lab, fault.target)
        reapply(lab, fault.target)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        return []


@fault_type
class LinkLoss(FaultType):
    kind = FaultKind.LINK_LOSS

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "-f", "-"],
                         input=loss_rules(end.ifname, fault.percent, loss_table(fault.link),
                                          lab.runtime.owner.tag))

    def revert(self, lab: Attached, fault: Fault) -> None:
        lab.runtime.exec(fault.ends[0].node,
                         ["nft", "delete", "table", "ip6", loss_table(fault.link)], check=False)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The rule lives in the switch end's namespace: only that node's restart
        loses it (its peer's restart leaves the table, which matches by name)."""
        if fault.ends[0].node != node:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]


def loss_table(link_id: str) -> str:
    """The nftables table that carries one link's loss rule (named after the link)."""
    return "twin_loss_" + "".join(c if c.isalnum() else "_" for c in link_id)


def loss_rules(ifname: str, percent: float, table: str, owner_tag: str = "") -> str:
    """nft -f input: drop `percent`% of packets forwarded out of, or into, `ifname`.
    numgen random draws per packet, so the loss is independent (Bernoulli). The
    table's comment names its owner (twin.owner)."""
    per_million = round(percent * 10_000)
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    return (f"table ip6 {table} {{\n{comment}"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -10; policy accept;\n"
            f"    oifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"    iifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"  }}\n}}\n")


def _restore_link(lab: Attached, *ends: Endpoint) -> None:
    for e in ends:
        lab.runtime.set_link_state(e.node, e.ifname, True)
    nodes = sorted({e.node for e in ends})
    phases.configure(lab.runtime, [lab.plan[n] for n in nodes], Steps())


# -- the commands -------------------------------------------------------------------------


def reapply(lab: Attached, node: str) -> list[str]:
    """Apply again, on `node` that restarted and came back bare, every fault in
    force that it lost; the ends touched, as NODE:IFNAME."""
    again = []
    for fault in active(lab):
        again.extend(str(e) if e.ifname else e.node
                     for e in TYPES[fault.kind].reapply(lab, fault, node))
    return again
