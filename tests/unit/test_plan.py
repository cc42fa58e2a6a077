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
    golden_tree("mrc-4p", render(plan))


def test_plan_text_is_golden():
    result = CliRunner().invoke(main, ["plan", "mrc-4p", "--node", "t0-p1-r0",
                                       "--node", "t1-p1-1", "--node", "r1h0"])
    assert result.exit_code == 0, result.output
    golden("plan-mrc-4p.txt", result.output)


def test_render_is_deterministic():
    _, a = compiled("mrc-8p")
    _, b = compiled("mrc-8p")
    assert render(a) == render(b)


def test_every_switch_is_un_and_every_host_port_decaps_to_table_local():
    fabric, plan = compiled("mrc-8p")
    for node in fabric.switches:
        un = [r for r in plan[node.name].routes if r.action == "End"]
        assert len(un) == 1 and un[0].flavors == ("next-csid",)
        assert (un[0].lblen, un[0].nflen, un[0].dev) == (32, 16, "sr0")
    for host in fabric.hosts:
        decap = [r for r in plan[host.name].routes if r.action]
        assert len(decap) == 8
        assert all(r.action == "End.DT6" and r.table == "local" for r in decap)


def test_route_counts_follow_the_design():
    fabric, plan = compiled("mrc-8p")
    s = fabric.spec
    t0 = plan["t0-p3-r2"]
    assert len(t0.routes) == 1 + s.t1_per_plane + s.hosts_per_rack
    t1 = plan["t1-p3-2"]
    assert len(t1.routes) == 1 + s.racks
    host = plan["r2h1"]
    assert len(host.routes) == 2 * s.planes


def test_topology_uses_only_containerlab_keys():
    _, plan = compiled("mrc-4p")
    topo = yaml.safe_load(render(plan)["mrc-4p.clab.yml"])
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
    data = json.loads(render(plan)["config/r0h0/node.json"])
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
