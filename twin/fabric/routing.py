"""Routing modes, and the typed `bgp:` section of a spec (pure data, no imports of twin).

    static-srv6   MRC's fabric (the default): static routes and local SIDs written at
                  install and never changed; the endpoint source-routes every packet
                  (twin.fabric.plan, DESIGN.md sections 1 and 3)
    bgp           the fabric MRC replaces, as a baseline beside it: eBGP unnumbered
                  between tiers on FRR (RFC 7938), ECMP with the kernel's L4 hash, plain
                  IPv6 forwarding (twin.fabric.bgp, twin.fabric.frr, docs/bgp-baseline.md)

twin.fabric.spec validates a `bgp:` section into a `BgpSpec` with every default
resolved; nothing downstream picks a default of its own.

ASNs (RFC 7938 section 5.2.1, private 4-byte ASNs of RFC 6996): one per T0, one per
plane's T1 layer (the T1s of a plane share it, so a T0's route that came back down
through another T1 of the plane is refused by the AS-path loop check: no valley paths):

    T0 t0-p<p>-r<r>   t0_base + 1000 x p + r     t0-p2-r1 -> 4200102001
    T1 layer of p     t1_base + p                plane 3  -> 4200000003

The stride of 1000 keeps the plane and the rack readable in decimal (racks are at most
256). Planes are independent routing domains; their ASNs differ only to be readable.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

STATIC_SRV6 = "static-srv6"
BGP = "bgp"
ROUTING_MODES = (STATIC_SRV6, BGP)

ASN_PLANE_STRIDE = 1000  # T0 ASN = t0_base + stride x plane + rack
DEFAULT_T0_BASE = 4200100000
DEFAULT_T1_BASE = 4200000000
MAX_PATHS = 64  # FRR's MULTIPATH_NUM default: `maximum-paths (1-64)`
DEFAULT_LINK_PREFIX = "fd00:4d52:4c::/48"  # 4d52:4c is "MR" "L": MRC's host links

PRIVATE_ASNS = ((64512, 65534), (4200000000, 4294967294))  # RFC 6996: 2-byte, 4-byte


@dataclass(frozen=True)
class Bfd:
    """BFD on every BGP session: one FRR bfd profile (transmit = receive interval)."""

    interval_ms: int = 300  # FRR's default
    multiplier: int = 3  # FRR's default: down after 3 missed packets

    @property
    def detect_ms(self) -> int:
        return self.interval_ms * self.multiplier


@dataclass(frozen=True)
class BgpSpec:
    t0_base: int = DEFAULT_T0_BASE
    t1_base: int = DEFAULT_T1_BASE
    keepalive: int = 3  # seconds: FRR's datacenter profile (`frr defaults datacenter`)
    hold: int = 9
    bfd: Bfd | None = None  # None: no BFD (sessions die by the hold timer)
    maximum_paths: int = 1  # the spec resolves it: t1_per_plane unless told (capped at 64)
    link_prefix: ipaddress.IPv6Network = field(
        default_factory=lambda: ipaddress.IPv6Network(DEFAULT_LINK_PREFIX))

    def t0_asn(self, plane: int, rack: int) -> int:
        return self.t0_base + ASN_PLANE_STRIDE * plane + rack

    def t1_asn(self, plane: int) -> int:
        return self.t1_base + plane

    def to_dict(self) -> dict:
        """A `bgp:` mapping that the spec parser turns back into this BgpSpec."""
        d: dict = {"asn": {"t0_base": self.t0_base, "t1_base": self.t1_base},
                   "timers": {"keepalive": self.keepalive, "hold": self.hold},
                   "maximum_paths": self.maximum_paths, "link_prefix": str(self.link_prefix)}
        if self.bfd is not None:
            d["bfd"] = {"interval_ms": self.bfd.interval_ms, "multiplier": self.bfd.multiplier}
        return d
