"""The paper's congestion claims on a real shaped 8-plane lab (mrc-8p-shaped, netns):
short variants of the shipped drills, MRC beside RoCE, with the fabric marking and
trimming and the endpoints acting on it. Every drill's full size runs in `make chaos`."""

import pytest

from tests.integration.conftest import lab_name
from twin import endpoints
from twin import faults as F
from twin.chaos import drill as D
from twin.chaos import runner
from twin.chaos.results import Judged
from twin.mrc.stats import EndpointStats

pytestmark = pytest.mark.netns
LAB = lab_name("congestion")
FABRIC = "mrc-8p-shaped"  # `lab` (conftest)


def totals(att, host: str) -> dict[str, int]:
    with endpoints.client(att.runtime, host) as c:
        return dict(EndpointStats.from_dict(c.stats()).totals.signals)


def port_signals(att, node: str) -> dict[str, dict[str, int]]:
    return att.dataplane.signals(att.runtime, node)["ports"]


def rows(run) -> dict[str, Judged]:
    return {e.what: e for e in run.run.expectations}


def test_an_incast_is_trimmed_at_its_last_hop_and_the_victim_keeps_its_goodput(lab):
    """7:1 into r0h0: the last hop (T0 -> r0h0, no ECN there) trims, the receiver NAKs
    each trim and the senders resend at once; the victim into r0h1 keeps >= 90%."""
    before = totals(lab, "r0h0")
    drill = D.load_drill(D.find("incast-victim")).resized(1 << 20)
    (run,) = runner.run_all(lab, drill, compare="mrc", seed=1)  # compare to itself: none
    failed = [e.failure() for e in run.run.expectations if e.failed]
    assert run.run.verdict == "pass", failed
    after = totals(lab, "r0h0")
    trimmed = after["trimmed_rx"] - before["trimmed_rx"]
    nacked = after["nacks_trimmed_sent"] - before["nacks_trimmed_sent"]
    # each trim is NAKed, but one of a PSN already here gets a duplicate's SACK instead
    assert trimmed > 0 and 0 < nacked <= trimmed, (before, after)
    resent = sum(totals(lab, h)["nacks_trimmed_received"] for h in drill.traffic.senders)
    assert resent >= nacked  # every NAK(TRIMMED) reached its sender
    counted = {}  # the last hop's T0 ports' own counters: trims, never a CE mark
    for plane in lab.fabric.nic_planes:
        (link,) = [lk for lk in lab.fabric.links if lk.kind == "host" and lk.plane == plane
                   and lk.a.node == "r0h0"]
        port = port_signals(lab, link.b.node)[link.b.ifname]
        assert port["ce_marked"] == 0, (link.b, port)
        counted[f"{link.b.node}:{link.b.ifname}"] = port["trimmed"]
    assert sum(counted.values()) >= trimmed  # what r0h0 saw trimmed, its T0s trimmed
    # the report's link view has the trims per port: rows for last-hop ports (a plane
    # whose port happened not to trim has none), none more than the port counted
    seen = {p.port: p for lk in run.run.link_load for p in lk.ports if p.port in counted}
    assert seen and sum(p.trimmed for p in seen.values()) > 0, run.run.link_load
    assert all(p.trimmed <= counted[port] for port, p in seen.items()), (seen, counted)
    assert all(p.ce_marked == 0 for p in seen.values())
    assert F.active(lab) == []


def test_one_mrc_qp_finishes_before_roce_with_one_and_eight(lab):
    drill = D.parse_drill(  # the shipped drill with two of its three baselines
        D.find("one-qp-vs-many").read_text().replace(", {mode: single-path, qps: 16}", "")
        .replace("size: 2M", "size: 1M"), "one-qp.yml")
    runs = runner.run_all(lab, drill, seed=1)
    assert [r.run.variant for r in runs] == ["mrc", "single-path x1 QP",
                                                  "single-path x8 QPs"]
    got = rows(runs[0])["speedup"]
    assert got.ok and "single-path x1 QP" in got.got, got
    assert runs[0].run.exact and runs[0].run.metrics["speedup"] >= 1
    assert runs[1].run.qps == 1 and runs[2].run.qps == 8
    assert len(runs[2].run.flows) == 8  # eight QPs, 1/8 of the bytes each
    assert sum(f["size"] for f in runs[2].run.flows) == 1 << 20


def test_random_loss_on_every_fabric_link_meets_the_traffic_and_mrc_keeps_its_rate(lab):
    drill = D.load_drill(D.find("random-loss-1pct")).timed(1_600_000_000)
    (run,) = runner.run_all(lab, drill, compare="mrc", seed=1)
    got = rows(run)
    assert got["faults met traffic"].ok and len(run.run.faults) == 8, got
    assert got["steady state: traffic sized"].ok
    assert got["goodput_retained"].ok, got["goodput_retained"]
    assert run.run.verdict == "pass"
    for t1 in ("t1-p0-0", "t1-p7-3"):  # every plane's T1s held the loss, and none is left
        assert "twin_" not in lab.runtime.exec(t1, ["nft", "list", "tables"]).stdout
    assert F.active(lab) == []


def test_a_permutation_gives_every_mrc_flow_a_share(lab):
    """Every host to host i + 8 at once: 16 flows, each judged over the stretch they ran
    side by side. How evenly each flow's packets split over a plane's T1s bounds the
    share (lab/drills/permutation.yml); the bounds here are loose, the drill's tighter."""
    drill = D.load_drill(D.find("permutation")).resized(2 << 20)
    (run,) = runner.run_all(lab, drill, compare="mrc", seed=1)
    m = run.run.metrics
    assert run.run.exact and len(m["flow_mbps"]) == 16
    assert m["fair_share_mbps"] == [24.0] * 16  # 8 planes x 3 Mbit/s, one flow per NIC
    assert m["least_fair_share"] > 0.3 and m["flow_spread"] < 0.6, m
    series = run.run.flow_goodput["series"]
    assert len(series) == 16 and all(sum(s["bytes"]) > 0 for s in series)
