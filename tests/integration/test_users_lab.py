"""A user's lab survives `make test`.

The first test of the integration session finds (or brings up) `mrc-4p` in
the *default* run directory, as `make lab-up` leaves it, with a fault in
force; every other integration test then creates, breaks and destroys its
own labs, including `twin down --all` and `--stray` from their run
directories; the last test checks the user's lab still verifies, still
moves 16 MiB byte-exact, and has the same faults, nodes and owner. Its hosts'
endpoints are also asked `hello` after every module (conftest's Bystander), so a
test that breaks them is named by its module. The lab is a session fixture, so either
test also runs alone (`first` and `last` only put them where they mean the most).

A user's own mrc-4p is only looked at, never changed. One that another test
session brought up (its marker file names a live pid) is left to it, and
this session uses a lab of its own in the default run directory instead.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from tests import helpers
from tests.integration.conftest import Bystander, lab_name
from twin import lab as L

pytestmark = pytest.mark.netns

USERS_LAB = "mrc-4p"
DEFAULT_RUN_DIR = "/run/twin"
MARKER = "test-bystander.pid"  # in the lab's state dir: a test session's own lab
FAULT = ["link-loss", "t0-p0-r0:eth3", "1"]


def twin(*argv: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: default run and build directories."""
    env = {k: v for k, v in os.environ.items() if k not in ("TWIN_RUN_DIR", "TWIN_BUILD_DIR")}
    return helpers.twin(*argv, ok=True if check else None, env=env, timeout=timeout)


def _test_session_of(lab: str) -> int | None:
    """The pid of the test session that brought this lab up, if one did."""
    try:
        return int(open(f"{DEFAULT_RUN_DIR}/{lab}/{MARKER}").read())
    except (OSError, ValueError):
        return None


@contextmanager
def default_dirs():
    saved = {k: os.environ.pop(k) for k in ("TWIN_RUN_DIR", "TWIN_BUILD_DIR") if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def snapshot(lab: str) -> dict:
    """What must not change: its id and nodes, its hosts' endpoints (up), its faults,
    its switches' nft tables."""
    status = json.loads(twin("status", lab, "--json").stdout)[0]
    with default_dirs():
        att = L.attach(lab)
        tables = {n: att.runtime.exec(n, ["nft", "list", "tables"]).stdout
                  for n in att.plan.nodes if n.startswith("t0-")}
    return {"id": status["id"], "nodes": {n["node"]: n["state"] for n in status["nodes"]},
            "endpoints": {n["node"]: n["endpoint"]["state"] for n in status["nodes"]
                          if n.get("endpoint")},
            "faults": json.loads(twin("fault", "list", "--lab", lab, "--json").stdout),
            "nft": tables}


@dataclass
class UsersLab:
    """The lab this session watches, as it was found (or brought up) before any test."""

    lab: str
    ours: bool  # brought up (or taken over from a killed session) by this session
    before: dict


@pytest.fixture(scope="session")
def users_lab():
    """The user's mrc-4p in the default run directory, as the first test of the session
    finds it (a lab of its own if there is none, or another session has it), with its
    hosts' endpoints watched after every module (conftest's Bystander); taken down at
    the end of the session if this session brought it up. Either test of this module
    can run alone: each asks for it."""
    existing = json.loads(twin("status", "--json").stdout)
    names = {s["lab"] for s in existing}
    session = _test_session_of(USERS_LAB) if USERS_LAB in names else None
    if USERS_LAB in names and session is None:
        lab, ours = USERS_LAB, False  # the user's own: look, never touch
    elif session is not None and not os.path.exists(f"/proc/{session}"):
        lab, ours = USERS_LAB, True  # a killed session's: ours to end
        with open(f"{DEFAULT_RUN_DIR}/{USERS_LAB}/{MARKER}", "w") as f:
            f.write(str(os.getpid()))
    else:
        lab = USERS_LAB if USERS_LAB not in names else lab_name("bystander")
        ours = True
        twin("up", "mrc-4p", "--name", lab)
        with open(f"{DEFAULT_RUN_DIR}/{lab}/{MARKER}", "w") as f:
            f.write(str(os.getpid()))
        twin("fault", *FAULT, "--lab", lab)
    try:
        found = UsersLab(lab, ours, snapshot(lab))
        Bystander.sockets = sorted(glob.glob(f"{DEFAULT_RUN_DIR}/{lab}/nodes/*/endpoint.sock"))
        yield found
    finally:
        Bystander.sockets = []
        if ours:
            twin("down", lab, check=False)


@pytest.mark.first
def test_a_users_lab_is_up_in_the_default_run_directory(users_lab):
    before = users_lab.before
    assert before["nodes"]
    assert set(before["nodes"].values()) == {"running"}
    if users_lab.ours:  # a user's own is compared with itself only, as it was found
        assert set(before["endpoints"].values()) == {"up"}, before
    assert Bystander.sockets


@pytest.mark.last
def test_the_users_lab_survived_every_other_test(users_lab):
    lab = users_lab.lab
    assert Bystander.broken_after is None, \
        f"its endpoints stopped answering after {Bystander.broken_after}"
    after = snapshot(lab)
    assert after == users_lab.before
    verify = json.loads(twin("verify", lab, "--json", check=False).stdout)
    assert verify["ok"], verify.get("summary")
    moved = json.loads(twin("traffic", "bulk", "--lab", lab, "--src", "r0h0",
                            "--dst", "r1h0", "--size", "16M", "--json").stdout)
    assert moved["ok"] and moved["flows"][0]["bytes"] == 16 << 20
    assert snapshot(lab)["faults"] == users_lab.before["faults"]
