"""The prober's verdicts beside the queues in a drill (twin.chaos.queues, pure parts),
the false-alarm check, and the report's table of them."""

from __future__ import annotations

from twin.chaos import queues as Q
from twin.chaos import report
from twin.chaos.results import Judged, parse

HOT = "r0h0:eth1--t0-p0-r0:eth1"
COLD = "r1h0:eth1--t0-p0-r1:eth1"


def test_a_deep_queue_named_congested_sits_beside_its_depth():
    rows = Q.verdicts([], [{"target": HOT, "named_ns": 5}],
                      {HOT: 120_000, COLD: 0, "t0--t1": 3_000},
                      {HOT: {"packets": 900, "ce_marked": 0, "trimmed": 40, "dropped": 0}})
    assert [(r["link"], r["verdict"], r["max_queue_bytes"]) for r in rows] == [
        (HOT, "congested", 120_000), ("t0--t1", "none", 3_000)]
    assert rows[0]["trimmed"] == 40 and rows[0]["named_ns"] == 5


def test_faulty_outranks_congested_on_the_same_link():
    rows = Q.verdicts([{"target": HOT, "named_ns": 9}], [{"target": HOT, "named_ns": 5}],
                      {}, {})
    assert [(r["verdict"], r["named_ns"]) for r in rows] == [("faulty", 9)]


def test_a_drill_without_faults_fails_if_the_prober_named_one():
    """The incast drill before the probe class: r0h0's host links named faulty, nothing
    broken. Now a row that fails the drill."""
    row = Q.false_alarm([{"target": HOT}, {"target": HOT}, {"target": COLD}], 0)
    assert row == Judged("prober: nothing named faulty", "0 (no fault on the timeline)",
                         f"2: {HOT}, {COLD}", False)
    assert Q.false_alarm([], 0).ok is True
    assert Q.false_alarm([{"target": HOT}], 1) is None  # a fault drill: localized judges it
    # a RoCE baseline is judged by baseline_expect alone; its count is reported beside it
    assert Q.false_alarm([{"target": HOT}], 0, baseline_of="mrc") is None


def test_the_report_shows_the_verdicts_beside_the_queues(tmp_path):
    run = {"name": "incast-victim", "mode": "mrc", "verdict": "pass",
           "prober": {"named_faulty": 0, "named_congested": 1, "queue_samples": 80,
                      "verdicts": Q.verdicts([], [{"target": HOT, "named_ns": 5}],
                                             {HOT: 120_000}, {})}}
    html = report.write(parse({"drills": [run]}), tmp_path)["html"].read_text()
    assert "Prober verdicts and queues" in html
    assert f'<tr class="verdict-congested"><td>{HOT}</td><td>congested</td><td>120,000</td>' \
        in html
    assert "named faulty 0, congested 1" in html


def test_a_run_without_a_prober_has_no_such_table(tmp_path):
    html = report.write(parse({"drills": [{"name": "x", "mode": "mrc", "verdict": "pass"}]}),
                        tmp_path)["html"].read_text()
    assert "Prober verdicts" not in html


def test_a_runs_prober_keeps_its_counters_for_the_report():
    """report.json's prober.counters: how the probes fared (late ones, held ones, the
    timeouts at the end), read from the prober's snapshot when the run closes it."""
    from types import SimpleNamespace

    from twin.chaos import runner
    snap = {k: 7 for k in runner.COUNTERS} | {"other": 1}
    closed = []
    cp = SimpleNamespace(snapshot=lambda: snap, localizations=lambda: [],
                         congestions=lambda: [], __exit__=lambda *a: closed.append(a))
    p = runner._Prober(cp, SimpleNamespace(stop=lambda: closed.append("watch")))
    p.close()
    assert p.counters == {k: 7 for k in runner.COUNTERS} and "probes_late" in p.counters
    assert closed == ["watch", (None, None, None)]
