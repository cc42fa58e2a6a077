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
from twin.routes import formats, tables
from twin.routes.formats import sonic
from twin.routes.tables import NodeTables

DATA = Path(__file__).resolve().parents[1] / "data" / "routes" / "sonic"
SONIC = formats.get("sonic")


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


# -- SONiC's own examples: each loads, or is refused for the reason SONiC refuses it -------


def cases(name: str) -> list[tuple[str, dict]]:
    """sonic-yang's test cases (tests_config/*.json), transcribed to config_db's form."""
    return list(json.loads((DATA / name).read_text()).items())


def test_the_static_config_test_of_sonic_mgmt_loads(compiled):
    """sonic-net/sonic-mgmt tests/srv6/test_srv6_static_config.py: a uN SID, and a uDT46
    that decapsulates into Vrf1 (`config vrf add Vrf1`), which twin keeps as dropping:
    the NIC address is in the default VRF."""
    t = example(compiled, "sonic-mgmt-srv6-static-config.json")
    assert t.sids == (LocalSid("fcbb:bbbb:1::/48", UN, "", 32, 16),)
    (d,) = t.dropping
    assert (d.prefix, d.what) == ("fcbb:bbbb:1:2::/64", "uDT46 decap_vrf Vrf1")
    assert "Vrf1" in d.why and "default VRF" in d.why


def test_the_generic_config_updater_patch_of_sonic_mgmt_loads(compiled):
    """sonic-net/sonic-mgmt tests/generic_config_updater/test_srv6.py: the JSON patch
    `config apply-patch` takes, which is YANG-validated on the switch."""
    t = example(compiled, "sonic-mgmt-gcu-srv6.json")
    assert t.sids == (LocalSid("fcbb:bbbb:1::/48", UN, "", 32, 16),)


@pytest.mark.parametrize("name, db", cases("sonic-yang-srv6-cases.json"))
def test_sonic_yangs_srv6_cases_load_or_are_refused_as_there(compiled, name, db):
    """Every valid case of sonic-buildimage's sonic-srv6.yang tests loads; every invalid
    one is refused, for the rule sonic-yang names."""
    f = "t0-p0-r0/config_db.json"
    refused = {
        "SRV6_MY_LOCATOR_INVALID_FUNC_LEN": [
            f"{f} SRV6_MY_LOCATORS|MAIN: block_len + node_len + func_len + arg_len is 175, "
            "over 128 (a must of sonic-srv6.yang)"],
        "SRV6_MY_LOCATOR_INVALID_VRF": [
            f"{f} SRV6_MY_LOCATORS|MAIN.vrf: VRF 'Vrf1' is not in the VRF table, and not "
            '"default" (a leafref in sonic-srv6.yang)'],
        "SRV6_MY_SID_INVALID_LOCATOR": [
            f"{f} SRV6_MY_SIDS|None|FCBB:BBBB:20::/48: locator 'None' is not in "
            "SRV6_MY_LOCATORS"],
        "SRV6_MY_SID_INVALID_IP_PREFIX": [
            f"{f} SRV6_MY_SIDS|MAIN|FCBB:BBBB:21::: 'FCBB:BBBB:21::' has no prefix length: "
            "the key is <locator>|<prefix> (inet:ipv6-prefix) since sonic-srv6.yang's second "
            "revision; <locator>|<address> is its first (January 2025), which bgpcfgd no "
            "longer reads"],
        "SRV6_MY_SID_ADJ_INVALID_ACTION": [
            f"{f} SRV6_MY_SIDS|MAIN|FCBB:BBBB:20::/48.adj: adj is only applicable when "
            "action is 'uA' (sonic-srv6.yang)"],
    }
    no_interface = [f"{f} SRV6_MY_SIDS|MAIN|FCBB:BBBB:FE00::/48.interface: missing: "
                    "interface is mandatory when action is 'uA' (sonic-srv6.yang; bgpcfgd "
                    "skips the SID too)"]
    for case in ("SRV6_MY_SID_INVALID_ACTION", "SRV6_MY_SID_UA_MISSING_INTERFACE",
                 "SRV6_MY_SID_UA_MISSING_BOTH"):
        refused[case] = no_interface
    if name in refused:
        assert problems(compiled, db) == refused[name]
        return
    t = parse(compiled, json.dumps(db))
    if name == "SRV6_VALID":  # upper-case prefixes read in twin's spelling; uDT46 a decap
        assert t.sids == (LocalSid("fcbb:bbbb:20::/48", UN, "", 32, 16),
                          LocalSid("fcbb:bbbb:20:f1::/64", DECAP, "", 32, 16))
        assert str(t.origin(t.sids[1])) == \
            "t0-p0-r0/config_db.json SRV6_MY_SIDS|MAIN|FCBB:BBBB:20:F1::/64"
    else:  # a uA, with and without its adj: kept as dropping
        assert name in ("SRV6_MY_SID_UA_VALID", "SRV6_MY_SID_UA_MISSING_ADJ")
        (ua,) = t.dropping
        assert ua.prefix == "fcbb:bbbb:fe00::/48" and "adjacency" in ua.why
        assert ua.what == "uA interface Ethernet0" + (
            " adj fe80::1" if name == "SRV6_MY_SID_UA_VALID" else "")


@pytest.mark.parametrize("name, db", cases("sonic-yang-static-route-cases.json"))
def test_sonic_yangs_static_route_cases_load_or_are_refused_as_there(compiled, name, db):
    """Every case of sonic-static-route.yang's tests: the valid ones load (IPv4, so no
    route of the fabric: ECMP in them is no matter), the invalid ones are refused."""
    where = "t0-p0-r0/config_db.json STATIC_ROUTE|default|16.16.16.0/24"
    yang = "sonic-static-route.yang"
    bools = f"does not match {yang}'s pattern ((true|false),)*(true|false)"
    vrfs = f"is not a list of VRF names (default, mgmt or Vrf<name>; {yang})"
    refused = {
        "STATIC_ROUTE_TEST_DISTANCE_INVALID": [
            f"{where}.distance: '300' is not a list of distances 0 to 255 ({yang})"],
        "STATIC_ROUTE_TEST_ECMP_DISTANCE_INVALID": [
            f"{where}.distance: '1000,1' is not a list of distances 0 to 255 ({yang})"],
        "STATIC_ROUTE_TEST_BLACKHOLE_INVALID": [f"{where}.blackhole: 'down' {bools}"],
        "STATIC_ROUTE_TEST_ECMP_BLACKHOLE_INVALID": [f"{where}.blackhole: 'no,no' {bools}"],
        "STATIC_ROUTE_TEST_WITH_ADVERTISE_INVALID": [f"{where}.advertise: 'down' {bools}"],
        "STATIC_ROUTE_TEST_NEXTHOP_VRF_INVALID": [
            f"{where}.nexthop-vrf: 'vrf123' {vrfs}",
            f"{where}.nexthop: '1.0.05' is not an IPv4 address (bgpcfgd refuses the route)"],
        "STATIC_ROUTE_TEST_ECMP_NEXTHOP_VRF_INVALID": [
            f"{where}.nexthop-vrf: 'vrf123,xyz' {vrfs}"],
    }
    if name in refused:
        assert problems(compiled, db) == refused[name]
    else:
        t = parse(compiled, json.dumps(db))
        assert (t.routes, t.sids, t.dropping) == ((), (), ())


def test_the_snake_example_of_sonic_mgmt_is_refused_for_its_locator_prefixes(compiled):
    """sonic-net/sonic-mgmt docs/testplan/snappi/srv6_performance_test.md, as first
    written: its locators give `prefix` a length, which sonic-srv6.yang refuses and
    bgpcfgd turns into fcbb:bbbb:1::/48/48 (the PR itself later removed the lengths)."""
    found = problems(compiled, (DATA / "sonic-mgmt-srv6-performance.json").read_text())
    assert found == [
        f"t0-p0-r0/config_db.json SRV6_MY_LOCATORS|loc{n}.prefix: 'fcbb:bbbb:{n}::/48' has "
        "a length: sonic-srv6.yang types a locator's prefix as inet:ipv6-address, and "
        "bgpcfgd appends /block_len+node_len itself (a length is frrcfgd's spelling)"
        for n in range(1, 6)]


def test_the_snake_example_loads_once_its_prefixes_are_addresses(compiled):
    """The same file with the fix the PR made: five uN locators and five static routes.
    Its ports (Ethernet1, 3, ... on a one-lane-per-port platform) fit no sonic-vs port,
    so they stay as written, for the check to report."""
    db = json.loads((DATA / "sonic-mgmt-srv6-performance.json").read_text())
    for loc in db["SRV6_MY_LOCATORS"].values():
        loc["prefix"] = loc["prefix"].removesuffix("/48")
    t = parse(compiled, json.dumps(db))
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


def test_frrcfgds_dialect_of_sonic_mgmts_7node_pe_is_named(compiled):
    """sonic-net/sonic-mgmt ansible/vars/configdb_jsons/7nodes_cisco/PE1.json is read by
    frrcfgd (frr_mgmt_framework_config true), whose locators have `argu_len` and a prefix
    with a length; sonic-srv6.yang and bgpcfgd take neither."""
    found = problems(compiled, (DATA / "sonic-mgmt-7nodes-pe1.json").read_text())
    where = "t0-p0-r0/config_db.json SRV6_MY_LOCATORS|lsid1"
    assert found == [
        f"{where}.argu_len: is not a field of SRV6_MY_LOCATORS in sonic-srv6.yang",
        f"{where}.prefix: 'fd00:201:201::/48' has a length: sonic-srv6.yang types a "
        "locator's prefix as inet:ipv6-address, and bgpcfgd appends /block_len+node_len "
        "itself (a length is frrcfgd's spelling)"]
    with pytest.raises(SpecError) as e:
        example(compiled, "sonic-mgmt-7nodes-pe1.json")
    assert "write arg_len" in e.value.problems[0].hint


def test_the_static_routes_of_bgpcfgds_tests_are_refused_where_the_model_refuses_them(
        compiled):
    """sonic-net/sonic-buildimage src/sonic-bgpcfgd/tests/test_static_rt.py hands bgpcfgd
    entries sonic-static-route.yang refuses: VRF names `vrfRED` and `nh_vrf` (SONiC's
    begin Vrf). bgpcfgd's unit tests never meet the model; a switch's config does."""
    where = "t0-p0-r0/config_db.json STATIC_ROUTE|"
    vrfs = "is not a list of VRF names (default, mgmt or Vrf<name>; sonic-static-route.yang)"
    assert problems(compiled, (DATA / "bgpcfgd-static-route.json").read_text()) == [
        f"{where}default|10.1.2.0/24.nexthop-vrf: 'nh_vrf' {vrfs}",
        f"{where}vrfRED|10.1.3.0/24: VRF 'vrfRED' does not match sonic-static-route.yang's "
        "vrf_name (default, mgmt or Vrf<name>)",
        f"{where}vrfRED|10.1.3.0/24.nexthop-vrf: 'nh_vrf,,default' {vrfs}"]


def test_the_older_single_table_schema_is_named_with_a_hint_to_migrate(compiled):
    """sonic-net/SONiC doc/srv6/srv6_static_config_hld.md's draft (and the 2021 SRv6 HLD):
    one SRV6_MY_SID_TABLE; SONiC's CONFIG_DB took two tables instead."""
    with pytest.raises(SpecError) as e:
        example(compiled, "sonic-hld-srv6-my-sid-table.json")
    (p,) = e.value.problems
    assert (p.path, p.message) == (
        "t0-p0-r0/config_db.json SRV6_MY_SID_TABLE",
        "is the older single-table SRv6 schema (2 SIDs, each with its own lengths): SONiC's "
        "SRv6 HLD of 2021 and APPL_DB's table for srv6orch; bgpcfgd reads SRV6_MY_LOCATORS "
        "and SRV6_MY_SIDS and ignores it")
    assert p.hint.startswith("migrate: one SRV6_MY_LOCATORS entry per locator")


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
          "SRV6_MY_SIDS": {"loc|fcbb:bb00:1302::/48": {"action": "uDT46"},
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


@pytest.mark.parametrize("action, hint", [
    ("UN", '"action": "uN"'), ("un", '"action": "uN"'), ("udt46", '"action": "uDT46"'),
    ("UA", '"action": "uA"'), ("End", "APPL_DB"), ("uDT6", "APPL_DB"),
    ("End.DT46", "APPL_DB"), ("uX", "APPL_DB")])
def test_an_action_is_one_of_the_yang_enum_spelled_as_it_spells_them(compiled, action, hint):
    """sonic-srv6.yang's enum is uN, uA, uDT46, and bgpcfgd compares the action with them
    case and all; the other names srv6orch knows are APPL_DB's, which config never reaches."""
    db = {"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::"}},
          "SRV6_MY_SIDS": {"loc1|fcbb:bb00:100::/48": {"action": action}}}
    with pytest.raises(SpecError) as e:
        parse(compiled, json.dumps(db))
    (p,) = e.value.problems
    assert p.path == "t0-p0-r0/config_db.json SRV6_MY_SIDS|loc1|fcbb:bb00:100::/48.action"
    assert p.message.startswith(f"{action!r} is not one of sonic-srv6.yang's uN, uA, uDT46")
    assert p.message.endswith("(an enum is case-sensitive)") == (hint[0] == '"')
    assert hint in p.hint


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
    """A uDT46 into a VRF (and the VRF, as `config vrf add` writes it), a uA with its
    interface and adj: written so that the strict reading takes them back."""
    t = example(compiled, "sonic-mgmt-srv6-static-config.json")
    ua = parse(compiled, json.dumps(dict(cases("sonic-yang-srv6-cases.json"))[
        "SRV6_MY_SID_UA_VALID"])).dropping
    both = NodeTables("t0-p0-r0", (), t.sids, t.dropping + ua)
    text = SONIC.render(both, compiled.fabric)
    assert json.loads(text)["VRF"] == {"Vrf1": {}}
    back = parse(compiled, text)
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
            "VrfBlue|fcbb:bb00:300::/48": {"nexthop": "fe80::1"}}}
    found = problems(compiled, db)
    f = "t0-p0-r0/config_db.json"
    expected = [
        f"{f} SRV6_MY_LOCATORS|wide: block_len + node_len + func_len + arg_len is 175, over "
        "128 (a must of sonic-srv6.yang)",
        f"{f} SRV6_MY_SIDS|nowhere|fcbb:bb00:100::/48: locator 'nowhere' is not in "
        "SRV6_MY_LOCATORS",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:100::/129: 'fcbb:bb00:100::/129' is not an IPv6 "
        "prefix",
        f"{f} SRV6_MY_SIDS|loc1|fcbb:bb00:100:1::/64.action: 'uX' is not one of "
        "sonic-srv6.yang's uN, uA, uDT46",
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


# -- as strict as SONiC: each rule, one file breaking it ------------------------------

LOC = {"loc1": {"prefix": "fcbb:bb00:100::"}}
SID = "loc1|fcbb:bb00:100::/48"
ROUTE = "default|fcbb:bb00:200::/48"
HOP = {"nexthop": "fe80::200", "ifname": "Ethernet8"}


@pytest.mark.parametrize("db, where, message", [
    # locators: sonic-srv6.yang's types and ranges, bgpcfgd's prefix
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::1"}}}, "SRV6_MY_LOCATORS|loc1"
     ".prefix", "fcbb:bb00:100::1 has bits set past block_len + node_len (48): bgpcfgd's "
     "locator prefix fcbb:bb00:100::1/48 has host bits, and it refuses it"),
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::", "block_len": "0"}}},
     "SRV6_MY_LOCATORS|loc1.block_len", "0 is not an integer 1 to 128 (uint8 range 1..128 "
     "in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::", "node_len": 16.0}}},
     "SRV6_MY_LOCATORS|loc1.node_len", "16.0 is not an integer 1 to 128 (uint8 range 1..128 "
     "in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::", "func_len": " 16"}}},
     "SRV6_MY_LOCATORS|loc1.func_len", "' 16' is not an integer 0 to 128 (uint8 range "
     "0..128 in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::", "arg_len": True}}},
     "SRV6_MY_LOCATORS|loc1.arg_len", "true is not an integer 0 to 128 (uint8 range 0..128 "
     "in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": {"loc1": {"prefix": "fcbb:bb00:100::", "vrf": "Vrf1"}}},
     "SRV6_MY_LOCATORS|loc1.vrf", "VRF 'Vrf1' is not in the VRF table, and not \"default\" "
     "(a leafref in sonic-srv6.yang)"),
    # SIDs: the key's prefix, the enum's spelling, the model's leaves and musts
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {"loc1|fcbb:bb00:100::1/48": {"action": "uN"}}},
     "SRV6_MY_SIDS|loc1|fcbb:bb00:100::1/48", "'fcbb:bb00:100::1/48' has host bits set: "
     "bgpcfgd's IPv6Network refuses it and installs nothing"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {"loc1|fcbb:bb00:100::": {"action": "uN"}}},
     "SRV6_MY_SIDS|loc1|fcbb:bb00:100::", "'fcbb:bb00:100::' has no prefix length: the key "
     "is <locator>|<prefix> (inet:ipv6-prefix) since sonic-srv6.yang's second revision; "
     "<locator>|<address> is its first (January 2025), which bgpcfgd no longer reads"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {SID: {"action": "uN", "dscp_mode": "pipe"}}},
     f"SRV6_MY_SIDS|{SID}.dscp_mode", "is not a field of SRV6_MY_SIDS in sonic-srv6.yang"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {SID: {"action": "uN", "block_len": "32"}}},
     f"SRV6_MY_SIDS|{SID}.block_len", "is not a field of SRV6_MY_SIDS in sonic-srv6.yang"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {SID: {"action": "uN",
                                                       "decap_dscp_mode": "Pipe"}}},
     f"SRV6_MY_SIDS|{SID}.decap_dscp_mode", "'Pipe' is not one of sonic-srv6.yang's "
     "uniform, pipe"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {
        "loc1|fcbb:bb00:100:1::/64": {"action": "uDT46", "decap_vrf": "Vrf1"}}},
     "SRV6_MY_SIDS|loc1|fcbb:bb00:100:1::/64.decap_vrf", "VRF 'Vrf1' is not in the VRF "
     "table, and not \"default\" (a leafref in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": LOC, "PORT": {"Ethernet0": {}}, "SRV6_MY_SIDS": {
        "loc1|fcbb:bb00:100:e000::/64": {"action": "uA", "interface": "Ethernet4"}}},
     "SRV6_MY_SIDS|loc1|fcbb:bb00:100:e000::/64.interface", "'Ethernet4' is not in the PORT "
     "table (a leafref in sonic-srv6.yang)"),
    ({"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {
        "loc1|fcbb:bb00:100:e000::/64": {"action": "uA", "interface": "Ethernet4",
                                         "adj": "10.0.0.1"}}},
     "SRV6_MY_SIDS|loc1|fcbb:bb00:100:e000::/64.adj", "'10.0.0.1' is not an IPv6 address"),
    # routes: sonic-static-route.yang's patterns and bgpcfgd's next-hop lists
    ({"STATIC_ROUTE": {ROUTE: {"blackhole": "True"}}}, f"STATIC_ROUTE|{ROUTE}.blackhole",
     "'True' does not match sonic-static-route.yang's pattern ((true|false),)*(true|false)"),
    ({"STATIC_ROUTE": {ROUTE: {**HOP, "bfd": "TRUE"}}}, f"STATIC_ROUTE|{ROUTE}.bfd",
     "'TRUE' does not match sonic-static-route.yang's pattern ((true|false),)*(true|false)"),
    ({"STATIC_ROUTE": {"fcbb:bb00:200::": HOP}}, "STATIC_ROUTE|fcbb:bb00:200::",
     "'fcbb:bb00:200::' has no prefix length (inet:ip-prefix in sonic-static-route.yang)"),
    ({"STATIC_ROUTE": {"red|fcbb:bb00:200::/48": HOP}}, "STATIC_ROUTE|red|fcbb:bb00:200::/48",
     "VRF 'red' does not match sonic-static-route.yang's vrf_name (default, mgmt or "
     "Vrf<name>)"),
    ({"STATIC_ROUTE": {ROUTE: {**HOP, "distance": "10,20"}}}, f"STATIC_ROUTE|{ROUTE}",
     "its next-hop lists have different lengths (nexthop 1, ifname 1, distance 2): bgpcfgd "
     "refuses the route"),
    ({"STATIC_ROUTE": {ROUTE: {"nexthop": "10.0.0.1", "ifname": "Ethernet8"}}},
     f"STATIC_ROUTE|{ROUTE}.nexthop", "'10.0.0.1' is not an IPv6 address (bgpcfgd refuses "
     "the route)"),
    ({"STATIC_ROUTE": {ROUTE: {**HOP, "metric": "5"}}}, f"STATIC_ROUTE|{ROUTE}.metric",
     "is not a field of STATIC_ROUTE in sonic-static-route.yang"),
])
def test_each_rule_sonic_keeps_is_named_with_the_rule(compiled, db, where, message):
    assert problems(compiled, db) == [f"t0-p0-r0/config_db.json {where}: {message}"]


def test_a_field_of_an_older_schema_is_named_with_where_it_went(compiled):
    db = {"SRV6_MY_LOCATORS": LOC, "SRV6_MY_SIDS": {SID: {"action": "uN", "vrf": "default"}}}
    with pytest.raises(SpecError) as e:
        parse(compiled, json.dumps(db))
    (p,) = e.value.problems
    assert p.hint.endswith("write decap_vrf (vrf is SRV6_MY_SID_TABLE's)")


def test_errors_quote_a_hostile_file_only_in_short_tokens(compiled):
    """A key or a value is cut to a few dozen characters and escaped in every error."""
    long = "Vrf" + "x" * 5000
    db = {"STATIC_ROUTE": {f"{long}|10.0.0.0/8": {"nexthop-vrf": "vrf\x1b[2J" + "y" * 5000}}}
    with pytest.raises(SpecError) as e:
        parse(compiled, json.dumps(db))
    text = e.value.render()
    assert "x" * 100 not in text and "y" * 100 not in text and "\x1b" not in text
    assert all(len(p.path) + len(p.message) < 300 for p in e.value.problems)


def test_what_sonic_takes_in_more_than_one_spelling_loads(compiled):
    """Bit lengths as numbers or digit strings (sonic-yang turns both into its uint8);
    upper-case addresses (bgpcfgd lowers them); a route's host bits (the model allows
    them, FRR masks them); an empty nexthop-vrf (the model's pattern allows it)."""
    db = {"SRV6_MY_LOCATORS": {"loc1": {"prefix": "FCBB:BB00:100::", "block_len": 32,
                                        "node_len": "16", "func_len": "0", "vrf": "default"}},
          "SRV6_MY_SIDS": {"loc1|FCBB:BB00:100::/48": {"action": "uN"}},
          "STATIC_ROUTE": {"default|fcbb:bb00:200::1/48": {**HOP, "nexthop-vrf": "",
                                                           "distance": "0",
                                                           "blackhole": "false"}}}
    t = parse(compiled, json.dumps(db))
    assert t.sids == (LocalSid("fcbb:bb00:100::/48", UN, "", 32, 16),)
    assert t.routes == (Route("fcbb:bb00:200::/48", "eth3", via="fe80::200"),)


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
