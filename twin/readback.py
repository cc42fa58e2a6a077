"""Read a node's state back and compare it with the plan.

iproute2 (`ip -j -6 route show`, `ip -j link`, `ip -j address`) reads back the
links, addresses and static routes. The local SIDs are read back by the lab's
data plane (twin.dataplane), each with an oracle of its own: the seg6local
routes from the same `ip -j -6 route show`, the eBPF programs from `tc -j
filter show` and the tags the kernel computed over what it loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from twin import dataplane
from twin.dataplane import program as node_program
from twin.dataplane.program import PROBE_BAND_QDISC
from twin.fabric.plan import DROPPING, UNICAST, NodePlan, Route
from twin.fabric.render import NO_DATAPLANE

READ_CMDS = "route show\nlink show\naddress show\n"


@dataclass
class NodeCheck:
    node: str
    missing: list[str] = field(default_factory=list)  # planned, not there
    extra: list[str] = field(default_factory=list)  # there, not planned
    different: list[str] = field(default_factory=list)  # same dst, other attributes
    links: list[str] = field(default_factory=list)  # interface problems
    sids: list[str] = field(default_factory=list)  # local SID problems, one line each
    routing: list[str] = field(default_factory=list)  # routing: bgp: FRR and the kernel's
    #                                                   BGP routes against the plan

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different or self.links or self.sids
                    or self.routing)

    def problems(self) -> list[str]:
        return ([f"missing route {r}" for r in self.missing]
                + [f"extra route {r}" for r in self.extra]
                + [f"different route {r}" for r in self.different]
                + self.sids + self.links + self.routing)


def route_from_json(entry: dict) -> Route:
    """A static Route from one element of `ip -j -6 route show` (a route that drops
    shows `dev lo`, which is not part of it)."""
    kind = entry.get("type", UNICAST)
    if kind in DROPPING:
        return Route(dst=_norm_dst(entry["dst"]), dev="", type=kind)
    return Route(dst=_norm_dst(entry["dst"]), dev=entry.get("dev", ""),
                 via=entry.get("gateway"))


def _norm_dst(dst: str) -> str:
    if dst == "default":
        return "::/0"
    return dst if "/" in dst else f"{dst}/128"


def compare(plan: NodePlan, routes_json: list[dict], links_json: list[dict],
            addrs_json: list[dict], is_sid_route=lambda entry: False) -> NodeCheck:
    """Links, addresses and static routes against the plan; `is_sid_route` tells the
    data plane's own routes (checked by it) from static ones."""
    check = NodeCheck(plan.name)
    actual = [route_from_json(e) for e in routes_json
              if e.get("protocol") != "kernel" and not is_sid_route(e)]
    planned = {r.dst: r for r in plan.routes}
    seen = {}
    for r in actual:
        seen[r.dst] = r
        want = planned.get(r.dst)
        if want is None:
            check.extra.append(r.describe())
        elif want != r:
            check.different.append(f"{r.describe()} (planned: {want.describe()})")
    for dst, want in planned.items():
        if dst not in seen:
            check.missing.append(want.describe())

    by_name = {e["ifname"]: e for e in links_json}
    addrs = {e["ifname"]: {f"{a['local']}/{a['prefixlen']}" for a in e.get("addr_info", ())}
             for e in addrs_json}
    for ifc in plan.interfaces:
        link = by_name.get(ifc.name)
        if link is None:
            check.links.append(f"interface {ifc.name} (to {ifc.peer}) is missing")
            continue
        flags = link.get("flags", [])
        if "UP" not in flags:
            check.links.append(f"interface {ifc.name} (to {ifc.peer}) is admin down")
        elif "LOWER_UP" not in flags:
            check.links.append(f"interface {ifc.name} (to {ifc.peer}) has no carrier")
        if link.get("mtu") != ifc.mtu:
            check.links.append(f"interface {ifc.name} mtu {link.get('mtu')}, planned {ifc.mtu}")
        for a in ifc.addresses:
            if a not in addrs.get(ifc.name, set()):
                check.links.append(f"interface {ifc.name} lacks address {a}")
    for a in plan.loopback:
        if a not in addrs.get("lo", set()):
            check.links.append(f"lo lacks NIC address {a}")
    return check


def is_bgp_route(entry: dict) -> bool:
    return entry.get("protocol") == "bgp"


def compare_bgp(plan: NodePlan, routes_json: list[dict]) -> list[str]:
    """The kernel's BGP routes (what FRR installed, read with iproute2: an oracle apart
    from FRR's own account) against the router's plan: each expected prefix with its
    ECMP width out of planned interfaces, and no other."""
    got: dict[str, list[str]] = {}
    for e in routes_json:
        if not is_bgp_route(e):
            continue
        hops = e.get("nexthops")
        devs = [str(h.get("dev", "")) for h in hops if isinstance(h, dict)] \
            if isinstance(hops, list) else [str(e.get("dev", ""))]
        got[_norm_dst(str(e.get("dst", "")))] = devs
    out = []
    for want in plan.bgp.expect:
        devs = got.pop(want.prefix, None)
        if devs is None:
            out.append(f"no route to {want.prefix} in the kernel (BGP's, {want.width}-way "
                       f"ECMP out of {', '.join(want.via)})")
            continue
        if len(devs) != want.width:
            out.append(f"{want.prefix}: {len(devs)}-way ECMP in the kernel, planned "
                       f"{want.width}-way out of {', '.join(want.via)}")
        if stray := sorted(set(devs) - set(want.via)):
            out.append(f"{want.prefix} goes out of {', '.join(stray)} in the kernel; "
                       f"planned {', '.join(want.via)}")
    out += [f"a BGP route to {dst} in the kernel the plan does not expect"
            for dst in sorted(got)]
    return out


def compare_shaping(plan: NodePlan, qdiscs: list[dict], check: NodeCheck) -> None:
    """Every interface with a planned rate has a root tbf at that rate (tc -j reports B/s)."""
    roots = {q.get("dev"): q for q in qdiscs if q.get("root")}
    for ifc in plan.interfaces:
        if not ifc.rate_bps:
            continue
        q = roots.get(ifc.name)
        if q is None or q.get("kind") != "tbf":
            check.links.append(f"interface {ifc.name} is not shaped (planned tbf "
                               f"{ifc.rate_bps} bit/s)")
        elif q.get("options", {}).get("rate", 0) * 8 != ifc.rate_bps:
            check.links.append(f"interface {ifc.name} shaped at "
                               f"{q['options'].get('rate', 0) * 8} bit/s, planned {ifc.rate_bps}")
        elif not any(c.get("dev") == ifc.name and c.get("kind") == PROBE_BAND_QDISC
                     and c.get("parent") == f"{q.get('handle')}1" for c in qdiscs):
            check.links.append(f"interface {ifc.name} has no {PROBE_BAND_QDISC} under its "
                               "tbf: probes wait behind data (planned parent 1:1)")


def parse_batch_output(text: str) -> list[list[dict]]:
    """`ip -j -batch` prints one JSON array per command, one per line."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def read_node(runtime, plan: NodePlan) -> NodeCheck:
    program = node_program.load(runtime.build_dir, plan.name)
    out = runtime.exec(plan.name, ["ip", "-6", "-j", "-batch", "-"], input=READ_CMDS).stdout
    parts = parse_batch_output(out)
    if len(parts) != 3:
        return NodeCheck(plan.name, links=[f"could not read state back ({len(parts)} of 3)"])
    routes, links, addrs = parts
    if program.dataplane == NO_DATAPLANE:  # routing: bgp: no SID; BGP's routes its own
        check = compare(plan, routes, links, addrs, is_bgp_route)
        if plan.bgp is not None:
            check.routing = compare_bgp(plan, routes)
        return check
    backend = dataplane.get(program.dataplane)
    check = compare(plan, routes, links, addrs, backend.is_sid_route)
    check.sids = backend.check_sids(runtime, plan, routes)
    check.links += backend.check_signals(runtime, plan)
    if any(ifc.rate_bps for ifc in plan.interfaces):
        qdiscs = json.loads(runtime.exec(plan.name, ["tc", "-j", "qdisc", "show"]).stdout or "[]")
        compare_shaping(plan, qdiscs, check)
    return check
