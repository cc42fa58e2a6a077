"""`twin routes check` on mrc-8p-256 (issue 40): whole-process runs, this tree beside a
reference revision, side by side in one run, round-robin, in CPU time.

    own      twin's own tables (`twin routes export`): all 501,760 paths arrive
    broken   the same with one route left out (t0-p0-r0's to T1 number 1 of plane 0):
             the paths it carried blackhole, each judged and blamed

The reference is the check as it was before it walked twin.fabric.paths' paths (the
parent of 671e9ff, which made fabric.paths fast enough for it to), a temporary
`git worktree` of --against REV, removed at the end. Both trees run with this venv's
interpreter, the tree first on PYTHONPATH (as bench/bench_cli.py runs them). Each case
runs --runs times per tree (default 5), alternating old and new; the figures are the
min, median and max of the CPU seconds (user + system) of the whole process, read from
wait4, and new/old of the medians. Both trees must print the same report (stdout, with
the line's "walked in N.NNs" set aside, and the exit code); the run exits 1 if not.

Usage: .venv/bin/python bench/bench_routes_check.py [--against REV] [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import sidebyside as S

ROOT = Path(__file__).resolve().parents[1]
SPEC = "mrc-8p-256"
AGAINST = "671e9ff~"  # the routes check deriving its own paths, before fabric.paths served

ELAPSED = re.compile(rb"walked in [0-9.]+s")
LEFT_OUT = "route replace fcbb:bb00:201::/48 "  # t0-p0-r0's route to t1-p0-1


def run(tree: Path, tables: Path, env: dict[str, str]) -> tuple[float, tuple]:
    """One whole process: its CPU seconds and (stdout without the elapsed time, exit code)."""
    with tempfile.TemporaryFile() as stdout:
        p = subprocess.Popen(S.twin_argv("routes", "check", SPEC, str(tables)),
                             stdout=stdout, stderr=subprocess.DEVNULL,
                             env={**env, "PYTHONPATH": str(tree)}, cwd=tree)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        text = ELAPSED.sub(b"walked in -s", stdout.read())
    return usage.ru_utime + usage.ru_stime, (text, p.returncode)


def cases(tmp: Path, env: dict[str, str]) -> dict[str, Path]:
    """The tables each case checks, written by this tree's `twin routes export`."""
    own = tmp / "own"
    subprocess.run(S.twin_argv("routes", "export", SPEC, str(own), "--format",
                               "iproute2-batch"), check=True, capture_output=True,
                   env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    broken = tmp / "broken"
    shutil.copytree(own, broken)
    t0 = broken / "t0-p0-r0.batch"
    lines = t0.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(LEFT_OUT)]
    assert len(kept) == len(lines) - 1, f"{t0} has no {LEFT_OUT!r} line"
    t0.write_text("".join(kept))
    return {"own": own, "broken": broken}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", default=AGAINST, metavar="REV",
                    help=f"the reference revision (default: {AGAINST})")
    ap.add_argument("--runs", type=int, default=5, help="runs per case and tree")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    a = ap.parse_args()

    env = {**os.environ, "COLUMNS": "100"}
    env.pop("PYTHONPATH", None)
    with S.reference(a.against, "twin-bench-routes-check-") as trees:
        tables = cases(trees.tmp, env)
        times, differs = S.round_robin(trees, tables,
                                       lambda tree, where: run(tree, where, env), a.runs)

    return S.report(trees, a.against, a.runs, times, differs, as_json=a.json,
                    title=f"twin routes check {SPEC}", unit="CPU seconds", column="tables",
                    key="cases", item="report")

if __name__ == "__main__":
    sys.exit(main())
