"""Drill files: every shipped one parses; every mistake is named by its key path."""

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from twin.chaos import drill as D
from twin.chaos import metrics as M
from twin.chaos import runner as R
from twin.cli import main
from twin.errors import SpecError, UsageError
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec
from twin.faults import FaultKind

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
name: my-drill
method:
  traffic: {pattern: bulk, src: r0h0, dst: r1h0, size: 16M}
  timeline:
    - {at: 100ms, fault: link-down, target: t0-p0-r0:eth3, for: 50ms}
expect:
  exact: true
  repair_ms: "<= 50"
"""


def problems(text: str) -> dict[str, str]:
    with pytest.raises(SpecError) as e:
        D.parse_drill(text, "x.yml")
    assert e.value.what == "drill file"
    return {p.path: p.message for p in e.value.problems}


@pytest.mark.parametrize("path", D.shipped(), ids=lambda p: p.stem)
def test_every_shipped_drill_parses_and_names_a_shipped_fabric(path):
    d = D.load_drill(path)
    assert d.name == path.stem
    assert d.description
    assert (ROOT / "lab/fabrics" / f"{d.fabric}.yml").exists()
    assert any(e.what == "exact" for e in d.expect)


def test_the_shipped_drills_cover_the_papers_claims():
    names = {p.stem for p in D.shipped()}
    assert {"nic-port-down", "t0-t1-flap", "t1-blackhole", "t1-reboot", "startup-dead-link",
            "ev-20pct-drop", "incast-bystander", "spray-vs-single-path",
            # the congestion claims, each against RoCE in the same run
            "incast-victim", "permutation", "random-loss-0-1pct", "random-loss-1pct",
            "one-qp-vs-many",
            # the failure claims, each judged against the share the fabric says is lost
            "nic-half-flap", "t0-t1-cuts", "t0-down", "t1-down"} <= names
    for name in ("incast-victim", "permutation", "random-loss-1pct", "one-qp-vs-many"):
        d = D.load_drill(D.find(name))
        assert d.fabric == "mrc-8p-shaped" and d.compare, name
    for name in ("nic-half-flap", "t0-t1-cuts", "t0-down", "t1-down"):
        d = D.load_drill(D.find(name))
        assert d.fabric == "mrc-4p-shaped" and d.traffic.for_ns, name
        assert any("lost_share" in str(e.value) for e in d.expect), name
    bands = {name: sorted(e.op for e in D.load_drill(D.find(name)).expect
                          if e.what in ("step_retained", "settled_retained"))
             for name in ("nic-half-flap", "t0-down")}
    assert bands == {"nic-half-flap": ["<=", ">="], "t0-down": ["<=", ">="]}


def test_a_good_drill():
    d = D.parse_drill(GOOD)
    assert d.traffic.size == 16 << 20
    (step,) = d.timeline
    assert (step.at_ns, step.fault, step.target, step.for_ns) == \
        (100_000_000, FaultKind.LINK_DOWN, "t0-p0-r0:eth3", 50_000_000)
    assert d.end_ns == 150_000_000
    assert [e.want for e in d.expect] == ["true", "<= 50"]
    # a baseline is judged by its own expectations only: by default none, its outcome
    # reported beside the main run's
    assert d.baseline_expect == ()
    judged = D.parse_drill(GOOD + "baseline_expect: {exact: true}\n")
    assert [e.what for e in judged.baseline_expect] == ["exact"]


BAD = [
    ("name: X\nmethod: {traffic: {pattern: bulk, src: a, dst: b}}", "name", "lowercase"),
    ("name: d\n", "method", "is required"),
    ("name: d\nmethod: {traffic: {pattern: blk, src: a, dst: b}}", "method.traffic.pattern",
     "must be one of"),
    ("name: d\nmethod: {traffic: {pattern: bulk, dst: b}}", "method.traffic.src", "required"),
    ("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, size: 0}}",
     "method.traffic.size", "must be a size"),
    ("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, size: 8M, for: 2s}}",
     "method.traffic.for", "give one of them"),
    ("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, for: 2}}",
     "method.traffic.for", "duration"),
    ("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, for: 400ms}, timeline: "
     "[{at: 300ms, fault: link-down, target: a:b}]}", "method.traffic.for",
     "end before the timeline"),
    ("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, mode: rocev3}}",
     "method.traffic.mode", "must be one of"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 300, fault: link-down, "
     "target: a:b}]}", "method.timeline[0].at", "duration"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-dwn, "
     "target: a:b}]}", "method.timeline[0].fault", "unknown fault"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-down}]}",
     "method.timeline[0].target", "is required"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: nic-down, "
     "target: {random: t1}}]}", "method.timeline[0].target.random", "cannot target"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-loss, "
     "target: a:b}]}", "method.timeline[0].percent", "is required for link-loss"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-down, "
     "target: a:b, percent: 5}]}", "method.timeline[0].percent", "does not apply"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-flap, "
     "target: a:b, count: 2}]}", "method.timeline[0].period", "required"),
    ("name: d\nmethod: {traffic: {pattern: incast}, timeline: [{at: 3ms, fault: link-down, "
     "target: a:b, when: 1s}]}", "method.timeline[0].when", "unknown key"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {repair_ms: 5}",
     "expect.repair_ms", "comparison"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {repair_ms: '<= planez'}",
     "expect.repair_ms", "unknown name"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {repair_ms: '<= __import__(1)'}",
     "expect.repair_ms", "not arithmetic"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {localized: target}",
     "expect.localized", "needs a fault"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {goodput: '>= 1'}",
     "expect.goodput", "unknown key"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {bystander_retained: '>= 1'}",
     "expect.bystander_retained", "needs method.bystander"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {step_retained: '>= 0.9'}",
     "expect.step_retained", "needs a fault on the timeline"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {settled_retained: []}",
     "expect.settled_retained", "empty list"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {settled_retained: "
     "['>= 0.5', 'about 0.75']}", "expect.settled_retained[1]", "must be a comparison"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {settled_retained: "
     "['>= 0.5', '<= lost_shares']}", "expect.settled_retained[1]", "unknown name"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nexpect: {exact: [true]}",
     "expect.exact", "true or false"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\ncompare: ecmp", "compare", "must be a mode"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\ncompare: [{mode: ecmp}]",
     "compare[0].mode", "must be a mode"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\ncompare: [single-path, {mode: "
     "single-path, qps: 99}]", "compare[1].qps", "1 to 64"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\ncompare: [{mode: mrc, qp: 2}]",
     "compare[0].qp", "unknown key"),
    ("name: d\nmethod: {traffic: {pattern: incast}}\nrollback: {verify: maybe}",
     "rollback.verify", "true or false"),
    ("name: d\nmethod: [1]", "method", "must be a mapping"),
    ("- 1", "(top level)", "mapping"),
    ("name: [", "line 1, column 8", "YAML"),
]


@pytest.mark.parametrize("text,path,message", BAD, ids=[b[1] for b in BAD])
def test_each_mistake_is_named_by_its_key_path(text, path, message):
    found = problems(text)
    assert path in found, found
    assert message in found[path]


def test_timed_traffic_lasts_a_duration_and_a_size_replaces_it():
    d = D.load_drill(D.find("t0-t1-link-down"))
    assert d.traffic.for_ns == 10**9  # a fault at 300 ms lands mid-transfer on any machine
    assert d.resized(8 << 20).traffic.for_ns is None
    assert d.resized(8 << 20).timed(5 * 10**8).traffic.for_ns == 5 * 10**8
    for path in D.shipped():  # every shipped drill with a fault is timed
        drill = D.load_drill(path)
        assert not drill.timeline or drill.traffic.for_ns, path.stem


def test_a_drill_compares_against_several_baselines():
    d = D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b}}\n"
                      "compare: [single-path, {mode: single-path, qps: 16}]", "x.yml")
    assert [v.label for v in d.compare] == ["single-path", "single-path x16 QPs"]
    assert D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b}}\n"
                         "compare: spray-static", "x.yml").compare == (D.Variant("spray-static"),)


def test_every_problem_at_once():
    found = problems("name: X\nmethod: {traffic: {pattern: blk, src: a, dst: b}, timeline: "
                     "[{at: 1, fault: x, target: y}]}\nexpect: {nope: 1}")
    assert {"name", "method.traffic.pattern", "method.timeline[0].at",
            "method.timeline[0].fault", "expect.nope"} <= set(found)


def test_a_bad_drill_file_exits_2_with_the_key_path_and_no_traceback(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("name: d\nmethod: {traffic: {pattern: bulk, src: a}}\n")
    result = CliRunner().invoke(main, ["drill", "run", str(bad)])
    assert result.exit_code == 2
    assert "method.traffic.dst" in result.output and "drill file" in result.output
    assert "Traceback" not in result.output


def test_an_unknown_drill_name_is_a_usage_error():
    result = CliRunner().invoke(main, ["drill", "run", "t1-blackhol"])
    assert result.exit_code == 2
    assert "did you mean 't1-blackhole'" in result.output


def test_drill_list_json_names_every_shipped_drill():
    import json
    result = CliRunner().invoke(main, ["drill", "list", "--json"])
    assert result.exit_code == 0, result.output
    names = {d["name"] for d in json.loads(result.output)["drills"]}
    assert names == {p.stem for p in D.shipped()}


def test_expressions_are_arithmetic_over_the_fabric_only():
    v = {"planes": 4.0, "lost_share": 0.25}
    assert D.evaluate("(planes - 1) / planes", v) == 0.75
    assert D.evaluate("max(1 - lost_share - 0.1, 0.5)", v) == pytest.approx(0.65)
    for bad in ("planes.__class__", "open('x')", "planes ** 2", "[1]", "1 / 0"):
        with pytest.raises((ValueError, SyntaxError)):
            D.evaluate(bad, v)


# -- targets and the timeline ------------------------------------------------------


def test_random_targets_are_drawn_with_the_seed_among_what_the_traffic_crosses(f4):
    import random
    pairs = [("r0h0", "r0h1")]  # one rack: its T0s, its hosts' links
    for kind in D.RANDOM:
        a = [R._draw(kind, f4, pairs, random.Random(7)) for _ in range(3)]
        b = [R._draw(kind, f4, pairs, random.Random(7)) for _ in range(3)]
        assert a == b
    for seed in range(20):
        rng = random.Random(seed)
        assert R._draw("t0", f4, pairs, rng).endswith("-r0")
        assert R._draw("t0-t1-link", f4, pairs, rng).split(":")[0].endswith("-r0")
        assert R._draw("host-link", f4, pairs, rng).startswith("t0-")  # the switch end
        assert R._draw("nic-port", f4, pairs, rng).split(":")[0] in ("r0h0", "r0h1")
    drawn = {R._draw("t1", f4, pairs, random.Random(s)) for s in range(60)}
    assert drawn == {n.name for n in f4.nodes if n.name.startswith("t1-")}


def test_a_figure_may_be_held_in_a_band_and_judged_at_each_step():
    d = D.parse_drill(GOOD.replace('  repair_ms: "<= 50"', '  step_retained: '
                                   '[">= 1 - lost_share - 0.1", "<= 1 - lost_share + 0.1"]'))
    low, high = (e for e in d.expect if e.what == "step_retained")
    assert (low.where, high.where) == ("expect.step_retained[0]", "expect.step_retained[1]")
    MS = 1_000_000
    steps = [M.StepFigure(100 * MS, 500 * MS, ("r1h0:1,3",), 0.5, 0.52),
             M.StepFigure(500 * MS, 900 * MS, (), 0.0, 0.97)]
    figures = {"steps": steps}
    got = R._expectation(low, figures, [], {"lost_share": 0.5})
    assert got.ok and got.want == ">= 1 - lost_share - 0.1 at each step"
    assert got.got == "0.52 >= 0.4; 0.97 >= 0.9"  # each step with its own lost_share
    assert R._expectation(high, figures, [], {"lost_share": 0.5}).ok
    # the bandwidth did not come back after the ports did: the last step fails
    stuck = {"steps": [steps[0], M.StepFigure(500 * MS, 900 * MS, (), 0.0, 0.55)]}
    got = R._expectation(low, stuck, [], {"lost_share": 0.5})
    assert not got.ok and got.got == "0.52 >= 0.4; 0.55 (fails) >= 0.9"
    # it did not go down with them: the first step fails the band's top
    flat = {"steps": [M.StepFigure(100 * MS, 500 * MS, ("r1h0:1,3",), 0.5, 0.98), steps[1]]}
    assert not R._expectation(high, flat, [], {"lost_share": 0.5}).ok
    unread = {"steps": [M.StepFigure(100 * MS, 500 * MS, (), 0.0, None)]}
    assert R._expectation(low, unread, [], {}).got == "not measured"


def test_a_random_target_is_not_drawn_on_a_link_a_fault_in_force_then_holds(att):
    import random
    cuts = "\n".join(f"    - {{at: {100 + 20 * i}ms, fault: link-down, target: {{random: "
                     "t0-t1-link}}" for i in range(16))
    drill = D.parse_drill(f"name: d\nmethod:\n  traffic: {{pattern: bulk, src: r0h0, "
                          f"dst: r1h0, for: 2s}}\n  timeline:\n{cuts}\n")
    for seed in range(5):  # the 16 T0-T1 links of racks 0 and 1 on mrc-4p: each once
        planned = R.plan_targets(drill, att, seed)
        assert len({p.target for p in planned}) == 16
    more = cuts + "\n    - {at: 900ms, fault: link-down, target: {random: t0-t1-link}}"
    drill = D.parse_drill(f"name: d\nmethod:\n  traffic: {{pattern: bulk, src: r0h0, "
                          f"dst: r1h0, for: 2s}}\n  timeline:\n{more}\n")
    with pytest.raises(UsageError, match=r"timeline\[16\].target: no random t0-t1-link is "
                                         "left"):
        R.plan_targets(drill, att, 1)
    # faults that are over by the next one's time do not hold their links: the draw is
    # the one it always was (seeds replay the drills they did)
    flaps = D.parse_drill("name: d\nmethod:\n  traffic: {pattern: bulk, src: r0h0, dst: "
                          "r1h0, for: 2s}\n  timeline:\n"
                          "    - {at: 100ms, fault: link-down, target: {random: t0-t1-link}, "
                          "for: 50ms}\n"
                          "    - {at: 200ms, fault: link-down, target: {random: t0-t1-link}}\n")
    rng = random.Random(3)
    pairs = [("r0h0", "r1h0")]
    assert [p.target for p in R.plan_targets(flaps, att, 3)] == \
        [R._draw("t0-t1-link", att.fabric, pairs, rng) for _ in range(2)]


def test_a_flap_becomes_downs_and_ups_and_for_becomes_a_revert():
    d = D.parse_drill("""
name: d
method:
  traffic: {pattern: bulk, src: r0h0, dst: r1h0}
  timeline:
    - {at: 10ms, fault: link-flap, target: t0-p0-r0:eth3, count: 2, period: 100ms}
    - {at: 20ms, fault: blackhole, target: t1-p1-0, for: 30ms}
""")
    planned = [R.Planned(s, s.target, frozenset(), frozenset()) for s in d.timeline]
    timeline = R.Timeline(None, planned, log=lambda *a: None)
    actions = [(a.at_ns // 1_000_000, a.fault.of.target, a.up) for a in timeline.actions]
    assert actions == [(10, "t0-p0-r0:eth3", False), (20, "t1-p1-0", False),
                       (50, "t1-p1-0", True), (60, "t0-p0-r0:eth3", True),
                       (110, "t0-p0-r0:eth3", False), (160, "t0-p0-r0:eth3", True)]


def test_with_several_labs_up_a_drill_runs_on_its_fabrics_lab(monkeypatch):
    from twin import state
    from twin.cli import drill as cli_drill

    shaped = D.load_drill(D.find("t0-t1-flap"))  # fabric: mrc-4p-shaped
    monkeypatch.setattr(state, "known_labs", lambda: ["mrc-4p", "mrc-4p-shaped"])
    assert cli_drill._lab_for(shaped, None) == "mrc-4p-shaped"
    assert cli_drill._lab_for(shaped, "mrc-4p") == "mrc-4p"  # --lab wins
    monkeypatch.setattr(state, "known_labs", lambda: ["mrc-4p", "mine"])
    assert cli_drill._lab_for(shaped, None) is None  # attach says: name one with --lab
    monkeypatch.setattr(state, "known_labs", lambda: ["mine"])
    assert cli_drill._lab_for(shaped, None) is None  # the one lab up


def test_a_drill_chooses_the_senders_congestion_control_and_signals():
    d = D.parse_drill(GOOD.replace("size: 16M}", "size: 16M, cc: delay, ecn: false}"))
    assert (d.traffic.cc, d.traffic.ecn, d.traffic.trim) == ("delay", False, None)
    assert R._signals(d, "mrc") == {"cc": "delay", "ecn": False, "trim": None}
    # a baseline in another mode runs that mode's default cc (single-path: dcqcn)
    assert R._signals(d, "single-path") == {"cc": None, "ecn": False, "trim": None}
    assert D.parse_drill(GOOD).traffic.cc is None  # the mode's default (mrc: nscc)
    got = problems(GOOD.replace("size: 16M}", "size: 16M, cc: cubic, trim: yes please}"))
    assert "unknown congestion control 'cubic'" in got["method.traffic.cc"]
    assert "must be true or false" in got["method.traffic.trim"]


def test_a_congestion_claim_on_an_unshaped_fabric_is_warned_about():
    plain = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
    shaped = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p-shaped.yml"))
    victim = D.load_drill(D.find("incast-bystander"))
    said = R.unshaped_warning(plain, victim)
    assert "bystander_retained" in said and "mrc-4p is unshaped" in said
    assert R.unshaped_warning(shaped, victim) is None
    assert R.unshaped_warning(plain, D.load_drill(D.find("t1-blackhole"))) is None
    # a lab brought up with --name: the fabric named is the spec's, not the lab's
    renamed = build_fabric(dataclasses.replace(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"),
                                               name="mine"))
    assert renamed.spec.name == "mine"
    assert "mrc-4p is unshaped" in R.unshaped_warning(renamed, victim, "mrc-4p")


def test_compare_bgp_names_roce_over_ecmp_and_mrc_over_ecmp():
    from twin.chaos import runner

    roce, mrc = runner.variants_of("bgp")
    assert (roce.label, mrc.label) == ("single-path x16 QPs over bgp", "mrc over bgp")
    assert roce.to_dict() == {"mode": "single-path", "qps": 16, "routing": "bgp",
                              "label": "single-path x16 QPs over bgp"}
    assert runner.variants_of("single-path")[0].to_dict() == {
        "mode": "single-path", "qps": None, "label": "single-path"}  # as before: no key
