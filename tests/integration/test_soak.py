"""The chaos soak, short: bench/soak.py --minutes 0.3 --json in a child process.

The soak owns its lab, run and build directories (a temp dir of its own), so
nothing here touches the session's labs. On a timeout the child gets SIGTERM
first, which it answers by clearing faults and taking its lab down."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from twin.runtime.netns import leftover_namespaces

pytestmark = pytest.mark.netns
ROOT = Path(__file__).resolve().parents[2]
LIMIT_S = 240  # 18 s of soak, ~3 s up, a round's timeout is 120 s


def soak(*args: str) -> tuple[int, str, str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "soak.py"), *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # its teardown runs; then give up on it
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f"soak did not finish within {LIMIT_S}s:\n{err[-2000:]}")
    return proc.returncode, out, err


def test_short_soak_survives_faults_byte_exact_and_leaves_nothing():
    rc, out, err = soak("--minutes", "0.3", "--fault-every", "2", "--json")
    summary = json.loads(out)
    assert rc == 0, f"{summary['failures']}\n{err[-2000:]}"
    assert summary["ok"]
    assert summary["rounds"] >= 2 and summary["bytes_moved"] > 0
    assert summary["bytes_lost"] == 0
    assert summary["faults_total"] > 0
    assert summary["faults_reverted"] == summary["faults"]  # every one reverted
    assert summary["nft_checks"] > summary["faults_total"] - 1  # after every revert, and at end
    assert summary["leftovers_total"] == 0
    assert all(h["rss_mib"] and h["fds"] for h in summary["hosts"].values())
    assert not [n for n in leftover_namespaces() if n.startswith(f"twin-{summary['lab']}-")]
