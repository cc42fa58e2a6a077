"""DCQCN, the RoCE baseline's congestion control (twin.mrc.dcqcn): the reaction point's
rate falls on CNPs and recovers when they stop, the notification point sends at most
one CNP per QP per interval, the CNP is RoCEv2's on the wire, the sender's pacer holds
it to its rate, and over a simulated bottleneck that marks CE the rate settles and the
bytes arrive."""

from __future__ import annotations

import heapq
import random

import pytest

from tests.unit.test_icrc import CONNECTX_CNP, reference_icrc
from twin.mrc import cc as CC
from twin.mrc import wire as W
from twin.mrc.dcqcn import (
    FRAME_OVERHEAD,
    Dcqcn,
    NotificationPoint,
    Pacer,
    ReactionPoint,
)
from twin.mrc.evset import EvSet
from twin.mrc.sim import PATH_MASK, PathModel, SimFabric
from twin.mrc.transport import Receiver, RxPacket, Sender, SenderConfig

US = 1_000
MS = 1_000_000
REF = Dcqcn.reference()


# -- the reaction point --------------------------------------------------------------


def test_cnps_cut_the_rate_and_raise_alpha():
    rp = ReactionPoint(REF)
    assert rp.rate_bps == REF.line_rate_bps and rp.phase == "line"
    assert rp.on_cnp(0)
    assert rp.rate_bps == REF.line_rate_bps / 2  # α starts at 1 (initial_alpha_value)
    assert rp.target_bps == REF.line_rate_bps
    rp.advance(100 * REF.alpha_timer_ns)  # quiet: α decays once per alpha timer
    # (not in the period of the CNP itself)
    assert rp.alpha == pytest.approx((1 - REF.g) ** 99, rel=1e-9)
    rates, alphas = [rp.rate_bps], [rp.alpha]
    t = 100 * REF.alpha_timer_ns
    for _ in range(20):  # congestion again: a CNP every 10 µs
        t += 10 * US
        assert rp.on_cnp(t)
        rates.append(rp.rate_bps)
        alphas.append(rp.alpha)
    assert all(b < a for a, b in zip(rates, rates[1:], strict=False))
    assert all(b > a for a, b in zip(alphas, alphas[1:], strict=False))
    assert rp.cuts == 21 and rp.cnps == 21


def test_cnps_within_the_monitor_period_share_one_cut():
    rp = ReactionPoint(REF)
    assert rp.on_cnp(0)
    assert not rp.on_cnp(REF.rate_reduce_monitor_period_ns - 1)
    assert rp.on_cnp(REF.rate_reduce_monitor_period_ns)
    assert rp.cnps == 3 and rp.cuts == 2


def test_the_rate_recovers_by_fast_recovery_then_additive_then_hyper_increase():
    rp = ReactionPoint(REF)
    rp.on_cnp(0)
    rt, rc = rp.target_bps, rp.rate_bps
    t = 0
    for stage in range(1, REF.rpg_threshold + 1):  # F timer stages of fast recovery
        t += REF.rpg_time_reset_ns
        rp.advance(t)
        rc = (rt + rc) / 2
        assert rp.target_bps == rt and rp.rate_bps == pytest.approx(rc)
        assert rp.phase == "fast_recovery", stage
    assert rp.increases == {"fast_recovery": REF.rpg_threshold, "additive": 0, "hyper": 0}
    # only the timer counts stages (no bytes sent): additive increase from here on
    rp.on_cnp(t + 1)  # from a rate below line, so the steps show
    rt, rc = rp.target_bps, rp.rate_bps
    t += 1
    for _ in range(REF.rpg_threshold):
        t += REF.rpg_time_reset_ns
        rp.advance(t)
    rt, rc = rp.target_bps, rp.rate_bps
    t += REF.rpg_time_reset_ns
    rp.advance(t)
    assert rp.phase == "additive"
    assert rp.target_bps == pytest.approx(rt + REF.rpg_ai_rate_bps)
    assert rp.rate_bps == pytest.approx((rp.target_bps + rc) / 2)
    # bytes sent past F byte stages as well: hyper increase
    rp.sent((REF.rpg_threshold + 1) * REF.rpg_byte_reset, t)
    assert rp.phase in ("hyper", "line") and rp.increases["hyper"] >= 1
    for _ in range(2000):  # and back to line rate, which it never exceeds
        t += REF.rpg_time_reset_ns
        rp.advance(t)
        rp.sent(REF.rpg_byte_reset, t)
    assert rp.rate_bps == REF.line_rate_bps and rp.phase == "line"


def test_the_rate_never_falls_below_the_floor():
    rp = ReactionPoint(REF)
    for i in range(200):
        rp.on_cnp(i * REF.rate_reduce_monitor_period_ns)
    assert rp.rate_bps == REF.rpg_min_rate_bps


def test_a_stalled_clock_catches_up_in_bounded_work():
    rp = ReactionPoint(REF)
    rp.on_cnp(0)
    rp.advance(10**12)  # 1000 s of timers
    assert rp.alpha < 1e-6 and rp.rate_bps <= REF.line_rate_bps


# -- scaling to the twin's links ---------------------------------------------------------


def test_scaling_keeps_the_behaviour_per_rtt():
    frame = 4096 + FRAME_OVERHEAD
    p = Dcqcn.scaled(25_000_000, frame)
    rtt = 4 * frame * 8 * 1e9 / 25e6
    s = rtt / 10_000
    assert p.line_rate_bps == 25_000_000
    assert p.min_time_between_cnps_ns == int(50 * US * s)  # 27 ms: a few RTTs
    assert p.rpg_time_reset_ns == int(300 * US * s)
    # the byte counter by the BDP ratio: about a frame (32767 B x 0.135)
    assert p.rpg_byte_reset == int(32767 * 25e6 * rtt / (100e9 * 10_000))
    assert Dcqcn.scaled(25_000_000, frame, hops=2).rpg_byte_reset == frame  # floor: a frame
    assert p.rpg_ai_rate_bps == pytest.approx(5e6 * 25e6 / 100e9)  # the same share of line
    assert p.rpg_min_rate_bps == pytest.approx(0.01 * 25e6)  # the floor: 1% of the line
    assert p.g == REF.g and p.rpg_threshold == REF.rpg_threshold
    assert Dcqcn.scaled(None, frame).line_rate_bps == 10_000_000_000  # unshaped: nominal


# -- the notification point ---------------------------------------------------------------


def test_the_np_sends_at_most_one_cnp_per_qp_per_interval():
    np = NotificationPoint()  # 50 µs, the paper's N
    assert np.on_ce(1, 0)
    assert not np.on_ce(1, 10 * US)
    assert np.on_ce(2, 10 * US)  # another QP has its own clock
    assert not np.on_ce(1, 50 * US - 1)
    assert np.on_ce(1, 50 * US)
    marks = [np.on_ce(3, t * US) for t in range(0, 1000)]  # a mark every µs for 1 ms
    assert sum(marks) == 20
    assert np.ce_packets == 1005 and np.cnps == 23
    np.forget(1)
    assert np.on_ce(1, 50 * US + 1)


# -- the CNP on the wire -----------------------------------------------------------------


def test_the_cnp_is_a_connectx_cnp_byte_for_byte():
    body = W.encode_cnp(0x118)
    assert body == CONNECTX_CNP[28:-4]  # BTH 0x81, BECN, DestQP, 16 reserved bytes
    assert W.icrc(CONNECTX_CNP[:28], body) == CONNECTX_CNP[-4:]
    assert W.CNP_SIZE == 32 and len(body) + 4 == W.CNP_SIZE


def test_a_cnp_round_trips_and_carries_the_reference_icrc():
    pkt = W.frame("fd00::1", "fcbb:bb00:100::", 0x1234, "fd00::1", "fd00::2",
                  W.Cnp(0xABCDE).encode())
    assert reference_icrc(pkt[W.IP6.size:]) == pkt[-4:]
    got = W.decode_frame(pkt)
    assert got == W.Cnp(0xABCDE, becn=True)
    roce = bytearray(pkt[W.HEADROOM:])
    with pytest.raises(W.BadPacket) as e:
        W.decode_checked(bytes(roce[:-5]) + bytes(roce[-4:]), W.CNP)
    assert e.value.reason == "short"
    with pytest.raises(ValueError):
        W.encode_cnp(1 << 24)


# -- the pacer -----------------------------------------------------------------------------


def paced_sender(rate_bps: int, size: int, **cfg) -> tuple[Sender, memoryview]:
    sender = Sender(EvSet([0, 1], 2, size=16, seed=1), 0,
                    SenderConfig(mode="single-path", cc="dcqcn", line_rate_bps=rate_bps, **cfg))
    src = memoryview(bytes(size))
    sender.post(size)
    return sender, src


def test_the_pacer_holds_a_sender_to_its_rate():
    rate = 25_000_000
    sender, src = paced_sender(rate, 1 << 20)  # 256 packets: all within the window
    assert sender.window == sender.cfg.max_window  # the window is a fixed in-flight cap
    frame = sender.cfg.mtu + FRAME_OVERHEAD
    sent = 0
    t = 0
    while True:
        out = sender.poll(t, src)
        sent += len(out) * frame
        assert sent <= rate * t / 8e9 + 2 * frame  # never ahead of the rate (a frame's burst)
        if sent >= (1 << 20):
            break
        nxt = sender.next_send_ns(t)
        assert nxt is not None and (out or nxt > t)
        if nxt > t:
            assert not sender.wants_to_send(t)  # the loop sleeps until nxt
        t = max(nxt, t + 1)
        assert t < 10**10  # bounded
    elapsed = t / 1e9
    assert sent * 8 / elapsed == pytest.approx(rate, rel=0.02)


def test_a_cnp_halves_the_pace_and_fast_recovery_brings_it_back():
    rate = 25_000_000
    sender, src = paced_sender(rate, 4 << 20, max_window=4096)
    frame = sender.cfg.mtu + FRAME_OVERHEAD
    frame_ns = frame * 8e9 / rate

    def sends(t0: int, span: int) -> list[int]:
        at, t = [], t0
        while t < t0 + span:
            at += [t] * len(sender.poll(t, src))
            t = max(sender.next_send_ns(t), t + 1)
        return at

    before = sends(0, 200 * MS)
    assert len(before) * frame * 8 / 0.2 == pytest.approx(rate, rel=0.05)
    sender.on_cnp(200 * MS)
    assert sender.rp.cuts == 1 and sender.rp.rate_bps == rate / 2
    after = sends(200 * MS, 40 * MS)
    gaps = [b - a for a, b in zip(after, after[1:], strict=False)]
    assert gaps[0] == pytest.approx(2 * frame_ns, rel=0.05)  # half the rate
    # the byte counter (about a frame, scaled) steps fast recovery: each gap shorter
    assert gaps[-1] < 1.1 * frame_ns and sender.rp.increases["fast_recovery"] >= 5
    assert all(b <= a * 1.01 for a, b in zip(gaps, gaps[1:], strict=False))


def test_cc_is_registered_in_one_place_and_checked():
    assert set(CC.Cc) >= {"nscc", "dcqcn"}
    assert CC.default_for("single-path") == "dcqcn" and CC.default_for("mrc") == "nscc"
    with pytest.raises(ValueError, match="unknown congestion control"):
        Sender(EvSet([0], 1, size=4), 0, SenderConfig(cc="bbr"))
    s = Sender(EvSet([0], 1, size=4), 0, SenderConfig(mode="mrc"))
    assert s.pacer is None and s.next_send_ns(0) is None
    s.on_cnp(0)
    assert s.cnps_ignored == 1


def test_the_pacers_bucket_is_two_frames_at_least_and_fills_at_the_rate():
    rp = ReactionPoint(Dcqcn(line_rate_bps=8_000_000))  # 1 byte per µs
    pacer = Pacer(rp, 1000)
    assert pacer.allowance(0) == 1
    pacer.consume(1000, 0)
    assert pacer.allowance(999 * US) == 0
    assert pacer.next_send_ns(999 * US) == 1000 * US + 1
    assert pacer.allowance(1000 * US) == 1
    assert pacer.allowance(10 * MS) == 2  # BURST_NS (2 ms) of tokens: two frames deep
    pacer.cap_bps = 4_000_000  # the QP's share of its port: half the rate
    pacer.consume(2000, 10 * MS)
    assert pacer.next_send_ns(10 * MS) == 12 * MS + 1


# -- a bottleneck that marks CE ----------------------------------------------------------------


def run_through_bottleneck(size: int, line_bps: int, path_bps: int, limit_ns: int = 30 * 10**9,
                           seed: int = 3):
    """One single-path dcqcn QP whose port runs at `line_bps` over a path of `path_bps`
    that marks CE above two frames queued; the receiver's NP sends CNPs back. The
    simulation's own driver: a heap of (time, kind, object), the caller's clock."""
    rng = random.Random(seed)
    src = bytes(rng.getrandbits(8) for _ in range(size))
    dst = bytearray(size)
    frame = 4096 + FRAME_OVERHEAD
    params = Dcqcn.scaled(line_bps, frame)

    def place(va, payload):
        dst[va:va + len(payload)] = payload

    fabric = SimFabric(default=PathModel(delay_ns=20 * US, jitter_ns=0, rate_bps=path_bps,
                                         ecn_threshold_bytes=2 * frame), seed=seed)
    sender = Sender(EvSet([0, 1], 2, size=16, seed=seed), 0,
                    SenderConfig(mode="single-path", cc="dcqcn", line_rate_bps=line_bps))
    receiver = Receiver(place)
    np = NotificationPoint(params.min_time_between_cnps_ns)
    sender.post(size, imm=7)
    heap: list = []
    tie = 0
    now = last_timer = 0
    view = memoryview(src)
    while now < limit_ns and not sender.idle and not sender.failed:
        for tx in sender.poll(now, view):
            for at in fabric.arrivals(tx.ev, now, len(tx.payload) + FRAME_OVERHEAD):
                tie += 1
                heapq.heappush(heap, (at, tie, "data", (RxPacket(
                    tx.psn, tx.va, bytes(tx.payload), tx.imm, tx.ev, tx.tries, tx.ack_req),
                    fabric.last_ce)))
        if now - last_timer >= MS:
            sender.on_timer(now)
            last_timer = now
        wake = [now + MS]
        if heap:
            wake.append(heap[0][0])
        nxt = sender.next_send_ns(now)
        if nxt is not None and nxt > now:
            wake.append(nxt)
        now = max(now + 1, min(wake))
        while heap and heap[0][0] <= now:
            _, _, kind, obj = heapq.heappop(heap)
            if kind == "data":
                pkt, ce = obj
                sack = receiver.on_data(pkt) or receiver.flush(pkt)
                back = pkt.ev & PATH_MASK
                if ce and np.on_ce(1, now):
                    for at in fabric.arrivals(back, now):
                        tie += 1
                        heapq.heappush(heap, (at, tie, "cnp", None))
                if sack is not None:
                    for at in fabric.arrivals(back, now):
                        tie += 1
                        heapq.heappush(heap, (at, tie, "sack", sack))
            elif kind == "cnp":
                sender.on_cnp(now)
            else:
                sender.on_sack(obj, now)
    return sender, receiver, np, bytes(dst) == src, now


def test_a_qp_faster_than_its_path_is_cut_to_the_path_by_cnps_and_delivers_every_byte():
    line, path = 50_000_000, 25_000_000
    sender, receiver, np, exact, elapsed = run_through_bottleneck(4 << 20, line, path)
    assert sender.idle and exact
    assert np.cnps > 0 and sender.rp.cnps == np.cnps and sender.rp.cuts > 0
    assert sender.rp.min_rate_seen < path  # cut below the path's rate at least once
    goodput = (4 << 20) * 8 / (elapsed / 1e9)
    assert goodput > 0.5 * path * 4096 / (4096 + FRAME_OVERHEAD)
    assert sender.stats.retransmits == 0  # the simulated queue never drops


def test_a_qp_at_its_paths_rate_sees_no_cnp():
    sender, _, np, exact, _ = run_through_bottleneck(1 << 20, 25_000_000, 25_000_000)
    assert sender.idle and exact and np.cnps == 0 and sender.rp.cuts == 0
