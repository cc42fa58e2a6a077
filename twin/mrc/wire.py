"""The MRC wire format: RoCEv2 RC framing that a standard dissector decodes, plus MRC's fields.

Every packet, as written to an AF_INET6/IPPROTO_RAW socket (byte offsets; docs/mrc-wire.md
has a table per header):

    0   outer IPv6 (40)   src = sender NIC, dst = the EV's uSID path, flow label = EV & 0xFFFFF,
                          next header 41, hop limit 64. The uSID path is the source route: each
                          switch shifts it, the receiving host's End.DT6 SID strips this header.
    40  inner IPv6 (40)   src = sender NIC, dst = receiving NIC, next header 17. What the
                          receiving kernel delivers to the UDP socket on the NIC address.
    80  UDP (8)           sport = 0xC000 | (EV & 0x3FFF), dport 4791 (RoCEv2), checksum 0.
                          The EV in sport and flow label is the entropy a hashing fabric would
                          see; the receiver sets UDP_NO_CHECK6_RX and relies on the ICRC.
    88  BTH (12)          InfiniBand base transport header: opcode, P_Key 0xFFFF, DestQP,
                          AckReq, PSN (24 bits). Keeps the packet a valid RC packet.
        then, by opcode:
        0x0A RDMA WRITE Only            RETH (16) | MRC (20) | payload
        0x0B RDMA WRITE Only with Imm   RETH (16) | ImmDt (4) | MRC (20) | payload
        0x11 Acknowledge (ACK/NACK)     AETH (4) | SACK (32)
        0xF0 / 0xF1 EV probe / reply    PROBE (24)
        and last the ICRC (4): zlib.crc32 of BTH .. payload, big endian.

Why each piece is there:
    RETH in every data packet   every packet names its own remote address, rkey and length,
                                so a sprayed packet is placed wherever and whenever it lands:
                                there are no FIRST/MIDDLE/LAST opcodes to reassemble.
    ImmDt                       only on the packet that completes a WRITE_IMM message.
    MRC extension               version, flags (RETRANSMIT, LAST_OF_MESSAGE, ACK_REQUEST),
                                payload length, the EV (echoed in SACKs, so the sender learns
                                per path), the MSN (which message the packet belongs to), and
                                the send timestamp in ns (echoed, for per-path RTT).
    AETH                        the IB ACK/NAK syndrome and the responder's MSN.
    SACK extension              cumulative PSN + 64-bit bitmap (selective retransmit), the
                                echoed EV and timestamp, congestion bits, and the receiver's
                                port-state bitmap (a NIC port down stops a plane).
    PROBE extension             EV probes refresh reverse-path EVs when no data flows back.
    ICRC                        UDP checksum is off, so integrity of BTH .. payload is here.

Naming follows the InfiniBand spec (Bth, Reth, ImmDt, Aeth, PSN, QP) and MRC (EV, MSN, Sack).
Encoders return the UDP payload (BTH .. ICRC); `frame` wraps one in IPv6/IPv6/UDP. On the
receive side the kernel has stripped both IPv6 headers and the UDP header, and `decode` takes
what the UDP socket returns.

Hot path: `DataTemplate` precomputes everything constant for one (QP, EV) and builds a data
packet with one struct pack, one join and the crc32 (which is most of the cost at 4 KiB).
The generic encoders pack header by header, like the tables in docs/mrc-wire.md, and serve as
the reference the template is tested against. Parsed packets are slotted, mutable dataclasses:
a frozen dataclass costs ~7x more to construct, and `decode` makes one per packet.
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
MTU = 4096  # payload bytes per data packet
PKEY = 0xFFFF  # default partition
VERSION = 1  # MRC extension version

# BTH opcodes (RC transport, plus the manufacturer-specific range for probes)
RDMA_WRITE_ONLY = 0x0A
RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B
ACKNOWLEDGE = 0x11
EV_PROBE = 0xF0
EV_PROBE_REPLY = 0xF1

# MRC extension flags
RETRANSMIT, LAST_OF_MESSAGE, ACK_REQUEST = 0x01, 0x02, 0x04

# AETH syndromes
SYNDROME_ACK = 0x00
NAK_PSN_SEQUENCE_ERROR = 0x60
NAK_TRIMMED = 0x61  # IB's "invalid request" code point, repurposed; Wireshark labels it so
NAK_CODES = (NAK_PSN_SEQUENCE_ERROR, NAK_TRIMMED)

# SACK congestion-state bits
CONGESTION_ECN_CE, CONGESTION_QUEUE_HIGH = 0x01, 0x02

PSN_MASK = 0xFFFFFF
_U64 = 0xFFFFFFFFFFFFFFFF
_ACKREQ_SHIFT = 29  # ACK_REQUEST (bit 2 of MRC flags) -> AckReq (bit 31 of BTH word 2)

# --- header structs (network byte order, no implicit padding) -------------------------------

IP6 = struct.Struct("!IHBB16s16s")  # ver/tc/flow, payload length, next header, hops, src, dst
UDP = struct.Struct("!HHHH")  # sport, dport, length, checksum
BTH = struct.Struct("!BBHII")  # opcode, SE|M|PadCnt|TVer, P_Key, rsvd|DestQP, AckReq|PSN
RETH = struct.Struct("!QII")  # virtual address, rkey, DMA length
IMMDT = struct.Struct("!I")
MRC = struct.Struct("!BBHIIQ")  # version, flags, payload length, EV, MSN, timestamp ns
AETH = struct.Struct("!I")  # syndrome << 24 | MSN
SACK = struct.Struct("!IQIQBHB4x")  # cum, bitmap, EV, ts ns, congestion, port state, rsvd
PROBE = struct.Struct("!IIQIH2x")  # EV, probe id, sent ns, reverse EV, port state, rsvd
ICRC = struct.Struct("!I")

# Composite layouts for the hot paths (one pack/unpack per packet).
_DATA = struct.Struct("!" + BTH.format[1:] + RETH.format[1:] + MRC.format[1:])
_DATA_IMM = struct.Struct("!" + BTH.format[1:] + RETH.format[1:] + "I" + MRC.format[1:])
_ACK = struct.Struct("!" + BTH.format[1:] + AETH.format[1:] + SACK.format[1:])
_PROBE = struct.Struct("!" + BTH.format[1:] + PROBE.format[1:])
_U16 = struct.Struct("!H")

HEADROOM = IP6.size * 2 + UDP.size  # 88 bytes in front of the UDP payload
DATA_OVERHEAD = _DATA.size + ICRC.size  # 52: UDP payload = overhead + data payload
DATA_IMM_OVERHEAD = _DATA_IMM.size + ICRC.size  # 56
ACK_SIZE = _ACK.size + ICRC.size  # 52
PROBE_SIZE = _PROBE.size + ICRC.size  # 40
MAX_FRAME = HEADROOM + DATA_IMM_OVERHEAD + MTU  # 4240: the smallest link MTU for full packets

Addr = str | bytes  # an IPv6 address as text, or its 16 packed bytes


class BadPacket(ValueError):
    """A UDP payload that is not a valid MRC packet; `reason` is one of the REASONS."""

    REASONS = ("short", "icrc", "opcode", "version", "length", "syndrome")

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


# --- parsed packets --------------------------------------------------------------------------


@dataclass(slots=True)
class DataPacket:
    """RDMA WRITE Only (imm is None) or WRITE Only with Immediate: one self-describing packet."""

    dest_qp: int
    psn: int
    va: int
    rkey: int
    payload: bytes | memoryview  # decode gives a memoryview into the received buffer
    msn: int
    ev: int
    ts_ns: int
    flags: int = 0
    imm: int | None = None

    @property
    def opcode(self) -> int:
        return RDMA_WRITE_ONLY if self.imm is None else RDMA_WRITE_ONLY_WITH_IMMEDIATE

    @property
    def retransmit(self) -> bool:
        return bool(self.flags & RETRANSMIT)

    @property
    def last_of_message(self) -> bool:
        return bool(self.flags & LAST_OF_MESSAGE)

    @property
    def ack_request(self) -> bool:
        return bool(self.flags & ACK_REQUEST)

    def encode(self) -> bytes:
        return encode_data(self.dest_qp, self.psn, self.va, self.rkey, self.payload, self.msn,
                           self.ev, self.ts_ns, self.flags, self.imm)


@dataclass(slots=True)
class Sack:
    """The receiver's state, carried by every ACK and NACK."""

    cum: int  # every PSN below it is received (24-bit PSN; wrap is the caller's business)
    bitmap: int  # bit i: PSN cum + 1 + i received
    ev: int  # EV of the data packet that triggered this SACK
    ts_ns: int  # that packet's send timestamp, echoed
    congestion: int = 0  # CONGESTION_ECN_CE | CONGESTION_QUEUE_HIGH
    port_state: int = 0xFFFF  # bit p: the receiver's NIC port on plane p is up


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


Packet = DataPacket | Ack | Nack | Probe

# --- framing ---------------------------------------------------------------------------------


def _packed(addr: Addr) -> bytes:
    if isinstance(addr, bytes):
        if len(addr) != 16:
            raise ValueError(f"a packed IPv6 address is 16 bytes, not {len(addr)}")
        return addr
    return socket.inet_pton(socket.AF_INET6, addr)


def ipv6_header(src: Addr, dst: Addr, next_header: int, payload_len: int, flow: int = 0,
                hop_limit: int = HOP_LIMIT) -> bytes:
    """40 bytes of IPv6: version 6, traffic class 0, the low 20 bits of `flow` as flow label."""
    return IP6.pack((6 << 28) | (flow & 0xFFFFF), payload_len, next_header, hop_limit,
                    _packed(src), _packed(dst))


def udp_sport(ev: int) -> int:
    """The UDP source port carrying an EV's low 14 bits (in the dynamic range 0xC000..)."""
    return 0xC000 | (ev & 0x3FFF)


def frame(outer_src: Addr, path: Addr, ev: int, inner_src: Addr, inner_dst: Addr,
          udp_payload: bytes) -> bytes:
    """IPv6(path) / IPv6(inner_dst) / UDP 4791 around an encoded packet, ready to send raw."""
    udp_len = UDP.size + len(udp_payload)
    return b"".join((
        ipv6_header(outer_src, path, NH_IPV6, IP6.size + udp_len, flow=ev),
        ipv6_header(inner_src, inner_dst, NH_UDP, udp_len),
        UDP.pack(udp_sport(ev), ROCE_PORT, udp_len, 0),
        udp_payload,
    ))


def allow_zero_udp_checksum(sock: socket.socket) -> None:
    """Let an IPv6 UDP socket accept checksum-0 datagrams (MRC relies on the ICRC instead)."""
    sock.setsockopt(socket.IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)


# --- generic encoders (header by header; the reference for DataTemplate) ---------------------


def _bth(opcode: int, dest_qp: int, psn: int, ack_req: bool = False) -> bytes:
    if not 0 <= dest_qp <= PSN_MASK:
        raise ValueError(f"DestQP is 24 bits, got {dest_qp:#x}")
    if not 0 <= psn <= PSN_MASK:
        raise ValueError(f"PSN is 24 bits, got {psn:#x}")
    return BTH.pack(opcode, 0, PKEY, dest_qp, (int(ack_req) << 31) | psn)


def _with_icrc(*parts: bytes) -> bytes:
    icrc = 0
    for part in parts:
        icrc = crc32(part, icrc)
    return b"".join((*parts, ICRC.pack(icrc)))


def _check_payload(payload: bytes) -> None:
    if len(payload) > MTU:
        raise ValueError(f"payload is at most {MTU} bytes, got {len(payload)}")


def encode_data(dest_qp: int, psn: int, va: int, rkey: int, payload: bytes, msn: int, ev: int,
                ts_ns: int, flags: int = 0, imm: int | None = None) -> bytes:
    """A data packet's UDP payload: BTH | RETH | [ImmDt] | MRC | payload | ICRC."""
    _check_payload(payload)
    opcode = RDMA_WRITE_ONLY if imm is None else RDMA_WRITE_ONLY_WITH_IMMEDIATE
    try:
        parts = [_bth(opcode, dest_qp, psn, bool(flags & ACK_REQUEST)),
                 RETH.pack(va, rkey, len(payload))]
        if imm is not None:
            parts.append(IMMDT.pack(imm))
        parts.append(MRC.pack(VERSION, flags, len(payload), ev, msn, ts_ns & _U64))
    except struct.error as e:
        raise ValueError(f"data packet field out of range: {e}") from e
    parts.append(payload)
    return _with_icrc(*parts)


def _aeth(syndrome: int, msn: int) -> bytes:
    if not 0 <= msn <= PSN_MASK:
        raise ValueError(f"AETH MSN is 24 bits, got {msn:#x} (pass msn & 0xFFFFFF)")
    return AETH.pack((syndrome << 24) | msn)


def _sack(s: Sack) -> bytes:
    if not 0 <= s.cum <= PSN_MASK:
        raise ValueError(f"cumulative PSN is 24 bits, got {s.cum:#x}")
    try:
        return SACK.pack(s.cum, s.bitmap, s.ev, s.ts_ns & _U64, s.congestion, s.port_state, 0)
    except struct.error as e:
        raise ValueError(f"SACK field out of range: {e}") from e


def encode_ack(dest_qp: int, psn: int, msn: int, sack: Sack) -> bytes:
    """An ACK's UDP payload: BTH(0x11) | AETH(0x00) | SACK | ICRC."""
    return _with_icrc(_bth(ACKNOWLEDGE, dest_qp, psn), _aeth(SYNDROME_ACK, msn), _sack(sack))


def encode_nack(dest_qp: int, psn: int, msn: int, code: int, sack: Sack) -> bytes:
    """A NACK's UDP payload: BTH(0x11, PSN = the NACKed PSN) | AETH(code) | SACK | ICRC."""
    if code not in NAK_CODES:
        raise ValueError(f"NAK code must be one of {', '.join(f'{c:#x}' for c in NAK_CODES)}")
    return _with_icrc(_bth(ACKNOWLEDGE, dest_qp, psn), _aeth(code, msn), _sack(sack))


def encode_probe(dest_qp: int, ev: int, probe_id: int, sent_ns: int, reverse_ev: int,
                 port_state: int = 0xFFFF, reply: bool = False) -> bytes:
    """An EV probe (or reply) UDP payload: BTH(0xF0/0xF1, PSN 0) | PROBE | ICRC."""
    opcode = EV_PROBE_REPLY if reply else EV_PROBE
    try:
        ext = PROBE.pack(ev, probe_id, sent_ns & _U64, reverse_ev, port_state)
    except struct.error as e:
        raise ValueError(f"probe field out of range: {e}") from e
    return _with_icrc(_bth(opcode, dest_qp, 0), ext)


# --- the data hot path -----------------------------------------------------------------------


class DataTemplate:
    """Data packets of one QP on one EV: everything but the per-packet fields is precomputed.

    The 88 bytes of IPv6/IPv6/UDP depend only on the payload length; they are cached per
    UDP length (a transfer uses two or three: full MTU, its tail, with or without ImmDt).
    """

    _CACHE_MAX = 8

    __slots__ = ("ev", "dest_qp", "rkey", "_head0", "_headers")

    def __init__(self, outer_src: Addr, path: Addr, inner_src: Addr, inner_dst: Addr, ev: int,
                 dest_qp: int, rkey: int):
        if not 0 <= dest_qp <= PSN_MASK:
            raise ValueError(f"DestQP is 24 bits, got {dest_qp:#x}")
        if not 0 <= ev <= 0xFFFFFFFF or not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError("EV and rkey are 32 bits")
        # Fixed for the template's life: the cached headers carry the EV.
        self.ev, self.dest_qp, self.rkey = ev, dest_qp, rkey
        # Lengths are patched per UDP length; everything else here is final.
        self._head0 = bytes(frame(outer_src, path, ev, inner_src, inner_dst, b""))
        self._headers: dict[int, bytes] = {}

    def _headers_for(self, udp_payload_len: int) -> bytes:
        udp_len = UDP.size + udp_payload_len
        head = bytearray(self._head0)
        _U16.pack_into(head, 4, IP6.size + udp_len)  # outer payload length
        _U16.pack_into(head, IP6.size + 4, udp_len)  # inner payload length
        _U16.pack_into(head, 2 * IP6.size + 4, udp_len)  # UDP length
        if len(self._headers) >= self._CACHE_MAX:
            self._headers.clear()
        self._headers[udp_payload_len] = out = bytes(head)
        return out

    def build(self, psn: int, va: int, payload: bytes, msn: int, ts_ns: int, flags: int = 0,
              imm: int | None = None) -> bytes:
        """The whole packet for an IPPROTO_RAW socket; equal to frame(..., encode_data(...))."""
        n = len(payload)
        if n > MTU or psn >> 24:
            _check_payload(payload)
            raise ValueError(f"PSN is 24 bits, got {psn:#x}")
        try:
            if imm is None:
                bth_to_mrc = _DATA.pack(
                    RDMA_WRITE_ONLY, 0, PKEY, self.dest_qp,
                    (flags & ACK_REQUEST) << _ACKREQ_SHIFT | psn, va, self.rkey, n,
                    VERSION, flags, n, self.ev, msn, ts_ns & _U64)
                udp_payload_len = n + DATA_OVERHEAD
            else:
                bth_to_mrc = _DATA_IMM.pack(
                    RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0, PKEY, self.dest_qp,
                    (flags & ACK_REQUEST) << _ACKREQ_SHIFT | psn, va, self.rkey, n, imm,
                    VERSION, flags, n, self.ev, msn, ts_ns & _U64)
                udp_payload_len = n + DATA_IMM_OVERHEAD
        except struct.error as e:
            raise ValueError(f"data packet field out of range: {e}") from e
        headers = self._headers.get(udp_payload_len) or self._headers_for(udp_payload_len)
        icrc = ICRC.pack(crc32(payload, crc32(bth_to_mrc)))
        return b"".join((headers, bth_to_mrc, payload, icrc))


# --- decoding --------------------------------------------------------------------------------


_unpack_icrc = ICRC.unpack_from
_unpack_data = _DATA.unpack_from
_unpack_data_imm = _DATA_IMM.unpack_from
_DATA_HEAD, _DATA_IMM_HEAD = _DATA.size, _DATA_IMM.size  # payload offsets: 48, 52


def decode(data: bytes | bytearray | memoryview) -> Packet:
    """Parse what a UDP socket on port 4791 returns; raises BadPacket for anything invalid.

    The ICRC is checked first, so a corrupted packet is never interpreted. A DataPacket's
    payload is a memoryview into `data` (no copy: the receiver places it straight into the
    target buffer); take bytes(payload) to keep it past the reuse of a receive buffer.
    """
    n = len(data)
    if n < 16:  # BTH + ICRC
        raise BadPacket("short", f"{n} bytes")
    view = memoryview(data)
    if crc32(view[:-4]) != _unpack_icrc(data, n - 4)[0]:
        raise BadPacket("icrc")
    opcode = data[0]
    # The data path first and flat: it is most packets, and every lookup costs here.
    if opcode == RDMA_WRITE_ONLY:
        if n < DATA_OVERHEAD:
            raise BadPacket("short", f"{n} bytes for RDMA WRITE Only")
        (_, _, _, qp, psn, va, rkey, dma_len, version, flags, length, ev, msn,
         ts) = _unpack_data(data)
        imm, start = None, _DATA_HEAD
    elif opcode == RDMA_WRITE_ONLY_WITH_IMMEDIATE:
        if n < DATA_IMM_OVERHEAD:
            raise BadPacket("short", f"{n} bytes for RDMA WRITE Only with Immediate")
        (_, _, _, qp, psn, va, rkey, dma_len, imm, version, flags, length, ev, msn,
         ts) = _unpack_data_imm(data)
        start = _DATA_IMM_HEAD
    else:
        return _decode_control(data, n, opcode)
    if version != VERSION:
        raise BadPacket("version", f"MRC version {version}")
    if length != dma_len or length != n - start - 4 or length > MTU:
        raise BadPacket("length", f"MRC {length}, RETH {dma_len}, carried {n - start - 4}")
    return DataPacket(qp & PSN_MASK, psn & PSN_MASK, va, rkey, view[start:-4], msn, ev, ts,
                      flags, imm)


def _decode_control(data: bytes | bytearray | memoryview, n: int, opcode: int) -> Packet:
    if opcode == ACKNOWLEDGE:
        if n != ACK_SIZE:
            raise BadPacket("short" if n < ACK_SIZE else "length", f"{n} bytes for an ACK")
        (_, _, _, qp, psn, aeth, cum, bitmap, ev, ts, congestion, port_state,
         _) = _ACK.unpack_from(data)
        syndrome = aeth >> 24
        sack = Sack(cum & PSN_MASK, bitmap, ev, ts, congestion, port_state)
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
    raise BadPacket("opcode", f"BTH opcode {opcode:#04x}")
