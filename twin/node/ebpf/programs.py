"""The programs, generated per node: uN, decap, encap, and the fabric signals.

One generator per program; a node's SID (or its encap header) goes in as
immediate constants when the program is built, so there is no per-node build
step and no map to fill before the first packet. Builders are pure and return
the instruction bytes for `bpf.prog_load`; `tag()` says which tag the kernel
will show for them (`tc -j filter show`), which is what verify compares.

    un(prefix, map_fd)      TC ingress, every switch port: next-csid uN (F3216)
    decap(prefix, map_fd, slot, ports_fd)
                            TC ingress, a host port: End.DT6-like decap of 6in6, after
                            RFC 6040's copy inward (counted in the port's slot)
    encap(src, dst, flow_label, map_fd)
                            lwt xmit route: H.Encaps.Red-like outer IPv6 header
    queue(q, ports_fd)      TC egress, a shaped switch port: a virtual queue draining at
                            the port's rate; CE marks, trimming of RoCE data (WRITE
                            opcodes; control frames and ND pass whole), drops
                            (`queue_program`)
    ecn_in(prefix, slot, ports_fd)
                            TC ingress, a host port on seg6local: RFC 6040 decap rules
                            (outer CE and trim DSCP copied inward), then the kernel's
                            End.DT6; on eBPF the decap program does the same itself

The fabric signals count per port into a second map, a plain array named
`mrc_port_q` with one slot per port (the N of ethN) of PORT_FIELDS (u64 each,
updated with atomic adds where it is cheap; see `queue_program`).

Every SID program counts into one per-CPU array (u32 index -> u64), in the fixed
order of COUNTERS; the programs of one node share it.

Stack layout (r10 = FP, every access aligned to its size, as the verifier
requires of the stack):

    fp-40 .. fp-1   the 40-byte IPv6 header (read from the packet, or built)
                    so its DA is fp-16 .. fp-1 and the hop limit is fp-33
    fp-48 .. fp-47  the ethertype
    fp-52 .. fp-49  the counter index (the map key)
    fp-56 .. fp-53  the port slot (the port map's key)
    fp-64 .. fp-57  the inner IPv6 header's first 8 bytes (queue, RFC 6040)
    fp-72 .. fp-65  the UDP header (queue)
    fp-74 .. fp-73  a 16-bit length to write (queue's trim)
    fp-80           queue: the byte that says what a packet past trim is, its BTH
                    opcode or its ICMPv6 type
    fp-104 .. fp-81 queue: the virtual queue's busy-until time, its depth before
                    this packet, the length its thresholds are checked with
                    (spilled across helper calls)

Packet bytes are read with bpf_skb_load_bytes (no direct packet access, so no
bounds proofs and no trouble with non-linear skbs) and written back with
bpf_skb_store_bytes. Immediates that stand for packet bytes are the host-order
value of those bytes (`_word`), so a 32-bit compare of a loaded word with them
is a byte-for-byte compare on either endianness.
"""

from __future__ import annotations

import hashlib
import ipaddress
import platform
import sys

from . import asm
from .asm import DW, FP, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, B, H, W

COUNTERS = ("shifted", "decapsulated", "encapsulated", "drop_malformed",
            "drop_end_of_carrier", "drop_not_ipv6_in_ipv6", "hop_limit_expired")

# program types, helpers and return codes (include/uapi/linux/bpf.h, pkt_cls.h)
PROG_TYPE_SCHED_CLS, PROG_TYPE_LWT_XMIT = 3, 12
HELPER_MAP_LOOKUP_ELEM, HELPER_SKB_STORE_BYTES, HELPER_SKB_LOAD_BYTES = 1, 9, 26
HELPER_SKB_ADJUST_ROOM, HELPER_LWT_PUSH_ENCAP = 50, 73
HELPER_KTIME_GET_NS, HELPER_GET_PRANDOM_U32, HELPER_SKB_CHANGE_TAIL = 5, 7, 38
F_RECOMPUTE_CSUM = 1 << 0  # bpf_skb_store_bytes: fix skb->csum (CHECKSUM_COMPLETE)
ADJ_ROOM_MAC = 1  # bpf_skb_adjust_room: remove room right after the MAC header
F_ADJ_ROOM_FIXED_GSO = 1 << 0  # ... and keep gso_size (the inner MSS) as it is
LWT_ENCAP_IP = 2  # bpf_lwt_push_encap: push an IP(v6) header
TC_ACT_OK, TC_ACT_SHOT = 0, 2
BPF_DROP, BPF_LWT_REROUTE = 2, 128

ETH_HLEN, IP6_HLEN = 14, 40
ETH_P_IPV6 = 0x86DD
NEXTHDR_IPV6 = 41  # IPv6-in-IPv6
ENCAP_HOP_LIMIT = 64

# where things sit on the stack (see the module docstring)
HDR = -40  # the IPv6 header
DA = HDR + 24  # its destination address, fp-16
HOP_LIMIT = HDR + 7
NEXT_HEADER = HDR + 6
ETHERTYPE = -48
KEY = -52

# where things sit in the packet (TC ingress sees it from the MAC header)
PKT_ETHERTYPE = 12
PKT_IP6 = ETH_HLEN
PKT_DA = PKT_IP6 + 24
SKB_LEN = 0  # offsetof(struct __sk_buff, len)
SKB_GSO_SEGS = 164  # offsetof(struct __sk_buff, gso_segs)

NAMES = {"uN": "mrc_un", "decap": "mrc_decap", "encap": "mrc_encap", "queue": "mrc_queue",
         "ecn": "mrc_ecn_in"}  # bpf prog_name

# --- fabric signals: the wire decisions the MRC endpoint relies on --------
TRIM_DSCP = 7  # 0b000111: RFC 2474 pool 2 (xxxx11), experimental or local use
MRC_UDP_PORT = 4791  # RoCEv2
UDP_HLEN, BTH_LEN, RETH_LEN = 8, 12, 16
TRIM_IP_LEN = 2 * IP6_HLEN + UDP_HLEN + BTH_LEN + RETH_LEN  # 116: what is left of the packet
TRIM_FRAME_LEN = ETH_HLEN + TRIM_IP_LEN  # 130: the trimmed frame, Ethernet included
ECN_MASK, ECN_CE = 0x3, 0x3  # the low two bits of the traffic class
NEXTHDR_UDP = 17
NEXTHDR_ICMPV6 = 58
PKT_BTH = PKT_IP6 + 2 * IP6_HLEN + UDP_HLEN  # 102: an MRC packet's BTH, its opcode first
# RoCE data, the only packets a queue trims: the RC RDMA WRITE opcodes (IBA 9.2.1),
# FIRST 0x06, MIDDLE, LAST, LAST with Immediate, ONLY (0x0A, MRC's), ONLY with
# Immediate (0x0B, MRC's last packet of a message)
RC_WRITE_FIRST, RC_WRITE_ONLY_WITH_IMMEDIATE = 0x06, 0x0B
# ICMPv6 neighbour discovery (RFC 4861): router solicitation 133 .. redirect 137, always
# sent with hop limit 255, which no forwarded packet still has at an egress port
ND_FIRST, ND_LAST, ND_HOP_LIMIT = 133, 137, 255
NS_PER_S = 10**9
# The probe class (twin.verify.packets: the prober's loopback probes, verify's requests
# and replies): outer DSCP CS6 (RFC 4594's network control) on a frame no longer than
# PROBE_FRAME_MAX. Served ahead of data (skb->priority TC_PRIO_CONTROL: band 0 of the
# pfifo_fast under the port's tbf), never trimmed, dropped only past `drop` and its
# own PROBE_ROOM, and marked
# CE (if ECT) whenever the data queue it went past is at or above ecn_min, on every
# port, the last hop too: the prober's congestion signal, not a sender's.
PROBE_DSCP = 48
PROBE_FRAME_MAX = 256  # a probe is 130 bytes; a bulk frame in CS6 is ordinary traffic
# The class's own room past `drop`: data (and control) stop at drop, so what is above it
# is probes; 8 KiB is 63 of them, served ahead, bounded whatever a sender puts in CS6.
PROBE_ROOM = 8192
SKB_PRIORITY = 32  # offsetof(struct __sk_buff, priority)
TC_PRIO_CONTROL = 7  # pfifo_fast's priomap sends it to band 0, ahead of 0's band 1

PORTS_MAP_NAME = "mrc_port_q"
PORT_FIELDS = ("busy_until_ns", "rate_bps", "queue_bytes", "high_water_bytes", "packets",
               "ce_marked", "trimmed", "dropped", "ce_to_inner", "trim_to_inner",
               "drop_ce_not_ect")
PORT_VALUE_SIZE = 8 * len(PORT_FIELDS)
SLOT = -56
INNER = -64
UDPH = -72
LEN16 = -74
KIND = -80
BUSY = -88
QBEFORE = -96
SEGLEN = -104


def port_slot(dev: str) -> int:
    """A port's slot in its node's port map: the N of ethN (planned ports are named so)."""
    number = dev.removeprefix("eth")
    if not number.isdigit():
        raise ValueError(f"{dev}: the fabric signals need ports named ethN")
    return int(number)


def field(name: str) -> int:
    """The offset of a PORT_FIELDS entry in a port's map value."""
    return 8 * PORT_FIELDS.index(name)


def _word(data: bytes) -> int:
    """The host-order value a load of `data` (2 or 4 bytes) puts in a register."""
    return int.from_bytes(data, sys.byteorder)


def sid_prefix(prefix: str) -> bytes:
    """The 6 bytes of a node's /48 SID prefix, from `fcbb:bb00:100::/48` (or
    without the length)."""
    net = ipaddress.IPv6Network(prefix, strict=False)
    if "/" in prefix and net.prefixlen != 48:
        raise ValueError(f"{prefix}: a uSID node prefix is a /48 (block /32 + one uSID)")
    return net.network_address.packed[:6]


def count(counter: str, map_fd: int) -> list:
    """counters[COUNTERS.index(counter)] += 1 on this CPU. Clobbers r0-r5."""
    return [
        asm.st_imm(W, FP, KEY, COUNTERS.index(counter)),
        asm.ld_map_fd(R1, map_fd),
        asm.mov64_reg(R2, FP),
        asm.alu64_imm(asm.ADD, R2, KEY),
        asm.call(HELPER_MAP_LOOKUP_ELEM),
        asm.jeq_imm(R0, 0, 3),  # no such index: cannot happen, but the verifier asks
        asm.ldx(DW, R1, R0, 0),
        asm.alu64_imm(asm.ADD, R1, 1),
        asm.stx(DW, R0, R1, 0),
    ]


def _load(pkt_off: int, fp_off: int, length: int) -> list:
    """r0 = bpf_skb_load_bytes(skb, pkt_off, fp + fp_off, length); skb in r6."""
    return [
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, pkt_off),
        asm.mov64_reg(R3, FP),
        asm.alu64_imm(asm.ADD, R3, fp_off),
        asm.mov64_imm(R4, length),
        asm.call(HELPER_SKB_LOAD_BYTES),
    ]


def _ipv6_to(prefix: bytes, *, not_ipv6: str, malformed: str, not_mine: str) -> list:
    """Read the Ethernet type and the IPv6 header onto the stack; branch away
    unless it is IPv6 (version 6) with a DA under `prefix` (6 bytes)."""
    return [
        *_load(PKT_ETHERTYPE, ETHERTYPE, 2),
        asm.jne_imm(R0, 0, not_ipv6),  # shorter than an Ethernet header
        asm.ldx(H, R1, FP, ETHERTYPE),
        asm.jne_imm(R1, _word(ETH_P_IPV6.to_bytes(2, "big")), not_ipv6),
        *_load(PKT_IP6, HDR, IP6_HLEN),
        asm.jne_imm(R0, 0, malformed),  # the 40-byte header is not all there
        asm.ldx(B, R1, FP, HDR),
        asm.alu64_imm(asm.RSH, R1, 4),
        asm.jne_imm(R1, 6, malformed),
        asm.ldx(W, R1, FP, DA),
        asm.jmp32_imm(asm.JNE, R1, _word(prefix[:4]), not_mine),
        asm.ldx(H, R1, FP, DA + 4),
        asm.jne_imm(R1, _word(prefix[4:6]), not_mine),
    ]


def _finish(map_fd: int, **drops: str) -> list:
    """The shared tail: `pass` returns TC_ACT_OK; each label in `drops`
    counts its counter and returns TC_ACT_SHOT."""
    out = [asm.label("pass"), asm.mov64_imm(R0, TC_ACT_OK), asm.exit_()]
    for name, counter in drops.items():
        out += [asm.label(name), *count(counter, map_fd),
                asm.mov64_imm(R0, TC_ACT_SHOT), asm.exit_()]
    return out


def un_program(prefix: str, map_fd: int) -> list:
    """uN (End with NEXT-C-SID, F3216) as a list of instructions and labels."""
    mine = sid_prefix(prefix)
    # shift DA bytes 6..15 to 4..13 as 16-bit words, in place, low to high
    shift = []
    for word in range(2, 7):
        shift += [asm.ldx(H, R1, FP, DA + 2 * (word + 1)), asm.stx(H, FP, R1, DA + 2 * word)]
    return [
        asm.mov64_reg(R6, R1),
        *_ipv6_to(mine, not_ipv6="pass", malformed="malformed", not_mine="pass"),
        asm.ldx(H, R1, FP, DA + 6),
        asm.jeq_imm(R1, 0, "end_of_carrier"),  # no next uSID: End needs an SRH
        asm.ldx(B, R1, FP, HOP_LIMIT),
        asm.jmp_imm(asm.JGT, R1, 1, "shift"),
        *count("hop_limit_expired", map_fd),  # ip6_forward drops it, ICMPv6 time exceeded
        asm.label("shift"),
        *shift,
        asm.st_imm(H, FP, DA + 14, 0),
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, PKT_DA + 4),
        asm.mov64_reg(R3, FP),
        asm.alu64_imm(asm.ADD, R3, DA + 4),
        asm.mov64_imm(R4, 12),
        asm.mov64_imm(R5, F_RECOMPUTE_CSUM),
        asm.call(HELPER_SKB_STORE_BYTES),
        asm.jne_imm(R0, 0, "malformed"),
        *count("shifted", map_fd),
        *_finish(map_fd, end_of_carrier="drop_end_of_carrier", malformed="drop_malformed"),
    ]


def decap_program(prefix: str, map_fd: int, slot: int, ports_fd: int) -> list:
    """Decap of IPv6-in-IPv6 addressed to a host port's SID (End.DT6-like), after
    RFC 6040's rules (`rfc6040`: the outer CE and trim DSCP copied inward)."""
    mine = sid_prefix(prefix)
    return [
        asm.mov64_reg(R6, R1),
        *_ipv6_to(mine, not_ipv6="pass", malformed="malformed", not_mine="pass"),
        asm.ldx(B, R1, FP, NEXT_HEADER),
        asm.jne_imm(R1, NEXTHDR_IPV6, "not_6in6"),
        asm.ldx(W, R1, R6, SKB_LEN),
        asm.jmp_imm(asm.JLT, R1, ETH_HLEN + 2 * IP6_HLEN, "malformed"),
        *rfc6040(ports_fd, slot, malformed="malformed", drop="not_ect"),
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, -IP6_HLEN),
        asm.mov64_imm(R3, ADJ_ROOM_MAC),
        asm.mov64_imm(R4, F_ADJ_ROOM_FIXED_GSO),
        asm.call(HELPER_SKB_ADJUST_ROOM),
        asm.jne_imm(R0, 0, "malformed"),
        *count("decapsulated", map_fd),
        *_finish(map_fd, not_6in6="drop_not_ipv6_in_ipv6", malformed="drop_malformed"),
        *_drop_not_ect(ports_fd, slot),
    ]


def _port_value(ports_fd: int, slot: int, missing: str) -> list:
    """r0 = &ports[slot] (a value of PORT_FIELDS), or jump to `missing`. Clobbers r0-r5."""
    return [
        asm.st_imm(W, FP, SLOT, slot),
        asm.ld_map_fd(R1, ports_fd),
        asm.mov64_reg(R2, FP),
        asm.alu64_imm(asm.ADD, R2, SLOT),
        asm.call(HELPER_MAP_LOOKUP_ELEM),
        asm.jeq_imm(R0, 0, missing),
    ]


def _add(value_reg: int, name: str, scratch: int = R1) -> list:
    """lock *(u64 *)(value_reg + field(name)) += 1: an atomic add, so CPUs that count
    at once lose nothing."""
    return [asm.mov64_imm(scratch, 1), asm.atomic_add(DW, value_reg, scratch, field(name))]


def _jmp_const(op: int, reg: int, value: int, target: str, scratch: int = R5) -> list:
    """if reg <op> value goto target, for any u64 value (an imm is sign-extended from
    32 bits, so a larger one goes through a register)."""
    if 0 <= value < 1 << 31:
        return [asm.jmp_imm(op, reg, value, target)]
    return [asm.ld_imm64(scratch, value), asm.jmp_reg(op, reg, scratch, target)]


def _store(pkt_off: int, fp_off: int, length: int, failed: str) -> list:
    """bpf_skb_store_bytes(skb, pkt_off, fp + fp_off, length, F_RECOMPUTE_CSUM): no
    IPv6 header checksum to fix, but skb->csum (CHECKSUM_COMPLETE) follows."""
    return [
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, pkt_off),
        asm.mov64_reg(R3, FP),
        asm.alu64_imm(asm.ADD, R3, fp_off),
        asm.mov64_imm(R4, length),
        asm.mov64_imm(R5, F_RECOMPUTE_CSUM),
        asm.call(HELPER_SKB_STORE_BYTES),
        asm.jne_imm(R0, 0, failed),
    ]


def _set_dscp(fp_off: int, dscp: int) -> list:
    """Write `dscp` into the traffic class of the IPv6 header on the stack at fp_off,
    keeping its ECN bits (and the version, and the flow label around it): the class
    spans the low nibble of byte 0 and the high nibble of byte 1."""
    return [
        asm.ldx(B, R1, FP, fp_off),
        asm.alu64_imm(asm.AND, R1, 0xF0),
        asm.alu64_imm(asm.OR, R1, dscp >> 2),
        asm.stx(B, FP, R1, fp_off),
        asm.ldx(B, R1, FP, fp_off + 1),
        asm.alu64_imm(asm.AND, R1, 0x3F),
        asm.alu64_imm(asm.OR, R1, (dscp & 0x3) << 6),
        asm.stx(B, FP, R1, fp_off + 1),
    ]


def queue_program(q, ports_fd: int) -> list:
    """A shaped switch port's virtual queue, at its TC egress (before tbf).

    `q` is a twin.fabric.congestion.PortQueue (or a dict of its fields): the port's
    slot, rate and thresholds, all immediates. The queue is kept as the time it will
    have drained, `busy_until_ns` (a virtual clock: each admitted frame moves it on by
    len x 8 / rate seconds from max(itself, now)), so the depth a packet meets is
    (busy_until - now) x rate / 8 bytes, exact to the nanosecond with no fractional
    bytes lost per packet. For each IPv6 frame:

      1. depth + len <= trim: admitted as it is;
      2. else RoCE data, an MRC packet (outer next header 41, inner next header 17,
         UDP dport 4791) whose BTH opcode (byte PKT_BTH) is an RC RDMA WRITE
         (RC_WRITE_FIRST 0x06 .. RC_WRITE_ONLY_WITH_IMMEDIATE 0x0B), longer than
         TRIM_FRAME_LEN, is cut to its headers (bpf_skb_change_tail to 130 bytes;
         outer payload length 76, inner payload length 36, UDP length 36, the
         checksum stays 0, outer DSCP TRIM_DSCP with its ECN bits kept; the RETH DMA
         length is left as it was) and admitted at 130 bytes while depth + 130 <= drop
         (`trimmed` counts these, and only these);
      3. else every other MRC packet (a control frame: ACK or NAK 0x11, EV probe or
         reply 0xF0/0xF1, CNP 0x81, any opcode that is not a WRITE; and data no
         longer than 130 bytes, a packet trimmed upstream), and ICMPv6 neighbour
         discovery (a plain IPv6 packet, next header 58, type ND_FIRST 133 .. ND_LAST
         137, hop limit 255), is admitted whole while depth + its length <= drop;
      4. anything else over trim (a UDP 4791 packet too short for a BTH opcode too),
         and anything over drop, is dropped (TC_ACT_SHOT).

    Only headers right after each other are recognised: an extension header between
    the outer and inner IPv6 header, or before the UDP or ICMPv6 header, makes the
    packet "anything else".

    A GSO super-packet (kernel TCP crosses the veths as skbs of up to 64 KiB, which
    tbf segments) is checked against the thresholds by the length of one segment
    (len / gso_segs), and enters the queue whole: as many segments, back to back.
    Checked whole, it would be over trim on an empty queue, and TCP would never get
    through a shaped port; this way it is dropped as its first segment would be, and
    what of it overflows tbf's queue, tbf drops segment by segment. It is never
    trimmed.

    An admitted packet is marked CE (ECT(0) or ECT(1) -> CE, Not-ECT never) with
    probability (depth - ecn_min) / (ecn_max - ecn_min), 1 past ecn_max, where
    `depth` is what it found ahead of it, unless the port does not mark (a T0's
    host-facing port, the last hop).

    The probe class (outer DSCP PROBE_DSCP, frame no longer than PROBE_FRAME_MAX) is
    checked before all of that: admitted whole while depth + len <= drop + PROBE_ROOM
    (else dropped: the class has a room of its own above where data stops), given
    skb->priority TC_PRIO_CONTROL (the pfifo_fast under the port's
    tbf serves it ahead of data), and marked CE when ECT and depth >= ecn_min, on
    every port (the last hop too; not counted in `ce_marked`, which is data's).
    Every other IPv6 frame leaves with skb->priority 0: the class is the switch's to
    say, not a sender's SO_PRIORITY.

    Two CPUs sending out of one port at once read and write busy_until without a
    lock, so one of two updates can be lost: the queue is approximate under such
    races (a veth's egress mostly runs on the sending CPU). The counters are atomic
    adds, and exact.
    """
    if isinstance(q, dict):
        get = q.__getitem__
    else:
        def get(name):
            return getattr(q, name)
    rate, slot = get("rate_bps"), get("slot")
    ecn_min, ecn_max, trim, drop = get("ecn_min"), get("ecn_max"), get("trim"), get("drop")
    bits_ns = 8 * NS_PER_S  # bit-nanoseconds in a byte-second
    ecn = []
    if get("mark"):
        ecn = [
            asm.ldx(DW, R2, FP, QBEFORE),
            *_jmp_const(asm.JLE, R2, ecn_min, "enqueue"),
            *_jmp_const(asm.JGE, R2, ecn_max, "mark"),
            asm.call(HELPER_GET_PRANDOM_U32),
            *([asm.alu64_imm(asm.MOD, R0, ecn_max - ecn_min)] if ecn_max - ecn_min < 1 << 31
              else [asm.ld_imm64(R1, ecn_max - ecn_min), asm.alu64_reg(asm.MOD, R0, R1)]),
            asm.ldx(DW, R2, FP, QBEFORE),
            *([asm.alu64_imm(asm.SUB, R2, ecn_min)] if ecn_min < 1 << 31
              else [asm.ld_imm64(R1, ecn_min), asm.alu64_reg(asm.SUB, R2, R1)]),
            asm.jmp_reg(asm.JGE, R0, R2, "enqueue"),  # marked with P = (depth - min) / range
            asm.label("mark"),
            asm.ldx(B, R1, FP, HDR + 1),
            asm.mov64_reg(R2, R1),
            asm.alu64_imm(asm.RSH, R2, 4),
            asm.alu64_imm(asm.AND, R2, ECN_MASK),
            asm.jeq_imm(R2, 0, "enqueue"),  # Not-ECT: never marked
            asm.jeq_imm(R2, ECN_CE, "enqueue"),  # CE already
            asm.alu64_imm(asm.OR, R1, ECN_CE << 4),
            asm.stx(B, FP, R1, HDR + 1),
            *_store(PKT_IP6 + 1, HDR + 1, 1, "drop"),
            *_add(R7, "ce_marked"),
        ]
    return [
        asm.mov64_reg(R6, R1),
        *_load(PKT_ETHERTYPE, ETHERTYPE, 2),
        asm.jne_imm(R0, 0, "pass"),
        asm.ldx(H, R1, FP, ETHERTYPE),
        asm.jne_imm(R1, _word(ETH_P_IPV6.to_bytes(2, "big")), "pass"),  # ARP: not queued
        *_load(PKT_IP6, HDR, 8),
        asm.jne_imm(R0, 0, "pass"),
        *_port_value(ports_fd, slot, "pass"),
        asm.mov64_reg(R7, R0),
        *_add(R7, "packets"),
        asm.ld_imm64(R1, rate),
        asm.stx(DW, R7, R1, field("rate_bps")),  # for readers: the depth now, from busy_until
        asm.ldx(W, R8, R6, SKB_LEN),
        asm.mov64_reg(R1, R8),
        asm.ldx(W, R2, R6, SKB_GSO_SEGS),
        asm.jmp_imm(asm.JLE, R2, 1, "seglen"),
        asm.alu64_reg(asm.DIV, R1, R2),  # a GSO skb: one segment's share
        asm.label("seglen"),
        asm.stx(DW, FP, R1, SEGLEN),
        asm.call(HELPER_KTIME_GET_NS),
        asm.mov64_reg(R9, R0),
        # the backlog ahead of this packet, in ns; an empty queue is busy until now
        asm.ldx(DW, R1, R7, field("busy_until_ns")),
        asm.mov64_reg(R2, R1),
        asm.alu64_reg(asm.SUB, R2, R9),
        asm.jmp_reg(asm.JGT, R1, R9, "backlog"),
        asm.mov64_reg(R1, R9),
        asm.mov64_imm(R2, 0),
        asm.label("backlog"),
        asm.stx(DW, FP, R1, BUSY),
        # depth = backlog x rate / 8e9 (backlog <= drop x 8e9 / rate: no overflow)
        asm.ld_imm64(R3, rate),
        asm.alu64_reg(asm.MUL, R2, R3),
        asm.ld_imm64(R3, bits_ns),
        asm.alu64_reg(asm.DIV, R2, R3),
        asm.stx(DW, FP, R2, QBEFORE),
        # the probe class: outer DSCP PROBE_DSCP (traffic class bits 7..2: the low
        # nibble of byte 0, the top two bits of byte 1), a frame of a probe's size
        asm.mov64_imm(R1, 0),
        asm.stx(W, R6, R1, SKB_PRIORITY),
        asm.jmp_imm(asm.JGT, R8, PROBE_FRAME_MAX, "data_class"),
        asm.ldx(B, R1, FP, HDR),
        asm.alu64_imm(asm.AND, R1, 0x0F),
        asm.alu64_imm(asm.LSH, R1, 2),
        asm.ldx(B, R2, FP, HDR + 1),
        asm.alu64_imm(asm.RSH, R2, 6),
        asm.alu64_reg(asm.OR, R1, R2),
        asm.jeq_imm(R1, PROBE_DSCP, "probe"),
        asm.label("data_class"),
        asm.ldx(DW, R2, FP, QBEFORE),
        asm.mov64_reg(R3, R2),
        asm.ldx(DW, R1, FP, SEGLEN),
        asm.alu64_reg(asm.ADD, R3, R1),
        *_jmp_const(asm.JLE, R3, trim, "admit"),
        # past trim: RoCE data is trimmed, MRC's control and ND go on whole, nothing
        # else goes on (never a GSO skb: one is none of these)
        asm.jmp_reg(asm.JNE, R1, R8, "drop"),
        asm.ldx(B, R1, FP, NEXT_HEADER),
        asm.jeq_imm(R1, NEXTHDR_ICMPV6, "icmpv6"),
        asm.jne_imm(R1, NEXTHDR_IPV6, "drop"),
        *_load(PKT_IP6 + IP6_HLEN, INNER, 8),
        asm.jne_imm(R0, 0, "drop"),
        asm.ldx(B, R1, FP, INNER + 6),
        asm.jne_imm(R1, NEXTHDR_UDP, "drop"),
        *_load(PKT_IP6 + 2 * IP6_HLEN, UDPH, UDP_HLEN),
        asm.jne_imm(R0, 0, "drop"),
        asm.ldx(H, R1, FP, UDPH + 2),
        asm.jne_imm(R1, _word(MRC_UDP_PORT.to_bytes(2, "big")), "drop"),
        *_load(PKT_BTH, KIND, 1),
        asm.jne_imm(R0, 0, "drop"),  # UDP 4791 without even an opcode: not RoCE
        # a control frame (ACK, NAK, probe, CNP: any opcode but a WRITE) carries the
        # signals back, and is never cut: cut, its ICRC would go with its tail
        asm.ldx(B, R1, FP, KIND),
        asm.alu64_imm(asm.SUB, R1, RC_WRITE_FIRST),  # below FIRST wraps to a huge u64
        asm.jmp_imm(asm.JGT, R1, RC_WRITE_ONLY_WITH_IMMEDIATE - RC_WRITE_FIRST, "whole"),
        asm.jmp_imm(asm.JLE, R8, TRIM_FRAME_LEN, "whole"),  # no longer than a trim
        asm.ldx(DW, R1, FP, QBEFORE),
        asm.alu64_imm(asm.ADD, R1, TRIM_FRAME_LEN),
        *_jmp_const(asm.JGT, R1, drop, "drop"),
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, TRIM_FRAME_LEN),
        asm.mov64_imm(R3, 0),
        asm.call(HELPER_SKB_CHANGE_TAIL),
        asm.jne_imm(R0, 0, "drop"),  # e.g. skb->encapsulation set: ENOTSUPP
        *_set_dscp(HDR, TRIM_DSCP),
        asm.st_imm(H, FP, HDR + 4, _word((TRIM_IP_LEN - IP6_HLEN).to_bytes(2, "big"))),
        *_store(PKT_IP6, HDR, 6, "drop"),
        asm.st_imm(H, FP, LEN16, _word((TRIM_IP_LEN - 2 * IP6_HLEN).to_bytes(2, "big"))),
        *_store(PKT_IP6 + IP6_HLEN + 4, LEN16, 2, "drop"),  # inner payload length
        *_store(PKT_IP6 + 2 * IP6_HLEN + 4, LEN16, 2, "drop"),  # UDP length
        *_add(R7, "trimmed"),
        asm.mov64_imm(R8, TRIM_FRAME_LEN),
        asm.ja("admit"),
        asm.label("probe"),  # served ahead, never trimmed, its own room; CE from ecn_min
        asm.ldx(DW, R1, FP, QBEFORE),
        asm.alu64_reg(asm.ADD, R1, R8),
        *_jmp_const(asm.JGT, R1, drop + PROBE_ROOM, "drop"),
        asm.mov64_imm(R1, TC_PRIO_CONTROL),
        asm.stx(W, R6, R1, SKB_PRIORITY),
        asm.ldx(DW, R2, FP, QBEFORE),
        *_jmp_const(asm.JLT, R2, ecn_min, "enqueue"),
        asm.ldx(B, R1, FP, HDR + 1),
        asm.mov64_reg(R2, R1),
        asm.alu64_imm(asm.RSH, R2, 4),
        asm.alu64_imm(asm.AND, R2, ECN_MASK),
        asm.jeq_imm(R2, 0, "enqueue"),  # Not-ECT: never marked
        asm.jeq_imm(R2, ECN_CE, "enqueue"),
        asm.alu64_imm(asm.OR, R1, ECN_CE << 4),
        asm.stx(B, FP, R1, HDR + 1),
        *_store(PKT_IP6 + 1, HDR + 1, 1, "drop"),
        asm.ja("enqueue"),
        asm.label("icmpv6"),
        # neighbour discovery, so a next hop does not fail during a long incast; a
        # forwarded packet (hop limit < 255 here) does not get this way past trim
        asm.ldx(B, R1, FP, HOP_LIMIT),
        asm.jne_imm(R1, ND_HOP_LIMIT, "drop"),
        *_load(PKT_IP6 + IP6_HLEN, KIND, 1),
        asm.jne_imm(R0, 0, "drop"),
        asm.ldx(B, R1, FP, KIND),
        asm.alu64_imm(asm.SUB, R1, ND_FIRST),
        asm.jmp_imm(asm.JGT, R1, ND_LAST - ND_FIRST, "drop"),
        asm.label("whole"),  # admitted at its own length, up to drop
        asm.ldx(DW, R1, FP, QBEFORE),
        asm.alu64_reg(asm.ADD, R1, R8),
        *_jmp_const(asm.JGT, R1, drop, "drop"),
        asm.label("admit"),
        *ecn,
        asm.label("enqueue"),
        # busy_until = max(busy_until, now) + len x 8e9 / rate
        asm.mov64_reg(R1, R8),
        asm.ld_imm64(R2, bits_ns),
        asm.alu64_reg(asm.MUL, R1, R2),
        asm.ld_imm64(R2, rate),
        asm.alu64_reg(asm.DIV, R1, R2),
        asm.ldx(DW, R2, FP, BUSY),
        asm.alu64_reg(asm.ADD, R2, R1),
        asm.stx(DW, R7, R2, field("busy_until_ns")),
        asm.ldx(DW, R1, FP, QBEFORE),
        asm.alu64_reg(asm.ADD, R1, R8),
        asm.stx(DW, R7, R1, field("queue_bytes")),
        asm.ldx(DW, R2, R7, field("high_water_bytes")),
        asm.jmp_reg(asm.JGE, R2, R1, "pass"),
        asm.stx(DW, R7, R1, field("high_water_bytes")),
        asm.label("pass"),
        asm.mov64_imm(R0, TC_ACT_OK),
        asm.exit_(),
        asm.label("drop"),
        *_add(R7, "dropped"),
        asm.mov64_imm(R0, TC_ACT_SHOT),
        asm.exit_(),
    ]


def rfc6040(ports_fd: int, slot: int, *, malformed: str, drop: str) -> list:
    """RFC 6040's decapsulation rules for the signals MRC uses, on a 6in6 packet whose
    outer header is on the stack (HDR) and whose outer next header is 41, before the
    outer header goes: outer CE over inner ECT(0) or ECT(1) -> inner CE; outer CE over
    inner Not-ECT -> jump to `drop` (RFC 6040: drop, and count it); outer DSCP
    TRIM_DSCP -> inner DSCP TRIM_DSCP, inner ECN kept. Only the inner header's first
    two bytes change. No checksum needs fixing: IPv6 has no header checksum, an MRC
    packet's UDP checksum is 0, and the traffic class is not part of the UDP or TCP
    pseudo-header. The port's counters: ce_to_inner, trim_to_inner (and
    drop_ce_not_ect, which the `drop` label counts: `_drop_not_ect`). Uses r7-r9."""
    return [
        asm.ldx(B, R8, FP, HDR + 1),
        asm.alu64_imm(asm.RSH, R8, 4),
        asm.alu64_imm(asm.AND, R8, ECN_MASK),  # r8: outer ECN
        asm.ldx(B, R9, FP, HDR),
        asm.alu64_imm(asm.AND, R9, 0x0F),
        asm.alu64_imm(asm.LSH, R9, 2),
        asm.ldx(B, R1, FP, HDR + 1),
        asm.alu64_imm(asm.RSH, R1, 6),
        asm.alu64_reg(asm.OR, R9, R1),  # r9: outer DSCP
        asm.mov64_imm(R7, 0),  # r7: bit 0 CE copied, bit 1 trim DSCP copied
        asm.jne_imm(R8, ECN_CE, "rfc6040_dscp"),
        *_load(PKT_IP6 + IP6_HLEN, INNER, 2),
        asm.jne_imm(R0, 0, malformed),
        asm.ldx(B, R1, FP, INNER + 1),
        asm.mov64_reg(R2, R1),
        asm.alu64_imm(asm.RSH, R2, 4),
        asm.alu64_imm(asm.AND, R2, ECN_MASK),
        asm.jeq_imm(R2, 0, drop),  # outer CE, inner Not-ECT
        asm.jeq_imm(R2, ECN_CE, "rfc6040_dscp"),
        asm.alu64_imm(asm.OR, R1, ECN_CE << 4),
        asm.stx(B, FP, R1, INNER + 1),
        asm.alu64_imm(asm.OR, R7, 1),
        asm.label("rfc6040_dscp"),
        asm.jne_imm(R9, TRIM_DSCP, "rfc6040_write"),
        asm.jne_imm(R7, 0, "rfc6040_loaded"),
        *_load(PKT_IP6 + IP6_HLEN, INNER, 2),
        asm.jne_imm(R0, 0, malformed),
        asm.label("rfc6040_loaded"),
        *_set_dscp(INNER, TRIM_DSCP),
        asm.alu64_imm(asm.OR, R7, 2),
        asm.label("rfc6040_write"),
        asm.jeq_imm(R7, 0, "rfc6040_done"),
        *_store(PKT_IP6 + IP6_HLEN, INNER, 2, malformed),
        *_port_value(ports_fd, slot, "rfc6040_done"),
        asm.mov64_reg(R1, R7),
        asm.alu64_imm(asm.AND, R1, 1),
        asm.jeq_imm(R1, 0, "rfc6040_trim"),
        *_add(R0, "ce_to_inner"),
        asm.label("rfc6040_trim"),
        asm.mov64_reg(R1, R7),
        asm.alu64_imm(asm.AND, R1, 2),
        asm.jeq_imm(R1, 0, "rfc6040_done"),
        *_add(R0, "trim_to_inner"),
        asm.label("rfc6040_done"),
    ]


def _drop_not_ect(ports_fd: int, slot: int) -> list:
    """The `not_ect` label: count drop_ce_not_ect on the port, drop."""
    return [
        asm.label("not_ect"),
        *_port_value(ports_fd, slot, "shot"),
        *_add(R0, "drop_ce_not_ect"),
        asm.label("shot"),
        asm.mov64_imm(R0, TC_ACT_SHOT),
        asm.exit_(),
    ]


def ecn_in_program(prefix: str, slot: int, ports_fd: int) -> list:
    """A host port's TC ingress on the seg6local data plane: RFC 6040's rules on the
    6in6 packets addressed to the port's SID, then TC_ACT_OK, and the kernel's
    End.DT6 decapsulates (it copies nothing inward: net/ipv6/seg6_local.c,
    decap_and_validate pulls the outer header off and leaves the inner as it is)."""
    mine = sid_prefix(prefix)
    return [
        asm.mov64_reg(R6, R1),
        *_ipv6_to(mine, not_ipv6="pass", malformed="pass", not_mine="pass"),
        asm.ldx(B, R1, FP, NEXT_HEADER),
        asm.jne_imm(R1, NEXTHDR_IPV6, "pass"),  # End.DT6 judges what is not 6in6
        *rfc6040(ports_fd, slot, malformed="pass", drop="not_ect"),
        asm.label("pass"),
        asm.mov64_imm(R0, TC_ACT_OK),
        asm.exit_(),
        *_drop_not_ect(ports_fd, slot),
    ]


def encap_header(src: str, dst: str, flow_label: int) -> bytes:
    """The outer header `encap` pushes, with payload length 0 (the program
    writes the inner packet's length there per packet)."""
    if not 0 <= flow_label <= 0xFFFFF:
        raise ValueError(f"flow label {flow_label:#x} does not fit in 20 bits")
    return ((6 << 28 | flow_label).to_bytes(4, "big") + bytes([0, 0, NEXTHDR_IPV6,
            ENCAP_HOP_LIMIT]) + ipaddress.IPv6Address(src).packed
            + ipaddress.IPv6Address(dst).packed)


def encap_program(src: str, dst: str, flow_label: int, map_fd: int) -> list:
    """H.Encaps.Red-like: push an outer IPv6 header (next header 41) and reroute."""
    header = encap_header(src, dst, flow_label)
    build = [asm.st_imm(W, FP, HDR + i, _word(header[i:i + 4])) for i in range(0, 40, 4)]
    return [
        asm.mov64_reg(R6, R1),
        *build,
        # payload length = the inner packet (lwt xmit sees it from its IPv6
        # header); bpf_lwt_push_ip_encap leaves an IPv6 header as given
        asm.ldx(W, R1, R6, SKB_LEN),
        asm.endian(R1, 16, to_be=True),
        asm.stx(H, FP, R1, HDR + 4),
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, LWT_ENCAP_IP),
        asm.mov64_reg(R3, FP),
        asm.alu64_imm(asm.ADD, R3, HDR),
        asm.mov64_imm(R4, IP6_HLEN),
        asm.call(HELPER_LWT_PUSH_ENCAP),
        asm.jne_imm(R0, 0, "failed"),
        *count("encapsulated", map_fd),
        asm.mov64_imm(R0, BPF_LWT_REROUTE),
        asm.exit_(),
        asm.label("failed"),
        *count("drop_malformed", map_fd),
        asm.mov64_imm(R0, BPF_DROP),
        asm.exit_(),
    ]


def un(prefix: str, map_fd: int) -> bytes:
    return asm.assemble(un_program(prefix, map_fd))


def decap(prefix: str, map_fd: int, slot: int = 0, ports_fd: int = 0) -> bytes:
    return asm.assemble(decap_program(prefix, map_fd, slot, ports_fd))


def queue(q, ports_fd: int) -> bytes:
    return asm.assemble(queue_program(q, ports_fd))


def ecn_in(prefix: str, slot: int, ports_fd: int) -> bytes:
    return asm.assemble(ecn_in_program(prefix, slot, ports_fd))


def encap(src: str, dst: str, flow_label: int, map_fd: int) -> bytes:
    return asm.assemble(encap_program(src, dst, flow_label, map_fd))


def tag_digest(release: str | None = None) -> str:
    """The hash behind the kernel's program tag: SHA-256 from Linux 6.18 (the
    BPF signing series made the tag the first 8 bytes of the program's
    SHA-256 digest), SHA-1 before. `release` is `uname -r`, default this one."""
    release = platform.release() if release is None else release
    try:
        major, minor = (int(part) for part in release.split("-")[0].split(".")[:2])
    except ValueError:
        return "sha256"
    return "sha256" if (major, minor) >= (6, 18) else "sha1"


def tag(insns: bytes, digest: str | None = None) -> str:
    """The program tag the kernel computes (kernel/bpf/core.c,
    bpf_prog_calc_tag): a hash over the instructions as loaded, with the imm
    fields of a BPF_PSEUDO_MAP_FD ld_imm64 (and of its second slot) zeroed
    since fds differ per process; the first 8 bytes, in hex. `digest` is
    "sha256" or "sha1" (default: what this kernel uses, `tag_digest()`)."""
    digest = digest or tag_digest()
    out = []
    was_ld_map = False
    for insn in asm.decode(insns):
        if not was_ld_map and insn.code == asm.LD | DW | asm.IMM and insn.src == asm.PSEUDO_MAP_FD:
            was_ld_map = True
            insn = insn._replace(imm=0)
        elif was_ld_map and insn.code == 0 and insn.dst == 0 and insn.src == 0 and insn.off == 0:
            was_ld_map = False
            insn = insn._replace(imm=0)
        else:
            was_ld_map = False
        out.append(asm.encode(insn))
    return hashlib.new(digest, b"".join(out)).hexdigest()[:16]
