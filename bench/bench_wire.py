"""Wire-format micro-benchmark: packets/s to build and to decode an MRC data packet.

Side by side, for a 4096-byte payload (and a 64-byte one, where header work is not hidden
behind the crc32):

    build   naive      struct.pack with format strings per header, inet_pton per packet,
                       bytes concatenation, crc32 over the concatenated body
            generic    twin.mrc.wire.frame(..., encode_data(...)): precompiled structs,
                       header by header (the reference encoder)
            template   DataTemplate.build: one pack, cached IPv6/UDP headers, one join
    decode  naive      struct.unpack with format strings on slices, the ICRC over a masked
                       copy of the pseudo-header and the packet
            decode     twin.mrc.wire.decode (UDP payload + socket metadata -> DataPacket,
                       ICRC checked from a cached pseudo-header CRC, payload not copied)
    crc32   zlib.crc32 of BTH .. payload alone: the floor under both columns

All build RoCEv2 RDMA WRITE Only with the standard ICRC (IBA Annex A17) over the inner
IPv6/UDP headers; docs/mrc-wire.md has the layout.

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
                rkey: int, psn: int, va: int, payload: bytes, tries: int,
                ack_req: bool) -> bytes:
    """RDMA WRITE Only in IPv6-in-IPv6, every header packed on its own, the ICRC over a
    masked copy of the inner headers (the obvious way)."""
    n = len(payload)
    body = struct.pack("!BBHII", W.RDMA_WRITE_ONLY, 0, 0xFFFF, qp,
                       (ack_req << 31) | (tries & 0x7F) << 24 | psn)
    body += struct.pack("!QII", va, rkey, n) + payload
    udp_len = 8 + len(body) + 4
    src, dst = (socket.inet_pton(socket.AF_INET6, a) for a in (inner_src, inner_dst))
    inner = struct.pack("!IHBB16s16s", 6 << 28 | (ev & 0xFFFFF), udp_len, 17, 64, src, dst)
    udp = struct.pack("!HHHH", 0xC000 | (ev >> 18), 4791, udp_len, 0)
    masked = (b"\xff" * 8 + struct.pack("!IHBB16s16s", 0x6FFFFFFF, udp_len, 17, 255, src, dst)
              + udp[:6] + b"\xff\xff" + body[:4] + b"\xff" + body[5:])
    icrc = struct.pack("<I", zlib.crc32(masked))
    outer = struct.pack("!IHBB16s16s", 6 << 28 | (ev & 0xFFFFF), 40 + udp_len, 41, 64,
                        socket.inet_pton(socket.AF_INET6, outer_src),
                        socket.inet_pton(socket.AF_INET6, path))
    return outer + inner + udp + body + icrc


def naive_decode(data: bytes, src: bytes, dst: bytes, sport: int, flow: int) -> dict:
    """The UDP payload back, ICRC checked over a masked copy of the pseudo-header."""
    udp_len = 8 + len(data)
    masked = (b"\xff" * 8 + struct.pack("!IHBB16s16s", 0x6FFFFFFF, udp_len, 17, 255, src, dst)
              + struct.pack("!HHHH", sport, 4791, udp_len, 0xFFFF)
              + data[:4] + b"\xff" + data[5:-4])
    if zlib.crc32(masked) != struct.unpack("<I", data[-4:])[0]:
        raise ValueError("icrc")
    opcode, _, _, qp, word = struct.unpack("!BBHII", data[:12])
    if opcode != W.RDMA_WRITE_ONLY:
        raise ValueError("opcode")
    va, rkey, dma_len = struct.unpack("!QII", data[12:28])
    if dma_len != len(data) - 32:
        raise ValueError("length")
    return {"dest_qp": qp & 0xFFFFFF, "psn": word & 0xFFFFFF, "va": va, "rkey": rkey,
            "payload": data[28:-4], "ev": (flow & 0xFFFFF) | (sport & 0x3FFF) << 18,
            "tries": (word >> 24) & 0x7F, "ack_req": bool(word >> 31)}


def per_second(fn: Callable[[int], object], n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - t0)


def measure(payload_len: int, rounds: int, n: int) -> dict[str, float]:
    payload = bytes(range(256)) * (payload_len // 256) + bytes(payload_len % 256)
    template = W.DataTemplate(NIC_A, PATH, NIC_A, NIC_B, EV, QP, RKEY)
    va, tries, ack_req = 0x7F00_0000_0000, 0, True

    def naive(i: int) -> bytes:
        return naive_build(NIC_A, PATH, NIC_A, NIC_B, EV, QP, RKEY, i & 0xFFFFFF, va, payload,
                           tries, ack_req)

    def generic(i: int) -> bytes:
        return W.frame(NIC_A, PATH, EV, NIC_A, NIC_B,
                       W.encode_data(QP, i & 0xFFFFFF, va, RKEY, payload, tries, ack_req))

    def built(i: int) -> bytes:
        return template.build(i & 0xFFFFFF, va, payload, tries, ack_req)

    pkt = built(7)
    udp_payload = pkt[W.HEADROOM:]
    icrc_span = udp_payload[:-4]
    assert naive(7) == generic(7) == pkt, "implementations disagree"
    src, dst = (socket.inet_pton(socket.AF_INET6, a) for a in (NIC_A, NIC_B))
    meta = (src, dst, W.udp_sport(EV), EV & W.FLOW_MASK)
    parsed = W.decode(udp_payload, *meta)
    ref = naive_decode(udp_payload, *meta)
    assert ref == {k: bytes(v) if k == "payload" else v
                   for k in ref for v in [getattr(parsed, k)]}, "decoders disagree"

    variants: dict[str, Callable[[int], object]] = {
        "build naive": naive,
        "build generic": generic,
        "build template": built,
        "decode naive": lambda i: naive_decode(udp_payload, *meta),
        "decode": lambda i: W.decode(udp_payload, *meta),
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
