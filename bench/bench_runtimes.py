"""Runtime benchmark: `up`, `verify` and `down` of one fabric on the netns and docker runtimes.

For each fabric size it builds the same lab on both runtimes (real kernel, local
Docker engine, images mrc-twin/router and mrc-twin/host) and times
    up      spec -> plan -> nodes, veths, routes, SRv6   (twin.lab.up(spec, runtime))
    verify  route readback on every node + a source-routed probe through every
            path and loopback (twin.verify.run_verify); every report must be ok
    down    remove every node                            (twin.lifecycle.down)
then reports the docker/netns ratio of each and up ms per node. The library's
progress steps are timed to split up into prepare (compile, render, state; for
docker also the engine ping and image check), create (`ip netns add` / container
start), wire (veths) and configure (routes, SRv6). Configure and verify work on
each node's network namespace on both runtimes, so the gap is what containers cost.

Both runtimes run side by side in one run, interleaved round-robin (repetition x
size x runtime, with the runtime order flipped every repetition), because the
2-core machine is noisy: drift in its load then hits both runtimes alike, so the
docker/netns ratios taken within the run mean something. Medians and minimums
are reported; after each `down` the bench waits bench_lab.SETTLE_S, since the
kernel frees namespaces (and the engine its containers) asynchronously.

Labs are named `bench-ns-...` and `bench-dk-...`. Spec generation, the private
TWIN_RUN_DIR / TWIN_BUILD_DIR, the timed run and the medians are bench_lab's.
Exits 1 if any verify fails. Usage: .venv/bin/python bench/bench_runtimes.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import asdict
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import dockerd, lifecycle
from twin.runtime import RUNTIMES
from twin.runtime.netns import list_netns
from twin.state import known_labs

RESULTS = Path(__file__).resolve().parent / "results" / "runtimes.json"
SIZES = [(2, 2, 2, 2), (4, 2, 2, 2), (8, 4, 4, 4)]  # planes, racks, hosts, t1s
ORDER = ("netns", "docker")  # repetition 1 in this order, repetition 2 reversed, ...
TAG = {"netns": "ns", "docker": "dk"}


def lab_name(size: tuple[int, ...], runtime: str) -> str:
    return f"bench-{TAG[runtime]}-" + B.lab_name(size).removeprefix("bench-")


def strays(names: list[str]) -> list[str]:
    """Namespaces or containers of these labs left by another run (none may exist)."""
    ns = [n for n in list_netns() if n.startswith(tuple(f"twin-{x}-" for x in names))]
    found = dockerd.client().containers.list(all=True, filters={"label": "containerlab"})
    return ns + [c.name for c in found if c.labels.get("containerlab") in names]


def machine() -> dict:
    c = dockerd.client()
    return {**B.machine(), "docker": c.version()["Version"],
            "containers": len(c.containers.list(all=True))}


def add_ratios(rows: list[dict]) -> None:
    """Each docker row gets docker/netns for up, verify, down and every phase (same size)."""
    netns = {tuple(r["size"]): r for r in rows if r["runtime"] == "netns"}
    for r in rows:
        if r["runtime"] == "docker":
            b = netns[tuple(r["size"])]
            r["vs_netns"] = {k: r[f"{k}_s"]["median"] / b[f"{k}_s"]["median"]
                             for k in ("up", "verify", "down")}
            r["phases_vs_netns"] = {k: v / b["phases_median_s"][k]
                                    for k, v in r["phases_median_s"].items()}


def tables(rows: list[dict]) -> str:
    def mm(r: dict, k: str) -> str:
        return f"{r[k]['median']:.3f} ({r[k]['min']:.3f})"

    def vs(r: dict, k: str) -> str:
        return f"x{r['vs_netns'][k]:.1f}" if "vs_netns" in r else "-"

    main = B.markdown(
        ["size (p,r,h,t)", "runtime", "nodes", "up s med (min)", "verify s med (min)",
         "down s med (min)", "up ms/node", "docker/netns up", "verify", "down"],
        [["{},{},{},{}".format(*r["size"]), r["runtime"], str(r["nodes"]), mm(r, "up_s"),
          mm(r, "verify_s"), mm(r, "down_s"), f"{r['up_ms_per_node']:.1f}",
          vs(r, "up"), vs(r, "verify"), vs(r, "down")] for r in rows])
    keys = list(rows[0]["phases_median_s"])
    phases = B.markdown(
        ["lab (median s)", *keys, "create ms/node"],
        [[r["lab"], *(f"{r['phases_median_s'][k]:.3f}" for k in keys),
          f"{1000 * r['phases_median_s']['create'] / r['nodes']:.1f}"] for r in rows])
    return f"{main}\n\n{phases}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2, help="repetitions per size (default 2)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, the 2 smallest sizes")
    args = ap.parse_args(argv)
    sizes, repeat = (SIZES[:2], 1) if args.quick else (SIZES, max(1, args.repeat))
    names = {(s, rt): lab_name(s, rt) for s in sizes for rt in ORDER}
    samples: dict[str, list[B.Sample]] = {n: [] for n in names.values()}
    try:
        why = RUNTIMES["docker"].unavailable()
        if why:
            sys.exit(f"the docker runtime cannot run here: {why}")
        stray = strays(list(names.values()))
        if stray:
            sys.exit(f"{len(stray)} nodes of another bench run exist (e.g. {stray[0]})")
        specs = {n: B.write_spec(s, B.TMP, n) for (s, _), n in names.items()}
        before, started = machine(), time.perf_counter()
        for rep in range(repeat):
            for size in sizes:
                for rt in ORDER if rep % 2 == 0 else ORDER[::-1]:
                    name = names[size, rt]
                    x = B.run_once(name, specs[name], rt)
                    samples[name].append(x)
                    print(f"  {rep + 1}/{repeat} {name}: up {x.up_s:.3f}s verify "
                          f"{x.verify_s:.3f}s down {x.down_s:.3f}s "
                          f"{'ok' if x.ok else 'FAILED'}", flush=True)
                    time.sleep(B.SETTLE_S)
    finally:
        for name in known_labs():  # our private run dir only: never another lab
            lifecycle.down(name)
        shutil.rmtree(B.TMP, ignore_errors=True)
    rows = [{"size": list(s), "runtime": rt, **B.summarize(samples[names[s, rt]])}
            for s in sizes for rt in ORDER]
    add_ratios(rows)
    print(tables(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": before, "machine_after": machine(), "repeat": repeat, "quick": args.quick,
        "order": ORDER, "settle_s": B.SETTLE_S, "wall_s": time.perf_counter() - started,
        "sizes": rows, "samples": [{"runtime": rt, **asdict(x)}
                                   for (_, rt), n in names.items() for x in samples[n]]},
        indent=2) + "\n")
    print(f"wrote {RESULTS}")
    failed = [x for n in names.values() for x in samples[n] if not x.ok]
    for x in failed:
        print(f"VERIFY FAILED: {x.lab}: {x.summary}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
