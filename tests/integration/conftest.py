"""Integration tiers share one run directory per session, so a module can keep
one lab up across its tests. Every lab a test brings up, it takes down."""

import os

import pytest

from twin.runtime.netns import leftover_namespaces


@pytest.fixture(scope="session")
def session_dirs(tmp_path_factory):
    base = tmp_path_factory.mktemp("twin")
    return base


@pytest.fixture(autouse=True)
def private_dirs(session_dirs, monkeypatch):
    monkeypatch.setenv("TWIN_RUN_DIR", str(session_dirs / "run"))
    monkeypatch.setenv("TWIN_BUILD_DIR", str(session_dirs / "build"))
    return session_dirs


def namespaces_of(lab: str) -> list[str]:
    return [n for n in leftover_namespaces() if n.startswith(f"twin-{lab}-")]


def set_env(session_dirs):
    os.environ["TWIN_RUN_DIR"] = str(session_dirs / "run")
    os.environ["TWIN_BUILD_DIR"] = str(session_dirs / "build")
