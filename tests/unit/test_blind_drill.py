"""Blind drills (twin.chaos.blind) without root: the draw by seed and level, the
scoring rules, a hidden fault as `fault list`, `status` and `fault log` show it,
and the drill's commands on the fake runtime (its traffic process stubbed)."""

import json
import time

import pytest

from tests.helpers import cli as twin
from twin import faults as F
from twin.chaos import blind as B
from twin.errors import UsageError
from twin.faults import FaultKind
from twin.runtime import fake

SEEDS = range(300)
DRAWN = {  # on mrc-4p, seeds 0 to 3
    "easy": ["twin fault nic-down r1h1:0", "twin fault link-down t1-p0-0:eth2",
             "twin fault link-down t0-p0-r1:eth3", "twin fault link-down t1-p1-0:eth1"],
    "hard": ["twin fault link-loss t0-p2-r1:eth3 50", "twin fault sid-loss t0-p1-r0",
             "twin fault blackhole t0-p1-r0", "twin fault sid-loss t0-p2-r0"],
}


pytestmark = pytest.mark.usefixtures("clean_world")


def all_up():
    return all(i.up for n in fake.WORLD["mrc-4p"].values() for i in n.interfaces.values())


# -- the draw ------------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["easy", "hard"])
def test_the_draw_is_the_same_for_a_seed_and_covers_its_level(att, level):
    draws = [B.draw(att.fabric, level, s) for s in SEEDS]
    assert draws == [B.draw(att.fabric, level, s) for s in SEEDS]
    assert {d.kind for d in draws} == set(B.LEVELS[level])
    assert len({d.target for d in draws}) > 10  # targets vary too


def test_easy_faults_show_in_port_state_and_hard_ones_do_not():
    # in this order: a seed draws by position, so it replays the same drill only while the
    # kinds keep their order (twin.faults.catalog registers them so)
    assert B.LEVELS["easy"] == (FaultKind.LINK_DOWN, FaultKind.NIC_DOWN, FaultKind.SWITCH_DOWN)
    assert B.LEVELS["hard"] == (FaultKind.BLACKHOLE, FaultKind.SID_LOSS,
                                FaultKind.ROUTE_CORRUPT, FaultKind.LINK_LOSS,
                                FaultKind.LINK_RATE)
    assert list(B.LEVELS) == ["easy", "hard"]


def test_a_seed_draws_what_it_drew_before_the_kinds_were_classes(att):
    """Draws recorded from the code before the fault registry (seed -> fault command)."""
    assert [B.draw(att.fabric, "easy", s).command for s in range(4)] == DRAWN["easy"]
    assert [B.draw(att.fabric, "hard", s).command for s in range(4)] == DRAWN["hard"]


def test_every_drawn_target_is_one_its_fault_command_takes(att):
    fabric = att.fabric
    for level in B.LEVELS:
        for s in SEEDS:
            d = B.draw(fabric, level, s)
            node, _, port = d.target.partition(":")
            assert fabric.has_node(node), d
            if d.kind in (FaultKind.SWITCH_DOWN, FaultKind.SID_LOSS, FaultKind.ROUTE_CORRUPT):
                assert fabric.node(node).is_switch and not port
            elif d.kind is FaultKind.NIC_DOWN:
                assert not fabric.node(node).is_switch and int(port) in fabric.nic_planes
            elif d.kind is FaultKind.BLACKHOLE:
                assert fabric.node(node).is_switch
            else:  # a link end; loss and rate at a switch end
                link = fabric.link_at(F.parse_end(d.target))
                assert d.kind is not FaultKind.LINK_DOWN or link.kind == "fabric"
                if d.kind in (FaultKind.LINK_LOSS, FaultKind.LINK_RATE):
                    assert fabric.node(node).is_switch
            arg = {FaultKind.LINK_LOSS: {str(p) for p in B.LOSS_PERCENTS},
                   FaultKind.LINK_RATE: set(B.RATES)}.get(d.kind, {""})
            assert d.arg in arg


def test_an_unknown_level_is_refused(att):
    with pytest.raises(UsageError, match="unknown level 'medium'; levels: easy, hard"):
        B.draw(att.fabric, "medium", 1)


def test_the_draw_is_applied_hidden_and_recorded_before(att):
    d = B.Draw(FaultKind.SWITCH_DOWN, "t1-p0-0")
    assert d.command == "twin fault switch-down t1-p0-0"
    fault = d.apply(att)
    assert fault.hidden and F.active(att) == [fault]
    assert F.events(att)[-1]["hidden"] is True
    assert B.Draw(FaultKind.LINK_LOSS, "t1-p0-0:eth1", "30").command == \
        "twin fault link-loss t1-p0-0:eth1 30"


# -- answers -------------------------------------------------------------------------------

LINK = "t0-p0-r0:eth3--t1-p0-0:eth1"


@pytest.mark.parametrize("text,node,link", [
    ("t1-p0-0", "t1-p0-0", None),
    ("t0-p0-r0:eth3", None, LINK),
    ("t1-p0-0:eth1", None, LINK),
    (LINK, None, LINK),
    (" r0h0:eth1 ", None, "r0h0:eth1--t0-p0-r0:eth1"),
    ("r0h0:0", None, "r0h0:eth1--t0-p0-r0:eth1"),  # HOST:PLANE, as nic-down names it
])
def test_an_answer_names_a_node_or_a_link(att, text, node, link):
    a = B.parse_answer(att.fabric, text)
    assert (a.node, a.link) == (node, link)


@pytest.mark.parametrize("text,msg", [
    ("t9-p0-0", "no node 't9-p0-0' in lab mrc-4p"),
    ("t1-p0-0:eth9", "t1-p0-0 has no link on 'eth9'; its links are on eth1, eth2"),
    ("t1-p0-0:1", "t1-p0-0 has no link on '1'"),  # a switch has no NIC planes
    ("r0h0:7", "r0h0 has no NIC port on plane 7"),
    ("a:eth1--b:eth1", "no link 'a:eth1--b:eth1' in lab mrc-4p"),
    ("", "no node ''"),
])
def test_an_answer_naming_nothing_in_the_lab_is_refused(att, text, msg):
    with pytest.raises(UsageError, match=msg):
        B.parse_answer(att.fabric, text)


def fault_of(att, kind, target, arg=""):
    return B.Draw(kind, target, arg).apply(att)


@pytest.mark.parametrize("kind,target,arg,answers", [
    (FaultKind.SWITCH_DOWN, "t1-p0-0", "", {
        "t1-p0-0": "right", "t1-p0-0:eth2": "partial", "t0-p0-r0:eth3": "partial",
        LINK: "partial", "t0-p0-r0": "wrong", "t1-p0-1": "wrong", "r0h0": "wrong"}),
    (FaultKind.BLACKHOLE, "t0-p1-r1", "", {
        "t0-p1-r1": "right", "t0-p1-r1:eth1": "partial", "t1-p1-0": "wrong"}),
    (FaultKind.LINK_DOWN, "t0-p0-r0:eth3", "", {
        "t0-p0-r0:eth3": "right", "t1-p0-0:eth1": "right", LINK: "right",
        "t0-p0-r0": "partial", "t1-p0-0": "partial", "t0-p0-r0:eth4": "wrong",
        "t1-p0-1": "wrong"}),
    (FaultKind.NIC_DOWN, "r0h0:0", "", {
        "r0h0:0": "right", "r0h0:eth1": "right", "t0-p0-r0:eth1": "right",
        "r0h0": "partial", "t0-p0-r0": "partial", "r0h0:1": "wrong", "r0h1": "wrong"}),
    (FaultKind.BLACKHOLE, "t1-p0-0:eth1", "", {  # a link fault at a switch end
        LINK: "right", "t0-p0-r0:eth3": "right", "t1-p0-0": "partial",
        "t0-p0-r0": "partial", "t1-p0-0:eth2": "wrong"}),
    (FaultKind.LINK_LOSS, "t1-p0-0:eth1", "30", {
        "t0-p0-r0:eth3": "right", "t1-p0-0": "partial", "t1-p0-1": "wrong"}),
])
def test_the_scoring_rules(att, kind, target, arg, answers):
    fault = fault_of(att, kind, target, arg)
    got = {text: B.score(att.fabric, fault, B.parse_answer(att.fabric, text))[0]
           for text in answers}
    assert got == answers


def test_a_verdict_says_why(att):
    fault = fault_of(att, FaultKind.LINK_DOWN, "t0-p0-r0:eth3")
    assert B.score(att.fabric, fault, B.parse_answer(att.fabric, "t1-p0-0")) == (
        "partial", f"t1-p0-0 is an end of link {LINK}, but the fault is on that link, not "
                   "the whole node")


def test_points_and_the_summary():
    def s(verdict, seconds):
        return B.Score(0, "l", 1, "easy", "link-down", "x", "", None, verdict, "",
                       B.POINTS[verdict], seconds, [], "answer")

    total = B.summary([s("right", 30), s("right", 90), s("right", 60), s("partial", 5),
                       s("wrong", 1), s("gave up", 2)])
    assert total == {"drills": 6, "points": 3.5, "right": 3, "partial": 1, "wrong": 1,
                     "gave up": 1, "median_right_s": 60}
    assert B.summary([])["median_right_s"] is None


# -- a hidden fault as the fault commands show it -------------------------------------------


def test_fault_list_says_only_that_a_hidden_fault_is_in_force(att):
    fault_of(att, FaultKind.SWITCH_DOWN, "t1-p0-0")
    res = twin("fault", "list")
    assert res.exit_code == 0 and res.output == "1 hidden fault in force\n"
    assert json.loads(twin("fault", "list", "--json").output) == {"hidden": 1, "faults": []}
    status = twin("status").output
    assert "1 hidden fault in force" in status and "switch-down" not in status
    log = twin("fault", "log").output
    assert "apply  hidden fault" in log and "t1-p0-0" not in log
    (entry,) = json.loads(twin("fault", "log", "--json").output)
    assert entry["hidden"] is True and not {"kind", "target", "ends"} & set(entry)


@pytest.mark.parametrize("args", [
    ["fault", "clear", "t1-p0-0"], ["fault", "clear", "t1-p1-0"],  # right or not: alike
    ["fault", "link-up", "t0-p0-r0:eth3"], ["fault", "link-down", "t0-p3-r1:eth4"],
    ["fault", "switch-reboot", "t1-p0-0"], ["fault", "blackhole", "t1-p2-1"],
])
def test_with_a_hidden_fault_other_fault_changes_are_refused_without_a_hint(att, args):
    fault_of(att, FaultKind.SWITCH_DOWN, "t1-p0-0")
    res = twin(*args)
    assert res.exit_code == 2 and "a blind drill's hidden fault is in force" in res.output
    assert "t1-p0-0" not in res.output.replace(args[-1], "")
    assert [f.target for f in F.active(att)] == ["t1-p0-0"]


def test_fault_clear_reverts_a_hidden_fault_and_then_it_shows_in_the_log(att):
    fault_of(att, FaultKind.SWITCH_DOWN, "t1-p0-0")
    assert "reverted 1 fault" in twin("fault", "clear").output
    assert all_up() and twin("fault", "list").output == "no faults in force\n"
    assert "revert switch-down t1-p0-0" in twin("fault", "log").output


# -- the drill's commands on the fake runtime -----------------------------------------------


def start(seed=7, level="easy"):
    res = twin("drill", "blind", "--seed", str(seed), "--level", level)
    assert res.exit_code == 0, res.output
    return res


def the_fault(att):
    (f,) = F.active(att)
    return f


def test_blind_starts_traffic_applies_a_hidden_fault_and_gives_the_mission(att, no_traffic):
    res = start()
    assert "Something is wrong with the fabric; find it." in res.output
    for tool in ("twin status", "twin verify", "twin stats", "twin probe", "twin exec",
                 "twin drill answer", "twin drill reveal"):
        assert tool in res.output
    fault = the_fault(att)
    assert fault.hidden
    assert fault.target not in res.output and fault.kind.value not in res.output
    drill = B.running(att)
    assert drill.seed == 7 and drill.traffic_pid == 4242 and drill.fault == fault.to_dict()


def started_earlier(att, seconds):
    """The running drill, as if started `seconds` before it was (its state's first line)."""
    path = att.state.dir / B.STATE
    first, *rest = path.read_text().splitlines(keepends=True)
    line = json.loads(first)
    line["drill"]["started_ns"] -= int(seconds * 1e9)
    path.write_text(json.dumps(line) + "\n" + "".join(rest))


def test_a_right_answer_is_scored_reverted_and_kept(att, no_traffic):
    start(seed=3)
    started_earlier(att, 90)
    began = time.monotonic()
    fault = the_fault(att)
    twin("fault", "list")
    twin("status", "mrc-4p")
    twin("drill", "scores")  # during the drill: recorded too
    res = twin("drill", "answer", fault.ends[0].node if fault.kind is FaultKind.SWITCH_DOWN
               else str(fault.ends[0]))
    assert res.exit_code == 0, res.output
    assert res.output.startswith("RIGHT: ") and f"the fault:  {fault.kind} {fault.target}" \
        in res.output
    assert "twin drill blind --seed 3 --level easy" in res.output
    assert F.active(att) == [] and all_up() and B.running(att) is None
    assert no_traffic == [4242]
    (score,) = B.history(att)
    assert (score.verdict, score.points, score.ended_by) == ("right", 1.0, "answer")
    assert score.commands == ["twin fault list", "twin status", "twin drill scores"]
    assert 90 <= score.seconds <= 90 + time.monotonic() - began + 0.1  # start to answer
    listed = json.loads(twin("drill", "scores", "--json").output)
    assert listed["summary"]["right"] == 1 and listed["scores"][0]["seed"] == 3


def test_a_wrong_answer_is_scored_and_reverted_too(att, no_traffic):
    seed = next(s for s in SEEDS if B.draw(att.fabric, "easy", s).kind is FaultKind.SWITCH_DOWN)
    start(seed)
    switch = the_fault(att).target
    other = next(n.name for n in att.fabric.switches  # not it, and no link to it
                 if n.name != switch and all(switch not in (lk.a.node, lk.b.node)
                                             for lk in att.fabric.links_of(n.name)))
    res = twin("drill", "answer", "--json", other)
    assert res.exit_code == 0, res.output
    score = json.loads(res.output)
    assert (score["answer"], score["verdict"], score["points"]) == (other, "wrong", 0.0)
    assert score["why"] == f"the fault is in switch {switch}"
    assert F.active(att) == [] and all_up() and no_traffic == [4242]


def test_an_answer_naming_nothing_changes_nothing(att, no_traffic):
    start()
    before = F.active(att)
    res = twin("drill", "answer", "t7-p0-0")
    assert res.exit_code == 2 and "no node 't7-p0-0' in lab mrc-4p" in res.output
    assert F.active(att) == before and B.running(att) is not None and no_traffic == []
    assert B.history(att) == []


def test_reveal_gives_up(att, no_traffic):
    start(seed=11, level="easy")
    fault = the_fault(att)
    res = twin("drill", "reveal")
    assert res.exit_code == 0 and res.output.startswith("GAVE UP")
    assert f"{fault.kind} {fault.target}" in res.output
    (score,) = B.history(att)
    assert (score.verdict, score.answer, score.points) == ("gave up", None, 0.0)
    assert F.active(att) == [] and no_traffic == [4242]


def test_fault_clear_ends_the_drill_as_given_up(att, no_traffic):
    start()
    res = twin("fault", "clear")
    assert res.exit_code == 0 and "reverted 1 fault" in res.output
    assert "blind drill given up: the fault was" in res.output
    (score,) = B.history(att)
    assert score.ended_by == "fault clear" and score.commands == ["twin fault clear"]
    assert B.running(att) is None and all_up() and no_traffic == [4242]


@pytest.mark.parametrize("args", [["drill", "answer", "t1-p0-0"], ["drill", "reveal"]])
def test_answer_and_reveal_need_a_running_drill(att, args):
    res = twin(*args)
    assert res.exit_code == 2
    assert "no blind drill is running in lab mrc-4p; start one with `twin drill blind --lab " \
        "mrc-4p`" in res.output


def test_one_blind_drill_at_a_time_and_only_on_a_healthy_fabric(att, no_traffic):
    F.link_down(att, "t0-p0-r0:eth3")
    res = twin("drill", "blind")
    assert res.exit_code == 2 and "has 1 fault in force (link-down" in res.output
    assert B.running(att) is None
    F.clear(att)
    start()
    res = twin("drill", "blind")
    assert res.exit_code == 2 and "a blind drill is already running in lab mrc-4p" in res.output
    assert len(F.active(att)) == 1


def test_a_failed_start_leaves_nothing(att, monkeypatch):
    def broken(att, drill):
        raise UsageError("traffic broke")

    monkeypatch.setattr(B, "start_traffic", broken)
    res = twin("drill", "blind")
    assert res.exit_code == 2 and "traffic broke" in res.output
    assert B.running(att) is None and F.active(att) == [] and all_up()


def test_commands_are_recorded_only_for_the_lab_they_name(att, no_traffic):
    start()
    B.record_command(["--lab", "another"], "twin verify")
    B.record_command(["--lab=mrc-4p"], "twin stats")
    B.record_command(["mrc-4p"], "twin verify")
    B.record_command([], "twin status")
    assert [c["cmd"] for c in B.running(att).commands] == [
        "twin stats", "twin verify", "twin status"]


def test_no_drill_no_record(att, tmp_path):
    B.record_command([], "twin status")
    assert not (att.state.dir / B.STATE).exists()
    assert twin("status").exit_code == 0
    assert not (att.state.dir / B.STATE).exists()


def test_down_takes_the_drill_with_the_lab(att, no_traffic):
    start()
    assert twin("down", "mrc-4p").exit_code == 0
    assert not att.state.dir.exists()


def test_a_drill_whose_start_was_killed_before_its_fault_can_be_given_up(att, no_traffic):
    d = B.Drill("dead1234", "mrc-4p", att.state.id, 9, "easy",
                B.Draw(FaultKind.SWITCH_DOWN, "t1-p0-0"), 0.0, 0)
    (att.state.dir / B.STATE).write_text(json.dumps(d.to_line()) + "\n{\"cmd\": \"twin st")
    res = twin("drill", "answer", "t1-p0-0")
    assert res.exit_code == 1 and "was never applied" in res.output
    res = twin("drill", "reveal")
    assert res.exit_code == 0 and "switch-down t1-p0-0 (not applied)" in res.output
    assert B.running(att) is None and B.history(att)[0].verdict == "gave up"


def test_the_cli_hook_records_command_paths(att, no_traffic):
    start()
    twin("--debug", "status")
    twin("nosuch")  # no command ran
    twin("fault", "list", "--lab", "mrc-4p")
    twin("fault", "list", "--lab", "another")  # fails: not this lab's drill's
    twin("drill", "answer", "nosuch")  # refused, and the drill's own command
    assert [c["cmd"] for c in B.running(att).commands] == ["twin status", "twin fault list"]
    assert B.running(att).commands[1]["args"] == ["--lab", "mrc-4p"]
