"""Both data planes on real namespaces: the module's tests run once on a lab of each data
plane this kernel runs (`lab` is parametrized), and `auto` is checked to pick what the
kernel runs.

On a kernel without CONFIG_IPV6_SEG6_LWTUNNEL the seg6local lab skips in one line saying
so, and every other integration module runs on ebpf (auto picks it); on a kernel with it,
auto picks seg6local for every other module, and the ebpf lab here is where the eBPF
programs meet real packets."""

import json
import shutil
import subprocess
import time

import pytest
from click.testing import CliRunner

from tests.integration.conftest import (
    lab_name,
    namespaces_of,
    needs_dataplane,
    own_spec,
    running_lab,
    set_env,
)
from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.dataplane.probe import probe
from twin.errors import LabError
from twin.state import LabState
from twin.verify import run_verify

pytestmark = pytest.mark.netns
LAB = lab_name("test-dp")
DATAPLANES = ["seg6local", "ebpf"]  # `lab`: mrc-4p on each, where the kernel runs it


def attached_programs(att) -> dict[tuple[str, str], dict]:
    """(node, port) -> our filter's options, as `tc -j filter show` reports them."""
    out = {}
    for name, node in att.plan.nodes.items():
        for ifc in node.interfaces:
            text = att.runtime.exec(name, ["tc", "-j", "filter", "show", "dev", ifc.name,
                                           "ingress"], check=False).stdout
            for f in json.loads(text or "[]"):
                if f.get("kind") == "bpf" and "options" in f:
                    out[(name, ifc.name)] = f["options"]
    return out


def test_auto_picks_what_the_kernel_runs_and_status_says_why(session_dirs):
    expected = "seg6local" if probe()["seg6local"] is None else "ebpf"
    name = lab_name("test-dp-auto")
    with running_lab(session_dirs, own_spec(session_dirs, name, "mrc-4p"), "netns") as att:
        assert att.state.dataplane == expected
        result = CliRunner().invoke(main, ["status", att.lab, "--json"])
    assert result.exit_code == 0, result.output
    [status] = json.loads(result.output)
    assert status["dataplane"]["name"] == expected
    assert status["dataplane"]["why"].startswith("auto: ")
    if expected == "ebpf":  # the probe's reason names the missing kernel option
        assert "CONFIG_IPV6_SEG6_LWTUNNEL" in status["dataplane"]["why"]


def test_a_lab_asked_for_a_data_plane_runs_it_and_says_so(lab):
    [status] = json.loads(CliRunner().invoke(main, ["status", lab.lab, "--json"]).output)
    assert status["dataplane"] == {"name": lab.state.dataplane, "why": "asked for"}


def test_local_sids_are_what_the_data_plane_installs(lab):
    routes = lab.runtime.exec("t1-p2-1", ["ip", "-6", "route", "show"]).stdout
    host = lab.runtime.exec("r1h1", ["ip", "-6", "route", "show"]).stdout
    if lab.state.dataplane == "seg6local":
        assert "action End flavors next-csid lblen 32 nflen 16 dev sr0" in routes
        assert host.count("action End.DT6 table local") == 4
        return
    assert "seg6local" not in routes + host  # no SID is a route on ebpf
    programs = attached_programs(lab)
    un = programs[("t1-p2-1", "eth2")]
    assert un["bpf_name"] == "mrc-un fcbb:bb00:2201::/48" and un["direct-action"]
    assert un["prog"]["name"] == "mrc_un"
    # every switch port runs its switch's uN (both ends of the 32 links but the 16 at
    # hosts), every host port its own decap
    kinds = [o["prog"]["name"] for o in programs.values()]
    assert kinds.count("mrc_un") == 2 * 32 - 16 and kinds.count("mrc_decap") == 16


def test_a_detached_program_fails_verify_naming_the_switch_and_restart_mends_it(lab):
    if lab.state.dataplane != "ebpf":
        pytest.skip("eBPF programs: the ebpf lab's test")
    # by hand, as a person would: the uN program off one port of t1-p0-1
    lab.runtime.exec("t1-p0-1", ["tc", "filter", "del", "dev", "eth2", "ingress"])
    cli = CliRunner().invoke(main, ["verify", lab.lab])
    assert cli.exit_code == 1 and "t1-p0-1" in cli.output
    report = run_verify(lab.runtime, lab.plan)
    bad = {n.node: n.problems() for n in report.nodes if not n.ok}
    assert list(bad) == ["t1-p0-1"]
    assert bad["t1-p0-1"] == ["missing eBPF uN fcbb:bb00:201::/48 at eth2 ingress "
                              "(no program attached)"]
    assert [r for r in report.paths if not r.ok]  # and packets in by that port go nowhere
    lifecycle.restart(lab, "t1-p0-1")
    assert run_verify(lab.runtime, lab.plan).ok


def test_a_program_with_another_sid_is_named_by_its_tag(lab):
    if lab.state.dataplane != "ebpf":
        pytest.skip("eBPF programs: the ebpf lab's test")
    from twin.node import ebpf

    with_wrong_sid = {"dev": "eth1", "kind": "uN", "prefix": "fcbb:bb00:9999::/48"}
    lab.runtime.exec("t0-p1-r1", [*lab.runtime.python_argv(), "-c",
                                  "import json,sys; from twin.node import ebpf; "
                                  "ebpf.install([json.loads(sys.argv[1])])",
                                  json.dumps(with_wrong_sid)])
    try:
        problems = [p for n in run_verify(lab.runtime, lab.plan, dataplane=False).nodes
                    for p in n.problems()]
        [problem] = problems
        assert problem.startswith("eBPF uN fcbb:bb00:1101::/48 at eth1 ingress: attached is "
                                  f"'{ebpf.filter_name('uN', 'fcbb:bb00:9999::/48')}'")
    finally:
        lifecycle.restart(lab, "t0-p1-r1")
    assert run_verify(lab.runtime, lab.plan).ok


def test_stats_and_telemetry_count_what_the_programs_did(lab):
    if lab.state.dataplane != "ebpf":
        result = CliRunner().invoke(main, ["stats", "--dataplane", "--lab", lab.lab])
        assert result.exit_code == 2 and "keeps no per-SID counters" in result.output
        return
    assert run_verify(lab.runtime, lab.plan).ok  # probes through every switch and port
    result = CliRunner().invoke(main, ["stats", "--dataplane", "--lab", lab.lab, "--json"])
    assert result.exit_code == 0, result.output
    nodes = json.loads(result.output)["nodes"]
    switches = [n.name for n in lab.fabric.switches]
    hosts = [h.name for h in lab.fabric.hosts]
    assert all(nodes[n]["counters"]["shifted"] > 0 for n in switches)
    assert all(nodes[h]["counters"]["decapsulated"] > 0 for h in hosts)
    assert all(nodes[n]["counters"]["drop_malformed"] == 0 for n in nodes)
    from twin.telemetry.collect import Collector

    collector = Collector(lab)
    try:
        sample = collector.sample()
    finally:
        collector.close()
    got = {d.node: d.counters for d in sample.dataplane}
    assert set(got) == set(lab.plan.nodes)
    assert got["t1-p0-0"]["shifted"] >= nodes["t1-p0-0"]["counters"]["shifted"]


def test_sid_loss_is_named_by_verify_and_reverted(lab):
    F.sid_loss(lab, "t1-p1-0")
    try:
        report = run_verify(lab.runtime, lab.plan)
        assert {n.node for n in report.nodes if not n.ok} == {"t1-p1-0"}
        failed = [r for r in [*report.paths, *report.loops] if not r.ok]
        assert failed and all("t1-p1-0" in r.path.hops for r in failed)
    finally:
        F.clear(lab)
    assert run_verify(lab.runtime, lab.plan).ok


def test_down_leaves_no_program_of_the_lab(session_dirs):
    """Every program a lab attached dies with its nodes: no pin, no leftover; bpftool,
    where installed, is the independent witness (the kernel's own list)."""
    needs_dataplane("ebpf")
    name = lab_name("test-dp-gone")
    set_env(session_dirs)
    state = L.up(own_spec(session_dirs, name, "mrc-4p"), "netns", dataplane="ebpf").state
    att = L.attach(state.lab)
    ids = {o["prog"]["id"] for o in attached_programs(att).values()}
    assert len(ids) == 16 + 16  # one uN program per switch, one decap per host port
    lifecycle.down(state.lab)
    assert namespaces_of(name) == []
    # the kernel frees a deleted namespace's devices, and so their filters and programs,
    # in the background: poll, bounded
    deadline = time.monotonic() + 30
    while (left := ids & loaded_programs()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"programs of the lab still loaded after down: {sorted(left)}"


def loaded_programs() -> set[int]:
    """The ids of every program loaded on the machine: bpftool's list where it is
    installed (the independent witness), else the kernel asked id by id."""
    bpftool = shutil.which("bpftool")
    if bpftool:
        listed = json.loads(subprocess.run([bpftool, "-j", "prog", "show"], check=True,
                                           capture_output=True, text=True).stdout)
        return {p["id"] for p in listed}
    from twin.node.ebpf import bpf

    return set(bpf.prog_ids())


def test_a_program_the_kernel_refuses_fails_up_naming_it_and_rolls_back(session_dirs,
                                                                      monkeypatch):
    needs_dataplane("ebpf")
    from twin.node import ebpf

    def refused(entries):
        raise ebpf.BpfError(13, "bpf prog load mrc_un: Permission denied (as a kernel says)")

    monkeypatch.setattr(ebpf, "install", refused)
    name = lab_name("test-dp-refuse")
    set_env(session_dirs)
    with pytest.raises(LabError, match=r"^t0-p0-r0: eBPF local SIDs: bpf prog load mrc_un"):
        L.up(own_spec(session_dirs, name, "mrc-4p"), "netns", dataplane="ebpf")
    assert namespaces_of(name) == [] and LabState.load(name) is None


def test_an_unavailable_data_plane_is_refused_before_anything_exists(session_dirs):
    missing = [d for d, why in probe().items() if why]
    if not missing:
        pytest.skip("this kernel runs both data planes: none to refuse")
    name = lab_name("test-dp-refused")
    set_env(session_dirs)
    spec = own_spec(session_dirs, name, "mrc-4p")
    result = CliRunner().invoke(main, ["up", spec, "--runtime", "netns",
                                       "--dataplane", missing[0]])
    assert result.exit_code == 2, result.output
    assert f"data plane {missing[0]} cannot run here" in result.output
    assert "CONFIG_" in result.output and "Traceback" not in result.output
    assert namespaces_of(name) == [] and LabState.load(name) is None


# -- the seg6local tier, and both side by side --------------------------------------


def test_seg6local_lab_verifies(session_dirs):
    needs_dataplane("seg6local")
    name = lab_name("test-dp-seg6")
    set_env(session_dirs)
    state = L.up(own_spec(session_dirs, name, "mrc-4p"), "netns", dataplane="seg6local").state
    try:
        att = L.attach(state.lab)
        assert att.state.dataplane == "seg6local"
        assert run_verify(att.runtime, att.plan).ok
    finally:
        lifecycle.down(state.lab)


def test_both_data_planes_deliver_and_drop_the_same_paths(session_dirs):
    """The same fabric on both backends, the same probes and faults: the same paths
    delivered, the same ones dropped."""
    needs_dataplane("seg6local")
    needs_dataplane("ebpf")
    set_env(session_dirs)
    outcomes = {}
    for dp in ("seg6local", "ebpf"):
        name = lab_name(f"test-dp-{dp[:4]}")
        state = L.up(own_spec(session_dirs, name, "mrc-4p"), "netns", dataplane=dp).state
        try:
            att = L.attach(state.lab)
            runs = []
            for fault, target in ((None, None), (F.sid_loss, "t1-p0-0"),
                                  (F.link_down, "t0-p1-r0:eth3"), (F.sid_loss, "r1h0")):
                if fault:
                    fault(att, target)
                report = run_verify(att.runtime, att.plan)
                runs.append(sorted((r.path.src, r.path.address, r.ok)
                                   for r in [*report.paths, *report.loops]))
                F.clear(att)
            outcomes[dp] = runs
        finally:
            lifecycle.down(state.lab)
    assert outcomes["seg6local"] == outcomes["ebpf"]
