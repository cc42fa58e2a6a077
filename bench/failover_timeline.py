"""One failover, packet by packet: where the time between a T0-T1 cut and the repair goes.

Replays a trace a live endpoint recorded (MRC_TWIN_RECORD: what its loop told one sending
QP, with the loop's own cadence and the times things really arrived; by default
tests/traces/endpoint/link_cut.json.gz, a 32 MiB bulk on a netns mrc-4p whose T0-T1 link
on plane 0 went down mid-transfer) into a transport, and follows the PSNs the cut cost:

  sent      the copy that died: when, on which EV
  cut       the fault: when `ip link set down` began (the trace's facts: in force by
            fault_ns, applying took applied_us)
  evidence  the first SACK after the cut naming a packet sent after the lost one, on a
            live path: what the sender needs before it may judge (RACK, per path)
  declared  the loss, how (per_path, rack, dead_path, timeout), the RACK window then
  resent    the poll that sent it again, on which EV
  acked     the SACK that acknowledged the resend (the `repaired` event)

and splits each PSN's repair (cut to acked) into those steps, with the QP's smoothed RTT
and RACK window at the time, so what bounds the repair is read off, not guessed.
Pure replay: no lab, no root; the times are the recording machine's.
Usage: .venv/bin/python bench/failover_timeline.py [TRACE] [--compiled] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from twin.mrc import trace as T
from twin.mrc.transport import Sender

DEFAULT = Path(T.TRACES_DIR) / "endpoint" / "link_cut.json.gz"


def follow(trace: T.Trace, log: list[dict]) -> dict:
    """The cut and every PSN lost on a dead path after it, each with its steps (ns)."""
    # the change began applied_us before it was in force (fault_ns): the cut is in there
    cut = trace.facts["fault_ns"] - 1000 * (trace.facts.get("applied_us") or 0)
    sends: dict[int, list[tuple[int, int, int]]] = {}  # psn -> [(t, ev, tries)]
    for call, d in zip(trace.calls, log, strict=True):
        if call[0] == "poll":
            for psn, ev, _va, _n, _crc, tries, _ack, _imm in d.get("tx", ()):
                sends.setdefault(psn, []).append((call[1], ev, tries))
    events = [e for d in log for e in d.get("events", ())]
    retired = {e[2] for e in events if e[1] == "retire" and e[0] >= cut}
    lost = {}
    for t, kind, ev, psn, detail in events:
        if kind == "loss" and t >= cut and psn not in lost:
            lost[psn] = {"declared_ns": t, "how": detail, "ev": ev}
    acked = {}
    for t, kind, ev, psn, _ in events:
        if kind == "repaired" and psn in lost and psn not in acked:
            acked[psn] = (t, ev)
    snaps = {}  # the QP's state at each call's time
    for call, d in zip(trace.calls, log, strict=True):
        snaps[call[1]] = d["snap"]
    times = sorted(snaps)
    packets = []
    for psn, loss in sorted(lost.items(), key=lambda kv: kv[1]["declared_ns"]):
        if loss["ev"] not in retired and loss["how"] not in ("dead_path", "per_path", "rack"):
            continue
        first = next((s for s in sends.get(psn, ()) if s[0] < loss["declared_ns"]), None)
        resend = next((s for s in sends.get(psn, ()) if s[0] >= loss["declared_ns"]), None)
        if first is None:
            continue
        # the first SACK after the cut that echoes a packet sent after this one
        later = {p for p, ss in sends.items() for s in ss if s[0] > first[0]}
        evidence = next((c[1] for c in trace.calls if c[0] == "sack" and c[1] >= cut
                         and c[5] in later), None)
        at = max((t for t in times if t <= loss["declared_ns"]), default=times[0])
        packets.append({
            "psn": psn, "sent_ns": first[0], "sent_ev": first[1],
            "evidence_ns": evidence, "declared_ns": loss["declared_ns"], "how": loss["how"],
            "resent_ns": resend[0] if resend else None, "resent_ev": resend[1] if resend else None,
            "acked_ns": acked.get(psn, (None,))[0],
            "srtt_ns": int(snaps[at]["srtt"]), "rack_ns": snaps[at]["rack_ns"]})
    return {"cut_ns": cut, "fault": trace.facts.get("fault"),
            "applied_us": trace.facts.get("applied_us"), "transport_recorded":
            trace.facts.get("transport"), "packets": packets}


def _us(a: int | None, b: int | None) -> str:
    return "-" if a is None or b is None else f"{(b - a) / 1000:+,.0f}"


def table(result: dict, replayed: str) -> str:
    cut = result["cut_ns"]
    out = [f"{result['fault']} (in force {result['applied_us']} µs after it began); recorded on "
           f"the {result['transport_recorded']} transport, replayed into the {replayed}",
           "µs from the cut (when the change began); then each step's length", "",
           f"{'PSN':>6} {'sent':>8} {'EV':>10} {'evidence':>9} {'declared':>9} {'how':>9} "
           f"{'resent':>8} {'acked':>8} | {'to judge':>8} {'to send':>7} {'RTT':>6} "
           f"| {'srtt':>5} {'RACK':>5}"]
    for p in result["packets"]:
        evidence = None if p["how"] == "dead_path" else p["evidence_ns"]  # no evidence needed
        out.append(
            f"{p['psn']:>6} {_us(cut, p['sent_ns']):>8} {p['sent_ev']:>#10x} "
            f"{_us(cut, evidence):>9} {_us(cut, p['declared_ns']):>9} {p['how']:>9} "
            f"{_us(cut, p['resent_ns']):>8} {_us(cut, p['acked_ns']):>8} | "
            f"{_us(p['sent_ns'], p['declared_ns']):>8} {_us(p['declared_ns'], p['resent_ns']):>7} "
            f"{_us(p['resent_ns'], p['acked_ns']):>6} | {p['srtt_ns'] // 1000:>5} "
            f"{p['rack_ns'] // 1000:>5}")
    done = [p["acked_ns"] for p in result["packets"] if p["acked_ns"]]
    if done:
        first = min(p["sent_ns"] for p in result["packets"])
        out += ["", f"repair: {(max(done) - cut) / 1000:,.0f} µs from the cut's start, "
                f"{(max(done) - first) / 1000:,.0f} µs from the first lost copy's send; "
                f"{len(result['packets'])} PSNs"]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT))
    ap.add_argument("--compiled", action="store_true", help="replay into the compiled core")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    trace = T.load(Path(args.trace))
    factory, name = Sender, "reference"
    if args.compiled:
        from twin.mrc.core import compiled
        factory, name = compiled().Sender, "compiled core"
    result = follow(trace, T.replay(trace, factory))
    print(json.dumps(result, indent=1) if args.json else table(result, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
