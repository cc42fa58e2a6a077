"""What an MRC endpoint counts, and its counters read out: the `stats`, `wait`,
`metrics` and `guards` replies.

    EndpointCounters   the packet loop's own counters (drops by reason, per-plane bytes)
                       and the totals of the QPs it closed
    endpoint_stats     the loop and every open QP, now: a stats.EndpointStats
    send_qp_stats      one sending QP: a stats.SendQpStats (also the `wait` reply)
    metrics            the same counters in Prometheus text format (twin.mrc.exposition)
    guards             whether every registered buffer's guard bytes are intact

The readers take the packet loop (twin.mrc.loop.PacketLoop) and read its QPs; they
change nothing. The schema of what they return is twin.mrc.stats.
"""

from __future__ import annotations

import time
from dataclasses import asdict

from twin.mrc import exposition
from twin.mrc.stats import (
    EndpointDrops,
    EndpointStats,
    EndpointTotals,
    MessageLatency,
    RecvQpStats,
    SenderCounters,
    SendQpStats,
)

# Drops the endpoint counts itself; the rest are its QPs' transport counters
ENDPOINT_DROPS = ("truncated", "malformed", "bad_icrc", "unknown_qp", "bad_rkey",
                  "out_of_bounds", "probe_unknown")
# EndpointDrops counted by the sending QPs' transport: drop reason -> SenderStats field
SENDER_DROPS = {"ack_unsent": "acks_unsent", "sack_bits_unsent": "sack_bits_unsent",
                "nack_stale": "nacks_stale", "trim_stale": "trims_stale",
                "cnp_limited": "cnps_limited"}
# The congestion signals over the endpoint's life (EndpointTotals.signals): receiving
# QPs' (rx) and sending QPs' (tx) counters, summed
SIGNALS = ("ce_marked_rx", "trimmed_rx", "nacks_seq_sent", "nacks_trimmed_sent",
           "ecn_marks_tx", "nacks_seq_received", "nacks_trimmed_received",
           "ev_skips_ecn", "ev_skips_trim", "ev_skips_rtt")


def signals_of(sq, rq) -> dict[str, int]:
    """One sending QP's and one receiving QP's congestion-signal counters (either may
    be None), keyed as SIGNALS."""
    out = dict.fromkeys(SIGNALS, 0)
    if rq is not None:
        r = rq.receiver.stats
        out.update(ce_marked_rx=r.ce_marked, trimmed_rx=r.trimmed,
                   nacks_seq_sent=r.nacks - r.nacks_trimmed, nacks_trimmed_sent=r.nacks_trimmed)
    if sq is not None:
        t, by = sq.sender.stats, sq.sender.evs.skips_by
        out.update(ecn_marks_tx=t.ecn_marks, nacks_seq_received=t.nacks_seq,
                   nacks_trimmed_received=t.nacks_trimmed + t.trims_ignored,
                   ev_skips_ecn=by["ecn"], ev_skips_trim=by["trim"], ev_skips_rtt=by["rtt"])
    return out


class EndpointCounters:
    """Counters over the endpoint's life that no open QP holds: packets the loop
    dropped, bytes per plane, and what QPs closed before had counted."""

    def __init__(self, planes):
        self.drops = dict.fromkeys(ENDPOINT_DROPS, 0)
        self.totals = {"bytes_sent": 0, "bytes_placed": 0, "retransmits": 0,
                       "ev_retirements": 0}
        # per plane, over the endpoint's life: payload sent (retransmissions included)
        # and placed (duplicates not), for per-plane telemetry across QPs come and gone
        self.tx_plane_bytes: dict[int, int] = {p: 0 for p in planes}
        self.rx_plane_bytes: dict[int, int] = {p: 0 for p in planes}
        # the QPs' own drop counters, of QPs closed before
        self.closed_drops = {"duplicate": 0, "psn_window": 0, **dict.fromkeys(SENDER_DROPS, 0)}
        self.closed_signals = dict.fromkeys(SIGNALS, 0)  # their congestion signals

    def close(self, sq, rq) -> None:
        """A sending QP, a receiving QP (either may be None) closed: closed QPs still
        count in the endpoint's totals."""
        if sq is not None:
            self.totals["bytes_sent"] += sq.sender.stats.bytes
            self.totals["retransmits"] += sq.sender.stats.retransmits
            self.totals["ev_retirements"] += sq.sender.evs.retirements
            st = sq.sender.stats
            for drop, name in SENDER_DROPS.items():
                self.closed_drops[drop] += getattr(st, name)
        for k, n in signals_of(sq, rq).items():
            self.closed_signals[k] += n
        if rq is not None:
            self.totals["bytes_placed"] += rq.receiver.stats.bytes
            self.closed_drops["duplicate"] += rq.receiver.stats.duplicates
            self.closed_drops["psn_window"] += rq.receiver.stats.out_of_window


def send_qp_stats(loop, qp) -> SendQpStats:
    sender = qp.sender
    st = sender.stats
    done = qp.done_ns or time.monotonic_ns()
    elapsed = (done - qp.first_write_ns) / 1e9 if qp.first_write_ns else 0
    acked_bytes = min(st.acked * sender.cfg.mtu, sender.posted_bytes)
    single = sender.single_ev
    evs = sender.evs
    return SendQpStats(
        qpn=qp.qpn, peer=qp.peer, mode=qp.mode, idle=sender.idle, mtu=sender.cfg.mtu,
        failed=sender.failed, elapsed_s=elapsed,
        goodput_gbps=acked_bytes * 8 / elapsed / 1e9 if elapsed else 0.0,
        sender=SenderCounters(**asdict(st)), window=sender.window,
        srtt_us=sender.srtt / 1000, reorder_window_us=sender.reorder_window_ns() / 1000,
        # EVs now: the slots by state (they add up to ev_set_size), and the pools
        evs=evs.counts(), ev_set_size=evs.size, ev_pools=evs.pools(),
        # events over the QP's life
        ev_retirements_total=evs.retirements, ev_revivals_total=evs.revivals,
        ev_retirements_undone_total=evs.undone,
        planes_in_use=tuple(sender.planes_in_use()), send_errors=qp.send_errors,
        probes_sent=qp.probes_sent, messages_completed=sender.messages_completed,
        completions=tuple(MessageLatency(m.msn, (m.done_ns - m.posted_ns) / 1e3)
                          for m in list(sender.completed)[-16:]),
        events_logged=sender.log.total,
        single_path=loop.path(qp, single.value) if single is not None else None,
        ev_skips_total=evs.skips, dead_paths_total=evs.dead_paths,
        target_us=sender.cfg.target_ns / 1000, ev_skips_by=dict(evs.skips_by),
        cc=sender.cfg.cc,
        signals=tuple(k for k in ("ecn", "trim") if getattr(sender.cfg, k)),
        dcqcn=dcqcn_state(sender), transport=qp.transport, paths_used=paths_used(evs),
        path_checks_total=evs.path_checks)


def paths_used(evs) -> tuple[tuple[int, int, int], ...]:
    """(plane, t1, packets) of every path a packet of the QP went on, from the EVs the
    set still holds (slots, spares, retired pool) that carried one (Ev.sent, which both
    transports count). Read-only; a drill decides from it whether a fault met the QP's
    traffic. An EV the bounded retired pool forgot is not here (its losses are in the
    event log); same-rack paths have t1 0 (EvSet.path_of)."""
    sent: dict[tuple[int, int], int] = {}
    held = [*evs.active, *(ev for pool in evs.spare.values() for ev in pool),
            *evs.retired.values()]
    seen: set[int] = set()
    for ev in held:
        if ev.sent and ev.value not in seen:
            seen.add(ev.value)
            key = evs.path_of(ev)
            sent[key] = sent.get(key, 0) + ev.sent
    return tuple((plane, t1, n) for (plane, t1), n in sorted(sent.items()))


def dcqcn_state(sender) -> dict:
    """A sending QP's DCQCN state (SendQpStats.dcqcn)."""
    if sender.rp is None:
        return {"cnps_ignored": sender.cnps_ignored}
    return {**sender.rp.to_dict(), "paced_polls": sender.pacer.held}


def recv_qp_stats(qp) -> RecvQpStats:
    return RecvQpStats(qp.qpn, qp.bad_rkey, qp.receiver.cum,
                       tuple(list(qp.receiver.completions)[-16:]),  # (n, imm)
                       tuple(sorted(qp.rev_evs.values())), qp.cnps_sent,
                       transport=qp.transport, **asdict(qp.receiver.stats))


def guards(loop) -> dict:
    """Whether every registered buffer's guard bytes still hold their pattern."""
    qps = [*loop.recv_qps.values(), *loop.send_qps.values()]
    broken = sorted(q.qpn for q in qps if not q.mem.intact())
    return {"intact": not broken, "buffers": len(qps), "broken": broken}


def drop_counts(loop) -> EndpointDrops:
    """The endpoint's own drop counters, and its QPs' (closed ones included)."""
    rq = loop.recv_qps.values()
    sent = [q.sender.stats for q in loop.send_qps.values()]  # each a snapshot, once
    closed = loop.counters.closed_drops
    return EndpointDrops(
        **loop.counters.drops,
        psn_window=closed["psn_window"] + sum(q.receiver.stats.out_of_window for q in rq),
        duplicate=closed["duplicate"] + sum(q.receiver.stats.duplicates for q in rq),
        **{drop: closed[drop] + sum(getattr(st, name) for st in sent)
           for drop, name in SENDER_DROPS.items()})


def endpoint_stats(loop) -> EndpointStats:
    sq, rq = loop.send_qps.values(), loop.recv_qps.values()
    closed = loop.counters.totals
    totals = EndpointTotals(
        bytes_sent=closed["bytes_sent"] + sum(q.sender.stats.bytes for q in sq),
        bytes_placed=closed["bytes_placed"] + sum(q.receiver.stats.bytes for q in rq),
        retransmits=closed["retransmits"] + sum(q.sender.stats.retransmits for q in sq),
        ev_retirements=closed["ev_retirements"] + sum(q.sender.evs.retirements for q in sq),
        tx_bytes_per_plane=loop.tx_bytes_per_plane(),
        rx_bytes_per_plane=loop.rx_bytes_per_plane(),
        signals=signal_totals(loop))
    drops = drop_counts(loop)
    bad = drops.truncated + drops.malformed + drops.bad_icrc
    return EndpointStats(loop.host, loop.port_bitmap, bad, drops.unknown_qp,
                         totals, tuple(send_qp_stats(loop, q) for q in sq),
                         tuple(recv_qp_stats(q) for q in rq), drops, loop.datapath,
                         loop.transport)


def signal_totals(loop) -> dict[str, int]:
    """The congestion signals over the endpoint's life, closed QPs included."""
    out = dict(loop.counters.closed_signals)
    for q in [*loop.send_qps.values()]:
        for k, n in signals_of(q, None).items():
            out[k] += n
    for q in [*loop.recv_qps.values()]:
        for k, n in signals_of(None, q).items():
            out[k] += n
    return out


def metrics(loop) -> str:
    """Prometheus text exposition of this endpoint's counters (the `metrics` reply):
    the names and series of twin.mrc.exposition, without `lab` (an endpoint does not
    know its lab; `twin stats --prometheus` adds it)."""
    return exposition.endpoint_text(None, [endpoint_stats(loop)], sorted(loop.ports))
