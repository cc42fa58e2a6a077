"""The BGP baseline's addressing and sessions, computed from the model (pure).

In `routing: bgp` (twin.fabric.routing) the same fabric runs the world MRC replaces:
eBGP between tiers on FRR, ECMP, plain IPv6 forwarding. No SRv6 here: no uSID
program, no local SID, no decap.

Each plane is its own routing domain (its T0s and T1s only peer with each other), so
a NIC has one address per plane, on the port that plane's T0 serves. Every host link
is numbered from `bgp.link_prefix` (a /48 under fd00::/8, default fd00:4d52:4c::/48),
one /64 per link, whose subnet ID is the port's uSID (twin.fabric.usid: plane nibble,
role 3, host number), so an address says where it sits, as the uSIDs do:

    host link, plane p, host h   <link_prefix>:<p 3 hh>::/64      fd00:4d52:4c:2305::/64
       T0 end (its rack's T0)    ...::1                           plane 2, host 5
       host end (NIC port eth<p+1>)  ...::2
    plane p's host links         <link_prefix>:<p>000::/52        fd00:4d52:4c:2000::/52

The /52 of a plane holds every host link of that plane and nothing else, so a host
needs one route per plane: the plane's /52 via its T0's end of the link. T0-T1 links
have no global address: BGP runs unnumbered over the planned link-locals
(fe80::<uSID>, as in static mode: `via fe80::1201` is still "T1 1 of plane 1"), with
IPv6 next hops (RFC 2545; RFC 5549's extended next hop is only needed for IPv4).

Sessions: every T0-T1 link carries one eBGP session (`neighbor ethN interface
remote-as external`); hosts run no BGP. Each T0 announces its rack's host links of its
plane (`network` statements: one /64 per host port; a port whose link is down loses
its connected route, and BGP withdraws it). A T0 then reaches a remote rack's host
link through every T1 of its plane: the ECMP width is min(t1_per_plane,
maximum_paths), and the kernel picks a T1 per flow by its L4 hash
(net.ipv6.fib_multipath_hash_policy=1: addresses, ports, next header), so an MRC
endpoint in "UDP entropy" mode picks the plane with the source and destination port
addresses and the T1 with the UDP source port.

Router IDs are identifiers, never addresses: a BGP router ID must be a nonzero 32-bit
value that FRR does not refuse (bgpd rejects 0.0.0.0 and classes D and E,
224.0.0.0/3), and the twin never sends to IPv4 (DESIGN.md section 6). So they come
from 0.0.0.0/8, "this network" (RFC 1122, RFC 6890: never a destination; Linux drops
packets to it as martians), with the uSID's nibbles in its bytes:
0.<role>.<plane>.<index>: t0-p2-r1 is 0.1.2.1, t1-p3-0 is 0.2.3.0. The role byte is
never 0, so no ID is 0.0.0.0.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from twin.fabric import usid
from twin.fabric.model import Fabric, Node, Tier
from twin.fabric.routing import BgpSpec

LINK_LEN = 64  # one /64 per host link
PLANE_LEN = 52  # a plane's host links: the plane nibble of the subnet ID
T0_END, HOST_END = 1, 2  # interface IDs on a host link


@dataclass(frozen=True)
class HostLink:
    """One NIC port's link in the BGP fabric: its /64 and both ends' addresses."""

    host: str
    plane: int
    prefix: str  # the /64
    host_address: str  # the NIC port's address (no length)
    host_ifname: str
    t0: str
    t0_address: str  # the T0's end: the host's next hop into its plane
    t0_ifname: str


@dataclass(frozen=True, order=True)
class Session:
    """One expected eBGP session, as the node sees it: `show bgp summary json` names
    an unnumbered peer by its interface."""

    ifname: str
    peer: str  # the node at the other end
    peer_asn: int


@dataclass(frozen=True, order=True)
class Expected:
    """A prefix the node learns by BGP, and the ECMP it must install for it: `width`
    next hops, each out of one of `via` (every candidate port; when maximum_paths is
    below the number of candidates, any `width` of them)."""

    prefix: str
    width: int
    via: tuple[str, ...]  # interfaces


@dataclass(frozen=True)
class RouterBgp:
    """What a router's FRR must hold, and what bring-up and verify compare against."""

    asn: int
    router_id: str
    sessions: tuple[Session, ...]
    announce: tuple[str, ...]  # prefixes this router originates (T0: its host links)
    expect: tuple[Expected, ...]  # every prefix learned by BGP, with its ECMP


def settings(fabric: Fabric) -> BgpSpec:
    if fabric.spec.bgp is None:
        raise ValueError(f"lab {fabric.name} does not run BGP (routing: {fabric.spec.routing})")
    return fabric.spec.bgp


def link_prefix(fabric: Fabric, plane: int, host: int) -> ipaddress.IPv6Network:
    """The /64 of a host link: the port's uSID as the subnet ID."""
    base = int(settings(fabric).link_prefix.network_address)
    return ipaddress.IPv6Network((base | (usid.port(plane, host).value << 64), LINK_LEN))


def plane_prefix(fabric: Fabric, plane: int) -> ipaddress.IPv6Network:
    """Every host link of a plane, and nothing else: the host's one route per plane."""
    base = int(settings(fabric).link_prefix.network_address)
    return ipaddress.IPv6Network((base | (plane << 76), PLANE_LEN))


def host_link(fabric: Fabric, host: str, plane: int) -> HostLink:
    """A host's port in `plane`: its address and its T0's (the function the endpoint and
    the runtime use to address a NIC port in BGP mode)."""
    node = fabric.node(host)
    if node.tier is not Tier.HOST:
        raise ValueError(f"{host} is not a host")
    if plane not in fabric.nic_planes:
        raise ValueError(f"{host} has no port in plane {plane} (nic_ports: "
                         f"{fabric.spec.nic_ports})")
    net = link_prefix(fabric, plane, node.index)
    slot = node.index - node.rack * fabric.spec.hosts_per_rack
    return HostLink(host=host, plane=plane, prefix=str(net),
                    host_address=str(net.network_address + HOST_END),
                    host_ifname=fabric.host_port(plane),
                    t0=fabric.t0_name(plane, node.rack),
                    t0_address=str(net.network_address + T0_END),
                    t0_ifname=fabric.t0_downlink(slot))


def asn(fabric: Fabric, node: Node) -> int:
    s = settings(fabric)
    if node.tier is Tier.T0:
        return s.t0_asn(node.plane, node.rack)
    if node.tier is Tier.T1:
        return s.t1_asn(node.plane)
    raise ValueError(f"host {node.name} runs no BGP")


def router_id(fabric: Fabric, node: Node) -> str:
    """0.<role>.<plane>.<index>: an identifier in 0.0.0.0/8, never an address."""
    sid = fabric.sid(node)
    return f"0.{int(sid.role)}.{sid.plane}.{sid.index}"


def ecmp_width(fabric: Fabric) -> int:
    """How many next hops a T0 installs toward another rack's host link."""
    return min(fabric.spec.t1_per_plane, settings(fabric).maximum_paths)


def rack_links(fabric: Fabric, plane: int, rack: int) -> list[HostLink]:
    if plane not in fabric.nic_planes:
        return []
    return [host_link(fabric, fabric.host_name(rack, s), plane)
            for s in range(fabric.spec.hosts_per_rack)]


def router(fabric: Fabric, node: Node) -> RouterBgp:
    """A router's sessions, announcements and expected routes."""
    spec = fabric.spec
    sessions = []
    for link in fabric.links_of(node.name):
        if link.kind != "fabric":
            continue
        peer = link.peer(node.name)
        sessions.append(Session(link.end(node.name).ifname, peer.node,
                                asn(fabric, fabric.node(peer.node))))
    expect = []
    announce: list[str] = []
    if node.tier is Tier.T0:
        announce = [hl.prefix for hl in rack_links(fabric, node.plane, node.rack)]
        uplinks = tuple(fabric.t0_uplink(t) for t in range(spec.t1_per_plane))
        for r in range(spec.racks):
            if r != node.rack:
                expect += [Expected(hl.prefix, ecmp_width(fabric), uplinks)
                           for hl in rack_links(fabric, node.plane, r)]
    else:  # a T1 reaches each rack through that rack's T0 only
        for r in range(spec.racks):
            expect += [Expected(hl.prefix, 1, (fabric.t1_downlink(r),))
                       for hl in rack_links(fabric, node.plane, r)]
    key = lambda p: ipaddress.IPv6Network(p)  # noqa: E731
    return RouterBgp(asn=asn(fabric, node), router_id=router_id(fabric, node),
                     sessions=tuple(sorted(sessions, key=lambda s: int(s.ifname[3:]))),
                     announce=tuple(sorted(announce, key=key)),
                     expect=tuple(sorted(expect, key=lambda e: key(e.prefix))))
