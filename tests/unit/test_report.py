"""Suspect-link reasoning and JUnit output, on synthetic probe results."""

from pathlib import Path
from xml.etree import ElementTree as ET

from twin.fabric import paths as P
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec
from twin.readback import NodeCheck
from twin.verify.prober import ProbeResult
from twin.verify.report import VerifyReport, path_key

ROOT = Path(__file__).resolve().parents[2]
FABRIC = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
DEAD = "t0-p0-r0:eth3--t1-p0-0:eth1"


def simulate(dead_links):
    loops, fwd = P.loopback_paths(FABRIC), P.host_pairs_paths(FABRIC)
    report = VerifyReport("mrc-4p", "test", [NodeCheck("x")])
    for p in fwd:
        back = P.reverse(FABRIC, p)
        report.reverse[path_key(p)] = back
        there = not set(p.links) & dead_links
        home = there and not set(back.links) & dead_links
        report.paths.append(ProbeResult(p, forward=there, reply=home, attempts=3))
    for p in loops:
        ok = not set(p.links) & dead_links
        report.loops.append(ProbeResult(p, forward=ok, reply=ok, attempts=1))
    return report


def test_one_dead_link_is_named_alone():
    report = simulate({DEAD})
    assert not report.ok
    assert report.suspect_links() == [DEAD]
    assert report.summary()["paths"]["failed"] == 8


def test_a_reply_lost_on_the_way_back_blames_the_reverse_path():
    """The probe went out via T1 0 and came back via T1 1 (as a reply on another EV
    does): its lost reply blames the return's own links, never the forward path's."""
    out, home = (p for p in P.host_pairs_paths(FABRIC)
                 if (p.src, p.dst, p.plane) == ("r0h0", "r1h0", 0))
    report = VerifyReport("mrc-4p", "test", [NodeCheck("x")])
    report.paths = [ProbeResult(out, forward=True, reply=False, attempts=3)]
    report.reverse[path_key(out)] = P.reverse(FABRIC, home)
    assert report.suspect_links() == ["t0-p0-r0:eth4--t1-p0-1:eth1",
                                      "t0-p0-r1:eth4--t1-p0-1:eth2"]


def test_a_lost_reply_whose_links_carried_other_probes_blames_nothing():
    report = simulate(set())
    report.paths[0].reply = False  # same links both ways, and every one carried a pass
    assert not report.ok and report.suspect_links() == []


def test_healthy_report_passes_with_no_suspects():
    report = simulate(set())
    assert report.ok and report.suspect_links() == []


def test_junit_has_one_case_per_node_and_path():
    report = simulate({DEAD})
    root = ET.fromstring(report.junit())
    cases = root.findall(".//testcase")
    assert len(cases) == 1 + 80 + 48
    failures = root.findall(".//failure")
    assert len(failures) == 8 + 2
    assert all(DEAD in f.get("message") for f in failures)
