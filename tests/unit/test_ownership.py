"""Whose resources are whose: owners, `down --all` scoped to its run directory,
`down --stray`, racing ups and `--name` (against the in-memory runtime)."""

import json
import shutil

import pytest
from click.testing import CliRunner

from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.cli import main
from twin.errors import UsageError
from twin.owner import Owner
from twin.runtime import fake
from twin.state import LabState, known_labs

pytestmark = pytest.mark.usefixtures("clean_world")


@pytest.fixture
def two_run_dirs(tmp_path, monkeypatch):
    """Run directory A holds lab `alice`, B holds `bob`; the test runs in B."""
    a, b = tmp_path / "run-a", tmp_path / "run-b"
    monkeypatch.setenv("TWIN_RUN_DIR", str(a))
    L.up("mrc-4p", "fake", name="alice")
    monkeypatch.setenv("TWIN_RUN_DIR", str(b))
    L.up("mrc-4p", "fake", name="bob")
    return a, b


def owners(lab):
    return {n.owner for n in fake.WORLD[lab].values()}


def test_every_node_carries_its_labs_owner(two_run_dirs):
    a, b = two_run_dirs
    bob = LabState.load("bob")
    assert len(bob.id) == 12
    assert owners("bob") == {Owner(str(b.resolve()), "bob", bob.id)}
    (alice,) = owners("alice")
    assert alice.run_dir == str(a.resolve()) and alice.stray_because() is None


def test_down_all_takes_only_this_run_directorys_labs(two_run_dirs):
    removed = lifecycle.down_all()
    assert list(removed) == ["bob"]
    assert "bob" not in fake.WORLD and len(fake.WORLD["alice"]) == 20
    # one build root for both run directories (one checkout): alice's files stay
    assert sorted(p.name for p in L.build_root().iterdir()) == ["alice"]
    assert (L.build_root() / "alice" / "config" / "r0h0" / "node.json").exists()
    assert {r.owner.lab for r in L.sweep.others()} == {"alice"}


def test_cli_down_all_names_what_it_left_alone(two_run_dirs):
    res = CliRunner().invoke(main, ["down", "--all"])
    assert res.exit_code == 0, res.output
    assert "removed bob: 20 nodes" in res.output
    assert "left alone: 20 resources of 1 live labs" in res.output and "alice" in res.output


def test_a_lab_whose_run_directory_is_gone_is_stray_and_only_it_is_removed(two_run_dirs):
    a, _ = two_run_dirs
    shutil.rmtree(a)
    found = L.sweep.stray()
    assert {s.resource.name.split("/")[0] for s in found} == {"alice"}
    assert all("no longer exists" in s.why for s in found)
    lifecycle.down_stray(found)
    assert "alice" not in fake.WORLD and len(fake.WORLD["bob"]) == 20
    assert L.sweep.stray() == []


def test_a_lab_its_run_directory_knows_under_another_id_is_stray(two_run_dirs):
    a, _ = two_run_dirs
    path = a / "alice" / "lab.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "id": "0" * 12}))
    found = L.sweep.stray()
    assert found and all("under another id" in s.why for s in found)


def test_a_node_without_an_owner_is_stray_only_when_asked_for(two_run_dirs):
    fake.WORLD["alice"]["r0h0"].owner = None
    assert L.sweep.stray() == []  # a twin from before owners may have made it: kept
    (only,) = L.sweep.stray(ownerless=True)
    assert only.resource.name == "alice/r0h0" and "carries no owner" in only.why
    res = CliRunner().invoke(main, ["down", "--stray", "--yes"])
    assert "left alone: 1 resources that carry no owner" in res.output
    assert "r0h0" in fake.WORLD["alice"]
    res = CliRunner().invoke(main, ["down", "--stray", "--ownerless", "--yes"])
    assert res.exit_code == 0 and "r0h0" not in fake.WORLD["alice"]


def test_down_all_removes_what_a_lost_lab_json_left_of_this_run_directory(two_run_dirs):
    _, b = two_run_dirs
    shutil.rmtree(b / "bob")  # as if `twin up` was killed after creating, before recording
    assert known_labs() == []
    removed = lifecycle.down_all()
    assert len(removed["(leftovers of this run directory)"]) == 21
    assert removed["(leftovers of this run directory)"][-1] == \
        f"build {L.build_root() / 'bob'}"
    assert "bob" not in fake.WORLD and len(fake.WORLD["alice"]) == 20
    assert sorted(p.name for p in L.build_root().iterdir()) == ["alice"]


def test_down_stray_lists_then_asks_and_without_a_terminal_needs_yes(two_run_dirs):
    a, _ = two_run_dirs
    shutil.rmtree(a)
    dry = CliRunner().invoke(main, ["down", "--stray", "--dry-run", "--json"])
    assert dry.exit_code == 0 and len(json.loads(dry.output)) == 20
    asked = CliRunner().invoke(main, ["down", "--stray"])
    assert asked.exit_code == 2 and "pass --yes" in asked.output
    assert "lab alice of" in asked.output and "20 nodes" in asked.output
    assert len(fake.WORLD["alice"]) == 20  # nothing removed without the answer
    res = CliRunner().invoke(main, ["down", "--stray", "--yes"])
    assert res.exit_code == 0 and "removed 20 stray resources" in res.output
    assert "alice" not in fake.WORLD and len(fake.WORLD["bob"]) == 20


@pytest.mark.parametrize("argv", [["down", "bob", "--all"], ["down", "--all", "--stray"],
                                  ["down", "--yes"], ["down", "bob", "--dry-run"]])
def test_down_options_that_do_not_go_together_are_refused(two_run_dirs, argv):
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 2 and len(fake.WORLD["bob"]) == 20


def test_of_two_claims_on_one_lab_only_the_first_wins():
    first = LabState("x", "fake", "s.yml", "b", [], id="1")
    second = LabState("x", "fake", "s.yml", "b", [], id="2")
    assert first.claim() and not second.claim()
    assert LabState.load("x").id == "1"


def test_an_up_that_loses_the_race_changes_nothing_of_the_winner(monkeypatch):
    L.up("mrc-4p", "fake")
    before = LabState.load("mrc-4p")
    # The loser checked before the winner had claimed or created anything:
    monkeypatch.setattr("twin.lab.pipeline.refuse_if_up", lambda lab: None)
    monkeypatch.setattr("twin.lab.pipeline._refuse_foreign_nodes", lambda rt, compiled: None)
    with pytest.raises(UsageError, match="already up"):
        L.up("mrc-4p", "fake")
    assert LabState.load("mrc-4p") == before and len(fake.WORLD["mrc-4p"]) == 20


def test_one_spec_runs_as_two_labs_under_name(tmp_path):
    L.up("mrc-4p", "fake")
    L.up("mrc-4p", "fake", name="lab2")
    assert known_labs() == ["lab2", "mrc-4p"]
    att = L.attach("lab2")
    assert att.fabric.name == "lab2" and att.plan.fabric.name == "lab2"
    assert LabState.load("lab2").id != LabState.load("mrc-4p").id
    assert (tmp_path / "build" / "lab2" / "lab2.clab.yml").exists()
    F.link_down(att, "t0-p0-r0:eth3")
    assert F.active(L.attach("mrc-4p")) == []  # no shared fault state


@pytest.mark.parametrize("name", ["Lab2", "2lab", "x" * 25, "a_b", ""])
def test_a_bad_name_is_refused_in_one_line_before_anything_exists(name):
    res = CliRunner().invoke(main, ["up", "mrc-4p", "--runtime", "netns", "--name", name])
    assert res.exit_code == 2 and res.output.startswith("error: --name: ")
    assert len(res.output.strip().splitlines()) == 1
    assert known_labs() == [] and fake.WORLD == {}


def test_the_owner_tag_reads_back_and_labels_name_the_owner():
    o = Owner("/run/twin", "mrc-4p", "5c0f3e2a91b4")
    assert o.tag == "mrc-twin lab=mrc-4p id=5c0f3e2a91b4 run-dir=/run/twin"
    assert Owner.from_tag(o.tag) == o and Owner.from_tag("something else") is None
    assert Owner.from_labels(o.labels()) == o and Owner.from_labels({}) is None


def test_a_loss_table_carries_its_owner_as_its_comment():
    L.up("mrc-4p", "fake")
    att = L.attach("mrc-4p")
    F.link_loss(att, "t0-p0-r0:eth3", 5)
    (rules,) = fake.WORLD["mrc-4p"]["t0-p0-r0"].nft.values()
    assert f'comment "{att.runtime.owner.tag}"' in rules[0]
