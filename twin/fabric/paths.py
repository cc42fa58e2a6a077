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
import socket
from collections.abc import Callable, Iterator
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

    @property
    def program(self) -> int:
        """The uSID program as an integer (what a walk through tables compares)."""
        return int.from_bytes(socket.inet_pton(socket.AF_INET6, self.address), "big")


class _Memo(dict):
    """A dict that makes a missing value from its key, once (`make(*key)`)."""

    def __init__(self, make: Callable):
        super().__init__()
        self.make = make

    def __missing__(self, key: tuple):
        value = self[key] = self.make(*key)
        return value


class _Parts:
    """The parts of one fabric's paths (switch names, link ids, uSIDs), each found once and
    kept: the verify matrix of a large fabric is half a million paths, and each would
    otherwise look up its four links and format its address through `ipaddress`."""

    def __init__(self, fabric: Fabric):
        f = fabric
        self.fabric = f
        self.planes = f.nic_planes
        self.t1s = f.spec.t1_per_plane
        self.block = int(f.spec.block.network_address)
        # (plane, rack) -> the rack's T0: its name and uSID value
        self.t0 = _Memo(lambda plane, rack: (f.t0_name(plane, rack),
                                             usid.t0(plane, rack).value))
        # (plane, spine) -> T1 number `spine`: its name and uSID value
        self.t1 = _Memo(lambda plane, spine: (f.t1_name(plane, spine),
                                              usid.t1(plane, spine).value))
        # (host name, host index, plane) -> the host's port: its link's id and uSID value
        self.port = _Memo(lambda host, index, plane: (
            f.link_at(Endpoint(host, f.host_port(plane))).id, usid.port(plane, index).value))
        # (plane, rack, spine) -> the id of the link from the rack's T0 to T1 `spine`
        self.uplink = _Memo(lambda plane, rack, spine: f.link_at(
            Endpoint(f.t0_name(plane, rack), f.t0_uplink(spine))).id)

    def route(self, src: Node, dst: Node, plane: int, t1: int | None) -> Path:
        if plane not in self.planes:
            raise ValueError(f"plane {plane} is not shared by {src.name} and {dst.name}")
        if t1 is not None and not 0 <= t1 < self.t1s:
            raise ValueError(f"T1 number {t1} outside 0..{self.t1s - 1}")
        t0a, sid_t0a = self.t0[plane, src.rack]
        src_link = self.port[src.name, src.index, plane][0]
        dst_link, sid_port = self.port[dst.name, dst.index, plane]
        loop = src.name == dst.name
        if t1 is None:
            if src.rack != dst.rack:
                raise ValueError(f"{src.name} and {dst.name} are in different racks: name a T1")
            sids: tuple[int, ...] = (sid_t0a, sid_port)
            hops: tuple[str, ...] = (t0a,)
            links: tuple[str, ...] = (src_link, dst_link)
            kind = "loop-t0" if loop else "same-rack"
        else:
            (t1_name, sid_t1), (t0b, sid_t0b) = self.t1[plane, t1], self.t0[plane, dst.rack]
            sids = (sid_t0a, sid_t1, sid_t0b, sid_port)
            hops = (t0a, t1_name, t0b)
            links = (src_link, self.uplink[plane, src.rack, t1],
                     self.uplink[plane, dst.rack, t1], dst_link)
            kind = "loop-t1" if loop else ("same-rack" if src.rack == dst.rack
                                           else "cross-rack")
        return Path(kind, src.name, dst.name, plane, t1,
                    _text(usid.program_value(self.block, sids)), hops, links)


def _text(address: int) -> str:
    """An IPv6 address's text as `str(ipaddress.IPv6Address(address))` writes it (RFC 5952),
    ten times faster: the C library's inet_ntop writes the same for every address whose
    first hextet is not 0, as a uSID program's (its block is in fc00::/7) never is; the
    others it may write IPv4-style, so ipaddress writes those."""
    if address >> 112 == 0:
        return str(ipaddress.IPv6Address(address))
    return socket.inet_ntop(socket.AF_INET6, address.to_bytes(16, "big"))


def route(fabric: Fabric, src: Node, dst: Node, plane: int, t1: int | None) -> Path:
    """The path from src to dst in one plane, through T1 number t1 (None: T0 only)."""
    return _Parts(fabric).route(src, dst, plane, t1)


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
    return list(_host_pairs(_Parts(fabric)))


def loopback_paths(fabric: Fabric) -> list[Path]:
    """From every host port: bounce off its T0, and off each T1 of the plane."""
    return list(_loopbacks(_Parts(fabric)))


def every_path(fabric: Fabric) -> Iterator[Path]:
    """What exhaustive verify probes, in its order: loopback_paths, then host_pairs_paths,
    made one at a time (a large fabric has half a million; `twin routes check` walks
    them all)."""
    parts = _Parts(fabric)
    yield from _loopbacks(parts)
    yield from _host_pairs(parts)


def _host_pairs(parts: _Parts) -> Iterator[Path]:
    hosts = parts.fabric.hosts
    for src in hosts:
        for dst in hosts:
            if src is dst:
                continue
            for plane in parts.planes:
                if src.rack == dst.rack:
                    yield parts.route(src, dst, plane, None)
                else:
                    for t in range(parts.t1s):
                        yield parts.route(src, dst, plane, t)


def _loopbacks(parts: _Parts) -> Iterator[Path]:
    for host in parts.fabric.hosts:
        for plane in parts.planes:
            yield parts.route(host, host, plane, None)
            for t in range(parts.t1s):
                yield parts.route(host, host, plane, t)


def reverse(fabric: Fabric, path: Path) -> Path:
    """The path back, on the same plane and T1 (how a reply returns)."""
    return route(fabric, fabric.node(path.dst), fabric.node(path.src), path.plane, path.t1)
