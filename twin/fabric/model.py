"""The fabric model: nodes, ports and links derived from a spec (pure data).

Naming (every name is stable, short and tells where a thing sits):

    t0-p<plane>-r<rack>     T0 (leaf) switch of one rack in one plane
    t1-p<plane>-<n>         T1 (spine) switch n of one plane
    r<rack>h<slot>          a GPU host (one NIC) in a rack

Interfaces follow containerlab's convention for `kind: linux` nodes,
`eth1`, `eth2`, ... (`eth0` is left for a management network that twin
never creates):

    host r<r>h<s>     eth<p+1>                        -> plane p's T0 of rack r
    T0 t0-p<p>-r<r>   eth1 .. eth<H>                  -> hosts by slot (downlinks)
                      eth<H+1> .. eth<H+T>            -> T1s by number (uplinks)
    T1 t1-p<p>-<n>    eth1 .. eth<R>                  -> T0s by rack

where H is hosts_per_rack, T is t1_per_plane and R is racks. So T0 uplink
number n goes to T1 number n: the "T0-uplink number" of the EV formula is the
T1 index.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from twin.fabric import usid
from twin.fabric.spec import FabricSpec


class Tier(StrEnum):
    HOST = "host"
    T0 = "t0"
    T1 = "t1"


@dataclass(frozen=True)
class Node:
    name: str
    tier: Tier
    plane: int | None  # None for hosts: a host is in every plane it has a port on
    rack: int | None  # None for T1s
    index: int  # T0: rack, T1: spine number, host: host number (rack * H + slot)

    @property
    def is_switch(self) -> bool:
        return self.tier is not Tier.HOST


@dataclass(frozen=True, order=True)
class Endpoint:
    node: str
    ifname: str

    def __str__(self) -> str:
        return f"{self.node}:{self.ifname}"


@dataclass(frozen=True)
class Link:
    """A point-to-point link. `a` is the lower tier (host or T0) end."""

    a: Endpoint
    b: Endpoint
    kind: str  # "host" (NIC port to T0) or "fabric" (T0 to T1)
    plane: int
    mtu: int
    rate_bps: int | None

    @property
    def id(self) -> str:
        return f"{self.a}--{self.b}"

    def end(self, node: str) -> Endpoint:
        return self.a if self.a.node == node else self.b

    def peer(self, node: str) -> Endpoint:
        return self.b if self.a.node == node else self.a


@dataclass(frozen=True)
class Fabric:
    spec: FabricSpec
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def _by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def _by_endpoint(self) -> dict[Endpoint, Link]:
        index = {}
        for link in self.links:
            index[link.a] = link
            index[link.b] = link
        return index

    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node {name!r} in lab {self.name}") from None

    def has_node(self, name: str) -> bool:
        return name in self._by_name

    def link_at(self, ep: Endpoint) -> Link:
        try:
            return self._by_endpoint[ep]
        except KeyError:
            raise KeyError(f"no link at {ep} in lab {self.name}") from None

    def links_of(self, node: str) -> list[Link]:
        return [lk for lk in self.links if node in (lk.a.node, lk.b.node)]

    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes if n.tier is Tier.HOST]

    @property
    def switches(self) -> list[Node]:
        return [n for n in self.nodes if n.is_switch]

    @property
    def nic_planes(self) -> range:
        """The planes every host's NIC has ports on (the first nic_ports planes)."""
        return range(self.spec.nic_ports)

    # -- names and interface numbers, the single source of both -------------

    @staticmethod
    def t0_name(plane: int, rack: int) -> str:
        return f"t0-p{plane}-r{rack}"

    @staticmethod
    def t1_name(plane: int, spine: int) -> str:
        return f"t1-p{plane}-{spine}"

    @staticmethod
    def host_name(rack: int, slot: int) -> str:
        return f"r{rack}h{slot}"

    def host_at(self, index: int) -> Node:
        h = self.spec.hosts_per_rack
        return self.node(self.host_name(index // h, index % h))

    def host_port(self, plane: int) -> str:
        return f"eth{plane + 1}"

    def t0_downlink(self, slot: int) -> str:
        return f"eth{slot + 1}"

    def t0_uplink(self, spine: int) -> str:
        return f"eth{self.spec.hosts_per_rack + spine + 1}"

    def t1_downlink(self, rack: int) -> str:
        return f"eth{rack + 1}"

    # -- uSIDs -----------------------------------------------------------------

    def sid(self, node: Node, plane: int | None = None) -> usid.USid:
        """The uSID of a switch, or of a host's port in `plane`."""
        if node.tier is Tier.T0:
            return usid.t0(node.plane, node.index)
        if node.tier is Tier.T1:
            return usid.t1(node.plane, node.index)
        if plane is None:
            raise ValueError(f"host {node.name} has one uSID per plane; name the plane")
        return usid.port(plane, node.index)


def build_fabric(spec: FabricSpec) -> Fabric:
    """Expand a spec into every node and link. Order is fixed: T0s, T1s, hosts."""
    F = Fabric  # the naming helpers are static
    nodes: list[Node] = []
    for p in range(spec.planes):
        for r in range(spec.racks):
            nodes.append(Node(F.t0_name(p, r), Tier.T0, p, r, r))
    for p in range(spec.planes):
        for t in range(spec.t1_per_plane):
            nodes.append(Node(F.t1_name(p, t), Tier.T1, p, None, t))
    for r in range(spec.racks):
        for s in range(spec.hosts_per_rack):
            nodes.append(Node(F.host_name(r, s), Tier.HOST, None, r, r * spec.hosts_per_rack + s))

    shell = Fabric(spec, tuple(nodes), ())
    links: list[Link] = []
    for r in range(spec.racks):
        for s in range(spec.hosts_per_rack):
            for p in range(spec.nic_ports):
                links.append(Link(
                    a=Endpoint(F.host_name(r, s), shell.host_port(p)),
                    b=Endpoint(F.t0_name(p, r), shell.t0_downlink(s)),
                    kind="host", plane=p, mtu=spec.mtu, rate_bps=spec.host_rate_bps))
    for p in range(spec.planes):
        for r in range(spec.racks):
            for t in range(spec.t1_per_plane):
                links.append(Link(
                    a=Endpoint(F.t0_name(p, r), shell.t0_uplink(t)),
                    b=Endpoint(F.t1_name(p, t), shell.t1_downlink(r)),
                    kind="fabric", plane=p, mtu=spec.mtu, rate_bps=spec.fabric_rate_bps))
    return Fabric(spec, tuple(nodes), tuple(links))
