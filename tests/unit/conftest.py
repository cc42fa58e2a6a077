"""The unit tier never looks at, let alone sweeps, the machine's real labs:
`twin.lab.sweep` sees only the in-memory runtime's nodes here."""

import pytest

from twin.runtime import RUNTIMES


@pytest.fixture(autouse=True)
def only_the_fake_is_swept(monkeypatch):
    monkeypatch.setattr("twin.lab.sweep.RUNTIMES", {"fake": RUNTIMES["fake"]})
    monkeypatch.setattr("twin.lab.sweep.owned_processes", lambda: {})
