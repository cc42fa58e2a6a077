"""The CLI's start-up (issue 40): whole-process runs of light `twin` commands, this tree
beside a reference revision, side by side in one run, round-robin.

    help     twin --help
    size     twin size --radix 512 --planes 8     (the README's calculator; no lab)
    typo     twin sizee                           (click's "No such command", exit 2)
    status   twin status                          (an empty run directory: no lab)

Both trees run with this venv's interpreter, as the `twin` entry point does
(pyproject.toml: twin = "twin.cli:main"): `python -c "...from twin.cli import main..."`,
the tree first on PYTHONPATH (ahead of the editable install's finder). The reference
is a temporary `git worktree` of --against REV (default: main), removed at the end.
Each command runs --runs times per tree (default 15), alternating old and new; the
figures are the min, median and max of the wall-clock seconds of the whole process,
and new/old of the medians. The first run of each command also checks that both trees
print the same (stdout, stderr, exit code); the run exits 1 if one differs.

Usage: .venv/bin/python bench/bench_cli.py [--against REV] [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import sidebyside as S

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "help": ["--help"],
    "size": ["size", "--radix", "512", "--planes", "8"],
    "typo": ["sizee"],
    "status": ["status"],
}

def run(tree: Path, args: list[str], env: dict[str, str]) -> tuple[float, tuple]:
    """One whole process: its wall-clock seconds and (stdout, stderr, exit code)."""
    t0 = time.perf_counter()
    p = subprocess.run(S.twin_argv(*args), capture_output=True,
                       env={**env, "PYTHONPATH": str(tree)}, cwd=tree)
    return time.perf_counter() - t0, (p.stdout, p.stderr, p.returncode)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="main", metavar="REV",
                    help="the reference revision (default: main)")
    ap.add_argument("--runs", type=int, default=15, help="runs per command and tree")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    a = ap.parse_args()

    with S.reference(a.against, "twin-bench-cli-") as trees:
        run_dir = trees.tmp / "run"
        run_dir.mkdir()
        env = {**os.environ, "TWIN_RUN_DIR": str(run_dir), "COLUMNS": "100"}
        env.pop("PYTHONPATH", None)
        times, differs = S.round_robin(trees, COMMANDS,
                                       lambda tree, args: run(tree, args, env), a.runs)

    return S.report(trees, a.against, a.runs, times, differs, as_json=a.json,
                    title="twin start-up", unit="seconds", column="command", key="commands",
                    item="output")

if __name__ == "__main__":
    sys.exit(main())
