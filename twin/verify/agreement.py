"""`twin routes check` against `twin verify`, path for path, on a lab built from the tables.

The check walks every path through the tables (twin.routes.check) and says whose
packets never arrive; verify sends them in the lab. The two agree when verify lost
the request of exactly the paths the check says are undelivered, and, when verify
probed every path, probed every one of those. A misrouted path (delivered over
other switches) arrives, and verify cannot see the way it took: that difference is
the check's to report, not a disagreement. `twin verify` and `twin ci` both say it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twin.routes.check import CheckReport
from twin.verify.report import VerifyReport


@dataclass
class Agreement:
    exhaustive: bool  # verify probed every path (else: the probed ones are compared)
    compared: int  # paths both said something about
    check_undelivered: int
    verify_lost: int  # probes whose request was lost
    not_probed: int  # undelivered paths verify did not probe
    reply_lost: int = 0  # probes whose request arrived and whose reply did not: failed
    # probes verify lists that the comparison (requests only) does not count
    cases: list[tuple[str, str]] = field(default_factory=list)  # (path, disagreement or "")
    disagreements: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def lines(self) -> list[str]:
        return [f"{d['path']} {d['address']}: {d['text']}" for d in self.disagreements]

    def to_dict(self) -> dict:
        return {"exhaustive": self.exhaustive, "compared": self.compared,
                "check_undelivered": self.check_undelivered, "verify_lost": self.verify_lost,
                "not_probed": self.not_probed, "reply_lost": self.reply_lost,
                "disagreements": self.disagreements}


def compare(checked: CheckReport, report: VerifyReport) -> Agreement:
    said_lost = checked.undelivered()
    label = {(r.path.src, r.path.address): r.path.label for r in checked.failing}
    probed = {(r.path.src, r.path.address): r for r in [*report.loops, *report.paths]}
    unprobed = sorted(said_lost - probed.keys())
    out = Agreement(report.coverage is None, len(probed), len(said_lost),
                    sum(not r.forward for r in probed.values()), len(unprobed),
                    sum(r.forward and not r.ok for r in probed.values()))

    def disagree(path: str, key: tuple[str, str], text: str, arrived: bool | None) -> None:
        out.cases.append((path, text))
        out.disagreements.append({"path": path, "src": key[0], "address": key[1],
                                  "check_delivered": key not in said_lost,
                                  "verify_arrived": arrived, "text": text})

    for key, r in probed.items():
        says, lost = key in said_lost, not r.forward
        if says == lost:
            out.cases.append((r.path.label, ""))
        else:
            disagree(r.path.label, key, "routes check: not delivered; verify: the request "
                     "arrived" if says else "routes check: delivered; verify: the request "
                     "was lost", r.forward)
    if out.exhaustive:  # verify probed every path: one the check walked and it did not is a gap
        for key in unprobed:
            disagree(label.get(key, f"{key[0]} {key[1]}"), key,
                     "routes check: not delivered; verify: not probed", None)
    return out
