"""The compiled Sender straight into the compiled data path (issue 39), held to the path
it replaces:

- TxBatch.post_sender (the Sender's decisions written as C records, built from the EV's
  template, the payload pointing into the source buffer) sends the same bytes, counts
  the same planes and refuses the same packets as poll + TxBatch.post, for two compiled
  Senders given the same seed and the same inputs (first copies, retransmissions, an
  ImmDt, a template miss, a dcqcn pacer);
- what it refuses (a sender that is not the compiled one, a bad budget, a call from
  inside miss) it refuses before any packet is decided;
- RxRing hands a bound QP's ACKs to its compiled Sender in C: the loop's receive path
  decides, drops (by the same reason: forged, cut, long, bad syndrome, bad ICRC, no such
  QP) and finds QPs done (idle, or failed by QpFailed) as it does through _on_ack, and a
  QP unbound before or during a batch has its ACKs back on that path.
"""

from __future__ import annotations

import random
import socket
from collections import Counter
from types import SimpleNamespace

import pytest

from tests.unit.test_fastpath import DST, SRC, _raw_pair, netns, root  # noqa: F401
from twin import nsenter
from twin.mrc import fuzz, wire
from twin.mrc import loop as L
from twin.mrc import transport as T
from twin.mrc.evset import EvSet
from twin.mrc.loop import load_datapath

fp, why = load_datapath("auto")
pytestmark = pytest.mark.skipif(fp is None or not hasattr(fp, "Sender"),
                                reason=f"the compiled data path is not built: {why}")

SIZE = 1 << 20


def _sender(mode="mrc", cc="nscc", seed="s"):
    cfg = T.SenderConfig(mode=mode, cc=cc, line_rate_bps=10**9 if cc == "dcqcn" else 0)
    s = fp.Sender(EvSet([0, 1, 2, 3], 2, size=16, seed=seed), 0, cfg)
    s.set_local_ports(0xF, 0)
    return s


def _templates():
    made, templates = [], {}

    def miss(ev):
        made.append(ev)
        tpl = templates[ev] = wire.DataTemplate("::1", "::1", SRC, DST, ev, 9, 0xC0FFEE)
        return tpl
    return templates, miss, made


def _drive(send, sender, src):
    """The same inputs for either path: writes (one with an ImmDt, one shorter than a
    packet), polls until the window is full, a SACK of part of it, then the timer long
    after (a tail probe, retransmissions). `send(t)` sends what the sender decides at t;
    returns how many packets it sent."""
    sent = 0
    sender.post(40_000, 0, None, 0)
    sender.post(5_000, 400_000, 0xABCDEF01, 0)
    sender.post(100, SIZE - 100, None, 0)
    t = 1_000
    for _ in range(4):
        sent += send(t)
        t += 1_000
    sender.on_sack(T.SackReport(5, 0b1011, 0, 7, 0), t)
    for _ in range(3):
        sent += send(t)
        t += 1_000
    t += 50_000_000
    try:
        sender.on_timer(t)
    except T.QpFailed:
        pass
    for _ in range(3):
        sent += send(t)
        t += 1_000
    return sent


def _old(q, sender, src, templates, miss):
    def send(t):
        txs = sender.poll(t, src, 64)
        assert q.post(txs, templates, miss, "qp") == []
        return len(txs)
    return send


def _new(q, sender, src, templates, miss):
    def send(t):
        polled, refused = q.post_sender(sender, t, src, 64, templates, miss, "qp")
        assert refused == []
        return polled
    return send


@root
@pytest.mark.parametrize("cc", ["nscc", "dcqcn"])
def test_post_sender_sends_what_poll_and_post_send(netns, cc):  # noqa: F811
    """Two compiled Senders, one seed, the same inputs: the same frames in the same
    order, the same planes counted, the same decisions (stats, window)."""
    src = memoryview(random.Random(7).randbytes(SIZE))
    got, counted, outcomes = [], [], []
    for path in (_old, _new):
        tx, rx = _raw_pair(netns)
        q = fp.TxBatch(tx.fileno(), 16)  # smaller than a poll's budget: two sendmmsgs
        sender = _sender(cc=cc)
        templates, miss, made = _templates()
        with tx, rx:
            n = _drive(path(q, sender, src, templates, miss), sender, src)
            got.append([rx.recv(16384) for _ in range(n)])
        counted.append((q.plane_bytes, q.counters[:2], sorted(made)))
        outcomes.append((sender.stats, sender.window, sender.inflight, sender.cum))
    assert got[0] == got[1] and len(got[0]) > 13
    assert counted[0] == counted[1]
    assert outcomes[0] == outcomes[1]
    assert any(f[40 + 8] == wire.RDMA_WRITE_ONLY_WITH_IMMEDIATE for f in got[1])
    assert outcomes[1][0].retransmits > 0


@root
def test_post_sender_returns_the_tags_of_packets_the_kernel_refuses(netns):  # noqa: F811
    """No route: every packet comes back as the tag, counted refused, no plane bytes."""
    tx, _ = _raw_pair(netns)
    q, sender, src = fp.TxBatch(tx.fileno(), 8), _sender(), memoryview(bytes(SIZE))
    templates = {}

    def miss(ev):
        tpl = templates[ev] = wire.DataTemplate("::1", "fcbb:bb00:100::", SRC, DST, ev, 2, 3)
        return tpl
    sender.post(20 * 4096, 0, None, 0)
    with tx:
        polled, refused = q.post_sender(sender, 1, src, 64, templates, miss, "qp")
    assert polled > 8 and refused == ["qp"] * polled
    assert q.counters[:2] == (0, polled) and q.plane_bytes == {}


def test_post_sender_refuses_what_it_cannot_build_from():
    q, src = fp.TxBatch(-1, 4), memoryview(bytes(SIZE))
    templates, miss, _ = _templates()
    with pytest.raises(TypeError, match="compiled Sender"):
        q.post_sender(T.Sender(EvSet([0], 1, seed=1), 0, T.SenderConfig()), 0, src, 64,
                      templates, miss, None)
    with pytest.raises(TypeError, match="want"):
        q.post_sender(_sender(), 0, src, 64, [], miss, None)
    with pytest.raises(ValueError, match="budget"):
        q.post_sender(_sender(), 0, src, -1, templates, miss, None)
    with pytest.raises(RuntimeError, match="not initialised"):
        q.post_sender(fp.Sender.__new__(fp.Sender), 0, src, 64, templates, miss, None)
    sender = _sender()
    sender.post(8192, 0, None, 0)

    def again(ev):  # a miss that calls back into the batch
        q.post_sender(sender, 0, src, 64, templates, miss, None)
    with pytest.raises(RuntimeError, match="called again"):
        q.post_sender(sender, 0, src, 64, {}, again, None)
    assert q.queued == 0


def test_post_sender_with_nothing_to_send_sends_nothing():
    q, sender, src = fp.TxBatch(-1, 4), _sender(), memoryview(bytes(SIZE))
    templates, miss, made = _templates()
    assert q.post_sender(sender, 0, src, 64, templates, miss, None) == (0, [])
    assert made == [] and q.counters == (0, 0, 0)


# -- ACKs straight into a bound Sender (RxRing.bind_sender) --------------------------------

QPN, NOW = 7, 50_000_000
LOOP6 = socket.inet_pton(socket.AF_INET6, "::1")
TARGET = fuzz.Target(src="::1", dst="::1", recv_qpn=3, rkey=1, size=1024, send_qpn=QPN)


class _Ring:
    """The loop's rx_ring as these tests drive it: every recv at NOW."""

    def __init__(self, ring):
        self.ring, self.items = ring, []

    def recv(self):
        got = self.ring.recv(NOW)
        self.items += [item[0] for item in got]
        return got

    @property
    def received(self):
        return self.ring.received


def _loop(ring, sender):
    """What PacketLoop._recv_ring and its ACK branch use, around one sending QP: the
    loop's own code runs on it; _maybe_done records the QPs it finds idle or failed."""
    qp = SimpleNamespace(qpn=QPN, sender=sender, waiters=[None], done_ns=0)
    lp = SimpleNamespace(rx_ring=_Ring(ring), drops=Counter(), send_qps={QPN: qp},
                         settled=set())

    def unexpected(*_):
        pytest.fail("only ACKs, NAKs and their forgeries here")
    lp._on_data = lp._on_trimmed = lp._on_probe = unexpected
    lp._on_control = lambda pkt: L.PacketLoop._on_control(lp, pkt)
    lp._on_ack = lambda ack: L.PacketLoop._on_ack(lp, ack)
    lp._on_bound = lambda item: L.PacketLoop._on_bound(lp, item)
    lp._on_items = lambda items: L.PacketLoop._on_items(lp, items)
    lp._maybe_done = lambda q: (q.sender.idle or q.sender.failed) and lp.settled.add(
        (q.qpn, q.sender.idle, q.sender.failed is not None))
    return lp


def _sent(loss_limit=32):
    """A compiled Sender with 10 packets in flight, and their EVs."""
    s = fp.Sender(EvSet([0, 1, 2, 3], 2, size=16, seed="s"), 0,
                  T.SenderConfig(loss_limit=loss_limit))
    s.set_local_ports(0xF, 0)
    s.post(10 * 4096, 0, None, 0)
    txs = s.poll(1_000, memoryview(bytes(SIZE)), 64)
    assert len(txs) == 10
    return s, [t.ev for t in txs]


def _ack(cum, bitmap, ev, psn, tries=0, congestion=0, ports=0xF, dup=False, qpn=QPN):
    return wire.encode_ack(qpn, psn, 0, wire.Sack(cum, bitmap, ev, tries, congestion, ports,
                                                  dup))


def _nak(psn, ev):
    return wire.encode_nack(QPN, psn, 0, wire.NAK_PSN_SEQUENCE_ERROR,
                            wire.Sack(psn, 0, ev, 0, 0, 0xF))


TAKEN = 8  # the plan's ACKs a bound Sender takes in C


def _plan(evs) -> list[bytes]:
    """Good ACKs, each field exercised, and every way wire refuses one, sealed."""
    good = _ack(2, 0b1, evs[3], 3)
    bodies = [
        _ack(0, 0b11111110, evs[8], 8),  # 0 and 1 missing, 2..8 in: 0 lost (per EV)
        good,
        _ack(2, 1 << 40, evs[4], 4),  # bits for PSNs never sent: the sender's to judge
        good[:-1], good + b"\0",  # wire's short and length
        good[:12] + b"\x42" + good[13:],  # an AETH syndrome that is neither ACK nor NAK
        _ack(2, 0, evs[2], 2, qpn=QPN + 1),  # no such QP
        _ack(5, 0b10, evs[4], 4, tries=3, congestion=0x81, dup=True),  # dup, CE, tries
        _ack(6, 0, evs[6], 6, ports=0xE),  # a port down there
        _ack(0xFFFFF0, 0, evs[1], 0xFFFFF1),  # cum and PSN far ahead (unwrapped: unsent)
        _ack(10, 0, evs[9], 9),  # all of it: the sender is idle
        _ack(10, 0, evs[9], 9),  # and again
        _nak(5, evs[6]),  # a NAK: Python's (stale by now)
    ]
    out = [fuzz.seal(TARGET, b) for b in bodies]
    bad = bytearray(fuzz.seal(TARGET, _ack(3, 0, evs[3], 3)))
    bad[20] ^= 1  # the ICRC fails
    return out[:6] + [bytes(bad)] + out[6:]


def _through_the_loop(ns, sender, plan, bind=None):
    """Send the plan to a UDP socket and run the loop's receive path over it once, the
    QP's ACKs taken in C where `bind` binds it; the loop as it ran."""
    with nsenter.inside(ns):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with rx, tx:
        wire.allow_zero_udp_checksum(rx)
        wire.receive_flow_labels(rx)
        rx.bind(("::1", wire.ROCE_PORT))
        tx.bind(("::1", TARGET.sport))
        ring = fp.RxRing(rx.fileno(), LOOP6, L.RX_SLOTS, L.RECV_BUF)
        if bind:
            bind(ring)
        for p in plan:
            tx.sendto(p, ("::1", wire.ROCE_PORT))
        lp = _loop(ring, sender)
        assert L.PacketLoop._recv_ring(lp) == len(plan)
        assert ring.recv() == [] and ring.received == 0  # nothing more: none read
        lp.ring = ring
    return lp


def _decided(s) -> tuple:
    return (s.stats, s.cum, s.window, s.inflight, s.idle, s.failed is not None,
            [(e.t_ns, e.kind, e.ev, e.psn, e.detail) for e in s.log])


@root
@pytest.mark.parametrize("loss_limit", [32, 0])
def test_acks_a_bound_sender_takes_decide_and_drop_as_the_loops_on_ack(
        netns, monkeypatch, loss_limit):  # noqa: F811
    """The same ACKs (good, forged, cut, long, a bad syndrome, a bad ICRC, a NAK, to no
    such QP) through the loop's receive path, once as today (the Sender's on_sack from
    _on_ack) and once with the QP bound (on_sack from C): the same decisions, drops and
    QPs found done. loss_limit 0: the first ACK fails the QP (QpFailed, caught)."""
    monkeypatch.setattr(L, "now_ns", lambda: NOW)
    old, evs = _sent(loss_limit)
    new, evs_again = _sent(loss_limit)
    assert evs == evs_again
    plan = _plan(evs)
    before = _through_the_loop(netns, old, plan)
    after = _through_the_loop(netns, new, plan, lambda r: r.bind_sender(QPN, new))
    assert _decided(new) == _decided(old)
    assert after.drops == before.drops == Counter(
        truncated=1, malformed=2, bad_icrc=1, unknown_qp=1)
    assert after.settled == before.settled
    assert (QPN, loss_limit != 0, loss_limit == 0) in after.settled
    assert len(before.rx_ring.items) == len(plan)
    # the bound QP's good ACKs made no item; its end made one (11, qpn)
    assert len(after.rx_ring.items) == len(plan) - TAKEN + 1
    assert after.rx_ring.items.count(11) == 1 and 11 not in before.rx_ring.items
    assert old.failed if loss_limit == 0 else old.idle


@root
def test_an_unbound_qps_acks_take_the_python_path_again(netns, monkeypatch):  # noqa: F811
    """Unbound before the batch: every ACK comes back in recv's list; unbound while its
    Sender takes an ACK (a Python EV set that unbinds it when told of a delivery): the
    ACKs after it in the same batch come back, and are decided as the loop decides."""
    monkeypatch.setattr(L, "now_ns", lambda: NOW)
    plan = _plan(_sent()[1])
    old = _sent()[0]
    ref = _through_the_loop(netns, old, plan)
    s = _sent()[0]

    def bind_unbind(ring):
        ring.bind_sender(QPN, s)
        assert ring.unbind_sender(QPN) is True and ring.unbind_sender(QPN) is False
    lp = _through_the_loop(netns, s, plan, bind_unbind)
    assert _decided(s) == _decided(old) and lp.drops == ref.drops

    class Unbinding(EvSet):
        rx_ring = None

        def delivered(self, ev, sent_ns=-1):
            if self.rx_ring is not None:
                self.rx_ring.unbind_sender(QPN)
                self.rx_ring = None
            return super().delivered(ev, sent_ns)

    def sender(evset):
        s = fp.Sender(evset, 0, T.SenderConfig())
        s.set_local_ports(0xF, 0)
        s.post(10 * 4096, 0, None, 0)
        s.poll(1_000, memoryview(bytes(SIZE)), 64)
        return s
    plain = sender(Unbinding([0, 1, 2, 3], 2, size=16, seed="s"))
    ref = _through_the_loop(netns, plain, plan)
    evs = Unbinding([0, 1, 2, 3], 2, size=16, seed="s")
    s = sender(evs)
    taken = []

    def bind(ring):
        evs.rx_ring = ring
        ring.bind_sender(QPN, s)
        taken.append(ring)
    lp = _through_the_loop(netns, s, plan, bind)
    assert evs.rx_ring is None  # it was unbound by the first ACK
    assert _decided(s) == _decided(plain) and lp.drops == ref.drops


def test_bind_sender_takes_the_compiled_sender_only():
    ring = fp.RxRing(-1, bytes(16))
    with pytest.raises(TypeError, match="compiled Sender"):
        ring.bind_sender(1, T.Sender(EvSet([0], 1, seed=1), 0, T.SenderConfig()))
    with pytest.raises(ValueError, match="24 bits"):
        ring.bind_sender(1 << 24, _sender())
    ring.bind_sender(1, _sender())
    ring.bind_sender(1, _sender())  # again: replaced
    assert ring.unbind_sender(1) is True and ring.unbind_sender(1) is False
    assert ring.unbind_sender(1 << 30) is False
    with pytest.raises(ValueError, match="not negative"):
        ring.recv(-1)


@root
def test_acks_after_a_nak_in_the_same_batch_keep_their_place(netns, monkeypatch):  # noqa: F811
    """A NAK goes in recv's list: the ACKs to its QP after it in the same batch go there
    too, after it, so its Sender sees them in order (taken in C before the NAK, they would
    make it stale); an ACK before it is taken in C."""
    monkeypatch.setattr(L, "now_ns", lambda: NOW)
    old, evs = _sent()
    new, _ = _sent()
    plan = [fuzz.seal(TARGET, b) for b in (_ack(2, 0, evs[2], 2), _nak(5, evs[6]),
                                           _ack(6, 0, evs[6], 6), _ack(10, 0, evs[9], 9))]
    before = _through_the_loop(netns, old, plan)
    after = _through_the_loop(netns, new, plan, lambda r: r.bind_sender(QPN, new))
    assert _decided(new) == _decided(old) and old.stats.nacks_stale == 0
    assert after.rx_ring.items == [2, 2, 2] and after.settled == before.settled


def test_the_loop_sends_and_binds_a_compiled_senders_qp_by_the_c_entries(monkeypatch):
    """A compiled Sender's QP on the compiled data path: bound to the ring when opened,
    its window sent by post_sender (a template miss answered by the loop, a refused
    packet counted), unbound when closed; a reference Sender's QP: poll + post, never
    bound."""
    from tests.unit.test_mrc_framing import STATIC, config, in_memory_sockets

    monkeypatch.setattr(L.PacketLoop, "_open_sockets", in_memory_sockets)
    monkeypatch.setattr(L.PacketLoop, "_read_ports", lambda self: 0xF)
    monkeypatch.delenv(L.RECORD_ENV, raising=False)
    lp = L.PacketLoop(config(STATIC, "r0h0"))
    calls = []

    class Batch:
        def post_sender(self, sender, now, source, budget, templates, miss, qp):
            ev = sender.evs.active[0].value
            assert miss(ev) is templates[ev] and source is qp.src and budget == L.SEND_BUDGET
            calls.append(("post_sender", qp.qpn))
            return 3, [qp]

        def post(self, txs, templates, miss, qp):
            calls.append(("post", qp.qpn))
            return []

    class Ring:
        def bind_sender(self, qpn, sender):
            calls.append(("bind", qpn, type(sender)))

        def unbind_sender(self, qpn):
            calls.append(("unbind", qpn))
            return True

        def unbind(self, qpn):  # a receiving QP's binding (none here)
            return False

    lp.tx_batch, lp.rx_ring, lp._direct_sender = Batch(), Ring(), fp.Sender
    peer = lp.fabric.node("r1h1")
    fast = lp.open_send_qp(peer, "mrc", 1 << 16, 5, 1, 16, 1, {}, "compiled")
    ref = lp.open_send_qp(peer, "mrc", 1 << 16, 6, 1, 16, 1, {}, "python")
    assert fast.direct and not ref.direct
    for qp in (fast, ref):
        lp.write(qp, 1 << 16, 0, None)
    assert lp._send_all() is True
    assert fast.send_errors == 1 and ref.send_errors == 0
    lp.close(fast.qpn)
    lp.close(ref.qpn)
    assert calls == [("bind", fast.qpn, fp.Sender), ("post_sender", fast.qpn),
                     ("post", ref.qpn), ("unbind", fast.qpn)]
