"""Fabric signals, planned: each shaped switch port's virtual queue (pure).

A switch port with a rate is shaped by tbf (`latency` 20 ms, or 16 frames' time
where that is longer: `tbf_latency_ms`; a bucket of `tbf_burst`). In front of tbf,
at the port's TC egress, an eBPF program keeps a virtual queue in bytes that
drains at the same rate (twin.node.ebpf, `queue`) and turns its depth into the
signals MRC reacts to:

    ecn_min .. ecn_max   CE on ECN-capable packets, with a probability rising
                         linearly from 0 to 1 (RED-like); not on a T0's
                         host-facing ports unless `last_hop` (the MRC paper
                         keeps ECN off on the last hop)
    trim                 RoCE data (an MRC packet with an RDMA WRITE opcode)
                         that would take the queue past it is cut to its
                         headers (130 bytes) and forwarded; MRC's control
                         frames (ACK, NAK, probes, CNP) and ICMPv6 neighbour
                         discovery go on whole; anything else is dropped
    drop                 past it, nothing enters: the hard limit

tbf itself queues at most `tbf_limit` bytes (rate x latency + burst) and drops
beyond. Every threshold sits below that limit, so a packet the virtual queue
admits (a trimmed header above all) also fits in tbf's queue. The defaults are
fractions of it: ecn 10% to 40%, trim 60%, drop 80%.

Unshaped links get no queue: a veth without a rate never queues, the CPU is the
bottleneck there, and a queue program would have nothing to measure.
"""

from __future__ import annotations

from dataclasses import dataclass

from twin.node.ebpf.programs import port_slot

TBF_LATENCY_MS = 20  # a tbf's queue holds this long at its rate...
QUEUE_FRAMES = 16  # ...and at least this many frames: a switch buffer holds many packets
DEFAULT_FRACTIONS = {"ecn_min": 0.10, "ecn_max": 0.40, "trim": 0.60, "drop": 0.80}
ETH_HLEN = 14


def tbf_burst(rate_bps: int, mtu: int) -> int:
    """A tbf bucket that holds 4 ms at rate, and never less than two frames."""
    return max(rate_bps // 8 // 250, 2 * (mtu + ETH_HLEN))


def tbf_latency_ms(rate_bps: int, mtu: int) -> int:
    """tbf's `latency`: 20 ms, or QUEUE_FRAMES frames' time where that is longer (a slow
    port with big frames: 20 ms of a 3 Mbit/s port is 2 frames of 4 KB, too few for a
    queue to be marked before it is full)."""
    frames_ms = -(-QUEUE_FRAMES * (mtu + ETH_HLEN) * 8 * 1000 // rate_bps)
    return max(TBF_LATENCY_MS, frames_ms)


def tbf_args(rate_bps: int, mtu: int) -> list[str]:
    """`tc qdisc ... tbf` arguments for a port shaped to `rate_bps`."""
    return ["rate", f"{rate_bps}bit", "burst", str(tbf_burst(rate_bps, mtu)),
            "latency", f"{tbf_latency_ms(rate_bps, mtu)}ms"]


def tbf_limit(rate_bps: int, mtu: int) -> int:
    """The bytes tbf queues before it drops: what tc computes from `latency`
    (rate x latency + burst, tc/q_tbf.c)."""
    return rate_bps * tbf_latency_ms(rate_bps, mtu) // 8000 + tbf_burst(rate_bps, mtu)


@dataclass(frozen=True)
class Congestion:
    """The spec's `congestion:` settings. None: derived per port from its rate."""

    enabled: bool | None = None  # None: on where the fabric is shaped
    ecn_min: int | None = None
    ecn_max: int | None = None
    last_hop: bool = False  # mark CE on a T0's host-facing ports too
    trim: int | None = None
    drop: int | None = None

    def to_dict(self) -> dict | bool | None:
        """The spec mapping that parses back to this (None: the default, left out)."""
        if self.enabled is False:
            return False
        d: dict = {}
        ecn = {k: v for k, v in (("min", self.ecn_min), ("max", self.ecn_max)) if v is not None}
        if self.last_hop:
            ecn["last_hop"] = True
        if ecn:
            d["ecn"] = ecn
        d.update({k: v for k, v in (("trim", self.trim), ("drop", self.drop)) if v is not None})
        return d or None


@dataclass(frozen=True, order=True)
class PortQueue:
    """One switch port's virtual queue: the constants its egress program is built with.
    Sizes are bytes of Ethernet frames; `slot` is the port's place in the node's
    queue map (its eth number)."""

    dev: str
    slot: int
    rate_bps: int
    ecn_min: int
    ecn_max: int
    mark: bool  # False: never marks CE (a T0's host-facing port)
    trim: int
    drop: int


def thresholds(c: Congestion, rate_bps: int, mtu: int) -> dict[str, int]:
    """ecn_min, ecn_max, trim and drop for a port of this rate: the spec's values
    where it gives them and they fit below tbf's limit at this rate, else fractions
    of that limit (a link-rate fault can shape a port far below its planned rate)."""
    limit = tbf_limit(rate_bps, mtu)
    given = {"ecn_min": c.ecn_min, "ecn_max": c.ecn_max, "trim": c.trim, "drop": c.drop}
    if all(v is None or v < limit for v in given.values()):
        out = {k: (v if v is not None else int(limit * DEFAULT_FRACTIONS[k]))
               for k, v in given.items()}
        if out["ecn_min"] < out["ecn_max"] <= out["trim"] < out["drop"]:
            return out
    return {k: int(limit * f) for k, f in DEFAULT_FRACTIONS.items()}


def port_queue(c: Congestion, dev: str, rate_bps: int, mtu: int, mark: bool) -> PortQueue:
    t = thresholds(c, rate_bps, mtu)
    return PortQueue(dev, port_slot(dev), rate_bps, t["ecn_min"], t["ecn_max"], mark,
                     t["trim"], t["drop"])


