"""Trims per PSN under real incast: how close legitimate congestion comes to the
transport's trim bound (SenderConfig.trim_limit), measured on a live shaped lab.

A PSN trimmed `trim_limit` times is a loss from then on (docs/transport-core.md, "The
trim bound"), so the bound must sit well above what congestion does. This runs the
incast of the shipped incast drills (seven senders into one host of mrc-8p-shaped, 1 MiB
each, the drill's own flows) ROUNDS times on the MRC transport and, from each sending
QP's event log (a "trim" event per NAK(TRIMMED) acted on, a "loss" event with detail
"trim" per trim past the bound), counts the trims of each PSN. It prints the
distribution, the most trims any one PSN took, and that as a share of trim_limit.

Needs root and the lab up: `twin up mrc-8p-shaped --runtime netns` (it is not brought
up here, nor taken down).
Usage: .venv/bin/python bench/bench_trims.py [--lab mrc-8p-shaped] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from twin import lab as L  # noqa: E402
from twin import traffic  # noqa: E402
from twin.mrc.transport import SenderConfig  # noqa: E402

SENDERS = ["r1h0", "r1h1", "r1h2", "r1h3", "r2h0", "r2h1", "r2h2"]  # lab/drills/incast-*.yml
TARGET = "r0h0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="mrc-8p-shaped")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=1 << 20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    att = L.attach(a.lab)
    per_psn: collections.Counter = collections.Counter()  # (round, flow, psn) -> trims
    lost_trim = trims = 0
    for r in range(a.rounds):
        flows = [traffic.Flow(s, TARGET, a.size) for s in SENDERS]
        run = traffic.run(att.runtime, "incast", flows, "mrc", timeout_s=300)
        if not all(f.exact for f in flows):
            print(f"round {r}: a flow was not byte-exact", file=sys.stderr)
            return 1
        for e in run.events:
            if e["kind"] == "trim":
                per_psn[r, e["flow"], e["psn"]] += 1
                trims += 1
            elif e["kind"] == "loss" and e["detail"] == "trim":
                per_psn[r, e["flow"], e["psn"]] += 1
                lost_trim += 1
        print(f"round {r + 1}/{a.rounds}: {sum(per_psn.values())} trims so far",
              file=sys.stderr)
    limit = SenderConfig().trim_limit
    most = max(per_psn.values(), default=0)
    hist = collections.Counter(per_psn.values())
    out = {"lab": a.lab, "rounds": a.rounds, "flows": len(SENDERS), "size": a.size,
           "trims": trims, "losses_past_the_bound": lost_trim,
           "psns_trimmed": len(per_psn), "trims_per_psn": dict(sorted(hist.items())),
           "most_trims_of_one_psn": most, "trim_limit": limit,
           "most_over_limit": round(most / limit, 3)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{trims} trims of {len(per_psn)} PSNs over {a.rounds} incasts "
              f"({len(SENDERS)}:1, {a.size >> 10} KiB each); trims per PSN: "
              + ", ".join(f"{k}x {n}" for k, n in sorted(hist.items())))
        print(f"most trims of one PSN: {most}; trim_limit {limit}: {most / limit:.2f} of it; "
              f"losses past the bound: {lost_trim}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
