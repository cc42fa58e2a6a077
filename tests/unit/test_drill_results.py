"""A drill run's results as types (twin.chaos.results): the runner builds them, the
report draws them, and JSON is their edge: what they write is what the runner has always
printed, and what they read back writes the same file again."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

from tests.helpers import GOLDEN
from twin import lab as L
from twin.chaos import drill as D
from twin.chaos import queues as Q
from twin.chaos import report
from twin.chaos import runner as R
from twin.chaos.results import (
    DrillRun,
    FaultFigures,
    Judged,
    LinkLoad,
    PortSignals,
    document,
    parse,
)
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec
from twin.runtime.clock import LocalClock

ROOT = GOLDEN.parents[1]
FABRIC = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
HOT = "t0-p0-r0:eth3--t1-p0-0:eth1"
HOT_LINK = next(lk for lk in FABRIC.links if lk.id == HOT)

# the keys of a run as `twin drill run --json` has printed them, in its order
KEYS = ["name", "description", "lab", "mode", "baseline_of", "seed", "verdict", "outcome",
        "failed_qps", "expectations", "faults", "prober", "goodput_retained", "exact",
        "wall_s", "t0_ns", "clock", "goodput", "ev_states", "timeline", "link_load",
        "metrics", "targets", "variables", "flows", "flow_goodput", "signals", "variant",
        "warnings", "qps", "shaped"]


def drill(fabric: str = "mrc-4p") -> D.Drill:
    return D.parse_drill(f"name: d\nfabric: {fabric}\nmethod: {{traffic: {{pattern: bulk, "
                         "src: r0h0, dst: r1h0}, timeline: [{at: 100ms, fault: link-down, "
                         f"target: 't0-p0-r0:eth3'}}]}}\nexpect: {{exact: true}}\n")


def collected(**kw) -> R.Collected:
    """A run whose traffic never ran (its steady state failed), on mrc-4p."""
    att = SimpleNamespace(fabric=FABRIC, lab="mrc-4p")
    timeline = SimpleNamespace(applied=[], t0_fig_ns=0, done=0, total=2)
    c = R.Collected(att, drill(), "mrc", 1, None, [], timeline, LocalClock(),
                    checks=[Judged("steady state: verify", "pass", "fail: 2 paths", False)])
    for k, v in kw.items():
        setattr(c, k, v)
    return c


def test_the_golden_results_parse_and_write_the_same_file():
    text = (GOLDEN / "drill-results.json").read_text()
    runs = parse(json.loads(text))
    assert [r.name for r in runs] == ["t0-t1-flap", "t0-t1-flap", "t1-blackhole"]
    assert isinstance(runs[0].expectations[0], Judged)
    assert isinstance(runs[0].faults[0], FaultFigures)
    assert isinstance(runs[0].link_load[0], LinkLoad)
    assert report.to_json(document(runs)) + "\n" == text


def test_a_saved_report_reads_back_as_the_runs_it_was_written_from(tmp_path):
    runs = parse(json.loads((GOLDEN / "drill-results.json").read_text()))
    assert report.load(report.write(runs, tmp_path)["json"]) == runs


def test_a_run_the_runner_judged_has_todays_keys_and_comes_back_equal():
    found = R._judge(collected(), variant="mrc", warnings=[])
    data = found.to_json()
    assert list(data) == KEYS
    assert data["verdict"] == "fail" and data["outcome"] == "the traffic did not run"
    assert data["expectations"] == [{"what": "steady state: verify", "want": "pass",
                                     "got": "fail: 2 paths", "ok": False}]
    back = DrillRun.from_json(json.loads(json.dumps(data)))
    assert back == found
    assert back.to_json() == data


def test_a_row_says_judged_only_when_it_is_not():
    shown = Judged("faults met traffic", ">= 20 ms", "0 ms", False, judged=False)
    assert shown.to_json() == {"what": "faults met traffic", "want": ">= 20 ms",
                               "got": "0 ms", "ok": False, "judged": False}
    assert "judged" not in dataclasses.replace(shown, judged=True).to_json()
    assert not shown.failed and Judged("x", "y", "z", False).failed
    for row in (shown, Judged("x", "y", "z", True)):
        assert Judged.from_json(row.to_json()) == row


def test_round_trips_keep_rows_faults_links_and_what_a_newer_writer_added():
    run = DrillRun(name="d", verdict="reported", expectations=(
        Judged("exact", "true", "true", True), Judged("m", "<= 1", "2", False, judged=False)),
        faults=(FaultFigures(kind="link-down", target="x", at_ns=5, met=True),),
        link_load=(LinkLoad(HOT, 0, "fabric", 900, ce_marked=7, trimmed=0),
                   LinkLoad("r0h0:eth1--t0-p0-r0:eth1", 0, "host", 12)))
    assert DrillRun.from_json(run.to_json()) == run
    assert "ce_marked" not in run.to_json()["link_load"][1]  # not read: not written
    newer = {"verdict": "pass", "name": "d", "future": {"a": 1}}
    back = DrillRun.from_json(newer)
    assert back.extra == {"future": {"a": 1}} and back.to_json() == newer
    assert list(back.to_json()) == ["verdict", "name", "future"]  # as the file had them


def test_link_load_gains_marks_and_trims_where_the_queue_watch_read_the_ports():
    before = {lk.id: 0 for lk in FABRIC.links}
    after = {lk.id: 1000 for lk in FABRIC.links}
    a, b = (f"{e.node}:{e.ifname}" for e in (HOT_LINK.a, HOT_LINK.b))
    watch = SimpleNamespace(port_counts=lambda: {
        (HOT_LINK.a.node, HOT_LINK.a.ifname): {"packets": 90, "ce_marked": 12, "trimmed": 3,
                                               "dropped": 0},
        (HOT_LINK.b.node, HOT_LINK.b.ifname): {"packets": 9, "ce_marked": 1, "trimmed": 0,
                                               "dropped": 2}})
    c = collected(load_before=before, load_after=after,
                  prober=SimpleNamespace(watch=watch))
    rows = {lk.link: lk for lk in R._link_load(c)}
    assert (rows[HOT].bytes, rows[HOT].ce_marked, rows[HOT].trimmed) == (1000, 13, 3)
    assert rows[HOT].ports == (PortSignals(a, 12, 3, 0), PortSignals(b, 1, 0, 2))
    assert rows[HOT].to_json()["ports"][1] == {"port": b, "ce_marked": 1, "trimmed": 0,
                                               "dropped": 2}
    assert LinkLoad.from_json(rows[HOT].to_json()) == rows[HOT]
    other = rows["r0h0:eth1--t0-p0-r0:eth1"]
    assert (other.bytes, other.ce_marked, other.trimmed) == (1000, None, None)
    assert set(other.to_json()) == {"link", "plane", "kind", "bytes"}  # as before
    assert R._link_load(collected(load_before=before, load_after=after))[0].ce_marked is None


def test_the_link_view_shows_marks_and_trims_per_port_beside_bytes(tmp_path):
    a, b = (f"{e.node}:{e.ifname}" for e in (HOT_LINK.a, HOT_LINK.b))
    loads = (LinkLoad(HOT, 0, "fabric", 123_456, ce_marked=1_200, trimmed=40,
                      ports=(PortSignals(a, 1_150, 40, 0), PortSignals(b, 50, 0, 3))),
             LinkLoad("t0-p1-r0:eth3--t1-p1-0:eth1", 1, "fabric", 99, ce_marked=0, trimmed=0))
    run = DrillRun(name="incast", mode="mrc", verdict="pass", link_load=loads)
    html = report.write([run], tmp_path)["html"].read_text()
    view = html[html.index('class="link-load"'):html.index('class="timeline"')]
    assert "<th>port</th><th>link bytes</th><th>CE marked</th><th>trimmed</th>" in view
    assert f"<td>{HOT}</td><td>{a}</td><td>123,456</td><td>1,150</td><td>40</td><td>0</td>" \
        in view
    assert f"<td>{HOT}</td><td>{b}</td><td>123,456</td><td>50</td><td>0</td><td>3</td>" in view
    assert view.index(f"<td>{a}</td>") < view.index(f"<td>{b}</td>")  # the most first
    older = dataclasses.replace(run, link_load=(dataclasses.replace(loads[0], ports=()),))
    assert f"<td>{HOT}</td><td>both ends</td><td>123,456</td><td>1,200</td><td>40</td>" in \
        report.write([older], tmp_path / "o")["html"].read_text()
    assert "t0-p1-r0:eth3" not in view  # read, and nothing marked or trimmed on it
    quiet = dataclasses.replace(run, link_load=loads[1:])
    assert "No switch port marked or trimmed (1 links read)" in \
        report.write([quiet], tmp_path / "q")["html"].read_text()
    unread = dataclasses.replace(run, link_load=(LinkLoad(HOT, 0, "fabric", 5),))
    assert "CE marked" not in report.write([unread], tmp_path / "u")["html"].read_text()


def test_a_lab_brought_up_under_another_name_runs_its_specs_fabric(clean_world):
    L.up("mrc-4p", "fake", name="other")
    att = L.attach("other")
    assert att.fabric.spec.name == "other" and att.fabric_name == "mrc-4p"
    assert R.written_for(att, drill("mrc-4p")) is None
    assert R.written_for(att, drill("mrc-8p")) == \
        "written for mrc-8p, running on other (fabric mrc-4p): the figures are this fabric's"


def test_a_drill_for_another_fabric_is_still_noted(clean_world):
    L.up("mrc-4p", "fake")
    assert R.written_for(L.attach("mrc-4p"), drill("mrc-8p")) == \
        "written for mrc-8p, running on mrc-4p: the figures are this fabric's"


def test_the_queue_watch_counts_each_port_and_sums_them_per_link():
    watch = Q.QueueWatch.__new__(Q.QueueWatch)
    ends = [(HOT_LINK.a.node, HOT_LINK.a.ifname), (HOT_LINK.b.node, HOT_LINK.b.ifname)]
    watch._links = {end: HOT for end in ends}
    zero = dict.fromkeys(Q.COUNTED, 0)
    watch._first = {ends[0]: {**zero, "ce_marked": 5}, ends[1]: zero}
    watch._last = {ends[0]: {**zero, "ce_marked": 9, "trimmed": 2},
                   ends[1]: {**zero, "trimmed": 1, "dropped": 4}}
    assert watch.port_counts() == {
        ends[0]: {**zero, "ce_marked": 4, "trimmed": 2},
        ends[1]: {**zero, "trimmed": 1, "dropped": 4}}
    assert watch.counts() == {HOT: {**zero, "ce_marked": 4, "trimmed": 3, "dropped": 4}}
