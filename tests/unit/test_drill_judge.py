"""How a drill's runs are judged (twin.chaos.runner, its pure parts): a baseline only by
its own `baseline_expect` (else reported, with its outcome), a QP that failed named with
its reason and time, the hint of a fault the traffic stopped short of, and speedup over
a baseline that never finished."""

import math
from dataclasses import replace
from types import SimpleNamespace

from tests.helpers import send_qp_stats
from twin.chaos import drill as D
from twin.chaos import metrics as M
from twin.chaos import runner as R
from twin.chaos.results import DrillRun, FaultFigures, Judged
from twin.chaos.runner import failed_qps, outcome, speedup_of, verdict_of

MS = 1_000_000
T0 = 10_000 * MS

VERIFY = Judged("rollback: verify", "pass", "pass", True)
MISSED = Judged("faults met traffic", ">= 20 ms", "0 ms", False)
RETRY = "PSN 812 lost 8 times (retry limit)"


def test_a_baseline_without_expectations_is_reported_and_fails_nothing():
    rows = [replace(MISSED, judged=False), VERIFY]
    assert verdict_of(rows, ran=True, reported=True) == "reported"
    r = R.RunResult(None, "single-path", 1, "mrc-4p", DrillRun(verdict="reported"))
    assert r.ok


def test_a_reported_baseline_still_fails_on_the_labs_health_and_a_judged_row_on_its_own():
    broken = replace(VERIFY, got="fail: 2 paths", ok=False)
    assert verdict_of([replace(MISSED, judged=False), broken], ran=True, reported=True) == "fail"
    assert verdict_of([MISSED, VERIFY], ran=True) == "fail"  # judged: the row counts
    assert verdict_of([VERIFY], ran=False, reported=True) == "fail"  # the traffic never ran
    assert verdict_of([VERIFY], ran=True) == "pass"


def test_a_failed_qp_is_named_with_its_reason_and_when_it_died():
    logs = [M.FlowLog("r0h0", "r1h0", 1, failed=RETRY, failed_ns=T0 + 302 * MS),
            M.FlowLog("r0h1", "r1h1", 1),
            M.FlowLog("r1h2", "r0h1", 1, failed="x", failed_ns=T0, bystander=True)]
    assert failed_qps(logs, T0) == [{"src": "r0h0", "dst": "r1h0", "why": RETRY,
                                     "at_ms": 302.0}]
    said = outcome("single-path", True, False, failed_qps(logs, T0), [], 1)
    assert said == f"RoCE QP failed: {RETRY} at 302 ms"
    many = outcome("single-path", True, False, failed_qps(logs, T0) * 2, [], 8)
    assert many.startswith("2 of 8 RoCE QPs failed, the first: PSN 812")


def test_the_outcome_says_a_baseline_never_crossed_the_fault():
    faults = [FaultFigures(target="t0-p1-r0:eth3", crossed=False)]
    assert outcome("single-path", True, True, [], faults, 1) == \
        "byte-exact; its traffic never crossed t0-p1-r0:eth3"
    assert outcome("mrc", False, False, [], [], 1) == "the traffic did not run"
    flap = [FaultFigures(kind="link-flap", target="t0-p1-r0:eth4", crossed=False)] * 3
    planes = [FaultFigures(kind="plane-loss", target=str(p), crossed=p != 1) for p in range(3)]
    assert outcome("single-path", True, True, [], flap + planes, 1) == \
        "byte-exact; its traffic never crossed t0-p1-r0:eth4, plane 1"


def fault_row(**kw):
    return FaultFigures(**{"target": "r1h0:1", "crossed": True, "crossed_from": "paths taken",
                           "under_traffic_ms": 0.0, "met": False, **kw})


def test_a_qp_dead_at_its_retry_limit_is_blamed_not_the_traffics_length():
    d = D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: r0h0, dst: r1h0, "
                      "for: 1s}, timeline: [{at: 300ms, fault: nic-down, "
                      "target: 'r1h0:1'}]}\n")
    died = [{"src": "r0h0", "dst": "r1h0", "why": RETRY, "at_ms": 302.0}]
    row = R._met_traffic([fault_row()], d, "single-path", died, 1)
    assert not row.ok and "for: 2s" not in row.got
    assert f"the traffic stopped: RoCE QP failed: {RETRY} at 302 ms" in row.got
    row = R._met_traffic([fault_row()], d, "mrc", [], 1)  # a timed transfer that ended
    assert "make the traffic's `for` longer" in row.got
    row = R._met_traffic([fault_row(crossed=False)], d, "single-path", [], 1)
    assert row.got == "r1h0:1: no path the traffic took crosses it"


def test_speedup_over_a_baseline_that_never_finished_is_infinite_and_says_why():
    got, text = speedup_of(1.0, [("single-path", 0.3, f"RoCE QP failed: {RETRY}")])
    assert math.isinf(got) and text == \
        f"∞ (single-path did not finish: RoCE QP failed: {RETRY})"
    got, text = speedup_of(1.0, [("single-path", 4.0, None),
                                 ("single-path x8 QPs", 0.5, "2 of 8 failed")])
    assert got == 4.0 and text == "4 (single-path 4, single-path x8 QPs did not finish)"
    assert speedup_of(1.0, []) == (None, "not measured (needs --compare)")
    assert speedup_of(None, [("single-path", 4.0, None)]) == (None, "not measured")


def test_the_paths_a_qp_took_come_from_its_endpoint_or_are_unknown():
    assert R._paths_used(send_qp_stats(paths_used=[[1, 1, 40]])) == frozenset({(1, 1)})
    assert R._paths_used(send_qp_stats()) is None  # packets sent, no paths: an older one
    idle = send_qp_stats(sender={"packets": 0})
    assert R._paths_used(idle) == frozenset()  # sent nothing: crossed nothing
    assert R._paths_used(None) is None


def test_packets_lost_per_qp_leaves_out_the_losses_a_late_copy_proved_wrong():
    """A receiver stalled past the RTO makes the sender declare a whole window lost, and
    all of it arrives: those are not packets lost (startup-dead-link read 46 for 2)."""
    real = [{"kind": "loss", "psn": p} for p in (1, 2)]
    stall = [{"kind": "loss", "psn": p} for p in range(10, 54)]
    undone = [{"kind": "spurious", "psn": p} for p in range(10, 54)]
    assert R.lost_for_good(real + stall + undone) == 2
    assert R.lost_for_good(real + stall) == 46
    assert R.lost_for_good(undone) == 0


class _Sized:
    """What traffic.run returns, as size_for reads it: ok, elapsed_s, failures()."""

    def __init__(self, flows, elapsed_s, why=()):
        self.flows, self.elapsed_s, self.why = flows, elapsed_s, list(why)
        self.ok = not self.why

    def failures(self):
        return self.why


def _sizing(monkeypatch, outcomes):
    """size_for against a traffic.run that answers `outcomes` in turn: (elapsed, why)."""
    from twin import traffic as T

    answers, sizes = iter(outcomes), []

    def run(rt, pattern, flows, mode, **kw):
        elapsed, why = next(answers)
        sizes.append(flows[0].size)
        return _Sized(flows, elapsed, why)

    monkeypatch.setattr(T, "run", run)
    drill = D.load_drill(D.find("t1-blackhole"))
    flows = [T.Flow("r0h0", "r1h0", 1 << 20, group=0), T.Flow("r0h0", "r1h0", 1 << 20, group=0)]
    notes = []
    got = R.size_for(SimpleNamespace(runtime=None), drill, flows, "single-path", notes.append)
    return got, sizes, notes


DIED = ("r0h0 -> r1h0 QP 25 failed: PSN 256 lost 8 times (retry limit)",)


def test_sizing_grows_until_a_transfer_lasts_long_enough(monkeypatch):
    (sized, row), sizes, _ = _sizing(monkeypatch, [(0.01, ()), (0.2, ())])
    assert sizes[0] == R.SIZING_START and sizes[1] > sizes[0] and len(sizes) == 2
    assert row.ok and "from the" not in row.got
    assert all(f.size >= sizes[1] for f in sized)


def test_a_sizing_transfer_that_fails_after_one_went_through_sizes_from_that_one(monkeypatch):
    (sized, row), sizes, notes = _sizing(monkeypatch, [(0.01, ()), (0.5, DIED)])
    assert len(sizes) == 2
    # the 1 MiB transfer's rate: 1 MiB in 10 ms lasts 1 s at 100 MiB
    assert [f.size for f in sized] == [100 << 20, 100 << 20]
    assert row.ok and "(from the 1 MiB transfer; the " in row.got
    assert "failed (r0h0 -> r1h0 QP 25 failed: PSN 256 lost 8 times (retry limit))" in row.got
    assert any("sized from the 1 MiB one" in n for n in notes)


def test_a_first_sizing_transfer_that_fails_ends_the_drill_naming_why(monkeypatch):
    import pytest

    from twin.errors import LabError

    with pytest.raises(LabError) as e:
        _sizing(monkeypatch, [(0.5, DIED * 5)])
    assert str(e.value) == (
        f"steady state: the sizing transfer failed ({R.SIZING_START} bytes per flow in "
        f"single-path), before any fault: {'; '.join(DIED * 3)} (and 2 more)")
