"""routing: bgp, the compiler's part: spec, addressing, plan, FRR files (no FRR runs here).

The FRR files are checked by reading them back the way bgpd would need them to be,
against the topology (not against the code that wrote them): every neighbour
interface is a link of the node, sessions are symmetric, ASNs follow the scheme,
every T0 announces exactly its rack's host links of its plane.
"""

import ipaddress
import json
import re
from pathlib import Path

import pytest
import yaml

from tests.helpers import cli, golden, golden_tree
from twin.fabric import bgp
from twin.fabric.model import Tier, build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.render import render
from twin.fabric.spec import load_spec, parse_spec, with_routing

ROOT = Path(__file__).resolve().parents[2]
BASE = "name: b\nplanes: 4\nracks: 2\nhosts_per_rack: 2\nt1_per_plane: 2\n"


def compiled(text=None, name="mrc-4p"):
    spec = parse_spec(text) if text else with_routing(
        load_spec(ROOT / f"lab/fabrics/{name}.yml"), "bgp")
    fabric = build_fabric(spec)
    return fabric, build_plan(fabric)


def parse_frr(text: str) -> dict:
    """The parts of an frr.conf the checks need, read line by line by FRR's indentation:
    {asn, router_id, neighbors: {if: remote-as}, bfd: {if: profile}, activate: [...],
    networks: [...], maximum_paths, profiles: {name: {key: value}}, top: [...]}."""
    out = {"asn": None, "router_id": None, "neighbors": {}, "bfd": {}, "activate": [],
           "networks": [], "maximum_paths": None, "profiles": {}, "top": [], "routers": 0}
    section, profile = None, None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("!"):
            continue
        words = line.split()
        depth = len(line) - len(line.lstrip())
        if depth == 0:
            section = words[0]
            if words[:2] == ["router", "bgp"]:
                out["asn"] = int(words[2])
                out["routers"] += 1
            elif section not in ("bfd", "exit"):
                out["top"].append(line)
            continue
        if section == "bfd":
            if depth == 1 and words[0] == "profile":
                profile = words[1]
                out["profiles"][profile] = {}
            elif depth == 2:
                out["profiles"][profile][words[0]] = int(words[1])
            continue
        if section != "router":
            raise AssertionError(f"indented line outside a known section: {line!r}")
        if words[:2] == ["bgp", "router-id"]:
            out["router_id"] = words[2]
        elif words[0] == "neighbor" and words[2:4] == ["interface", "remote-as"]:
            out["neighbors"][words[1]] = words[4]
        elif words[0] == "neighbor" and words[2:4] == ["bfd", "profile"]:
            out["bfd"][words[1]] = words[4]
        elif words[0] == "neighbor" and words[2] == "activate":
            out["activate"].append(words[1])
        elif words[0] == "network":
            out["networks"].append(words[1])
        elif words[0] == "maximum-paths":
            out["maximum_paths"] = int(words[1])
    return out


def topology(files, lab="mrc-4p"):
    """node -> {ifname: (peer node, peer ifname)} from the rendered containerlab file."""
    topo = yaml.safe_load(files[f"{lab}.clab.yml"])
    ends = {n: {} for n in topo["topology"]["nodes"]}
    for lk in topo["topology"]["links"]:
        (a, ai), (b, bi) = (ep.split(":") for ep in lk["endpoints"])
        ends[a][ai] = (b, bi)
        ends[b][bi] = (a, ai)
    return ends


# -- spec ---------------------------------------------------------------------------


def test_defaults_resolved_once_in_the_spec():
    spec = parse_spec(BASE + "routing: bgp\n")
    b = spec.bgp
    assert (b.t0_base, b.t1_base, b.keepalive, b.hold, b.bfd) == (
        4200100000, 4200000000, 3, 9, None)
    assert b.maximum_paths == 2  # the widest ECMP: every T1 of a plane
    assert str(b.link_prefix) == "fd00:4d52:4c::/48"
    wide = parse_spec(BASE.replace("t1_per_plane: 2", "t1_per_plane: 200") + "routing: bgp\n")
    assert wide.bgp.maximum_paths == 64  # FRR's ceiling


def test_static_is_the_default_and_keeps_no_bgp():
    spec = load_spec(ROOT / "lab/fabrics/mrc-4p.yml")
    assert (spec.routing, spec.bgp) == ("static-srv6", None)
    assert "routing" not in spec.to_dict() and "bgp" not in spec.to_dict()


def test_bfd_true_or_empty_takes_frr_defaults_and_false_none():
    for text in ("bgp: {bfd: true}\n", "bgp: {bfd: {}}\n"):
        b = parse_spec(BASE + "routing: bgp\n" + text).bgp
        assert (b.bfd.interval_ms, b.bfd.multiplier, b.bfd.detect_ms) == (300, 3, 900)
    assert parse_spec(BASE + "routing: bgp\nbgp: {bfd: false}\n").bgp.bfd is None


def test_spec_round_trips_through_its_dict():
    spec = parse_spec(BASE + "routing: bgp\nbgp: {bfd: {interval_ms: 50, multiplier: 4}, "
                      "timers: {keepalive: 1, hold: 3}, maximum_paths: 1, "
                      "asn: {t0_base: 4201000000, t1_base: 65500}}\n")
    assert parse_spec(yaml.safe_dump(spec.to_dict())) == spec


def test_with_routing_switches_both_ways():
    static = load_spec(ROOT / "lab/fabrics/mrc-4p.yml")
    b = with_routing(static, "bgp")
    assert b.routing == "bgp" and b.bgp.maximum_paths == 2
    assert with_routing(b, "static-srv6") == static


def test_every_bgp_refusal_names_its_key():
    """One line per guard (the golden .err files hold the words): each refusal found."""
    from twin.errors import SpecError

    with pytest.raises(SpecError) as info:
        load_spec(ROOT / "tests/golden/errors/bad-bgp.yml")
    assert [p.path for p in info.value.problems] == [
        "srv6.dataplane", "bgp.peer_group", "bgp.asn.t0_base", "bgp.timers.hold",
        "bgp.bfd.interval_ms", "bgp.bfd.multiplier", "bgp.maximum_paths", "bgp.link_prefix"]


# -- addressing and plan ------------------------------------------------------------


def test_host_link_addresses_carry_the_port_usid():
    fabric, _ = compiled()
    hl = bgp.host_link(fabric, "r1h0", 2)
    assert (hl.prefix, hl.host_address, hl.t0_address) == (
        "fd00:4d52:4c:2302::/64", "fd00:4d52:4c:2302::2", "fd00:4d52:4c:2302::1")
    assert (hl.t0, hl.t0_ifname, hl.host_ifname) == ("t0-p2-r1", "eth1", "eth3")
    with pytest.raises(ValueError, match="not a host"):
        bgp.host_link(fabric, "t0-p0-r0", 0)


def test_a_planes_prefix_holds_its_host_links_and_no_other_planes():
    fabric, _ = compiled(name="mrc-8p")
    links = {(p, h.name): ipaddress.IPv6Network(bgp.host_link(fabric, h.name, p).prefix)
             for p in fabric.nic_planes for h in fabric.hosts}
    assert len(set(links.values())) == len(links)
    for p in fabric.nic_planes:
        agg = bgp.plane_prefix(fabric, p)
        assert all(net.subnet_of(agg) == (q == p) for (q, _), net in links.items())
        assert not agg.overlaps(fabric.spec.nic_prefix) and not agg.overlaps(fabric.spec.block)


def test_router_ids_are_unique_nonzero_and_never_routable():
    fabric, plan = compiled(name="mrc-8p")
    ids = [plan[n.name].bgp.router_id for n in fabric.switches]
    assert len(set(ids)) == len(ids)
    zero_net = ipaddress.IPv4Network("0.0.0.0/8")
    for rid in ids:
        addr = ipaddress.IPv4Address(rid)
        assert addr in zero_net and int(addr) != 0


def test_no_sid_no_static_route_on_a_router_and_one_route_per_plane_on_a_host():
    fabric, plan = compiled()
    for node in fabric.switches:
        np_ = plan[node.name]
        assert (np_.routes, np_.sids, np_.queues) == ((), (), ())
        assert ("net.ipv6.fib_multipath_hash_policy", "1") in np_.node_sysctls
        assert not [k for k, _ in np_.node_sysctls + tuple(np_.interface_sysctls())
                    if "seg6" in k]
    host = plan["r1h0"]
    assert host.sids == () and host.bgp is None
    assert [(r.dst, r.dev, r.via) for r in host.routes] == [
        (str(bgp.plane_prefix(fabric, p)), f"eth{p + 1}",
         bgp.host_link(fabric, "r1h0", p).t0_address) for p in range(4)]


def test_ecmp_width_follows_maximum_paths():
    _, plan = compiled(BASE + "routing: bgp\nbgp: {maximum_paths: 1}\n")
    assert {e.width for e in plan["t0-p0-r0"].bgp.expect} == {1}
    assert {e.via for e in plan["t0-p0-r0"].bgp.expect} == {("eth3", "eth4")}


def test_a_plane_without_nic_ports_announces_and_expects_nothing():
    _, plan = compiled(BASE + "nic_ports: 2\nrouting: bgp\n")
    assert plan["t0-p3-r0"].bgp.announce == () and plan["t0-p3-r0"].bgp.expect == ()
    assert len(plan["t0-p3-r0"].bgp.sessions) == 2  # the sessions still come up
    assert len(plan["r0h0"].routes) == 2


# -- rendered files -----------------------------------------------------------------


def test_rendered_mrc_4p_bgp_is_golden():
    _, plan = compiled()
    golden_tree("bgp/mrc-4p", render(plan, "ebpf"))


def test_the_data_plane_choice_changes_nothing_in_bgp_mode():
    _, plan = compiled()
    assert render(plan, "ebpf") == render(plan, "seg6local")
    files = render(plan, "ebpf")
    for name in plan.nodes:
        prog = json.loads(files[f"config/{name}/program.json"])
        assert prog["dataplane"] == "none" and prog["bpf"] == [] and prog["anchor"] is None
        assert not [line for line in prog["ip"] if "seg6" in line or "encap" in line]


def test_plan_text_bgp_is_golden():
    result = cli("plan", "mrc-4p", "--routing", "bgp", "--node", "t0-p1-r0",
                 "--node", "t1-p1-1", "--node", "r1h0")
    assert result.exit_code == 0, result.output
    golden("plan-mrc-4p-bgp.txt", result.output)


@pytest.mark.parametrize("fabric_name", ["mrc-4p", "mrc-8p"])
def test_frr_configs_hold_together(fabric_name):
    fabric, plan = compiled(name=fabric_name)
    files = render(plan, "ebpf")
    ends = topology(files, fabric_name)
    spec = fabric.spec
    confs = {n.name: parse_frr(files[f"config/{n.name}/frr.conf"]) for n in fabric.switches}
    assert not [p for p in files if p.endswith("frr.conf") and p.split("/")[1] not in confs]
    host_side = {}  # T0 interface -> its host link's network, from the host's own address
    for h in fabric.hosts:
        for ifc in plan[h.name].interfaces:
            glob = [a for a in ifc.addresses if not a.startswith("fe80")]
            host_side[ends[h.name][ifc.name]] = str(ipaddress.IPv6Interface(glob[0]).network)
    for name, c in confs.items():
        node = fabric.node(name)
        m = re.fullmatch(r"t0-p(\d+)-r(\d+)|t1-p(\d+)-(\d+)", name)
        want_asn = (4200100000 + 1000 * int(m[1]) + int(m[2]) if node.tier is Tier.T0
                    else 4200000000 + int(m[3]))
        assert c["routers"] == 1 and c["asn"] == want_asn, name
        assert c["router_id"] and ipaddress.IPv4Address(c["router_id"]), name
        assert f"hostname {name}" in c["top"] and "frr defaults datacenter" in c["top"]
        assert c["maximum_paths"] == spec.bgp.maximum_paths
        assert sorted(c["activate"]) == sorted(c["neighbors"]), name
        for ifname, remote in c["neighbors"].items():
            assert remote == "external", f"{name}: {ifname} remote-as {remote}"
            assert ifname in ends[name], f"{name}: neighbor {ifname} is no link of the node"
            peer, peer_if = ends[name][ifname]
            assert peer in confs, f"{name}: {ifname} faces {peer}, which runs no BGP"
            assert confs[peer]["neighbors"].get(peer_if) == "external", \
                f"{name} lists {peer} on {ifname}, {peer} does not list {name} on {peer_if}"
            assert confs[peer]["asn"] != c["asn"]  # eBGP
        fabric_ifs = {i for i, (p, _) in ends[name].items() if fabric.node(p).is_switch}
        assert set(c["neighbors"]) == fabric_ifs, name
        mine = sorted(net for (t0, _), net in host_side.items() if t0 == name)
        assert sorted(c["networks"]) == mine, f"{name} announces {c['networks']}, not {mine}"
        assert c["bfd"] == {} and c["profiles"] == {}
        assert "bfdd=no" in files[f"config/{name}/daemons"].splitlines()
    routers_with_files = {p.split("/")[1] for p in files if p.endswith("/daemons")}
    assert routers_with_files == set(confs)


def test_bfd_renders_one_profile_on_every_session_and_starts_bfdd():
    fabric, plan = compiled(BASE + "routing: bgp\nbgp: {bfd: {interval_ms: 100, "
                            "multiplier: 4}}\n")
    files = render(plan, "ebpf")
    for n in fabric.switches:
        c = parse_frr(files[f"config/{n.name}/frr.conf"])
        assert c["profiles"] == {"fabric": {"transmit-interval": 100, "receive-interval": 100,
                                            "detect-multiplier": 4}}
        assert c["bfd"] == {i: "fabric" for i in c["neighbors"]}
        assert "bfdd=yes" in files[f"config/{n.name}/daemons"].splitlines()


def test_static_lab_files_have_no_frr_and_no_routing_key():
    fabric = build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))
    files = render(build_plan(fabric), "ebpf")
    assert not [p for p in files if p.endswith(("frr.conf", "/daemons"))]
    node = json.loads(files["config/t0-p0-r0/node.json"])
    assert "routing" not in node and "bgp" not in node


def test_routes_export_of_a_bgp_fabric_is_each_routers_frr_conf(tmp_path):
    from click.testing import CliRunner

    from twin.cli import main

    res = CliRunner().invoke(main, ["routes", "export", "mrc-4p", str(tmp_path / "x"),
                                    "--routing", "bgp"])
    assert res.exit_code == 0, res.output
    files = sorted(p.relative_to(tmp_path / "x") for p in (tmp_path / "x").rglob("*")
                   if p.is_file())
    assert len(files) == 16 and all(f.name == "frr.conf" for f in files)
    golden = Path(__file__).resolve().parents[1] / "golden/bgp/mrc-4p/config"
    assert (tmp_path / "x/t1-p3-1/frr.conf").read_text() == \
        (golden / "t1-p3-1/frr.conf").read_text()  # what twin up hands to FRR
    res = CliRunner().invoke(main, ["routes", "export", "mrc-4p", str(tmp_path / "y"),
                                    "--routing", "bgp", "--format", "sonic"])
    assert res.exit_code == 2 and "its export is each router's frr.conf" in res.output
    assert not (tmp_path / "y").exists()
