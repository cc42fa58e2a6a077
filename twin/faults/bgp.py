"""BGP's own faults, on a lab with `routing: bgp` (twin.fabric.bgp): what goes wrong
in the fabric MRC replaces without a link or a switch failing.

    bgp-reset      NODE:IF  the BGP session on IF is reset (`clear bgp IF`): its routes
                   are withdrawn, the session comes back by itself a few seconds later
                   (over when applied, like a reboot: nothing to revert)
    bgp-withdraw   T0:IF    the T0 stops announcing the host link on IF (`no network`):
                   that NIC port becomes unreachable from every other rack, with every
                   link up; revert announces it again
    bgp-route-map  NODE:IF  an outbound route-map that denies everything, put on the
                   session on IF (a policy typo): the session stays Established and
                   carries no route, so the peer loses every path through this node;
                   revert takes the route-map off

Each is a change to the running FRR, through vtysh in the node (twin.frr), so a
restart of the node (its frr.conf again) undoes it: `reapply` puts it back. Refused,
with the reason, on a static-srv6 lab and on a target that runs no BGP session there.
"""

from __future__ import annotations

import time

from twin.errors import UsageError
from twin.fabric.model import Endpoint, Fabric, Tier
from twin.faults.kinds import FaultType, Progress, momentary
from twin.faults.record import Fault
from twin.faults.registry import register
from twin.faults.targets import LinkEnd
from twin.lab import Attached

ROUTE_MAP = "TWIN-MISTAKE"  # the route-map bgp-route-map puts on a session


def _router(lab: Attached, node: str):
    if lab.fabric.spec.bgp is None:
        raise UsageError(f"lab {lab.lab} runs routing: {lab.fabric.spec.routing}, no BGP; "
                         "BGP's faults need a lab brought up with --routing bgp")
    plan = lab.plan[node].bgp
    if plan is None:
        raise UsageError(f"{node} runs no BGP (a host): give a switch's port")
    return plan


def _vtysh(lab: Attached, node: str, *commands: str) -> None:
    from twin import frr

    frr.run_commands(lab.runtime, node, list(commands))


class BgpFault(FaultType):
    targets = (LinkEnd,)
    metavar = "NODE:IF"

    def record(self, lab: Attached, target: LinkEnd, values: dict) -> Fault:
        self.refuse(lab, target)
        return Fault(self.name, target, (target.end,), time.time(),
                     links=(target.link(lab.fabric).id,), detail=self.detail(lab, target))

    def refuse(self, lab: Attached, target: LinkEnd) -> None:
        plan = _router(lab, target.node)
        if target.ifname not in {s.ifname for s in plan.sessions}:
            raise UsageError(f"{target}: {target.node} has no BGP session on {target.ifname}"
                             f" (sessions on {', '.join(s.ifname for s in plan.sessions)})")

    def detail(self, lab: Attached, target: LinkEnd) -> str:
        return ""

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """Its node restarted: FRR read its frr.conf again, without this change."""
        end = fault.ends[0]
        if end.node != node:
            return []
        self.apply(lab, fault)
        return [end]

    def draw(self, fabric: Fabric, rng) -> tuple[str, str]:
        link = rng.choice([lk for lk in fabric.links if lk.kind == "fabric"])
        return str(link.a), ""


@register
class BgpReset(BgpFault):
    name = "bgp-reset"
    help = ("BGP's own: the session on NODE:IF is reset (clear bgp). Its routes are\n"
            "withdrawn and learned again once it is back, a few seconds later.")
    lasting = False
    no_for = "a reset is over once made: the session comes back by itself"

    def inject(self, lab: Attached, fault: Fault, what: str, values: dict,
               progress: Progress | None) -> Fault:
        """Over once made (the session comes back by itself), as a reboot."""
        return momentary(lab, fault, what)

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        _vtysh(lab, end.node, f"clear bgp {end.ifname}")

    def revert(self, lab: Attached, fault: Fault) -> None:
        return None  # the session came back by itself

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        return []

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return f"bgp-reset {fault.target}: session reset, its routes withdrawn until it is back"


@register
class BgpWithdraw(BgpFault):
    name = "bgp-withdraw"
    help = ("BGP's own: T0:IF's host link is no longer announced (no network). That NIC\n"
            "port is unreachable from every other rack, with every link up.")
    metavar = "T0:IF"

    def refuse(self, lab: Attached, target: LinkEnd) -> None:
        _router(lab, target.node)
        link = target.link(lab.fabric)
        if link.kind != "host" or lab.fabric.node(target.node).tier is not Tier.T0:
            raise UsageError(f"{target}: give a T0's port to a host (its host link is "
                             "what the T0 announces), e.g. t0-p0-r0:eth1")

    def detail(self, lab: Attached, target: LinkEnd) -> str:
        from twin.fabric import bgp

        link = target.link(lab.fabric)
        host = link.peer(target.node).node
        return bgp.host_link(lab.fabric, host, link.plane).prefix

    def _commands(self, lab: Attached, fault: Fault, no: bool) -> list[str]:
        asn = lab.plan[fault.ends[0].node].bgp.asn
        return ["configure terminal", f"router bgp {asn}", "address-family ipv6 unicast",
                f"{'no ' if no else ''}network {fault.detail}"]

    def apply(self, lab: Attached, fault: Fault) -> None:
        _vtysh(lab, fault.ends[0].node, *self._commands(lab, fault, no=True))

    def revert(self, lab: Attached, fault: Fault) -> None:
        _vtysh(lab, fault.ends[0].node, *self._commands(lab, fault, no=False))

    def draw(self, fabric: Fabric, rng) -> tuple[str, str]:
        link = rng.choice([lk for lk in fabric.links if lk.kind == "host"])
        return str(link.b), ""

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return (f"bgp-withdraw {fault.target}: {fault.detail} no longer announced; "
                "links up")


@register
class BgpRouteMap(BgpFault):
    name = "bgp-route-map"
    help = ("BGP's own: a route-map mistake. An outbound route-map that denies everything\n"
            "on NODE:IF's session: it stays Established and carries no route.")

    def _commands(self, lab: Attached, fault: Fault, on: bool) -> list[str]:
        end = fault.ends[0]
        asn = lab.plan[end.node].bgp.asn
        head = ["configure terminal"]
        if on:
            head += [f"route-map {ROUTE_MAP} deny 10", "exit"]
        return head + [f"router bgp {asn}", "address-family ipv6 unicast",
                       f"{'' if on else 'no '}neighbor {end.ifname} route-map {ROUTE_MAP} out"]

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        _vtysh(lab, end.node, *self._commands(lab, fault, on=True))
        _vtysh(lab, end.node, f"clear bgp {end.ifname} soft out")

    def revert(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        _vtysh(lab, end.node, *self._commands(lab, fault, on=False))
        _vtysh(lab, end.node, f"clear bgp {end.ifname} soft out")

    def said(self, lab: Attached, fault: Fault, values: dict) -> str:
        return (f"bgp-route-map {fault.target}: every route denied out of the session "
                f"(route-map {ROUTE_MAP}); the session stays up")
