"""The shipped large fabric, mrc-8p-256 (256 routers, 64 hosts, 2,560 links), on
netns: it comes up, verify passes with coverage probes (not half a million), and a
dead T0-T1 link is still named alone. Its `up` sizes the machine's neighbour table,
without which most probes are lost ("neighbor table overflow")."""

import pytest

from tests.integration.conftest import lab_name
from twin import faults as F
from twin.runtime.kernel import NEIGH
from twin.verify import run_verify

pytestmark = pytest.mark.netns
LAB = lab_name("big-")
FABRIC = "mrc-8p-256"  # `lab` (conftest)


def test_it_comes_up_with_room_in_the_neighbour_table(lab):
    assert len(lab.plan.nodes) == 320 and len(lab.fabric.links) == 2560
    assert int(open(NEIGH.format(3)).read()) >= 4 * 2560


def test_verify_passes_with_coverage_probes(lab):
    report = run_verify(lab.runtime, lab.plan)
    assert report.ok, report.summary()
    c = report.coverage
    assert c and c["achieved"] >= 2 and c["exhaustive_probes"] == 501_760
    assert len(report.loops) + len(report.paths) == c["probes"] < 10_000


def test_a_dead_link_is_named_alone(lab):
    F.link_down(lab, "t0-p6-r13:eth9")
    try:
        report = run_verify(lab.runtime, lab.plan)
        assert not report.ok
        assert report.suspect_links() == ["t0-p6-r13:eth9--t1-p6-4:eth14"]
    finally:
        F.link_up(lab, "t0-p6-r13:eth9")
    assert run_verify(lab.runtime, lab.plan).ok
