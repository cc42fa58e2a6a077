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
    rq = L.RecvQp(1, 7, None, memoryview(bytearray(0)), rx, random.Random(1))
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
