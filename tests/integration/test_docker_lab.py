"""The same labs as containers: Docker runtime, and containerlab's contract."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import double_on_path
from tests.integration.conftest import (
    LAB4,
    LAB8,
    kill_up_midway,
    lab_name,
    own_spec,
    running_lab,
    set_env,
)
from twin import dockerd, lifecycle
from twin import faults as F
from twin import lab as L
from twin import traffic as T
from twin.owner import Owner
from twin.runtime.netns import leftover_namespaces
from twin.verify import run_verify

ROOT = Path(__file__).resolve().parents[2]


def containers_of(lab: str) -> list[str]:
    """Names of a lab's containers. Sparse: no per-container inspect, which would race
    with containers being created or removed while we look."""
    c = dockerd.client()
    found = c.containers.list(all=True, sparse=True, filters={"label": f"containerlab={lab}"})
    return sorted(x.attrs["Names"][0].lstrip("/") for x in found)


def veths_in_host_namespace() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True,
                         text=True).stdout
    return [line.split(":")[1].strip() for line in out.splitlines()]


def outcome(report):
    """Everything about a verify run that must not depend on the runtime."""
    return (report.summary(),
            sorted((r.path.src, r.path.address, r.ok) for r in [*report.paths, *report.loops]),
            sorted((n.node, tuple(n.problems())) for n in report.nodes))


@pytest.fixture(scope="module")
def docker4(session_dirs):
    host_veths = set(veths_in_host_namespace())
    with running_lab(session_dirs, LAB4, "docker") as att:
        yield att
    assert containers_of(LAB4) == []
    assert set(veths_in_host_namespace()) <= host_veths


@pytest.mark.docker
def test_mrc_4p_as_20_containers_verifies(docker4):
    names = containers_of(LAB4)
    assert len(names) == 20 and f"clab-{LAB4}-t0-p0-r0" in names
    c = dockerd.client().containers.get(f"clab-{LAB4}-r0h0")
    assert c.attrs["HostConfig"]["NetworkMode"] == "none"
    assert not c.attrs["HostConfig"]["Privileged"]
    assert c.labels["containerlab"] == LAB4 and c.labels["clab-node-name"] == "r0h0"
    report = run_verify(docker4.runtime, docker4.plan)
    assert report.ok, report.to_dict()["nodes"]
    assert report.summary()["paths"]["total"] == 80


@pytest.mark.docker
def test_code_and_config_are_bind_mounted(docker4):
    out = docker4.runtime.exec("r0h0", ["true"])  # nsenter into the netns works
    assert out.returncode == 0
    c = dockerd.client().containers.get(f"clab-{LAB4}-r0h0")
    listing = c.exec_run(["ls", "/opt/mrc-twin/twin", "/etc/mrc-twin"]).output.decode()
    assert "dockerd.py" in listing and "routes.batch" in listing


@pytest.mark.docker
def test_a_host_container_runs_the_compiled_data_path_built_here(docker4):
    """The bind-mounted code includes the module pip built with this machine's gcc; the
    image's own python3 loads it (the same CPython minor version), and the host image's
    libisal2 computes its ICRC."""
    from twin import endpoints
    from twin.mrc.loop import load_datapath

    if load_datapath("auto")[0] is None:
        pytest.skip("the compiled data path is not built on this machine")
    with endpoints.client(docker4.runtime, "r0h0") as c:
        hello = c.hello()
    assert hello["datapath"] == "compiled" and hello["icrc"] == "isa-l", hello


@pytest.mark.docker
def test_netns_and_docker_verify_identically(docker4, session_dirs):
    docker_outcome = outcome(run_verify(docker4.runtime, docker4.plan))
    spec = session_dirs / "twin4.yml"
    spec.write_text((ROOT / "lab/fabrics/mrc-4p.yml").read_text().replace(
        "name: mrc-4p", "name: twin4"))
    L.up(str(spec), "netns")
    try:
        att = L.attach("twin4")
        assert outcome(run_verify(att.runtime, att.plan)) == docker_outcome
    finally:
        lifecycle.down("twin4")


@pytest.mark.docker
def test_nodes_that_configure_themselves_at_boot_verify_as_twins_own(docker4, session_dirs):
    """docker-boot: the rendered topology's MRC_TWIN_BOOT=1 reaches the containers and
    twin programs nothing (images/mrc-twin-boot does, from /etc/mrc-twin): the fabric
    verifies as the twin-programmed one does, route for route, and carries traffic from
    the endpoints the hosts started themselves; a link brought back after a fault, and a
    rebooted switch and host, come back."""
    name = lab_name("boot4-")
    spec = own_spec(session_dirs, name, "mrc-4p")
    up = L.up(spec, "docker-boot")
    try:
        att = L.attach(name)
        assert outcome(run_verify(att.runtime, att.plan)) == \
            outcome(run_verify(docker4.runtime, docker4.plan))
        for node in ("t0-p2-r1", "t1-p3-0", "r1h0"):  # the kernel's own word, side by side
            argv = ["ip", "-j", "-6", "route", "show", "proto", "static"]
            assert routes(att, node, argv) == routes(docker4, node, argv), node
        logs = Path(att.runtime.node_view("r0h0").from_host("/run/mrc-twin/endpoint.log"))
        assert logs.exists()  # the host's own boot started its endpoint
        run = T.run(att.runtime, "bulk", T.flows_for("bulk", [], 8 << 20, "r0h0", "r1h1"),
                    "mrc", timeout_s=60)
        assert run.ok, run.to_dict()
        F.link_down(att, "t0-p0-r0:eth3")  # set down, its addresses and routes go with it
        F.link_up(att, "t0-p0-r0:eth3")
        assert run_verify(att.runtime, att.plan).ok
        lifecycle.restart(att, "t1-p1-0")
        lifecycle.restart(att, "r1h1")
        assert run_verify(att.runtime, att.plan).ok
    finally:
        lifecycle.down(name)
    assert [p.name for p in up.phases][-2:] == ["carrier", "endpoints"]


def routes(att, node: str, argv: list[str]) -> list[dict]:
    got = json.loads(att.runtime.exec(node, argv).stdout or "[]")
    return sorted(({k: v for k, v in r.items() if k not in ("expires",)} for r in got),
                  key=json.dumps)


@pytest.mark.docker
def test_link_fault_on_containers_names_the_link(docker4):
    F.link_down(docker4, "t0-p1-r1:eth3")
    try:
        report = run_verify(docker4.runtime, docker4.plan)
        assert report.suspect_links() == ["t0-p1-r1:eth3--t1-p1-0:eth2"]
    finally:
        F.link_up(docker4, "t0-p1-r1:eth3")
    assert run_verify(docker4.runtime, docker4.plan).ok


@pytest.mark.docker
def test_restarting_a_router_rewires_and_reprograms_it(docker4):
    before = docker4.runtime.netns_path("t1-p0-1")
    done = lifecycle.restart(docker4, "t1-p0-1")
    assert docker4.runtime.netns_path("t1-p0-1") != before  # a new namespace: it rebooted
    assert done.reprogrammed == ("t0-p0-r0", "t0-p0-r1", "t1-p0-1")
    assert run_verify(docker4.runtime, docker4.plan).ok


@pytest.mark.docker
def test_restart_keeps_faults_in_force(docker4):
    F.link_down(docker4, "t1-p2-0:eth1")
    try:
        assert lifecycle.restart(docker4, "t1-p2-0").faults_again == ("t1-p2-0:eth1",)
        assert run_verify(docker4.runtime, docker4.plan).suspect_links() == [
            "t0-p2-r0:eth3--t1-p2-0:eth1"]
    finally:
        F.link_up(docker4, "t1-p2-0:eth1")


@pytest.mark.docker
def test_telemetry_reads_every_link_end_of_the_containers_and_follows_a_restart(docker4):
    """The exporter's Collector on containers: every link end's counters, every endpoint
    up; after a router restarts, its counters come from its new namespace, not the dead
    one the old netlink socket still holds."""
    from twin.telemetry.collect import Collector

    c = Collector(docker4)
    try:
        run = T.run(docker4.runtime, "bulk", T.flows_for("bulk", [], 8 << 20, "r0h0", "r1h0"),
                    "mrc", timeout_s=60)
        assert run.ok
        s = c.sample()
        assert len(s.links) == 2 * len(docker4.fabric.links)
        assert all(e.up for e in s.endpoints) and all(lk.up for lk in s.links)
        t1 = {lk.ifname: lk.tx_bytes for lk in s.links if lk.node == "t1-p1-0"}
        assert sum(t1.values()) > 1 << 18  # the transfer sprayed over it (1/8 of 8 MiB)
        lifecycle.restart(docker4, "t1-p1-0")
        again = {lk.ifname: lk.tx_bytes for lk in c.sample().links if lk.node == "t1-p1-0"}
        assert set(again) == set(t1) and sum(again.values()) < 1 << 16, again
    finally:
        c.close()


@pytest.mark.docker
def test_restarting_a_host_brings_its_endpoint_back(docker4):
    lifecycle.restart(docker4, "r1h1")
    run = T.run(docker4.runtime, "bulk", T.flows_for("bulk", [], 8 << 20, "r0h0", "r1h1"),
                "mrc", timeout_s=60)
    assert run.ok, run.to_dict()


@pytest.mark.docker
def test_killed_docker_up_then_down_all_leaves_nothing(session_dirs):
    done = kill_up_midway(session_dirs / "killed-docker", session_dirs / "build", "docker",
                          lambda: containers_of(LAB8), 8)
    assert done.returncode == 0, done.stderr
    assert containers_of(LAB8) == []
    assert not [n for n in leftover_namespaces() if n.startswith(f"twin-{LAB8}-")]


@pytest.mark.docker
def test_mrc_8p_as_80_containers_verifies(session_dirs):
    set_env(session_dirs)
    L.up(own_spec(session_dirs, LAB8), "docker")
    try:
        att = L.attach(LAB8)
        assert len(containers_of(LAB8)) == 80
        report = run_verify(att.runtime, att.plan)
        assert report.ok and report.summary()["paths"]["total"] == 6528
    finally:
        lifecycle.down(LAB8)
    assert containers_of(LAB8) == []


@pytest.fixture
def fake_containerlab(tmp_path, monkeypatch):
    """Put the containerlab test double on PATH."""
    return double_on_path(tmp_path, monkeypatch, "containerlab",
                          "tests.doubles.fake_containerlab")


@pytest.mark.docker
def test_containerlab_runtime_against_the_contract_double(fake_containerlab, session_dirs):
    set_env(session_dirs)
    clab4 = lab_name("clab4")
    spec = own_spec(session_dirs, clab4, "mrc-4p")
    state = L.up(spec, "auto").state  # auto prefers containerlab once it is on PATH
    assert state.runtime == "containerlab"
    try:
        att = L.attach(clab4)
        assert len(containers_of(clab4)) == 20
        c = dockerd.client().containers.get(f"clab-{clab4}-r0h0")
        assert Owner.from_labels(c.labels) == state.owner  # deployed with its owner
        assert run_verify(att.runtime, att.plan).ok  # MTUs set by twin over clab's 9500
        assert lifecycle.restart(att, "t0-p3-r1")
        assert run_verify(att.runtime, att.plan).ok
    finally:
        lifecycle.down(clab4)
    assert containers_of(clab4) == []


def test_the_double_rejects_what_containerlab_would(tmp_path):
    bad = tmp_path / "bad.clab.yml"
    bad.write_text("name: x\ntopology:\n  nodes:\n    a: {kind: linux, sysctls: {}}\n")
    proc = subprocess.run([sys.executable, "-m", "tests.doubles.fake_containerlab", "deploy",
                           "-t", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 1 and "sysctls" in proc.stderr


@pytest.mark.containerlab
def test_real_containerlab_deploys_the_rendered_topology(session_dirs):
    set_env(session_dirs)
    state = L.up(own_spec(session_dirs, LAB4), "containerlab").state
    try:
        att = L.attach(state.lab)
        assert run_verify(att.runtime, att.plan).ok
    finally:
        lifecycle.down(state.lab)

