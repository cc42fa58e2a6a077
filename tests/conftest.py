"""Test tiers, one marker each: unmarked tests need nothing; `netns` needs root;
`bpf` (tests/bpf/, whose conftest owns its skip) needs root and the bpf() syscall.

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


def _docker_missing() -> str | None:
    reason = _netns_missing()
    if reason:
        return reason
    from twin import dockerd

    client = dockerd.client(timeout=5)
    if client is None:
        return "no Docker engine answers (make engine, or twin engine start)"
    from twin import images

    missing = images.missing_images(client)
    if missing:
        return f"images not built: {', '.join(missing)} (make images)"
    return None


def _containerlab_missing() -> str | None:
    if shutil.which("containerlab") is None:
        return "containerlab is not installed (its binary cannot be downloaded here)"
    return _docker_missing()


TIERS = {"netns": _netns_missing, "docker": _docker_missing,
         "containerlab": _containerlab_missing}


def pytest_collection_modifyitems(config, items):
    reasons = {}
    for item in items:
        for tier, check in TIERS.items():
            if tier in item.keywords:
                if tier not in reasons:
                    reasons[tier] = check()
                if reasons[tier]:
                    item.add_marker(pytest.mark.skip(reason=reasons[tier]))


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """Every test gets its own run and build directories."""
    monkeypatch.setenv("TWIN_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("TWIN_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv("TWIN_HOME", str(ROOT))
    return tmp_path
