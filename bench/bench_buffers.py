"""Buffer registration benchmark: what it costs an endpoint to register a GiB buffer.

`twin traffic` waits for every QP's buffers before the first packet leaves: a receive
buffer of zeros at the destination, a filled source at the sender. Each way is timed in
a fresh process (as an endpoint registers into a fresh address space), round-robin, so
the noisy 2-core VM's drift hits every way alike:

    receive  bytearray   bytearray(n): calloc's pages, zeroed by one fault each, then
                         written (the endpoint before)
             mmap        a private anonymous mmap prefaulted by MADV_POPULATE_WRITE
                         (twin.mrc.buffer.GuardedBuffer now)
    send     mmap+fill   the mmap filled by doubling, one page fault per 4 KiB page
                         as the fill reaches it (the endpoint before)
             populate    prefaulted in one madvise, then filled (GuardedBuffer.filled now)

Medians (min-max) of seconds per registration, and new/old ratios per size.
Usage: .venv/bin/python bench/bench_buffers.py [--sizes 256M,1G,2G] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One registration in a fresh interpreter; prints its seconds. The "before" ways are
# the endpoint's previous code, kept here only to be measured against.
CHILD = r"""
import mmap, sys, time
sys.path.insert(0, {root!r})
from twin.mrc.buffer import GuardedBuffer
way, n = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
if way == "bytearray":
    raw = bytearray(n)
elif way == "mmap":
    GuardedBuffer(n)
elif way == "mmap+fill":
    raw = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    v = memoryview(raw)
    v[:1 << 16] = bytes(range(256)) * 256
    f = 1 << 16
    while f < n:
        k = min(f, n - f)
        v[f:f + k] = v[:k]
        f += k
elif way == "populate":
    GuardedBuffer.filled(n, 1)
print(time.perf_counter() - t)
"""
WAYS = {"receive": ("bytearray", "mmap"), "send": ("mmap+fill", "populate")}


def size_arg(text: str) -> list[int]:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    out = []
    for part in text.split(","):
        part = part.strip().upper()
        out.append(int(part[:-1]) * units[part[-1]] if part[-1] in units else int(part))
    return out


def once(way: str, n: int) -> float:
    r = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), way, str(n)],
                       capture_output=True, text=True, timeout=120, check=True)
    return float(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=size_arg, default=size_arg("256M,1G,2G"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    times: dict[tuple[str, int], list[float]] = {}
    for r in range(a.repeat):
        for n in a.sizes:
            for ways in WAYS.values():
                for way in (ways if r % 2 == 0 else ways[::-1]):
                    times.setdefault((way, n), []).append(once(way, n))
        print(f"repetition {r + 1}/{a.repeat} done", file=sys.stderr, flush=True)
    rows = []
    for n in a.sizes:
        for kind, (old, new) in WAYS.items():
            o, w = times[(old, n)], times[(new, n)]
            rows.append({"size": n, "kind": kind, "old": old, "new": new,
                         "old_s": o, "new_s": w,
                         "ratio": statistics.median(w) / statistics.median(o),
                         "pairwise": sorted(x / y for x, y in zip(w, o, strict=True))})
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0

    def fmt(xs: list[float]) -> str:
        return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
    print("| size | buffer | before, s | now, s | now / before (median; pairs min-max) |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        p = r["pairwise"]
        print(f"| {r['size'] / 2**20:,.0f} MiB | {r['kind']} | {r['old']}: {fmt(r['old_s'])} "
              f"| {r['new']}: {fmt(r['new_s'])} | {r['ratio']:.2f} ({p[0]:.2f}-{p[-1]:.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
