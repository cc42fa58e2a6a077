"""Whole `twin` processes of this tree beside a reference revision's, in one run,
round-robin (bench_cli.py, bench_routes_check.py).

The reference is a temporary `git worktree` of a revision, removed at the end. Both
trees run with this venv's interpreter, each first on PYTHONPATH (ahead of the editable
install's finder), as the `twin` entry point runs. Each case runs N times per tree,
alternating which goes first; a bench gives the seconds (wall or CPU) and what the
process printed, and gets the min, median and max of each tree, new/old of the medians,
and the cases whose first outputs differ.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# what the console script `twin` does (setuptools' entry point for twin.cli:main)
LAUNCH = "import sys; sys.argv[0] = 'twin'; from twin.cli import main; sys.exit(main())"


def twin_argv(*args: str) -> list[str]:
    """`twin ARGS` as the entry point runs it, with this interpreter."""
    return [sys.executable, "-c", LAUNCH, *args]


def _short(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


@dataclass
class Trees:
    old: Path  # the reference's worktree
    new: Path  # this tree
    old_rev: str
    new_rev: str
    tmp: Path  # a scratch directory, removed with the worktree

    def __getitem__(self, which: str) -> Path:
        return {"old": self.old, "new": self.new}[which]


@contextmanager
def reference(against: str, prefix: str) -> Iterator[Trees]:
    """This tree and a temporary worktree of `against`, removed (with the scratch
    directory) at the end, whatever happened."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    old = tmp / "old"
    try:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old),
                        against], check=True)
        yield Trees(old, ROOT, _short(old), _short(ROOT), tmp)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       check=False, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def round_robin(trees: Trees, cases: dict[str, object],
                run: Callable[[Path, object], tuple[float, object]], runs: int
                ) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    """Each case `runs` times per tree, alternating which goes first, after one warm-up
    run of each (page cache, .pyc files): {case: {"old": [s], "new": [s]}}, and the cases
    whose first outputs differ between the trees."""
    times: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in cases}
    differs: list[str] = []
    for name, arg in cases.items():
        run(trees.new, arg)
        run(trees.old, arg)
        first: dict[str, object] = {}
        for i in range(runs):
            for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                s, output = run(trees[which], arg)
                times[name][which].append(s)
                first.setdefault(which, output)
        if first["old"] != first["new"]:
            differs.append(name)
    return times, differs


def figures(times: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Min, median and max per case and tree, and new/old of the medians."""
    out = {}
    for name, by in times.items():
        row = {which: {"min": min(v), "median": statistics.median(v), "max": max(v)}
               for which, v in by.items()}
        row["ratio"] = row["new"]["median"] / row["old"]["median"]
        out[name] = row
    return out


def report(trees: Trees, against: str, runs: int, times: dict[str, dict[str, list[float]]],
           differs: list[str], *, as_json: bool, title: str, unit: str, column: str,
           key: str, item: str) -> int:
    """Print the figures, as a table (first line `title`, in `unit`; the cases under
    `column`) or as JSON (the cases under `key`), and whether both trees printed the same
    for every `item`; 1 if not."""
    rows = figures(times)
    if as_json:
        print(json.dumps({"against": against, "old": trees.old_rev, "new": trees.new_rev,
                          "runs": runs, key: rows, "output_differs": differs}, indent=2))
        return 1 if differs else 0
    print(f"{title}, whole process, {runs} runs each, {unit}: old {trees.old_rev} "
          f"({against}), new {trees.new_rev} (this tree)")
    print(f"{column:<8} {'old min':>8} {'median':>8} {'max':>8}   "
          f"{'new min':>8} {'median':>8} {'max':>8}   new/old")
    for name, row in rows.items():
        o, n = row["old"], row["new"]
        print(f"{name:<8} {o['min']:8.3f} {o['median']:8.3f} {o['max']:8.3f}   "
              f"{n['min']:8.3f} {n['median']:8.3f} {n['max']:8.3f}   {row['ratio']:.2f}")
    print(f"same {item} in both trees: " + (", ".join(f"not {d}" for d in differs)
                                              if differs else f"yes, every {key[:-1]}"))
    return 1 if differs else 0
