"""Faults: twin fault link-down | link-loss | link-up | switch-down | nic-down |
plane-down | list | clear."""

from __future__ import annotations

import time

import click

from twin import faults as F
from twin import lab as L
from twin.chaos import blind as B
from twin.cli.base import emit_json, err, main, out, sigterm_as_interrupt

# -- faults -------------------------------------------------------------------


@main.group()
def fault():
    """Inject and revert faults. Every fault is recorded before it is applied,
    so `twin fault clear` (or `twin down`) undoes it even after a crash."""


@fault.command("link-down")
@click.argument("endpoint")
@click.option("--both", is_flag=True, help="Set both ends down (default: only this end; the "
              "other end then loses carrier).")
@click.option("--lab", default=None)
def fault_link_down(endpoint, both, lab):
    """Take a link down at NODE:IFNAME, e.g. t0-p0-r0:eth3."""
    att = L.attach(lab)
    f = F.link_down(att, endpoint, both)
    out.print(f"link {f.link} down (set down: {', '.join(map(str, f.ends))})")


@fault.command("link-loss", context_settings={"ignore_unknown_options": True})  # PERCENT -5
@click.argument("endpoint")
@click.argument("percent", type=float)
@click.option("--lab", default=None)
def fault_link_loss(endpoint, percent, lab):
    """Drop PERCENT% of the packets on a link, both directions (nftables numgen
    random at the switch end). Revert with `twin fault link-up NODE:IF`."""
    att = L.attach(lab)
    f = F.link_loss(att, endpoint, percent)
    out.print(f"link {f.link}: {f.percent:g}% loss (nftables at {f.ends[0]})")


@fault.command("link-up")
@click.argument("endpoint")
@click.option("--force", is_flag=True,
              help="Heal a link with no fault recorded (set down by hand): both ends up, "
                   "both re-programmed.")
@click.option("--lab", default=None)
def fault_link_up(endpoint, force, lab):
    """Revert a fault on a link: bring it back up and re-program both ends, or
    remove its loss rule."""
    att = L.attach(lab)
    f = F.link_up(att, endpoint, force)
    link = att.fabric.link_at(F.parse_endpoint(att, endpoint))
    out.print(f"link {link.id} up" + ("" if f else " (no fault was recorded; healed)"))


@fault.command("switch-down")
@click.argument("node")
@click.option("--lab", default=None)
def fault_switch_down(node, lab):
    """A dead switch: every link of NODE down at NODE (its peers lose carrier).
    Revert with `twin fault clear NODE`."""
    f = F.switch_down(L.attach(lab), node)
    out.print(f"switch {node} down: {len(f.links)} links")


@fault.command("nic-down")
@click.argument("port", metavar="HOST:PLANE")
@click.option("--lab", default=None)
def fault_nic_down(port, lab):
    """One NIC port of a host down, e.g. r0h0:2 (plane 2). Revert with
    `twin fault clear HOST:PLANE`."""
    f = F.nic_down(L.attach(lab), port)
    out.print(f"NIC port {port} down ({', '.join(map(str, f.ends))})")


@fault.command("plane-down")
@click.argument("plane")
@click.option("--lab", default=None)
def fault_plane_down(plane, lab):
    """Every link of plane PLANE down at its switches. Revert with
    `twin fault clear PLANE`."""
    f = F.plane_down(L.attach(lab), plane)
    out.print(f"plane {plane} down: {len(f.links)} links")


@fault.command("blackhole")
@click.argument("target", metavar="NODE[:IF]")
@click.option("--lab", default=None)
def fault_blackhole(target, lab):
    """A silent failure: NODE drops every packet it forwards (NODE:IF: out of IF).
    Links and carrier stay up; no port state reveals it."""
    F.blackhole(L.attach(lab), target)
    out.print(f"blackhole {target}: forwarding dropped, links up")


@fault.command("sid-loss")
@click.argument("node")
@click.option("--lab", default=None)
def fault_sid_loss(node, lab):
    """A misconfiguration: NODE's local SIDs (a switch's uN, a host's decap) are gone:
    their seg6local routes, or their eBPF programs, as the lab's data plane holds them."""
    att = L.attach(lab)
    F.sid_loss(att, node)
    what = "routes are" if att.dataplane.name == "seg6local" else "programs are"
    out.print(f"sid-loss {node}: its local SID {what} removed ({att.dataplane.name})")


@fault.command("route-corrupt")
@click.argument("node")
@click.option("--lab", default=None)
def fault_route_corrupt(node, lab):
    """A misconfiguration: one of NODE's static routes points out of the wrong port."""
    f = F.route_corrupt(L.attach(lab), node)
    out.print(f"route-corrupt {node}: {f.detail}")


@fault.command("link-rate")
@click.argument("endpoint")
@click.argument("rate")
@click.option("--lab", default=None)
def fault_link_rate(endpoint, rate, lab):
    """A degraded link: shape it to RATE (e.g. 100mbit) at its switch end (tbf)."""
    f = F.link_rate(L.attach(lab), endpoint, rate)
    out.print(f"link {f.link} shaped to {int(f.detail):,} bit/s at {f.ends[0]}")


@fault.command("link-flap")
@click.argument("endpoint")
@click.option("--count", default=3, show_default=True, help="Flaps: down, then up again.")
@click.option("--period", default=1.0, show_default=True, metavar="SECONDS",
              help="One flap: down for half of it, up for the other half.")
@click.option("--both", is_flag=True, help="Set both ends down (default: this end).")
@click.option("--lab", default=None)
def fault_link_flap(endpoint, count, period, both, lab):
    """Flap a link: down and up COUNT times, PERIOD apart. Runs until done;
    Ctrl-C or SIGTERM bring the link back up, and after a crash `twin fault
    clear` does."""
    sigterm_as_interrupt()
    att = L.attach(lab)
    f = F.link_flap(att, endpoint, count, period, both,
                    on_step=lambda i, n: err.print(f"flap {i}/{n}"))
    out.print(f"link {f.link} flapped {count} times, {period:g}s apart; it is up")


@fault.command("switch-reboot")
@click.argument("node")
@click.option("--lab", default=None)
def fault_switch_reboot(node, lab):
    """Reboot NODE as a fault on the timeline (`twin fault log`): it comes back
    re-wired and re-programmed, with the faults on its links applied again."""
    F.switch_reboot(L.attach(lab), node)
    out.print(f"{node} rebooted")


@fault.command("log")
@click.option("--lab", default=None)
@click.option("--json", "as_json", is_flag=True)
def fault_log(lab, as_json):
    """Every fault applied and reverted in this lab, with wall time and
    CLOCK_MONOTONIC ns (the clock the endpoints' event logs use)."""
    att = L.attach(lab)
    entries = F.events(att)
    if F.hidden_in_force(att):  # a blind drill's fault: when, not what
        entries = [_masked(e) if e.get("hidden") else e for e in entries]
    if as_json:
        emit_json(entries)
        return
    if not entries:
        out.print("no fault applied yet")
    for e in entries:
        stamp = time.strftime("%H:%M:%S", time.localtime(e["t_wall"]))
        out.print(f"{stamp}.{int(e['t_wall'] * 1000) % 1000:03d}  mono {e['t_mono_ns']:>20,} ns  "
                  f"{e['event']:<6} {e.get('kind', 'hidden fault')} {e.get('target', '')}")


def _masked(entry: dict) -> dict:
    return {k: v for k, v in entry.items() if k not in ("kind", "target", "ends")}


@fault.command("list")
@click.option("--lab", default=None)
@click.option("--json", "as_json", is_flag=True)
def fault_list(lab, as_json):
    """Show the faults in force."""
    att = L.attach(lab)
    inforce = F.active(att)
    faults = [f for f in inforce if not f.hidden]
    hidden = len(inforce) - len(faults)
    if as_json:  # with a hidden fault (a blind drill's), an object: how many, not which
        shown = [f.to_dict() for f in faults]
        emit_json({"hidden": hidden, "faults": shown} if hidden else shown)
        return
    if not faults and not hidden:
        out.print("no faults in force")
    if hidden:
        out.print(f"{hidden} hidden fault{'s' if hidden != 1 else ''} in force")
    for f in faults:
        n = len(f.links)
        held = f" ({n} link{'s' if n != 1 else ''})" if f.links else ""
        extra = f", {f.detail}" if f.detail else ""
        out.print(f"{f.kind} {f.target}{held} (at: {', '.join(f.end_names())}{extra})")


@fault.command("clear")
@click.argument("target", required=False)
@click.option("--lab", default=None)
def fault_clear(target, lab):
    """Revert every fault in force, or only the one on TARGET (as `fault list`
    names it: NODE:IF, NODE, HOST:PLANE or a plane). Clearing all ends a blind
    drill as given up."""
    att = L.attach(lab)
    ended = B.give_up(att, "fault clear") if target is None and B.running(att) else None
    reverted = [*F.clear(att, target), *([ended] if ended else [])]
    out.print(f"reverted {len(reverted)} fault{'s' if len(reverted) != 1 else ''}")
    if ended:
        out.print(f"blind drill given up: the fault was {ended.kind} {ended.target}")
