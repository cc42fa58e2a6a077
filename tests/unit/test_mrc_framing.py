"""MRC over ECMP: the endpoint's udp-entropy framing (twin.mrc.framing, wire.frame_ecmp)
on a routing: bgp fabric, without a lab.

Packets are made by the real encoder and by the real packet loop (PacketLoop with its
sockets replaced by in-memory ones: the kernel's part, routing and delivery, needs a
lab), then read by wire's decoder, by a bit-by-bit ICRC written from the spec
(test_icrc.reference_icrc) and by scapy's RoCE layer.
"""

from __future__ import annotations

import json
import random
import socket
import struct
from pathlib import Path

import pytest

from tests.unit.test_icrc import reference_icrc
from twin.errors import UsageError
from twin.fabric import bgp, paths
from twin.fabric.model import build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.render import endpoint_config
from twin.fabric.spec import load_spec, with_routing
from twin.mrc import framing
from twin.mrc import loop as L
from twin.mrc import wire as W
from twin.mrc.core import load_transport

ROOT = Path(__file__).resolve().parents[2]
A6 = socket.AF_INET6


def plan_of(routing: str):
    spec = load_spec(ROOT / "lab/fabrics/mrc-4p.yml")
    return build_plan(build_fabric(with_routing(spec, routing) if routing == "bgp" else spec))


BGP = plan_of("bgp")
STATIC = plan_of("static-srv6")


def config(plan, host: str) -> dict:
    return json.loads(endpoint_config(plan, host))


def port(host: str, plane: int) -> str:
    return bgp.host_link(BGP.fabric, host, plane).host_address


def scapy_icrc_ok(pkt: bytes) -> bool:
    from scapy.contrib.roce import BTH
    from scapy.layers.inet6 import IPv6
    return IPv6(pkt)[BTH].compute_icrc(None) == pkt[-4:]


# -- the wire --------------------------------------------------------------------------


def test_the_fold_uses_the_evs_own_field_layout():
    assert (W.EV_T1_SHIFT, W.EV_T1_MASK) == (paths.PLANE_BITS, (1 << paths.T1_BITS) - 1)


def test_the_source_port_carries_t1_and_entropy_in_rocev2s_entropy_range():
    rng = random.Random(38)
    evs = [0, 0xFFFFFFFF, *(rng.getrandbits(32) for _ in range(2000))]
    for ev in evs:
        sport = W.udp_sport_ecmp(ev)
        assert 49152 <= sport <= 65535, hex(ev)
        flow = ev & W.FLOW_MASK
        assert W.ev_of_ecmp(flow, sport) == ev, hex(ev)  # the receiver unfolds it
    # one plane, one entropy: every T1 leaves with its own port (the hash's input)
    for entropy in (0, 1, 0xFFFFF, 0x12345):
        ports = {W.udp_sport_ecmp(paths.ev_encode(2, t1, entropy)) for t1 in range(256)}
        assert len(ports) == 256
    # and every top-entropy value too (what srv6 framing's port already carried)
    assert len({W.udp_sport_ecmp(paths.ev_encode(1, 3, e << 6)) for e in range(1 << 14)}) \
        == 1 << 14


def test_a_udp_entropy_data_packet_is_one_rocev2_packet():
    src, dst = port("r0h0", 2), port("r1h1", 2)
    ev = paths.ev_encode(2, 0x41, 0xABCDE)  # T1 bits above the flow label's overlap
    tpl = W.DataTemplate(None, None, src, dst, ev, 0x1234, 0xCAFE)
    payload = bytes(range(256)) * 4
    pkt = tpl.build(0x123456, 0x1000, payload, 3, True, 0xFEED)
    body = W.encode_data(0x1234, 0x123456, 0x1000, 0xCAFE, payload, 3, True, 0xFEED)
    assert pkt == W.frame_ecmp(src, dst, ev, body)  # template == the generic encoder
    word0, plen, nh, hops, s, d = W.IP6.unpack_from(pkt)
    assert (nh, plen, len(pkt)) == (W.NH_UDP, len(pkt) - 40, 40 + 8 + len(body) + 4)
    assert (socket.inet_ntop(A6, s), socket.inet_ntop(A6, d)) == (src, dst)
    assert word0 & W.FLOW_MASK == ev & W.FLOW_MASK
    assert word0 >> W.TC_SHIFT & W.ECN_MASK == W.ECT0
    sport, dport, ulen, csum = W.UDP.unpack_from(pkt, 40)
    assert (sport, dport, ulen, csum) == (W.udp_sport_ecmp(ev), 4791, len(pkt) - 40, 0)
    assert pkt[-4:] == reference_icrc(pkt) and scapy_icrc_ok(pkt)
    got = W.decode_frame(pkt)
    assert got == W.DataPacket(0x1234, 0x123456, 0x1000, 0xCAFE, payload, ev=ev, tries=3,
                               ack_req=True, imm=0xFEED, tc=W.ECT0)
    # the srv6 decoder's EV would be another (the fold is not undone): the mode matters
    udp = pkt[48:]
    assert W.decode(udp, s, d, sport, word0 & 0x0FFFFFFF).ev != ev


def test_control_packets_frame_alike_and_a_framer_equals_frame_ecmp():
    src, dst = port("r1h1", 3), port("r0h0", 3)
    ev = paths.ev_encode(3, 1, 77)
    sack = W.Sack(77, 0b1011, 0x5555, 3, 0, 0b1101, dup=True)
    for body in (W.encode_ack(5, 6, 7, sack), W.encode_probe(1, ev, 3, 4, ev),
                 W.encode_nack(5, 6, 7, W.NAK_TRIMMED, sack), W.encode_cnp(9)):
        pkt = W.Framer(None, None, src, dst, ev).frame(body)
        assert pkt == W.frame_ecmp(src, dst, ev, body)
        assert pkt[-4:] == reference_icrc(pkt) and scapy_icrc_ok(pkt)
        assert W.decode_frame(pkt).encode() == body


# -- endpoint.json --------------------------------------------------------------------


def test_endpoint_config_round_trip_in_bgp_mode():
    for host in ("r0h0", "r1h1"):
        doc = config(BGP, host)
        assert doc["framing"] == "udp-entropy"
        f = framing.parse(doc, BGP.fabric, host)
        want = {p: bgp.host_link(BGP.fabric, host, p).host_address
                for p in BGP.fabric.nic_planes}
        assert f.ecmp and f.own == want
        assert {int(p): a for p, a in doc["port_addresses"].items()} == want
        for peer in BGP.fabric.hosts:  # every peer's, by the same formula
            for p in BGP.fabric.nic_planes:
                a = f.address(peer.name, p)
                assert a == bgp.host_link(BGP.fabric, peer.name, p).host_address
                assert f.hosts[a] == peer.name
        assert f.hosts[doc["nic"]] == host


def test_a_static_endpoint_config_has_no_framing_key_and_parses_to_srv6():
    doc = config(STATIC, "r0h0")
    assert "framing" not in doc and "port_addresses" not in doc
    f = framing.parse(doc, STATIC.fabric, "r0h0")
    assert f.name == "srv6" and not f.ecmp and f.own == {}


@pytest.mark.parametrize("plan, change, match", [
    (STATIC, {"framing": "udp-entropy"},
     r"framing: udp-entropy on a routing: static-srv6 fabric"),
    (BGP, {"framing": "srv6"}, r"framing: srv6 on a routing: bgp fabric"),
    (BGP, {"framing": None}, r"framing: srv6 on a routing: bgp fabric"),  # key dropped
    (STATIC, {"port_addresses": {"0": "fd00:4d52:4c:300::2"}},
     r"port_addresses: only with framing: udp-entropy"),
    (BGP, {"framing": "ecmp"}, r"framing: 'ecmp' is not one of srv6, udp-entropy"),
    (BGP, {"port_addresses": None}, r"port_addresses: missing or not a mapping"),
    (BGP, {"port_addresses": {"0": "fd00:4d52:4c:300::2", "1": "fd00:4d52:4c:1300::2",
                              "2": "fd00:4d52:4c:2300::2"}},
     r"port_addresses: no address for plane 3"),
    (BGP, {"port_addresses": {"0": "fd00:4d52:4c:301::2"}},
     r"port_addresses.0: 'fd00:4d52:4c:301::2' is not r0h0's port address in plane 0"),
    (BGP, {"port_addresses": {"9": "fd00:4d52:4c:300::2"}},
     r"port_addresses.9: not a plane of this NIC"),
])
def test_an_endpoint_config_that_mixes_framings_is_refused(plan, change, match):
    doc = config(plan, "r0h0")
    for key, value in change.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    with pytest.raises(UsageError, match=match):
        framing.parse(doc, plan.fabric, "r0h0")


def test_the_compiled_data_path_is_refused_in_udp_entropy_framing():
    with pytest.raises(UsageError, match=r"compiled, but the compiled data path frames "
                       r"IPv6-in-IPv6 .* udp-entropy"):
        L.load_datapath("compiled", framing.UDP_ENTROPY)
    fast, why = L.load_datapath("auto", framing.UDP_ENTROPY)
    assert fast is None and why == f"python: {L.NO_COMPILED_ECMP}"
    assert L.load_datapath("python", framing.UDP_ENTROPY) == (None, "python: asked for")


# -- the packet loop, its sockets in memory ---------------------------------------------


class Raw:
    """An IPPROTO_RAW socket: what was sent, and to where."""

    def __init__(self):
        self.sent: list[tuple[bytes, str]] = []

    def sendto(self, pkt: bytes, addr) -> int:
        self.sent.append((bytes(pkt), addr[0]))
        return len(pkt)


class Udp:
    """A UDP socket bound to one address: recvmsg as the kernel gives it (headers
    stripped, the flow info as a cmsg, the peer's address and port)."""

    def __init__(self):
        self.queue: list = []

    def deliver(self, pkt: bytes) -> None:
        word0, _, nh, _, src, _ = W.IP6.unpack_from(pkt)
        assert nh == W.NH_UDP  # no decap on a bgp host: what arrives is what was sent
        sport = W.UDP.unpack_from(pkt, 40)[0]
        anc = [(socket.IPPROTO_IPV6, W.IPV6_FLOWINFO,
                struct.pack("!I", word0 & 0x0FFFFFFF))]
        self.queue.append((pkt[48:], anc, 0, (socket.inet_ntop(A6, src), sport, 0, 0)))

    def recvmsg(self, *_):
        if not self.queue:
            raise BlockingIOError
        return self.queue.pop(0)


def in_memory_sockets(lp: L.PacketLoop) -> None:
    """_open_sockets' state, no kernel: a Raw, and a Udp per local address it binds."""
    lp.raw = Raw()
    local = sorted(lp.framing.own.items()) if lp.framing.ecmp else [(None, lp.nic)]
    lp.rx_socks = [(Udp(), socket.inet_pton(A6, a)) for _, a in local]
    lp.udp = lp.rx_socks[0][0]
    lp.tx_batch = lp.rx_ring = None
    lp.datapath = L.load_datapath(None, lp.framing.name)[1]
    lp.core = load_transport("python")
    lp.transport, lp._cores, lp.icrc = lp.core.name, {}, "zlib (python)"
    lp.sel, lp.netlink = None, object()


@pytest.fixture
def loops(monkeypatch):
    monkeypatch.setattr(L.PacketLoop, "_open_sockets", in_memory_sockets)
    monkeypatch.setattr(L.PacketLoop, "_read_ports", lambda self: 0xF)
    monkeypatch.delenv(L.RECORD_ENV, raising=False)
    return lambda plan, host: L.PacketLoop(config(plan, host))


def deliver(frames: list[tuple[bytes, str]], to: L.PacketLoop) -> None:
    """What the fabric does with them (in a lab: the kernel's routes and the T0s, T1s'
    ECMP): each to the socket bound to its destination, which must be `to`'s."""
    by_addr = {socket.inet_ntop(A6, local): sock for sock, local in to.rx_socks}
    for pkt, addr in frames:
        assert socket.inet_ntop(A6, W.IP6.unpack_from(pkt)[5]) == addr  # sent to its DA
        by_addr[addr].deliver(pkt)


def test_a_write_crosses_in_udp_entropy_framing_and_its_sacks_come_back_by_plane(loops):
    a, b = loops(BGP, "r0h0"), loops(BGP, "r1h1")
    assert a.framing.ecmp and a.datapath.startswith("python: the compiled data path frames")
    rq = b.open_recv_qp(64 * 1024, 1, "python")
    sq = a.open_send_qp(b.me, "mrc", 64 * 1024, rq.qpn, rq.rkey, 16, 1, {}, "python")
    b.connect(rq, a.me, sq.qpn)
    a.write(sq, 64 * 1024, 0, 0xFEED)
    data_planes, sack_planes = set(), set()
    for _ in range(200):
        a._send_all()
        for pkt, addr in a.raw.sent:
            ev = W.decode_frame(pkt).ev
            plane = ev & 0xF
            data_planes.add(plane)
            # from my port address in the EV's plane to the peer's, its T1 left to the hash
            assert socket.inet_ntop(A6, W.IP6.unpack_from(pkt)[4]) == port("r0h0", plane)
            assert addr == port("r1h1", plane)
            assert W.UDP.unpack_from(pkt, 40)[0] == W.udp_sport_ecmp(ev)
            assert pkt[-4:] == reference_icrc(pkt)
        for one in a.raw.sent:  # one receive batch each: no SACK coalesced away
            deliver([one], b)
            b._recv_batch()
        a.raw.sent.clear()
        for pkt, addr in b.raw.sent:
            ack = W.decode_frame(pkt)
            assert isinstance(ack, W.Ack) and ack.dest_qp == sq.qpn
            # back the same plane, port address to port address, on a reverse EV
            word0, _, nh, _, src, dst = W.IP6.unpack_from(pkt)
            plane = ack.sack.ev & 0xF
            sack_planes.add(plane)
            rev = W.ev_of_ecmp(word0 & W.FLOW_MASK, W.UDP.unpack_from(pkt, 40)[0])
            assert rev == rq.rev_evs[ack.sack.ev & 0xFFF]  # the reverse EV, unfolded
            assert nh == W.NH_UDP and rev & 0xF == plane
            assert socket.inet_ntop(A6, src) == port("r1h1", plane)
            assert socket.inet_ntop(A6, dst) == addr == port("r0h0", plane)
            assert 49152 <= W.UDP.unpack_from(pkt, 40)[0] <= 65535
        deliver(b.raw.sent, a)
        b.raw.sent.clear()
        a._recv_batch()
        if sq.sender.idle:
            break
    assert sq.sender.idle and not sq.sender.failed
    assert bytes(rq.buf) == bytes(sq.src)  # placed byte for byte, mapped to its QP
    # sprayed over every plane; SACKs (every 2nd packet) went back on more than one
    assert data_planes == {0, 1, 2, 3} and len(sack_planes) > 1
    assert b.drops == {k: 0 for k in b.drops} and a.drops == {k: 0 for k in a.drops}


def test_a_receiver_knows_its_peer_by_a_port_address(loops):
    """A receiving QP not yet connected learns its peer from the data packet's source:
    in udp-entropy that is a port address, and its SACK goes back to the peer's port in
    the data packet's plane."""
    b = loops(BGP, "r1h1")
    rq = b.open_recv_qp(4096, 1, "python")
    ev = paths.ev_encode(1, 1, 5)
    tpl = W.DataTemplate(None, None, port("r0h0", 1), port("r1h1", 1), ev, rq.qpn, rq.rkey)
    deliver([(tpl.build(0, 0, b"x" * 100, ack_req=True), port("r1h1", 1))], b)
    b._recv_batch()
    assert rq.peer_nic == port("r0h0", 1) and bytes(rq.buf[:100]) == b"x" * 100
    (pkt, addr), = b.raw.sent
    assert addr == port("r0h0", 1) and W.decode_frame(pkt).sack.ev == ev


def test_a_static_srv6_loop_still_frames_ipv6_in_ipv6(loops):
    """The same loop on a static-srv6 fabric: the uSID path outside, NIC to NIC inside."""
    a = loops(STATIC, "r0h0")
    b = STATIC.fabric.node("r1h1")
    sq = a.open_send_qp(b, "mrc", 4096, 1, 7, 8, 1, {}, "python")
    a.write(sq, 4096, 0, None)
    a._send_all()
    (pkt, addr), = a.raw.sent
    ev = W.decode_frame(pkt).ev
    assert W.IP6.unpack_from(pkt)[2] == W.NH_IPV6
    assert addr == paths.path_for_ev(STATIC.fabric, a.me, b, ev).address
    assert pkt == W.DataTemplate(a.nic, addr, a.nic, STATIC.nic_address("r1h1"), ev, 1,
                                 7).build(0, 0, bytes(sq.src[:4096]), 0, True)


def test_ev_probes_and_their_replies_travel_port_to_port_in_the_probed_plane(loops):
    a, b = loops(BGP, "r0h0"), loops(BGP, "r1h1")
    rq = b.open_recv_qp(4096, 1, "python")
    sq = a.open_send_qp(b.me, "mrc", 4096, rq.qpn, rq.rkey, 8, 1, {}, "python")
    b.connect(rq, a.me, sq.qpn)
    ev = paths.ev_encode(2, 1, 0x777)  # a retired EV of plane 2, probed
    sq.sender.evs.probe_candidates = lambda n: [type("Slot", (), {"value": ev})()]
    a._probe_retired(L.now_ns())
    (pkt, addr), = a.raw.sent
    probe = W.decode_frame(pkt)
    assert isinstance(probe, W.Probe) and not probe.reply and probe.ev == ev
    assert W.IP6.unpack_from(pkt)[2] == W.NH_UDP and addr == port("r1h1", 2)
    assert socket.inet_ntop(A6, W.IP6.unpack_from(pkt)[4]) == port("r0h0", 2)
    assert pkt[-4:] == reference_icrc(pkt) and scapy_icrc_ok(pkt)
    deliver(a.raw.sent, b)
    b._recv_batch()
    (reply, back), = b.raw.sent
    got = W.decode_frame(reply)
    assert isinstance(got, W.Probe) and got.reply and got.ev == ev
    assert W.IP6.unpack_from(reply)[2] == W.NH_UDP and back == port("r0h0", 2)
    assert socket.inet_ntop(A6, W.IP6.unpack_from(reply)[4]) == port("r1h1", 2)
    deliver(b.raw.sent, a)
    a._recv_batch()
    assert ev not in sq.probes and a.drops["probe_unknown"] == 0  # answered, and known
