"""DCQCN, the congestion control of RoCEv2 NICs: the twin's RoCE baseline (pure: no
sockets, the caller's clock in ns).

Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
splits it in three; the switch is the fabric's business (it marks CE on ECN-capable
packets when its queue is long), the two ends are here:

    NotificationPoint   the receiver (NP). A CE-marked data packet of a QP makes it
                        send a CNP (wire.encode_cnp) to the sending QP, at most one
                        per QP per `min_time_between_cnps_ns` (the paper's N = 50 µs).
    ReactionPoint       the sender (RP): a rate, cut on each CNP and raised again by
                        a timer and a byte counter when CNPs stop.

ReactionPoint, as in the paper (section 3.2, Figure 8), with
    Rc  the current rate (what the pacer lets out)
    Rt  the target rate (Rc before the last cut)
    α   the congestion estimate, 0..1
    on a CNP          Rt = Rc; Rc = Rc * (1 - α/2); α = (1 - g)α + g; the timer, the
                      byte counter and both stage counts (T, BC) start again.
                      At most one cut per `rate_reduce_monitor_period_ns`.
    every alpha timer without a CNP                 α = (1 - g)α
    every `rpg_time_reset_ns` (T += 1) and every `rpg_byte_reset` bytes sent
    (BC += 1), a rate increase:
        fast recovery       max(T, BC) <= F:  Rc = (Rt + Rc) / 2
        additive increase   max(T, BC) > F:   Rt += R_AI;          Rc = (Rt + Rc) / 2
        hyper increase      min(T, BC) > F:   Rt += i * R_HAI;     Rc = (Rt + Rc) / 2
                            (i = min(T, BC) - F)
    Rc and Rt never exceed the line rate (the QP's port rate) nor fall below
    `rpg_min_rate_bps`. F = `rpg_threshold` (the paper's F = 5 stages).

The pacer: `Pacer` is a token bucket on the RP's current rate, in bytes on the wire,
`burst_ns` of tokens deep (BURST_FRAMES at least): `allowance(now)` says how many
frames may leave now, `next_send_ns()` when the next one may.

Parameters and their sources (`Dcqcn.reference()`; names are NVIDIA/Mellanox's, as
the mlx5 driver exposes them, drivers/infiniband/hw/mlx5/cong.c):

    parameter                      reference value   source
    rpg_time_reset                 300 µs            ConnectX default (a)
    rpg_byte_reset                 32767 bytes       ConnectX default (a)
    rpg_threshold (F)              5 stages          the paper (ConnectX's default is 1 (a))
    rpg_ai_rate                    5 Mbit/s          ConnectX default (a)
    rpg_hai_rate                   50 Mbit/s         ConnectX default (a)
    rpg_min_rate                   1 Mbit/s          ConnectX default (a)
    rate_reduce_monitor_period     4 µs              ConnectX default (a)
    initial_alpha_value            1023/1023 = 1.0   ConnectX default (a)
    g                              1/256             the paper (ConnectX: dce_tcp_g 1019 of
                                                     1024, g = 5/1024 (a))
    alpha timer (K)                55 µs             the paper
    min_time_between_cnps (N)      50 µs             the paper

    (a) as copied, with a pointer to Mellanox's "DCQCN parameters" article, into
        Google's Isekai simulator (isekai/host/rdma/rdma_roce_cc_dcqcn.h); the
        article itself could not be read from here.

Scaling to the twin (`Dcqcn.scaled`). Those values are for ~100 Gbit/s ports and
microsecond RTTs; the twin's links run at 25-50 Mbit/s, where one 4 KiB frame takes
0.7-1.35 ms and a base RTT is milliseconds. Used as they are, a CNP at most every
50 µs is one per CE mark, the 55 µs alpha timer decays α to nothing between two RTTs,
and a 5 Mbit/s additive step is a fifth of the line. So the twin keeps DCQCN's
dynamics *per RTT*: every time constant is multiplied by
    s = base RTT of the twin / REFERENCE_RTT_NS (10 µs, a two-tier Clos at 100 Gbit/s),
the byte counter by the ratio of bandwidth-delay products (a stage fires as many
times per RTT as on the reference port), and every rate (R_AI, R_HAI, R_min) is kept
as its share of a REFERENCE_LINE_BPS (100 Gbit/s) port. The twin's base RTT is
estimated from the path: `hops` frame times at the slowest rate. A 25 Mbit/s fabric
(4 hops, 1.35 ms a frame: RTT 5.4 ms, s = 540) gets N = 27 ms, K = 30 ms, T = 162 ms,
a byte stage every 4.4 KB (one frame), R_AI = 1.25 kbit/s. The floor R_min is kept at
`MIN_RATE_SHARE` of the line at least, so a QP never waits seconds for one packet.

What is not emulated: PFC. Real RoCE deployments run DCQCN over a lossless (PFC)
fabric; the twin's fabric is lossy, so a queue that overflows drops and go-back-N
resends (docs/roce-baseline.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from twin.mrc import wire

REFERENCE_LINE_BPS = 100_000_000_000  # the port the reference values are for
REFERENCE_RTT_NS = 10_000  # its base RTT (two-tier Clos, order of magnitude)
MIN_RATE_SHARE = 0.01  # the scaled R_min is at least this share of the line
UNSHAPED_LINE_BPS = 10_000_000_000  # a port no rate is set on (a veth): its nominal rate
# The pacer's bucket: this long at the current rate, and two frames at least, so a loop
# that wakes late catches up. With one frame, every late wake-up was lost (16 of 25 Mbit/s
# on a shaped lab); with 200 µs, a sprayed QP paced at 100 Mbit/s got 52. Half what the
# lab's link shapers (tbf) hold themselves: 4 ms (twin.dataplane.program.tbf_burst).
BURST_NS = 2_000_000
BURST_FRAMES = 2
MAX_TIMER_STEPS = 64  # timer periods caught up in one call (a stalled loop)


@dataclass(frozen=True)
class Dcqcn:
    """DCQCN's parameters (one QP's RP and NP); times in ns, rates in bit/s."""

    line_rate_bps: int = REFERENCE_LINE_BPS
    g: float = 1 / 256
    alpha_timer_ns: int = 55_000
    initial_alpha: float = 1.0
    rpg_time_reset_ns: int = 300_000
    rpg_byte_reset: int = 32_767
    rpg_threshold: int = 5
    rpg_ai_rate_bps: float = 5e6
    rpg_hai_rate_bps: float = 50e6
    rpg_min_rate_bps: float = 1e6
    rate_reduce_monitor_period_ns: int = 4_000
    min_time_between_cnps_ns: int = 50_000

    @classmethod
    def reference(cls) -> Dcqcn:
        """The values for a 100 Gbit/s port, unscaled (the table in the module doc)."""
        return cls()

    @classmethod
    def scaled(cls, line_rate_bps: int | None, frame_bytes: int, hops: int = 4) -> Dcqcn:
        """The reference values carried to a port of `line_rate_bps` (None: unshaped,
        UNSHAPED_LINE_BPS) on paths of `hops` links of that rate, keeping DCQCN's
        behaviour per RTT (the module doc says how and why)."""
        ref = cls.reference()
        line = line_rate_bps or UNSHAPED_LINE_BPS
        rtt_ns = hops * frame_bytes * 8 * 1_000_000_000 / line
        s = max(1.0, rtt_ns / REFERENCE_RTT_NS)
        share = line / REFERENCE_LINE_BPS
        bdp = (line * rtt_ns) / (REFERENCE_LINE_BPS * REFERENCE_RTT_NS)
        return dataclasses.replace(
            ref, line_rate_bps=line,
            alpha_timer_ns=int(ref.alpha_timer_ns * s),
            rpg_time_reset_ns=int(ref.rpg_time_reset_ns * s),
            rpg_byte_reset=max(frame_bytes, int(ref.rpg_byte_reset * bdp)),
            rpg_ai_rate_bps=ref.rpg_ai_rate_bps * share,
            rpg_hai_rate_bps=ref.rpg_hai_rate_bps * share,
            rpg_min_rate_bps=max(ref.rpg_min_rate_bps * share, MIN_RATE_SHARE * line),
            rate_reduce_monitor_period_ns=int(ref.rate_reduce_monitor_period_ns * s),
            min_time_between_cnps_ns=int(ref.min_time_between_cnps_ns * s))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class ReactionPoint:
    """The sender's side: its rate (`rate_bps`, Rc), cut on CNPs, raised by its timer
    and byte counter. Call `advance(now)` before reading the rate (the pacer does),
    `sent(nbytes, now)` for every frame that leaves, `on_cnp(now)` for every CNP."""

    def __init__(self, params: Dcqcn):
        self.p = params
        self.rate_bps = float(params.line_rate_bps)  # Rc: a QP starts at line rate
        self.target_bps = float(params.line_rate_bps)  # Rt
        # ConnectX's initial_alpha_value: α when the first CNP arrives. Until then the
        # QP is at line rate and its timers do not run (nothing to decay or recover).
        self.alpha = params.initial_alpha
        self.timer_stage = 0  # T
        self.byte_stage = 0  # BC
        self._bytes = 0  # since the last byte stage
        self._next_timer = self._next_alpha = 0
        self._active = False  # a CNP has come: the timers and the byte counter run
        self._last_cut: int | None = None  # when the rate was last cut
        self._cnp_since_alpha = False
        self.cnps = 0  # CNPs received
        self.cuts = 0  # rate cuts (CNPs within a monitor period share one)
        self.increases = {"fast_recovery": 0, "additive": 0, "hyper": 0}
        self.min_rate_seen = self.rate_bps

    # -- events -------------------------------------------------------------------

    def on_cnp(self, now: int) -> bool:
        """A CNP for this QP: cut the rate (unless one was cut within the monitor
        period); whether it was cut."""
        self.advance(now)
        self.cnps += 1
        self._cnp_since_alpha = True
        p = self.p
        if self._last_cut is not None and now - self._last_cut < p.rate_reduce_monitor_period_ns:
            return False
        self._last_cut = now
        self.target_bps = self.rate_bps
        self.rate_bps = max(p.rpg_min_rate_bps, self.rate_bps * (1 - self.alpha / 2))
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.timer_stage = self.byte_stage = self._bytes = 0
        self._next_timer = now + p.rpg_time_reset_ns
        if not self._active:
            self._active = True
            self._next_alpha = now + p.alpha_timer_ns
        self.cuts += 1
        self.min_rate_seen = min(self.min_rate_seen, self.rate_bps)
        return True

    def sent(self, nbytes: int, now: int) -> None:
        """`nbytes` left on the wire: the byte counter."""
        if not self._active:
            return
        self._bytes += nbytes
        reset = self.p.rpg_byte_reset
        while self._bytes >= reset:
            self._bytes -= reset
            self.byte_stage += 1
            self._increase()

    def advance(self, now: int) -> None:
        """Run the alpha timer and the rate-increase timer up to `now`."""
        if not self._active:
            return
        p = self.p
        steps = 0
        while now >= self._next_alpha and steps < MAX_TIMER_STEPS:
            if not self._cnp_since_alpha:
                self.alpha *= 1 - p.g
            self._cnp_since_alpha = False
            self._next_alpha += p.alpha_timer_ns
            steps += 1
        if now >= self._next_alpha:  # a long stall: the rest of the decay at once
            missed = (now - self._next_alpha) // p.alpha_timer_ns + 1
            self.alpha *= (1 - p.g) ** missed
            self._next_alpha += missed * p.alpha_timer_ns
        steps = 0
        while now >= self._next_timer and steps < MAX_TIMER_STEPS:
            self._next_timer += p.rpg_time_reset_ns
            self.timer_stage += 1
            self._increase()
            steps += 1
        if now >= self._next_timer:
            self._next_timer = now + p.rpg_time_reset_ns

    def _increase(self) -> None:
        p = self.p
        line = p.line_rate_bps
        t, bc, f = self.timer_stage, self.byte_stage, p.rpg_threshold
        if max(t, bc) <= f:
            self.increases["fast_recovery"] += 1
        elif min(t, bc) > f:
            self.target_bps += (min(t, bc) - f) * p.rpg_hai_rate_bps
            self.increases["hyper"] += 1
        else:
            self.target_bps += p.rpg_ai_rate_bps
            self.increases["additive"] += 1
        self.target_bps = min(self.target_bps, line)
        self.rate_bps = min(line, (self.target_bps + self.rate_bps) / 2)

    @property
    def phase(self) -> str:
        """Where the increase stands: line (at line rate), fast_recovery, additive, hyper."""
        if self.rate_bps >= self.p.line_rate_bps:
            return "line"
        t, bc, f = self.timer_stage, self.byte_stage, self.p.rpg_threshold
        if max(t, bc) <= f:
            return "fast_recovery"
        return "hyper" if min(t, bc) > f else "additive"

    def to_dict(self) -> dict:
        return {"rate_bps": round(self.rate_bps), "target_bps": round(self.target_bps),
                "alpha": round(self.alpha, 6), "phase": self.phase,
                "line_rate_bps": self.p.line_rate_bps, "cnps_received": self.cnps,
                "rate_cuts": self.cuts, "min_rate_bps": round(self.min_rate_seen),
                "increases": dict(self.increases)}


class Pacer:
    """A token bucket, in bytes on the wire, filled at the RP's current rate, or at
    `cap_bps` when that is lower: the QP's share of its NIC port, which the endpoint
    sets (a NIC's port scheduler serves its backlogged QPs in turn: n QPs on a port get
    1/n of it each, and never more than the port together; twin.mrc.loop)."""

    def __init__(self, rp: ReactionPoint, frame_bytes: int, now: int = 0,
                 burst_ns: int = BURST_NS):
        self.rp = rp
        self.frame = frame_bytes
        self.burst_ns = burst_ns
        self._tokens = float(frame_bytes)  # the first frame goes at once
        self._at = now
        self.held = 0  # polls that found no token
        self.cap_bps: float | None = None  # the QP's share of its port (None: the line)

    @property
    def rate_bps(self) -> float:
        """What the bucket fills at: the RP's rate, or the port share if lower."""
        rate = self.rp.rate_bps
        return rate if self.cap_bps is None else min(rate, self.cap_bps)

    def _depth(self) -> float:
        return max(BURST_FRAMES * float(self.frame), self.rate_bps * self.burst_ns / 8e9)

    def _fill(self, now: int) -> None:
        self.rp.advance(now)
        if now > self._at:
            self._tokens = min(self._depth(),
                               self._tokens + (now - self._at) * self.rate_bps / 8e9)
            self._at = now

    def allowance(self, now: int) -> int:
        """Frames that may leave now."""
        self._fill(now)
        n = int(self._tokens // self.frame)
        if n == 0:
            self.held += 1
        return n

    def consume(self, nbytes: int, now: int) -> None:
        """`nbytes` left (frames on the wire): take their tokens, count them for the RP."""
        self._fill(now)
        self._tokens -= nbytes
        self.rp.sent(nbytes, now)

    def next_send_ns(self, now: int) -> int:
        """When a full frame's tokens will be there (now, if they are)."""
        self._fill(now)
        short = self.frame - self._tokens
        if short <= 0:
            return now
        return max(now, self._at) + int(short * 8e9 / max(self.rate_bps, 1.0)) + 1


class NotificationPoint:
    """The receiver's side, for every QP of an endpoint: `on_ce(qpn, now)` says whether
    to send a CNP now (at most one per QP per `min_time_between_cnps_ns`)."""

    def __init__(self, min_time_between_cnps_ns: int = Dcqcn.min_time_between_cnps_ns):
        self.interval = min_time_between_cnps_ns
        self._last: dict[int, int] = {}  # QP -> when its last CNP went
        self.ce_packets = 0  # CE-marked data packets seen
        self.cnps = 0  # CNPs asked for

    def on_ce(self, qpn: int, now: int) -> bool:
        self.ce_packets += 1
        last = self._last.get(qpn)
        if last is not None and now - last < self.interval:
            return False
        self._last[qpn] = now
        self.cnps += 1
        return True

    def forget(self, qpn: int) -> None:
        self._last.pop(qpn, None)


# -- the sender's glue (transport.Sender) -------------------------------------------

# Headers of a data packet on the wire: IPv6/IPv6/UDP/BTH/RETH/ImmDt/ICRC (124), and
# the Ethernet header (14) a shaped link (tbf) counts too: pacing the IP packet alone
# would send 0.3% over a link's rate and grow its queue without end.
FRAME_OVERHEAD = wire.MAX_FRAME - wire.MTU + 14


def wire_bytes(packets) -> int:
    """Bytes on the wire of transport.TxPackets: payload and every header."""
    return sum(len(p.payload) for p in packets) + FRAME_OVERHEAD * len(packets)


def for_sender(cfg):
    """(config, ReactionPoint, Pacer) for a transport.SenderConfig: for cc dcqcn a copy
    of the config whose window is fixed at max_window (the in-flight cap; DCQCN itself
    is a rate), and the rate and its pacer; for any other cc the config itself, None,
    None. Raises ValueError for a cc that cannot run with the config's mode."""
    from twin.mrc import cc

    why = cc.problem(cfg.cc, cfg.mode)
    if why:
        raise ValueError(why)
    if cfg.cc != cc.Cc.DCQCN:
        return cfg, None, None
    cap = cfg.max_window
    cfg = dataclasses.replace(cfg, init_window=cap, min_window=cap, max_window=cap)
    frame = cfg.mtu + FRAME_OVERHEAD
    params = cfg.dcqcn or Dcqcn.scaled(cfg.line_rate_bps or None, frame)
    rp = ReactionPoint(params)
    return cfg, rp, Pacer(rp, frame)
