"""FRR's frr.conf as route tables (twin.routes.formats.frr).

FRR's own topotest configs load or are refused for a pinned reason
(tests/data/routes/frr/, sources in SOURCES.md); twin's plan for mrc-4p goes out as
frr.conf (golden for a T0 and a host), comes back the same, and checks clean; a
mistake in it is found at its file and line; every rule of the reading has its case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli, golden
from twin.errors import SpecError
from twin.fabric.plan import DECAP, UN, LocalSid, Route
from twin.lab.compile import load_tables
from twin.routes import check as C
from twin.routes import formats
from twin.routes.tables import NodeTables, from_plan

DATA = Path(__file__).resolve().parents[1] / "data" / "routes" / "frr"
FRR = formats.get("frr")
LOCATOR = """segment-routing
 srv6
  locators
   locator L
    prefix fcbb:bb00:100::/48 block-len 32 node-len 16
"""


def parse(compiled, text: str, node: str = "t0-p0-r0") -> NodeTables:
    return FRR.parse(text, node, f"{node}/frr.conf", compiled.fabric)


def problems(compiled, text: str, node: str = "t0-p0-r0") -> list[str]:
    with pytest.raises(SpecError) as e:
        parse(compiled, text, node)
    assert e.value.what == formats.WHAT
    return [f"{p.path.removeprefix(f'{node}/frr.conf ')}: {p.message}" for p in e.value.problems]


def sids(text: str) -> str:
    return LOCATOR + "  static-sids\n" + text


# -- FRR's own configs ---------------------------------------------------------------


def corpus(compiled, name: str) -> NodeTables:
    return FRR.parse((DATA / name).read_text(), "r1", name, compiled.fabric)


def test_the_static_sids_topotest_loads(compiled):
    """static_srv6_sids r1: a uN, decaps into the default VRF (uDT6, uDT46) and what drops:
    uDT4, decaps into other VRFs, a uA. r1 is no host of mrc-4p: the decaps have no port."""
    t = corpus(compiled, "static_srv6_sids-r1.conf")
    assert t.routes == ()
    assert t.sids == (LocalSid("fcbb:bbbb:1::/48", UN, "", 32, 16),
                      LocalSid("fcbb:bbbb:1:fe70::/64", DECAP, "", 32, 16),
                      LocalSid("fcbb:bbbb:1:fe80::/64", DECAP, "", 32, 16))
    assert {d.what: d.why.split(";")[0] for d in t.dropping} == {
        "uDT4 vrf Vrf10": "decapsulates to IPv4", "uDT6 vrf Vrf20": "decapsulates into VRF Vrf20",
        "uDT46 vrf Vrf30": "decapsulates into VRF Vrf30",
        "uA interface sr0 nexthop 2001::2": "an adjacency uSID (End.X with NEXT-CSID)",
        "uDT4 vrf default": "decapsulates to IPv4"}
    assert str(t.origin(t.sids[0])) == "static_srv6_sids-r1.conf line 14"


def test_the_multiple_locators_topotest_loads(compiled):
    """static_srv6_sids_multiple_locators r1: `format usid-f3216` gives the lengths; SIDs in
    the block outside the locator's prefix (fcbb:bb01:fe10::/48) are the block's; the two
    last sids follow a stray `!` at another indentation and are still static-sids'."""
    t = corpus(compiled, "static_srv6_sids_multiple_locators-r1.conf")
    assert [s.prefix for s in t.sids] == ["fcbb:bb01:1::/48", "fcbb:bb01:2::/48",
                                          "fcbb:bb02:1::/48", "fcbb:bb02:2::/48"]
    assert {(s.block_len, s.usid_len) for s in t.sids} == {(32, 16)}
    assert len(t.dropping) == 26
    assert str(t.origin(t.dropping[-1])).endswith("line 59")


@pytest.mark.parametrize("name,found", [
    ("bgp_link_state_bgp_fabric_srv6-r1.conf",  # its `router bgp` block: one problem
     ["line 44: router 'bgp': routes a protocol learns are not in the file"]),
    ("forwarding_on_off-r2.conf",  # `no ip forwarding` (IPv4) and `int` blocks pass
     ["line 2: no ipv6 forwarding: the node would not forward",
      "line 18: 10:1::1:1/128 has no interface", "line 19: 10:1::1:3/128 has no interface"]),
    ("mgmt_startup-r4.conf", ["line 20: 2012::/48 has no interface",
                              "line 21: 2013::/48 has no interface"]),
    ("srv6_static_route-r1-staticd.conf", ["line 7: 'segments': an encap route"]),
])
def test_frr_configs_twin_cannot_hold_are_refused_for_their_reason(compiled, name, found):
    with pytest.raises(SpecError) as e:
        corpus(compiled, name)
    said = [f"{p.path.removeprefix(name + ' ')}: {p.message}" for p in e.value.problems]
    assert len(said) == len(found), said
    for s, f in zip(said, found, strict=True):
        assert s.startswith(f), (s, f)


def test_every_corpus_file_is_pinned_by_a_test():
    pinned = {"static_srv6_sids-r1.conf", "static_srv6_sids_multiple_locators-r1.conf",
              "bgp_link_state_bgp_fabric_srv6-r1.conf", "forwarding_on_off-r2.conf",
              "mgmt_startup-r4.conf", "srv6_static_route-r1-staticd.conf"}
    assert {p.name for p in DATA.glob("*.conf")} == pinned
    sources = (DATA / "SOURCES.md").read_text()
    assert all(name in sources for name in pinned)


# -- twin's plan, written and read back ---------------------------------------------------


@pytest.mark.parametrize("node", ["t0-p0-r0", "r0h0"])
def test_the_plan_is_written_as_frr_prints_it(compiled, node):
    golden(f"routes/frr/{node}.frr.conf", FRR.render(from_plan(compiled.plan)[node],
                                                     compiled.fabric))


def test_every_node_of_mrc_4p_round_trips(compiled):
    for node, t in from_plan(compiled.plan).nodes.items():
        again = parse(compiled, FRR.render(t, compiled.fabric), node)
        assert (again.routes, again.sids, again.dropping) == (t.routes, t.sids, ()), node


def test_an_export_loads_by_itself_and_checks_clean(compiled, tmp_path):
    formats.write_dir(tmp_path, from_plan(compiled.plan), compiled.fabric, "frr")
    assert (tmp_path / "r0h0" / "frr.conf").is_file()
    loaded = formats.load_dir(tmp_path, compiled.fabric)  # the format told by the files
    assert loaded.format == "frr"
    report = C.check(compiled.plan, loaded)
    assert report.ok and report.findings == []


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_wrong_usid_and_a_missing_sid_are_found_at_file_and_line(compiled, tmp_path):
    formats.write_dir(tmp_path, from_plan(compiled.plan), compiled.fabric, "frr")
    edit(tmp_path / "t0-p0-r0" / "frr.conf", "ipv6 route fcbb:bb00:201::/48 fe80::201",
         "ipv6 route fcbb:bb00:202::/48 fe80::201")
    edit(tmp_path / "r1h0" / "frr.conf",
         "   sid fcbb:bb00:1302::/48 locator r1h0-eth2 behavior uDT6 vrf default\n", "")
    report = C.check(compiled.plan, formats.load_dir(tmp_path, compiled.fabric))
    assert not report.ok
    causes = [c for c, _, _ in report.causes()]
    assert any(c.startswith("t0-p0-r0: ") and "planned: route fcbb:bb00:201::/48" in c
               for c in causes), causes
    assert any("route fcbb:bb00:202::/48 via fe80::201 dev eth4 (t0-p0-r0/frr.conf line 5)"
               in f.text() for f in report.findings), [f.text() for f in report.findings]
    assert any(c.startswith("r1h0: ") and "planned: SID fcbb:bb00:1302::/48 decap" in c
               for c in causes), causes


def test_files_are_claimed_by_name():
    assert FRR.file_for("r0h0") == "r0h0/frr.conf"
    assert FRR.node_of("r0h0/frr.conf") == "r0h0"
    for rel in ("frr.conf", "r0h0/frr.conf.bak", "a/r0h0/frr.conf", "r0h0/config_db.json"):
        assert FRR.node_of(rel) is None, rel


# -- reading as FRR reads -----------------------------------------------------------------


def test_indentation_means_nothing_and_unknown_commands_go_to_the_parent(compiled):
    """No `exit` after the locator: `static-sids` is srv6's, `ipv6 route` the top's."""
    t = parse(compiled, """segment-routing
srv6
locators
locator L
prefix fcbb:bb00:100::/48 block-len 32 node-len 16
static-sids
        sid fcbb:bb00:100::/48 locator L behavior uN
   ipv6 route fcbb:bb00:200::/48 fe80::200 eth3
""")
    assert t.sids == (LocalSid("fcbb:bb00:100::/48", UN),)
    assert t.routes == (Route("fcbb:bb00:200::/48", "eth3", "fe80::200"),)


def test_exit_and_end_leave_nodes(compiled):
    """After `exit` from static-sids, a `sid` is srv6's, which has none; after `end`, a
    `prefix` is the top's."""
    said = problems(compiled, sids("   sid fcbb:bb00:100::/48 locator L behavior uN\n  exit\n"
                                   "   sid fcbb:bb00:101::/48 locator L behavior uN\n"))
    assert said == ["line 9: 'sid fcbb:bb00:101::/48' is not a line twin reads"]
    said = problems(compiled, LOCATOR + "end\n    prefix fcbb:bb00:101::/48\n")
    assert said == ["line 7: 'prefix fcbb:bb00:101::/48' is not a line twin reads"]


def test_comments_and_what_is_not_the_tables_are_ignored(compiled):
    t = parse(compiled, """frr version 10.2
frr defaults datacenter
hostname leaf01
log syslog informational
service integrated-vtysh-config
debug zebra events
! a comment
# another
ip forwarding
ipv6 forwarding
no ip forwarding
interface eth3
 description to t1-p0-0
 ipv6 address fcbb:bb00:100::1/64
 no ipv6 nd suppress-ra
 mtu 9216
exit
line vty
 exec-timeout 0
ip route 10.0.0.0/8 blackhole
vrf Vrf1
 ipv6 route fcbb:bb00:9::/48 fe80::9 eth1
exit-vrf
vrf default
 ipv6 route fcbb:bb00:200::/48 fe80::200 eth3
exit-vrf
ipv6 route fcbb:bb00:201::/48 fe80::201 eth4 vrf default
ipv6 route fcbb:bb00:9::/48 fe80::9 eth1 vrf Vrf1
segment-routing
 srv6
  encapsulation
   source-address fcbb:bb00:100::1
""")
    assert t.routes == (Route("fcbb:bb00:200::/48", "eth3", "fe80::200"),
                        Route("fcbb:bb00:201::/48", "eth4", "fe80::201"))
    assert t.sids == () and t.dropping == ()


def test_a_known_block_ends_at_a_top_level_line_however_indented(compiled):
    t = parse(compiled, "interface eth1\n ipv6 address fe80::100/64\n"
                        " ipv6 route fcbb:bb00:300::/48 fe80::300 eth1\n")
    assert t.routes == (Route("fcbb:bb00:300::/48", "eth1", "fe80::300"),)


def test_no_ipv6_forwarding_is_refused_after_a_block(compiled):
    said = problems(compiled, "interface eth1\n no ipv6 nd suppress-ra\nno ipv6 forwarding\n")
    assert said == ["line 3: no ipv6 forwarding: the node would not forward the fabric's "
                    "packets"]


def test_an_unknown_line_is_named_once_with_its_indented_block(compiled):
    said = problems(compiled, "route-map RM permit 10\n match interface eth1\n set tag 1\n"
                              "bfd\n peer fe80::1\n")
    assert said == ["line 1: 'route-map RM' is not a line twin reads",
                    "line 4: 'bfd' is not a line twin reads"]


def test_a_problem_quotes_only_a_short_token(compiled):
    (said,) = problems(compiled, "x" * 500 + " secret\n")
    assert said == f"line 1: {'x' * 32 + '...'!r} is not a line twin reads"
    (said,) = problems(compiled, "router " + "y" * 100 + "\n")
    assert "y" * 33 not in said


# -- locators and their lengths -------------------------------------------------------------


@pytest.mark.parametrize("prefix,lengths", [
    ("prefix fcbb:bb00:100::/48 block-len 32 node-len 16", (32, 16)),
    ("prefix fcbb:bb00:100::/48 block-len 32", (32, 16)),
    ("prefix fcbb:bb00:100::/48 node-len 16 func-bits 0", (32, 16)),
    ("prefix fcbb:bb00:100::/48", (24, 24)),  # zebra's default node-len 24
    ("prefix fcbb:bb00:100::/48\n    format usid-f3216", (32, 16)),
    ("prefix fcbb:bb00:100::/48 block-len 24 node-len 24\n    format usid-f3216", (32, 16)),
])
def test_a_uns_lengths_are_its_locators_as_zebra_sets_them(compiled, prefix, lengths):
    t = parse(compiled, LOCATOR.replace("prefix fcbb:bb00:100::/48 block-len 32 node-len 16",
                                        prefix)
              + "    behavior usid\n    flavor psp\n  static-sids\n"
              "   sid fcbb:bb00:100::/48 locator L behavior uN\n")
    assert (t.sids[0].block_len, t.sids[0].usid_len) == lengths


def test_a_un_longer_than_its_locator_has_its_function_in_nflen(compiled):
    t = parse(compiled, sids("   sid fcbb:bb00:100:1::/64 locator L behavior uN\n"))
    assert (t.sids[0].block_len, t.sids[0].usid_len) == (32, 32)


@pytest.mark.parametrize("line,said", [
    ("prefix fcbb:bb00:100::/48 block-len 24 node-len 16",
     "line 5: block-len 24 + node-len 16 is not the prefix length 48"),
    ("prefix fcbb:bb00:100::/48 block-len 99", "line 5: 'block-len' must be 16 to 64"),
    ("prefix fcbb:bb00:100::/48 block-len " + "9" * 5000, "line 5: 'block-len' must be 16 to 64"),
    ("prefix fcbb:bb00:100::/48 block-len 32 block-len 32", "line 5: 'block-len' again"),
    ("prefix fcbb:bb00:100::/48 arg-len 8", "line 5: 'arg-len' is not a word of `prefix`"),
    ("prefix fcbb:bb00:100::1/48", "line 5: 'fcbb:bb00:100::1/48' has host bits set"),
    ("prefix fcbb:bb00:100::", "line 5: 'fcbb:bb00:100::' is not an IPv6 prefix with a length"),
    ("prefix fcbb:bb00:100::/120 block-len 64", "line 5: a /120 prefix cannot hold these"),
    ("prefix fcbb:bb00:100::/64\n    format usid-f3216",
     "line 6: format usid-f3216 takes a /48 prefix, and locator 'L''s is /64"),
    ("prefix fcbb:bb00:100::/48\n    format usid-f9999",
     "line 6: format 'usid-f9999' is not one FRR knows"),
    ("prefix fcbb:bb00:100::/48\n    prefix fcbb:bb00:101::/48",
     "line 6: locator 'L' has a second prefix (first at line 5)"),
    ("behavior usid", "line 4: locator 'L' has no prefix: FRR installs none of its SIDs"),
])
def test_a_locator_frr_refuses_is_named(compiled, line, said):
    text = LOCATOR.replace("prefix fcbb:bb00:100::/48 block-len 32 node-len 16", line)
    assert problems(compiled, text + "  static-sids\n"
                    "   sid fcbb:bb00:100::/48 locator L behavior uN\n")[0].startswith(said)


# -- static SIDs ---------------------------------------------------------------------------


def test_a_hosts_decap_is_on_the_port_whose_usid_it_is(compiled):
    t = parse(compiled, sids("   sid fcbb:bb00:100::/48 locator L behavior uDT46 vrf default\n")
              .replace("fcbb:bb00:100::", "fcbb:bb00:1300::"), node="r0h0")
    assert t.sids == (LocalSid("fcbb:bb00:1300::/48", DECAP, "eth2"),)
    t = parse(compiled, sids("   sid fcbb:bb00:100::/48 locator L behavior uDT6 vrf default\n"),
              node="r0h0")
    assert t.sids == (LocalSid("fcbb:bb00:100::/48", DECAP, ""),)  # no port of r0h0's


@pytest.mark.parametrize("sid,said", [
    ("sid fcbb:bb00:100::/48 locator M behavior uN",
     "line 7: locator 'M' is not configured (segment-routing / srv6 / locators)"),
    ("sid fcbb:bb00:101::/48 locator L behavior uN",
     "line 7: fcbb:bb00:101::/48 is outside locator 'L''s prefix fcbb:bb00:100::/48"),
    ("sid fcbb:bb01:1::/48 locator L behavior uDT6 vrf default",
     "line 7: fcbb:bb01:1::/48 is outside locator 'L''s block fcbb:bb00::/32"),
    ("sid fcbb:bb00:100::/48 locator L behavior uN PSP", "line 7: behavior uN followed by 'PSP'"),
    ("sid fcbb:bb00:100::/48 locator L behavior End",
     "line 7: behavior 'End' is not one FRR's sid command takes"),
    ("sid fcbb:bb00:100::/48 locator L behavior uDT6", "line 7: behavior uDT6 followed by"),
    ("sid fcbb:bb00:100::/48 locator L behavior uA", "line 7: behavior uA followed by"),
    ("sid fcbb:bb00:100::/48 behavior uN", "line 7: a sid line is `sid X/M locator NAME"),
    ("sid fcbb:bb00:100::/48 loc L behavior uN", "line 7: a sid line is `sid X/M locator NAME"),
    ("sid fcbb:bb00:100::1/48 locator L behavior uN", "line 7: 'fcbb:bb00:100::1/48' has host"),
])
def test_a_sid_twin_cannot_read_is_named(compiled, sid, said):
    (got,) = problems(compiled, sids(f"   {sid}\n"))
    assert got.startswith(said), got


def test_a_sid_written_twice_is_named(compiled):
    said = problems(compiled, sids("   sid fcbb:bb00:100::/48 locator L behavior uN\n"
                                   "   sid fcbb:bb00:100::/48 locator L behavior uN\n"))
    assert said == ["line 8: SID fcbb:bb00:100::/48 again (first at line 7): FRR keeps only "
                    "the last"]


# -- static routes ---------------------------------------------------------------------------


def test_routes_of_every_kind_twin_holds(compiled):
    t = parse(compiled, """ipv6 route fcbb:bb00:200::/48 fe80::200 eth3 tag 7 10 metric 5
ipv6 route fcbb:bb00:201::/48 eth4
ipv6 route fcbb:bb00:202::/48 blackhole
ipv6 route fcbb:bb00:203::/48 Null0
ipv6 route fcbb:bb00:204::/48 reject
ipv6 route ::/0 FE80:0::1 eth1.100
""")
    assert t.routes == (Route("fcbb:bb00:200::/48", "eth3", "fe80::200"),
                        Route("fcbb:bb00:201::/48", "eth4"),
                        Route("fcbb:bb00:202::/48", "", type="blackhole"),
                        Route("fcbb:bb00:203::/48", "", type="blackhole"),
                        Route("fcbb:bb00:204::/48", "", type="unreachable"),
                        Route("::/0", "eth1.100", "fe80::1"))
    again = parse(compiled, FRR.render(t, compiled.fabric))
    assert again.routes == t.routes


@pytest.mark.parametrize("route,said", [
    ("fcbb:bb00:200::/48 fe80::200", "fcbb:bb00:200::/48 has no interface"),
    ("fcbb:bb00:200::/48 10.0.0.1", "fcbb:bb00:200::/48 has gateway '10.0.0.1', not an IPv6"),
    ("fcbb:bb00:200::/48 fe80::200 eth3 table 10", "'table': a route in another table"),
    ("fcbb:bb00:200::/48 fe80::200 eth3 nexthop-vrf red", "'nexthop-vrf': a next hop in another"),
    ("fcbb:bb00:200::/48 from fcbb::/16 fe80::200 eth3", "'from': a source-specific route"),
    ("fcbb:bb00:200::/48 fe80::200 eth3 onlink", "'onlink': not a word twin reads in ipv6 route"),
    ("fcbb:bb00:200::1/48 fe80::200 eth3", "'fcbb:bb00:200::1/48' has host bits set"),
    ("10.0.0.0/8 fe80::200 eth3", "'10.0.0.0/8' is not an IPv6 prefix"),
    ("", "ipv6 route without a prefix"),
])
def test_a_route_twin_cannot_read_is_named(compiled, route, said):
    (got,) = problems(compiled, f"ipv6 route {route}\n")
    assert got.startswith(f"line 1: {said}"), got


def test_a_second_next_hop_is_named(compiled):
    said = problems(compiled, "ipv6 route fcbb:bb00:200::/48 fe80::200 eth3\n"
                              "ipv6 route fcbb:bb00:200::/48 fe80::201 eth4\n")
    assert said == ["line 2: route fcbb:bb00:200::/48 again (first at line 1): FRR adds it as "
                    "another next hop, and MRC's tables hold one next hop per destination"]


def test_problems_come_all_at_once_in_line_order(compiled):
    said = problems(compiled, sids("   sid fcbb:bb00:100::/48 locator M behavior uN\n")
                    + "ipv6 route fcbb:bb00:200::/48 fe80::200\nrouter bgp 65000\n"
                    " neighbor fe80::1 remote-as 1\n")
    assert [s.split(":")[0] for s in said] == ["line 7", "line 8", "line 9"]


# -- the commands that take tables ----------------------------------------------------------

SHIPPED = Path(__file__).resolve().parents[2] / "lab" / "routes" / "frr-good"


def test_the_shipped_frr_tables_check_and_program_a_lab_on_either_data_plane(compiled):
    """lab/routes/frr-good is `twin routes export mrc-4p ... --format frr`; `twin up
    --routes` and `twin ci --routes` load it through load_tables, which refuses nothing."""
    result = cli("routes", "check", "mrc-4p", str(SHIPPED))
    assert result.exit_code == 0 and "(frr)" in result.output, result.output
    for dataplane in ("seg6local", "ebpf"):
        loaded = load_tables(compiled, str(SHIPPED), None, dataplane)
        assert loaded.format == "frr"
        assert loaded.nodes == from_plan(compiled.plan).nodes
    for command in (["routes", "export"], ["up"], ["ci"]):
        assert "frr" in cli(*command, "--help").output, command


def test_a_refused_file_is_one_line_per_problem_and_exit_2(tmp_path, compiled):
    formats.write_dir(tmp_path, from_plan(compiled.plan), compiled.fabric, "frr")
    with (tmp_path / "t1-p0-0" / "frr.conf").open("a") as f:
        f.write("router bgp 65000\n neighbor fe80::1 remote-as external\n")
    result = cli("routes", "check", "mrc-4p", str(tmp_path))
    assert result.exit_code == 2
    assert "t1-p0-0/frr.conf line 25: router 'bgp'" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("name", ["static_srv6_sids-r1.conf",
                                  "static_srv6_sids_multiple_locators-r1.conf"])
def test_what_frr_wrote_is_written_back_as_read(compiled, name):
    """SIDs that drop go out as FRR wrote their behaviour, under an F3216 locator."""
    t = corpus(compiled, name)
    again = FRR.parse(FRR.render(t, compiled.fabric), "r1", name, compiled.fabric)
    assert (again.routes, again.sids, again.dropping) == (t.routes, t.sids, t.dropping)
