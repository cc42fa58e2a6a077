"""A BGP lab read back (twin.verify.bgp, twin.readback.compare_bgp) from what FRR 8.4
and iproute2 answered on a real mrc-4p in routing: bgp (tests/data/frr-8.4: `twin up
mrc-4p --routing bgp --runtime netns`, then `twin fault link-down t0-p0-r0:eth3`), and
the host-pair probes verify sends (twin.verify.ecmp)."""

import copy
import json
from pathlib import Path

import pytest

from twin.lab.compile import compile_spec
from twin.readback import compare_bgp
from twin.verify import bgp as B
from twin.verify import ecmp

DATA = Path(__file__).resolve().parents[1] / "data" / "frr-8.4"


@pytest.fixture(scope="module")
def plan():
    return compile_spec("mrc-4p", routing="bgp").plan


@pytest.fixture(scope="module")
def ids(plan):
    return {n: p.bgp.router_id for n, p in plan.nodes.items() if p.bgp is not None}


def load(node: str, what: str, when: str):
    return json.loads((DATA / f"{node}.{what}.{when}.json").read_text())


def frr_problems(plan, ids, node, when, neighbors=None, routes=None):
    view = B.RouterView.read(node, neighbors if neighbors is not None
                             else load(node, "neighbors", when),
                             routes if routes is not None else load(node, "route", when))
    return B.problems(node, plan[node].bgp, view, ids)


@pytest.mark.parametrize("node", ["t0-p0-r0", "t1-p0-0"])
def test_a_converged_router_has_no_problem_in_frr_nor_in_the_kernel(plan, ids, node):
    assert frr_problems(plan, ids, node, "up") == []
    assert compare_bgp(plan[node], load(node, "ip-route", "up")) == []


def test_a_t0_whose_uplink_is_down_names_the_session_and_the_narrower_ecmp(plan, ids):
    got = frr_problems(plan, ids, "t0-p0-r0", "link-down")
    assert got[0] == "t0-p0-r0: session on eth3 (to t1-p0-0) is Idle, not Established"
    assert "t0-p0-r0: fd00:4d52:4c:302::/64 has 1 ECMP next hop in the kernel, the plan 2 " \
           "(out of eth3, eth4)" in got
    kernel = compare_bgp(plan["t0-p0-r0"], load("t0-p0-r0", "ip-route", "link-down"))
    assert kernel == [f"fd00:4d52:4c:30{h}::/64: 1-way ECMP in the kernel, planned 2-way out "
                      "of eth3, eth4" for h in (2, 3)]


def test_a_t1_that_lost_its_t0_names_the_prefixes_it_no_longer_has(plan, ids):
    got = frr_problems(plan, ids, "t1-p0-0", "link-down")
    assert "t1-p0-0: no BGP route to fd00:4d52:4c:300::/64 (want 1 next hop out of eth1)" in got
    kernel = compare_bgp(plan["t1-p0-0"], load("t1-p0-0", "ip-route", "link-down"))
    assert kernel[0].startswith("no route to fd00:4d52:4c:300::/64 in the kernel")


def test_a_session_to_the_wrong_switch_is_named_by_its_router_id(plan, ids):
    """A link wired to the other T1: same AS (a plane's T1s share one), other router."""
    neighbors = load("t0-p0-r0", "neighbors", "up")
    neighbors["eth3"]["remoteRouterId"] = ids["t1-p0-1"]
    got = frr_problems(plan, ids, "t0-p0-r0", "up", neighbors=neighbors)
    assert got == ["t0-p0-r0: session on eth3 reaches t1-p0-1, the plan puts t1-p0-0 there "
                   "(a link wired elsewhere)"]


def test_a_route_the_plan_does_not_expect_is_a_problem(plan, ids):
    """A leak (another plane's prefix, a valley path) is as wrong as a missing one."""
    routes = load("t0-p0-r0", "route", "up")
    leaked = copy.deepcopy(routes["fd00:4d52:4c:302::/64"])
    leaked[0]["prefix"] = "fd00:4d52:4c:1302::/64"
    routes["fd00:4d52:4c:1302::/64"] = leaked
    assert frr_problems(plan, ids, "t0-p0-r0", "up", routes=routes) == [
        "t0-p0-r0: a BGP route to fd00:4d52:4c:1302::/64 the plan does not expect"]
    kernel = load("t0-p0-r0", "ip-route", "up")
    extra = copy.deepcopy(next(e for e in kernel if e.get("protocol") == "bgp"))
    extra["dst"] = "fd00:4d52:4c:1302::/64"
    assert compare_bgp(plan["t0-p0-r0"], [*kernel, extra]) == [
        "a BGP route to fd00:4d52:4c:1302::/64 in the kernel the plan does not expect"]


@pytest.mark.parametrize("neighbors, routes, said", [
    ([1, 2], {}, "`show bgp neighbors json` is not an object"),
    ({"eth3": "Established"}, {}, "peer 'eth3' is not an object"),
    ({}, [], "`show ipv6 route json` is not an object"),
    ({}, {"x" * 500: 7}, "is not a list"),
])
def test_what_frr_answers_is_read_as_hostile(plan, ids, neighbors, routes, said):
    got = frr_problems(plan, ids, "t0-p0-r0", "up", neighbors=neighbors, routes=routes)
    assert any(said in line for line in got), got
    assert all(len(line) < 300 for line in got)
    assert len(got) <= B.MAX_PROBLEMS + 1


def test_nexthops_frr_has_not_installed_do_not_count(plan, ids):
    routes = load("t0-p0-r0", "route", "up")
    routes["fd00:4d52:4c:302::/64"][0]["nexthops"][1]["fib"] = False
    assert frr_problems(plan, ids, "t0-p0-r0", "up", routes=routes) == [
        "t0-p0-r0: fd00:4d52:4c:302::/64 has 1 ECMP next hop in the kernel, the plan 2 "
        "(out of eth3, eth4)"]


def test_probes_cover_every_pair_and_plane_and_name_the_links_they_are_sure_of(plan):
    todo = ecmp.pairs(plan)
    assert len(todo) == 4 * 3 * 4
    path = ecmp.path_of(plan, ecmp.Pair("r0h0", "r1h1", 2))
    assert path.address == "fd00:4d52:4c:2303::2" and path.t1 is None
    assert path.links == ("r0h0:eth3--t0-p2-r0:eth1", "r1h1:eth3--t0-p2-r1:eth2")
    assert path.hops == ("t0-p2-r0", "a T1 by hash", "t0-p2-r1")
    assert path.label == "r0h0 -> r1h1 plane 2 (ecmp)"


def test_past_the_limit_every_host_link_is_still_probed_both_ways():
    big = compile_spec("mrc-8p-256", routing="bgp").plan
    todo = ecmp.pairs(big)
    assert len(todo) <= ecmp.EXHAUSTIVE_MAX
    hosts = {h.name for h in big.fabric.hosts}
    for plane in big.fabric.nic_planes:
        assert {p.src for p in todo if p.plane == plane} == hosts
        assert {p.dst for p in todo if p.plane == plane} == hosts


def results_where(plan, dead):
    """A ProbeResult per pair, failed when `dead(path)` says its path crosses the fault
    (a T1 decided per pair, as a hash would)."""
    from twin.verify.prober import ProbeResult

    out = []
    for i, pair in enumerate(ecmp.pairs(plan)):
        path = ecmp.path_of(plan, pair)
        ok = not dead(path, i)
        out.append(ProbeResult(path, forward=ok, reply=ok))
    return out


def test_the_prober_names_a_host_link_a_t0_or_a_planes_t1_layer(plan):
    assert ecmp.localize(plan, results_where(plan, lambda p, i: False)) == []
    link = "r0h0:eth2--t0-p1-r0:eth1"
    assert ecmp.localize(plan, results_where(plan, lambda p, i: link in p.links)) == [
        ("faulty", link)]
    assert ecmp.localize(plan, results_where(plan, lambda p, i: "t0-p2-r1" in p.hops)) == [
        ("faulty", "t0-p2-r1")]
    # a dead T1 of plane 3: the cross-rack pairs the hash put on it (one way of each)
    t1 = ecmp.localize(plan, results_where(
        plan, lambda p, i: p.plane == 3 and len(p.hops) > 1 and p.src < p.dst))
    assert t1 == [("faulty", "a T1 of plane 3 (ECMP: the hash hides which)")]
