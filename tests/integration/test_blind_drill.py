"""Blind drills on netns, through the CLI as a trainee types it: a hidden fault
under background traffic, found (or not), scored, reverted; the traffic process
never outlives the drill or the lab."""

from __future__ import annotations

import json

import pytest

from tests import helpers
from tests.helpers import poll
from tests.integration.conftest import lab_name, namespaces_of, own_spec, set_env
from twin import lab as L
from twin import lifecycle
from twin.chaos import blind as B
from twin.faults import FaultKind
from twin.owner import owned_processes
from twin.state import LabState

pytestmark = pytest.mark.netns

LAB = lab_name("blind-4p")
SEEDS = range(500)


@pytest.fixture(scope="module")
def blind_lab(session_dirs):
    """The module's lab, brought up when a test needs it and it is not up (the first
    test, and any after test_down_during_a_drill_leaves_nothing, which takes it down
    itself); down after the module."""
    def up():
        set_env(session_dirs)
        if LabState.load(LAB) is None:
            L.up(own_spec(session_dirs, LAB, "mrc-4p"), "netns")
        return L.attach(LAB)
    try:
        yield up
    finally:
        set_env(session_dirs)
        if LabState.load(LAB) is not None:
            lifecycle.down(LAB)


@pytest.fixture
def att(blind_lab):
    """The module's lab, up, whatever the tests before this one did."""
    return blind_lab()


def twin(*argv: str, ok: bool | None = True):
    return helpers.twin(*argv, ok=ok, timeout=120)  # every command here should succeed


def seed_for(att, level: str, ok) -> int:
    """The first seed whose draw `ok` accepts (the test knows the fault; the trainee not)."""
    return next(s for s in SEEDS if ok(B.draw(att.fabric, level, s)))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def rounds(att) -> list[dict]:
    try:
        text = (att.state.dir / B.TRAFFIC_LOG).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def start(att, level: str, seed: int) -> int:
    """`twin drill blind`; the traffic's pid, once a round has gone through."""
    done_before = len(rounds(att))
    res = twin("drill", "blind", "--lab", LAB, "--level", level, "--seed", str(seed))
    assert "Something is wrong with the fabric; find it." in res.stdout
    drill = B.running(att)
    pid = drill.traffic_pid
    assert alive(pid) and owned_processes()[pid] == att.state.owner
    assert poll(lambda: len(rounds(att)) > done_before, 60), "no round of background traffic"
    return pid


def scores(att) -> dict:
    return json.loads(twin("drill", "scores", "--lab", LAB, "--json").stdout)


def no_qps_left(att) -> bool:
    stats = json.loads(twin("stats", "--lab", LAB, "--json").stdout)
    return all(not h["send_qps"] and not h["recv_qps"] for h in stats.values())


def test_a_silent_fault_is_found_scored_and_reverted(att):
    seed = seed_for(att, "hard", lambda d: d.kind is FaultKind.BLACKHOLE and ":" not in d.target)
    switch = B.draw(att.fabric, "hard", seed).target
    kept_before = scores(att)["scores"]
    pid = start(att, "hard", seed)
    listed = twin("fault", "list", "--lab", LAB)
    assert listed.stdout == "1 hidden fault in force\n"
    assert json.loads(twin("fault", "list", "--lab", LAB, "--json").stdout) == \
        {"hidden": 1, "faults": []}
    verify = twin("verify", LAB, ok=False)
    assert verify.returncode == 1 and "FAIL" in verify.stdout
    twin("stats", "--lab", LAB)
    res = twin("drill", "answer", "--lab", LAB, switch, "--json")
    score = json.loads(res.stdout)
    assert (score["verdict"], score["points"], score["kind"], score["target"]) == \
        ("right", 1.0, "blackhole", switch)
    assert score["commands"] == ["twin fault list", "twin fault list", "twin verify",
                                 "twin stats"]
    assert score["seconds"] > 0 and score["seed"] == seed
    assert not alive(pid), "the traffic outlived the drill"
    assert poll(lambda: no_qps_left(att), 10), "the stopped traffic's QPs are still open"
    assert twin("fault", "list", "--lab", LAB).stdout == "no faults in force\n"
    assert "PASS" in twin("verify", LAB).stdout
    assert all(r["ok"] for r in rounds(att)), "mrc traffic lost bytes around the blackhole"
    assert scores(att)["scores"] == [*kept_before, score]
    assert "traffic stopped" in (att.state.dir / B.TRAFFIC_LOG).read_text()


def test_a_wrong_answer_is_scored_and_the_fault_reverted(att):
    seed = seed_for(att, "easy", lambda d: d.kind is FaultKind.SWITCH_DOWN)
    switch = B.draw(att.fabric, "easy", seed).target
    other = next(n.name for n in att.fabric.switches  # not it, and no link to it
                 if n.name != switch and all(switch not in (lk.a.node, lk.b.node)
                                             for lk in att.fabric.links_of(n.name)))
    pid = start(att, "easy", seed)
    bad = twin("drill", "answer", "--lab", LAB, "nosuch-node", ok=False)
    assert bad.returncode == 2 and "no node 'nosuch-node'" in bad.stderr
    assert B.running(att) is not None and alive(pid)  # nothing changed
    assert twin("fault", "list", "--lab", LAB).stdout == "1 hidden fault in force\n"
    res = twin("drill", "answer", "--lab", LAB, other)
    assert res.stdout.startswith(f"WRONG: the fault is in switch {switch}")
    assert not alive(pid) and B.running(att) is None
    assert "PASS" in twin("verify", LAB).stdout


def test_reveal_gives_up_and_reverts(att):
    seed = seed_for(att, "easy", lambda d: d.kind is FaultKind.LINK_DOWN)
    target = B.draw(att.fabric, "easy", seed).target
    drills_before = scores(att)["summary"]["drills"]
    pid = start(att, "easy", seed)
    res = twin("drill", "reveal", "--lab", LAB)
    assert res.stdout.startswith("GAVE UP") and "link-down" in res.stdout
    link = att.fabric.link_at(B.F.parse_end(target)).id
    assert link in res.stdout
    assert not alive(pid)
    assert "PASS" in twin("verify", LAB).stdout
    after = scores(att)
    assert after["scores"][-1]["verdict"] == "gave up"
    assert after["summary"]["drills"] == drills_before + 1
    again = twin("drill", "reveal", "--lab", LAB, ok=False)
    assert again.returncode == 2 and "no blind drill is running" in again.stderr


def test_down_during_a_drill_leaves_nothing(att):
    owner = att.state.owner
    pid = start(att, "hard", seed_for(att, "hard", lambda d: d.kind is FaultKind.LINK_LOSS))
    twin("down", LAB)
    assert not alive(pid), "the traffic outlived the lab"
    assert [p for p, o in owned_processes().items() if o == owner] == []
    assert namespaces_of(LAB) == [] and not att.state.dir.exists()
