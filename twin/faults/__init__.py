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

import time
from dataclasses import replace

from twin.errors import UsageError
from twin.fabric.model import Endpoint, Link
from twin.faults.kinds import (
    TYPES,
    FaultType,
    LinksDown,
    _corruption,
    _restore_link,
    blackhole_rules,
    blackhole_table,
    loss_rules,
    loss_table,
    reapply,
)
from twin.faults.record import (
    _HIDING,
    Fault,
    FaultKind,
    _drop,
    _refuse_hidden,
    _save,
    active,
    events,
    hidden,
    hidden_in_force,
    log_event,
)
from twin.faults.targets import parse_end, parse_endpoint
from twin.lab import Attached, require_node

__all__ = ["TYPES", "Endpoint", "Fault", "FaultKind", "FaultType", "active", "blackhole",
           "blackhole_rules", "blackhole_table", "clear", "clear_hidden", "events", "hidden",
           "hidden_in_force", "link_down", "link_flap", "link_loss", "link_rate", "link_up",
           "log_event", "loss_rules", "loss_table", "nic_down", "parse_end", "parse_endpoint",
           "plane_down", "reapply", "route_corrupt", "sid_loss", "switch_down", "switch_reboot",
           "_corruption"]


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


# -- the commands -------------------------------------------------------------------------


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
