"""A BGP router read back from its FRR and held to its plan (pure).

    RouterView.read(node, neighbors, routes)   `show bgp neighbors json` and
                                               `show ipv6 route json`, as FRR 8.4
                                               prints them
    problems(node, expected, view, ids)        each difference from the plan
                                               (twin.fabric.bgp.RouterBgp), one line each

A router is converged when it has no problem: every planned session Established with
the planned peer (its BGP identifier, from its OPEN, is the planned node's router ID,
so a miswired link shows as a session to the wrong switch; the hostname capability
cannot tell: namespaces share the machine's UTS hostname), every prefix the plan expects
learned by BGP with exactly its ECMP width, every next hop installed in the kernel
(FRR's `fib`) out of a planned interface, and nothing learned that the plan does not
expect (a leak, a valley path). `twin up` waits for that on every router;
`twin verify` reports it.

What FRR answers is read as hostile: a shape other than FRR's is a problem named
after the node, never a traceback, and the problems are bounded per router.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from twin.fabric.bgp import RouterBgp

ESTABLISHED = "Established"
MAX_PROBLEMS = 50  # per router: past that, one line says how many more


@dataclass(frozen=True)
class Peer:
    ifname: str
    state: str
    remote_as: int | None
    router_id: str | None  # the peer's BGP identifier, from its OPEN (None: none yet)


@dataclass(frozen=True)
class Route:
    prefix: str
    nexthops: tuple[tuple[str, str], ...]  # (address, interface), installed in the kernel
    installed: bool


@dataclass
class RouterView:
    node: str
    peers: dict[str, Peer] = field(default_factory=dict)  # by interface
    routes: dict[str, Route] = field(default_factory=dict)  # BGP's, by prefix
    unreadable: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, node: str, neighbors: object, routes: object) -> RouterView:
        view = cls(node)
        view._read_neighbors(neighbors)
        view._read_routes(routes)
        return view

    def _read_neighbors(self, neighbors: object) -> None:
        if not isinstance(neighbors, dict):
            self.unreadable.append("`show bgp neighbors json` is not an object")
            return
        for name, p in neighbors.items():
            if not isinstance(p, dict):
                self.unreadable.append(f"`show bgp neighbors json`: peer {str(name)[:40]!r} "
                                       "is not an object")
                continue
            remote = p.get("remoteAs")
            rid = p.get("remoteRouterId")
            self.peers[str(name)] = Peer(
                str(name)[:40], str(p.get("bgpState", "?"))[:40],
                remote if isinstance(remote, int) and not isinstance(remote, bool) else None,
                str(rid)[:40] if isinstance(rid, str) and rid != "0.0.0.0" else None)

    def _read_routes(self, routes: object) -> None:
        if not isinstance(routes, dict):
            self.unreadable.append("`show ipv6 route json` is not an object")
            return
        for prefix, entries in routes.items():
            if not isinstance(entries, list):
                self.unreadable.append(f"`show ipv6 route json`: {str(prefix)[:50]!r} is "
                                       "not a list")
                continue
            for e in entries:
                if not isinstance(e, dict) or e.get("protocol") != "bgp" \
                        or not e.get("selected"):
                    continue
                hops = e.get("nexthops")
                hops = hops if isinstance(hops, list) else []
                fib = tuple((str(h.get("ip", "")), str(h.get("interfaceName", "")))
                            for h in hops if isinstance(h, dict) and h.get("fib")
                            and h.get("active"))
                self.routes[str(prefix)] = Route(str(prefix), fib, bool(e.get("installed")))


def problems(node: str, expected: RouterBgp, view: RouterView,
             ids: dict[str, str]) -> list[str]:
    """Every way `view` differs from the plan; [] when the router is converged. `ids`:
    node -> its planned router ID (to name the node a session reaches)."""
    out = [f"{node}: {u}" for u in view.unreadable]
    planned = {s.ifname: s for s in expected.sessions}
    for ifname, s in planned.items():
        p = view.peers.get(ifname)
        if p is None:
            out.append(f"{node}: no BGP session on {ifname} (to {s.peer}, AS{s.peer_asn})")
            continue
        if p.state != ESTABLISHED:
            out.append(f"{node}: session on {ifname} (to {s.peer}) is {p.state}, "
                       f"not {ESTABLISHED}")
            continue
        if p.remote_as is not None and p.remote_as != s.peer_asn:
            out.append(f"{node}: session on {ifname} is with AS{p.remote_as}, the plan "
                       f"puts {s.peer} (AS{s.peer_asn}) there")
        elif p.router_id is not None and p.router_id != ids.get(s.peer):
            named = {v: k for k, v in ids.items()}.get(p.router_id, f"router ID {p.router_id}")
            out.append(f"{node}: session on {ifname} reaches {named}, the plan puts "
                       f"{s.peer} there (a link wired elsewhere)")
    for ifname in sorted(set(view.peers) - set(planned)):
        out.append(f"{node}: a BGP session on {ifname} the plan does not have")
    wanted = {e.prefix: e for e in expected.expect}
    for prefix, e in wanted.items():
        r = view.routes.get(prefix)
        if r is None:
            out.append(f"{node}: no BGP route to {prefix} (want {e.width} next "
                       f"hop{'s' if e.width > 1 else ''} out of {', '.join(e.via)})")
            continue
        if not r.installed:
            out.append(f"{node}: the BGP route to {prefix} is not in the kernel")
            continue
        outside = sorted({dev for _, dev in r.nexthops if dev not in e.via})
        if outside:
            out.append(f"{node}: {prefix} goes out of {', '.join(outside)}; the plan: "
                       f"{', '.join(e.via)}")
        if len(r.nexthops) != e.width:
            out.append(f"{node}: {prefix} has {len(r.nexthops)} ECMP next "
                       f"hop{'s' if len(r.nexthops) != 1 else ''} in the kernel, the plan "
                       f"{e.width} (out of {', '.join(e.via)})")
    mine = set(expected.announce)
    for prefix in sorted(set(view.routes) - set(wanted), key=_order):
        if prefix not in mine:
            out.append(f"{node}: a BGP route to {prefix} the plan does not expect")
    if len(out) > MAX_PROBLEMS:
        out = out[:MAX_PROBLEMS] + [f"{node}: and {len(out) - MAX_PROBLEMS} more"]
    return out


def _order(prefix: str):
    try:
        return (0, ipaddress.IPv6Network(prefix, strict=False))
    except ValueError:
        return (1, prefix)
