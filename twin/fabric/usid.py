"""Structured uSID allocation for F3216 (32-bit block, 16-bit micro-SIDs).

Every switch and every host port owns one 16-bit uSID whose bits show its
place, so a path is computed by formula, never looked up:

    bits 15..12  plane        (0-15)
    bits 11..8   role         1 = T0, 2 = T1, 3 = host port
    bits  7..0   index        T0: rack, T1: spine number, host port: host number

    plane 2, T1 number 1       -> 0x2201
    plane 0, T0 of rack 3      -> 0x0103
    plane 7, port of host 5    -> 0x7305

The role nibble is never 0, so no uSID is 0x0000 (the end-of-carrier marker).
A uSID `u` owns the locator `<block>:u::/48`. Its link-local address on every
fabric interface is `fe80::u`, which makes next hops readable and fixed:
`via fe80::2201` is "towards T1 number 1 of plane 2".
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

MAX_USIDS = 6  # 128 - 32 bits of block leaves room for six 16-bit uSIDs


class Role(IntEnum):
    T0 = 1
    T1 = 2
    PORT = 3


@dataclass(frozen=True)
class USid:
    plane: int
    role: Role
    index: int

    @property
    def value(self) -> int:
        return (self.plane << 12) | (int(self.role) << 8) | self.index

    @classmethod
    def decode(cls, value: int) -> USid:
        role = (value >> 8) & 0xF
        if role not in Role._value2member_map_:
            raise ValueError(f"uSID {value:04x} has no known role nibble ({role:x})")
        return cls(plane=value >> 12, role=Role(role), index=value & 0xFF)

    def __str__(self) -> str:
        return f"{self.value:x}"


def t0(plane: int, rack: int) -> USid:
    return USid(plane, Role.T0, rack)


def t1(plane: int, spine: int) -> USid:
    return USid(plane, Role.T1, spine)


def port(plane: int, host: int) -> USid:
    return USid(plane, Role.PORT, host)


def locator(block: ipaddress.IPv6Network, sid: USid) -> ipaddress.IPv6Network:
    """The /48 a uSID owns inside the block."""
    base = int(block.network_address) | (sid.value << 80)
    return ipaddress.IPv6Network((base, 48))


def program(block: ipaddress.IPv6Network, sids: Sequence[USid]) -> ipaddress.IPv6Address:
    """A uSID program: block, then one uSID per hop, zero-filled (`block:a:b:c::`)."""
    if not 1 <= len(sids) <= MAX_USIDS:
        raise ValueError(f"a uSID program holds 1 to {MAX_USIDS} uSIDs, not {len(sids)}")
    return ipaddress.IPv6Address(program_value(int(block.network_address),
                                               [s.value for s in sids]))


def program_value(block: int, values: Sequence[int]) -> int:
    """`program` as an integer, from the block's network address and the uSIDs' values
    (unchecked: for callers that build many programs from uSIDs they made)."""
    value = block
    shift = 80
    for v in values:
        value |= v << shift
        shift -= 16
    return value


def parse_program(block: ipaddress.IPv6Network, addr: ipaddress.IPv6Address) -> list[USid]:
    """Inverse of `program`: the uSIDs carried in an address, up to end-of-carrier."""
    if addr not in block:
        raise ValueError(f"{addr} is not inside the uSID block {block}")
    value = int(addr)
    sids = []
    for i in range(MAX_USIDS):
        word = (value >> (80 - 16 * i)) & 0xFFFF
        if word == 0:
            break
        sids.append(USid.decode(word))
    return sids


def link_local(sid: USid) -> str:
    return f"fe80::{sid.value:x}"
