"""The adversary: a case's shape drawn from (seed, index), and the case made by running
a transfer live against the reference with hostile moves mixed in (pure: no files, no
processes; the reference alone).

Making a case (`plan_case`, then `make_case`)
    A live reference Sender and Receiver, built by trace.Recording so that every call
    into them is written down, run a transfer over a sim.SimFabric as sim.run_transfer
    does; between its steps the adversary acts. It knows what the live Sender really
    sent (each PSN's latest EV and transmission number, the highest PSN sent, cum, the
    EVs used, in the slots and retired) and forges around it: SACKs with cum behind,
    equal, ahead and far ahead, bitmaps over PSNs never sent, in flight or acked,
    echoes of the wrong copy or EV, NAKs of every kind, a trim storm
    (NACK(TRIMMED) naming the very copy in flight, again and again), CNP floods,
    ports flapping on both sides, probe results and denylists for EVs never used,
    timers at odd times, budgets of 0, 1 and 2**20, packets for the Receiver far ahead,
    behind cum, empty and 64 KiB long; and it reorders, duplicates and drops what the
    fabric carries. A case is two trace.Trace objects, the sender's and the receiver's,
    so trace.replay runs them into any implementation. If the live reference raises
    anything but QpFailed, the case ends at that call.

Well-formed (the point is hostile content, not type errors: every value is one the
endpoint can pass, twin.mrc.loop decoding a frame)
    PSNs are unwrapped 24-bit values, 0 <= psn < 2**63 (a "negative distance" is a PSN
    below cum, never below 0); EVs 0 <= ev < 2**32 (or -1 in a NAK that names none);
    tries 0..127; port bitmaps 16 bits; the congestion byte 8 bits; `now` never goes
    back (the caller's clock is monotonic); a post is 1 byte or more inside the source
    buffer; a packet's VA + length is inside the receiver's buffer (RX_BUFFER).

Adding a hostile input: a function of the live run (`_Run`) below, and its line in
MOVES with a weight; its values from the knobs at the top.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import random
from collections import Counter, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from twin.mrc import sim, trace
from twin.mrc.cc import Cc
from twin.mrc.modes import Mode
from twin.mrc.transport import (
    BITMAP_BITS,
    NACK_DISTANCE,
    RECV_WINDOW,
    TRY_MASK,
    QpFailed,
    RxPacket,
    SackReport,
)

SOURCE_SIZE = 1 << 20  # the sender's source buffer (posts lie inside it)
SOURCE_SEED = 4791
RX_BUFFER = SOURCE_SIZE  # the receiver's buffer: remote_va is 0, so honest writes fit
RX_MAX_LEN = 1 << 16  # the longest forged payload
PSN_LIMIT = 1 << 63
EV_LIMIT = 1 << 32
TRIES_LIMIT = TRY_MASK + 1
PORTS_LIMIT = 1 << 16
MAX_PSNS = 1600  # PSNs posted per case, at most (past BUILD_CHUNK: records built in two)
MAX_CALLS = 4000  # per case, both traces together (a storm may overrun it by its length)
MAX_STEPS = 6000  # steps of the transfer per case
TAIL_STEPS = 200  # steps after the transfer is done or failed: the adversary goes on
DELIVER_MAX = 256  # fabric events delivered per step
TIMER_NS = 1_000_000  # the endpoint's timer tick

MODES = {Mode.MRC: 6, Mode.SPRAY_STATIC: 2, Mode.SINGLE_PATH: 2}  # value: weight
CCS = {Cc.NSCC: 6, Cc.DELAY: 2, Cc.DCQCN: 2}
MTUS = (256, 1024, 4096)
INIT_WINDOWS = (2, 16, 64)
MAX_WINDOWS = (32, 256)
LOSS_LIMITS = (3, 32, 32)
RETRY_LIMITS = (2, 7, 7)
RTO_MIN_NS = (1_000_000, 10_000_000, 10_000_000)
PLANES = (1, 2, 4, 4)
T1S = (1, 2)
EVSET_SIZES = (8, 32, 128)
BACKUPS = (4, 32)
RESURRECT_AFTER = (1, 3)
ACK_EVERY = (1, 2, 2, 4)
SPANS = (RECV_WINDOW, RECV_WINDOW, RECV_WINDOW, 65, 128, 4096)  # the receiver's window
LOSS = (0.0, 0.0, 0.01, 0.1)
DUPLICATE = (0.0, 0.0, 0.05)
JITTER_NS = (5_000, 60_000)
AGGRESSION = (0.1, 0.3, 0.6)  # the share of steps the adversary acts in
POSTS = (1, 1, 2, 3)  # writes per case
BUDGETS = (0, 1, 2, 8, 64, 1 << 20)  # poll budgets
STORM_LENGTHS = (4, 32, 256, 1500)  # NACK(TRIMMED)s in one trim storm
CNP_FLOODS = (1, 16, 256, 2048)
SMALL_STEPS_NS = (0, 0, 1, 100, 2_000)
LARGE_STEPS_NS = (20_000, 200_000, 1_000_000)
HUGE_PSNS = ((1 << 23) - 1, 1 << 23, (1 << 24) - 1, 1 << 24, (1 << 31) - 1, 1 << 32,
             1 << 62, PSN_LIMIT - 1)
EDGE_EVS = (0, 1, 0xFFFF, 0xFFFFF, EV_LIMIT - 1)
CONGESTION = (0, 0x80, 0x81, 0x7F, 0xFF, 1)


# -- a case -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseSpec:
    """What a case is made of, drawn by `plan_case` from (seed, index)."""

    seed: int
    index: int
    config: dict  # SenderConfig fields
    evset: dict  # EvSet keyword arguments
    receiver: dict  # Receiver keyword arguments: ack_every, span
    fabric: dict  # sim.PathModel fields of every path
    posts: tuple[tuple[int, int, int | None], ...]  # (length, offset, imm) of each write
    moves: tuple[str, ...]  # the adversary's moves in this case
    aggression: float  # the share of steps it acts in

    @property
    def name(self) -> str:
        return f"fuzz-{self.seed}-{self.index}"


@dataclass
class FuzzCase:
    """A case made: its two traces, and what the live run saw."""

    spec: CaseSpec
    sender: trace.Trace
    receiver: trace.Trace
    moves_made: Counter = field(default_factory=Counter)
    stopped: str | None = None  # the live reference raised this (the case ends there)

    @property
    def calls(self) -> int:
        return len(self.sender.calls) + len(self.receiver.calls)


def _rng(seed: int, index: int, what: str) -> random.Random:
    return random.Random(f"difffuzz:{seed}:{index}:{what}")


def _weighted(rng: random.Random, table: dict[str, float]) -> str:
    """A key of `table`, chosen by weight; a Mode or Cc as its plain string (a case's
    config is JSON, and compares as the string)."""
    names = list(table)
    return str(rng.choices(names, weights=[table[n] for n in names])[0])


def select_moves(only: Iterable[str] | None = None,
                 without: Iterable[str] = ()) -> tuple[str, ...]:
    """The moves a run may use: `only` those (default every one), less `without`.
    An unknown name is a ValueError that lists the valid ones."""
    asked = list(only or ()) + list(without)
    unknown = sorted(set(asked) - set(MOVES))
    if unknown:
        raise ValueError(f"unknown move(s) {', '.join(unknown)}: "
                         f"want any of {', '.join(MOVES)}")
    chosen = tuple(only) if only else tuple(MOVES)
    return tuple(m for m in chosen if m not in set(without))


def plan_case(seed: int, index: int, moves: tuple[str, ...] | None = None) -> CaseSpec:
    """The shape of case (seed, index): the sender's config, its EV set, the receiver,
    the fabric, the writes and the adversary's moves (a subset of `moves`)."""
    rng = _rng(seed, index, "plan")
    pool = list(moves if moves is not None else MOVES)
    mode = _weighted(rng, MODES)
    mtu = rng.choice(MTUS)
    config = {"mode": mode, "cc": _weighted(rng, CCS), "mtu": mtu,
              "init_window": float(rng.choice(INIT_WINDOWS)),
              "max_window": float(rng.choice(MAX_WINDOWS)),
              "ecn": rng.random() < 0.85, "trim": rng.random() < 0.85,
              "loss_limit": rng.choice(LOSS_LIMITS), "retry_limit": rng.choice(RETRY_LIMITS),
              "rto_min_ns": rng.choice(RTO_MIN_NS)}
    config = trace.config_to_dict(dataclasses.replace(trace.config_from_dict({}), **config))
    planes = rng.choice(PLANES)
    evset = {"planes": list(range(planes)), "t1_per_plane": rng.choice(T1S),
             "size": rng.choice(EVSET_SIZES), "backup": rng.choice(BACKUPS),
             "resurrect_after": rng.choice(RESURRECT_AFTER), "seed": rng.randrange(1 << 16),
             "cross_rack": rng.random() < 0.8}
    span = rng.choice(SPANS)
    receiver = {"ack_every": rng.choice(ACK_EVERY)}
    if span != RECV_WINDOW:
        receiver["span"] = span
    fabric = {"loss": rng.choice(LOSS), "duplicate": rng.choice(DUPLICATE),
              "jitter_ns": rng.choice(JITTER_NS)}
    if rng.random() < 0.2:  # a congested link: CE marks and honest trims
        fabric.update(rate_bps=rng.choice((10**9, 10**10)), mark_bytes=4 * mtu,
                      queue_bytes=16 * mtu, trim=rng.random() < 0.7)
    posts = []
    psns = 0
    for _ in range(rng.choice(POSTS)):
        length = rng.choice((rng.choice((1, mtu - 1, mtu, mtu + 1)),
                             rng.randrange(1, 64 * mtu), rng.randrange(1, 64 * mtu),
                             rng.randrange(1, SOURCE_SIZE)))
        length = min(length, (MAX_PSNS - psns) * mtu)
        if length <= 0:
            break
        offset = rng.randrange(0, SOURCE_SIZE - length + 1)
        imm = rng.choice((None, rng.randrange(EV_LIMIT)))
        posts.append((length, offset, imm))
        psns += -(-length // mtu)
    if not pool:
        chosen: tuple[str, ...] = ()
    elif rng.random() < 0.3:
        chosen = tuple(pool)
    else:
        chosen = tuple(sorted(rng.sample(pool, min(len(pool), rng.randint(1, 5)))))
    return CaseSpec(seed, index, config, evset, receiver, fabric, tuple(posts), chosen,
                    rng.choice(AGGRESSION))


@functools.lru_cache(maxsize=1)
def _source() -> memoryview:
    return memoryview(sim.source_bytes(SOURCE_SIZE, SOURCE_SEED))


@dataclass(slots=True)
class _Copy:
    """The latest copy of a PSN the live Sender sent."""

    ev: int
    tries: int  # the transmission number on the wire (0 for the first copy)


class _Run:
    """One case's transfer, live: the reference pair (recorded), the fabric between
    them, the clock, and what the adversary knows. Every call into the pair goes
    through `_call`, which ends the case if the live reference raises anything but
    QpFailed (the trace then ends at that call)."""

    def __init__(self, spec: CaseSpec):
        self.spec = spec
        self.rng = _rng(spec.seed, spec.index, "run")
        self.rec = trace.Recording()
        self.fabric = sim.SimFabric(sim.PathModel(**spec.fabric), seed=spec.index)
        cfg = trace.config_from_dict(spec.config)
        self.tx = self.rec.sender(spec.evset, 0, cfg, SOURCE_SIZE, SOURCE_SEED)
        self.rx = self.rec.receiver(lambda va, payload: None,
                                    port_state=lambda: self.fabric.peer_ports, **spec.receiver)
        self.rto = spec.config["rto_min_ns"]
        self.source = _source()
        self.now = 0
        self.last_timer = 0
        self.heap: list = []
        self.tie = 0
        self.copies: dict[int, _Copy] = {}
        self.sent_high = -1
        self.evs_used: dict[int, None] = {}  # in the order first used
        self.posted_psns = 0
        self.posts_left = list(spec.posts)
        self.sacks_seen: deque[SackReport] = deque(maxlen=32)
        self.rx_seen: deque[tuple[str, RxPacket]] = deque(maxlen=32)
        self.moves_made: Counter = Counter()
        self.stopped: str | None = None
        self.failed = False

    # -- calls into the live pair

    @property
    def calls(self) -> int:
        return len(self.rec.sender_calls) + len(self.rec.receiver_calls)

    def _call(self, fn: Callable, *args: Any) -> Any:
        if self.stopped is not None:
            return None
        try:
            return fn(*args)
        except QpFailed:
            self.failed = True
        except Exception as e:  # the live reference failing ends the case
            self.stopped = f"{type(e).__name__}: {e}"
        return None

    def post(self, length: int, offset: int, imm: int | None) -> None:
        self._call(self.tx.post, length, offset, imm, self.now)
        self.posted_psns += -(-length // self.spec.config["mtu"])

    def poll(self, budget: int = 64) -> list:
        out = self._call(self.tx.poll, self.now, self.source, budget) or []
        for t in out:
            self.copies[t.psn] = _Copy(t.ev, t.tries)
            self.sent_high = max(self.sent_high, t.psn)
            self.evs_used.setdefault(t.ev, None)
            size = len(t.payload) + sim.FRAME_OVERHEAD
            for at, ce, trimmed in self.fabric.deliver(t.ev, self.now, size):
                self.push(at, "trim" if trimmed else "data", RxPacket(
                    t.psn, t.va, b"" if trimmed else t.payload, t.imm, t.ev, t.tries,
                    t.ack_req, ce))
        return out

    def timer(self) -> None:
        self._call(self.tx.on_timer, self.now)
        self.last_timer = self.now

    def sack(self, report: SackReport) -> None:
        self._call(self.tx.on_sack, report, self.now)

    def nack(self, psn: int, trimmed: bool = False, ev: int = -1, tries: int = -1) -> None:
        self._call(self.tx.on_nack, psn, self.now, trimmed, ev, tries)

    # -- the fabric between them

    def push(self, at: int, kind: str, obj: Any) -> None:
        self.tie += 1
        heapq.heappush(self.heap, (at, self.tie, kind, obj))

    def deliver_due(self) -> None:
        for _ in range(DELIVER_MAX):
            if not self.heap or self.heap[0][0] > self.now or self.stopped is not None:
                return
            _, _, kind, obj = heapq.heappop(self.heap)
            self.deliver(kind, obj)

    def deliver(self, kind: str, obj: Any) -> None:
        """One event reaches its end: a packet the receiver, a reply the sender."""
        if kind == "sack":
            self.sacks_seen.append(obj)
            self.sack(obj)
        elif kind == "nack":
            self.nack(obj)
        elif kind == "trim_nack":
            self.nack(obj.psn, True, obj.ev, obj.tries)
        else:
            self.to_receiver(kind, obj)

    def to_receiver(self, kind: str, pkt: RxPacket | None) -> None:
        """A packet (or a delayed-ack timer) at the receiver; its answers go back over
        the fabric the way the packet came, as the endpoint sends them."""
        if pkt is not None and kind != "flush":
            self.rx_seen.append((kind, pkt))
        if kind == "trim":
            got = self._call(self.rx.on_trimmed, pkt)
            if got is not None and got[0] is not None:
                self.reply(pkt, "trim_nack" if got[1] else "sack", got[0])
            return
        if kind == "flush":
            report = self._call(self.rx.flush, pkt)
        else:
            report = self._call(self.rx.on_data, pkt)
            if report is None and self.stopped is None:
                self.push(self.now + sim.DELAYED_ACK_NS, "flush", pkt)
        while self.rx.nacks:
            self.push(self.now + self.fabric.default.delay_ns, "nack", self.rx.nacks.pop())
        if report is not None and pkt is not None:
            self.reply(pkt, "sack", report)

    def reply(self, pkt: RxPacket, kind: str, report: SackReport) -> None:
        for at in self.fabric.arrivals(pkt.ev & sim.PATH_MASK, self.now):
            self.push(at, kind, report)

    def tick(self) -> None:
        """Time moves on (never back): mostly to the next event, as sim does; now and
        then not at all, a little, a lot, or just around a retransmit timeout."""
        r = self.rng.random()
        if r < 0.6:
            nxt = self.heap[0][0] if self.heap else self.now + TIMER_NS
            self.now = max(self.now, min(nxt, self.now + TIMER_NS))
        elif r < 0.8:
            self.now += self.rng.choice(SMALL_STEPS_NS)
        elif r < 0.97:
            self.now += self.rng.choice(LARGE_STEPS_NS)
        else:
            self.now += self.rto + self.rng.choice((-1, 0, 1))

    # -- what the adversary knows

    def psn(self, kind: str) -> int:
        """A PSN of a kind: in flight (sent, at or above cum), acked (below cum), built
        but never sent, far past what was sent, huge, 0."""
        cum, high = self.tx.cum, self.sent_high
        rng = self.rng
        if kind == "inflight" and high >= cum:
            return rng.randint(cum, high)
        if kind == "acked" and cum > 0:
            return rng.choice((0, cum - 1, rng.randrange(cum)))
        if kind == "unsent":
            return high + 1 + rng.randrange(max(1, min(self.posted_psns - high - 1, 80)))
        if kind == "far":
            return high + (1 << rng.randrange(6, 41))
        if kind == "huge":
            return rng.choice(HUGE_PSNS)
        if kind == "zero":
            return 0
        return max(0, high)

    def ev(self, kind: str, psn: int | None = None) -> int:
        """An EV of a kind: the one psn's latest copy took, any used, one in a slot,
        a retired one, one never used, an edge value."""
        rng = self.rng
        copy = self.copies.get(psn) if psn is not None else None
        if kind == "current" and copy is not None:
            return copy.ev
        if kind == "used" and self.evs_used:
            return rng.choice(list(self.evs_used))
        if kind == "slot":
            return rng.choice(self.tx.evs.active).value
        if kind == "retired" and self.tx.evs.retired:
            return rng.choice(list(self.tx.evs.retired))
        if kind == "edge":
            return rng.choice(EDGE_EVS)
        return rng.randrange(EV_LIMIT)

    def tries(self, kind: str, psn: int | None = None) -> int:
        copy = self.copies.get(psn) if psn is not None else None
        if copy is not None and kind == "current":
            return copy.tries
        if copy is not None and kind == "stale":
            return (copy.tries - 1) & TRY_MASK
        return self.rng.randrange(TRIES_LIMIT)

    def ports(self) -> int:
        planes = len(self.spec.evset["planes"])
        return self.rng.choice((0, PORTS_LIMIT - 1, self.rng.randrange(PORTS_LIMIT),
                                (PORTS_LIMIT - 1) ^ (1 << self.rng.randrange(planes))))

    def forged_sack(self, cum: int | None = None, bitmap: int = 0, psn: int | None = None,
                    tries: int | None = None, ev: int | None = None,
                    ports: int | None = None, congestion: int = 0,
                    dup: bool = False) -> SackReport:
        """A SACK as the wire can carry it; unnamed fields look honest."""
        if psn is None:
            psn = self.psn(self.rng.choice(("inflight", "acked", "high")))
        return SackReport(self.tx.cum if cum is None else cum, bitmap,
                          self.ev("current", psn) if ev is None else ev, psn,
                          self.tries("current", psn) if tries is None else tries,
                          self.fabric.peer_ports if ports is None else ports, congestion, dup)

    def packet(self, psn: int, length: int | None = None, imm: int | None = None,
               ce: bool = False, ev: int | None = None) -> RxPacket:
        """A data packet for the receiver, inside its buffer."""
        rng = self.rng
        if length is None:
            length = rng.choice((0, 1, 64, self.spec.config["mtu"]))
        va = rng.choice((0, RX_BUFFER - length, rng.randrange(RX_BUFFER - length + 1)))
        return RxPacket(psn, va, bytes(length), imm, self.ev("used") if ev is None else ev,
                        self.rng.randrange(TRIES_LIMIT), rng.random() < 0.3, ce)

    # -- the transfer

    def step(self) -> None:
        self.tick()
        self.deliver_due()
        self.poll()
        if self.now - self.last_timer >= TIMER_NS:
            self.timer()
        if self.spec.moves and self.rng.random() < self.spec.aggression:
            name = self.rng.choices(self.spec.moves,
                                    weights=[MOVES[m].weight for m in self.spec.moves])[0]
            self.moves_made[name] += 1
            MOVES[name].act(self)

    def run(self) -> None:
        length, offset, imm = self.posts_left.pop(0)
        self.post(length, offset, imm)
        tail = 0
        for _ in range(MAX_STEPS):
            if self.stopped is not None or self.calls >= MAX_CALLS or tail > TAIL_STEPS:
                return
            self.step()
            if self.tx.idle and self.posts_left:
                self.post(*self.posts_left.pop(0))
            elif self.failed or (self.tx.idle and not self.heap):
                tail += 1


def make_case(spec: CaseSpec) -> FuzzCase:
    """Run case `spec` live against the reference; its two traces."""
    run = _Run(spec)
    run.run()
    about = f"python -m twin.mrc.difffuzz --seed {spec.seed} --case {spec.index}"
    sender = run.rec.sender_trace(f"{spec.name}-sender", about)
    receiver = run.rec.receiver_trace(f"{spec.name}-receiver", about)
    return FuzzCase(spec, sender, receiver, run.moves_made, run.stopped)


# -- the adversary's moves ----------------------------------------------------------------


def _sack_cum(run: _Run) -> None:
    cum, high = run.tx.cum, run.sent_high
    forged = run.rng.choice((max(0, cum - run.rng.randint(1, 100)), cum,
                             run.rng.randint(cum, max(cum, high + 1)), high + 1, high + 2,
                             high + (1 << run.rng.randrange(6, 40)),
                             run.rng.choice(HUGE_PSNS)))
    bitmap = run.rng.choice((0, (1 << BITMAP_BITS) - 1, run.rng.getrandbits(BITMAP_BITS)))
    run.sack(run.forged_sack(cum=forged, bitmap=bitmap))


def _sack_bits_unsent(run: _Run) -> None:
    """A bitmap naming PSNs above the highest sent (their records may be built)."""
    high = run.sent_high
    if high < 0:
        return
    cum = run.rng.randint(max(run.tx.cum, high + 1 - BITMAP_BITS + 1), high + 1)
    first = high + 1 - (cum + 1)  # the bit of the first PSN never sent
    bits = 0
    for b in range(max(0, first), BITMAP_BITS):
        if run.rng.random() < 0.5:
            bits |= 1 << b
    run.sack(run.forged_sack(cum=cum, bitmap=bits or 1 << (BITMAP_BITS - 1)))


def _sack_bits_sent(run: _Run) -> None:
    """A bitmap acking PSNs sent but perhaps never received, or acked already."""
    cum = run.rng.choice((run.tx.cum, max(0, run.tx.cum - run.rng.randint(1, 64))))
    span = max(0, min(BITMAP_BITS, run.sent_high - cum))
    bits = 0
    for b in range(span):
        if run.rng.random() < 0.6:
            bits |= 1 << b
    run.sack(run.forged_sack(cum=cum, bitmap=bits))


def _sack_echo(run: _Run) -> None:
    """The echoed PSN, copy and EV forged; a congestion byte; the dup bit; port state."""
    rng = run.rng
    psn = run.psn(rng.choice(("inflight", "acked", "unsent", "far", "huge", "zero")))
    run.sack(run.forged_sack(
        psn=psn, tries=run.tries(rng.choice(("current", "stale", "random")), psn),
        ev=run.ev(rng.choice(("current", "used", "slot", "retired", "never", "edge")), psn),
        ports=rng.choice((None, run.ports())), congestion=rng.choice(CONGESTION),
        dup=rng.random() < 0.3))


def _sack_replay(run: _Run) -> None:
    """Honest SACKs seen before, again, in any order."""
    old = list(run.sacks_seen)
    run.rng.shuffle(old)
    for report in old[:run.rng.randint(1, 8)]:
        run.sack(report)


def _nack_seq(run: _Run) -> None:
    rng = run.rng
    psn = run.psn(rng.choice(("inflight", "inflight", "acked", "unsent", "far", "huge")))
    if rng.random() < 0.5:
        run.nack(psn)
    else:
        run.nack(psn, False, run.ev(rng.choice(("current", "never")), psn),
                 run.tries("random"))


def _nack_trim(run: _Run) -> None:
    """NACK(TRIMMED): for the copy in flight (a resend at once), or a wrong one."""
    rng = run.rng
    psn = run.psn(rng.choice(("inflight", "inflight", "acked", "unsent", "far")))
    run.nack(psn, True, run.ev(rng.choice(("current", "current", "used", "never")), psn),
             run.tries(rng.choice(("current", "current", "stale", "random")), psn))


def _trim_storm(run: _Run) -> None:
    """One PSN trimmed again and again: each NACK(TRIMMED) names the copy in flight
    exactly (its EV and transmission number, as a switch's trim would), and the
    resend it causes is polled out before the next."""
    if run.sent_high < run.tx.cum:
        return
    psn = run.psn("inflight")
    for _ in range(run.rng.choice(STORM_LENGTHS)):
        copy = run.copies.get(psn)
        if copy is None or run.stopped is not None:
            return
        run.nack(psn, True, copy.ev, copy.tries)
        run.now += run.rng.choice((0, 1, 1000))
        if not any(t.psn == psn for t in run.poll(1)):
            return  # acked, held (no EV, the pacer) or the QP failed: the storm is over


def _cnp_flood(run: _Run) -> None:
    step = run.rng.choice((0, 1))
    for _ in range(run.rng.choice(CNP_FLOODS)):
        run._call(run.tx.on_cnp, run.now)
        run.now += step


def _ports_flap(run: _Run) -> None:
    for _ in range(run.rng.randint(1, 8)):
        run._call(run.tx.set_local_ports, run.ports(), run.now)
        run.now += run.rng.choice((0, 1, 10_000))


def _peer_ports(run: _Run) -> None:
    """The receiver's ports (echoed in its SACKs) change."""
    run.fabric.peer_ports = run.ports()


def _probe(run: _Run) -> None:
    rng = run.rng
    value = run.ev(rng.choice(("retired", "retired", "slot", "used", "never", "edge")))
    for _ in range(rng.randint(1, 4)):
        run._call(run.tx.probe_result, value, rng.random() < 0.8, run.now)


def _probe_round(run: _Run) -> None:
    """The endpoint's probe round: candidates, then an answer for each (or not)."""
    picked = run._call(run.tx.evs.probe_candidates, run.rng.choice((0, 1, 4, 1000))) or []
    for ev in picked:
        if run.rng.random() < 0.8:
            run._call(run.tx.probe_result, ev.value, run.rng.random() < 0.7, run.now)


def _deny(run: _Run) -> None:
    rng = run.rng
    values = [run.ev(rng.choice(("slot", "slot", "retired", "used", "never", "edge")))
              for _ in range(rng.randint(0, 8))]
    if values and rng.random() < 0.3:
        values.append(values[0])  # the same value twice
    run._call(run.tx.deny, values, run.now)


def _timer_odd(run: _Run) -> None:
    r = run.rng.random()
    if r < 0.4:  # twice at the same instant
        run.timer()
        run.timer()
    elif r < 0.9:  # around the retransmit timeout of what was sent last
        run.now += run.rto + run.rng.choice((-1, 0, 1))
        run.timer()
    else:  # a long stall (a 2-core VM descheduled)
        run.now += run.rng.choice((10, 100)) * run.rto
        run.timer()


def _poll_budget(run: _Run) -> None:
    run.poll(run.rng.choice(BUDGETS))


def _post_more(run: _Run) -> None:
    """A write posted while others are in flight."""
    mtu = run.spec.config["mtu"]
    room = MAX_PSNS - run.posted_psns - sum(-(-n // mtu) for n, _, _ in run.posts_left)
    if room <= 0:
        return
    length = min(run.rng.choice((1, mtu, mtu + 1, 8 * mtu)), room * mtu)
    run.post(length, run.rng.randrange(SOURCE_SIZE - length + 1),
             run.rng.choice((None, run.rng.randrange(EV_LIMIT))))


def _events_shuffle(run: _Run) -> None:
    """The next few events on the fabric all arrive now, in a random order."""
    n = run.rng.randint(2, 16)
    taken = [heapq.heappop(run.heap) for _ in range(min(n, len(run.heap)))]
    run.rng.shuffle(taken)
    for _, _, kind, obj in taken:
        run.deliver(kind, obj)


def _events_dup(run: _Run) -> None:
    """Copies of the next few events on the fabric arrive now (the originals later)."""
    for _, _, kind, obj in heapq.nsmallest(run.rng.randint(1, 8), run.heap):
        run.deliver(kind, obj)


def _events_drop(run: _Run) -> None:
    for _ in range(min(run.rng.randint(1, 16), len(run.heap))):
        heapq.heappop(run.heap)


def _rx_far(run: _Run) -> None:
    """Packets ahead of the receiver's cum: at the edge of its window, past it, at the
    NAK distance, far, huge."""
    cum = run.rx.cum
    span = run.spec.receiver.get("span", RECV_WINDOW)
    psn = run.rng.choice((cum + span - 1, cum + span, cum + span + 1, cum + NACK_DISTANCE - 1,
                          cum + NACK_DISTANCE, cum + NACK_DISTANCE + 1,
                          cum + (1 << run.rng.randrange(7, 40)), run.rng.choice(HUGE_PSNS)))
    kind = run.rng.choice(("data", "data", "trim"))
    run.to_receiver(kind, run.packet(min(psn, PSN_LIMIT - 1)))


def _rx_behind(run: _Run) -> None:
    """Packets behind cum (a negative distance), as data or trimmed."""
    cum = run.rx.cum
    psn = run.rng.choice((0, max(0, cum - 1), max(0, cum - run.rng.randint(1, 1 << 20))))
    run.to_receiver(run.rng.choice(("data", "trim")), run.packet(psn, ce=run.rng.random() < 0.3))


def _rx_lengths(run: _Run) -> None:
    """Empty, one-byte and 64 KiB payloads, at the start and the very end of the buffer."""
    psn = run.rx.cum + run.rng.randrange(4)
    length = run.rng.choice((0, 1, RX_MAX_LEN - 1, RX_MAX_LEN))
    run.to_receiver("data", run.packet(psn, length, imm=run.rng.choice(
        (None, run.rng.randrange(EV_LIMIT)))))


def _rx_trims(run: _Run) -> None:
    cum = run.rx.cum
    for _ in range(run.rng.randint(1, 8)):
        psn = cum + run.rng.randrange(-4, 80)
        run.to_receiver("trim", run.packet(max(0, psn), 0, ce=run.rng.random() < 0.3))


def _rx_flush(run: _Run) -> None:
    seen = list(run.rx_seen)
    pkt = run.rng.choice(seen)[1] if seen and run.rng.random() < 0.7 else None
    run.to_receiver("flush", pkt)


def _rx_ce(run: _Run) -> None:
    """CE-marked copies of packets seen (duplicates), and marked new ones."""
    seen = list(run.rx_seen)
    for _ in range(run.rng.randint(1, 12)):
        if seen and run.rng.random() < 0.6:
            kind, pkt = run.rng.choice(seen)
            run.to_receiver(kind, dataclasses.replace(pkt, ce=True))
        else:
            run.to_receiver("data", run.packet(run.rx.cum + run.rng.randrange(64), ce=True))


def _rx_imm(run: _Run) -> None:
    """WRITE_IMM packets at any PSN in the window (the completion heap)."""
    span = run.spec.receiver.get("span", RECV_WINDOW)
    for _ in range(run.rng.randint(1, 8)):
        psn = run.rx.cum + run.rng.choice((0, 1, run.rng.randrange(span)))
        run.to_receiver("data", run.packet(psn, imm=run.rng.randrange(EV_LIMIT)))


@dataclass(frozen=True)
class Move:
    weight: float
    act: Callable[[_Run], None]
    about: str


# Every hostile input, in one table: a new one is a function above and a line here.
MOVES: dict[str, Move] = {
    "sack_cum": Move(3, _sack_cum, "cum behind, equal, ahead, one past, far past, huge"),
    "sack_bits_unsent": Move(2, _sack_bits_unsent, "bitmap bits over PSNs never sent"),
    "sack_bits_sent": Move(2, _sack_bits_sent, "bitmap bits over PSNs in flight or acked"),
    "sack_echo": Move(3, _sack_echo, "echoed PSN, copy and EV forged; congestion; dup; ports"),
    "sack_replay": Move(2, _sack_replay, "old honest SACKs again, in any order"),
    "nack_seq": Move(2, _nack_seq, "NAK(PSN sequence error) for any PSN"),
    "nack_trim": Move(2, _nack_trim, "NAK(TRIMMED) for the copy in flight, or a wrong one"),
    "trim_storm": Move(1, _trim_storm, "one PSN trimmed again and again, exactly"),
    "cnp_flood": Move(1, _cnp_flood, "CNPs by the thousand"),
    "ports_flap": Move(2, _ports_flap, "set_local_ports flapping"),
    "peer_ports": Move(1, _peer_ports, "the peer's port bitmap changing in its SACKs"),
    "probe": Move(2, _probe, "probe results for EVs retired, in use, never used"),
    "probe_round": Move(1, _probe_round, "the endpoint's probe round"),
    "deny": Move(1, _deny, "denylists of junk, live and retired EVs"),
    "timer_odd": Move(2, _timer_odd, "timers twice at once, around the RTO, after a stall"),
    "poll_budget": Move(2, _poll_budget, "polls with budgets of 0, 1, 2, 2**20"),
    "post_more": Move(1, _post_more, "writes posted mid-transfer"),
    "events_shuffle": Move(2, _events_shuffle, "the fabric's next events, shuffled, now"),
    "events_dup": Move(2, _events_dup, "the fabric's next events, twice"),
    "events_drop": Move(1, _events_drop, "the fabric's next events, lost"),
    "rx_far": Move(2, _rx_far, "packets at and past the receive window, far, huge"),
    "rx_behind": Move(2, _rx_behind, "packets behind cum"),
    "rx_lengths": Move(1, _rx_lengths, "payloads of 0, 1, 64 KiB; at the buffer's end"),
    "rx_trims": Move(2, _rx_trims, "trimmed packets in and out of the window"),
    "rx_flush": Move(1, _rx_flush, "delayed-ack timers with and without a packet"),
    "rx_ce": Move(1, _rx_ce, "CE-marked duplicates and new packets"),
    "rx_imm": Move(1, _rx_imm, "WRITE_IMM packets anywhere in the window"),
}
