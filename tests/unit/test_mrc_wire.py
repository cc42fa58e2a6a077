"""The MRC wire format: RoCEv2 packets, round trips, edge values, where every field sits,
template == generic encoder, and what the receiver rebuilds from the socket's view."""

from __future__ import annotations

import socket
import struct

import pytest

from twin.mrc import wire as W

NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::2"
A, B = (socket.inet_pton(socket.AF_INET6, a) for a in (NIC_A, NIC_B))
PATH = "fcbb:bb00:100:201:101:302::"
FULL = bytes(range(256)) * 16  # 4096 bytes, every byte value
assert len(FULL) == W.MTU

DATA_CASES = [
    # dest_qp, psn, va, rkey, payload, tries, ack_req, imm
    (0, 0, 0, 0, b"", 0, False, None),
    (0xFFFFFF, 0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, FULL, 127, True, None),
    (0xFFFFFF, 0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, FULL, 127, True, 0xFFFFFFFF),
    (0x12, 0x800000, 0x7F00_0000_1000, 0xBEEF, b"", 0, False, 0),
    (0x12, 1, 0x1000, 3, b"x" * 1001, 1, True, None),
]
EVS = [0, 1, 0x3FFF, 0x40000, 0xFFFFF, 0x100000, 0x12345678, 0xFFFFFFFF]


def on_the_wire(ev: int, body: bytes) -> tuple[bytes, int, int]:
    """(UDP payload, sport, flow label) as the receiver's socket reports a framed packet."""
    pkt = W.frame(NIC_A, PATH, ev, NIC_A, NIC_B, body)
    flow = struct.unpack_from("!I", pkt, W.IP6.size)[0] & W.FLOW_MASK
    return pkt[W.HEADROOM:], struct.unpack_from("!H", pkt, 2 * W.IP6.size)[0], flow


def receive(ev: int, body: bytes) -> W.Packet:
    data, sport, flow = on_the_wire(ev, body)
    return W.decode(data, A, B, sport, flow)


@pytest.mark.parametrize("ev", EVS)
@pytest.mark.parametrize("case", DATA_CASES)
def test_data_round_trip_through_the_headers(case, ev):
    body = W.encode_data(*case)
    overhead = W.DATA_OVERHEAD if case[-1] is None else W.DATA_IMM_OVERHEAD
    assert len(body) + W.ICRC.size == overhead + len(case[4])
    assert receive(ev, body) == W.DataPacket(*case[:5], ev=ev, tries=case[5], ack_req=case[6],
                                             imm=case[7])


def test_data_fields_sit_where_roce_puts_them():
    body = W.encode_data(0xABCDE, 0x123456, 0x1122334455667788, 0xDEADBEEF, b"hello", tries=5,
                         ack_req=True, imm=0x55AA55AA)
    assert body[0] == W.RDMA_WRITE_ONLY_WITH_IMMEDIATE and body[1] == 0
    assert body[2:4] == b"\xff\xff"  # P_Key
    assert body[4] == 0 and body[5:8] == bytes.fromhex("0abcde")  # reserved, DestQP
    assert body[8] == 0x80 | 5 and body[9:12] == bytes.fromhex("123456")  # AckReq|try, PSN
    # RETH: VA, rkey, and a DMA length that is exactly the payload carried
    assert body[12:28] == bytes.fromhex("1122334455667788" "deadbeef" "00000005")
    assert body[28:32] == bytes.fromhex("55aa55aa")  # ImmDt
    assert body[32:] == b"hello"  # nothing of MRC's between the headers and the payload


@pytest.mark.parametrize("imm", [None, 7])
@pytest.mark.parametrize("n", [0, 1, 4095, 4096])
def test_reth_dma_length_is_the_payload_length(n, imm):
    body = W.encode_data(1, 2, 3, 4, bytes(n), imm=imm)
    start = 28 if imm is None else 32
    assert struct.unpack_from("!I", body, 24)[0] == n == len(body) - start


def test_the_transmission_number_lives_in_the_reserved_bth_bits():
    for tries in (0, 1, 2, 127):
        body = W.encode_data(1, 0xABCDEF, 0, 0, b"", tries=tries)
        word = struct.unpack_from("!I", body, 8)[0]
        assert word & 0xFFFFFF == 0xABCDEF and word >> 24 == tries
    assert W.encode_data(1, 0, 0, 0, b"", tries=128)[8] == 0  # modulo 128
    assert W.encode_data(1, 0, 0, 0, b"", ack_req=True)[8] == 0x80


@pytest.mark.parametrize("ev", EVS)
def test_the_ev_rides_the_flow_label_and_the_source_port(ev):
    data, sport, flow = on_the_wire(ev, W.encode_data(1, 2, 3, 4, b"x"))
    assert flow == ev & 0xFFFFF
    assert sport == 0xC000 | ev >> 18 == W.udp_sport(ev)
    assert W.ev_of(flow, sport) == ev


def test_the_source_port_carries_entropy_not_the_path():
    """Item 8: EVs of one path (same plane and T1 in the low 12 bits) spread over ports."""
    from twin.fabric.paths import ev_encode
    ports = {W.udp_sport(ev_encode(0, 0, e)) for e in range(0, 1 << 20, 997)}
    assert len(ports) > 1000


SACKS = [
    W.Sack(0, 0, 0, 0, 0, 0),
    W.Sack(0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0x7F, 0xFF, 0xFFFF, dup=True),
    W.Sack(0x10, 0b1011, 0x1234, 42, 0, 0b1110),
]


@pytest.mark.parametrize("sack", SACKS)
@pytest.mark.parametrize("psn", [0, 0xFFFFFF])
def test_ack_and_nack_round_trip(sack, psn):
    ack = W.Ack(0xFFFFFF, psn, 0xFFFFFF, sack)
    assert len(ack.encode()) + W.ICRC.size == W.ACK_SIZE == 40
    assert receive(0x1234, ack.encode()) == ack
    for code in W.NAK_CODES:
        nack = W.Nack(7, psn, 0, code, sack)
        body = nack.encode()
        assert body[0] == W.ACKNOWLEDGE and body[12] == code
        assert receive(9, body) == nack


def test_sack_layout():
    sack = W.Sack(0x0A0B0C, 0x0102030405060708, 0xCAFEF00D, 0x11, 0, 0x00F0, dup=True)
    body = W.encode_ack(1, 2, 3, sack)
    assert body[8:12] == bytes.fromhex("00000002")  # BTH PSN: the packet that triggered it
    assert body[12:16] == bytes.fromhex("00000003")  # AETH: syndrome 0 (ACK), MSN 3
    assert body[16:] == bytes.fromhex("000a0b0c" "0102030405060708" "cafef00d" "91" "00"
                                      "00f0")


@pytest.mark.parametrize("reply", [False, True])
def test_probe_round_trip(reply):
    probe = W.Probe(0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFF,
                    reply)
    body = probe.encode()
    assert len(body) + W.ICRC.size == W.PROBE_SIZE == 40
    assert body[0] == (W.EV_PROBE_REPLY if reply else W.EV_PROBE)
    assert receive(5, body) == probe


def test_probe_reply_echoes_everything():
    probe = W.Probe(3, 0x100, 77, 123456, 0x200, 0b101)
    reply = receive(0x200, probe.as_reply().encode())
    assert reply.reply and not probe.reply
    assert (reply.ev, reply.probe_id, reply.sent_ns, reply.reverse_ev, reply.port_state) == \
        (0x100, 77, 123456, 0x200, 0b101)


def _every_body() -> list[bytes]:
    return [
        W.encode_data(*DATA_CASES[3]),
        W.encode_data(9, 17, 0x1000, 5, bytes(range(64)), imm=0xABCD),
        W.encode_ack(1, 2, 3, SACKS[2]),
        W.encode_nack(1, 2, 3, W.NAK_TRIMMED, SACKS[2]),
        W.encode_probe(1, 2, 3, 4, 5),
    ]


@pytest.mark.parametrize("index", range(5))
def test_icrc_catches_every_flipped_bit(index):
    """Every bit the ICRC covers: the body, the ICRC itself, and (through the socket's
    view) the inner addresses and the source port."""
    data, sport, flow = on_the_wire(0x5A5A5, _every_body()[index])
    wire = bytearray(data)
    for bit in range(len(wire) * 8):
        if bit // 8 == 4:  # BTH byte 4 (reserved, FECN/BECN) is masked by the ICRC
            continue
        wire[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(W.BadPacket) as e:
            W.decode(bytes(wire), A, B, sport, flow)
        assert e.value.reason == "icrc"
        wire[bit // 8] ^= 1 << (bit % 8)
    W.decode(bytes(wire), A, B, sport, flow)  # and the restored packet is fine again
    for bit in range(128):
        src = bytearray(A)
        src[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(W.BadPacket, match="icrc"):
            W.decode(data, bytes(src), B, sport, flow)
    with pytest.raises(W.BadPacket, match="icrc"):
        W.decode(data, A, B, sport ^ 1, flow)


def test_the_icrc_ignores_what_routers_may_change():
    """Flow label, traffic class, hop limit, BTH byte 4: masked, as RoCEv2 wants."""
    body = bytearray(_every_body()[1])
    data, sport, _ = on_the_wire(0x777, bytes(body))
    assert W.decode(data, A, B, sport, 0x12345).ev == W.ev_of(0x12345, sport)
    marked = bytearray(data)
    marked[4] = 0xC0  # FECN | BECN
    assert W.decode(bytes(marked), A, B, sport, 0x777).psn == 17


def test_the_icrc_is_sent_little_endian():
    body = _every_body()[0]
    pkt = W.frame(NIC_A, PATH, 3, NIC_A, NIC_B, body)
    inner = pkt[W.IP6.size:]
    icrc = W.icrc(inner[:48], body)
    assert pkt[-4:] == icrc == struct.pack("<I", struct.unpack("<I", icrc)[0])
    assert W.icrc(inner[:48], body) != W.icrc(inner[:48], body + b"\0")


@pytest.mark.parametrize("body, reason", [
    (b"", "short"),
    (b"\x0a" * 15, "short"),
    (b"\x0a" + bytes(20), "short"),  # a valid ICRC, but no room for the RETH
    (b"\x0b" + bytes(26), "short"),
    (b"\x11" + bytes(20), "short"),
    (b"\x11" + bytes(60), "length"),
    (b"\xf0" + bytes(10), "short"),
    (b"\x04" + bytes(60), "opcode"),  # RC SEND Only: not MRC
])
def test_malformed_packets_are_rejected(body, reason):
    if len(body) < 12:  # too short to frame with a valid ICRC: the socket's bytes as they are
        with pytest.raises(W.BadPacket) as e:
            W.decode(body, A, B, 0xC000, 0)
    else:
        with pytest.raises(W.BadPacket) as e:
            receive(0, body)
    assert e.value.reason == reason


def test_inconsistent_lengths_and_unknown_syndromes_are_rejected():
    good = bytearray(W.encode_data(1, 2, 3, 4, b"abcd"))
    good[24:28] = b"\x00\x00\x00\x03"  # RETH DMA length 3 while 4 bytes are carried
    with pytest.raises(W.BadPacket, match="length"):
        receive(1, bytes(good))
    ack = bytearray(W.encode_ack(1, 2, 3, SACKS[0]))
    ack[12] = 0x62  # a NAK code MRC does not use
    with pytest.raises(W.BadPacket, match="syndrome"):
        receive(1, bytes(ack))


def test_encoders_refuse_out_of_range_fields():
    with pytest.raises(ValueError, match="PSN"):
        W.encode_data(1, 1 << 24, 0, 0, b"")
    with pytest.raises(ValueError, match="DestQP"):
        W.encode_data(1 << 24, 0, 0, 0, b"")
    with pytest.raises(ValueError, match="4096"):
        W.encode_data(1, 0, 0, 0, bytes(W.MTU + 1))
    with pytest.raises(ValueError, match="out of range"):
        W.encode_data(1, 0, 1 << 64, 0, b"")
    with pytest.raises(ValueError, match="cumulative"):
        W.encode_ack(1, 0, 0, W.Sack(1 << 24, 0, 0, 0))
    with pytest.raises(ValueError, match="MSN"):
        W.encode_ack(1, 0, 1 << 24, SACKS[0])
    with pytest.raises(ValueError, match="NAK code"):
        W.encode_nack(1, 0, 0, 0x62, SACKS[0])
    with pytest.raises(ValueError, match="EV"):
        W.Framer(NIC_A, PATH, NIC_A, NIC_B, 1 << 32)
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 1, 2, 3)
    for bad in ({"psn": 1 << 24}, {"payload": bytes(W.MTU + 1)}, {"va": -1}):
        with pytest.raises(ValueError):
            template.build(**{"psn": 0, "va": 0, "payload": b"", **bad})


@pytest.mark.parametrize("ev", EVS)
@pytest.mark.parametrize("case", DATA_CASES)
def test_template_equals_generic_encoder(ev, case):
    dest_qp, psn, va, rkey, payload, tries, ack_req, imm = case
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, ev, dest_qp, rkey)
    generic = W.frame(NIC_A, PATH, ev, NIC_A, NIC_B, W.encode_data(*case))
    assert template.build(psn, va, payload, tries, ack_req, imm) == generic
    assert template.build(psn, va, payload, tries, ack_req, imm) == generic  # cached headers
    assert template.build(psn, va, memoryview(payload), tries, ack_req, imm) == generic


def test_template_header_cache_follows_the_length_and_stays_bounded():
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 7, 1, 2)
    for n in [4096, 10, 4096, 0, 77, *range(100, 120), 4096]:
        for imm in (None, 5):
            pkt = template.build(1, 0, bytes(n), imm=imm)
            assert pkt == W.frame(NIC_A, PATH, 7, NIC_A, NIC_B,
                                  W.encode_data(1, 1, 0, 2, bytes(n), imm=imm))
    assert len(template._lengths) <= template._CACHE_MAX
    assert len(template._data) <= template._CACHE_MAX


@pytest.mark.parametrize("body", _every_body()[2:])
def test_framer_equals_generic_frame(body):
    framer = W.Framer(NIC_B, PATH, NIC_B, NIC_A, 0xFEDCBA98)
    assert framer.frame(body) == W.frame(NIC_B, PATH, 0xFEDCBA98, NIC_B, NIC_A, body)
    assert framer.frame(body) == framer.frame(body)


@pytest.mark.parametrize("ev", [0, 0x3FFF, 0xABCDE, 0x12345678, 0xFFFFFFFF])
@pytest.mark.parametrize("n", [0, 1, 4096])
def test_frame_headers(ev, n):
    body = W.encode_data(1, 2, 3, 4, bytes(n))
    pkt = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, ev, 1, 4).build(2, 3, bytes(n))
    assert len(pkt) == W.HEADROOM + len(body) + 4 == 88 + 32 + n

    vtcfl, plen, nh, hops = struct.unpack_from("!IHBB", pkt)
    assert vtcfl >> 28 == 6 and (vtcfl >> 20) & 0xFF == W.ECT0 == 0x02  # DSCP 0, ECT(0)
    assert vtcfl & 0xFFFFF == ev & 0xFFFFF
    assert (plen, nh, hops) == (len(pkt) - 40, W.NH_IPV6, 64)
    assert socket.inet_ntop(socket.AF_INET6, pkt[8:24]) == NIC_A
    assert socket.inet_ntop(socket.AF_INET6, pkt[24:40]) == PATH

    inner = pkt[40:]
    vtcfl, plen, nh, hops = struct.unpack_from("!IHBB", inner)
    assert vtcfl >> 28 == 6 and (plen, nh, hops) == (len(inner) - 40, W.NH_UDP, 64)
    assert (vtcfl >> 20) & 0xFF == W.ECT0  # the inner header is ECT(0) too (RFC 6040)
    assert vtcfl & 0xFFFFF == ev & 0xFFFFF  # End.DT6 keeps the inner header as it is
    assert socket.inet_ntop(socket.AF_INET6, inner[8:24]) == NIC_A
    assert socket.inet_ntop(socket.AF_INET6, inner[24:40]) == NIC_B

    sport, dport, length, checksum = struct.unpack_from("!HHHH", pkt, 80)
    assert sport == W.udp_sport(ev) and 0xC000 <= sport <= 0xFFFF
    assert (dport, length, checksum) == (4791, len(pkt) - 80, 0)
    assert pkt[88:-4] == body
    assert W.decode_frame(pkt).ev == ev


def test_frame_takes_packed_addresses_too():
    packed = [socket.inet_pton(socket.AF_INET6, a) for a in (NIC_B, PATH, NIC_B, NIC_A)]
    ack = W.encode_ack(1, 2, 3, SACKS[2])
    assert W.frame(*packed[:2], 9, *packed[2:], ack) == W.frame(NIC_B, PATH, 9, NIC_B, NIC_A, ack)
    with pytest.raises(ValueError, match="16 bytes"):
        W.frame(b"\0" * 4, PATH, 9, NIC_B, NIC_A, ack)


def test_decode_accepts_a_bytearray_and_does_not_copy_the_payload():
    data, sport, flow = on_the_wire(5, W.encode_data(*DATA_CASES[4]))
    pkt = W.decode(bytearray(data), A, B, sport, flow)
    assert pkt == W.decode(data, A, B, sport, flow)
    assert isinstance(pkt.payload, memoryview)


def test_the_largest_frame_is_max_frame():
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 1, 2, 3)
    assert len(template.build(0, 0, FULL, imm=1)) == W.MAX_FRAME == 4220
    assert len(template.build(0, 0, FULL)) == W.MAX_FRAME - 4


def test_flow_label_of_reads_the_ipv6_flowinfo_cmsg():
    cmsg = (socket.IPPROTO_IPV6, W.IPV6_FLOWINFO, struct.pack("!I", 0x0A_12345))
    assert W.flow_label_of([cmsg]) == 0x12345  # traffic class bits dropped
    assert W.flow_label_of([]) == 0  # the kernel omits the cmsg for flow info 0
    assert W.flow_label_of([(socket.SOL_SOCKET, 1, b"\1\2\3\4")]) == 0
