"""Faults with guaranteed revert.

A fault is recorded in <run dir>/<lab>/faults.json *before* it is applied,
so whatever happens next (Ctrl-C, a crash, a reboot of the orchestrator),
`twin fault clear` or `twin down` can undo it.

Each kind of fault is a `FaultType` registered under its `FaultKind`, with
three actions on a running lab:

    apply     make it so (after it is recorded)
    revert    undo it (before its record is dropped)
    reapply   make it so again on a node that restarted and came back bare;
              return the ends it touched

    link-down   the named end(s) admin down. Revert brings both ends up and
                re-applies both nodes' plans: the kernel deleted the
                interface's addresses and routes when it went down.
    link-loss   nftables at the link's switch end drops PCT% of the packets
                forwarded out of or into it (numgen random, per packet).
    switch-down every link of a switch, down at the switch: a dead switch
    nic-down    one NIC port of a host (HOST:PLANE), down at the host
    plane-down  every link of a plane, down at its switches
                The last three are one fault over several links (`links`);
                revert brings every end up and re-applies every node's plan.
    blackhole   NODE[:IF] silently drops what it forwards (out of IF): an nft
                table in NODE's namespace; links and carrier stay up
    sid-loss    NODE's local SID route is deleted (a misconfiguration)
    route-corrupt  one of NODE's static routes points out of the wrong port
    link-rate   a link shaped to RATE at its switch end (tbf): a degraded link
                The last three revert by re-applying the node's plan, which
                is idempotent.
    link-flap   a link down and up COUNT times, PERIOD apart, while the command
                runs; recorded for its whole length, so a crash leaves it
                revertible, and Ctrl-C or SIGTERM bring the link back up
    switch-reboot  `twin restart NODE` as a fault on the timeline

Every apply and revert is also a line in <run dir>/<lab>/events.jsonl, with
wall time and CLOCK_MONOTONIC ns (one clock for every namespace and
container on the machine), so a drill lines faults up with the endpoints'
event logs.

No two faults share a link: a fault on a link another one holds is refused.

A fault may be *hidden* (a blind drill's, twin.chaos.blind): recorded, logged
and reverted like any other, but shown only as "1 hidden fault in force".
While one is in force no other fault is applied or reverted by target (an
error would tell which links it holds); `twin fault clear` reverts it.

A faults.json naming a kind no type registers is an error, never guessed at.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import ClassVar

from twin.dataplane.program import tbf_burst
from twin.errors import LabError, UsageError
from twin.fabric.model import Endpoint, Link
from twin.fabric.plan import NodePlan, Route
from twin.lab import Attached, phases, require_node, restart_node
from twin.progress import Steps
from twin.rundir import read_json, write_json


class FaultKind(StrEnum):
    LINK_DOWN = "link-down"
    LINK_LOSS = "link-loss"
    SWITCH_DOWN = "switch-down"
    NIC_DOWN = "nic-down"
    PLANE_DOWN = "plane-down"
    BLACKHOLE = "blackhole"
    SID_LOSS = "sid-loss"
    ROUTE_CORRUPT = "route-corrupt"
    LINK_RATE = "link-rate"
    LINK_FLAP = "link-flap"
    SWITCH_REBOOT = "switch-reboot"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    link: str  # link id; for a fault over several links, its target (NODE, HOST:PLANE, P)
    ends: tuple[Endpoint, ...]  # where it is applied
    since: float
    percent: float = 0.0  # link-loss only
    links: tuple[str, ...] = ()  # every link it holds, when more than `link` names
    detail: str = ""  # kind-specific: link-rate's rate, route-corrupt's route
    hidden: bool = False  # a blind drill's: `fault list` shows only that one is in force
    # CLOCK_MONOTONIC ns just before this process made its kernel change (not kept on
    # disk: a record read back says 0). A drill's figures count from it.
    changed_ns: int = field(default=0, compare=False)

    @property
    def target(self) -> str:
        return self.link

    @property
    def all_links(self) -> tuple[str, ...]:
        return self.links or (self.link,)

    def end_names(self) -> list[str]:
        """NODE:IF per end; a fault in a whole node (blackhole NODE, sid-loss) is NODE."""
        return [str(e) if e.ifname else e.node for e in self.ends]

    def to_dict(self) -> dict:
        d = {"kind": self.kind.value, "link": self.link,
             "ends": self.end_names(), "since": self.since,
             "percent": self.percent}
        if self.links:
            d["links"] = list(self.links)
        if self.detail:
            d["detail"] = self.detail
        if self.hidden:
            d["hidden"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "faults.json") -> Fault:
        try:
            kind = FaultKind(d["kind"])
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise LabError(f"{where}: unknown fault kind {d['kind']!r} (known: {known}); "
                           "was it written by a newer twin?") from None
        except (KeyError, TypeError):
            raise LabError(f"{where}: a fault without a kind: {d!r}") from None
        return cls(kind, d["link"], tuple(Endpoint(*e.partition(":")[::2]) for e in d["ends"]),
                   d["since"],
                   d.get("percent", 0.0), tuple(d.get("links", ())), d.get("detail", ""),
                   bool(d.get("hidden", False)))


def parse_end(text: str) -> Endpoint:
    """`NODE:IFNAME` -> Endpoint (syntax only; `parse_endpoint` checks it is a link end)."""
    node, sep, ifname = text.partition(":")
    if not sep or not node or not ifname:
        raise UsageError(f"{text!r}: name a link end as NODE:IFNAME, e.g. t0-p0-r0:eth3")
    return Endpoint(node, ifname)


def parse_endpoint(lab: Attached, text: str) -> Endpoint:
    """A link end of the running lab, from what a person typed."""
    ep = parse_end(text)
    fabric = lab.fabric
    require_node(fabric, ep.node)
    try:
        fabric.link_at(ep)
    except KeyError:
        names = ", ".join(sorted({lk.end(ep.node).ifname for lk in fabric.links_of(ep.node)},
                                 key=lambda n: int(n.removeprefix("eth"))))
        raise UsageError(f"{ep.node} has no link on {ep.ifname}; "
                         f"its links are on {names}") from None
    return ep


# -- the record on disk ---------------------------------------------------------------


def _path(lab: Attached):
    return lab.state.dir / "faults.json"


def active(lab: Attached) -> list[Fault]:
    path = _path(lab)
    return [Fault.from_dict(d, str(path)) for d in read_json(path, [])]


def _save(lab: Attached, faults: list[Fault]) -> None:
    write_json(_path(lab), [f.to_dict() for f in faults])


def hidden_in_force(lab: Attached) -> list[Fault]:
    return [f for f in active(lab) if f.hidden]


_HIDING: ContextVar[bool] = ContextVar("hiding", default=False)


@contextmanager
def hidden() -> Iterator[None]:
    """Faults applied inside are recorded hidden (before they are applied, as any):
    `with faults.hidden(): faults.blackhole(lab, "t1-p0-0")`."""
    token = _HIDING.set(True)
    try:
        yield
    finally:
        _HIDING.reset(token)


def _refuse_hidden(lab: Attached, what: str) -> None:
    """With a hidden fault in force, an error about the links it holds would say where
    it is: refuse every other fault change, whatever it names."""
    if hidden_in_force(lab):
        raise UsageError(f"{what}: a blind drill's hidden fault is in force; answer it "
                         "(`twin drill answer NODE:IF|NODE`), give up (`twin drill "
                         "reveal`), or `twin fault clear` first")


def log_event(lab: Attached, event: str, fault: Fault) -> dict:
    """One line of the lab's fault timeline: wall time and CLOCK_MONOTONIC ns."""
    entry = {"t_wall": time.time(), "t_mono_ns": time.monotonic_ns(), "event": event,
             "kind": fault.kind.value, "target": fault.target,
             "ends": fault.end_names()}
    if fault.hidden:
        entry["hidden"] = True
    with open(lab.state.dir / "events.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def events(lab: Attached) -> list[dict]:
    try:
        lines = (lab.state.dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _link(lab: Attached, fault: Fault) -> Link:
    return next(lk for lk in lab.fabric.links if lk.id == fault.link)


# -- the fault types --------------------------------------------------------------------


class FaultType(ABC):
    kind: ClassVar[FaultKind]

    @abstractmethod
    def apply(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def revert(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """After `node` restarted: apply again what it lost; the ends touched."""


TYPES: dict[FaultKind, FaultType] = {}


def fault_type(cls: type[FaultType]) -> type[FaultType]:
    TYPES[cls.kind] = cls()
    return cls


@fault_type
class LinkDown(FaultType):
    kind = FaultKind.LINK_DOWN

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        link = _link(lab, fault)
        _restore_link(lab, link.a, link.b)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """Both ends of a restarted node's link came back up (it was re-programmed,
        and so was its peer): set down again the ends the fault holds down."""
        link = _link(lab, fault)
        if node not in (link.a.node, link.b.node):
            return []
        self.apply(lab, fault)
        return list(fault.ends)


class LinksDown(FaultType):
    """A fault over several links (a switch, a NIC port, a plane): its ends down."""

    def apply(self, lab: Attached, fault: Fault) -> None:
        for e in fault.ends:
            lab.runtime.set_link_state(e.node, e.ifname, False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        held = set(fault.links)
        links = [lk for lk in lab.fabric.links if lk.id in held]
        _restore_link(lab, *[e for lk in links for e in (lk.a, lk.b)])

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The restarted node and its peers were re-programmed, their links up: set
        down again the ends this fault holds on the restarted node's links."""
        mine = {lk.id for lk in lab.fabric.links_of(node)} & set(fault.links)
        again = [e for e in fault.ends
                 if lab.fabric.link_at(e).id in mine]
        for e in again:
            lab.runtime.set_link_state(e.node, e.ifname, False)
        return again


@fault_type
class SwitchDown(LinksDown):
    kind = FaultKind.SWITCH_DOWN


@fault_type
class NicDown(LinksDown):
    kind = FaultKind.NIC_DOWN


@fault_type
class PlaneDown(LinksDown):
    kind = FaultKind.PLANE_DOWN


class Reprogrammed(FaultType):
    """A fault in a node's kernel state (a table, a route, a qdisc) that re-applying
    the node's plan undoes: revert re-programs the node; a restart (which
    re-programs it) needs the fault applied again."""

    def revert(self, lab: Attached, fault: Fault) -> None:
        self.undo(lab, fault)
        node = fault.ends[0].node
        phases.configure(lab.runtime, [lab.plan[node]], Steps())

    def undo(self, lab: Attached, fault: Fault) -> None:
        """What re-programming does not undo (an nft table, a qdisc); nothing by default."""

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """A restart re-programs the node and its link peers: either undoes this."""
        mine = fault.ends[0].node
        if mine != node and mine not in {lk.peer(node).node for lk in lab.fabric.links_of(node)}:
            return []
        self.apply(lab, fault)  # idempotent
        return [fault.ends[0]]


@fault_type
class Blackhole(Reprogrammed):
    kind = FaultKind.BLACKHOLE

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "-f", "-"], input=blackhole_rules(
            end.ifname or None, blackhole_table(end.ifname), lab.runtime.owner.tag))

    def undo(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "delete", "table", "ip6",
                                    blackhole_table(end.ifname)], check=False)

    def revert(self, lab: Attached, fault: Fault) -> None:
        self.undo(lab, fault)  # nothing else changed: no need to re-program

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The table lives in the node's namespace: only its own restart loses it."""
        if fault.ends[0].node != node:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]


@fault_type
class SidLoss(Reprogrammed):
    kind = FaultKind.SID_LOSS

    def apply(self, lab: Attached, fault: Fault) -> None:
        lab.dataplane.remove_sids(lab.runtime, lab.plan[fault.ends[0].node])


@fault_type
class RouteCorrupt(Reprogrammed):
    kind = FaultKind.ROUTE_CORRUPT

    def apply(self, lab: Attached, fault: Fault) -> None:
        node = fault.ends[0].node
        good, bad = _corruption(lab.plan[node])
        lab.runtime.exec(node, ["ip", "-6", *bad.iproute2().split()])


@fault_type
class LinkRate(Reprogrammed):
    kind = FaultKind.LINK_RATE

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        rate = int(fault.detail)
        mtu = next(i.mtu for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        lab.runtime.exec(end.node, ["tc", "qdisc", "replace", "dev", end.ifname, "root", "tbf",
                                    "rate", f"{rate}bit", "burst", str(tbf_burst(rate, mtu)),
                                    "latency", "20ms"])

    def undo(self, lab: Attached, fault: Fault) -> None:
        """The plan re-shapes a link that has a rate; one without loses the qdisc here."""
        end = fault.ends[0]
        planned = next(i for i in lab.plan[end.node].interfaces if i.name == end.ifname)
        if not planned.rate_bps:
            lab.runtime.exec(end.node, ["tc", "qdisc", "del", "dev", end.ifname, "root"],
                             check=False)


def blackhole_table(ifname: str) -> str:
    return "twin_blackhole" + (f"_{ifname}" if ifname else "")


def blackhole_rules(ifname: str | None, table: str, owner_tag: str = "") -> str:
    """nft -f input: drop every packet the node forwards (out of `ifname`, if given)."""
    match = f'oifname "{ifname}" ' if ifname else ""
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    return (f"add table ip6 {table}\ndelete table ip6 {table}\n"  # loaded again: fresh
            f"table ip6 {table} {{\n{comment}"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -5; policy accept;\n"
            f"    {match}counter drop\n"
            f"  }}\n}}\n")


def _corruption(node: NodePlan) -> tuple[Route, Route]:
    """The node's first forwarding route, and the same route out of the next port's
    neighbour instead (deterministic, so a drill names it in advance)."""
    forwarding = [r for r in node.routes if r.via]
    if len(forwarding) < 2:
        raise UsageError(f"{node.name} has no second port to misroute out of")
    good = forwarding[0]
    other = next(r for r in forwarding[1:] if r.dev != good.dev)
    return good, replace(good, dev=other.dev, via=other.via, note="corrupted")


@fault_type
class LinkFlap(LinkDown):
    """While it runs, the link goes down and up; reverted (or after a crash, cleared),
    the link is up and both ends re-programmed, as for link-down."""

    kind = FaultKind.LINK_FLAP

    def apply(self, lab: Attached, fault: Fault) -> None:
        """The flapping itself is `link_flap`'s loop; the record only guards it."""


@fault_type
class SwitchReboot(FaultType):
    """A node restarting: in force for as long as the restart takes."""

    kind = FaultKind.SWITCH_REBOOT

    def apply(self, lab: Attached, fault: Fault) -> None:
        restart_node(lab, fault.target)
        reapply(lab, fault.target)

    def revert(self, lab: Attached, fault: Fault) -> None:
        """A restart interrupted part way: the node gets its plan and links again."""
        restart_node(lab, fault.target)
        reapply(lab, fault.target)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        return []


@fault_type
class LinkLoss(FaultType):
    kind = FaultKind.LINK_LOSS

    def apply(self, lab: Attached, fault: Fault) -> None:
        end = fault.ends[0]
        lab.runtime.exec(end.node, ["nft", "-f", "-"],
                         input=loss_rules(end.ifname, fault.percent, loss_table(fault.link),
                                          lab.runtime.owner.tag))

    def revert(self, lab: Attached, fault: Fault) -> None:
        lab.runtime.exec(fault.ends[0].node,
                         ["nft", "delete", "table", "ip6", loss_table(fault.link)], check=False)

    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """The rule lives in the switch end's namespace: only that node's restart
        loses it (its peer's restart leaves the table, which matches by name)."""
        if fault.ends[0].node != node:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]


def loss_table(link_id: str) -> str:
    """The nftables table that carries one link's loss rule (named after the link)."""
    return "twin_loss_" + "".join(c if c.isalnum() else "_" for c in link_id)


def loss_rules(ifname: str, percent: float, table: str, owner_tag: str = "") -> str:
    """nft -f input: drop `percent`% of packets forwarded out of, or into, `ifname`.
    numgen random draws per packet, so the loss is independent (Bernoulli). The
    table's comment names its owner (twin.owner)."""
    per_million = round(percent * 10_000)
    comment = f"  comment \"{owner_tag}\"\n" if owner_tag else ""
    return (f"table ip6 {table} {{\n{comment}"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -10; policy accept;\n"
            f"    oifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"    iifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"  }}\n}}\n")


def _refuse_held(lab: Attached, links: list[Link], what: str) -> None:
    """No two faults share a link: name the fault in the way, and how to revert it."""
    _refuse_hidden(lab, what)
    wanted = {lk.id for lk in links}
    for f in active(lab):
        shared = wanted & set(f.all_links)
        if shared:
            if f.links:
                down = isinstance(TYPES[f.kind], LinksDown)
                held = (f"is already down as part of {f.kind} {f.target}" if down
                        else f"already has a {f.kind} fault ({f.target})")
                how = f"`twin fault clear {f.target}`"
            else:
                held = ("is already down" if f.kind is FaultKind.LINK_DOWN
                        else f"already has a {f.kind} fault")
                how = f"`twin fault link-up {f.ends[0]}`"
            raise UsageError(f"{what}: link {min(shared)} {held}; {how} first")


def _restore_link(lab: Attached, *ends: Endpoint) -> None:
    for e in ends:
        lab.runtime.set_link_state(e.node, e.ifname, True)
    nodes = sorted({e.node for e in ends})
    phases.configure(lab.runtime, [lab.plan[n] for n in nodes], Steps())


# -- the commands -------------------------------------------------------------------------


def _drop(lab: Attached, fault: Fault) -> None:
    """Forget one fault's record (after it is reverted)."""
    _save(lab, [f for f in active(lab) if (f.kind, f.link) != (fault.kind, fault.link)])


def _inject(lab: Attached, fault: Fault) -> Fault:
    if _HIDING.get():
        fault = replace(fault, hidden=True)
    _save(lab, [*active(lab), fault])  # recorded before applied
    log_event(lab, "apply", fault)
    changed = time.monotonic_ns()
    TYPES[fault.kind].apply(lab, fault)
    return replace(fault, changed_ns=changed)


def _revert(lab: Attached, fault: Fault) -> None:
    TYPES[fault.kind].revert(lab, fault)
    log_event(lab, "revert", fault)


def link_down(lab: Attached, text: str, both: bool = False) -> Fault:
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    _refuse_held(lab, [link], f"link-down {text}")
    ends = (ep, link.peer(ep.node)) if both else (ep,)
    return _inject(lab, Fault(FaultKind.LINK_DOWN, link.id, ends, time.time()))


def link_loss(lab: Attached, text: str, percent: float) -> Fault:
    """Random loss on a link, in both directions, applied at a switch end (nftables)."""
    if not 0 < percent <= 100:  # NaN fails every comparison, so it is refused too
        raise UsageError(f"loss must be a percentage in (0, 100], got {percent}")
    link, switch_end = _switch_end(lab, text, f"link-loss {text}")
    return _inject(lab, Fault(FaultKind.LINK_LOSS, link.id, (switch_end,), time.time(),
                              percent))


def _switch_end(lab: Attached, text: str, what: str) -> tuple[Link, Endpoint]:
    """The link named by either end, and its end on a switch (where a fault that
    shapes or drops its traffic lives), once no other fault holds it."""
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    _refuse_held(lab, [link], what)
    return link, ep if lab.fabric.node(ep.node).is_switch else link.peer(ep.node)


def link_up(lab: Attached, text: str, force: bool = False) -> Fault | None:
    """Revert the fault on a link. A link with no fault recorded is refused, unless
    `force`: then it is healed as a link set down by hand would be (both ends up,
    both re-programmed)."""
    _refuse_hidden(lab, f"link-up {text}")
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    faults = active(lab)
    fault = next((f for f in faults if link.id in f.all_links), None)
    if fault is not None and fault.links:
        raise UsageError(f"link {link.id} is down as part of {fault.kind} {fault.target}; "
                         f"`twin fault clear {fault.target}` reverts all of it")
    if fault is None and not force:
        inforce = ", ".join(f.link for f in faults) or "none"
        raise UsageError(f"link {link.id} has no fault in force (faults in force: {inforce}); "
                         "--force brings both ends up and re-programs them anyway")
    if fault is not None:
        _revert(lab, fault)
    else:
        _restore_link(lab, link.a, link.b)
    _save(lab, [f for f in faults if f is not fault])
    return fault


def _links_down(lab: Attached, kind: FaultKind, target: str, links: list[Link],
                ends: list[Endpoint]) -> Fault:
    _refuse_held(lab, links, f"{kind} {target}")
    return _inject(lab, Fault(kind, target, tuple(ends), time.time(),
                              links=tuple(lk.id for lk in links)))


def switch_down(lab: Attached, node: str) -> Fault:
    """A dead switch: every one of its links down at the switch (its peers lose carrier)."""
    sw = require_node(lab.fabric, node)
    if not sw.is_switch:
        raise UsageError(f"{node} is a host, not a switch; a host's port: "
                         f"`twin fault nic-down {node}:PLANE`")
    links = lab.fabric.links_of(node)
    return _links_down(lab, FaultKind.SWITCH_DOWN, node, links, [lk.end(node) for lk in links])


def nic_down(lab: Attached, text: str) -> Fault:
    """One NIC port of a host, HOST:PLANE, down at the host."""
    host, sep, plane_text = text.partition(":")
    planes = list(lab.fabric.nic_planes)
    if not sep or not plane_text.isdigit():
        raise UsageError(f"{text!r}: name a NIC port as HOST:PLANE, e.g. r0h0:{planes[-1]}")
    node = require_node(lab.fabric, host)
    if node.is_switch:
        raise UsageError(f"{host} is a switch, not a host; a dead switch: "
                         f"`twin fault switch-down {host}`")
    plane = int(plane_text)
    links = [lk for lk in lab.fabric.links_of(host) if lk.plane == plane]
    if not links:
        raise UsageError(f"{host} has no NIC port on plane {plane}; its planes: "
                         f"{', '.join(map(str, planes))}")
    return _links_down(lab, FaultKind.NIC_DOWN, text, links, [lk.end(host) for lk in links])


def plane_down(lab: Attached, text: str) -> Fault:
    """Every link of one plane, down at its switches."""
    planes = sorted({lk.plane for lk in lab.fabric.links})
    if not text.isdigit() or int(text) not in planes:
        raise UsageError(f"no plane {text!r} in lab {lab.lab}; its planes: "
                         f"{', '.join(map(str, planes))}")
    links = [lk for lk in lab.fabric.links if lk.plane == int(text)]
    ends = [e for lk in links for e in (lk.a, lk.b) if lab.fabric.node(e.node).is_switch]
    return _links_down(lab, FaultKind.PLANE_DOWN, text, links, ends)


def blackhole(lab: Attached, text: str) -> Fault:
    """NODE drops what it forwards (NODE:IF: what it forwards out of IF), silently."""
    if ":" in text:
        ep = parse_endpoint(lab, text)
        links = [lab.fabric.link_at(ep)]
    else:
        require_node(lab.fabric, text)
        ep = Endpoint(text, "")
        links = lab.fabric.links_of(text)
    if not lab.fabric.node(ep.node).is_switch:
        raise UsageError(f"{ep.node} is a host: it forwards nothing; blackhole a switch")
    _refuse_held(lab, links, f"blackhole {text}")
    return _inject(lab, Fault(FaultKind.BLACKHOLE, text, (ep,), time.time(),
                              links=tuple(lk.id for lk in links)))


def _node_fault(lab: Attached, kind: FaultKind, node: str, detail: str = "") -> Fault:
    """A fault in a whole node's kernel state: it holds every link of the node."""
    links = lab.fabric.links_of(node)
    _refuse_held(lab, links, f"{kind} {node}")
    return _inject(lab, Fault(kind, node, (Endpoint(node, ""),), time.time(),
                              links=tuple(lk.id for lk in links), detail=detail))


def sid_loss(lab: Attached, node: str) -> Fault:
    """NODE's local SIDs are gone (on its data plane: the routes, or the programs): what
    arrives for them is dropped."""
    require_node(lab.fabric, node)
    if not lab.plan[node].sids:
        raise UsageError(f"{node} has no local SID")
    return _node_fault(lab, FaultKind.SID_LOSS, node)


def route_corrupt(lab: Attached, node: str) -> Fault:
    """One of NODE's static routes points out of the wrong port."""
    require_node(lab.fabric, node)
    good, bad = _corruption(lab.plan[node])
    return _node_fault(lab, FaultKind.ROUTE_CORRUPT, node,
                       f"{good.dst} via {good.via} dev {good.dev} -> via {bad.via} dev {bad.dev}")


def link_rate(lab: Attached, text: str, rate_text: str) -> Fault:
    """A degraded link: shaped to RATE at its switch end (tbf)."""
    from twin.units import parse_rate

    rate = parse_rate(rate_text)
    if rate is None or rate <= 0:
        raise UsageError(f"rate {rate_text!r}: give bits per second with a unit, e.g. 100mbit")
    link, switch_end = _switch_end(lab, text, f"link-rate {text}")
    return _inject(lab, Fault(FaultKind.LINK_RATE, link.id, (switch_end,), time.time(),
                              detail=str(rate)))


def link_flap(lab: Attached, text: str, count: int, period_s: float, both: bool = False,
              on_step=None) -> Fault:
    """Take a link down and up `count` times, `period_s` apart (down half of each
    period). The fault is recorded before the first flap and dropped after the
    link is back up; an exception, Ctrl-C or SIGTERM (see the CLI) brings it up."""
    if not 1 <= count <= 10_000:
        raise UsageError(f"--count must be 1 to 10000 flaps (got {count})")
    if not 0.01 <= period_s <= 3600:  # NaN fails both comparisons: refused too
        raise UsageError(f"--period must be 0.01 to 3600 seconds (got {period_s})")
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    _refuse_held(lab, [link], f"link-flap {text}")
    ends = (ep, link.peer(ep.node)) if both else (ep,)
    fault = _inject(lab, Fault(FaultKind.LINK_FLAP, link.id, ends, time.time(),
                               detail=f"{count}x{period_s:g}s"))
    try:
        for i in range(count):
            for e in ends:
                lab.runtime.set_link_state(e.node, e.ifname, False)
            log_event(lab, "down", fault)
            time.sleep(period_s / 2)
            _restore_link(lab, link.a, link.b)
            log_event(lab, "up", fault)
            if on_step:
                on_step(i + 1, count)
            if i + 1 < count:
                time.sleep(period_s / 2)
    finally:
        _revert(lab, fault)
        _drop(lab, fault)
    return fault


def switch_reboot(lab: Attached, node: str) -> Fault:
    """Restart NODE as a fault: on the timeline from the moment it goes to when it is
    back, re-wired, re-programmed, its faults applied again."""
    require_node(lab.fabric, node)
    _refuse_hidden(lab, f"switch-reboot {node}")
    links = lab.fabric.links_of(node)
    fault = Fault(FaultKind.SWITCH_REBOOT, node, (Endpoint(node, ""),), time.time(),
                  links=tuple(lk.id for lk in links))
    # Not held against other faults: a reboot re-applies the faults on its links.
    _save(lab, [*active(lab), fault])
    log_event(lab, "apply", fault)
    changed = time.monotonic_ns()
    try:
        TYPES[fault.kind].apply(lab, fault)
    finally:
        log_event(lab, "revert", fault)
        _drop(lab, fault)
    return replace(fault, changed_ns=changed)


def reapply(lab: Attached, node: str) -> list[str]:
    """Apply again, on `node` that restarted and came back bare, every fault in
    force that it lost; the ends touched, as NODE:IFNAME."""
    again = []
    for fault in active(lab):
        again.extend(str(e) if e.ifname else e.node
                     for e in TYPES[fault.kind].reapply(lab, fault, node))
    return again


def clear_hidden(lab: Attached) -> list[Fault]:
    """Revert the hidden faults (a blind drill's, when it ends), and only those."""
    faults = hidden_in_force(lab)
    for fault in reversed(faults):
        _revert(lab, fault)
        _drop(lab, fault)
    return faults


def clear(lab: Attached, target: str | None = None) -> list[Fault]:
    """Revert every fault in force, newest first; or only the one on `target` (its
    target as `fault list` shows it: NODE:IF, NODE, HOST:PLANE or a plane). A hidden
    fault is reverted only by clearing them all (by target, it would be found)."""
    faults = active(lab)
    if target is not None:
        _refuse_hidden(lab, f"fault clear {target}")
        faults = [f for f in faults if target in (f.target, *map(str, f.ends))]
        if not faults:
            inforce = ", ".join(f.target for f in active(lab)) or "none"
            raise UsageError(f"no fault in force on {target!r} (faults in force: {inforce})")
    for fault in reversed(faults):
        _revert(lab, fault)
        _drop(lab, fault)
    return faults

