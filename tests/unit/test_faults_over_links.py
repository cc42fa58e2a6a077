"""Faults over several links (switch-down, nic-down, plane-down) on the fake runtime's
kernel model: one record, every end down, one revert, no link held twice."""

import subprocess
import time

import pytest
from click.testing import CliRunner

from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.errors import LabError, UsageError
from twin.runtime import fake

pytestmark = pytest.mark.usefixtures("clean_world")


def admin(node, ifname):
    return fake.WORLD["mrc-4p"][node].interfaces[ifname].up


def all_up():
    return all(i.up for n in fake.WORLD["mrc-4p"].values() for i in n.interfaces.values())


def test_switch_down_takes_every_link_of_the_switch_down_at_the_switch(att):
    fault = F.switch_down(att, "t1-p0-0")
    assert fault.kind is F.FaultKind.SWITCH_DOWN and fault.target == "t1-p0-0"
    assert len(fault.links) == 2  # one per rack's T0 of plane 0
    assert all(not admin("t1-p0-0", i) for i in ("eth1", "eth2"))
    assert admin("t0-p0-r0", "eth3")  # the peers' ends stay up, without carrier
    (recorded,) = F.active(att)
    assert recorded == fault and recorded.to_dict()["links"] == list(fault.links)
    assert [f.target for f in F.clear(att, "t1-p0-0")] == ["t1-p0-0"]
    assert all_up() and F.active(att) == []


def test_nic_down_is_one_port_of_a_host(att):
    fault = F.nic_down(att, "r0h0:2")
    assert fault.ends == (F.Endpoint("r0h0", "eth3"),)
    assert not admin("r0h0", "eth3") and admin("r0h0", "eth1")
    F.clear(att, "r0h0:2")
    assert all_up()


def test_nic_down_of_several_ports_is_one_fault_down_and_up_as_one(att):
    fault = F.nic_down(att, "r0h0:3,1")
    assert fault.target == "r0h0:1,3" and len(fault.links) == 2
    assert fault.ends == (F.Endpoint("r0h0", "eth2"), F.Endpoint("r0h0", "eth4"))
    assert not admin("r0h0", "eth2") and not admin("r0h0", "eth4") and admin("r0h0", "eth3")
    with pytest.raises(UsageError, match="already down as part of nic-down r0h0:1,3"):
        F.nic_down(att, "r0h0:3")
    F.clear(att, "r0h0:1,3")
    assert all_up() and F.active(att) == []


def test_clearing_one_port_of_a_host_leaves_its_other_ports_down(att):
    # the revert re-programs r0h0, whose plan sets every interface up: the port the
    # other fault still holds goes down again
    F.nic_down(att, "r0h0:1")
    F.nic_down(att, "r0h0:3")
    F.clear(att, "r0h0:1")
    assert admin("r0h0", "eth2") and not admin("r0h0", "eth4")
    assert [f.target for f in F.active(att)] == ["r0h0:3"]
    F.clear(att, "r0h0:3")
    assert all_up()


def test_a_revert_that_re_programs_a_switch_keeps_its_other_links_down(att):
    F.link_down(att, "t0-p1-r0:eth3")
    F.link_down(att, "t0-p1-r0:eth1")
    F.clear(att, "t0-p1-r0:eth3")  # re-programs t0-p1-r0 (and its peer t1-p1-0)
    assert admin("t0-p1-r0", "eth3") and not admin("t0-p1-r0", "eth1")
    F.clear(att)
    assert all_up()


def test_a_revert_does_not_load_an_nft_fault_again(att):
    F.link_loss(att, "t0-p1-r0:eth4", 5)
    F.link_down(att, "t0-p1-r0:eth3")
    F.clear(att, "t0-p1-r0:eth3")  # re-programming leaves the nft table as it was
    (rules,) = fake.WORLD["mrc-4p"]["t0-p1-r0"].nft.values()
    assert len(rules) == 1
    F.clear(att)


def test_plane_down_takes_every_link_of_the_plane_at_its_switches(att):
    fault = F.plane_down(att, "1")
    plane_links = [lk for lk in att.fabric.links if lk.plane == 1]
    assert set(fault.links) == {lk.id for lk in plane_links}
    assert all(att.fabric.node(e.node).is_switch for e in fault.ends)
    assert all(not admin(e.node, e.ifname) for e in fault.ends)
    assert all(admin(lk.a.node, lk.a.ifname) for lk in att.fabric.links if lk.plane != 1)
    F.clear(att)
    assert all_up()


def test_no_two_faults_hold_one_link(att):
    F.switch_down(att, "t1-p0-0")
    with pytest.raises(UsageError, match="already down as part of switch-down t1-p0-0"):
        F.link_down(att, "t0-p0-r0:eth3")
    with pytest.raises(UsageError, match="already down as part of switch-down"):
        F.plane_down(att, "0")
    with pytest.raises(UsageError,
                       match="`twin fault clear --lab mrc-4p t1-p0-0` reverts all of it"):
        F.link_up(att, "t0-p0-r0:eth3")
    F.clear(att)
    F.link_loss(att, "t0-p1-r0:eth3", 5)
    with pytest.raises(UsageError, match="already has a link-loss fault"):
        F.switch_down(att, "t0-p1-r0")
    assert [f.kind for f in F.active(att)] == [F.FaultKind.LINK_LOSS]


@pytest.mark.parametrize("call,text,msg", [
    (F.switch_down, "r0h0", "is a host, not a switch"),
    (F.switch_down, "nosuch", "no node 'nosuch'"),
    (F.nic_down, "t0-p0-r0:1", "is a switch, not a host"),
    (F.nic_down, "r0h0:9", "no NIC port on plane 9"),
    (F.nic_down, "r0h0", "HOST:PLANE"),
    (F.nic_down, "r0h0:1,9", "no NIC port on plane 9"),
    (F.nic_down, "r0h0:1,1", "names a port twice"),
    (F.nic_down, "r0h0:1,", "HOST:PLANE"),
    (F.plane_down, "7", "no plane '7'"),
    (F.plane_down, "x", "no plane 'x'"),
])
def test_bad_targets_are_refused_and_nothing_is_recorded(att, call, text, msg):
    with pytest.raises(UsageError, match=msg):
        call(att, text)
    assert F.active(att) == [] and all_up()


def test_a_restarted_switch_comes_back_still_dead(att):
    F.switch_down(att, "t1-p0-0")
    done = lifecycle.restart(att, "t1-p0-0")
    assert sorted(done.faults_again) == ["t1-p0-0:eth1", "t1-p0-0:eth2"]
    assert not admin("t1-p0-0", "eth1") and not admin("t1-p0-0", "eth2")


def test_a_restarted_peer_keeps_the_switch_dead(att):
    F.switch_down(att, "t1-p0-0")
    done = lifecycle.restart(att, "t0-p0-r0")  # re-programs t1-p0-0 too: its link comes up
    assert done.faults_again == ("t1-p0-0:eth1",)
    assert not admin("t1-p0-0", "eth1")


def test_clear_of_a_target_without_a_fault_is_refused(att):
    F.nic_down(att, "r1h1:0")
    with pytest.raises(UsageError, match="no fault in force on 't1-p0-0'.*r1h1:0"):
        F.clear(att, "t1-p0-0")
    assert len(F.active(att)) == 1


def test_cli_lists_and_clears_them(att):
    runner = CliRunner()
    assert runner.invoke(main, ["fault", "switch-down", "t1-p1-1"]).exit_code == 0
    assert runner.invoke(main, ["fault", "nic-down", "r0h1:3"]).exit_code == 0
    listed = runner.invoke(main, ["fault", "list"]).output
    assert "switch-down t1-p1-1 (2 links)" in listed and "nic-down r0h1:3 (1 link)" in listed
    res = runner.invoke(main, ["fault", "plane-down", "1"])
    assert res.exit_code == 2 and "already down as part of switch-down t1-p1-1" in res.output
    assert "reverted 1 fault" in runner.invoke(main, ["fault", "clear", "r0h1:3"]).output
    assert "reverted 1 fault" in runner.invoke(main, ["fault", "clear"]).output
    assert all_up()


# -- faults inside a node: blackhole, sid-loss, route-corrupt, link-rate ------------------


def test_blackhole_is_an_owned_nft_table_that_drops_forwarding(att):
    F.blackhole(att, "t1-p0-0")
    (table, rules), = fake.WORLD["mrc-4p"]["t1-p0-0"].nft.items()
    assert table == "twin_blackhole" and "counter drop" in rules[0]
    assert "oifname" not in rules[0] and att.runtime.owner.tag in rules[0]
    assert all_up()  # no port state reveals it
    F.clear(att, "t1-p0-0")
    assert fake.WORLD["mrc-4p"]["t1-p0-0"].nft == {}


def test_blackhole_of_one_port_drops_only_what_leaves_by_it():
    rules = F.blackhole_rules("eth2", F.blackhole_table("eth2"))
    assert 'oifname "eth2" counter drop' in rules and "twin_blackhole_eth2" in rules
    assert rules.startswith("add table ip6 twin_blackhole_eth2\ndelete table")  # idempotent


def test_route_corrupt_names_the_route_and_its_wrong_port(att):
    good, bad = F.corruption(att.plan["t0-p0-r0"])
    assert good.dst == bad.dst and good.dev != bad.dev and bad.via != good.via
    assert F.corruption(att.plan["t0-p0-r0"]) == (good, bad)  # the same every time


@pytest.mark.parametrize("dataplane", ["seg6local", "ebpf"])
def test_sid_loss_takes_exactly_the_local_sids_and_revert_puts_them_back(dataplane):
    L.up("mrc-4p", "fake", dataplane=dataplane)
    att = L.attach("mrc-4p")
    assert att.state.dataplane == dataplane
    world = fake.WORLD["mrc-4p"]
    F.sid_loss(att, "t1-p0-0")
    assert world["t1-p0-0"].sids == {}  # the switch's uN is gone
    assert world["t1-p0-1"].sids == {"fcbb:bb00:201::/48": ""}  # and no one else's
    F.clear(att)
    assert world["t1-p0-0"].sids == {"fcbb:bb00:200::/48": ""}  # re-programmed


def test_sid_loss_of_a_host_takes_its_decap_sids():
    L.up("mrc-4p", "fake", dataplane="ebpf")
    att = L.attach("mrc-4p")
    F.sid_loss(att, "r0h0")
    assert fake.WORLD["mrc-4p"]["r0h0"].sids == {}
    F.clear(att)
    assert fake.WORLD["mrc-4p"]["r0h0"].sids == {
        "fcbb:bb00:300::/48": "eth1", "fcbb:bb00:1300::/48": "eth2",
        "fcbb:bb00:2300::/48": "eth3", "fcbb:bb00:3300::/48": "eth4"}


@pytest.mark.parametrize("dataplane", ["seg6local", "ebpf"])
def test_sid_loss_on_top_of_itself_is_fine_and_a_kernel_refusal_is_not(dataplane, monkeypatch):
    """Re-applied (after a restart), what is gone already is fine; a removal the kernel
    refuses, or a command that is not there, fails the fault instead of passing as done."""
    L.up("mrc-4p", "fake", dataplane=dataplane)
    att = L.attach("mrc-4p")
    dp = att.dataplane
    dp.remove_sids(att.runtime, att.plan["t1-p0-0"])
    dp.remove_sids(att.runtime, att.plan["t1-p0-0"])  # nothing left: every line "gone"
    assert fake.WORLD["mrc-4p"]["t1-p0-0"].sids == {}

    def refusing(self, node, argv, *, input=None, check=True, timeout=60):
        return subprocess.CompletedProcess(argv, 2, "", "RTNETLINK answers: Operation not "
                                           "permitted\nCommand failed -:1")
    monkeypatch.setattr(fake.FakeRuntime, "exec", refusing)
    with pytest.raises(LabError, match=r"t1-p0-1\).*Operation not permitted"):
        F.sid_loss(att, "t1-p0-1")
    monkeypatch.setattr(fake.FakeRuntime, "exec", lambda self, node, argv, **kw:
                        subprocess.CompletedProcess(argv, 127, "", "ip: not found"))
    with pytest.raises(LabError, match="ip: not found"):
        dp.remove_sids(att.runtime, att.plan["t1-p0-1"])


@pytest.mark.parametrize("call,args,msg", [
    (F.blackhole, ("r0h0",), "is a host: it forwards nothing"),
    (F.blackhole, ("t1-p0-0:eth9",), "has no link on eth9"),
    (F.link_rate, ("t0-p0-r0:eth3", "fast"), r"RATE: must be a rate .* \(got 'fast'\)"),
    (F.link_rate, ("t0-p0-r0:eth3", "0mbit"), r"RATE: must be a rate .* \(got '0mbit'\)"),
    (F.sid_loss, ("nosuch",), "no node 'nosuch'"),
])
def test_bad_node_fault_targets_are_refused(att, call, args, msg):
    with pytest.raises(UsageError, match=msg):
        call(att, *args)
    assert F.active(att) == [] and F.events(att) == []


def test_a_node_fault_holds_its_links(att):
    F.blackhole(att, "t1-p0-0")
    with pytest.raises(UsageError, match="already has a blackhole fault"):
        F.link_down(att, "t0-p0-r0:eth3")


def test_every_apply_and_revert_is_on_the_timeline(att):
    F.switch_down(att, "t1-p1-0")
    F.blackhole(att, "t1-p0-1")
    F.clear(att)
    log = F.events(att)
    assert [(e["event"], e["target"]) for e in log] == [
        ("apply", "t1-p1-0"), ("apply", "t1-p0-1"), ("revert", "t1-p0-1"),
        ("revert", "t1-p1-0")]
    assert [e["t_mono_ns"] for e in log] == sorted(e["t_mono_ns"] for e in log)


# -- faults in time: link-flap, switch-reboot ------------------------------------------


def test_link_flap_goes_down_and_up_count_times_then_leaves_nothing(att):
    steps = []
    F.link_flap(att, "t0-p0-r0:eth3", 2, 0.02, on_step=lambda i, n: steps.append((i, n)))
    assert steps == [(1, 2), (2, 2)] and all_up() and F.active(att) == []
    assert [e["event"] for e in F.events(att)] == ["apply", "down", "up", "down", "up",
                                                   "revert"]


def test_an_interrupted_flap_brings_the_link_up_and_drops_its_record(att, monkeypatch):
    calls = []

    def sleep(s):
        calls.append(s)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep)
    with pytest.raises(KeyboardInterrupt):
        F.link_flap(att, "t0-p0-r0:eth3", 5, 1.0)
    assert all_up() and F.active(att) == [] and F.events(att)[-1]["event"] == "revert"


def test_a_flap_is_on_disk_while_it_runs(att, monkeypatch):
    seen = []
    monkeypatch.setattr(time, "sleep", lambda s: seen.append(F.active(att)))
    F.link_flap(att, "t0-p0-r0:eth3", 1, 1.0)
    assert seen and seen[0][0].kind is F.FaultKind.LINK_FLAP and seen[0][0].detail == "1x1s"


@pytest.mark.parametrize("count,period,msg", [(0, 1.0, "--count"), (3, 0.0, "--period"),
                                              (3, float("nan"), "--period")])
def test_a_flap_out_of_range_is_refused(att, count, period, msg):
    with pytest.raises(UsageError, match=msg):
        F.link_flap(att, "t0-p0-r0:eth3", count, period)
    assert F.events(att) == []


def test_switch_reboot_is_a_restart_on_the_timeline(att):
    F.link_down(att, "t1-p0-0:eth1")
    F.switch_reboot(att, "t1-p0-0")
    assert [f.kind for f in F.active(att)] == [F.FaultKind.LINK_DOWN]  # kept, re-applied
    assert not admin("t1-p0-0", "eth1") and admin("t1-p0-0", "eth2")
    log = [(e["event"], e["kind"]) for e in F.events(att)]
    assert log[-2:] == [("apply", "switch-reboot"), ("revert", "switch-reboot")]


def test_loss_rules_draw_per_packet_and_100_percent_is_a_plain_drop():
    from twin.faults.catalog import loss_rules

    one = loss_rules("eth3", 1, "t")
    assert one.count('numgen random mod 1000000 < 10000 counter drop') == 2
    assert 'oifname "eth3"' in one and 'iifname "eth3"' in one
    every = loss_rules(None, 100, "t")  # nft refuses `< 1000000`: numgen stops at 999999
    assert "numgen" not in every and "ifname" not in every
    assert every.count("    counter drop\n") == 2
