"""The lab's Prometheus exporter: /metrics on 127.0.0.1, one Collector sample per scrape.

    families(sample) -> [MetricFamily]     pure: a Sample as the metrics of names.py
    serve(lab, port, address)              the daemon (`python -m twin.telemetry.exporter`)

`twin telemetry up` starts the daemon in the host namespace, with the lab's owner in
its environment (twin.owner), so `twin down` ends it with the lab. It binds only a
loopback address: lab metrics never leave the machine. Each scrape collects afresh
(no cache): Prometheus scrapes every second, and a scrape of mrc-8p takes a few ms
(docs/benchmarks.md), so the figures are as fresh as the scrape.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import threading

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from twin import lab as L
from twin.errors import UsageError
from twin.mrc.exposition import host_series
from twin.telemetry.collect import Collector, Sample
from twin.telemetry.names import METRICS, PORT_SIGNALS

DEFAULT_PORT = 9477
DEFAULT_ADDRESS = "127.0.0.1"


def _family(name: str) -> CounterMetricFamily | GaugeMetricFamily:
    m = METRICS[name]
    cls = CounterMetricFamily if m.kind == "counter" else GaugeMetricFamily
    labels = list(m.labels)
    return cls(name.removesuffix("_total") if m.kind == "counter" else name, m.help,
               labels=labels)


def families(sample: Sample) -> list[Metric]:
    """Every metric of names.METRICS for one sample (pure)."""
    lab = sample.lab
    fam = {name: _family(name) for name in METRICS}
    for ep in sample.endpoints:  # the series the endpoint's own `metrics` text has too
        for series in host_series(lab, ep):
            fam[series.name].add_metric(list(series.labels), series.value)
    for lk in sample.links:
        labels = [lab, lk.node, lk.ifname, lk.peer, str(lk.plane), lk.tier]
        fam["twin_link_tx_bytes_total"].add_metric(labels, lk.tx_bytes)
        fam["twin_link_rx_bytes_total"].add_metric(labels, lk.rx_bytes)
        fam["twin_link_drops_total"].add_metric([*labels, "tx"], lk.tx_drops)
        fam["twin_link_drops_total"].add_metric([*labels, "rx"], lk.rx_drops)
        fam["twin_link_up"].add_metric(labels, 1 if lk.up else 0)
    for f in sample.faults:
        fam["twin_fault_active"].add_metric([lab, f.kind, f.target], 1)
    for d in sample.dataplane:
        for counter, n in d.counters.items():
            fam["twin_dataplane_packets_total"].add_metric([lab, d.node, counter], n)
    for p in sample.ports:
        labels = [lab, p.node, p.ifname, p.peer, str(p.plane), p.tier]
        if p.values.get("rate_bps"):  # a queue has been through this port
            fam["twin_port_queue_bytes"].add_metric(labels, p.values["queue_bytes_now"])
            fam["twin_port_queue_high_water_bytes"].add_metric(labels,
                                                               p.values["high_water_bytes"])
        for kind in PORT_SIGNALS:
            fam["twin_port_signals_total"].add_metric([*labels, kind],
                                                      p.values.get(kind, 0))
    if sample.verify_paths_failed is not None:
        fam["twin_verify_paths_failed"].add_metric([lab], sample.verify_paths_failed)
    for verdict, target in sample.probe_named:
        fam["twin_probe_named"].add_metric([lab, verdict, target], 1)
    fam["twin_scrape_duration_seconds"].add_metric([lab], sample.seconds)
    return list(fam.values())


class LabMetrics:
    """A prometheus_client collector over a twin Collector: a fresh sample per scrape."""

    def __init__(self, collector) -> None:
        self.collector = collector

    def collect(self):
        yield from families(self.collector.sample())

    def describe(self):
        return []  # no sample at registration time: the lab may be busy


def check_address(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise UsageError(f"--address {address}: not an IP address; lab metrics are served "
                         "on loopback only (127.0.0.1 or ::1)") from None
    if not ip.is_loopback:
        raise UsageError(f"--address {address}: not a loopback address; lab metrics are "
                         "served on loopback only (127.0.0.1 or ::1)")
    return address


def serve(lab: str, port: int, address: str = DEFAULT_ADDRESS) -> None:
    """Serve the lab's metrics until SIGTERM or SIGINT."""
    from prometheus_client import CollectorRegistry, start_http_server

    check_address(address)
    collector = Collector(L.attach(lab))
    collector.sample()  # finds the nodes' maps (seconds): not in the first scrape's time
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LabMetrics(collector))
    server, _ = start_http_server(port, addr=address, registry=registry)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"serving lab {lab} metrics on http://{address}:{port}/metrics", flush=True)
    stop.wait()
    server.shutdown()
    collector.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m twin.telemetry.exporter",
                                description="Serve one lab's metrics for Prometheus.")
    p.add_argument("--lab", required=True)
    p.add_argument("--port", type=int, default=DEFAULT_PORT)
    p.add_argument("--address", default=DEFAULT_ADDRESS)
    args = p.parse_args(argv)
    try:
        serve(args.lab, args.port, args.address)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
