"""Drill benchmark: failover figures of the shipped drills, mrc and single-path side by side.

  link-down   t0-t1-link-down on a netns mrc-4p, one T0-T1 link (t0-p0-r0's to T1 0): mrc
              loses 1 of its 8 paths; single-path counts only runs whose QP's ECMP hash put
              its one path over that link (it loses its path), tried until --repeat did:
              detection µs, repair µs, packets lost per fault, time back to 90% of the
              goodput before, localization ms (the continuous prober), wall time per drill.
              Median and p90 over --repeat (>= 10).
  shaped      on mrc-4p-shaped (every host link 25 Mbit/s, fabric links 50 Mbit/s), where the
              fabric and not the CPU is the bottleneck: one 8 MiB transfer sprayed (mrc) vs one
              path (single-path); 16 single-path QPs between the same two hosts (their ECMP
              hashes collide on paths: how many distinct paths they took) vs 1 mrc QP; the
              same 16 QPs in mrc.
Everything in one run, in private run/build dirs (bench_lab's), so ratios mean something on
this noisy 2-core machine. Results: bench/results/drills.json, a markdown table on stdout.
Usage: .venv/bin/python bench/bench_drills.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import lab, lifecycle
from twin import traffic as T
from twin.chaos import drill as D
from twin.chaos import runner
from twin.chaos.results import DrillRun
from twin.fabric import paths as P

RESULTS = Path(__file__).resolve().parent / "results" / "drills.json"
FABRICS = Path(__file__).resolve().parents[1] / "lab" / "fabrics"
MODES = ("mrc", "single-path")
FIGURES = ("detection_us", "repair_us", "packets_lost", "back_to_90_ms", "localized_ms",
           "wall_s")


def p90(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(0.9 * (len(values) - 1))))]


def stat(values: list) -> dict:
    got = [v for v in values if v is not None]
    if not got:
        return {"median": None, "p90": None, "n": 0, "of": len(values)}
    return {"median": statistics.median(got), "p90": p90(got), "min": min(got),
            "max": max(got), "n": len(got), "of": len(values)}


def figures_of(run: DrillRun) -> dict:
    (f,) = run.faults
    return {"detection_us": f.detection_us, "repair_us": f.repair_us,
            "packets_lost": f.packets_lost, "back_to_90_ms": run.metric("back_to_90_ms"),
            "localized_ms": None if f.localized_us is None else f.localized_us / 1000,
            "wall_s": run.wall_s, "exact": run.exact, "verdict": run.verdict,
            "target": f.target}


def link_down(repeat: int, size: int) -> dict:
    """One T0-T1 link cut mid-transfer, `repeat` times per mode. mrc sprays over all 8
    paths, so every run loses 1 of them. single-path's one path is its QP's ECMP hash
    (drawn anew per QP): only a run whose path crosses the cut link measures anything,
    so single-path runs until `repeat` of them did (at most 12 x repeat tries), and the
    table says how many were tried."""
    name = "bench-dr4"
    spec = FABRICS / "mrc-4p.yml"
    lab.up(str(spec), "netns", name=name)
    try:
        att = lab.attach(name)
        fabric = att.fabric
        d = D.load_drill(D.find("t0-t1-link-down")).resized(size)
        plane, t1 = 0, 0
        target = f"{fabric.t0_name(plane, 0)}:{fabric.t0_uplink(t1)}"  # r0's, as r0h0 sends
        d = dataclasses.replace(d, timeline=tuple(
            dataclasses.replace(s, target=target, random=None) for s in d.timeline))
        samples = {m: [] for m in MODES}
        tried = {m: 0 for m in MODES}
        for mode in MODES:
            while len(samples[mode]) < repeat and tried[mode] < 12 * repeat:
                tried[mode] += 1
                (r,) = runner.run_all(att, d, mode=mode, seed=100 + tried[mode])
                sp = r.run.flows[0]["single_path"]
                if sp is not None and P.parse_path(fabric, sp)[:2] != (plane, t1):
                    continue  # its hash chose a path the cut missed
                samples[mode].append(figures_of(r.run))
                a = samples[mode][-1]
                print(f"  {mode} {len(samples[mode])}/{repeat} (try {tried[mode]}) "
                      f"{a['target']}: detection {a['detection_us']} µs, repair "
                      f"{a['repair_us']} µs, lost {a['packets_lost']}", file=sys.stderr)
    finally:
        lifecycle.down(name)
    return {m: {k: stat([s[k] for s in samples[m]]) for k in FIGURES}
            | {"exact": sum(s["exact"] for s in samples[m]), "runs": len(samples[m]),
               "tried": tried[m], "pass": sum(s["verdict"] == "pass" for s in samples[m])}
            for m in MODES}


def shaped(repeat: int) -> dict:
    name = "bench-drs"
    lab.up(str(FABRICS / "mrc-4p-shaped.yml"), "netns", name=name)
    out: dict[str, list] = {"spray_s": [], "single_s": [], "sp16_s": [], "mrc16_s": [],
                            "sp16_paths": []}
    try:
        att = lab.attach(name)
        fabric = att.fabric
        paths_between = len(fabric.nic_planes) * fabric.spec.t1_per_plane
        size = 8 << 20
        for _ in range(repeat):
            for mode, key in (("mrc", "spray_s"), ("single-path", "single_s")):
                r = T.run(att.runtime, "bulk", [T.Flow("r0h0", "r1h0", size)], mode)
                out[key].append(r.elapsed_s)
            flows = [T.Flow("r0h0", "r1h0", size // 16) for _ in range(16)]
            r = T.run(att.runtime, "bulk", flows, "single-path")
            out["sp16_s"].append(r.elapsed_s)
            out["sp16_paths"].append(len({f.result.single_path for f in r.flows
                                          if f.result is not None}))
            r = T.run(att.runtime, "bulk", [T.Flow("r0h0", "r1h0", size // 16)
                                            for _ in range(16)], "mrc")
            out["mrc16_s"].append(r.elapsed_s)
    finally:
        lifecycle.down(name)
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"paths_between": paths_between, "size": size, "median": med,
            "spray_speedup": med["single_s"] / med["spray_s"],
            "mrc1_vs_sp16": med["sp16_s"] / med["spray_s"],
            "mrc16_vs_sp16": med["sp16_s"] / med["mrc16_s"], "samples": out}


def fmt(v, unit="") -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}{unit}" if abs(v) >= 100 else f"{v:.3g}{unit}"


def table(res: dict) -> str:
    ld = res["link_down"]
    body = []
    for k in FIGURES:
        a, b = ld["mrc"][k], ld["single-path"][k]
        body.append([k, f"{fmt(a['median'])} / {fmt(a['p90'])} ({a['n']}/{a['of']})",
                     f"{fmt(b['median'])} / {fmt(b['p90'])} ({b['n']}/{b['of']})"])
    body.append(["byte-exact, verdict pass", f"{ld['mrc']['exact']}, {ld['mrc']['pass']} "
                 f"of {ld['mrc']['runs']}", f"{ld['single-path']['exact']}, "
                 f"{ld['single-path']['pass']} of {ld['single-path']['runs']}"])
    body.append(["runs tried (single-path: until its path crossed the cut)",
                 str(ld["mrc"]["tried"]), str(ld["single-path"]["tried"])])
    text = B.markdown(["link-down on mrc-4p (median / p90, n measured)", "mrc", "single-path"],
                      body)
    if "shaped" in res:
        s = res["shaped"]
        m = s["median"]
        text += "\n\n" + B.markdown(
            ["mrc-4p-shaped, 8 MiB r0h0 -> r1h0", "median s", "ratio"],
            [["mrc, 1 QP (spray over every plane)", f"{m['spray_s']:.3f}", "1"],
             ["single-path, 1 QP", f"{m['single_s']:.3f}",
              f"spray {s['spray_speedup']:.2f}x faster"],
             [f"single-path, 16 QPs ({statistics.median(s['samples']['sp16_paths']):.0f} "
              f"distinct paths of {s['paths_between']})", f"{m['sp16_s']:.3f}",
              f"1 mrc QP {s['mrc1_vs_sp16']:.2f}x faster"],
             ["mrc, 16 QPs", f"{m['mrc16_s']:.3f}",
              f"vs 16 single-path {s['mrc16_vs_sp16']:.2f}x"]])
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="3 repetitions, no shaped part")
    ap.add_argument("--no-shaped", action="store_true", help="only the link-down part")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else args.repeat
    started = time.monotonic()
    res = {"machine": B.machine(), "repeat": repeat}
    print(f"link-down x{repeat}, mrc and single-path", file=sys.stderr)
    res["link_down"] = link_down(repeat, 32 << 20)
    if not (args.quick or args.no_shaped):
        print("shaped fabric", file=sys.stderr)
        res["shaped"] = shaped(max(3, repeat // 3))
    res["seconds"] = time.monotonic() - started
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(table(res))
    print(f"\n{res['seconds']:.0f} s; {RESULTS}")
    ok = res["link_down"]["mrc"]["exact"] == res["link_down"]["mrc"]["runs"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
