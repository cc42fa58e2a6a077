"""Lab benchmark: how `up`, `verify` and `down` of a netns lab scale with fabric size.

For each fabric size, on the real kernel (root, network namespaces), it times
    up      spec -> plan -> namespaces, veths, routes, SRv6   (twin.lab.up, netns)
    verify  route readback on every node + a source-routed probe through every
            path and loopback (twin.verify.run_verify); every report must be ok
    down    remove every namespace                            (twin.lifecycle.down)
and derives per-node cost (up ms / node, verify ms / node) and the probe rate
((paths + loopbacks) / verify seconds). The library's progress steps are timed
to split up and verify into phases, and verify's pure-Python path computation
is also timed on its own: that is where the time goes.

Sizes are measured side by side in one run, round-robin (repetition 1 of every
size, then repetition 2, ...), because the 2-core machine is noisy: drift in its
load then hits every size alike, so ratios against the smallest size mean
something. Medians and minimums are reported. After each `down` the bench waits
SETTLE_S, since the kernel frees namespaces asynchronously and would otherwise
bill a large lab's teardown to the next lab's `up`.

Labs are named `bench-...`; their state and build files live in a private temp
dir (TWIN_RUN_DIR, TWIN_BUILD_DIR), so no other lab is seen or touched. Exits 1
if any verify fails. Usage: .venv/bin/python bench/bench_lab.py [--repeat N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

TMP = Path(tempfile.mkdtemp(prefix="twin-bench-"))
os.environ["TWIN_RUN_DIR"] = str(TMP / "run")
os.environ["TWIN_BUILD_DIR"] = str(TMP / "build")

from twin import lab, lifecycle  # noqa: E402  (the environment above must be set first)
from twin.fabric import paths as P  # noqa: E402
from twin.progress import Steps  # noqa: E402
from twin.runtime.netns import list_netns  # noqa: E402
from twin.state import known_labs  # noqa: E402
from twin.verify import run_verify  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "lab.json"
SETTLE_S = 1.0  # measured: without it a small lab's up after the largest one's down is ~1.5x
SIZES = [(2, 2, 2, 2), (4, 2, 2, 2), (8, 2, 2, 2), (8, 4, 4, 4)]  # planes, racks, hosts, t1s
STEP_NAMES = {"creating": "create", "wiring": "wire", "configuring": "configure",
              "waiting": "carrier", "starting": "endpoints",
              "reading": "readback+paths", "probing": "probing"}


def lab_name(size: tuple[int, ...]) -> str:
    return "bench-p{}r{}h{}t{}".format(*size)


class TimedSteps(Steps):
    """Seconds spent in each step the library announces (keyed by STEP_NAMES)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._label, self._since = "", 0.0

    def start(self, label: str, total: int | None = None) -> None:
        self.done()
        self._label, self._since = STEP_NAMES.get(label.split()[0], label), time.perf_counter()

    def done(self) -> None:
        if self._label:
            self.phases[self._label] = time.perf_counter() - self._since
        self._label = ""


@dataclass
class Sample:
    lab: str
    nodes: int = 0
    probes: int = 0
    up_s: float = 0.0
    verify_s: float = 0.0
    down_s: float = 0.0
    paths_s: float = 0.0
    phases: dict = field(default_factory=dict)
    ok: bool = False
    summary: dict = field(default_factory=dict)


def write_spec(size: tuple[int, ...], where: Path, name: str | None = None) -> Path:
    name = name or lab_name(size)
    shape = dict(zip(("planes", "racks", "hosts_per_rack", "t1_per_plane"), size, strict=True))
    path = where / f"{name}.yml"
    path.write_text(yaml.safe_dump({"name": name, "mtu": 9000, **shape}))
    return path


def path_build_s(fabric) -> float:
    """What run_verify computes before it probes: every path and its reverse."""
    t0 = time.perf_counter()
    paths = P.loopback_paths(fabric) + P.host_pairs_paths(fabric)
    _ = [P.reverse(fabric, p) for p in paths if p.kind not in ("loop-t0", "loop-t1")]
    return time.perf_counter() - t0


def run_once(name: str, spec: Path, runtime: str = "netns") -> Sample:
    s, up_steps, verify_steps = Sample(name), TimedSteps(), TimedSteps()
    t0 = time.perf_counter()
    state = lab.up(str(spec), runtime, up_steps).state
    s.up_s, s.nodes = time.perf_counter() - t0, len(state.nodes)
    try:
        att = lab.attach(name)
        t0 = time.perf_counter()
        report = run_verify(att.runtime, att.plan, steps=verify_steps)
        s.verify_s = time.perf_counter() - t0
        s.ok = report.ok and not report.dataplane_skipped  # no probes: no rate to report
        s.summary, s.probes = report.summary(), len(report.paths + report.loops)
        s.paths_s = path_build_s(att.fabric)
    finally:
        t0 = time.perf_counter()
        lifecycle.down(name)
        s.down_s = time.perf_counter() - t0
    s.phases = {"prepare": s.up_s - sum(up_steps.phases.values()),
                **up_steps.phases, **verify_steps.phases}
    return s


def summarize(samples: list[Sample]) -> dict:
    one = samples[0]
    med = {k: statistics.median(getattr(x, k) for x in samples)
           for k in ("up_s", "verify_s", "down_s", "paths_s")}
    return {"lab": one.lab, "nodes": one.nodes, "probes": one.probes, "runs": len(samples),
            **{k: {"median": med[k], "min": min(getattr(x, k) for x in samples)} for k in med},
            "phases_median_s": {k: statistics.median(x.phases[k] for x in samples)
                                for k in one.phases},
            "up_ms_per_node": 1000 * med["up_s"] / one.nodes,
            "verify_ms_per_node": 1000 * med["verify_s"] / one.nodes,
            "probes_per_s": one.probes / med["verify_s"]}


def add_ratios(rows: list[dict]) -> None:
    b = rows[0]
    for r in rows:
        r["vs_smallest"] = {"nodes": r["nodes"] / b["nodes"], "probes": r["probes"] / b["probes"],
                            **{k: r[f"{k}_s"]["median"] / b[f"{k}_s"]["median"]
                               for k in ("up", "verify")}}


def markdown(head: list[str], body: list[list[str]]) -> str:
    rows = [head, ["---"] * len(head), *body]
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def tables(rows: list[dict]) -> str:
    def mm(r: dict, k: str) -> str:
        return f"{r[k]['median']:.3f} ({r[k]['min']:.3f})"

    main = markdown(
        ["lab", "nodes", "probes", "up s med (min)", "verify s med (min)", "down s med (min)",
         "up ms/node", "verify ms/node", "probes/s", "vs smallest"],
        [[r["lab"], str(r["nodes"]), str(r["probes"]), mm(r, "up_s"), mm(r, "verify_s"),
          mm(r, "down_s"), f"{r['up_ms_per_node']:.1f}", f"{r['verify_ms_per_node']:.1f}",
          f"{r['probes_per_s']:,.0f}",
          "up x{up:.1f}, verify x{verify:.1f} for x{nodes:.1f} nodes, x{probes:.1f} probes"
          .format(**r["vs_smallest"])] for r in rows])
    keys = list(rows[0]["phases_median_s"])
    phases = markdown(
        ["lab (median s)", *keys, "paths alone (timed apart)"],
        [[r["lab"], *(f"{r['phases_median_s'][k]:.3f}" for k in keys),
          f"{r['paths_s']['median']:.3f}"] for r in rows])
    return f"{main}\n\n{phases}"


def machine() -> dict:
    return {"nproc": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "loadavg": os.getloadavg(),
            "other_twin_namespaces": sum(n.startswith("twin-") for n in list_netns())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per size (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, the 3 smallest sizes")
    args = ap.parse_args(argv)
    sizes, repeat = (SIZES[:3], 1) if args.quick else (SIZES, max(1, args.repeat))
    names = [lab_name(s) for s in sizes]
    samples: dict[str, list[Sample]] = {n: [] for n in names}
    try:
        stray = [n for n in list_netns() if n.startswith(tuple(f"twin-{x}-" for x in names))]
        if stray:
            sys.exit(f"{len(stray)} namespaces of another bench run exist (e.g. {stray[0]})")
        specs = {lab_name(s): write_spec(s, TMP) for s in sizes}
        before, started = machine(), time.perf_counter()
        for rep in range(repeat):
            for name in names:
                x = run_once(name, specs[name])
                samples[name].append(x)
                print(f"  {rep + 1}/{repeat} {name}: up {x.up_s:.3f}s verify {x.verify_s:.3f}s "
                      f"down {x.down_s:.3f}s {'ok' if x.ok else 'FAILED'}", flush=True)
                time.sleep(SETTLE_S)
    finally:
        for name in known_labs():  # our private run dir only: never another lab
            lifecycle.down(name)
        shutil.rmtree(TMP, ignore_errors=True)
    rows = [summarize(samples[n]) for n in names]
    add_ratios(rows)
    print(tables(rows))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": before, "machine_after": machine(), "repeat": repeat, "quick": args.quick,
        "settle_s": SETTLE_S, "wall_s": time.perf_counter() - started, "sizes": rows,
        "samples": [asdict(x) for n in names for x in samples[n]]}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    failed = [x for n in names for x in samples[n] if not x.ok]
    for x in failed:
        print(f"VERIFY FAILED: {x.lab}: {x.summary}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
