"""SONiC's config_db.json as route tables (twin.routes.formats.sonic).

SONiC's own examples load (tests/data/routes/sonic/, sources in SOURCES.md); twin's plan
for mrc-4p goes out as config_db.json and comes back the same; a malformed file names
every problem at once, at `<file> TABLE|key.field`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from twin.errors import SpecError
from twin.fabric.plan import DECAP, UN, LocalSid, Route
from twin.lab.compile import compile_spec
from twin.routes import formats, tables
from twin.routes.formats import sonic
from twin.routes.tables import NodeTables

DATA = Path(__file__).resolve().parents[1] / "data" / "routes" / "sonic"
SONIC = formats.get("sonic")


@pytest.fixture(scope="module")
def compiled():
    return compile_spec("mrc-4p")


def parse(compiled, text: str, node: str = "t0-p0-r0") -> NodeTables:
    return SONIC.parse(text, node, f"{node}/config_db.json", compiled.fabric)


def example(compiled, name: str, node: str = "t0-p0-r0") -> NodeTables:
    return parse(compiled, (DATA / name).read_text(), node)


def problems(compiled, db: dict | str, node: str = "t0-p0-r0") -> list[str]:
    text = db if isinstance(db, str) else json.dumps(db)
    with pytest.raises(SpecError) as e:
        parse(compiled, text, node)
    assert e.value.what == formats.WHAT
    return [f"{p.path}: {p.message}" for p in e.value.problems]


# -- SONiC's own examples -------------------------------------------------------------


def test_the_snake_example_of_sonic_mgmt_loads(compiled):
    """sonic-net/sonic-mgmt docs/testplan/snappi/srv6_performance_test.md: five uN
    locators and five static routes; its INTERFACE table is not read. Its ports
    (Ethernet1, 3, ... on a one-lane-per-port platform) fit no sonic-vs port, so
    they stay as written, for the check to report."""
    t = example(compiled, "sonic-mgmt-srv6-performance.json")
    assert t.sids == tuple(LocalSid(f"fcbb:bbbb:{n}::/48", UN, "", 32, 16) for n in range(1, 6))
    assert t.routes == (
        Route("fcbb:bbbb:2::/48", "Ethernet1", via="fc0a::402"),
        Route("fcbb:bbbb:3::/48", "Ethernet3", via="fc0a::502"),
        Route("fcbb:bbbb:4::/48", "Ethernet5", via="fc0a::602"),
        Route("fcbb:bbbb:5::/48", "Ethernet7", via="fc0a::702"),
        Route("fcbb:bbbb:206::/48", "Ethernet9", via="fc0a::802"),
    )
    assert str(t.origin(t.routes[0])) == \
        "t0-p0-r0/config_db.json STATIC_ROUTE|default|fcbb:bbbb:2::/48"
    assert str(t.origin(t.sids[0])) == \
        "t0-p0-r0/config_db.json SRV6_MY_SIDS|loc1|fcbb:bbbb:1::/48"


def test_the_static_config_test_of_sonic_mgmt_loads(compiled):
    """sonic-net/sonic-mgmt tests/srv6/test_srv6_static_config.py: a uN SID, and a uDT46
    that decapsulates into Vrf1, which twin keeps as dropping: the NIC address is in
    the default VRF."""
    t = example(compiled, "sonic-mgmt-srv6-static-config.json")
    assert t.sids == (LocalSid("fcbb:bbbb:1::/48", UN, "", 32, 16),)
    (d,) = t.dropping
    assert (d.prefix, d.what) == ("fcbb:bbbb:1:2::/64", "uDT46 decap_vrf Vrf1")
    assert "Vrf1" in d.why and "default VRF" in d.why


def test_the_yang_model_examples_of_sonic_buildimage_load(compiled):
    """sonic-net/sonic-buildimage src/sonic-yang-models/tests/.../srv6.json, cases
    SRV6_VALID and SRV6_MY_SID_UA_VALID: upper-case prefixes are read in twin's
    spelling; a uDT46 into the default VRF is a decap (on no port of a switch); uA is
    kept as dropping."""
    t = example(compiled, "sonic-yang-srv6.json")
    assert t.sids == (LocalSid("fcbb:bbbb:20::/48", UN, "", 32, 16),
                      LocalSid("fcbb:bbbb:20:f1::/64", DECAP, "", 32, 16))
    assert str(t.origin(t.sids[1])) == \
        "t0-p0-r0/config_db.json SRV6_MY_SIDS|MAIN|FCBB:BBBB:20:F1::/64"
    (ua,) = example(compiled, "sonic-yang-srv6-ua.json").dropping
    assert (ua.prefix, ua.what) == ("fcbb:bbbb:20::/48", "uA")
    assert "adjacency" in ua.why


def test_the_static_routes_of_bgpcfgds_tests_load(compiled):
    """sonic-net/sonic-buildimage src/sonic-bgpcfgd/tests/test_static_rt.py: the IPv6
    route is read (distance and an empty nexthop-vrf change nothing); the IPv4
    blackhole and the ECMP route of vrfRED are ignored: no fabric packet meets them."""
    t = example(compiled, "bgpcfgd-static-route.json")
    assert t.routes == (Route("fc00:10::/64", "PortChannel0001", via="fc00::72"),)
    assert t.sids == () and t.dropping == ()


# -- ports ---------------------------------------------------------------------------


def test_ports_map_as_containerlabs_sonic_vs_wires_them():
    """eth1 is Ethernet0, each next port the previous + 4 (containerlab sonic-vs, sonic-vm)."""
    assert [sonic.sonic_port(f"eth{n}") for n in (1, 2, 3, 9)] == \
        ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet32"]
    assert all(sonic.twin_port(sonic.sonic_port(f"eth{n}")) == f"eth{n}" for n in range(1, 65))
    assert [sonic.twin_port(n) for n in ("Ethernet9", "PortChannel1", "eth3", "Loopback0")] == \
        ["Ethernet9", "PortChannel1", "eth3", "Loopback0"]


def test_both_spellings_of_a_port_are_read_and_an_unknown_port_is_not_an_error(compiled):
    db = {"STATIC_ROUTE": {
        "default|fcbb:bb00:200::/48": {"nexthop": "fe80::200", "ifname": "Ethernet8"},
        "fcbb:bb00:201::/48": {"nexthop": "fe80::201", "ifname": "eth4"},
        "default|fcbb:bb00:300::/48": {"nexthop": "fe80::300", "ifname": "Ethernet64"}}}
    assert [r.dev for r in parse(compiled, json.dumps(db)).routes] == ["eth3", "eth4", "eth17"]


def test_a_host_ports_decap_is_on_the_port_whose_usid_it_is(compiled):
    """r1h0 is host 2 of mrc-4p: plane 1's port owns fcbb:bb00:1302::/48, on eth2."""
    db = {"SRV6_MY_LOCATORS": {"loc": {"prefix": "fcbb:bb00:1302::"}},
          "SRV6_MY_SIDS": {"loc|fcbb:bb00:1302::/48": {"action": "uDT6"},
                           "loc|fcbb:bb00:1303::/48": {"action": "uDT46",
                                                       "decap_vrf": "default"}}}
    t = parse(compiled, json.dumps(db), "r1h0")
    assert [(s.prefix, s.behavior, s.dev) for s in t.sids] == [
        ("fcbb:bb00:1302::/48", DECAP, "eth2"), ("fcbb:bb00:1303::/48", DECAP, "")]


def test_a_blackhole_drops_whatever_else_the_entry_says(compiled):
    db = {"STATIC_ROUTE": {"default|fcbb:bb00:900::/48": {
        "nexthop": "fe80::1", "ifname": "Ethernet0", "blackhole": "true"}}}
    assert parse(compiled, json.dumps(db)).routes == \
        (Route("fcbb:bb00:900::/48", "", type="blackhole"),)


@pytest.mark.parametrize("action, why", [
    ("End", "SRH"), ("End.X", "SRH"), ("uDT4", "IPv4"), ("End.DT4", "IPv4"),
    ("End.DT46", "NEXT-CSID"), ("uDX6", "cross-connects"), ("End.B6.Encaps", "policy")])
def test_every_other_action_sonic_knows_is_kept_as_dropping_with_why(compiled, action, why):
    db = {"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::"}},
          "SRV6_MY_SIDS": {"loc1|fcbb:bb00:100:e000::/64": {"action": action}}}
    (d,) = parse(compiled, json.dumps(db)).dropping
    assert (d.prefix, d.what) == ("fcbb:bb00:100:e000::/64", action) and why in d.why


# -- twin's plan, out and back ------------------------------------------------------------


def test_every_node_of_mrc_4p_goes_out_and_comes_back_the_same(compiled):
    plan = tables.from_plan(compiled.plan)
    for node, t in plan.nodes.items():
        back = SONIC.parse(SONIC.render(t, compiled.fabric), node, SONIC.file_for(node),
                           compiled.fabric)
        assert (back.routes, back.sids, back.dropping) == (t.routes, t.sids, ()), node


def test_a_directory_written_in_sonic_is_detected_and_loads_the_same(compiled, tmp_path):
    plan = tables.from_plan(compiled.plan)
    written = formats.write_dir(tmp_path, plan, compiled.fabric, "sonic")
    assert tmp_path / "t0-p0-r0" / "config_db.json" in written
    loaded = formats.load_dir(tmp_path, compiled.fabric)
    assert loaded.format == "sonic"
    assert {n: (t.routes, t.sids) for n, t in loaded.nodes.items()} == \
        {n: (t.routes, t.sids) for n, t in plan.nodes.items()}


def test_the_rendered_file_is_what_sonic_takes(compiled):
    """Keys sorted, four spaces, every value a string; SONiC's port names; a switch's uN
    and a host's uDT46 into the default VRF, each under a locator of block 32, node 16."""
    plan = tables.from_plan(compiled.plan)
    for node in ("t0-p0-r0", "r0h0"):
        text = SONIC.render(plan[node], compiled.fabric)
        db = json.loads(text)
        assert text == json.dumps(db, indent=4, sort_keys=True) + "\n"
        assert db["DEVICE_METADATA"] == {"localhost": {"hostname": node}}
        assert all(isinstance(v, str) for table in db.values() for entry in table.values()
                   for v in entry.values())
        assert '"eth' not in text
    t0 = json.loads(SONIC.render(plan["t0-p0-r0"], compiled.fabric))
    assert t0["SRV6_MY_LOCATORS"] == {"t0-p0-r0": {
        "prefix": "fcbb:bb00:100::", "block_len": "32", "node_len": "16",
        "func_len": "0", "arg_len": "0"}}
    assert t0["SRV6_MY_SIDS"] == {
        "t0-p0-r0|fcbb:bb00:100::/48": {"action": "uN", "decap_dscp_mode": "pipe"}}
    assert t0["STATIC_ROUTE"]["default|fcbb:bb00:200::/48"] == \
        {"nexthop": "fe80::200", "ifname": "Ethernet8"}
    host = json.loads(SONIC.render(plan["r0h0"], compiled.fabric))
    assert host["SRV6_MY_SIDS"]["r0h0-Ethernet4|fcbb:bb00:1300::/48"] == \
        {"action": "uDT46", "decap_vrf": "default", "decap_dscp_mode": "pipe"}


def test_dropping_sids_go_out_and_come_back(compiled):
    t = example(compiled, "sonic-mgmt-srv6-static-config.json")
    ua = example(compiled, "sonic-yang-srv6-ua.json").dropping
    both = NodeTables("t0-p0-r0", (), t.sids, t.dropping + ua)
    back = parse(compiled, SONIC.render(both, compiled.fabric))
    assert (back.sids, set(back.dropping)) == (both.sids, set(both.dropping))


def test_files_are_claimed_by_their_directory():
    assert SONIC.file_for("t0-p0-r0") == "t0-p0-r0/config_db.json"
    assert SONIC.node_of("t0-p0-r0/config_db.json") == "t0-p0-r0"
    assert [SONIC.node_of(f) for f in ("config_db.json", "a/b/config_db.json",
                                       "t0-p0-r0.json", "t0-p0-r0/frr.conf")] == [None] * 4


# -- what is refused ------------------------------------------------------------------


def test_bad_json_names_the_line_and_column(compiled):
    (p,) = problems(compiled, '{\n    "STATIC_ROUTE": {\n        "x": 1,\n    }\n}\n')
    assert p.startswith("t0-p0-r0/config_db.json line 4 col 5: not JSON:")


def test_every_problem_of_a_file_is_named_at_once(compiled):
    db = {
        "SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::"},
                             "wide": {"prefix": "fcbb:bb00:101::", "func_len": 127}},
        "SRV6_MY_SIDS": {
            "nowhere|fcbb:bb00:100::/48": {"action": "uN"},
            "loc1|fcbb:bb00:100::/129": {"action": "uN"},
            "loc1|fcbb:bb00:100:1::/64": {"action": "uX"},
            "loc1|fcbb:bb00:100:2::/64": {"action": 7},
            "loc1|fcbb:bb00:200::/48": {"action": "uN"},
            "wide|fcbb:bb00:101::/48": {"action": "uN"}},
        "STATIC_ROUTE": {
            "default|fcbb:bb00:200::/48": {"nexthop": "fe80::200,fe80::201",
                                           "ifname": "Ethernet8,Ethernet12"},
            "default|fcbb:bb00:201::/48": {"nexthop": 5, "ifname": "Ethernet12"},
            "default|fcbb:bb00:300::/48": {"nexthop": "fe80::300"},
            "default|fcbb:bb00:301::/48": {"nexthop": "fe80::301", "ifname": "Ethernet4",
                                           "nexthop-vrf": "VrfBlue"},
            "default|fcbb:bb00:zz::/48": {"nexthop": "fe80::1", "ifname": "Ethernet0"},
            "VrfBlue|fcbb:bb00:300::/48": {"nexthop": 5}}}
    found = problems(compiled, db)
    f = "t0-p0-r0/config_db.json"
    expected = [
        f"{f} SRV6_MY_LOCATORS|wide: block_len + node_len + func_len + arg_len is 175, over 128",
        f"{f} SRV6_MY_SIDS|nowhere|fcbb:bb00:100::/48: locator 'nowhere' is not in "
        "SRV6_MY_LOCATORS",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:100::/129: 'fcbb:bb00:100::/129' is not an IPv6 prefix",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:100:1::/64.action: unknown action 'uX'",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:100:2::/64.action: is a number (7), not a string",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:200::/48: fcbb:bb00:200::/48 is outside locator "
        "loc1's prefix fcbb:bb00:100::/48",
        f"{f} STATIC_ROUTE|default|fcbb:bb00:200::/48: 2 next hops (ECMP): MRC's tables hold "
        "one per destination",
        f"{f} STATIC_ROUTE|default|fcbb:bb00:201::/48.nexthop: is a number (5), not a string",
        f"{f} STATIC_ROUTE|default|fcbb:bb00:300::/48.ifname: missing: twin's next hops "
        "(fe80::<uSID>) are reached out of a named port",
        f"{f} STATIC_ROUTE|default|fcbb:bb00:301::/48.nexthop-vrf: leaks into VRF VrfBlue; "
        "the fabric has one table",
        f"{f} STATIC_ROUTE|default|fcbb:bb00:zz::/48: 'fcbb:bb00:zz::/48' is not an IP prefix",
    ]
    assert found == expected


def test_problems_carry_hints_and_render_without_a_traceback(compiled):
    db = {"SRV6_MY_SIDS": {"loc9|fcbb:bb00:100::/48": {}}}
    with pytest.raises(SpecError) as e:
        parse(compiled, json.dumps(db))
    text = e.value.render()
    assert text.startswith("t0-p0-r0/config_db.json: 2 problems in the route tables")
    assert "SRV6_MY_SIDS|loc9|fcbb:bb00:100::/48.action: missing: a SID needs its action" in text
    assert "hint: add SRV6_MY_LOCATORS|loc9" in text and "Traceback" not in text


def test_the_shape_of_the_file_is_checked(compiled):
    f = "t0-p0-r0/config_db.json"
    assert problems(compiled, "[]") == [f"{f}: is a list, not an object of tables"]
    assert problems(compiled, {"STATIC_ROUTE": [], "SRV6_MY_SIDS": {"a|::/0": "uN"}}) == [
        f"{f} SRV6_MY_SIDS|a|::/0: is a string, not an object of fields",
        f"{f} STATIC_ROUTE: is a list, not an object of entries"]
    twice = ('{"STATIC_ROUTE": {"default|fcbb:bb00:200::/48": {"ifname": "Ethernet8"},'
             ' "default|fcbb:bb00:200::/48": {"ifname": "Ethernet12"}}}')
    assert problems(compiled, twice) == [
        f"{f}: key 'default|fcbb:bb00:200::/48' is written twice in one object; JSON keeps "
        "only the last"]


def test_one_route_written_under_two_keys_is_refused(compiled):
    db = {"STATIC_ROUTE": {"fcbb:bb00:200::/48": {"ifname": "Ethernet8"},
                           "default|fcbb:bb00:200::/48": {"ifname": "Ethernet12"}}}
    assert problems(compiled, db) == [
        "t0-p0-r0/config_db.json STATIC_ROUTE|default|fcbb:bb00:200::/48: route "
        "fcbb:bb00:200::/48 is also at STATIC_ROUTE|fcbb:bb00:200::/48"]


def test_a_sid_under_an_unreadable_locator_is_not_blamed_twice(compiled):
    db = {"SRV6_MY_LOCATORS": {"loc1": {"prefix": "not-an-address"}},
          "SRV6_MY_SIDS": {"loc1|fcbb:bb00:100::/48": {"action": "uN"}}}
    assert problems(compiled, db) == [
        "t0-p0-r0/config_db.json SRV6_MY_LOCATORS|loc1.prefix: 'not-an-address' is not an "
        "IPv6 address"]
