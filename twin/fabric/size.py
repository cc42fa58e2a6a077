"""Full-scale sizing: two-tier multi-plane vs single-plane three-tier (pure).

A switch has `radix` ports at plane speed (51.2T = 512 x 100G). A NIC is
split into `planes` ports, one per plane.

Two-tier multi-plane (per plane, a folded Clos of plane-speed ports):
    T0: radix/2 ports down to NICs, radix/2 up (one to each T1 of the plane)
    T1: radix ports down (one to each T0 of the plane)
    => radix T0s and radix/2 T1s per plane, radix * radix/2 NICs.

Single-plane three-tier (the same switch run as radix/planes ports at NIC
speed, k ports): the classic fat tree, k^3/4 NICs, k^2/2 edge + k^2/2
aggregation + k^2/4 core switches.

With radix 512 and 8 planes this gives the MRC paper's figures: 131,072
NICs against 65,536; losing a T0-T1 link costs 1/256 (0.4%), losing a NIC
port 1/8 (12.5%); the longest path crosses three switches.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction

from twin import validate as V
from twin.errors import UsageError

# `twin size --radix --planes` (twin.validate; an odd radix is refused in RADIX's words)
RADIX = V.Int(4, words=V.ONE, what="an even number of ports, at least 4")
PLANES = V.Int(1, 16, words=V.SPAN)


@dataclass(frozen=True)
class Design:
    name: str
    tiers: int
    nics: int
    switches: dict[str, int]
    max_switch_hops: int
    loss_per_uplink: Fraction  # of a leaf's uplink capacity, when one leaf uplink fails
    loss_per_nic_port: Fraction  # of a NIC's capacity, when one of its ports fails

    @property
    def total_switches(self) -> int:
        return sum(self.switches.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_switches"] = self.total_switches
        for key in ("loss_per_uplink", "loss_per_nic_port"):
            f = getattr(self, key)
            d[key] = {"fraction": f"{f.numerator}/{f.denominator}", "percent": float(f) * 100}
        return d


def two_tier_multiplane(radix: int, planes: int) -> Design:
    half = radix // 2
    return Design(
        name=f"2-tier, {planes} plane{'s' if planes > 1 else ''}",
        tiers=2,
        nics=radix * half,
        switches={"T0": planes * radix, "T1": planes * half},
        max_switch_hops=3,
        loss_per_uplink=Fraction(1, half),
        loss_per_nic_port=Fraction(1, planes),
    )


def three_tier_single_plane(radix: int, planes: int) -> Design:
    k = radix // planes
    return Design(
        name=f"3-tier, 1 plane ({k} x {planes}-lane ports)",
        tiers=3,
        nics=k**3 // 4,
        switches={"edge": k * k // 2, "aggregation": k * k // 2, "core": k * k // 4},
        max_switch_hops=5,
        loss_per_uplink=Fraction(1, k // 2),
        loss_per_nic_port=Fraction(1, 1),
    )


def compare(radix: int, planes: int) -> tuple[Design, Design]:
    if RADIX.check(radix, "--radix") % 2:
        raise RADIX.wrong(radix, "--radix", None)
    PLANES.check(planes, "--planes")
    k = radix // planes
    if radix % planes or k < 4 or k % 2:
        raise UsageError(f"--radix {radix} does not split into {planes} planes of an even "
                         f"port count of at least 4; the 3-tier comparison runs the switch "
                         f"as radix/planes ports at NIC speed")
    return two_tier_multiplane(radix, planes), three_tier_single_plane(radix, planes)
