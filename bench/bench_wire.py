"""Wire-format micro-benchmark: packets/s to build and to decode an MRC data packet.

Side by side, for a 4096-byte payload (and a 64-byte one, where header work is not hidden
behind the crc32):

    build   naive      struct.pack with format strings per header, inet_pton per packet,
                       bytes concatenation, crc32 over the concatenated body
            generic    twin.mrc.wire.frame(..., encode_data(...)): precompiled structs,
                       header by header (the reference encoder)
            template   DataTemplate.build: one pack, cached IPv6/UDP headers, one join
    decode  naive      struct.unpack with format strings on slices, crc32 over a slice copy
            decode     twin.mrc.wire.decode (UDP payload -> DataPacket, payload not copied)
    crc32   zlib.crc32 of the ICRC span alone: the floor under both columns

Every implementation is checked against the others before it is timed. Variants run
round-robin, best of --rounds, because the 2-core machine is noisy. Pure CPU: no sockets,
no root. Usage: .venv/bin/python bench/bench_wire.py [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import struct
import sys
import time
import zlib
from collections.abc import Callable

from twin.mrc import wire as W

NIC_A, NIC_B = "fd00:4d52:43::1", "fd00:4d52:43:1::2"
PATH = "fcbb:bb00:100:201:101:302::"
EV, QP, RKEY = 0x12345678, 0xABCDE, 0xDEADBEEF


def naive_build(outer_src: str, path: str, inner_src: str, inner_dst: str, ev: int, qp: int,
                rkey: int, psn: int, va: int, payload: bytes, msn: int, ts_ns: int,
                flags: int) -> bytes:
    n = len(payload)
    bth = struct.pack("!BBHII", W.RDMA_WRITE_ONLY, 0, 0xFFFF, qp,
                      ((flags >> 2) & 1) << 31 | psn)
    reth = struct.pack("!QII", va, rkey, n)
    mrc = struct.pack("!BBHIIQ", 1, flags, n, ev, msn, ts_ns)
    body = bth + reth + mrc + payload
    udp_payload = body + struct.pack("!I", zlib.crc32(body))
    udp = struct.pack("!HHHH", 0xC000 | (ev & 0x3FFF), 4791, 8 + len(udp_payload), 0)
    inner = struct.pack("!IHBB16s16s", 6 << 28, len(udp) + len(udp_payload), 17, 64,
                        socket.inet_pton(socket.AF_INET6, inner_src),
                        socket.inet_pton(socket.AF_INET6, inner_dst))
    outer = struct.pack("!IHBB16s16s", 6 << 28 | (ev & 0xFFFFF),
                        len(inner) + len(udp) + len(udp_payload), 41, 64,
                        socket.inet_pton(socket.AF_INET6, outer_src),
                        socket.inet_pton(socket.AF_INET6, path))
    return outer + inner + udp + udp_payload


def naive_decode(data: bytes) -> dict[str, object]:
    if zlib.crc32(data[:-4]) != struct.unpack("!I", data[-4:])[0]:
        raise ValueError("icrc")
    opcode, _, _, qp, psn = struct.unpack("!BBHII", data[:12])
    if opcode != W.RDMA_WRITE_ONLY:
        raise ValueError("opcode")
    va, rkey, dma_len = struct.unpack("!QII", data[12:28])
    version, flags, length, ev, msn, ts = struct.unpack("!BBHIIQ", data[28:48])
    return {"dest_qp": qp & 0xFFFFFF, "psn": psn & 0xFFFFFF, "va": va, "rkey": rkey,
            "payload": data[48:-4], "msn": msn, "ev": ev, "ts_ns": ts, "flags": flags}


def per_second(fn: Callable[[int], object], n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def measure(payload_len: int, rounds: int, n: int) -> dict[str, float]:
    payload = bytes(range(256)) * (payload_len // 256) + bytes(payload_len % 256)
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, EV, QP, RKEY)
    va, msn, ts, flags = 0x7F00_0000_0000, 1, time.monotonic_ns(), W.ACK_REQUEST

    def naive(i: int) -> bytes:
        return naive_build(NIC_A, PATH, NIC_A, NIC_B, EV, QP, RKEY, i & 0xFFFFFF, va, payload,
                           msn, ts, flags)

    def generic(i: int) -> bytes:
        return W.frame(NIC_A, PATH, EV, NIC_A, NIC_B,
                       W.encode_data(QP, i & 0xFFFFFF, va, RKEY, payload, msn, EV, ts, flags))

    def built(i: int) -> bytes:
        return template.build(i & 0xFFFFFF, va, payload, msn, ts, flags)

    udp_payload = built(7)[W.HEADROOM:]
    icrc_span = udp_payload[:-4]
    assert naive(7) == generic(7) == built(7), "implementations disagree"
    parsed = W.decode(udp_payload)
    assert naive_decode(udp_payload) == {k: getattr(parsed, k) for k in naive_decode(udp_payload)}

    variants: dict[str, Callable[[int], object]] = {
        "build naive": naive,
        "build generic": generic,
        "build template": built,
        "decode naive": lambda i: naive_decode(udp_payload),
        "decode": lambda i: W.decode(udp_payload),
        "crc32 only": lambda i: zlib.crc32(icrc_span),
    }
    best = dict.fromkeys(variants, 0.0)
    for _ in range(rounds):
        for name, fn in variants.items():
            best[name] = max(best[name], per_second(fn, n))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=5000, help="packets per variant per round")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args()
    results = {size: measure(size, args.rounds, args.n) for size in (4096, 64)}
    if args.json:
        print(json.dumps({"python": platform.python_version(), "zlib": zlib.ZLIB_RUNTIME_VERSION,
                          "packets_per_s": results}, indent=2))
        return 0
    print(f"python {platform.python_version()}, zlib {zlib.ZLIB_RUNTIME_VERSION}, "
          f"best of {args.rounds} x {args.n} packets")
    for size, r in results.items():
        print(f"\npayload {size} B        packets/s    vs naive   Gbit/s of payload")
        for name, rate in r.items():
            base = r["decode naive"] if name.startswith("decode") else r["build naive"]
            ratio = "" if name == "crc32 only" else f"{rate / base:7.2f}x"
            print(f"  {name:16s} {rate:12,.0f}  {ratio:>9s}   {rate * size * 8 / 1e9:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
