"""`twin ci` on real namespaces: a CI job that passes leaves no lab behind, an operator's
broken tables are lost by the kernel exactly where `twin routes check` says, and
SIGTERM (a CI server cancelling the job) still removes the lab and writes out/."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import poll, twin, write_tables
from tests.integration.conftest import namespaces_of
from twin import ci as CI
from twin import lab as L
from twin.owner import namespace_owner, owned_processes, recorded_namespaces

pytestmark = pytest.mark.netns


def nothing_of(lab: str) -> None:
    """No lab of that name in `twin status`, no namespace, owner record or process."""
    assert lab not in [s["lab"] for s in json.loads(twin("status", "--json", ok=True).stdout)]
    assert namespaces_of(lab) == []
    assert [ns for ns in recorded_namespaces() if (o := namespace_owner(ns)) and o.lab == lab] \
        == []
    assert [pid for pid, o in owned_processes().items() if o.lab == lab] == []


def test_twin_ci_on_mrc_4p_passes_and_leaves_no_lab(tmp_path):
    out = tmp_path / "out"
    twin("ci", "mrc-4p", "--runtime", "netns", "--out", str(out), "--drills", "t1-blackhole",
         ok=True)
    summary = json.loads((out / "summary.json").read_text())
    assert [(s["name"], s["status"]) for s in summary["stages"]] == [
        ("up", "passed"), ("verify", "passed"), ("drill t1-blackhole", "passed"),
        ("down", "passed")]
    assert summary["lab"].startswith("mrc-4p-ci-") and summary["exit_code"] == 0
    assert summary["stages"][1]["said"] == "routes 20/20, paths 80/80, loopbacks 48/48"
    for rel in ("junit.xml", "index.html", "verify.xml", "verify.json",
                "drills/t1-blackhole/report.html"):
        assert (out / rel).is_file(), rel
    nothing_of(summary["lab"])


def test_the_kernel_loses_exactly_what_routes_check_says(tmp_path):
    """t0-p0-r0 without its route to t1-p0-0: the check says six paths are not delivered
    (rack 0's over that T1, and its loopbacks off it); verify loses those six requests and
    no other, so the agreement passes while the check and verify fail."""
    c = L.compile_spec("mrc-4p")
    tables = write_tables(tmp_path / "tables", c.plan, {"t0-p0-r0": ["fcbb:bb00:200::/48"]})
    result = CI.run(CI.Options("mrc-4p", routes=str(tables), runtime="netns",
                               out=tmp_path / "out"))
    assert [(s.name, s.status) for s in result.stages] == [
        ("routes check", "failed"), ("up", "passed"), ("verify", "failed"),
        ("agreement", "passed"), ("down", "passed")]
    agreement = json.loads((tmp_path / "out" / "agreement.json").read_text())
    assert agreement == {"exhaustive": True, "compared": 128, "check_undelivered": 6,
                         "verify_lost": 6, "not_probed": 0, "disagreements": [],
                         # the probes whose request arrived over a good path and whose
                         # reply came back over a broken one: failed, not in the 6
                         "reply_lost": 4}
    assert result.exit_code == 1
    nothing_of(result.lab)


def test_sigterm_removes_the_lab_and_still_writes_out(tmp_path, private_dirs):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "twin", "ci", "mrc-4p", "--runtime", "netns",
                             "--out", str(out), "--drills", "t0-t1-link-down"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = Path(private_dirs / "run")

    def lab_up():
        for state in run_dir.glob("mrc-4p-ci-*/lab.json"):
            try:
                if json.loads(state.read_text())["phase"] == "up":
                    return state.parent.name
            except (OSError, ValueError):
                pass
        return None

    lab = poll(lab_up, 60)
    assert lab, "twin ci's lab never came up"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["lab"] == lab
    assert summary["stages"][-1]["name"] == "down"
    assert summary["stages"][-1]["status"] == "passed"
    nothing_of(lab)


@pytest.mark.parametrize("example", ["missing-t1-route", "wrong-usid"])
def test_a_shipped_broken_config_fails_naming_its_broken_paths_and_leaves_nothing(tmp_path,
                                                                                  example):
    """The acceptance command: `twin ci mrc-4p --routes lab/routes/<broken>`."""
    from xml.etree import ElementTree as ET

    out = tmp_path / "out"
    routes = Path(__file__).resolve().parents[2] / "lab" / "routes" / example
    res = twin("ci", "mrc-4p", "--runtime", "netns", "--routes", str(routes), "--out",
               str(out), ok=False)
    assert res.returncode == 1
    summary = json.loads((out / "summary.json").read_text())
    assert {s["name"]: s["status"] for s in summary["stages"]} == {
        "routes check": "failed", "up": "passed", "verify": "failed", "agreement": "passed",
        "down": "passed"}
    failed = {c.get("name"): c.find("failure").text
              for c in ET.parse(out / "junit.xml").getroot().iter("testcase")
              if c.find("failure") is not None}
    broken = json.loads((out / "routes-check.json").read_text())["failing"]
    assert broken and all(f"{p['src']} -> {p['dst']}" in failed for p in broken)
    assert all(p["label"] in failed for p in broken)  # verify's probes, path by path
    nothing_of(summary["lab"])
