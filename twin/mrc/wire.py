"""The MRC wire format: standard RoCEv2 RC packets, with MRC's per-packet state where a
standard RoCEv2 parser expects entropy or ignores reserved bits.

Every packet, as written to an AF_INET6/IPPROTO_RAW socket (byte offsets; docs/mrc-wire.md
has a table per header and the reasons):

    0   outer IPv6 (40)   src = sender NIC, dst = the EV's uSID path, flow label = EV & 0xFFFFF,
                          next header 41. The source route: each switch shifts it, the
                          receiving host's End.DT6 SID strips this header.
    40  inner IPv6 (40)   src = sender NIC, dst = receiving NIC, flow label = EV & 0xFFFFF,
                          next header 17. This and everything after it is the RoCEv2 packet
                          a RoCE NIC would see after decap.
    80  UDP (8)           sport = 0xC000 | EV >> 18 (14 of the EV's entropy bits, where an
                          ECMP hash looks), dport 4791, checksum 0.
    88  BTH (12)          opcode, P_Key 0xFFFF, DestQP, AckReq, the transmission number in
                          the 7 reserved bits after AckReq, PSN (24 bits)
        then, by opcode:
        0x0A RDMA WRITE Only            RETH (16) | payload
        0x0B RDMA WRITE Only with Imm   RETH (16) | ImmDt (4) | payload
        0x11 Acknowledge (ACK/NACK)     AETH (4) | SACK (20)
        0xF0 / 0xF1 EV probe / reply    PROBE (24)
        0x81 CNP                        16 reserved bytes (RoCEv2's Congestion Notification)
        and last the ICRC (4): RoCEv2's invariant CRC (IBA Annex A17), over 8 bytes of 0xFF,
        the inner IPv6 and UDP headers with their variant fields masked, and BTH .. payload.

Where MRC's fields are, and why (a standard responder places RETH..ICRC as payload, so
nothing of MRC's may sit there; RETH DMA length is exactly the payload):
    EV                          inner flow label (its low 20 bits; the ICRC masks it) and the
                                UDP source port (its top 14 bits). The receiver reads both
                                (IPV6_FLOWINFO cmsg, recvfrom's port), rebuilds the 32-bit EV
                                and echoes it in its SACK.
    transmission number         BTH bits 30..24 (reserved, ignored by a standard responder,
                                covered by the ICRC): 0 for the first copy of a PSN, 1.. for
                                resends, modulo 128. The SACK echoes (PSN, number), so the
                                sender knows which copy arrived: RTT from its own send time,
                                and a "lost" copy that arrives after all undoes the loss.
    ACK request / last packet   BTH AckReq; the message's last packet is the WRITE with
                                immediate (its ImmDt completes the message at the receiver).
    MSN                         the sender's own bookkeeping; the AETH carries the responder's
                                count, as in IB (every WRITE Only is one message to IB).

Congestion signals (docs/congestion.md): data packets leave ECT(0) in both IPv6 headers
(control packets Not-ECT; the ICRC masks the traffic class). The receiver reads the inner
traffic class (IPV6_FLOWINFO: `flowinfo_of`) and echoes CE in the SACK's congestion byte
(CONGESTION_ECHO_CE | marks since the last SACK). A data opcode arriving with DSCP
TRIM_DSCP (7) was trimmed by a switch to BTH and RETH: `decode` returns `Trimmed` without
an ICRC check, and the receiver answers NAK_TRIMMED.

UDP-entropy framing (routing: bgp, twin.mrc.framing, docs/bgp-baseline.md "MRC over
ECMP"): no SRv6 and no decap, so a packet is the RoCEv2 packet alone, from the sender's
NIC port address in the EV's plane to the receiver's port address in that plane:

    0   IPv6 (40)         src = my port-p address, dst = the peer's port-p address (p = the
                          EV's plane), flow label = EV & 0xFFFFF, next header 17
    40  UDP (8)           sport = 0xC000 | (EV >> 18 XOR the EV's 8 T1 bits): `udp_sport_ecmp`,
                          dport 4791, checksum 0
    48  BTH ..            as above, the ICRC over this one IPv6 header

The routers hash (addresses, ports, next header) to pick a T1, so the source port must
vary with every EV bit that names a path: the T1 bits are folded into it. The receiver
undoes the fold with the flow label's T1 bits (`ev_of_ecmp`), so the EV it echoes is the
one sent. `Framer`, `DataTemplate` with no path (None) frame this way; `decode(...,
ecmp=True)` and `decode_frame` (by the first header's next header) read it.

Naming follows the InfiniBand spec (Bth, Reth, ImmDt, Aeth, PSN, QP) and MRC (EV, Sack).
Encoders return the RoCE body (BTH .. payload, no ICRC); `frame` wraps one in
IPv6/IPv6/UDP and appends the ICRC. On the receive side the kernel has stripped both IPv6
headers and the UDP header; `decode` takes the UDP payload plus what the socket says of the
inner headers (peer address and port, flow label), which is all the ICRC needs.

Hot path: `DataTemplate` precomputes everything constant for one (QP, EV): the 88 header
bytes, the first 8 BTH bytes and the CRC over the ICRC's pseudo-header, so a data packet
costs one small pack, two crc32 calls and one join.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, replace
from zlib import crc32

# --- constants ------------------------------------------------------------------------------

NH_IPV6, NH_UDP = 41, 17
HOP_LIMIT = 64
ROCE_PORT = 4791
UDP_NO_CHECK6_RX = 102  # setsockopt(IPPROTO_UDP, ...): accept UDP checksum 0 over IPv6
IPV6_FLOWINFO = 11  # setsockopt(IPPROTO_IPV6, ...): each datagram's flow info as a cmsg
MTU = 4096  # payload bytes per data packet
PKEY = 0xFFFF  # default partition

# BTH opcodes (RC transport, plus the manufacturer-specific range for probes)
RDMA_WRITE_ONLY = 0x0A
RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B
ACKNOWLEDGE = 0x11
EV_PROBE = 0xF0
EV_PROBE_REPLY = 0xF1
CNP = 0x81  # RoCEv2 Congestion Notification Packet (IBA A17.9.2): DCQCN's, twin.mrc.dcqcn

# AETH syndromes
SYNDROME_ACK = 0x00
NAK_PSN_SEQUENCE_ERROR = 0x60
NAK_TRIMMED = 0x61  # IB's "invalid request" code point, repurposed; Wireshark labels it so
NAK_CODES = (NAK_PSN_SEQUENCE_ERROR, NAK_TRIMMED)

# The IPv6 traffic class: DSCP (bits 7..2) and ECN (bits 1..0, RFC 3168)
NOT_ECT, ECT1, ECT0, CE = 0b00, 0b01, 0b10, 0b11
ECN_MASK = 0b11
TC_DATA = ECT0  # data packets leave ECT(0), outer and inner header; control stays Not-ECT
TRIM_DSCP = 7  # a switch that trimmed a data packet sets this DSCP (TC = 7 << 2 | ECN)
TRIMMED_SIZE = 28  # a trimmed packet's UDP payload: BTH 12 + RETH 16, no payload, no ICRC
TC_SHIFT = 20  # the traffic class in the IPV6_FLOWINFO word (flow label below it)

# The SACK's congestion byte (offset 33): bit 7, the echoed packet arrived CE-marked;
# bits 6..0, CE-marked data packets since the previous SACK (this one's included; 127
# saturates). 0 where nothing was marked.
CONGESTION_ECHO_CE = 0x80
CONGESTION_COUNT = 0x7F

PSN_MASK = 0xFFFFFF
TRY_MASK = 0x7F  # the transmission number: 7 reserved BTH bits
SACK_DUP = 0x80  # in the SACK's echoed-try byte: the echoed packet was a duplicate
ACK_REQ = 1 << 31
_TRY_SHIFT = 24
SPORT_BASE, SPORT_SHIFT = 0xC000, 18  # sport = 0xC000 | EV >> 18
# The EV's T1 bits (twin.fabric.paths: bits 11..4), folded into the source port in
# UDP-entropy framing; wire imports nothing of twin (test_mrc_framing checks they agree)
EV_T1_SHIFT, EV_T1_MASK = 4, 0xFF
FLOW_MASK = 0xFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF

# --- header structs (network byte order, no implicit padding) -------------------------------

IP6 = struct.Struct("!IHBB16s16s")  # ver/tc/flow, payload length, next header, hops, src, dst
UDP = struct.Struct("!HHHH")  # sport, dport, length, checksum
BTH = struct.Struct("!BBHII")  # opcode, SE|M|PadCnt|TVer, P_Key, rsvd|DestQP, AckReq|try|PSN
RETH = struct.Struct("!QII")  # virtual address, rkey, DMA length
IMMDT = struct.Struct("!I")
AETH = struct.Struct("!I")  # syndrome << 24 | MSN
SACK = struct.Struct("!IQIBBH")  # cum, bitmap, echoed EV, dup|echoed try, congestion, ports
PROBE = struct.Struct("!IIQIH2x")  # EV, probe id, sent ns, reverse EV, port state, rsvd
ICRC = struct.Struct("<I")  # sent least significant byte first, as Linux rxe stores it

# The ICRC's pseudo-header for IPv6: 8 bytes of 0xFF standing in for the IB LRH, then the
# IPv6 and UDP headers with traffic class, flow label, hop limit and UDP checksum as ones.
_PSEUDO6 = struct.Struct("!8sIHBB16s16sHHHH")
_LRH = b"\xff" * 8
_IP6_MASKED_WORD0 = 0x6FFFFFFF

# The data hot path packs BTH bytes 8.. and the RETH (and ImmDt) in one go.
_DATA_VAR = struct.Struct("!IQII")  # AckReq|try|PSN, VA, rkey, DMA length
_DATA_IMM_VAR = struct.Struct("!IQIII")
_DATA = struct.Struct("!" + BTH.format[1:] + RETH.format[1:])
_DATA_IMM = struct.Struct("!" + BTH.format[1:] + RETH.format[1:] + "I")
_ACK = struct.Struct("!" + BTH.format[1:] + AETH.format[1:] + SACK.format[1:])
_PROBE = struct.Struct("!" + BTH.format[1:] + PROBE.format[1:])
_U16 = struct.Struct("!H")

HEADROOM = IP6.size * 2 + UDP.size  # 88 bytes in front of the UDP payload
DATA_OVERHEAD = _DATA.size + ICRC.size  # 32: UDP payload = overhead + data payload
DATA_IMM_OVERHEAD = _DATA_IMM.size + ICRC.size  # 36
ACK_SIZE = _ACK.size + ICRC.size  # 40
PROBE_SIZE = _PROBE.size + ICRC.size  # 40
CNP_RESERVED = 16  # bytes after a CNP's BTH, zero
CNP_SIZE = BTH.size + CNP_RESERVED + ICRC.size  # 32
_BECN = 0x40  # BTH byte 4 (FECN, BECN, reserved; masked by the ICRC): set in a CNP
MAX_FRAME = HEADROOM + DATA_IMM_OVERHEAD + MTU  # 4220: the smallest link MTU for full packets

Addr = str | bytes  # an IPv6 address as text, or its 16 packed bytes


def ecn_of(tc: int) -> int:
    """The ECN codepoint of a traffic class."""
    return tc & ECN_MASK


def is_trimmed_tc(tc: int) -> bool:
    """A traffic class that says a switch cut the packet to its headers (DSCP 7)."""
    return tc >> 2 == TRIM_DSCP


class BadPacket(ValueError):
    """A UDP payload that is not a valid MRC packet; `reason` is one of the REASONS."""

    REASONS = ("short", "icrc", "opcode", "length", "syndrome")

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


# --- the EV in the headers ------------------------------------------------------------------


def udp_sport(ev: int) -> int:
    """The UDP source port: 0xC000 | the EV's top 14 bits (entropy, for an ECMP hash)."""
    return SPORT_BASE | (ev >> SPORT_SHIFT)


def ev_of(flow_label: int, sport: int) -> int:
    """The 32-bit EV back from the inner flow label (bits 19..0) and the source port
    (bits 31..18; bits 19..18 are in both)."""
    return (flow_label & FLOW_MASK) | ((sport & 0x3FFF) << SPORT_SHIFT)


def udp_sport_ecmp(ev: int) -> int:
    """UDP-entropy framing's source port: 0xC000 | (the EV's top 14 bits XOR its 8 T1
    bits), in RoCEv2's entropy range 49152..65535. What an ECMP hash sees of the EV
    besides the addresses (which carry its plane): two EVs of one plane that differ in
    their T1 or top entropy bits leave with different ports."""
    return SPORT_BASE | ((ev >> SPORT_SHIFT) ^ (ev >> EV_T1_SHIFT & EV_T1_MASK))


def ev_of_ecmp(flow_label: int, sport: int) -> int:
    """`ev_of` for UDP-entropy framing: the T1 bits the flow label carries unfold the
    source port first."""
    return ev_of(flow_label, sport ^ (flow_label >> EV_T1_SHIFT & EV_T1_MASK))


# --- parsed packets --------------------------------------------------------------------------


@dataclass(slots=True)
class DataPacket:
    """RDMA WRITE Only (imm is None) or WRITE Only with Immediate: one self-describing packet.

    `ev` travels in the headers (flow label and source port), `tries` in the BTH."""

    dest_qp: int
    psn: int
    va: int
    rkey: int
    payload: bytes | memoryview  # decode gives a memoryview into the received buffer
    ev: int = 0
    tries: int = 0  # 0: first transmission of this PSN; modulo 128
    ack_req: bool = False
    imm: int | None = None
    tc: int = 0  # the inner traffic class it arrived with (ECN: its low 2 bits)

    @property
    def ce(self) -> bool:
        """The fabric marked it Congestion Experienced."""
        return self.tc & ECN_MASK == CE

    @property
    def opcode(self) -> int:
        return RDMA_WRITE_ONLY if self.imm is None else RDMA_WRITE_ONLY_WITH_IMMEDIATE

    @property
    def retransmit(self) -> bool:
        return self.tries != 0

    def encode(self) -> bytes:
        return encode_data(self.dest_qp, self.psn, self.va, self.rkey, self.payload,
                           self.tries, self.ack_req, self.imm)


@dataclass(slots=True)
class Sack:
    """The receiver's state, carried by every ACK and NACK."""

    cum: int  # every PSN below it is received (24-bit PSN; wrap is the caller's business)
    bitmap: int  # bit i: PSN cum + 1 + i received
    ev: int  # EV of the data packet that triggered this SACK
    tries: int  # that packet's transmission number, echoed (its PSN is the BTH PSN)
    congestion: int = 0  # CONGESTION_ECHO_CE | CE-marked packets since the last SACK
    port_state: int = 0xFFFF  # bit p: the receiver's NIC port on plane p is up
    dup: bool = False  # that packet was a duplicate (bit 7 of the echoed-try byte)


@dataclass(slots=True)
class Ack:
    """BTH PSN = the PSN of the data packet that triggered it; msn = responder's MSN (24 bit)."""

    dest_qp: int
    psn: int
    msn: int
    sack: Sack

    def encode(self) -> bytes:
        return encode_ack(self.dest_qp, self.psn, self.msn, self.sack)


@dataclass(slots=True)
class Nack:
    """BTH PSN = the PSN being NACKed; code is NAK_PSN_SEQUENCE_ERROR or NAK_TRIMMED.

    The SACK keeps its ACK meaning (a NACK acknowledges too). For a sequence error the
    NACKed PSN is normally the first hole, psn == sack.cum: as in InfiniBand, everything
    before it (its predecessor included) was received. A trimmed packet's PSN may lie above
    sack.cum; its bitmap bit is 0.
    """

    dest_qp: int
    psn: int
    msn: int
    code: int
    sack: Sack

    def encode(self) -> bytes:
        return encode_nack(self.dest_qp, self.psn, self.msn, self.code, self.sack)


@dataclass(slots=True)
class Probe:
    """An EV probe (reply=False) or its reply, which echoes every field."""

    dest_qp: int
    ev: int  # the EV being probed (the path this probe travels)
    probe_id: int
    sent_ns: int
    reverse_ev: int  # the EV the reply should travel on
    port_state: int = 0xFFFF  # bit p: the prober's NIC port on plane p is up
    reply: bool = False

    def as_reply(self) -> Probe:
        return replace(self, reply=True)

    def encode(self) -> bytes:
        return encode_probe(self.dest_qp, self.ev, self.probe_id, self.sent_ns, self.reverse_ev,
                            self.port_state, self.reply)


@dataclass(slots=True)
class Cnp:
    """A Congestion Notification Packet: the receiver (DCQCN's notification point) tells
    the sending QP `dest_qp` that its packets arrived CE-marked."""

    dest_qp: int
    becn: bool = True  # BTH BECN, as ConnectX NICs send it

    def encode(self) -> bytes:
        return encode_cnp(self.dest_qp)


@dataclass(slots=True)
class Trimmed:
    """A data packet a switch cut to its headers (DSCP TRIM_DSCP): BTH and RETH only, no
    payload and no ICRC (the cut removed it), so nothing in it is authenticated. The
    receiver answers with NAK_TRIMMED naming its PSN and never places it."""

    dest_qp: int
    psn: int
    va: int
    rkey: int
    dma_len: int  # the length the RETH announced: what was cut off
    ev: int = 0
    tries: int = 0
    opcode: int = RDMA_WRITE_ONLY
    tc: int = 0


Packet = DataPacket | Ack | Nack | Probe | Cnp | Trimmed

# --- the ICRC --------------------------------------------------------------------------------


def icrc(ip_udp: bytes | bytearray | memoryview, body: bytes | bytearray | memoryview) -> bytes:
    """RoCEv2's ICRC (IBA Annex A17) of one packet, as the 4 bytes that end it.

    `ip_udp` is the IP header and the UDP header (IPv4: 20 + 8 bytes, IPv6: 40 + 8; the
    version nibble says which), `body` is BTH .. payload. The CRC-32 runs over 8 bytes of
    0xFF, then those headers with the fields a router may change set to ones (IPv6: traffic
    class, flow label, hop limit; IPv4: TOS, TTL, header checksum; UDP: checksum), then the
    BTH with its variant byte (FECN, BECN, reserved) set to ones, then the rest.
    """
    hdr = bytearray(ip_udp)
    if hdr[0] >> 4 == 6:
        struct.pack_into("!I", hdr, 0, (6 << 28) | 0x0FFFFFFF)
        hdr[7] = 0xFF
        udp = 40
    elif hdr[0] >> 4 == 4:
        hdr[1] = hdr[8] = hdr[10] = hdr[11] = 0xFF
        udp = (hdr[0] & 0xF) * 4
    else:
        raise ValueError(f"not an IP header: version {hdr[0] >> 4}")
    if len(hdr) != udp + UDP.size:
        raise ValueError(f"want the IP and UDP headers ({udp + UDP.size} bytes), got {len(hdr)}")
    hdr[udp + 6] = hdr[udp + 7] = 0xFF
    crc = crc32(body[:4], crc32(hdr, crc32(_LRH)))
    return ICRC.pack(crc32(body[5:], crc32(b"\xff", crc)))


def _seed6(src: bytes, dst: bytes, sport: int, udp_len: int) -> int:
    """CRC state after the IPv6 pseudo-header of a packet with this UDP length."""
    return crc32(_PSEUDO6.pack(_LRH, _IP6_MASKED_WORD0, udp_len, NH_UDP, 0xFF, src, dst, sport,
                               ROCE_PORT, udp_len, 0xFFFF))


# --- framing ---------------------------------------------------------------------------------


def _packed(addr: Addr) -> bytes:
    if isinstance(addr, bytes):
        if len(addr) != 16:
            raise ValueError(f"a packed IPv6 address is 16 bytes, not {len(addr)}")
        return addr
    return socket.inet_pton(socket.AF_INET6, addr)


def ipv6_header(src: Addr, dst: Addr, next_header: int, payload_len: int, flow: int = 0,
                hop_limit: int = HOP_LIMIT, tc: int = 0) -> bytes:
    """40 bytes of IPv6: version 6, traffic class `tc`, the low 20 bits of `flow` as flow
    label."""
    return IP6.pack((6 << 28) | (tc & 0xFF) << TC_SHIFT | (flow & FLOW_MASK), payload_len,
                    next_header, hop_limit, _packed(src), _packed(dst))


def tc_of_body(body: bytes | bytearray | memoryview) -> int:
    """The traffic class a RoCE body leaves with: ECT(0) for data, Not-ECT for control."""
    return TC_DATA if body and body[0] in (RDMA_WRITE_ONLY, RDMA_WRITE_ONLY_WITH_IMMEDIATE) \
        else NOT_ECT


def roce(inner_src: Addr, inner_dst: Addr, ev: int, body: bytes, sport: int | None = None
         ) -> bytes:
    """The RoCEv2 packet a NIC sees: inner IPv6 / UDP 4791 / body / ICRC. Data packets
    are ECT(0) (the ICRC masks the traffic class: it changes no ICRC). The source port
    is udp_sport(ev) unless given."""
    udp_len = UDP.size + len(body) + ICRC.size
    ip_udp = ipv6_header(inner_src, inner_dst, NH_UDP, udp_len, flow=ev, tc=tc_of_body(body)) \
        + UDP.pack(udp_sport(ev) if sport is None else sport, ROCE_PORT, udp_len, 0)
    return b"".join((ip_udp, body, icrc(ip_udp, body)))


def frame_ecmp(src: Addr, dst: Addr, ev: int, body: bytes) -> bytes:
    """UDP-entropy framing: IPv6(src port address -> dst port address) / UDP 4791 (source
    port udp_sport_ecmp(ev)) / body / ICRC, ready to send raw to `dst`."""
    return roce(src, dst, ev, body, udp_sport_ecmp(ev))


def frame(outer_src: Addr, path: Addr, ev: int, inner_src: Addr, inner_dst: Addr,
          body: bytes) -> bytes:
    """IPv6(path) / IPv6(inner_dst) / UDP 4791 / body / ICRC, ready to send raw; data
    packets ECT(0) in both IPv6 headers, control packets Not-ECT."""
    inner = roce(inner_src, inner_dst, ev, body)
    return ipv6_header(outer_src, path, NH_IPV6, len(inner), flow=ev, tc=tc_of_body(body)) \
        + inner


def trim(pkt: bytes | bytearray | memoryview, ecn: int | None = None) -> bytes:
    """What a trimming switch makes of a whole data frame: outer and inner IPv6, UDP, BTH
    and RETH (UDP payload TRIMMED_SIZE bytes, no payload, no ICRC), the IPv6 and UDP
    lengths fixed (UDP checksum stays 0), DSCP TRIM_DSCP in both traffic classes (the
    host's decap copies the outer one in), ECN kept unless `ecn` is given. For tests and
    tools: the fabric does this in its switches."""
    head = bytearray(pkt[:HEADROOM + TRIMMED_SIZE])
    if len(head) < HEADROOM + TRIMMED_SIZE:
        raise ValueError("too short to be a data frame")
    for at, plen in ((0, IP6.size + UDP.size + TRIMMED_SIZE), (IP6.size, UDP.size + TRIMMED_SIZE)):
        word = int.from_bytes(head[at:at + 4], "big")
        e = word >> TC_SHIFT & ECN_MASK if ecn is None else ecn
        word = word & ~(0xFF << TC_SHIFT) | (TRIM_DSCP << 2 | e) << TC_SHIFT
        head[at:at + 4] = word.to_bytes(4, "big")
        _U16.pack_into(head, at + 4, plen)
    _U16.pack_into(head, 2 * IP6.size + 4, UDP.size + TRIMMED_SIZE)
    return bytes(head)


def mark_ce(pkt: bytes | bytearray | memoryview, inner: bool = True) -> bytes:
    """A whole frame with CE set in its outer (and, `inner`, inner) traffic class, as a
    marking switch (and the host's RFC 6040 decap) leaves it. For tests and tools."""
    out = bytearray(pkt)
    for at in (0, IP6.size) if inner else (0,):
        out[at + 1] |= CE << 4  # ECN is the low 2 bits of the traffic class: byte 1's top
    return bytes(out)


def allow_zero_udp_checksum(sock: socket.socket) -> None:
    """Let an IPv6 UDP socket accept checksum-0 datagrams (MRC relies on the ICRC instead)."""
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)


def receive_flow_labels(sock: socket.socket) -> None:
    """Deliver each datagram's inner flow info (traffic class, flow label) as a cmsg."""
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO, 1)


def flowinfo_of(ancdata: list) -> int:
    """Traffic class and flow label from recvmsg's ancillary data, as the kernel gives
    them (ip6_flowinfo: the header's first word & 0x0FFFFFFF): TC in bits 27..20, the
    label in 19..0. 0 when the kernel sent none (it omits the cmsg for flow info 0)."""
    for level, kind, data in ancdata:
        if level == socket.IPPROTO_IPV6 and kind == IPV6_FLOWINFO and len(data) >= 4:
            return int.from_bytes(data[:4], "big") & 0x0FFFFFFF
    return 0


def flow_label_of(ancdata: list) -> int:
    """The flow label from recvmsg's ancillary data (0 when the kernel sent none)."""
    return flowinfo_of(ancdata) & FLOW_MASK


# --- generic encoders (header by header; the reference for DataTemplate) ---------------------


def _bth(opcode: int, dest_qp: int, psn: int, ack_req: bool = False, tries: int = 0) -> bytes:
    if not 0 <= dest_qp <= PSN_MASK:
        raise ValueError(f"DestQP is 24 bits, got {dest_qp:#x}")
    if not 0 <= psn <= PSN_MASK:
        raise ValueError(f"PSN is 24 bits, got {psn:#x}")
    return BTH.pack(opcode, 0, PKEY, dest_qp,
                    (ACK_REQ if ack_req else 0) | (tries & TRY_MASK) << _TRY_SHIFT | psn)


def _check_payload(payload: bytes) -> None:
    if len(payload) > MTU:
        raise ValueError(f"payload is at most {MTU} bytes, got {len(payload)}")


def encode_data(dest_qp: int, psn: int, va: int, rkey: int, payload: bytes, tries: int = 0,
                ack_req: bool = False, imm: int | None = None) -> bytes:
    """A data packet's RoCE body: BTH | RETH | [ImmDt] | payload."""
    _check_payload(payload)
    opcode = RDMA_WRITE_ONLY if imm is None else RDMA_WRITE_ONLY_WITH_IMMEDIATE
    try:
        parts = [_bth(opcode, dest_qp, psn, ack_req, tries), RETH.pack(va, rkey, len(payload))]
        if imm is not None:
            parts.append(IMMDT.pack(imm))
    except struct.error as e:
        raise ValueError(f"data packet field out of range: {e}") from e
    parts.append(bytes(payload))
    return b"".join(parts)


def _aeth(syndrome: int, msn: int) -> bytes:
    if not 0 <= msn <= PSN_MASK:
        raise ValueError(f"AETH MSN is 24 bits, got {msn:#x} (pass msn & 0xFFFFFF)")
    return AETH.pack((syndrome << 24) | msn)


def _sack(s: Sack) -> bytes:
    if not 0 <= s.cum <= PSN_MASK:
        raise ValueError(f"cumulative PSN is 24 bits, got {s.cum:#x}")
    try:
        return SACK.pack(s.cum, s.bitmap, s.ev, s.tries & TRY_MASK | (SACK_DUP if s.dup else 0),
                         s.congestion, s.port_state)
    except struct.error as e:
        raise ValueError(f"SACK field out of range: {e}") from e


def encode_ack(dest_qp: int, psn: int, msn: int, sack: Sack) -> bytes:
    """An ACK's RoCE body: BTH(0x11) | AETH(0x00) | SACK."""
    return _bth(ACKNOWLEDGE, dest_qp, psn) + _aeth(SYNDROME_ACK, msn) + _sack(sack)


def encode_nack(dest_qp: int, psn: int, msn: int, code: int, sack: Sack) -> bytes:
    """A NACK's RoCE body: BTH(0x11, PSN = the NACKed PSN) | AETH(code) | SACK."""
    if code not in NAK_CODES:
        raise ValueError(f"NAK code must be one of {', '.join(f'{c:#x}' for c in NAK_CODES)}")
    return _bth(ACKNOWLEDGE, dest_qp, psn) + _aeth(code, msn) + _sack(sack)


def encode_probe(dest_qp: int, ev: int, probe_id: int, sent_ns: int, reverse_ev: int,
                 port_state: int = 0xFFFF, reply: bool = False) -> bytes:
    """An EV probe (or reply) RoCE body: BTH(0xF0/0xF1, PSN 0) | PROBE."""
    opcode = EV_PROBE_REPLY if reply else EV_PROBE
    try:
        ext = PROBE.pack(ev, probe_id, sent_ns & _U64, reverse_ev, port_state)
    except struct.error as e:
        raise ValueError(f"probe field out of range: {e}") from e
    return _bth(opcode, dest_qp, 0) + ext


def encode_cnp(dest_qp: int) -> bytes:
    """A CNP's RoCE body: BTH(0x81, P_Key 0xFFFF, BECN, DestQP = the requester's QP,
    PSN 0) | 16 reserved bytes, as a ConnectX NIC sends it (tests/unit/test_icrc.py)."""
    if not 0 <= dest_qp <= PSN_MASK:
        raise ValueError(f"DestQP is 24 bits, got {dest_qp:#x}")
    return BTH.pack(CNP, 0, PKEY, _BECN << 24 | dest_qp, 0) + bytes(CNP_RESERVED)


# --- the hot paths ---------------------------------------------------------------------------


class Framer:
    """Packets of one EV on one path: the 88 header bytes and the ICRC's CRC state after
    its pseudo-header are cached per UDP length, so framing a body costs two crc32 calls
    and a join. `frame(body)` equals the module's frame(..., body).

    With `path` None it frames UDP-entropy packets (routing: bgp): 48 header bytes, one
    IPv6 header inner_src -> inner_dst (the port addresses), the source port
    udp_sport_ecmp(ev); `frame(body)` equals frame_ecmp(inner_src, inner_dst, ev, body)
    and `outer_src` is not used."""

    _CACHE_MAX = 8

    __slots__ = ("ev", "_head0", "_src", "_dst", "_sport", "_lengths", "_inner_at")

    def __init__(self, outer_src: Addr | None, path: Addr | None, inner_src: Addr,
                 inner_dst: Addr, ev: int, tc: int = NOT_ECT):
        if not 0 <= ev <= 0xFFFFFFFF:
            raise ValueError("an EV is 32 bits")
        self.ev = ev
        self._src, self._dst = _packed(inner_src), _packed(inner_dst)
        self._sport = udp_sport(ev) if path is not None else udp_sport_ecmp(ev)
        # Lengths are patched per UDP length; everything else here is final.
        inner = ipv6_header(self._src, self._dst, NH_UDP, 0, flow=ev, tc=tc) + \
            UDP.pack(self._sport, ROCE_PORT, 0, 0)
        if path is None:
            self._head0, self._inner_at = inner, 0
        else:
            self._head0 = ipv6_header(outer_src, path, NH_IPV6, 0, flow=ev, tc=tc) + inner
            self._inner_at = IP6.size
        self._lengths: dict[int, tuple[bytes, int]] = {}

    def _headers(self, udp_payload_len: int) -> tuple[bytes, int]:
        """(88 header bytes, CRC state after the pseudo-header) for this UDP payload size."""
        hit = self._lengths.get(udp_payload_len)
        if hit is not None:
            return hit
        udp_len = UDP.size + udp_payload_len
        head = bytearray(self._head0)
        inner = self._inner_at
        if inner:
            _U16.pack_into(head, 4, IP6.size + udp_len)  # outer payload length
        _U16.pack_into(head, inner + 4, udp_len)  # inner payload length
        _U16.pack_into(head, inner + IP6.size + 4, udp_len)  # UDP length
        if len(self._lengths) >= self._CACHE_MAX:
            self._lengths.clear()
        hit = self._lengths[udp_payload_len] = (
            bytes(head), _seed6(self._src, self._dst, self._sport, udp_len))
        return hit

    def headers(self, udp_payload_len: int) -> tuple[bytes, int]:
        """The header bytes (88, or 48 in udp-entropy framing) of a packet whose UDP
        payload is this long, and the ICRC's CRC state after its pseudo-header: what the
        compiled receive path frames its ACKs from (twin.mrc._fastpath.RxRing.acks)."""
        return self._headers(udp_payload_len)

    def frame(self, body: bytes) -> bytes:
        head, seed = self._headers(len(body) + ICRC.size)
        crc = crc32(body[5:], crc32(b"\xff", crc32(body[:4], seed)))
        return b"".join((head, body, ICRC.pack(crc)))


class DataTemplate(Framer):
    """Data packets of one QP on one EV. On top of the Framer's cache, the first 8 BTH
    bytes (opcode .. DestQP) are fixed, so the ICRC state after them is cached too, and a
    packet costs one 20-byte pack, two crc32 calls and one join."""

    __slots__ = ("dest_qp", "rkey", "_bth8", "_data", "common")

    def __init__(self, outer_src: Addr | None, path: Addr | None, inner_src: Addr,
                 inner_dst: Addr, ev: int, dest_qp: int, rkey: int):
        if not 0 <= dest_qp <= PSN_MASK:
            raise ValueError(f"DestQP is 24 bits, got {dest_qp:#x}")
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError("an rkey is 32 bits")
        super().__init__(outer_src, path, inner_src, inner_dst, ev, TC_DATA)
        self.dest_qp, self.rkey = dest_qp, rkey
        self._bth8 = {op: BTH.pack(op, 0, PKEY, dest_qp, 0)[:8]
                      for op in (RDMA_WRITE_ONLY, RDMA_WRITE_ONLY_WITH_IMMEDIATE)}
        self._data: dict[tuple[int, int], tuple[bytes, int]] = {}
        self.common: tuple[int, bytes, int] | None = None  # the last (n, head, seed), no ImmDt

    def _for(self, opcode: int, udp_payload_len: int) -> tuple[bytes, int]:
        head, seed = self._headers(udp_payload_len)
        bth8 = self._bth8[opcode]
        seed = crc32(bth8[5:], crc32(b"\xff", crc32(bth8[:4], seed)))
        if len(self._data) >= self._CACHE_MAX:
            self._data.clear()
        out = self._data[opcode, udp_payload_len] = (head + bth8, seed)
        return out

    def head(self, n: int, imm: bool) -> tuple[bytes, int]:
        """The 96 fixed bytes (IPv6/IPv6/UDP and BTH 0..7) of a packet with an n-byte
        payload, with an ImmDt or not, and the ICRC state after them: what the compiled
        data path (twin.mrc._fastpath) builds a packet from. (56 bytes in UDP-entropy
        framing, which the compiled data path refuses: twin.mrc.loop.load_datapath.)"""
        if imm:
            key = (RDMA_WRITE_ONLY_WITH_IMMEDIATE, n + 36)
            return self._data.get(key) or self._for(*key)
        key = (RDMA_WRITE_ONLY, n + 32)
        head, seed = self._data.get(key) or self._for(*key)
        self.common = (n, head, seed)  # what the compiled path reads first
        return head, seed

    def build(self, psn: int, va: int, payload: bytes | memoryview, tries: int = 0,
              ack_req: bool = False, imm: int | None = None) -> bytes:
        """The whole packet for an IPPROTO_RAW socket; equal to frame(..., encode_data(...))."""
        n = len(payload)
        if n > MTU or psn >> 24:
            _check_payload(payload)
            raise ValueError(f"PSN is 24 bits, got {psn:#x}")
        word = (ACK_REQ if ack_req else 0) | (tries & TRY_MASK) << _TRY_SHIFT | psn
        try:
            if imm is None:
                opcode, var = RDMA_WRITE_ONLY, _DATA_VAR.pack(word, va, self.rkey, n)
            else:
                opcode = RDMA_WRITE_ONLY_WITH_IMMEDIATE
                var = _DATA_IMM_VAR.pack(word, va, self.rkey, n, imm)
        except struct.error as e:
            raise ValueError(f"data packet field out of range: {e}") from e
        key = (opcode, n + len(var) + 12)  # UDP payload: BTH 8 + var + payload + ICRC 4
        head, seed = self._data.get(key) or self._for(*key)
        return b"".join((head, var, payload, ICRC.pack(crc32(payload, crc32(var, seed)))))


# --- decoding --------------------------------------------------------------------------------


_unpack_icrc = ICRC.unpack_from
_unpack_data = _DATA.unpack_from
_unpack_data_imm = _DATA_IMM.unpack_from
_DATA_HEAD, _DATA_IMM_HEAD = _DATA.size, _DATA_IMM.size  # payload offsets: 28, 32


def decode(data: bytes | bytearray | memoryview, src: bytes, dst: bytes, sport: int,
           flow: int = 0, ecmp: bool = False) -> Packet:
    """Parse what a UDP socket on port 4791 returns; raises BadPacket for anything invalid.

    `src`, `dst` (packed) and `sport` are the inner IPv6 addresses and UDP source port the
    socket reports, `flow` the inner flow info (the IPV6_FLOWINFO cmsg: traffic class in
    bits 27..20, flow label below): with them the RoCEv2 ICRC is checked first, so a
    corrupted packet is never interpreted, and a data packet's EV is rebuilt. A
    DataPacket's payload is a memoryview into `data` (no copy: the receiver places it
    straight into the target buffer), its `tc` the traffic class (ECN in its low bits).

    A data opcode with DSCP TRIM_DSCP is a packet a switch trimmed: it has no ICRC left
    to check, and decodes to `Trimmed` (BTH and RETH only).

    `ecmp`: the packet came in UDP-entropy framing (its source port folds the EV's T1
    bits in: `ev_of_ecmp` rebuilds the EV). The ICRC is the same either way.
    """
    n = len(data)
    tc = flow >> TC_SHIFT & 0xFF
    if tc >> 2 == TRIM_DSCP and n and data[0] in (RDMA_WRITE_ONLY,
                                                  RDMA_WRITE_ONLY_WITH_IMMEDIATE):
        return decode_trimmed(data, sport, flow, ecmp)
    if n < 16:  # BTH + ICRC
        raise BadPacket("short", f"{n} bytes")
    view = memoryview(data)
    crc = crc32(view[:4], _seed6(src, dst, sport, n + UDP.size))
    if crc32(view[5:-4], crc32(b"\xff", crc)) != _unpack_icrc(data, n - 4)[0]:
        raise BadPacket("icrc")
    opcode = data[0]
    # The data path first and flat: it is most packets, and every lookup costs here.
    if opcode == RDMA_WRITE_ONLY:
        if n < DATA_OVERHEAD:
            raise BadPacket("short", f"{n} bytes for RDMA WRITE Only")
        _, _, _, qp, word, va, rkey, dma_len = _unpack_data(data)
        imm, start = None, _DATA_HEAD
    elif opcode == RDMA_WRITE_ONLY_WITH_IMMEDIATE:
        if n < DATA_IMM_OVERHEAD:
            raise BadPacket("short", f"{n} bytes for RDMA WRITE Only with Immediate")
        _, _, _, qp, word, va, rkey, dma_len, imm = _unpack_data_imm(data)
        start = _DATA_IMM_HEAD
    else:
        return _decode_control(data, n, opcode)
    if dma_len != n - start - 4 or dma_len > MTU:
        raise BadPacket("length", f"RETH DMA length {dma_len}, carried {n - start - 4}")
    return DataPacket(qp & PSN_MASK, word & PSN_MASK, va, rkey, view[start:-4],
                      ev_of_ecmp(flow, sport) if ecmp else ev_of(flow, sport),
                      (word >> _TRY_SHIFT) & TRY_MASK,
                      bool(word & ACK_REQ), imm, tc)


def decode_trimmed(data: bytes | bytearray | memoryview, sport: int, flow: int,
                   ecmp: bool = False) -> Trimmed:
    """A trimmed data packet's BTH and RETH (whatever follows them is ignored: a switch
    that trimmed less is still understood). `ecmp` as decode's."""
    n = len(data)
    if n < TRIMMED_SIZE:
        raise BadPacket("short", f"{n} bytes for a trimmed packet")
    opcode, _, _, qp, word, va, rkey, dma_len = _unpack_data(data)
    return Trimmed(qp & PSN_MASK, word & PSN_MASK, va, rkey, dma_len,
                   ev_of_ecmp(flow, sport) if ecmp else ev_of(flow, sport),
                   (word >> _TRY_SHIFT) & TRY_MASK, opcode, flow >> TC_SHIFT & 0xFF)


def decode_checked(data: bytes | bytearray | memoryview, opcode: int) -> Packet:
    """A non-data packet whose ICRC the compiled receive path already checked."""
    return _decode_control(data, len(data), opcode)


def _decode_control(data: bytes | bytearray | memoryview, n: int, opcode: int) -> Packet:
    if opcode == ACKNOWLEDGE:
        if n != ACK_SIZE:
            raise BadPacket("short" if n < ACK_SIZE else "length", f"{n} bytes for an ACK")
        (_, _, _, qp, psn, aeth, cum, bitmap, ev, tries, congestion,
         port_state) = _ACK.unpack_from(data)
        syndrome = aeth >> 24
        sack = Sack(cum & PSN_MASK, bitmap, ev, tries & TRY_MASK, congestion, port_state,
                    bool(tries & SACK_DUP))
        if syndrome == SYNDROME_ACK:
            return Ack(qp & PSN_MASK, psn & PSN_MASK, aeth & PSN_MASK, sack)
        if syndrome in NAK_CODES:
            return Nack(qp & PSN_MASK, psn & PSN_MASK, aeth & PSN_MASK, syndrome, sack)
        raise BadPacket("syndrome", f"AETH syndrome {syndrome:#04x}")
    if opcode == EV_PROBE or opcode == EV_PROBE_REPLY:
        if n != PROBE_SIZE:
            raise BadPacket("short" if n < PROBE_SIZE else "length", f"{n} bytes for a probe")
        _, _, _, qp, _, ev, probe_id, sent, reverse_ev, port_state = _PROBE.unpack_from(data)
        return Probe(qp & PSN_MASK, ev, probe_id, sent, reverse_ev, port_state,
                     opcode == EV_PROBE_REPLY)
    if opcode == CNP:
        if n != CNP_SIZE:
            raise BadPacket("short" if n < CNP_SIZE else "length", f"{n} bytes for a CNP")
        _, _, _, qp, _ = BTH.unpack_from(data)
        return Cnp(qp & PSN_MASK, bool(qp >> 24 & _BECN))
    raise BadPacket("opcode", f"BTH opcode {opcode:#04x}")


def decode_frame(pkt: bytes | bytearray | memoryview) -> Packet:
    """Parse a whole packet as `frame` builds it (outer IPv6 .. ICRC), or as `frame_ecmp`
    does (one IPv6 header, next header UDP): for tests and tools."""
    ecmp = IP6.unpack_from(pkt)[2] == NH_UDP
    inner = 0 if ecmp else IP6.size
    word0, _, _, _, src, dst = IP6.unpack_from(pkt, inner)
    sport = UDP.unpack_from(pkt, inner + IP6.size)[0]
    return decode(memoryview(pkt)[inner + IP6.size + UDP.size:], src, dst, sport,
                  word0 & 0x0FFFFFFF, ecmp)
