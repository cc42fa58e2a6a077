"""A fault kind is one class in one registry (twin.faults.kinds): a kind registered by a
test, and by nothing else, is usable from a drill file (checked, drawn at random, put on
the timeline), from `twin fault`, and from a blind drill; unregistered, it is gone
again. On the fake runtime, whose kernel model keeps the kind's nft table."""

import json
import random
import time

import pytest

from tests.helpers import cli as twin
from twin import faults as F
from twin import lifecycle
from twin import validate as V
from twin.chaos import blind as B
from twin.chaos import drill as D
from twin.chaos import runner as R
from twin.errors import LabError, SpecError, UsageError
from twin.fabric.model import Endpoint
from twin.faults.kinds import FaultType, Param
from twin.faults.registry import KINDS, register, unregister
from twin.faults.targets import NodeTarget
from twin.runtime import fake

TOY = "toy-mark"
TABLE = "twin_toy_mark"


WORD = V.Str(r"^[A-Za-z]+$", empty=False, what="a word", hint="e.g. mark: hello")


class ToyMark(FaultType):
    """Marks a switch with an nft table carrying a word: the fake's kernel keeps it."""

    name = TOY
    help = "A test's fault: mark NODE with a word (an nft table)."
    targets = (NodeTarget,)
    form = "a switch, e.g. t1-p0-0"
    params = (Param("mark", "the word", default="toy", check=WORD, drill=True),)
    levels = ("toy",)

    def check(self, fabric, target):
        if not target.is_switch(fabric):
            raise UsageError(f"{target} is a host; mark a switch")

    def whole(self, target):
        return target.name

    def in_switch(self, fault):
        return fault.target

    def record(self, lab, target, values):
        return F.Fault(self.name, target.name, (Endpoint(target.name, ""),), time.time(),
                       links=tuple(lk.id for lk in target.links(lab.fabric)),
                       detail=values["mark"])

    def apply(self, lab, fault):
        lab.runtime.exec(fault.target, ["nft", "-f", "-"],
                         input=f"table ip6 {TABLE} {{\n  comment \"{fault.detail}\"\n}}\n")

    def revert(self, lab, fault):
        lab.runtime.exec(fault.target, ["nft", "delete", "table", "ip6", TABLE])

    def reapply(self, lab, fault, node):
        if node != fault.target:
            return []
        self.apply(lab, fault)
        return [fault.ends[0]]

    def said(self, lab, fault, values):
        return f"{fault.target} marked {fault.detail}"


pytestmark = pytest.mark.usefixtures("clean_world")


@pytest.fixture
def toy():
    register(ToyMark)
    yield KINDS[TOY]
    unregister(TOY)


def marks(node):
    return fake.WORLD["mrc-4p"][node].nft.get(TABLE, [])


# -- the record ----------------------------------------------------------------------------


def test_its_record_is_kept_and_read_back_by_name(att, toy):
    fault = toy.start(att, "t1-p0-0", {"mark": "hello"})
    (again,) = F.active(att)
    assert again == fault and again.kind == TOY and again.to_dict()["kind"] == TOY
    assert 'comment "hello"' in marks("t1-p0-0")[0]
    assert lifecycle.restart(att, "t1-p0-0").faults_again == ("t1-p0-0",)
    assert marks("t1-p0-0")  # applied again on the restarted switch
    with pytest.raises(UsageError, match="already has a toy-mark fault"):
        F.link_down(att, "t1-p0-0:eth1")
    F.clear(att)
    assert marks("t1-p0-0") == [] and [e["kind"] for e in F.events(att)] == [TOY, TOY]


def test_unregistered_its_records_are_an_error_not_a_guess(att, toy):
    toy.start(att, "t1-p0-0")
    unregister(TOY)
    try:
        with pytest.raises(LabError, match="unknown fault kind 'toy-mark'"):
            F.active(att)
    finally:
        register(ToyMark)
        F.clear(att)


# -- a drill file and its timeline ------------------------------------------------------------


DRILL = """
name: toy
method:
  traffic: {pattern: bulk, src: r0h0, dst: r1h0}
  timeline:
    - {at: 10ms, fault: toy-mark, target: t1-p1-0, mark: first, for: 5ms}
    - {at: 30ms, fault: toy-mark, target: {random: t0}}
"""


def test_a_drill_file_checks_its_steps_by_the_kind(toy):
    d = D.parse_drill(DRILL)
    first, second = d.timeline
    assert (first.fault, first.params, first.for_ns) == (TOY, {"mark": "first"}, 5_000_000)
    assert (second.random, second.params) == ("t0", {"mark": "toy"})  # the default
    assert d.end_ns == 30_000_000
    problems = {
        "{at: 1ms, fault: toy-mark, target: t1-p0-0, mark: 7}": ("mark", "must be a word"),
        "{at: 1ms, fault: toy-mark, target: {random: plane}}": ("target.random",
                                                               "cannot target a random plane"),
        "{at: 1ms, fault: link-down, target: a:b, mark: x}": ("mark", "does not apply"),
        "{at: 1ms, fault: toy-mark}": ("target", "is required"),
    }
    for step, (key, says) in problems.items():
        with pytest.raises(SpecError) as e:
            D.parse_drill("name: d\nmethod: {traffic: {pattern: incast}, timeline: ["
                          + step + "]}")
        found = {p.path: p for p in e.value.problems}
        assert says in found[f"method.timeline[0].{key}"].message, found


def test_unregistered_a_drill_file_naming_it_is_refused():
    with pytest.raises(SpecError) as e:
        D.parse_drill(DRILL)
    assert "unknown fault 'toy-mark'" in str(e.value)


def test_its_steps_run_on_the_drill_timeline(att, toy):
    drill = D.parse_drill(DRILL)
    planned = R.plan_targets(drill, att, seed=4)
    drawn = planned[1].target
    assert drawn == R._draw("t0", att.fabric, [("r0h0", "r1h0")], random.Random(4))
    assert planned[0].nodes == {"t1-p1-0"} and len(planned[0].links) == 2
    timeline = R.Timeline(att, planned, log=lambda *a: None)
    timeline.begin(time.monotonic_ns())
    timeline.join(10)
    assert timeline.error is None and timeline.done == timeline.total == 3
    assert marks("t1-p1-0") == [] and 'comment "toy"' in marks(drawn)[0]  # reverted; in force
    assert [(a.kind, a.target, a.reverted_ns is not None) for a in timeline.applied] == [
        (TOY, "t1-p1-0", True), (TOY, drawn, False)]
    assert timeline.revert_all() == [drawn] and marks(drawn) == [] and F.active(att) == []


def test_a_host_is_refused_before_anything_is_applied(att, toy):
    drill = D.parse_drill(DRILL.replace("target: t1-p1-0", "target: r0h0"))
    with pytest.raises(UsageError, match=r"target 'r0h0': r0h0 is a host; mark a switch "
                                         r"\(toy-mark takes a switch, e.g. t1-p0-0\)"):
        R.plan_targets(drill, att, seed=1)
    assert F.events(att) == []


# -- `twin fault` ----------------------------------------------------------------------------


def test_twin_fault_has_its_command(att, toy):
    assert TOY in twin("fault", "--help").output
    usage = twin("fault", TOY, "--help").output
    assert "Usage: main fault toy-mark [OPTIONS] NODE" in usage and "--mark" in usage
    res = twin("fault", TOY, "t1-p0-1", "--mark", "cli")
    assert res.exit_code == 0 and res.output == "t1-p0-1 marked cli\n", res.output
    assert "toy-mark t1-p0-1 (2 links) (at: t1-p0-1, cli)" in twin("fault", "list").output
    assert json.loads(twin("fault", "list", "--json").output)[0]["kind"] == TOY
    assert "reverted 1 fault" in twin("fault", "clear", "t1-p0-1").output
    assert marks("t1-p0-1") == []
    res = twin("fault", TOY, "nosuch")
    assert res.exit_code == 2 and "no node 'nosuch'" in res.output


def test_unregistered_twin_fault_has_no_such_command(att):
    res = twin("fault", TOY, "t1-p0-1")
    assert res.exit_code == 2 and "unknown fault kind or command 'toy-mark'" in res.output
    assert "link-down" in res.output  # the valid names are listed
    assert TOY not in twin("fault", "--help").output


# -- a blind drill ---------------------------------------------------------------------------


def test_a_blind_drill_draws_it_at_its_level(att, toy, no_traffic):
    assert B.LEVELS["toy"] == (TOY,) and TOY not in B.LEVELS["easy"] + B.LEVELS["hard"]
    draws = {B.draw(att.fabric, "toy", s) for s in range(300)}
    assert {d.kind for d in draws} == {TOY}
    assert {d.target for d in draws} == {n.name for n in att.fabric.switches}  # the default
    res = twin("drill", "blind", "--level", "toy", "--seed", "5")
    assert res.exit_code == 0, res.output
    drawn = B.draw(att.fabric, "toy", 5).target
    (fault,) = F.active(att)
    assert fault.hidden and fault.target == drawn and marks(drawn)
    res = twin("drill", "answer", drawn)
    assert res.output.startswith("RIGHT: "), res.output
    (score,) = B.history(att)
    assert (score.kind, score.target, score.detail, score.verdict) == (TOY, drawn, "toy", "right")
    assert marks(drawn) == [] and F.active(att) == []


def test_unregistered_its_level_is_gone(att):
    assert "toy" not in B.LEVELS
    res = twin("drill", "blind", "--level", "toy")
    assert res.exit_code == 2 and "'toy' is not one of 'easy', 'hard'" in res.output


def test_a_link_fault_held_to_the_end_is_closed_by_the_rollback(att):
    """The step names NODE:IF, its record the link id: the rollback's revert closes the
    step's own record all the same (a record left open would read "in force to the end"
    in the results, though the rollback reverted it)."""
    drill = D.parse_drill("name: cut\nmethod:\n  traffic: {pattern: bulk, src: r0h0, "
                          "dst: r1h0}\n  timeline:\n    - {at: 1ms, fault: link-down, "
                          "target: t0-p0-r0:eth3}\n")
    timeline = R.Timeline(att, R.plan_targets(drill, att, seed=1), log=lambda *a: None)
    timeline.begin(time.monotonic_ns())
    timeline.join(10)
    assert timeline.error is None and len(F.active(att)) == 1
    (applied,) = timeline.applied
    assert applied.reverted_ns is None
    timeline.revert_all()
    assert F.active(att) == [] and applied.reverted_ns is not None
    assert applied.revert_began_ns is not None
