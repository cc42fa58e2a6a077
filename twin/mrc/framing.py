"""How an endpoint's packets find their way across the fabric: its framing, read from
endpoint.json (twin.fabric.render.endpoint_config) and checked against the fabric.

    srv6          routing: static-srv6 (endpoint.json has no `framing` key: the default)
                  IPv6(NIC -> the EV's uSID path) / IPv6(NIC -> peer NIC) / UDP / RoCE.
                  The EV *chooses* the path: plane and T1 are a formula's inputs
                  (twin.fabric.paths), and the sender knows every packet's switches.
    udp-entropy   routing: bgp ("MRC over ECMP", docs/bgp-baseline.md)
                  IPv6(my port-p address -> the peer's port-p address) / UDP / RoCE, where
                  p is the EV's plane (twin.mrc.wire.frame_ecmp). No SRv6, no decap: the
                  routers forward plain IPv6 by ECMP with the kernel's L4 hash. The plane
                  is still chosen (each plane is its own routing domain, reached by its
                  own /52 out of its own port); the T1 is not: the EV only *hashes* to
                  one, through its UDP source port (wire.udp_sport_ecmp). The EV -> path
                  map is then the fabric's hash, unknown to the sender: the ECMP world.

A port address is a formula (twin.fabric.bgp.host_link): host h's port in plane p is
`<bgp.link_prefix>:<p 3 hh>::2` on eth<p+1>, so endpoint.json carries the endpoint's own
port addresses (what it binds to, checked against the formula) and the spec, whose
`bgp.link_prefix` gives every peer's. Keys, in udp-entropy framing:

    "framing": "udp-entropy"
    "port_addresses": {"<plane>": "<this host's port address in that plane>", ...}

A config that mixes the two (udp-entropy on a static-srv6 spec, srv6 on a bgp spec, port
addresses without udp-entropy) is refused with its key and a hint.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from twin.errors import UsageError
from twin.fabric import bgp
from twin.fabric.model import Fabric
from twin.fabric.plan import nic_address
from twin.fabric.routing import BGP, STATIC_SRV6

SRV6, UDP_ENTROPY = "srv6", "udp-entropy"
FRAMINGS = (SRV6, UDP_ENTROPY)
FRAMING_OF_ROUTING = {STATIC_SRV6: SRV6, BGP: UDP_ENTROPY}  # the one framing each fabric carries
SOURCE = "endpoint.json"


@dataclass(frozen=True)
class Framing:
    """An endpoint's framing and, in udp-entropy, every host's port addresses (computed
    once from the formula: 8 planes x 256 hosts is 2048 addresses)."""

    name: str  # SRV6 | UDP_ENTROPY
    own: dict[int, str] = field(default_factory=dict)  # plane -> my port address
    _address: dict[tuple[str, int], str] = field(default_factory=dict)  # (host, plane) ->
    hosts: dict[str, str] = field(default_factory=dict)  # any address of a host -> its name

    @property
    def ecmp(self) -> bool:
        """UDP-entropy framing: one IPv6 header, the T1 left to the fabric's hash."""
        return self.name == UDP_ENTROPY

    def address(self, host: str, plane: int) -> str:
        """A host's port address in a plane (udp-entropy)."""
        return self._address[host, plane]


def port_addresses(fabric: Fabric, host: str) -> dict[int, str]:
    """A host's port address per plane, by the formula (twin.fabric.bgp.host_link)."""
    return {p: bgp.host_link(fabric, host, p).host_address for p in fabric.nic_planes}


def _hint(routing: str) -> str:
    return (f"a routing: {routing} fabric carries framing {FRAMING_OF_ROUTING[routing]}; "
            "render the host's endpoint.json again (twin up) rather than editing it")


def parse(config: dict, fabric: Fabric, host: str) -> Framing:
    """The framing endpoint.json asks for, checked against the fabric its spec describes;
    UsageError (the key, the problem, a hint) for anything that does not fit."""
    routing = fabric.spec.routing
    name = config.get("framing", SRV6)
    if name not in FRAMINGS:
        raise UsageError(f"{SOURCE}: framing: {name!r} is not one of {', '.join(FRAMINGS)}")
    if name != FRAMING_OF_ROUTING[routing]:
        why = ("its fabric forwards only uSID paths" if routing == STATIC_SRV6
               else "its fabric has no SRv6 and no decap")
        raise UsageError(f"{SOURCE}: framing: {name} on a routing: {routing} fabric "
                         f"({why}); hint: {_hint(routing)}")
    given = config.get("port_addresses")
    hosts = {str(nic_address(fabric, h)): h.name for h in fabric.hosts}
    if name == SRV6:
        if given is not None:
            raise UsageError(f"{SOURCE}: port_addresses: only with framing: {UDP_ENTROPY} "
                             f"(this is {SRV6}: packets go NIC to NIC); hint: "
                             f"{_hint(routing)}")
        return Framing(SRV6, hosts=hosts)
    if not isinstance(given, dict):
        raise UsageError(f"{SOURCE}: port_addresses: missing or not a mapping (framing: "
                         f"{UDP_ENTROPY} binds to each port's address); hint: {_hint(routing)}")
    want = port_addresses(fabric, host)
    own: dict[int, str] = {}
    for key, addr in given.items():
        if not (isinstance(key, str) and key.isdigit() and int(key) in want):
            raise UsageError(f"{SOURCE}: port_addresses.{key}: not a plane of this NIC "
                             f"({', '.join(map(str, want))}); hint: {_hint(routing)}")
        try:
            same = ipaddress.IPv6Address(addr) == ipaddress.IPv6Address(want[int(key)])
        except (ValueError, TypeError):
            same = False
        if not same:
            raise UsageError(f"{SOURCE}: port_addresses.{key}: {str(addr)[:48]!r} is not "
                             f"{host}'s port address in plane {key} ({want[int(key)]}, from "
                             f"bgp.link_prefix); hint: {_hint(routing)}")
        own[int(key)] = want[int(key)]
    if missing := sorted(set(want) - set(own)):
        raise UsageError(f"{SOURCE}: port_addresses: no address for plane "
                         f"{', '.join(map(str, missing))}; hint: {_hint(routing)}")
    address = {}
    for h in fabric.hosts:
        for p, a in port_addresses(fabric, h.name).items():
            address[h.name, p] = a
            hosts[a] = h.name
    return Framing(UDP_ENTROPY, own, address, hosts)
