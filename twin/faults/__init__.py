"""Faults with guaranteed revert.

A fault is recorded in <run dir>/<lab>/faults.json *before* it is applied,
so whatever happens next (Ctrl-C, a crash, a reboot of the orchestrator),
`twin fault clear` or `twin down` can undo it.

    record.py   the record: faults.json, events.jsonl, hidden faults
    targets.py  what a fault is put on, parsed once into a typed value: a link end
                (NODE:IF), a node, a NIC port (HOST:PLANE), a plane
    registry.py KINDS: every kind by name (a leaf: records read names against it)
    kinds.py    FaultType, one class per kind of fault, registered by name in KINDS:
                its target types and parameters, how it is drawn at random, which
                links it holds, and apply / revert / reapply on a running lab
    catalog.py  the built-in kinds
    here        the commands: one function per built-in kind (link_down, ...), which
                is its kind's `start`; link_up, clear, clear_hidden, reapply

The built-in kinds, and what each does and how it reverts: twin.faults.catalog.

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

from twin.errors import UsageError
from twin.fabric.model import Endpoint
from twin.faults import (
    bgp,  # noqa: F401  (BGP's kinds, registered after the built-in ones)
    catalog,
)
from twin.faults.catalog import (
    FaultKind,
    blackhole_rules,
    blackhole_table,
    corruption,
    loss_rules,
    loss_table,
)
from twin.faults.kinds import FaultType, Param, reapply, restore_link, revert
from twin.faults.record import (
    Fault,
    active,
    events,
    forget,
    hidden,
    hidden_in_force,
    log_event,
    refuse_while_hidden,
)
from twin.faults.registry import KINDS, register, unregister
from twin.faults.targets import parse_end, parse_endpoint
from twin.lab import Attached

__all__ = ["KINDS", "Endpoint", "Fault", "FaultKind", "FaultType", "Param", "active",
           "blackhole", "blackhole_rules", "blackhole_table", "catalog", "clear", "clear_hidden",
           "corruption",
           "events", "hidden", "hidden_in_force", "link_down", "link_flap", "link_loss",
           "link_rate", "link_up", "log_event", "loss_rules", "loss_table", "nic_down",
           "parse_end", "parse_endpoint", "plane_down", "reapply", "register", "route_corrupt",
           "sid_loss", "switch_down", "switch_reboot", "unregister"]


# -- the commands: each kind's `start` ------------------------------------------------------


def link_down(lab: Attached, text: str, both: bool = False) -> Fault:
    return KINDS[FaultKind.LINK_DOWN].start(lab, text, {"both": both})


def link_loss(lab: Attached, text: str, percent: float) -> Fault:
    """Random loss on a link, in both directions, applied at a switch end (nftables)."""
    return KINDS[FaultKind.LINK_LOSS].start(lab, text, {"percent": percent})


def switch_down(lab: Attached, node: str) -> Fault:
    """A dead switch: every one of its links down at the switch (its peers lose carrier)."""
    return KINDS[FaultKind.SWITCH_DOWN].start(lab, node)


def nic_down(lab: Attached, text: str) -> Fault:
    """One NIC port of a host, HOST:PLANE, down at the host."""
    return KINDS[FaultKind.NIC_DOWN].start(lab, text)


def plane_down(lab: Attached, text: str) -> Fault:
    """Every link of one plane, down at its switches."""
    return KINDS[FaultKind.PLANE_DOWN].start(lab, text)


def blackhole(lab: Attached, text: str) -> Fault:
    """NODE drops what it forwards (NODE:IF: what it forwards out of IF), silently."""
    return KINDS[FaultKind.BLACKHOLE].start(lab, text)


def sid_loss(lab: Attached, node: str) -> Fault:
    """NODE's local SIDs are gone (on its data plane: the routes, or the programs): what
    arrives for them is dropped."""
    return KINDS[FaultKind.SID_LOSS].start(lab, node)


def route_corrupt(lab: Attached, node: str) -> Fault:
    """One of NODE's static routes points out of the wrong port."""
    return KINDS[FaultKind.ROUTE_CORRUPT].start(lab, node)


def link_rate(lab: Attached, text: str, rate_text: str) -> Fault:
    """A degraded link: shaped to RATE at its switch end (tbf)."""
    return KINDS[FaultKind.LINK_RATE].start(lab, text, {"rate": rate_text})


def link_flap(lab: Attached, text: str, count: int, period_s: float, both: bool = False,
              on_step=None) -> Fault:
    """Take a link down and up `count` times, `period_s` apart (down half of each
    period); `on_step(done, count)` after each flap."""
    return KINDS[FaultKind.LINK_FLAP].start(
        lab, text, {"count": count, "period": period_s, "both": both}, progress=on_step)


def switch_reboot(lab: Attached, node: str) -> Fault:
    """Restart NODE as a fault: on the timeline from the moment it goes to when it is
    back, re-wired, re-programmed, its faults applied again."""
    return KINDS[FaultKind.SWITCH_REBOOT].start(lab, node)


# -- reverting ----------------------------------------------------------------------------


def link_up(lab: Attached, text: str, force: bool = False) -> Fault | None:
    """Revert the fault on a link. A link with no fault recorded is refused, unless
    `force`: then it is healed as a link set down by hand would be (both ends up,
    both re-programmed)."""
    refuse_while_hidden(lab, f"link-up {text}")
    ep = parse_endpoint(lab, text)
    link = lab.fabric.link_at(ep)
    faults = active(lab)
    fault = next((f for f in faults if link.id in f.all_links), None)
    if fault is not None and fault.links:
        raise UsageError(f"link {link.id} is down as part of {fault.kind} {fault.target}; "
                         f"`twin fault clear --lab {lab.lab} {fault.target}` reverts "
                         "all of it")
    if fault is None and not force:
        inforce = ", ".join(f.target for f in faults) or "none"
        raise UsageError(f"link {link.id} has no fault in force (faults in force: {inforce}); "
                         "--force brings both ends up and re-programs them anyway")
    if fault is not None:
        revert(lab, fault)
    else:
        restore_link(lab, link.a, link.b)
    if fault is not None:
        forget(lab, fault)
    return fault


def clear_hidden(lab: Attached) -> list[Fault]:
    """Revert the hidden faults (a blind drill's, when it ends), and only those."""
    faults = hidden_in_force(lab)
    for fault in reversed(faults):
        revert(lab, fault)
        forget(lab, fault)
    return faults


def clear(lab: Attached, target: str | None = None) -> list[Fault]:
    """Revert every fault in force, newest first; or only the one on `target` (its
    target as `fault list` shows it: NODE:IF, NODE, HOST:PLANE or a plane). A hidden
    fault is reverted only by clearing them all (by target, it would be found)."""
    faults = active(lab)
    if target is not None:
        refuse_while_hidden(lab, f"fault clear {target}")
        faults = [f for f in faults if target in (f.target, *map(str, f.ends))]
        if not faults:
            inforce = ", ".join(f.target for f in active(lab)) or "none"
            raise UsageError(f"no fault in force on {target!r} (faults in force: {inforce})")
    for fault in reversed(faults):
        revert(lab, fault)
        forget(lab, fault)
    return faults
