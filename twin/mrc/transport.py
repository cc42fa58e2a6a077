"""The MRC reliability engine of one QP, pure: no sockets, no clock of its own.

The datapath (or a test's simulated channel) feeds it time, SACKs and data
packets and sends what it returns, so the same code runs in the endpoint
daemon and in the lossy-channel unit tests.

Sender
    A message (RDMA WRITE, or WRITE with immediate) is cut into packets of at
    most `mtu` bytes; every packet has its own PSN and RETH address, so the
    receiver places it wherever it lands. Each packet takes the next EV of
    the QP's EvSet. What is sent but not acked is tracked in send order.

    Loss, three ways, fastest first:
      per EV    a packet is lost when a packet sent after it *on the same EV*
                is acked: one path is FIFO, so it was not merely late
      RACK      it is lost when a packet sent more than `reorder_ns` after it,
                on any EV, is acked (catches a dead path, where no later packet
                on the same EV ever arrives)
      NAK       the receiver NAKs a hole that is further behind than its SACK
                bitmap reaches (PSN sequence error)
      timeout   the retransmit timer, last resort
    A lost packet retires its EV (mode mrc) and is retransmitted selectively
    on another EV.

    Congestion: a window in packets, NSCC-style: it grows while the queueing
    delay (RTT above the lowest seen) is under `target_ns`, shrinks in
    proportion to the excess above it, and once per RTT on loss. An EV whose
    own delay is above target is SKIPped for a rotation.

Modes (per QP)
    mrc            all of the above
    spray-static   sprays over the EV set but never retires or skips an EV
    single-path    one hash-chosen EV for the QP's life, go-back-N recovery,
                   and the QP fails after `retry_limit` retransmits of one
                   PSN: how RoCE over ECMP behaves

Receiver
    Places each new packet at its address, tracks the cumulative PSN and the
    PSNs received above it, drops duplicates, delivers WRITE_IMM completions
    in message order, and answers with SACKs (cumulative PSN + 64-bit bitmap,
    echoing the EV and timestamp of the packet that triggered it).
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from dataclasses import dataclass, field

from twin.mrc.evset import Ev, EvSet, NoUsableEv

MODES = ("mrc", "spray-static", "single-path")
FLAG_RETRANSMIT, FLAG_LAST, FLAG_ACK_REQ = 1, 2, 4
BITMAP_BITS = 64
NACK_DISTANCE = BITMAP_BITS  # a hole this far behind the newest PSN is NAKed


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class TxPacket:
    """One data packet to put on the wire."""

    psn: int
    ev: int
    va: int
    payload: memoryview
    msn: int
    flags: int
    imm: int | None
    ts_ns: int  # send timestamp carried in the MRC header (unique per transmission)


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class Sack:
    cum: int  # every PSN below is received
    bitmap: int  # bit i: PSN cum + 1 + i received
    ev: int  # EV of the packet that triggered this SACK
    ts_ns: int  # its send timestamp, echoed
    port_state: int = 0xFFFF  # bit p: the receiver's port on plane p is up
    congestion: int = 0


@dataclass
class SenderConfig:
    mode: str = "mrc"
    mtu: int = 4096
    init_window: float = 16
    min_window: float = 2
    max_window: float = 256
    target_ns: int = 400_000  # queueing delay the window steers to
    reorder_ns: int = 50_000  # RACK's floor; srtt/4 when larger
    rto_min_ns: int = 10_000_000  # last resort; a noisy 2-core VM stalls for ms at times
    retry_limit: int = 7


@dataclass
class _Msg:
    msn: int
    first_psn: int
    last_psn: int
    imm: int | None
    posted_ns: int
    done_ns: int | None = None


@dataclass
class _Tx:
    psn: int
    msg: _Msg
    offset: int
    length: int
    ev: Ev | None = None
    sent_ns: int = 0
    seq: int = 0  # send order, across retransmissions
    tries: int = 0
    acked: bool = False
    in_flight: bool = False
    losses: int = 0  # times this PSN itself was lost (go-back-N resends do not count)
    ts: int = 0  # the timestamp it carried (unique per transmission)


@dataclass
class SenderStats:
    packets: int = 0
    bytes: int = 0
    retransmits: int = 0
    lost_per_ev: int = 0
    lost_rack: int = 0
    lost_timeout: int = 0
    lost_nack: int = 0
    acked: int = 0
    per_plane_packets: dict[int, int] = field(default_factory=dict)


class QpFailed(RuntimeError):
    pass


class Sender:
    def __init__(self, evset: EvSet, remote_va: int, config: SenderConfig | None = None):
        self.cfg = config or SenderConfig()
        if self.cfg.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self.evs = evset
        self.remote_va = remote_va
        self.window = self.cfg.init_window
        self.base_rtt = float("inf")
        self.srtt = 0.0
        self.stats = SenderStats()
        self.failed: str | None = None
        self.local_ports = self.remote_ports = 0xFFFF
        self.posted_bytes = 0
        self._txs: dict[int, _Tx] = {}  # outstanding (unacked) PSN -> record
        self._order: collections.deque = collections.deque()  # (seq, psn) in send order
        self._per_ev: dict[int, collections.deque] = {}  # ev -> deque of (seq, psn)
        self._retx: collections.deque = collections.deque()  # PSNs to resend first
        self._unsent: collections.deque = collections.deque()  # PSNs never sent
        self._by_ts: dict[int, int] = {}  # send ts -> psn, to credit echoed SACKs
        self._msgs: collections.deque = collections.deque()
        self.completed: list[_Msg] = []
        self._next_psn = 0
        self._next_msn = 0
        self._seq = 0
        self._inflight = 0
        self._cum = 0
        self._low = 0  # lowest PSN not yet acked
        self._last_cut_ns = -1
        self._single: Ev | None = evset.next() if self.cfg.mode == "single-path" else None

    # -- posting ----------------------------------------------------------------

    def post(self, length: int, offset: int = 0, imm: int | None = None, now: int = 0) -> int:
        """Queue an RDMA WRITE of `length` bytes of the source buffer at `offset` to the
        same offset of the remote buffer. Returns its message sequence number."""
        if length <= 0:
            raise ValueError("a write moves at least one byte")
        n = -(-length // self.cfg.mtu)
        self.posted_bytes += length
        msg = _Msg(self._next_msn, self._next_psn, self._next_psn + n - 1, imm, now)
        self._next_msn += 1
        for i in range(n):
            off = offset + i * self.cfg.mtu
            size = min(self.cfg.mtu, offset + length - off)
            self._txs[self._next_psn] = _Tx(self._next_psn, msg, off, size)
            self._unsent.append(self._next_psn)
            self._next_psn += 1
        self._msgs.append(msg)
        return msg.msn

    @property
    def idle(self) -> bool:
        return not self._txs

    # -- sending ----------------------------------------------------------------

    def _pick_ev(self, avoid: Ev | None) -> Ev:
        """The next EV; a retransmission avoids the lost copy's plane when it can."""
        if self._single is not None:
            return self._single
        ev = self.evs.next()
        for _ in range(8):
            if avoid is None or (ev.plane != avoid.plane and ev.value != avoid.value):
                break
            ev = self.evs.next()
        return ev

    def poll(self, now: int, source: memoryview, budget: int = 64) -> list[TxPacket]:
        """Packets to send now: retransmissions first, then new ones, within the window."""
        if self.failed:
            return []
        out = []
        # Retransmissions go first and are not held back by the window: the
        # window may be full of packets that arrived but sit above the hole
        # the SACK bitmap cannot report past.
        while len(out) < budget and (self._retx or self._inflight < int(self.window)):
            if self._retx:
                psn = self._retx.popleft()
                tx = self._txs.get(psn)
                if tx is None or tx.acked:
                    continue
            elif self._unsent:
                psn = self._unsent.popleft()
                tx = self._txs[psn]
            else:
                break
            try:
                out.append(self._emit(tx, now, source))
            except NoUsableEv:  # every plane is down: hold the packet until one returns
                (self._retx if tx.tries else self._unsent).appendleft(tx.psn)
                break
        return out

    def _emit(self, tx: _Tx, now: int, source: memoryview) -> TxPacket:
        retransmit = tx.tries > 0
        ev = self._pick_ev(tx.ev if retransmit else None)
        self._by_ts.pop(tx.ts, None)
        tx.ev, tx.sent_ns, tx.seq = ev, now, self._seq
        tx.ts = now + (self._seq & 0xFFF)  # unique even for packets sent in one tick
        tx.tries += 1
        tx.in_flight = True
        self._seq += 1
        self._inflight += 1
        self._order.append((tx.seq, tx.psn))
        self._per_ev.setdefault(ev.value, collections.deque()).append((tx.seq, tx.psn))
        self._by_ts[tx.ts] = tx.psn
        ev.sent += 1
        st = self.stats
        st.packets += 1
        st.bytes += tx.length
        st.per_plane_packets[ev.plane] = st.per_plane_packets.get(ev.plane, 0) + 1
        if retransmit:
            st.retransmits += 1
        last = tx.psn == tx.msg.last_psn
        flags = (FLAG_RETRANSMIT if retransmit else 0) | (FLAG_LAST if last else 0)
        if retransmit or not self._unsent:  # nothing may follow soon: ask for an ack now
            flags |= FLAG_ACK_REQ
        return TxPacket(tx.psn, ev.value, self.remote_va + tx.offset,
                        source[tx.offset:tx.offset + tx.length], tx.msg.msn, flags,
                        tx.msg.imm if last else None, tx.ts)

    # -- acks -------------------------------------------------------------------

    def on_sack(self, sack: Sack, now: int) -> None:
        if self.failed:
            return
        self._port_state(sack.port_state)
        txs = self._txs
        acked = [p for p in range(self._cum, sack.cum) if p in txs]
        self._cum = max(self._cum, sack.cum)
        bits = sack.bitmap
        i = 0
        while bits:
            if bits & 1 and sack.cum + 1 + i in self._txs:
                acked.append(sack.cum + 1 + i)
            bits >>= 1
            i += 1
        echoed = self._by_ts.pop(sack.ts_ns, None)
        if echoed is not None and echoed in self._txs:
            acked.append(echoed)
            tx = self._txs[echoed]
            self._rtt_sample(tx.ev, now - tx.sent_ns, now)
        rack_sent = -1
        newly = []
        for psn in acked:  # mark every PSN this SACK covers before judging any loss
            tx = self._txs.pop(psn, None)
            if tx is None or tx.acked:
                continue
            tx.acked = True
            self._by_ts.pop(tx.ts, None)
            if tx.in_flight:
                tx.in_flight = False
                self._inflight -= 1
            self.stats.acked += 1
            # Only an ack that names one transmission can judge the packets sent
            # before it (Karn): a first transmission, or the one whose timestamp
            # the SACK echoes. An old copy of a resent PSN says nothing.
            if tx.tries == 1 or psn == echoed:
                rack_sent = max(rack_sent, tx.sent_ns)
                newly.append(tx)
                self.evs.delivered(tx.ev)
        # A SACK speaks for PSNs below cum + 1 + 64 only; later ones may have
        # arrived unreported, so they are never judged lost on its word.
        covered = sack.cum + 1 + BITMAP_BITS
        for tx in sorted(newly, key=lambda t: t.seq):
            self._detect_per_ev(tx, now, covered)
        if rack_sent >= 0:
            self._detect_rack(rack_sent, now, covered)
        self._complete(now)

    def on_nack(self, psn: int, now: int) -> None:
        """The receiver NAKs a PSN it has waited too long for: resend it now."""
        tx = self._txs.get(psn)
        # Only the first copy: a NAK cannot say which transmission it missed (Karn).
        if tx is None or not tx.in_flight or tx.tries > 1 \
                or now - tx.sent_ns < self.cfg.reorder_ns:
            return
        self.stats.lost_nack += 1
        self._lost(tx, now)

    def _port_state(self, bitmap: int) -> None:
        """The peer's ports (from its SACK) and ours: a plane is used only if both are up."""
        self.remote_ports = bitmap
        both = bitmap & self.local_ports
        for p in self.evs.planes:
            self.evs.set_plane(p, bool(both >> p & 1))

    def set_local_ports(self, bitmap: int) -> None:
        self.local_ports = bitmap
        self._port_state(self.remote_ports)

    def _rtt_sample(self, ev: Ev, rtt: int, now: int) -> None:
        self.base_rtt = min(self.base_rtt, rtt)
        self.srtt = rtt if not self.srtt else 0.875 * self.srtt + 0.125 * rtt
        ev.rtt_ns = rtt if not ev.rtt_ns else 0.75 * ev.rtt_ns + 0.25 * rtt
        delay = rtt - self.base_rtt
        target = self.cfg.target_ns
        if delay <= target:  # grow faster the further below target
            self.window += max(0.1, (target - delay) / target)
        else:
            self.window -= min(self.window / 4, (delay - target) / delay * 2)
        self.window = min(self.cfg.max_window, max(self.cfg.min_window, self.window))
        if self.cfg.mode == "mrc" and ev.rtt_ns - self.base_rtt > 2 * target:
            self.evs.congested(ev)

    def _detect_per_ev(self, tx: _Tx, now: int, covered: int) -> None:
        q = self._per_ev.get(tx.ev.value)
        unjudged = []
        while q and q[0][0] < tx.seq:
            seq, psn = q.popleft()
            old = self._txs.get(psn)
            if old is None or old.seq != seq or old.acked:
                continue
            if psn >= covered:
                unjudged.append((seq, psn))
                continue
            self.stats.lost_per_ev += 1
            self._lost(old, now)
        if q and q[0][0] == tx.seq:
            q.popleft()
        q.extendleft(reversed(unjudged))

    def _detect_rack(self, rack_sent: int, now: int, covered: int) -> None:
        reo = max(self.cfg.reorder_ns, int(self.srtt / 4))
        while self._order:
            seq, psn = self._order[0]
            tx = self._txs.get(psn)
            if tx is None or tx.seq != seq:  # acked, or since retransmitted
                self._order.popleft()
                continue
            if not tx.in_flight:
                self._order.popleft()
                continue
            if tx.sent_ns + reo >= rack_sent or psn >= covered:
                break
            self._order.popleft()
            self.stats.lost_rack += 1
            self._lost(tx, now)

    def on_timer(self, now: int) -> None:
        """Retransmit timer: anything outstanding longer than the RTO is lost."""
        rto = max(self.cfg.rto_min_ns, int(3 * self.srtt))
        judgeable = self._cum + 1 + BITMAP_BITS  # beyond: received-but-unreported is likely
        for seq, psn in list(self._order):
            tx = self._txs.get(psn)
            if tx is None or tx.seq != seq or not tx.in_flight or psn >= judgeable:
                continue
            if now - tx.sent_ns < rto:
                break
            self.stats.lost_timeout += 1
            self._lost(tx, now)
        self._order = collections.deque((s, p) for s, p in self._order
                                        if p in self._txs and self._txs[p].seq == s
                                        and self._txs[p].in_flight)

    def _lost(self, tx: _Tx, now: int) -> None:
        if tx.acked or not tx.in_flight:
            return
        tx.in_flight = False  # declared lost, not yet resent
        self._inflight -= 1
        tx.losses += 1
        if tx.losses > self.cfg.retry_limit:
            self.failed = f"PSN {tx.psn} lost {tx.losses} times (retry limit)"
            raise QpFailed(self.failed)
        mode = self.cfg.mode
        if mode == "mrc" and tx.ev is not None:
            self.evs.lost(tx.ev)
        if now - self._last_cut_ns > max(self.srtt, self.cfg.reorder_ns):
            self.window = max(self.cfg.min_window, self.window * 0.85)
            self._last_cut_ns = now
        if mode == "single-path":  # go-back-N: resend everything from the hole on
            later = sorted(p for p, t in self._txs.items() if p > tx.psn and t.in_flight)
            for p in later:
                self._txs[p].in_flight = False
                self._inflight -= 1
            self._retx.extend([tx.psn, *later])
        else:
            self._retx.append(tx.psn)

    def _complete(self, now: int) -> None:
        while self._msgs and self._msgs[0].last_psn < self._lowest_unacked():
            msg = self._msgs.popleft()
            msg.done_ns = now
            self.completed.append(msg)

    def _lowest_unacked(self) -> int:
        low = self._low
        while low < self._next_psn and low not in self._txs:
            low += 1
        self._low = low
        return low


# -- receiver -----------------------------------------------------------------


@dataclass(slots=True)  # made per packet: slots, not frozen (7x cheaper)
class RxPacket:
    psn: int
    va: int
    payload: bytes | memoryview
    msn: int
    flags: int
    imm: int | None
    ev: int
    ts_ns: int


@dataclass
class ReceiverStats:
    packets: int = 0
    bytes: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    acks: int = 0
    nacks: int = 0
    completions: int = 0


class Receiver:
    """Places packets, tracks PSNs, completes messages in order, builds SACKs."""

    def __init__(self, place: Callable[[int, bytes | memoryview], None], ack_every: int = 2,
                 port_state: Callable[[], int] = lambda: 0xFFFF):
        self.place = place
        self.ack_every = ack_every
        self.port_state = port_state
        self.cum = 0
        self._above: set[int] = set()
        self._last_psn_of: dict[int, int] = {}  # msn -> last PSN (seen on its LAST packet)
        self._imm_of: dict[int, int | None] = {}
        self._next_msn = 0
        self._unacked = 0
        self._nacked = -1
        self.nacks: list[int] = []  # PSNs to NAK; the datapath sends and clears them
        self.completions: list[tuple[int, int | None]] = []  # (msn, imm), in order
        self.stats = ReceiverStats()

    def on_data(self, pkt: RxPacket) -> Sack | None:
        """Take one data packet; return a SACK to send now, or None."""
        psn = pkt.psn
        st = self.stats
        if psn < self.cum or psn in self._above:
            st.duplicates += 1
            return self._sack(pkt)  # the sender missed an ack: answer at once
        self.place(pkt.va, pkt.payload)
        st.packets += 1
        st.bytes += len(pkt.payload)
        if pkt.flags & FLAG_LAST:
            self._last_psn_of[pkt.msn] = psn
            self._imm_of[pkt.msn] = pkt.imm
        if psn == self.cum:
            self.cum += 1
            while self.cum in self._above:
                self._above.discard(self.cum)
                self.cum += 1
            self._deliver()
        else:
            st.out_of_order += 1
            self._above.add(psn)
            # The hole at cum is older than a SACK bitmap can see past: say so now
            # (a NAK, PSN sequence error) instead of leaving it to the sender's timer.
            if psn - self.cum >= NACK_DISTANCE and self._nacked != self.cum:
                self._nacked = self.cum
                self.nacks.append(self.cum)
                st.nacks += 1
        self._unacked += 1
        if self._unacked >= self.ack_every or pkt.flags & (FLAG_LAST | FLAG_ACK_REQ):
            return self._sack(pkt)
        return None

    def flush(self, pkt: RxPacket | None) -> Sack | None:
        """A delayed-ack timer fired: acknowledge what has not been."""
        return self._sack(pkt) if (self._unacked and pkt is not None) else None

    def _deliver(self) -> None:
        while self._last_psn_of.get(self._next_msn, self.cum) < self.cum:
            msn = self._next_msn
            self.completions.append((msn, self._imm_of.pop(msn, None)))
            del self._last_psn_of[msn]
            self._next_msn += 1
            self.stats.completions += 1

    def _sack(self, pkt: RxPacket) -> Sack:
        bitmap = 0
        base = self.cum + 1
        for p in self._above:
            if base <= p < base + BITMAP_BITS:
                bitmap |= 1 << (p - base)
        self._unacked = 0
        self.stats.acks += 1
        return Sack(self.cum, bitmap, pkt.ev, pkt.ts_ns, self.port_state())
