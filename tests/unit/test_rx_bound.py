"""A receiving QP bound to the receive ring (RxRing.bind, loop._bind): its data packets
are checked, placed and acknowledged in C, and Python gets only what it acts on; with
RxRing.acks its SACKs and NAKs are coalesced, framed and sent in C too.

Held to the tuple path (the same datagrams through an unbound ring and loop._on_data,
the same compiled Receiver) on a socketpair, no root needed: the same SACKs (coalesced
the same), NAKs, drops (endpoint and per QP), bytes placed (buffer and per plane),
receiver state and last packet; with RxRing.acks (no fd: the frames handed back), the
very bytes the loop's _send_sack and _send_nack send, in the same order, and ACK and
NAK frames equal to wire's in both framings. The unbound path is unchanged beside a bound QP;
hostile packets (another rkey, a VA outside the buffer or near 2**64, a QP not there, a
bad ICRC, a lying DMA length) are counted as the tuple path counts them and never
placed outside the buffer; a QP closed while its events are in a batch is skipped; bind
and unbind are refused from inside recv. With root, in a namespace of the test's own:
every hostile packet of twin.mrc.fuzz's plan, and CE-marked packets, counted alike.

A socketpair's datagrams come with no address and no cmsg: the ring sees source ::, port
0 and flow 0 (EV 0), and the packets are sealed for that.
"""

from __future__ import annotations

import gc
import random
import socket
from collections import Counter

import pytest

from tests.unit.test_fastpath import netns, root  # noqa: F401
from twin import nsenter
from twin.mrc import fuzz, wire
from twin.mrc import loop as L
from twin.mrc.dcqcn import NotificationPoint

fp, why = L.load_datapath("auto")
pytestmark = pytest.mark.skipif(fp is None, reason=f"no compiled data path: {why}")

LOCAL_TEXT = "fd00:4d52:43:1::1"
LOCAL = socket.inet_pton(socket.AF_INET6, LOCAL_TEXT)
CHUNK = 8  # datagrams per recv: an AF_UNIX socket queues net.unix.max_dgram_qlen (10)
SIZE, RKEY = 64 * 1024, 0xC0FFEE


def datagram(qpn: int, psn: int, va: int, payload: bytes, rkey: int = RKEY, tries: int = 0,
             ack_req: bool = False, imm: int | None = None) -> bytes:
    """A data packet's UDP payload, sealed for source :: port 0 to LOCAL."""
    body = wire.encode_data(qpn, psn & wire.PSN_MASK, va & (1 << 64) - 1, rkey, payload,
                            tries, ack_req, imm)
    return wire.roce("::", LOCAL, 0, body, sport=0)[wire.IP6.size + wire.UDP.size:]


class Rig:
    """A PacketLoop's receive side on a socketpair: its sends caught, not sent."""

    def __init__(self, bind: bool, qpns=(1,), python_qpns=(), frames: bool = False):
        self.tx, rx = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.rx = rx
        self.ring = fp.RxRing(rx.fileno(), LOCAL, CHUNK, L.RECV_BUF)
        lp = self.lp = L.PacketLoop.__new__(L.PacketLoop)
        lp.recv_qps, lp.send_qps = {}, {}
        lp.drops, lp.rx_plane_bytes = Counter(), {0: 0, 1: 0}
        lp._pending_sacks, lp._next_ack = {}, L.NEVER
        lp.rx_ring, lp.port_bitmap, lp.np = self.ring, 0b11, NotificationPoint(0)
        self.sent: list = []
        if frames:  # the loop's own _send_sack, _send_nack, _send_cnp; what they send caught
            lp.raw, lp._peers, lp._reverse = _Capture(self.sent), {}, _reverse
            if bind:
                self.ring.acks(-1, lp._ack_way, L._PATH_MASK)
                self.ring.port_bitmap = lp.port_bitmap  # as PacketLoop.__init__ sets it
        else:
            lp._send_sack = lambda qp, s: self.sent.append(("sack", qp.qpn, s))
            lp._send_nack = lambda qp, psn, ev, code=wire.NAK_PSN_SEQUENCE_ERROR, \
                report=None, cum=None: self.sent.append(
                    ("nack", qp.qpn, psn, ev, code, report,
                     qp.receiver.cum if cum is None else cum))  # the cum it would carry
            lp._send_cnp = lambda qp, ev: self.sent.append(("cnp", qp.qpn, ev))
        for qpn in (*qpns, *python_qpns):
            buf = memoryview(bytearray(SIZE))
            compiled = qpn not in python_qpns
            rx_ = fp.Receiver(buf, port_state=lambda: lp.port_bitmap) if compiled else \
                L.Receiver(L._placer(buf), port_state=lambda: lp.port_bitmap)
            qp = L.RecvQp(qpn, RKEY, None, buf, rx_, random.Random(qpn), peer_nic="fd00::1",
                          transport="compiled" if compiled else "python")
            lp.recv_qps[qpn] = qp
            if bind:
                lp._bind(qp)

    def feed(self, datagrams: list[bytes]) -> int:
        got = 0
        for i in range(0, len(datagrams), CHUNK):
            for d in datagrams[i:i + CHUNK]:
                self.tx.send(d)
            got += self.lp._recv_batch()
        return got

    def close(self):
        self.tx.close()
        self.rx.close()

    def state(self) -> dict:
        out = {"sent": self.sent, "drops": +self.lp.drops,
               "plane": self.lp.rx_bytes_per_plane()}
        for qpn, qp in self.lp.recv_qps.items():
            r = qp.receiver
            self.lp._last(qp)  # what the delayed ACK's timer reads (a bound QP's: the ring's)
            last = qp.last_pkt
            out[qpn] = (bytes(qp.buf), qp.bad_rkey, r.cum, repr(r.stats), list(r.completions),
                        r.owes_ack, last and (last.psn, last.va, last.ev, last.tries,
                                              last.ack_req, last.ce))
        return out


class _Capture:
    """The loop's raw socket: what is sent, kept."""

    def __init__(self, into: list):
        self.into = into

    def sendto(self, data: bytes, addr) -> int:
        self.into.append((bytes(data), socket.inet_pton(socket.AF_INET6, addr[0]), addr[1]))
        return len(data)


def _reverse(qp, ev: int):
    """loop._reverse's shape without a fabric: one reverse EV per path key, drawn from
    the QP's rng the first time, a Framer to a path of its own."""
    key = ev & L._PATH_MASK
    hit = qp.framers.get(key)
    if hit is None:
        rev = key | qp.rng.getrandbits(20) << 12
        path = f"fcbb:bb00:{key:x}::"
        hit = qp.framers[key] = (wire.Framer(LOCAL_TEXT, path, LOCAL_TEXT, qp.peer_nic, rev),
                                 path)
    return hit


def _same(b: dict, t: dict) -> None:
    """b == t, saying where the sends first differ (pytest's diff of them is slow)."""
    for i, (x, y) in enumerate(zip(b["sent"], t["sent"], strict=False)):
        assert x == y, f"send {i} differs:\n{wire.decode_frame(x[0])}\n{wire.decode_frame(y[0])}"
    assert len(b["sent"]) == len(t["sent"])
    assert {k: v for k, v in b.items() if k != "sent"} == \
        {k: v for k, v in t.items() if k != "sent"}


def both(datagrams: list[bytes], **kw) -> tuple[dict, dict, Rig]:
    """The same datagrams through a bound loop and an unbound one."""
    bound, tuples = Rig(True, **kw), Rig(False, **kw)
    try:
        assert bound.feed(datagrams) == tuples.feed(datagrams) == len(datagrams)
        return bound.state(), tuples.state(), bound
    finally:
        bound.close()
        tuples.close()


def a_transfer(rng: random.Random, qpns=(1,), n: int = 400) -> list[bytes]:
    """Packets of a few messages, sprayed: reordered, some lost for a while (NAKs),
    duplicated, with ACK requests and a last packet with ImmDt per message."""
    out = []
    for qpn in qpns:
        pkts = []
        for psn in range(n):
            payload = rng.randbytes(rng.choice((1, 100, 4096)))
            last = psn % 50 == 49
            pkts.append(datagram(qpn, psn, psn * 4096 % (SIZE - 4096), payload,
                                 tries=rng.randrange(3), ack_req=rng.random() < 0.05,
                                 imm=psn if last else None))
        order = sorted(range(n), key=lambda i: i + rng.choice((0, 0, 0, 3, 40, 90)))
        for i in order:
            out.append(pkts[i])
            if rng.random() < 0.05:
                out.append(pkts[i])  # a duplicate
    rng.shuffle(out[:50])
    return out


def test_a_bound_qps_packets_are_placed_acked_and_counted_as_the_tuple_path_does():
    b, t, rig = both(a_transfer(random.Random(39)))
    assert b == t
    assert b[1][2] == 400 and b[1][4]  # every PSN arrived; the messages completed
    kinds = Counter(s[0] for s in b["sent"])
    assert kinds["sack"] > 50 and kinds["nack"] > 0  # the test reaches both
    assert b["plane"][0] > 0 and list(rig.ring.bound) == [1]
    assert rig.ring.plane_bytes == {0: b["plane"][0]}


def test_the_unbound_path_is_unchanged_beside_a_bound_qp():
    """QP 2 has the reference Receiver: never bound, its packets the tuple path's."""
    b, t, rig = both(a_transfer(random.Random(7), qpns=(1, 2), n=200), python_qpns=(2,))
    assert b == t
    assert list(rig.ring.bound) == [1]
    assert b[2][2] == 200


def test_sacks_framed_in_c_are_the_bytes_the_loop_sends_in_the_same_order():
    """RxRing.acks with no fd: each SACK frame handed back, sent by the loop as is;
    the tuple path's _send_sack frames its own. Byte for byte the same, in order."""
    b, t, rig = both(a_transfer(random.Random(5)), frames=True)
    _same(b, t)
    syndromes = Counter(f[88 + 12] for f, *_ in b["sent"] if f[88] == wire.ACKNOWLEDGE)
    assert syndromes[wire.SYNDROME_ACK] > 50 and len(syndromes) == 2  # SACKs and NAKs


def test_ack_frames_are_wires_byte_for_byte_in_both_framings():
    rng = random.Random(11)
    framers = [wire.Framer("fd00::1", "fcbb:bb00:101:202::", "fd00::1", "fd00::2", 0x5A5A5),
               wire.Framer(None, None, "fd00:1:2::1", "fd00:1:3::1", 0xABCDE123)]  # ecmp
    for framer in framers:
        head, seed = framer.headers(wire.ACK_SIZE)
        for _ in range(200):
            dest_qp, psn, cum = rng.randrange(1 << 24), rng.randrange(1 << 26), \
                rng.randrange(1 << 26)
            bitmap, ev, tries = rng.getrandbits(64), rng.getrandbits(32), rng.randrange(128)
            congestion, ports, dup = rng.randrange(256), rng.randrange(1 << 16), \
                rng.random() < 0.5
            want = framer.frame(wire.encode_ack(dest_qp, psn & 0xFFFFFF, cum & 0xFFFFFF,
                                                wire.Sack(cum & 0xFFFFFF, bitmap, ev, tries,
                                                          congestion, ports, dup)))
            got = fp.ack_frame(head, seed, dest_qp, psn, cum, bitmap, ev, tries, congestion,
                               ports, dup)
            assert got == want
            nak = framer.frame(wire.encode_nack(dest_qp, psn & 0xFFFFFF, psn & 0xFFFFFF,
                                                wire.NAK_PSN_SEQUENCE_ERROR,
                                                wire.Sack(psn & 0xFFFFFF, 0, ev, 0, 0, ports)))
            assert fp.ack_frame(head, seed, dest_qp, psn, psn, 0, ev, 0, 0, ports, False,
                                wire.NAK_PSN_SEQUENCE_ERROR) == nak
        ack = wire.decode_frame(got)
        assert ack.sack.dup == dup and ack.sack.port_state == ports
    with pytest.raises(ValueError):
        fp.ack_frame(bytes(89), 0, 0, 0, 0, 0, 0, 0, 0, 0, False)


HOSTILE = [
    datagram(1, 0, 0, b"x" * 10, rkey=RKEY ^ 1),  # another rkey
    datagram(1, 0, SIZE - 9, b"x" * 10),  # one byte past the end
    datagram(1, 0, SIZE, b"x"),  # at the end
    datagram(1, 0, -1, b"x" * 10),  # VA near 2**64: va + len wraps in C
    datagram(1, 0, (1 << 64) - 4096, b"x" * 4096),
    datagram(99, 0, 0, b"x"),  # no such QP
    datagram(1, 0, 0, b"y" * 8)[:-1] + b"\x00",  # a bad ICRC
    datagram(1, 0, 0, b"z" * 8)[:12],  # truncated
    wire.roce("::", LOCAL, 0, fuzz._with_dma_length(wire.encode_data(1, 0, 0, RKEY, b"w" * 8),
                                                    9), sport=0)[48:],  # a DMA length lies
    datagram(1, 1 << 23, 0, b"far"),  # far ahead of cum: out of the window
]


def test_hostile_packets_are_counted_as_the_tuple_path_counts_them_never_placed():
    good = [datagram(1, 0, 0, b"ok" * 8)]
    b, t, _ = both(HOSTILE + good + HOSTILE)
    assert b == t
    assert b["drops"] == Counter({"bad_rkey": 2, "out_of_bounds": 8, "unknown_qp": 2,
                                  "bad_icrc": 2, "truncated": 2, "malformed": 2})
    buf = b[1][0]
    assert buf[:16] == b"ok" * 8 and not buf[16:].strip(b"\0")  # the rest untouched
    assert b[1][1] == 10  # the QP's own count: rkey and bounds


def test_a_qp_closed_while_its_events_are_in_the_batch_is_skipped():
    rig = Rig(True)
    try:
        for psn in range(4):
            rig.tx.send(datagram(1, psn, psn * 8, b"d" * 8, ack_req=True))
        items = rig.ring.recv()
        assert {i[0] for i in items} == {4}  # the SACKs; nothing else per batch
        assert rig.ring.last(1)[0] == 3  # its last packet, kept for the delayed ACK
        qp = rig.lp.recv_qps.pop(1)
        assert rig.ring.unbind(1) and not rig.ring.unbind(1)
        assert rig.ring.last(1) is None
        for item in items:
            rig.lp._on_bound(item)
        assert rig.sent == [] and qp.last_pkt is None
        assert rig.ring.plane_bytes[0] == 32  # the bytes were placed, and are counted
        rig.tx.send(datagram(1, 4, 0, b"late"))
        assert rig.lp._recv_batch() == 1  # now parsed: no such QP
        assert rig.lp.drops == Counter({"unknown_qp": 1})
    finally:
        rig.close()


def test_bind_and_unbind_are_refused_from_inside_recv():
    """recv may run Python (a GC pass, and the finalizers it runs): bind, unbind and
    recv itself are refused there, and the batch is taken whole."""
    rig = Rig(True)
    seen: list = []

    def during(phase, info):
        if phase != "start":
            return
        for call in (lambda: rig.ring.unbind(1), rig.ring.recv,
                     lambda: rig.ring.bind(1, rig.lp.recv_qps[1].receiver, RKEY)):
            try:
                call()
                seen.append("took")
            except RuntimeError:
                seen.append("refused")

    threshold = gc.get_threshold()
    recv = rig.ring.recv  # nothing allocated between the threshold and the call
    try:
        for psn in range(CHUNK):
            rig.tx.send(datagram(1, psn, psn * 8, b"d" * 8, imm=psn))
        gc.callbacks.append(during)
        gc.set_threshold(1)
        try:
            items = recv()
        finally:
            gc.callbacks.remove(during)
            gc.set_threshold(*threshold)
        assert seen and set(seen) == {"refused"}
        assert list(rig.ring.bound) == [1]
        assert sum(1 for i in items if i[0] == 4) == CHUNK  # each ImmDt: a SACK now
        assert rig.lp.recv_qps[1].receiver.cum == CHUNK
    finally:
        rig.close()


def test_bind_takes_only_a_compiled_receiver_that_copies_into_its_buffer():
    rig = Rig(False)
    try:
        with pytest.raises(TypeError):
            rig.ring.bind(1, L.Receiver(lambda va, p: None), RKEY)
        with pytest.raises(TypeError):
            rig.ring.bind(1, fp.Receiver(lambda va, p: None), RKEY)
        with pytest.raises(RuntimeError):
            rig.ring.bind(1, fp.Receiver.__new__(fp.Receiver), RKEY)
        with pytest.raises(ValueError):
            rig.ring.bind(1 << 24, rig.lp.recv_qps[1].receiver, RKEY)
        assert rig.ring.bound == {}
    finally:
        rig.close()


# -- with root: real UDP in a namespace of the test's own ---------------------------------

# root and netns: test_fastpath's (a namespace of the test's own, lo up, flow labels 0)


def _udp_rig(netns, bind: bool, t: fuzz.Target) -> tuple[Rig, socket.socket]:  # noqa: F811
    rig = Rig(bind, qpns=(t.recv_qpn,))
    rig.close()  # its socketpair: replaced by UDP on ::1 in the namespace
    with nsenter.inside(netns):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    wire.allow_zero_udp_checksum(rx)
    wire.receive_flow_labels(rx)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.bind(("::1", wire.ROCE_PORT))
    rx.setblocking(False)
    tx.bind(("::1", t.sport))
    rig.rx, rig.tx = rx, tx
    rig.ring = rig.lp.rx_ring = fp.RxRing(rx.fileno(), socket.inet_pton(socket.AF_INET6, "::1"),
                                          64, fuzz._RECV_BUF)
    for qp in rig.lp.recv_qps.values():
        qp.buf[:] = bytes(len(qp.buf))
        if bind:
            rig.lp._bind(qp)
    return rig, rx


@root
def test_every_hostile_packet_of_the_fuzz_plan_and_ce_marks_are_counted_alike(netns):  # noqa: F811
    """Both rigs in turn get the fuzz plan's packets (ICRC over ::1, the plan's sport)
    and data packets sent CE-marked."""
    states = []
    for bind in (True, False):
        t = fuzz.Target(src="::1", dst="::1", recv_qpn=3, rkey=RKEY, size=1024, send_qpn=4)
        plan = fuzz.plan(t, per_kind=8)
        ce = [fuzz.Hostile("ce", "accepted", fuzz.seal(t, wire.encode_data(
            3, 100 + i, i * 8, RKEY, b"c" * 8, ack_req=i == 3)), wire.CE) for i in range(6)]
        rig, rx = _udp_rig(netns, bind, t)
        try:
            for h in plan + ce:
                rig.tx.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, h.tclass)
                rig.tx.sendto(h.payload, ("::1", wire.ROCE_PORT))
            got, deadline = 0, 200
            while got < len(plan) + len(ce) and deadline:
                got += rig.lp._recv_batch()
                deadline -= 1
            assert got == len(plan) + len(ce)
            st = rig.state()
            states.append((st, rig.lp.np.ce_packets))
        finally:
            rig.close()
    (b, b_ce), (t_, t_ce) = states
    if (b["drops"], b[3][:4]) != (t_["drops"], t_[3][:4]):
        pytest.fail(f"bound {b['drops']} {b[3][1:4]}\ntuple {t_['drops']} {t_[3][1:4]}")
    assert b_ce == t_ce == 6
    assert [s[:2] for s in b["sent"]] == [s[:2] for s in t_["sent"]]
    assert any(s[0] == "cnp" for s in b["sent"])


def _local_reverse(qp, ev: int):
    """_reverse's shape, every way back to ::1 (the namespace reads them back)."""
    key = ev & L._PATH_MASK
    hit = qp.framers.get(key)
    if hit is None:
        rev = key | qp.rng.getrandbits(20) << 12
        hit = qp.framers[key] = (wire.Framer("::1", "::1", "::1", "fd00::1", rev), "::1")
    return hit


@root
def test_sacks_sent_with_sendmmsg_are_the_tuple_paths_on_every_path(netns):  # noqa: F811
    """Data packets on EVs of several paths (injected whole through a raw socket: their
    flow labels are theirs), so SACKs coalesce with a companion on another path. The
    tuple path's frames (Python: _coalesce, _send_sack), the bound ring's handed back
    (no fd) and the bound ring's sent with sendmmsg on a raw socket (read back from the
    namespace) are the same bytes in the same order; trimmed copies among them (a NAK, or
    a duplicate's SACK) too, in their place."""
    rng = random.Random(3)
    evs = [p | t << 4 | rng.getrandbits(20) << 12 for p in range(4) for t in range(2)]
    pkts = []
    for psn in range(300):
        body = wire.encode_data(1, psn, psn * 1024 % (SIZE - 1024), RKEY, rng.randbytes(1024),
                                ack_req=psn % 97 == 0, imm=psn if psn % 100 == 99 else None)
        at = psn + rng.choice((0, 0, 2, 70))
        whole = wire.roce("::1", "::1", rng.choice(evs), body)
        pkts.append((at, whole))
        if psn % 37 == 5:  # a copy trimmed before it (a NAK) and one after (a dup's SACK)
            pkts += [(at - 0.5, wire.trim(wire.roce("::1", "::1", rng.choice(evs), body))),
                     (at + 3.5, wire.trim(whole))]
    pkts = [p for _, p in sorted(pkts, key=lambda x: x[0])]
    with nsenter.inside(netns):
        inject = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        ack_fd = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        readback = socket.socket(socket.AF_INET6, socket.SOCK_RAW, wire.NH_IPV6)
    readback.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE
    readback.settimeout(2)
    sent = {}
    try:
        for mode in ("tuple", "frames", "sendmmsg"):
            rig = Rig(mode != "tuple", frames=True)
            rig.close()
            with nsenter.inside(netns):
                rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            wire.allow_zero_udp_checksum(rx)
            wire.receive_flow_labels(rx)
            rx.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)
            rx.bind(("::1", wire.ROCE_PORT))
            rig.rx, rig.tx = rx, inject
            lp = rig.lp
            lp._reverse = _local_reverse
            rig.ring = lp.rx_ring = fp.RxRing(rx.fileno(), socket.inet_pton(
                socket.AF_INET6, "::1"), 64, L.RECV_BUF)
            if mode != "tuple":
                rig.ring.acks(ack_fd.fileno() if mode == "sendmmsg" else -1, lp._ack_way,
                              L._PATH_MASK)
                rig.ring.port_bitmap = lp.port_bitmap
                lp._bind(lp.recv_qps[1])
            for p in pkts:
                inject.sendto(p, ("::1", 0))
            got, rounds = 0, 0
            while got < len(pkts) and rounds < 1000:
                got += lp._recv_batch()
                rounds += 1
            rx.close()
            assert got == len(pkts) and lp.recv_qps[1].receiver.cum == 300, mode
            if mode == "sendmmsg":
                frames, n = [], rig.ring.ack_counters[0]
                for _ in range(n):
                    frames.append(readback.recv(4096))
                sent[mode] = frames
                assert rig.sent == [] and n == len(sent["frames"])
            else:
                sent[mode] = [f[wire.IP6.size:] for f, *_ in rig.sent]  # the outer header
    finally:
        inject.close()
        ack_fd.close()
        readback.close()
    assert sent["frames"] == sent["tuple"]
    assert sent["sendmmsg"] == sent["tuple"]
    echoed = {int.from_bytes(f[48 + 28:48 + 32], "big") for f in sent["tuple"]}  # SACK.ev
    assert len({ev & L._PATH_MASK for ev in echoed}) == len(evs)  # every path had SACKs
    syndromes = Counter(f[48 + 12] for f in sent["tuple"])  # AETH
    assert syndromes[wire.NAK_TRIMMED] > 0 and syndromes[0] > 0


# -- RxRing.wait: the loop's sleep, in C while nothing needs Python ----------------------


def _epoll(*socks):
    import select
    ep = select.epoll()
    for s in socks:
        ep.register(s.fileno(), select.EPOLLIN)
    return ep


def test_wait_reads_a_bound_qps_batches_in_c_until_the_delayed_acks_deadline():
    """Two batches' worth of a bound QP's packets (its SACKs framed and sent in C, here
    to a sink that refuses them): read, placed and acknowledged without coming back to
    Python, which is given the datagrams and when the first came, and nothing else."""
    rig = Rig(True, frames=True)
    sink, _peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ep = _epoll(rig.rx)
    try:
        rig.ring.acks(sink.fileno(), rig.lp._ack_way, L._PATH_MASK)
        n = CHUNK + 2
        for psn in range(n):
            rig.tx.send(datagram(1, psn, psn * 8, b"d" * 8))
        items, got, first_ns, other = rig.ring.wait(ep.fileno(), 5 * 10**9, 10**6)
        assert (items, got, other) == ([], n, False)
        assert 0 < first_ns <= L.now_ns()
        assert rig.lp.recv_qps[1].receiver.cum == n and rig.ring.counters == (n, 2)
        assert sum(rig.ring.ack_counters) > 0  # SACKs went out of C (the sink refused them)
        assert rig.ring.last(1)[0] == n - 1  # the delayed ACK's, kept
    finally:
        ep.close()
        sink.close()
        _peer.close()
        rig.close()


def test_wait_comes_back_at_once_for_what_python_acts_on():
    """A SACK to send (no acks set up: Python frames it), another fd ready, or the
    deadline: each ends the wait; with another fd ready the ring is not read."""
    rig = Rig(True)
    other_end, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    ep = _epoll(rig.rx)
    try:
        assert rig.ring.wait(ep.fileno(), 10**6, 10**6) == ([], 0, -1, False)  # deadline
        rig.tx.send(datagram(1, 0, 0, b"d" * 8, ack_req=True))
        items, got, _, was_other = rig.ring.wait(ep.fileno(), 5 * 10**9, 10**9)
        assert got == 1 and [i[0] for i in items] == [4] and not was_other
        ep.register(other.fileno(), 1)  # select.EPOLLIN
        other_end.send(b"x")
        rig.tx.send(datagram(1, 1, 8, b"d" * 8, ack_req=True))
        items, got, _, was_other = rig.ring.wait(ep.fileno(), 5 * 10**9, 10**9)
        assert (items, got, was_other) == ([], 0, True)
        assert rig.ring.recv() and rig.ring.received == 1  # still there for recv
        with pytest.raises(ValueError):
            rig.ring.wait(ep.fileno(), 0, -1)
    finally:
        ep.close()
        other_end.close()
        other.close()
        rig.close()
