"""Send-path benchmark: the compiled Sender into the compiled data path, the path of
TxPacket objects beside the path with none (issue 39), side by side in one process.

Sending: a compiled Sender posts one write of --packets 4 KiB packets; each step (20 µs
of simulated time) its window goes out through a TxBatch on an IPPROTO_RAW socket,
   old  poll() -> [TxPacket], then TxBatch.post reads each back by attribute
   new  TxBatch.post_sender: the Sender's decisions as C records, no object per packet
ACKs: every packet is acknowledged one simulated RTT after it left (one SACK per 5, in
order), sent as real datagrams to a UDP socket and read by an RxRing through the loop's
own receive path (PacketLoop._recv_ring),
   old  recv() -> (2, whole, ...) -> wire.decode_checked -> _on_ack -> on_sack
   new  the QP bound (RxRing.bind_sender): decoded and handed to on_sack in C
Both runs get the same inputs at the same simulated times (the new run's ACKs are
made from what the old run sent: the same seed decides the same packets, which the run
checks), so only the path differs. Timed: the send call and the receive call, per
packet sent; the kernel's part (sendmmsg into a dummy interface, recvmmsg) is in both.

Needs root: the sockets live in a network namespace of its own (the data packets leave
by a veth whose peer drops them; nothing leaves the namespace), removed at the end.
Usage: sudo .venv/bin/python bench/bench_sendpath.py [--packets N] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twin import nsenter  # noqa: E402
from twin.mrc import fuzz, wire  # noqa: E402
from twin.mrc import loop as L  # noqa: E402
from twin.mrc.evset import EvSet  # noqa: E402
from twin.mrc.transport import SenderConfig  # noqa: E402

RTT_NS = 400_000
STEP_NS = 20_000
BATCH = 5  # data packets per SACK
QPN = 7
PATH = "fcbb:bb00:100::"  # routed out of the namespace's veth
SRC = "fd00:4d52:43::1"  # the outer source (a loopback one would not leave by the veth)
TARGET = fuzz.Target(src="::1", dst="::1", recv_qpn=3, rkey=1, size=1024, send_qpn=QPN)
LOOP6 = socket.inet_pton(socket.AF_INET6, "::1")


class Ring:
    """The loop's rx_ring, its ACKs handed on at the simulated time."""

    def __init__(self, ring):
        self.ring, self.now = ring, 0

    def recv(self):
        return self.ring.recv(self.now)

    @property
    def received(self):
        return self.ring.received


def run(fp, socks, packets: int, path: str, record: list) -> dict:
    raw, rx, ack_tx = socks
    src = memoryview(bytearray(packets * 4096))
    sender = fp.Sender(EvSet([0, 1, 2, 3], 2, size=128, seed=1), 0, SenderConfig())
    sender.set_local_ports(0xF, 0)
    batch = fp.TxBatch(raw.fileno(), L.SEND_BUDGET)
    ring = fp.RxRing(rx.fileno(), LOOP6, L.RX_SLOTS, L.RECV_BUF)
    templates: dict = {}

    def miss(ev):
        tpl = templates[ev] = wire.DataTemplate(SRC, PATH, "::1", "::1", ev, 9, 0xC0FFEE)
        return tpl
    qp = SimpleNamespace(qpn=QPN, sender=sender, waiters=[], done_ns=0)
    lp = SimpleNamespace(rx_ring=Ring(ring), drops=Counter(), send_qps={QPN: qp})
    lp._on_control = lambda pkt: L.PacketLoop._on_control(lp, pkt)
    lp._on_ack = lambda ack: L.PacketLoop._on_ack(lp, ack)
    lp._on_items = lambda items: L.PacketLoop._on_items(lp, items)
    lp._on_bound = lambda item: L.PacketLoop._on_bound(lp, item)
    lp._maybe_done = lambda q: None
    lp._on_data = lp._on_trimmed = lp._on_probe = None
    if path == "new":
        ring.bind_sender(QPN, sender)
    L.now_ns = lambda: lp.rx_ring.now  # the old path's _on_ack reads the clock
    sender.post(len(src), imm=1)
    flight: list = []  # (due, psn, ev, tries)
    now, step, send_s, ack_s, cum = 0, 0, 0.0, 0.0, 0
    clock = time.perf_counter
    while not sender.idle and step < 4 * packets:  # bounded: a stall ends the run
        now += STEP_NS
        if path == "old":
            t = clock()
            txs = sender.poll(now, src, L.SEND_BUDGET)
            refused = batch.post(txs, templates, miss, qp)
            send_s += clock() - t
            sent = [(tx.psn, tx.ev, tx.tries) for tx in txs]
            record.append(sent)
        else:
            t = clock()
            polled, refused = batch.post_sender(sender, now, src, L.SEND_BUDGET, templates,
                                                miss, qp)
            send_s += clock() - t
            sent = record[step] if step < len(record) else []
            if polled != len(sent):
                raise SystemExit(f"step {step}: the new path sent {polled} packets, the old "
                                 f"{len(sent)}: their decisions differ")
        if refused:
            raise SystemExit(f"the kernel refused {len(refused)} packets")
        step += 1
        flight.extend((now + RTT_NS, *s) for s in sent)
        due = 0
        while due < len(flight) and flight[due][0] <= now:
            due += 1
        arrived, flight = flight[:due], flight[due:]
        for i in range(0, len(arrived), BATCH):
            _, psn, ev, tries = arrived[i:i + BATCH][-1]
            cum = max(cum, max(p for _, p, _, _ in arrived[i:i + BATCH]) + 1)
            body = wire.encode_ack(QPN, psn & wire.PSN_MASK, 0, wire.Sack(
                cum & wire.PSN_MASK, 0, ev, tries, 0, 0xF))
            ack_tx.sendto(fuzz.seal(TARGET, body), ("::1", wire.ROCE_PORT))
        if arrived:
            lp.rx_ring.now = now
            t = clock()
            while L.PacketLoop._recv_ring(lp):
                pass
            ack_s += clock() - t
        if not sent and not arrived:
            sender.on_timer(now)
    if not sender.idle:
        raise SystemExit(f"{path}: the transfer did not finish ({sender.stats.acked} of "
                         f"{packets} packets acked; drops {dict(lp.drops)})")
    n = sender.stats.packets
    return {"path": path, "sent": n, "retransmits": sender.stats.retransmits,
            "send_us": send_s / n * 1e6, "ack_us": ack_s / n * 1e6,
            "total_us": (send_s + ack_s) / n * 1e6, "drops": dict(lp.drops),
            "batches": batch.counters[2]}


def namespace() -> str:
    name = f"twin-bench-sendpath-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    path = f"/run/netns/{name}"
    try:  # data packets leave by a veth to a neighbour that is not there: v1 drops them
        for cmd in (["ip", "link", "set", "lo", "up"],
                    ["ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1"],
                    ["ip", "link", "set", "v0", "mtu", "9000", "up"],
                    ["ip", "link", "set", "v1", "mtu", "9000", "up"],
                    ["ip", "-6", "neigh", "add", "fe80::1", "lladdr", "02:00:00:00:00:01",
                     "dev", "v0", "nud", "permanent"],
                    ["ip", "-6", "route", "add", "fcbb::/16", "via", "fe80::1", "dev", "v0"]):
            nsenter.run(path, cmd)
    except Exception:
        subprocess.run(["ip", "netns", "del", name], check=False)
        raise
    return name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=16384, help="per transfer (default 16384)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    fp, why = L.load_datapath("compiled")
    if os.geteuid() != 0:
        raise SystemExit("needs root: its sockets live in a namespace of its own")
    name = namespace()
    rows: dict[str, list[dict]] = {"old": [], "new": []}
    try:
        with nsenter.inside(f"/run/netns/{name}"):
            raw = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
            rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            ack_tx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        with raw, rx, ack_tx:
            wire.allow_zero_udp_checksum(rx)
            wire.receive_flow_labels(rx)
            rx.setsockopt(socket.SOL_SOCKET, L.SO_RCVBUFFORCE, 8 << 20)
            rx.bind(("::1", wire.ROCE_PORT))
            rx.setblocking(False)
            ack_tx.bind(("::1", TARGET.sport))
            for r in range(a.repeat):
                record: list = []
                for path in ("old", "new"):
                    rows[path].append(run(fp, (raw, rx, ack_tx), a.packets, path, record))
                print(f"repetition {r + 1}/{a.repeat} done", file=sys.stderr, flush=True)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    for key in ("sent", "retransmits", "drops"):
        if {repr(x[key]) for xs in rows.values() for x in xs} != {repr(rows["old"][0][key])}:
            raise SystemExit(f"the runs differ in {key}")
    med = {p: {k: statistics.median(x[k] for x in xs) for k in ("send_us", "ack_us",
                                                                "total_us")}
           for p, xs in rows.items()}
    if a.json:
        print(json.dumps({"packets": a.packets, "median": med, "runs": rows}, indent=1))
        return 0
    print(f"{a.packets:,} packets per transfer, {a.repeat} repetitions; µs per packet sent, "
          f"median (min-max); the kernel's sendmmsg and recvmmsg included")
    print("| path | send (poll + build + sendmmsg) | ack (recvmmsg + decode + on_sack) "
          "| total |")
    print("| --- | --- | --- | --- |")
    for p, xs in rows.items():
        def f(k: str, xs: list[dict] = xs) -> str:
            v = [x[k] for x in xs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
        print(f"| {p} | {f('send_us')} | {f('ack_us')} | {f('total_us')} |")
    print("new / old: send {:.2f}, ack {:.2f}, total {:.2f}".format(
        *(med["new"][k] / med["old"][k] for k in ("send_us", "ack_us", "total_us"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
