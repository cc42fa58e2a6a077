"""The shipped large fabric, mrc-8p-256 (256 routers, 64 hosts, 2,560 links), on
netns: it comes up, verify passes with coverage probes (not half a million), and a
dead T0-T1 link is still named alone. Its `up` sizes the machine's neighbour table,
without which most probes are lost ("neighbor table overflow")."""

import pytest

from tests.integration.conftest import lab_name, own_spec, running_lab
from twin import faults as F
from twin.runtime.kernel import NEIGH
from twin.verify import run_verify

pytestmark = pytest.mark.netns
LAB = lab_name("big-")


@pytest.fixture(scope="module")
def big(session_dirs):
    with running_lab(session_dirs, own_spec(session_dirs, LAB, "mrc-8p-256"), "netns") as att:
        yield att


def test_it_comes_up_with_room_in_the_neighbour_table(big):
    assert len(big.plan.nodes) == 320 and len(big.fabric.links) == 2560
    assert int(open(NEIGH.format(3)).read()) >= 4 * 2560


def test_verify_passes_with_coverage_probes(big):
    report = run_verify(big.runtime, big.plan)
    assert report.ok, report.summary()
    c = report.coverage
    assert c and c["achieved"] >= 2 and c["exhaustive_probes"] == 501_760
    assert len(report.loops) + len(report.paths) == c["probes"] < 10_000


def test_a_dead_link_is_named_alone(big):
    F.link_down(big, "t0-p6-r13:eth9")
    try:
        report = run_verify(big.runtime, big.plan)
        assert not report.ok
        assert report.suspect_links() == ["t0-p6-r13:eth9--t1-p6-4:eth14"]
    finally:
        F.link_up(big, "t0-p6-r13:eth9")
    assert run_verify(big.runtime, big.plan).ok
