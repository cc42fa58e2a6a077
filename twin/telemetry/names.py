"""Every metric the exporter serves: its name, kind, help and labels (pure).

The names are part of twin's interface: dashboards, alerts and users' queries are
written against them, so they change only with a note in docs/metrics.md. Every
series carries `lab`. Link series are per link end: `node`, `ifname`, the other end
as `peer` (NODE:IF), the link's `plane` and its `tier` (host: a NIC port to its T0;
fabric: T0 to T1).
"""

from __future__ import annotations

from dataclasses import dataclass

LINK_LABELS = ("lab", "node", "ifname", "peer", "plane", "tier")


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter or gauge
    help: str
    labels: tuple[str, ...]


_ALL = (
    Metric("twin_endpoint_tx_bytes_total", "counter",
           "Payload bytes of data packets an endpoint sent on a plane, retransmissions "
           "included, over its life", ("lab", "host", "plane")),
    Metric("twin_endpoint_rx_bytes_total", "counter",
           "Payload bytes an endpoint placed from data packets that arrived on a plane "
           "(duplicates excluded), over its life", ("lab", "host", "plane")),
    Metric("twin_endpoint_retransmits_total", "counter",
           "Data packets an endpoint sent again, over its life", ("lab", "host")),
    Metric("twin_endpoint_evs", "gauge",
           "EVs in the host's open sending QPs' sets, by state", ("lab", "host", "state")),
    Metric("twin_endpoint_srtt_seconds", "gauge",
           "The largest smoothed RTT over the host's open sending QPs", ("lab", "host")),
    Metric("twin_endpoint_ecn_marks_total", "counter",
           "CE-marked data packets, over the endpoint's life: seen by its receiving QPs "
           "(side rx), echoed back to its sending QPs (side tx)", ("lab", "host", "side")),
    Metric("twin_endpoint_ev_skips_total", "counter",
           "EVs an endpoint's sending QPs passed over for a rotation, by reason: ecn, "
           "trim, rtt", ("lab", "host", "reason")),
    Metric("twin_endpoint_trims_total", "counter",
           "Trimmed data packets: received by the endpoint's receiving QPs (side rx), "
           "NAK(TRIMMED) received by its sending QPs (side tx)", ("lab", "host", "side")),
    Metric("twin_endpoint_nacks_total", "counter",
           "NAKs by reason (seq, trimmed): sent by the endpoint's receiving QPs (side rx), "
           "received by its sending QPs (side tx)", ("lab", "host", "side", "reason")),
    Metric("twin_endpoint_drops_total", "counter",
           "Packets an endpoint dropped or refused, over its life, by reason (EndpointDrops: "
           "malformed or forged data, and control packets whose claim its QP's state "
           "refutes: ack_unsent, sack_bits_unsent, nack_stale, trim_stale, probe_unknown, "
           "cnp_limited)", ("lab", "host", "reason")),
    Metric("twin_endpoint_up", "gauge",
           "1 if the host's endpoint answered this scrape, else 0", ("lab", "host")),
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
EV_STATES = ("good", "skip", "assumed_bad", "denied")
PORT_SIGNALS = ("packets", "ce_marked", "trimmed", "dropped", "ce_to_inner", "trim_to_inner",
                "drop_ce_not_ect")
