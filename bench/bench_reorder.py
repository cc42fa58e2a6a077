"""What the RACK reordering tolerance costs in detection time, and what it buys.

Two window policies of the transport, side by side over the same simulated fabrics
(twin.mrc.sim: a clock, paths with delay and jitter; deterministic, so seeds compare):

    fixed      max(50 µs, srtt / 4), widened only by spurious losses (the old rule)
    adaptive   also covers how far RTTs reach above the lowest seen (a decaying maximum),
               and a whole srtt until 32 samples are in (transport.reorder_window_ns)

For each policy and path jitter:
    detection  a path dies 300 µs into a 32 MiB transfer: µs until the first loss is
               declared, and until the last packet it cost is acked again
    spurious   clean 32 MiB transfers (no loss at all): EV retirements, which are all
               wrong, summed over --seeds seeds

Pure CPU, no root. Usage: .venv/bin/python bench/bench_reorder.py [--seeds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from twin.fabric.paths import ev_fields
from twin.mrc import transport
from twin.mrc.evset import EvSet
from twin.mrc.sim import PathModel, SimFabric, run_transfer

MiB = 1 << 20
JITTERS_NS = (5_000, 20_000, 100_000)
KILL_AT_NS = 300_000
ADAPTIVE = transport.Sender.reorder_window_ns


def fixed(self) -> int:
    return max(self.cfg.reorder_ns, int(self.srtt / 4)) * self._reorder_steps


POLICIES = {"fixed": fixed, "adaptive": ADAPTIVE}


def detection(jitter: int, seed: int) -> tuple[float, float]:
    model = PathModel(jitter_ns=jitter)
    key = ev_fields(EvSet([0, 1, 2, 3], 2, seed=7).next().value)[:2]

    def kill(fabric: SimFabric) -> None:
        fabric.paths[key] = PathModel(jitter_ns=jitter, dead=True)

    r = run_transfer(32 * MiB, SimFabric(default=model, seed=seed),
                     events=[(KILL_AT_NS, kill)])
    assert r.ok and r.exact, r.failed
    losses = [e.t_ns for e in r.sender.log if e.kind == "loss" and e.t_ns >= KILL_AT_NS]
    repaired = [e.t_ns for e in r.sender.log if e.kind == "repaired" and e.t_ns >= KILL_AT_NS]
    return (losses[0] - KILL_AT_NS) / 1e3, (max(repaired) - KILL_AT_NS) / 1e3


def spurious(jitter: int, seed: int) -> int:
    r = run_transfer(32 * MiB, SimFabric(default=PathModel(jitter_ns=jitter), seed=seed))
    assert r.ok and r.exact, r.failed
    return r.sender.evs.retirements


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {}
    for jitter in JITTERS_NS:
        for name, policy in POLICIES.items():
            transport.Sender.reorder_window_ns = policy
            try:
                det = [detection(jitter, s) for s in range(1, args.seeds + 1)]
                spur = [spurious(jitter, s) for s in range(1, args.seeds + 1)]
            finally:
                transport.Sender.reorder_window_ns = ADAPTIVE
            out[f"{jitter // 1000}us/{name}"] = {
                "detect_us": statistics.median(d for d, _ in det),
                "repair_us": statistics.median(r for _, r in det),
                "spurious_retirements": sum(spur)}
            if not args.json:
                print(f"jitter {jitter / 1000:5.0f} µs  {name:8s}  "
                      f"detect {out[f'{jitter // 1000}us/{name}']['detect_us']:8.0f} µs  "
                      f"repair {out[f'{jitter // 1000}us/{name}']['repair_us']:8.0f} µs  "
                      f"spurious retirements {sum(spur):3d} in {args.seeds} runs", flush=True)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print("\nadaptive vs fixed (median detection time ratio):")
    for jitter in JITTERS_NS:
        a, f = (out[f"{jitter // 1000}us/{n}"]["detect_us"] for n in ("adaptive", "fixed"))
        print(f"  jitter {jitter / 1000:5.0f} µs: {a / f:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
