"""An MRC endpoint's counters as typed records: the schema of its `stats` and `wait` replies.

The endpoint builds these from its QPs and sends `to_dict()` over the control socket
as JSON. Clients (twin.traffic, the CLI, a Prometheus exporter) parse the reply with
`from_dict()` and read attributes, never keys. docs/endpoint-stats.md gives every
field's meaning and unit.

    EndpointStats           one endpoint: the reply to `stats`
      EndpointTotals        bytes and events over the endpoint's life, closed QPs included
      SendQpStats           one sending QP (also the reply to `wait`)
        SenderCounters      its transport's counters (twin.mrc.transport.SenderStats)
        MessageLatency      one completed message
      RecvQpStats           one receiving QP (its counters: transport.ReceiverStats)
      EndpointDrops         packets dropped, by reason (the hostile-network counters)

Wire form. `to_dict()` returns the JSON object itself, the one `json.loads` gives back
at the other end. It has the keys, nesting and key order the control API has always
carried, so JSON output (`twin stats --json`, `twin traffic --json`) stays the same.
Lists are lists, and per-plane maps are keyed by the plane number as text, as JSON
keys must be. Typed, those maps are keyed by int, and sequences are tuples.

Numbers pass through as the endpoint computed them. A QP that never wrote has the
integer 0 as its `elapsed_s`, and a fresh window is the integer 16. Parsing never
coerces, so a reply re-serialised is byte for byte the reply received. `from_dict`
reads the keys it knows and ignores any others, such as the control reply's `id`.
A missing key raises KeyError, except the keys added after the first schema, which
read as 0 (or empty): the drop counters (`drops`, `acks_unsent`, `out_of_window`),
`ev_skips_total`, `dead_paths_total`, the congestion signals' counters (`ecn_marks` ..
`window_decreases`), the hostile-input counters (`sack_bits_unsent` .. `lost_trim`, and
the drops from `sack_bits_unsent` on), `tail_probes`, `ce_marked`, `trimmed`, `nacks_trimmed`,
`ev_skips_by`, `cc`, and the per-plane totals (`tx_bytes_per_plane`,
`rx_bytes_per_plane`); a QP's `transport` reads as the endpoint's (within an
EndpointStats; a lone SendQpStats, a `wait` reply, reads as ""). A lab kept up across an
upgrade of twin has endpoints that do not send them yet.

Only the standard library: the endpoint imports this inside a host's namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


def _plane_map(by_plane: Mapping) -> dict[int, int]:
    """A per-plane map from JSON (keys are text) or from the transport (keys are int)."""
    return {int(p): n for p, n in by_plane.items()}


@dataclass(frozen=True)
class SenderCounters:
    """A sending QP's transport counters, since it was opened. Field for field
    twin.mrc.transport.SenderStats (a unit test keeps the two in step)."""

    packets: int  # data packets sent, retransmissions included
    bytes: int  # payload bytes sent, retransmissions included
    retransmits: int  # packets sent again
    lost_per_ev: int  # losses found by a later packet on the same path being acked (per_path)
    lost_rack: int  # losses found by RACK (a packet sent a reordering window later acked)
    lost_timeout: int  # losses found by the retransmit timer
    lost_nack: int  # losses the receiver NAKed
    spurious: int  # losses a late copy proved wrong
    acked: int  # packets (PSNs) acknowledged
    per_plane_packets: Mapping[int, int]  # plane -> data packets sent on it
    acks_unsent: int  # SACKs and NAKs naming a PSN never sent (forged or corrupt): ignored
    lost_dead_path: int = 0  # in flight on a path when it proved dead: resent at once
    # congestion signals (docs/congestion.md)
    ecn_marks: int = 0  # CE-marked packets the receiver reported in its SACKs
    ecn_echoes: int = 0  # SACKs echoing a CE-marked packet (its EV SKIPped, ecn on)
    nacks_seq: int = 0  # NAK(PSN sequence error) received
    nacks_trimmed: int = 0  # NAK(TRIMMED) received and acted on: resent at once
    trims_ignored: int = 0  # NAK(TRIMMED) naming no copy in flight (stale), or trim off
    quick_adapts: int = 0  # nscc: window cut to what the last RTT acked, after a trim
    window_decreases: int = 0  # nscc: multiplicative decreases (delay high and marked)
    # hostile or stale inputs, counted and ignored (docs/endpoint-stats.md)
    sack_bits_unsent: int = 0  # SACKs whose bitmap named PSNs never sent: those bits masked
    nacks_stale: int = 0  # NAK(PSN sequence error) for a PSN not in flight
    trims_stale: int = 0  # NAK(TRIMMED) naming no copy in flight (in trims_ignored too)
    cnps_limited: int = 0  # CNPs sooner than half the notification point's interval
    lost_trim: int = 0  # losses declared because a PSN was trimmed trim_limit times
    tail_probes: int = 0  # first copies the timer sent again as tail probes (not losses)
    lost_probe: int = 0  # first copies shown lost by their tail probe's copy arriving alone

    _SIGNALS: ClassVar[tuple[str, ...]] = (
        "ecn_marks", "ecn_echoes", "nacks_seq", "nacks_trimmed", "trims_ignored",
        "quick_adapts", "window_decreases", "sack_bits_unsent", "nacks_stale", "trims_stale",
        "cnps_limited", "lost_trim", "tail_probes", "lost_probe")

    def to_dict(self) -> dict[str, Any]:
        return {"packets": self.packets, "bytes": self.bytes, "retransmits": self.retransmits,
                "lost_per_ev": self.lost_per_ev, "lost_rack": self.lost_rack,
                "lost_timeout": self.lost_timeout, "lost_nack": self.lost_nack,
                "spurious": self.spurious, "acked": self.acked,
                "per_plane_packets": {str(p): n for p, n in self.per_plane_packets.items()},
                "acks_unsent": self.acks_unsent, "lost_dead_path": self.lost_dead_path,
                **{k: getattr(self, k) for k in self._SIGNALS}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SenderCounters:
        return cls(d["packets"], d["bytes"], d["retransmits"], d["lost_per_ev"],
                   d["lost_rack"], d["lost_timeout"], d["lost_nack"], d["spurious"],
                   d["acked"], _plane_map(d["per_plane_packets"]), d.get("acks_unsent", 0),
                   d.get("lost_dead_path", 0), *(d.get(k, 0) for k in cls._SIGNALS))


@dataclass(frozen=True)
class MessageLatency:
    """One completed RDMA WRITE: its message sequence number and how long it took."""

    msn: int
    latency_us: float  # from posting the write to its last packet acknowledged

    def to_dict(self) -> dict[str, Any]:
        return {"msn": self.msn, "latency_us": self.latency_us}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MessageLatency:
        return cls(d["msn"], d["latency_us"])


@dataclass(frozen=True)
class SendQpStats:
    """One sending QP, now. Counters named `*_total` count events over the QP's life;
    `evs` and `ev_pools` are states now."""

    qpn: int
    peer: str  # the destination host
    mode: str  # mrc, spray-static or single-path
    idle: bool  # nothing outstanding: every posted write is acknowledged
    mtu: int  # payload bytes per packet
    failed: str | None  # why the QP failed (a retry or loss limit), else None
    elapsed_s: float  # first write to when a `wait` saw it done (else to now)
    goodput_gbps: float  # acknowledged payload over elapsed_s, Gbit/s
    sender: SenderCounters
    window: float  # congestion window, packets
    srtt_us: float  # smoothed RTT
    reorder_window_us: float  # how late a packet may be before RACK calls it lost
    evs: Mapping[str, int]  # EV set slots by state now: good, skip, assumed_bad, denied
    ev_set_size: int  # slots in the EV set (the values of evs add up to it)
    ev_pools: Mapping[str, int]  # EVs outside the slots: spare, retired (being probed)
    ev_retirements_total: int  # an EV went ASSUMED_BAD (a revived EV may retire again)
    ev_revivals_total: int  # retired EVs brought back by probes
    ev_retirements_undone_total: int  # retirements undone: the "lost" copy arrived
    planes_in_use: tuple[int, ...]  # planes packets go on now, ascending
    send_errors: int  # data packets the kernel refused to send (no route: port down)
    probes_sent: int  # background probes of retired EVs
    messages_completed: int  # writes acknowledged in full, over the QP's life
    completions: tuple[MessageLatency, ...]  # the latest (at most 16), oldest first
    events_logged: int  # events appended to the QP's event log (`events` op)
    # single-path's one uSID path (udp-entropy framing: the peer's port address), else None
    single_path: str | None
    ev_skips_total: int = 0  # an EV went GOOD -> SKIP for a rotation (any reason)
    dead_paths_total: int = 0  # a path shown dead: its EVs retired together
    target_us: float = 0.0  # the queueing delay the window steers to (from the link rates)
    ev_skips_by: Mapping[str, int] = field(default_factory=dict)  # ecn, trim, rtt
    cc: str = "nscc"  # its congestion control (twin.mrc.cc.Cc; "": an older endpoint)
    signals: tuple[str, ...] = ()  # the signals it uses: ecn, trim (empty: neither)
    # dcqcn's state (ReactionPoint.to_dict: rate_bps, target_bps, alpha, phase,
    # line_rate_bps, cnps_received, rate_cuts, min_rate_bps, increases; and paced_polls),
    # or for another cc {"cnps_ignored": n}
    dcqcn: Mapping[str, Any] | None = None
    transport: str = ""  # its sender's: compiled or python (twin.mrc.core)
    # (plane, t1, packets) for every path a packet of the QP went on: the EVs it holds
    # (slots, spares, retired pool) that carried one; () from an endpoint before it
    paths_used: tuple[tuple[int, int, int], ...] = ()
    path_checks_total: int = 0  # a new packet sent on a path that had just lost one, to check it

    def to_dict(self) -> dict[str, Any]:
        return {"qpn": self.qpn, "peer": self.peer, "mode": self.mode, "idle": self.idle,
                "mtu": self.mtu, "failed": self.failed, "elapsed_s": self.elapsed_s,
                "goodput_gbps": self.goodput_gbps, "sender": self.sender.to_dict(),
                "window": self.window, "srtt_us": self.srtt_us,
                "reorder_window_us": self.reorder_window_us, "evs": dict(self.evs),
                "ev_set_size": self.ev_set_size, "ev_pools": dict(self.ev_pools),
                "ev_retirements_total": self.ev_retirements_total,
                "ev_revivals_total": self.ev_revivals_total,
                "ev_retirements_undone_total": self.ev_retirements_undone_total,
                "planes_in_use": list(self.planes_in_use), "send_errors": self.send_errors,
                "probes_sent": self.probes_sent,
                "messages_completed": self.messages_completed,
                "completions": [c.to_dict() for c in self.completions],
                "events_logged": self.events_logged, "single_path": self.single_path,
                "ev_skips_total": self.ev_skips_total,
                "dead_paths_total": self.dead_paths_total, "target_us": self.target_us,
                "ev_skips_by": dict(self.ev_skips_by), "cc": self.cc,
                "signals": list(self.signals),
                "dcqcn": None if self.dcqcn is None else dict(self.dcqcn),
                "transport": self.transport, "paths_used": [list(p) for p in self.paths_used],
                "path_checks_total": self.path_checks_total}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], transport: str = "") -> SendQpStats:
        """`transport`: what an endpoint that does not name each QP's runs (its own)."""
        return cls(
            d["qpn"], d["peer"], d["mode"], d["idle"], d["mtu"], d["failed"], d["elapsed_s"],
            d["goodput_gbps"], SenderCounters.from_dict(d["sender"]), d["window"],
            d["srtt_us"], d["reorder_window_us"], dict(d["evs"]), d["ev_set_size"],
            dict(d["ev_pools"]), d["ev_retirements_total"], d["ev_revivals_total"],
            d["ev_retirements_undone_total"], tuple(d["planes_in_use"]), d["send_errors"],
            d["probes_sent"], d["messages_completed"],
            tuple(MessageLatency.from_dict(c) for c in d["completions"]),
            d["events_logged"], d["single_path"], d.get("ev_skips_total", 0),
            d.get("dead_paths_total", 0), d.get("target_us", 0.0),
            dict(d.get("ev_skips_by", {})), d.get("cc", ""), tuple(d.get("signals", ())),
            d.get("dcqcn"), d.get("transport", transport),
            tuple(tuple(p) for p in d.get("paths_used", ())),
            d.get("path_checks_total", 0))


@dataclass(frozen=True)
class RecvQpStats:
    """One receiving QP, now. On the wire its receiver's counters sit beside the rest,
    flat; they are field for field twin.mrc.transport.ReceiverStats."""

    qpn: int
    bad_rkey: int  # data packets dropped: a wrong rkey, or an address outside the buffer
    cum: int  # every PSN below this one has arrived
    completed: tuple[tuple[int, int], ...]  # the latest WRITE_IMM completions: (n, imm)
    reverse_evs: tuple[int, ...]  # the EVs its ACKs go back on, one per path, ascending
    cnps_sent: int  # DCQCN CNPs sent to the sending QP (CE-marked data arrived)
    # its receiver's: compiled or python (twin.mrc.core); keyword-only, so the receiver's
    # counters stay the last fields, as transport.ReceiverStats has them
    transport: str = field(default="", kw_only=True)
    packets: int  # new data packets placed (duplicates not counted)
    bytes: int  # payload bytes placed
    duplicates: int  # data packets that had arrived before, dropped
    out_of_order: int  # data packets that arrived above a hole
    acks: int  # SACKs sent
    nacks: int  # NAKs sent: a hole further back than the SACK bitmap reaches, or a trim
    completions: int  # WRITE_IMM completions delivered, over the QP's life
    out_of_window: int  # data packets 2**16 or more PSNs above cum: dropped, not placed
    ce_marked: int = 0  # data packets that arrived CE-marked (echoed in the SACKs)
    trimmed: int = 0  # trimmed data packets received (never placed)
    nacks_trimmed: int = 0  # NAK(TRIMMED) sent (in nacks too)

    def to_dict(self) -> dict[str, Any]:
        return {"qpn": self.qpn, "bad_rkey": self.bad_rkey, "cum": self.cum,
                "completed": [list(c) for c in self.completed],
                "reverse_evs": list(self.reverse_evs), "packets": self.packets,
                "bytes": self.bytes, "duplicates": self.duplicates,
                "out_of_order": self.out_of_order, "acks": self.acks, "nacks": self.nacks,
                "completions": self.completions, "out_of_window": self.out_of_window,
                "cnps_sent": self.cnps_sent, "ce_marked": self.ce_marked,
                "trimmed": self.trimmed, "nacks_trimmed": self.nacks_trimmed,
                "transport": self.transport}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], transport: str = "") -> RecvQpStats:
        """`transport`: what an endpoint that does not name each QP's runs (its own)."""
        return cls(d["qpn"], d["bad_rkey"], d["cum"],
                   tuple((n, imm) for n, imm in d["completed"]), tuple(d["reverse_evs"]),
                   d.get("cnps_sent", 0), d["packets"], d["bytes"], d["duplicates"],
                   d["out_of_order"], d["acks"], d["nacks"], d["completions"],
                   d.get("out_of_window", 0), d.get("ce_marked", 0), d.get("trimmed", 0),
                   d.get("nacks_trimmed", 0), transport=d.get("transport", transport))


@dataclass(frozen=True)
class EndpointTotals:
    """Over the endpoint's life: its open QPs plus every QP closed before."""

    bytes_sent: int  # payload bytes sent, retransmissions included
    bytes_placed: int  # payload bytes placed into receive buffers
    retransmits: int  # packets sent again
    ev_retirements: int  # EV retirement events
    # plane -> payload bytes of data packets sent on it (retransmissions included)
    tx_bytes_per_plane: Mapping[int, int] = field(default_factory=dict)
    # plane -> payload bytes placed from data packets that came on it (not duplicates)
    rx_bytes_per_plane: Mapping[int, int] = field(default_factory=dict)
    # the congestion signals, summed over the QPs (twin.mrc.counters.SIGNALS): marks
    # seen (ce_marked_rx) and echoed back (ecn_marks_tx), trims, NAKs by reason sent and
    # received, EV skips by reason; empty from an endpoint before them
    signals: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"bytes_sent": self.bytes_sent, "bytes_placed": self.bytes_placed,
                "retransmits": self.retransmits, "ev_retirements": self.ev_retirements,
                "tx_bytes_per_plane": {str(p): n for p, n in self.tx_bytes_per_plane.items()},
                "rx_bytes_per_plane": {str(p): n for p, n in self.rx_bytes_per_plane.items()},
                "signals": dict(self.signals)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EndpointTotals:
        return cls(d["bytes_sent"], d["bytes_placed"], d["retransmits"], d["ev_retirements"],
                   _plane_map(d.get("tx_bytes_per_plane", {})),
                   _plane_map(d.get("rx_bytes_per_plane", {})), dict(d.get("signals", {})))


@dataclass(frozen=True)
class EndpointDrops:
    """Packets the endpoint dropped, one counter per reason, over its life (closed QPs
    included). Each packet lands in one: the first check it fails, in this order."""

    truncated: int  # shorter than its headers (BTH and ICRC, or its opcode's own)
    malformed: int  # a valid ICRC but no valid packet: unknown opcode or AETH syndrome,
    #                 a probe whose reply EV names no path of the fabric,
    #                 a RETH DMA length other than the payload carried, a wrong ACK size
    bad_icrc: int  # the RoCEv2 ICRC does not match: corrupted (or truncated) in flight
    unknown_qp: int  # well-formed, for no QP of ours (data, ACK, NAK, probe, probe reply)
    bad_rkey: int  # data for one of our QPs with another rkey
    out_of_bounds: int  # the right rkey, but VA + length beyond the registered buffer
    psn_window: int  # data 2**16 or more PSNs ahead of the receiver's cum
    duplicate: int  # data whose PSN had arrived before (answered with a SACK, not placed)
    ack_unsent: int  # an ACK or NAK naming a PSN its QP never sent
    # Well-formed control packets for a QP of ours whose claim the QP's state refutes:
    # each is counted here and ignored (what it names is not in flight), never believed.
    # (`sack_bits_unsent` counts SACKs that were believed, but for those bits.)
    sack_bits_unsent: int = 0  # a SACK whose bitmap named PSNs never sent: bits masked
    nack_stale: int = 0  # a NAK (PSN sequence error) for a PSN not in flight
    trim_stale: int = 0  # a NAK(TRIMMED) naming no copy in flight (its EV, try, PSN)
    probe_unknown: int = 0  # a probe reply for no probe in flight (late, forged, an EV
    #                         never probed)
    cnp_limited: int = 0  # a CNP sooner than half the notification point's interval

    _LATER: ClassVar[tuple[str, ...]] = ("sack_bits_unsent", "nack_stale", "trim_stale",
                                         "probe_unknown", "cnp_limited")
    # What each reason means, in a few words (`twin stats --drops`)
    MEANING: ClassVar[dict[str, str]] = {
        "truncated": "shorter than its headers",
        "malformed": "valid ICRC, invalid packet",
        "bad_icrc": "ICRC mismatch: corrupted, or cut",
        "unknown_qp": "for no QP of this endpoint",
        "bad_rkey": "data with a wrong rkey",
        "out_of_bounds": "data outside the registered buffer",
        "psn_window": "data too far ahead of cum",
        "duplicate": "data that had arrived (answered)",
        "ack_unsent": "ACK or NAK naming a PSN never sent",
        "sack_bits_unsent": "SACK bits for PSNs never sent (masked)",
        "nack_stale": "NAK for a PSN not in flight",
        "trim_stale": "NAK(TRIMMED) naming no copy in flight",
        "probe_unknown": "probe reply for no probe in flight",
        "cnp_limited": "CNP sooner than an NP sends one",
    }

    def to_dict(self) -> dict[str, Any]:
        return {"truncated": self.truncated, "malformed": self.malformed,
                "bad_icrc": self.bad_icrc, "unknown_qp": self.unknown_qp,
                "bad_rkey": self.bad_rkey, "out_of_bounds": self.out_of_bounds,
                "psn_window": self.psn_window, "duplicate": self.duplicate,
                "ack_unsent": self.ack_unsent, **{k: getattr(self, k) for k in self._LATER}}

    NONE: ClassVar[dict[str, int]] = {}  # what an endpoint from before drops counted sends

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EndpointDrops:
        if not d:
            return cls(0, 0, 0, 0, 0, 0, 0, 0, 0)
        return cls(d["truncated"], d["malformed"], d["bad_icrc"], d["unknown_qp"],
                   d["bad_rkey"], d["out_of_bounds"], d["psn_window"], d["duplicate"],
                   d["ack_unsent"], *(d.get(k, 0) for k in cls._LATER))


@dataclass(frozen=True)
class EndpointStats:
    """One endpoint: its NIC, its packet drops, its totals and every open QP."""

    host: str
    ports: int  # NIC port state: bit p set while the port on plane p is up
    bad_packets: int  # packets dropped for a bad ICRC or header
    unknown_qp: int  # well-formed packets (data, ACKs, probes) for no QP of ours
    totals: EndpointTotals
    send_qps: tuple[SendQpStats, ...]  # in the order they were opened
    recv_qps: tuple[RecvQpStats, ...]
    drops: EndpointDrops  # every dropped packet, by reason
    datapath: str = "python"  # "compiled", or "python: why" (twin.mrc.loop)
    transport: str = "python"  # "compiled", or "python: why" (twin.mrc.core)

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "ports": self.ports, "bad_packets": self.bad_packets,
                "unknown_qp": self.unknown_qp, "totals": self.totals.to_dict(),
                "send_qps": [q.to_dict() for q in self.send_qps],
                "recv_qps": [q.to_dict() for q in self.recv_qps],
                "drops": self.drops.to_dict(), "datapath": self.datapath,
                "transport": self.transport}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EndpointStats:
        # a QP of an endpoint from before per-QP transports runs the endpoint's
        own = d.get("transport", "python").split(":")[0]
        return cls(d["host"], d["ports"], d["bad_packets"], d["unknown_qp"],
                   EndpointTotals.from_dict(d["totals"]),
                   tuple(SendQpStats.from_dict(q, own) for q in d["send_qps"]),
                   tuple(RecvQpStats.from_dict(q, own) for q in d["recv_qps"]),
                   EndpointDrops.from_dict(d.get("drops") or EndpointDrops.NONE),
                   d.get("datapath", "python"), d.get("transport", "python"))

    def send_qp(self, qpn: int) -> SendQpStats | None:
        return next((q for q in self.send_qps if q.qpn == qpn), None)

    def recv_qp(self, qpn: int) -> RecvQpStats | None:
        return next((q for q in self.recv_qps if q.qpn == qpn), None)

