"""A fabric deployed elsewhere, reached only through exec: `twin attach`.

The fabric is deployed here by the docker-boot runtime (nodes configure themselves at
boot, as under containerlab or clabernetes), then attached to as if it were remote:
through the real `docker -H unix:///var/run/docker.sock`, and through kubectl, played
by the contract double tests/doubles/fake_kubectl.py over the same containers. Every
check compares with what the local runtime sees of the same nodes.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import double_on_path
from tests.integration.conftest import lab_name, own_spec, set_env
from tests.integration.test_docker_lab import containers_of, outcome
from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin import traffic as T
from twin.errors import LabError
from twin.remote.transport import DockerHost, Kubectl
from twin.verify import run_verify

ROOT = Path(__file__).resolve().parents[2]
SOCKET = "unix:///var/run/docker.sock"
LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"


@pytest.fixture(scope="module")
def deployed(session_dirs):
    """The fabric, deployed and configured without twin's configure: docker-boot."""
    set_env(session_dirs)
    name = lab_name("remote4")
    L.up(own_spec(session_dirs, name, "mrc-4p"), "docker-boot")
    try:
        yield L.attach(name)
    finally:
        set_env(session_dirs)
        lifecycle.down(name)
    assert containers_of(name) == []


@pytest.fixture
def fake_kubectl(tmp_path, monkeypatch):
    """Put the kubectl test double on PATH; its pods are the lab's containers."""
    exe = double_on_path(tmp_path, monkeypatch, "kubectl", "tests.doubles.fake_kubectl")
    monkeypatch.setenv("FAKE_KUBECTL_NAMESPACE", "c9s-test")
    return exe


def attached(deployed, transport, suffix: str):
    L.adopt(deployed.state.spec_path, transport, name=f"{deployed.lab}-{suffix}",
            topology=deployed.lab)
    return L.attach(f"{deployed.lab}-{suffix}")


@pytest.mark.docker
def test_docker_host_verifies_route_for_route_as_local(deployed):
    remote = attached(deployed, DockerHost(SOCKET), "dh")
    try:
        assert remote.runtime.name == "docker-remote"
        report = run_verify(remote.runtime, remote.plan)
        assert report.ok, report.to_dict()["nodes"]
        assert outcome(report) == outcome(run_verify(deployed.runtime, deployed.plan))
        covered = run_verify(remote.runtime, remote.plan, coverage=1)
        assert covered.ok and covered.coverage["achieved"] >= 1
        assert len(covered.paths) < len(report.paths)  # fewer probes, every route crossed
        with pytest.raises(LabError, match="reached only through `docker -H"):
            remote.runtime.netns_path("r0h0")
    finally:
        lifecycle.down(remote.lab)
    assert len(containers_of(deployed.lab)) == 20  # forgotten, never removed


@pytest.mark.docker
def test_remote_link_fault_is_localized_reverted_and_undone_by_down(deployed):
    remote = attached(deployed, DockerHost(SOCKET), "fault")
    try:
        F.link_down(remote, "t0-p0-r0:eth3")
        for att in (remote, deployed):  # applied in the fabric itself, seen by both
            report = run_verify(att.runtime, att.plan)
            assert not report.ok and report.suspect_links() == [LINK]
            failed = [r for r in [*report.paths, *report.loops] if not r.ok]
            assert failed and all(LINK in r.path.links or LINK in
                                  report.reverse.get(_key(r), r.path).links for r in failed)
        F.link_up(remote, "t0-p0-r0:eth3")
        assert run_verify(remote.runtime, remote.plan).ok
        F.link_down(remote, "t0-p1-r1:eth4")  # left in force: `down` reverts it
    finally:
        done = lifecycle.down(remote.lab)
    assert (len(done.nodes), len(done.kept), done.faults_reverted) == (0, 20, 1)
    assert done.kept_with.startswith("their orchestrator (docker -H ")
    assert run_verify(deployed.runtime, deployed.plan).ok
    assert len(containers_of(deployed.lab)) == 20


def _probe(lab: str, *args: str, bound_s: float = 90) -> tuple[int, list[dict], float]:
    """`twin probe --lab LAB ARGS --json` as a user runs it, killed past bound_s: its exit
    status, its JSON (--once: one document; live: a line each), and how long it took."""
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "twin", "probe", "--lab", lab, *args,
                           "--json"], capture_output=True, text=True, timeout=bound_s,
                          env=dict(os.environ))
    assert proc.returncode in (0, 1), proc.stderr
    docs = [json.loads(proc.stdout)] if "--once" in args else \
        [json.loads(x) for x in proc.stdout.splitlines()]
    return proc.returncode, docs, time.monotonic() - began


@pytest.mark.docker
def test_probe_runs_as_loop_agents_and_names_a_remote_link_fault(deployed):
    """`twin probe` over docker -H: the loop agents drills use, the local JSON."""
    from twin.verify.localize import Localizer

    keys = {"lab", "ok", *Localizer(deployed.fabric, []).snapshot()}  # --once's schema
    remote = attached(deployed, DockerHost(SOCKET), "probe")
    try:
        code, [healthy], took = _probe(remote.lab, "--once")
        assert code == 0 and healthy.keys() == keys, healthy
        assert healthy["ok"] and healthy["named"] == healthy["failing"] == [], healthy
        assert took < 60
        F.link_down(remote, "t0-p0-r0:eth3")
        code, [broken], took = _probe(remote.lab, "--once")
        assert code == 1 and broken.keys() == keys and took < 60
        assert [(d["target"], d["kind"]) for d in broken["named"]] == [(LINK, "link")], broken
        code, lines, took = _probe(remote.lab, "--duration", "3", "--period", "20")
        assert code == 1 and took < 60, lines  # live: agents started, named, stopped
        assert [x["target"] for x in lines if x.get("event") == "named"] == [LINK]
        end = lines[-1]
        assert end["event"] == "end" and end["error"] is None and end["rounds"] >= 2
        assert [d["target"] for d in end["named"]] == [LINK] and end["probes_sent"] > 0
        assert _agents(deployed.lab) == []  # every loop agent ended with twin probe
    finally:
        lifecycle.down(remote.lab)
    assert run_verify(deployed.runtime, deployed.plan).ok


def _agents(lab: str) -> list[str]:
    """Loop agents still running in the lab's hosts."""
    found = []
    for c in containers_of(lab):
        proc = subprocess.run(["docker", "exec", c, "sh", "-c",
                               "grep -l 'loop_[a]gent' /proc/[0-9]*/cmdline || true"],
                              capture_output=True, text=True, timeout=30)
        found += [f"{c}: {x}" for x in proc.stdout.split()]
    return found


def _key(result):
    from twin.verify.report import path_key

    return path_key(result.path)


@pytest.mark.docker
def test_kubectl_contract_double_verify_fault_and_traffic(deployed, fake_kubectl):
    remote = attached(deployed, Kubectl("c9s-test"), "k8s")
    try:
        assert remote.runtime.name == "kubectl"
        assert remote.runtime.ref("r0h0").target.startswith(f"{deployed.lab}-r0h0-")
        assert outcome(run_verify(remote.runtime, remote.plan)) == \
            outcome(run_verify(deployed.runtime, deployed.plan))
        F.link_down(remote, "t0-p1-r1:eth3")
        assert run_verify(remote.runtime, remote.plan).suspect_links() == [
            "t0-p1-r1:eth3--t1-p1-0:eth2"]
        F.link_up(remote, "t0-p1-r1:eth3")
        run = T.run(remote.runtime, "bulk", T.flows_for("bulk", [], 8 << 20, "r0h0", "r1h1"),
                    "mrc", timeout_s=60)  # the endpoints, through relays over kubectl exec
        assert run.ok, run.to_dict()
        proc = remote.runtime.exec("r1h1", ["sh", "-c", "exit 3"], check=False)
        assert proc.returncode == 3 and "command terminated with exit code 3" in proc.stderr
    finally:
        lifecycle.down(remote.lab)


@pytest.mark.docker
def test_attach_errors_name_what_is_missing(deployed, fake_kubectl):
    with pytest.raises(LabError, match="no nodes of topology 'nosuch'"):
        L.adopt(deployed.state.spec_path, DockerHost(SOCKET), name=lab_name("err1"),
                topology="nosuch")
    with pytest.raises(LabError, match="cannot list nodes"):
        L.adopt(deployed.state.spec_path, DockerHost("unix:///nonexistent/docker.sock"),
                name=lab_name("err2"), topology=deployed.lab)
    with pytest.raises(LabError, match="no nodes of topology"):
        L.adopt(deployed.state.spec_path, Kubectl("other-namespace"), name=lab_name("err3"),
                topology=deployed.lab)
    labs = [s["lab"] for s in L.status()]
    assert not {lab_name(f"err{i}") for i in (1, 2, 3)} & set(labs)  # forgotten again
    assert len(containers_of(deployed.lab)) == 20


@pytest.mark.docker
def test_drill_runs_on_an_attached_lab_on_the_nodes_clock(deployed, tmp_path):
    """t0-t1-link-down over docker -H: faults stamped in the nodes, the prober as agents
    in the hosts, figures on the nodes' clock (which is this machine's here: the offset
    measured must be 0 within its bound), localized to the link, rolled back."""
    from twin.chaos import drill as D
    from twin.chaos import report, runner

    remote = attached(deployed, DockerHost(SOCKET), "drill")
    try:
        drill = D.load_drill(D.find("t0-t1-link-down"))  # timed: the cut lands mid-transfer
        run = runner.run(remote, drill, seed=1)
        data = run.run.to_json()
        clock = data["clock"]
        assert clock["kind"] == "nodes" and clock["machine"] == SOCKET
        assert clock["stamped_changes"] >= 2 and clock["unstamped_changes"] == 0
        assert abs(clock["offset"]["offset_us"]) <= clock["offset"]["error_us"] + 1000
        [fault] = data["faults"]
        link = remote.fabric.link_at(F.parse_endpoint(remote, fault["target"])).id
        assert fault["localized"] and fault["localized_as"] in (link, fault["target"])
        assert fault["detection_us"] is not None and fault["repair_us"] is not None
        assert 0 <= fault["at_uncertainty_us"] < 50_000  # one ioctl in the node, not an exec
        got = {e["what"]: e for e in data["expectations"]}
        for what in ("steady state: verify", "exact", "localized", "rollback: verify"):
            assert got[what]["ok"], got[what]
        assert F.active(remote) == [] and remote.runtime.stream("r0h0") is None
        html = report.write([run.run], tmp_path)["html"].read_text()
        assert "the nodes&#x27; CLOCK_MONOTONIC" in html and "± (µs)" in html
    finally:
        lifecycle.down(remote.lab)
    assert run_verify(deployed.runtime, deployed.plan).ok


@pytest.mark.docker
def test_kubectl_drill_clock_streams_and_its_one_machine(deployed, fake_kubectl, monkeypatch):
    from twin.chaos import drill as D
    from twin.chaos import runner
    from twin.errors import UsageError
    from twin.runtime.clock import NodesClock

    remote = attached(deployed, Kubectl("c9s-test"), "k8sclock")
    try:
        clock = NodesClock(remote.runtime, remote.lab)
        assert clock.machine == "fake-worker-0"
        assert clock.open(["r0h0", "t0-p0-r0"]) == []  # kubectl exec -i -- docker exec -i
        try:
            _, began, done, width = clock.change(
                lambda: remote.runtime.exec("t0-p0-r0", ["true"]))
            assert clock.stamped == 1 and began <= done and width == done - began
        finally:
            clock.close()
        assert remote.runtime.stream("r0h0") is None and clock.after is not None
        monkeypatch.setenv("FAKE_KUBECTL_MACHINES", "kind-worker,kind-worker2")
        with pytest.raises(UsageError, match=r"^twin drill run: lab \S+ runs on 2 machines "
                           r"\(kind-worker \("):
            runner.run(remote, D.load_drill(D.find("t0-t1-link-down")))
        assert F.active(remote) == []  # refused before anything was applied
    finally:
        lifecycle.down(remote.lab)
