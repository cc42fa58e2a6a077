"""The real lab phases, faults and cleanup against the in-memory runtime and its
kernel model (no root needed)."""

import json

import pytest
from click.testing import CliRunner

from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.errors import CommandFailed, LabError, UsageError
from twin.lab import phases
from twin.progress import Recorder
from twin.runtime import fake
from twin.state import LabState, known_labs

pytestmark = pytest.mark.usefixtures("clean_world")


def world(lab="mrc-4p"):
    return fake.WORLD.get(lab, {})


def admin(node, ifname, lab="mrc-4p"):
    return world(lab)[node].interfaces[ifname].up


def carrier(att, node):
    """What `ip -j link show` says in the node: the interfaces with carrier."""
    links = json.loads(att.runtime.exec(node, ["ip", "-j", "link", "show"]).stdout)
    return {e["ifname"] for e in links if "LOWER_UP" in e["flags"]}


def ops(kind):
    return [c for c in fake.FakeRuntime.calls if c[0] == kind]


# -- up ---------------------------------------------------------------------------------


def test_up_runs_every_phase_in_order():
    result = L.up("mrc-4p", "fake")
    assert result.state.phase == "up" and known_labs() == ["mrc-4p"]
    assert [p.name for p in result.phases] == [
        "limits", "create", "wire", "configure", "carrier", "endpoints"]
    assert [len(p.done) for p in result.phases] == [0, 20, 32, 20, 20, 4]
    kinds = [c[0] for c in fake.FakeRuntime.calls]
    assert kinds.index("configure") > max(i for i, k in enumerate(kinds) if k == "wire")
    assert kinds.index("endpoint") > max(i for i, k in enumerate(kinds) if k == "configure")
    assert all(n.configured == 1 for n in world().values())
    assert {h for h, n in world().items() if n.endpoint} == {"r0h0", "r0h1", "r1h0", "r1h1"}
    assert all(i.up for n in world().values() for i in n.interfaces.values())
    saved = LabState.load("mrc-4p").phases
    assert [p["phase"] for p in saved] == ["limits", "create", "wire", "configure",
                                           "carrier", "endpoints"]


def test_state_is_on_disk_before_the_first_node_exists(monkeypatch):
    seen = {}

    def spy(self, nodes):
        seen["state"] = LabState.load("mrc-4p")
        return original(self, nodes)

    original = fake.FakeRuntime.create_nodes
    monkeypatch.setattr(fake.FakeRuntime, "create_nodes", spy)
    L.up("mrc-4p", "fake")
    assert seen["state"] is not None and seen["state"].phase == "creating"
    assert len(seen["state"].nodes) == 20


@pytest.mark.parametrize("op,after", [
    ("create", 7),     # create
    ("wire", 5),       # wire
    ("configure", 3),  # configure
    ("exec", 2),       # carrier (its `ip -j link show`)
    ("endpoint", 1),   # endpoints
])
def test_a_failure_in_any_phase_rolls_back_everything(op, after):
    fake.FakeRuntime.fail_at = {op: after}
    with pytest.raises(CommandFailed, match="injected failure"):
        L.up("mrc-4p", "fake")
    assert world() == {} and known_labs() == []
    assert not (L.build_root() / "mrc-4p").exists()
    assert len(ops(op)) == after  # it failed where it was told to, not before


def test_no_carrier_times_out_and_rolls_back(monkeypatch):
    def half_configure(self, rt, node):  # never sets t0-p0-r0:eth3 up
        original(self, rt, node)
        if node.name == "t0-p0-r0":
            rt._node(node.name).interfaces["eth3"].up = False

    original = fake.FakeKernel.configure
    monkeypatch.setattr(fake.FakeKernel, "configure", half_configure)
    monkeypatch.setattr(phases, "CARRIER_TIMEOUT_S", 0.2)
    with pytest.raises(LabError, match=r"no carrier on t0-p0-r0 \(eth3\)"):
        L.up("mrc-4p", "fake")
    assert world() == {} and known_labs() == []


def test_interrupted_up_rolls_back_too(monkeypatch):
    def interrupt(self, rt, node):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake.FakeKernel, "configure", interrupt)
    steps = Recorder()
    with pytest.raises(KeyboardInterrupt):
        L.up("mrc-4p", "fake", steps)
    assert world() == {} and known_labs() == [] and not (L.build_root() / "mrc-4p").exists()
    # it says what happened: a Ctrl-C is not a failure (it read "failed: rolling back")
    assert "interrupted: rolling back what was created" in steps.notes


def test_a_failed_up_says_it_failed_as_it_rolls_back():
    fake.FakeRuntime.fail_at = {"configure": 1}
    steps = Recorder()
    with pytest.raises(CommandFailed):
        L.up("mrc-4p", "fake", steps)
    assert "failed: rolling back what was created" in steps.notes


def test_second_up_of_the_same_lab_is_refused_and_changes_no_file(tmp_path):
    L.up("mrc-4p", "fake")
    build = L.compile_spec("mrc-4p").build_dir()
    run = LabState.load("mrc-4p").dir

    def snapshot():
        return {p: (p.stat().st_mtime_ns, p.read_bytes())
                for root in (build, run) for p in sorted(root.rglob("*")) if p.is_file()}

    before = snapshot()
    calls = len(fake.FakeRuntime.calls)
    with pytest.raises(UsageError, match="already up"):
        L.up("mrc-4p", "fake")
    assert snapshot() == before
    assert len(fake.FakeRuntime.calls) == calls  # and asked the runtime for nothing


def test_down_removes_nodes_and_state():
    L.up("mrc-4p", "fake")
    assert len(lifecycle.down("mrc-4p").nodes) == 20
    assert known_labs() == [] and "mrc-4p" not in fake.WORLD


def test_down_removes_the_labs_build_directory_and_no_other(tmp_path):
    spec = tmp_path / "mine.yml"
    spec.write_text("name: mine\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    L.up("mrc-4p", "fake")
    L.up(str(spec), "fake")
    gone, other = L.build_root() / "mrc-4p", L.build_root() / "mine"
    assert (gone / "config" / "r0h0" / "node.json").exists() and other.is_dir()
    (gone / "containerlab.log").write_text("what a runtime wrote there\n")
    done = lifecycle.down("mrc-4p")
    assert not gone.exists() and done.build.removed and done.build.why == ""
    assert (other / "config" / "r0h0" / "node.json").exists()
    assert (other / "owner.json").exists()  # and still mine's
    res = CliRunner().invoke(main, ["down", "mine"])
    assert res.output == "removed mine: 5 nodes\n" and not other.exists()
    assert L.build_root().is_dir() and list(L.build_root().iterdir()) == []


def test_down_keeps_the_drill_reports_and_clabernetes_topology_of_its_build_directory():
    L.up("mrc-4p", "fake")
    report = L.build_root() / "mrc-4p" / "reports" / "20250101T000000" / "report.html"
    report.parent.mkdir(parents=True)
    report.write_text("<html></html>\n")  # `twin drill --all` writes here, then takes down
    assert CliRunner().invoke(main, ["render", "mrc-4p", "--target", "clabernetes"]) \
        .exit_code == 0  # what `kubectl delete -f` needs, long after
    res = CliRunner().invoke(main, ["down", "mrc-4p"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (L.build_root() / "mrc-4p").iterdir()) == [
        "mrc-4p.clabernetes.yml", "reports"]
    assert report.exists()
    assert ("its build files removed; kept in it: mrc-4p.clabernetes.yml, reports"
            in res.output)


def test_a_build_directory_another_lab_took_over_is_kept(monkeypatch, tmp_path):
    """Two run directories of one checkout share lab/build/: a lab of the same name
    brought up from the other renders over it and owns it now."""
    L.up("mrc-4p", "fake")
    build = L.build_root() / "mrc-4p"
    theirs = {"run_dir": str(tmp_path / "run-b"), "lab": "mrc-4p", "lab_id": "0" * 12}
    (build / "owner.json").write_text(json.dumps(theirs))
    done = lifecycle.down("mrc-4p")
    assert not done.build.removed and "lab mrc-4p of " + str(tmp_path / "run-b") in \
        done.build.why
    assert (build / "config" / "r0h0" / "node.json").exists()


def test_a_build_directory_no_owner_file_names_is_kept():
    L.up("mrc-4p", "fake")
    build = L.build_root() / "mrc-4p"
    (build / "owner.json").unlink()  # rendered by a twin from before owner.json
    res = CliRunner().invoke(main, ["down", "mrc-4p"])
    assert (build / "mrc-4p.clab.yml").exists()
    assert "build directory " in res.output and ": kept; no owner.json names" in res.output


def test_down_all_removes_every_lab_of_this_run_directory(tmp_path):
    spec = tmp_path / "mine.yml"
    spec.write_text("name: mine\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    L.up("mrc-4p", "fake")
    L.up(str(spec), "fake")
    removed = lifecycle.down_all()
    assert sorted(removed) == ["mine", "mrc-4p"] and len(removed["mrc-4p"]) == 20
    assert known_labs() == [] and fake.WORLD == {}
    assert list(L.build_root().iterdir()) == []


def test_attach_uses_the_spec_copy_taken_at_up(tmp_path):
    spec = tmp_path / "mine.yml"
    spec.write_text("name: mine\nplanes: 2\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    L.up(str(spec), "fake")
    spec.write_text("name: mine\nplanes: 4\nracks: 1\nhosts_per_rack: 1\nt1_per_plane: 1\n")
    assert L.attach("mine").compiled.spec.planes == 2


def test_lab_is_resolved_when_exactly_one_is_up():
    with pytest.raises(UsageError, match="no lab is up"):
        L.resolve_lab(None)
    L.up("mrc-4p", "fake")
    assert L.resolve_lab(None) == "mrc-4p"


def test_unknown_runtime_lists_the_valid_ones():
    with pytest.raises(UsageError, match="unknown runtime .*; one of: auto, .*docker.*netns"):
        L.up("mrc-4p", "kubernetes")


def test_the_kernel_model_refuses_what_it_does_not_know():
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    with pytest.raises(CommandFailed, match="no model of `sysctl -a`"):
        att.runtime.exec("r0h0", ["sysctl", "-a"])
    with pytest.raises(CommandFailed, match="Cannot find device"):
        att.runtime.set_link_state("r0h0", "eth9", False)
    with pytest.raises(CommandFailed, match="File exists"):  # wired twice
        att.runtime.wire_links(att.fabric.links_of("r0h0")[:1])


# -- faults ----------------------------------------------------------------------------


def test_link_down_is_recorded_before_it_is_applied(att, monkeypatch):
    recorded = []

    def spy(self, node, ifname, up):
        recorded.append(json.loads((att.state.dir / "faults.json").read_text()))
        return original(self, node, ifname, up)

    original = fake.FakeRuntime.set_link_state
    monkeypatch.setattr(fake.FakeRuntime, "set_link_state", spy)
    fault = F.link_down(att, "t0-p0-r0:eth3")
    assert fault.target == "t0-p0-r0:eth3--t1-p0-0:eth1"
    assert fault.kind is F.FaultKind.LINK_DOWN
    assert fault.ends == (F.Endpoint("t0-p0-r0", "eth3"),)
    assert recorded and recorded[0][0]["link"] == fault.target
    assert admin("t0-p0-r0", "eth3") is False
    assert admin("t1-p0-0", "eth1") is True  # one end only...
    assert "eth1" not in carrier(att, "t1-p0-0")  # ...and the other loses carrier


def test_link_up_restores_both_ends_and_reconfigures_them(att):
    F.link_down(att, "t1-p0-0:eth1", both=True)
    assert admin("t0-p0-r0", "eth3") is False
    fake.FakeRuntime.calls = []
    F.link_up(att, "t0-p0-r0:eth3")  # either end names the link
    assert admin("t0-p0-r0", "eth3") and admin("t1-p0-0", "eth1")
    assert sorted(c[2] for c in ops("configure")) == ["t0-p0-r0", "t1-p0-0"]
    assert F.active(att) == []


def test_link_loss_is_an_nft_table_at_the_switch_end_and_link_up_removes_it(att):
    fault = F.link_loss(att, "r0h0:eth1", 5)  # named from the host end
    assert fault.ends == (F.Endpoint("t0-p0-r0", "eth1"),)
    table = F.loss_table(fault.target)
    rules = world()["t0-p0-r0"].nft[table]
    assert len(rules) == 1 and "numgen random mod 1000000 < 50000" in rules[0]
    F.link_up(att, "r0h0:eth1")
    assert world()["t0-p0-r0"].nft == {} and F.active(att) == []


def test_clear_reverts_every_fault(att):
    F.link_down(att, "t0-p0-r0:eth3")
    F.link_down(att, "r1h1:eth2")
    F.link_loss(att, "t1-p1-0:eth1", 20)
    assert len(F.clear(att)) == 3 and F.active(att) == []
    assert all(i.up for n in world().values() for i in n.interfaces.values())
    assert all(n.nft == {} for n in world().values())


@pytest.mark.parametrize("text,msg", [
    ("t0-p0-r0", "NODE:IFNAME"),
    ("t9-p0-r0:eth1", "no node 't9-p0-r0' in lab mrc-4p; nodes look like"),
    ("t0-p0-r0:eth9", "its links are on eth1, eth2, eth3, eth4"),
])
def test_bad_link_names_get_a_hint(att, text, msg):
    with pytest.raises(UsageError, match=msg):
        F.link_down(att, text)


def test_same_link_cannot_be_downed_twice(att):
    F.link_down(att, "t0-p0-r0:eth3")
    with pytest.raises(UsageError, match="already down"):
        F.link_down(att, "t1-p0-0:eth1")


@pytest.mark.parametrize("percent", [0, -1, 100.5, float("nan")])
def test_loss_outside_0_to_100_is_refused_and_nothing_is_recorded(att, percent):
    with pytest.raises(UsageError, match="percentage in"):
        F.link_loss(att, "t0-p0-r0:eth3", percent)
    assert F.active(att) == []


def test_an_unknown_fault_kind_on_disk_is_an_error_not_a_link_down(att):
    F.link_down(att, "t0-p0-r0:eth3")
    path = att.state.dir / "faults.json"
    saved = json.loads(path.read_text())
    saved[0]["kind"] = "link-melt"
    path.write_text(json.dumps(saved))
    with pytest.raises(LabError, match="unknown fault kind 'link-melt'"):
        F.clear(att)
    assert admin("t0-p0-r0", "eth3") is False  # nothing was guessed at


# -- restart -----------------------------------------------------------------------------


def test_restart_of_a_switch_keeps_its_link_loss(att):
    fault = F.link_loss(att, "t0-p0-r0:eth3", 10)
    table = F.loss_table(fault.target)
    done = lifecycle.restart(att, "t0-p0-r0")
    assert done.faults_again == ("t0-p0-r0:eth3",)
    assert len(world()["t0-p0-r0"].nft[table]) == 1  # back, once
    assert F.active(att) == [fault]


def test_restart_of_the_peer_leaves_the_loss_rule_as_it_is(att):
    fault = F.link_loss(att, "t0-p0-r0:eth3", 10)
    done = lifecycle.restart(att, "t1-p0-0")
    assert done.faults_again == ()
    assert len(world()["t0-p0-r0"].nft[F.loss_table(fault.target)]) == 1  # not twice


def test_restart_of_a_switch_rewires_reprograms_and_keeps_its_link_down(att):
    F.link_down(att, "t1-p0-0:eth1")  # the far end of t0-p0-r0:eth3
    done = lifecycle.restart(att, "t0-p0-r0")
    assert done.reprogrammed == ("r0h0", "r0h1", "t0-p0-r0", "t1-p0-0", "t1-p0-1")
    assert done.faults_again == ("t1-p0-0:eth1",)
    assert set(world()["t0-p0-r0"].interfaces) == {"eth1", "eth2", "eth3", "eth4"}
    assert admin("t1-p0-0", "eth1") is False and admin("t0-p0-r0", "eth3") is True
    assert carrier(att, "t0-p0-r0") == {"eth1", "eth2", "eth4"}


def test_restart_of_a_host_restarts_its_endpoint(att):
    world()["r0h0"].endpoint = False
    lifecycle.restart(att, "r0h0")
    assert world()["r0h0"].endpoint is True
    assert [c[2] for c in ops("endpoint")][-1] == "r0h0"


def test_restart_of_an_unknown_node_is_a_usage_error(att):
    with pytest.raises(UsageError, match="no node 'nope' in lab mrc-4p"):
        lifecycle.restart(att, "nope")


def test_cli_restart_says_what_it_applied_again(att):
    F.link_loss(att, "t0-p0-r0:eth3", 10)
    result = CliRunner().invoke(main, ["restart", "t0-p0-r0"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "restarted t0-p0-r0; re-programmed r0h0, r0h1, t0-p0-r0, t1-p0-0, t1-p0-1; "
        "faults applied again: t0-p0-r0:eth3")


def test_cli_fault_list_json_keeps_its_shape(att):
    F.link_down(att, "t0-p0-r0:eth3", both=True)
    result = CliRunner().invoke(main, ["fault", "list", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row["kind"] == "link-down" and row["ends"] == ["t0-p0-r0:eth3", "t1-p0-0:eth1"]
    assert set(row) == {"kind", "link", "ends", "since", "percent"}


def test_the_neighbour_table_is_sized_for_the_lab_and_never_lowered():
    from twin.runtime.kernel import neighbour_thresholds

    assert neighbour_thresholds(2560, (128, 512, 1024)) == (128, 5120, 10240)
    assert neighbour_thresholds(32, (128, 512, 1024)) == (128, 512, 1024)  # enough already
    assert neighbour_thresholds(32, (128, 4096, 16384)) == (128, 4096, 16384)


def test_up_never_renders_over_a_live_lab_of_another_run_directory(monkeypatch, tmp_path):
    """lab/build/<lab> is named after the lab alone: a second run directory's `twin up`
    of the same name used to render over the first's live files (and its down removed
    them). It is refused, and the first lab's files stay its own."""
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run-a"))
    L.up("mrc-4p", "fake")
    build = L.build_root() / "mrc-4p"
    before = (build / "owner.json").read_text()
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run-b"))
    with pytest.raises(UsageError, match="holds the build files of live lab mrc-4p of run "
                                         "directory .*run-a.*--name mrc-4p-2"):
        L.up("mrc-4p", "fake")
    assert (build / "owner.json").read_text() == before
    L.up("mrc-4p", "fake", name="mrc-4p-2")  # as the error says
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run-a"))
    lifecycle.down("mrc-4p")
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run-b"))
    lifecycle.down("mrc-4p-2")
    L.up("mrc-4p", "fake")  # once the other lab is gone, its name is free here
    lifecycle.down("mrc-4p")


@pytest.mark.parametrize("kind, target", [("bgp-reset", "t0-p0-r0:eth3"),
                                          ("bgp-withdraw", "t0-p0-r0:eth1"),
                                          ("bgp-route-map", "t0-p0-r0:eth3")])
def test_bgps_own_faults_are_refused_on_a_static_lab_and_nothing_is_recorded(kind, target):
    from twin.faults.registry import KINDS

    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    with pytest.raises(UsageError, match="runs routing: static-srv6, no BGP"):
        KINDS[kind].start(att, target, {})
    assert F.active(att) == []
