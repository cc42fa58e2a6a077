"""An operator's tables proved with packets: `twin up --routes` on each shipped example, on
each data plane this kernel runs, and `twin verify` against `twin routes check`, path for
path (docs/routes.md).

The check says which paths' packets never arrive; verify, probing every path
exhaustively in a lab built from the same tables, must find exactly those requests
lost, and read every node back equal to the tables (the lab holds the mistake as
written). The drills then run on the correct tables as on twin's own."""

import json
from pathlib import Path

import pytest

from tests import helpers
from tests.integration.conftest import lab_name, needs_dataplane, own_spec, running_lab
from twin import faults as F
from twin.chaos import blind as B
from twin.chaos import drill as D
from twin.chaos import runner
from twin.fabric.spec import load_spec
from twin.faults import FaultKind
from twin.lab.compile import compile_loaded
from twin.routes import formats
from twin.routes.check import check
from twin.verify import run_verify
from twin.verify.agreement import compare

pytestmark = pytest.mark.netns
EXAMPLES = Path(__file__).resolve().parents[2] / "lab" / "routes"
BROKEN = ["missing-t1-route", "loop-t0-t1", "wrong-usid", "missing-decap"]
LAB = lab_name("test-routes")


@pytest.fixture(scope="module", params=["seg6local", "ebpf"])
def dataplane(request):
    needs_dataplane(request.param)
    return request.param


@pytest.mark.parametrize("example", ["good", "sonic-good", "frr-good", "nvue-good", *BROKEN])
def test_verify_agrees_with_the_check(session_dirs, dataplane, example):
    spec = own_spec(session_dirs, LAB, "mrc-4p")
    compiled = compile_loaded(spec, load_spec(spec))
    tables = formats.load_dir(EXAMPLES / example, compiled.fabric)
    checked = check(compiled.plan, tables)
    assert checked.ok == (example not in BROKEN), [c for c, _, _ in checked.causes()]
    with running_lab(session_dirs, spec, "netns", dataplane, str(EXAMPLES / example)) as att:
        assert att.state.routes == str(EXAMPLES / example)
        report = run_verify(att.runtime, att.plan, coverage=None)
    assert [n.problems() for n in report.nodes if not n.ok] == []  # installed as written
    agreed = compare(checked, report)
    assert agreed.ok and agreed.exhaustive, agreed.lines()
    lost = {(r.path.src, r.path.address) for r in [*report.paths, *report.loops]
            if not r.forward}
    assert lost == checked.undelivered()
    assert report.ok == checked.ok


# -- drills on an operator's tables -------------------------------------------------

DRILLS_LAB = lab_name("rt-drills")


@pytest.fixture(scope="module")
def operators_lab(session_dirs):
    """mrc-4p from the shipped correct tables (iproute2 batch, with a blackhole ::/0 safety
    net on every switch that twin's plan does not have)."""
    spec = own_spec(session_dirs, DRILLS_LAB, "mrc-4p")
    with running_lab(session_dirs, spec, "netns", routes=str(EXAMPLES / "good")) as att:
        yield att


def test_the_lab_holds_the_operators_tables_not_twins_plan(operators_lab):
    t0 = operators_lab.plan["t0-p0-r0"]
    assert any(r.type == "blackhole" and r.dst == "::/0" for r in t0.routes)
    shown = operators_lab.runtime.exec("t0-p0-r0", ["ip", "-6", "route", "show"]).stdout
    assert "blackhole default" in shown or "blackhole ::/0" in shown, shown


@pytest.mark.parametrize("name", ["t1-blackhole", "t0-t1-link-down"])
def test_a_shipped_drill_passes_on_the_operators_tables(operators_lab, name):
    drill = D.load_drill(D.find(name)).timed(700_000_000)  # sized: the fault meets traffic
    (run,) = runner.run_all(operators_lab, drill, seed=3)
    failed = [e.failure() for e in run.run.expectations if e.failed]
    assert run.run.verdict == "pass", failed
    assert run.run.expectations[-1].what == "rollback: verify"
    assert F.active(operators_lab) == []


def test_a_blind_drill_is_found_and_reverted_on_the_operators_tables(operators_lab):
    lab = operators_lab.lab
    seed = next(s for s in range(500) if (d := B.draw(operators_lab.fabric, "hard", s)).kind
                is FaultKind.BLACKHOLE and ":" not in d.target)
    switch = B.draw(operators_lab.fabric, "hard", seed).target
    helpers.twin("drill", "blind", "--lab", lab, "--level", "hard", "--seed", str(seed),
                 timeout=120)
    assert helpers.twin("verify", lab, ok=False, timeout=120).returncode == 1
    score = json.loads(helpers.twin("drill", "answer", "--lab", lab, switch, "--json",
                                    timeout=120).stdout)
    assert (score["verdict"], score["target"]) == ("right", switch)
    assert F.active(operators_lab) == []
    helpers.twin("verify", lab, timeout=120)  # the safety nets and all, as loaded
