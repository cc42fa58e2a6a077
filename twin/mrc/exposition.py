"""An endpoint's metrics: their names, one table, and their Prometheus text (pure).

    Metric                  a metric's name, kind, help and labels
    ENDPOINT                twin_endpoint_*: per host, over the endpoint's life (closed
                            QPs included); the exporter serves them, and so do
                            `twin stats --prometheus` and the `metrics` op
    QP                      twin_endpoint_qp_*: per open QP, now; only `twin stats
                            --prometheus` and the `metrics` op (the exporter leaves them
                            out: each transfer opens new QPs, and a series per QP number
                            would churn the TSDB)
    EndpointSample          one host's endpoint as a scrape sees it: EndpointSample.of(stats)
    host_series(lab, ep)    the ENDPOINT series of one host, as Series
    qp_series(lab, stats)   the QP series of one host
    text(series)            the text exposition: every family of the tables once, its
                            HELP and TYPE first, then its series of every host

The names are twin's interface (docs/metrics.md); twin.telemetry.names adds the fabric's
metrics to ENDPOINT to make the exporter's table. Every series carries `lab` and `host`
(the `metrics` op, asked without a lab, leaves `lab` out: an endpoint does not know its
lab). Only the standard library and twin.mrc.stats: this runs inside every host's
endpoint, which must stay light (no prometheus_client).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from twin.mrc.stats import EndpointStats


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # counter or gauge
    help: str
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Series:
    name: str  # a Metric's
    labels: tuple[str, ...]  # its values, in the order of the Metric's labels
    value: float


EV_STATES = ("good", "skip", "assumed_bad", "denied")
HOST = ("lab", "host")
QPL = ("lab", "host", "qp")

ENDPOINT = (
    Metric("twin_endpoint_tx_bytes_total", "counter",
           "Payload bytes of data packets an endpoint sent on a plane, retransmissions "
           "included, over its life", (*HOST, "plane")),
    Metric("twin_endpoint_rx_bytes_total", "counter",
           "Payload bytes an endpoint placed from data packets that arrived on a plane "
           "(duplicates excluded), over its life", (*HOST, "plane")),
    Metric("twin_endpoint_retransmits_total", "counter",
           "Data packets an endpoint sent again, over its life", HOST),
    Metric("twin_endpoint_ev_retirements_total", "counter",
           "Retirement events over the endpoint's life: an EV of a sending QP went "
           "ASSUMED_BAD (a revived EV may retire again)", HOST),
    Metric("twin_endpoint_evs", "gauge",
           "EVs in the host's open sending QPs' sets, by state", (*HOST, "state")),
    Metric("twin_endpoint_srtt_seconds", "gauge",
           "The largest smoothed RTT over the host's open sending QPs", HOST),
    Metric("twin_endpoint_ecn_marks_total", "counter",
           "CE-marked data packets, over the endpoint's life: seen by its receiving QPs "
           "(side rx), echoed back to its sending QPs (side tx)", (*HOST, "side")),
    Metric("twin_endpoint_ev_skips_total", "counter",
           "EVs an endpoint's sending QPs passed over for a rotation, by reason: ecn, "
           "trim, rtt", (*HOST, "reason")),
    Metric("twin_endpoint_trims_total", "counter",
           "Trimmed data packets: received by the endpoint's receiving QPs (side rx), "
           "NAK(TRIMMED) received by its sending QPs (side tx)", (*HOST, "side")),
    Metric("twin_endpoint_nacks_total", "counter",
           "NAKs by reason (seq, trimmed): sent by the endpoint's receiving QPs (side rx), "
           "received by its sending QPs (side tx)", (*HOST, "side", "reason")),
    Metric("twin_endpoint_drops_total", "counter",
           "Packets an endpoint dropped or refused, over its life, by reason (EndpointDrops: "
           "malformed or forged data, and control packets whose claim its QP's state "
           "refutes: ack_unsent, sack_bits_unsent, nack_stale, trim_stale, probe_unknown, "
           "cnp_limited)", (*HOST, "reason")),
    Metric("twin_endpoint_port_up", "gauge",
           "The endpoint's NIC port state, per plane: 1 while the port is up", (*HOST, "plane")),
    Metric("twin_endpoint_up", "gauge",
           "1 if the host's endpoint answered this scrape, else 0", HOST),
)

QP = (
    Metric("twin_endpoint_qp_tx_packets_total", "counter",
           "Data packets an open sending QP sent, per plane, retransmissions included",
           (*QPL, "peer", "mode", "plane")),
    Metric("twin_endpoint_qp_tx_bytes_total", "counter",
           "Payload bytes an open sending QP sent, retransmissions included", (*QPL, "mode")),
    Metric("twin_endpoint_qp_retransmits_total", "counter",
           "Data packets an open sending QP sent again", (*QPL, "mode")),
    Metric("twin_endpoint_qp_srtt_seconds", "gauge", "A sending QP's smoothed RTT", QPL),
    Metric("twin_endpoint_qp_window_packets", "gauge", "A sending QP's congestion window",
           QPL),
    Metric("twin_endpoint_qp_evs", "gauge",
           "EVs in a sending QP's set now, by state (they add up to the set size)",
           (*QPL, "state")),
    Metric("twin_endpoint_qp_ev_retirements_total", "counter",
           "A sending QP's retirement events: an EV went ASSUMED_BAD", QPL),
    Metric("twin_endpoint_qp_ev_revivals_total", "counter",
           "A sending QP's retired EVs brought back by probes", QPL),
    Metric("twin_endpoint_qp_goodput_bits_per_second", "gauge",
           "A sending QP's acked payload rate, first write to done (or now)", QPL),
    Metric("twin_endpoint_qp_rx_bytes_total", "counter",
           "Payload bytes an open receiving QP placed", QPL),
    Metric("twin_endpoint_qp_rx_duplicates_total", "counter",
           "Duplicate data packets an open receiving QP dropped", QPL),
    Metric("twin_endpoint_qp_dcqcn_rate_bits_per_second", "gauge",
           "DCQCN's current rate (Rc) of a dcqcn sending QP", QPL),
    Metric("twin_endpoint_qp_dcqcn_alpha", "gauge",
           "DCQCN's congestion estimate (alpha) of a dcqcn sending QP", QPL),
    Metric("twin_endpoint_qp_dcqcn_rate_cuts_total", "counter",
           "DCQCN rate cuts of a dcqcn sending QP", QPL),
    Metric("twin_endpoint_qp_cnps_received_total", "counter",
           "CNPs a sending QP received (acted on by dcqcn, ignored by the others)",
           (*QPL, "cc")),
    Metric("twin_endpoint_qp_cnps_sent_total", "counter",
           "CNPs a receiving QP sent (CE-marked data arrived)", QPL),
    Metric("twin_endpoint_qp_ecn_marks_total", "counter",
           "CE-marked data packets: seen by a receiving QP (side rx), reported back to a "
           "sending QP in its SACKs (side tx)", (*QPL, "side")),
    Metric("twin_endpoint_qp_ev_skips_total", "counter",
           "EVs a sending QP sent to SKIP for a rotation, by reason", (*QPL, "reason")),
    Metric("twin_endpoint_qp_trims_total", "counter",
           "Trimmed data packets: received by a receiving QP (side rx; each NAKed), "
           "NAK(TRIMMED) acted on by a sending QP (side tx)", (*QPL, "side")),
    Metric("twin_endpoint_qp_nacks_total", "counter",
           "NAKs by reason (seq, trimmed): sent by a receiving QP (side rx), received by a "
           "sending QP (side tx)", (*QPL, "side", "reason")),
)

METRICS: dict[str, Metric] = {m.name: m for m in (*ENDPOINT, *QP)}


@dataclass(frozen=True)
class EndpointSample:
    """One host's endpoint as a scrape sees it: its life's totals, and its open sending
    QPs summed. `up` False (it did not answer) leaves the rest empty."""

    host: str
    up: bool
    tx_bytes: dict[int, int] = field(default_factory=dict)  # plane -> payload bytes sent
    rx_bytes: dict[int, int] = field(default_factory=dict)  # plane -> payload bytes placed
    retransmits: int = 0
    evs: dict[str, int] = field(default_factory=dict)  # state -> EVs, over open send QPs
    srtt_s: float = 0.0  # the largest smoothed RTT of the open send QPs (0: none open)
    send_qps: int = 0
    signals: dict[str, int] = field(default_factory=dict)  # EndpointTotals.signals
    drops: dict[str, int] = field(default_factory=dict)  # EndpointDrops, by reason
    ev_retirements: int = 0
    ports_up: dict[int, bool] = field(default_factory=dict)  # plane -> NIC port up
    t: float = 0.0  # time.monotonic() when its reply came (0: unknown)

    @classmethod
    def of(cls, st: EndpointStats, planes: Iterable[int] | None = None, *,
           host: str | None = None, t: float = 0.0) -> EndpointSample:
        """The sample of a `stats` reply. planes: the NIC's (the fabric's nic_planes);
        None, the planes the endpoint counts bytes on. host: the name it was asked
        by (None: the one it gives). t: when the reply came (time.monotonic())."""
        if planes is None:
            planes = sorted({*st.totals.tx_bytes_per_plane, *st.totals.rx_bytes_per_plane})
        planes = list(planes)
        evs = dict.fromkeys(EV_STATES, 0)
        srtt_us = 0.0
        for q in st.send_qps:
            for state, n in q.evs.items():
                evs[state] = evs.get(state, 0) + n
            srtt_us = max(srtt_us, q.srtt_us)
        return cls(host or st.host, True,
                   {p: st.totals.tx_bytes_per_plane.get(p, 0) for p in planes},
                   {p: st.totals.rx_bytes_per_plane.get(p, 0) for p in planes},
                   st.totals.retransmits, evs, srtt_us / 1e6, len(st.send_qps),
                   dict(st.totals.signals), st.drops.to_dict(), st.totals.ev_retirements,
                   {p: bool(st.ports >> p & 1) for p in planes}, t)


def host_series(lab: str, ep: EndpointSample) -> list[Series]:
    """The ENDPOINT series of one host: what the exporter serves of it."""
    out: list[Series] = []

    def put(name: str, value: float, *labels) -> None:
        out.append(Series(name, (lab, ep.host, *map(str, labels)), value))

    put("twin_endpoint_up", 1 if ep.up else 0)
    if not ep.up:
        return out
    for plane, n in sorted(ep.tx_bytes.items()):
        put("twin_endpoint_tx_bytes_total", n, plane)
    for plane, n in sorted(ep.rx_bytes.items()):
        put("twin_endpoint_rx_bytes_total", n, plane)
    put("twin_endpoint_retransmits_total", ep.retransmits)
    put("twin_endpoint_ev_retirements_total", ep.ev_retirements)
    for state in EV_STATES:
        put("twin_endpoint_evs", ep.evs.get(state, 0), state)
    put("twin_endpoint_srtt_seconds", ep.srtt_s)
    if ep.signals:  # an endpoint from before the congestion signals sends none
        sig = ep.signals.get
        for side, key in (("rx", "ce_marked_rx"), ("tx", "ecn_marks_tx")):
            put("twin_endpoint_ecn_marks_total", sig(key, 0), side)
        for reason in ("ecn", "trim", "rtt"):
            put("twin_endpoint_ev_skips_total", sig(f"ev_skips_{reason}", 0), reason)
        for side, key in (("rx", "trimmed_rx"), ("tx", "nacks_trimmed_received")):
            put("twin_endpoint_trims_total", sig(key, 0), side)
        for side, verb in (("rx", "sent"), ("tx", "received")):
            for reason in ("seq", "trimmed"):
                put("twin_endpoint_nacks_total", sig(f"nacks_{reason}_{verb}", 0), side,
                    reason)
    for reason, n in ep.drops.items():
        put("twin_endpoint_drops_total", n, reason)
    for plane, up in sorted(ep.ports_up.items()):
        put("twin_endpoint_port_up", 1 if up else 0, plane)
    return out


def qp_series(lab: str, st: EndpointStats) -> list[Series]:
    """The QP series of one host: its open QPs, now."""
    out: list[Series] = []

    def put(name: str, value: float, qpn: int, *labels) -> None:
        out.append(Series(name, (lab, st.host, str(qpn), *map(str, labels)), value))

    for q in st.send_qps:
        s = q.sender
        for plane, n in sorted(s.per_plane_packets.items()):
            put("twin_endpoint_qp_tx_packets_total", n, q.qpn, q.peer, q.mode, plane)
        put("twin_endpoint_qp_tx_bytes_total", s.bytes, q.qpn, q.mode)
        put("twin_endpoint_qp_retransmits_total", s.retransmits, q.qpn, q.mode)
        put("twin_endpoint_qp_srtt_seconds", q.srtt_us / 1e6, q.qpn)
        put("twin_endpoint_qp_window_packets", q.window, q.qpn)
        for state, n in q.evs.items():
            put("twin_endpoint_qp_evs", n, q.qpn, state)
        put("twin_endpoint_qp_ev_retirements_total", q.ev_retirements_total, q.qpn)
        put("twin_endpoint_qp_ev_revivals_total", q.ev_revivals_total, q.qpn)
        put("twin_endpoint_qp_goodput_bits_per_second", q.goodput_gbps * 1e9, q.qpn)
        dcqcn: Mapping = q.dcqcn or {}
        if "rate_bps" in dcqcn:  # a paced QP; the others have only cnps_ignored
            put("twin_endpoint_qp_dcqcn_rate_bits_per_second", dcqcn["rate_bps"], q.qpn)
            put("twin_endpoint_qp_dcqcn_alpha", dcqcn["alpha"], q.qpn)
            put("twin_endpoint_qp_dcqcn_rate_cuts_total", dcqcn["rate_cuts"], q.qpn)
        put("twin_endpoint_qp_cnps_received_total",
            dcqcn.get("cnps_received", dcqcn.get("cnps_ignored", 0)), q.qpn, q.cc)
        put("twin_endpoint_qp_ecn_marks_total", s.ecn_marks, q.qpn, "tx")
        for reason, n in q.ev_skips_by.items():
            put("twin_endpoint_qp_ev_skips_total", n, q.qpn, reason)
        put("twin_endpoint_qp_trims_total", s.nacks_trimmed, q.qpn, "tx")
        put("twin_endpoint_qp_nacks_total", s.nacks_seq, q.qpn, "tx", "seq")
        put("twin_endpoint_qp_nacks_total", s.nacks_trimmed + s.trims_ignored, q.qpn, "tx",
            "trimmed")
    for r in st.recv_qps:
        put("twin_endpoint_qp_rx_bytes_total", r.bytes, r.qpn)
        put("twin_endpoint_qp_rx_duplicates_total", r.duplicates, r.qpn)
        put("twin_endpoint_qp_cnps_sent_total", r.cnps_sent, r.qpn)
        put("twin_endpoint_qp_ecn_marks_total", r.ce_marked, r.qpn, "rx")
        put("twin_endpoint_qp_trims_total", r.trimmed, r.qpn, "rx")
        put("twin_endpoint_qp_nacks_total", r.nacks - r.nacks_trimmed, r.qpn, "rx", "seq")
        put("twin_endpoint_qp_nacks_total", r.nacks_trimmed, r.qpn, "rx", "trimmed")
    return out


def endpoint_text(lab: str | None, stats: Iterable[EndpointStats],
                  planes: Iterable[int] | None = None) -> str:
    """The exposition of some hosts' endpoints, from their `stats` replies: every
    ENDPOINT and QP family once. lab None: no `lab` label (the `metrics` op)."""
    series: list[Series] = []
    for st in stats:
        series += host_series(lab or "", EndpointSample.of(st, planes))
        series += qp_series(lab or "", st)
    return text(series, (*ENDPOINT, *QP), drop_lab=lab is None)


def text(series: Iterable[Series], table: Iterable[Metric], *, drop_lab: bool = False) -> str:
    """Prometheus text format 0.0.4: each metric of the table once, HELP and TYPE first,
    then its series in the order given."""
    by_name: dict[str, list[Series]] = {}
    for s in series:
        by_name.setdefault(s.name, []).append(s)
    lines = []
    for m in table:
        lines.append(f"# HELP {m.name} {_escape_help(m.help)}")
        lines.append(f"# TYPE {m.name} {m.kind}")
        for s in by_name.pop(m.name, ()):
            pairs = [f'{k}="{_escape_label(v)}"' for k, v in zip(m.labels, s.labels, strict=True)
                     if not (drop_lab and k == "lab")]
            lines.append(f"{m.name}{{{','.join(pairs)}}} {_number(s.value)}")
    if by_name:
        raise ValueError(f"series of no metric in the table: {sorted(by_name)}")
    return "\n".join(lines) + "\n"


def _number(v: float) -> str:
    if isinstance(v, int):  # bool too
        return str(int(v))
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def _escape_help(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
