"""Fault targets as a person types them, checked against the lab's fabric."""

from __future__ import annotations

from twin.errors import UsageError
from twin.fabric.model import Endpoint
from twin.lab import Attached, require_node


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
