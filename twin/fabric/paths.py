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


Brief = tuple[str, str, int, int | None, int, tuple[str, ...]]
"""A path in brief, as a walk through tables needs it: (source, destination, plane, T1
number or None, the uSID program as an integer, the nodes it names: the source, the
switches in order, the destination). `Paths.path` makes the whole `Path` of one."""


class _Memo(dict):
    """A dict that makes a missing value from its key, once (`make(*key)`)."""

    def __init__(self, make: Callable):
        super().__init__()
        self.make = make

    def __missing__(self, key: tuple):
        value = self[key] = self.make(*key)
        return value


class Paths:
    """One fabric's paths, made from parts (switch names, link ids, uSIDs) each found once
    and kept: the verify matrix of a large fabric is half a million paths, and each would
    otherwise look up its four links and format its address through `ipaddress`.

    `briefs` enumerates every path in brief (`Brief`: a plain tuple of names and
    integers, `brief`'s formula written out over tables of the parts), which is all a
    walk through tables needs; `path` makes the whole `Path` of one (its kind, address
    text and links), and `every`, `loopbacks` and `host_pairs` are the briefs made
    whole. So `twin routes check`, which walks every path and reports the few that fail,
    makes half a million tuples, and a `Path` only for each of those few."""

    def __init__(self, fabric: Fabric):
        f = fabric
        self.fabric = f
        self.planes = f.nic_planes
        self.t1s = f.spec.t1_per_plane
        self.block = int(f.spec.block.network_address)
        self.hosts = {h.name: h for h in f.hosts}
        # (plane, rack) -> the rack's T0: its name and uSID value
        self.t0 = _Memo(lambda plane, rack: (f.t0_name(plane, rack),
                                             usid.t0(plane, rack).value))
        # (plane, spine) -> T1 number `spine`: its name and uSID value
        self.t1 = _Memo(lambda plane, spine: (f.t1_name(plane, spine),
                                              usid.t1(plane, spine).value))
        # (host name, plane) -> the id of the link from the host's port to its T0
        self.port = _Memo(lambda host, plane: f.link_at(Endpoint(host, f.host_port(plane))).id)
        # (plane, rack, spine) -> the id of the link from the rack's T0 to T1 `spine`
        self.uplink = _Memo(lambda plane, rack, spine: f.link_at(
            Endpoint(f.t0_name(plane, rack), f.t0_uplink(spine))).id)

    def brief(self, src: Node, dst: Node, plane: int, t1: int | None) -> Brief:
        """The path from src to dst in one plane, through T1 number t1 (None: T0 only),
        in brief: the formula, checked."""
        if plane not in self.planes:
            raise ValueError(f"plane {plane} is not shared by {src.name} and {dst.name}")
        if t1 is not None and not 0 <= t1 < self.t1s:
            raise ValueError(f"T1 number {t1} outside 0..{self.t1s - 1}")
        t0a, sid_t0a = self.t0[plane, src.rack]
        sid_port = usid.port(plane, dst.index).value
        if t1 is None:
            if src.rack != dst.rack:
                raise ValueError(f"{src.name} and {dst.name} are in different racks: name a T1")
            return (src.name, dst.name, plane, None,
                    usid.program_value(self.block, (sid_t0a, sid_port)),
                    (src.name, t0a, dst.name))
        (t1_name, sid_t1), (t0b, sid_t0b) = self.t1[plane, t1], self.t0[plane, dst.rack]
        return (src.name, dst.name, plane, t1,
                usid.program_value(self.block, (sid_t0a, sid_t1, sid_t0b, sid_port)),
                (src.name, t0a, t1_name, t0b, dst.name))

    def path(self, brief: Brief) -> Path:
        """The whole Path of a path in brief: its kind, address text and links."""
        src, dst, plane, t1, value, nodes = brief
        a, b = self.hosts[src], self.hosts[dst]
        hops = nodes[1:-1]
        ends = (self.port[src, plane], self.port[dst, plane])
        if t1 is None:
            kind = "loop-t0" if src == dst else "same-rack"
            links = ends
        else:
            kind = "loop-t1" if src == dst else ("same-rack" if a.rack == b.rack
                                                  else "cross-rack")
            links = (ends[0], self.uplink[plane, a.rack, t1], self.uplink[plane, b.rack, t1],
                     ends[1])
        return Path(kind, src, dst, plane, t1, _text(value), hops, links)

    def route(self, src: Node, dst: Node, plane: int, t1: int | None) -> Path:
        return self.path(self.brief(src, dst, plane, t1))

    def briefs(self) -> Iterator[Brief]:
        """Every path in brief, in verify's order: the loopbacks, then the host pairs."""
        yield from self._loopbacks()
        yield from self._host_pairs()

    def every(self) -> Iterator[Path]:
        return map(self.path, self.briefs())

    def loopbacks(self) -> Iterator[Path]:
        return map(self.path, self._loopbacks())

    def host_pairs(self) -> Iterator[Path]:
        return map(self.path, self._host_pairs())

    # `brief` written out over tables of the parts, per plane (the hot loops of a large
    # fabric's half a million paths): by rack, the T0's name and its uSID placed as the
    # program's first (`head`, with the block) or third (`into`); by spine, the T1's
    # name and its uSID placed as the second (`over`); by host index, the port's uSID.

    def _tables(self):
        racks = sorted({h.rack for h in self.hosts.values()})
        head, into, over, ports = {}, {}, {}, {}
        for p in self.planes:
            head[p] = {r: (self.t0[p, r][0], self.block | self.t0[p, r][1] << 80)
                       for r in racks}
            into[p] = {r: (self.t0[p, r][0], self.t0[p, r][1] << 48) for r in racks}
            over[p] = [(self.t1[p, t][0], self.t1[p, t][1] << 64) for t in range(self.t1s)]
            ports[p] = {h.index: usid.port(p, h.index).value for h in self.hosts.values()}
        return head, into, over, ports

    def _loopbacks(self) -> Iterator[Brief]:
        head, into, over, ports = self._tables()
        for h in self.hosts.values():
            name, rack = h.name, h.rack
            for p in self.planes:
                t0, first = head[p][rack]
                port = ports[p][h.index]
                yield (name, name, p, None, first | port << 64, (name, t0, name))
                back = first | into[p][rack][1] | port << 32
                for t, (t1, second) in enumerate(over[p]):
                    yield (name, name, p, t, back | second, (name, t0, t1, t0, name))

    def _host_pairs(self) -> Iterator[Brief]:
        head, into, over, ports = self._tables()
        hosts = list(self.hosts.values())
        for src in hosts:
            s, rack = src.name, src.rack
            for dst in hosts:
                if dst is src:
                    continue
                d, same = dst.name, dst.rack == rack
                for p in self.planes:
                    t0a, first = head[p][rack]
                    port = ports[p][dst.index]
                    if same:
                        yield (s, d, p, None, first | port << 64, (s, t0a, d))
                        continue
                    t0b, third = into[p][dst.rack]
                    rest = first | third | port << 32
                    for t, (t1, second) in enumerate(over[p]):
                        yield (s, d, p, t, rest | second, (s, t0a, t1, t0b, d))


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
    return Paths(fabric).route(src, dst, plane, t1)


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
    return list(Paths(fabric).host_pairs())


def loopback_paths(fabric: Fabric) -> list[Path]:
    """From every host port: bounce off its T0, and off each T1 of the plane."""
    return list(Paths(fabric).loopbacks())


def every_path(fabric: Fabric) -> Iterator[Path]:
    """What exhaustive verify probes, in its order: loopback_paths, then host_pairs_paths,
    made one at a time (a large fabric has half a million; `twin routes check` walks
    them all, in brief: `Paths.briefs`)."""
    return Paths(fabric).every()


def reverse(fabric: Fabric, path: Path) -> Path:
    """The path back, on the same plane and T1 (how a reply returns)."""
    return route(fabric, fabric.node(path.dst), fabric.node(path.src), path.plane, path.t1)
