"""An operator's tables proved with packets: `twin up --routes` on each shipped example, on
each data plane this kernel runs, and `twin verify` against `twin routes check`, path for
path (docs/routes.md).

The check says which paths' packets never arrive; verify, probing every path
exhaustively in a lab built from the same tables, must find exactly those requests
lost, and read every node back equal to the tables (the lab holds the mistake as
written). The drills then run on the correct tables as on twin's own."""

from pathlib import Path

import pytest

from tests.integration.conftest import lab_name, own_spec, running_lab
from twin.dataplane.probe import probe
from twin.lab.compile import compile_loaded
from twin.fabric.spec import load_spec
from twin.routes import formats
from twin.routes.check import check
from twin.verify import run_verify
from twin.verify.agreement import disagreements

pytestmark = pytest.mark.netns
EXAMPLES = Path(__file__).resolve().parents[2] / "lab" / "routes"
BROKEN = ["missing-t1-route", "loop-t0-t1", "wrong-usid", "missing-decap"]
LAB = lab_name("test-routes")


@pytest.fixture(scope="module", params=["seg6local", "ebpf"])
def dataplane(request):
    why = probe()[request.param]
    if why:
        pytest.skip(f"this kernel has no {request.param}: {why}")
    return request.param


@pytest.mark.parametrize("example", ["good", "sonic-good", *BROKEN])
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
    assert disagreements(checked, report) == []
    lost = {(r.path.src, r.path.address) for r in [*report.paths, *report.loops]
            if not r.forward}
    assert lost == checked.undelivered()
    assert report.ok == checked.ok
