"""The MRC reliability engine of one QP, pure: no sockets, no clock of its own.

The datapath (or a test's simulated channel) feeds it time, SACKs and data
packets and sends what it returns, so the same code runs in the endpoint
daemon and in the lossy-channel unit tests.

Sender
    A message (RDMA WRITE, or WRITE with immediate) is cut into packets of at
    most `mtu` bytes; every packet has its own PSN and RETH address, so the
    receiver places it wherever it lands. Each packet takes the next EV of
    the QP's EvSet. Every transmission of a PSN is numbered (0 for the first
    copy); the receiver echoes (PSN, number) in its SACK, so the sender always
    knows which copy arrived.

    Everything from the wire is checked against the state it claims to act on
    (an ICRC is a CRC, not a MAC: anyone in the fabric can forge a valid frame):
      a SACK or NAK that names a PSN never sent, or a cum beyond one past the
      highest sent, is forged or corrupt: counted (acks_unsent), ignored whole
      a SACK bitmap's bits for PSNs never sent are masked off (sack_bits_unsent):
      the rest of the SACK is believed, since it may be true
      a NAK (PSN sequence error) for a PSN not in flight (nacks_stale), a
      NAK(TRIMMED) for anything but the copy in flight, named by its EV and
      transmission number (trims_stale): counted, ignored
      a CNP sooner than half the notification point's interval after the last one
      believed (dcqcn): counted (cnps_limited), ignored
    Memory per QP is bounded whatever arrives: the send orders are compacted once
    they hold more than their share of entries that name no copy in flight.

    Loss, four ways, fastest first (and a fifth, below: a dead path's):
      per path  a packet is lost when a packet sent after it *on the same path* (any EV
                of its plane and T1: static SRv6 puts them on the same links, in the
                same queues) is acked: a path is FIFO, so it was not merely late
                (reason per_path; counted in lost_per_ev, an older name)
      RACK      it is lost when a packet sent more than the reordering window after
                it, on any path, is acked (catches a dead path, where no later packet
                on the same path ever arrives). A PSN beyond what the SACK speaks for
                (cum + 1 + 64) is passed over, kept for a later SACK, and what was sent
                after it is still judged (a resend of the hole that holds cum, say)
      NAK       the receiver NAKs a hole that is further behind than its SACK
                bitmap reaches (PSN sequence error)
      timeout   the retransmit timer, last resort
    A lost packet is retransmitted selectively on another EV and (mode mrc)
    retires its EV, unless it timed out: a timeout names no path (a stalled
    receiver looks the same). With static SRv6 an EV is a path (plane, T1: every
    link it crosses), so a second loss on a path that has delivered nothing sent
    since the first shows the path dead, and every EV on it retires at once
    (evset.EvSet.path_lost); a later delivery of a packet sent on it puts them back.
    Whatever is still in flight on a path that just proved dead is declared lost
    then too (dead_path) and resent, not left to RACK, which cannot judge a PSN
    past the SACK bitmap while an earlier hole holds cum, nor to the timer.
    A copy declared lost that arrives after all (the SACK echoes its number, or
    the receiver reports the resend as a duplicate) was only late: its EV's
    retirement is undone and the reordering window widens a step.

    The reordering window is what paths measurably do to each other, not queueing:
    when a SACK acks a packet sent before the latest-sent packet already delivered,
    that packet trailed a later one by the gap between their sends (only counted
    where an earlier SACK could have reported it). A queue every path shares delays
    them all alike and adds nothing; one path behind the others adds its lag. The
    window is the decaying maximum of that (reordering_ns), a quarter of the lowest
    RTT, or the floor reorder_ns, whichever is largest (a whole srtt until 32 samples
    are in), times the steps spurious losses added, at most half the RTO.

    Tail probe (mrc, spray-static): the oldest first copy outstanding longer than
    srtt + 4 rttvar (tail_probe_ns: 1 ms at least, the RTO at most) is sent again by
    the timer, one a call, and not declared lost: no loss, no blame, no window cut. The
    SACK its copy draws says what arrived, so a window whose SACKs all died on a path
    cut behind them is acked within a few ms, not after the 10 ms RTO. When that SACK
    echoes the probe's copy and does not call it a duplicate, the first copy never
    arrived: it is lost on its EV then (lost_probe, loss reason `probe`), blamed as RACK
    would have blamed it, and a later arrival undoes it as any spurious loss. Without
    that a path that died under a QP whose RACK window is wider than its probe time
    (a shaped fabric) was probed around for ever and never blamed: 57 ms on the lab.

    Congestion signals: the queueing delay (RTT above the lowest seen), ECN (the
    receiver echoes CE marks in its SACK's congestion byte) and trims (a switch
    whose queue is full cuts a packet to its headers; the receiver NAKs it,
    NAK_TRIMMED). An EV the receiver echoes CE-marked, an EV that carried a trimmed
    packet, and an EV whose own delay is above target are SKIPped for a rotation.
    A trimmed PSN is resent at once on another EV: congestion, not loss (no EV
    retires, no loss is counted, the loss limit is untouched) until it has been
    trimmed `trim_limit` times: from then on each trim of it is a loss (lost_trim;
    like a timeout it blames no path), so a fabric that trims one PSN on every path
    fails the QP at its loss limit instead of resending it for ever
    (docs/transport-core.md).

    The window (packets), `cc` (twin.mrc.cc.Cc; the Sender's Window, chosen once from
    WINDOWS; docs/congestion.md):
      delay   it grows while the queueing delay is under `target_ns`, shrinks in
              proportion to the excess above it, and once per RTT on loss or trim
      nscc    UEC NSCC's four quadrants once the fabric has marked a packet of the
              QP (before that, a fabric that may not mark at all: as delay):
                delay low, no mark    proportional increase
                delay low, marked     hold: the EV skip spreads the load
                delay high, marked    multiplicative decrease in proportion to the
                                      excess, once per RTT
                delay high, no mark   a small fair increase (the queue is not where
                                      a switch marks: the reverse path, a host)
              and QuickAdapt on a trim: the window drops to what was acked in the
              last RTT, once per RTT.
    `ecn` and `trim` switch each signal's use off (a mark is still counted; a trim
    NACK is then ignored and the hole found as a loss), for comparisons.
    The target is at least QUEUE_PACKETS packets' time on the slowest link
    (queueing_target_ns): one packet waiting behind another at a 25 Mbit/s port
    is 1.35 ms, and a target below that reads a busy link as congested and pins
    the window at its floor.

    Events (EVENT_KINDS): each packet declared lost, the first loss on each EV,
    every EV state change with its reason, EV retirements, retransmissions and
    their acks, port-state changes (ours and the peer's), background probe answers
    and revived or un-retired EVs go into a bounded log (EventLog) with the
    caller's clock (the endpoint passes CLOCK_MONOTONIC ns). Acknowledged bytes
    are summed per 1 ms bin and plane from the first write (AckedBins, bounded).
    Both cost the per-packet path one add; events are per loss or state change.

Modes (per QP: twin.mrc.modes.Mode; the Sender's ModeRules, chosen once from MODE_RULES)
    mrc            all of the above
    spray-static   sprays over the EV set but never retires or skips an EV
    single-path    one hash-chosen EV for the QP's life, go-back-N recovery,
                   and the QP fails after `retry_limit` retransmits of one
                   PSN: how RoCE over ECMP behaves (a port down, ours or the
                   peer's, is no exception: it sends into it and dies at the limit)

    Giving up (mrc, spray-static): a PSN lost on a path is resent on another,
    so only silence fails the QP: `retry_limit` timeouts of one PSN in a row,
    each timer twice the last (a stalled 2-core machine must not use up the
    tries in a few RTOs), or `loss_limit` losses of it in all.

Receiver
    Places each new packet at its address, tracks the cumulative PSN and a
    bitmap of the PSNs received above it, drops duplicates (and says so in
    its SACK) and PSNs too far ahead to have been sent (RECV_WINDOW),
    delivers WRITE_IMM completions in PSN order, and answers with SACKs
    (cumulative PSN + 64-bit bitmap, echoing the EV, PSN and transmission
    number of the packet that triggered it). A CE-marked packet is answered at
    once, its SACK's congestion byte saying so (CONGESTION_ECHO_CE) and counting
    the marks since the previous SACK; a trimmed packet is never placed and is
    answered at once with a NAK_TRIMMED naming its PSN.
"""

from __future__ import annotations

import collections
import heapq
import weakref
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter

from twin.mrc import dcqcn
from twin.mrc.cc import Cc
from twin.mrc.evset import Ev, EvSet, NoUsableEv
from twin.mrc.modes import Mode

BITMAP_BITS = 64
NACK_DISTANCE = BITMAP_BITS  # a hole this far behind the newest PSN is NAKed
# PSNs above the cumulative PSN a receiver accepts: far more than a sender keeps
# outstanding (its window is at most a few hundred packets), far less than the 2**23
# a 24-bit PSN can reach ahead. Beyond it a packet is dropped, not placed: its bit
# would grow the receive bitmap without bound and claim a PSN not yet sent.
RECV_WINDOW = 1 << 16
TRY_MASK = 0x7F  # transmission numbers travel in 7 bits
_SEND_ORDER = attrgetter("seq")
LOSS_REASONS = ("per_path", "rack", "nack", "timeout", "dead_path", "trim")
# Losses that name no path: no EV retires for them (see _declare_lost)
_BLAMELESS = ("timeout", "dead_path", "trim")
CONGESTION_ECHO_CE = 0x80  # the SACK congestion byte (wire.CONGESTION_ECHO_CE): the
CONGESTION_COUNT = 0x7F  # echoed packet was CE-marked | CE-marked packets since the last
MESSAGES_KEPT = 64  # completed messages remembered for stats (the count is kept in full)
LOST_REMEMBERED = 1024  # PSNs declared lost, remembered to recognise a late arrival
# A posted write's packet records are built as the window reaches them, this many at
# a time: posting 2 GiB costs nothing up front (it was ~1 s of the event loop, before
# the first packet and while every other QP's acks waited), and a QP holds records for
# what is near the window only.
BUILD_CHUNK = 1024
REORDER_STEPS_MAX = 8
REORDERING_DECAY = 1 - 1 / 256  # per RTT sample
REORDERING_LEARNED = 32  # RTT samples before the reordering seen is trusted (before: srtt)

# The send orders are compacted (entries naming no copy in flight dropped) once this
# many entries, plus twice the packets in flight, were added since the last time: the
# cost is amortised to O(1) a packet, and the orders stay O(in flight) whatever the
# peer or the fabric does (a PSN trimmed for ever, a path that never answers).
COMPACT_AFTER = 1024
# A CNP sooner than this share of the notification point's interval after the last one
# believed is counted and ignored: an NP sends at most one per interval per QP, and
# arrivals may bunch up to half of it.
CNP_SPACING = 0.5

BIN_NS = 1_000_000  # acked_bins: 1 ms
BINS_MAX = 16_384  # acked_bins kept per QP (16 s of 1 ms bins); older ones are summed

EVENT_KINDS = {
    "loss": "a packet declared lost (detail: how: per_path, rack, nack, timeout, dead_path, "
            "trim)",
    "first_loss": "the first packet declared lost on this EV (detail: how)",
    "ev_state": "an EV changed state (detail: 'old->new: why'; states good, assumed_bad, "
                "denied, and spare/new for an EV leaving or entering a slot; GOOD<->SKIP "
                "is counted, not logged: ev_skips_total)",
    "retire": "an EV retired as ASSUMED_BAD (detail: why, and its replacement)",
    "retransmit": "a PSN sent again (ev: the new EV; detail: the EV of the copy before)",
    "repaired": "a resent PSN acknowledged (ev: the EV that delivered it)",
    "spurious": "a copy declared lost arrived after all: its EV's retirement undone",
    "port": "a NIC port changed, ours or the peer's (detail: plane, up/down, local/peer)",
    "probe": "a background probe of a retired EV answered or timed out (detail: ok/lost; "
             "every ok, and a lost only when the EV's previous answer was not)",
    "revive": "background probes brought a retired EV back",
    "trim": "a NACK(TRIMMED): a switch cut the packet; resent at once on another EV, "
            "no loss counted until its PSN reaches trim_limit (ev: the EV that carried it)",
}


@dataclass(slots=True)
class Event:
    """One line of a QP's event log; t_ns is the caller's clock (CLOCK_MONOTONIC ns)."""

    t_ns: int
    kind: str  # one of EVENT_KINDS
    ev: int = 0
    psn: int = -1
    detail: str = ""

    def to_dict(self) -> dict:
        return {"t_us": self.t_ns // 1000, "t_ns": self.t_ns, "kind": self.kind, "ev": self.ev,
                "psn": self.psn, "detail": self.detail}


class EventLog:
    """Bounded: the first `head` events are kept (a failover's start), then the latest
    `tail` (where things stand); `dropped` counts what fell in between."""

    def __init__(self, head: int = 2048, tail: int = 2048):
        self._head: list[Event] = []
        self._head_max = head
        self._tail: collections.deque[Event] = collections.deque(maxlen=tail)
        self.dropped = 0
        self.total = 0

    def append(self, event: Event) -> None:
        self.total += 1
        if len(self._head) < self._head_max:
            self._head.append(event)
            return
        if len(self._tail) == self._tail.maxlen:
            self.dropped += 1
        self._tail.append(event)

    def __iter__(self) -> Iterator[Event]:
        yield from self._head
        yield from self._tail

    def __len__(self) -> int:
        return len(self._head) + len(self._tail)


class AckedBins:
    """Payload bytes newly acknowledged, per `bin_ns` bin and per plane of the EV that
    carried the acked copy, from the QP's first write. Bounded: at most `max_bins` bins
    (a little more between trims) are kept; older ones are dropped from the front, their
    bytes summed per plane in `dropped_bytes` and counted in `dropped_bins`.

    The per-ack cost is one list add: `at(now)` (once per SACK) returns the current
    bin's counters, indexed by plane."""

    def __init__(self, planes: Iterable[int], bin_ns: int = BIN_NS, max_bins: int = BINS_MAX):
        self.planes = sorted(planes)
        self.bin_ns, self.max_bins = bin_ns, max_bins
        self.first_write_ns: int | None = None
        self._bins = {p: array("q") for p in self.planes}  # closed bins, oldest first
        self._first = 0  # bin number (since the first write) of _bins[p][0]
        self._bin = 0  # bin number of `current`; _first + len(_bins[p]) == _bin
        self.current = [0] * 16  # bytes per plane in bin _bin (an EV's plane is 4 bits)
        self.dropped_bins = 0
        self.dropped_bytes = dict.fromkeys(self.planes, 0)

    def start(self, now: int) -> None:
        if self.first_write_ns is None:
            self.first_write_ns = now

    def at(self, now: int) -> list[int]:
        """The counters of the bin `now` falls in (later bins never come back)."""
        if self.first_write_ns is None:
            self.first_write_ns = now
        n = (now - self.first_write_ns) // self.bin_ns
        if n > self._bin:
            self._advance(n)
        return self.current

    def _advance(self, n: int) -> None:
        cur, bins, gap = self.current, self._bins, n - self._bin - 1
        kept = self._bin - self._first + 1 + gap  # closed bins after this step
        if kept > self.max_bins + gap // 2 and gap >= self.max_bins:  # all fall out
            for p in self.planes:
                self.dropped_bytes[p] += sum(bins[p]) + cur[p]
                bins[p] = array("q")
                cur[p] = 0
            self.dropped_bins += kept
            self._first = n
        else:
            zeros = array("q", bytes(8 * gap))
            for p in self.planes:
                arr = bins[p]
                arr.append(cur[p])
                arr.extend(zeros)
                cur[p] = 0
        self._bin = n
        over = self._bin - self._first + 1 - self.max_bins
        if over > self.max_bins // 8:  # trim in steps: deleting from the front is O(n)
            for p in self.planes:
                arr = bins[p]
                self.dropped_bytes[p] += sum(arr[:over])
                del arr[:over]
            self.dropped_bins += over
            self._first += over

    def to_dict(self) -> dict:
        """t0_ns: the start of the first bin kept (the first write, unless bins were
        dropped: then first_write_ns + dropped_bins * bin_ns)."""
        first = self.first_write_ns
        return {"t0_ns": 0 if first is None else first + self._first * self.bin_ns,
                "bin_ns": self.bin_ns, "first_write_ns": first,
                "planes": {str(p): [] if first is None else [*self._bins[p], self.current[p]]
                           for p in self.planes},
                "dropped_bins": self.dropped_bins,
                "dropped_bytes": {str(p): n for p, n in self.dropped_bytes.items()}}


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class TxPacket:
    """One data packet to put on the wire."""

    psn: int
    ev: int
    va: int
    payload: memoryview
    tries: int  # transmission number on the wire: 0 for the first copy, modulo 128
    ack_req: bool
    imm: int | None


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class SackReport:
    """A decoded SACK as the Sender consumes it (wire.Sack is its bytes' fields)."""

    cum: int  # every PSN below is received
    bitmap: int  # bit i: PSN cum + 1 + i received
    ev: int  # EV of the packet that triggered this SACK
    psn: int  # its PSN
    tries: int  # its transmission number
    port_state: int = 0xFFFF  # bit p: the receiver's port on plane p is up
    congestion: int = 0  # CONGESTION_ECHO_CE | CE-marked packets since the last SACK
    dup: bool = False  # that packet was a duplicate: two copies of its PSN arrived


TARGET_FLOOR_NS = 400_000  # the queueing-delay target on fast links
QUEUE_PACKETS = 2  # packets queued at the bottleneck that are not yet congestion


REORDER_FRAMES = 2  # RACK's floor on a slow fabric: frames' time on its slowest link
RTO_FRAMES = 16  # the retransmit timer's floor there: a port queue's worth (16 frames)
TAIL_PROBE_FRAMES = 4  # the tail probe's floor there


def slow_link_floors(frame_bytes: int, slowest_bps: int | None) -> dict[str, int]:
    """SenderConfig floors for a fabric whose slowest link runs at `slowest_bps`: where a
    frame takes milliseconds to serialize (4 KB at 3 Mbit/s is 11 ms), one path's packet
    can trail another's by several frames' time with nothing lost, so RACK's window and
    the timer (which caps it at half) start there. {} on an unshaped fabric."""
    if not slowest_bps:
        return {}
    frame_ns = frame_bytes * 8 * 1_000_000_000 // slowest_bps
    return {"reorder_ns": max(SenderConfig.reorder_ns, REORDER_FRAMES * frame_ns),
            "rto_min_ns": max(SenderConfig.rto_min_ns, RTO_FRAMES * frame_ns),
            "tail_probe_min_ns": max(SenderConfig.tail_probe_min_ns,
                                     TAIL_PROBE_FRAMES * frame_ns)}


def queueing_target_ns(frame_bytes: int, slowest_bps: int | None) -> int:
    """The window's queueing-delay target on a fabric whose slowest link runs at
    `slowest_bps` (None: unshaped): QUEUE_PACKETS frames' time on it, 400 µs at least."""
    if not slowest_bps:
        return TARGET_FLOOR_NS
    return max(TARGET_FLOOR_NS, QUEUE_PACKETS * frame_bytes * 8 * 1_000_000_000 // slowest_bps)


@dataclass
class SenderConfig:
    mode: str = Mode.MRC.value  # twin.mrc.modes.Mode: the Sender's ModeRules
    mtu: int = 4096
    init_window: float = 16
    min_window: float = 2
    max_window: float = 256
    target_ns: int = TARGET_FLOOR_NS  # queueing delay the window steers to
    # congestion control, twin.mrc.cc.Cc (the Sender's Window): nscc (delay, ECN, trims),
    # delay (delay only), dcqcn (twin.mrc.dcqcn: a paced rate, the window a fixed cap)
    cc: str = Cc.NSCC.value
    ecn: bool = True  # use echoed CE marks: SKIP the marked EV, and nscc's quadrants
    trim: bool = True  # act on NACK(TRIMMED): resend at once elsewhere; off: found as loss
    pi_gain: float = 1.0  # nscc: packets per ack added at zero delay, in proportion below
    fair_increase: float = 1.0  # nscc: packets per RTT added while delay is high, unmarked
    md_gain: float = 1.0  # nscc: window *= 1 - md_gain * (delay - target) / delay, per RTT
    md_max: float = 0.5  # nscc: the most one multiplicative decrease takes
    reorder_ns: int = 50_000  # RACK's floor; srtt/4 when larger; widened by late arrivals
    rto_min_ns: int = 10_000_000  # last resort; a noisy 2-core VM stalls for ms at times
    # mrc, spray-static: the oldest first copy outstanding srtt + 4 * rttvar (this at
    # least, the RTO at most) is sent again as a tail probe: no loss, no blame, no window
    # cut; the SACK it draws says what arrived (docs/transport-core.md)
    tail_probe_min_ns: int = 1_000_000
    retry_limit: int = 7  # single-path: losses of one PSN; else: its timeouts in a row
    loss_limit: int = 32  # mrc, spray-static: losses of one PSN, whatever found them
    trim_limit: int = 16  # trims of one PSN before each further trim of it is a loss
    backoff_max: int = 6  # a PSN's timer doubles per timeout, up to 2**backoff_max x RTO
    line_rate_bps: int = 0  # the QP's port rate (0: unshaped): dcqcn's line rate
    dcqcn: object = None  # dcqcn.Dcqcn parameters (None: scaled from line_rate_bps)


@dataclass
class Msg:
    """A posted message, until its last PSN is acknowledged (the compiled Sender makes
    them too: twin.mrc.core binds this class to it)."""
    msn: int
    last_psn: int
    imm: int | None
    posted_ns: int
    done_ns: int | None = None


@dataclass(slots=True)
class _Tx:
    psn: int
    msg: Msg
    offset: int
    length: int
    ev: Ev | None = None
    sent_ns: int = 0
    seq: int = 0  # send order, across retransmissions
    tries: int = 0  # copies sent so far
    acked: bool = False
    in_flight: bool = False
    losses: int = 0  # times this PSN itself was lost (go-back-N resends do not count)
    timeouts: int = 0  # of those, by the timer since it was last lost any other way
    trims: int = 0  # NAK(TRIMMED)s of this PSN acted on
    probed_ev: Ev | None = None  # a tail probe's first copy went on this EV, at probed_ns,
    probed_ns: int = -1  # and has not been judged since


@dataclass
class SenderStats:
    packets: int = 0
    bytes: int = 0
    retransmits: int = 0
    lost_per_ev: int = 0  # found by a later packet on the same path (per_path; the name is older)
    lost_rack: int = 0
    lost_timeout: int = 0
    lost_nack: int = 0
    spurious: int = 0  # losses a late copy proved wrong
    acked: int = 0
    per_plane_packets: dict[int, int] = field(default_factory=dict)
    acks_unsent: int = 0  # SACKs and NAKs naming a PSN never sent: ignored whole
    lost_dead_path: int = 0  # in flight on a path when it proved dead: resent at once
    ecn_marks: int = 0  # CE-marked packets the receiver reported (SACK congestion counts)
    ecn_echoes: int = 0  # SACKs echoing a CE-marked packet (its EV SKIPped, with ecn on)
    nacks_seq: int = 0  # NAK(PSN sequence error) received (lost_nack: those acted on)
    nacks_trimmed: int = 0  # NAK(TRIMMED) received and acted on: the PSN resent at once
    trims_ignored: int = 0  # NAK(TRIMMED) for a copy not in flight (stale), or trim off
    quick_adapts: int = 0  # nscc: the window cut to what the last RTT acked, on a trim
    window_decreases: int = 0  # multiplicative decreases (nscc: delay high and marked)
    # hostile or stale inputs, each counted and ignored (the module doc)
    sack_bits_unsent: int = 0  # SACKs whose bitmap named PSNs never sent: those bits masked
    nacks_stale: int = 0  # NAK(PSN sequence error) for a PSN not in flight: ignored
    trims_stale: int = 0  # NAK(TRIMMED) naming no copy in flight (in trims_ignored too)
    cnps_limited: int = 0  # CNPs sooner than CNP_SPACING of the NP's interval: ignored
    lost_trim: int = 0  # losses declared because a PSN reached trim_limit
    tail_probes: int = 0  # first copies sent again by the timer as tail probes (not losses)
    lost_probe: int = 0  # first copies shown lost by their tail probe's copy arriving alone


class QpFailed(RuntimeError):
    pass


def weakly(sender: Sender) -> Callable[[Ev, str, str, str], None]:
    """The sender's EV-change handler through a weak reference. A bound method would
    make sender and EV set a cycle, which only the cyclic GC frees; an idle endpoint
    seldom runs it, so a closed QP's packets, and the buffer they are views of, stayed."""
    ref = weakref.ref(sender)

    def changed(ev: Ev, old: str, new: str, why: str) -> None:
        s = ref()
        if s is not None:
            s.ev_changed(ev, old, new, why)
    return changed


# -- what a mode does, what a congestion control does --------------------------------
#
# The Sender asks its ModeRules (one per twin.mrc.modes.Mode) and its Window (one per
# twin.mrc.cc.Cc), both chosen once when it is made, wherever the modes or the
# congestion controls differ; neither holds state (the Sender's fields stay its own:
# window, srtt, the once-per-RTT stamps), so the compiled Sender, which mirrors them,
# and a trace's snapshot read the same fields whatever the choice.


class ModeRules:
    """What a mode does where the modes differ. This base is spray-static's: spray over
    the EV set, selective repeat, never retire nor SKIP an EV."""

    tail_probes = True  # the timer sends the oldest first copy again (on_timer)
    backoff = True  # a PSN's timer doubles per timeout in a row

    def unproven_cap(self, init_window: float, paths: int) -> int | None:
        """EvSet.set_unproven_cap's argument: packets a path not yet heard from holds."""
        return None

    def single_ev(self, evset: EvSet) -> Ev | None:
        """The one EV a single-path QP sends on, for its life (None: it sprays)."""
        return None

    def congested(self, evs: EvSet, ev: Ev, why: str) -> None:
        """`ev` carried a packet the fabric marked, trimmed or delayed (`why`)."""

    def echoed(self, s: Sender, sack: SackReport, echoed: _Tx | None) -> None:
        """The SACK echoes a CE-marked packet (ecn on)."""

    def unretire(self, evs: EvSet, value: int) -> bool:
        """A copy declared lost on EV `value` arrived late: undo its EV's retirement
        (True: one was undone)."""
        return False

    def blame(self, s: Sender, ev: Ev, psn: int, sent_ns: int, reason: str,
              now: int) -> bool:
        """A copy sent on `ev` was lost (`reason`): blame its EV and path. True when its
        path died now (what is in flight on it is resent)."""
        return False

    def give_up(self, s: Sender, tx: _Tx) -> None:
        """After a loss of `tx`: fail the QP (Sender._fail) if that was one too many."""
        if tx.timeouts > s.cfg.retry_limit:
            s._fail(f"PSN {tx.psn} timed out {tx.timeouts} times in a row", tx,
                    "retry limit")
        elif tx.losses > s.cfg.loss_limit:
            s._fail(f"PSN {tx.psn} lost {tx.losses} times", tx, "loss limit")

    def resend(self, s: Sender, tx: _Tx) -> None:
        """Queue the lost `tx` to send again: itself alone (selective repeat)."""
        s._retx.append(tx.psn)


class MrcRules(ModeRules):
    """mrc: spray, and adapt: an EV that lost a packet retires (its path's every EV, when
    the path proves dead), a congested one SKIPs a rotation, a late copy undoes its EV's
    retirement, and a path not yet heard from holds a share of the first window."""

    def unproven_cap(self, init_window: float, paths: int) -> int | None:
        return -(-int(init_window) // paths)

    def congested(self, evs: EvSet, ev: Ev, why: str) -> None:
        evs.congested(ev, why)

    def echoed(self, s: Sender, sack: SackReport, echoed: _Tx | None) -> None:
        ev = echoed.ev if echoed is not None and echoed.ev is not None \
            and echoed.ev.value == sack.ev else s.evs.find(sack.ev)
        if ev is not None:
            s.evs.congested(ev, "ecn")

    def unretire(self, evs: EvSet, value: int) -> bool:
        return evs.unretire(value)

    def blame(self, s: Sender, ev: Ev, psn: int, sent_ns: int, reason: str,
              now: int) -> bool:
        # A timeout names no path (a stalled receiver looks the same); a packet resent
        # because its path died was blamed already; a PSN trimmed past trim_limit was
        # trimmed on many paths, not lost on one (_BLAMELESS).
        return reason not in _BLAMELESS and s._blame(ev, psn, sent_ns, reason, now)


class SinglePathRules(ModeRules):
    """single-path: RoCE over ECMP. One hashed EV for the QP's life, go-back-N, no tail
    probe, a timer that does not back off, and the QP fails after `retry_limit`
    losses of one PSN, however they were found."""

    tail_probes = False
    backoff = False

    def single_ev(self, evset: EvSet) -> Ev | None:
        return evset.hashed()

    def give_up(self, s: Sender, tx: _Tx) -> None:
        if tx.losses > s.cfg.retry_limit:
            s._fail(f"PSN {tx.psn} lost {tx.losses} times", tx, "retry limit")

    def resend(self, s: Sender, tx: _Tx) -> None:
        """Go-back-N: everything in flight from the hole on is sent again."""
        later = [p for p in range(tx.psn + 1, s._sent_high + 1)
                 if (t := s._txs.get(p)) is not None and t.in_flight]
        for p in later:
            s._txs[p].in_flight = False
            s._inflight -= 1
        s._retx.extend([tx.psn, *later])


MODE_RULES: dict[Mode, ModeRules] = {Mode.MRC: MrcRules(), Mode.SPRAY_STATIC: ModeRules(),
                                     Mode.SINGLE_PATH: SinglePathRules()}


def _delay_step(w: float, delay: float, target: int) -> float:
    """The window steered by queueing delay alone: grow faster the further below
    target, shrink in proportion to the excess above it."""
    if delay <= target:
        w += max(0.1, (target - delay) / target)
    else:
        w -= min(w / 4, (delay - target) / delay * 2)
    return w


class Window:
    """A congestion control's window (packets): what an RTT sample, a mark, a loss and
    a trim do to the Sender's `window`. This base is `delay`'s: steered by queueing
    delay alone, cut once per RTT on loss or trim."""

    def adjust(self, s: Sender, delay: float, marked: bool, now: int) -> None:
        """One RTT sample (or one SACK reporting marks) of queueing delay `delay`."""
        cfg = s.cfg
        w = _delay_step(s.window, delay, cfg.target_ns)
        s.window = min(cfg.max_window, max(cfg.min_window, w))

    def on_loss(self, s: Sender, now: int) -> None:
        """A loss cuts the window, once an RTT (or reordering floor) at most."""
        if now - s._last_cut_ns > max(s.srtt, s.cfg.reorder_ns):
            s.window = max(s.cfg.min_window, s.window * 0.85)
            s._last_cut_ns = now

    def on_trim(self, s: Sender, now: int) -> None:
        """A trim: as a loss would cut it."""
        self.on_loss(s, now)


class NsccWindow(Window):
    """nscc: UEC NSCC's four quadrants once the fabric has marked a packet of the QP
    (before that, on a fabric that may not mark at all: as delay), QuickAdapt on a trim."""

    def adjust(self, s: Sender, delay: float, marked: bool, now: int) -> None:
        cfg = s.cfg
        target = cfg.target_ns
        w = s.window
        if not s.fabric_marks:  # a fabric not yet seen to mark: it may not mark
            w = _delay_step(w, delay, target)
        elif delay <= target:
            if not marked:  # proportional increase: the further below target, the more
                w += cfg.pi_gain * max(0.1, (target - delay) / target)
            # marked with little delay: hold; the marked EV SKIPs, which spreads the load
        elif marked:  # multiplicative decrease, in proportion to the excess, once per RTT
            if now - s._last_md_ns > max(s.srtt, cfg.reorder_ns):
                s._last_md_ns = now
                w *= 1 - min(cfg.md_max, cfg.md_gain * (delay - target) / delay)
                s.stats.window_decreases += 1
        else:  # queueing, but not where the fabric marks: a small fair increase
            w += cfg.fair_increase / max(w, 1.0)
        s.window = min(cfg.max_window, max(cfg.min_window, w))

    def on_trim(self, s: Sender, now: int) -> None:
        """QuickAdapt: the window drops to what the last RTT acked (never below the
        floor, never up), once per RTT."""
        if now - s._last_qa_ns <= max(s.srtt, s.cfg.reorder_ns):
            return
        s._last_qa_ns = now
        achieved = max(s._acked_prev, s._acked_epoch)
        if achieved < s.window:
            s.window = max(s.cfg.min_window, float(achieved))
            s.stats.quick_adapts += 1


class DcqcnWindow(NsccWindow):
    """dcqcn: the rate is twin.mrc.dcqcn's (the Sender's rp and pacer); the window is a
    fixed in-flight cap (dcqcn.for_sender pins min, init and max to it), so what moves
    it is clamped away. It still counts as nscc's does (window_decreases) and is cut on
    a trim as delay's is, as the Sender always did."""

    on_trim = Window.on_trim


WINDOWS: dict[Cc, Window] = {Cc.NSCC: NsccWindow(), Cc.DELAY: Window(),
                             Cc.DCQCN: DcqcnWindow()}


class Sender:
    def __init__(self, evset: EvSet, remote_va: int, config: SenderConfig | None = None):
        self.cfg = config or SenderConfig()
        mode = Mode.of(self.cfg.mode)
        if mode is None:
            raise ValueError(f"mode must be one of {Mode.listed()}")
        self._mode = MODE_RULES[mode]  # what the mode does where the modes differ
        # dcqcn: a rate (rp) and its pacer; the window becomes a fixed in-flight cap
        self.cfg, self.rp, self.pacer = dcqcn.for_sender(self.cfg)
        self.cnps_ignored = 0  # CNPs for a QP that runs no dcqcn: counted, not acted on
        # dcqcn: CNPs closer together than this are not believed (CNP_SPACING)
        self._cnp_gap_ns = 0 if self.rp is None else \
            int(self.rp.p.min_time_between_cnps_ns * CNP_SPACING)
        self._last_cnp_ns: int | None = None
        self.evs = evset
        self.remote_va = remote_va
        self.window = self.cfg.init_window
        self.base_rtt = float("inf")
        self.srtt = 0.0
        self.rttvar = 0.0  # the mean deviation of RTT samples (RFC 6298): the tail probe's
        # How late a packet can be and still arrive: how long after a packet was sent a
        # packet sent later had already been delivered when it was (one path trailing
        # another; a queue that delays every path alike adds nothing), and how far behind
        # a copy wrongly declared lost arrived (a decaying maximum). The RACK window
        # covers it, so reordering across paths is not loss.
        self.reordering_ns = 0.0
        self.rtt_samples = 0
        self.stats = SenderStats()
        self.log = EventLog()
        self.acked_bins = AckedBins(evset.planes)
        self._now = 0  # the time of the call being handled: stamps EV state changes
        evset.on_change = weakly(self)  # not a cycle: a closed QP's buffers go at once
        # mrc holds a path not yet heard from to a few packets (EvSet.unproven_cap): a
        # share of the first window, so a healthy start sprays as wide as ever.
        paths = len(evset.planes) * evset.paths_per_plane
        evset.set_unproven_cap(self._mode.unproven_cap(self.cfg.init_window, paths))
        self._stuck = False  # no EV could take a packet: wait for an ack, timer or port
        self.failed: str | None = None
        self.local_ports = self.remote_ports = 0xFFFF
        self.posted_bytes = 0
        self.messages_completed = 0
        self.completed: collections.deque[Msg] = collections.deque(maxlen=MESSAGES_KEPT)
        self._txs: dict[int, _Tx] = {}  # outstanding (unacked) PSN -> record
        self._order: collections.deque = collections.deque()  # (seq, psn) in send order
        # path (its PathState; an EV with none: its value) -> deque of (seq, psn)
        self._per_path: dict[object, collections.deque] = {}
        self._retx: collections.deque = collections.deque()  # PSNs to resend first
        self._unsent: collections.deque = collections.deque()  # PSNs built, never sent
        # posted, records not yet built: [msg, offset of its next packet, end, next PSN]
        self._pending: collections.deque[list] = collections.deque()
        self._built_psn = 0  # every PSN below has (or had: acked) its record
        # PSN -> (EV, reason, send time) of a copy declared lost, until it is resent and acked
        self._lost: collections.OrderedDict[int, tuple[int, str, int]] = \
            collections.OrderedDict()
        self._msgs: collections.deque = collections.deque()
        self._next_psn = 0
        self._next_msn = 0
        self._sent_high = -1  # highest PSN sent so far
        self._seq = 0
        self._inflight = 0
        self._since_compact = 0  # send-order entries added since the last _compact
        self._cum = 0
        self._rack_sent = -1  # send time of the latest-sent packet known delivered
        self._sacked = 0  # bit i: PSN _cum + 1 + i reported received by a SACK bitmap
        self._low = 0  # lowest PSN not yet acked
        self._last_cut_ns = -1
        self._reorder_steps = 1  # the RACK window, in units of its base
        self._single: Ev | None = self._mode.single_ev(evset)
        cc = Cc.of(self.cfg.cc)
        if cc is None:
            raise ValueError(f"cc must be one of {Cc.listed()}")
        self._cc = WINDOWS[cc]  # what the congestion control does to the window
        self.fabric_marks = False  # a CE mark came back: this fabric marks (nscc's quadrants)
        self.delay_ns = 0.0  # the latest queueing delay measured (RTT above the base)
        self._last_md_ns = -1  # the last multiplicative decrease (nscc: once per RTT)
        self._last_qa_ns = -1  # the last QuickAdapt (once per RTT)
        self._epoch_ns = 0  # acked packets per RTT, for QuickAdapt: this epoch's start,
        self._acked_epoch = self._acked_prev = 0  # its count, and the last whole epoch's

    # -- posting ----------------------------------------------------------------

    def post(self, length: int, offset: int = 0, imm: int | None = None, now: int = 0) -> int:
        """Queue an RDMA WRITE of `length` bytes of the source buffer at `offset` to the
        same offset of the remote buffer. Returns its message sequence number."""
        if length <= 0:
            raise ValueError("a write moves at least one byte")
        n = -(-length // self.cfg.mtu)
        self.posted_bytes += length
        self.acked_bins.start(now)
        msg = Msg(self._next_msn, self._next_psn + n - 1, imm, now)
        self._next_msn += 1
        self._pending.append([msg, offset, offset + length, self._next_psn])
        self._next_psn += n
        self._msgs.append(msg)
        return msg.msn

    def _build(self, count: int = BUILD_CHUNK) -> int:
        """Build the records of the next `count` posted packets (in PSN order) and queue
        them to send; how many were built."""
        built, mtu, txs, unsent = 0, self.cfg.mtu, self._txs, self._unsent
        while built < count and self._pending:
            seg = self._pending[0]
            msg, off, end, psn = seg
            while built < count and off < end:
                size = min(mtu, end - off)
                txs[psn] = _Tx(psn, msg, off, size)
                unsent.append(psn)
                off += size
                psn += 1
                built += 1
            if off < end:
                seg[1], seg[3] = off, psn
            else:
                self._pending.popleft()
            self._built_psn = psn
        return built

    @property
    def idle(self) -> bool:
        return not self._txs and not self._pending

    @property
    def cum(self) -> int:
        """Every PSN below this one has been acknowledged."""
        return self._cum

    @property
    def single_ev(self) -> Ev | None:
        """single-path's one EV (None in the spraying modes)."""
        return self._single

    def planes_in_use(self) -> list[int]:
        if self._single is not None:
            return [] if self._single.plane in self.evs.planes_down else [self._single.plane]
        return self.evs.planes_in_use()

    def _event(self, now: int, kind: str, ev: int = 0, psn: int = -1, detail: str = "") -> None:
        self.log.append(Event(now, kind, ev, psn, detail))

    def ev_changed(self, ev: Ev, old: str, new: str, why: str) -> None:
        self.log.append(Event(self._now, "ev_state", ev.value, -1, f"{old}->{new}: {why}"))

    def deny(self, values: Iterable[int], now: int) -> None:
        """Put EVs on the denylist (twin.mrc.evset.EvSet.deny), their changes logged."""
        self._now = now
        self._stuck = False
        for value in values:
            self.evs.deny(value)

    # -- sending ----------------------------------------------------------------

    def _pick_ev(self, avoid: Ev | None) -> Ev:
        """The next EV; a retransmission avoids the lost copy's plane when it can."""
        if self._single is not None:
            # RoCE knows one path: with its port (or the peer's) down, the NIC sends into
            # it all the same, nothing comes back, and the retry limit ends the QP. Held
            # instead, it hung for ever: no copy in flight, so no timer ever ran out.
            return self._single
        evs = self.evs
        ev = evs.next()
        for _ in range(8):
            if avoid is None or (ev.plane != avoid.plane and ev.value != avoid.value):
                break
            ev = self.evs.next()
        if avoid is not None and ev.value == avoid.value:
            # Not the very EV the copy took (a trimmed one's is merely SKIPped, and comes
            # back at the end of a rotation): any other will do, if there is one.
            for _ in range(self.evs.size):
                other = self.evs.next()
                if other.value != avoid.value:
                    return other
        return ev

    def poll(self, now: int, source: memoryview, budget: int = 64) -> list[TxPacket]:
        """Packets to send now: retransmissions first, then new ones, within the window."""
        if self.failed:
            return []
        self._now = now
        pacer = self.pacer
        if pacer is not None:  # dcqcn: no faster than the QP's rate
            budget = min(budget, pacer.allowance(now))
            if budget <= 0:
                return []
        out = []
        # Retransmissions go first and are not held back by the window: the
        # window may be full of packets that arrived but sit above the hole
        # the SACK bitmap cannot report past.
        while len(out) < budget and (self._retx or self._inflight < int(self.window)):
            if self._retx:
                psn = self._retx.popleft()
                tx = self._txs.get(psn)
                if tx is None or tx.acked or tx.in_flight:
                    continue
            elif self._unsent or (self._pending and self._build()):
                if self._emit_new(now, source, out, budget):
                    continue
                break
            else:
                break
            try:
                out.append(self._resend(tx, now, source))
            except NoUsableEv:  # every plane is down (or every unproven path is full):
                # hold the packet until an ack, the timer or a port change frees one
                self._retx.appendleft(tx.psn)
                self._stuck = True
                break
        if pacer is not None and out:
            pacer.consume(dcqcn.wire_bytes(out), now)
        return out

    def _emit_new(self, now: int, source: memoryview, out: list[TxPacket],
                  budget: int) -> bool:
        """First transmissions, as many as the window and `budget` let go, the sender's
        fields held in locals over the run (the per-packet cost of most of a transfer).
        Appends to `out`; False when no EV could be had (the packet is held, as `poll`
        holds it)."""
        room = min(budget - len(out), int(self.window) - self._inflight)
        txs, unsent, pending = self._txs, self._unsent, self._pending
        order_append, per_path, evs, single = self._order.append, self._per_path, self.evs, \
            self._single
        per_plane = self.stats.per_plane_packets
        seq, sent_high, remote_va = self._seq, self._sent_high, self.remote_va
        sent = nbytes = 0
        ok = True
        # A new packet goes on a path that has just lost one, to check it (EvSet.check;
        # retransmissions, which a repair waits for, never do): asked until none waits.
        checking = single is None and bool(evs.suspects)
        try:
            while sent < room:
                if not unsent and not (pending and self._build()):
                    break
                psn = unsent.popleft()
                tx = txs[psn]
                try:
                    ev = evs.check() if checking else None
                    if ev is None:
                        # none waits: nothing adds one while new packets go out
                        checking = False
                        ev = self._pick_ev(None) if single is not None else evs.next()
                except NoUsableEv:
                    unsent.appendleft(psn)
                    self._stuck = True
                    ok = False
                    break
                tx.ev, tx.sent_ns, tx.seq, tx.tries, tx.in_flight = ev, now, seq, 1, True
                if psn > sent_high:
                    sent_high = psn
                order_append((seq, psn))
                key = ev.path if ev.path is not None else ev.value
                q = per_path.get(key)
                if q is None:
                    q = per_path[key] = collections.deque()
                q.append((seq, psn))
                seq += 1
                ev.sent += 1
                if evs.proving:  # EvSet.sent, inlined: only while a path is unproven
                    evs.sent_unproven(ev)
                plane = ev.plane
                per_plane[plane] = per_plane.get(plane, 0) + 1
                sent += 1
                length = tx.length
                nbytes += length
                msg = tx.msg
                last = psn == msg.last_psn
                # Ask for an ack now where nothing may follow soon, or where a message ends.
                off = tx.offset
                out.append(TxPacket(psn, ev.value, remote_va + off, source[off:off + length],
                                    0, last or not (unsent or pending),
                                    msg.imm if last else None))
        finally:
            self._seq, self._sent_high = seq, sent_high
            self._inflight += sent
            self.stats.packets += sent
            self.stats.bytes += nbytes
            self._count_appends(sent)
        return ok

    def wants_to_send(self, now: int | None = None) -> bool:
        """Packets are queued and the window (or a retransmission) lets one go now
        (and, with dcqcn, the pacer at `now`: `next_send_ns` says when it will)."""
        return not self.failed and not self._stuck and bool(
            self._retx or ((self._unsent or self._pending)
                           and self._inflight < int(self.window))) and (
            self.pacer is None or now is None or self.pacer.allowance(now) > 0)

    def next_send_ns(self, now: int) -> int | None:
        """dcqcn: when the pacer lets the next packet go (None: not paced)."""
        return None if self.pacer is None else self.pacer.next_send_ns(now)

    def on_cnp(self, now: int) -> None:
        """A CNP for this QP (RoCEv2's congestion notification): dcqcn cuts the rate;
        any other cc counts it only."""
        if self.rp is None:
            self.cnps_ignored += 1
            return
        last = self._last_cnp_ns
        if last is not None and now - last < self._cnp_gap_ns:
            self.stats.cnps_limited += 1  # sooner than any notification point sends one
            return
        self._last_cnp_ns = now
        self.rp.on_cnp(now)

    def _resend(self, tx: _Tx, now: int, source: memoryview) -> TxPacket:
        """A packet sent before, again (first transmissions leave by `_emit_new`): on
        another EV, off the lost copy's plane where it can, and asking for an ack."""
        before = tx.ev
        ev = self._pick_ev(before)
        tx.ev, tx.sent_ns, tx.seq = ev, now, self._seq
        tx.tries += 1
        tx.in_flight = True
        self._seq += 1
        self._inflight += 1
        self._order.append((tx.seq, tx.psn))
        key = ev.path if ev.path is not None else ev.value
        q = self._per_path.get(key)
        if q is None:
            q = self._per_path[key] = collections.deque()
        q.append((tx.seq, tx.psn))
        ev.sent += 1
        if self.evs.proving:  # EvSet.sent, inlined: only while a path is unproven
            self.evs.sent_unproven(ev)
        self._count_appends(1)
        st = self.stats
        st.packets += 1
        st.bytes += tx.length
        st.per_plane_packets[ev.plane] = st.per_plane_packets.get(ev.plane, 0) + 1
        st.retransmits += 1
        self._event(now, "retransmit", ev.value, tx.psn, f"before on {before.value:#x}")
        last = tx.psn == tx.msg.last_psn
        return TxPacket(tx.psn, ev.value, self.remote_va + tx.offset,
                        source[tx.offset:tx.offset + tx.length], (tx.tries - 1) & TRY_MASK,
                        True, tx.msg.imm if last else None)

    def _count_appends(self, n: int) -> None:
        """`n` entries went into the send orders: compact them once enough did."""
        self._since_compact += n
        if self._since_compact > 2 * self._inflight + COMPACT_AFTER:
            self._compact()

    def _compact(self) -> None:
        """Drop the send orders' entries that name no copy in flight (acked, declared
        lost, trimmed, resent since): every reader skips them anyway, so nothing decides
        differently, but they pile up where nothing reads them from the front (a PSN
        trimmed again and again, an EV that never gets an ack)."""
        txs = self._txs

        def live(entry: tuple[int, int]) -> bool:
            tx = txs.get(entry[1])
            return tx is not None and tx.seq == entry[0] and tx.in_flight

        kept = [e for e in self._order if live(e)]
        self._order.clear()
        self._order.extend(kept)
        for key, q in list(self._per_path.items()):
            kept = [e for e in q if live(e)]
            if kept:
                q.clear()
                q.extend(kept)
            else:
                del self._per_path[key]
        self._since_compact = 0

    # -- acks -------------------------------------------------------------------

    def on_sack(self, sack: SackReport, now: int) -> None:
        if self.failed:
            return
        if not self._names_sent(sack.psn, sack.cum):
            return
        self._now = now
        self._stuck = False
        if sack.port_state != self.remote_ports:
            self._port_state(sack.port_state, self.local_ports, now)
        txs = self._txs
        c0 = self._cum
        if sack.cum > c0:
            acked = [p for p in range(c0, sack.cum) if p in txs]
            self._cum = sack.cum
            self._sacked >>= sack.cum - c0
            bits = sack.bitmap
        else:  # an older SACK (they can pass each other): align it to our cum
            acked = []
            bits = sack.bitmap >> (c0 - sack.cum)
        # Bits for PSNs never sent are not believed: nothing of them was on the wire.
        unsent = max(0, self._sent_high - self._cum)  # bits from this one name unsent PSNs
        if unsent < BITMAP_BITS and bits >> unsent:
            self.stats.sack_bits_unsent += 1
            bits &= (1 << unsent) - 1
        # Only bits no earlier SACK reported: each PSN is walked once, not per SACK.
        new = bits & ~self._sacked
        self._sacked |= bits
        bits = new
        base = self._cum + 1
        while bits:
            low = bits & -bits
            p = base + low.bit_length() - 1
            if p in txs:
                acked.append(p)
            bits ^= low
        echoed = txs.get(sack.psn)
        exact = None
        marked = False
        if sack.congestion:  # CE marks: counted always, used where ecn is on
            marked = self._marks(sack, echoed, now)
        if echoed is not None:
            acked.append(sack.psn)
            if (echoed.tries - 1) & TRY_MASK == sack.tries:
                exact = echoed
                self._rtt_sample(echoed.ev, now - echoed.sent_ns, now, marked)
                marked = False  # the window has seen it
        if marked:  # a mark without an RTT sample: the latest delay judges it
            self._cc.adjust(self, self.delay_ns, True, now)
        # An earlier copy arrived (the echo names it), or two copies did (the receiver
        # says duplicate): a loss declared in between was wrong, the copy only late.
        if sack.dup or (echoed is not None and exact is None):
            self._late(sack.psn, now)
        rack_sent = -1
        # Reordering: a packet delivered after one sent later than it had been (the
        # latest-sent delivered before this SACK) trailed it by the gap between their
        # sends. Only where an earlier SACK could have reported it (below c0 + 1 + 64) or
        # the echo names it: one beyond the bitmap may have arrived long ago, unreported.
        rack_before, reported, trailed = self._rack_sent, c0 + 1 + BITMAP_BITS, 0
        newly = []
        acked_bytes = self.acked_bins.at(now)  # this 1 ms bin's, indexed by plane
        evs = self.evs
        proving = evs.proving  # a path proven in this loop only makes gone() a no-op
        delivered = evs.delivered
        count = left_flight = 0
        probed = None  # a tail probe's copy the SACK echoes, arrived alone: its first lost
        for psn in acked:  # mark every PSN this SACK covers before judging any loss
            tx = txs.pop(psn, None)
            if tx is None or tx.acked:
                continue
            tx.acked = True
            ev = tx.ev
            if tx.in_flight:
                tx.in_flight = False
                left_flight += 1
                if proving:
                    evs.gone(ev)
            count += 1
            acked_bytes[ev.plane] += tx.length
            tries = tx.tries
            if tx.probed_ev is not None and tx is exact and not sack.dup:
                probed = tx  # its first copy's loss, then this repair, logged after the walk
            elif tries > 1:
                self._event(now, "repaired", ev.value, psn)
            # Only an ack that names one transmission can judge the packets sent
            # before it (Karn): a first transmission, or the copy the SACK echoes.
            if tries == 1 or tx is exact:
                sent_ns = tx.sent_ns
                if sent_ns > rack_sent:
                    rack_sent = sent_ns
                if sent_ns < rack_before and rack_before - sent_ns > trailed and (
                        psn < reported or tx is exact):
                    trailed = rack_before - sent_ns
                newly.append(tx)
                delivered(ev, sent_ns)
        self._inflight -= left_flight
        self.stats.acked += count
        self._count_acked(count, now)
        if trailed > self.reordering_ns:
            self.reordering_ns = float(trailed)
        # A SACK speaks for PSNs below cum + 1 + 64 only; later ones may have
        # arrived unreported, so they are never judged lost on its word.
        covered = sack.cum + 1 + BITMAP_BITS
        if probed is not None:
            self._probe_showed_lost(probed, now)
        if len(newly) > 1:
            newly.sort(key=_SEND_ORDER)
        for tx in newly:
            self._detect_per_path(tx, now, covered)
        if rack_sent >= 0:
            if rack_sent > self._rack_sent:
                self._rack_sent = rack_sent
            self._detect_rack(rack_sent, now, covered)
        self._complete(now)

    def _marks(self, sack: SackReport, echoed: _Tx | None, now: int) -> bool:
        """The SACK's congestion byte: count its marks; with `ecn` on, SKIP the echoed
        EV (it carried a CE-marked packet) and say the window should see a mark."""
        st = self.stats
        st.ecn_marks += sack.congestion & CONGESTION_COUNT
        echo = bool(sack.congestion & CONGESTION_ECHO_CE)
        st.ecn_echoes += echo
        if not self.cfg.ecn:
            return False
        self.fabric_marks = True
        if echo:
            self._mode.echoed(self, sack, echoed)
        return True

    def _count_acked(self, count: int, now: int) -> None:
        """Packets acked per RTT (QuickAdapt's measure of what the path delivers)."""
        if now - self._epoch_ns >= max(self.srtt, self.cfg.reorder_ns):
            self._acked_prev, self._acked_epoch, self._epoch_ns = self._acked_epoch, 0, now
        self._acked_epoch += count

    def _names_sent(self, psn: int, cum: int | None = None) -> bool:
        """Whether an ACK (or NAK) could come from the receiver: it echoes a PSN we sent,
        and its cumulative PSN is no further than one past the highest sent. Anything
        else is forged or corrupt, and is counted and ignored before any of it (port
        state, cum, bitmap) is believed: a cum ahead of what was sent would ack data
        the receiver never had, and would cost a walk over every PSN up to it."""
        high = self._sent_high
        if 0 <= psn <= high and (cum is None or 0 <= cum <= high + 1):
            return True
        self.stats.acks_unsent += 1
        return False

    def _late(self, psn: int, now: int) -> None:
        """A copy of `psn` declared lost was delivered after all."""
        lost = self._lost.pop(psn, None)
        if lost is None:
            return
        ev_value, reason, sent_ns = lost
        self.stats.spurious += 1
        undone = self._mode.unretire(self.evs, ev_value)
        self._event(now, "spurious", ev_value, psn,
                    f"{reason}; retirement undone" if undone else reason)
        if reason not in _BLAMELESS:  # reordering deeper than the window
            self.reordering_ns = max(self.reordering_ns, self._rack_sent - sent_ns)
            if self._reorder_steps < REORDER_STEPS_MAX:
                self._reorder_steps += 1

    def on_nack(self, psn: int, now: int, trimmed: bool = False, ev: int = -1,
                tries: int = -1) -> None:
        """The receiver NAKs a PSN: it has waited too long for it (PSN sequence error),
        or (`trimmed`) a switch cut it to its headers on `ev`, copy number `tries`."""
        if self.failed or not self._names_sent(psn):
            return
        self._now = now
        if trimmed:
            self._on_trimmed(psn, ev, tries, now)
            return
        self.stats.nacks_seq += 1
        tx = self._txs.get(psn)
        if tx is None or not tx.in_flight:  # acked, or lost and not yet resent
            self.stats.nacks_stale += 1
            return
        # Only the first copy: a NAK cannot say which transmission it missed (Karn). And
        # only once a packet sent a reordering window after it has arrived: the NAK says
        # the hole is 64 PSNs deep, which a burst sprayed over paths of different delay
        # reaches without any loss.
        if tx.tries > 1 or tx.sent_ns + self.reorder_window_ns() >= self._rack_sent:
            return
        self.stats.lost_nack += 1
        self._declare_lost(tx, now, "nack")

    def _on_trimmed(self, psn: int, ev_value: int, tries: int, now: int) -> None:
        """A switch trimmed this copy: the path is congested, not broken. Resend it at
        once on another EV; its EV SKIPs a rotation; the window adapts. Nothing is
        counted as loss and no EV retires, until the PSN's trim_limit-th trim: that one
        and each after is a loss that blames no path. A trimmed packet is
        unauthenticated (its ICRC was cut off), so the NAK must name the copy in flight
        exactly (its EV and transmission number): a forged or stale one costs at most
        one resend, since the resend changes the copy's number and EV."""
        st = self.stats
        tx = self._txs.get(psn)
        if not self.cfg.trim:
            st.trims_ignored += 1
            return
        if tx is None or not tx.in_flight or tx.ev is None \
                or tx.ev.value != ev_value or (tx.tries - 1) & TRY_MASK != tries:
            st.trims_ignored += 1
            st.trims_stale += 1
            return
        st.nacks_trimmed += 1
        tx.trims += 1
        if tx.trims >= self.cfg.trim_limit:
            # Trimmed on path after path: no longer congestion a resend rides out. A loss,
            # so the QP's loss limit bounds it (and no path is blamed: _BLAMELESS).
            st.lost_trim += 1
            self._stuck = False
            self._declare_lost(tx, now, "trim")
            return
        ev = tx.ev
        tx.in_flight = False
        self._inflight -= 1
        self.evs.gone(ev)
        self._stuck = False
        self._event(now, "trim", ev.value, psn, "resent at once on another EV")
        self._mode.congested(self.evs, ev, "trim")
        self._cc.on_trim(self, now)  # nscc: QuickAdapt; else cut as a loss would
        self._retx.appendleft(psn)

    def _port_state(self, remote: int, local: int, now: int) -> None:
        """The peer's ports (from its SACK) and ours: a plane is used only if both are up.
        Every change of either is logged, saying whose."""
        old_remote, old_local = self.remote_ports, self.local_ports
        self.remote_ports, self.local_ports = remote, local
        self._stuck = False
        both = remote & local
        for p in self.evs.planes:
            for side, old, new in (("local", old_local, local), ("peer", old_remote, remote)):
                if (old ^ new) >> p & 1:
                    self._event(now, "port", 0, -1,
                                f"plane {p} {'up' if new >> p & 1 else 'down'} ({side})")
            self.evs.set_plane(p, bool(both >> p & 1))

    def set_local_ports(self, bitmap: int, now: int = 0) -> None:
        if bitmap != self.local_ports:
            self._now = now
            self._port_state(self.remote_ports, bitmap, now)

    def probe_result(self, value: int, ok: bool, now: int) -> bool:
        """A background probe's answer (or its timeout) on a retired EV."""
        self._now = now
        ev = self.evs.retired.get(value)
        if ev is not None:
            answer = "ok" if ok else "lost"
            if ok or ev.probed != answer:  # a dead path's probes are one line, not one each
                self._event(now, "probe", value, -1, answer)
            ev.probed = answer
        revived = self.evs.probe_result(value, ok)
        if revived:
            self._stuck = False
            self._event(now, "revive", value)
        return revived

    def _rtt_sample(self, ev: Ev, rtt: int, now: int, marked: bool = False) -> None:
        self.base_rtt = min(self.base_rtt, rtt)
        self.rtt_samples += 1
        self.reordering_ns *= REORDERING_DECAY  # on_sack raises it to what it sees
        self.rttvar = rtt / 2 if not self.srtt else \
            0.75 * self.rttvar + 0.25 * abs(self.srtt - rtt)
        self.srtt = rtt if not self.srtt else 0.875 * self.srtt + 0.125 * rtt
        ev.rtt_ns = rtt if not ev.rtt_ns else 0.75 * ev.rtt_ns + 0.25 * rtt
        self.delay_ns = delay = rtt - self.base_rtt
        self._cc.adjust(self, delay, marked, now)
        if ev.rtt_ns - self.base_rtt > 2 * self.cfg.target_ns:
            self._mode.congested(self.evs, ev, "rtt")

    def _detect_per_path(self, tx: _Tx, now: int, covered: int) -> None:
        """`tx` was delivered: what was sent before it on its path (any EV of the path:
        static SRv6 puts them on the same links, in the same queues) and is still in
        flight is lost, not late. A path keeps its packets' order."""
        ev = tx.ev
        key = ev.path if ev.path is not None else ev.value
        q = self._per_path.get(key)
        if q is None:
            return
        if q and q[0][0] == tx.seq:  # in order on its path, the common case: nothing to judge
            q.popleft()
            if not q:
                del self._per_path[key]
            return
        unjudged = []
        while q and q[0][0] < tx.seq:
            seq, psn = q.popleft()
            old = self._txs.get(psn)
            if old is None or old.seq != seq or not old.in_flight:  # acked, lost, trimmed
                continue
            if psn >= covered:
                unjudged.append((seq, psn))
                continue
            self.stats.lost_per_ev += 1
            self._declare_lost(old, now, "per_path")
        if q and q[0][0] == tx.seq:
            q.popleft()
        q.extendleft(reversed(unjudged))
        if not q and self._per_path.get(key) is q:
            del self._per_path[key]

    def reorder_window_ns(self) -> int:
        """RACK's window: the reordering seen (not the queueing: RTT above the lowest
        rises on every path alike under load), a quarter of the lowest RTT, the floor
        `reorder_ns`; a whole srtt until REORDERING_LEARNED samples are in. Widened a
        step per spurious loss; at most half the slow RTO."""
        base = max(self.cfg.reorder_ns, int(self.reordering_ns))
        if self.rtt_samples:
            base = max(base, int(self.base_rtt / 4))
        if self.rtt_samples < REORDERING_LEARNED:
            base = max(base, int(self.srtt))
        return min(base * self._reorder_steps, self.cfg.rto_min_ns // 2)

    def tail_probe_ns(self) -> int:
        """How long the oldest first copy may be outstanding before it is sent again as
        a tail probe: srtt + 4 * rttvar (RFC 6298's RTO), at least `tail_probe_min_ns`,
        at most the RTO (which it is until REORDERING_LEARNED samples are in, and always
        in single-path, which sends no probes)."""
        rto = max(self.cfg.rto_min_ns, int(3 * self.srtt))
        if not self._mode.tail_probes or self.rtt_samples < REORDERING_LEARNED:
            return rto
        return min(rto, max(self.cfg.tail_probe_min_ns, int(self.srtt + 4 * self.rttvar)))

    def _detect_rack(self, rack_sent: int, now: int, covered: int) -> None:
        """Sent more than the reordering window before the latest-sent packet delivered,
        and not delivered: lost. A PSN beyond what the SACK speaks for is passed over
        (kept, judged by a later SACK), not a stop: packets sent after it (a resend of
        the hole that holds cum, say) are judged now, not left to the timer."""
        reo = self.reorder_window_ns()
        order, txs = self._order, self._txs
        unjudged = []
        while order:
            seq, psn = order[0]
            tx = txs.get(psn)
            if tx is None or tx.seq != seq or not tx.in_flight:  # acked, lost or resent
                order.popleft()
                continue
            if tx.sent_ns + reo >= rack_sent:
                break
            order.popleft()
            if psn >= covered:
                unjudged.append((seq, psn))
                continue
            self.stats.lost_rack += 1
            self._declare_lost(tx, now, "rack")
        order.extendleft(reversed(unjudged))

    def on_timer(self, now: int) -> None:
        """Retransmit timer: anything outstanding longer than the RTO is lost. Costs the
        stale entries at the front plus the packets it judges, not the whole window.

        Before that, in mrc and spray-static, a tail probe (RACK-TLP's, RFC 8985): the
        oldest first copy outstanding longer than tail_probe_ns is sent again, one a
        call, not declared lost (no loss, no blame, no window cut, no try counted). The
        SACK its copy draws says what arrived: a window whose SACKs all died on a path
        cut behind them is acked a couple of ms on, not after the RTO's 10, and a machine
        that merely stalled costs one duplicate a tick."""
        self._now = now
        self._stuck = False
        rto = max(self.cfg.rto_min_ns, int(3 * self.srtt))
        probe = self.tail_probe_ns()  # == rto in single-path: no probes
        backoff = self._mode.backoff  # RoCE's (single-path's) timer does not back off
        judgeable = self._cum + 1 + BITMAP_BITS  # beyond: received-but-unreported is likely
        txs, order = self._txs, self._order
        while order:
            seq, psn = order[0]
            tx = txs.get(psn)
            if tx is not None and tx.seq == seq and tx.in_flight:
                break
            order.popleft()
        expired = []
        tail = None  # the tail probe: the oldest first copy past `probe`, not the RTO
        for seq, psn in order:
            tx = txs.get(psn)
            if tx is None or tx.seq != seq or not tx.in_flight or psn >= judgeable:
                continue
            waited = now - tx.sent_ns
            if waited < probe:
                break  # in send order: nothing later has waited even the probe's time
            if waited < rto:
                if tail is None and tx.tries == 1:
                    tail = tx
                continue
            if backoff and waited < rto << min(tx.timeouts, self.cfg.backoff_max):
                continue  # timed out before: its timer has backed off
            expired.append(tx)
        if tail is not None:
            self.stats.tail_probes += 1
            tail.probed_ev, tail.probed_ns = tail.ev, tail.sent_ns
            tail.in_flight = False  # sent again by the next poll, first in line
            self._inflight -= 1
            self.evs.gone(tail.ev)
            self._retx.appendleft(tail.psn)
        for tx in expired:
            self.stats.lost_timeout += 1
            self._declare_lost(tx, now, "timeout")

    def _declare_lost(self, tx: _Tx, now: int, reason: str) -> None:
        if tx.acked or not tx.in_flight:
            return
        tx.in_flight = False  # declared lost, not yet resent
        self._inflight -= 1
        tx.losses += 1
        ev = tx.ev
        self.evs.gone(ev)
        self._lost_copy(tx.psn, ev, tx.sent_ns, reason, now)
        rules = self._mode
        tx.timeouts = tx.timeouts + 1 if reason == "timeout" else 0
        rules.give_up(self, tx)  # raises QpFailed past the mode's limit
        # A timeout names no path: nothing sent after the packet was acked either, so the
        # peer (or the whole fabric) went quiet, as a stalled receiver does. Resend, but
        # blame no EV; a dead path is caught by RACK, which compares paths.
        # A packet resent because its path died has already been blamed; a PSN trimmed
        # past trim_limit was trimmed on many paths, not lost on one (MrcRules.blame).
        died = rules.blame(self, ev, tx.psn, tx.sent_ns, reason, now)
        self._cc.on_loss(self, now)
        rules.resend(self, tx)  # single-path: go-back-N, everything from the hole on
        if died:
            self._resend_dead_path(ev.path, now)

    def _probe_showed_lost(self, tx: _Tx, now: int) -> None:
        """The SACK echoes the copy a tail probe sent of `tx`, not as a duplicate: the
        first copy never arrived. It is lost on its EV (RACK would have said so had a
        later packet on a live path been acked in time), blamed, and the window cut;
        nothing is resent (the PSN is acked). Its late arrival undoes it (`_late`).
        Logged as the loss, then the repair (the probe's copy), as any other."""
        ev, sent_ns = tx.probed_ev, tx.probed_ns
        tx.probed_ev = None
        self.stats.lost_probe += 1
        self._lost_copy(tx.psn, ev, sent_ns, "probe", now)
        self._event(now, "repaired", tx.ev.value, tx.psn)
        died = self._mode.blame(self, ev, tx.psn, sent_ns, "probe", now)
        self._cc.on_loss(self, now)
        if died:
            self._resend_dead_path(ev.path, now)

    def _lost_copy(self, psn: int, ev: Ev, sent_ns: int, reason: str, now: int) -> None:
        """Remember a lost copy (a late arrival undoes its loss) and log it."""
        self._lost[psn] = (ev.value, reason, sent_ns)
        self._lost.move_to_end(psn)
        if len(self._lost) > LOST_REMEMBERED:
            self._lost.popitem(last=False)
        self._event(now, "loss", ev.value, psn, reason)
        if ev.first_loss_ns < 0:
            ev.first_loss_ns = now
            self._event(now, "first_loss", ev.value, psn, reason)

    def _blame(self, ev: Ev, psn: int, sent_ns: int, reason: str, now: int) -> bool:
        """A copy of `psn` sent on `ev` at `sent_ns` was lost: the EV retires, and its
        path may be shown dead (then its other EVs go now, not one loss each). True when
        the path died now."""
        retired, replacement = self.evs.lost(ev, f"{reason} loss of PSN {psn}")
        if retired:
            self._event(now, "retire", ev.value, psn, reason + _replaced(replacement))
        alive = ev.path is not None and ev.path.dead_since is None
        for sibling, repl in self.evs.path_lost(ev, sent_ns):
            self._event(now, "retire", sibling.value, psn,
                        f"path dead, as {ev.value:#x} showed" + _replaced(repl))
        return alive and ev.path.dead_since is not None

    def _fail(self, what: str, tx: _Tx, limit: str) -> None:
        """The QP gives up: `what` happened to `tx`'s PSN, past `limit`."""
        n = tx.trims
        trims = f", trimmed {n} time{'s' * (n != 1)}" if n else ""
        self.failed = f"{what}{trims} ({limit})"
        raise QpFailed(self.failed)

    def _resend_dead_path(self, path, now: int) -> None:
        """`path` just proved dead: what is still in flight on it will not arrive.
        Resend it now, on live EVs, instead of waiting for RACK (which cannot judge a
        PSN past the SACK bitmap while an earlier hole holds cum) or the timer."""
        for tx in [t for t in self._txs.values() if t.in_flight and t.ev.path is path]:
            self.stats.lost_dead_path += 1
            self._declare_lost(tx, now, "dead_path")

    def _complete(self, now: int) -> None:
        while self._msgs and self._msgs[0].last_psn < self._lowest_unacked():
            msg = self._msgs.popleft()
            msg.done_ns = now
            self.completed.append(msg)
            self.messages_completed += 1

    def _lowest_unacked(self) -> int:
        low = self._low
        while low < self._built_psn and low not in self._txs:
            low += 1
        self._low = low
        return low


def _replaced(replacement: Ev | None) -> str:
    return (f"; replaced by {replacement.value:#x}" if replacement is not None
            else "; not replaced: every path of its plane failed")


# -- receiver -----------------------------------------------------------------


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class RxPacket:
    psn: int
    va: int
    payload: bytes | memoryview
    imm: int | None  # WRITE with immediate: the last packet of its message
    ev: int
    tries: int  # transmission number, echoed
    ack_req: bool = False
    ce: bool = False  # it arrived ECN Congestion Experienced (the fabric marked it)


@dataclass
class ReceiverStats:
    packets: int = 0
    bytes: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    acks: int = 0
    nacks: int = 0
    completions: int = 0
    out_of_window: int = 0  # data packets RECV_WINDOW or more PSNs above cum: dropped
    ce_marked: int = 0  # data packets that arrived CE-marked (echoed in SACKs)
    trimmed: int = 0  # trimmed data packets received (never placed)
    nacks_trimmed: int = 0  # NAK(TRIMMED) sent (counted in nacks too)


_MASK64 = (1 << BITMAP_BITS) - 1


class Receiver:
    """Places packets, tracks PSNs, completes messages in order, builds SACKs.

    What arrived is `cum` (every PSN below it) plus `_window`, an integer whose bit k
    says PSN cum + k arrived: a duplicate check, an insert and a SACK bitmap are each
    a shift and a mask, whatever the reordering.
    """

    def __init__(self, place: Callable[[int, bytes | memoryview], None], ack_every: int = 2,
                 port_state: Callable[[], int] = lambda: 0xFFFF, span: int = RECV_WINDOW):
        self.place = place
        self.span = span  # PSNs above cum it accepts (RECV_WINDOW)
        self.ack_every = ack_every
        self.port_state = port_state
        self.cum = 0
        self._window = 0
        self._imm: list[tuple[int, int]] = []  # heap of (psn, imm) of WRITE_IMM packets
        self._unacked = 0
        self._nacked = -1
        self.nacks: list[int] = []  # PSNs to NAK; the datapath sends and clears them
        self._marks = 0  # CE-marked packets since the last SACK (saturates at 127)
        self.completions: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=MESSAGES_KEPT)  # (n, imm), in order; the count is stats.completions
        self.stats = ReceiverStats()

    def on_data(self, pkt: RxPacket) -> SackReport | None:
        """Take one data packet; return a SACK to send now, or None."""
        d = pkt.psn - self.cum
        st = self.stats
        if d < 0 or self._window >> d & 1:
            st.duplicates += 1
            if pkt.ce:
                self._mark()
            return self._sack(pkt, dup=True)  # the sender missed an ack: answer at once
        if d >= self.span:  # not placed, not answered: no sender has it outstanding
            st.out_of_window += 1
            return None
        if pkt.ce:
            self._mark()
        self.place(pkt.va, pkt.payload)
        st.packets += 1
        st.bytes += len(pkt.payload)
        if pkt.imm is not None:
            heapq.heappush(self._imm, (pkt.psn, pkt.imm))
        if d == 0:
            w = self._window | 1
            k = (~w & (w + 1)).bit_length() - 1  # trailing ones: PSNs now in order
            self.cum += k
            self._window = w >> k
            if self._imm:
                self._deliver()
        else:
            st.out_of_order += 1
            self._window |= 1 << d
            # The hole at cum is older than a SACK bitmap can see past: say so now
            # (a NAK, PSN sequence error) instead of leaving it to the sender's timer.
            if d >= NACK_DISTANCE and self._nacked != self.cum:
                self._nacked = self.cum
                self.nacks.append(self.cum)
                st.nacks += 1
        self._unacked += 1
        # A CE mark is answered at once: its SACK echoes the marked packet's EV.
        if self._unacked >= self.ack_every or pkt.ack_req or pkt.imm is not None or pkt.ce:
            return self._sack(pkt)
        return None

    def on_trimmed(self, pkt: RxPacket) -> tuple[SackReport | None, bool]:
        """A data packet a switch trimmed (its payload cut off): never placed. Returns
        (report, nack): nack True, the report is the SACK a NAK(TRIMMED) for pkt.psn
        carries (echoing the trimmed copy's EV and number), sent at once; False, a
        duplicate's SACK (the PSN is here already: no resend is wanted) or None (a PSN
        out of the window: no sender has it outstanding)."""
        d = pkt.psn - self.cum
        st = self.stats
        st.trimmed += 1
        if d < 0 or self._window >> d & 1:
            st.duplicates += 1
            return self._sack(pkt, dup=True), False
        if d >= self.span:
            st.out_of_window += 1
            return None, False
        if pkt.ce:
            self._mark()
        st.nacks += 1
        st.nacks_trimmed += 1
        return self._report(pkt), True

    def _mark(self) -> None:
        self.stats.ce_marked += 1
        if self._marks < CONGESTION_COUNT:
            self._marks += 1
    def flush(self, pkt: RxPacket | None) -> SackReport | None:
        """A delayed-ack timer fired: acknowledge what has not been."""
        return self._sack(pkt) if (self._unacked and pkt is not None) else None

    @property
    def owes_ack(self) -> bool:
        return self._unacked > 0

    @property
    def bytes_placed(self) -> int:
        return self.stats.bytes

    def _deliver(self) -> None:
        while self._imm and self._imm[0][0] < self.cum:
            _, imm = heapq.heappop(self._imm)
            self.completions.append((self.stats.completions, imm))
            self.stats.completions += 1

    def _sack(self, pkt: RxPacket, dup: bool = False) -> SackReport:
        self._unacked = 0
        self.stats.acks += 1
        return self._report(pkt, dup)

    def _report(self, pkt: RxPacket, dup: bool = False) -> SackReport:
        """The receiver's state, echoing `pkt`; the congestion byte says whether pkt was
        CE-marked and counts the marks since the last report (then starts again)."""
        congestion = (CONGESTION_ECHO_CE if pkt.ce else 0) | self._marks
        self._marks = 0
        return SackReport(self.cum, (self._window >> 1) & _MASK64, pkt.ev, pkt.psn, pkt.tries,
                          self.port_state(), congestion, dup)
