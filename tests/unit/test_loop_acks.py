"""The endpoint loop's delayed ACKs (twin.mrc.loop): a packet left unacknowledged is
acknowledged DELAYED_ACK_NS after its QP's last packet, on a deadline of its own.

Measured before this was so (issue 35): the loop flushed owed ACKs only from its 1 ms
transport timer, so a flight's odd tail waited 1.1 ms (median; up to 8-11 ms) instead
of 200 µs, and the sender took that wait as RTT, and so as reordering: its RACK window
grew to milliseconds and a dead path was found by the 10 ms timer.

The loop here is a PacketLoop without sockets (its scheduling methods only), its
receiving QP the reference Receiver; `_send_sack` is caught instead of sent.
"""

from __future__ import annotations

import random

from twin.mrc import loop as L
from twin.mrc.transport import Receiver, RxPacket


def bare_loop(monkeypatch, t0: int):
    """A PacketLoop's scheduling state, one receiving QP, its SACKs caught."""
    lp = L.PacketLoop.__new__(L.PacketLoop)
    lp.send_qps, lp.recv_qps, lp.netlink = {}, {}, object()
    lp._next_timer = lp._next_probe = t0 + 10 * L.TIMER_NS
    lp._next_ack = L.NEVER
    lp._pending_sacks = {}
    lp.rx_ring = None
    sent: list = []
    monkeypatch.setattr(lp, "_send_sack", lambda qp, sack: sent.append((qp.qpn, sack)),
                        raising=False)
    rx = Receiver(lambda va, payload: None)
    rq = L.RecvQp(1, 7, None, memoryview(bytearray(64)), rx, random.Random(1))
    lp.recv_qps[1] = rq
    return lp, rq, sent


def arrive(lp, rq, psn: int, t: int) -> None:
    """One data packet at `t`, as _on_data takes it (ack_every 2: an odd one is owed)."""
    pkt = RxPacket(psn, psn * 4096, b"x", None, 0x10, 0)
    rq.last_pkt, rq.last_data_ns = pkt, t
    assert rq.receiver.on_data(pkt) is None


def test_an_owed_ack_is_due_delayed_ack_ns_after_the_last_packet(monkeypatch):
    t0 = 1_000_000_000
    lp, rq, sent = bare_loop(monkeypatch, t0)
    arrive(lp, rq, 0, t0)
    monkeypatch.setattr(L, "now_ns", lambda: t0)
    monkeypatch.setattr(lp, "_recv_python", lambda: 1, raising=False)
    assert lp._recv_batch() == 1
    assert lp._next_ack == t0 + L.DELAYED_ACK_NS
    # the loop sleeps until then, not until its 1 ms timer
    assert lp._sleep_s(t0) == L.DELAYED_ACK_NS / 1e9
    lp._delayed_acks(t0 + L.DELAYED_ACK_NS - 1)
    assert sent == [] and lp._next_ack == t0 + L.DELAYED_ACK_NS
    lp._delayed_acks(t0 + L.DELAYED_ACK_NS)
    assert [(q, s.psn, s.cum) for q, s in sent] == [(1, 0, 1)]
    assert not rq.receiver.owes_ack and lp._next_ack == L.NEVER
    assert lp._sleep_s(t0 + L.DELAYED_ACK_NS) is None  # nothing owed, nothing to wait for


def test_a_later_packet_moves_its_qps_deadline_on(monkeypatch):
    t0 = 1_000_000_000
    lp, rq, sent = bare_loop(monkeypatch, t0)
    arrive(lp, rq, 0, t0)
    lp._next_ack = t0 + L.DELAYED_ACK_NS
    rq.receiver.on_data(RxPacket(1, 4096, b"x", None, 0x10, 0))  # acked: nothing owed
    arrive(lp, rq, 2, t0 + 150_000)
    lp._delayed_acks(t0 + L.DELAYED_ACK_NS)
    assert sent == [] and lp._next_ack == t0 + 150_000 + L.DELAYED_ACK_NS
    lp._delayed_acks(lp._next_ack)
    assert [s.psn for _, s in sent] == [2]


def test_the_transport_timer_no_longer_flushes(monkeypatch):
    """Owed ACKs have one owner, _delayed_acks: the 1 ms timer leaves them alone."""
    t0 = 1_000_000_000
    lp, rq, sent = bare_loop(monkeypatch, t0)
    arrive(lp, rq, 0, t0)
    lp._timers(t0 + L.TIMER_NS)
    assert sent == [] and rq.receiver.owes_ack


# -- coalescing: a batch's acknowledgement travels two paths ---------------------------

def batch(monkeypatch, evs: list[int]) -> list:
    """One receive batch of data packets PSN 0, 1, ... on these EVs through _on_data,
    then the batch's flush: the SACKs sent, in order."""
    lp, rq, sent = bare_loop(monkeypatch, 1_000_000_000)
    lp.drops, lp.rx_plane_bytes = {}, {}
    rq.peer_nic = "fd00::1"
    for psn, ev in enumerate(evs):
        lp._on_data(1, psn, psn, 7, b"x", ev, 0, False, None, "fd00::1")
    lp._flush_sacks()
    return [s for _, s in sent]


def test_a_batch_on_one_path_is_acknowledged_once(monkeypatch):
    got = batch(monkeypatch, [0x1_0_0_00, 0x2_0_0_00, 0x3_0_0_00, 0x4_0_0_00])  # p0 t0
    assert [(s.psn, s.cum) for s in got] == [(3, 4)]


def test_a_batch_over_paths_is_acknowledged_on_two_of_them(monkeypatch):
    """The last SACK (it says all), and the last before it that went another way: one
    path dying cannot take the batch's whole acknowledgement."""
    p0t0, p1t0, p2t1 = 0x1000, 0x2001, 0x3012
    got = batch(monkeypatch, [p1t0, p1t0, p2t1, p2t1, p0t0, p0t0])
    assert [(s.psn, s.cum, s.ev) for s in got] == [(3, 4, p2t1), (5, 6, p0t0)]
    # the companion is the last on another path than the last SACK's, not the one before
    got = batch(monkeypatch, [p1t0, p1t0, p2t1, p2t1, p0t0, p0t0, p0t0, p0t0])
    assert [(s.psn, s.ev) for s in got] == [(3, p2t1), (7, p0t0)]
    got = batch(monkeypatch, [p1t0, p1t0, p0t0, p0t0, p1t0, p1t0])
    assert [(s.psn, s.ev) for s in got] == [(3, p0t0), (5, p1t0)]
