"""The three programs, generated per node: uN, decap and encap.

One generator per program; a node's SID (or its encap header) goes in as
immediate constants when the program is built, so there is no per-node build
step and no map to fill before the first packet. Builders are pure and return
the instruction bytes for `bpf.prog_load`; `tag()` says which tag the kernel
will show for them (`tc -j filter show`), which is what verify compares.

    un(prefix, map_fd)      TC ingress, every switch port: next-csid uN (F3216)
    decap(prefix, map_fd)   TC ingress, a host port: End.DT6-like decap of 6in6
    encap(src, dst, flow_label, map_fd)
                            lwt xmit route: H.Encaps.Red-like outer IPv6 header

Every program counts into one per-CPU array (u32 index -> u64), in the fixed
order of COUNTERS; the programs of one node share it.

Stack layout (r10 = FP, every access aligned to its size, as the verifier
requires of the stack):

    fp-40 .. fp-1   the 40-byte IPv6 header (read from the packet, or built)
                    so its DA is fp-16 .. fp-1 and the hop limit is fp-33
    fp-48 .. fp-47  the ethertype
    fp-52 .. fp-49  the counter index (the map key)

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
from .asm import DW, FP, R0, R1, R2, R3, R4, R5, R6, B, H, W

COUNTERS = ("shifted", "decapsulated", "encapsulated", "drop_malformed",
            "drop_end_of_carrier", "drop_not_ipv6_in_ipv6", "hop_limit_expired")

# program types, helpers and return codes (include/uapi/linux/bpf.h, pkt_cls.h)
PROG_TYPE_SCHED_CLS, PROG_TYPE_LWT_XMIT = 3, 12
HELPER_MAP_LOOKUP_ELEM, HELPER_SKB_STORE_BYTES, HELPER_SKB_LOAD_BYTES = 1, 9, 26
HELPER_SKB_ADJUST_ROOM, HELPER_LWT_PUSH_ENCAP = 50, 73
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

NAMES = {"uN": "mrc_un", "decap": "mrc_decap", "encap": "mrc_encap"}  # bpf prog_name


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


def decap_program(prefix: str, map_fd: int) -> list:
    """Decap of IPv6-in-IPv6 addressed to a host port's SID (End.DT6-like)."""
    mine = sid_prefix(prefix)
    return [
        asm.mov64_reg(R6, R1),
        *_ipv6_to(mine, not_ipv6="pass", malformed="malformed", not_mine="pass"),
        asm.ldx(B, R1, FP, NEXT_HEADER),
        asm.jne_imm(R1, NEXTHDR_IPV6, "not_6in6"),
        asm.ldx(W, R1, R6, SKB_LEN),
        asm.jmp_imm(asm.JLT, R1, ETH_HLEN + 2 * IP6_HLEN, "malformed"),
        asm.mov64_reg(R1, R6),
        asm.mov64_imm(R2, -IP6_HLEN),
        asm.mov64_imm(R3, ADJ_ROOM_MAC),
        asm.mov64_imm(R4, F_ADJ_ROOM_FIXED_GSO),
        asm.call(HELPER_SKB_ADJUST_ROOM),
        asm.jne_imm(R0, 0, "malformed"),
        *count("decapsulated", map_fd),
        *_finish(map_fd, not_6in6="drop_not_ipv6_in_ipv6", malformed="drop_malformed"),
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


def decap(prefix: str, map_fd: int) -> bytes:
    return asm.assemble(decap_program(prefix, map_fd))


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
