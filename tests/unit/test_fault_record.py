"""The fault record keeps its typed target (twin.faults.record, .targets), and faults.json
keeps the format every twin wrote: a record from before the typed target loads and
reverts. On mrc-4p up on the in-memory runtime."""

from __future__ import annotations

import json

import pytest

from twin import faults as F
from twin.faults.record import Fault
from twin.faults.targets import (
    LinkEnd,
    LinkTarget,
    NicPort,
    NodeTarget,
    PlaneTarget,
    recorded,
)
from twin.runtime import fake

pytestmark = pytest.mark.usefixtures("clean_world")

# faults.json as twin wrote it before its record had a typed target (the same keys now)
OLD_KEYS = {"kind", "link", "ends", "since", "percent", "links", "detail", "hidden"}
OLD_RECORD = [
    {"kind": "link-down", "link": "t0-p0-r0:eth3--t1-p0-0:eth1", "ends": ["t0-p0-r0:eth3"],
     "since": 1796575545.22, "percent": 0.0},
    {"kind": "nic-down", "link": "r1h0:1,3", "ends": ["r1h0:eth2", "r1h0:eth4"],
     "since": 1796575545.23, "percent": 0.0,
     "links": ["r1h0:eth2--t0-p1-r1:eth1", "r1h0:eth4--t0-p3-r1:eth1"]},
    {"kind": "switch-down", "link": "t1-p1-0", "ends": ["t1-p1-0:eth1", "t1-p1-0:eth2"],
     "since": 1796575545.24, "percent": 0.0,
     "links": ["t0-p1-r0:eth3--t1-p1-0:eth1", "t0-p1-r1:eth3--t1-p1-0:eth2"]},
    {"kind": "blackhole", "link": "t1-p3-0:eth1", "ends": ["t1-p3-0:eth1"],
     "since": 1796575545.25, "percent": 0.0, "links": ["t0-p3-r0:eth3--t1-p3-0:eth1"]},
    {"kind": "link-loss", "link": "t0-p3-r1:eth4--t1-p3-1:eth2", "ends": ["t0-p3-r1:eth4"],
     "since": 1796575545.26, "percent": 5},
]


def put_in_force(att) -> None:
    F.link_down(att, "t0-p0-r0:eth3")
    F.nic_down(att, "r1h0:3,1")
    F.switch_down(att, "t1-p1-0")
    F.blackhole(att, "t1-p3-0:eth1")
    F.link_loss(att, "t0-p3-r1:eth4", 5)


def admin(node, ifname):
    return fake.WORLD["mrc-4p"][node].interfaces[ifname].up


def test_each_fault_records_what_it_is_on_as_its_type(att):
    put_in_force(att)
    F.plane_down(att, "2")
    assert [f.on for f in F.active(att)] == [
        LinkTarget("t0-p0-r0:eth3--t1-p0-0:eth1"), NicPort("r1h0", (1, 3)),
        NodeTarget("t1-p1-0"), LinkEnd("t1-p3-0", "eth1"),
        LinkTarget("t0-p3-r1:eth4--t1-p3-1:eth2"), PlaneTarget(2)]
    assert [f.target for f in F.active(att)] == [
        "t0-p0-r0:eth3--t1-p0-0:eth1", "r1h0:1,3", "t1-p1-0", "t1-p3-0:eth1",
        "t0-p3-r1:eth4--t1-p3-1:eth2", "2"]


def test_faults_json_keeps_the_format_it_always_had(att):
    put_in_force(att)
    written = json.loads((att.state.dir / "faults.json").read_text())
    assert all(set(d) <= OLD_KEYS for d in written)
    drop_time = [{k: v for k, v in d.items() if k != "since"} for d in written]
    assert drop_time == [{k: v for k, v in d.items() if k != "since"} for d in OLD_RECORD]


def test_a_record_from_before_the_typed_target_loads_and_reverts(att):
    """A user upgrades with faults in force: the old faults.json is read, typed, and
    `twin fault clear` reverts every one of them."""
    put_in_force(att)
    (att.state.dir / "faults.json").write_text(json.dumps(OLD_RECORD))  # as the old twin
    loaded = F.active(att)
    assert [type(f.on) for f in loaded] == [LinkTarget, NicPort, NodeTarget, LinkEnd,
                                            LinkTarget]
    assert loaded[2].all_links == tuple(OLD_RECORD[2]["links"])
    assert loaded[0].all_links == ("t0-p0-r0:eth3--t1-p0-0:eth1",)
    assert not admin("t0-p0-r0", "eth3") and not admin("r1h0", "eth4")
    assert "twin_blackhole_eth1" in fake.WORLD["mrc-4p"]["t1-p3-0"].nft
    cleared = F.clear(att)
    assert len(cleared) == 5 and F.active(att) == []
    assert admin("t0-p0-r0", "eth3") and admin("r1h0", "eth2") and admin("r1h0", "eth4")
    assert admin("t1-p1-0", "eth1") and admin("t1-p1-0", "eth2")
    assert "twin_blackhole_eth1" not in fake.WORLD["mrc-4p"]["t1-p3-0"].nft
    assert not [t for t in fake.WORLD["mrc-4p"]["t0-p3-r1"].nft if t.startswith("twin_loss")]


def test_one_fault_is_cleared_by_its_target_and_only_it(att):
    put_in_force(att)
    (att.state.dir / "faults.json").write_text(json.dumps(OLD_RECORD))
    F.clear(att, "r1h0:1,3")
    assert [f.target for f in F.active(att)] == [
        d["link"] for d in OLD_RECORD if d["kind"] != "nic-down"]


@pytest.mark.parametrize("target", [
    LinkTarget("t0-p0-r0:eth3--t1-p0-0:eth1"), LinkEnd("t1-p0-0", "eth1"),
    NodeTarget("t1-p0-0"), NodeTarget("r0h0"), NicPort("r0h0", (2,)),
    NicPort("r0h0", (1, 3)), PlaneTarget(0), PlaneTarget(12)])
def test_a_targets_text_reads_back_as_the_same_target(target):
    assert recorded(str(target)) == target


def test_a_fault_given_its_target_as_text_reads_it_once():
    fault = Fault("nic-down", "r0h0:1,3", (), 0.0)
    assert fault.on == NicPort("r0h0", (1, 3)) and fault.target == "r0h0:1,3"
    assert fault == Fault("nic-down", NicPort("r0h0", (1, 3)), (), 0.0)
