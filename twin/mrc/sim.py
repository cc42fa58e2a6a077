"""A simulated fabric for the transport engine: a clock, and paths that lose,
duplicate, reorder and delay packets (pure; used by tests and benchmarks).

Each EV maps to a path (plane, T1) through `twin.fabric.paths.ev_fields`; a path's
behaviour is a `PathModel`. `run_transfer` drives one Sender/Receiver pair
over it until the write completes, the QP fails, or the time limit passes.

A rated path (`rate_bps`) is a link with a queue in front of it, and can act as the
fabric's switches do on congestion (data packets are ECT(0)):
    mark_bytes   a packet that finds more than this queued is marked CE (ECN)
    queue_bytes  the queue holds this much; a packet that finds it full is trimmed
                 (`trim`: cut to its headers, sent ahead of the queue, arriving as a
                 trimmed packet the receiver NAKs) or dropped

`run_transfer` can also be recorded (`record`: twin.mrc.trace.Recording wraps the
Sender and Receiver it builds and writes down every call into them), can act on the
sender at set times (`actions`: port changes, denylists, background probes), and can
answer CE marks with CNPs (`cnp_ns`: RoCEv2's notification point, for dcqcn).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from twin.fabric.paths import ENTROPY_SHIFT, ev_fields
from twin.mrc import wire
from twin.mrc.dcqcn import NotificationPoint
from twin.mrc.evset import EvSet
from twin.mrc.modes import Mode
from twin.mrc.transport import QpFailed, Receiver, RxPacket, Sender, SenderConfig

DELAYED_ACK_NS = 50_000
FRAME_OVERHEAD = wire.MAX_FRAME - wire.MTU  # the headers a data packet carries on the wire
TRIMMED_FRAME = wire.HEADROOM + wire.TRIMMED_SIZE  # what is left of a trimmed packet
PATH_MASK = (1 << ENTROPY_SHIFT) - 1  # an EV's plane and T1


@dataclass
class PathModel:
    loss: float = 0.0  # independent loss probability
    burst_loss: float = 0.0  # probability a loss burst starts
    burst_len: int = 20  # packets lost in a burst...
    burst_max_ns: int = 2_000_000  # ...that ends by then anyway: a burst is an event in time
    # (a queue overflowing, a link flapping), so a path idle for a while has none left
    duplicate: float = 0.0
    delay_ns: int = 20_000
    jitter_ns: int = 5_000  # reordering across paths (a path itself stays FIFO)
    dead: bool = False
    rate_bps: int = 0  # a link that serializes: one packet at a time at this rate (0: none)
    mark_bytes: int = 0  # rated: mark CE on a packet finding more than this queued (0: never)
    queue_bytes: int = 0  # rated: the queue's size; a packet finding it full is trimmed or
    trim: bool = False  # dropped (0: unbounded)
    ecn_threshold_bytes: int = 0  # the same as mark_bytes (the name DCQCN's tests use)


@dataclass
class SimFabric:
    default: PathModel = field(default_factory=PathModel)
    paths: dict[tuple[int, int], PathModel] = field(default_factory=dict)  # (plane, t1)
    seed: int = 1
    peer_ports: int = 0xFFFF  # the receiver's NIC ports (bit p: plane p up), in its SACKs

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._burst: dict[tuple[int, int], tuple[int, int]] = {}  # key -> (left, ends at)
        self._last_arrival: dict[tuple[int, int], int] = {}
        self._busy_until: dict[tuple[int, int], int] = {}  # a rated path's link, sending
        self.marks = 0  # packets marked CE
        self.trims = 0  # packets trimmed
        self.last_ce = False  # the packet `arrivals` last took was marked CE

    def model(self, ev: int) -> tuple[tuple[int, int], PathModel]:
        plane, t1, _ = ev_fields(ev)
        key = (plane, t1)
        return key, self.paths.get(key, self.default)

    def arrivals(self, ev: int, now: int, size: int = 0) -> list[int]:
        """When copies of a `size`-byte packet sent now on `ev` arrive (empty: lost).
        On a rated path a packet waits for the ones before it to be serialized (a
        queue at the link), and a reply (size 0) takes the other direction's FIFO."""
        return [at for at, _, _ in self.deliver(ev, now, size)]

    def deliver(self, ev: int, now: int, size: int = 0) -> list[tuple[int, bool, bool]]:
        """`arrivals`, each copy as (when, CE-marked, trimmed)."""
        key, m = self.model(ev)
        if m.dead:
            return []
        left, ends = self._burst.get(key, (0, 0))
        if left > 0 and now < ends:
            self._burst[key] = (left - 1, ends)
            return []
        if m.burst_loss and self.rng.random() < m.burst_loss:
            self._burst[key] = (m.burst_len - 1, now + m.burst_max_ns)
            return []
        if m.loss and self.rng.random() < m.loss:
            return []
        start = now
        ce = False
        self.last_ce = False
        if m.rate_bps:
            fifo = (key, size > 0)
            if size:
                busy = self._busy_until.get(key, 0)
                queued = max(0, busy - now) * m.rate_bps // (8 * 10**9)  # bytes waiting
                if m.queue_bytes and queued + size > m.queue_bytes:
                    if not m.trim:
                        return []  # tail drop
                    # trimmed: the headers go ahead of the queue, on a priority queue
                    self.trims += 1
                    head = TRIMMED_FRAME * 8 * 10**9 // m.rate_bps
                    return [(now + head + m.delay_ns, False, True)]
                mark = m.mark_bytes or m.ecn_threshold_bytes
                ce = bool(mark) and queued > mark
                self.marks += ce
                self.last_ce = ce
                start = max(now, busy) + size * 8 * 10**9 // m.rate_bps
                self._busy_until[key] = start
        else:
            fifo = key
        at = start + m.delay_ns + int(self.rng.random() * m.jitter_ns)
        at = max(at, self._last_arrival.get(fifo, 0))  # one path is FIFO
        self._last_arrival[fifo] = at
        copies = [(at, ce, False)]
        if m.duplicate and self.rng.random() < m.duplicate:
            copies.append((at + 1, ce, False))
        return copies


@dataclass
class Result:
    ok: bool
    exact: bool
    elapsed_ns: int
    failed: str | None
    sender: Sender
    receiver: Receiver


def source_bytes(size: int, seed: int) -> bytes:
    """The source buffer `run_transfer` writes: seeded random bytes (64 KiB, repeated)."""
    rng = random.Random(seed)
    src = bytes(rng.getrandbits(8) for _ in range(min(size, 1 << 16)))
    return (src * (size // len(src) + 1))[:size]


Action = Callable[[Sender, SimFabric, int], None]  # (sender, fabric, now)


def run_transfer(size: int, fabric: SimFabric, *, mode: str = Mode.MRC.value, planes: int = 4,
                 t1: int = 2, evs: int = 128, limit_ns: int = 20_000_000_000,
                 events: list[tuple[int, Callable]] | None = None, seed: int = 7,
                 pace_ns: int = 2_000, config: SenderConfig | None = None, repeat: int = 1,
                 checkpoint: tuple[int, Callable[[Sender, Receiver], None]] | None = None,
                 actions: list[tuple[int, Action]] | None = None, cnp_ns: int = 0,
                 cross_rack: bool = True, record=None, sender_class: type = Sender,
                 receiver_class: type = Receiver) -> Result:
    """Write `size` random bytes across the simulated fabric; check them byte for byte.

    `repeat` posts the same write that many times (to the same offsets: a long run in
    constant memory); `checkpoint` = (every n packets sent, callback). `events` act on
    the fabric at their time, `actions` on the sender (sender, fabric, now). `cnp_ns`
    > 0: a CE-marked data packet makes the receiver send a CNP, at most one per
    `cnp_ns`. `record` (twin.mrc.trace.Recording) builds the Sender and Receiver, and
    so sees every call into them. `sender_class` and `receiver_class`: the implementation
    to run (twin.mrc.core: the reference, or the compiled core)."""
    src = source_bytes(size, seed)
    dst = bytearray(size)

    def place(va: int, payload) -> None:
        dst[va:va + len(payload)] = payload

    cfg = config or SenderConfig(mode=mode)
    cfg.mode = mode
    evset_args = {"planes": list(range(planes)), "t1_per_plane": t1, "size": evs,
                  "seed": seed, "cross_rack": cross_rack}
    if record is None:
        sender = sender_class(EvSet(**evset_args), 0, cfg)
        receiver = receiver_class(place, port_state=lambda: fabric.peer_ports)
    else:
        sender = record.sender(evset_args, 0, cfg, size, seed)
        receiver = record.receiver(place, port_state=lambda: fabric.peer_ports)
    notify = NotificationPoint(cnp_ns) if cnp_ns else None
    pending_actions = sorted(actions or [], key=lambda a: a[0])
    posted = 1
    sender.post(size, imm=0xC0FFEE)
    every, check = checkpoint or (0, None)
    next_check = every
    view = memoryview(src)
    heap: list = []
    tie = 0
    now = 0
    pending_events = sorted(events or [], key=lambda e: e[0])
    last_timer = 0
    try:
        while now < limit_ns:
            if sender.idle:
                if posted >= repeat:
                    break
                posted += 1
                sender.post(size, imm=0xC0FFEE)
            if check is not None and sender.stats.packets >= next_check:
                next_check += every
                check(sender, receiver)
            while pending_events and pending_events[0][0] <= now:
                pending_events.pop(0)[1](fabric)
            while pending_actions and pending_actions[0][0] <= now:
                pending_actions.pop(0)[1](sender, fabric, now)
            for tx in sender.poll(now, view):
                for at, ce, trimmed in fabric.deliver(tx.ev, now,
                                                      len(tx.payload) + FRAME_OVERHEAD):
                    tie += 1
                    heapq.heappush(heap, (at, tie, "trim" if trimmed else "data", RxPacket(
                        tx.psn, tx.va, b"" if trimmed else bytes(tx.payload), tx.imm, tx.ev,
                        tx.tries, tx.ack_req, ce)))
            if now - last_timer >= 1_000_000:
                sender.on_timer(now)
                last_timer = now
            nxt = heap[0][0] if heap else now + 1_000_000
            now = max(now + pace_ns, min(nxt, now + 1_000_000)) if not heap else max(now, nxt)
            while heap and heap[0][0] <= now:
                _, _, kind, obj = heapq.heappop(heap)
                if kind == "flush":
                    sack = receiver.flush(obj)
                elif kind == "data":
                    sack = receiver.on_data(obj)
                    if sack is None:  # the delayed-ack timer the datapath runs
                        tie += 1
                        heapq.heappush(heap, (now + DELAYED_ACK_NS, tie, "flush", obj))
                if kind == "nack":
                    sender.on_nack(obj, now)
                    continue
                if kind == "cnp":
                    sender.on_cnp(now)
                    continue
                if kind == "data" and notify is not None and obj.ce and notify.on_ce(0, now):
                    tie += 1
                    heapq.heappush(heap, (now + fabric.default.delay_ns, tie, "cnp", None))
                if kind == "trim_nack":
                    sender.on_nack(obj.psn, now, True, obj.ev, obj.tries)
                    continue
                if kind == "trim":  # answered at once: NAK(TRIMMED), or a dup's SACK
                    report, nack = receiver.on_trimmed(obj)
                    if report is not None:
                        for at in fabric.arrivals(obj.ev & PATH_MASK, now):
                            tie += 1
                            heapq.heappush(heap, (at, tie, "trim_nack" if nack else "sack",
                                                  report))
                    continue
                if kind in ("data", "flush"):
                    while receiver.nacks:
                        tie += 1
                        heapq.heappush(heap, (now + fabric.default.delay_ns, tie, "nack",
                                              receiver.nacks.pop()))
                    if sack is not None:
                        # the reverse path: back the way the data came (same plane
                        # and T1), as the endpoint sends its SACKs
                        back = obj.ev & PATH_MASK
                        for at in fabric.arrivals(back, now):
                            tie += 1
                            heapq.heappush(heap, (at, tie, "sack", sack))
                else:
                    sender.on_sack(obj, now)
    except QpFailed:
        pass
    exact = bytes(dst) == src
    return Result(sender.idle and not sender.failed, exact, now, sender.failed, sender,
                  receiver)
