"""`twin routes check`: every path the EV formula defines, walked through loaded tables (pure).

The paths are verify's, as twin.fabric.paths makes them (`Paths.briefs`): from every host
port the loopbacks off its T0 and off each T1 of the plane, then every ordered host
pair x plane x T1 (one path per plane within a rack). Each is walked (twin.routes.walk)
and judged:

    ok          delivered to its destination over the switches its uSIDs name
    misrouted   delivered, but over other switches: the EV no longer picks the
                path, so spraying and failure isolation are off
    blackhole   dropped on the way
    wrong-host  delivered to, or decapsulated at, another host
    loop        went round

A path that leaves its planned switches is blamed on the route that sent it off
("exits on the wrong port"); one that dies on its planned way is blamed on the
item it met there or, when nothing matched, on the item twin's plan has there
(a missing route or SID). Items are named with the file and line they came from.

Findings about the tables themselves, whether or not a path meets them: local
SIDs missing, of the wrong behaviour, duplicated across nodes, owned by another
node, outside the block or of another uSID format; routes out of devices the
node lacks, to next hops no neighbour owns, hidden by a SID of the same prefix;
routes and SIDs no path uses (a warning); a plane whose paths all cross one T1.
"""

from __future__ import annotations

import gc
import ipaddress
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from twin import junit
from twin.fabric.paths import Path, Paths
from twin.fabric.plan import DROPPING, UN, LocalSid, Plan, Route, nic_address
from twin.routes import walk as W
from twin.routes.tables import Dropping, Tables, from_plan, key

OK, MISROUTED = "ok", "misrouted"
ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class WalkResult:
    """A path (fabric.paths') that did not arrive as planned, and what became of it."""

    path: Path
    outcome: str  # MISROUTED | walk.BLACKHOLE | walk.WRONG_HOST | walk.LOOP
    node: str = ""  # the node responsible
    item: str = ""  # the item responsible (tables.key), "" when none matched
    origin: str = ""  # where that item was read
    planned: tuple[str, ...] = ()  # what twin's plan uses there that the node did not
    reason: str = ""  # what happened to this path's packet
    nodes: tuple[str, ...] = ()  # the nodes the packet crossed

    @property
    def delivered(self) -> bool:
        return self.outcome in (OK, MISROUTED)

    @property
    def cause(self) -> str:
        """The node and item responsible, and the first thing the plan has there that the
        node lacks, in one line (shared by every path that fails the same way: the rest
        of `planned` follows from the first)."""
        what = f"{self.item} ({self.origin})" if self.item and self.origin else \
            self.item or "no matching route or SID"
        missing = f"; planned: {self.planned[0]}" if self.planned else ""
        return f"{self.node}: {what}{missing}"

    def to_dict(self) -> dict:
        p = self.path  # the path's fields the routes check JSON has always carried
        return {"kind": p.kind, "src": p.src, "dst": p.dst, "plane": p.plane, "t1": p.t1,
                "address": p.address, "outcome": self.outcome, "node": self.node,
                "item": self.item, "origin": self.origin, "planned": list(self.planned),
                "reason": self.reason, "nodes": list(self.nodes), "label": p.label}


@dataclass(frozen=True)
class Finding:
    node: str
    kind: str
    message: str
    item: str = ""
    origin: str = ""
    severity: str = ERROR

    def text(self) -> str:
        where = f" ({self.origin})" if self.origin else ""
        what = f"{self.item}{where}: " if self.item else ""
        return f"{self.node}: {what}{self.message}"


@dataclass
class CheckReport:
    fabric: str
    source: str
    format: str
    paths: int = 0  # walked
    failing: list[WalkResult] = field(default_factory=list)  # every path not OK
    findings: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    node_names: list[str] = field(default_factory=list, repr=False)  # JUnit's cases, in order
    host_pairs: list[tuple[str, str]] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        return not self.failing and not any(f.severity == ERROR for f in self.findings)

    def outcomes(self) -> dict[str, int]:
        counts = Counter(r.outcome for r in self.failing)
        return {OK: self.paths - len(self.failing), **{o: counts.get(o, 0) for o in (
            MISROUTED, W.BLACKHOLE, W.WRONG_HOST, W.LOOP)}}

    def verdict_line(self) -> str:
        """The verdict's facts, none contradicting another: the paths that arrive, those
        that fail by outcome, the problems in the tables besides them, the warnings
        (`twin routes check`'s last line, `twin ci`'s routes check stage)."""
        counts = self.outcomes()
        bad = {o: n for o, n in counts.items() if n and o != OK}
        errors = sum(f.severity == ERROR for f in self.findings)
        warns = sum(f.severity == WARNING for f in self.findings)
        parts = [f"{counts[OK]}/{self.paths} paths arrive on their switches"]
        if bad:
            parts.append(f"{sum(bad.values())} fail ("
                         + ", ".join(f"{o} {n}" for o, n in bad.items()) + ")")
        other = "other " if bad else ""
        parts.append(f"{_n(errors, other + 'problem')} in the tables" if errors
                     else f"no {other}problem in the tables")
        parts.append(_n(warns, "warning"))
        return "; ".join(parts)

    def causes(self) -> list[tuple[str, str, list[WalkResult]]]:
        """Failing paths grouped by the node and item responsible, most paths first:
        (cause, outcome, paths)."""
        groups: dict[tuple[str, str], list[WalkResult]] = {}
        for r in self.failing:
            groups.setdefault((r.cause, r.outcome), []).append(r)
        return sorted(((c, o, rs) for (c, o), rs in groups.items()),
                      key=lambda g: (-len(g[2]), g[0]))

    def undelivered(self) -> set[tuple[str, str]]:
        """(source, uSID program) of every path whose packet does not arrive: what
        `twin verify` on a lab built from these tables must find lost."""
        return {(r.path.src, r.path.address) for r in self.failing if not r.delivered}

    def to_dict(self) -> dict:
        return {"fabric": self.fabric, "source": self.source, "format": self.format,
                "ok": self.ok, "seconds": round(self.seconds, 3),
                "paths": {"total": self.paths, **self.outcomes()},
                "causes": [{"cause": c, "outcome": o, "paths": len(rs),
                            "example": rs[0].path.label} for c, o, rs in self.causes()],
                "findings": [asdict(f) for f in self.findings],
                "failing": [r.to_dict() for r in self.failing]}

    def junit(self) -> str:
        """JUnit XML: a case per node (its findings), a case per ordered host pair and
        per host's loopbacks (their broken paths, each with its cause)."""
        by_node: dict[str, list[Finding]] = {}
        for f in self.findings:
            by_node.setdefault(f.node, []).append(f)
        by_pair: dict[tuple[str, str], list[WalkResult]] = {}
        for r in self.failing:
            by_pair.setdefault((r.path.src, r.path.dst), []).append(r)
        prefix = f"{self.fabric}.routes"
        return junit.document(f"twin routes check {self.fabric}", [
            junit.Suite(f"{prefix}.tables", [
                (n, "\n".join(f.text() for f in by_node.get(n, []) if f.severity == ERROR))
                for n in self.node_names]),
            junit.Suite(f"{prefix}.paths", [
                (f"{s} -> {d}", "\n".join(f"{r.path.label}: {r.outcome} at {r.cause}"
                                          for r in by_pair.get((s, d), [])))
                for s, d in self.host_pairs]),
        ])



def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def check(plan: Plan, tables: Tables) -> CheckReport:
    """Walk every path through `tables`; `plan` is twin's own (the addressing plan, and
    the reference a missing item is named from)."""
    started = time.monotonic()
    fabric = plan.fabric
    report = CheckReport(fabric.name, tables.source, tables.format,
                         node_names=[n.name for n in fabric.nodes],
                         host_pairs=[(s.name, d.name) for s in fabric.hosts for d in fabric.hosts
                                 if s is not d] + [(h.name, h.name) for h in fabric.hosts])
    walker = W.Walker(fabric, plan, tables)
    reference = W.Walker(fabric, plan, from_plan(plan))
    nics = {h.name: int(nic_address(fabric, h)) for h in fabric.hosts}
    crossed: dict[int, set[str]] = {p: set() for p in fabric.nic_planes}
    paths, arrives = Paths(fabric), walker.arrives
    # Each path in brief (fabric.paths' Brief): half a million of them for a large
    # fabric, and the whole Path (its address text, links, kind) only for those that fail.
    with _collector_paused():
        for brief in paths.briefs():
            report.paths += 1
            src, dst, plane, t1, address, nodes = brief
            inner = nics[dst]
            if arrives(src, address, inner, nodes):
                if t1 is not None:
                    crossed[plane].add(nodes[2])
                continue
            way = walker.send(src, address, inner)
            report.failing.append(_judge(paths.path(brief), way,
                                         reference.send(src, address, inner), tables))
            if way.outcome == W.DELIVERED:
                crossed[plane].update(n for n in way.nodes
                                      if fabric.node(n).tier.value == "t1")
    report.findings = findings(plan, tables, walker.used, crossed)
    report.seconds = time.monotonic() - started
    return report


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the paths are walked: the walkers keep
    the way from each state they meet (a hundred thousand and more for a large fabric,
    each of a few objects), and every so many of them the collector would scan all it
    has kept, a third of the walk's time on mrc-8p-256, for cycles the walk never makes
    (its ways, hops and tuples refer only forward). On again after, if it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _judge(path: Path, way: W.Way, ref: W.Way, tables: Tables) -> WalkResult:
    """Blame the first node that did otherwise than twin's plan would have: sent the
    packet elsewhere, or with another destination, or stopped it."""
    outcome = MISROUTED if way.outcome == W.DELIVERED else way.outcome
    common = dict(path=path, outcome=outcome, nodes=way.nodes)
    planned = {h.node: h for h in ref.hops}
    for i, (got, want) in enumerate(zip(way.hops, ref.hops, strict=False)):
        if got.node != want.node:  # cannot be the first hop: both start at the source
            got, want = way.hops[i - 1], ref.hops[i - 1]
        elif (got.egress, got.out) == (want.egress, want.out) and got.items == want.items:
            continue
        return _blame(common, got, want, way, tables)
    last = way.hops[-1]
    return _blame(common, last, planned.get(last.node, last), way, tables)


def _blame(common: dict, got: W.Hop, want: W.Hop, way: W.Way, tables: Tables) -> WalkResult:
    origins = tables.nodes[got.node].origins
    wrong = [i for i in got.items if i not in want.items]
    lacking = [i for i in want.items if i not in got.items]
    item = wrong[-1] if wrong else ""
    if got.egress and got.node != way.node:
        then = f" ({way.outcome} at {way.node}: {way.reason})"
        did = f"sends {_ip(got.out)} out of {got.egress}{then}"
    else:
        did = way.reason if got.node == way.node else f"{way.outcome} at {way.node}"
    where = origins.get(item) if item else None
    return WalkResult(**common, node=got.node, item=item, origin=str(where or ""),
                      planned=tuple(lacking), reason=did)


def _ip(addr: int) -> str:
    return str(ipaddress.IPv6Address(addr))


def findings(plan: Plan, tables: Tables, used: set[tuple[str, str]],
             crossed: dict[int, set[str]]) -> list[Finding]:
    fabric, block = plan.fabric, plan.fabric.spec.block
    out: list[Finding] = []
    owner = {s.prefix: name for name, n in plan.nodes.items() for s in n.sids}
    holders: dict[str, list[str]] = {}
    for name, t in tables.nodes.items():
        at = t.origins.get
        have = {s.prefix: s for s in t.sids} | {d.prefix: d for d in t.dropping}
        for want in plan.nodes[name].sids:
            got = have.get(want.prefix)
            if got is None:
                out.append(Finding(name, "sid-missing", f"no local SID for its "
                                   f"{_role(want)} {want.describe()}"))
            elif isinstance(got, Dropping) or got.behavior != want.behavior:
                out.append(Finding(name, "sid-behaviour", f"its {_role(want)} acts as "
                                   f"{got.what if isinstance(got, Dropping) else got.behavior}"
                                   f", planned {want.behavior}", key(got),
                                   str(at(key(got)) or "")))
        for prefix, sid in have.items():
            holders.setdefault(prefix, []).append(name)
            item, where = key(sid), str(at(key(sid)) or "")
            net = ipaddress.IPv6Network(prefix)
            if not net.subnet_of(block):
                out.append(Finding(name, "sid-outside-block", f"{prefix} is outside the "
                                   f"uSID block {block}", item, where))
            elif owner.get(prefix, name) != name:
                out.append(Finding(name, "sid-foreign", f"{prefix} is the uSID of "
                                   f"{owner[prefix]}, not of {name}", item, where))
            elif prefix not in owner:
                out.append(Finding(name, "sid-unknown", f"{prefix} is no node's uSID in the "
                                   "addressing plan", item, where, WARNING))
            if isinstance(sid, LocalSid) and sid.behavior == UN and \
                    (sid.block_len, sid.usid_len) != (block.prefixlen, 16):
                out.append(Finding(name, "sid-format", f"uN with block {sid.block_len} and "
                                   f"uSID {sid.usid_len} bits; the fabric's are "
                                   f"F{block.prefixlen}16", item, where))
        out += _route_findings(plan, name, t, have)
    for prefix, names in sorted(holders.items()):
        if len(names) > 1:
            for name in names:
                out.append(Finding(name, "sid-duplicated", f"{prefix} is a local SID on "
                                   f"{', '.join(names)}: packets for it reach only one",
                                   key(_sid_at(tables, name, prefix)),
                                   str(tables.nodes[name].origins.get(
                                       key(_sid_at(tables, name, prefix))) or "")))
    for name, t in tables.nodes.items():
        for item in [*t.routes, *t.sids, *t.dropping]:
            if (name, key(item)) not in used and not _catch_all(item):
                out.append(Finding(name, "unused", "no path uses it", key(item),
                                   str(t.origins.get(key(item)) or ""), WARNING))
    if fabric.spec.t1_per_plane > 1:
        for plane, t1s in crossed.items():
            if len(t1s) == 1:
                out.append(Finding(f"plane {plane}", "one-t1", f"every path that crosses a T1 "
                                   f"crosses {next(iter(t1s))} (the plane has "
                                   f"{fabric.spec.t1_per_plane})"))
    return out


def _catch_all(item) -> bool:
    """A default route that drops (`blackhole ::/0`): an operator's guard for whatever
    no other route matches, which no path is meant to use, so never "unused"."""
    return isinstance(item, Route) and item.type in DROPPING and item.dst == "::/0"


def _sid_at(tables: Tables, node: str, prefix: str):
    t = tables.nodes[node]
    return next(s for s in [*t.sids, *t.dropping] if s.prefix == prefix)


def _role(sid: LocalSid) -> str:
    return "uSID" if sid.behavior == UN else "port's SID"


def _route_findings(plan: Plan, name: str, t, sids: dict) -> list[Finding]:
    out = []
    node = plan.nodes[name]
    devs = {i.name: i for i in node.interfaces}
    neigh = {}
    for ifc in node.interfaces:
        if ifc.peer:
            peer, pif = ifc.peer.split(":")
            theirs = next(i for i in plan.nodes[peer].interfaces if i.name == pif)
            neigh[ifc.name] = (peer, {str(ipaddress.IPv6Interface(a).ip)
                                      for a in theirs.addresses})
    for r in t.routes:
        item, where = key(r), str(t.origins.get(key(r)) or "")
        if r.dst in sids:
            out.append(Finding(name, "shadowed", f"{r.dst} is also a local SID here: one "
                               "hides the other", item, where))
        if r.type != "unicast":
            continue
        if r.dev not in devs:
            out.append(Finding(name, "device-missing", f"{name} has no device {r.dev!r} "
                               f"(it has {', '.join(devs) or 'none'}); the kernel refuses "
                               "the route", item, where))
        elif r.via is None:
            out.append(Finding(name, "no-next-hop", f"no next hop: neighbour discovery asks "
                               f"for the destination itself on {r.dev}", item, where))
        elif r.dev in neigh and str(ipaddress.IPv6Address(r.via)) not in neigh[r.dev][1]:
            peer, owns = neigh[r.dev]
            out.append(Finding(name, "next-hop", f"next hop {r.via} is not {peer}'s address "
                               f"on {r.dev} ({', '.join(sorted(owns))})", item, where))
    return out


__all__ = ["CheckReport", "Finding", "Route", "WalkResult", "check"]
