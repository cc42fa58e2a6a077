"""`twin probe`: continuous localization from the command line (root)."""

from __future__ import annotations

import json
import queue
import sys
import time

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from twin import lab as L
from twin import validate as V
from twin.cli.base import emit_json, lab_option, main, out, sigterm_as_interrupt
from twin.errors import LabError, UsageError
from twin.telemetry.collect import record_verify
from twin.verify import continuous as C
from twin.verify.localize import Change, Localization

DURATION_MAX_S = 86_400.0
DURATION = V.Float(0, DURATION_MAX_S, above=True, words=V.SPAN, hint="seconds")
TICK_S = 0.1  # how often the live view looks at the prober
SHOWN = 12  # lines of recent changes on the live view


@main.command()
@lab_option()
@click.option("--period", "period_ms", type=float, default=20, show_default=True,
              metavar="MS", callback=V.option(C.PERIOD),
              help="A round every MS: every link is probed once a round.")
@click.option("--rate", "rate_pps", type=float, default=C.RATE_PPS, show_default=True,
              metavar="PPS", callback=V.option(C.RATE),
              help=f"Probe rate cap, packets per second (at most {C.RATE_MAX}).")
@click.option("--once", is_flag=True, help="One round, then the verdict.")
@click.option("--duration", type=float, default=None, metavar="S",
              callback=V.option(DURATION),
              help=f"Stop after S seconds (default: at Ctrl-C; at most {DURATION_MAX_S:g}).")
@click.option("--json", "as_json", is_flag=True,
              help="--once: one JSON verdict. Live: a JSON line per change, then the state.")
def probe(lab, period_ms, rate_pps, once, duration, as_json):
    """Localize faults as MRC's Clustermapper does: loopback probes from every
    host port (host>T0>host, and host>T0>T1>T0>host for each T1), over and
    over, and name the failed link or switch, silent ones too (blackhole,
    sid-loss, route-corrupt).

    \b
    Rate: a round is one probe per loopback path (mrc-4p 48, mrc-8p 640),
    so it sends paths * 1000 / MS probes per second. That is capped at
    --rate (default 5000 pps): a --period the cap cannot carry is
    stretched to paths / rate and a tenth, and the output says so.
    Lost: a probe not back within a timeout measured from the round trips
    (3 to 50 ms; longer over a link or switch slow lately, the most over a
    congested one) once a probe sent after it came back; one that comes
    back later still was alive, and its loss is taken back.
    Naming: a lost path is probed again at once; lost twice in a row it
    blames its links and switches, a path that came back clears its own;
    the fewest elements left that explain every failure are named (a T1
    whose every probe fails, a link whose probes alone fail). Cleared
    after 2 rounds without failures.
    Congestion: probes travel in the fabric's probe class (served ahead of
    data, never trimmed) and come back CE-marked from a congested port; the
    same rules name that link "congested", which is not a fault (events
    congested/uncongested; exit status unchanged by it).
    --once: every probe, a lost one sent again once; the verdict.
    Live: a line per change (a live table on a terminal) until Ctrl-C,
    SIGTERM or --duration.
    Attached lab (twin attach): the rounds run in an agent in every host,
    --once as two rounds; the same output.
    A routing: bgp lab: one UDP probe per host pair and plane a round (no
    source route exists), a lost one sent once more; a host link or a T0
    is named, and a plane's T1s as one ("a T1 of plane 3"): the routers'
    hash, not the sender, chose each probe's T1.
    Exit 1 if something is named at the end, 0 if nothing is.
    """
    if once and duration is not None:
        raise UsageError("--once is one round: give --duration without it")
    att = L.attach(lab)
    att.require_whole()
    if att.fabric.spec.bgp is not None:
        _probe_ecmp(att, period_ms, once, duration, as_json)
        return
    prober = att.runtime.continuous_prober()  # attached: an agent in every host
    if once:
        C.pace(1, period_ms, rate_pps)  # the same checks of what was typed
        localizer = prober.once(att, rate_pps=rate_pps)
        snap = {"lab": att.lab, "ok": not localizer.named(), **localizer.snapshot()}
        record_verify(att.state.dir, len(snap["failing"]), "probe")
        if as_json:
            emit_json(snap)
        else:
            _print_verdict(snap, len(localizer.paths))
        sys.exit(1 if localizer.named() else 0)
    sigterm_as_interrupt()
    changes: queue.SimpleQueue[Change] = queue.SimpleQueue()
    cp = prober(att, period_ms, rate_pps, on_change=changes.put)
    if cp.pace.stretched and not as_json:
        need = cp.pace.paths * 1000 / period_ms
        out.print(f"[yellow]period {period_ms:g} ms would need {need:,.0f} pps: stretched to "
                  f"{cp.pace.period_ms:g} ms under the {rate_pps:g} pps cap[/yellow]")
    deadline = time.monotonic() + (duration if duration is not None else DURATION_MAX_S)
    shown: list[str] = []
    recorded = None  # (failing paths, named) last written for the exporter
    live = Live(console=out, auto_refresh=False, transient=False) \
        if out.is_terminal and not as_json else None
    try:
        with cp:
            if not as_json and not live:
                out.print(_header(cp.snapshot()))
            if live:
                live.start()
            while time.monotonic() < deadline and cp.running:
                time.sleep(max(0.0, min(TICK_S, deadline - time.monotonic())))
                for c in _drain(changes):
                    line = _change_line(c, cp.started_ns)
                    if as_json:
                        click.echo(json.dumps({"event": c.event, "t_ns": c.t_ns,
                                               **c.localization.to_dict()}))
                    elif live:
                        shown = [*shown, line][-SHOWN:]
                    else:
                        out.print(line)
                snap = cp.snapshot()
                if (len(snap["failing"]), _named(snap)) != recorded:
                    recorded = (len(snap["failing"]), _named(snap))
                    record_verify(att.state.dir, recorded[0], "probe", recorded[1])
                if live:
                    live.update(_view(snap, shown, cp.now_ns()), refresh=True)
    except KeyboardInterrupt:
        pass  # stopping is what Ctrl-C and SIGTERM ask for: the summary follows
    finally:
        if live:
            live.stop()
    snap = cp.snapshot()
    record_verify(att.state.dir, len(snap["failing"]), "probe")  # stopped: nothing named
    for c in _drain(changes):  # the last round's, judged as the thread stopped
        if as_json:
            click.echo(json.dumps({"event": c.event, "t_ns": c.t_ns, **c.localization.to_dict()}))
        elif not live:
            out.print(_change_line(c, cp.started_ns))
    if as_json:
        click.echo(json.dumps({"event": "end", **snap}))
    else:
        _print_end(snap)
    if snap["error"]:
        raise LabError(f"the prober stopped: {snap['error']}")
    sys.exit(1 if snap["named"] else 0)


def _named(snap: dict) -> list[tuple[str, str]]:
    """What is named now, as (verdict, target), for twin_probe_named."""
    return [("faulty", d["target"]) for d in snap["named"]] + \
        [("congested", d["target"]) for d in snap.get("congested", [])]


def _drain(q: queue.SimpleQueue) -> list[Change]:
    got = []
    while len(got) < 10_000:
        try:
            got.append(q.get_nowait())
        except queue.Empty:
            break
    return got


def _describe(loc: Localization | dict) -> str:
    d = loc.to_dict() if isinstance(loc, Localization) else loc
    alt = f" (or {', '.join(d['alternatives'])}: the probes cannot tell)" \
        if d["alternatives"] else ""
    return f"{d['kind']} {d['target']}{alt}"


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _change_line(c: Change, started_ns: int) -> str:
    loc = c.localization
    at = f"{(c.t_ns - started_ns) / 1e9:8.3f}s"
    if c.event == "congested":
        rtt = f", slowest {loc.rtt_max_us / 1000:,.1f} ms" if loc.rtt_max_us else ""
        return (f"{at}  [yellow]congested[/yellow] {_describe(loc)}: probes come back "
                f"CE-marked ({loc.failed_probes}{rtt}); not a fault")
    if c.event == "uncongested":
        return (f"{at}  [green]uncongested[/green] {_describe(loc)}: congested for "
                f"{_ms(c.t_ns - loc.named_ns)}, {loc.failed_probes} probes marked")
    if c.event == "named":
        return (f"{at}  [red]named[/red]   {_describe(loc)}: first loss "
                f"{_ms(c.t_ns - loc.first_failed_ns)} before, {loc.failed_probes} probes lost")
    return (f"{at}  [green]cleared[/green] {_describe(loc)}: named for "
            f"{_ms(c.t_ns - loc.named_ns)}, {loc.failed_probes} probes lost")


def _header(snap: dict) -> str:
    stretched = f" (asked {snap['requested_period_ms']:g} ms)" \
        if snap["period_ms"] > snap["requested_period_ms"] else ""
    lost = f"lost after {snap['timeout_ms']:g} ms" + (
        f" (measured from the round trips, {C.TIMEOUT_FLOOR_MS:g} to {C.TIMEOUT_CEIL_MS:g})"
        if snap.get("timeout_measured") else "")
    return (f"probing {snap['lab']}: {snap['paths']} loopback paths every "
            f"{snap['period_ms']:g} ms{stretched}, {snap['probe_pps']:,.0f} pps "
            f"(cap {snap['rate_cap_pps']:,.0f}), {lost}; Ctrl-C stops")


def _view(snap: dict, shown: list[str], now: int) -> Group:
    t = Table(show_edge=False, box=None, pad_edge=False, title=None)
    for col in ("named", "since", "probes lost"):
        t.add_column(col)
    for d in snap["named"]:
        t.add_row(f"[red]{_describe(d)}[/red]", _ms(now - d["named_ns"]), str(d["failed_probes"]))
    for d in snap.get("congested", []):
        t.add_row(f"[yellow]congested: {_describe(d)}[/yellow]", _ms(now - d["named_ns"]),
                  "0 (CE-marked)")
    if not snap["named"] and not snap.get("congested"):
        t.add_row("[green]nothing[/green]", "", "")
    counters = Text(f"round {snap['rounds']}  sent {snap['probes_sent']:,}  lost "
                    f"{snap['probes_lost']:,}  back late {snap.get('probes_late') or 0:,}  "
                    f"CE-marked {snap.get('probes_ce', 0):,}  timeout {snap['timeout_ms']:g} ms  "
                    f"late rounds {snap['rounds_late']}  failing paths {len(snap['failing'])}")
    return Group(Text.from_markup(_header(snap)), counters, t,
                 *[Text.from_markup(line) for line in shown])


def _print_verdict(snap: dict, paths: int) -> None:
    failing = snap["failing"]
    if not snap["named"] and not failing:
        out.print(f"[green]nothing named[/green]: all {paths} loopback probes came back")
        return
    for d in snap["named"]:
        out.print(f"[bold red]named[/bold red] {_describe(d)}")
    for u in snap["unexplained"]:
        out.print(f"  [yellow]lost, no single element explains it[/yellow]: {u['path']}")
    out.print(f"{len(failing)} of {paths} loopback probes lost twice")


def _print_end(snap: dict) -> None:
    elapsed = (snap["last_round"].get("judged_ns", 0) - snap["last_round"].get("started_ns", 0))
    out.print(f"{snap['rounds']} rounds, {snap['probes_sent']:,} probes sent, "
              f"{snap['probes_lost']:,} lost (of which {snap.get('probes_late') or 0:,} came "
              f"back late), {snap.get('probes_ce', 0):,} CE-marked, "
              f"{snap['rounds_late']} rounds late"
              + (f"; last round judged {_ms(elapsed)} after it started" if elapsed else ""))
    for d in snap["named"]:
        out.print(f"[bold red]named[/bold red] {_describe(d)}")
    for d in snap.get("congested", []):
        out.print(f"[yellow]congested[/yellow] {_describe(d)} (not a fault)")
    if not snap["named"]:
        out.print("[green]nothing named[/green]")


def _probe_ecmp(att, period_ms: float, once: bool, duration: float | None,
                as_json: bool) -> None:
    """A routing: bgp lab: no source route to probe with. Rounds of one UDP probe per
    host pair and plane (twin.verify.ecmp, verify's), a round every period at least,
    a lost probe sent once more; what fails is named by the links and T0s the probes
    are sure of, and a plane's T1 layer as a whole (the hash hides which T1)."""
    from twin.verify import ecmp

    todo = ecmp.pairs(att.plan)
    if once:
        results = ecmp.probe(att.runtime, att.plan, todo, attempts=2)
        named = ecmp.localize(att.plan, results)
        failed = sum(not r.ok for r in results)
        record_verify(att.state.dir, failed, "probe", named)
        if as_json:
            emit_json({"lab": att.lab, "routing": "bgp", "probes": len(results),
                       "failed": failed, "named": [list(n) for n in named]})
        else:
            out.print(f"{len(results)} probes (one per host pair and plane), {failed} lost")
            for verdict, target in named:
                out.print(f"[red]{verdict}[/red] {target}")
            if not named:
                out.print("[green]nothing named[/green]")
        if named:
            sys.exit(1)
        return
    sigterm_as_interrupt()
    deadline = None if duration is None else time.monotonic() + duration
    shown: list[tuple[str, str]] = []
    try:
        while deadline is None or time.monotonic() < deadline:
            start = time.monotonic()
            results = ecmp.probe(att.runtime, att.plan, todo, attempts=2)
            named = ecmp.localize(att.plan, results)
            record_verify(att.state.dir, sum(not r.ok for r in results), "probe", named)
            if named != shown:
                for verdict, target in sorted(set(named) - set(shown)):
                    _say(as_json, "named", verdict, target)
                for verdict, target in sorted(set(shown) - set(named)):
                    _say(as_json, "cleared", verdict, target)
                shown = named
            time.sleep(max(0.0, period_ms / 1000 - (time.monotonic() - start)))
    except KeyboardInterrupt:
        pass
    if as_json:
        emit_json({"lab": att.lab, "routing": "bgp", "named": [list(n) for n in shown]})
    if shown:
        sys.exit(1)


def _say(as_json: bool, event: str, verdict: str, target: str) -> None:
    if as_json:
        click.echo(json.dumps({"event": event, "verdict": verdict, "target": target}))
    else:
        colour = "red" if event == "named" else "green"
        out.print(f"{time.strftime('%H:%M:%S')} [{colour}]{event}[/{colour}] {verdict} "
                  f"{target}")
