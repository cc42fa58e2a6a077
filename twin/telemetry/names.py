"""Every metric the exporter serves: its name, kind, help and labels (pure).

The endpoint's metrics (twin_endpoint_*) are twin.mrc.exposition's table, which the
endpoint itself renders for `twin stats --prometheus`: one table for both, here joined
by the fabric's (links, data plane, ports, faults, verify).

The names are part of twin's interface: dashboards, alerts and users' queries are
written against them, so they change only with a note in docs/metrics.md. Every
series carries `lab`. Link series are per link end: `node`, `ifname`, the other end
as `peer` (NODE:IF), the link's `plane` and its `tier` (host: a NIC port to its T0;
fabric: T0 to T1).
"""

from __future__ import annotations

from twin.mrc.exposition import ENDPOINT, EV_STATES, QP, Metric

__all__ = ["EV_STATES", "EVERY", "LINK_LABELS", "METRICS", "PORT_SIGNALS", "Metric"]

LINK_LABELS = ("lab", "node", "ifname", "peer", "plane", "tier")

_ALL = (
    *ENDPOINT,
    Metric("twin_link_tx_bytes_total", "counter", "Bytes sent out of a link end (kernel)",
           LINK_LABELS),
    Metric("twin_link_rx_bytes_total", "counter", "Bytes received at a link end (kernel)",
           LINK_LABELS),
    Metric("twin_link_drops_total", "counter",
           "Packets dropped at a link end (kernel), by direction",
           (*LINK_LABELS, "direction")),
    Metric("twin_link_up", "gauge", "1 if the link end is operationally up, else 0",
           LINK_LABELS),
    Metric("twin_dataplane_packets_total", "counter",
           "Packets a node's eBPF SID programs handled, by what happened to them (ebpf data "
           "plane only): shifted, decapsulated, encapsulated, drop_malformed, "
           "drop_end_of_carrier, drop_not_ipv6_in_ipv6, hop_limit_expired",
           ("lab", "node", "counter")),
    Metric("twin_port_queue_bytes", "gauge",
           "The virtual queue at a shaped switch port's egress (fabric signals), in bytes: "
           "the depth now, drained at the port's rate since its last packet",
           LINK_LABELS),
    Metric("twin_port_queue_high_water_bytes", "gauge",
           "The deepest the port's virtual queue has been since it was programmed",
           LINK_LABELS),
    Metric("twin_port_signals_total", "counter",
           "Packets a port's fabric-signal programs handled, by `signal`: at a switch "
           "port's egress packets, ce_marked, trimmed, dropped; at a host port's ingress "
           "(RFC 6040 decap) ce_to_inner, trim_to_inner, drop_ce_not_ect",
           (*LINK_LABELS, "signal")),
    Metric("twin_fault_active", "gauge",
           "1 per fault in force (a blind drill's hidden fault: kind and target 'hidden')",
           ("lab", "kind", "target")),
    Metric("twin_verify_paths_failed", "gauge",
           "Paths that failed in the last `twin verify` or `twin probe` round", ("lab",)),
    Metric("twin_probe_named", "gauge",
           "1 per link or switch `twin probe` names now, by verdict: faulty (its probes "
           "die) or congested (they come back CE-marked)", ("lab", "verdict", "target")),
    Metric("twin_scrape_duration_seconds", "gauge",
           "How long collecting this scrape took", ("lab",)),
)

METRICS: dict[str, Metric] = {m.name: m for m in _ALL}
# Every metric name twin prints: the exporter's, and the per-QP ones only
# `twin stats --prometheus` and the endpoint's `metrics` op give
EVERY: dict[str, Metric] = {**METRICS, **{m.name: m for m in QP}}
PORT_SIGNALS = ("packets", "ce_marked", "trimmed", "dropped", "ce_to_inner", "trim_to_inner",
                "drop_ce_not_ect")
