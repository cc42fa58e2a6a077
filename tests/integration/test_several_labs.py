"""Several labs on one machine, on netns and on docker: side by side without
clashes, and never removed by another owner's cleanup.

Everything goes through the CLI, as people run it, each "person" with a run
directory of their own (TWIN_RUN_DIR): alice keeps a lab up, carol's run
directory disappears under her lab (a deleted checkout), bob cleans up.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import helpers
from tests.integration.conftest import lab_name, own_spec

RUNTIMES = [pytest.param("netns", marks=pytest.mark.netns),
            pytest.param("docker", marks=pytest.mark.docker)]
TINY = "planes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"  # 8 nodes


class Person:
    def __init__(self, base: Path, name: str):
        self.run_dir, self.build_dir = base / name / "run", base / name / "build"
        self.env = dict(os.environ, TWIN_RUN_DIR=str(self.run_dir),
                        TWIN_BUILD_DIR=str(self.build_dir))

    def twin(self, *argv: str, ok: bool = True) -> subprocess.CompletedProcess:
        return helpers.twin(*argv, ok=True if ok else None, env=self.env, timeout=300)

    def json(self, *argv: str):
        return json.loads(self.twin(*argv, "--json").stdout)


def tiny_spec(where: Path, lab: str) -> str:
    path = where / f"{lab}.yml"
    path.write_text(f"name: {lab}\n{TINY}")
    return str(path)


def fingerprint(person: Person, lab: str) -> dict:
    status = person.json("status", lab)[0]
    return {"id": status["id"], "nodes": {n["node"]: n["state"] for n in status["nodes"]},
            "faults": person.json("fault", "list", "--lab", lab)}


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_another_owners_cleanup_never_removes_a_live_lab(tmp_path, runtime):
    alice, bob, carol = (Person(tmp_path, n) for n in ("alice", "bob", "carol"))
    a_lab, c_lab = lab_name("alice"), lab_name("carol")
    alice.twin("up", own_spec(tmp_path, a_lab, "mrc-4p"), "--runtime", runtime)
    try:
        carol.twin("up", tiny_spec(tmp_path, c_lab), "--runtime", runtime)
        alice.twin("fault", "link-loss", "t0-p0-r0:eth3", "1", "--lab", a_lab)
        before = fingerprint(alice, a_lab)
        shutil.rmtree(carol.run_dir)  # carol's checkout is gone: her lab is nobody's now

        swept = bob.twin("down", "--all")
        assert "nothing to remove" in swept.stdout
        assert f"lab {a_lab} of {alice.run_dir}" in swept.stdout  # named, left alone
        assert "stray resources nobody owns" in swept.stdout

        listed = bob.json("down", "--stray", "--dry-run")
        assert {s["owner"]["lab"] for s in listed} == {c_lab}
        assert {s["kind"] for s in listed} >= {"namespace" if runtime == "netns" else
                                               "container", "process"}
        refused = bob.twin("down", "--stray", ok=False)  # no terminal to ask on, no --yes
        assert refused.returncode == 2 and "pass --yes" in refused.stderr
        removed = bob.twin("down", "--stray", "--yes")
        assert f"removed {len(listed)} stray resources" in removed.stdout
        assert bob.json("down", "--stray", "--dry-run") == []

        assert fingerprint(alice, a_lab) == before
        assert alice.json("verify", a_lab)["ok"]
        moved = alice.json("traffic", "bulk", "--lab", a_lab, "--src", "r0h0", "--dst", "r1h0",
                           "--size", "16M")
        assert moved["ok"]
    finally:
        alice.twin("down", "--all", ok=False)
        shutil.rmtree(carol.run_dir, ignore_errors=True)
        bob.twin("down", "--stray", "--yes", ok=False)  # carol's, should the test fail early
    assert alice.json("down", "--stray", "--dry-run") == []


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_labs_of_one_spec_and_of_two_specs_run_side_by_side(tmp_path, runtime):
    """Two labs of mrc-4p (the second by --name) and a tiny one: each verifies, moves
    bytes, and keeps its faults to itself."""
    me = Person(tmp_path, "me")
    one, two, small = lab_name("one"), lab_name("two"), lab_name("small")
    spec = own_spec(tmp_path, one, "mrc-4p")
    try:
        me.twin("up", spec, "--runtime", runtime)
        me.twin("up", spec, "--runtime", runtime, "--name", two)
        me.twin("up", tiny_spec(tmp_path, small), "--runtime", runtime)
        status = me.json("status")
        assert sorted(s["lab"] for s in status) == sorted([one, two, small])
        assert len({s["id"] for s in status}) == 3
        assert all(n["state"] == "running" for s in status for n in s["nodes"])
        assert me.twin("status").stdout.count("nodes running") == 3

        me.twin("fault", "link-down", "t0-p0-r0:eth3", "--lab", one)
        assert me.json("fault", "list", "--lab", two) == []
        failed = me.twin("verify", one, "--json", ok=False)
        assert failed.returncode == 1 and not json.loads(failed.stdout)["ok"]
        for lab in (two, small):
            assert me.json("verify", lab)["ok"], lab
        me.twin("fault", "clear", "--lab", one)
        for lab in (one, two, small):
            assert me.json("verify", lab)["ok"], lab
            moved = me.json("traffic", "bulk", "--lab", lab, "--src", "r0h0", "--dst", "r1h0",
                            "--size", "4M")
            assert moved["ok"], lab
    finally:
        me.twin("down", "--all", ok=False)
    assert me.json("status") == []
