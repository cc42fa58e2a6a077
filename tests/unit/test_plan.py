"""The compiled plan and rendered files, against golden copies."""

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from tests.helpers import (
    CLAB_BRIEF_LINK_KEYS,
    CLAB_NODE_KEYS,
    CLAB_TOP_KEYS,
    CLAB_TOPOLOGY_KEYS,
    golden,
    golden_tree,
)
from twin import dataplane
from twin.cli import main
from twin.fabric.model import Tier, build_fabric
from twin.fabric.plan import build_plan
from twin.fabric.render import render
from twin.fabric.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]


def compiled(name):
    fabric = build_fabric(load_spec(ROOT / f"lab/fabrics/{name}.yml"))
    return fabric, build_plan(fabric)


def test_mrc_4p_has_16_routers_and_4_hosts():
    fabric, _ = compiled("mrc-4p")
    assert len(fabric.switches) == 16 and len(fabric.hosts) == 4
    assert len([n for n in fabric.nodes if n.tier is Tier.T0]) == 8
    assert len(fabric.links) == 4 * 4 + 4 * 2 * 2  # host ports + T0-T1 links


def test_mrc_8p_has_64_routers_and_16_hosts():
    fabric, _ = compiled("mrc-8p")
    assert len(fabric.switches) == 64 and len(fabric.hosts) == 16


def test_rendered_mrc_4p_is_golden():
    _, plan = compiled("mrc-4p")
    golden_tree("mrc-4p", render(plan, "seg6local"))


def test_plan_text_is_golden():
    result = CliRunner().invoke(main, ["plan", "mrc-4p", "--node", "t0-p1-r0",
                                       "--node", "t1-p1-1", "--node", "r1h0"])
    assert result.exit_code == 0, result.output
    golden("plan-mrc-4p.txt", result.output)


def test_render_is_deterministic():
    _, a = compiled("mrc-8p")
    _, b = compiled("mrc-8p")
    assert render(a, "ebpf") == render(b, "ebpf")


def test_every_switch_is_un_and_every_host_port_decaps():
    fabric, plan = compiled("mrc-8p")
    for node in fabric.switches:
        [un] = plan[node.name].sids
        assert (un.behavior, un.block_len, un.usid_len, un.dev) == ("uN", 32, 16, "")
        assert un.prefix == f"fcbb:bb00:{plan[node.name].sid}::/48"
    for host in fabric.hosts:
        decap = plan[host.name].sids
        assert [s.dev for s in decap] == [f"eth{p + 1}" for p in range(8)]
        assert all(s.behavior == "decap" for s in decap)


def test_seg6local_installs_un_with_next_csid_and_decap_into_table_local():
    """DESIGN.md section 5: pyroute2 drops `flavors` (iproute2 writes them), and
    `End.DT6 table main` silently drops (local addresses live in table 255)."""
    _, plan = compiled("mrc-4p")
    switch = dataplane.get("seg6local").program(plan["t0-p0-r0"])
    assert switch.anchor == "sr0"
    assert [line for line in switch.ip if "seg6local" in line] == [
        "route replace fcbb:bb00:100::/48 encap seg6local action End flavors next-csid "
        "lblen 32 nflen 16 dev sr0 proto static"]
    host = dataplane.get("seg6local").program(plan["r0h0"])
    assert host.anchor is None and not host.bpf
    assert [line for line in host.ip if "seg6local" in line][0] == (
        "route replace fcbb:bb00:300::/48 encap seg6local action End.DT6 table local "
        "dev eth1 proto static")


def test_ebpf_puts_un_on_every_switch_port_and_decap_on_each_host_port():
    _, plan = compiled("mrc-4p")
    switch = dataplane.get("ebpf").program(plan["t1-p0-0"])
    assert switch.anchor is None and not [x for x in switch.ip if "seg6local" in x]
    assert [(b.dev, b.kind, b.prefix) for b in switch.bpf] == [
        ("eth1", "uN", "fcbb:bb00:200::/48"), ("eth2", "uN", "fcbb:bb00:200::/48")]
    host = dataplane.get("ebpf").program(plan["r0h0"])
    assert [(b.dev, b.kind, b.prefix) for b in host.bpf] == [
        ("eth1", "decap", "fcbb:bb00:300::/48"), ("eth2", "decap", "fcbb:bb00:1300::/48"),
        ("eth3", "decap", "fcbb:bb00:2300::/48"), ("eth4", "decap", "fcbb:bb00:3300::/48")]
    # the static part is the same on both data planes
    seg6 = dataplane.get("seg6local").program(plan["r0h0"])
    assert [x for x in seg6.ip if "seg6local" not in x] == list(host.ip)


def test_route_counts_follow_the_design():
    fabric, plan = compiled("mrc-8p")
    s = fabric.spec
    t0 = plan["t0-p3-r2"]
    assert (len(t0.routes), len(t0.sids)) == (s.t1_per_plane + s.hosts_per_rack, 1)
    t1 = plan["t1-p3-2"]
    assert (len(t1.routes), len(t1.sids)) == (s.racks, 1)
    host = plan["r2h1"]
    assert (len(host.routes), len(host.sids)) == (s.planes, s.planes)


def test_topology_uses_only_containerlab_keys():
    _, plan = compiled("mrc-4p")
    topo = yaml.safe_load(render(plan, "ebpf")["mrc-4p.clab.yml"])
    assert set(topo) <= CLAB_TOP_KEYS
    assert set(topo["topology"]) <= CLAB_TOPOLOGY_KEYS
    for name, node in topo["topology"]["nodes"].items():
        assert set(node) <= CLAB_NODE_KEYS
        assert node["kind"] == "linux" and node["network-mode"] == "none"
        assert node["binds"] == [f"config/{name}:/etc/mrc-twin:ro",
                                 "../../../twin:/opt/mrc-twin/twin:ro"]
        assert all(isinstance(v, str) for v in node["labels"].values())
    endpoints = [ep for lk in topo["topology"]["links"] for ep in lk["endpoints"]]
    assert len(endpoints) == len(set(endpoints)), "an interface is used twice"
    for lk in topo["topology"]["links"]:
        assert set(lk) <= CLAB_BRIEF_LINK_KEYS
        for ep in lk["endpoints"]:
            node, ifname = ep.split(":")
            assert node in topo["topology"]["nodes"] and ifname.startswith("eth")


def test_node_json_round_trips():
    _, plan = compiled("mrc-4p")
    data = json.loads(render(plan, "ebpf")["config/r0h0/node.json"])
    assert data["loopback"] == ["fd00:4d52:43::1/128"]
    assert data["name"] == "r0h0"


def test_fewer_nic_ports_than_planes_leaves_planes_unattached(tmp_path):
    spec = tmp_path / "s.yml"
    spec.write_text("name: thin\nplanes: 4\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                    "nic_ports: 2\n")
    fabric = build_fabric(load_spec(spec))
    plan = build_plan(fabric)
    assert [i.name for i in plan["r0h0"].interfaces] == ["eth1", "eth2"]
    assert not [r for r in plan["t0-p3-r0"].routes if r.note.startswith("to r0h0")]
    assert [r.note for r in plan["t0-p1-r0"].routes if r.via] == ["to t1-p1-0", "to r0h0:eth2"]


# -- fabric signals: the shaped fabric's queues (twin.fabric.congestion) -----------------

SHAPED_NODES = ("t0-p0-r0", "t1-p0-0", "r0h0")


def test_shaped_node_programs_are_golden():
    """A T0, a T1 and a host of mrc-4p-shaped on both data planes: the queues at the
    switches' egress, decap (ebpf) or ecn (seg6local) at the host's ports."""
    _, plan = compiled("mrc-4p-shaped")
    for dp in ("seg6local", "ebpf"):
        files = render(plan, dp)
        for node in SHAPED_NODES:
            golden(f"shaped/{dp}-{node}.program.json", files[f"config/{node}/program.json"])


def test_shaped_queues_mark_everywhere_but_the_last_hop():
    fabric, plan = compiled("mrc-4p-shaped")
    t0 = plan["t0-p0-r0"]
    kinds = {lk.end("t0-p0-r0").ifname: lk.kind for lk in fabric.links_of("t0-p0-r0")}
    assert [q.dev for q in t0.queues] == [i.name for i in t0.interfaces]
    for q in t0.queues:
        assert q.mark == (kinds[q.dev] == "fabric"), q
        assert q.rate_bps == (25_000_000 if kinds[q.dev] == "host" else 50_000_000)
    assert all(q.mark for q in plan["t1-p0-0"].queues)
    assert plan["r0h0"].queues == () and plan["r0h0"].signals


def test_default_thresholds_sit_below_tbfs_queue():
    """tbf queues rate x latency + burst, its latency 20 ms or 16 frames' time where that
    is longer: at 25 Mbit/s 47 ms (16 frames of 9,014 bytes), 164,903 bytes with a burst
    of two frames; at 50 Mbit/s 24 ms, 175,000 bytes with a 25,000-byte burst. The
    thresholds are 10/40/60/80% of it."""
    from twin.fabric.congestion import tbf_latency_ms, tbf_limit

    assert (tbf_latency_ms(25_000_000, 9000), tbf_limit(25_000_000, 9000)) == (47, 164_903)
    assert (tbf_latency_ms(50_000_000, 9000), tbf_limit(50_000_000, 9000)) == (24, 175_000)
    assert tbf_latency_ms(500_000_000, 9000) == 20  # a fast port: 20 ms is many frames
    _, plan = compiled("mrc-4p-shaped")
    by_rate = {q.rate_bps: q for q in plan["t0-p0-r0"].queues}
    host, fabric = by_rate[25_000_000], by_rate[50_000_000]
    assert (host.ecn_min, host.ecn_max, host.trim, host.drop) == (16490, 65961, 98941, 131922)
    assert (fabric.ecn_min, fabric.ecn_max, fabric.trim, fabric.drop) == (17500, 70000,
                                                                           105000, 140000)


def test_congestion_false_and_unshaped_fabrics_have_no_signals():
    from twin.fabric.spec import parse_spec

    text = (ROOT / "lab/fabrics/mrc-4p-shaped.yml").read_text() + "congestion: false\n"
    plan = build_plan(build_fabric(parse_spec(text)))
    assert all(n.queues == () and not n.signals for n in plan.nodes.values())
    for dp in ("seg6local", "ebpf"):
        program = dataplane.get(dp).program(plan["r0h0"])
        assert {b.kind for b in program.bpf} <= {"decap"}
    _, plain = compiled("mrc-4p")
    assert all(n.queues == () and not n.signals for n in plain.nodes.values())


def test_explicit_thresholds_reach_every_queue():
    from twin.fabric.spec import parse_spec

    text = (ROOT / "lab/fabrics/mrc-4p-shaped.yml").read_text() + (
        "congestion: {ecn: {min: 10KB, max: 30KB, last_hop: true}, trim: 40KB, drop: 60KB}\n")
    plan = build_plan(build_fabric(parse_spec(text)))
    queues = [q for n in plan.nodes.values() for q in n.queues]
    assert queues and all(q.mark for q in queues)
    assert {(q.ecn_min, q.ecn_max, q.trim, q.drop) for q in queues} == {
        (10240, 30720, 40960, 61440)}


def test_a_slower_rate_gets_thresholds_that_fit_its_tbf():
    """The link-rate fault re-plans a port's queue at its new rate: the spec's thresholds
    where they fit below tbf's queue at that rate, else the defaults for it."""
    from twin.fabric.congestion import Congestion, port_queue, tbf_limit

    given = Congestion(ecn_min=100_000, ecn_max=300_000, trim=400_000, drop=600_000)
    fits = port_queue(given, "eth3", 500_000_000, 9000, True)  # tbf holds 1,500,000
    assert (fits.ecn_min, fits.ecn_max, fits.trim, fits.drop) == (100_000, 300_000,
                                                                    400_000, 600_000)
    slow = port_queue(given, "eth3", 2_000_000, 9000, True)  # tbf holds 162,278 bytes
    assert tbf_limit(2_000_000, 9000) == 144_250 + 18_028  # 577 ms: 16 frames
    assert (slow.slot, slow.rate_bps) == (3, 2_000_000)
    assert slow.drop < 162_278 and slow.ecn_min < slow.ecn_max <= slow.trim < slow.drop


def test_plan_text_of_a_shaped_fabric_shows_its_queues():
    result = CliRunner().invoke(main, ["plan", "mrc-4p-shaped", "--node", "t0-p0-r0",
                                       "--node", "t1-p0-0"])
    assert result.exit_code == 0, result.output
    golden("plan-mrc-4p-shaped.txt", result.output)
