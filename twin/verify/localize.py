"""Where a fault is, from which loopback probes fail (pure; fed one round at a time).

The evidence is MRC's Clustermapper's: from every host port, a probe that
bounces off its T0 (`loop-t0`: the host link and the T0) and one that bounces
off each T1 of the plane (`loop-t1`: the host link, the T0, the T0-T1 link
and the T1). Each probe path crosses *elements*: links (by link id) and
switches (by node name). A round gives every path an outcome.

Per round:

    good       a path whose last probe came back: it clears every element it
               crosses (a link or switch that just carried a probe is not dead)
    failing    a path whose last probe was lost (1 round or more in a row)
    confirmed  a path whose last `confirm` (2) probes were all lost

"Last" is by send time, not by when the outcome arrives: a path's streak is its
lost probes sent after the newest of its probes that came back. So a probe that
comes back late, after its round counted it lost, is evidence the path is alive:
it retracts the losses sent before it (at most the streak it began), and only
losses sent after it count toward naming. An outcome older than what a path
already knows (a loss sent before its newest success) changes nothing.

`explain(failing, good)` names, greedily, the fewest uncleared elements that
lie on every failing path: the element on the most failing paths first; on a
tie the narrower claim, a link, before a switch. So, on mrc-4p:

    a T0-T1 link dead         the loop-t1s over it fail and nothing else: the
                              link (its T0 and T1 are cleared by their other
                              probes)
    a T1 dead, blackholed,    every loop-t1 through it fails, from every rack:
      or its SID lost         no one link lies on all of them, the T1 does
    a host link (NIC port)    that port's loop-t0 and loop-t1s fail; the
                              host's rack mate clears the T0: the host link
    a T0 dead                 every probe of every host on it fails: the T0
    a route-corrupt           whichever probes the wrong port breaks: the
                              element they share, a link of the node or the
                              node (contains the fault; see `alternatives`)

Where the evidence cannot tell two elements apart (a T0 with one host:
the T0 and that host link fail exactly the same probes; a T1 in a fabric of
one rack: the T1 and its one link) the link is named and the others are
its `alternatives`. Two faults whose evidence one switch explains (both
links of a T1 in a two-rack fabric) are named as that switch.

No flapping on one lost probe: an element is named only when it explains
the confirmed paths alone *and* all failing ones (the wider picture, which
in the round a fault lands in may still hold paths probed before it; until
both agree nothing new is named). A named element is cleared once, for
`clear` (2) rounds in a row, it is no longer named and none of its paths is
failing; one named again within FLAP_ROUNDS (50) rounds of clearing (a lossy
link) needs twice the quiet rounds it needed last time, up to CLEAR_MAX (32).

A fault that shrinks is not named again: while part of a named switch's
paths recover (a node being re-programmed comes back route by route), what
still fails lies within what is named already, and no link of it is named
on its own; what spreads beyond (a link named, then its whole switch fails)
is named as well.

Times are CLOCK_MONOTONIC ns: `first_failed_ns` is when the first lost
probe of its paths was sent, `named_ns` and `cleared_ns` the rounds that
decided.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from twin.fabric.model import Fabric
from twin.fabric.paths import Path

CONFIRM = 2
CLEAR = 2
CLEAR_MAX = 32  # a flapping target's quiet rounds before clearing double up to this
FLAP_ROUNDS = 50  # named again this soon after it was cleared: it flaps
KEEP = 1000  # localizations remembered (the oldest cleared ones are dropped)
LOST_KEPT = 16  # send times of a streak's newest losses kept per path


@dataclass(frozen=True)
class Outcome:
    """One probe of one path in one round: back or not, and if back, whether a congested
    port marked it (CE: the probe class is marked from a queue's ecn_min on, docs/ebpf.md)
    and its round trip. `ok` None: no evidence this round (the path keeps its streak)."""

    ok: bool | None
    sent_ns: int
    ce: bool = False
    rtt_ns: int | None = None


@dataclass(frozen=True)
class Blame:
    """One element `explain` names, and the failing paths (indexes) it lies on."""

    element: str
    kind: str  # switch | link
    paths: frozenset[int]
    alternatives: tuple[str, ...] = ()  # uncleared elements on exactly those paths


@dataclass
class Localization:
    target: str  # a switch name, or a link id
    kind: str  # switch | link
    first_failed_ns: int
    named_ns: int
    cleared_ns: int | None = None
    failed_probes: int = 0
    ends: tuple[str, ...] = ()  # a link's NODE:IF ends
    alternatives: tuple[str, ...] = ()
    paths: frozenset[int] = field(default_factory=frozenset, repr=False)
    verdict: str = "faulty"  # faulty (probes die) | congested (probes come back CE)
    rtt_max_us: float | None = None  # congested: the slowest marked probe while named

    @property
    def open(self) -> bool:
        return self.cleared_ns is None

    def names(self, target: str) -> bool:
        """Is `target` (a switch, a link id, or one NODE:IF end of a link) what this names?"""
        return target == self.target or target in self.ends

    def to_dict(self) -> dict:
        return {"target": self.target, "kind": self.kind,
                "first_failed_ns": self.first_failed_ns, "named_ns": self.named_ns,
                "cleared_ns": self.cleared_ns, "failed_probes": self.failed_probes,
                "ends": list(self.ends), "alternatives": list(self.alternatives),
                "verdict": self.verdict, "rtt_max_us": self.rtt_max_us}


@dataclass(frozen=True)
class Change:
    event: str  # named | cleared (faulty); congested | uncongested
    localization: Localization  # a copy, as it was then
    t_ns: int


def elements_of(path: Path) -> frozenset[str]:
    return frozenset(path.links) | frozenset(path.hops)


def explain(elements: Sequence[frozenset[str]], kinds: dict[str, str], failing: set[int],
            good: set[int]) -> tuple[list[Blame], set[int]]:
    """The elements that explain the failing paths (indexes into `elements`), and
    the failing paths nothing uncleared explains (every element on them is on a
    good path too)."""
    cleared = set().union(*(elements[i] for i in good))
    on: dict[str, set[int]] = {}
    for i in failing:
        for e in elements[i] - cleared:
            on.setdefault(e, set()).add(i)
    unexplained = {i for i in failing if not elements[i] - cleared}
    left = set(failing) - unexplained
    blames = []
    while left:
        best = min((e for e in on if on[e] & left),
                   key=lambda e: (-len(on[e] & left), kinds[e] != "link", e))
        alternatives = tuple(sorted(e for e in on if e != best and on[e] == on[best]))
        blames.append(Blame(best, kinds[best], frozenset(on[best]), alternatives))
        left -= on[best]
    return blames, unexplained


class Localizer:
    """Feed it each round's outcomes (one per path, in `paths` order); it keeps the
    localizations and says what changed."""

    def __init__(self, fabric: Fabric, paths: Sequence[Path], *, confirm: int = CONFIRM,
                 clear: int = CLEAR, keep: int = KEEP):
        if confirm < 1 or clear < 1:
            raise ValueError(f"confirm and clear are rounds, at least 1 (got {confirm}, {clear})")
        self.paths = list(paths)
        self.confirm, self.clear, self.keep = confirm, clear, keep
        self._elements = [elements_of(p) for p in self.paths]
        self._kinds = {e: ("link" if "--" in e else "switch")
                       for els in self._elements for e in els}
        self._ends = {lk.id: (str(lk.a), str(lk.b)) for lk in fabric.links}
        n = len(self.paths)
        self._streak = [0] * n  # lost probes in a row, sent after the newest one back
        self._first_lost = [0] * n  # when the first of them was sent
        self._lost_ns: list[list[int]] = [[] for _ in range(n)]  # the newest LOST_KEPT
        self._alive_ns = [0] * n  # when the newest probe that came back was sent
        self._open: dict[str, Localization] = {}
        self._quiet: dict[str, int] = {}  # rounds an open one has been neither named nor failing
        self._hold: dict[str, int] = {}  # quiet rounds it needs to clear
        self._cleared: dict[str, tuple[int, int]] = {}  # target -> (round cleared, its hold)
        self._done: list[Localization] = []
        self.rounds = 0
        self.suspects: list[Blame] = []
        self.unexplained: set[int] = set()

    def observe(self, outcomes: Sequence[Outcome], now_ns: int, *,
                partial: bool = False) -> list[Change]:
        """One round's outcomes. `partial`: a confirmation of a few paths only (the others'
        outcomes None), which names as a round does but is not a round: it is not
        counted, and no quiet round of a named element."""
        if len(outcomes) != len(self.paths):
            raise ValueError(f"{len(outcomes)} outcomes for {len(self.paths)} paths")
        if not partial:
            self.rounds += 1
        for i, o in enumerate(outcomes):
            if o.ok is not None:
                self._outcome(i, o.ok, o.sent_ns)
        good = {i for i, s in enumerate(self._streak) if s == 0}
        failing = {i for i, s in enumerate(self._streak) if s >= 1}
        confirmed = {i for i in failing if self._streak[i] >= self.confirm}
        strict, _ = explain(self._elements, self._kinds, confirmed, good)
        wide, self.unexplained = explain(self._elements, self._kinds, failing, good)
        agreed = {b.element for b in strict} & {b.element for b in wide}
        self.suspects = wide
        changes = []
        for b in wide:
            loc = self._open.get(b.element)
            if loc is not None:
                loc.failed_probes += len(b.paths)  # each lost again this round
                loc.paths = loc.paths | b.paths
                loc.alternatives = b.alternatives
                self._quiet[b.element] = 0
            elif b.element in agreed and not any(b.paths <= o.paths for o in self._open.values()):
                loc = Localization(b.element, b.kind,
                                   first_failed_ns=min(self._first_lost[i] for i in b.paths),
                                   named_ns=now_ns,
                                   failed_probes=sum(self._streak[i] for i in b.paths),
                                   ends=self._ends.get(b.element, ()),
                                   alternatives=b.alternatives, paths=b.paths)
                self._open[b.element] = loc
                self._quiet[b.element] = 0
                self._hold[b.element] = self._hold_for(b.element)
                changes.append(Change("named", replace(loc), now_ns))
        named_now = {b.element for b in wide}
        for target, loc in list(self._open.items()):
            if target in named_now:
                continue
            if loc.paths & failing:
                loc.failed_probes += len(loc.paths & failing)
                self._quiet[target] = 0
                continue
            if partial:
                continue
            self._quiet[target] += 1
            if self._quiet[target] >= self._hold[target]:
                loc.cleared_ns = now_ns
                self._cleared[target] = (self.rounds, self._hold[target])
                del self._open[target], self._quiet[target], self._hold[target]
                self._done.append(loc)
                changes.append(Change("cleared", replace(loc), now_ns))
        del self._done[:max(0, len(self._done) + len(self._open) - self.keep)]
        return changes

    def note(self, outcomes: Sequence[Outcome]) -> None:
        """Outcomes between rounds (a round's losses as they fall due, a probe back late):
        the paths' streaks, and no verdict; the next round or confirmation gives it."""
        if len(outcomes) != len(self.paths):
            raise ValueError(f"{len(outcomes)} outcomes for {len(self.paths)} paths")
        for i, o in enumerate(outcomes):
            if o.ok is not None:
                self._outcome(i, o.ok, o.sent_ns)

    def _outcome(self, i: int, ok: bool, sent_ns: int) -> None:
        """One probe of path i: the streak is the losses sent after the newest success."""
        if sent_ns < self._alive_ns[i]:
            return  # older than what is known to have come back: no news
        lost = self._lost_ns[i]
        if not ok:
            if not self._streak[i]:
                self._first_lost[i] = sent_ns
            self._streak[i] += 1
            bisect.insort(lost, sent_ns)  # judged in about send order; kept in it
            if len(lost) > LOST_KEPT:
                del lost[0]
            return
        self._alive_ns[i] = sent_ns
        # The losses sent after this one count; older ones than those kept are older
        # than every kept one, and whether this probe retracts them is not known: only
        # the kept ones are counted then (fewer losses, never a fault made up).
        after = [t for t in lost if t > sent_ns]
        if len(after) < self._streak[i]:
            self._streak[i] = len(after)
            self._first_lost[i] = after[0] if after else 0
        self._lost_ns[i] = after

    def streak(self, i: int) -> int:
        """Path i's lost probes in a row (sent after its newest probe that came back)."""
        return self._streak[i]

    def _hold_for(self, target: str) -> int:
        """`clear` rounds; doubled (up to CLEAR_MAX) for a target named again soon
        after it cleared: a lossy link is named once, not once a second."""
        for t, (when, _) in list(self._cleared.items()):
            if self.rounds - when > FLAP_ROUNDS:
                del self._cleared[t]
        if target in self._cleared:
            return min(CLEAR_MAX, 2 * self._cleared[target][1])
        return self.clear

    def localizations(self) -> list[Localization]:
        """Every localization remembered, oldest named first (open ones too)."""
        return sorted([*self._done, *self._open.values()], key=lambda loc: loc.named_ns)

    def named(self) -> list[Localization]:
        """What is named right now."""
        return sorted(self._open.values(), key=lambda loc: loc.named_ns)

    def snapshot(self) -> dict:
        def label(i: int) -> dict:
            p = self.paths[i]
            return {"path": p.label, "kind": p.kind, "address": p.address,
                    "lost_in_a_row": self._streak[i]}
        return {
            "rounds": self.rounds,
            "named": [loc.to_dict() for loc in self.named()],
            "suspects": [{"target": b.element, "kind": b.kind, "failing_paths": len(b.paths),
                          "alternatives": list(b.alternatives)} for b in self.suspects],
            "failing": [label(i) for i, s in enumerate(self._streak) if s],
            "unexplained": [label(i) for i in sorted(self.unexplained)],
            "localizations": [loc.to_dict() for loc in self.localizations()],
        }


class CongestionLocalizer:
    """Which links or switches are congested, from the same rounds (pure): a probe that
    came back CE-marked crossed a port whose data queue was at its ecn_min or deeper.
    The same rules as `Localizer` with "marked" in place of "lost" (named once a path is
    marked `confirm` rounds in a row and the marked paths agree on the element; cleared
    after `clear` rounds unmarked), over paths whose probe came back: a lost probe is no
    evidence either way (the faulty verdict is the other localizer's). Its
    localizations have verdict "congested" and the slowest marked round trip while
    named, and its changes are `congested` and `uncongested`.

    RTT alone does not decide: on an unshaped fabric, and on this 2-core machine, a
    round trip of milliseconds is the CPU, not a queue; a CE mark is only ever made by
    a queue program that found its port's data queue at ecn_min."""

    EVENTS = {"named": "congested", "cleared": "uncongested"}

    def __init__(self, fabric: Fabric, paths: Sequence[Path], *, confirm: int = CONFIRM,
                 clear: int = CLEAR, keep: int = KEEP):
        self._loc = Localizer(fabric, paths, confirm=confirm, clear=clear, keep=keep)
        self._rtt_ns: list[int | None] = [None] * len(self._loc.paths)

    @property
    def rounds(self) -> int:
        return self._loc.rounds

    def observe(self, outcomes: Sequence[Outcome], now_ns: int, *,
                partial: bool = False) -> list[Change]:
        marked = []
        for i, o in enumerate(outcomes):
            back = bool(o.ok)
            self._rtt_ns[i] = o.rtt_ns if back and o.ce else None
            marked.append(Outcome(None if not back else not o.ce, o.sent_ns))
        changes = self._loc.observe(marked, now_ns, partial=partial)
        for loc in self._loc._open.values():
            loc.verdict = "congested"
            rtts = [self._rtt_ns[i] for i in loc.paths if self._rtt_ns[i] is not None]
            if rtts:
                slowest = max(rtts) / 1000
                loc.rtt_max_us = max(loc.rtt_max_us or 0.0, round(slowest, 1))
        return [Change(self.EVENTS[c.event], replace(c.localization, verdict="congested",
                                                     rtt_max_us=self._open_rtt(c)), c.t_ns)
                for c in changes]

    def _open_rtt(self, c: Change) -> float | None:
        loc = self._loc._open.get(c.localization.target)
        return loc.rtt_max_us if loc is not None else c.localization.rtt_max_us

    def localizations(self) -> list[Localization]:
        return self._loc.localizations()

    def named(self) -> list[Localization]:
        return self._loc.named()

    def snapshot(self) -> dict:
        return {"congested": [loc.to_dict() for loc in self.named()],
                "congestions": [loc.to_dict() for loc in self.localizations()]}
