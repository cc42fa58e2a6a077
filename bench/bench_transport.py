"""Transport benchmark: what the transport's logic costs per packet, the Python reference
beside the compiled core, with no network and no kernel.

On the endpoint's sending core the data path (build, ICRC, sendmmsg, and the kernel's
forwarding) and the transport (twin.mrc.transport.Sender: EV choice, window, packet
records, SACK processing, loss detection) share one CPU; docs/benchmarks.md shows the
transport is about half of it. This bench isolates that half. A Sender posts one write
of --packets 4 KiB packets; a Receiver (its place() a no-op) takes every packet one
simulated RTT after it left, in send order or, with --reorder, shuffled within each
receive batch; the receiver's last SACK of each batch of 5 goes back, as the endpoint
coalesces them. Timed: the Sender's `poll` (send) and `on_sack` (ack), and the
Receiver's `on_data` (receive).

--impl both (the default) runs each mode with the reference (twin.mrc.transport) and
with the compiled core (twin.mrc._fastpath.Sender and .Receiver, the same decisions),
--repeat times, round-robin, in one process. Reported: median µs per packet sent
(min-max), split into send, ack and receive, each mode's ratio to mrc, and the
compiled core's to the reference.
Usage: .venv/bin/python bench/bench_transport.py [--packets N] [--repeat N] [--reorder]
       [--impl python|compiled|both] [--json]
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

from twin.mrc import core  # noqa: E402
from twin.mrc.evset import EvSet  # noqa: E402
from twin.mrc.modes import Mode  # noqa: E402
from twin.mrc.transport import RxPacket, SenderConfig  # noqa: E402

MODES = Mode.names()
RTT_NS = 400_000  # a packet is delivered, and its SACK back, this long after it left
STEP_NS = 20_000  # simulated time between two polls
BATCH = 5  # data packets per receive batch: one SACK goes back per batch


def one(impl: core.Transport, mode: str, packets: int, reorder: bool, seed: int) -> dict:
    size = packets * 4096
    src = memoryview(bytearray(size))
    sender = impl.sender(EvSet([0, 1, 2, 3], 2, size=128, seed=seed), 0,
                         SenderConfig(mode=mode))
    receiver = impl.receiver(lambda va, payload: None)
    rng = random.Random(seed)
    sender.post(size, imm=1)
    flight: list[tuple[int, object]] = []  # (due, TxPacket), in send order
    now, send_s, ack_s, recv_s, polls = 0, 0.0, 0.0, 0.0, 0
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
            pkts = [RxPacket(tx.psn, tx.va, tx.payload, tx.imm, tx.ev, tx.tries, tx.ack_req)
                    for tx in batch]
            t = clock()
            for pkt in pkts:
                sack = receiver.on_data(pkt) or sack
            recv_s += clock() - t
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
            "total_us": (send_s + ack_s) / sent * 1e6, "recv_us": recv_s / sent * 1e6}


KEYS = ("send_us", "ack_us", "total_us", "recv_us")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--packets", type=int, default=65536, help="per transfer (default 65536)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reorder", action="store_true",
                    help="shuffle each receive batch (SACK bitmaps, per-EV checks)")
    ap.add_argument("--impl", choices=("python", "compiled", "both"), default="both",
                    help="the reference, the compiled core, or both side by side")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    impls = {"python": core.load_transport("python")}
    if a.impl != "python":
        impls["compiled"] = core.load_transport("compiled")  # refuses where it is not built
        if a.impl == "compiled":
            del impls["python"]
    rows: dict[tuple[str, str], list[dict]] = {(i, m): [] for i in impls for m in MODES}
    for r in range(a.repeat):
        order = [(i, m) for m in MODES for i in impls]
        for impl, mode in (order if r % 2 == 0 else order[::-1]):
            rows[impl, mode].append(one(impls[impl], mode, a.packets, a.reorder, seed=r + 1))
        print(f"repetition {r + 1}/{a.repeat} done", file=sys.stderr, flush=True)
    med = {k: {f: statistics.median(x[f] for x in xs) for f in KEYS} for k, xs in rows.items()}
    if a.json:
        print(json.dumps({"packets": a.packets, "reorder": a.reorder,
                          "median": {f"{i}/{m}": v for (i, m), v in med.items()},
                          "runs": {f"{i}/{m}": v for (i, m), v in rows.items()}}, indent=1))
        return 0
    print(f"{a.packets:,} packets per transfer, {a.repeat} repetitions"
          f"{', batches shuffled' if a.reorder else ''}; µs per packet sent, median (min-max)")
    print("| transport | mode | send (poll) | ack (on_sack) | sender total | total / mrc "
          "| receive (on_data) |" + (" sender, compiled / python |" if len(impls) > 1 else ""))
    print("| --- | --- | --- | --- | --- | --- | --- |" + (" --- |" if len(impls) > 1 else ""))
    for (impl, m), xs in rows.items():
        def f(k: str, xs: list[dict] = xs) -> str:
            v = [x[k] for x in xs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"
        line = (f"| {impl} | {m} | {f('send_us')} | {f('ack_us')} | {f('total_us')} | "
                f"{med[impl, m]['total_us'] / med[impl, 'mrc']['total_us']:.2f} | "
                f"{f('recv_us')} |")
        if len(impls) > 1:
            line += (f" {med['compiled', m]['total_us'] / med['python', m]['total_us']:.2f} |"
                     if impl == "compiled" else " |")
        print(line)
    if len(impls) > 1:
        rx = med["compiled", "mrc"]["recv_us"] / med["python", "mrc"]["recv_us"]
        print(f"receiver (mrc), compiled / python: {rx:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
