"""The eBPF data plane without root: the assembler's encodings, the program
tag, the netlink messages and the per-CPU count, all pure.

Expected bytes are written out by hand from the kernel's `struct bpf_insn`
(code, dst:4 | src:4 << 4, s16 off, s32 imm; little-endian) and the opcode
table of Documentation/bpf/standardization/instruction-set.rst; the comment
beside each is the verifier's disassembly of it."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from twin.node.ebpf import asm, bpf, netlink, programs
from twin.node.ebpf.asm import DW, FP, R0, R1, R2, R6, B, H, W

pytestmark = pytest.mark.skipif(sys.byteorder != "little",
                                reason="expected bytes are written for little-endian hosts")

SID = "fcbb:bb00:100::/48"


@pytest.mark.parametrize("insn, expected", [
    (asm.mov64_imm(R0, 0), "b700000000000000"),  # r0 = 0
    (asm.mov64_reg(R6, R1), "bf16000000000000"),  # r6 = r1
    (asm.alu64_imm(asm.ADD, R2, -52), "07020000ccffffff"),  # r2 += -52
    (asm.alu64_imm(asm.RSH, R1, 4), "7701000004000000"),  # r1 >>= 4
    (asm.mov32_imm(R1, 7), "b401000007000000"),  # w1 = 7
    (asm.ldx(H, R1, FP, -48), "69a1d0ff00000000"),  # r1 = *(u16 *)(r10 - 48)
    (asm.ldx(B, R1, FP, -33), "71a1dfff00000000"),  # r1 = *(u8 *)(r10 - 33)
    (asm.ldx(W, R1, R6, 0), "6161000000000000"),  # r1 = *(u32 *)(r6 + 0)
    (asm.ldx(DW, R1, R0, 0), "7901000000000000"),  # r1 = *(u64 *)(r0 + 0)
    (asm.stx(DW, R0, R1, 0), "7b10000000000000"),  # *(u64 *)(r0 + 0) = r1
    (asm.stx(H, FP, R1, -12), "6b1af4ff00000000"),  # *(u16 *)(r10 - 12) = r1
    (asm.st_imm(W, FP, -52, 3), "620accff03000000"),  # *(u32 *)(r10 - 52) = 3
    (asm.atomic_add(DW, R0, R1, 0), "db10000000000000"),  # lock *(u64 *)(r0 + 0) += r1
    (asm.endian(R1, 16), "dc01000010000000"),  # r1 = be16 r1
    (asm.endian(R1, 32, to_be=False), "d401000020000000"),  # r1 = le32 r1
    (asm.call(26), "850000001a000000"),  # call bpf_skb_load_bytes
    (asm.exit_(), "9500000000000000"),  # exit
    (asm.jne_imm(R0, 0, 5), "5500050000000000"),  # if r0 != 0 goto +5
    (asm.jmp_imm(asm.JGT, R1, 1, -2), "2501feff01000000"),  # if r1 > 1 goto -2
    (asm.jmp32_imm(asm.JNE, R1, -1, 1), "56010100ffffffff"),  # if w1 != -1 goto +1
    (asm.ja(0), "0500000000000000"),  # goto +0
])
def test_encodes_known_instructions(insn, expected):
    assert asm.assemble([insn]).hex() == expected


def test_ld_imm64_takes_two_slots():
    assert asm.assemble([asm.ld_imm64(R1, 0x1122334455667788)]).hex() == \
        "1801000088776655" "0000000044332211"
    # a map fd: src_reg 1 (BPF_PSEUDO_MAP_FD), the fd in the first imm
    assert asm.assemble([asm.ld_map_fd(R1, 5)]).hex() == "1811000005000000" + "00" * 8


def test_labels_resolve_forward_and_back():
    code = asm.assemble([
        asm.label("top"),
        asm.jeq_imm(R1, 0, "out"),  # pc 0 -> 3: +2
        asm.ld_imm64(R2, 1),  # pcs 1-2
        asm.ja("top"),  # pc 3 -> 0: -4
        asm.label("out"),
        asm.exit_(),
    ])
    offsets = [off for _, _, off, _ in struct.iter_unpack("<BBhi", code)]
    assert offsets == [3, 0, 0, -4, 0]
    assert [insn.off for insn in asm.decode(code)] == offsets


def test_assembler_refuses_bad_programs():
    with pytest.raises(asm.AsmError, match="undefined label 'nowhere'"):
        asm.assemble([asm.ja("nowhere")])
    with pytest.raises(asm.AsmError, match="defined twice"):
        asm.assemble([asm.label("x"), asm.label("x"), asm.exit_()])
    with pytest.raises(asm.AsmError, match="offset out of range"):
        asm.assemble([asm.ja(1 << 15)])
    with pytest.raises(asm.AsmError):
        asm.decode(b"\0" * 7)


def test_decode_inverts_assemble():
    code = programs.un(SID, 9)
    assert asm.assemble(asm.decode(code)) == code


def test_tag_is_deterministic_and_differs_per_sid():
    assert programs.tag(programs.un(SID, 3)) == programs.tag(programs.un(SID, 3))
    assert programs.tag(programs.un(SID, 3)) != programs.tag(programs.un("fcbb:bb00:200::/48", 3))
    assert programs.tag(programs.decap(SID, 3)) != programs.tag(programs.un(SID, 3))
    # the map fd differs per process; the kernel hashes it as 0
    assert programs.tag(programs.un(SID, 3)) == programs.tag(programs.un(SID, 250))
    assert programs.un(SID, 3) != programs.un(SID, 250)


def test_tag_hashes_the_program_with_map_fds_zeroed():
    code = asm.assemble([asm.ld_map_fd(R1, 7), asm.mov64_imm(R0, 0), asm.exit_()])
    zeroed = asm.assemble([asm.ld_map_fd(R1, 0), asm.mov64_imm(R0, 0), asm.exit_()])
    assert programs.tag(code, "sha256") == hashlib.sha256(zeroed).hexdigest()[:16]
    assert programs.tag(code, "sha1") == hashlib.sha1(zeroed).hexdigest()[:16]
    # a plain ld_imm64 keeps its value
    plain = asm.assemble([asm.ld_imm64(R1, 7), asm.mov64_imm(R0, 0), asm.exit_()])
    assert programs.tag(plain, "sha256") == hashlib.sha256(plain).hexdigest()[:16]


@pytest.mark.parametrize("release, digest", [
    ("6.18.44-fc-v1252", "sha256"), ("6.19.0", "sha256"), ("7.0.1", "sha256"),
    ("6.17.9-arch1", "sha1"), ("6.1.0-28-amd64", "sha1"), ("5.15.167.4-microsoft-standard-WSL2",
                                                           "sha1"),
])
def test_tag_digest_follows_the_kernel_release(release, digest):
    assert programs.tag_digest(release) == digest


def test_counters_are_in_the_agreed_order():
    assert programs.COUNTERS == ("shifted", "decapsulated", "encapsulated", "drop_malformed",
                                 "drop_end_of_carrier", "drop_not_ipv6_in_ipv6",
                                 "hop_limit_expired")


def test_sid_prefix_wants_a_48():
    assert programs.sid_prefix("fcbb:bb00:100::/48") == bytes.fromhex("fcbbbb000100")
    assert programs.sid_prefix("fcbb:bb00:100::") == bytes.fromhex("fcbbbb000100")
    with pytest.raises(ValueError, match="/48"):
        programs.sid_prefix("fcbb:bb00::/32")


def test_encap_header_is_the_outer_ipv6_header():
    # built independently: version 6 / traffic class 0 / flow label, payload
    # length 0 (set per packet), next header 41, hop limit 64, src, dst
    expected = struct.pack("!IHBB", 6 << 28 | 0xABCDE, 0, 41, 64) \
        + bytes.fromhex("fd000000000000000000000000000001") \
        + bytes.fromhex("fcbbbb00010002000300000000000000")
    assert programs.encap_header("fd00::1", "fcbb:bb00:100:200:300::", 0xABCDE) == expected
    with pytest.raises(ValueError, match="20 bits"):
        programs.encap_header("fd00::1", "fcbb:bb00:100::", 1 << 20)


def test_programs_carry_the_sid_as_immediates():
    # the 4 + 2 bytes of the prefix appear as compare immediates, as the
    # s32 a little-endian load of those bytes gives (this one negative)
    imms = {insn.imm for insn in asm.decode(programs.un("fcbb:bb80:0a0b::/48", 3))}
    assert struct.unpack("<i", bytes.fromhex("fcbbbb80")) == (-0x7F444404,)
    assert -0x7F444404 in imms
    assert struct.unpack("<H", bytes.fromhex("0a0b"))[0] in imms


def test_possible_cpus_counts_ranges():
    assert bpf.possible_cpus("0-1\n") == 2
    assert bpf.possible_cpus("0\n") == 1
    assert bpf.possible_cpus("0,2-5,7\n") == 6


def _attrs(raw: bytes) -> dict[int, bytes]:
    out, offset = {}, 0
    while offset + 4 <= len(raw):
        length, kind = struct.unpack_from("=HH", raw, offset)
        out[kind & 0x3FFF] = raw[offset + 4: offset + length]
        offset += (length + 3) & ~3
    return out


def test_filter_message_is_a_direct_action_bpf_filter():
    msg = netlink.filter_msg(7, prog_fd=12, name="mrc-un fcbb:bb00:100::/48")
    length, kind, flags = struct.unpack_from("=IHH", msg)
    assert (length, kind) == (len(msg), netlink.RTM_NEWTFILTER)
    assert flags & netlink.NLM_F_ACK and flags & netlink.NLM_F_CREATE
    family, index, handle, parent, info = struct.unpack_from("=BxxxiIII", msg, 16)
    # tc's own: parent ffff:fff2 (clsact ingress), pref 100, protocol all (0x0003, big-endian)
    assert (index, handle, parent) == (7, 1, 0xFFFFFFF2)
    assert info == (100 << 16 | int.from_bytes(b"\x00\x03", sys.byteorder))
    attrs = _attrs(msg[36:])
    assert attrs[netlink.TCA_KIND] == b"bpf\0"
    options = _attrs(attrs[netlink.TCA_OPTIONS])
    assert struct.unpack("=I", options[netlink.TCA_BPF_FD]) == (12,)
    assert options[netlink.TCA_BPF_NAME] == b"mrc-un fcbb:bb00:100::/48\0"
    assert struct.unpack("=I", options[netlink.TCA_BPF_FLAGS]) == (1,)
    assert struct.unpack_from("=H", netlink.filter_msg(7, None), 4) == (netlink.RTM_DELTFILTER,)


def test_route_message_is_an_lwt_bpf_xmit_route():
    msg = netlink.route_msg("fd00::2", 3, prog_fd=9, name="mrc-encap fcbb:bb00:100::")
    assert struct.unpack_from("=H", msg, 4) == (netlink.RTM_NEWROUTE,)
    family, dst_len, _, _, table, proto, scope, rtype = struct.unpack_from("=8B", msg, 16)
    assert (family, dst_len, table, proto, rtype) == (10, 128, 254, 4, 1)
    attrs = _attrs(msg[28:])
    assert attrs[netlink.RTA_DST] == bytes.fromhex("fd00" + "00" * 13 + "02")
    assert struct.unpack("=I", attrs[netlink.RTA_OIF]) == (3,)
    assert struct.unpack("=H", attrs[netlink.RTA_ENCAP_TYPE][:2]) == (netlink.LWTUNNEL_ENCAP_BPF,)
    encap = _attrs(attrs[netlink.RTA_ENCAP])
    assert struct.unpack("=I", encap[netlink.LWT_BPF_XMIT_HEADROOM]) == (40,)
    xmit = _attrs(encap[netlink.LWT_BPF_XMIT])
    assert struct.unpack("=I", xmit[netlink.LWT_BPF_PROG_FD]) == (9,)
    assert xmit[netlink.LWT_BPF_PROG_NAME] == b"mrc-encap fcbb:bb00:100::\0"


def test_extack_text_is_read_from_an_error():
    # an NLMSG_ERROR with NETLINK_CAP_ACK: header, error, echoed header, then TLVs
    text = b"Parent Qdisc doesn't exists.\0"
    tlv = struct.pack("=HH", 4 + len(text), netlink.NLMSGERR_ATTR_MSG) + text
    msg = struct.pack("=IHHII", 0, 2, netlink.NLM_F_ACK_TLVS, 1, 0) + struct.pack("=i", -22) \
        + b"\0" * 16 + tlv + b"\0" * (-len(tlv) % 4)
    assert netlink._extack(msg, netlink.NLM_F_ACK_TLVS) == "Parent Qdisc doesn't exists."
    assert netlink._extack(msg, 0) == ""


def test_the_package_runs_on_the_standard_library_alone():
    # node images have python3 and no pip packages: import the package on its
    # own (as top-level `ebpf`, relative imports), without site-packages (-S)
    pkg = Path(__file__).resolve().parents[2] / "twin" / "node" / "ebpf"
    code = (f"import sys; sys.path.insert(0, {str(pkg.parent)!r}); "
            "import ebpf, ebpf.__main__; "
            "print(sorted(name for name in sys.modules if name.split('.')[0] "
            "not in sys.stdlib_module_names and name.split('.')[0] not in ('ebpf', '__main__')))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
