"""The unit tier never looks at, let alone sweeps, the machine's real labs:
`twin.lab.sweep` sees only the in-memory runtime's nodes here.

Labs of the unit tier run on the in-memory runtime (twin.runtime.fake): `clean_world`
empties its world before and after a test (a module that uses it throughout says
`pytestmark = pytest.mark.usefixtures("clean_world")`), and `att` is mrc-4p up on it.

The fixtures several modules share are defined here once: mrc-4p compiled (`compiled`,
its `fabric`; `f4`, the model alone), per module, and `no_traffic`, the blind drill's
traffic process stood in for.
"""

from pathlib import Path

import pytest

from twin import lab as L
from twin.chaos import blind as B
from twin.fabric.model import build_fabric
from twin.fabric.spec import load_spec
from twin.lab.compile import compile_spec
from twin.runtime import RUNTIMES, fake

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def only_the_fake_is_swept(monkeypatch):
    monkeypatch.setattr("twin.lab.sweep.RUNTIMES", {"fake": RUNTIMES["fake"]})
    monkeypatch.setattr("twin.lab.sweep.owned_processes", lambda: {})


@pytest.fixture
def clean_world():
    fake.FakeRuntime.reset()
    yield
    fake.FakeRuntime.reset()


@pytest.fixture
def att(clean_world):
    """mrc-4p up on the in-memory runtime, attached."""
    L.up("mrc-4p", "fake")
    return L.attach("mrc-4p")


@pytest.fixture(scope="module")
def compiled():
    """mrc-4p compiled (spec, fabric, plan), once per module; the tests only read it."""
    return compile_spec("mrc-4p")


@pytest.fixture(scope="module")
def fabric(compiled):
    """mrc-4p's fabric model."""
    return compiled.fabric


@pytest.fixture(scope="module")
def f4():
    """mrc-4p's fabric model, built from the shipped spec file without the lab compiler."""
    return build_fabric(load_spec(ROOT / "lab/fabrics/mrc-4p.yml"))


@pytest.fixture
def no_traffic(monkeypatch):
    """The fake runtime has no endpoints to send through: the blind drill's traffic
    process is a stub (pid 4242); the list of the pids it was asked to stop."""
    stopped = []
    monkeypatch.setattr(B, "start_traffic", lambda att, drill: (4242, "stub"))
    monkeypatch.setattr(B, "stop_traffic", lambda drill: stopped.append(drill.traffic_pid))
    return stopped
