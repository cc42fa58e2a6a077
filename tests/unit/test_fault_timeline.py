"""The fault timeline (twin.faults.timeline), over fake apply and revert callables: no lab."""

from __future__ import annotations

import threading
import time

from twin.errors import UsageError
from twin.faults.timeline import Scheduled, Timeline, changes

MS = 1_000_000


class Fake:
    """Applies and reverts into a journal: ("apply" | "revert", name)."""

    def __init__(self):
        self.journal: list[tuple[str, str]] = []

    def fault(self, name: str, *changes_ms, lasting=True, revertible=True, **kw) -> Scheduled:
        def apply():
            self.journal.append(("apply", name))
            return f"fault {name}"

        def revert(fault):
            assert fault == f"fault {name}"  # given what its apply returned
            self.journal.append(("revert", name))

        return Scheduled("toy", name, apply,
                         tuple((ms * MS, up) for ms, up in changes_ms),
                         revert if revertible else None, lasting=lasting, **kw)


def run_to_end(timeline: Timeline) -> None:
    timeline.begin(time.monotonic_ns())
    timeline.join(10)
    assert not timeline.is_alive() and timeline.error is None


def test_changes_run_in_time_order_a_revert_first_at_the_same_time():
    fake = Fake()
    a = fake.fault("a", (0, False), (20, True))
    b = fake.fault("b", (20, False))
    c = fake.fault("c", (10, False), (15, True), (30, False))
    assert [(ch.at_ns // MS, ch.fault.target, ch.up) for ch in changes([b, a, c])] == [
        (0, "a", False), (10, "c", False), (15, "c", True), (20, "a", True),
        (20, "b", False), (30, "c", False)]
    timeline = Timeline([b, a, c])
    run_to_end(timeline)
    assert fake.journal == [("apply", "a"), ("apply", "c"), ("revert", "c"), ("revert", "a"),
                            ("apply", "b"), ("apply", "c")]
    assert timeline.done == timeline.total == 6
    opened = [(r.target, r.reverted_ns is not None) for r in timeline.applied]
    assert opened == [("a", True), ("c", True), ("b", False), ("c", False)]
    first = timeline.applied[0]
    assert first.at_ns <= first.applied_ns <= first.reverted_ns  # on the clock, in order


def test_revert_all_reverts_what_is_held_and_closes_its_records():
    fake = Fake()
    held = fake.fault("held", (0, False))
    over = fake.fault("over", (0, False), (1, True))
    reboot = fake.fault("reboot", (2, False), lasting=False)  # over when applied
    theirs = fake.fault("theirs", (3, False), revertible=False)  # its caller reverts it
    timeline = Timeline([held, over, reboot, theirs])
    run_to_end(timeline)
    fake.journal.clear()
    assert timeline.revert_all() == ["fault held"]
    assert fake.journal == [("revert", "held")] and timeline.held == {}
    reverted = {r.target: r.reverted_ns is not None for r in timeline.applied}
    assert reverted == {"held": True, "over": True, "reboot": True, "theirs": False}
    assert timeline.revert_all() == []  # nothing held any more


def test_a_fault_reverted_by_hand_counts_as_reverted():
    fake = Fake()
    s = fake.fault("gone", (0, False))

    def refuse(fault):
        raise UsageError("no fault in force on 'gone'")

    gone = Scheduled(s.kind, s.target, s.apply, s.changes, refuse)
    timeline = Timeline([gone])
    run_to_end(timeline)
    assert timeline.revert_all() == ["fault gone"]
    assert timeline.applied[0].reverted_ns is not None


def test_stopped_early_it_makes_no_further_change_and_reverts_what_it_holds():
    fake = Fake()
    timeline = Timeline([fake.fault("now", (0, False), (60_000, True)),
                         fake.fault("later", (60_000, False))])
    timeline.begin(time.monotonic_ns())
    deadline = time.monotonic() + 10
    while not timeline.done and time.monotonic() < deadline:
        time.sleep(0.005)
    assert timeline.revert_all() == ["fault now"]  # halted long before a minute
    assert not timeline.is_alive()
    assert fake.journal == [("apply", "now"), ("revert", "now")]
    assert timeline.done == 1 and timeline.total == 3


def test_halt_lets_a_change_under_way_finish_and_hold_its_fault():
    started, release = threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(10)
        return "slow"

    reverted = []
    timeline = Timeline([Scheduled("toy", "slow", slow, ((0, False),), reverted.append)])
    timeline.begin(time.monotonic_ns())
    assert started.wait(10)
    threading.Timer(0.05, release.set).start()
    assert timeline.revert_all() == ["slow"] and reverted == ["slow"]


def test_before_start_applies_the_faults_at_0_and_begin_the_rest():
    fake = Fake()
    log = []
    timeline = Timeline([fake.fault("startup", (0, False), (5, True)),
                         fake.fault("late", (10, False))],
                        log=lambda what, s, t_ns: log.append((what, s.target)))
    timeline.before_start()
    assert fake.journal == [("apply", "startup")] and timeline.t0_ns == 0
    assert (timeline.done, timeline.total) == (1, 3)
    run_to_end(timeline)
    assert fake.journal == [("apply", "startup"), ("revert", "startup"), ("apply", "late")]
    assert log == [("apply", "startup"), ("revert", "startup"), ("apply", "late")]
    assert timeline.done == timeline.total == 3


def test_a_failing_apply_is_kept_as_the_error_and_ends_the_timeline():
    fake = Fake()

    def broken():
        raise UsageError("link t0:eth3 is already down")

    timeline = Timeline([Scheduled("toy", "broken", broken, ((0, False),), lambda f: None),
                         fake.fault("after", (1, False))])
    timeline.begin(time.monotonic_ns())
    timeline.join(10)
    assert isinstance(timeline.error, UsageError) and fake.journal == []
    assert timeline.applied == [] and timeline.revert_all() == []
