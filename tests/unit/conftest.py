"""The unit tier never looks at, let alone sweeps, the machine's real labs:
`twin.lab.sweep` sees only the in-memory runtime's nodes here.

Labs of the unit tier run on the in-memory runtime (twin.runtime.fake): `clean_world`
empties its world before and after a test (a module that uses it throughout says
`pytestmark = pytest.mark.usefixtures("clean_world")`), and `att` is mrc-4p up on it.
"""

import pytest

from twin import lab as L
from twin.runtime import RUNTIMES, fake


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
