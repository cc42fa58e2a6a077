"""The clock a drill's figures are read on, when the fabric is on another machine.

A drill compares the time of each fault with the endpoints' event logs, which the
endpoints stamp with their node's CLOCK_MONOTONIC. On one machine that is twin's
clock too. On an attached fabric it is the nodes' machine's clock, so the fault's
times are taken there as well (pure helpers here; twin.remote.stream reads them):

    stamp    a command run in a node through a persistent stream
             (twin.remote.stream) is stamped by the node itself, just before it
             starts and once it returned: the kernel change it makes lies in
             between. The stamp's width is the fault time's uncertainty (the same
             bracket a local fault has: `ip` started, `ip` returned).
    offset   twin's own times (the traffic's first write, a fault applied by a
             one-shot exec when no stream could be opened) are converted to the
             nodes' clock by an offset measured NTP-style over a stream: twin reads
             its clock (t1), asks the node for its clock (r), reads its clock
             again (t2); the sample with the shortest round trip wins, and
             offset = r - (t1 + t2) / 2 is right to within (t2 - t1) / 2 (the
             error bound), plus the drift between the two readings of it.
    machines every node must share that one clock: containers of one Docker
             engine do (one kernel). Pods of a clabernetes fabric run on the
             Kubernetes nodes the scheduler chose (the pods' spec.nodeName); a
             fabric over more than one of them has no one clock to read a drill
             on, and drills refuse it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from twin.errors import UsageError


@dataclass(frozen=True)
class Stamp:
    """A command in a node, on the node's CLOCK_MONOTONIC: started, returned (ns)."""

    before_ns: int
    after_ns: int

    @property
    def width_ns(self) -> int:
        return max(0, self.after_ns - self.before_ns)


@dataclass(frozen=True)
class Sample:
    """One clock reading over a stream: twin's clock before (t1) and after (t2) the
    node read its own (remote), all ns."""

    t1_ns: int
    remote_ns: int
    t2_ns: int

    @property
    def rtt_ns(self) -> int:
        return self.t2_ns - self.t1_ns


@dataclass(frozen=True)
class ClockMap:
    """twin's CLOCK_MONOTONIC -> the nodes' (ns), right to within error_ns."""

    offset_ns: int = 0
    error_ns: int = 0
    samples: int = 0

    def to_remote(self, local_ns: int) -> int:
        return local_ns + self.offset_ns

    def to_local(self, remote_ns: int) -> int:
        return remote_ns - self.offset_ns

    def to_dict(self) -> dict:
        return {"offset_us": round(self.offset_ns / 1000, 1),
                "error_us": round(self.error_ns / 1000, 1), "samples": self.samples}


IDENTITY = ClockMap()


def offset_from(samples: Sequence[Sample]) -> ClockMap:
    """The offset of the sample with the shortest round trip (NTP's rule: the
    least delayed reading is the least skewed); its error bound is half that trip."""
    good = [s for s in samples if s.rtt_ns >= 0]
    if not good:
        raise ValueError("no clock sample to measure an offset from")
    best = min(good, key=lambda s: s.rtt_ns)
    mid = best.t1_ns + best.rtt_ns // 2
    return ClockMap(best.remote_ns - mid, (best.rtt_ns + 1) // 2, len(good))


def widen(before: ClockMap, after: ClockMap) -> ClockMap:
    """One map for a whole drill from the offsets measured before and after it: their
    mean, with an error bound that covers both readings (and so the drift between)."""
    mid = (before.offset_ns + after.offset_ns) // 2
    spread = abs(before.offset_ns - after.offset_ns) // 2
    return ClockMap(mid, max(before.error_ns, after.error_ns) + spread,
                    before.samples + after.samples)


def bracket(stamps: Sequence[Stamp], called_ns: int, returned_ns: int, clock: ClockMap
            ) -> tuple[int, int, int]:
    """A fault's (began, in force by, uncertainty) on the nodes' clock, ns.

    With the nodes' stamps of the commands that made the change: it began when the
    first started, was in force when the last returned, and the uncertainty is how
    long the first ran (the change is its last syscall, somewhere inside it). Else
    (one-shot execs, stamped by nothing but twin): twin's call and return, converted,
    and the uncertainty is that whole span plus the conversion's error."""
    if stamps:
        return stamps[0].before_ns, stamps[-1].after_ns, stamps[0].width_ns
    return (clock.to_remote(called_ns), clock.to_remote(returned_ns),
            max(0, returned_ns - called_ns) + clock.error_ns)


def require_one_machine(what: str, lab: str, machine_of: Iterable[tuple[str, str]]) -> str:
    """The one machine every node runs on (node, machine pairs); a UsageError in one
    line naming the machines when there are several."""
    by: dict[str, list[str]] = {}
    for node, machine in machine_of:
        by.setdefault(machine or "?", []).append(node)
    if len(by) > 1:
        shown = ", ".join(f"{m} ({len(n)} nodes: {', '.join(sorted(n)[:2])}"
                          f"{' ...' if len(n) > 2 else ''})" for m, n in sorted(by.items()))
        raise UsageError(f"{what}: lab {lab} runs on {len(by)} machines ({shown}), whose "
                         "CLOCK_MONOTONICs differ; a drill lines faults up with the "
                         "endpoints' event logs on one clock: schedule the topology's pods "
                         "on one Kubernetes node (a nodeSelector) to drill it")
    return next(iter(by), "?")
