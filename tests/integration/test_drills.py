"""Drills on a real netns lab: short variants of shipped drills pass, a drill's
faults are always rolled back (also on Ctrl-C), and bad targets apply nothing."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.helpers import twin
from tests.integration.conftest import lab_name
from twin import endpoints
from twin import faults as F
from twin.chaos import drill as D
from twin.chaos import runner
from twin.fabric import paths as P
from twin.fabric.model import Endpoint
from twin.verify import run_verify

pytestmark = pytest.mark.netns
ROOT = Path(__file__).resolve().parents[2]
LAB = lab_name("drills")
KEYS = {"name", "mode", "verdict", "expectations", "faults", "goodput_retained", "exact"}
FAULT_KEYS = {"kind", "target", "at_ns", "detection_us", "repair_us", "packets_lost",
              "localized", "localized_us"}


def short(name: str, ms: int = 700) -> D.Drill:
    """A shipped drill whose traffic lasts `ms` (its timeline and expectations as shipped;
    sized from the steady state, so its faults land mid-transfer on any machine)."""
    return D.load_drill(D.find(name)).timed(ms * 1_000_000)


def clean(att) -> None:
    assert F.active(att) == []
    for node in ("t1-p0-0", "t1-p1-0", "t1-p2-1"):
        tables = att.runtime.exec(node, ["nft", "list", "tables"]).stdout
        assert "twin_" not in tables, tables


def idle_endpoints(att) -> None:
    for h in att.fabric.hosts:
        with endpoints.client(att.runtime, h.name) as c:
            stats = c.stats()
        assert stats["send_qps"] == [] and stats["recv_qps"] == [], h.name


@pytest.mark.parametrize("name", ["t1-blackhole", "t0-t1-link-down", "startup-dead-link"])
def test_a_short_shipped_drill_passes_and_rolls_back(lab, name):
    (run,) = runner.run_all(lab, short(name, 500 if name == "startup-dead-link" else 700), seed=3)
    data = run.run.to_json()
    assert KEYS <= set(data)
    failed = [e for e in data["expectations"] if not e["ok"]]
    assert data["verdict"] == "pass", failed
    assert data["exact"] is True
    assert data["faults"] and all(FAULT_KEYS <= set(f) for f in data["faults"])
    assert data["expectations"][0]["what"] == "steady state: verify"
    assert data["expectations"][-1] == {"what": "rollback: verify", "want": "pass",
                                        "got": "pass", "ok": True}
    assert sum(data["goodput"]["planes"]["0"]) > 0  # 1 ms bins, per plane
    assert any(x["bytes"] for x in data["link_load"])
    (fault, *_) = data["faults"]
    if name == "startup-dead-link":  # cut before the QPs' setup: counted from the first write
        assert fault["origin"] == "first write" and fault["origin_ns"] > fault["at_ns"]
    else:
        assert fault["origin"] == "fault" and fault["origin_ns"] == fault["at_ns"]
    clean(lab)
    idle_endpoints(lab)


def test_compare_runs_the_baseline_on_the_same_faults(lab):
    runs = runner.run_all(lab, short("t0-t1-link-down"), compare="single-path", seed=5)
    assert [r.mode for r in runs] == ["mrc", "single-path"]
    a, b = (r.run.to_json() for r in runs)
    assert a["targets"] == b["targets"]
    assert b["baseline_of"] == "mrc" and a["baseline_of"] is None
    assert a["exact"] and [f["single_path"] for f in a["flows"]] == [None]
    # single-path's one path is its QP's ECMP hash: it survives the cut unless the path
    # crosses the cut link, and then RoCE without repathing gives up
    (flow,) = b["flows"]
    plane, t1, _ = P.parse_path(lab.fabric, flow["single_path"])
    node, ifname = a["targets"][0].split(":")
    cut = lab.fabric.link_at(Endpoint(node, ifname)).id
    f = lab.fabric
    (fault,) = b["faults"]
    # whether the fault met it is decided from the path it took, as its endpoint says
    assert [p[:2] for p in flow["paths_used"]] == [[plane, t1]], flow
    assert fault["crossed_from"] == "paths taken"
    # a baseline without baseline_expect is reported beside mrc, never failed for it
    assert b["verdict"] == "reported" and runs[1].ok
    if cut in P.route(f, f.node("r0h0"), f.node("r1h0"), plane, t1).links:
        assert not b["exact"] and "retry limit" in flow["failed"], flow
        assert fault["crossed"] is True
        assert b["outcome"].startswith("RoCE QP failed: PSN") and " ms" in b["outcome"]
    else:
        assert b["exact"] and flow["failed"] is None, flow
        assert fault["crossed"] is False and fault["met"] is False
        assert b["outcome"] == f"byte-exact; its traffic never crossed {a['targets'][0]}"
    clean(lab)


def drill_file(tmp_path: Path, target: str, fault: str = "blackhole") -> Path:
    path = tmp_path / "d.yml"
    path.write_text(f"""name: bad-target
method:
  traffic: {{pattern: bulk, src: r0h0, dst: r1h0, size: 64M}}
  timeline:
    - {{at: 100ms, fault: {fault}, target: {target}}}
expect: {{exact: true}}
""")
    return path


@pytest.mark.parametrize("target,fault,says", [
    ("t1-p9-0", "blackhole", "no node 't1-p9-0'"),  # a node of mrc-8p, not of this lab
    ("r0h0", "switch-down", "is a host"),
    ("t0-p0-r0:eth9", "link-down", "has no link on eth9"),
    ("r0h0:7", "nic-down", "HOST:PLANE"),
])
def test_an_unknown_target_is_refused_before_anything_is_applied(lab, tmp_path, target,
                                                                 fault, says):
    before = len(F.events(lab))
    r = twin("drill", "run", str(drill_file(tmp_path, target, fault)), "--lab", LAB)
    assert r.returncode == 2, r.stderr
    assert "method.timeline[0].target" in r.stderr and says in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert len(F.events(lab)) == before  # nothing applied, nothing logged
    clean(lab)


@pytest.mark.parametrize("dst,at,size,says", [
    ("r1h0", "600ms", "1M", "ms under traffic"),  # the transfer is over by then
    ("r0h1", "100ms", "256M", "no path the traffic took crosses it"),  # same rack: no T1
], ids=["after-the-transfer", "off-the-traffic"])
def test_a_fault_that_meets_no_traffic_is_not_a_pass(lab, tmp_path, dst, at, size, says):
    """The t0-t1-link-down that once passed with repair 0 and nothing lost: a fault
    after the transfer ended, or on no path of it, tested nothing: the drill fails."""
    path = tmp_path / "vacuous.yml"
    path.write_text(f"""name: vacuous
method:
  traffic: {{pattern: bulk, src: r0h0, dst: {dst}, size: {size}}}
  timeline:
    - {{at: {at}, fault: link-down, target: t0-p0-r0:eth3}}
expect: {{exact: true, packets_lost: "<= 100"}}
""")
    r = twin("drill", "run", str(path), "--lab", LAB, "--json", timeout=300)
    assert r.returncode == 1, r.stderr
    (d,) = json.loads(r.stdout)["drills"]
    rows = {e["what"]: e for e in d["expectations"]}
    assert d["verdict"] == "fail" and rows["exact"]["ok"] and rows["packets_lost"]["ok"], rows
    if "faults met traffic" in rows:  # else the timeline never ran: also a fail, as it says
        assert not rows["faults met traffic"]["ok"] and says in rows["faults met traffic"]["got"]
    else:
        assert not rows["timeline ran"]["ok"], rows
    clean(lab)


def test_a_drill_refuses_a_lab_with_faults_in_force(lab):
    F.link_down(lab, "t0-p0-r0:eth3")
    try:
        with pytest.raises(Exception, match="faults in force"):
            runner.run(lab, short("t1-blackhole"))
    finally:
        F.clear(lab)


def _default_sigint():
    """Ctrl-C as at a terminal, even when pytest itself was started in the background
    (a shell's `&` without job control starts it with SIGINT ignored, and Python then
    leaves SIGINT ignored in every child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_mid_drill_stops_traffic_reverts_every_fault_and_verifies(lab, tmp_path, sig):
    path = tmp_path / "long.yml"
    path.write_text("""name: long
method:
  traffic: {pattern: bulk, src: r0h0, dst: r1h0, size: 1G}
  timeline:
    - {at: 50ms, fault: blackhole, target: t1-p0-0}
    - {at: 100ms, fault: link-loss, percent: 5, target: t0-p1-r0:eth3}
expect: {exact: true}
""")
    proc = subprocess.Popen([sys.executable, "-m", "twin", "drill", "run", str(path),
                             "--lab", LAB], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ), preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 60
        while len(F.active(lab)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert len(F.active(lab)) == 2, "the drill never applied its faults"
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "rollback: reverted" in stderr and "rollback: verify pass" in stderr, stderr
    assert "Traceback" not in stderr
    clean(lab)
    idle_endpoints(lab)
    assert run_verify(lab.runtime, lab.plan).ok


def test_cli_json_is_the_documented_shape(lab, tmp_path):
    r = twin("drill", "run", "startup-dead-link", "--lab", LAB, "--json", "--seed", "2")
    data = json.loads(r.stdout)
    (d,) = data["drills"]
    assert KEYS <= set(d) and d["name"] == "startup-dead-link"
    assert {"what", "want", "got", "ok"} == set(d["expectations"][0])
    assert r.returncode == (0 if d["verdict"] == "pass" else 1)
    clean(lab)


def test_cli_report_writes_html_json_and_junit_from_a_real_run(lab, tmp_path):
    from xml.etree import ElementTree as ET

    out = tmp_path / "rep"
    junit = tmp_path / "j.xml"
    r = twin("drill", "run", "t1-blackhole", "--lab", LAB, "--report", str(out),
             "--junit", str(junit), "--seed", "4")
    assert r.returncode in (0, 1), r.stderr
    assert {p.name for p in out.iterdir()} == {"report.html", "report.json", "junit.xml"}
    html = (out / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    assert html.count("<svg") >= 3  # goodput, EV states, link load
    data = json.loads((out / "report.json").read_text())
    assert data["drills"][0]["name"] == "t1-blackhole"
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert [s.get("name") for s in suites] == ["drill.t1-blackhole.mrc"]
    assert int(suites[0].get("tests")) == len(data["drills"][0]["expectations"])
    clean(lab)


def test_a_drill_posts_its_faults_to_grafana_as_regions_while_it_runs(lab, tmp_path):
    """--grafana-url: each fault an annotation region (apply to revert), tagged with the
    lab, the fault and the drill, posted through grafana-client to the Grafana double."""
    from tests.doubles.fake_grafana import FakeGrafana

    path = tmp_path / "flap.yml"
    path.write_text("""name: grafana-flap
method:
  traffic: {pattern: bulk, src: r0h0, dst: r1h0, size: 256M}
  timeline:
    - {at: 100ms, fault: link-down, target: t0-p0-r0:eth3, for: 200ms}
expect: {exact: true}
""")
    with FakeGrafana() as g:
        r = twin("drill", "run", str(path), "--lab", LAB, "--grafana-url", g.url,
                 "--grafana-token", g.token)
        assert r.returncode == 0, r.stderr + r.stdout
        assert "annotations posted" in r.stderr, r.stderr
        assert "drill dashboard: http://127.0.0.1" in r.stderr, r.stderr
        regions = [a for a in g.annotations.values() if "link-down" in a["tags"]]
        boards = [b["dashboard"] for b in g.dashboards.values()]
    assert len(regions) == 1, g.annotations
    a = regions[0]
    assert {LAB, "link-down", "grafana-flap"} <= set(a["tags"])
    assert a["timeEnd"] > a["time"], a  # a region: apply to revert
    assert 100 <= a["timeEnd"] - a["time"] < 5_000
    board = next(b for b in boards if "grafana-flap" in b["title"])  # over the drill's time
    span = [datetime.fromisoformat(board["time"][k]).timestamp() * 1000 for k in ("from", "to")]
    assert span[0] <= a["time"] and a["timeEnd"] <= span[1], (board["time"], a)
    bad = twin("drill", "run", str(path), "--lab", LAB, "--grafana-url", g.url)
    assert bad.returncode == 1 and "grafana" in bad.stderr and "Traceback" not in bad.stderr
    assert not F.active(lab)
