"""The ICRC is RoCEv2's: checked against a real NIC's packet, against a bit-by-bit CRC written
here from the spec (IBA Annex A17, RoCEv2), and against scapy's RoCE layer."""

from __future__ import annotations

import socket
import struct

import pytest

from twin.mrc import wire as W

# A CNP (BTH opcode 0x81) captured from a Mellanox ConnectX-4 Lx, from scapy's RoCE tests:
# https://github.com/secdev/scapy/blob/master/test/contrib/roce.uts ("Parse a real CNP
# packet"). Ethernet header dropped: IPv4 (20) | UDP 4791 (8) | BTH (12) | 16 reserved
# bytes | ICRC (4), the ICRC as the NIC put it on the wire.
CONNECTX_CNP = bytes.fromhex(
    "45c2003c718c4000401191610a0011010a001201"  # IPv4 10.0.17.1 -> 10.0.18.1, TOS 0xc2
    "000012b700280000"  # UDP 0 -> 4791, length 40, checksum 0
    "8100ffff40000118" "00000000"  # BTH: CNP, P_Key 0xffff, FECN|BECN... DestQP 0x118
    + "00" * 16
    + "82fd002a")  # the NIC's ICRC


def bitwise_crc32(data: bytes) -> int:
    """CRC-32 (IEEE 802.3, reflected, polynomial 0x04C11DB7) one bit at a time: the CRC
    the IBA spec's ICRC uses, written without zlib."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xEDB88320 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def reference_icrc(packet: bytes) -> bytes:
    """The ICRC of an IP/UDP/BTH/.../ICRC packet, from the spec: over 8 bytes of ones
    (the LRH a RoCEv2 packet lacks), the IP header with its variant fields as ones (IPv4:
    TOS, TTL, checksum; IPv6: traffic class, flow label, hop limit), the UDP header with
    checksum ones, the BTH with its byte 4 (FECN, BECN, reserved) ones, then the rest up to
    the ICRC. Sent least significant byte first."""
    p = bytearray(packet[:-4])
    if p[0] >> 4 == 4:
        ihl = (p[0] & 0xF) * 4
        p[1] = 0xFF
        p[8] = 0xFF
        p[10:12] = b"\xff\xff"
        udp = ihl
    else:
        p[0] |= 0x0F
        p[1:4] = b"\xff\xff\xff"
        p[7] = 0xFF
        udp = 40
    p[udp + 6:udp + 8] = b"\xff\xff"
    p[udp + 8 + 4] = 0xFF
    return struct.pack("<I", bitwise_crc32(b"\xff" * 8 + bytes(p)))


def test_the_reference_matches_a_connectx_nic():
    assert reference_icrc(CONNECTX_CNP) == CONNECTX_CNP[-4:]


def test_wire_matches_a_connectx_nic():
    assert W.icrc(CONNECTX_CNP[:28], CONNECTX_CNP[28:-4]) == CONNECTX_CNP[-4:]


NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::2"
PATH = "fcbb:bb00:100:201:101:302::"


def packets() -> list[tuple[str, bytes]]:
    """Every kind of packet the endpoint sends, as (name, inner IPv6 .. ICRC)."""
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, 0xDEADBEEF, 0x1234, 0xCAFE)
    sack = W.Sack(77, 0b1011, 0x5555, 3, 0, 0b1101, dup=True)
    out = [
        ("write", template.build(0x123456, 0x10000, bytes(range(256)) * 16, 2, True)),
        ("write-imm", template.build(9, 0, b"\xa5" * 1000, 0, False, 0xFEED)),
        ("write-empty", template.build(0, 0, b"")),
        ("ack", W.Framer(NIC_B, PATH, NIC_B, NIC_A, 0x777).frame(W.encode_ack(5, 6, 7, sack))),
        ("nack", W.frame(NIC_B, PATH, 0xFFFFFFFF, NIC_B, NIC_A,
                         W.encode_nack(5, 6, 7, W.NAK_PSN_SEQUENCE_ERROR, sack))),
        ("probe", W.frame(NIC_A, PATH, 0, NIC_A, NIC_B, W.encode_probe(1, 2, 3, 4, 5))),
    ]
    return [(name, pkt[W.IP6.size:]) for name, pkt in out]


@pytest.mark.parametrize("name, roce", packets())
def test_every_packet_kind_carries_the_reference_icrc(name, roce):
    assert roce[-4:] == reference_icrc(roce), name


@pytest.mark.parametrize("name, roce", packets())
def test_scapy_agrees(name, roce):
    """scapy's RoCE layer (BTH.compute_icrc, its own masking code) over the same bytes."""
    from scapy.contrib.roce import BTH  # a dev dependency: no skip, it must be there
    from scapy.layers.inet6 import IPv6

    bth = IPv6(roce)[BTH]
    assert bth.compute_icrc(None) == roce[-4:], name


def test_a_variant_field_changed_in_flight_keeps_the_icrc():
    roce = bytearray(packets()[0][1])
    roce[1] ^= 0x0F  # flow label
    roce[7] = 3  # hop limit
    roce[40 + 6:40 + 8] = b"\x12\x34"  # UDP checksum
    roce[48 + 4] |= 0xC0  # FECN, BECN
    assert reference_icrc(bytes(roce)) == roce[-4:]


def test_a_changed_invariant_field_breaks_it():
    roce = packets()[0][1]
    for offset in (8, 24, 40, 42, 48, 48 + 5, 48 + 8, len(roce) - 5):  # src, dst, ports, ...
        bad = bytearray(roce)
        bad[offset] ^= 1
        assert reference_icrc(bytes(bad)) != roce[-4:], offset


def test_decode_checks_it_as_a_receiver_would():
    """What the endpoint's UDP socket sees of a packet with a foreign-computed ICRC."""
    name, roce = packets()[1]
    src, dst = socket.inet_pton(socket.AF_INET6, NIC_A), socket.inet_pton(socket.AF_INET6, NIC_B)
    sport = struct.unpack_from("!H", roce, 40)[0]
    flow = struct.unpack_from("!I", roce)[0] & W.FLOW_MASK
    assert W.decode(roce[48:], src, dst, sport, flow).imm == 0xFEED
    forged = roce[48:-4] + struct.pack("!I", struct.unpack("<I", roce[-4:])[0])  # big-endian
    with pytest.raises(W.BadPacket, match="icrc"):
        W.decode(forged, src, dst, sport, flow)
