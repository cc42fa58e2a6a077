"""Failover benchmark: detection and repair per fault kind, the compiled transport core and
the reference Python transport side by side in one run.

The shipped drills (lab/drills), run by the drill runner (twin.chaos.runner) as `twin drill
run` runs them, on netns labs of their own fabrics, named bench-fo-<fabric>:
  t0-t1-link-down    mrc-4p: a T0-T1 link goes down under a bulk r0h0 -> r1h0
  nic-port-down      mrc-4p-shaped: one of r1h0's NIC ports goes down (the sender learns
                     it from the port-state bitmap in SACKs)
  t1-blackhole       mrc-4p: a T1 silently drops everything it forwards
  startup-dead-link  mrc-4p: a T0-T1 link is dead before the first write (no denylist)
Per drill, per repetition, both transports in turn (the order swaps every repetition, so
drift on the noisy 2-core machine hits both alike): the lab's endpoints are restarted with
MRC_TWIN_TRANSPORT=auto (the compiled core where it is built) or =python (the reference),
every host's, as `twin up` starts them (their environment is ours), and each run records
what its endpoints said they ran (`hello`). A drill's random target is drawn with the
repetition's seed, the same for both transports. The continuous prober is off (its probes
are CPU the figures do not need; localization is bench_drills' figure).

Figures, from the runner's (twin.chaos.metrics, the QPs' event logs): detection µs (the
first loss, retirement or port change after the fault), repair µs (every packet the fault
cost delivered again), packets lost; median and worst over the repetitions, and the
compiled/reference ratio of the medians. startup-dead-link's fault is applied before the
first write, so its figures count from the fault, not from the traffic (how drills
measure that is being changed in issue 35).

Private run/build dirs (bench_lab's). Results: bench/results/failover.json, a markdown
table on stdout. Exits 1 if a run did not deliver its bytes exactly.
Usage: .venv/bin/python bench/bench_failover.py [--repeat N] [--quick] [--drill NAME ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import endpoints, lab, lifecycle
from twin.chaos import drill as D
from twin.chaos import runner
from twin.chaos.results import FaultFigures
from twin.runtime.netns import pids_in
from twin.state import known_labs

RESULTS = Path(__file__).resolve().parent / "results" / "failover.json"
FABRICS = Path(__file__).resolve().parents[1] / "lab" / "fabrics"
DRILLS = ("t0-t1-link-down", "nic-port-down", "t1-blackhole", "startup-dead-link")
TRANSPORTS = {"compiled": "auto", "reference": "python"}  # label -> MRC_TWIN_TRANSPORT
FIGURES = ("detection_us", "repair_us", "packets_lost")
TRANSPORT_ENV = "MRC_TWIN_TRANSPORT"


def restart_endpoints(att, transport: str) -> dict:
    """Every host's endpoint stopped and started again with MRC_TWIN_TRANSPORT=transport;
    what each said it runs."""
    rt = att.runtime
    hosts = [h.name for h in att.fabric.hosts]
    nets = [rt.netns_path(h) for h in hosts]
    for pids in pids_in(nets).values():
        for p in pids:
            try:
                os.kill(p, 15)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while any(pids_in(nets).values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    saved = os.environ.get(TRANSPORT_ENV)
    os.environ[TRANSPORT_ENV] = transport
    try:
        endpoints.start(rt, hosts)  # their environment is ours
    finally:
        if saved is None:
            os.environ.pop(TRANSPORT_ENV, None)
        else:
            os.environ[TRANSPORT_ENV] = saved
    said = {}
    for h in hosts:
        with endpoints.client(rt, h) as c:
            said[h] = c.hello().get("transport")
    return said


def one(att, drill, seed: int) -> dict:
    r = runner.run(att, drill, seed=seed, probe=False)
    d = r.run
    f = d.faults[0] if d.faults else FaultFigures()
    return {"seed": seed, "verdict": d.verdict, "exact": d.exact,
            "target": f.target, "detection_us": f.detection_us,
            "repair_us": f.repair_us, "packets_lost": f.packets_lost,
            "wall_s": d.wall_s}


def stat(values: list) -> dict:
    got = [v for v in values if v is not None]
    if not got:
        return {"median": None, "worst": None, "n": 0, "of": len(values)}
    return {"median": statistics.median(got), "worst": max(got), "n": len(got),
            "of": len(values)}


def run_drill(name: str, repeat: int) -> dict:
    drill = D.load_drill(D.find(name))
    fabric = drill.fabric
    lab_name = f"bench-fo-{fabric}"
    lab.up(str(FABRICS / f"{fabric}.yml"), "netns", name=lab_name)
    runs: dict[str, list] = {t: [] for t in TRANSPORTS}
    said: dict[str, dict] = {}
    try:
        att = lab.attach(lab_name)
        for rep in range(repeat):
            order = list(TRANSPORTS) if rep % 2 == 0 else list(TRANSPORTS)[::-1]
            for label in order:
                said[label] = restart_endpoints(att, TRANSPORTS[label])
                x = one(att, drill, seed=100 + rep)
                runs[label].append(x)
                print(f"  {name} {label} {rep + 1}/{repeat} {x['target']}: detection "
                      f"{x['detection_us']} µs, repair {x['repair_us']} µs, lost "
                      f"{x['packets_lost']}, exact {x['exact']}", file=sys.stderr, flush=True)
    finally:
        if lab_name in known_labs():  # our private run dir only: never another lab
            lifecycle.down(lab_name)
        time.sleep(B.SETTLE_S)
    return {"fabric": fabric, "endpoints_said": said, "runs": runs,
            "stats": {label: {k: stat([x[k] for x in xs]) for k in FIGURES}
                      for label, xs in runs.items()}}


def fmt(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def ratio(a, b) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def table(res: dict) -> str:
    rows = []
    for name, d in res["drills"].items():
        s = d["stats"]
        c, r = s["compiled"], s["reference"]
        rows.append([f"{name} ({d['fabric']})",
                     *(f"{fmt(x[k]['median'])} / {fmt(x[k]['worst'])}"
                       for k in ("detection_us", "repair_us") for x in (c, r)),
                     ratio(c["repair_us"]["median"], r["repair_us"]["median"]),
                     f"{fmt(c['packets_lost']['median'])} / {fmt(r['packets_lost']['median'])}",
                     f"{c['repair_us']['n']}/{c['repair_us']['of']}, "
                     f"{r['repair_us']['n']}/{r['repair_us']['of']}"])
    return B.markdown(["drill (fabric)", "detection µs compiled (median / worst)",
                       "detection µs reference", "repair µs compiled", "repair µs reference",
                       "repair compiled / reference", "packets lost (median) c / r",
                       "runs measured c, r"], rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="runs per drill and transport")
    ap.add_argument("--quick", action="store_true", help="3 runs per drill and transport")
    ap.add_argument("--drill", action="append", choices=DRILLS,
                    help="only these drills (default: all four)")
    args = ap.parse_args(argv)
    repeat = 3 if args.quick else max(1, args.repeat)
    started = time.monotonic()
    res: dict = {"machine": B.machine(), "repeat": repeat, "quick": args.quick, "drills": {}}
    try:
        for name in args.drill or DRILLS:
            print(f"{name} x{repeat}, compiled and reference", file=sys.stderr, flush=True)
            res["drills"][name] = run_drill(name, repeat)
    finally:
        import shutil
        shutil.rmtree(B.TMP, ignore_errors=True)
    res["machine_after"] = B.machine()
    res["seconds"] = time.monotonic() - started
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(table(res))
    print(f"\n{res['seconds']:.0f} s; {RESULTS}")
    bad = [(n, label, x["seed"]) for n, d in res["drills"].items()
           for label, xs in d["runs"].items() for x in xs if not x["exact"]]
    print(*(f"NOT EXACT: {n} {label} seed {s}" for n, label, s in bad), sep="\n",
          file=sys.stderr, end="\n" if bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
