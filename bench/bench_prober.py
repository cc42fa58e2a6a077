"""Prober benchmark: what the continuous prober's thread costs, and how its probes fare.

It attaches to a running lab (`--lab`, in the caller's TWIN_RUN_DIR; it brings none up),
starts the continuous prober (twin.verify.continuous) with the period and timeout asked
for, and reads its thread's CPU ticks (utime + stime, /proc/self/task/TID/stat) over
`--seconds`, after a second to settle. Reported: CPU ms per second of wall (and % of
one core), probes sent per second, probes lost and late (back after the round judged
them), the timeout the rounds used at the end, and what was named (nothing, on a
healthy lab). The machine's load is the caller's to describe: run it idle, or beside a
drill or `twin traffic`, and say which.

With `--blackhole NODE` (a T1) it then blackholes that switch (twin.faults, `nft`)
`--repeat` times, a second apart, and reports for each: how long `nft` took (the fault
landed somewhere inside), the first lost probe's send and the naming, counted from the
start of the change; the blackhole is cleared after each. No traffic runs: the figures
are the prober's own.

Usage: TWIN_RUN_DIR=... .venv/bin/python bench/bench_prober.py --lab NAME
       [--period MS] [--timeout MS] [--seconds S] [--blackhole NODE [--repeat N]] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from twin import faults, lab
from twin.verify.continuous import ContinuousProber

TICK = os.sysconf("SC_CLK_TCK")
SETTLE_S = 1.0


def thread_cpu_s(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def measure(att, period_ms: float, timeout_ms: float | None, seconds: float) -> dict:
    cp = ContinuousProber(att, period_ms=period_ms, timeout_ms=timeout_ms)
    with cp:
        time.sleep(SETTLE_S)
        tid = cp._thread.native_id
        sent0, cpu0, t0 = cp.probes_sent, thread_cpu_s(tid), time.monotonic()
        time.sleep(seconds)
        sent1, cpu1, t1 = cp.probes_sent, thread_cpu_s(tid), time.monotonic()
        snap = cp.snapshot()
    wall = t1 - t0
    return {"lab": att.lab, "period_ms": snap["period_ms"], "timeout_ms": snap["timeout_ms"],
            "wall_s": round(wall, 2), "cpu_ms_per_s": round(1000 * (cpu1 - cpu0) / wall, 1),
            "cpu_pct_core": round(100 * (cpu1 - cpu0) / wall, 2),
            "probes_per_s": round((sent1 - sent0) / wall, 1),
            "probes_lost": snap["probes_lost"], "probes_late": snap.get("probes_late"),
            "probes_held": snap.get("probes_held"),
            "named": [loc["target"] for loc in snap["localizations"]],
            "error": snap["error"]}


def blackholes(att, node: str, repeat: int, period_ms: float,
               timeout_ms: float | None) -> list[dict]:
    out = []
    cp = ContinuousProber(att, period_ms=period_ms, timeout_ms=timeout_ms)
    with cp:
        for _ in range(repeat):
            time.sleep(SETTLE_S)
            began = time.monotonic_ns()
            faults.blackhole(att, node)
            applied = time.monotonic_ns()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and not any(
                    loc.target == node and loc.open for loc in cp.named()):
                time.sleep(0.001)
            loc = next((loc for loc in cp.named() if loc.target == node), None)
            snap = cp.snapshot()
            faults.clear(att, node)
            out.append({"nft_ms": round((applied - began) / 1e6, 1),
                        "first_lost_ms": None if loc is None
                        else round((loc.first_failed_ns - began) / 1e6, 1),
                        "named_ms": None if loc is None
                        else round((loc.named_ns - began) / 1e6, 1),
                        "named_after_first_lost_ms": None if loc is None
                        else round((loc.named_ns - loc.first_failed_ns) / 1e6, 1),
                        "timeout_ms": snap["timeout_ms"],
                        "others": [x.target for x in cp.named() if x.target != node]})
            time.sleep(SETTLE_S)  # cleared before the next
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", required=True)
    ap.add_argument("--period", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=None)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--blackhole", metavar="NODE", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    att = lab.attach(a.lab)
    if a.blackhole:
        runs = blackholes(att, a.blackhole, a.repeat, a.period, a.timeout)
        print(json.dumps(runs) if a.json else "\n".join(map(str, runs)))
        return
    r = measure(att, a.period, a.timeout, a.seconds)
    if a.json:
        print(json.dumps(r))
    else:
        for k, v in r.items():
            print(f"{k:>14}: {v}")


if __name__ == "__main__":
    main()
