import socket
import struct

from twin.verify import packets

SRC, DST, PATH = "fd00:4d52:43::1", "fd00:4d52:43:1::2", "fcbb:bb00:100:201:101:302::"


def test_encapsulated_layout():
    probe = packets.ProbeBody(packets.REQUEST, 7, 42, 123456789)
    pkt = packets.encapsulated(SRC, PATH, 0xABCDE, SRC, DST, 1000, 2000,
                               packets.probe_payload(probe))
    vtcfl, plen, nh, hlim = struct.unpack_from("!IHBB", pkt)
    assert vtcfl >> 28 == 6 and vtcfl & 0xFFFFF == 0xABCDE
    assert nh == packets.NH_IPV6 and plen == len(pkt) - 40
    assert socket.inet_ntop(socket.AF_INET6, pkt[24:40]) == PATH
    inner = pkt[40:]
    assert inner[6] == packets.NH_UDP
    assert socket.inet_ntop(socket.AF_INET6, inner[24:40]) == DST
    udp = inner[40:]
    sport, dport, length, csum = struct.unpack_from("!HHHH", udp)
    assert (sport, dport, length) == (1000, 2000, len(udp))
    # Summed with its checksum in place, a correct segment folds to all ones.
    assert packets.udp_checksum(SRC, DST, udp) == 0xFFFF
    zeroed = udp[:6] + b"\0\0" + udp[8:]
    assert packets.udp_checksum(SRC, DST, zeroed) == csum
    assert packets.parse_payload(udp[8:]) == probe


def test_foreign_payloads_are_ignored():
    assert packets.parse_payload(b"hello world, not a probe!") is None
    assert packets.parse_payload(b"TWNP") is None
