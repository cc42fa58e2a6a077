"""Fault targets: what a fault is put on, parsed once from the text a person types
(or a drill file gives) into a typed value, checked against the lab's fabric.

    LinkEnd      NODE:IF      one end of a link, e.g. t0-p0-r0:eth3
    NodeTarget   NODE         a node, e.g. t1-p0-0
    NicPort      HOST:PLANE   one NIC port of a host, e.g. r0h0:2 (or several: r0h0:1,3)
    PlaneTarget  P            a plane, e.g. 2
    LinkTarget   A--B         a link by its id, e.g. t0-p0-r0:eth3--t1-p0-0:eth1: what a
                              fault on one link records (a person names it by an end)

Each prints as its canonical text (`str`), covers some links (`links`), and is drawn at
random two ways: `draw` over the whole fabric (a blind drill), and by the forms of a
drill file's `random:` target (RANDOM), among what the drill's traffic crosses. A
fault kind names the target types it takes (twin.faults.kinds); `parse_target` picks
the first whose syntax the text has.

A fault's record (twin.faults.record) keeps what the fault is on as one of these, and
writes it as its canonical text; `recorded` reads that text back by syntax alone (no
fabric), as each type prints itself, so records written by any twin still load.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from twin.errors import UsageError
from twin.fabric.model import Endpoint, Fabric, Link, Tier
from twin.lab import Attached, require_node


@dataclass(frozen=True)
class Scope:
    """What a drill's traffic crosses: a random target is drawn among it."""

    hosts: tuple[str, ...]
    racks: tuple[int, ...]
    planes: tuple[int, ...]

    @classmethod
    def of(cls, fabric: Fabric, pairs: list[tuple[str, str]]) -> Scope:
        hosts = sorted({h for pair in pairs for h in pair})
        return cls(tuple(hosts), tuple(sorted({fabric.node(h).rack for h in hosts})),
                   tuple(fabric.nic_planes))


Candidates = Callable[[Fabric, Scope], list[str]]


class Target(ABC):
    form: ClassVar[str]  # how one is written, for hints
    metavar: ClassVar[str]  # its argument on the command line
    random: ClassVar[dict[str, Candidates]] = {}  # a drill's random form -> what it draws from

    @classmethod
    @abstractmethod
    def fits(cls, text: str) -> bool:
        """The text has this target's syntax (among several a kind takes)."""

    @classmethod
    @abstractmethod
    def parse(cls, fabric: Fabric, text: str) -> Target:
        """The target `text` names; a UsageError naming it and a hint if there is none."""

    @abstractmethod
    def links(self, fabric: Fabric) -> list[Link]:
        """The links it covers."""

    @classmethod
    @abstractmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        """One at random over the whole fabric (a blind drill's draw)."""


def parse_target(fabric: Fabric, text: str, types: tuple[type[Target], ...]) -> Target:
    """`text` as the first of `types` whose syntax it has (else as the first type, whose
    error then says how to write one)."""
    kind = next((t for t in types if t.fits(text)), types[0])
    return kind.parse(fabric, text)


def _switch_names(fabric: Fabric) -> list[str]:
    return sorted(n.name for n in fabric.switches)


def _fabric_links(fabric: Fabric) -> list[Link]:
    return sorted((lk for lk in fabric.links if lk.kind == "fabric"), key=lambda lk: lk.id)


@dataclass(frozen=True)
class LinkEnd(Target):
    node: str
    ifname: str

    form = "NODE:IF, e.g. t0-p0-r0:eth3"
    metavar = "ENDPOINT"
    random = {
        "t0-t1-link": lambda fabric, s: [
            str(lk.a) for lk in fabric.links if lk.kind == "fabric"
            and fabric.node(lk.a.node).rack in s.racks and lk.plane in s.planes],
        "host-link": lambda fabric, s: [  # the T0's end
            str(lk.b) for lk in fabric.links if lk.kind == "host" and lk.a.node in s.hosts],
    }

    def __str__(self) -> str:
        return f"{self.node}:{self.ifname}"

    @property
    def end(self) -> Endpoint:
        return Endpoint(self.node, self.ifname)

    @classmethod
    def fits(cls, text: str) -> bool:
        return ":" in text

    @classmethod
    def parse(cls, fabric: Fabric, text: str) -> LinkEnd:
        ep = parse_end(text)
        require_node(fabric, ep.node)
        try:
            fabric.link_at(ep)
        except KeyError:
            names = ", ".join(sorted({lk.end(ep.node).ifname for lk in fabric.links_of(ep.node)},
                                     key=lambda n: int(n.removeprefix("eth"))))
            raise UsageError(f"{ep.node} has no link on {ep.ifname}; "
                             f"its links are on {names}") from None
        return cls(ep.node, ep.ifname)

    def link(self, fabric: Fabric) -> Link:
        return fabric.link_at(self.end)

    def links(self, fabric: Fabric) -> list[Link]:
        return [self.link(fabric)]

    def switch_end(self, fabric: Fabric) -> Endpoint:
        """Its link's end on a switch (where a fault that drops or shapes traffic lives)."""
        return self.end if fabric.node(self.node).is_switch else self.link(fabric).peer(self.node)

    @classmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        link = rng.choice(_fabric_links(fabric))
        return str(rng.choice((link.a, link.b)))


@dataclass(frozen=True)
class NodeTarget(Target):
    name: str

    form = "NODE, e.g. t1-p0-0"
    metavar = "NODE"
    random = {
        "t1": lambda fabric, s: [n.name for n in fabric.nodes
                                 if n.tier is Tier.T1 and n.plane in s.planes],
        "t0": lambda fabric, s: [n.name for n in fabric.nodes if n.tier is Tier.T0
                                 and n.rack in s.racks and n.plane in s.planes],
    }

    def __str__(self) -> str:
        return self.name

    @classmethod
    def fits(cls, text: str) -> bool:
        return ":" not in text

    @classmethod
    def parse(cls, fabric: Fabric, text: str) -> NodeTarget:
        require_node(fabric, text)
        return cls(text)

    def is_switch(self, fabric: Fabric) -> bool:
        return fabric.node(self.name).is_switch

    def links(self, fabric: Fabric) -> list[Link]:
        return fabric.links_of(self.name)

    @classmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        return rng.choice(_switch_names(fabric))


@dataclass(frozen=True)
class NicPort(Target):
    """One NIC port of a host, or several ports of it at once (HOST:P,P: half a NIC
    flapping together, as one fault that goes down and comes back up as one)."""

    host: str
    planes: tuple[int, ...]

    form = "HOST:PLANE, e.g. r0h0:1, or several ports of it: r0h0:1,3"
    metavar = "HOST:PLANE"
    random = {"nic-port": lambda fabric, s: [f"{h}:{p}" for h in s.hosts for p in s.planes]}

    def __str__(self) -> str:
        return f"{self.host}:{','.join(map(str, self.planes))}"

    @classmethod
    def fits(cls, text: str) -> bool:
        return all(p.isdigit() for p in text.partition(":")[2].split(","))

    @classmethod
    def parse(cls, fabric: Fabric, text: str) -> NicPort:
        host, sep, plane_text = text.partition(":")
        planes = list(fabric.nic_planes)
        given = plane_text.split(",")
        if not sep or not all(p.isdigit() for p in given):
            raise UsageError(f"{text!r}: name a NIC port as HOST:PLANE, e.g. r0h0:{planes[-1]}"
                             f" (several: r0h0:{planes[0]},{planes[-1]})")
        if len(set(given)) != len(given):
            raise UsageError(f"{text!r}: names a port twice")
        if require_node(fabric, host).is_switch:
            raise UsageError(f"{host} is a switch, not a host; a dead switch: "
                             f"`twin fault switch-down {host}`")
        port = cls(host, tuple(sorted(int(p) for p in given)))
        missing = [p for p in port.planes
                   if not any(lk.plane == p for lk in fabric.links_of(host))]
        if missing:
            raise UsageError(f"{host} has no NIC port on plane {missing[0]}; its planes: "
                             f"{', '.join(map(str, planes))}")
        return port

    def links(self, fabric: Fabric) -> list[Link]:
        return [lk for lk in fabric.links_of(self.host) if lk.plane in self.planes]

    @classmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        host = rng.choice(sorted(h.name for h in fabric.hosts))
        return f"{host}:{rng.choice(list(fabric.nic_planes))}"


@dataclass(frozen=True)
class PlaneTarget(Target):
    plane: int

    form = "a plane number, e.g. 2"
    metavar = "PLANE"
    random = {"plane": lambda fabric, s: [str(p) for p in s.planes]}

    def __str__(self) -> str:
        return str(self.plane)

    @classmethod
    def fits(cls, text: str) -> bool:
        return text.isdigit()

    @classmethod
    def parse(cls, fabric: Fabric, text: str) -> PlaneTarget:
        planes = sorted({lk.plane for lk in fabric.links})
        if not text.isdigit() or int(text) not in planes:
            raise UsageError(f"no plane {text!r} in lab {fabric.name}; its planes: "
                             f"{', '.join(map(str, planes))}")
        return cls(int(text))

    def links(self, fabric: Fabric) -> list[Link]:
        return [lk for lk in fabric.links if lk.plane == self.plane]

    @classmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        return str(rng.choice(list(fabric.nic_planes)))


@dataclass(frozen=True)
class LinkTarget(Target):
    """A link, by its id: what a fault on one link (link-down, link-loss, ...) records."""

    id: str

    form = "a link id, e.g. t0-p0-r0:eth3--t1-p0-0:eth1"
    metavar = "LINK"

    def __str__(self) -> str:
        return self.id

    @classmethod
    def fits(cls, text: str) -> bool:
        return "--" in text

    @classmethod
    def parse(cls, fabric: Fabric, text: str) -> LinkTarget:
        if not any(lk.id == text for lk in fabric.links):
            raise UsageError(f"no link {text!r} in lab {fabric.name}; name a link by one of "
                             "its ends, NODE:IF, e.g. t0-p0-r0:eth3")
        return cls(text)

    def links(self, fabric: Fabric) -> list[Link]:
        return [lk for lk in fabric.links if lk.id == self.id]

    @classmethod
    def draw(cls, fabric: Fabric, rng: random.Random) -> str:
        return rng.choice(_fabric_links(fabric)).id


TARGETS: tuple[type[Target], ...] = (LinkEnd, NodeTarget, NicPort, PlaneTarget)


def recorded(text: str) -> Target:
    """A fault record's target from its canonical text, by syntax alone: a link id
    (A--B), a plane (P), a NIC port (HOST:P[,P]), a link end (NODE:IF) or a node."""
    if LinkTarget.fits(text):
        return LinkTarget(text)
    if PlaneTarget.fits(text):
        return PlaneTarget(int(text))
    node, sep, rest = text.partition(":")
    if not sep:
        return NodeTarget(text)
    if rest and NicPort.fits(text):
        return NicPort(node, tuple(int(p) for p in rest.split(",")))
    return LinkEnd(node, rest)


def random_forms() -> dict[str, type[Target]]:
    """A drill's random target forms, each with the target type it draws."""
    return {form: t for t in TARGETS for form in t.random}


def draw_random(form: str, fabric: Fabric, scope: Scope, rng: random.Random,
                taken: Callable[[str], bool] | None = None) -> str:
    """A drill's `random: FORM` target, drawn with `rng` among what the traffic crosses,
    leaving out those `taken` says another fault holds (when none is, the draw is the
    one it always was: a seed replays the same targets)."""
    forms = random_forms()
    if form not in forms:
        raise UsageError(f"unknown random target {form!r}")
    choices = forms[form].random[form](fabric, scope)
    if taken is not None:
        choices = [c for c in choices if not taken(c)]
        if not choices:
            raise UsageError(f"no random {form} is left that the drill's other faults in "
                             "force at the same time do not hold")
    return choices[rng.randrange(len(choices))]


def parse_end(text: str) -> Endpoint:
    """`NODE:IFNAME` -> Endpoint (syntax only; `parse_endpoint` checks it is a link end)."""
    node, sep, ifname = text.partition(":")
    if not sep or not node or not ifname:
        raise UsageError(f"{text!r}: name a link end as NODE:IFNAME, e.g. t0-p0-r0:eth3")
    return Endpoint(node, ifname)


def parse_endpoint(lab: Attached, text: str) -> Endpoint:
    """A link end of the running lab, from what a person typed."""
    return LinkEnd.parse(lab.fabric, text).end
