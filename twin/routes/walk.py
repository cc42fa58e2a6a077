"""A packet's way through a fabric's tables, hop by hop, as the kernel forwards it (pure).

The packet is the fabric's own: an outer IPv6 header whose destination is the
uSID program, around an inner packet to the destination host's NIC address.
At each node, from the node's tables (twin.routes.tables):

    lookup    the longest prefix holding the destination, among the node's static
              routes and local SIDs (on a tie, the SID: it sees the packet first)
    uN        keep the block, shift the uSIDs after it left by one uSID, look up
              again; nothing left to shift is a classic End without an SRH: dropped
    decap     strip the outer header; the inner packet is delivered if its
              destination is this node's NIC address, else dropped (End.DT6 looks
              it up in table local, and a host does not forward). A decap SID that
              names a port acts on packets arriving on that port
    route     out of its device to its next hop: the neighbour on that link must
              own the `via` address (the link-locals of the addressing plan), else
              neighbour discovery never answers and the packet is dropped; a
              route without `via` resolves the destination itself, which no
              neighbour owns. A host does not forward what it received
    drop      a blackhole, unreachable or prohibit route, a SID twin cannot run
              (tables.Dropping), no route at all

A way ends delivered, dropped (`blackhole`), at another host (`wrong-host`), or
going round (`loop`: a node seen again with the same destination, or the hop
limit spent). Ways from a node onward depend only on the node, the destination
and, at hosts, the port it arrived on, so `Walker` remembers them: every path of
mrc-8p-256 is walked in seconds.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, replace

from twin.fabric.model import Fabric
from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Plan, Route
from twin.routes.tables import Dropping, Tables, key

HOP_LIMIT = 64  # the hop limit probes and the endpoint send with

DELIVERED, BLACKHOLE, WRONG_HOST, LOOP = "delivered", "blackhole", "wrong-host", "loop"


@dataclass(slots=True)  # not frozen: half a million are made per large fabric, and
class Hop:  # a frozen dataclass pays object.__setattr__ per field
    """What one node did with the packet: the items it used, in order (tables.key: the
    SIDs that shifted it, then the route or SID that forwarded, decapsulated or dropped
    it), the device it left by and the destination it left with ("" and 0 when it
    stopped here)."""

    node: str
    items: tuple[str, ...]
    egress: str = ""
    out: int = 0

    @property
    def item(self) -> str:
        """The last item used: the one that decided where the packet went."""
        return self.items[-1] if self.items else ""


@dataclass(slots=True)
class Way:
    """Where a packet went from some node on: the hops, then how it ended."""

    hops: tuple[Hop, ...]
    outcome: str  # DELIVERED | BLACKHOLE | WRONG_HOST | LOOP
    node: str  # where it ended
    reason: str  # why it ended there, one sentence
    item: str = ""  # the item responsible where it ended ("" when none matched)
    nodes: tuple[str, ...] = ()  # the hops' nodes

    def __post_init__(self) -> None:
        if not self.nodes:
            self.nodes = tuple(h.node for h in self.hops)


Item = Route | LocalSid | Dropping


class _Fib:
    """A node's items by prefix length, for longest-prefix match on integer addresses.

    Each prefix holds what acts on it, in the order it acts: a decap SID naming the
    port the packet arrived on, a SID for any port, then a route."""

    def __init__(self, routes, sids, dropping) -> None:
        by_len: dict[int, dict[int, list[Item]]] = {}
        for item, prefix in ([(r, r.dst) for r in routes] + [(s, s.prefix) for s in sids]
                             + [(d, d.prefix) for d in dropping]):
            net = ipaddress.IPv6Network(prefix)
            slot = by_len.setdefault(net.prefixlen, {})
            slot.setdefault(int(net.network_address) >> (128 - net.prefixlen), []).append(item)
        self.lengths = [(128 - length, {k: _slot(items) for k, items in table.items()})
                        for length, table in sorted(by_len.items(), reverse=True)]

    def lookup(self, addr: int, ingress: str | None) -> Item | None:
        for shift_by, table in self.lengths:
            slot = table.get(addr >> shift_by)
            if slot is None:
                continue
            on_port, anywhere = slot
            if on_port:
                if ingress is None:
                    return next(iter(on_port.values()))
                if ingress in on_port:
                    return on_port[ingress]
            if anywhere is not None:
                return anywhere
        return None


def _slot(items: list[Item]) -> tuple[dict[str, Item], Item | None]:
    """(decap SIDs by the port they act on, what acts on any port: a SID, else a route)."""
    on_port = {i.dev: i for i in reversed(items)
               if isinstance(i, LocalSid) and i.behavior == DECAP and i.dev}
    sids = [i for i in items if not isinstance(i, Route) and i not in on_port.values()]
    routes = [i for i in items if isinstance(i, Route)]
    return on_port, (sids or routes or [None])[0]


def shift(addr: int, block_len: int, usid_len: int) -> int | None:
    """uN: the block kept, the uSIDs after the active one moved up one uSID; None when
    none is left (a classic End, which needs an SRH)."""
    rest_bits = 128 - block_len - usid_len
    if rest_bits <= 0:
        return None
    rest = addr & ((1 << rest_bits) - 1)
    if rest == 0:
        return None
    block = addr >> (128 - block_len) << (128 - block_len)
    return block | (rest << usid_len)


class Walker:
    """Walks packets through one fabric's tables; remembers the way from each state."""

    def __init__(self, fabric: Fabric, plan: Plan, tables: Tables) -> None:
        self.fabric = fabric
        self.plan = plan  # the addressing plan: interfaces, their addresses, NIC addresses
        self.fibs = {n: _Fib(t.routes, t.sids, t.dropping) for n, t in tables.nodes.items()}
        self.used: set[tuple[str, str]] = set()  # (node, item key) some walk used
        self._ways: dict[tuple[str, str | None, int], Way] = {}
        self._nic = {name: {int(ipaddress.IPv6Address(a.split("/")[0])) for a in n.loopback}
                     for name, n in plan.nodes.items()}
        self._neigh: dict[tuple[str, str], tuple[str, str, set[int]]] = {}
        for name, node in plan.nodes.items():
            for ifc in node.interfaces:
                if not ifc.peer:
                    continue
                peer_node, peer_if = ifc.peer.split(":")
                peer_ifc = next(i for i in plan.nodes[peer_node].interfaces
                                if i.name == peer_if)
                owns = {int(ipaddress.IPv6Address(a.split("/")[0])) for a in peer_ifc.addresses}
                self._neigh[(name, ifc.name)] = (peer_node, peer_if, owns)
        self._hosts = {h.name for h in fabric.hosts}
        self._via: dict[str, int] = {}
        self._next: dict[tuple[str, int], tuple[str, str]] = {}  # (source, route): peer
        self._keys: dict[int, str] = {}  # tables.key of each item met, by id
        self._items: list[Item] = []

    def send(self, src: str, address: str | int, inner: str | int) -> Way:
        """The way of a packet `src` sends to the uSID program `address`, carrying an
        inner packet to the NIC address `inner` (addresses as text or integers)."""
        return self._from(src, None, _int(address), _int(inner), ())

    def arrives(self, src: str, address: int, inner: int, nodes: tuple[str, ...]) -> bool:
        """Does the packet `send` would walk arrive over exactly `nodes` (the source
        first)? The same answer as `send(...).nodes == nodes` and delivered, without
        making the source's hop: a check asks it once per path, and half a million
        times for a large fabric."""
        item = self.fibs[src].lookup(address, None)
        nxt = self._next.get((src, id(item)))
        if nxt is None:
            if not isinstance(item, Route) or item.type != UNICAST or item.via is None:
                return False
            neigh = self._neigh.get((src, item.dev))
            if neigh is None or int(ipaddress.IPv6Address(item.via)) not in neigh[2]:
                return False
            nxt = self._next[(src, id(item))] = (neigh[0], neigh[1])
            self.used.add((src, key(item)))
        rest = self._from(nxt[0], nxt[1], address, inner, ((src, address),))
        return rest.outcome == DELIVERED and rest.nodes == nodes[1:]

    def _from(self, node: str, ingress: str | None, addr: int, inner: int,
              seen: tuple[tuple[str, int], ...]) -> Way:
        # Ways from a switch onward depend on (node, destination, inner): remembered.
        memo = (node, ingress if node in self._hosts else None, addr, inner)
        way = self._ways.get(memo)
        if way is None:
            way = self._step(node, ingress, addr, inner, seen)
            if (way.outcome == BLACKHOLE and len(way.hops) == 1 and ingress is not None
                    and node in self._hosts and inner not in self._nic[node]):
                way = replace(way, outcome=WRONG_HOST,
                              reason=f"arrives at host {node}, not its destination: "
                                     f"{way.reason}")
            if way.outcome != LOOP:  # a loop's way depends on where it was entered
                self._ways[memo] = way
        return way

    def _step(self, node: str, ingress: str | None, addr: int, inner: int,
              seen: tuple[tuple[str, int], ...]) -> Way:
        if (node, addr) in seen:
            cycle = [n for n, _ in seen[seen.index((node, addr)):]]
            return Way((Hop(node, ()),), LOOP, node,
                       f"comes back to {node} with the same destination "
                       f"({' -> '.join([*cycle, node])})")
        if len(seen) >= HOP_LIMIT:
            return Way((Hop(node, ()),), LOOP, node, f"hop limit {HOP_LIMIT} spent")
        seen = (*seen, (node, addr))
        fib = self.fibs[node]
        used: tuple[str, ...] = ()
        for _ in range(8):  # uN shifts within one node: at most the uSIDs an address holds
            item = fib.lookup(addr, ingress)
            if item is None:
                return self._stop(node, BLACKHOLE, f"no route for {_ip(addr)}", used)
            name = self._keys.get(id(item))
            if name is None:
                name = self._keys[id(item)] = key(item)
                self._items.append(item)  # keeps id(item) its own
            used = (*used, name)
            self.used.add((node, name))
            if isinstance(item, Dropping):
                return self._stop(node, BLACKHOLE, f"{_ip(addr)} meets {item.what}: "
                                  f"{item.why}", used)
            if isinstance(item, LocalSid):
                if item.behavior == UN:
                    shifted = shift(addr, item.block_len, item.usid_len)
                    if shifted is None:
                        return self._stop(node, BLACKHOLE, f"{_ip(addr)} has no uSID left after "
                                          "this node's: a classic End, which needs an SRH",
                                          used)
                    addr = shifted
                    continue
                return self._decap(node, item, inner, used)
            return self._route(node, ingress, item, addr, inner, seen, used)
        return self._stop(node, BLACKHOLE, f"{_ip(addr)} is shifted more often than an "
                          "address holds uSIDs", used)

    def _stop(self, node: str, outcome: str, reason: str, used: tuple[str, ...] = ()) -> Way:
        return Way((Hop(node, used),), outcome, node, reason, used[-1] if used else "")

    def _decap(self, node: str, sid: LocalSid, inner: int, name: tuple[str, ...]) -> Way:
        if inner in self._nic.get(node, ()):
            return self._stop(node, DELIVERED, "decapsulated and delivered", name)
        if node in self._hosts:
            return self._stop(node, WRONG_HOST, f"decapsulated at {node}, which does not own "
                              f"{_ip(inner)} (and a host does not forward)", name)
        return self._stop(node, BLACKHOLE, f"decapsulated at switch {node}, whose table "
                          f"local does not hold {_ip(inner)}", name)

    def _route(self, node: str, ingress: str | None, route: Route, addr: int, inner: int,
               seen, name: tuple[str, ...]) -> Way:
        if route.type != UNICAST:
            where = _ip(addr)
            return self._stop(node, BLACKHOLE, f"{where} meets a {route.type} route", name)
        if node in self._hosts and ingress is not None:
            where = _ip(addr)
            outcome = WRONG_HOST if inner not in self._nic.get(node, ()) else BLACKHOLE
            return self._stop(node, outcome, f"{where} arrives at host {node}, which has no "
                              "local SID for it and does not forward", name)
        neigh = self._neigh.get((node, route.dev))
        if neigh is None:
            return self._stop(node, BLACKHOLE, f"{_ip(addr)} is routed out of {route.dev}, "
                              f"which {node} does not have (the kernel refuses the route)",
                              name)
        peer, peer_if, owns = neigh
        if route.via is None:
            where = _ip(addr)
            return self._stop(node, BLACKHOLE, f"{where} is routed out of {route.dev} with "
                              f"no next hop: neighbour discovery asks for {where} itself, "
                              f"which {peer} does not own", name)
        via = self._via.get(route.via)
        if via is None:
            via = self._via[route.via] = int(ipaddress.IPv6Address(route.via))
        if via not in owns:
            mine = ", ".join(sorted(_ip(a) for a in owns))
            return self._stop(node, BLACKHOLE, f"next hop {route.via} does not answer on "
                              f"{route.dev}: the neighbour there is {peer} ({mine})", name)
        rest = self._from(peer, peer_if, addr, inner, seen)
        return Way((Hop(node, name, route.dev, addr), *rest.hops), rest.outcome, rest.node,
                   rest.reason, rest.item, (node, *rest.nodes))


def _int(addr: str | int) -> int:
    return addr if isinstance(addr, int) else int(ipaddress.IPv6Address(addr))


def _ip(addr: int) -> str:
    return str(ipaddress.IPv6Address(addr))
