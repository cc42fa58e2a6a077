"""The remote runtimes' pure parts: argv built, output parsed, jobs split and merged."""

import json
import os
import subprocess
import sys

import pytest

from twin import dataplane
from twin.dataplane.program import push
from twin.errors import LabError, UsageError
from twin.fabric import paths as P
from twin.lab.adopt import check_found
from twin.lab.compile import compile_spec
from twin.owner import Owner
from twin.remote import probe, ship
from twin.remote.transport import DockerHost, Kubectl, NodeRef, parse_docker_url
from twin.runtime import get_runtime, pick_runtime
from twin.runtime.remote import RemoteRuntime, parse_boot_state

POD = {"node": "r0h0", "target": "mrc-4p-r0h0-5d8f7c9b6d-x2x9q", "state": "Running",
       "container": "r0h0"}


def test_docker_host_argv():
    tr = DockerHost("ssh://lab@fabric1")
    ref = NodeRef("r0h0", "clab-mrc-4p-r0h0", "running")
    assert tr.argv(ref, ["ip", "-j", "link"]) == [
        "docker", "-H", "ssh://lab@fabric1", "exec", "clab-mrc-4p-r0h0", "ip", "-j", "link"]
    assert tr.argv(ref, ["python3", "-"], stdin=True)[3:5] == ["exec", "-i"]
    listing = tr.list_argv("mrc-4p")
    assert listing[:5] == ["docker", "-H", "ssh://lab@fabric1", "ps", "-a"]
    assert "label=containerlab=mrc-4p" in listing


def test_docker_ps_output_parsed():
    text = ("clab-mrc-4p-r0h0\tr0h0\trunning\tmrc-twin/host:latest\t/run/twin\tab12\n"
            "clab-mrc-4p-t1-p0-0\tt1-p0-0\texited\tmrc-twin/router:latest\t\t\n"
            "somebody-else\t\trunning\tdebian\t\t\n\n")
    refs = DockerHost("unix:///var/run/docker.sock").parse_list(text)
    assert [(r.node, r.target, r.running) for r in refs] == [
        ("r0h0", "clab-mrc-4p-r0h0", True), ("t1-p0-0", "clab-mrc-4p-t1-p0-0", False)]
    assert refs[0].label("mrc-twin.lab-id") == "ab12"


@pytest.mark.parametrize("url, ok", [
    ("unix:///var/run/docker.sock", True), ("tcp://fabric1:2376", True),
    ("ssh://lab@fabric1", True), ("fabric1:2376", False), ("unix://", False),
    ("tcp://", False)])
def test_docker_urls(url, ok):
    if ok:
        assert parse_docker_url(url) == url
    else:
        with pytest.raises(UsageError, match="--docker-host"):
            parse_docker_url(url)


def test_kubectl_argv_launcher_and_native():
    ref = NodeRef.from_dict(POD)
    launcher = Kubectl("mrc-twin", context="lab", kubeconfig="/k")
    assert launcher.argv(ref, ["ip", "link"], stdin=True) == [
        "kubectl", "--kubeconfig", "/k", "--context", "lab", "exec", "-n", "mrc-twin",
        POD["target"], "-c", "r0h0", "-i", "--", "docker", "exec", "-i", "r0h0", "ip", "link"]
    native = Kubectl("mrc-twin", launcher=False)
    assert native.argv(ref, ["ip", "link"]) == [
        "kubectl", "exec", "-n", "mrc-twin", POD["target"], "-c", "r0h0", "--", "ip", "link"]
    assert native.list_argv("mrc-4p") == [
        "kubectl", "get", "pods", "-n", "mrc-twin", "-l",
        "clabernetes/topologyOwner=mrc-4p", "-o", "json"]


def _pod(name, node, phase="Running", containers=None, deleting=False):
    meta = {"name": name, "labels": {"clabernetes/topologyOwner": "mrc-4p",
                                     "clabernetes/topologyNode": node}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase},
            "spec": {"containers": [{"name": c, "image": f"img-{c}"}
                                    for c in (containers or [node])]}}


def test_kubectl_pod_list_parsed():
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _pod("mrc-4p-r0h0-a-b", "r0h0"),
        _pod("mrc-4p-r0h0-c-d", "r0h0", deleting=True),  # the old pod of a restart
        _pod("mrc-4p-t1-p0-0-e-f", "t1-p0-0", "Pending", ["launcher", "sidecar"]),
        {"metadata": {"name": "unrelated", "labels": {}}}]})
    refs = Kubectl("mrc-twin").parse_list(text)
    assert [(r.node, r.target, r.container, r.running, r.image) for r in refs] == [
        ("r0h0", "mrc-4p-r0h0-a-b", "r0h0", True, "img-r0h0"),
        ("t1-p0-0", "mrc-4p-t1-p0-0-e-f", "launcher", False, "img-launcher")]
    with pytest.raises(LabError, match="no pod list"):
        Kubectl("mrc-twin").parse_list("error: something")


def test_transport_failures_told_from_the_commands_own():
    def proc(rc, err):
        return subprocess.CompletedProcess([], rc, "", err)

    k = Kubectl("mrc-twin")
    assert k.failure(proc(3, "oops\ncommand terminated with exit code 3\n")) is None
    assert k.failure(proc(1, 'Error from server (NotFound): pods "x" not found')) \
        == 'Error from server (NotFound): pods "x" not found'
    d = DockerHost("unix:///x.sock")
    assert d.failure(proc(1, "Error response from daemon: No such container: c")) \
        == "Error response from daemon: No such container: c"
    assert d.failure(proc(2, "ip: cannot find device")) is None


def test_boot_state_and_reprogramming_over_exec():
    assert parse_boot_state("booted\n") == ("booted", "")
    assert parse_boot_state("failed\ninterfaces never appeared: eth3\n") == (
        "failed", "interfaces never appeared: eth3")
    assert parse_boot_state("") == ("waiting", "")
    program = dataplane.get("ebpf").program(compile_spec("mrc-4p").plan["t0-p0-r0"])
    sent = []

    class Runtime:  # what push needs of a runtime: its exec, its Python, its owner
        owner = Owner.here("mrc-4p", "abc")
        python_argv = RemoteRuntime.python_argv

        def exec(self, node, argv, *, input=None, check=True, timeout=60):
            sent.append((node, argv, input))

    push(Runtime(), program)
    [(node, argv, text)] = sent
    assert node == "t0-p0-r0"
    # the node image's python3, the code bind-mounted into every node, the one runner
    assert argv[:6] == ["env", "PYTHONPATH=/opt/mrc-twin", "python3", "-m", "twin.node.runner",
                        "-"]
    assert argv[6:] == ["--owner", Runtime.owner.tag]
    assert json.loads(text) == json.loads(program.to_json())  # the whole program on stdin


def test_jobs_split_per_host_and_merged_back():
    fabric = compile_spec("mrc-4p").fabric
    paths = P.loopback_paths(fabric)[:2] + P.host_pairs_paths(fabric)[:3]
    reverse = {i: P.reverse(fabric, p) for i, p in enumerate(paths)
               if p.kind not in ("loop-t0", "loop-t1")}
    work = probe.jobs(paths, reverse)
    assert sum(len(w["probes"]) for w in work.values()) == len(paths)
    for i, back in reverse.items():  # the destination answers, on the path back
        assert str(i) in work[paths[i].dst]["answers"]
        assert work[paths[i].dst]["answers"][str(i)]["address"] == back.address
    src = paths[2].src
    merged = probe.merge(paths, {src: {"2": [False, False, None, 3]},
                                 paths[0].src: {"0": [True, True, 12.5, 1]}},
                         {paths[2].dst: [2]})
    assert merged[0].ok and merged[0].rtt_us == 12.5
    assert merged[2].forward and not merged[2].reply  # arrived, the answer was lost
    assert merged[2].failure == "request arrived, reply lost"
    assert not merged[4].forward and merged[4].failure == "request lost"


def test_the_shipped_code_is_the_agents_closure():
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(ship.bundle(probe.AGENT))).namelist()
    assert {"twin/remote/agent.py", "twin/verify/prober.py", "twin/verify/packets.py",
            "twin/mrc/wire.py"} <= set(names)
    assert not [n for n in names if n.startswith(("twin/cli/", "twin/runtime/"))]
    assert ship.bundle(probe.AGENT) == ship.bundle(probe.AGENT)  # cached, deterministic
    assert ship.preamble(probe.AGENT).startswith(b"%d\n" % len(ship.bundle(probe.AGENT)))


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent's raw socket needs root")
def test_agent_speaks_its_protocol_from_the_shipped_zip(tmp_path):
    """The boot line, the zip, a handshake: as a node runs it (no packet is sent)."""
    lines = [json.dumps({"host": "h", "nic": "::1"}),
             json.dumps({"run": 7, "peers": {}, "probes": {}, "answers": {}}),
             json.dumps({"stop": True})]
    proc = subprocess.run([sys.executable, "-I", "-c", ship.BOOT, probe.AGENT],
                          input=ship.preamble(probe.AGENT) + "\n".join(lines).encode() + b"\n",
                          capture_output=True, timeout=30, cwd=tmp_path)
    out = [json.loads(x) for x in proc.stdout.decode().splitlines()]
    assert proc.returncode == 0, proc.stderr.decode()
    assert "ready" in out[0] and out[1] == {"sent": 0}
    assert out[2] == {"results": {}, "arrived": []}


def test_remote_runtimes_attach_only():
    with pytest.raises(UsageError, match="twin attach SPEC --docker-host URL"):
        pick_runtime("docker-remote")
    with pytest.raises(UsageError, match="--namespace NS"):
        pick_runtime("kubectl")
    rt = get_runtime("docker-remote", "")
    assert rt.attaches and rt.destroy(["r0h0"]) == []
    with pytest.raises(UsageError, match="cannot create nodes"):
        rt.create_nodes([])
    with pytest.raises(LabError, match="no network namespace of it on this machine"):
        rt.netns_path("r0h0")


def test_check_found_names_what_is_wrong():
    refs = {"a": NodeRef("a", "ca", "running"), "b": NodeRef("b", "cb", "exited")}
    with pytest.raises(LabError, match="no nodes of topology 't'"):
        check_found("t", "docker -H x", ["a"], {})
    with pytest.raises(LabError, match="lacks 1 of the plan's 3 nodes \\(c\\)"):
        check_found("t", "docker -H x", ["a", "b", "c"], refs)
    with pytest.raises(LabError, match="1 nodes of topology 't' are not running: b \\(exited\\)"):
        check_found("t", "docker -H x", ["a", "b"], refs)
    check_found("t", "docker -H x", ["a"], refs)


def test_what_needs_the_nodes_here_is_refused_in_one_line():
    from types import SimpleNamespace

    from twin.lab.attach import Attached

    att = Attached(SimpleNamespace(lab="far"), None, get_runtime("kubectl", ""))
    with pytest.raises(UsageError, match="^twin drill run: lab far is attached \\(kubectl"):
        att.require_local("twin drill run", "why")
    Attached(SimpleNamespace(lab="near"), None, get_runtime("fake", "")).require_local("x", "y")
