"""Quantities people type, parsed once: sizes in bytes and rates in bit/s; and shown
to people (show_bytes, show_rate, show_count) in the CLI's tables.

    sizes   64M, 256MiB, 1G, 4096: K/M/G are powers of 1024 (as RDMA buffers are)
    rates   100mbit, 10gbit: tc's units, powers of 1000

The parsers return None for text that is not one; the caller names the option or
key path in its error.
"""

from __future__ import annotations

import math
import re

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
RATE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)$", re.IGNORECASE)
RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}


def parse_size(text: str) -> int | None:
    """Bytes, from `256M`, `256MiB`, `1g`, `4096`; None if it is not a finite size.
    (Zero and negative sizes parse: whether they are allowed is the caller's rule.)"""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in SIZE_UNITS else (t, "")
    try:
        value = float(num) * SIZE_UNITS[unit]
    except ValueError:
        return None
    return int(value) if math.isfinite(value) else None


def parse_rate(text: str) -> int | None:
    """bit/s, from tc's `100mbit`, `10gbit`; None unless it is a positive rate."""
    m = RATE_RE.match(text.strip())
    if not m:
        return None
    bps = int(float(m.group(1)) * RATE_UNITS[m.group(2).lower()])
    return bps if bps > 0 else None


DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*(us|µs|ms|s)$")
DURATION_NS = {"us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_duration_ns(text: str) -> int | None:
    """Nanoseconds, from `300ms`, `1.5s`, `250us`; None unless it is one (a unit is
    required: a bare number could be any of them)."""
    m = DURATION_RE.match(text.strip())
    if not m:
        return None
    return int(float(m.group(1)) * DURATION_NS[m.group(2)])


def show_duration(ns: int) -> str:
    """The inverse, for messages: 300ms, 1.5s, 250us."""
    if ns % 1_000_000_000 == 0 or ns >= 10_000_000_000:
        return f"{ns / 1e9:g}s"
    if ns % 1_000_000 == 0 or ns >= 1_000_000:
        return f"{ns / 1e6:g}ms"
    return f"{ns / 1e3:g}us"


# -- for tables people read (the CLI's); --json keeps the raw numbers ----------------

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
SI_PREFIXES = ("", "k", "M", "G", "T", "P")


def _scaled(value: float, base: int, units: tuple[str, ...]) -> str:
    """`value` in the largest unit that keeps it under 1000, to three significant
    digits: 64, 67.1, 4.29 (1000 to 1023 KiB reads 0.98 MiB, never 1e+03)."""
    for unit in units[:-1]:
        if abs(value) < 999.5:
            return f"{value:.3g} {unit}".rstrip()
        value /= base
    return f"{value:,.3g} {units[-1]}" if abs(value) < 999.5 else f"{value:,.0f} {units[-1]}"


def show_bytes(n: int) -> str:
    """A byte count as people read one: 0 B, 512 B, 64 MiB, 1.5 GiB (powers of 1024,
    as parse_size reads them)."""
    if abs(n) < 1024:
        return f"{n} B"
    return _scaled(n / 1024, 1024, BYTE_UNITS[1:])


def show_rate(bps: float) -> str:
    """bit/s as people read them: 100 Mbit/s, 2.4 Gbit/s (powers of 1000, as tc's)."""
    return _scaled(bps, 1000, tuple(f"{p}bit/s" for p in SI_PREFIXES))


def show_count(n: int) -> str:
    """A count, short: 999, 12.3 k, 4.29 G (the exact one is f"{n:,}")."""
    return _scaled(n, 1000, SI_PREFIXES) if abs(n) >= 1000 else str(n)
