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

Both kinds are a private anonymous mmap whose pages are faulted in at registration,
with one `madvise(MADV_POPULATE_WRITE)` (Linux 5.14+; older kernels: one write per
page), so placement and sending never take a page fault. A receive buffer is then all
zeros; a send buffer is filled (`filled`). The kernel's page zeroing is most of what a
GiB buffer costs, and faulting the pages in one call, not one fault per 4 KiB page,
roughly halves it (bench/bench_buffers.py).

Only the standard library: the endpoint imports this inside a host's namespace.
"""

from __future__ import annotations

import mmap
import random

GUARD_BYTES = 4096  # a page each side: a stray write of up to one payload lands in it
GUARD_PATTERN = bytes.fromhex("deadbeef") * (GUARD_BYTES // 4)  # not zeros: placed data is


MADV_POPULATE_WRITE = 23  # Linux 5.14+; the mmap module names it from Python 3.13 only
PAGE = mmap.PAGESIZE


def prefault(raw: mmap.mmap) -> str:
    """Fault every page of a fresh private anonymous mapping in now, writable; how:
    "populate" (one madvise) or "touch" (one write per page, where the kernel is older)."""
    try:
        raw.madvise(MADV_POPULATE_WRITE)
        return "populate"
    except OSError:  # EINVAL: a kernel before 5.14
        raw[::PAGE] = bytes(len(range(0, len(raw), PAGE)))  # zeros: the pages' own value
        return "touch"


class GuardedBuffer:
    """`size` usable bytes between two guard regions; `view` is the usable part."""

    __slots__ = ("_raw", "view", "size")

    def __init__(self, size: int):
        """`size` bytes of zeros, every page already faulted in."""
        if size < 0:
            raise ValueError(f"a buffer size is at least 0, got {size}")
        self.size = size
        total = GUARD_BYTES + size + GUARD_BYTES
        # private, not Python's default shared (shmem-backed) anonymous mapping
        self._raw = mmap.mmap(-1, total, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        prefault(self._raw)
        self._raw[:GUARD_BYTES] = GUARD_PATTERN
        self._raw[GUARD_BYTES + size:] = GUARD_PATTERN
        self.view = memoryview(self._raw)[GUARD_BYTES:GUARD_BYTES + size]

    def intact(self) -> bool:
        """Both guards still hold their pattern: nothing was written outside the view."""
        raw = self._raw
        return raw[:GUARD_BYTES] == GUARD_PATTERN and raw[-GUARD_BYTES:] == GUARD_PATTERN

    @classmethod
    def filled(cls, size: int, seed) -> GuardedBuffer:
        """A send buffer holding `fill(seed)`'s bytes."""
        buf = cls(size)
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
