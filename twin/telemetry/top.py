"""`twin top`: the lab now, from two samples of the same Collector the exporter uses.

    rates(before, after) -> View     pure: per-plane goodput, the busiest links, EV
                                     states per host, faults in force
    render(view) -> rich renderable  the screen (twin.cli.telemetry runs it in Live)
    line(view) -> str                one plain line a period, for a pipe or a file

Goodput per plane is what the endpoints placed (rx payload bytes, duplicates not
counted) per second; a link's load is its kernel tx bytes per second at the end
that sends. Each counter is divided by the time between *its own* two reads, not
between the samples' ends: the first sample of a Collector spends seconds finding
the nodes' maps, and a rate over the samples' times read 3-4x too high. On a
fabric with signals, a link end with a queue also shows its virtual queue now and
its CE marks, trims and drops per second. Counters that went backwards
(an endpoint restarted with its host) read as zero for that interval, not as a
negative rate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Group
from rich.table import Table
from rich.text import Text

from twin.telemetry.collect import Sample
from twin.telemetry.names import EV_STATES

BUSIEST = 8  # links shown


@dataclass(frozen=True)
class LinkLoad:
    end: str  # NODE:IF that sends
    peer: str
    plane: int
    tier: str
    bps: float
    up: bool
    queue_bytes: int | None = None  # the end's virtual queue now (None: it has none)
    signals_per_s: tuple[float, float, float] = (0.0, 0.0, 0.0)  # CE marks, trims, drops


@dataclass(frozen=True)
class View:
    lab: str
    interval_s: float
    plane_bps: dict[int, float]  # plane -> goodput placed, bits/s
    links: tuple[LinkLoad, ...]  # busiest first
    links_down: tuple[str, ...]
    evs: dict[str, dict[str, int]]  # host -> state -> EVs in open send QPs
    endpoints_down: tuple[str, ...]
    faults: tuple[tuple[str, str], ...]
    retransmits_per_s: float
    scrape_ms: float


def _delta(a: int, b: int) -> int:
    return b - a if b >= a else 0


def _per_s(delta: int, t0: float, t1: float, dt: float) -> float:
    """`delta` per second between two reads at t0 and t1 (monotonic), or over the
    samples' `dt` where a read has no time (an older sample)."""
    span = t1 - t0 if t0 and t1 else dt
    return delta / max(span, 1e-6)


def rates(before: Sample, after: Sample) -> View:
    dt = max(after.t_wall - before.t_wall, 1e-6)
    old_ep = {e.host: e for e in before.endpoints}
    plane_bps: dict[int, float] = {}
    retx = 0
    for ep in after.endpoints:
        prev = old_ep.get(ep.host)
        if not ep.up or prev is None or not prev.up:
            continue
        for plane, n in ep.rx_bytes.items():
            placed = _delta(prev.rx_bytes.get(plane, 0), n)
            plane_bps[plane] = plane_bps.get(plane, 0.0) + _per_s(placed * 8, prev.t, ep.t, dt)
        retx += _per_s(_delta(prev.retransmits, ep.retransmits), prev.t, ep.t, dt)
    old_lk = {(lk.node, lk.ifname): lk for lk in before.links}
    old_port = {(p.node, p.ifname): (p.values, p.t) for p in before.ports}
    port = {(p.node, p.ifname): (p.values, p.t) for p in after.ports
            if p.values.get("rate_bps")}
    loads = []
    for lk in after.links:
        prev = old_lk.get((lk.node, lk.ifname))
        bps = _per_s(_delta(prev.tx_bytes, lk.tx_bytes) * 8, prev.t, lk.t, dt) if prev else 0.0
        q, t1 = port.get((lk.node, lk.ifname), (None, 0.0))
        if q is None:
            loads.append(LinkLoad(f"{lk.node}:{lk.ifname}", lk.peer, lk.plane, lk.tier, bps,
                                  lk.up))
            continue
        was, t0 = old_port.get((lk.node, lk.ifname), ({}, 0.0))
        per_s = tuple(_per_s(_delta(was.get(k, 0), q.get(k, 0)), t0, t1, dt)
                      for k in ("ce_marked", "trimmed", "dropped"))
        loads.append(LinkLoad(f"{lk.node}:{lk.ifname}", lk.peer, lk.plane, lk.tier, bps,
                              lk.up, q.get("queue_bytes_now", 0), per_s))
    loads.sort(key=lambda x: (-x.bps, x.end))
    return View(
        after.lab, dt, dict(sorted(plane_bps.items())), tuple(loads[:BUSIEST]),
        tuple(sorted(f"{lk.node}:{lk.ifname}" for lk in after.links if not lk.up)),
        {e.host: dict(e.evs) for e in after.endpoints if e.up},
        tuple(e.host for e in after.endpoints if not e.up),
        tuple((f.kind, f.target) for f in after.faults), retx, after.seconds * 1000)


def _bps(v: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} bit/s"


def render(view: View) -> Group:
    head = Text.assemble((f"twin top  {view.lab}", "bold"),
                         f"   every {view.interval_s:.1f}s   scrape {view.scrape_ms:.1f} ms"
                         f"   retransmits {view.retransmits_per_s:.0f}/s")
    planes = Table(title="goodput per plane (placed at the receivers)", title_justify="left",
                   box=None, pad_edge=False)
    planes.add_column("plane")
    planes.add_column("goodput", justify="right")
    total = sum(view.plane_bps.values())
    for plane, bps in view.plane_bps.items():
        planes.add_row(str(plane), _bps(bps))
    planes.add_row("all", _bps(total), style="bold")

    links = Table(title="busiest links (tx)", title_justify="left", box=None, pad_edge=False)
    queues = any(lk.queue_bytes is not None for lk in view.links)
    signal_cols = ("queue", "CE/s", "trims/s", "drops/s") if queues else ()
    for col in ("link end", "to", "plane", "tier", "load", *signal_cols):
        links.add_column(col, justify="left" if col in ("link end", "to", "tier") else "right")
    for lk in view.links:
        style = None if lk.up else "red"
        extra = []
        if queues and lk.queue_bytes is not None:
            extra = [f"{lk.queue_bytes:,} B", *(f"{v:.0f}" for v in lk.signals_per_s)]
        elif queues:
            extra = ["-"] * len(signal_cols)
        links.add_row(lk.end, lk.peer, str(lk.plane), lk.tier, _bps(lk.bps), *extra,
                      style=style)

    evs = Table(title="EVs of open sending QPs", title_justify="left", box=None,
                pad_edge=False)
    evs.add_column("host")
    for state in EV_STATES:
        evs.add_column(state, justify="right")
    for host, by_state in view.evs.items():
        evs.add_row(host, *(str(by_state.get(s, 0)) for s in EV_STATES))
    for host in view.endpoints_down:
        evs.add_row(host, Text("endpoint not answering", style="red"))

    lines = [head, planes, links, evs]
    if view.links_down:
        lines.append(Text(f"links down: {', '.join(view.links_down)}", style="red"))
    if view.faults:
        lines.append(Text("faults in force: " + ", ".join(f"{k} {t}" for k, t in view.faults),
                          style="yellow"))
    else:
        lines.append(Text("no fault in force", style="green"))
    return Group(*lines)


def line(view: View) -> str:
    """The view as one line of plain text, for `twin top` writing to a pipe or a file
    (a log of a drill): the time, goodput in all and per plane, retransmits, the
    busiest link, and what is down or in force."""
    total = sum(view.plane_bps.values())
    planes = " ".join(f"p{p} {bps / 1e9:.2f}" for p, bps in view.plane_bps.items())
    parts = [time.strftime("%H:%M:%S"), view.lab, f"goodput {_bps(total)}",
             f"({planes} Gbit/s)" if planes else "(no endpoint answering)",
             f"retransmits {view.retransmits_per_s:.0f}/s"]
    if view.links:
        busiest = view.links[0]
        parts.append(f"busiest {busiest.end} {_bps(busiest.bps)}")
    if view.links_down:
        parts.append(f"links down: {','.join(view.links_down)}")
    if view.endpoints_down:
        parts.append(f"endpoints not answering: {','.join(view.endpoints_down)}")
    parts.append("faults: " + (", ".join(f"{k} {t}" for k, t in view.faults)
                               if view.faults else "none"))
    return "  ".join(parts)
