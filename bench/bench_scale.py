"""Scale sweep: up, verify, down and memory per node, from 12 nodes to the shipped
256-router mrc-8p-256 (320 nodes), on netns and docker (root).

For each size and runtime, one after another in one run (sizes round-robin per
repetition, so the machine's drift hits every size alike), it times

    up       twin.lab.up, with every phase's seconds (create, wire, configure,
             carrier, endpoints)
    verify   twin.verify.run_verify with its default: exhaustive up to 20,000
             probes, coverage K=2 past it (the report's probe count says which)
    down     twin.lifecycle.down

and the memory the lab holds while up: MemAvailable before `up` minus while up
(kernel: namespaces, veths, routes, SRv6 state; user: endpoint daemons, container
shims), per node. Then per-node cost: up ms / node, verify ms / node, MiB / node,
and the ratio of each to the smallest size's. A cost that is flat per node scales.

Labs are `bench-sc-...` in a private run directory; nothing else is touched. Exits 1
if a verify fails. Usage:
    .venv/bin/python bench/bench_scale.py [--runtimes netns,docker] [--repeat 1] [--max-nodes N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import lab, lifecycle
from twin.state import known_labs
from twin.verify import run_verify

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
# planes, racks, hosts per rack, T1s per plane -> nodes
SIZES = [(2, 2, 2, 2), (4, 2, 2, 2), (8, 4, 4, 4), (8, 8, 4, 8), (8, 12, 4, 12),
         (8, 16, 4, 16)]
TAG = {"netns": "ns", "docker": "dk"}


def nodes_of(size) -> int:
    p, r, h, t = size
    return p * r + p * t + r * h


def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def run_once(name: str, spec: Path, runtime: str) -> dict:
    steps = B.TimedSteps()
    free_before = mem_available_mib()
    t0 = time.perf_counter()
    state = lab.up(str(spec), runtime, steps).state
    up_s = time.perf_counter() - t0
    out = {"lab": name, "runtime": runtime, "nodes": len(state.nodes), "up_s": up_s,
           "phases": dict(steps.phases)}
    try:
        time.sleep(1.0)  # endpoints settle their heaps
        out["mem_mib"] = free_before - mem_available_mib()
        att = lab.attach(name)
        t0 = time.perf_counter()
        report = run_verify(att.runtime, att.plan)
        out["verify_s"] = time.perf_counter() - t0
        out["ok"] = report.ok
        out["probes"] = len(report.paths) + len(report.loops)
        out["coverage"] = report.coverage
    finally:
        t0 = time.perf_counter()
        lifecycle.down(name)
        out["down_s"] = time.perf_counter() - t0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runtimes", default="netns,docker")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--max-nodes", type=int, default=10_000)
    args = ap.parse_args(argv)
    runtimes = [r for r in args.runtimes.split(",") if r]
    sizes = [s for s in SIZES if nodes_of(s) <= args.max_nodes]
    samples: dict[tuple[str, str], list[dict]] = {}
    started = time.perf_counter()
    try:
        for rep in range(args.repeat):
            for runtime in runtimes:
                for size in sizes:
                    name = f"bench-sc-{TAG[runtime]}-" + B.lab_name(size).removeprefix("bench-")
                    spec = B.write_spec(size, B.TMP, name)
                    x = run_once(name, spec, runtime)
                    samples.setdefault((runtime, name), []).append(x)
                    print(f"  {rep + 1}/{args.repeat} {runtime} {x['nodes']:>4} nodes: up "
                          f"{x['up_s']:.1f}s verify {x['verify_s']:.1f}s ({x['probes']:,} "
                          f"probes) down {x['down_s']:.1f}s mem {x['mem_mib']:.0f} MiB "
                          f"{'ok' if x['ok'] else 'FAILED'}", flush=True)
                    time.sleep(B.SETTLE_S * 2)
    finally:
        for name in known_labs():  # our private run dir only
            lifecycle.down(name)
        shutil.rmtree(B.TMP, ignore_errors=True)
    rows = []
    for (runtime, name), xs in samples.items():
        med = {k: statistics.median(x[k] for x in xs)
               for k in ("up_s", "verify_s", "down_s", "mem_mib")}
        n = xs[0]["nodes"]
        phases = {k: statistics.median(x["phases"].get(k, 0.0) for x in xs)
                  for k in xs[0]["phases"]}
        rows.append({"runtime": runtime, "lab": name, "nodes": n, "probes": xs[0]["probes"],
                     "coverage": xs[0]["coverage"], **med, "phases": phases,
                     "up_ms_per_node": 1000 * med["up_s"] / n,
                     "verify_ms_per_node": 1000 * med["verify_s"] / n,
                     "down_ms_per_node": 1000 * med["down_s"] / n,
                     "mib_per_node": med["mem_mib"] / n,
                     "ok": all(x["ok"] for x in xs)})
    print(B.markdown(
        ["runtime", "nodes", "probes", "up s", "verify s", "down s", "MiB held",
         "up ms/node", "verify ms/node", "down ms/node", "MiB/node", "up/node vs smallest"],
        [[r["runtime"], str(r["nodes"]),
          f"{r['probes']:,}" + (" (K=2)" if r["coverage"] else ""),
          f"{r['up_s']:.1f}", f"{r['verify_s']:.1f}", f"{r['down_s']:.1f}",
          f"{r['mem_mib']:.0f}", f"{r['up_ms_per_node']:.0f}", f"{r['verify_ms_per_node']:.0f}",
          f"{r['down_ms_per_node']:.0f}", f"{r['mib_per_node']:.1f}",
          f"{r['up_ms_per_node'] / next(x for x in rows if x['runtime'] == r['runtime'])['up_ms_per_node']:.2f}"]  # noqa: E501
         for r in rows]))
    keys = sorted({k for r in rows for k in r["phases"]})
    print(B.markdown(["runtime", "nodes", *[f"{k} s" for k in keys]],
                     [[r["runtime"], str(r["nodes"]),
                       *(f"{r['phases'].get(k, 0):.1f}" for k in keys)] for r in rows]))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"wall_s": time.perf_counter() - started, "rows": rows,
                                   "samples": [x for xs in samples.values() for x in xs]},
                                  indent=2) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
