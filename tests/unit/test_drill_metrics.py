"""A drill's figures from synthetic event logs and bins: detection, repair, losses,
the goodput dip, and the share of capacity a fault takes."""

from pathlib import Path

import pytest

from twin.chaos import metrics as M
from twin.fabric.model import build_fabric
from twin.fabric.paths import ev_encode
from twin.fabric.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000
T0 = 10_000 * MS  # the run's first write


@pytest.fixture(scope="module")
def shaped():
    return build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p-shaped.yml"))


def link(fabric, end: str) -> str:
    node, _, ifname = end.partition(":")
    return next(lk.id for lk in fabric.links if str(lk.a) == end or str(lk.b) == end)


def fault(fabric, kind="link-down", end="t0-p1-r0:eth3", at=T0 + 100 * MS, nodes=()):
    links = {link(fabric, end)} if end else set()
    return M.AppliedFault(kind, end or next(iter(nodes)), at, frozenset(links),
                          frozenset(nodes))


def ev(t, kind, e, psn):
    return {"t_ns": t, "kind": kind, "ev": e, "psn": psn}


DEAD = ev_encode(1, 0, 77)  # plane 1 via T1 0: crosses t0-p1-r0:eth3
ALIVE = ev_encode(2, 1, 5)


def test_detection_is_the_first_retirement_on_a_dead_path_and_repair_its_last_resend(f4):
    f = fault(f4)
    at = f.at_ns
    flow = M.FlowLog("r0h0", "r1h0", 1 << 20, events=[
        ev(at - 5 * MS, "loss", ALIVE, 1),  # before the fault: not its figure
        ev(at + 1 * MS, "loss", ALIVE, 20),  # noise on a live path: counted, not repair
        ev(at + 2 * MS, "loss", DEAD, 10),
        ev(at + 2 * MS, "retire", DEAD, 10),
        ev(at + 3 * MS, "loss", DEAD, 11),
        ev(at + 4 * MS, "repaired", ALIVE, 10),
        ev(at + 6 * MS, "repaired", ALIVE, 11),
        ev(at + 30 * MS, "repaired", ALIVE, 20),
    ])
    (fig,) = M.fault_figures(f4, [flow], [f], [])
    assert fig.detection_us == 2000
    assert fig.repair_us == 6000
    assert fig.packets_lost == 3
    assert fig.dead_path_losses == 2
    assert not fig.localized


def test_repair_is_the_first_delivery_not_a_late_copy_after_it(f4):
    """A nic-down holds the copies queued at the downed port; they arrive when it comes
    back, 400 ms later, as spurious: the PSN was repaired by its resend long before."""
    f = fault(f4)
    at = f.at_ns
    flow = M.FlowLog("r0h0", "r1h0", 1 << 20, events=[
        ev(at + 1 * MS, "loss", DEAD, 10),
        ev(at + 1 * MS, "retire", DEAD, 10),
        ev(at + 3 * MS, "repaired", ALIVE, 10),
        ev(at + 400 * MS, "spurious", DEAD, 10),
    ])
    (fig,) = M.fault_figures(f4, [flow], [f], [])
    assert fig.repair_us == 3000


def test_a_lost_packet_never_resent_leaves_repair_unmeasured(f4):
    f = fault(f4)
    flow = M.FlowLog("r0h0", "r1h0", 1, events=[ev(f.at_ns + MS, "loss", DEAD, 3)])
    (fig,) = M.fault_figures(f4, [flow], [f], [])
    assert fig.repair_us is None
    assert fig.detection_us == 1000  # single-path: its first loss on the dead path


def test_nothing_lost_is_nothing_to_repair(f4):
    (fig,) = M.fault_figures(f4, [M.FlowLog("r0h0", "r1h0", 1)], [fault(f4)], [])
    assert (fig.repair_us, fig.packets_lost, fig.detection_us) == (0, 0, None)


def test_a_switch_fault_kills_every_path_through_the_switch(f4):
    f = M.AppliedFault("blackhole", "t1-p1-0", T0, frozenset(), frozenset({"t1-p1-0"}))
    dead = M._dead_evs(f4, M.FlowLog("r0h0", "r1h0", 1), f)
    assert dead(ev_encode(1, 0, 9)) and not dead(ev_encode(1, 1, 9))
    assert not dead(ev_encode(0, 0, 9))
    same_rack = M._dead_evs(f4, M.FlowLog("r0h0", "r0h1", 1), f)
    assert not same_rack(ev_encode(1, 0, 9))  # never reaches a T1


def test_localized_is_the_first_naming_of_the_fault_after_it(f4):
    f = fault(f4)
    lk = link(f4, "t0-p1-r0:eth3")
    locs = [{"target": lk, "named_ns": f.at_ns - MS},  # before: an older fault
            {"target": "t1-p0-0", "named_ns": f.at_ns + MS},  # something else
            {"target": "t1-p1-0:eth1", "named_ns": f.at_ns + 40 * MS},  # its other end
            {"target": lk, "named_ns": f.at_ns + 50 * MS}]
    (fig,) = M.fault_figures(f4, [], [f], locs)
    assert fig.localized and fig.localized_as == "t1-p1-0:eth1"
    assert fig.localized_us == 40_000
    sw = M.AppliedFault("sid-loss", "t1-p1-0", T0, frozenset({lk}), frozenset({"t1-p1-0"}))
    (fig,) = M.fault_figures(f4, [], [sw], [{"target": lk, "named_ns": T0 + MS}])
    assert not fig.localized  # a switch fault is named as the switch


def goodput(series, t0=T0):
    return M.Goodput(t0, {0: list(series)})


def test_the_dip_its_depth_length_and_the_time_back_to_90_percent():
    # 100 bytes a ms for 200 ms, the fault, 10 ms at 0, then 100 again
    g = goodput([100] * 200 + [0] * 10 + [100] * 100)
    f = M.AppliedFault("link-down", "x", T0 + 200 * MS, frozenset())
    fig = M.goodput_figures(g, [f])
    assert fig["dip_depth"] == 1.0
    assert fig["back_to_90_ms"] == 14.0  # the 5 ms average is back above 90 at bin 214
    assert fig["dip_ms"] == 14.0
    assert fig["goodput_retained"] == pytest.approx(100 / 110, abs=1e-3)
    assert fig["pre_bps"] == pytest.approx(100 * 8 * 1000)


def test_a_lasting_loss_never_gets_back_and_settled_reads_the_last_half():
    g = goodput([100] * 100 + [75] * 100)
    f = M.AppliedFault("nic-down", "x", T0 + 100 * MS, frozenset())
    fig = M.goodput_figures(g, [f])
    assert fig["back_to_90_ms"] is None
    assert fig["dip_ms"] == 98.0  # below 90% from bin 102 (the 5 ms average) to the end
    assert fig["settled_retained"] == 0.75
    assert fig["dip_depth"] == 0.25


def test_the_dip_is_one_stretch_not_every_noisy_bin_below_90_percent():
    # a 10 ms outage 20 ms after the fault, then 1 ms bins that dip below 90% now and then
    noisy = [100, 100, 100, 100, 100, 100, 40] * 20
    g = goodput([100] * 100 + [100] * 20 + [0] * 10 + noisy)
    fig = M.goodput_figures(g, [M.AppliedFault("x", "x", T0 + 100 * MS, frozenset())])
    assert fig["back_to_90_ms"] == 34.0  # the 5 ms average is back at bin 134
    assert fig["dip_ms"] == 14.0  # from bin 120 (its first below) to 134


def test_a_shallow_dip_is_back_at_once():
    g = goodput([100] * 100 + [95] * 50)
    fig = M.goodput_figures(g, [M.AppliedFault("x", "x", T0 + 100 * MS, frozenset())])
    assert (fig["back_to_90_ms"], fig["dip_ms"]) == (0.0, 0.0)


def test_no_fault_or_no_goodput_gives_no_figures():
    assert M.goodput_figures(goodput([100] * 10), [])["dip_depth"] is None
    f = M.AppliedFault("x", "x", T0, frozenset())
    assert M.goodput_figures(goodput([]), [f])["goodput_retained"] is None


def test_bins_of_several_flows_are_summed_on_one_clock():
    a = M.FlowLog("r0h0", "r1h0", 1, bins_t0_ns=T0, bins={0: [1, 1, 1], 1: [2]})
    b = M.FlowLog("r0h1", "r1h0", 1, bins_t0_ns=T0 + 2 * MS, bins={0: [10, 10]})
    by = M.FlowLog("r1h1", "r0h1", 1, bins_t0_ns=T0, bins={0: [99]}, bystander=True)
    g = M.merge_bins([a, b, by])
    assert g.t0_ns == T0
    assert g.planes == {0: [1, 1, 11, 10], 1: [2, 0, 0, 0]}
    assert g.total == [3, 1, 11, 10]
    assert M.merge_bins([a, by], bystanders=True).total == [99]


def test_ev_states_follow_retirements_and_revivals():
    g = goodput([1] * 5)
    flow = M.FlowLog("r0h0", "r1h0", 1, events=[
        {"t_ns": T0 + MS, "kind": "retire"}, {"t_ns": T0 + MS, "kind": "retire"},
        {"t_ns": T0 + 3 * MS, "kind": "revive"}])
    s = M.ev_state_series([flow], g, 128)["series"]
    assert s["assumed_bad"] == [0, 2, 2, 1, 1]
    assert s["good"] == [128, 126, 126, 127, 127]


def test_lost_share_comes_from_the_fabric(f4, shaped):
    pair = [("r0h0", "r1h0", 1)]
    nic = M.AppliedFault("nic-down", "r1h0:1", T0, frozenset({link(shaped, "r1h0:eth2")}))
    assert M.lost_share(shaped, pair, [nic]) == 0.25
    up = M.AppliedFault("link-down", "x", T0, frozenset({link(shaped, "t0-p0-r0:eth4")}))
    assert M.lost_share(shaped, pair, [up]) == 0  # the plane's other T1 carries it
    both = M.AppliedFault("link-down", "y", T0, frozenset({link(shaped, "t0-p0-r0:eth5")}))
    assert M.lost_share(shaped, pair, [up, both]) == 0.25  # the plane is cut off
    t1 = M.AppliedFault("switch-down", "t1-p2-0", T0, frozenset(), frozenset({"t1-p2-0"}))
    assert M.lost_share(shaped, pair, [t1]) == 0
    assert M.lost_share(f4, pair, []) == 0
    same_rack = [("r0h0", "r0h1", 1)]
    assert M.lost_share(f4, same_rack, [t1]) == 0


# -- did the fault meet the traffic ------------------------------------------------------


def running(t0=T0, for_ms=1000, src="r0h0", dst="r1h0", bystander=False):
    return M.FlowLog(src, dst, 1 << 20, bins_t0_ns=t0, completion_s=for_ms / 1000,
                     bystander=bystander)


def test_a_fault_mid_transfer_met_the_traffic(f4):
    f = fault(f4, at=T0 + 300 * MS)
    got = M.exposure(f4, [running()], f)
    assert got == {"crossed": True, "crossed_from": "paths possible",
                   "under_traffic_ms": 700.0, "met": True}


def test_a_transfer_that_ended_2ms_after_the_fault_did_not_meet_it(f4):
    # the t0-t1-link-down that passed with repair 0: 64 MiB done at 303 ms, cut at 301 ms
    f = fault(f4, at=T0 + 301 * MS)
    got = M.exposure(f4, [running(for_ms=303)], f)
    assert got["under_traffic_ms"] == 2.0 and got["met"] is False


def test_a_fault_after_the_transfer_ended_met_nothing(f4):
    got = M.exposure(f4, [running(for_ms=200)], fault(f4, at=T0 + 300 * MS))
    assert got["under_traffic_ms"] == 0 and got["met"] is False


def test_a_fault_no_path_of_the_traffic_crosses_met_nothing(f4):
    # r0h0 -> r0h1 stays in rack 0: no T0-T1 link of plane 1 carries it
    got = M.exposure(f4, [running(dst="r0h1")], fault(f4, at=T0 + 300 * MS))
    assert got["crossed"] is False and got["met"] is False


def test_a_short_fault_is_met_when_traffic_covers_all_of_it(f4):
    f = fault(f4, at=T0 + 300 * MS)
    f.reverted_ns = f.at_ns + 5 * MS  # a 5 ms flap: less than the 20 ms asked of longer ones
    assert M.exposure(f4, [running()], f)["met"] is True
    assert M.exposure(f4, [running(for_ms=302)], f)["met"] is False


def test_a_single_path_qp_hashed_onto_the_other_t1_never_met_the_cut(f4):
    # the cut is t0-p1-r0 -- t1-p1-0; the RoCE QP's one path goes through t1-p1-1
    f = fault(f4, at=T0 + 300 * MS)
    flow = running()
    flow.paths = frozenset({(1, 1)})
    got = M.exposure(f4, [flow], f)
    assert got["crossed"] is False and got["met"] is False
    assert got["crossed_from"] == "paths taken"
    flow.paths = frozenset({(1, 0)})
    assert M.exposure(f4, [flow], f)["met"] is True


def test_an_ev_the_event_log_names_counts_as_a_path_taken(f4):
    # an EV the retired pool forgot: its loss in the log still says where it went
    f = fault(f4, at=T0 + 300 * MS)
    flow = running()
    flow.paths = frozenset({(2, 1)})
    flow.events = [ev(T0 + 301 * MS, "loss", DEAD, 7)]
    assert M.exposure(f4, [flow], f)["crossed"] is True
    flow.events = [ev(T0 + 301 * MS, "port", DEAD, -1)]  # names no packet's EV
    assert M.exposure(f4, [flow], f)["crossed"] is False


def test_a_bystander_does_not_make_a_fault_met(f4):
    flows = [running(for_ms=200), running(for_ms=2000, bystander=True)]
    assert M.exposure(f4, flows, fault(f4, at=T0 + 300 * MS))["met"] is False


def test_fault_figures_carry_the_exposure(f4):
    (fig,) = M.fault_figures(f4, [running()], [fault(f4, at=T0 + 300 * MS)], [])
    assert (fig.met, fig.crossed, fig.under_traffic_ms) == (True, True, 700.0)


# -- per flow: spread and fair share -----------------------------------------------------


def test_fair_shares_split_a_host_among_the_flows_it_sends_or_receives(shaped, f4):
    # 4 planes x 25 Mbit/s host links: 100 Mbit/s a flow alone; an incast of 2 halves it
    assert M.fair_shares(shaped, [("r0h0", "r1h0")]) == [100e6]
    assert M.fair_shares(shaped, [("r1h0", "r0h0"), ("r1h1", "r0h0"), ("r1h2", "r0h1")]) \
        == [50e6, 50e6, 100e6]
    assert M.fair_shares(f4, [("r0h0", "r1h0")]) is None  # unshaped: the CPU decides


def test_flow_figures_read_the_spread_and_the_least_fair_share(shaped):
    flows = [M.FlowLog("r1h0", "r0h0", 5_000_000, completion_s=1.0),  # 40 Mbit/s of 50
             M.FlowLog("r1h1", "r0h0", 5_000_000, completion_s=0.8),  # 50 of 50
             M.FlowLog("r1h2", "r0h1", 1, completion_s=1.0, bystander=True)]
    got = M.flow_figures(shaped, flows)
    assert got["flow_mbps"] == [40.0, 50.0] and got["fair_share_mbps"] == [50.0, 50.0]
    assert got["flow_spread"] == 0.2 and got["least_fair_share"] == 0.8


def test_flow_series_puts_every_flow_on_one_clock_in_10ms_bins():
    a = M.FlowLog("r0h0", "r1h0", 1, bins_t0_ns=T0, bins={0: [1] * 20, 1: [2] * 15})
    b = M.FlowLog("r1h0", "r0h0", 1, bins_t0_ns=T0 + 5 * MS, bins={0: [4] * 10})
    got = M.flow_series([a, b])
    assert got["bin_ns"] == 10 * MS and got["t0_ns"] == T0
    assert [s["bytes"] for s in got["series"]] == [[30, 20], [20, 20]]


def test_flows_are_compared_over_the_stretch_they_ran_side_by_side(shaped):
    # b starts 50 ms after a and, once a is done, runs alone at twice the rate: over
    # the 250 ms both ran they got the same, which size over completion would hide
    a = M.FlowLog("r1h0", "r0h0", 300_000, bins_t0_ns=T0, bins={0: [1000] * 300},
                  completion_s=0.3)
    b = M.FlowLog("r1h1", "r0h1", 350_000, bins_t0_ns=T0 + 50 * MS,
                  bins={0: [1000] * 250 + [2000] * 50}, completion_s=0.3)
    assert M.common_rates([a, b]) == [8e6, 8e6]
    got = M.flow_figures(shaped, [a, b])
    assert got["flow_spread"] == 0.0 and got["flow_mbps"] == [8.0, 8.0]
    short = M.FlowLog("r1h1", "r0h1", 1, bins_t0_ns=T0 + 250 * MS, bins={0: [1] * 60})
    assert M.common_rates([a, short]) is None  # 50 ms side by side: too short to judge


def test_a_fault_before_the_first_write_counts_from_the_first_write(f4):
    """startup-dead-link: the link is cut before the QPs are set up (~220 ms of it); the
    transport meets the fault at its first write, and repairs from there."""
    f = fault(f4, at=T0 - 220 * MS)
    flow = M.FlowLog("r0h0", "r1h0", 1 << 20, bins_t0_ns=T0, events=[
        ev(T0 + 1 * MS, "loss", DEAD, 3),
        ev(T0 + 1 * MS, "retire", DEAD, 3),
        ev(T0 + 3 * MS, "repaired", ALIVE, 3),
    ])
    (fig,) = M.fault_figures(f4, [flow], [f], [])
    assert (fig.origin, fig.origin_ns) == ("first write", T0)
    assert (fig.detection_us, fig.repair_us) == (1000, 3000)


def test_without_bins_the_runners_first_write_is_the_origin(f4):
    f = fault(f4, at=T0 - 220 * MS)
    flow = M.FlowLog("r0h0", "r1h0", 1, events=[ev(T0 + 2 * MS, "loss", DEAD, 3)])
    (fig,) = M.fault_figures(f4, [flow], [f], [], t0_ns=T0)
    assert fig.origin == "first write" and fig.detection_us == 2000


def test_a_fault_under_traffic_counts_from_the_fault_and_localization_always_does(f4):
    f = fault(f4)  # at T0 + 100 ms
    flow = M.FlowLog("r0h0", "r1h0", 1 << 20, bins_t0_ns=T0,
                     events=[ev(f.at_ns + 2 * MS, "retire", DEAD, 3)])
    named = {"target": "t0-p1-r0:eth3", "named_ns": f.at_ns + 40 * MS}
    (fig,) = M.fault_figures(f4, [flow], [f], [named])
    assert (fig.origin, fig.origin_ns, fig.detection_us) == ("fault", f.at_ns, 2000)
    early = fault(f4, at=T0 - 220 * MS)
    named = {"target": "t0-p1-r0:eth3", "named_ns": early.at_ns + 40 * MS}
    (fig,) = M.fault_figures(f4, [flow], [early], [named])
    assert fig.localized_us == 40_000  # the prober needs no traffic: from the fault


# -- per step: the stretches between the timeline's changes ---------------------------------


def nic(fabric, target="r1h0:1,3", at=T0 + 100 * MS, began=None, reverted=None):
    host, _, planes = target.partition(":")
    links = {lk.id for lk in fabric.links_of(host) if str(lk.plane) in planes.split(",")}
    return M.AppliedFault("nic-down", target, at, frozenset(links), reverted_ns=reverted,
                          revert_began_ns=began)


PAIR = [("r0h0", "r1h0", 1 << 20)]


def test_steps_follow_the_ports_down_and_back_up_each_with_its_lost_share(shaped):
    # half of r1h0's NIC down from 100 ms; its revert begins at 300 ms (the ports up)
    # and ends at 450 ms (the nodes re-programmed): the step changes at 300, not 450
    g = goodput([100] * 100 + [50] * 200 + [100] * 300)
    f = nic(shaped, began=T0 + 300 * MS, reverted=T0 + 450 * MS)
    steps = M.step_figures(shaped, PAIR, g, [f])
    assert [(s.from_ns - T0, s.to_ns - T0) for s in steps] == [(100 * MS, 300 * MS),
                                                               (300 * MS, 600 * MS)]
    assert [(s.in_force, s.lost_share, s.retained) for s in steps] == [
        (("r1h0:1,3",), 0.5, 0.5), ((), 0.0, 1.0)]
    assert steps[0].to_dict(T0) == {"from_ms": 100.0, "to_ms": 300.0,
                                    "in_force": ["r1h0:1,3"], "lost_share": 0.5,
                                    "retained": 0.5}


def test_a_step_is_read_over_its_last_half(shaped):
    # a 50 ms outage at the start of a 200 ms step does not count: it is the failover
    g = goodput([100] * 100 + [0] * 50 + [75] * 150)
    (step,) = M.step_figures(shaped, PAIR, g, [nic(shaped, "r1h0:2")])
    assert (step.lost_share, step.retained) == (0.25, 0.75)


def test_a_step_reads_the_level_it_settled_at_not_a_short_stall_in_it(shaped):
    # 400 ms at a quarter lost; its last 200 ms have a 50 ms stall at half rate (the CPU
    # taken away): the middle half of the 10 ms means is the level, the mean is 0.66
    steady = [100] * 100 + [75] * 200
    g = goodput(steady + [75] * 50 + [37] * 50 + [75] * 100)
    (step,) = M.step_figures(shaped, PAIR, g, [nic(shaped, "r1h0:2")])
    assert step.retained == 0.75
    # the rate that stays down is read: a drop over most of the last half
    g = goodput(steady + [75] * 50 + [37] * 150)
    (step,) = M.step_figures(shaped, PAIR, g, [nic(shaped, "r1h0:2")])
    assert step.retained == 0.37


def test_a_level_is_finer_than_a_packet_per_10ms(shaped):
    # a step's last half has nine 10 ms means, four of 100 and five of 110 (a 10 ms mean
    # is a whole number of packets): the middle half's mean reads 106, a median 110
    last_half = [v for c in (100, 110, 100, 110, 100, 110, 100, 110, 110) for v in [c] * 10]
    g = goodput([135] * 100 + [105] * 90 + last_half)
    (step,) = M.step_figures(shaped, PAIR, g, [nic(shaped, "r1h0:2", at=T0 + 100 * MS)])
    assert step.retained == round(106 / 135, 4)


def test_before_is_read_as_a_level_too(shaped):
    # the same stall before the fault as in a step: neither moves its figure
    g = goodput([100] * 50 + [100] * 20 + [30] * 10 + [100] * 20 + [75] * 300)
    (step,) = M.step_figures(shaped, PAIR, g, [nic(shaped, "r1h0:2")])
    assert step.retained == 0.75


def test_changes_close_together_are_one_step_and_a_short_step_is_not_judged(shaped):
    g = goodput([100] * 1000)
    first = fault(shaped, end="t0-p1-r0:eth4", at=T0 + 100 * MS)
    second = fault(shaped, end="t0-p1-r1:eth5", at=T0 + 105 * MS)  # within MERGE_NS
    third = fault(shaped, end="t0-p2-r0:eth4", at=T0 + 300 * MS)
    fourth = fault(shaped, end="t0-p2-r0:eth5", at=T0 + 350 * MS)  # 50 ms after: short
    steps = M.step_figures(shaped, PAIR, g, [first, second, third, fourth])
    assert [s.from_ns - T0 for s in steps] == [100 * MS, 350 * MS]
    # both paths of plane 1 cut (one at each rack), then both of plane 2's
    assert [len(s.in_force) for s in steps] == [2, 4]
    assert [s.lost_share for s in steps] == [0.25, 0.5]


def test_no_fault_or_no_goodput_gives_no_steps(shaped):
    assert M.step_figures(shaped, PAIR, goodput([100] * 10), []) == []
    assert M.step_figures(shaped, PAIR, goodput([]), [nic(shaped)]) == []
    (step,) = M.step_figures(shaped, PAIR, goodput([0] * 100 + [100] * 200), [nic(shaped)])
    assert step.retained is None  # no goodput before the fault to read it against


def test_on_ecmp_the_link_counters_say_whether_a_fault_met_the_traffic(f4):
    """A BGP lab's sender knows an EV's plane, not its T1 (the routers' hash picks it):
    the paths taken from the EVs cannot say; the bytes each link moved can."""
    f = fault(f4, at=T0 + 300 * MS)
    (lk,) = f.links
    flow = running()  # its EVs' paths cross the fault: by the paths, it met it
    assert M.exposure(f4, [flow], f)["crossed"] is True
    quiet = M.exposure(f4, [flow], f, carried={lk: 1500})  # a few keepalives: no traffic
    assert (quiet["crossed"], quiet["crossed_from"], quiet["met"]) == \
        (False, "link counters", False)
    busy = M.exposure(f4, [flow], f, carried={lk: M.CARRIED_MIN})
    assert busy["crossed"] is True and busy["met"] is True
    node = M.AppliedFault("switch-down", "t1-p0-0", T0 + 300 * MS, frozenset(),
                          nodes=frozenset({"t1-p0-0"}))
    some_link = f4.links_of("t1-p0-0")[1].id  # any of the switch's links counts
    assert M.exposure(f4, [flow], node, carried={some_link: 1 << 20})["crossed"] is True
