"""The test tiers hold: the `bpf` tier (tests/bpf/) skips saying what is missing, marks
every test of its own directory and no other, and the unit tier never loads a program
or a map into the kernel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.bpf import conftest as bpf_tier
from twin.node.ebpf import bpf

TESTS = Path(__file__).resolve().parents[1]


def test_the_bpf_tier_names_a_process_that_is_not_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert bpf_tier.missing() == \
        "needs root and the bpf() syscall: this process is not root (euid 1000)"


def test_the_bpf_tier_names_a_kernel_that_refuses_bpf(monkeypatch):
    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(bpf, "map_create", refuse)
    assert bpf_tier.missing() == \
        "needs root and the bpf() syscall: bpf() refused: [Errno 1] Operation not permitted"


def test_the_bpf_tier_runs_where_the_kernel_makes_a_map(monkeypatch):
    made = []

    def map_create(*args):
        made.append(args)
        return os.open(os.devnull, os.O_RDONLY)  # closed again by missing()

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(bpf, "map_create", map_create)
    assert bpf_tier.missing() is None and len(made) == 1


class Item:
    def __init__(self, path: Path):
        self.path, self.marks = path, []

    def add_marker(self, mark):
        self.marks.append(mark.mark if hasattr(mark, "mark") else mark)


def test_the_tier_marks_and_skips_its_own_tests_only(monkeypatch):
    monkeypatch.setattr(bpf_tier, "missing", lambda: "needs root and the bpf() syscall: x")
    mine, other = Item(TESTS / "bpf" / "test_x.py"), Item(TESTS / "unit" / "test_x.py")
    bpf_tier.pytest_collection_modifyitems(SimpleNamespace(), [mine, other])
    assert [(m.name, m.kwargs) for m in mine.marks] == [
        ("bpf", {}), ("skip", {"reason": "needs root and the bpf() syscall: x"})]
    assert other.marks == []


def test_every_test_under_tests_bpf_is_selected_by_its_marker():
    def collected(marker: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               "-p", "no:cacheprovider", "-m", marker, str(TESTS / "bpf")],
                              capture_output=True, text=True, timeout=120,
                              cwd=TESTS.parent)
        return done.stdout.strip().splitlines()[-1]

    assert re.fullmatch(r"\d+ tests collected in .*", collected("bpf"))
    assert re.fullmatch(r"no tests collected \(\d+ deselected\) in .*", collected("not bpf"))


# what loads into the kernel: a program, a map, a test run
KERNEL_CALLS = re.compile(r"\bebpf\.(load|load_queue|attach|attach_queue|counters_map|ports_map)\(|"
                          r"\bbpf\.(map_create|prog_load|test_run)\(")


def test_no_unit_test_loads_into_the_kernel():
    calls = {p.name: KERNEL_CALLS.findall(p.read_text())
             for p in sorted((TESTS / "unit").glob("test_*.py")) if p.name != Path(__file__).name}
    assert {name: found for name, found in calls.items() if found} == {}, \
        "these call bpf(): they belong in tests/bpf/"
