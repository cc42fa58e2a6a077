"""The compiled data path (twin.mrc._fastpath) is held to twin.mrc.wire, byte for byte.

- build == DataTemplate.build, for every payload size class, with and without ImmDt;
- parse == wire.decode (the same packet, the same drop reason) over random packets and
  every hostile packet of twin.mrc.fuzz's plan;
- RxRing over a real UDP socket gives what recvmsg + decode give, the peer, the port
  and the flow label included;
- TxBatch sends exactly build's bytes (read back from a raw socket in a namespace of
  the test's own), in order, whether added one by one or posted as a window of the
  transport's TxPackets, and returns the tags of packets the kernel refuses.
"""

from __future__ import annotations

import ctypes.util
import os
import random
import shutil
import socket
import subprocess
import sys
import time

import pytest

from twin import nsenter
from twin.mrc import fuzz, wire
from twin.mrc.loop import load_datapath

fp, why = load_datapath("auto")
pytestmark = pytest.mark.skipif(
    fp is None and shutil.which("gcc") is None, reason=f"no gcc to build it: {why}")

SRC, DST = "fd00:4d52:43::1", "fd00:4d52:43:1::1"
PATH = "fcbb:bb00:100:200:101:302::"


def test_the_compiled_data_path_is_built_where_gcc_is():
    assert fp is not None, f"pip install -e . did not build twin.mrc._fastpath: {why}"


BUILD_AND_PARSE = """
import hashlib, random, sys
sys.path.insert(0, sys.argv[1])
from tests.unit.test_fastpath import _inner, _packets, _word
from twin.mrc import _fastpath as fp
h = hashlib.sha256()
rng = random.Random(4)
for tpl, psn, va, payload, tries, ack, imm in _packets(rng, 300):
    head, seed = tpl.head(len(payload), imm is not None)
    pkt = fp.build(head, seed, _word(psn, tries, ack), va, tpl.rkey, payload, imm)
    data, src, dst, sport, flow = _inner(pkt)
    damaged = bytearray(data)
    damaged[rng.randrange(len(data))] ^= 1
    for d in (data, bytes(damaged)):
        h.update(pkt + repr(fp.parse(d, src, dst, sport, flow)[0]).encode())
print(fp.ICRC, h.hexdigest())
"""


def test_the_icrc_is_the_same_by_isa_l_and_by_zlib():
    """ISA-L (where libisal.so.2 loads) and zlib give the same packets and the same
    verdicts; MRC_TWIN_ICRC=zlib chooses zlib."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    got = {}
    for choice in ("auto", "zlib"):
        env = {**os.environ, "MRC_TWIN_ICRC": choice}
        run = subprocess.run([sys.executable, "-c", BUILD_AND_PARSE, root], env=env,
                             capture_output=True, text=True, timeout=60, check=True)
        impl, digest = run.stdout.rsplit(" ", 1)
        got[choice] = (impl, digest.strip())
    assert got["zlib"][0] == "zlib (MRC_TWIN_ICRC=zlib)"
    assert got["auto"][0] == fp.ICRC
    if ctypes.util.find_library("isal"):
        assert fp.ICRC == "isa-l"
    assert got["auto"][1] == got["zlib"][1]


def _packets(rng: random.Random, n: int):
    """(template, psn, va, payload, tries, ack_req, imm) covering every size class."""
    for _ in range(n):
        tpl = wire.DataTemplate(SRC, PATH, SRC, DST, rng.getrandbits(32), rng.getrandbits(24),
                                rng.getrandbits(32))
        size = rng.choice([0, 1, 7, 100, 4095, 4096, rng.randrange(4097)])
        yield (tpl, rng.getrandbits(24), rng.getrandbits(64), rng.randbytes(size),
               rng.getrandbits(7), rng.random() < 0.5,
               rng.getrandbits(32) if rng.random() < 0.3 else None)


def _word(psn: int, tries: int, ack_req: bool) -> int:
    return (wire.ACK_REQ if ack_req else 0) | tries << 24 | psn


def test_build_is_data_template_build():
    for tpl, psn, va, payload, tries, ack, imm in _packets(random.Random(1), 500):
        head, seed = tpl.head(len(payload), imm is not None)
        assert fp.build(head, seed, _word(psn, tries, ack), va, tpl.rkey, payload, imm) == \
            tpl.build(psn, va, payload, tries, ack, imm)


def test_build_refuses_what_build_refuses():
    tpl = wire.DataTemplate(SRC, PATH, SRC, DST, 1, 2, 3)
    head, seed = tpl.head(4097, False)
    with pytest.raises(ValueError, match="at most 4096"):
        fp.build(head, seed, 0, 0, 3, bytes(4097), None)
    with pytest.raises(ValueError, match="96 bytes"):
        fp.build(head[:95], seed, 0, 0, 3, b"x", None)
    with pytest.raises(ValueError, match="rkey"):
        fp.build(head, seed, 0, 0, 1 << 32, b"x", None)


def _inner(frame: bytes) -> tuple[bytes, bytes, bytes, int, int]:
    """What the receiving socket sees of a frame: (payload, src, dst, sport, flow)."""
    _, _, _, _, src, dst = wire.IP6.unpack_from(frame, wire.IP6.size)
    flow = wire.IP6.unpack_from(frame, wire.IP6.size)[0] & wire.FLOW_MASK
    return frame[wire.HEADROOM:], src, dst, wire.UDP.unpack_from(frame, 80)[0], flow


def _same(c: tuple, data, src: bytes, dst: bytes, sport: int, flow: int) -> None:
    """The compiled parse `c` says what wire.decode says of the same datagram."""
    try:
        p = wire.decode(data, src, dst, sport, flow)
    except wire.BadPacket as e:
        if c[0] == 2:  # handed back whole: wire's decoder judges the rest
            with pytest.raises(wire.BadPacket) as again:
                wire.decode_checked(c[1], c[2])
            assert again.value.reason == e.reason
        else:
            assert c == (0, e.reason)
        return
    if isinstance(p, wire.DataPacket):
        assert c[0] == 1
        assert c[1:5] == (p.dest_qp, p.psn, p.va, p.rkey)
        assert bytes(c[5]) == bytes(p.payload)
        assert c[6:10] == (p.ev, p.tries, p.ack_req, p.imm)
        assert c[10] == src and c[11] == p.tc
    elif isinstance(p, wire.Trimmed):
        assert c == (3, p.dest_qp, p.psn, p.va, p.rkey, p.dma_len, p.ev, p.tries, p.opcode,
                     p.tc, src)
    else:
        assert c[0] == 2 and wire.decode_checked(c[1], c[2]) == p
        assert (c[3], c[4], c[5], c[6]) == (src, sport, flow, len(data))


def test_parse_is_decode_on_valid_and_damaged_packets():
    rng = random.Random(2)
    for tpl, psn, va, payload, tries, ack, imm in _packets(rng, 300):
        data, src, dst, sport, flow = _inner(tpl.build(psn, va, payload, tries, ack, imm))
        _same(fp.parse(data, src, dst, sport, flow), data, src, dst, sport, flow)
        cut = data[:rng.randrange(len(data))]
        _same(fp.parse(cut, src, dst, sport, flow), cut, src, dst, sport, flow)
        flipped = bytearray(data)
        flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        _same(fp.parse(bytes(flipped), src, dst, sport, flow), flipped, src, dst, sport, flow)
    s = wire.Sack(5, 0xF0F0, 0x1234, 3, 0, 0xF, True)
    for body in (wire.encode_ack(7, 9, 5, s), wire.encode_nack(7, 5, 5, 0x60, s),
                 wire.encode_probe(7, 0xABC, 1, 123456789, 0xDEF, 0xF, reply=True)):
        data, src, dst, sport, flow = _inner(wire.frame(SRC, PATH, 0x5A5A5, SRC, DST, body))
        _same(fp.parse(data, src, dst, sport, flow), data, src, dst, sport, flow)


def _target() -> fuzz.Target:
    return fuzz.Target(src=SRC, dst=DST, recv_qpn=3, rkey=0xC0FFEE, size=1024, send_qpn=4,
                       known_qpns=frozenset({3, 4}))


def test_parse_is_decode_on_every_hostile_packet_of_the_fuzz_plan():
    t = _target()
    src, dst = socket.inet_pton(socket.AF_INET6, t.src), socket.inet_pton(socket.AF_INET6,
                                                                          t.dst)
    plan = fuzz.plan(t, per_kind=64)
    for h in plan:
        data = h.payload[:fuzz._RECV_BUF]  # what the socket would hand over
        flow = h.tclass << wire.TC_SHIFT | t.ev & wire.FLOW_MASK
        _same(fp.parse(data, src, dst, t.sport, flow), data, src, dst, t.sport, flow)
    assert {h.kind for h in plan} == set(fuzz.KINDS)


# --- the socket halves: inside a namespace of the test's own ----------------------------------

root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                          reason="needs root and iproute2 for a namespace of its own")


@pytest.fixture
def netns():
    """A namespace with lo up, for this test alone: nothing it sends leaves it."""
    name = f"twin-test-fastpath-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    path = f"/run/netns/{name}"
    try:
        nsenter.run(path, ["ip", "link", "set", "lo", "up"])
        # flow label 0 on what it sends (the ICRC does not cover it; the tests know it)
        nsenter.run(path, ["sysctl", "-qw", "net.ipv6.auto_flowlabels=0"])
        yield path
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@root
def test_rxring_gives_what_recvmsg_and_decode_give(netns):
    t = fuzz.Target(src="::1", dst="::1", recv_qpn=3, rkey=0xC0FFEE, size=1024, send_qpn=4)
    plan = fuzz.plan(t, per_kind=16)
    with nsenter.inside(netns):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with rx, tx:
        wire.allow_zero_udp_checksum(rx)
        wire.receive_flow_labels(rx)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        rx.bind(("::1", wire.ROCE_PORT))
        tx.bind(("::1", t.sport))
        ring = fp.RxRing(rx.fileno(), socket.inet_pton(socket.AF_INET6, "::1"), 16,
                         fuzz._RECV_BUF)
        got: list = []
        deadline = time.monotonic() + 10
        for i in range(0, len(plan), 16):
            for h in plan[i:i + 16]:
                tx.sendto(h.payload, ("::1", wire.ROCE_PORT))
            while len(got) < min(i + 16, len(plan)) and time.monotonic() < deadline:
                # a view into the ring is valid until the next recv: compare it now
                got += [_snapshot(item) for item in ring.recv()]
    assert len(got) == len(plan)
    loop = socket.inet_pton(socket.AF_INET6, "::1")
    for item, h in zip(got, plan, strict=True):
        _same(item, h.payload[:fuzz._RECV_BUF], loop, loop, t.sport, 0)
    datagrams, batches = ring.counters
    assert datagrams == len(plan) and batches <= len(plan)


def _snapshot(item: tuple) -> tuple:
    """A parsed datagram with its view into the ring copied out."""
    if item[0] == 1:
        return (*item[:5], bytes(item[5]), *item[6:])
    if item[0] == 2:
        return (2, bytes(item[1]), *item[2:])
    return item


def _raw_pair(netns):
    """A raw IPPROTO_RAW socket to send with, and one that reads back IPv6-in-IPv6
    packets addressed to this namespace (next header 41), their outer header stripped."""
    with nsenter.inside(netns):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
        rx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, wire.NH_IPV6)
    rx.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: every packet waits
    rx.settimeout(2)
    return tx, rx


@root
def test_txbatch_sends_builds_bytes_in_order(netns):
    tx, rx = _raw_pair(netns)
    q = fp.TxBatch(tx.fileno(), 8)
    rng, sent = random.Random(3), []
    with tx, rx:
        for i, (tpl, psn, va, payload, tries, ack, imm) in enumerate(_packets(rng, 40)):
            tpl = wire.DataTemplate("::1", "::1", SRC, DST, tpl.ev, tpl.dest_qp, tpl.rkey)
            head, seed = tpl.head(len(payload), imm is not None)
            full = q.data(head, seed, _word(psn, tries, ack), va, tpl.rkey, payload, imm, i)
            sent.append(tpl.build(psn, va, payload, tries, ack, imm))
            if full:
                assert q.flush() == []
        assert q.flush() == []
        got = [rx.recv(16384) for _ in sent]
    assert got == [frame[wire.IP6.size:] for frame in sent]
    packets, refused, batches = q.counters
    assert (packets, refused) == (len(sent), 0) and batches == -(-len(sent) // 8)


@root
def test_post_builds_a_window_of_tx_packets_as_build_does(netns):
    """post(): TxPackets and their templates (one made on a miss) in, build's bytes out,
    in order, and the payload counted on each EV's plane."""
    from twin.mrc.transport import TxPacket

    tx, rx = _raw_pair(netns)
    q, rng = fp.TxBatch(tx.fileno(), 16), random.Random(4)
    templates, made, txs, sent, planes = {}, [], [], [], {}
    src = memoryview(rng.randbytes(1 << 16))

    def miss(ev):
        made.append(ev)
        tpl = templates[ev] = wire.DataTemplate("::1", "::1", SRC, DST, ev, 9, 0xC0FFEE)
        return tpl

    for i in range(40):
        ev = rng.choice([0x10, 0x21, 0x32, 0x43]) | rng.getrandbits(20) << 8
        n = rng.choice([4096, 4096, 4096, 100, 1])
        off = rng.randrange(len(src) - n)
        imm = rng.getrandbits(32) if i % 9 == 8 else None
        txs.append(TxPacket(i, ev, 1 << 40 | off, src[off:off + n], i % 3, i % 2 == 0, imm))
    with tx, rx:
        for part in (txs[:25], txs[25:]):  # a window bigger than a batch, then the rest
            assert q.post(part, templates, miss, "qp") == []
        got = [rx.recv(16384) for _ in txs]
    for t in txs:
        frame = templates[t.ev].build(t.psn, t.va, t.payload, t.tries, t.ack_req, t.imm)
        sent.append(frame[wire.IP6.size:])
        planes[t.ev & 0xF] = planes.get(t.ev & 0xF, 0) + len(t.payload)
    assert got == sent
    assert sorted(made) == sorted(set(t.ev for t in txs))  # one template per EV, on a miss
    assert q.plane_bytes == planes


@root
def test_txbatch_returns_the_tags_of_packets_the_kernel_refuses(netns):
    tx, _ = _raw_pair(netns)
    q = fp.TxBatch(tx.fileno(), 4)
    tpl = wire.DataTemplate("::1", "fcbb:bb00:100::", SRC, DST, 1, 2, 3)  # no route here
    head, seed = tpl.head(64, False)
    with tx:
        for tag in ("a", "b", "c"):
            q.data(head, seed, 0, 0, 3, bytes(64), None, tag)
        refused = q.flush()
    assert refused == ["a", "b", "c"] and q.counters[:2] == (0, 3)


def test_txbatch_refuses_a_full_batch_and_bad_arguments():
    q = fp.TxBatch(-1, 1)
    tpl = wire.DataTemplate(SRC, PATH, SRC, DST, 1, 2, 3)
    head, seed = tpl.head(1, False)
    assert q.data(head, seed, 0, 0, 3, b"x", None, None) is True
    with pytest.raises(OverflowError, match="flush"):
        q.data(head, seed, 0, 0, 3, b"x", None, None)
    with pytest.raises(TypeError, match="want"):
        q.data(head, seed, 0, 0, 3, b"x", None)
    assert q.flush() == [None]  # fd -1: the kernel refuses it (EBADF), its tag comes back
    with pytest.raises(ValueError, match="capacity"):
        fp.TxBatch(-1, 0)
