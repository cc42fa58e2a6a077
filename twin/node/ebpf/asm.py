"""A tiny eBPF assembler: instruction encoders, labels, `assemble() -> bytes`.

Pure Python, no toolchain: this is what lets a node program its SIDs inside a
container that has python3 and nothing else (no clang, no libbpf, no bpftool).

An instruction is one 8-byte `struct bpf_insn` (include/uapi/linux/bpf.h):

    code:8  dst_reg:4 src_reg:4  off:16 (signed)  imm:32 (signed)

`code` is class | size | mode for loads and stores, class | op | source for
ALU and jumps. `ld_imm64` (and `ld_map_fd`, its map-fd form) takes two slots.
The encoders return `Insn` tuples (or a pair of them); a jump's `off` may be a
label name, resolved by `assemble` to the distance from the next instruction:

    assemble([mov64_imm(R0, 0), jeq_imm(R1, 0, "out"), mov64_imm(R0, 2),
              label("out"), exit_()])

Naming follows the kernel's own macros (BPF_MOV64_IMM, BPF_LDX_MEM, ...) and
the verifier's disassembly (`r1 = *(u16 *)(r10 -48)`): registers are R0..R10,
R10 (`FP`) is the read-only frame pointer, sizes are B, H, W, DW.

Bytes come out in host order, which is what bpf() expects (the register
nibbles swap places on a big-endian host, as the C bitfields do).
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable
from typing import NamedTuple

R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, R10 = range(11)
FP = R10

# instruction classes
LD, LDX, ST, STX, ALU, JMP, JMP32, ALU64 = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
# sizes (load/store)
W, H, B, DW = 0x00, 0x08, 0x10, 0x18
SIZE_BYTES = {B: 1, H: 2, W: 4, DW: 8}
# modes (load/store)
IMM, MEM, ATOMIC = 0x00, 0x60, 0xC0
# source operand
K, X = 0x00, 0x08
# ALU operations
ADD, SUB, MUL, DIV, OR, AND, LSH, RSH = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
NEG, MOD, XOR, MOV, ARSH, END = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0
TO_LE, TO_BE = 0x00, 0x08  # BPF_END's source bit
# jump operations
JA, JEQ, JGT, JGE, JSET, JNE, JSGT, JSGE = 0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70
CALL, EXIT, JLT, JLE, JSLT, JSLE = 0x80, 0x90, 0xA0, 0xB0, 0xC0, 0xD0

PSEUDO_MAP_FD = 1  # ld_imm64 src_reg: imm is a map fd, the kernel swaps in the map

_INSN = struct.Struct("=BBhi")


class Insn(NamedTuple):
    code: int
    dst: int = 0
    src: int = 0
    off: int | str = 0  # a str is a label, for jumps
    imm: int = 0


class Label(NamedTuple):
    name: str


Item = Insn | Label | tuple[Insn, Insn]


class AsmError(ValueError):
    """A program that cannot be encoded: unknown or duplicate label, a field
    out of range."""


def label(name: str) -> Label:
    return Label(name)


# --- ALU -----------------------------------------------------------------

def alu64_imm(op: int, dst: int, imm: int) -> Insn:
    return Insn(ALU64 | op | K, dst, 0, 0, imm)


def alu64_reg(op: int, dst: int, src: int) -> Insn:
    return Insn(ALU64 | op | X, dst, src)


def alu32_imm(op: int, dst: int, imm: int) -> Insn:
    return Insn(ALU | op | K, dst, 0, 0, imm)


def alu32_reg(op: int, dst: int, src: int) -> Insn:
    return Insn(ALU | op | X, dst, src)


def mov64_imm(dst: int, imm: int) -> Insn:
    return alu64_imm(MOV, dst, imm)


def mov64_reg(dst: int, src: int) -> Insn:
    return alu64_reg(MOV, dst, src)


def mov32_imm(dst: int, imm: int) -> Insn:
    return alu32_imm(MOV, dst, imm)


def mov32_reg(dst: int, src: int) -> Insn:
    return alu32_reg(MOV, dst, src)


def endian(dst: int, bits: int, to_be: bool = True) -> Insn:
    """`dst = be16/be32/be64 dst` (or le*): convert the low `bits` of dst
    between host and big (or little) endian, zeroing the rest."""
    if bits not in (16, 32, 64):
        raise AsmError(f"endian: bits must be 16, 32 or 64, not {bits}")
    return Insn(ALU | END | (TO_BE if to_be else TO_LE), dst, 0, 0, bits)


# --- loads and stores ----------------------------------------------------

def ldx(size: int, dst: int, src: int, off: int) -> Insn:
    """dst = *(size *)(src + off)"""
    return Insn(LDX | size | MEM, dst, src, off)


def stx(size: int, dst: int, src: int, off: int) -> Insn:
    """*(size *)(dst + off) = src"""
    return Insn(STX | size | MEM, dst, src, off)


def st_imm(size: int, dst: int, off: int, imm: int) -> Insn:
    """*(size *)(dst + off) = imm"""
    return Insn(ST | size | MEM, dst, 0, off, imm)


def atomic_add(size: int, dst: int, src: int, off: int) -> Insn:
    """lock *(size *)(dst + off) += src (W or DW only)"""
    return Insn(STX | size | ATOMIC, dst, src, off, ADD)


def ld_imm64(dst: int, imm: int, src: int = 0) -> tuple[Insn, Insn]:
    """dst = imm (64 bits, two slots)."""
    imm &= (1 << 64) - 1
    lo, hi = imm & 0xFFFFFFFF, imm >> 32
    return (Insn(LD | DW | IMM, dst, src, 0, _s32(lo)), Insn(0, 0, 0, 0, _s32(hi)))


def ld_map_fd(dst: int, map_fd: int) -> tuple[Insn, Insn]:
    """dst = the map behind `map_fd` (BPF_PSEUDO_MAP_FD: the verifier swaps the
    fd for the map's address; the program tag hashes it as 0)."""
    return ld_imm64(dst, map_fd, PSEUDO_MAP_FD)


# --- jumps ---------------------------------------------------------------

def ja(target: int | str) -> Insn:
    return Insn(JMP | JA, 0, 0, target)


def jmp_imm(op: int, dst: int, imm: int, target: int | str) -> Insn:
    """if dst <op> imm goto target (64-bit compare, imm sign-extended)"""
    return Insn(JMP | op | K, dst, 0, target, imm)


def jmp_reg(op: int, dst: int, src: int, target: int | str) -> Insn:
    return Insn(JMP | op | X, dst, src, target)


def jmp32_imm(op: int, dst: int, imm: int, target: int | str) -> Insn:
    """if (u32)dst <op> (u32)imm goto target: compares the low 32 bits, so an
    imm with its top bit set needs no sign-extension care."""
    return Insn(JMP32 | op | K, dst, 0, target, imm)


def jeq_imm(dst: int, imm: int, target: int | str) -> Insn:
    return jmp_imm(JEQ, dst, imm, target)


def jne_imm(dst: int, imm: int, target: int | str) -> Insn:
    return jmp_imm(JNE, dst, imm, target)


def call(helper: int) -> Insn:
    """Call a kernel helper by its number (enum bpf_func_id)."""
    return Insn(JMP | CALL, 0, 0, 0, helper)


def exit_() -> Insn:
    return Insn(JMP | EXIT)


# --- assembly ------------------------------------------------------------

def _s32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def flatten(items: Iterable[Item | Iterable[Item]]) -> list[Insn | Label]:
    out: list[Insn | Label] = []
    for item in items:
        if isinstance(item, Insn | Label):
            out.append(item)
        else:
            out.extend(flatten(item))
    return out


def resolve(items: Iterable[Item | Iterable[Item]]) -> list[Insn]:
    """Drop labels and turn label jump targets into relative offsets."""
    flat = flatten(items)
    where: dict[str, int] = {}
    pc = 0
    for item in flat:
        if isinstance(item, Label):
            if item.name in where:
                raise AsmError(f"label {item.name!r} defined twice")
            where[item.name] = pc
        else:
            pc += 1
    out: list[Insn] = []
    for item in flat:
        if isinstance(item, Label):
            continue
        if isinstance(item.off, str):
            if item.off not in where:
                raise AsmError(f"jump to undefined label {item.off!r}")
            item = item._replace(off=where[item.off] - (len(out) + 1))
        out.append(item)
    return out


def encode(insn: Insn) -> bytes:
    code, dst, src, off, imm = insn
    if not (0 <= dst <= 10 and 0 <= src <= 15):
        raise AsmError(f"register out of range in {insn}")
    if isinstance(off, str) or not -0x8000 <= off <= 0x7FFF:
        raise AsmError(f"offset out of range in {insn}")
    if not -0x80000000 <= imm <= 0xFFFFFFFF:
        raise AsmError(f"immediate out of range in {insn}")
    regs = (src << 4 | dst) if sys.byteorder == "little" else (dst << 4 | src)
    return _INSN.pack(code, regs, off, _s32(imm))


def assemble(items: Iterable[Item | Iterable[Item]]) -> bytes:
    """The program as bpf() takes it: 8 bytes per instruction slot."""
    return b"".join(encode(insn) for insn in resolve(items))


def decode(insns: bytes) -> list[Insn]:
    """The inverse of `assemble` (labels gone): for tests and the tag."""
    if len(insns) % 8:
        raise AsmError(f"{len(insns)} bytes is not a whole number of instructions")
    out = []
    for code, regs, off, imm in _INSN.iter_unpack(insns):
        if sys.byteorder == "little":
            dst, src = regs & 0xF, regs >> 4
        else:
            dst, src = regs >> 4, regs & 0xF
        out.append(Insn(code, dst, src, off, imm))
    return out
