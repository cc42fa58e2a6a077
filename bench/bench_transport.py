"""Transport benchmark: what the sender's transport logic costs per packet, in Python,
with no network and no kernel.

On the endpoint's sending core the data path (build, ICRC, sendmmsg, and the kernel's
forwarding) and the transport (twin.mrc.transport.Sender: EV choice, window, packet
records, SACK processing, loss detection) share one CPU; docs/benchmarks.md shows the
transport is about half of it. This bench isolates that half. A Sender posts one write
of --packets 4 KiB packets; a Receiver (its place() a no-op) takes every packet one
simulated RTT after it left, in send order or, with --reorder, shuffled within each
receive batch; the receiver's last SACK of each batch of 5 goes back, as the endpoint
coalesces them. Only the Sender's calls are timed: `poll` (send) and `on_sack` (ack).

Each mode (mrc, spray-static, single-path) runs --repeat times, round-robin, in one
process. Reported: median µs per packet sent (min-max), split into send and ack, and
each mode's ratio to mrc.
Usage: .venv/bin/python bench/bench_transport.py [--packets N] [--repeat N] [--reorder] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from twin.mrc.evset import EvSet  # noqa: E402
from twin.mrc.transport import Receiver, RxPacket, Sender, SenderConfig  # noqa: E402

MODES = ("mrc", "spray-static", "single-path")
RTT_NS = 400_000  # a packet is delivered, and its SACK back, this long after it left
STEP_NS = 20_000  # simulated time between two polls
BATCH = 5  # data packets per receive batch: one SACK goes back per batch


def one(mode: str, packets: int, reorder: bool, seed: int) -> dict:
    size = packets * 4096
    src = memoryview(bytearray(size))
    sender = Sender(EvSet([0, 1, 2, 3], 2, size=128, seed=seed), 0, SenderConfig(mode=mode))
    receiver = Receiver(lambda va, payload: None)
    rng = random.Random(seed)
    sender.post(size, imm=1)
    flight: list[tuple[int, object]] = []  # (due, TxPacket), in send order
    now, send_s, ack_s, polls = 0, 0.0, 0.0, 0
    clock = time.perf_counter
    while not sender.idle and polls < 50 * packets:  # bounded: a stall ends the run
        polls += 1
        now += STEP_NS
        t = clock()
        txs = sender.poll(now, src, 64)
        send_s += clock() - t
        flight.extend((now + RTT_NS // 2, tx) for tx in txs)
        due = 0
        while due < len(flight) and flight[due][0] <= now:
            due += 1
        arrived, flight = flight[:due], flight[due:]
        for i in range(0, len(arrived), BATCH):
            batch = [tx for _, tx in arrived[i:i + BATCH]]
            if reorder:
                rng.shuffle(batch)
            sack = None
            for tx in batch:
                sack = receiver.on_data(RxPacket(tx.psn, tx.va, tx.payload, tx.imm, tx.ev,
                                                 tx.tries, tx.ack_req)) or sack
            if sack is not None:
                t = clock()
                sender.on_sack(sack, now + RTT_NS // 2)
                ack_s += clock() - t
        if not txs and not arrived:
            sender.on_timer(now)
    sent = sender.stats.packets
    if not sender.idle:
        raise SystemExit(f"{mode}: the transfer did not finish ({sender.stats.acked} of "
                         f"{packets} packets acked)")
    return {"mode": mode, "sent": sent, "retransmits": sender.stats.retransmits,
            "send_us": send_s / sent * 1e6, "ack_us": ack_s / sent * 1e6,
            "total_us": (send_s + ack_s) / sent * 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=65536, help="per transfer (default 65536)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reorder", action="store_true",
                    help="shuffle each receive batch (SACK bitmaps, per-EV checks)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(a.repeat):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            rows[mode].append(one(mode, a.packets, a.reorder, seed=r + 1))
        print(f"repetition {r + 1}/{a.repeat} done", file=sys.stderr, flush=True)
    med = {m: {k: statistics.median(x[k] for x in xs) for k in ("send_us", "ack_us",
                                                                 "total_us")}
           for m, xs in rows.items()}
    if a.json:
        print(json.dumps({"packets": a.packets, "reorder": a.reorder, "median": med,
                          "runs": rows}, indent=1))
        return 0
    print(f"{a.packets:,} packets per transfer, {a.repeat} repetitions"
          f"{', batches shuffled' if a.reorder else ''}; µs per packet sent, median (min-max)")
    print("| mode | send (poll) | ack (on_sack) | total | total / mrc |")
    print("| --- | --- | --- | --- | --- |")
    for m, xs in rows.items():
        def f(k: str, xs: list[dict] = xs) -> str:
            v = [x[k] for x in xs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
        print(f"| {m} | {f('send_us')} | {f('ack_us')} | {f('total_us')} | "
              f"{med[m]['total_us'] / med['mrc']['total_us']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
