"""mrc-4p and mrc-8p on real namespaces, real kernel SRv6, real packets (on the data
plane `auto` picks here; test_dataplanes.py checks what each installs)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from click.testing import CliRunner

from tests.helpers import poll
from tests.integration.conftest import (
    LAB4,
    LAB8,
    kill_up_midway,
    lab_name,
    namespaces_of,
    own_spec,
    set_env,
)
from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.errors import CommandFailed, UsageError
from twin.fabric import paths as P
from twin.lab import phases
from twin.progress import Steps
from twin.runtime.netns import NetnsRuntime, pids_in
from twin.state import known_labs
from twin.verify import run_verify

pytestmark = pytest.mark.netns
ROOT = Path(__file__).resolve().parents[2]
LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"


def test_mrc_4p_verifies_every_route_and_path(lab4):
    report = run_verify(lab4.runtime, lab4.plan)
    assert report.ok, report.to_dict()["nodes"]
    assert report.summary() == {
        "routes": {"total": 20, "passed": 20, "failed": 0},
        "paths": {"total": 80, "passed": 80, "failed": 0},
        "loopbacks": {"total": 48, "passed": 48, "failed": 0},
    }
    assert all(r.rtt_us is not None for r in report.paths)


def failed_probes(report) -> set[tuple[str, str]]:
    """(source, address) of every path and loopback probe that failed."""
    return {(r.path.src, r.path.address) for r in [*report.paths, *report.loops] if not r.ok}


def probes_where(fabric, crosses) -> set[tuple[str, str]]:
    """(source, address) of every path and loopback probe for which `crosses(path)`."""
    return {(p.src, p.address)
            for p in [*P.host_pairs_paths(fabric), *P.loopback_paths(fabric)] if crosses(p)}


def test_link_down_fails_exactly_the_paths_over_that_link(lab4):
    F.link_down(lab4, "t0-p0-r0:eth3")
    try:
        report = run_verify(lab4.runtime, lab4.plan)
        failed = failed_probes(report)
        expected = probes_where(lab4.fabric, lambda p: LINK in p.links
                                or LINK in P.reverse(lab4.fabric, p).links)
        assert failed == expected and len(expected) == 8 + 2
        assert report.suspect_links() == [LINK]
        bad_nodes = {n.node for n in report.nodes if not n.ok}
        assert bad_nodes == {"t0-p0-r0", "t1-p0-0"}
    finally:
        F.link_up(lab4, "t0-p0-r0:eth3")
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_link_state_is_set_from_this_process_and_a_missing_interface_is_named(lab4):
    """set_link_state is an ioctl in the node's namespace (no `ip` started): a fault on
    a drill's timeline lands microseconds after its stamp. `ip` reads it back."""
    node, ifname = "t0-p0-r0", "eth3"

    def flags() -> list[str]:
        out = lab4.runtime.exec(node, ["ip", "-j", "link", "show", "dev", ifname]).stdout
        return json.loads(out)[0]["flags"]

    fault = F.link_down(lab4, f"{node}:{ifname}")
    try:
        assert "UP" not in flags()
        assert 0 < fault.changed_ns <= time.monotonic_ns()  # stamped before the change
        assert F.active(lab4)[0].changed_ns == 0  # a process's stamp, not on disk
    finally:
        F.link_up(lab4, f"{node}:{ifname}")
    assert "UP" in flags() and run_verify(lab4.runtime, lab4.plan).ok
    with pytest.raises(CommandFailed, match='Cannot find device "nope0"'):
        lab4.runtime.set_link_state(node, "nope0", False)


def test_switch_down_fails_exactly_the_paths_through_that_t1_and_clears(lab4):
    F.switch_down(lab4, "t1-p0-0")
    try:
        report = run_verify(lab4.runtime, lab4.plan)
        failed = failed_probes(report)
        expected = probes_where(lab4.fabric, lambda p: "t1-p0-0" in p.hops)
        assert failed == expected and expected
        assert {n.node for n in report.nodes if not n.ok} >= {"t1-p0-0"}
    finally:
        F.clear(lab4, "t1-p0-0")
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_mrc_moves_bytes_exactly_past_a_dead_switch_and_a_dead_nic_port(lab4):
    from twin import traffic as T

    F.switch_down(lab4, "t1-p1-1")
    F.nic_down(lab4, "r1h0:3")
    try:
        run = T.run(lab4.runtime, "bulk", T.flows_for("bulk", [], 16 << 20, "r0h0", "r1h0"),
                    "mrc", timeout_s=120)
        assert run.ok, run.to_dict()["flows"]
        assert 3 not in run.flows[0].result.planes_in_use  # the peer's port-state bitmap
    finally:
        F.clear(lab4)
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_clearing_one_nic_port_leaves_the_other_down_and_half_a_nic_comes_back_as_one(lab4):
    """A revert re-programs its nodes, whose plan sets every interface up: the other
    fault in force on r1h0 is applied again (the kernel, not a model, says so)."""
    def up(ifname: str) -> bool:
        out = lab4.runtime.exec("r1h0", ["ip", "-j", "link", "show", "dev", ifname]).stdout
        return "UP" in json.loads(out)[0]["flags"]

    F.nic_down(lab4, "r1h0:1")
    F.nic_down(lab4, "r1h0:3")
    try:
        F.clear(lab4, "r1h0:1")
        assert up("eth2") and not up("eth4")
        F.clear(lab4, "r1h0:3")
        F.nic_down(lab4, "r1h0:1,3")
        assert not up("eth2") and not up("eth4") and up("eth1")
    finally:
        F.clear(lab4)
    assert up("eth2") and up("eth4") and run_verify(lab4.runtime, lab4.plan).ok


@pytest.mark.parametrize("apply,target", [
    (F.blackhole, "t1-p0-0"), (F.blackhole, "t1-p0-0:eth2"), (F.sid_loss, "t1-p0-0"),
    (F.route_corrupt, "t0-p0-r0")], ids=["blackhole", "blackhole-if", "sid-loss",
                                         "route-corrupt"])
def test_silent_faults_fail_paths_with_every_link_up_and_revert(lab4, apply, target):
    """No port goes down, yet probes through the node fail; revert heals it, and a
    restart of the node (which re-programs it) keeps the fault in force."""
    def carriers():
        return {n: lab4.runtime.exec(n, ["ip", "-br", "link"]).stdout.count("LOWER_UP")
                for n in lab4.plan.nodes}

    before = carriers()
    fault = apply(lab4, target)
    try:
        assert carriers() == before
        report = run_verify(lab4.runtime, lab4.plan)
        failed = [r for r in [*report.paths, *report.loops] if not r.ok]
        node = target.split(":")[0]
        assert failed and all(node in r.path.hops for r in failed)
        done = lifecycle.restart(lab4, node)
        assert done.faults_again == tuple(fault.end_names())
        assert not run_verify(lab4.runtime, lab4.plan).ok
    finally:
        F.clear(lab4, target)
    assert run_verify(lab4.runtime, lab4.plan).ok
    log = F.events(lab4)[-2:]
    assert [e["event"] for e in log] == ["apply", "revert"] and log[0]["target"] == target
    assert log[0]["t_mono_ns"] < log[1]["t_mono_ns"]


def test_plane_loss_drops_on_every_t0_t1_link_of_its_plane_only_and_reverts(lab4):
    """100% loss on plane 1's T0-T1 links: every cross-rack path of plane 1 fails and
    nothing else does; the T1s of plane 1 hold the table, and clear removes it."""
    r = CliRunner().invoke(main, ["fault", "plane-loss", "1", "100", "--lab", lab4.lab])
    assert r.exit_code == 0 and "plane 1: 100% loss" in r.output, r.output
    try:
        report = run_verify(lab4.runtime, lab4.plan)
        failed = [x for x in report.paths if not x.ok]
        assert failed and all(x.path.plane == 1 and x.path.kind == "cross-rack"
                              for x in failed)
        assert not [x for x in report.paths if x.ok and x.path.plane == 1
                    and x.path.kind == "cross-rack"]
        for t1 in ("t1-p1-0", "t1-p1-1"):
            assert "twin_loss_plane_1" in lab4.runtime.exec(t1, ["nft", "list", "tables"]).stdout
    finally:
        F.clear(lab4, "1")
    assert run_verify(lab4.runtime, lab4.plan).ok
    for t1 in ("t1-p1-0", "t1-p1-1"):
        assert "twin_" not in lab4.runtime.exec(t1, ["nft", "list", "tables"]).stdout


def test_link_rate_shapes_the_switch_end_and_revert_removes_it(lab4):
    fault = F.link_rate(lab4, "r0h0:eth1", "50mbit")
    try:
        assert fault.ends == (F.Endpoint("t0-p0-r0", "eth1"),)
        qdisc = lab4.runtime.exec("t0-p0-r0", ["tc", "qdisc", "show", "dev", "eth1"]).stdout
        assert "tbf" in qdisc and "rate 50Mbit" in qdisc
    finally:
        F.clear(lab4)
    qdisc = lab4.runtime.exec("t0-p0-r0", ["tc", "qdisc", "show", "dev", "eth1"]).stdout
    assert "tbf" not in qdisc


def _flap(lab4):
    env = dict(os.environ)
    return subprocess.Popen([sys.executable, "-m", "twin", "fault", "link-flap",
                             "t0-p1-r0:eth4", "--count", "50", "--period", "0.4",
                             "--lab", LAB4], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _admin_up(att, node, ifname):
    return "UP" in json.loads(att.runtime.exec(node, ["ip", "-j", "link", "show", "dev",
                                                      ifname]).stdout)[0]["flags"]


def _downs(att, after: int) -> int:
    return sum(e["event"] == "down" for e in F.events(att)[after:])


def test_sigterm_of_a_flapping_command_brings_the_link_back(lab4):
    seen = len(F.events(lab4))
    proc = _flap(lab4)
    try:
        assert poll(lambda: _downs(lab4, seen) >= 2, 20, every_s=0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert F.active(lab4) == [] and _admin_up(lab4, "t0-p1-r0", "eth4")
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_a_flap_killed_outright_is_reverted_by_clear(lab4):
    seen = len(F.events(lab4))
    proc = _flap(lab4)
    try:
        assert poll(lambda: _downs(lab4, seen) >= 1, 20, every_s=0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [f.kind for f in F.active(lab4)] == [F.FaultKind.LINK_FLAP]  # the record stayed
    F.clear(lab4)
    assert F.active(lab4) == [] and _admin_up(lab4, "t0-p1-r0", "eth4")
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_a_route_removed_by_hand_is_reported_missing(lab4):
    lab4.runtime.exec("t1-p1-0", ["ip", "-6", "route", "del", "fcbb:bb00:1101::/48"])
    try:
        report = run_verify(lab4.runtime, lab4.plan, dataplane=False)
        bad = [n for n in report.nodes if not n.ok]
        assert [n.node for n in bad] == ["t1-p1-0"]
        assert bad[0].missing == ["fcbb:bb00:1101::/48 via fe80::1101 dev eth2"]
    finally:
        phases.configure(lab4.runtime, [lab4.plan["t1-p1-0"]], Steps())
    assert run_verify(lab4.runtime, lab4.plan, dataplane=False).ok


def test_cli_verify_json_and_junit(lab4, tmp_path):
    junit = tmp_path / "verify.xml"
    result = CliRunner().invoke(main, ["verify", LAB4, "--json", "--junit", str(junit)])
    assert result.exit_code == 0, result.output
    assert '"ok": true' in result.output
    cases = ET.parse(junit).getroot().findall(".//testcase")
    assert len(cases) == 20 + 80 + 48


def test_cli_verify_exits_1_when_a_link_is_down(lab4):
    runner = CliRunner()
    assert runner.invoke(main, ["fault", "link-down", "t0-p1-r1:eth4", "--both"]).exit_code == 0
    try:
        result = runner.invoke(main, ["verify", LAB4])
        assert result.exit_code == 1
        assert "t0-p1-r1:eth4--t1-p1-1:eth2" in result.output
    finally:
        assert runner.invoke(main, ["fault", "clear"]).exit_code == 0
    assert runner.invoke(main, ["verify", LAB4]).exit_code == 0


def test_status_json_lists_every_node_running(lab4):
    result = CliRunner().invoke(main, ["status", "--json"])
    assert result.exit_code == 0
    assert result.output.count('"state": "running"') == 20


def test_restart_of_a_switch_keeps_its_link_loss(lab4):
    """The nft table lives in the switch's namespace: a reboot loses it, and
    the restart phase applies it again, once."""
    fault = F.link_loss(lab4, "t0-p1-r1:eth3", 30)
    table = F.loss_table(fault.target)
    try:
        done = lifecycle.restart(lab4, "t0-p1-r1")
        assert done.faults_again == ("t0-p1-r1:eth3",)
        assert F.active(lab4) == [fault]
        listed = lab4.runtime.exec("t0-p1-r1", ["nft", "list", "table", "ip6", table]).stdout
        assert listed.count("numgen random mod 1000000 < 300000") == 2  # out and in, once
        assert run_verify(lab4.runtime, lab4.plan, dataplane=False).ok
    finally:
        F.link_up(lab4, "t0-p1-r1:eth3")
    assert lab4.runtime.exec("t0-p1-r1", ["nft", "list", "tables"]).stdout.strip() == ""
    assert run_verify(lab4.runtime, lab4.plan).ok


def test_down_stops_processes_inside_the_lab(session_dirs):
    set_env(session_dirs)
    tiny = lab_name("tiny")
    spec = session_dirs / "tiny.yml"
    spec.write_text(f"name: {tiny}\nplanes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    L.up(str(spec), "netns")
    rt = NetnsRuntime(tiny)
    path = rt.netns_path("r0h0")
    sleeper = subprocess.Popen(["nsenter", f"--net={path}", "sleep", "300"])
    try:
        deadline = time.monotonic() + 5
        while sleeper.pid not in pids_in([path])[path] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleeper.pid in pids_in([path])[path]
        lifecycle.down(tiny)
        assert sleeper.wait(timeout=5) is not None
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
    assert namespaces_of(tiny) == []


def test_failed_up_removes_what_it_created(session_dirs, monkeypatch):
    set_env(session_dirs)

    def broken(self, links):
        raise RuntimeError("wiring exploded")

    monkeypatch.setattr(NetnsRuntime, "wire_links", broken)
    with pytest.raises(RuntimeError):
        L.up(own_spec(session_dirs, LAB8), "netns")
    assert namespaces_of(LAB8) == [] and LAB8 not in known_labs()


def test_down_all_after_a_killed_up_leaves_nothing(session_dirs):
    done = kill_up_midway(session_dirs / "killed", session_dirs / "build", "netns",
                          lambda: namespaces_of(LAB8), 10)
    assert done.returncode == 0, done.stderr
    assert namespaces_of(LAB8) == []
    assert not (session_dirs / "killed" / LAB8).exists()


def test_mrc_8p_comes_up_and_verifies(session_dirs):
    set_env(session_dirs)
    L.up(own_spec(session_dirs, LAB8), "netns")
    try:
        att = L.attach(LAB8)
        report = run_verify(att.runtime, att.plan)
        assert report.ok, [r.path.label for r in report.paths if not r.ok][:10]
        assert report.summary()["paths"]["total"] == 6528
        assert report.summary()["routes"]["passed"] == 80
    finally:
        lifecycle.down(LAB8)
    assert namespaces_of(LAB8) == []


def test_rates_are_shaped_with_tbf_and_verified(session_dirs):
    set_env(session_dirs)
    shaped = lab_name("shaped")
    spec = session_dirs / "shaped.yml"
    spec.write_text(f"name: {shaped}\nplanes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                    "nic_ports: 1\nrate: {host: 200mbit, fabric: 1gbit}\n")
    L.up(str(spec), "netns")
    try:
        att = L.attach(shaped)
        qdisc = att.runtime.exec("t0-p0-r0", ["tc", "qdisc", "show", "dev", "eth2"]).stdout
        assert "tbf" in qdisc and "rate 1Gbit" in qdisc
        report = run_verify(att.runtime, att.plan)
        assert report.ok
        # one-port NICs: plane 1 exists but no host is attached to it
        assert {r.path.plane for r in report.paths} == {0}
        att.runtime.exec("r0h0", ["tc", "qdisc", "del", "dev", "eth1", "root"])
        bad = run_verify(att.runtime, att.plan, dataplane=False)
        assert [n.node for n in bad.nodes if not n.ok] == ["r0h0"]
    finally:
        lifecycle.down(shaped)


def test_up_refuses_to_adopt_namespaces_it_did_not_create(session_dirs):
    set_env(session_dirs)
    clash = lab_name("clash")
    spec = session_dirs / "clash.yml"
    spec.write_text(f"name: {clash}\nplanes: 1\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    subprocess.run(["ip", "netns", "add", f"twin-{clash}-r0h0"], check=True)
    try:
        with pytest.raises(UsageError, match="already exist.*nobody owns them"):
            L.up(str(spec), "netns")
        assert namespaces_of(clash) == [f"twin-{clash}-r0h0"]  # untouched
    finally:
        subprocess.run(["ip", "netns", "del", f"twin-{clash}-r0h0"], check=True)


def test_down_all_never_touches_a_lab_this_run_directory_does_not_own(session_dirs):
    """A colleague's lab (here: a namespace another run directory made) survives
    `twin down --all`, which names it instead of removing it."""
    theirs = f"twin-{lab_name('someone-elses')}-r0h0"
    mine = {"TWIN_RUN_DIR": str(session_dirs / "down-all-alone")}  # no lab of the module's
    subprocess.run(["ip", "netns", "add", theirs], check=True, timeout=10)
    try:
        result = CliRunner().invoke(main, ["down", "--all"], env=mine)
        assert result.exit_code == 0, result.output
        assert theirs in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                        text=True, check=True, timeout=10).stdout
        assert "stray resources nobody owns" in result.output  # named, not removed
    finally:
        subprocess.run(["ip", "netns", "del", theirs], check=False, timeout=10)
