"""Record tests/traces/endpoint/link_cut.json.gz: the inputs of a live endpoint's sending
QP, with the endpoint loop's own cadence (twin.mrc.loop, MRC_TWIN_RECORD), while a
T0-T1 link on its paths goes down mid-transfer.

A netns lab shaped like mrc-4p in a private run dir, its endpoints started with
MRC_TWIN_RECORD; a 32 MiB bulk r0h0 -> r1h0 in mode mrc; t0-p0-r0's uplink to T1 0 goes
down 0.03 s after the first write (as bench_endpoint's recovery, sooner: 32 MiB can
take only 70 ms); the sender's trace is kept with the fault's time in its facts, and
refused if the cut missed the transfer (no EV retired). Needs root. The transport that
ran is the endpoints' (MRC_TWIN_TRANSPORT: the compiled core where built); the trace is
replayed into both by tests/unit/test_endpoint_cadence.py.
Usage: .venv/bin/python tests/traces/endpoint/record.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TMP = Path(tempfile.mkdtemp(prefix="twin-record-"))
os.environ["TWIN_RUN_DIR"] = str(TMP / "run")
os.environ["TWIN_BUILD_DIR"] = str(TMP / "build")
os.environ["MRC_TWIN_RECORD"] = str(TMP / "traces")

from twin import faults as F  # noqa: E402  (the environment above must be set first)
from twin import lab, lifecycle  # noqa: E402
from twin import traffic as T  # noqa: E402
from twin.faults import timeline as FT  # noqa: E402
from twin.mrc import trace  # noqa: E402
from twin.state import known_labs  # noqa: E402

HERE = Path(__file__).resolve().parent
FABRIC = HERE.parents[2] / "lab" / "fabrics" / "mrc-4p.yml"
NAME, SIZE, FAULT_AT = "rec-ep", 32 << 20, 0.03  # the cut early: 32 MiB can take 70 ms


def main() -> int:
    (TMP / "traces").mkdir(parents=True)
    try:
        lab.up(str(FABRIC), "netns", name=NAME)
        att = lab.attach(NAME)
        fab = att.fabric
        end = f"{fab.t0_name(0, fab.node('r0h0').rack)}:{fab.t0_uplink(0)}"

        cut = FT.Scheduled("link-down", end, lambda: F.link_down(att, end),
                           ((int(FAULT_AT * 1e9), False),))
        flows = T.flows_for("bulk", [], SIZE, "r0h0", "r1h0")
        run = T.run(att.runtime, "bulk", flows, "mrc", timeline=FT.Timeline([cut]))
        F.clear(att)
        if not run.faults or not run.flows[0].result.ev_retirements_total:
            raise SystemExit("the cut missed the transfer (it ended first?): run it again")
        time.sleep(0.5)  # the QP's close writes its trace
        (path,) = (TMP / "traces").glob("r0h0-*.json.gz")
        t = trace.load(path)
        f = run.faults[0]
        t.name = "link_cut"
        t.facts = {"fault": f["what"], "fault_ns": f["t_us"] * 1000,
                   "applied_us": f["applied_us"], "ok": run.ok, "size": SIZE,
                   "transport": t.about.split("(")[1].split(" ")[0]}
        trace.save(t, HERE / "link_cut.json.gz")
        sys.stdout.write(f"{HERE / 'link_cut.json.gz'}: {len(t.calls)} calls, "
                         f"{(HERE / 'link_cut.json.gz').stat().st_size} bytes, ok {run.ok}\n")
    finally:
        if NAME in known_labs():
            lifecycle.down(NAME)
        shutil.rmtree(TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
