"""Comparing iproute2's JSON with the plan: the oracle catches what pyroute2 hides.

The seg6local routes below are written out as `ip -j -6 route show` prints them,
not derived from the backend that installs them."""

from pathlib import Path

import pytest

from twin import dataplane
from twin.fabric.model import build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.spec import load_spec, parse_spec
from twin.readback import NodeCheck, compare, compare_shaping, parse_batch_output, route_from_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plan():
    return build_plan(build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml")))


SEG6 = dataplane.get("seg6local")


def as_json(route):
    """What `ip -j -6 route show` prints for a planned static route."""
    e = {"dst": route.dst, "dev": route.dev, "protocol": "static", "metric": 1024}
    if route.via:
        e["gateway"] = route.via
    return e


def sid_json(sid):
    """What `ip -j -6 route show` prints for a SID seg6local installed as planned."""
    e = {"dst": sid.prefix, "protocol": "static", "metric": 1024, "encap": "seg6local"}
    if sid.behavior == "uN":
        return {**e, "action": "End", "flavors": ["next-csid"], "lblen": 32, "nflen": 16,
                "dev": "sr0"}
    return {**e, "action": "End.DT6", "table": "local", "dev": sid.dev}


def check(node, routes, links, addrs):
    c = compare(node, routes, links, addrs, SEG6.is_sid_route)
    c.sids = SEG6.check_sids(None, node, routes)
    return c


def healthy(node):
    links = [{"ifname": i.name, "flags": ["BROADCAST", "UP", "LOWER_UP"], "mtu": i.mtu}
             for i in node.interfaces]
    addrs = [{"ifname": i.name, "addr_info": [{"local": a.split("/")[0],
                                                "prefixlen": int(a.split("/")[1])}
                                               for a in i.addresses]} for i in node.interfaces]
    addrs.append({"ifname": "lo", "addr_info": [{"local": a.split("/")[0],
                                                 "prefixlen": int(a.split("/")[1])}
                                                for a in node.loopback]})
    return [as_json(r) for r in node.routes] + [sid_json(s) for s in node.sids], links, addrs


def test_a_faithful_node_passes(plan):
    for name in ("t0-p0-r0", "t1-p2-1", "r1h1"):
        routes, links, addrs = healthy(plan[name])
        routes.append({"dst": "fe80::/64", "dev": "eth1", "protocol": "kernel"})
        assert check(plan[name], routes, links, addrs).ok


def test_un_installed_without_flavors_is_different(plan):
    """pyroute2 0.9 silently drops `flavors`: the route reads back as plain End."""
    node = plan["t0-p0-r0"]
    routes, links, addrs = healthy(node)
    for e in routes:
        if e.get("action") == "End":
            del e["flavors"], e["lblen"], e["nflen"]
    c = check(node, routes, links, addrs)
    assert not c.ok and len(c.sids) == 1
    assert "next-csid" in c.sids[0] and c.sids[0].startswith("local SID fcbb:bb00:100::/48")


def test_a_missing_sid_is_named(plan):
    node = plan["t1-p0-0"]
    routes, links, addrs = healthy(node)
    c = check(node, [e for e in routes if e.get("encap") != "seg6local"], links, addrs)
    assert c.sids == ["missing local SID fcbb:bb00:200::/48 uN (F3216)"]
    assert c.problems() == c.sids and not c.missing  # a SID, not a static route


def test_missing_extra_and_link_problems(plan):
    node = plan["t0-p0-r0"]
    routes, links, addrs = healthy(node)
    routes = routes[1:] + [{"dst": "2001:db8::/32", "dev": "eth1", "gateway": "fe80::1",
                            "protocol": "boot"}]
    links[2]["flags"] = ["BROADCAST"]
    links[3]["flags"] = ["UP"]
    c = check(node, routes, links, addrs)
    assert c.missing == [node.routes[0].describe()]
    assert c.extra == ["2001:db8::/32 via fe80::1 dev eth1"]
    assert any("eth3" in p and "admin down" in p for p in c.links)
    assert any("eth4" in p and "no carrier" in p for p in c.links)


def test_end_dt6_table_main_is_caught(plan):
    """`table main` would silently drop decapsulated packets: it must not pass."""
    node = plan["r0h0"]
    routes, links, addrs = healthy(node)
    for e in routes:
        if e.get("action") == "End.DT6":
            e["table"] = "main"
    problems = check(node, routes, links, addrs).sids
    assert len(problems) == 4 and all("table main" in p for p in problems)


def test_host_routes_normalise_to_128():
    assert route_from_json({"dst": "fd00::1", "dev": "lo"}).dst == "fd00::1/128"


def test_batch_output_is_one_array_per_line():
    assert parse_batch_output('[]\n[{"ifname":"lo"}]\n\n[]\n') == [[], [{"ifname": "lo"}], []]


def test_shaping_is_compared_in_bits_per_second():
    spec = parse_spec("name: r\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                      "rate: {host: 100mbit, fabric: 1gbit}\n")
    node = build_plan(build_fabric(spec))["t0-p0-r0"]
    check = NodeCheck(node.name)
    compare_shaping(node, [
        {"kind": "tbf", "root": True, "dev": "eth1", "handle": "1:",
         "options": {"rate": 12_500_000}},
        {"kind": "pfifo_fast", "dev": "eth1", "handle": "10:", "parent": "1:1"},
        {"kind": "tbf", "root": True, "dev": "eth2", "handle": "1:",
         "options": {"rate": 12_500_000}},
        {"kind": "pfifo_fast", "dev": "eth2", "handle": "10:", "parent": "1:1"},
    ], check)
    assert check.links == ["interface eth2 shaped at 100000000 bit/s, planned 1000000000"]


def test_a_tbf_without_the_probe_band_under_it_is_reported():
    """tbf's own fifo under it (a lab shaped by an older twin, a hand-made qdisc) queues
    probes behind data: verify says so."""
    spec = parse_spec("name: r\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                      "rate: {host: 100mbit, fabric: 100mbit}\n")
    node = build_plan(build_fabric(spec))["t0-p0-r0"]
    check = NodeCheck(node.name)
    compare_shaping(node, [
        {"kind": "tbf", "root": True, "dev": "eth1", "handle": "1:",
         "options": {"rate": 12_500_000}},
        {"kind": "pfifo_fast", "dev": "eth1", "handle": "10:", "parent": "1:1"},
        {"kind": "tbf", "root": True, "dev": "eth2", "handle": "1:",
         "options": {"rate": 12_500_000}},
        {"kind": "bfifo", "dev": "eth2", "handle": "10:", "parent": "1:1"},
    ], check)
    assert check.links == ["interface eth2 has no pfifo_fast under its tbf: probes wait "
                           "behind data (planned parent 1:1)"]
