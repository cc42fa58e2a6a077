"""Lab lifecycle and faults against the in-memory runtime (no root needed)."""

import json

import pytest

from twin import faults as F
from twin import lab as L
from twin.errors import CommandFailed, UsageError
from twin.runtime import fake
from twin.state import LabState, known_labs


@pytest.fixture(autouse=True)
def clean_world():
    fake.WORLD.clear()
    fake.FakeRuntime.calls = []
    fake.FakeRuntime.fail_after_links = None
    yield
    fake.WORLD.clear()
    fake.FakeRuntime.fail_after_links = None


def test_up_creates_wires_and_configures_every_node():
    state = L.up("mrc-4p", "fake")
    assert state.phase == "up" and known_labs() == ["mrc-4p"]
    assert len(fake.WORLD["mrc-4p"]) == 20
    kinds = [c[0] for c in fake.FakeRuntime.calls]
    assert kinds.count("create") == 20 and kinds.count("wire") == 32
    assert kinds.count("configure") == 20
    assert kinds.index("configure") > kinds.index("wire")  # configure after wiring


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


def test_failed_up_rolls_back_everything():
    fake.FakeRuntime.fail_after_links = 5
    with pytest.raises(CommandFailed):
        L.up("mrc-4p", "fake")
    assert fake.WORLD.get("mrc-4p", {}) == {}
    assert known_labs() == []


def test_interrupted_up_rolls_back_too(monkeypatch):
    def interrupt(self, node):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake.FakeRuntime, "configure", interrupt)
    with pytest.raises(KeyboardInterrupt):
        L.up("mrc-4p", "fake")
    assert fake.WORLD.get("mrc-4p", {}) == {} and known_labs() == []


def test_second_up_of_the_same_lab_is_refused():
    L.up("mrc-4p", "fake")
    with pytest.raises(UsageError, match="already up"):
        L.up("mrc-4p", "fake")


def test_down_removes_nodes_and_state():
    L.up("mrc-4p", "fake")
    assert len(L.down("mrc-4p")) == 20
    assert known_labs() == [] and "mrc-4p" not in fake.WORLD


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


def test_link_down_is_recorded_before_it_is_applied(monkeypatch):
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    recorded = []

    def spy(self, node, ifname, up):
        recorded.append(json.loads((att.state.dir / "faults.json").read_text()))
        return original(self, node, ifname, up)

    original = fake.FakeRuntime.set_link_state
    monkeypatch.setattr(fake.FakeRuntime, "set_link_state", spy)
    fault = F.link_down(att, "t0-p0-r0:eth3")
    assert fault.link == "t0-p0-r0:eth3--t1-p0-0:eth1"
    assert recorded and recorded[0][0]["link"] == fault.link
    assert fake.WORLD["mrc-4p"]["t0-p0-r0"]["eth3"] is False
    assert fake.WORLD["mrc-4p"]["t1-p0-0"]["eth1"] is True  # one end only


def test_link_up_restores_both_ends_and_reconfigures_them():
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    F.link_down(att, "t1-p0-0:eth1", both=True)
    assert fake.WORLD["mrc-4p"]["t0-p0-r0"]["eth3"] is False
    fake.FakeRuntime.calls = []
    F.link_up(att, "t0-p0-r0:eth3")  # either end names the link
    assert fake.WORLD["mrc-4p"]["t0-p0-r0"]["eth3"] is True
    assert fake.WORLD["mrc-4p"]["t1-p0-0"]["eth1"] is True
    assert sorted(c[2] for c in fake.FakeRuntime.calls if c[0] == "configure") == [
        "t0-p0-r0", "t1-p0-0"]
    assert F.active(att) == []


def test_clear_reverts_every_fault():
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    F.link_down(att, "t0-p0-r0:eth3")
    F.link_down(att, "r1h1:eth2")
    assert len(F.clear(att)) == 2 and F.active(att) == []
    assert all(all(node.values()) for node in fake.WORLD["mrc-4p"].values())


@pytest.mark.parametrize("text,msg", [
    ("t0-p0-r0", "NODE:IFNAME"),
    ("t9-p0-r0:eth1", "no node"),
    ("t0-p0-r0:eth9", "its links are on eth1, eth2, eth3, eth4"),
])
def test_bad_link_names_get_a_hint(text, msg):
    L.up("mrc-4p", "fake")
    with pytest.raises(UsageError, match=msg):
        F.link_down(L.attach("mrc-4p"), text)


def test_same_link_cannot_be_downed_twice():
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    F.link_down(att, "t0-p0-r0:eth3")
    with pytest.raises(UsageError, match="already down"):
        F.link_down(att, "t1-p0-0:eth1")


def test_unknown_runtime_lists_the_valid_ones():
    with pytest.raises(UsageError, match="valid runtimes: auto, .*docker.*netns"):
        L.up("mrc-4p", "kubernetes")
