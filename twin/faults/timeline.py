"""A timeline of faults: each put in force, and taken out again, at its offset after the
traffic's first write, by a thread, with when each change began and was done on the
figures' clock (twin.runtime.clock). Drills (twin.chaos.runner) and `twin traffic --cut`
(twin.cli.traffic, through twin.traffic.run) schedule their faults on it: it is the
only fault scheduler.

    Scheduled     one fault: what it is (kind, target, the links and switches it takes
                  out), how it is put in force (`apply`, which returns the fault as
                  recorded, twin.faults.Fault) and taken out (`revert`, given it), and
                  its changes: (ns after t0, a revert?) each; a flap is many
    Timeline      the thread. `before_start` applies the changes at 0 at once (before
                  the traffic's first write); `begin(t0_ns)` starts the rest; `halt`
                  stops it where it is; `revert_all` halts it and reverts what it holds
    AppliedFault  a fault as the timeline applied it: when its change began, when it
                  was in force, when it was reverted; what a drill's figures read

The faults go through twin.faults, so each is recorded on disk before it is applied:
one whose apply failed part way is in the lab's record (`F.active`), for its caller
to revert from there (a drill's rollback, `twin traffic`'s finally).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twin.errors import UsageError
from twin.runtime.clock import Clock, LocalClock


@dataclass
class AppliedFault:
    """One fault as the timeline applied it."""

    kind: str
    target: str
    at_ns: int  # its kernel change began (recorded on disk before; in force by applied_ns)
    links: frozenset[str]  # link ids it takes out
    nodes: frozenset[str] = frozenset()  # switches it takes out whole
    reverted_ns: int | None = None
    step: str = ""  # the timeline step it came from
    applied_ns: int | None = None  # the apply call returned
    uncertainty_ns: int | None = None  # at_ns is right to within this (twin.runtime.clock)
    named_by_links: bool = False  # a naming of any of its links finds it (route-corrupt)
    # the revert began (a link is up again at the start of a revert that then re-programs
    # its nodes for a while); None: as reverted_ns
    revert_began_ns: int | None = None

    @property
    def mended_ns(self) -> int | None:
        """When its revert began changing the kernel (None: never reverted)."""
        return self.reverted_ns if self.revert_began_ns is None else self.revert_began_ns

    def crosses(self, path_links, path_hops) -> bool:
        return bool(self.links.intersection(path_links) or self.nodes.intersection(path_hops))


@dataclass(frozen=True, eq=False)  # by identity: two steps may name the same fault
class Scheduled:
    """A fault on a timeline (see the module docstring). `revert` None: the timeline
    never takes it out (its caller does); `lasting` False: over when its apply returns
    (a reboot), never held. `of`: what the caller scheduled it for (a drill's step),
    handed back to its log."""

    kind: str
    target: str
    apply: Callable[[], Any]
    changes: tuple[tuple[int, bool], ...]
    revert: Callable[[Any], Any] | None = None
    lasting: bool = True
    links: frozenset[str] = frozenset()
    nodes: frozenset[str] = frozenset()
    step: str = ""
    named_by_links: bool = False
    of: Any = None


@dataclass(frozen=True)
class Change:
    at_ns: int  # after t0 (the first write)
    fault: Scheduled
    up: bool = False  # a revert (or a flap's up)


def changes(faults: list[Scheduled]) -> list[Change]:
    """Every change of `faults`, in time order; at the same time a revert comes first
    (a flap's up before the next fault's down), else the order they were given in."""
    out = [Change(at_ns, f, up) for f in faults for at_ns, up in f.changes]
    return sorted(out, key=lambda c: (c.at_ns, not c.up))


Log = Callable[[str, Scheduled, int], None]  # ("apply" | "revert", the fault, when)


class Timeline(threading.Thread):
    """Applies the changes at their offsets after t0; stops early when asked."""

    def __init__(self, faults: list[Scheduled], log: Log | None = None,
                 clock: Clock | None = None, name: str = "fault-timeline"):
        super().__init__(name=name, daemon=True)
        self.clock = clock or LocalClock()
        self.t0_fig_ns = 0  # t0 on the figures' clock
        self.actions = changes(faults)
        self.log = log or (lambda what, fault, t_ns: None)
        self.t0_ns = 0
        self.stop = threading.Event()
        self.applied: list[AppliedFault] = []
        self.held: dict[Scheduled, Any] = {}  # a fault in force -> what its apply returned
        self.error: BaseException | None = None
        self.done = 0
        self.total = len(self.actions)
        self.lock = threading.Lock()
        self._records: list[tuple[Scheduled, AppliedFault]] = []

    def before_start(self) -> None:
        """Apply the faults at 0 now, before the traffic's first write: a job that starts
        on a broken fabric (startup-dead-link) finds it broken from its first packet."""
        while self.actions and self.actions[0].at_ns == 0 and not self.actions[0].up:
            self._do(self.actions.pop(0))
            self.done += 1
        self.total = self.done + len(self.actions)

    def begin(self, t0_ns: int) -> None:
        self.t0_ns = t0_ns
        self.t0_fig_ns = self.clock.to_fig(t0_ns)
        self.start()

    def run(self) -> None:
        try:
            for action in self.actions:
                wait = (self.t0_ns + action.at_ns - time.monotonic_ns()) / 1e9
                if wait > 0 and self.stop.wait(wait):
                    return
                if self.stop.is_set():
                    return
                self._do(action)
                self.done += 1
        except BaseException as e:  # the caller's to report, and to roll back
            self.error = e

    def _do(self, action: Change) -> None:
        s = action.fault
        with self.lock:
            if action.up:
                if s not in self.held:
                    return
                fault = self.held.pop(s)
                _, began, now, _ = self.clock.change(lambda: s.revert(fault))
                for mine, a in reversed(self._records):
                    if mine is s and a.reverted_ns is None:
                        a.reverted_ns, a.revert_began_ns = now, began
                        break
                self.log("revert", s, now)
                return
            # Recording the fault on disk comes first, and takes ms on a loaded machine;
            # figures count from just before the kernel change began (the fault's
            # changed_ns), applied_ns says when the change itself was done.
            fault, began, now, uncertainty = self.clock.change(s.apply)
            if s.lasting and s.revert is not None:  # else over when it returns (a reboot)
                self.held[s] = fault
            record = AppliedFault(
                s.kind, s.target, began, s.links, s.nodes,
                reverted_ns=None if s.lasting else now, step=s.step, applied_ns=now,
                uncertainty_ns=uncertainty, named_by_links=s.named_by_links)
            self.applied.append(record)
            self._records.append((s, record))
            self.log("apply", s, began)

    def halt(self, timeout: float = 120) -> None:
        """No change after this one: a change under way is let finish (its fault is then
        held), none other is made."""
        self.stop.set()
        if self.is_alive():
            self.join(timeout=timeout)

    def revert_all(self) -> list[Any]:
        """Halt, then revert what is still in force, in the order it was put in force.
        Returns what each apply returned, for those reverted (one already gone, reverted
        by hand, counts as reverted)."""
        self.halt()
        reverted = []
        with self.lock:
            for s, fault in list(self.held.items()):
                try:
                    _, began, now, _ = self.clock.change(lambda s=s, f=fault: s.revert(f))
                except UsageError:
                    now = began = self.clock.to_fig(time.monotonic_ns())  # gone (by hand)
                for mine, a in self._records:
                    if self.closes(mine, a, s, fault):
                        a.reverted_ns, a.revert_began_ns = now, began
                reverted.append(fault)
                del self.held[s]
        return reverted

    def closes(self, scheduled: Scheduled, record: AppliedFault, reverting: Scheduled,
               fault: Any) -> bool:
        """Whether reverting `reverting` (`fault`, as its apply returned it) at the end
        closes `record`, applied for `scheduled`: its own record, still open."""
        return scheduled is reverting and record.reverted_ns is None
