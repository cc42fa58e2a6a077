"""Receive benchmark: what the endpoint's receive path costs per data packet, a QP bound
to the receive ring (its packets placed and acknowledged in C: RxRing.bind) beside the
tuple path (each packet parsed to a tuple, then loop._on_data in Python), with no lab.

A UDP socket pair on ::1 feeds the compiled RxRing prebuilt 4 KiB data packets (their
ICRC sealed for the pair's addresses and ports), --batch per round, in PSN order; the
loop's receive side (twin.mrc.loop.PacketLoop._recv_batch, with a compiled Receiver
copying into a registered buffer) takes each round. Its SACKs go back as the
endpoint's do: framed by wire in Python on the tuple path (_send_sack), in C for the
bound QP (RxRing.acks), sent on an IPPROTO_RAW socket to ::1 (root), one sendto each
or one sendmmsg per batch. Without root (no raw socket), the SACKs of both paths are
sent as UDP to a discard port of ::1 by Python, the bound QP's framed in C and handed
back (RxRing.acks with no fd). Timed: _recv_batch only (recvmmsg, ICRC, parse,
placement, the receiver's decisions, coalescing, the SACKs); the sends that feed it
are not.

--repeat passes of --packets each per path, round-robin in one process, a fresh QP per
pass. Reported: median µs per packet (min-max) per path, and the ratio.
Usage: .venv/bin/python bench/bench_receive.py [--packets N] [--batch N] [--repeat N]
       [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twin.mrc import loop as L  # noqa: E402
from twin.mrc import wire  # noqa: E402
from twin.mrc.dcqcn import NotificationPoint  # noqa: E402

PAYLOAD = 4096
BUFFER = 4 << 20  # the registered buffer: PSN n lands at n * 4096 modulo it
RKEY, QPN = 0xC0FFEE, 1
PEER = "fd00:4d52:43::1"
LOCAL = "::1"


class _Sink:
    """The loop's raw socket, for SACKs: IPPROTO_RAW where we may (root), else sent as
    UDP to a port nobody reads."""

    def __init__(self):
        try:
            self.sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self.raw = True
        except PermissionError:
            self.sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            self.sock.bind((LOCAL, 0))
            self.raw = False
        self.sock.setblocking(False)
        self.sacks = 0

    def fileno(self) -> int:
        return self.sock.fileno() if self.raw else -1

    def sendto(self, data: bytes, addr) -> int:
        self.sacks += 1
        try:
            return self.sock.sendto(data, addr if self.raw else self.sock.getsockname()[:2])
        except OSError:
            return 0


def rig(fp, bind: bool):
    """A loop's receive side on a fresh UDP pair, one receiving QP."""
    rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    wire.allow_zero_udp_checksum(rx)
    wire.receive_flow_labels(rx)
    for opt in (L.SO_RCVBUFFORCE, socket.SO_RCVBUF):
        try:
            rx.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
            break
        except OSError:
            continue
    rx.bind((LOCAL, 0))
    rx.setblocking(False)
    tx.bind((LOCAL, 0))
    lp = L.PacketLoop.__new__(L.PacketLoop)
    lp.recv_qps, lp.send_qps = {}, {}
    lp.drops, lp.rx_plane_bytes = Counter(), {p: 0 for p in range(16)}
    lp._pending_sacks, lp._next_ack, lp.port_bitmap = {}, L.NEVER, 0xF
    lp.np = NotificationPoint(0)
    lp.raw = _Sink()
    lp.rx_ring = fp.RxRing(rx.fileno(), socket.inet_pton(socket.AF_INET6, LOCAL), L.RX_SLOTS,
                           L.RECV_BUF)
    buf = memoryview(bytearray(BUFFER))
    qp = L.RecvQp(QPN, RKEY, None, buf, fp.Receiver(buf, port_state=lambda: lp.port_bitmap),
                  random.Random(1), peer_nic=PEER, transport="compiled")
    # every SACK's way back, as _reverse caches it (EV key -> framer, path): to ::1
    framer = (wire.Framer(LOCAL, LOCAL, LOCAL, PEER, 0x12345), LOCAL)
    qp.framers = _AllKeys(framer)
    lp._peers = {}
    lp.recv_qps[QPN] = qp
    if bind:
        lp.rx_ring.acks(lp.raw.fileno(), lp._ack_way, L._PATH_MASK)
        lp.rx_ring.port_bitmap = lp.port_bitmap
        lp._bind(qp)
    return lp, tx, rx


class _AllKeys(dict):
    """One framer for every path key (the bench has one path back)."""

    def __init__(self, framer):
        super().__init__()
        self.framer = framer

    def get(self, key, default=None):
        return self.framer


def frames(tx: socket.socket, rx: socket.socket, n: int) -> list[bytes]:
    """n data packets PSN 0.. as tx's UDP payloads to rx, sealed for their ports."""
    sport = tx.getsockname()[1]
    src = socket.inet_pton(socket.AF_INET6, LOCAL)
    payload = bytes(range(256)) * (PAYLOAD // 256)
    out = []
    for psn in range(n):
        body = wire.encode_data(QPN, psn & wire.PSN_MASK, psn * PAYLOAD % BUFFER, RKEY, payload)
        out.append(wire.roce(src, src, 0, body, sport=sport)[wire.IP6.size + wire.UDP.size:])
    return out


def one(fp, bind: bool, packets: int, batch: int) -> dict:
    lp, tx, rx = rig(fp, bind)
    try:
        to = rx.getsockname()[:2]
        pkts = frames(tx, rx, packets)
        spent = got = 0
        for i in range(0, packets, batch):
            for p in pkts[i:i + batch]:
                tx.sendto(p, to)
            t0 = time.perf_counter_ns()
            n = lp._recv_batch()
            spent += time.perf_counter_ns() - t0
            got += n
        rxq = lp.recv_qps[QPN].receiver
        if got != packets or rxq.cum != packets:
            raise SystemExit(f"lost packets: got {got}, cum {rxq.cum} of {packets} "
                             f"(drops {dict(lp.drops)}): try a smaller --batch")
        sacks = lp.raw.sacks + lp.rx_ring.ack_counters[0]
        return {"us_per_packet": spent / 1000 / packets, "sacks": sacks, "raw": lp.raw.raw,
                "placed": sum(lp.rx_bytes_per_plane().values())}
    finally:
        tx.close()
        rx.close()
        lp.raw.sock.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=32, help="datagrams per receive round")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fp, why = L.load_datapath("compiled")
    runs: dict[str, list[dict]] = {"tuple": [], "bound": []}
    for _ in range(a.repeat):
        for path in runs:
            runs[path].append(one(fp, path == "bound", a.packets, a.batch))
    out = {}
    for path, rs in runs.items():
        us = [r["us_per_packet"] for r in rs]
        out[path] = {"median_us": round(statistics.median(us), 3), "min_us": round(min(us), 3),
                     "max_us": round(max(us), 3), "sacks_per_pass": rs[0]["sacks"]}
    out["ratio"] = round(out["bound"]["median_us"] / out["tuple"]["median_us"], 3)
    out["icrc"] = fp.ICRC
    out["sacks_sent_on"] = "raw" if runs["bound"][0]["raw"] else "udp (no root)"
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"receive path, {a.packets} x {PAYLOAD} B packets, {a.batch} per round, "
          f"{a.repeat} passes, ICRC {fp.ICRC}, SACKs on {out['sacks_sent_on']}: "
          "µs per packet, median (min-max)")
    for path in runs:
        r = out[path]
        print(f"  {path:6} {r['median_us']:7.3f} ({r['min_us']:.3f}-{r['max_us']:.3f})"
              f"   {r['sacks_per_pass']} SACKs a pass")
    print(f"  bound / tuple: {out['ratio']}")


if __name__ == "__main__":
    main()
