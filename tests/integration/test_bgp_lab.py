"""The BGP baseline on real FRR (Debian's 8.4, installed by `twin up --routing bgp` when
missing) in real namespaces: mrc-4p with `routing: bgp`.

  * up converges: every planned session Established, every T0 2-wide toward the
    other rack's host links, in the kernel too; verify passes with 48 host-pair probes;
  * a T0-T1 link down is named by verify (the session, the 1-way ECMP), and once it is
    up again the fabric converges back;
  * MRC over ECMP (UDP entropy) and RoCE single-path move bytes exactly, and the
    spray reaches both T1s of a plane through the routers' hash;
  * down leaves no FRR process, socket or namespace.

A machine that lacks something FRR needs fails here with its name (twin.frr.missing),
never a skip.
"""

import json
from pathlib import Path

import pytest

from tests import helpers
from tests.integration.conftest import FABRICS, lab_name, namespaces_of, set_env
from twin import frr, lifecycle
from twin import lab as L
from twin import traffic as T
from twin.lab import phases

pytestmark = pytest.mark.netns
LAB = lab_name("bgp-4p-")
MiB = 1 << 20


@pytest.fixture(scope="module")
def bgp_lab(session_dirs):
    set_env(session_dirs)
    state = L.up(str(bgp_spec(session_dirs, LAB)), "netns").state
    run_dir = Path(state.dir) / "nodes"
    try:
        yield L.attach(state.lab)
    finally:
        set_env(session_dirs)
        lifecycle.down(state.lab)
    assert namespaces_of(LAB) == []
    assert not run_dir.exists()  # its FRR sockets, pid files and logs went with it
    assert [p for p in frr_pids() if LAB in p] == []


def heals(within_s: float) -> None:
    """verify passes again within `within_s` (BGP reconverged), or the assertion shows it."""
    back = helpers.poll(lambda: helpers.twin("verify", "--lab", LAB).returncode == 0,
                        within_s, every_s=1.0)
    assert back, helpers.twin("verify", "--lab", LAB).stdout[-2000:]


def bgp_spec(where, name: str) -> Path:
    """mrc-4p as lab `name`, with routing: bgp."""
    spec = Path(where) / f"{name}.yml"
    spec.write_text((FABRICS / "mrc-4p.yml").read_text().replace("name: mrc-4p\n",
                                                                  f"name: {name}\n", 1)
                    + "routing: bgp\n")
    return spec


def frr_pids() -> list[str]:
    """Every FRR daemon's command line on the machine (their sockets name the lab)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not a process
            continue
        line = " ".join(a.decode(errors="replace") for a in argv if a)
        if line.startswith(str(frr.SBIN)) and "--vty_socket" in line:
            found.append(line)
    return found


def test_frr_is_here():
    assert frr.missing() is None, frr.missing()


def test_up_converges_to_the_plan_in_frr_and_in_the_kernel(bgp_lab):
    routers = [n for n in bgp_lab.plan.nodes.values() if n.bgp is not None]
    assert len(routers) == 16
    ids = {n.name: n.bgp.router_id for n in routers}
    for node in routers:
        assert phases.read_router(bgp_lab.runtime, node, ids) == [], node.name
    t0 = bgp_lab.plan["t0-p0-r0"]
    sessions = frr.show(bgp_lab.runtime, "t0-p0-r0", "show bgp neighbors json")
    assert {k: v["bgpState"] for k, v in sessions.items()} == {"eth3": "Established",
                                                                "eth4": "Established"}
    kernel = json.loads(bgp_lab.runtime.exec("t0-p0-r0", ["ip", "-6", "-j", "route", "show",
                                                          "proto", "bgp"]).stdout)
    widths = {e["dst"]: len(e.get("nexthops", [e])) for e in kernel}
    assert widths == {e.prefix: 2 for e in t0.bgp.expect}  # 2-wide to the other rack
    mine = [p for p in frr_pids() if f"/{LAB}/nodes/" in p]
    assert len(mine) == 32  # zebra and bgpd on each of 16 routers


def test_verify_passes_with_a_probe_per_host_pair_and_plane(bgp_lab):
    r = helpers.twin("verify", "--lab", LAB, "--json", ok=True)
    report = json.loads(r.stdout)
    assert report["summary"]["paths"] == {"total": 48, "passed": 48, "failed": 0}
    assert report["summary"]["routes"]["failed"] == 0


def test_a_link_down_is_named_and_the_fabric_converges_back(bgp_lab):
    helpers.twin("fault", "link-down", "--lab", LAB, "t0-p0-r0:eth3", ok=True)
    try:
        r = helpers.poll(lambda: (lambda v: v if "Established" in v else None)(
            helpers.twin("verify", "--lab", LAB).stdout), 15, every_s=1.0)
        assert r and "t0-p0-r0: session on eth3 (to t1-p0-0) is" in r, r
        assert "fd00:4d52:4c:302::/64: 1-way ECMP in the kernel, planned 2-way" in r
    finally:
        helpers.twin("fault", "link-up", "--lab", LAB, "t0-p0-r0:eth3", ok=True)
    heals(30)


def link_tx(att, node: str) -> dict[str, int]:
    out = att.runtime.exec(node, ["ip", "-s", "-j", "link", "show"]).stdout
    return {e["ifname"]: e["stats64"]["tx"]["bytes"] for e in json.loads(out)}


def test_mrc_over_ecmp_is_byte_exact_and_sprays_over_both_t1s_by_hash(bgp_lab):
    before = {n: link_tx(bgp_lab, n) for n in ("t0-p0-r0", "t0-p1-r0")}
    run = T.run(bgp_lab.runtime, "bulk", [T.Flow("r0h0", "r1h0", 32 * MiB)], "mrc",
                timeout_s=120)
    assert run.ok, run.to_dict()
    flow = run.flows[0].result
    assert sorted(flow.planes_in_use) == [0, 1, 2, 3]
    for node, was in before.items():
        now = link_tx(bgp_lab, node)
        up = [now[i] - was[i] for i in ("eth3", "eth4")]
        assert min(up) > 0.2 * max(up), (node, up)  # both T1s carry the plane's share


def test_roce_single_path_over_ecmp_is_byte_exact(bgp_lab):
    run = T.run(bgp_lab.runtime, "bulk", [T.Flow("r0h1", "r1h1", 8 * MiB)],
                "single-path", timeout_s=120)
    assert run.ok, run.to_dict()
    assert len(run.flows[0].result.planes_in_use) == 1


def test_a_rebooted_t1_gets_its_frr_back_and_the_fabric_reconverges(bgp_lab):
    """A switch reboot (twin restart): the node comes back bare, its FRR is started
    again and given its configuration, its peers' sessions come back."""
    helpers.twin("restart", "--lab", LAB, "t1-p0-0", ok=True)
    assert len([p for p in frr_pids() if f"/{LAB}/nodes/t1-p0-0/" in p]) == 2
    heals(30)


@pytest.mark.docker
def test_a_bgp_lab_of_containers_runs_the_images_frr_and_leaves_nothing(session_dirs):
    """docker: FRR comes with the router image (images/packages/router.txt) and runs
    inside each container, its processes in the container's, so gone with it."""
    set_env(session_dirs)
    name = lab_name("bgp-docker-")
    state = L.up(str(bgp_spec(session_dirs, name)), "docker").state
    try:
        r = helpers.twin("verify", "--lab", name, "--json")
        assert r.returncode == 0, r.stdout[-3000:]
        assert json.loads(r.stdout)["summary"]["paths"]["passed"] == 48
        mine = [p for p in frr_pids() if p.startswith(str(frr.SBIN))
                and "/run/mrc-twin/frr/" in p]
        assert len(mine) >= 32  # each container's own zebra and bgpd
        run = T.run(L.attach(name).runtime, "bulk", [T.Flow("r0h0", "r1h0", 8 * MiB)],
                    "mrc", timeout_s=120)
        assert run.ok, run.to_dict()
    finally:
        set_env(session_dirs)
        lifecycle.down(state.lab)
    assert not Path("/run/mrc-twin/frr").exists()  # no daemon ever ran on the host's paths
    assert [p for p in frr_pids() if "/run/mrc-twin/frr/" in p] == []  # gone with them


@pytest.mark.parametrize("kind, target, named", [
    ("bgp-route-map", "t0-p0-r0:eth3",
     "t1-p0-0: no BGP route to fd00:4d52:4c:300::/64 (want 1 next hop out of eth1)"),
    ("bgp-withdraw", "t0-p0-r0:eth1", "-> r0h0 plane 0 (ecmp): request lost"),
])
def test_bgps_own_faults_are_named_by_verify_and_revert(bgp_lab, kind, target, named):
    """A route-map that denies everything keeps the session up and carries nothing; a
    withdrawn host link leaves that NIC port unreachable with every link up."""
    helpers.twin("fault", kind, "--lab", LAB, target, ok=True)
    try:
        got = helpers.poll(lambda: (lambda out: out if named in out else None)(
            helpers.twin("verify", "--lab", LAB).stdout), 15, every_s=1.0)
        assert got, helpers.twin("verify", "--lab", LAB).stdout[-2000:]
        sessions = frr.show(bgp_lab.runtime, "t0-p0-r0", "show bgp neighbors json")
        assert all(v["bgpState"] == "Established" for v in sessions.values())  # links up
    finally:
        helpers.twin("fault", "clear", "--lab", LAB, ok=True)
    heals(30)


def test_a_session_reset_comes_back_by_itself(bgp_lab):
    def dropped() -> int:
        return frr.show(bgp_lab.runtime, "t0-p0-r0",
                        "show bgp neighbors json")["eth4"]["connectionsDropped"]

    before = dropped()
    helpers.twin("fault", "bgp-reset", "--lab", LAB, "t0-p0-r0:eth4", ok=True)
    assert dropped() == before + 1  # it was reset, not left alone
    assert helpers.twin("fault", "list", "--lab", LAB, "--json", ok=True).stdout.count(
        "bgp-reset") == 0  # over once made: nothing held, nothing to revert
    heals(30)


def test_bgps_faults_are_refused_off_a_session(bgp_lab):
    r = helpers.twin("fault", "bgp-reset", "--lab", LAB, "r0h0:eth1", ok=False)
    assert "r0h0 runs no BGP" in r.stderr
    r = helpers.twin("fault", "bgp-withdraw", "--lab", LAB, "t0-p0-r0:eth3", ok=False)
    assert "give a T0's port to a host" in r.stderr


def test_a_silent_link_keeps_its_carrier_and_bgp_sees_it_only_at_its_hold_timer(bgp_lab):
    """link-silent: nothing passes either way, the ports stay up. BGP has no BFD here,
    so its session dies only when the hold timer (9 s) runs out."""
    helpers.twin("fault", "link-silent", "--lab", LAB, "t0-p0-r0:eth3", ok=True)
    try:
        flags = json.loads(bgp_lab.runtime.exec("t0-p0-r0", ["ip", "-j", "link", "show",
                                                             "eth3"]).stdout)[0]["flags"]
        assert "LOWER_UP" in flags  # carrier up: no port state says anything
        state = lambda: frr.show(bgp_lab.runtime, "t0-p0-r0",  # noqa: E731
                                 "show bgp neighbors json")["eth3"]["bgpState"]
        assert state() == "Established"  # at once: nothing told BGP
        gone = helpers.poll(lambda: state() != "Established", 20, every_s=0.5)
        assert gone, "the hold timer never expired"
    finally:
        helpers.twin("fault", "clear", "--lab", LAB, ok=True)
    heals(40)


def test_twin_probe_on_ecmp_names_a_planes_t1_layer_not_a_t1(bgp_lab):
    """A silent T1: the prober sees the pairs the hash put through it fail, and can only
    say which plane's T1s; a T0-to-host link down is named as itself."""
    helpers.twin("fault", "blackhole", "--lab", LAB, "t1-p3-1", ok=True)
    try:
        r = helpers.twin("probe", "--once", "--lab", LAB, "--json")
        assert r.returncode == 1, r.stdout + r.stderr
        assert json.loads(r.stdout)["named"] == [
            ["faulty", "a T1 of plane 3 (ECMP: the hash hides which)"]]
    finally:
        helpers.twin("fault", "clear", "--lab", LAB, ok=True)
    helpers.twin("fault", "link-down", "--lab", LAB, "r0h0:eth2", ok=True)
    try:
        live = helpers.twin("probe", "--lab", LAB, "--duration", "3", "--period", "500",
                            "--json")
        first = json.loads(live.stdout.splitlines()[0])
        assert first == {"event": "named", "verdict": "faulty",
                         "target": "r0h0:eth2--t0-p1-r0:eth1"}
    finally:
        helpers.twin("fault", "clear", "--lab", LAB, ok=True)
    assert helpers.poll(lambda: helpers.twin("probe", "--once", "--lab", LAB).returncode == 0,
                        20, every_s=1.0)
