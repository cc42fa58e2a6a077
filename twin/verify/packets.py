"""Probe packets (pure): IPv6-in-IPv6 with a UDP probe inside.

    outer IPv6   src = sender's NIC address, dst = uSID path, flow label = EV bits,
                 next header 41 (IPv6), traffic class PROBE_TC
    inner IPv6   src = sender's NIC address, dst = destination NIC address, next header 17,
                 traffic class PROBE_TC
    UDP          ports of the verifier's sockets, real checksum
    payload      "TWNP" | kind u8 | pad u8*3 | run u32 | probe u32 | sent ns u64

The destination host's decap SID (End.DT6 table local) strips the outer
header and the kernel delivers the inner packet to the UDP socket on the
NIC address. A reply travels back the same way, on the reverse path.

The traffic class, PROBE_TC, is the fabric's probe class: DSCP PROBE_DSCP (CS6), which
a shaped port's queue program serves ahead of data, never trims, drops only past its
`drop` limit, and marks CE whenever the data queue it passed is at or above `ecn_min`
(docs/ebpf.md, "The probe class"); and ECT(0), so that the mark can be made. Decap
copies an outer CE inward (RFC 6040), and the receiving socket reads the inner class
(IPV6_RECVTCLASS): a probe back with CE crossed a congested port.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

# The IPv6 framing is the MRC wire format's; probes share it.
from twin.mrc.wire import ECT0, NH_IPV6, NH_UDP, ipv6_header
from twin.mrc.wire import UDP as _UDP
from twin.node.ebpf.programs import PROBE_DSCP

MAGIC = b"TWNP"
REQUEST, REPLY, LOOP = 1, 2, 3
_PAYLOAD = struct.Struct("!4sB3xIIQ")
PROBE_TC = PROBE_DSCP << 2 | ECT0


@dataclass(frozen=True)
class ProbeBody:
    kind: int
    run: int
    probe: int
    sent_ns: int
    ce: bool = field(default=False, compare=False)  # on receipt: it arrived CE-marked


def udp_checksum(src: str, dst: str, segment: bytes) -> int:
    pseudo = (socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
              + struct.pack("!I3xB", len(segment), NH_UDP))
    data = pseudo + segment
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total & 0xFFFF) or 0xFFFF


def udp_datagram(src: str, dst: str, sport: int, dport: int, data: bytes) -> bytes:
    length = _UDP.size + len(data)
    bare = _UDP.pack(sport, dport, length, 0) + data
    return _UDP.pack(sport, dport, length, udp_checksum(src, dst, bare)) + data


def encapsulated(outer_src: str, path: str, flow: int, inner_src: str, inner_dst: str,
                 sport: int, dport: int, data: bytes, tc: int = PROBE_TC) -> bytes:
    """A whole IPv6-in-IPv6 packet, ready for an IPPROTO_RAW socket; both headers in
    traffic class `tc` (the probe class)."""
    udp = udp_datagram(inner_src, inner_dst, sport, dport, data)
    inner = ipv6_header(inner_src, inner_dst, NH_UDP, len(udp), tc=tc) + udp
    return ipv6_header(outer_src, path, NH_IPV6, len(inner), flow=flow, tc=tc) + inner


def probe_payload(p: ProbeBody) -> bytes:
    return _PAYLOAD.pack(MAGIC, p.kind, p.run, p.probe, p.sent_ns)


def parse_payload(data: bytes) -> ProbeBody | None:
    if len(data) < _PAYLOAD.size:
        return None
    magic, kind, run, probe, sent = _PAYLOAD.unpack_from(data)
    if magic != MAGIC or kind not in (REQUEST, REPLY, LOOP):
        return None
    return ProbeBody(kind, run, probe, sent)
