"""`twin telemetry up | down | status` and `twin top` (root)."""

from __future__ import annotations

import sys
import time
from urllib.parse import urlsplit

import click
from click.core import ParameterSource
from rich.live import Live

from twin import lab as L
from twin import validate as V
from twin.cli.base import RichSteps, emit_json, lab_option, main, out, sigterm_as_interrupt
from twin.errors import UsageError
from twin.telemetry import prometheus as P
from twin.telemetry import stack as S
from twin.telemetry.exporter import DEFAULT_PORT

TOP_PERIOD_S = 0.5
PERIOD = V.Float(0.1, 60, words=V.SPAN, hint="seconds")  # `twin top --period`


@main.group()
def telemetry():
    """Live metrics of a lab in a real Prometheus.

    \b
      twin telemetry up           exporter on 127.0.0.1:9477, Prometheus on :9478,
                                  scraping every second; waits for the first scrape
      twin telemetry status       what runs, with its URLs
      twin telemetry down         stop both; `twin down` does it too

    Metric names: docs/metrics.md. Dashboards: `twin grafana push`.
    The time series live in the lab's run directory and go with the lab,
    unless `up --keep-data DIR`.
    """


@telemetry.command(name="up")
@lab_option(positional=True)
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True,
              help="The exporter's port on 127.0.0.1.")
@click.option("--prometheus-port", type=int, default=P.DEFAULT_PORT, show_default=True,
              help="Prometheus's port on 127.0.0.1.")
@click.option("--address", default="127.0.0.1", show_default=True,
              help="Where the exporter listens: a loopback address only.")
@click.option("--keep-data", metavar="DIR", default=None,
              help="When the stack stops, move the time series to DIR instead of "
                   "removing them with the lab.")
@click.option("--grafana", is_flag=True,
              help="Also run the grafana/grafana container with the lab's provisioning, "
                   "where the Docker engine can get the image.")
@click.option("--json", "as_json", is_flag=True, help="Print what runs as JSON.")
def telemetry_up(lab, port, prometheus_port, address, keep_data, grafana, as_json):
    """Start the lab's exporter and a Prometheus scraping it every second.

    Installs Debian's prometheus if it is missing (its own service is not
    started), writes its configuration under the lab's run directory and
    waits until Prometheus reports the exporter up.
    """
    from twin.telemetry.exporter import check_address

    check_address(address)
    if address != "127.0.0.1":
        raise UsageError(f"--address {address}: Prometheus scrapes 127.0.0.1; only 127.0.0.1 "
                         "is supported for a lab's stack (run `python -m "
                         "twin.telemetry.exporter --address` by hand for another)")
    sigterm_as_interrupt()
    att = L.attach(lab)
    att.require_local("twin telemetry up", "its exporter reads link counters through "
                      "netlink sockets in every node's namespace on this machine")
    att.require_whole()
    stack = S.running(att.state.dir)
    already = stack is not None
    if already:  # nothing to start, unless asked for what the running stack is not
        _same_as_running(att.lab, stack, port, prometheus_port, keep_data)
    else:
        steps = RichSteps() if not as_json else None
        try:
            stack = S.up(att, port, prometheus_port, keep_data, steps)
        finally:
            if steps:
                steps.done()
    grafana_line = _grafana(att, stack) if grafana else None
    if as_json:
        emit_json({"lab": att.lab, "already": already, **S.status(att.state.dir),
                   **({"grafana": grafana_line} if grafana else {})})
        return
    out.print(f"[green]telemetry of lab {att.lab} is "
              f"{'already up: nothing started' if already else 'up'}[/green]")
    out.print(f"  metrics:     {stack.exporter.url}")
    out.print(f"  prometheus:  {stack.prometheus.url}  (scrapes every "
              f"{P.SCRAPE_INTERVAL})")
    out.print(f"  try:         curl -s {stack.prometheus.url}/api/v1/query --data-urlencode "
              "'query=sum by (plane) (rate(twin_endpoint_rx_bytes_total[5s]))'")
    out.print(f"  live view:   twin top --lab {att.lab}")
    if grafana_line:
        out.print(f"  grafana:     {grafana_line}")
    out.print(f"  stop:        twin telemetry down --lab {att.lab}")


def _same_as_running(lab: str, stack, port: int, prometheus_port: int,
                     keep_data: str | None) -> None:
    """`up` on a lab whose stack runs does nothing; a port asked for on the command line
    that it does not listen on, or --keep-data (it applies from the start), cannot be
    had without a restart, and is refused saying how."""
    ctx = click.get_current_context()
    for param, option, want, what, proc in (
            ("port", "--port", port, "exporter", stack.exporter),
            ("prometheus_port", "--prometheus-port", prometheus_port, "prometheus",
             stack.prometheus)):
        if ctx.get_parameter_source(param) is ParameterSource.COMMANDLINE \
                and urlsplit(proc.url).port != want:
            raise UsageError(f"telemetry of lab {lab} is already up, its {what} on "
                             f"{proc.url}: `twin telemetry down --lab {lab}` first to start it "
                             f"with {option} {want}")
    if keep_data:
        raise UsageError(f"--keep-data {keep_data}: telemetry of lab {lab} is already up, "
                         f"and what it keeps is chosen when it starts (`twin telemetry down "
                         f"--lab {lab}` first)")


def _grafana(att, stack) -> str:
    from twin.telemetry import grafana_container

    return grafana_container.start(att, stack.prometheus.url)


@telemetry.command(name="down")
@lab_option(positional=True)
def telemetry_down(lab):
    """Stop the lab's Prometheus and exporter (the lab stays up)."""
    att = L.attach(lab)
    from twin.telemetry import grafana_container

    done = [*S.down(att.state.dir), *grafana_container.stop(att.lab, att.state.id,
                                                                    att.state.dir)]
    out.print("\n".join(done) if done else f"no telemetry runs for lab {att.lab}")


@telemetry.command(name="status")
@lab_option(positional=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def telemetry_status(lab, as_json):
    """What telemetry runs for the lab, and where. Exit 0 only if all of it runs."""
    att = L.attach(lab)
    st = {"lab": att.lab, **S.status(att.state.dir)}
    if as_json:
        emit_json(st)
        return
    if "exporter" not in st:
        out.print(f"no telemetry for lab {att.lab} (start it: twin telemetry up --lab "
                  f"{att.lab})")
        sys.exit(1)
    for name in ("exporter", "prometheus"):
        p = st[name]
        if p is None:
            out.print(f"{name:<11} not started")
            continue
        state = "[green]running[/green]" if p["running"] else "[red]not running[/red]"
        out.print(f"{name:<11} {state}  pid {p['pid']}  {p['url']}  log {p['log']}")
    out.print(f"data        {st['data_dir']}"
              + (f"  (kept in {st['keep_data']} at down)" if st["keep_data"] else ""))
    if not st["running"]:
        sys.exit(1)


@main.command()
@lab_option()
@click.option("--period", type=float, default=TOP_PERIOD_S, show_default=True, metavar="S",
              callback=V.option(PERIOD),
              help="Refresh every S seconds.")
@click.option("--once", is_flag=True,
              help="One view over one period, printed (no live screen).")
@click.option("--json", "as_json", is_flag=True, help="With --once: the view as JSON.")
def top(lab, period, once, as_json):
    """A live view of the lab for people without Grafana: goodput per plane,
    the busiest links (on a shaped fabric with their virtual queues, CE marks,
    trims and drops per second), EV states per host, faults in force. Ctrl-C quits.

    \b
      twin top                        the live screen, every second
      twin top --once --json          one view over one period, as JSON
      twin top --period 5 > top.log   not a terminal: one plain line a period
    It samples the same counters the exporter serves (endpoint control
    sockets, kernel link counters), so it needs no telemetry stack. Each
    counter's rate is over the time between its own two reads.
    """
    from dataclasses import asdict

    from twin.telemetry.collect import Collector
    from twin.telemetry.top import line, rates, render

    if as_json and not once:
        raise UsageError("--json goes with --once (a live screen is for people)")
    att = L.attach(lab)
    att.require_whole()
    collector = Collector(att)
    try:
        if once:
            steps = RichSteps()
            try:
                steps.start("reading the lab's counters")
                before = collector.sample()
                ticks = max(1, round(period / 0.1))
                steps.start(f"measuring over {period:g} s", ticks)
                for _ in range(ticks):
                    time.sleep(period / ticks)
                    steps.advance()
                view = rates(before, collector.sample())
            finally:
                steps.done()
            if as_json:
                emit_json(asdict(view))
            else:
                out.print(render(view))
            return
        sigterm_as_interrupt()
        before = collector.sample()
        if not out.is_terminal:  # a pipe or a file: a log, one line a period
            while True:
                time.sleep(period)
                after = collector.sample()
                click.echo(line(rates(before, after)))
                sys.stdout.flush()
                before = after
        with Live(console=out, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(period)
                after = collector.sample()
                live.update(render(rates(before, after)))
                before = after
    except KeyboardInterrupt:
        return
    finally:
        collector.close()
