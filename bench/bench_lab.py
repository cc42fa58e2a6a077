"""Lab benchmark: how `up`, `verify` and `down` of a netns lab scale with fabric size.

For each fabric size this measures, on the real kernel (root, network namespaces):

    up      spec -> plan -> namespaces, veths, routes, SRv6 (twin.lab.up, runtime netns)
    verify  route readback on every node + a source-routed probe through every
            path and loopback (twin.verify.run_verify); every report must be ok
    down    remove every namespace (twin.lab.down)

and derives the per-node cost (up seconds / nodes, verify ms / node) and the
probe rate ((paths + loopbacks) / verify seconds). The library's progress steps
are timed to split up and verify into phases (where the time goes), and the
pure-Python path computation verify does first is also timed on its own.

Sizes are measured side by side in one run, round-robin (repetition 1 of every
size, then repetition 2, ...), because the 2-core machine is noisy: drift in
the machine's load then hits every size alike, so the ratios against the
smallest size stay meaningful. Medians and minimums are reported.

Labs are named `bench-...` and their state and build files go to a private
temporary directory (TWIN_RUN_DIR, TWIN_BUILD_DIR), so other labs are never
seen or touched. Exits 1 if any verify fails.

    .venv/bin/python bench/bench_lab.py [--repeat N] [--quick]
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
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

_TMP = Path(tempfile.mkdtemp(prefix="twin-bench-"))
os.environ["TWIN_RUN_DIR"] = str(_TMP / "run")
os.environ["TWIN_BUILD_DIR"] = str(_TMP / "build")

from twin import lab  # noqa: E402  (the environment above must be set first)
from twin import paths as P  # noqa: E402
from twin.progress import Steps  # noqa: E402
from twin.runtime.netns import list_netns  # noqa: E402
from twin.state import known_labs  # noqa: E402
from twin.verify import run_verify  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "lab.json"
SETTLE_S = 1.0  # after each down: the kernel frees namespaces asynchronously (measured)


@dataclass(frozen=True)
class Size:
    planes: int
    racks: int
    hosts_per_rack: int
    t1_per_plane: int

    @property
    def name(self) -> str:
        return f"bench-p{self.planes}r{self.racks}h{self.hosts_per_rack}t{self.t1_per_plane}"


SIZES = [Size(2, 2, 2, 2), Size(4, 2, 2, 2), Size(8, 2, 2, 2), Size(8, 4, 4, 4)]


class TimedSteps(Steps):
    """Seconds spent in each step the library announces, keyed by its first word."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._label, self._since = "", 0.0

    def start(self, label: str, total: int | None = None) -> None:
        self.done()
        self._label, self._since = label.split()[0], time.perf_counter()

    def done(self) -> None:
        if self._label:
            self.phases[self._label] = time.perf_counter() - self._since
        self._label = ""


@dataclass
class Sample:
    size: str
    nodes: int
    probes: int
    up_s: float
    verify_s: float
    down_s: float
    paths_s: float
    phases: dict
    ok: bool
    summary: dict


def write_spec(size: Size, where: Path) -> Path:
    path = where / f"{size.name}.yml"
    path.write_text(yaml.safe_dump({"name": size.name, "mtu": 9000, **asdict(size)}))
    return path


def path_build_s(fabric) -> float:
    """What run_verify computes before probing: every path and its reverse."""
    t0 = time.perf_counter()
    paths = P.loopback_paths(fabric) + P.host_pairs_paths(fabric)
    _ = [P.reverse(fabric, p) for p in paths if p.kind not in ("loop-t0", "loop-t1")]
    return time.perf_counter() - t0


def run_once(size: Size, spec: Path) -> Sample:
    up_steps, verify_steps = TimedSteps(), TimedSteps()
    t0 = time.perf_counter()
    state = lab.up(str(spec), "netns", up_steps)
    up_s = time.perf_counter() - t0
    try:
        att = lab.attach(size.name)
        t1 = time.perf_counter()
        report = run_verify(att.runtime, att.plan, steps=verify_steps)
        verify_s = time.perf_counter() - t1
        paths_s = path_build_s(att.fabric)
    finally:
        t2 = time.perf_counter()
        lab.down(size.name)
        down_s = time.perf_counter() - t2
    return Sample(size.name, len(state.nodes), len(report.paths) + len(report.loops),
                  up_s, verify_s, down_s, paths_s, phases(up_s, up_steps, verify_steps),
                  report.ok, report.summary())


def phases(up_s: float, up_steps: TimedSteps, verify_steps: TimedSteps) -> dict:
    up = up_steps.phases
    out = {"prepare": up_s - sum(up.values()), "create": up.get("creating", 0.0),
           "wire": up.get("wiring", 0.0), "configure": up.get("configuring", 0.0)}
    v = verify_steps.phases
    return out | {"readback+paths": v.get("reading", 0.0), "probing": v.get("probing", 0.0)}


def stats(samples: list[Sample]) -> dict:
    first = samples[0]
    out: dict = {"size": first.size, "nodes": first.nodes, "probes": first.probes,
                 "runs": len(samples)}
    for key in ("up_s", "verify_s", "down_s", "paths_s"):
        values = [getattr(s, key) for s in samples]
        out[key] = {"median": statistics.median(values), "min": min(values)}
    out["phases_median_s"] = {k: statistics.median(s.phases[k] for s in samples)
                              for k in first.phases}
    out["up_ms_per_node"] = 1000 * out["up_s"]["median"] / first.nodes
    out["verify_ms_per_node"] = 1000 * out["verify_s"]["median"] / first.nodes
    out["probes_per_s"] = first.probes / out["verify_s"]["median"]
    return out


def add_ratios(rows: list[dict]) -> None:
    b = rows[0]
    for r in rows:
        r["vs_smallest"] = {"nodes": r["nodes"] / b["nodes"], "probes": r["probes"] / b["probes"],
                            **{k: r[f"{k}_s"]["median"] / b[f"{k}_s"]["median"]
                               for k in ("up", "verify")}}


def table(rows: list[dict]) -> str:
    head = ("| lab | nodes | probes | up s med (min) | verify s med (min) | down s med (min) "
            "| up ms/node | verify ms/node | probes/s | vs smallest |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        v = r["vs_smallest"]
        cells = [r["size"], str(r["nodes"]), str(r["probes"]),
                 *(f"{r[k]['median']:.3f} ({r[k]['min']:.3f})"
                   for k in ("up_s", "verify_s", "down_s")),
                 f"{r['up_ms_per_node']:.1f}", f"{r['verify_ms_per_node']:.1f}",
                 f"{r['probes_per_s']:,.0f}",
                 f"up x{v['up']:.1f}, verify x{v['verify']:.1f} "
                 f"for x{v['nodes']:.1f} nodes, x{v['probes']:.1f} probes"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def phase_table(rows: list[dict]) -> str:
    keys = list(rows[0]["phases_median_s"])
    lines = ["| lab (median s) | " + " | ".join(keys) + " | of which paths (timed apart) |",
             "|" + "---|" * (len(keys) + 2)]
    for r in rows:
        cells = [f"{r['phases_median_s'][k]:.3f}" for k in keys]
        lines.append(f"| {r['size']} | " + " | ".join(cells)
                     + f" | {r['paths_s']['median']:.3f} |")
    return "\n".join(lines)


def machine() -> dict:
    return {"nproc": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "loadavg": os.getloadavg(),
            "other_twin_namespaces": sum(n.startswith("twin-") for n in list_netns())}


def refuse_leftovers(sizes: list[Size]) -> None:
    prefixes = tuple(f"twin-{s.name}-" for s in sizes)
    stray = [n for n in list_netns() if n.startswith(prefixes)]
    if stray:
        sys.exit(f"namespaces from another bench run exist ({len(stray)}, e.g. {stray[0]}); "
                 "wait for it to finish or remove them with `ip netns del`")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions per size (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, 3 smallest sizes")
    args = ap.parse_args(argv)
    sizes, repeat = (SIZES[:3], 1) if args.quick else (SIZES, max(1, args.repeat))
    refuse_leftovers(sizes)
    specs = {s: write_spec(s, _TMP) for s in sizes}
    before = machine()
    samples: dict[Size, list[Sample]] = {s: [] for s in sizes}
    started = time.perf_counter()
    try:
        for rep in range(repeat):
            for s in sizes:
                sample = run_once(s, specs[s])
                samples[s].append(sample)
                print(f"  rep {rep + 1}/{repeat} {s.name}: up {sample.up_s:.3f}s "
                      f"verify {sample.verify_s:.3f}s down {sample.down_s:.3f}s "
                      f"{'ok' if sample.ok else 'FAILED'}", flush=True)
                time.sleep(SETTLE_S)
    finally:
        for name in known_labs():  # only our private run dir: never another lab
            lab.down(name)
        shutil.rmtree(_TMP, ignore_errors=True)
    rows = [stats(samples[s]) for s in sizes]
    add_ratios(rows)
    print(table(rows), phase_table(rows), sep="\n\n")
    result = {"machine": before, "machine_after": machine(), "repeat": repeat,
              "quick": args.quick, "settle_s": SETTLE_S, "wall_s": time.perf_counter() - started, "sizes": rows,
              "samples": [asdict(x) for s in sizes for x in samples[s]]}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    failed = [x for s in sizes for x in samples[s] if not x.ok]
    for x in failed:
        print(f"VERIFY FAILED: {x.size}: {x.summary}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
