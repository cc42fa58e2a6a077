"""The route plan: what every node must hold, as data (pure, golden-tested).

Static SRv6 source routing (DESIGN.md section 3). No node runs a routing
protocol; these tables are written once at install and never change:

    T0     own /48   local SID uN (F3216: shift the uSIDs 16 bits, forward)
           T1 /48    via fe80::<T1 uSID> out of the matching uplink, per T1 of its plane
           port /48  via fe80::<port uSID> out of the matching downlink, per host in its rack
    T1     own /48   local SID uN, as above
           T0 /48    via fe80::<T0 uSID> out of the matching downlink, per T0 of its plane
    host   NIC address /128 on lo (a ULA: <nic_prefix>:<rack>::<slot+1>)
           port /48  local SID decap, per port (IPv6-in-IPv6 only; the inner packet is
                     then delivered to the NIC address)
           T0 /48    via fe80::<T0 uSID> out of that plane's port

The plan says *what* a node holds, not how: static routes are the same on
every data plane, and a local SID (`LocalSid`) is installed by the lab's data
plane (twin.dataplane) as a seg6local route or as an eBPF program.

In `routing: bgp` (twin.fabric.bgp) the same model gets another plan: no static
route and no SID on a switch (FRR's bgpd learns every route; `NodePlan.bgp` says
what it must hold), host links numbered from `bgp.link_prefix`, and on a host one
route per plane to that plane's host links via its T0.

On a shaped fabric (twin.fabric.congestion) every shaped switch port also has a
virtual queue (`PortQueue`: ECN marks, trimming, a hard limit), marking CE
everywhere but on a T0's host-facing ports (unless `congestion.ecn.last_hop`),
and every host decapsulates by RFC 6040's rules (`signals`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass, field

from twin.fabric import bgp, usid
from twin.fabric.congestion import PortQueue, port_queue
from twin.fabric.model import Fabric, Node, Tier
from twin.fabric.routing import STATIC_SRV6

PROTO = "static"  # every planned route is installed with this protocol
UNICAST = "unicast"
DROPPING = ("blackhole", "unreachable", "prohibit")  # route types that drop (no device)


@dataclass(frozen=True, order=True)
class Route:
    """One static IPv6 route, in the terms `ip -j -6 route show` reads it back in.

    The plan only makes unicast routes; an operator's tables (twin.routes) may hold
    the types that drop, which have no device and no next hop."""

    dst: str
    dev: str
    via: str | None = None
    note: str = field(default="", compare=False)
    type: str = UNICAST

    def iproute2(self) -> str:
        """The `ip -6` batch line that installs this route (idempotent: replace)."""
        if self.type != UNICAST:
            return f"route replace {self.type} {self.dst} proto {PROTO}"
        via = f" via {self.via}" if self.via else ""
        return f"route replace {self.dst}{via} dev {self.dev} proto {PROTO}"

    def describe(self) -> str:
        if self.type != UNICAST:
            return f"{self.type} {self.dst}"
        return f"{self.dst} via {self.via} dev {self.dev}" if self.via else \
            f"{self.dst} dev {self.dev}"


UN, DECAP = "uN", "decap"  # the two local SID behaviours the fabric needs


@dataclass(frozen=True, order=True)
class LocalSid:
    """A SID the node itself acts on (RFC 8986 terms, F3216 uSIDs).

    uN     a switch's own /48, on whichever port a packet arrives: shift the uSIDs
           after the block left by `usid_len` bits and forward on the new
           destination (`dev` is "": every port)
    decap  a host port's /48 (`dev` is the port): remove the outer IPv6 header of an
           IPv6-in-IPv6 packet and deliver the inner one (End.DT6 in the local table)
    """

    prefix: str
    behavior: str  # UN | DECAP
    dev: str = ""
    block_len: int = 32
    usid_len: int = 16
    note: str = field(default="", compare=False)

    def describe(self) -> str:
        where = f" dev {self.dev}" if self.dev else ""
        return f"{self.prefix} {self.behavior} (F{self.block_len}{self.usid_len}){where}"


@dataclass(frozen=True)
class Interface:
    name: str
    peer: str  # "node:ifname" at the other end; "" for the anchor
    mtu: int
    addresses: tuple[str, ...]  # with prefix length
    rate_bps: int | None = None


@dataclass(frozen=True)
class NodePlan:
    name: str
    tier: str
    sid: str  # the node's own uSID (switches) or "" (hosts)
    loopback: tuple[str, ...]  # addresses on lo
    interfaces: tuple[Interface, ...]
    node_sysctls: tuple[tuple[str, str], ...]  # set when the node is created
    routes: tuple[Route, ...]  # static routes
    sids: tuple[LocalSid, ...]  # what the data plane installs
    queues: tuple[PortQueue, ...] = ()  # a switch's shaped ports' virtual queues
    signals: bool = False  # a host on a fabric with queues: RFC 6040 at decap
    routing: str = STATIC_SRV6  # the fabric's routing mode (twin.fabric.routing)
    bgp: bgp.RouterBgp | None = None  # routing: bgp, a router: what its FRR must hold

    def interface_sysctls(self) -> list[tuple[str, str]]:
        """Per-interface settings, applied once the links are wired."""
        out = []
        for ifc in self.interfaces:
            if self.routing == STATIC_SRV6:
                out.append((f"net.ipv6.conf.{ifc.name}.seg6_enabled", "1"))
            out.append((f"net.ipv6.conf.{ifc.name}.disable_ipv6", "0"))
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        if self.routing == STATIC_SRV6:  # a static lab's node.json keeps its bytes
            del d["routing"], d["bgp"]
        return d


@dataclass(frozen=True)
class Plan:
    fabric: Fabric
    nodes: dict[str, NodePlan]

    def __getitem__(self, name: str) -> NodePlan:
        return self.nodes[name]

    def nic_address(self, host: str) -> str:
        return self.nodes[host].loopback[0].split("/")[0]


def nic_address(fabric: Fabric, host: Node) -> ipaddress.IPv6Address:
    """The host's inner NIC address: <nic_prefix>:<rack>::<slot + 1>."""
    slot = host.index - host.rack * fabric.spec.hosts_per_rack
    base = int(fabric.spec.nic_prefix.network_address)
    return ipaddress.IPv6Address(base | (host.rack << 64) | (slot + 1))


def _sysctls(forwarding: bool) -> tuple[tuple[str, str], ...]:
    fwd = "1" if forwarding else "0"
    return (
        ("net.ipv6.conf.all.disable_ipv6", "0"),
        ("net.ipv6.conf.default.disable_ipv6", "0"),
        ("net.ipv6.conf.all.forwarding", fwd),
        ("net.ipv6.conf.all.seg6_enabled", "1"),
        ("net.ipv6.conf.default.seg6_enabled", "1"),
        # Only the planned fe80::<uSID> link-locals: no random EUI-64 ones, no DAD wait.
        ("net.ipv6.conf.default.addr_gen_mode", "1"),
        ("net.ipv6.conf.all.accept_dad", "0"),
        ("net.ipv6.conf.default.accept_dad", "0"),
        ("net.ipv6.conf.all.accept_ra", "0"),
        ("net.ipv6.conf.default.accept_ra", "0"),
    )


def _ordered(routes: list[Route]) -> tuple[Route, ...]:
    return tuple(sorted(routes, key=lambda r: (ipaddress.IPv6Network(r.dst), r.dev)))


def plan_lines(node: NodePlan) -> list[tuple[str, str]]:
    """(what, note) for every route and local SID of a node, in address order:
    how `twin plan` shows a node."""
    items = [(ipaddress.IPv6Network(r.dst), r.describe(), r.note) for r in node.routes]
    items += [(ipaddress.IPv6Network(s.prefix), s.describe(), s.note) for s in node.sids]
    return bgp_lines(node) + [(what, note) for _, what, note in sorted(items)]


def bgp_lines(node: NodePlan) -> list[tuple[str, str]]:
    """(what, note) for a BGP router: its AS, sessions, announcements and the ECMP it
    must learn; nothing for any other node."""
    b = node.bgp
    if b is None:
        return []
    out = [(f"router bgp {b.asn} router-id {b.router_id}", "eBGP unnumbered")]
    out += [(f"session {s.ifname} to {s.peer} AS{s.peer_asn}", "expected Established")
            for s in b.sessions]
    out += [(f"announce {p}", "a host link of its rack") for p in b.announce]
    out += [(f"{e.prefix} x{e.width} via {' '.join(e.via)}", "learned by BGP")
            for e in b.expect]
    return out


def build_plan(fabric: Fabric) -> Plan:
    node_plan = _plan_node if fabric.spec.routing == STATIC_SRV6 else _plan_bgp_node
    return Plan(fabric, {n.name: node_plan(fabric, n) for n in fabric.nodes})


def _interfaces(fabric: Fabric, node: Node, own_ll) -> list[Interface]:
    out = []
    for link in fabric.links_of(node.name):
        mine, peer = link.end(node.name), link.peer(node.name)
        ll = own_ll(link)
        out.append(Interface(mine.ifname, str(peer), link.mtu, (f"{ll}/64",), link.rate_bps))
    return sorted(out, key=lambda i: int(i.name.removeprefix("eth")))


def _queues(fabric: Fabric, node: Node) -> tuple[PortQueue, ...]:
    """A switch's shaped ports' virtual queues (none unless the fabric has signals)."""
    spec = fabric.spec
    if not spec.signals:
        return ()
    out = []
    for link in fabric.links_of(node.name):
        if not link.rate_bps:
            continue
        last_hop = node.tier is Tier.T0 and link.kind == "host"
        mark = spec.congestion.last_hop or not last_hop
        out.append(port_queue(spec.congestion, link.end(node.name).ifname, link.rate_bps,
                              link.mtu, mark))
    return tuple(sorted(out, key=lambda q: q.slot))


def _uN(fabric: Fabric, sid: usid.USid) -> LocalSid:
    return LocalSid(str(usid.locator(fabric.spec.block, sid)), UN, note="uN: shift and forward")


def _towards(fabric: Fabric, sid: usid.USid, dev: str, name: str) -> Route:
    return Route(dst=str(usid.locator(fabric.spec.block, sid)), dev=dev,
                 via=usid.link_local(sid), note=f"to {name}")


def _plan_node(fabric: Fabric, node: Node) -> NodePlan:
    spec = fabric.spec
    routes: list[Route] = []
    if node.tier is Tier.T0:
        p, r = node.plane, node.rack
        own = fabric.sid(node)
        for t in range(spec.t1_per_plane):
            routes.append(_towards(fabric, usid.t1(p, t), fabric.t0_uplink(t),
                                   fabric.t1_name(p, t)))
        for s in range(spec.hosts_per_rack):
            host = fabric.node(fabric.host_name(r, s))
            if p in fabric.nic_planes:
                routes.append(_towards(fabric, usid.port(p, host.index), fabric.t0_downlink(s),
                                       f"{host.name}:{fabric.host_port(p)}"))
        ifaces = _interfaces(fabric, node, lambda _link: usid.link_local(own))
        return NodePlan(node.name, node.tier.value, str(own), (), tuple(ifaces),
                        _sysctls(True), _ordered(routes), (_uN(fabric, own),),
                        _queues(fabric, node))
    if node.tier is Tier.T1:
        own = fabric.sid(node)
        for r in range(spec.racks):
            routes.append(_towards(fabric, usid.t0(node.plane, r), fabric.t1_downlink(r),
                                   fabric.t0_name(node.plane, r)))
        ifaces = _interfaces(fabric, node, lambda _link: usid.link_local(own))
        return NodePlan(node.name, node.tier.value, str(own), (), tuple(ifaces),
                        _sysctls(True), _ordered(routes), (_uN(fabric, own),),
                        _queues(fabric, node))
    # host
    sids = []
    for p in fabric.nic_planes:
        dev = fabric.host_port(p)
        port_sid = usid.port(p, node.index)
        sids.append(LocalSid(str(usid.locator(spec.block, port_sid)), DECAP, dev,
                             note="decap to the NIC address"))
        routes.append(_towards(fabric, usid.t0(p, node.rack), dev, fabric.t0_name(p, node.rack)))
    ifaces = _interfaces(fabric, node, lambda link: usid.link_local(usid.port(link.plane,
                                                                               node.index)))
    nic = nic_address(fabric, node)
    return NodePlan(node.name, node.tier.value, "", (f"{nic}/128",), tuple(ifaces),
                    _sysctls(False), _ordered(routes), tuple(sids), signals=spec.signals)


# -- routing: bgp ---------------------------------------------------------------


def _bgp_sysctls(router: bool) -> tuple[tuple[str, str], ...]:
    """Plain IPv6 forwarding: no SRv6; on a router the kernel's L4 multipath hash, so a
    flow's UDP source port picks its ECMP next hop, and no route over a link that is
    down (zebra withdraws them too, but the kernel must not wait for it)."""
    fwd = "1" if router else "0"
    out = [
        ("net.ipv6.conf.all.disable_ipv6", "0"),
        ("net.ipv6.conf.default.disable_ipv6", "0"),
        ("net.ipv6.conf.all.forwarding", fwd),
        # Only the planned link-locals (fe80::<uSID>): FRR's unnumbered sessions and the
        # next hops it installs read as the plan's; no DAD wait before bgpd can bind.
        ("net.ipv6.conf.default.addr_gen_mode", "1"),
        ("net.ipv6.conf.all.accept_dad", "0"),
        ("net.ipv6.conf.default.accept_dad", "0"),
        # Routes come from FRR (routers) or the plan (hosts), never from an RA: zebra
        # sends and reads RAs itself for the unnumbered sessions, the kernel ignores them.
        ("net.ipv6.conf.all.accept_ra", "0"),
        ("net.ipv6.conf.default.accept_ra", "0"),
    ]
    if router:
        out += [("net.ipv6.fib_multipath_hash_policy", "1"),
                ("net.ipv6.conf.all.ignore_routes_with_linkdown", "1"),
                ("net.ipv6.conf.default.ignore_routes_with_linkdown", "1")]
    return tuple(out)


def _plan_bgp_node(fabric: Fabric, node: Node) -> NodePlan:
    """A node in routing: bgp. Shaping (tbf) stays as in static mode; the eBPF queues
    (ECN, trimming) are not planned here: they read SRv6 paths (docs/bgp-baseline.md)."""
    ifaces = []
    for link in fabric.links_of(node.name):
        mine, peer = link.end(node.name), link.peer(node.name)
        if node.tier is Tier.HOST:
            own = usid.port(link.plane, node.index)
        else:
            own = fabric.sid(node)
        addresses = [f"{usid.link_local(own)}/64"]
        if link.kind == "host":
            host = mine.node if node.tier is Tier.HOST else peer.node
            hl = bgp.host_link(fabric, host, link.plane)
            end = hl.host_address if node.tier is Tier.HOST else hl.t0_address
            addresses.append(f"{end}/{bgp.LINK_LEN}")
        ifaces.append(Interface(mine.ifname, str(peer), link.mtu, tuple(addresses),
                                link.rate_bps))
    ifaces.sort(key=lambda i: int(i.name.removeprefix("eth")))
    if node.is_switch:
        return NodePlan(node.name, node.tier.value, str(fabric.sid(node)), (), tuple(ifaces),
                        _bgp_sysctls(True), (), (), routing=fabric.spec.routing,
                        bgp=bgp.router(fabric, node))
    routes = []
    for p in fabric.nic_planes:
        hl = bgp.host_link(fabric, node.name, p)
        routes.append(Route(dst=str(bgp.plane_prefix(fabric, p)), dev=hl.host_ifname,
                            via=hl.t0_address, note=f"plane {p}'s host links via {hl.t0}"))
    nic = nic_address(fabric, node)
    return NodePlan(node.name, node.tier.value, "", (f"{nic}/128",), tuple(ifaces),
                    _bgp_sysctls(False), _ordered(routes), (), routing=fabric.spec.routing)
