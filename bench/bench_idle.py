"""Idle-cost benchmark: what 64 MRC endpoints cost the machine while nothing is sent.

It brings up a 64-host netns fabric (2 planes x 8 racks x 8 hosts, 2 T1 per plane: 84
namespaces, one endpoint daemon per host), asks every endpoint for its pid (`hello`) and
reads each process's CPU ticks (utime + stime, /proc/PID/stat) over windows of --window
seconds. Two kinds of window alternate, side by side in one run because the 2-core
machine is noisy:

    idle   no QP anywhere: every endpoint should block in its selector (UDP, control
           and netlink sockets), with no timer armed
    busy   one 64 MiB bulk r0h0 -> r1h0 runs: the pair's CPU, and what the other 62
           idle endpoints take meanwhile

and reports % of one core: all 64 endpoints idle (goal: below 5%), per endpoint, the busy
pair, and the idle rest during the transfer; plus the transfer's goodput. The lab lives
in a private run directory (TWIN_RUN_DIR) and is always taken down.
Usage: .venv/bin/python bench/bench_idle.py [--window S] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import endpoints, lab, lifecycle
from twin import traffic as T

SHAPE = (2, 8, 8, 2)  # planes, racks, hosts per rack, T1 per plane: 64 hosts
TICK = os.sysconf("SC_CLK_TCK")
BUSY = ("r0h0", "r1h0")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def window(pids: dict[str, int], seconds: float) -> tuple[dict[str, float], float]:
    """CPU seconds each pid used over a window, and the window's wall length."""
    before, t0 = {h: cpu_s(p) for h, p in pids.items()}, time.monotonic()
    time.sleep(seconds)
    after, t1 = {h: cpu_s(p) for h, p in pids.items()}, time.monotonic()
    return {h: after[h] - before[h] for h in pids}, t1 - t0


def pct(cpu: float, wall: float) -> float:
    return 100 * cpu / wall


def transfer(att, result: dict) -> None:
    flows = T.flows_for("bulk", [], 64 << 20, *BUSY)
    result["run"] = T.run(att.runtime, "bulk", flows, "mrc", timeout_s=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=float, default=5.0, help="seconds per window")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    name = "bench-idle"
    spec = B.write_spec(SHAPE, B.TMP, name)
    t0 = time.monotonic()
    print(f"up {name}: {SHAPE[0]} planes x {SHAPE[1]} racks x {SHAPE[2]} hosts ...",
          flush=True)
    lab.up(str(spec), "netns")
    up_s = time.monotonic() - t0
    rows: dict[str, list[float]] = {"idle_all": [], "idle_per_endpoint": [], "busy_pair": [],
                                    "idle_rest_during_transfer": [], "goodput_gbps": []}
    try:
        att = lab.attach(name)
        hosts = [h.name for h in att.fabric.hosts]
        pids = {}
        for h in hosts:
            with endpoints.client(att.runtime, h) as c:
                pids[h] = c.hello()["pid"]
        print(f"{len(pids)} endpoints up in {up_s:.1f}s; settling 2 s", flush=True)
        time.sleep(2)
        for r in range(args.rounds):
            used, wall = window(pids, args.window)
            rows["idle_all"].append(pct(sum(used.values()), wall))
            rows["idle_per_endpoint"].append(pct(sum(used.values()), wall) / len(pids))
            result: dict = {}

            th = threading.Thread(target=transfer, args=(att, result))
            th.start()
            time.sleep(0.5)  # the QPs are set up and sending
            used, wall = window(pids, min(args.window, 2.0))
            th.join(timeout=150)
            run = result.get("run")
            rows["busy_pair"].append(pct(sum(used[h] for h in BUSY), wall))
            rows["idle_rest_during_transfer"].append(
                pct(sum(v for h, v in used.items() if h not in BUSY), wall))
            if run is not None and run.ok:
                rows["goodput_gbps"].append(run.flows[0].result.goodput_gbps)
            print(f"round {r + 1}/{args.rounds}: idle {rows['idle_all'][-1]:.2f}% of a core "
                  f"(64 endpoints), transfer pair {rows['busy_pair'][-1]:.0f}%, idle rest "
                  f"meanwhile {rows['idle_rest_during_transfer'][-1]:.2f}%", flush=True)
            time.sleep(1)  # the closed QPs' last timers drain before the next idle window
    finally:
        t0 = time.monotonic()
        lifecycle.down(name)
        print(f"down {name} in {time.monotonic() - t0:.1f}s", flush=True)
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
               for k, v in rows.items() if v}
    if args.json:
        print(json.dumps({"shape": SHAPE, "endpoints": len(pids), "up_s": up_s,
                          "window_s": args.window, "rounds": args.rounds,
                          "percent_of_one_core": summary}, indent=2))
        return 0
    print(f"\n{len(pids)} endpoints, {args.rounds} rounds of {args.window:g} s idle + 2 s busy "
          f"(% of one core; median [min..max])")
    for k, s in summary.items():
        unit = " Gbit/s" if k == "goodput_gbps" else "%"
        print(f"  {k:28s} {s['median']:8.3f}{unit}  [{s['min']:.3f} .. {s['max']:.3f}]")
    idle = summary["idle_all"]["median"]
    print(f"  (resolution: one clock tick, 1/{TICK} s, is {100 / TICK / args.window:.2f}% of a "
          f"core over a {args.window:g} s window)")
    print(f"\n  goal: 64 idle endpoints below 5% of one core: {'met' if idle < 5 else 'MISSED'}")
    return 0 if idle < 5 else 1


if __name__ == "__main__":
    sys.exit(main())
