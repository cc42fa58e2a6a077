"""The verify report: what passed, what failed, which links are to blame.

A failed probe blames every link on the direction that failed (the forward
path if the request was lost, the reverse path if only the reply was). A
link that also carried a successful probe is cleared. What is left is named
as suspect: after one T0-T1 link goes down, exactly that link remains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twin import junit
from twin.fabric.paths import Path
from twin.readback import NodeCheck
from twin.verify.prober import ProbeResult


@dataclass
class VerifyReport:
    lab: str
    runtime: str
    nodes: list[NodeCheck]
    paths: list[ProbeResult] = field(default_factory=list)
    loops: list[ProbeResult] = field(default_factory=list)
    reverse: dict[str, Path] = field(default_factory=dict)  # forward address+src -> reverse
    dataplane_skipped: str = ""
    seconds: float = 0.0
    coverage: dict | None = None  # coverage verify: what was asked, achieved, sent

    @property
    def ok(self) -> bool:
        return (all(n.ok for n in self.nodes) and all(r.ok for r in self.paths)
                and all(r.ok for r in self.loops))

    def suspect_links(self) -> list[str]:
        good: set[str] = set()
        blamed: set[str] = set()
        for r in [*self.paths, *self.loops]:
            back = self.reverse.get(path_key(r.path))
            if r.ok:
                good.update(r.path.links)
                if back:
                    good.update(back.links)
            elif r.forward and back:
                good.update(r.path.links)
                blamed.update(back.links)
            else:
                blamed.update(r.path.links)
        return sorted(blamed - good)

    def summary(self) -> dict:
        def count(rs):
            return {"total": len(rs), "passed": sum(r.ok for r in rs),
                    "failed": sum(not r.ok for r in rs)}
        return {
            "routes": {"total": len(self.nodes), "passed": sum(n.ok for n in self.nodes),
                       "failed": sum(not n.ok for n in self.nodes)},
            "paths": count(self.paths),
            "loopbacks": count(self.loops),
        }

    def to_dict(self) -> dict:
        return {
            "lab": self.lab,
            "runtime": self.runtime,
            "ok": self.ok,
            "seconds": round(self.seconds, 3),
            "summary": self.summary(),
            "dataplane_skipped": self.dataplane_skipped,
            "coverage": self.coverage,
            "suspect_links": self.suspect_links(),
            "nodes": [{"node": n.node, "ok": n.ok, "problems": n.problems()} for n in self.nodes],
            "paths": [_result_dict(r) for r in self.paths],
            "loopbacks": [_result_dict(r) for r in self.loops],
        }

    def junit(self) -> str:
        """JUnit XML: one suite per check, one test case per node or path."""
        return junit.document(f"twin verify {self.lab}", [
            junit.Suite(f"{self.lab}.routes", [(n.node, "; ".join(n.problems()))
                                               for n in self.nodes]),
            junit.Suite(f"{self.lab}.paths", [(r.path.label, _failure_text(r))
                                              for r in self.paths]),
            junit.Suite(f"{self.lab}.loopbacks", [(r.path.label, _failure_text(r))
                                                  for r in self.loops]),
        ])


def path_key(path: Path) -> str:
    """How a probe is named in `reverse`: its source and its uSID program."""
    return f"{path.src}>{path.address}"


def _failure_text(r: ProbeResult) -> str:
    if r.ok:
        return ""
    return f"{r.failure} after {r.attempts} attempts; path {r.path.address} crosses " + \
        ", ".join(r.path.links)


def _result_dict(r: ProbeResult) -> dict:
    return {
        "kind": r.path.kind, "src": r.path.src, "dst": r.path.dst, "plane": r.path.plane,
        "t1": r.path.t1, "address": r.path.address, "hops": list(r.path.hops),
        "ok": r.ok, "forward": r.forward, "reply": r.reply,
        "rtt_us": round(r.rtt_us, 1) if r.rtt_us is not None else None,
        "attempts": r.attempts, "failure": r.failure,
    }
