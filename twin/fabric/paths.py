"""Entropy values (EVs) to source-routed paths, the inverse, and enumeration.

An EV is 32 bits. Its low bits choose the path; the rest is free entropy
that only spreads flows (the flow label carries the low 20 bits):

    bits  3..0   plane
    bits 11..4   T1 number, which is also the T0 uplink number
    bits 31..12  free entropy

The path for an EV is a formula over the destination (DESIGN.md section 3):

    cross-rack   block : T0(p, src rack) : T1(p, t) : T0(p, dst rack) : port(p, dst) ::
    same-rack    block : T0(p, rack) : port(p, dst) ::         (T1 bits unused)

Clustermapper-style loopback probes come back to the sender:

    loop-t0      block : T0(p, rack) : port(p, self) ::
    loop-t1      block : T0(p, rack) : T1(p, t) : T0(p, rack) : port(p, self) ::
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from twin.fabric import usid
from twin.fabric.model import Endpoint, Fabric, Node

PLANE_BITS = 4
T1_BITS = 8
ENTROPY_SHIFT = PLANE_BITS + T1_BITS


def ev_encode(plane: int, t1: int = 0, entropy: int = 0) -> int:
    if not (0 <= plane < 16 and 0 <= t1 < 256 and 0 <= entropy < 1 << 20):
        raise ValueError(f"EV fields out of range: plane={plane} t1={t1} entropy={entropy}")
    return plane | (t1 << PLANE_BITS) | (entropy << ENTROPY_SHIFT)


def ev_fields(ev: int) -> tuple[int, int, int]:
    """(plane, t1, entropy) of an EV."""
    if not 0 <= ev < 1 << 32:
        raise ValueError(f"an EV is 32 bits, got {ev}")
    return ev & 0xF, (ev >> PLANE_BITS) & 0xFF, ev >> ENTROPY_SHIFT


def flow_label(ev: int) -> int:
    return ev & 0xFFFFF


@dataclass(frozen=True)
class Path:
    kind: str  # cross-rack | same-rack | loop-t0 | loop-t1
    src: str
    dst: str
    plane: int
    t1: int | None
    address: str  # the uSID program: the outer IPv6 destination
    hops: tuple[str, ...]  # switches crossed, in order
    links: tuple[str, ...]  # link ids crossed, in order

    @property
    def ev(self) -> int:
        """The lowest EV that maps to this path (entropy 0)."""
        return ev_encode(self.plane, self.t1 or 0)

    @property
    def label(self) -> str:
        via = f" via t1-{self.t1}" if self.t1 is not None else ""
        return f"{self.src} -> {self.dst} plane {self.plane}{via} ({self.kind})"


def _host_link(fabric: Fabric, host: Node, plane: int) -> str:
    return fabric.link_at(Endpoint(host.name, fabric.host_port(plane))).id


def _fabric_link(fabric: Fabric, plane: int, rack: int, t1: int) -> str:
    return fabric.link_at(Endpoint(fabric.t0_name(plane, rack), fabric.t0_uplink(t1))).id


def route(fabric: Fabric, src: Node, dst: Node, plane: int, t1: int | None) -> Path:
    """The path from src to dst in one plane, through T1 number t1 (None: T0 only)."""
    spec = fabric.spec
    if plane not in fabric.nic_planes:
        raise ValueError(f"plane {plane} is not shared by {src.name} and {dst.name}")
    if t1 is not None and not 0 <= t1 < spec.t1_per_plane:
        raise ValueError(f"T1 number {t1} outside 0..{spec.t1_per_plane - 1}")
    t0a, t0b = usid.t0(plane, src.rack), usid.t0(plane, dst.rack)
    loop = src.name == dst.name
    if t1 is None:
        if src.rack != dst.rack:
            raise ValueError(f"{src.name} and {dst.name} are in different racks: name a T1")
        sids = [t0a, usid.port(plane, dst.index)]
        hops = (fabric.t0_name(plane, src.rack),)
        links = (_host_link(fabric, src, plane), _host_link(fabric, dst, plane))
        kind = "loop-t0" if loop else "same-rack"
    else:
        sids = [t0a, usid.t1(plane, t1), t0b, usid.port(plane, dst.index)]
        hops = (fabric.t0_name(plane, src.rack), fabric.t1_name(plane, t1),
                fabric.t0_name(plane, dst.rack))
        links = (_host_link(fabric, src, plane), _fabric_link(fabric, plane, src.rack, t1),
                 _fabric_link(fabric, plane, dst.rack, t1), _host_link(fabric, dst, plane))
        kind = "loop-t1" if loop else ("same-rack" if src.rack == dst.rack else "cross-rack")
    return Path(kind, src.name, dst.name, plane, t1, str(usid.program(spec.block, sids)),
                hops, links)


def path_for_ev(fabric: Fabric, src: Node, dst: Node, ev: int) -> Path:
    """The EV -> path formula. Same-rack pairs ignore the T1 bits."""
    plane, t1, _ = ev_fields(ev)
    return route(fabric, src, dst, plane, None if src.rack == dst.rack else t1)


def parse_path(fabric: Fabric, address: str) -> tuple[int, int | None, Node]:
    """The inverse: (plane, t1 or None, destination host) of a uSID program."""
    sids = usid.parse_program(fabric.spec.block, ipaddress.IPv6Address(address))
    roles = [s.role for s in sids]
    R = usid.Role
    if roles == [R.T0, R.PORT]:
        t1 = None
    elif roles == [R.T0, R.T1, R.T0, R.PORT]:
        t1 = sids[1].index
    else:
        raise ValueError(f"{address} is not a host-to-host uSID path ({roles})")
    if len({s.plane for s in sids}) != 1:
        raise ValueError(f"{address} changes plane mid-path")
    dst = sids[-1]
    return dst.plane, t1, fabric.host_at(dst.index)


def host_pairs_paths(fabric: Fabric) -> list[Path]:
    """Every distinct path between every ordered host pair: the verify matrix."""
    out = []
    hosts = fabric.hosts
    for src in hosts:
        for dst in hosts:
            if src is dst:
                continue
            for plane in fabric.nic_planes:
                if src.rack == dst.rack:
                    out.append(route(fabric, src, dst, plane, None))
                else:
                    for t in range(fabric.spec.t1_per_plane):
                        out.append(route(fabric, src, dst, plane, t))
    return out


def loopback_paths(fabric: Fabric) -> list[Path]:
    """From every host port: bounce off its T0, and off each T1 of the plane."""
    out = []
    for host in fabric.hosts:
        for plane in fabric.nic_planes:
            out.append(route(fabric, host, host, plane, None))
            for t in range(fabric.spec.t1_per_plane):
                out.append(route(fabric, host, host, plane, t))
    return out


def reverse(fabric: Fabric, path: Path) -> Path:
    """The path back, on the same plane and T1 (how a reply returns)."""
    return route(fabric, fabric.node(path.dst), fabric.node(path.src), path.plane, path.t1)
