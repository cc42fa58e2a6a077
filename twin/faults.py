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
    kind: str  # link-down | link-loss
    link: str  # link id
    ends: tuple[str, ...]  # "node:ifname" where it is applied
    since: float
    percent: float = 0.0  # link-loss only

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
    return [Fault(d["kind"], d["link"], tuple(d["ends"]), d["since"], d.get("percent", 0.0))
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


def loss_table(link_id: str) -> str:
    """The nftables table that carries one link's loss rule (named after the link)."""
    return "twin_loss_" + "".join(c if c.isalnum() else "_" for c in link_id)


def loss_rules(ifname: str, percent: float, table: str) -> str:
    """nft -f input: drop `percent`% of packets forwarded out of, or into, `ifname`.
    numgen random draws per packet, so the loss is independent (Bernoulli)."""
    per_million = round(percent * 10_000)
    return (f"table ip6 {table} {{\n"
            f"  chain forward {{\n"
            f"    type filter hook forward priority -10; policy accept;\n"
            f"    oifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"    iifname \"{ifname}\" numgen random mod 1000000 < {per_million} counter drop\n"
            f"  }}\n}}\n")


def link_loss(lab: Attached, text: str, percent: float) -> Fault:
    """Random loss on a link, in both directions, applied at a switch end (nftables)."""
    if not 0 < percent <= 100:
        raise UsageError(f"loss must be a percentage in (0, 100], got {percent}")
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    switch_end = ep if lab.fabric.node(ep.node).is_switch else link.peer(ep.node)
    faults = active(lab)
    if any(f.link == link.id for f in faults):
        raise UsageError(f"link {link.id} already has a fault; clear it first")
    fault = Fault("link-loss", link.id, (str(switch_end),), time.time(), percent)
    _save(lab, [*faults, fault])  # recorded before applied
    lab.runtime.exec(switch_end.node, ["nft", "-f", "-"],
                     input=loss_rules(switch_end.ifname, percent, loss_table(link.id)))
    return fault


def _link(lab: Attached, fault: Fault):
    return next(lk for lk in lab.fabric.links if lk.id == fault.link)


def _revert(lab: Attached, fault: Fault) -> None:
    link = _link(lab, fault)
    if fault.kind == "link-loss":
        node = fault.ends[0].partition(":")[0]
        lab.runtime.exec(node, ["nft", "delete", "table", "ip6", loss_table(link.id)],
                         check=False)
    else:
        _restore_link(lab, link.a, link.b)


def link_up(lab: Attached, text: str) -> Fault | None:
    """Revert a link-down. Also heals a link set down by hand (no fault recorded)."""
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    faults = active(lab)
    fault = next((f for f in faults if f.link == link.id), None)
    if fault is not None and fault.kind == "link-loss":
        _revert(lab, fault)
    else:
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
        if fault.kind != "link-down":
            continue
        link = _link(lab, fault)
        if node not in (link.a.node, link.b.node):
            continue
        for end in fault.ends:
            ep_node, _, ifname = end.partition(":")
            lab.runtime.set_link_state(ep_node, ifname, False)
            again.append(end)
    return again


def clear(lab: Attached) -> list[Fault]:
    """Revert every fault in force, newest first."""
    faults = active(lab)
    for fault in reversed(faults):
        _revert(lab, fault)
        _save(lab, [f for f in active(lab) if f.link != fault.link])
    return faults
