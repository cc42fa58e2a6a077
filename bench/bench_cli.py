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
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS = {
    "help": ["--help"],
    "size": ["size", "--radix", "512", "--planes", "8"],
    "typo": ["sizee"],
    "status": ["status"],
}

# what the console script `twin` does (setuptools' entry point for twin.cli:main)
LAUNCH = "import sys; sys.argv[0] = 'twin'; from twin.cli import main; sys.exit(main())"


def run(tree: Path, args: list[str], env: dict[str, str]) -> tuple[float, tuple]:
    """One whole process: its wall-clock seconds and (stdout, stderr, exit code)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True,
                       env={**env, "PYTHONPATH": str(tree)}, cwd=tree)
    return time.perf_counter() - t0, (p.stdout, p.stderr, p.returncode)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default="main", metavar="REV",
                    help="the reference revision (default: main)")
    ap.add_argument("--runs", type=int, default=15, help="runs per command and tree")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    a = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="twin-bench-cli-"))
    old = tmp / "old"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old),
                    a.against], check=True)
    rev = subprocess.run(["git", "-C", str(old), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=True).stdout.strip()
    new_rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True).stdout.strip()
    run_dir = tmp / "run"
    run_dir.mkdir()
    env = {**os.environ, "TWIN_RUN_DIR": str(run_dir), "COLUMNS": "100"}
    env.pop("PYTHONPATH", None)
    trees = {"old": old, "new": ROOT}
    times: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in COMMANDS}
    differs: list[str] = []
    try:
        for name, args in COMMANDS.items():
            run(ROOT, args, env)  # warm the page cache and .pyc files of both
            run(old, args, env)
            first: dict[str, tuple] = {}
            for i in range(a.runs):
                for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    s, output = run(trees[which], args, env)
                    times[name][which].append(s)
                    first.setdefault(which, output)
            if first["old"] != first["new"]:
                differs.append(name)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)],
                       check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    result = {"against": a.against, "old": rev, "new": new_rev, "runs": a.runs,
              "commands": {}, "output_differs": differs}
    for name, by in times.items():
        row = {which: {"min": min(v), "median": statistics.median(v), "max": max(v)}
               for which, v in by.items()}
        row["ratio"] = row["new"]["median"] / row["old"]["median"]
        result["commands"][name] = row
    if a.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"twin start-up, whole process, {a.runs} runs each, seconds: old {rev} "
              f"({a.against}), new {new_rev} (this tree)")
        print(f"{'command':<8} {'old min':>8} {'median':>8} {'max':>8}   "
              f"{'new min':>8} {'median':>8} {'max':>8}   new/old")
        for name, row in result["commands"].items():
            o, n = row["old"], row["new"]
            print(f"{name:<8} {o['min']:8.3f} {o['median']:8.3f} {o['max']:8.3f}   "
                  f"{n['min']:8.3f} {n['median']:8.3f} {n['max']:8.3f}   {row['ratio']:.2f}")
        print("same output in both trees: " + (", ".join(f"not {d}" for d in differs)
                                                 if differs else "yes, every command"))
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
