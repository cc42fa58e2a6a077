"""Link faults with guaranteed revert.

A fault is recorded in <run dir>/<lab>/faults.json *before* it is applied,
so whatever happens next (Ctrl-C, a crash, a reboot of the orchestrator),
`twin fault clear` or `twin down` can undo it. Reverting a link-down brings
both ends up and re-applies both nodes' plans, because the kernel deleted
the interface's addresses and routes when it went down.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from twin.errors import UsageError
from twin.lab import Attached
from twin.model import Endpoint
from twin.state import read_json, write_json


@dataclass(frozen=True)
class Fault:
    kind: str  # link-down
    link: str  # link id
    ends: tuple[str, ...]  # "node:ifname" that were set down
    since: float

    def to_dict(self) -> dict:
        return asdict(self)


def parse_endpoint(lab: Attached, text: str) -> Endpoint:
    node, sep, ifname = text.partition(":")
    if not sep or not node or not ifname:
        raise UsageError(f"{text!r}: name a link end as NODE:IFNAME, e.g. t0-p0-r0:eth3")
    fabric = lab.fabric
    if not fabric.has_node(node):
        raise UsageError(f"no node {node!r} in lab {fabric.name}; "
                         f"nodes look like {fabric.nodes[0].name}, {fabric.hosts[0].name}")
    ep = Endpoint(node, ifname)
    try:
        fabric.link_at(ep)
    except KeyError:
        names = ", ".join(sorted({lk.end(node).ifname for lk in fabric.links_of(node)},
                                 key=lambda n: int(n.removeprefix("eth"))))
        raise UsageError(f"{node} has no link on {ifname}; its links are on {names}") from None
    return ep


def _path(lab: Attached):
    return lab.state.dir / "faults.json"


def active(lab: Attached) -> list[Fault]:
    return [Fault(d["kind"], d["link"], tuple(d["ends"]), d["since"])
            for d in read_json(_path(lab), [])]


def _save(lab: Attached, faults: list[Fault]) -> None:
    write_json(_path(lab), [f.to_dict() for f in faults])


def link_down(lab: Attached, text: str, both: bool = False) -> Fault:
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    faults = active(lab)
    if any(f.link == link.id for f in faults):
        raise UsageError(f"link {link.id} is already down; `twin fault link-up {text}` first")
    ends = (ep, link.peer(ep.node)) if both else (ep,)
    fault = Fault("link-down", link.id, tuple(str(e) for e in ends), time.time())
    _save(lab, [*faults, fault])  # recorded before applied
    for e in ends:
        lab.runtime.set_link_state(e.node, e.ifname, False)
    return fault


def link_up(lab: Attached, text: str) -> Fault | None:
    """Revert a link-down. Also heals a link set down by hand (no fault recorded)."""
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    faults = active(lab)
    fault = next((f for f in faults if f.link == link.id), None)
    _restore_link(lab, link.a, link.b)
    _save(lab, [f for f in faults if f is not fault])
    return fault


def _restore_link(lab: Attached, *ends: Endpoint) -> None:
    for e in ends:
        lab.runtime.set_link_state(e.node, e.ifname, True)
    for node in sorted({e.node for e in ends}):
        lab.runtime.configure(lab.plan[node])


def reapply(lab: Attached, node: str) -> list[str]:
    """Set down again the ends on `node`'s links that faults in force hold down
    (after the node restarted and came back with every link up)."""
    again = []
    for fault in active(lab):
        for end in fault.ends:
            ep_node, _, ifname = end.partition(":")
            link_nodes = fault.link.replace("--", ":").split(":")[::2]
            if node in link_nodes:
                lab.runtime.set_link_state(ep_node, ifname, False)
                again.append(end)
    return again


def clear(lab: Attached) -> list[Fault]:
    """Revert every fault in force, newest first."""
    faults = active(lab)
    for fault in reversed(faults):
        link = next(lk for lk in lab.fabric.links if lk.id == fault.link)
        _restore_link(lab, link.a, link.b)
        _save(lab, [f for f in active(lab) if f.link != fault.link])
    return faults
