"""Congestion benchmark: what each signal buys MRC, and RoCE (DCQCN) beside it, on a
shaped 8-plane lab (mrc-8p-shaped, netns: every link 3 Mbit/s, switches marking ECN
and trimming at their shaped ports).

  incast       7 senders into r0h0, 1 MiB each, with a victim r2h3 -> r0h1 (3 MiB) beside
               them: the incast's completion, the victim's goodput, packets resent, EVs
               retired, trims NAKed, CE marks echoed
  permutation  every host to host i + 8, 2 MiB each: the least and most flow goodput over
               the stretch all ran side by side (twin.chaos.metrics.common_rates)

Variants, round-robin in each of --rounds rounds so the machine's noise falls on all:
  nscc         the default: delay, ECN marks and trims (docs/congestion.md)
  no-ecn       nscc ignoring the marks (a trim still NAKs)
  no-trim      nscc finding trimmed packets as losses
  delay        the window on delay alone, neither signal (the transport before issue 26)
  roce         single-path with DCQCN, one QP per flow (docs/roce-baseline.md)
Medians over the rounds; results in bench/results/congestion.json, a table on stdout.
Usage: .venv/bin/python bench/bench_congestion.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import bench_lab as B  # noqa: F401  first: private TWIN_RUN_DIR / TWIN_BUILD_DIR

from twin import lab, lifecycle
from twin import traffic as T
from twin.chaos import metrics as M
from twin.chaos import runner

RESULTS = Path(__file__).resolve().parent / "results" / "congestion.json"
FABRIC = Path(__file__).resolve().parents[1] / "lab" / "fabrics" / "mrc-8p-shaped.yml"
VARIANTS = {
    "nscc": ("mrc", {}),
    "no-ecn": ("mrc", {"ecn": False}),
    "no-trim": ("mrc", {"trim": False}),
    "delay": ("mrc", {"cc": "delay", "ecn": False, "trim": False}),
    "roce": ("single-path", {}),
}
SENDERS = ("r1h0", "r1h1", "r1h2", "r1h3", "r2h0", "r2h1", "r2h2")


def _logs(run: T.Run) -> list[M.FlowLog]:
    return runner._flow_logs(run, len(run.flows))


def _sum(run: T.Run, key: str) -> int:
    return sum((f.to_dict().get("congestion") or {}).get(key) or 0 for f in run.flows)


def incast(att, mode: str, signals: dict) -> dict:
    flows = [T.Flow(h, "r0h0", 1 << 20) for h in SENDERS] + [T.Flow("r2h3", "r0h1", 3 << 20)]
    run = T.run(att.runtime, "incast", flows, mode, **signals)
    logs = _logs(run)
    victim = logs[-1]
    return {"ok": run.ok, "incast_s": max(f.completion_s or 0 for f in logs[:-1]),
            "victim_mbps": victim.size * 8 / victim.completion_s / 1e6
            if victim.completion_s else None,
            "resent": sum(f.result.sender.retransmits for f in run.flows if f.result),
            "retired": sum(f.result.ev_retirements_total for f in run.flows if f.result),
            "trims": _sum(run, "nacks_trimmed"), "marks": _sum(run, "ecn_marks")}


def permutation(att, mode: str, signals: dict) -> dict:
    hosts = [h.name for h in att.fabric.hosts]
    run = T.run(att.runtime, "permutation", T.flows_for("permutation", hosts, 2 << 20), mode,
                **signals)
    rates = M.common_rates(_logs(run)) or [0.0]
    return {"ok": run.ok, "least_mbps": min(rates) / 1e6, "most_mbps": max(rates) / 1e6,
            "resent": sum(f.result.sender.retransmits for f in run.flows if f.result),
            "marks": _sum(run, "ecn_marks"), "trims": _sum(run, "nacks_trimmed")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    name = "bench-cong"
    lab.up(str(FABRIC), "netns", name=name)
    got: dict = {s: {v: [] for v in VARIANTS} for s in ("incast", "permutation")}
    try:
        att = lab.attach(name)
        for r in range(args.rounds):
            for v, (mode, signals) in VARIANTS.items():
                for scenario, fn in (("incast", incast), ("permutation", permutation)):
                    got[scenario][v].append(fn(att, mode, signals))
                    print(f"round {r + 1} {scenario:11} {v:8} {got[scenario][v][-1]}",
                          file=sys.stderr)
    finally:
        lifecycle.down(name)
    med = {s: {v: {k: statistics.median([x[k] for x in runs if x[k] is not None] or [0])
                   for k in runs[0] if k != "ok"} | {"ok": all(x["ok"] for x in runs)}
               for v, runs in by.items()} for s, by in got.items()}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rounds": args.rounds, "median": med, "raw": got},
                                  indent=1) + "\n")
    print(f"| incast (7:1, median of {args.rounds}) | incast done | victim | resent | "
          "EVs retired | trims NAKed | CE echoed | exact |\n|---|---|---|---|---|---|---|---|")
    for v, m in med["incast"].items():
        print(f"| {v} | {m['incast_s']:.2f} s | {m['victim_mbps']:.1f} Mbit/s | "
              f"{m['resent']:.0f} | {m['retired']:.0f} | {m['trims']:.0f} | {m['marks']:.0f} "
              f"| {m['ok']} |")
    print(f"\n| permutation (16 flows, median of {args.rounds}) | least flow | most flow | "
          "resent | CE echoed | trims | exact |\n|---|---|---|---|---|---|---|")
    for v, m in med["permutation"].items():
        print(f"| {v} | {m['least_mbps']:.1f} Mbit/s | {m['most_mbps']:.1f} Mbit/s | "
              f"{m['resent']:.0f} | {m['marks']:.0f} | {m['trims']:.0f} | {m['ok']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
