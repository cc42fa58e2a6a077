"""Registered memory with guard bytes: a buffer the endpoint can prove it stayed inside.

Every buffer the endpoint registers (a receiving QP's destination, a sending QP's
source) is the middle of one allocation:

    [ guard: GUARD_BYTES of GUARD_PATTERN ][ the buffer: size bytes ][ guard ]

`view` is a memoryview of the middle only. The datapath places and reads through it
exactly as it did through a bytearray (slices, `len`, hashing), and a slice of a
memoryview cannot reach past its ends, so a bounds bug shows as an exception, not as
a silent write next door. `intact()` checks both guards still hold their pattern: the
`guards` control op reports it, so a test (the fuzzer) can assert no write ever left
a buffer.

Placement through the view costs what it cost through the bytearray: slice
assignment on a memoryview copies into the existing memory, no new object per packet.

A receive buffer is a bytearray, zeroed (so every page is touched) when it is
registered: placement then never takes a page fault. A send buffer (`fill`) is an
anonymous mmap, whose pages the fill itself touches: zeroing them first would touch
every page twice, and the kernel's page zeroing is most of what a GiB buffer costs
(2 GiB: about 2 s here as a bytearray, about half that as an mmap filled once).

Only the standard library: the endpoint imports this inside a host's namespace.
"""

from __future__ import annotations

import mmap
import random

GUARD_BYTES = 4096  # a page each side: a stray write of up to one payload lands in it
GUARD_PATTERN = bytes.fromhex("deadbeef") * (GUARD_BYTES // 4)  # not zeros: placed data is


class GuardedBuffer:
    """`size` usable bytes between two guard regions; `view` is the usable part."""

    __slots__ = ("_raw", "view", "size")

    def __init__(self, size: int, *, zeroed: bool = True):
        """zeroed: a receive buffer's zeros, every page touched now; else a send
        buffer's anonymous memory, to be filled (`filled`)."""
        if size < 0:
            raise ValueError(f"a buffer size is at least 0, got {size}")
        self.size = size
        total = GUARD_BYTES + size + GUARD_BYTES
        self._raw = bytearray(total) if zeroed else mmap.mmap(
            -1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # not shmem
        self._raw[:GUARD_BYTES] = GUARD_PATTERN
        self._raw[GUARD_BYTES + size:] = GUARD_PATTERN
        self.view = memoryview(self._raw)[GUARD_BYTES:GUARD_BYTES + size]

    def intact(self) -> bool:
        """Both guards still hold their pattern: nothing was written outside the view."""
        raw = self._raw
        return raw[:GUARD_BYTES] == GUARD_PATTERN and raw[-GUARD_BYTES:] == GUARD_PATTERN

    @classmethod
    def filled(cls, size: int, seed) -> GuardedBuffer:
        """A send buffer holding `fill(seed)`'s bytes, its pages touched once."""
        buf = cls(size, zeroed=False)
        buf.fill(seed)
        return buf

    def fill(self, seed) -> None:
        """Seeded random bytes (a sending QP's source), built by doubling: memmove, not
        a Python loop per byte."""
        view, size = self.view, self.size
        block = random.Random(seed).randbytes(min(size, 1 << 16))
        view[:len(block)] = block
        filled = len(block)
        while filled < size:
            n = min(filled, size - filled)
            view[filled:filled + n] = view[:n]
            filled += n
