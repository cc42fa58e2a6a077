"""FRR configuration of a router in `routing: bgp` (pure; golden-tested).

Per router, two files under lab/build/<lab>/config/<node>/:

    frr.conf    the integrated configuration (FRR 8.4, Debian 12's): eBGP unnumbered to
                every neighbour across a T0-T1 link, IPv6 unicast only, the T0's host
                links announced, ECMP, timers, and BFD when the spec sets `bgp.bfd`
    daemons     which daemons run: zebra and bgpd, bfdd only with BFD

Every value comes from the plan (NodePlan.bgp, twin.fabric.bgp) and the spec's
BgpSpec; this module only spells them in FRR's syntax:

    frr defaults datacenter             FRR's data-centre profile; the settings the
                                        baseline depends on are also written out, so a
                                        build with other defaults behaves the same
    bgp router-id 0.<role>.<plane>.<i>  an identifier, never an address (twin.fabric.bgp)
    no bgp ebgp-requires-policy         RFC 8212's default-deny is for the Internet edge
    no bgp default ipv4-unicast         the fabric carries IPv6 only
    bgp bestpath as-path multipath-relax
                                        ECMP over paths of equal length through different
                                        ASes (RFC 7938 section 6.3)
    timers bgp K H                      keepalive and hold (seconds)
    neighbor ethN interface remote-as external
                                        unnumbered: the peer is found on the link by its
                                        link-local address (bgpd has zebra send RAs);
                                        the peer's ASN is in the plan for verify
    neighbor ethN bfd profile fabric    with BFD: one profile, transmit = receive interval
    address-family ipv6 unicast
     network P                          a T0's host links (one /64 per host port); with
                                        bgpd's import check (the default) a link that is
                                        down loses its connected route and is withdrawn
     neighbor ethN activate
     maximum-paths N                    the spec's maximum_paths
"""

from __future__ import annotations

from twin.fabric.plan import NodePlan
from twin.fabric.routing import BgpSpec

BFD_PROFILE = "fabric"


def frr_conf(lab: str, node: NodePlan, spec: BgpSpec) -> str:
    """The router's frr.conf."""
    b = node.bgp
    if b is None:
        raise ValueError(f"{node.name} runs no BGP")
    lines = [f"! {node.name} in lab {lab}: FRR configuration rendered by mrc-twin "
             "(routing: bgp, docs/bgp-baseline.md)",
             "frr defaults datacenter",
             f"hostname {node.name}",
             "service integrated-vtysh-config",
             # Routes with their next hops inline, not through kernel nexthop objects:
             # with objects, FRR 8.4 on a T0 whose uplink flapped left the kernel's
             # group 1-way while its RIB said 2-way (the kernel drops a nexthop from
             # its groups when its device goes down; zebra made the nexthop again but
             # never the group). `twin verify` reads both and named it.
             "no zebra nexthop kernel enable",
             "!"]
    if spec.bfd is not None:
        lines += ["bfd",
                  f" profile {BFD_PROFILE}",
                  f"  transmit-interval {spec.bfd.interval_ms}",
                  f"  receive-interval {spec.bfd.interval_ms}",
                  f"  detect-multiplier {spec.bfd.multiplier}",
                  " exit",
                  "exit",
                  "!"]
    lines += [f"router bgp {b.asn}",
              f" bgp router-id {b.router_id}",
              " no bgp ebgp-requires-policy",
              " no bgp default ipv4-unicast",
              " bgp bestpath as-path multipath-relax",
              f" timers bgp {spec.keepalive} {spec.hold}"]
    for s in b.sessions:
        lines += [f" neighbor {s.ifname} interface remote-as external",
                  f" neighbor {s.ifname} description {s.peer} AS{s.peer_asn}"]
        if spec.bfd is not None:
            lines.append(f" neighbor {s.ifname} bfd profile {BFD_PROFILE}")
    lines += [" !", " address-family ipv6 unicast"]
    lines += [f"  network {p}" for p in b.announce]
    lines += [f"  neighbor {s.ifname} activate" for s in b.sessions]
    lines += [f"  maximum-paths {spec.maximum_paths}",
              " exit-address-family",
              "exit",
              "!"]
    return "\n".join(lines) + "\n"


DAEMONS = ("zebra", "bgpd", "bfdd")


def daemons(lab: str, node: NodePlan, spec: BgpSpec) -> str:
    """FRR's `daemons` file: zebra and bgpd, and bfdd when BFD is on, for an FRR started
    the Debian way (frrinit.sh, as a containerlab FRR image does). twin itself starts
    the same daemons directly, their sockets in the node's run directory (twin.frr)."""
    on = {"zebra": True, "bgpd": True, "bfdd": spec.bfd is not None}
    lines = [f"# {node.name} in lab {lab}: the FRR daemons it runs (rendered by mrc-twin)"]
    lines += [f"{d}={'yes' if on[d] else 'no'}" for d in DAEMONS]
    lines += ["staticd=no",
              "vtysh_enable=yes",
              'zebra_options="  -A 127.0.0.1 -s 90000000"',
              'bgpd_options="   -A 127.0.0.1"',
              'bfdd_options="   -A 127.0.0.1"',
              "watchfrr_enable=no"]
    return "\n".join(lines) + "\n"
