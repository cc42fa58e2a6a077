"""A user's lab survives `make test`.

The first test of the integration session finds (or brings up) `mrc-4p` in
the *default* run directory, as `make lab-up` leaves it, with a fault in
force; every other integration test then creates, breaks and destroys its
own labs, including `twin down --all` and `--stray` from their run
directories; the last test checks the user's lab still verifies, still
moves 16 MiB byte-exact, and has the same faults, nodes and owner. Its hosts'
endpoints are also asked `hello` after every module (conftest's Bystander), so a
test that breaks them is named by its module.

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


class UsersLab:
    lab: str | None = None
    ours = False
    before: dict = {}


@pytest.mark.first
def test_a_users_lab_is_up_in_the_default_run_directory():
    existing = json.loads(twin("status", "--json").stdout)
    names = {s["lab"] for s in existing}
    session = _test_session_of(USERS_LAB) if USERS_LAB in names else None
    if USERS_LAB in names and session is None:
        UsersLab.lab = USERS_LAB  # the user's own: look, never touch
    elif session is not None and not os.path.exists(f"/proc/{session}"):
        UsersLab.lab, UsersLab.ours = USERS_LAB, True  # a killed session's: ours to end
        with open(f"{DEFAULT_RUN_DIR}/{USERS_LAB}/{MARKER}", "w") as f:
            f.write(str(os.getpid()))
    else:
        UsersLab.lab = USERS_LAB if USERS_LAB not in names else lab_name("bystander")
        UsersLab.ours = True
        twin("up", "mrc-4p", "--name", UsersLab.lab)
        with open(f"{DEFAULT_RUN_DIR}/{UsersLab.lab}/{MARKER}", "w") as f:
            f.write(str(os.getpid()))
        twin("fault", *FAULT, "--lab", UsersLab.lab)
    UsersLab.before = snapshot(UsersLab.lab)
    assert UsersLab.before["nodes"]
    assert set(UsersLab.before["nodes"].values()) == {"running"}
    if UsersLab.ours:  # a user's own is compared with itself only, as it was found
        assert set(UsersLab.before["endpoints"].values()) == {"up"}, UsersLab.before
    Bystander.sockets = sorted(glob.glob(f"{DEFAULT_RUN_DIR}/{UsersLab.lab}/nodes/*/endpoint.sock"))
    assert Bystander.sockets


@pytest.mark.last
def test_the_users_lab_survived_every_other_test():
    lab = UsersLab.lab
    if lab is None:
        pytest.skip("the first test of this module did not run")
    try:
        assert Bystander.broken_after is None, \
            f"its endpoints stopped answering after {Bystander.broken_after}"
        after = snapshot(lab)
        assert after == UsersLab.before
        verify = json.loads(twin("verify", lab, "--json", check=False).stdout)
        assert verify["ok"], verify.get("summary")
        moved = json.loads(twin("traffic", "bulk", "--lab", lab, "--src", "r0h0",
                                "--dst", "r1h0", "--size", "16M", "--json").stdout)
        assert moved["ok"] and moved["flows"][0]["bytes"] == 16 << 20
        assert snapshot(lab)["faults"] == UsersLab.before["faults"]
    finally:
        Bystander.sockets = []
        if UsersLab.ours:
            twin("down", lab, check=False)
