"""Test tiers, one marker each: unmarked tests need nothing; `netns` needs root.

Golden files live in tests/golden/. Regenerate after an intended change with
    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit
and review the diff like code.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _netns_missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    for tool in ("ip", "nsenter"):
        if shutil.which(tool) is None:
            return f"needs `{tool}`"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _netns_missing()
    if reason:
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if "netns" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """Every test gets its own run and build directories."""
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("TWIN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("TWIN_HOME", str(ROOT))
    return tmp_path
