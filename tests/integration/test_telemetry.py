"""Telemetry against a real Prometheus (Debian's, installed by `twin telemetry up` when
missing): a netns mrc-4p with traffic, scraped every second.

  * per-plane tx bytes grow on every plane while a sprayed transfer runs;
  * after `twin fault link-down`, that link's tx rate falls to 0 and
    twin_fault_active is 1 for it;
  * every PromQL expression of every generated dashboard panel returns a series;
  * bad input: a port in use (named, with its owner), a non-loopback address, a lab
    that is not up;
  * nothing is left after `telemetry down`, nor after `twin down` (and --keep-data
    keeps the time series).

The stack listens on free ports picked per session, never the defaults a user's own
telemetry may hold. Every wait is a bounded poll.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import helpers
from tests.helpers import twin
from tests.integration.conftest import lab_name, own_spec
from twin.telemetry import dashboards
from twin.telemetry.prometheus import Api

pytestmark = pytest.mark.netns
LAB = lab_name("telem-4p-")
SCRAPE_WAIT_S = 30.0
TRANSFERS = 60  # of 256 MiB: minutes of traffic, far more than a test needs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def poll(what, within_s: float = SCRAPE_WAIT_S):
    return helpers.poll(what, within_s, every_s=0.5)


def value(series: list[dict]) -> list[float]:
    return [float(s["value"][1]) for s in series]


@pytest.fixture(scope="module")
def stack(lab):
    ports = (free_port(), free_port())
    r = twin("telemetry", "up", LAB, "--port", str(ports[0]),
             "--prometheus-port", str(ports[1]), timeout=600)
    assert r.returncode == 0, r.stderr + r.stdout
    assert f"http://127.0.0.1:{ports[1]}" in r.stdout
    yield Api(f"http://127.0.0.1:{ports[1]}"), ports
    twin("telemetry", "down", LAB)


@pytest.fixture
def traffic(lab):
    """Sprayed transfers r0h0 -> r1h0, one after another, for the length of a test (at
    most TRANSFERS of them)."""
    loop = (f"for i in $(seq {TRANSFERS}); do {sys.executable} -m twin traffic bulk "
            f"--lab {LAB} --src r0h0 --dst r1h0 --size 256M || sleep 0.5; done")
    proc = subprocess.Popen(["bash", "-c", loop], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    yield proc
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_a_port_in_use_is_named_with_its_owner_and_nothing_starts(lab):
    """First in the module: no stack runs yet."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = twin("telemetry", "up", LAB, "--port", str(port),
                 "--prometheus-port", str(free_port()))
    assert r.returncode == 2, r.stderr
    assert f"port {port} on 127.0.0.1 is in use by pid {os.getpid()}" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    st = twin("telemetry", "status", LAB, "--json")
    assert '"running": false' in st.stdout  # the refusal started nothing
    plain = twin("telemetry", "status", LAB)
    assert plain.returncode == 1 and "no telemetry" in plain.stdout  # make lab-up reads it


def test_up_again_starts_nothing_and_says_so(stack):
    """A second `up` of a running stack is a no-op that says so (it exited 2); a port
    asked for that the stack does not listen on is refused, naming where it runs."""
    api, ports = stack
    r = twin("telemetry", "up", LAB)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "already up: nothing started" in r.stdout
    assert f"http://127.0.0.1:{ports[1]}" in r.stdout  # where it runs, not the defaults
    r = twin("telemetry", "up", LAB, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["already"] is True
    r = twin("telemetry", "up", LAB, "--prometheus-port", str(free_port()))
    assert r.returncode == 2 and f"its prometheus on http://127.0.0.1:{ports[1]}" in r.stderr
    assert "Traceback" not in r.stderr
    assert api.ready()  # still up


def test_prometheus_scrapes_the_exporter_every_second(stack):
    api, ports = stack
    targets = api.targets()
    assert [t["health"] for t in targets] == ["up"]
    assert targets[0]["scrapeUrl"] == f"http://127.0.0.1:{ports[0]}/metrics"
    assert targets[0]["labels"]["job"] == "mrc-twin"
    r = twin("telemetry", "status", LAB, "--json")
    assert r.returncode == 0 and '"running": true' in r.stdout


def test_per_plane_tx_bytes_grow_on_every_plane(stack, traffic):
    api, _ = stack
    expr = (f'sum by (plane) (rate(twin_endpoint_tx_bytes_total{{lab="{LAB}",'
            f'host="r0h0"}}[3s])) > 0')
    got = poll(lambda: (s := api.query(expr)) and len(s) == 4 and s)
    assert got and sorted(s["metric"]["plane"] for s in got) == ["0", "1", "2", "3"], got
    placed = api.query(f'sum(rate(twin_endpoint_rx_bytes_total{{lab="{LAB}",host="r1h0"}}[3s]))')
    assert value(placed)[0] > 0  # what r0h0 sprays, r1h0 places


def test_link_down_rate_falls_to_zero_fault_active_and_every_panel_has_data(
        lab, stack, traffic):
    api, _ = stack
    link = 'node="t0-p0-r0",ifname="eth3"'  # T0 uplink to t1-p0-0
    carried = f'rate(twin_link_tx_bytes_total{{lab="{LAB}",{link}}}[2s])'
    assert poll(lambda: value(api.query(carried)) and value(api.query(carried))[0] > 0), \
        "the link carried nothing before the fault: the test proves nothing"
    r = twin("fault", "link-down", "t0-p0-r0:eth3", "--lab", LAB)
    assert r.returncode == 0, r.stderr
    try:
        active = poll(lambda: api.query(
            f'twin_fault_active{{lab="{LAB}",kind="link-down"}} == 1'))
        assert active and active[0]["metric"]["target"] == "t0-p0-r0:eth3--t1-p0-0:eth1"
        assert poll(lambda: value(api.query(carried)) == [0.0]), api.query(carried)
        down = api.query(f'twin_link_up{{lab="{LAB}",{link}}}')
        assert value(down) == [0.0]
        # Every panel of the generated dashboards shows something in this situation;
        # the data plane's only where its SIDs keep counters (ebpf, not seg6local).
        for board in (dashboards.overview(lab.fabric, LAB, "prom"),
                      dashboards.drill(lab.fabric, LAB, "prom", 0, 1, "drill")):
            for expr in dashboards.panel_exprs(board):
                if "twin_dataplane_" in expr and not lab.dataplane.keeps_counters:
                    continue
                assert poll(lambda e=expr: api.query(e), within_s=10), \
                    f"panel query returns no series: {expr}"
    finally:
        r = twin("fault", "clear", "--lab", LAB)
        assert r.returncode == 0, r.stderr
    assert poll(lambda: not api.query(f'twin_fault_active{{lab="{LAB}"}}'))


def test_bad_input_is_one_line_and_exit_2(lab, session_dirs):
    other = lab_name("telem-none-")
    r = twin("telemetry", "up", other)
    assert r.returncode == 2 and f"lab {other} is not up" in r.stderr
    r = twin("telemetry", "up", LAB, "--address", "0.0.0.0")
    assert r.returncode == 2 and "loopback" in r.stderr
    assert "Traceback" not in r.stderr


def test_port_owner_names_the_process():
    from twin.telemetry.stack import port_owner

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        held = port_owner(s.getsockname()[1])
    assert held and f"pid {os.getpid()}" in held


def test_twin_down_stops_telemetry_and_keep_data_keeps_the_series(session_dirs, tmp_path):
    """A lab of its own: `twin down` of a lab with telemetry leaves no process, no port,
    no data in the run directory; --keep-data moved the TSDB out first."""
    name = lab_name("telem-down-")
    ports = (free_port(), free_port())
    keep = tmp_path / "tsdb"
    spec = own_spec(session_dirs, name, "mrc-4p")
    assert twin("up", spec, "--runtime", "netns").returncode == 0
    try:
        r = twin("telemetry", "up", name, "--port", str(ports[0]), "--prometheus-port",
                 str(ports[1]), "--keep-data", str(keep), "--grafana")
        assert r.returncode == 0, r.stderr
        # No registry here, or no engine: one line, and the stack runs without Grafana.
        # (Where the engine has the image, the container runs and `down` removes it.)
        line = next(x for x in r.stdout.splitlines() if x.strip().startswith("grafana:"))
        assert "carrying on" in line or "http://127.0.0.1:3000" in line, line
        pids = [int(p) for p in _pids(name)]
        assert len(pids) == 2
        time.sleep(2)  # two scrapes into the head block
    finally:
        r = twin("down", name)
    assert r.returncode == 0, r.stderr
    assert not any(os.path.exists(f"/proc/{p}") and _cmd(p) for p in pids)
    from twin.telemetry.stack import port_owner

    assert port_owner(ports[0]) is None and port_owner(ports[1]) is None
    assert not (Path(os.environ["TWIN_RUN_DIR"]) / name).exists()
    assert (keep / "wal").is_dir(), list(keep.iterdir()) if keep.exists() else "no keep dir"


def _pids(lab: str) -> list[str]:
    import json

    st = json.loads(twin("telemetry", "status", lab, "--json").stdout)
    return [str(st[k]["pid"]) for k in ("exporter", "prometheus") if st.get(k)]


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_top_once_agrees_with_a_transfers_own_goodput(lab):
    """`twin top --once --json`, run while one bulk transfer is on the wire, sums the
    planes to that transfer's own goodput within 35%, first view included (its first
    sample spends seconds finding the nodes' maps: the rates once read 3-4x high)."""
    def placed() -> int:
        r = twin("stats", "r1h0", "--lab", LAB, "--json", ok=True)
        return sum(json.loads(r.stdout)["r1h0"]["totals"]["rx_bytes_per_plane"].values())

    base = placed()
    proc = subprocess.Popen([sys.executable, "-m", "twin", "traffic", "bulk", "--lab", LAB,
                             "--src", "r0h0", "--dst", "r1h0", "--size", "4G", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        assert poll(lambda: placed() > base + 64 * 2**20, within_s=120), "no bytes placed"
        top = twin("top", "--lab", LAB, "--once", "--json", "--period", "1", ok=True)
        assert proc.poll() is None, "the transfer ended before top had measured"
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    flow = json.loads(out)["flows"][0]
    assert flow["exact"], flow
    view = json.loads(top.stdout)
    seen = sum(view["plane_bps"].values()) / 1e9
    assert abs(seen - flow["goodput_gbps"]) <= 0.35 * flow["goodput_gbps"], \
        (seen, flow["goodput_gbps"], view["plane_bps"])
    # and the links, from their kernel counters over the same window as the planes: the
    # busiest are the sender's 4 NIC ports and the 4 T0 ports into the receiver, a
    # quarter of the goodput each (plus headers, a few %); once r0h0:eth1 read 2.6
    # Gbit/s of a 2.4 Gbit/s flow. (Against the flow's own average they need not agree:
    # its ramp and a busy machine's pauses are in that average, not in the window.)
    quarter = seen / 4
    loads = {lk["end"]: lk["bps"] / 1e9 for lk in view["links"][:8]}
    assert {e for e in loads if e.startswith("r0h0:")} == {f"r0h0:eth{p}" for p in range(1, 5)}
    assert all(abs(v - quarter) <= 0.35 * quarter for v in loads.values()), (quarter, loads)
    assert "measuring over 1 s" in top.stderr  # --once says what it is doing


def test_live_top_into_a_pipe_prints_plain_lines(lab):
    """Not a terminal (a drill's log): one plain line a period, and Ctrl-C ends it
    quietly, not a screen's escape codes nor only "interrupted"."""
    proc = subprocess.Popen([sys.executable, "-m", "twin", "top", "--lab", LAB,
                             "--period", "0.5"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines = []
    try:
        deadline = time.monotonic() + 60
        while len(lines) < 2 and time.monotonic() < deadline:
            got = proc.stdout.readline()
            if not got:
                break
            lines.append(got)
    finally:
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=30)
    assert len(lines) == 2, (lines, err)
    for got in lines:
        assert f" {LAB}  goodput " in got and "faults: " in got and "\x1b" not in got
    assert proc.returncode == 0, err
