"""The BGP baseline beside MRC's fabric: the same fabric (mrc-4p) brought up both ways on
netns, side by side in one run, round-robin.

    up        static-srv6 (uSID tables) vs bgp (FRR on 16 routers, until converged)
    verify    route readback and probes (SRv6 paths and loopbacks vs FRR, the kernel's
              BGP routes and one probe per host pair and plane)
    transfer  64 MiB r0h0 -> r1h0: MRC on SRv6, MRC over ECMP (UDP entropy), RoCE
              single-path over ECMP (8 QPs)
    reconverge  on the BGP lab, a T0-T1 link down then up: seconds until every router
              holds its plan again

Each figure is the median of --repeat runs; ratios are against MRC's static fabric in
the same run, since the 2-core machine is noisy. Labs live in a private temp run
directory (TWIN_RUN_DIR, TWIN_BUILD_DIR). Exits 1 if a verify fails or a transfer is
not byte-exact. Usage: .venv/bin/python bench/bench_bgp.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

TMP = Path(tempfile.mkdtemp(prefix="twin-bench-bgp-"))
os.environ["TWIN_RUN_DIR"] = str(TMP / "run")
os.environ["TWIN_BUILD_DIR"] = str(TMP / "build")

from twin import lab, lifecycle  # noqa: E402  (the environment above must be set first)
from twin import traffic as T  # noqa: E402
from twin.faults import clear as clear_fault  # noqa: E402
from twin.faults import link_down  # noqa: E402
from twin.lab import phases  # noqa: E402
from twin.progress import Steps  # noqa: E402
from twin.verify import run_verify  # noqa: E402

MiB = 1 << 20
SIZE = 64 * MiB


def timed(fn, *args, **kwargs):
    start = time.monotonic()
    out = fn(*args, **kwargs)
    return time.monotonic() - start, out


def one_round(figures: dict[str, list[float]]) -> bool:
    ok = True
    for routing, name in (("static-srv6", "bench-srv6"), ("bgp", "bench-bgp")):
        up_s, _ = timed(lab.up, "mrc-4p", "netns", name=name, routing=routing)
        figures[f"up {routing}"].append(up_s)
        att = lab.attach(name)
        verify_s, report = timed(run_verify, att.runtime, att.plan)
        ok &= report.ok
        figures[f"verify {routing}"].append(verify_s)
        runs = [("mrc", 1)] if routing == "static-srv6" else [("mrc", 1), ("single-path", 8)]
        for mode, qps in runs:
            flows = [T.Flow("r0h0", "r1h0", SIZE // qps) for _ in range(qps)]
            run = T.run(att.runtime, "bulk", flows, mode, timeout_s=180)
            ok &= run.ok
            gbps = SIZE * 8 / max(f.result.elapsed_s for f in run.flows) / 1e9 \
                if run.ok else 0.0
            figures[f"goodput {mode}{' x8' if qps > 1 else ''} on {routing}"].append(gbps)
        if routing == "bgp":
            routers = [n for n in att.plan.nodes.values() if n.bgp is not None]
            link_down(att, "t0-p0-r0:eth3")
            time.sleep(1.0)
            clear_fault(att)
            took, _ = timed(phases.converged, att.runtime, routers, Steps(), 60)
            figures["reconverge bgp (link up again)"].append(took)
        lifecycle.down(name)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    figures: dict[str, list[float]] = {}
    for key in ("up static-srv6", "up bgp", "verify static-srv6", "verify bgp",
                "goodput mrc on static-srv6", "goodput mrc on bgp",
                "goodput single-path x8 on bgp", "reconverge bgp (link up again)"):
        figures[key] = []
    ok = True
    try:
        for i in range(args.repeat):
            print(f"round {i + 1} of {args.repeat}", file=sys.stderr)
            ok &= one_round(figures)
    finally:
        for name in ("bench-srv6", "bench-bgp"):
            try:
                lifecycle.down(name)
            except Exception:  # noqa: BLE001  (already down)
                pass
        shutil.rmtree(TMP, ignore_errors=True)
    base = {"up": statistics.median(figures["up static-srv6"]),
            "verify": statistics.median(figures["verify static-srv6"]),
            "goodput": statistics.median(figures["goodput mrc on static-srv6"])}
    print(f"{'figure':34} {'median':>9} {'min':>9} {'max':>9}  vs MRC's static fabric")
    for key, values in figures.items():
        med = statistics.median(values)
        unit = "Gbit/s" if key.startswith("goodput") else "s"
        ref = base.get(key.split()[0])
        ratio = f"{med / ref:.2f}x" if ref and key.split()[0] in base else ""
        print(f"{key:34} {med:8.3f}{unit[0]} {min(values):8.3f}  {max(values):8.3f}  {ratio}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
