"""The MRC wire format: round trips, edge values, ICRC, template == generic, framing fields."""

from __future__ import annotations

import socket
import struct
import zlib

import pytest

from twin.mrc import wire as W

NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::2"
PATH = "fcbb:bb00:100:201:101:302::"
FULL = bytes(range(256)) * 16  # 4096 bytes, every byte value
assert len(FULL) == W.MTU

DATA_CASES = [
    # dest_qp, psn, va, rkey, payload, msn, ev, ts_ns, flags, imm
    (0, 0, 0, 0, b"", 0, 0, 0, 0, None),
    (0xFFFFFF, 0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, FULL, 0xFFFFFFFF, 0xFFFFFFFF,
     0xFFFFFFFFFFFFFFFF, 0xFF, None),
    (0xFFFFFF, 0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, FULL, 0xFFFFFFFF, 0xFFFFFFFF,
     0xFFFFFFFFFFFFFFFF, W.LAST_OF_MESSAGE, 0xFFFFFFFF),
    (0x12, 0x800000, 0x7F00_0000_1000, 0xBEEF, b"", 7, 0x1234_5678, 99, W.LAST_OF_MESSAGE, 0),
    (0x12, 1, 0x1000, 3, b"x" * 1001, 2, 5, 123456789, W.RETRANSMIT | W.ACK_REQUEST, None),
]


def _data(case) -> W.DataPacket:
    return W.DataPacket(*case)


@pytest.mark.parametrize("case", DATA_CASES)
def test_data_round_trip(case):
    pkt = _data(case)
    wire = pkt.encode()
    overhead = W.DATA_OVERHEAD if pkt.imm is None else W.DATA_IMM_OVERHEAD
    assert len(wire) == overhead + len(pkt.payload)
    assert W.decode(wire) == pkt
    assert wire[0] == pkt.opcode


def test_data_fields_sit_where_the_tables_say():
    pkt = W.DataPacket(0xABCDE, 0x123456, 0x1122334455667788, 0xDEADBEEF, b"hello", 9,
                       0xCAFEF00D, 0x0102030405060708, W.LAST_OF_MESSAGE | W.ACK_REQUEST,
                       imm=0x55AA55AA)
    w = pkt.encode()
    assert w[0] == W.RDMA_WRITE_ONLY_WITH_IMMEDIATE and w[1] == 0
    assert w[2:4] == b"\xff\xff"  # P_Key
    assert w[4] == 0 and w[5:8] == bytes.fromhex("0abcde")  # reserved, DestQP
    assert w[8] == 0x80 and w[9:12] == bytes.fromhex("123456")  # AckReq, PSN
    assert w[12:28] == bytes.fromhex("1122334455667788" "deadbeef" "00000005")  # RETH
    assert w[28:32] == bytes.fromhex("55aa55aa")  # ImmDt
    assert w[32:52] == bytes.fromhex("01" "06" "0005" "cafef00d" "00000009"
                                     "0102030405060708")  # MRC extension
    assert w[52:57] == b"hello"
    assert struct.unpack("!I", w[57:]) == (zlib.crc32(w[:57]),)


def test_ack_request_flag_sets_the_bth_ackreq_bit():
    assert W.encode_data(1, 5, 0, 0, b"", 0, 0, 0)[8] == 0
    assert W.encode_data(1, 5, 0, 0, b"", 0, 0, 0, W.ACK_REQUEST)[8] == 0x80


SACKS = [
    W.Sack(0, 0, 0, 0, 0, 0),
    W.Sack(0xFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFF, 0xFFFF),
    W.Sack(0x10, 0b1011, 0x1234, 42, W.CONGESTION_ECN_CE | W.CONGESTION_QUEUE_HIGH, 0b1110),
]


@pytest.mark.parametrize("sack", SACKS)
@pytest.mark.parametrize("psn", [0, 0xFFFFFF])
def test_ack_and_nack_round_trip(sack, psn):
    ack = W.Ack(0xFFFFFF, psn, 0xFFFFFF, sack)
    assert len(ack.encode()) == W.ACK_SIZE == 52
    assert W.decode(ack.encode()) == ack
    for code in W.NAK_CODES:
        nack = W.Nack(7, psn, 0, code, sack)
        wire = nack.encode()
        assert wire[0] == W.ACKNOWLEDGE and wire[12] == code
        assert W.decode(wire) == nack


def test_sack_layout():
    sack = W.Sack(0x0A0B0C, 0x0102030405060708, 0xCAFEF00D, 0x1112131415161718, 0x03, 0x00F0)
    w = W.encode_ack(1, 2, 3, sack)
    assert w[12:16] == bytes.fromhex("00000003")  # AETH: syndrome 0 (ACK), MSN 3
    assert w[16:48] == bytes.fromhex("000a0b0c" "0102030405060708" "cafef00d"
                                     "1112131415161718" "03" "00f0" "00" "00000000")


@pytest.mark.parametrize("reply", [False, True])
def test_probe_round_trip(reply):
    probe = W.Probe(0xFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 0xFFFFFFFF, 0xFFFF,
                    reply)
    wire = probe.encode()
    assert len(wire) == W.PROBE_SIZE == 40
    assert wire[0] == (W.EV_PROBE_REPLY if reply else W.EV_PROBE)
    assert W.decode(wire) == probe


def test_probe_reply_echoes_everything():
    probe = W.Probe(3, 0x100, 77, 123456, 0x200, 0b101)
    reply = W.decode(probe.as_reply().encode())
    assert reply.reply and not probe.reply
    assert (reply.ev, reply.probe_id, reply.sent_ns, reply.reverse_ev, reply.port_state) == \
        (0x100, 77, 123456, 0x200, 0b101)
    assert W.encode_probe(3, 0x100, 77, 123456, 0x200, 0b101, reply=True)[4:-4] == \
        probe.encode()[4:-4]  # same BTH but the opcode, same extension


def _every_packet() -> list[bytes]:
    return [
        _data(DATA_CASES[3]).encode(),
        _data((9, 17, 0x1000, 5, bytes(range(64)), 1, 2, 3, 0, 0xABCD)).encode(),
        W.encode_ack(1, 2, 3, SACKS[2]),
        W.encode_nack(1, 2, 3, W.NAK_TRIMMED, SACKS[2]),
        W.encode_probe(1, 2, 3, 4, 5),
    ]


@pytest.mark.parametrize("index", range(5))
def test_icrc_catches_every_flipped_bit(index):
    wire = bytearray(_every_packet()[index])
    for bit in range(len(wire) * 8):
        wire[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(W.BadPacket) as e:
            W.decode(bytes(wire))
        assert e.value.reason == "icrc"
        wire[bit // 8] ^= 1 << (bit % 8)
    assert W.decode(bytes(wire))  # and the restored packet is fine again


def test_icrc_catches_flipped_bits_in_a_full_mtu_packet():
    wire = bytearray(_data(DATA_CASES[2]).encode())
    for bit in range(0, len(wire) * 8, 7):  # a stride through all of it, ICRC included
        wire[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(W.BadPacket, match="icrc"):
            W.decode(bytes(wire))
        wire[bit // 8] ^= 1 << (bit % 8)


def _with_icrc(body: bytes) -> bytes:
    return body + struct.pack("!I", zlib.crc32(body))


@pytest.mark.parametrize("wire, reason", [
    (b"", "short"),
    (b"\x0a" * 15, "short"),
    (_with_icrc(b"\x0a" + bytes(20)), "short"),  # a valid ICRC but no room for RETH/MRC
    (_with_icrc(b"\x0b" + bytes(50)), "short"),
    (_with_icrc(b"\x11" + bytes(20)), "short"),
    (_with_icrc(b"\x11" + bytes(60)), "length"),
    (_with_icrc(b"\xf0" + bytes(10)), "short"),
    (_with_icrc(b"\x04" + bytes(60)), "opcode"),  # RC SEND Only: not MRC
    (_with_icrc(b"\x0a" + bytes(47)), "version"),
])
def test_malformed_packets_are_rejected(wire, reason):
    with pytest.raises(W.BadPacket) as e:
        W.decode(wire)
    assert e.value.reason == reason


def test_inconsistent_lengths_and_unknown_syndromes_are_rejected():
    good = bytearray(W.encode_data(1, 2, 3, 4, b"abcd", 5, 6, 7))
    good[26:28] = b"\x00\x03"  # RETH DMA length 3 while 4 bytes are carried
    with pytest.raises(W.BadPacket, match="length"):
        W.decode(_with_icrc(bytes(good[:-4])))
    ack = bytearray(W.encode_ack(1, 2, 3, SACKS[0]))
    ack[12] = 0x62  # a NAK code MRC does not use
    with pytest.raises(W.BadPacket, match="syndrome"):
        W.decode(_with_icrc(bytes(ack[:-4])))


def test_encoders_refuse_out_of_range_fields():
    with pytest.raises(ValueError, match="PSN"):
        W.encode_data(1, 1 << 24, 0, 0, b"", 0, 0, 0)
    with pytest.raises(ValueError, match="DestQP"):
        W.encode_data(1 << 24, 0, 0, 0, b"", 0, 0, 0)
    with pytest.raises(ValueError, match="4096"):
        W.encode_data(1, 0, 0, 0, bytes(W.MTU + 1), 0, 0, 0)
    with pytest.raises(ValueError, match="out of range"):
        W.encode_data(1, 0, 0, 0, b"", 0, 1 << 32, 0)
    with pytest.raises(ValueError, match="cumulative"):
        W.encode_ack(1, 0, 0, W.Sack(1 << 24, 0, 0, 0))
    with pytest.raises(ValueError, match="MSN"):
        W.encode_ack(1, 0, 1 << 24, SACKS[0])
    with pytest.raises(ValueError, match="NAK code"):
        W.encode_nack(1, 0, 0, 0x62, SACKS[0])
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 1, 2, 3)
    for bad in ({"psn": 1 << 24}, {"payload": bytes(W.MTU + 1)}, {"msn": -1}):
        args = {"psn": 0, "va": 0, "payload": b"", "msn": 0, "ts_ns": 0, **bad}
        with pytest.raises(ValueError):
            template.build(**args)


def test_timestamps_are_truncated_to_64_bits():
    wire = W.encode_data(1, 2, 3, 4, b"", 5, 6, (1 << 64) + 42)
    assert W.decode(wire).ts_ns == 42


@pytest.mark.parametrize("ev", [0, 1, 0x3FFF, 0x4000, 0xFFFFF, 0x100000, 0xFFFFFFFF])
@pytest.mark.parametrize("case", DATA_CASES)
def test_template_equals_generic_encoder(ev, case):
    dest_qp, psn, va, rkey, payload, msn, _, ts, flags, imm = case
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, ev, dest_qp, rkey)
    generic = W.frame(NIC_A, PATH, ev, NIC_A, NIC_B,
                      W.encode_data(dest_qp, psn, va, rkey, payload, msn, ev, ts, flags, imm))
    assert template.build(psn, va, payload, msn, ts, flags, imm) == generic
    assert template.build(psn, va, payload, msn, ts, flags, imm) == generic  # cached headers


def test_template_header_cache_follows_the_length():
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 7, 1, 2)
    for n in [4096, 10, 4096, 0, 77, *range(100, 120), 4096]:
        for imm in (None, 5):
            pkt = template.build(1, 0, bytes(n), 0, 0, imm=imm)
            assert pkt == W.frame(NIC_A, PATH, 7, NIC_A, NIC_B,
                                  W.encode_data(1, 1, 0, 2, bytes(n), 0, 7, 0, imm=imm))
    assert len(template._headers) <= template._CACHE_MAX


@pytest.mark.parametrize("ev", [0, 0x3FFF, 0xABCDE, 0x12345678, 0xFFFFFFFF])
@pytest.mark.parametrize("n", [0, 1, 4096])
def test_frame_headers(ev, n):
    udp_payload = W.encode_data(1, 2, 3, 4, bytes(n), 5, ev, 6)
    pkt = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, ev, 1, 4).build(2, 3, bytes(n), 5, 6)
    assert len(pkt) == W.HEADROOM + len(udp_payload) == 88 + 52 + n

    vtcfl, plen, nh, hops = struct.unpack_from("!IHBB", pkt)
    assert vtcfl >> 28 == 6 and (vtcfl >> 20) & 0xFF == 0
    assert vtcfl & 0xFFFFF == ev & 0xFFFFF
    assert (plen, nh, hops) == (len(pkt) - 40, W.NH_IPV6, 64)
    assert socket.inet_ntop(socket.AF_INET6, pkt[8:24]) == NIC_A
    assert socket.inet_ntop(socket.AF_INET6, pkt[24:40]) == PATH

    inner = pkt[40:]
    vtcfl, plen, nh, hops = struct.unpack_from("!IHBB", inner)
    assert vtcfl >> 28 == 6 and (plen, nh, hops) == (len(inner) - 40, W.NH_UDP, 64)
    assert socket.inet_ntop(socket.AF_INET6, inner[8:24]) == NIC_A
    assert socket.inet_ntop(socket.AF_INET6, inner[24:40]) == NIC_B

    sport, dport, length, checksum = struct.unpack_from("!HHHH", pkt, 80)
    assert sport == 0xC000 | (ev & 0x3FFF) == W.udp_sport(ev)
    assert 0xC000 <= sport <= 0xFFFF
    assert (dport, length, checksum) == (4791, len(pkt) - 80, 0)
    assert pkt[88:] == udp_payload
    # What the receiver's UDP socket returns after End.DT6 decap decodes to the packet.
    assert W.decode(pkt[88:]).ev == ev


def test_frame_takes_packed_addresses_too():
    packed = [socket.inet_pton(socket.AF_INET6, a) for a in (NIC_B, PATH, NIC_B, NIC_A)]
    ack = W.encode_ack(1, 2, 3, SACKS[2])
    assert W.frame(*packed[:2], 9, *packed[2:], ack) == W.frame(NIC_B, PATH, 9, NIC_B, NIC_A, ack)
    with pytest.raises(ValueError, match="16 bytes"):
        W.frame(b"\0" * 4, PATH, 9, NIC_B, NIC_A, ack)


def test_decode_accepts_a_bytearray():
    wire = _data(DATA_CASES[4]).encode()
    assert W.decode(bytearray(wire)) == W.decode(wire)


def test_the_largest_frame_is_max_frame():
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 1, 2, 3)
    assert len(template.build(0, 0, FULL, 0, 0, imm=1)) == W.MAX_FRAME == 4240
    assert len(template.build(0, 0, FULL, 0, 0)) == W.MAX_FRAME - 4
