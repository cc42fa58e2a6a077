"""`twin drill all` (make chaos) on the in-memory runtime, the drill runner stood in for:
exit 0 when every main verdict holds (a baseline without expectations is reported, not
judged), every failure named with its reason in the summary, and the labs it brought
up taken down (unless --keep), also when a drill raises."""

import json

import pytest

from tests.helpers import cli
from twin import lab as L
from twin.chaos import runner
from twin.chaos.results import DrillRun, Judged
from twin.chaos.runner import SuiteRow, suite_verdict, why_of
from twin.errors import LabError
from twin.state import known_labs

pytestmark = pytest.mark.usefixtures("clean_world")

RETRY = "RoCE QP failed: PSN 812 lost 8 times (retry limit) at 302 ms"
ONLY = ("--only", "t0-t1-link-down", "--only", "nic-port-down")  # on mrc-4p, mrc-4p-shaped


@pytest.fixture
def drills(monkeypatch):
    """Each drill's mrc run passes and its single-path baseline is reported with a QP dead
    at its retry limit, unless `drills.outcome[name]` says "fail" or is an exception."""
    class Drills:
        outcome: dict[str, object] = {}
        labs_seen: list[list[str]] = []

    real_up = L.up
    monkeypatch.setattr(L, "up", lambda lab, runtime, steps=None, **kw:
                        real_up(lab, "fake", steps, **kw))

    def run_all(att, d, *, mode=None, compare=None, seed=1, progress=None):
        Drills.labs_seen.append(sorted(known_labs()))
        what = Drills.outcome.get(d.name, "pass")
        if isinstance(what, BaseException):
            raise what
        ok = what == "pass"
        main = {"name": d.name, "lab": att.lab, "mode": "mrc", "seed": seed,
                "verdict": "pass" if ok else "fail",
                "expectations": [{"what": "repair_ms", "want": "<= 50",
                                  "got": "3" if ok else "250", "ok": ok}]}
        base = {"name": d.name, "lab": att.lab, "mode": "single-path", "seed": seed,
                "baseline_of": "mrc", "verdict": "reported", "outcome": RETRY,
                "expectations": [{"what": "faults met traffic", "want": ">= 20 ms",
                                  "got": "0 ms", "ok": False, "judged": False}]}
        return [runner.RunResult(d, "mrc", seed, att.lab, DrillRun.from_json(main)),
                runner.RunResult(d, "single-path", seed, att.lab, DrillRun.from_json(base))]

    monkeypatch.setattr(runner, "run_all", run_all)
    return Drills


def test_every_main_verdict_holds_so_it_exits_0_and_takes_its_labs_down(drills, tmp_path):
    r = cli("drill", "all", *ONLY, "--report-root", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["ok"] is True and got["summary"].startswith("every MRC verdict holds: 2 drills")
    assert got["labs_kept"] == [] and known_labs() == []
    reported = [x for x in got["runs"] if x["verdict"] == "reported"]
    assert [x["why"] for x in reported] == [RETRY, RETRY]  # beside MRC's, not judged
    assert drills.labs_seen == [["mrc-4p-shaped"], ["mrc-4p"]]  # one lab up at a time
    assert len(got["reports"]) == 2


def test_a_failure_is_named_with_its_want_and_got_and_it_exits_1(drills, tmp_path):
    drills.outcome = {"t0-t1-link-down": "fail"}
    r = cli("drill", "all", *ONLY, "--report-root", str(tmp_path))
    assert r.exit_code == 1
    assert "1 of 2 drills failed: t0-t1-link-down (mrc): repair_ms: want <= 50, got 250" \
        in " ".join(r.output.split())
    assert known_labs() == []


def test_a_drill_that_raises_is_named_the_rest_run_and_the_labs_go(drills, tmp_path):
    drills.outcome = {"nic-port-down": LabError("steady state: the sizing transfer failed")}
    r = cli("drill", "all", *ONLY, "--report-root", str(tmp_path), "--json")
    assert r.exit_code == 1
    got = json.loads(r.stdout)
    assert {"name": "nic-port-down", "mode": "mrc", "lab": "mrc-4p-shaped", "verdict": "fail",
            "why": "error: steady state: the sizing transfer failed",
            "baseline": False} in got["runs"]
    assert any(x["name"] == "t0-t1-link-down" and x["verdict"] == "pass" for x in got["runs"])
    assert known_labs() == []


def test_keep_leaves_the_labs_up_and_a_lab_already_up_is_left_alone(drills, tmp_path):
    L.up("mrc-4p", "fake")
    r = cli("drill", "all", "--only", "nic-port-down", "--report-root", str(tmp_path),
            "--keep", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["labs_kept"] == ["mrc-4p-shaped"]
    assert known_labs() == ["mrc-4p", "mrc-4p-shaped"]
    r = cli("drill", "all", "--only", "t0-t1-link-down", "--report-root", str(tmp_path))
    assert r.exit_code == 0 and sorted(known_labs()) == ["mrc-4p", "mrc-4p-shaped"]


def test_an_interrupt_still_takes_the_labs_down(drills, tmp_path):
    drills.outcome = {"nic-port-down": KeyboardInterrupt()}
    cli("drill", "all", *ONLY, "--report-root", str(tmp_path))
    assert known_labs() == []


def test_why_a_run_has_its_verdict():
    failed = DrillRun(verdict="fail", expectations=(
        Judged("exact", "true", "false", False),
        Judged("faults met traffic", "x", "y", False, judged=False),
        Judged("rollback: verify", "pass", "pass", True)))
    assert why_of(failed) == "exact: want true, got false"
    assert why_of(DrillRun(verdict="reported", outcome=RETRY)) == RETRY
    assert why_of(DrillRun(verdict="fail")) == "the traffic did not run"
    assert why_of(DrillRun(verdict="pass")) == ""


def test_the_suites_line_says_every_verdict_holds_or_which_failed_and_why():
    rows = [SuiteRow("a", "mrc", "mrc-4p", "pass"),
            SuiteRow("a", "single-path", "mrc-4p", "reported", RETRY, baseline=True)]
    assert suite_verdict(rows) == (True, "every MRC verdict holds: 1 drill pass, 1 baseline "
                                         "reported beside them (not judged)")
    rows.append(SuiteRow("b", "mrc", "mrc-4p", "fail", "error: boom"))
    assert suite_verdict(rows) == (False, "1 of 2 drills failed: b (mrc): error: boom")


def test_a_suffix_runs_each_fabric_on_a_lab_of_its_own_name(drills, tmp_path):
    r = cli("drill", "all", *ONLY, "--suffix", "mine", "--report-root", str(tmp_path),
            "--json")
    assert r.exit_code == 0, r.output
    assert {x["lab"] for x in json.loads(r.stdout)["runs"]} == {"mrc-4p-mine",
                                                                 "mrc-4p-shaped-mine"}
    assert drills.labs_seen == [["mrc-4p-shaped-mine"], ["mrc-4p-mine"]]
    assert known_labs() == []
    r = cli("drill", "all", *ONLY, "--suffix", "Bad_Name")
    assert r.exit_code == 2 and "--suffix 'Bad_Name'" in r.output
