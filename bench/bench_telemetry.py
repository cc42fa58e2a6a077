"""How long a telemetry scrape takes, against the 1 s scrape interval (root).

Brings up mrc-4p and mrc-8p on netns under lab names of its own (in a run directory of
its own, so a user's labs are never touched), then, for each, side by side in one run:

  * Collector.sample() N times, idle and while a sprayed transfer runs;
  * the same through the exporter's HTTP /metrics, as Prometheus does;

and prints median / p90 ms, per-node µs, and the ratio of the p90 to the scrape
interval (well under 1 is the goal). Results: docs/benchmarks.md.

    .venv/bin/python bench/bench_telemetry.py [--samples 50]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INTERVAL_S = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure(lab: str, samples: int) -> dict:
    from twin import lab as L
    from twin.telemetry.collect import Collector

    att = L.attach(lab)
    nodes = len(att.plan.nodes)
    out = {"lab": lab, "nodes": nodes, "series": None}
    c = Collector(att)
    c.sample()  # sockets opened
    for load in ("idle", "traffic"):
        traffic = None
        if load == "traffic":
            traffic = subprocess.Popen(
                [sys.executable, "-m", "twin", "traffic", "bulk", "--lab", lab, "--src",
                 "r0h0", "--dst", "r1h0", "--size", "1G"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            time.sleep(2)
        ms = []
        for _ in range(samples):
            t = time.perf_counter()
            c.sample()
            ms.append((time.perf_counter() - t) * 1000)
            time.sleep(0.05)
        port = free_port()
        exp = subprocess.Popen([sys.executable, "-m", "twin.telemetry.exporter", "--lab", lab,
                                "--port", str(port)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        http = []
        try:
            deadline = time.monotonic() + 20
            body = b""
            while time.monotonic() < deadline:
                try:
                    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                                  timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.1)
            out["series"] = sum(1 for line in body.splitlines()
                                if line and not line.startswith(b"#"))
            for _ in range(samples):
                t = time.perf_counter()
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                http.append((time.perf_counter() - t) * 1000)
                time.sleep(0.05)
        finally:
            exp.terminate()
            exp.wait()
            if traffic:
                traffic.terminate()
                traffic.wait()
        out[load] = {"sample_ms_median": round(statistics.median(ms), 2),
                     "sample_ms_p90": round(pct(ms, 0.9), 2),
                     "http_ms_median": round(statistics.median(http), 2),
                     "http_ms_p90": round(pct(http, 0.9), 2),
                     "us_per_node": round(statistics.median(ms) * 1000 / nodes, 1),
                     "p90_over_interval": round(pct(http, 0.9) / 1000 / INTERVAL_S, 4)}
    c.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args()
    run = tempfile.mkdtemp(prefix="twin-bench-telemetry-")
    os.environ["TWIN_RUN_DIR"] = run
    os.environ["TWIN_BUILD_DIR"] = str(Path(run) / "build")
    from twin import lab as L
    from twin import lifecycle

    results = []
    for builtin in ("mrc-4p", "mrc-8p"):
        name = f"bench-tel-{builtin}"
        spec = Path(run) / f"{name}.yml"
        spec.write_text((ROOT / "lab" / "fabrics" / f"{builtin}.yml").read_text().replace(
            f"name: {builtin}\n", f"name: {name}\n", 1))
        print(f"up {name} ...", file=sys.stderr)
        L.up(str(spec), "netns")
        try:
            results.append(measure(name, args.samples))
        finally:
            lifecycle.down(name)
    print(f"{'lab':<20}{'nodes':>6}{'series':>8}  {'load':<8}{'sample ms med/p90':>20}"
          f"{'http ms med/p90':>18}{'us/node':>9}{'p90/1s':>8}")
    for r in results:
        for load in ("idle", "traffic"):
            x = r[load]
            print(f"{r['lab']:<20}{r['nodes']:>6}{r['series']:>8}  {load:<8}"
                  f"{x['sample_ms_median']:>10} / {x['sample_ms_p90']:<7}"
                  f"{x['http_ms_median']:>9} / {x['http_ms_p90']:<6}{x['us_per_node']:>9}"
                  f"{x['p90_over_interval']:>8}")
    a, b = results
    print(f"mrc-8p / mrc-4p scrape time (traffic, median): "
          f"{b['traffic']['http_ms_median'] / a['traffic']['http_ms_median']:.2f}x for "
          f"{b['nodes'] / a['nodes']:.2f}x the nodes")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "telemetry.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
