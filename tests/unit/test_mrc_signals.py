"""Congestion signals at the endpoint (issue 26, endpoint part): ECN marks echoed by the
receiver and acted on by the sender, trimmed packets NAKed and resent at once, and the
window's algorithms (nscc, delay), on the wire and over the simulated fabric (pure)."""

import socket
import struct

import pytest

from twin.mrc import wire as W
from twin.mrc.evset import EvSet, EvState
from twin.mrc.sim import PathModel, SimFabric, run_transfer
from twin.mrc.transport import (
    COMPACT_AFTER,
    QpFailed,
    Receiver,
    RxPacket,
    SackReport,
    Sender,
    SenderConfig,
)

NIC_A, NIC_B, PATH = "fd00::a", "fd00::b", "fcbb:bb00:100:200:300::"
A, B = socket.inet_pton(socket.AF_INET6, NIC_A), socket.inet_pton(socket.AF_INET6, NIC_B)
MiB = 1 << 20

try:
    from twin.mrc.core import compiled  # the module, bound to what its C uses
    fp = compiled()
except ImportError:  # pragma: no cover - the compiled path is built by pip install
    fp = None


def _data_frame(psn=5, payload=b"x" * 100, tries=2, imm=None, ev=0xABCDE123):
    return W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, ev, 7, 0xC0FFEE).build(
        psn, 4096, payload, tries, False, imm)


def _inner(frame: bytes):
    """What the receiving socket sees: (UDP payload, src, dst, sport, flowinfo)."""
    word = W.IP6.unpack_from(frame, W.IP6.size)[0]
    return (frame[W.HEADROOM:], A, B, W.UDP.unpack_from(frame, 80)[0], word & 0x0FFFFFFF)


# --- the wire ---------------------------------------------------------------------------


def test_data_leaves_ect0_and_control_not_ect():
    data = _data_frame()
    assert data[1] >> 4 & 3 == W.ECT0 and data[41] >> 4 & 3 == W.ECT0  # outer, inner ECN
    assert (data[0] & 0xF) == 0 and (data[40] & 0xF) == 0  # DSCP 0 (its top 4 bits)
    assert W.frame(NIC_A, PATH, 1, NIC_A, NIC_B, W.encode_data(7, 5, 0, 1, b"x")) == \
        W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 1, 7, 1).build(5, 0, b"x")
    ack = W.frame(NIC_A, PATH, 1, NIC_A, NIC_B,
                  W.encode_ack(7, 5, 0, W.Sack(0, 0, 1, 0)))
    probe = W.frame(NIC_A, PATH, 1, NIC_A, NIC_B, W.encode_probe(7, 1, 2, 3, 4))
    for ctl in (ack, probe):
        assert struct.unpack_from("!I", ctl)[0] >> 20 & 0xFF == W.NOT_ECT
        assert struct.unpack_from("!I", ctl, 40)[0] >> 20 & 0xFF == W.NOT_ECT


def test_ect0_changes_no_icrc():
    """The ICRC masks the inner traffic class: a CE mark keeps the packet valid."""
    marked = W.mark_ce(_data_frame())
    pkt = W.decode_frame(marked)
    assert isinstance(pkt, W.DataPacket) and pkt.ce and pkt.tc == W.CE
    assert bytes(pkt.payload) == b"x" * 100
    assert not W.decode_frame(_data_frame()).ce


def test_flowinfo_keeps_the_traffic_class():
    cmsg = (socket.IPPROTO_IPV6, W.IPV6_FLOWINFO, struct.pack("!I", 0x0FF12345))
    assert W.flowinfo_of([cmsg]) == 0x0FF12345
    assert W.flowinfo_of([cmsg]) >> W.TC_SHIFT == 0xFF
    assert W.flow_label_of([cmsg]) == 0x12345


@pytest.mark.parametrize("imm", [None, 0xBEEF])
def test_a_trimmed_frame_is_headers_only_and_decodes_without_an_icrc(imm):
    frame = _data_frame(imm=imm)
    cut = W.trim(frame)
    assert len(cut) == 40 + 40 + 8 + 12 + 16 == W.HEADROOM + W.TRIMMED_SIZE
    outer, inner = struct.unpack_from("!I", cut)[0], struct.unpack_from("!I", cut, 40)[0]
    assert outer >> 22 & 0x3F == inner >> 22 & 0x3F == W.TRIM_DSCP
    assert outer >> 20 & 3 == W.ECT0  # ECN kept
    assert struct.unpack_from("!H", cut, 4)[0] == 40 + 8 + 28  # outer payload length
    assert struct.unpack_from("!H", cut, 44)[0] == 8 + 28  # inner payload length
    assert struct.unpack_from("!HH", cut, 84) == (8 + 28, 0)  # UDP length, checksum 0
    pkt = W.decode_frame(cut)
    assert isinstance(pkt, W.Trimmed)
    assert (pkt.dest_qp, pkt.psn, pkt.va, pkt.rkey, pkt.dma_len, pkt.tries) == \
        (7, 5, 4096, 0xC0FFEE, 100, 2)
    assert pkt.ev == 0xABCDE123 and pkt.tc == W.TRIM_DSCP << 2 | W.ECT0
    with pytest.raises(W.BadPacket) as e:  # too short for its BTH and RETH
        W.decode(cut[W.HEADROOM:W.HEADROOM + 20], A, B, W.udp_sport(1), pkt.tc << 20)
    assert e.value.reason == "short"


def test_dscp_7_on_a_control_packet_is_not_a_trim():
    ack = W.frame(NIC_A, PATH, 1, NIC_A, NIC_B, W.encode_ack(7, 5, 0, W.Sack(0, 0, 1, 0)))
    data, src, dst, sport, flow = _inner(ack)
    assert isinstance(W.decode(data, src, dst, sport, flow | W.TRIM_DSCP << 22), W.Ack)


@pytest.mark.skipif(fp is None, reason="the compiled data path is not built")
def test_the_compiled_parse_keeps_the_tc_and_knows_a_trim():
    data, src, dst, sport, flow = _inner(W.mark_ce(_data_frame()))
    c = fp.parse(data, src, dst, sport, flow)
    p = W.decode(data, src, dst, sport, flow)
    assert c[0] == 1 and c[11] == p.tc == W.CE | 0 and c[6] == p.ev
    data, src, dst, sport, flow = _inner(W.trim(_data_frame(imm=3)))
    c = fp.parse(data, src, dst, sport, flow)
    t = W.decode(data, src, dst, sport, flow)
    assert c == (3, t.dest_qp, t.psn, t.va, t.rkey, t.dma_len, t.ev, t.tries, t.opcode, t.tc,
                 src)
    assert fp.parse(data[:20], src, dst, sport, flow) == (0, "short")


# --- the receiver -----------------------------------------------------------------------


def _rx(n=8):
    buf = bytearray(n * 8)
    return Receiver(lambda va, d: buf.__setitem__(slice(va, va + len(d)), d)), buf


def test_a_ce_packet_is_sacked_at_once_and_echoed():
    rx, _ = _rx()
    assert rx.on_data(RxPacket(0, 0, b"a" * 8, None, 0x11, 0)) is None  # every 2nd
    sack = rx.on_data(RxPacket(1, 8, b"b" * 8, None, 0x22, 0, ce=True))
    assert sack is not None and sack.ev == 0x22
    assert sack.congestion == W.CONGESTION_ECHO_CE | 1
    assert rx.stats.ce_marked == 1
    rx.on_data(RxPacket(2, 16, b"c" * 8, None, 0x33, 0))
    sack = rx.on_data(RxPacket(3, 24, b"d" * 8, None, 0x44, 0))
    assert sack.congestion == 0  # the marks were reported: the count starts again


def test_marks_since_the_last_sack_are_counted_and_saturate():
    rx, _ = _rx(200)
    rx.ack_every = 1000
    for _ in range(130):  # marks since the last SACK (duplicates and trims count too)
        rx._mark()
    sack = rx.on_data(RxPacket(0, 0, b"a" * 8, None, 0x11, 0, ce=True))
    assert sack.congestion == W.CONGESTION_ECHO_CE | W.CONGESTION_COUNT


def test_a_trimmed_packet_is_nacked_at_once_and_never_placed():
    rx, buf = _rx()
    rx.on_data(RxPacket(0, 0, b"a" * 8, None, 0x11, 0))
    report, nack = rx.on_trimmed(RxPacket(2, 16, b"", None, 0x55, 3, ce=True))
    assert nack and report.psn == 2 and (report.ev, report.tries) == (0x55, 3)
    assert report.cum == 1 and report.congestion == W.CONGESTION_ECHO_CE | 1
    assert bytes(buf[16:24]) == bytes(8) and rx.stats.bytes == 8
    assert (rx.stats.trimmed, rx.stats.nacks_trimmed, rx.stats.nacks) == (1, 1, 1)
    # a trimmed copy of a PSN already here: no resend wanted, a duplicate's SACK
    report, nack = rx.on_trimmed(RxPacket(0, 0, b"", None, 0x55, 1))
    assert not nack and report.dup and rx.stats.nacks_trimmed == 1


# --- the sender -------------------------------------------------------------------------


def _sender(**cfg):
    evs = EvSet([0, 1], 1, size=8, seed=1)
    sender = Sender(evs, 0, SenderConfig(init_window=8, target_ns=100_000, **cfg))
    sender.post(8 * 4096)
    pkts = sender.poll(0, memoryview(bytes(8 * 4096)))
    return sender, evs, pkts


def _ev(evs, value):
    return next(e for e in evs.active if e.value == value)


def test_an_echoed_mark_skips_its_ev_for_a_rotation():
    sender, evs, pkts = _sender()
    sender.on_sack(SackReport(1, 0, pkts[0].ev, 0, 0, congestion=0x81), 20_000)
    assert _ev(evs, pkts[0].ev).state is EvState.SKIP
    assert evs.skips_by["ecn"] == 1 and evs.skips == 1
    assert (sender.stats.ecn_marks, sender.stats.ecn_echoes) == (1, 1)


def test_with_ecn_off_a_mark_is_counted_not_used():
    sender, evs, pkts = _sender(ecn=False)
    w = sender.window
    sender.on_sack(SackReport(1, 0, pkts[0].ev, 0, 0, congestion=0x81), 20_000)
    assert _ev(evs, pkts[0].ev).state is EvState.GOOD and evs.skips == 0
    assert sender.stats.ecn_marks == 1 and not sender.fabric_marks
    assert sender.window > w  # delay low: the delay rule grew it


def test_a_trim_nack_resends_at_once_on_another_ev_and_retires_nothing():
    sender, evs, pkts = _sender()
    trimmed = pkts[3]
    sender.on_nack(3, 30_000, True, trimmed.ev, 0)
    assert _ev(evs, trimmed.ev).state is EvState.SKIP  # until its rotation is over
    out = sender.poll(30_000, memoryview(bytes(8 * 4096)))
    assert out and out[0].psn == 3 and out[0].ev != trimmed.ev and out[0].tries == 1
    st = sender.stats
    assert (st.nacks_trimmed, st.retransmits) == (1, 1)
    assert st.lost_per_ev + st.lost_rack + st.lost_nack + st.lost_timeout == 0
    assert evs.retirements == 0 and evs.skips_by["trim"] == 1
    assert any(e.kind == "trim" and e.psn == 3 for e in sender.log)


def test_a_forged_or_stale_trim_nack_costs_one_resend_at_most():
    sender, evs, pkts = _sender()
    src = memoryview(bytes(8 * 4096))
    sender.on_nack(2, 1, True, pkts[2].ev, 5)  # names a copy never sent (its number)
    sender.on_nack(2, 1, True, pkts[3].ev, 0)  # names another EV than the copy's
    sender.on_nack(99, 1, True, pkts[2].ev, 0)  # a PSN never sent
    assert sender.poll(1, src) == []
    assert (sender.stats.trims_ignored, sender.stats.acks_unsent) == (2, 1)
    for _ in range(5):  # the same NAK again and again: one resend, then stale
        sender.on_nack(2, 2, True, pkts[2].ev, 0)
    assert [p.psn for p in sender.poll(2, src)] == [2]
    assert sender.stats.nacks_trimmed == 1 and sender.stats.trims_ignored == 6
    assert sender.stats.trims_stale == 6


def _trim_current_copy(sender, psn: int, now: int) -> None:
    tx = sender._txs[psn]
    sender.on_nack(psn, now, True, tx.ev.value, (tx.tries - 1) & 0x7F)


def test_trims_are_not_losses_until_a_psn_reaches_the_trim_limit():
    sender, evs, pkts = _sender()
    src = memoryview(bytes(8 * 4096))
    limit = sender.cfg.trim_limit
    for t in range(1, limit):  # congestion: resent at once, nothing counted as loss
        _trim_current_copy(sender, 2, t)
        assert [p.psn for p in sender.poll(t, src)] == [2]
    assert sender._txs[2].losses == 0 and sender.stats.lost_trim == 0
    _trim_current_copy(sender, 2, limit)  # the limit-th trim of PSN 2: a loss
    assert sender._txs[2].losses == 1 and sender.stats.lost_trim == 1
    assert any(e.kind == "loss" and e.detail == "trim" for e in sender.log)
    assert evs.retirements == 0  # trimmed on many paths, lost on none: no EV blamed
    assert [p.psn for p in sender.poll(limit, src)] == [2]


def test_a_psn_trimmed_for_ever_fails_the_qp_naming_the_trims():
    sender, evs, pkts = _sender()
    src = memoryview(bytes(8 * 4096))
    cfg = sender.cfg
    trims = 0
    with pytest.raises(QpFailed) as failed:
        for t in range(1, 1000):
            trims += 1
            _trim_current_copy(sender, 2, t)
            sender.poll(t, src)
    assert trims == cfg.trim_limit + cfg.loss_limit  # the limit-th trim is loss 1
    assert str(failed.value) == sender.failed == (
        f"PSN 2 lost {cfg.loss_limit + 1} times, trimmed {trims} times (loss limit)")
    assert sender.poll(10_000, src) == []


def test_a_trim_storm_keeps_memory_flat():
    """Trims below the limit, for ever, on one PSN after another: every resend adds an
    entry to the send order and an EV's send order that nothing reads from the front;
    compaction keeps them to O(packets in flight)."""
    sender, evs, pkts = _sender(trim_limit=10**9, loss_limit=10**9)
    src = memoryview(bytes(8 * 4096))
    for t in range(1, 20_001):
        _trim_current_copy(sender, 2 + t % 3, t)
        sender.poll(t, src)
    assert sender.failed is None and sender.stats.nacks_trimmed == 20_000
    entries = len(sender._order) + sum(len(q) for q in sender._per_path.values())
    assert entries <= 2 * (2 * sender._inflight + COMPACT_AFTER) + 8


def test_with_trim_off_a_trim_nack_is_ignored():
    sender, evs, pkts = _sender(trim=False)
    sender.on_nack(3, 30_000, True, pkts[3].ev, 0)
    assert sender.poll(30_000, memoryview(bytes(8 * 4096))) == []
    assert sender.stats.trims_ignored == 1 and sender.stats.nacks_trimmed == 0


def test_single_path_resends_a_trimmed_psn_alone():
    sender, evs, pkts = _sender(mode="single-path")
    sender.on_nack(3, 30_000, True, pkts[3].ev, 0)
    out = sender.poll(30_000, memoryview(bytes(8 * 4096)))
    assert [p.psn for p in out] == [3]  # not go-back-N: the rest are in flight
    assert out[0].ev == pkts[3].ev  # its one EV
    assert evs.skips == 0


def _quadrant(delay_ns, marked, cc="nscc"):
    """The window after one RTT sample of `delay_ns` queueing, marked or not, on a QP
    that has seen the fabric mark before."""
    sender, evs, pkts = _sender(cc=cc)
    sender.on_sack(SackReport(1, 0, pkts[0].ev, 0, 0), 20_000)  # base RTT 20 µs
    sender.fabric_marks = True
    sender.srtt = 20_000
    w = sender.window = 20.0
    sender.on_sack(SackReport(2, 0, pkts[1].ev, 1, 0, congestion=0x81 if marked else 0),
                   20_000 + delay_ns)
    return w, sender.window, sender


def test_nscc_quadrants():
    w, after, _ = _quadrant(10_000, False)  # delay low, no mark: proportional increase
    assert after == pytest.approx(w + 0.9)
    w, after, _ = _quadrant(10_000, True)  # delay low, marked: hold
    assert after == w
    w, after, s = _quadrant(300_000, True)  # delay high, marked: decrease by the excess
    assert after == pytest.approx(w * (1 - min(0.5, 200_000 / 300_000)))
    assert s.stats.window_decreases == 1
    w, after, _ = _quadrant(300_000, False)  # delay high, no mark: a small fair increase
    assert after == pytest.approx(w + 1 / w)
    w, after, _ = _quadrant(300_000, False, cc="delay")  # delay alone: it shrinks
    assert after < w


def test_nscc_before_any_mark_is_delay_based():
    """A fabric that never marks (this kernel without the fabric's marking program)
    must still see the window shrink on delay: nscc waits for a first mark."""
    sender, evs, pkts = _sender()
    sender.on_sack(SackReport(1, 0, pkts[0].ev, 0, 0), 20_000)
    w = sender.window
    sender.on_sack(SackReport(2, 0, pkts[1].ev, 1, 0), 20_000 + 300_000)
    assert sender.window < w and not sender.fabric_marks


def test_quick_adapt_cuts_the_window_to_what_the_last_rtt_acked():
    sender, evs, pkts = _sender()
    sender.window = 40.0
    sender._acked_prev, sender._acked_epoch = 5, 3
    sender.on_nack(6, 50_000, True, pkts[6].ev, 0)
    assert sender.window == 5 and sender.stats.quick_adapts == 1
    sender.on_nack(7, 50_001, True, pkts[7].ev, 0)  # once per RTT
    assert sender.stats.quick_adapts == 1 and sender.stats.nacks_trimmed == 2


def test_the_cc_must_be_known():
    with pytest.raises(ValueError, match="unknown congestion control .cubic.; one of: nscc"):
        Sender(EvSet([0], 1, size=4, seed=1), 0, SenderConfig(cc="cubic"))


# --- over the simulated fabric -----------------------------------------------------------

FAST = 10_000_000_000


def _congested(size=8 * MiB, **signals):
    """Two planes: plane 0's path a 2 Gbit/s link that marks (and maybe trims), plane
    1's a clean 10 Gbit/s one."""
    slow = PathModel(**{"rate_bps": 2_000_000_000, "mark_bytes": 20_000,
                        **signals.pop("path", {})})
    fabric = SimFabric(PathModel(rate_bps=FAST), {(0, 0): slow, (1, 0): PathModel(rate_bps=FAST)})
    cfg = SenderConfig(target_ns=100_000, **signals)
    r = run_transfer(size, fabric, planes=2, t1=1, evs=16, config=cfg, pace_ns=500)
    assert r.ok and r.exact, r.failed
    return r, fabric


def _share(r, plane=0):
    pp = r.sender.stats.per_plane_packets
    return pp.get(plane, 0) / sum(pp.values())


def test_marks_skip_evs_and_the_marked_path_carries_less():
    on, fab = _congested()
    off, _ = _congested(cc="delay", ecn=False)
    assert fab.marks > 0 and on.sender.stats.ecn_marks == fab.marks
    assert on.receiver.stats.ce_marked == fab.marks
    assert on.sender.evs.skips_by["ecn"] > 0 and off.sender.evs.skips_by["ecn"] == 0
    assert _share(on) < _share(off) - 0.05  # the marked plane carries less
    assert _share(on) < 0.45


def test_the_window_backs_off_under_marks_only_in_nscc():
    nscc, _ = _congested()
    delay, _ = _congested(cc="delay")
    assert nscc.sender.stats.window_decreases > 0 and nscc.sender.fabric_marks
    assert delay.sender.stats.window_decreases == 0  # delay alone: no mark-driven decrease
    assert delay.sender.evs.skips_by["ecn"] > 0  # ecn still skips EVs under cc=delay


def test_trims_resend_at_once_without_retiring_evs():
    trim = {"path": {"queue_bytes": 60_000, "trim": True}}
    on, fab = _congested(**trim)
    off, fab_off = _congested(cc="delay", ecn=False, trim=False, **trim)
    assert fab.trims > 0 and on.sender.stats.nacks_trimmed == fab.trims
    assert on.receiver.stats.trimmed == fab.trims == on.receiver.stats.nacks_trimmed
    trimmed_psns = {e.psn for e in on.sender.log if e.kind == "trim"}
    assert trimmed_psns and not any(e.kind in ("loss", "retire") and e.psn in trimmed_psns
                                    for e in on.sender.log)
    # with trim off the same trims are found as losses, and retire EVs
    assert fab_off.trims > 0 and off.sender.stats.nacks_trimmed == 0
    assert off.sender.stats.trims_ignored == fab_off.trims
    st = off.sender.stats
    assert st.lost_per_ev + st.lost_rack + st.lost_timeout >= fab_off.trims
    assert off.sender.evs.retirements > on.sender.evs.retirements


def test_a_trimming_path_without_marking_still_triggers_quick_adapt():
    r, fab = _congested(path={"queue_bytes": 40_000, "trim": True, "mark_bytes": 0})
    assert fab.trims > 0 and fab.marks == 0
    assert r.sender.stats.quick_adapts > 0 and r.sender.evs.skips_by["trim"] > 0
