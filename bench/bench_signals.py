"""Fabric-signals benchmark: what a shaped port's queue program costs per packet, against
the uN program every switch port already runs and an empty program, side by side in one run.

Every program is the project's own (twin.node.ebpf), loaded here and run in the kernel with
BPF_PROG_TEST_RUN on a prebuilt Ethernet frame: an MRC data packet (outer IPv6, next header
41; inner IPv6, UDP 4791, BTH, RETH, 2 KiB of payload: a test run takes at most a page, and
the programs read and write headers only, so the payload's size does not change their cost).
No namespace, no lab, nothing attached; root for bpf().

The cases, each one call of BPF_PROG_TEST_RUN (repeat 1) on a fresh copy of the frame, its
`duration` being the kernel's own timing of the program run, in ns:

    empty              a two-instruction program: the test run's own overhead
    uN                 uN shifting the carrier (what a switch port runs at ingress)
    queue, empty       the queue program on a port draining at 100 Gbit/s: the packet finds
                       the queue empty (the common case: below ecn.min, no mark, enqueued)
    queue, marks CE    a port at 1 bit/s with the queue past ecn.max: ECT(0) -> CE
    queue, RED draw    the queue between ecn.min and ecn.max: a bpf_get_prandom_u32 draw
    queue, trims       the queue past trim: cut to 130 bytes, lengths and DSCP rewritten
    queue, ACK whole   the queue past trim, an ACK (142 bytes, the endpoint's encoder): its
                       opcode read, admitted whole
    queue, drops       the queue past the hard limit
    decap              the ebpf decap program (RFC 6040's copy inward folded in), outer CE
    ecn_in             seg6local's RFC 6040 program on a host port, outer CE

A queue in a given state is set through the port map before each call (busy_until =
now + depth x 8 s at 1 bit/s: the depth does not move between the write and the run).
Within a round every case gets CALLS calls, in an order that rotates each round, so a burst of
another user's load on this shared machine hits every case alike; a round's figure is the
median of its calls, and the result the median (min-max) over rounds. The ratios are taken
round by round against uN and against the empty program, then their medians printed.
Usage: .venv/bin/python bench/bench_signals.py [--rounds N] [--calls N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin.mrc import wire  # noqa: E402
from twin.node import ebpf  # noqa: E402
from twin.node.ebpf import asm, bpf, programs  # noqa: E402

SID = "fcbb:bb00:100::/48"
PORT_SID = "fcbb:bb00:1100::/48"
SLOT = 1
SLOW = {"dev": "eth1", "slot": SLOT, "rate_bps": 1, "ecn_min": 20_000, "ecn_max": 40_000,
        "mark": True, "trim": 60_000, "drop": 80_000}
FAST = {**SLOW, "rate_bps": 100 * 10**9}
DEPTH = {"queue, marks CE": 50_000, "queue, RED draw": 30_000, "queue, trims": 59_000,
         "queue, drops": 79_990}
ECT0, CE = 2, 3


def ipv6(src: bytes, dst: bytes, nh: int, payload: bytes, tclass: int) -> bytes:
    return struct.pack("!IHBB", 6 << 28 | tclass << 20, len(payload), nh, 64) + src + dst \
        + payload


def mrc_frame(da: str, outer_tc: int, payload: int = 2048) -> bytes:
    import ipaddress

    body = struct.pack("!BBHII", 0x0A, 0x40, 0xFFFF, 0x11, 0x80000001) \
        + struct.pack("!QII", 0x1000, 0x1234, payload) + bytes(payload) + b"ICRC"
    udp = struct.pack("!HHHH", 0xC000, 4791, 8 + len(body), 0) + body
    nic = ipaddress.IPv6Address("fd00:4d52:43::1").packed
    inner = ipv6(nic, ipaddress.IPv6Address("fd00:4d52:43:1::1").packed, 17, udp, ECT0)
    outer = ipv6(nic, ipaddress.IPv6Address(da).packed, 41, inner, outer_tc)
    return bytes(6) + bytes(5) + b"\x01" + b"\x86\xdd" + outer


def ack_frame(da: str) -> bytes:
    """An ACK as the endpoint sends it (a Framer on the reverse EV), with Ethernet."""
    sack = wire.Sack(cum=41, bitmap=0b1011, ev=0x1234, tries=0)
    body = wire.encode_ack(0x11, 42, 41, sack)
    nic, peer = "fd00:4d52:43:1::1", "fd00:4d52:43::1"
    return bytes(6) + bytes(5) + b"\x01" + b"\x86\xdd" \
        + wire.Framer(nic, da, nic, peer, 0x1234).frame(body)


def set_depth(ports: int, depth: int) -> None:
    busy = time.monotonic_ns() + depth * 8 * 10**9  # at 1 bit/s
    bpf.update(ports, SLOT, struct.pack(f"={len(programs.PORT_FIELDS)}Q", busy,
                                        *[0] * (len(programs.PORT_FIELDS) - 1)))


def empty_queue(ports: int) -> None:
    bpf.update(ports, SLOT, bytes(programs.PORT_VALUE_SIZE))


def load_all(counters: int, ports: int) -> dict[str, tuple[int, bytes, object]]:
    """name -> (program fd, frame, what to do to the port map before a call)."""
    def load_prog(insns: bytes, name: str) -> int:
        return bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, insns, name)

    carrier = mrc_frame("fcbb:bb00:100:200:1100::", ECT0)
    to_port = mrc_frame("fcbb:bb00:1100::", CE)
    slow = ebpf.load_queue(SLOW, ports)[0]
    cases = {
        "empty": (load_prog(asm.assemble([asm.mov64_imm(0, 0), asm.exit_()]), "bench_empty"),
                  carrier, None),
        "uN": (ebpf.load("uN", SID, counters)[0], carrier, None),
        "queue, empty": (ebpf.load_queue(FAST, ports)[0], carrier, lambda: empty_queue(ports)),
    }
    for name, depth in DEPTH.items():
        cases[name] = (slow, carrier, lambda d=depth: set_depth(ports, d))
    cases["queue, ACK whole"] = (slow, ack_frame("fcbb:bb00:100:200:1100::"),
                                 lambda: set_depth(ports, 70_000))
    cases["decap"] = (ebpf.load("decap", PORT_SID, counters, SLOT, ports)[0], to_port, None)
    cases["ecn_in"] = (ebpf.load("ecn", PORT_SID, counters, SLOT, ports)[0], to_port, None)
    return cases


def one_round(cases: dict, order: list[str], calls: int) -> dict[str, float]:
    out = {}
    for name in order:
        fd, frame, prepare = cases[name]
        runs = []
        for _ in range(calls):
            if prepare:
                prepare()
            runs.append(bpf.test_run(fd, frame, 1, 64).duration_ns)
        out[name] = statistics.median(runs)
    return out


def check(cases: dict, ports: int) -> None:
    """Each case takes the path it is named for (so the figures time what they say)."""
    def run(name):
        fd, frame, prepare = cases[name]
        if prepare:
            prepare()
        return bpf.test_run(fd, frame, 1, 64)

    assert run("queue, empty").data_out == cases["queue, empty"][1]
    assert run("queue, marks CE").data_out[15] >> 4 & 3 == CE
    assert len(run("queue, trims").data_out) == programs.TRIM_FRAME_LEN
    assert run("queue, ACK whole").data_out == cases["queue, ACK whole"][1]
    assert run("queue, drops").retval == programs.TC_ACT_SHOT
    assert len(run("decap").data_out) == len(cases["decap"][1]) - 40


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=500, help="calls per case per round")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    counters = ebpf.counters_map(None)
    ports = ebpf.ports_map([], SLOT + 1)
    cases = load_all(counters, ports)
    try:
        check(cases, ports)
        names = list(cases)
        rounds = []
        for r in range(a.rounds):
            k = r % len(names)
            rounds.append(one_round(cases, names[k:] + names[:k], a.calls))
            print(f"round {r + 1}/{a.rounds} done", file=sys.stderr, flush=True)
    finally:
        for fd in {fd for fd, _, _ in cases.values()}:
            os.close(fd)
        os.close(counters)
        os.close(ports)
    result = {}
    for name in names:
        ns = [r[name] for r in rounds]
        result[name] = {
            "ns": statistics.median(ns), "min": min(ns), "max": max(ns),
            "x_uN": statistics.median(r[name] / r["uN"] for r in rounds),
            "minus_empty_ns": statistics.median(r[name] - r["empty"] for r in rounds)}
    if a.json:
        print(json.dumps({"rounds": a.rounds, "calls": a.calls, "cases": result}, indent=2))
        return 0
    print(f"BPF_PROG_TEST_RUN, median ns per packet over {a.rounds} rounds of {a.calls} "
          "calls (min-max of the round medians)")
    print(f"{'case':<18}{'ns/packet':>12}{'range':>14}{'x uN':>8}{'- empty':>10}")
    for name, r in result.items():
        spread = f"{r['min']:.0f}-{r['max']:.0f}"
        print(f"{name:<18}{r['ns']:>12.0f}{spread:>14}{r['x_uN']:>8.2f}"
              f"{r['minus_empty_ns']:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
