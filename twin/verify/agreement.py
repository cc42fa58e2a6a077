"""`twin routes check` against `twin verify`, path for path, on a lab built from the tables.

The check walks every path through the tables (twin.routes.check) and says whose
packets never arrive; verify sends them in the lab. The two agree when verify lost
the request of exactly the paths the check says are undelivered. A misrouted path
(delivered over other switches) arrives, and verify cannot see the way it took:
that difference is the check's to report, not a disagreement.
"""

from __future__ import annotations

from twin.routes.check import CheckReport
from twin.verify.report import VerifyReport


def disagreements(checked: CheckReport, report: VerifyReport) -> list[str]:
    """One line per probed path on which the two differ (empty: they agree)."""
    undelivered = checked.undelivered()
    failing = {(r.src, r.address): r for r in checked.failing}
    out = []
    for r in [*report.paths, *report.loops]:
        key = (r.path.src, r.path.address)
        if (key in undelivered) == r.forward:
            said = failing[key].cause if key in failing else "arrives"
            out.append(f"{r.path.label} {r.path.address}: check says "
                       f"{failing[key].outcome if key in failing else 'ok'} ({said}), "
                       f"verify's request {'arrived' if r.forward else 'was lost'}")
    return out
