"""Cumulus Linux NVUE's startup.yaml as route tables (twin.routes.formats.nvue): NVIDIA's
documented examples (tests/data/routes/nvue, SOURCES.md), twin's plan out and back, the
check on an export, and every refusal, each named by file, line and key path.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import cli, golden
from twin.errors import SpecError
from twin.fabric.plan import DECAP, UN, LocalSid, Route
from twin.routes import check as C
from twin.routes import formats, tables
from twin.routes.formats import nvue
from twin.routes.tables import Dropping, NodeTables

DATA = Path(__file__).resolve().parents[1] / "data" / "routes" / "nvue"
NVUE = formats.get("nvue")
F = "t0-p0-r0/startup.yaml"


def parse(compiled, text: str, node: str = "t0-p0-r0") -> NodeTables:
    return NVUE.parse(text, node, f"{node}/startup.yaml", compiled.fabric)


def problems(compiled, text: str, node: str = "t0-p0-r0") -> list[str]:
    with pytest.raises(SpecError) as e:
        parse(compiled, text, node)
    assert e.value.what == formats.WHAT
    return [f"{p.path}: {p.message}" for p in e.value.problems]


def srv6(locator: str = "", sids: str = "", state: str = "enabled") -> str:
    """A startup.yaml with a locator LOC (its fields indented under it) and SIDs."""
    return ("- set:\n    router:\n      segment-routing:\n        srv6:\n"
            + (f"          state: {state}\n" if state else "")
            + "          locator:\n            LOC:\n"
            + (locator or "              prefix: fcbb:bb00:100::/48\n"
                          "              block-length: 32\n")
            + "        static:\n          srv6-sid:\n" + sids)


def sid(prefix: str, *fields: str) -> str:
    return f"            {prefix}:\n" + "".join(f"              {f}\n" for f in fields)


def routes(*entries: str) -> str:
    head = "- set:\n    vrf:\n      default:\n        router:\n          static:\n"
    return head + "".join(entries)


def route(prefix: str, body: str) -> str:
    return f"            {prefix}:\n" + "".join(f"              {line}\n"
                                               for line in body.splitlines())


# -- NVIDIA's own examples ------------------------------------------------------------------


def test_the_user_guides_segment_routing_example_loads(compiled):
    """Cumulus Linux 5.14's example: locator LEAF (fcbb::/16, uA only) and a uA SID on
    swp1, kept as dropping; the header (model, version) is not read."""
    t = parse(compiled, (DATA / "cl514-segment-routing.yaml").read_text())
    assert t.sids == () and t.routes == ()
    (d,) = t.dropping
    assert (d.prefix, d.what) == ("fcbb:fe8::/32", "uA interface swp1")
    assert "adjacency" in d.why
    assert str(t.origin(d)) == f"{F} line 23"


def test_the_references_examples_load_with_their_host_bits_cleared(compiled):
    """The NVUE reference writes the locator 2001:db8:1:1::/32 and the SID
    2001:db8:1:1::100/48; FRR and the kernel install their networks."""
    t = parse(compiled, (DATA / "nvue-reference-segment-routing.yaml").read_text())
    (d,) = t.dropping
    assert (d.prefix, d.what) == ("2001:db8:1::/48", "uA interface swp1")


def test_the_static_routing_guides_routes_load(compiled):
    """IPv4 routes and routes of vrf BLUE meet no packet of the fabric and are not read;
    `default6` is ::/0; swp51 is eth51; the interface section is the addressing plan's."""
    t = parse(compiled, (DATA / "cl514-static-routing.yaml").read_text())
    assert t.routes == (Route("::/0", "eth51", via="fe80::200"),)
    assert str(t.origin(t.routes[0])) == f"{F} line 27"


def test_netlabs_template_output_is_refused_with_why(compiled):
    """netlab writes one `- set:` per route, and a next hop address without its port."""
    assert problems(compiled, (DATA / "netlab-static-routes.yaml").read_text()) == [
        f"{F} line 17 [2].set: a second `- set:`: nv config show prints one",
        f"{F} line 27 [3].set: a second `- set:`: nv config show prints one",
        f"{F} line 15 vrf.default.router.static.fcbb:bb00:200::/48.via.fe80::200: missing: "
        "twin's next hops (fe80::<uSID>) are reached out of a named port: interface"]


# -- ports ---------------------------------------------------------------------------------


def test_swp_ports_are_twins_eth_ports_by_number():
    """containerlab's cvx kind wires a Cumulus port by its swp name; eth0 is management
    on both, so swpN is ethN."""
    assert [nvue.nvue_port(f"eth{n}") for n in (1, 2, 32)] == ["swp1", "swp2", "swp32"]
    assert all(nvue.twin_port(nvue.nvue_port(f"eth{n}")) == f"eth{n}" for n in range(1, 65))
    assert [nvue.twin_port(n) for n in ("swp1s0", "swp0", "bond1", "eth3", "eth0")] == \
        ["swp1s0", "swp0", "bond1", "eth3", "eth0"]
    assert [nvue.nvue_port(n) for n in ("eth0", "lo", "swp3")] == ["eth0", "lo", "swp3"]


# -- what a SID reads as -------------------------------------------------------------------


def test_a_un_takes_its_locators_block_and_node_lengths(compiled):
    t = parse(compiled, srv6(sids=sid("fcbb:bb00:100::/48", "behavior: uN",
                                      "locator-name: LOC")))
    assert t.sids == (LocalSid("fcbb:bb00:100::/48", UN, "", 32, 16),)
    assert str(t.origin(t.sids[0])) == f"{F} line 12"


def test_a_locator_without_lengths_has_nvues_defaults(compiled):
    """NVUE's block-length default is 16, not 32: the check then finds a uN of another
    format than F3216."""
    t = parse(compiled, srv6("              prefix: fcbb:bb00::/32\n",
                             sid("fcbb:bb00::/32", "behavior: uN", "locator-name: LOC")))
    assert t.sids == (LocalSid("fcbb:bb00::/32", UN, "", 16, 16),)


def test_a_hosts_decap_is_on_its_interface_or_on_every_port(compiled):
    text = srv6("              prefix: fcbb:bb00:1302::/48\n              block-length: 32\n",
                sid("fcbb:bb00:1302::/48", "behavior: uDT6", "interface: swp2",
                    "locator-name: LOC")
                + sid("fcbb:bb00:1302:1::/64", "behavior: uDT46", "vrf: default",
                      "locator-name: LOC"))
    t = parse(compiled, text, "r1h0")
    assert [(s.prefix, s.behavior, s.dev) for s in t.sids] == [
        ("fcbb:bb00:1302::/48", DECAP, "eth2"), ("fcbb:bb00:1302:1::/64", DECAP, "")]


@pytest.mark.parametrize("fields, what, why", [
    (("behavior: uDT46", "vrf: Vrf1"), "uDT46 vrf Vrf1", "VRF Vrf1"),
    (("behavior: uDT4",), "uDT4", "IPv4"),
    (("behavior: uA", "interface: swp3"), "uA interface swp3", "adjacency"),
])
def test_what_twin_does_not_install_is_kept_as_dropping_with_why(compiled, fields, what, why):
    t = parse(compiled, srv6(sids=sid("fcbb:bb00:100:e000::/64", *fields,
                                      "locator-name: LOC")))
    (d,) = t.dropping
    assert (d.prefix, d.what) == ("fcbb:bb00:100:e000::/64", what) and why in d.why


@pytest.mark.parametrize("state", ["disabled", ""])
def test_sids_of_a_switch_without_segment_routing_enabled_drop(compiled, state):
    t = parse(compiled, srv6(sids=sid("fcbb:bb00:100::/48", "behavior: uN",
                                      "locator-name: LOC"), state=state))
    (d,) = t.dropping
    assert t.sids == () and d.what == f"uN (srv6 state {state or 'unset'})"
    assert "router.segment-routing.srv6.state" in d.why


# -- what a route reads as -----------------------------------------------------------------


def test_every_kind_of_via_reads_as_its_route(compiled):
    t = parse(compiled, routes(
        route("fcbb:bb00:200::/48", "via:\n  fe80::200:\n    interface: swp3\n"
                                    "    type: ipv6-address\n    flag: onlink"),
        route("fcbb:bb00:201::/48", "via:\n  fe80::201:\n    interface: eth4"),
        route("fcbb:bb00:300::/48", "via:\n  swp1:\n    type: interface"),
        route("fcbb:bb00:900::/48", "via:\n  blackhole:\n    type: blackhole"),
        route("fcbb:bb00:901::/48", "via:\n  reject: {}"),
        route("fcbb:bb00:902::/48", "tag: 7\naddress-family: ipv6-unicast\n"
                                    "via:\n  blackhole: {}")))
    assert t.routes == (
        Route("fcbb:bb00:200::/48", "eth3", via="fe80::200"),
        Route("fcbb:bb00:201::/48", "eth4", via="fe80::201"),
        Route("fcbb:bb00:300::/48", "eth1"),
        Route("fcbb:bb00:900::/48", "", type="blackhole"),
        Route("fcbb:bb00:901::/48", "", type="unreachable"),
        Route("fcbb:bb00:902::/48", "", type="blackhole"))


def test_routes_of_other_vrfs_and_ipv4_are_not_read(compiled):
    text = ("- set:\n    vrf:\n      BLUE:\n        router:\n          static:\n"
            "            fcbb:bb00:200::/48:\n              via:\n                x: 5\n"
            "      default:\n        router:\n          static:\n"
            "            10.0.0.0/8:\n              via:\n                10.0.0.1: {}\n"
            "            default:\n              via:\n                10.0.0.1: {}\n")
    assert parse(compiled, text).routes == ()


# -- twin's plan, out and back -------------------------------------------------------------


def test_every_node_of_mrc_4p_goes_out_and_comes_back_the_same(compiled):
    plan = tables.from_plan(compiled.plan)
    for node, t in plan.nodes.items():
        back = NVUE.parse(NVUE.render(t, compiled.fabric), node, NVUE.file_for(node),
                          compiled.fabric)
        assert (back.routes, back.sids, back.dropping) == (t.routes, t.sids, ()), node


@pytest.mark.parametrize("node", ["t0-p0-r0", "r0h0"])
def test_the_rendered_file_is_as_golden(compiled, node):
    """One T0 (a uN, routes up and down) and one host (four uDT6 decaps on their ports,
    a route to each plane's T0)."""
    text = NVUE.render(tables.from_plan(compiled.plan)[node], compiled.fabric)
    golden(f"routes/nvue/{node}.startup.yaml", text)


def test_droppings_go_out_and_come_back_and_the_rest_is_a_comment(compiled):
    dropping = (Dropping("fcbb:bb00:100:e000::/64", "uA interface swp3", "x"),
                Dropping("fcbb:bb00:100:e001::/64", "uDT46 vrf Vrf1", "x"),
                Dropping("fcbb:bb00:100:e002::/64", "uDT4", "x"))
    elsewhere = (Dropping("fcbb:bb00:100:e003::/64", "seg6local action End dev sr0", "x"),
                 Dropping("fcbb:bb00:100:e004::/64", "uA", "x"))
    prohibit = Route("fcbb:bb00:999::/48", "", type="prohibit")
    t = NodeTables("t0-p0-r0", (prohibit,), (), dropping + elsewhere)
    text = NVUE.render(t, compiled.fabric)
    back = parse(compiled, text)
    assert [(d.prefix, d.what) for d in back.dropping] == [(d.prefix, d.what) for d in dropping]
    assert back.routes == ()
    assert "# not expressible in NVUE: SID fcbb:bb00:100:e003::/64 seg6local" in text
    assert "# not expressible in NVUE: SID fcbb:bb00:100:e004::/64 uA\n" in text
    assert "# not expressible in NVUE: route prohibit fcbb:bb00:999::/48" in text


def test_files_are_claimed_by_their_directory():
    assert NVUE.file_for("t0-p0-r0") == F
    assert NVUE.node_of(F) == "t0-p0-r0"
    assert [NVUE.node_of(f) for f in ("startup.yaml", "a/b/startup.yaml", "t0-p0-r0.yaml",
                                      "t0-p0-r0/config_db.json")] == [None] * 4
    assert formats.get("sonic").node_of(F) is None


def test_an_export_is_detected_and_passes_the_check(compiled, tmp_path):
    result = cli("routes", "export", "mrc-4p", str(tmp_path), "--format", "nvue")
    assert result.exit_code == 0, result.output
    loaded = formats.load_dir(tmp_path, compiled.fabric)
    assert loaded.format == "nvue"
    plan = tables.from_plan(compiled.plan)
    assert {n: (t.routes, t.sids) for n, t in loaded.nodes.items()} == \
        {n: (t.routes, t.sids) for n, t in plan.nodes.items()}
    result = cli("routes", "check", "mrc-4p", str(tmp_path))
    assert result.exit_code == 0 and "PASS" in result.output, result.output


def test_a_missing_route_and_a_wrong_usid_are_named_with_file_and_line(compiled, tmp_path):
    formats.write_dir(tmp_path, tables.from_plan(compiled.plan), compiled.fabric, "nvue")
    t0 = tmp_path / "t0-p0-r0" / "startup.yaml"
    t0.write_text(re.sub(r"            fcbb:bb00:201::/48:\n(              .*\n|  +.*\n)*?"
                         r"(?=            fcbb)", "", t0.read_text()))
    t1 = tmp_path / "t1-p1-0" / "startup.yaml"
    t1.write_text(t1.read_text().replace("fcbb:bb00:1200::/48", "fcbb:bb00:1201::/48"))
    report = C.check(compiled.plan, formats.load_dir(tmp_path, compiled.fabric))
    causes = [c for c, _, _ in report.causes()]
    assert not report.ok
    assert any(c.startswith("t0-p0-r0: ") and "planned: route fcbb:bb00:201::/48 via "
               "fe80::201 dev eth4" in c for c in causes), causes
    texts = [f.text() for f in report.findings]
    assert any("SID fcbb:bb00:1201::/48 uN (F3216) (t1-p1-0/startup.yaml line 17): "
               "fcbb:bb00:1201::/48 is the uSID of t1-p1-1" in t for t in texts), texts


# -- what is refused -----------------------------------------------------------------------


def test_every_problem_of_the_segment_routing_tree_is_named_at_once(compiled):
    text = ("- set:\n    router:\n      segment-routing:\n        isis: {}\n        srv6:\n"
            "          state: up\n          locator:\n"
            "            LOC:\n              prefix: fcbb:bb00:100::/48\n"
            "              block-length: 32\n"
            "            SHORT:\n              prefix: fcbb:bb00:101::/40\n"
            "              block-length: 32\n"
            "            WIDE:\n              prefix: fcbb:bb00:102::/48\n"
            "              block-length: 8\n              node-length: '16'\n"
            "            NONE:\n              block-length: 32\n"
            "            FORMAT:\n              prefix: fcbb:bb00:103::/48\n"
            "              format: usid-f3216\n"
            "        static:\n          srv6-sid:\n"
            + sid("fcbb:bb00:100::/48", "behavior: UN", "locator-name: LOC")
            + sid("fcbb:bb00:100:1::/64", "behavior: uA", "locator-name: LOC")
            + sid("fcbb:bb00:100:2::/64", "behavior: uN", "interface: swp1",
                  "locator-name: LOC")
            + sid("fcbb:bb00:100:3::/64", "locator-name: LOC")
            + sid("fcbb:bb00:100:4::/64", "behavior: uN")
            + sid("fcbb:bb00:100:5::/64", "behavior: uN", "locator-name: NOWHERE")
            + sid("fcbb:bb00:200::/48", "behavior: uN", "locator-name: LOC")
            + sid("fcbb:bb00:100:6::/64", "behavior: uN", "locator-name: LOC",
                  "function: 6")
            + sid("fcbb:zz::/48", "behavior: uN", "locator-name: LOC")
            + sid("fcbb:bb00:100:7::/64", "behavior: 7", "locator-name: LOC"))
    p = "router.segment-routing"
    assert problems(compiled, text) == [
        f"{F} line 4 {p}.isis: segment-routing has no isis: twin does not model it",
        f"{F} line 6 {p}.srv6.state: 'up' is neither enabled nor disabled",
        f"{F} line 12 {p}.srv6.locator.SHORT.prefix: fcbb:bb00:100::/40 is /40, but "
        "block-length + node-length is 48",
        f"{F} line 16 {p}.srv6.locator.WIDE.block-length: 8 is not a length NVUE takes "
        "(16 to 64)",
        f"{F} line 17 {p}.srv6.locator.WIDE.node-length: '16' is not a length NVUE takes "
        "(0 to 64)",
        f"{F} line 18 {p}.srv6.locator.NONE: missing: a locator needs its prefix",
        f"{F} line 22 {p}.srv6.locator.FORMAT.format: a locator has no format: twin does "
        "not model it",
        f"{F} line 26 {p}.static.srv6-sid.fcbb:bb00:100::/48.behavior: unknown behavior 'UN'",
        f"{F} line 28 {p}.static.srv6-sid.fcbb:bb00:100:1::/64: missing: a uA SID needs its "
        "interface",
        f"{F} line 33 {p}.static.srv6-sid.fcbb:bb00:100:2::/64.interface: a uN acts on every "
        "port: interface is for uA",
        f"{F} line 35 {p}.static.srv6-sid.fcbb:bb00:100:3::/64: missing: a SID needs its "
        "behavior",
        f"{F} line 37 {p}.static.srv6-sid.fcbb:bb00:100:4::/64: missing: a SID needs its "
        "locator-name",
        f"{F} line 41 {p}.static.srv6-sid.fcbb:bb00:100:5::/64.locator-name: no locator "
        "'NOWHERE' in router.segment-routing.srv6.locator",
        f"{F} line 42 {p}.static.srv6-sid.fcbb:bb00:200::/48: fcbb:bb00:200::/48 is outside "
        "locator LOC's prefix fcbb:bb00:100::/48",
        f"{F} line 48 {p}.static.srv6-sid.fcbb:bb00:100:6::/64.function: a SID has no "
        "function: twin does not model it",
        f"{F} line 49 {p}.static.srv6-sid.fcbb:zz::/48: 'fcbb:zz::/48' is not an IPv6 prefix",
        f"{F} line 53 {p}.static.srv6-sid.fcbb:bb00:100:7::/64.behavior: is a number (7), "
        "not a string",
    ]


def test_every_problem_of_the_static_routes_is_named_at_once(compiled):
    text = routes(
        route("fcbb:bb00:2ff::/48", "via:\n  blackhole: {}"),
        route("fcbb:bb00:200::/48", "via:\n  fe80::200:\n    interface: swp3\n"
                                    "  fe80::201:\n    interface: swp4"),
        route("fcbb:bb00:201::/48", "address-family: ipv4-unicast\nvia:\n  fe80::201:\n"
                                    "    interface: swp4"),
        route("fcbb:bb00:202::/48", "distance:\n  '2':\n    via:\n      fe80::1: {}"),
        route("fcbb:bb00:203::/48", "via:\n  fe80::1:\n    interface: swp1\n    vrf: RED"),
        route("fcbb:bb00:204::/48", "via:\n  fe80::1:\n    interface: swp1\n"
                                    "    flag: recursive"),
        route("fcbb:bb00:205::/48", "via:\n  fe80::1:\n    type: tunnel"),
        route("fcbb:bb00:206::/48", "via:\n  10.0.0.1:\n    interface: swp1"),
        route("fcbb:bb00:207::/48", "metric: 5\nvia:\n  fe80::1:\n    interface: swp1"),
        route("fcbb:bb00:208::/48", "tag: 1"),
        route("fcbb:bb00:209::/48", "via: {}"),
        route("fcbb:bb00:20a::/48", "via: fe80::1"),
        route("fcbb:bb00:20b::/48", "via:\n  fe80::1:\n    interface: swp1\n    mtu: 9000"),
        route("FCBB:BB00:2FF::/48", "via:\n  blackhole: {}"))
    p = "vrf.default.router.static"
    assert problems(compiled, text) == [
        f"{F} line 10 {p}.fcbb:bb00:200::/48.via: 2 next hops (ECMP): MRC's tables hold one "
        "per destination",
        f"{F} line 16 {p}.fcbb:bb00:201::/48.address-family: 'ipv4-unicast' for the IPv6 "
        "prefix fcbb:bb00:201::/48",
        f"{F} line 21 {p}.fcbb:bb00:202::/48.distance: a next hop under distance: twin reads "
        "one next hop, under via",
        f"{F} line 29 {p}.fcbb:bb00:203::/48.via.fe80::1.vrf: leaks into VRF 'RED'; the "
        "fabric has one table",
        f"{F} line 34 {p}.fcbb:bb00:204::/48.via.fe80::1.flag: unknown flag 'recursive'",
        f"{F} line 38 {p}.fcbb:bb00:205::/48.via.fe80::1.type: unknown type 'tunnel'",
        f"{F} line 41 {p}.fcbb:bb00:206::/48.via.10.0.0.1: '10.0.0.1' is not an IPv6 address",
        f"{F} line 44 {p}.fcbb:bb00:207::/48.metric: a static route has no metric: twin does "
        "not model it",
        f"{F} line 48 {p}.fcbb:bb00:208::/48: missing: a static route needs its via",
        f"{F} line 51 {p}.fcbb:bb00:209::/48.via: no next hop",
        f"{F} line 53 {p}.fcbb:bb00:20a::/48.via: is a string, not a mapping",
        f"{F} line 58 {p}.fcbb:bb00:20b::/48.via.fe80::1.mtu: a via has no mtu: twin does "
        "not model it",
        f"{F} line 59 {p}.FCBB:BB00:2FF::/48: route fcbb:bb00:2ff::/48 is also at line 6",
    ]


def test_problems_carry_hints_and_render_without_a_traceback(compiled):
    with pytest.raises(SpecError) as e:
        parse(compiled, srv6(sids=sid("fcbb:bb00:100::/48", "behavior: UN",
                                      "locator-name: LOC")))
    text = e.value.render()
    assert text.startswith(f"{F}: 1 problem in the route tables")
    assert "hint: NVUE's are uN and uA (that case)" in text and "Traceback" not in text


# -- the YAML itself -----------------------------------------------------------------------


@pytest.mark.parametrize("text, expected", [
    ("- set:\n    vrf: {}\n    vrf: {}\n", f"{F} line 3 col 5: not YAML: \"key 'vrf' is "
                                           "written twice in one mapping (first at line 2); "
                                           "YAML keeps only the last\""),
    ("- set: {}\n---\n- set: {}\n", f"{F} line 2 col 1: not YAML: 'expected a single "
                                   "document in the stream; but found another document'"),
    ("", f"{F}: is empty: no `- set:` configuration"),
    ("set: {}\n", f"{F}: is a mapping, not a list of `- header:` and `- set:`"),
    ("- 5\n", f"{F}: is a list of other things, not a list of `- header:` and `- set:`"),
    ("- header: {}\n", f"{F}: has no `- set:` configuration"),
    ("- unset:\n    vrf: {}\n", f"{F} line 1 [1].unset: `- unset:` is a diff's (nv config "
                                "diff), not a configuration"),
    ("- delete: {}\n", f"{F} line 1 [1].delete: delete is neither header nor set"),
    ("- set: 5\n", f"{F} line 1 [1].set: is a number, not a mapping"),
    ("- set:\n    router:\n      segment-routing: [srv6]\n",
     f"{F} line 3 router.segment-routing: is a list, not a mapping"),
    ("- set:\n    router:\n      segment-routing:\n        srv6:\n          locator:\n"
     "            L1: 7\n", f"{F} line 6 router.segment-routing.srv6.locator.L1: is a "
                            "number, not a mapping"),
])
def test_the_shape_of_the_file_is_checked(compiled, text, expected):
    assert problems(compiled, text) == [expected]


@pytest.mark.parametrize("text, start, said", [
    ("- set:\n    router: [\n", f"{F} line 3 col 1: not YAML: ", "flow node"),
    ("- set: &a {}\n- header: *a\n", f"{F} line ", "an alias (*name): nv config show "
                                                  "writes none"),
])
def test_bad_yaml_names_the_line(compiled, text, start, said):
    """libyaml's parser and PyYAML's own word their messages differently: the place and the
    gist are what is pinned."""
    (p,) = problems(compiled, text)
    assert p.startswith(start) and said in p, p


def test_a_key_that_is_a_mapping_is_refused(compiled):
    (p,) = problems(compiled, "- set:\n    ? {a: 1}\n    : 2\n")
    assert p == f"{F} line 2 col 7: not YAML: 'a key that is a list or a mapping'"


@pytest.mark.parametrize("text, expected", [
    ("- set:\n    x: " + "[" * 300 + "]" * 300 + "\n", "not YAML twin can read (nested too deep)"),
    ("- set:\n    x: " + "[" * 5000 + "]" * 5000 + "\n", "not YAML"),
    ("- set:\n    x: " + "9" * 5000 + "\n", "not YAML twin can read (ValueError)"),
])
def test_hostile_yaml_is_one_line_not_a_traceback(compiled, text, expected):
    """Deep nesting is the parser's limit (libyaml: 1000 levels) or Python's recursion;
    a 5,000-digit number is past Python's int conversion limit."""
    (p,) = problems(compiled, text)
    assert p.startswith(F) and expected in p and "\n" not in p and len(p) < 200, p


def test_file_content_is_never_echoed_beyond_a_short_token(compiled):
    secret = "root:$6$" + "x" * 200
    found = problems(compiled, routes(route(f"'{secret}'", "via:\n  blackhole: {}"))
                     + "    " + "y" * 300 + ": {}\n")
    assert found == [f"{F} line 6 vrf.default.router.static.{repr(secret[:40])}...: "
                     f"{repr(secret[:40])}... is not an IP prefix"]
    tag = problems(compiled, "- set:\n    x: !!python/object:os.system " + "z" * 300 + "\n")
    assert len(tag) == 1 and len(tag[0]) < 200 and "z" * 60 not in tag[0]


def test_unknown_keys_of_srv6_and_static_and_ipv4_prefixes_are_refused(compiled):
    text = ("- set:\n    router:\n      segment-routing:\n        srv6:\n"
            "          state: enabled\n          encapsulation: {}\n          locator:\n"
            "            V4:\n              prefix: 10.1.0.0/16\n"
            "        static:\n          srv6-policy: {}\n          srv6-sid:\n"
            + sid("10.2.0.0/16", "behavior: uN", "locator-name: V4"))
    p = "router.segment-routing"
    assert problems(compiled, text) == [
        f"{F} line 6 {p}.srv6.encapsulation: srv6 has no encapsulation: twin does not "
        "model it",
        f"{F} line 9 {p}.srv6.locator.V4.prefix: 10.1.0.0/16 is not an IPv6 prefix",
        f"{F} line 11 {p}.static.srv6-policy: static has no srv6-policy: twin does not "
        "model it",
        f"{F} line 13 {p}.static.srv6-sid.10.2.0.0/16: 10.2.0.0/16 is not an IPv6 prefix"]
