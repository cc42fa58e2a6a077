"""`twin ci` on the in-memory runtime: its stages in order, the lab always removed (a
verify that fails, a drill that raises, Ctrl-C), the exit codes, the files in out/, and
bad input refused before anything exists.

The fake runtime carries no packets and runs no endpoints, so verify and the drills are
stood in for here (`probes`, `drills`); tests/integration/test_ci.py runs them for real.
"""

import json
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.helpers import cli, write_tables
from twin import ci as CI
from twin import faults as F
from twin import lab as L
from twin import lifecycle
from twin.chaos import runner
from twin.chaos.results import DrillRun
from twin.errors import LabError, SpecError, UsageError
from twin.fabric import paths as P
from twin.fabric.spec import name_problem
from twin.readback import NodeCheck
from twin.routes import check as C
from twin.runtime import fake
from twin.state import known_labs
from twin.verify import VerifyReport
from twin.verify.prober import ProbeResult

pytestmark = pytest.mark.usefixtures("clean_world")

T0_TO_T1 = {"t0-p0-r0": ["fcbb:bb00:200::/48"]}  # t0-p0-r0 loses its route to t1-p0-0


@pytest.fixture
def events(monkeypatch):
    """What ran, in order: the check, up, verify, each drill, down."""
    seen = []

    def spy(name, fn):
        def wrapped(*args, **kwargs):
            seen.append(name)
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(C, "check", spy("routes check", C.check))
    monkeypatch.setattr(L, "up", spy("up", L.up))
    monkeypatch.setattr(lifecycle, "down", spy("down", lifecycle.down))
    return seen


@pytest.fixture
def probes(monkeypatch, events):
    """verify on the fake runtime: every route there, and every probe answered but the
    (source, uSID program) pairs in `probes.lost`, whose requests are lost."""
    class Probes:
        lost: set[tuple[str, str]] = set()
        bad_node: str | None = None

    def run_verify(runtime, plan, *, dataplane=True, steps=None, coverage=None):
        events.append("verify")
        fabric = plan.fabric

        def result(p):
            arrived = (p.src, p.address) not in Probes.lost
            return ProbeResult(p, forward=arrived, reply=arrived, attempts=1)
        nodes = [NodeCheck(n, missing=["fcbb::/48 dev eth9"] if n == Probes.bad_node else [])
                 for n in plan.nodes]
        return VerifyReport(fabric.name, runtime.name, nodes,
                            [result(p) for p in P.host_pairs_paths(fabric)],
                            [result(p) for p in P.loopback_paths(fabric)])

    monkeypatch.setattr(CI, "run_verify", run_verify)
    return Probes


@pytest.fixture
def drills(monkeypatch, events):
    """The drill runner stood in for: each drill passes, unless `drills.outcome[name]`
    says "fail", or is an exception to raise (after the drill applied a fault)."""
    class Drills:
        outcome: dict[str, object] = {}

    def run_all(att, d, *, mode=None, compare=None, seed=1, progress=None):
        events.append(f"drill {d.name}")
        what = Drills.outcome.get(d.name, "pass")
        if isinstance(what, BaseException):
            F.link_down(att, "t0-p0-r0:eth3")  # cut short with a fault in force
            raise what
        ok = what == "pass"
        data = {"name": d.name, "lab": att.lab, "mode": "mrc", "seed": seed,
                "verdict": "pass" if ok else "fail",
                "expectations": [{"what": "repair_ms", "want": "<= 100",
                                  "got": "12" if ok else "250", "ok": ok}]}
        return [runner.RunResult(d, "mrc", seed, att.lab, DrillRun.from_json(data))]

    monkeypatch.setattr(runner, "run_all", run_all)
    return Drills


def run(tmp_path, **options) -> CI.Result:
    return CI.run(CI.Options("mrc-4p", runtime="fake", out=tmp_path / "out", **options))


def nothing_left():
    builds = L.build_root()
    return not fake.WORLD and not known_labs() and \
        (not builds.exists() or not list(builds.iterdir()))


def suites(out: Path) -> dict[str, ET.Element]:
    root = ET.parse(out / "junit.xml").getroot()
    return {s.get("name"): s for s in root.iter("testsuite")}


def failures(suite: ET.Element) -> dict[str, str]:
    return {c.get("name"): c.find("failure").get("message") for c in suite.iter("testcase")
            if c.find("failure") is not None}


@pytest.fixture
def tables(tmp_path):
    """A directory of mrc-4p's tables with one T0-T1 route missing (iproute2 JSON)."""
    return write_tables(tmp_path / "tables", L.compile_spec("mrc-4p").plan, T0_TO_T1)


def undelivered(directory) -> set[tuple[str, str]]:
    from twin.routes import formats

    c = L.compile_spec("mrc-4p")
    return C.check(c.plan, formats.load_dir(directory, c.fabric)).undelivered()


# -- the stages, in order ------------------------------------------------------------


def test_a_clean_run_passes_every_stage_in_order_and_leaves_nothing(tmp_path, probes,
                                                                     drills, events):
    result = run(tmp_path, drills=("t1-blackhole", "t0-t1-link-down"))
    assert events == ["up", "verify", "drill t1-blackhole", "drill t0-t1-link-down", "down"]
    assert [(s.name, s.status) for s in result.stages] == [
        ("up", "passed"), ("verify", "passed"), ("drill t1-blackhole", "passed"),
        ("drill t0-t1-link-down", "passed"), ("down", "passed")]
    assert result.ok and result.exit_code == 0 and nothing_left()
    out = tmp_path / "out"
    for rel in ("junit.xml", "summary.json", "index.html", "verify.xml", "verify.json",
                "drills/t1-blackhole/report.html", "drills/t1-blackhole/report.json",
                "drills/t1-blackhole/junit.xml", "drills/t0-t1-link-down/junit.xml"):
        assert (out / rel).is_file(), rel
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and summary["exit_code"] == 0 and summary["lab"] == result.lab
    assert [s["status"] for s in summary["stages"]] == ["passed"] * 5
    assert summary["stages"][1]["files"] == ["verify.xml", "verify.json"]
    assert all(s["seconds"] >= 0 for s in summary["stages"])
    names = set(suites(out))  # the spec's name, not the lab's: the same every run
    assert {"mrc-4p.ci", "mrc-4p.routes", "mrc-4p.paths", "mrc-4p.loopbacks",
            "drill.t1-blackhole.mrc", "drill.t0-t1-link-down.mrc"} <= names
    assert not any(result.lab in n for n in names)
    page = (out / "index.html").read_text()
    assert "PASS" in page and 'href="drills/t1-blackhole/report.html"' in page


def test_with_routes_the_check_comes_first_and_agrees_with_verify(tmp_path, tables, probes,
                                                                    drills, events):
    probes.lost = undelivered(tables)  # what the kernel would lose with these tables
    assert len(probes.lost) == 6
    events.clear()
    result = run(tmp_path, routes=str(tables))
    assert events == ["routes check", "up", "verify", "down"]
    assert [(s.name, s.status) for s in result.stages] == [
        ("routes check", "failed"), ("up", "passed"), ("verify", "failed"),
        ("agreement", "passed"), ("down", "passed")]
    assert result.exit_code == 1 and nothing_left()
    out = tmp_path / "out"
    agreement = json.loads((out / "agreement.json").read_text())
    assert agreement == {"exhaustive": True, "compared": 128, "check_undelivered": 6,
                         "verify_lost": 6, "not_probed": 0, "reply_lost": 0,
                         "disagreements": []}
    found = suites(out)
    assert found["mrc-4p.agreement"].get("tests") == "128"
    assert failures(found["mrc-4p.agreement"]) == {}
    assert failures(found["mrc-4p.ci"]).keys() == {"routes check", "verify"}
    assert failures(found["mrc-4p.routes.paths"])  # the check's own suites, merged
    assert (out / "routes-check.xml").is_file() and (out / "routes-check.json").is_file()
    assert "t0-p0-r0" in result.stages[0].failure
    # the paths that fail are said as such: it read "122/128 paths arrive, 0 problems"
    assert result.stages[0].said == ("122/128 paths arrive on their switches; 6 fail "
                                      "(blackhole 6); no other problem in the tables; "
                                      "0 warnings")


def test_a_disagreement_fails_on_its_own_path_by_path(tmp_path, tables, probes, drills):
    lost = sorted(undelivered(tables))
    arrived_anyway = lost[0]
    fabric = L.compile_spec("mrc-4p").fabric
    healthy = P.route(fabric, fabric.node("r1h1"), fabric.node("r0h0"), 2, 1)
    lost_too = (healthy.src, healthy.address)
    probes.lost = set(lost[1:]) | {lost_too}
    result = run(tmp_path, routes=str(tables))
    agreement = next(s for s in result.stages if s.name == "agreement")
    assert agreement.status == "failed" and result.exit_code == 1
    data = json.loads((tmp_path / "out" / "agreement.json").read_text())
    assert {(d["src"], d["address"], d["check_delivered"], d["verify_arrived"])
            for d in data["disagreements"]} == {
        (*arrived_anyway, False, True), (*lost_too, True, False)}
    named = failures(suites(tmp_path / "out")["mrc-4p.agreement"])
    assert sorted(named.values()) == [
        "routes check: delivered; verify: the request was lost",
        "routes check: not delivered; verify: the request arrived"]
    assert "r1h1 -> r0h0 plane 2 via t1-1 (cross-rack)" in named
    assert len(agreement.failure.splitlines()) == 2


# -- the lab always goes --------------------------------------------------------------


def test_a_failing_verify_still_runs_the_drills_and_removes_the_lab(tmp_path, probes, drills,
                                                                     events):
    probes.bad_node = "t1-p0-0"
    result = run(tmp_path, drills=("t1-blackhole",))
    assert events == ["up", "verify", "drill t1-blackhole", "down"]
    assert result.exit_code == 1 and nothing_left()
    verify = result.stages[1]
    assert verify.status == "failed"
    assert verify.first_lines() == ["t1-p0-0: missing route fcbb::/48 dev eth9"]
    assert failures(suites(tmp_path / "out")["mrc-4p.routes"]) == {
        "t1-p0-0": "missing route fcbb::/48 dev eth9"}


@pytest.mark.parametrize("error", [LabError("the timeline failed: boom"),
                                   RuntimeError("a bug in a drill")])
def test_a_drill_that_raises_fails_alone_its_fault_reverted_and_the_lab_removed(
        tmp_path, probes, drills, events, error):
    drills.outcome = {"t1-blackhole": error}
    result = run(tmp_path, drills=("t1-blackhole", "t0-t1-link-down"))
    assert events == ["up", "verify", "drill t1-blackhole", "drill t0-t1-link-down", "down"]
    raised, after, down = result.stages[2:]
    assert raised.status == "failed" and str(error) in raised.first_lines()[0]
    if isinstance(error, RuntimeError):  # a bug: its traceback is in summary.json
        assert raised.first_lines()[0] == "RuntimeError: a bug in a drill"
        assert "Traceback" in raised.failure
    assert after.status == "passed"
    assert down.status == "passed" and down.said == "1 faults reverted; 20 nodes removed"
    assert result.exit_code == 1 and nothing_left()


def test_a_failing_drill_fails_the_run_and_says_which_expectation(tmp_path, probes, drills):
    drills.outcome = {"t1-blackhole": "fail"}
    result = run(tmp_path, drills=("t1-blackhole",))
    assert result.exit_code == 1 and nothing_left()
    assert result.stages[2].first_lines() == [
        "t1-blackhole (mrc): repair_ms: want <= 100, got 250"]
    assert failures(suites(tmp_path / "out")["drill.t1-blackhole.mrc"])


def test_ctrl_c_in_a_drill_removes_the_lab_and_writes_out_then_says_interrupted(
        tmp_path, probes, drills, events):
    drills.outcome = {"t1-blackhole": KeyboardInterrupt()}
    result = run(tmp_path, drills=("t1-blackhole", "t0-t1-link-down"))
    assert events == ["up", "verify", "drill t1-blackhole", "down"]  # no drill after it
    assert result.interrupted and result.exit_code == 130 and nothing_left()
    assert [(s.name, s.status) for s in result.stages] == [
        ("up", "passed"), ("verify", "passed"), ("drill t1-blackhole", "failed"),
        ("drill t0-t1-link-down", "skipped"), ("down", "passed")]
    assert result.stages[2].failure == "interrupted (Ctrl-C or SIGTERM)"
    assert result.stages[3].said == "interrupted"
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] and summary["exit_code"] == 130


def test_ctrl_c_while_the_lab_comes_up_leaves_nothing(tmp_path, probes, monkeypatch, events):
    def interrupted(self, links):
        raise KeyboardInterrupt
    monkeypatch.setattr(fake.FakeRuntime, "wire_links", interrupted)
    result = run(tmp_path)
    assert events == ["up"]  # up rolled back; nothing was left to take down
    assert result.interrupted and nothing_left()
    assert [(s.name, s.status) for s in result.stages] == [
        ("up", "failed"), ("verify", "skipped"), ("down", "passed")]
    assert result.stages[-1].said == "nothing to remove (the lab never came up)"


def test_a_lab_that_does_not_come_up_skips_what_needs_it(tmp_path, tables, probes, drills,
                                                         events):
    fake.FakeRuntime.fail_at = {"wire": 5}
    result = run(tmp_path, routes=str(tables), drills=("t1-blackhole",))
    assert events == ["routes check", "up"]
    assert [(s.name, s.status) for s in result.stages] == [
        ("routes check", "failed"), ("up", "failed"), ("verify", "skipped"),
        ("agreement", "skipped"), ("drill t1-blackhole", "skipped"), ("down", "passed")]
    assert "injected failure" in result.stages[1].failure
    assert result.exit_code == 1 and nothing_left()
    ci = suites(tmp_path / "out")["mrc-4p.ci"]
    assert ci.get("skipped") == "3" and ci.get("failures") == "2"


def test_down_finds_what_was_left_behind_removes_it_and_fails(tmp_path, probes, monkeypatch):
    def forgetful(lab):  # forgets the lab, leaves its nodes
        from twin.state import LabState

        LabState.load(lab).remove()
        return lifecycle.Removed(lab)
    monkeypatch.setattr(lifecycle, "down", forgetful)
    result = run(tmp_path)
    down = result.stages[-1]
    assert down.status == "failed" and result.exit_code == 1
    assert len(down.failure.splitlines()) == 21
    assert down.first_lines(1) == [f"left behind, removed now: node {result.lab}/r0h0"]
    assert down.failure.splitlines()[-1] == \
        f"left behind, removed now: build directory {L.build_root() / result.lab}"
    assert nothing_left()


def test_another_lab_is_never_touched(tmp_path, probes):
    L.up("mrc-4p", "fake")  # a user's lab of the same spec
    result = run(tmp_path)
    assert result.ok and result.lab != "mrc-4p"
    assert known_labs() == ["mrc-4p"] and len(fake.WORLD["mrc-4p"]) == 20


# -- names, out/ ----------------------------------------------------------------------


def test_the_lab_name_is_new_every_run_and_within_the_rules():
    names = {CI.lab_name("mrc-4p") for _ in range(20)}
    assert len(names) == 20
    assert all(n.startswith("mrc-4p-ci-") and name_problem(n) is None for n in names)
    long = CI.lab_name("a-very-long-fabric-name-x")
    assert name_problem(long) is None and long.startswith("a-very-long-fa")


def test_a_previous_runs_out_is_replaced_and_its_stale_reports_go(tmp_path, probes, drills):
    run(tmp_path, drills=("t1-blackhole",))
    assert (tmp_path / "out" / "drills" / "t1-blackhole" / "report.html").exists()
    result = run(tmp_path)
    assert result.ok
    assert not (tmp_path / "out" / "drills" / "t1-blackhole").exists()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "index.html", "junit.xml", "summary.json", "verify.json", "verify.xml"]


def test_drills_all_means_the_shipped_drills_written_for_the_fabric(tmp_path, probes, drills,
                                                                   events):
    run(tmp_path, drills=("all",))
    assert events[2:-1] == ["drill startup-dead-link", "drill t0-t1-link-down",
                            "drill t0-t1-link-silent", "drill t1-blackhole"]


# -- bad input: exit 2, nothing created -------------------------------------------------


@pytest.mark.parametrize("options,error,said", [
    ({"spec": "mrc-5p"}, SpecError, "mrc-5p"),
    ({"name": "Bad_Name"}, UsageError, "--name: must be lowercase"),
    ({"drills": ("no-such-drill",)}, UsageError, "no drill 'no-such-drill'"),
    ({"routes_format": "iproute2-json"}, UsageError, "--routes-format goes with --routes"),
    ({"routes": "nowhere"}, SpecError, "is not a directory"),
    ({"dataplane": "ebpf", "unavailable": "no clsact"}, UsageError,
     "data plane ebpf cannot run here"),
    ({"out": "full"}, UsageError, "not empty, and not a previous twin ci's"),
])
def test_bad_input_is_refused_before_anything_exists(tmp_path, probes, options, error, said,
                                                     private_dirs):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("a user's file\n")
    fake.FakeRuntime.unavailable_dataplanes = {"ebpf": options.pop("unavailable", None)}
    out = tmp_path / options.pop("out", "out")
    with pytest.raises(error, match=said):
        CI.run(CI.Options(options.pop("spec", "mrc-4p"), runtime="fake", out=out, **options))
    assert nothing_left() and not fake.FakeRuntime.calls
    assert not (tmp_path / "out").exists() and not (private_dirs / "build").exists()
    assert (tmp_path / "full" / "mine.txt").exists()


def test_unreadable_tables_are_refused_naming_the_file(tmp_path, tables):
    (tables / "t1-p0-0.json").write_text("{not json")
    with pytest.raises(SpecError, match="t1-p0-0.json"):
        run(tmp_path, routes=str(tables))
    assert nothing_left() and not (tmp_path / "out").exists()


def test_tables_linked_out_of_their_directory_are_refused_unless_followed(tmp_path, tables,
                                                                         probes):
    """--routes reads as `twin routes check` does (issue 36), in preflight and in up."""
    (tables / "t1-p0-0.json").rename(tmp_path / "elsewhere.json")
    (tables / "t1-p0-0.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(SpecError, match="t1-p0-0.json: is a symlink leading out"):
        run(tmp_path, routes=str(tables))
    assert nothing_left() and not (tmp_path / "out").exists()
    result = run(tmp_path, routes=str(tables), follow_symlinks=True)
    assert [(s.name, s.status) for s in result.stages][:2] == [
        ("routes check", "failed"), ("up", "passed")] and nothing_left()


# -- the command ------------------------------------------------------------------------


@pytest.fixture
def auto_is_fake(monkeypatch):
    monkeypatch.setattr("twin.runtime.base.AUTO_ORDER", ["fake"])


def test_the_command_prints_the_stages_and_exits_with_the_verdict(tmp_path, probes, drills,
                                                                   auto_is_fake):
    out = tmp_path / "out"
    res = cli("ci", "mrc-4p", "--out", str(out), "--drills", "t1-blackhole")
    assert res.exit_code == 0, res.output
    assert "drill t1-blackhole" in res.output and "PASS" in res.output
    drills.outcome = {"t1-blackhole": "fail"}
    res = cli("ci", "mrc-4p", "--out", str(out), "--drills", "t1-blackhole", "--json")
    assert res.exit_code == 1
    summary = json.loads(res.output[res.output.index("{"):])
    assert summary == json.loads((out / "summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == ["passed", "passed", "failed", "passed"]
    assert nothing_left()


def test_the_command_exits_2_on_bad_input_with_one_line(tmp_path, auto_is_fake):
    res = cli("ci", "mrc-4p", "--out", str(tmp_path / "out"), "--drills", "t1-blackhol")
    assert res.exit_code == 2
    assert "did you mean 't1-blackhole'" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "out").exists() and nothing_left()


def test_the_name_of_a_lab_that_is_up_is_refused(tmp_path, probes):
    L.up("mrc-4p", "fake")
    with pytest.raises(UsageError, match="lab mrc-4p is up already"):
        run(tmp_path, name="mrc-4p")
    assert known_labs() == ["mrc-4p"] and not (tmp_path / "out").exists()


def test_the_command_names_a_failure_with_its_address_as_it_is(tmp_path, probes, auto_is_fake):
    fabric = L.compile_spec("mrc-4p").fabric
    path = P.route(fabric, fabric.node("r0h0"), fabric.node("r1h0"), 0, 0)
    probes.lost = {(path.src, path.address)}
    res = cli("ci", "mrc-4p", "--out", str(tmp_path / "out"))
    assert res.exit_code == 1
    assert f"{path.label}: request lost ({path.address})" in res.output  # no ":100:" emoji
    assert "verify failed" in res.output and "FAIL" in res.output
