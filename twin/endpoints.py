"""Start the MRC endpoint daemon on every host of a lab, and talk to them.

Each host runs `python -m twin.mrc.endpoint` inside its own network namespace
(bare, or inside its container, with the bind-mounted code). Its control
socket lives in the node's run directory:

    netns       <run dir>/<lab>/nodes/<host>/endpoint.sock
    docker      the same host directory, bind-mounted at /run/mrc-twin in the container
    containerlab  /run/mrc-twin/endpoint.sock inside the container (its topology
                cannot name a host path), reached as /proc/<pid>/root/run/mrc-twin/...
    remote      /run/mrc-twin/endpoint.sock inside the node, reached through a relay
                over exec (twin.remote.relay): the runtime's `endpoint_relay`

The daemon's output goes to endpoint.log next to the socket. Endpoints die
with their node, so `twin down` needs nothing extra. The client is the control
protocol's (twin.mrc.control.EndpointClient, re-exported here): `client(rt, host)`
connects it to a host's endpoint, wherever the runtime put it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from twin import owner
from twin.errors import LabError
from twin.mrc.control import EndpointClient, EndpointGone

if TYPE_CHECKING:
    from twin.mrc.fuzz import FuzzReport

__all__ = ["EndpointClient", "EndpointGone", "client", "control_path", "fuzz", "liveness",
           "start", "wait_started"]

READY_S = 20.0
REMOTE_SOCK = "/run/mrc-twin/endpoint.sock"  # where images/mrc-twin-boot starts it


def _paths(rt, host: str) -> tuple[list[str], str, Path]:
    view = rt.node_view(host)
    sock_inside = f"{view.run_dir}/endpoint.sock"
    # the endpoint's data path and transport: auto, compiled, python (twin.mrc.loop, .core)
    chosen = [f"{k}={os.environ[k]}" for k in ("MRC_TWIN_DATAPATH", "MRC_TWIN_TRANSPORT")
              if os.environ.get(k)]
    argv = rt.shell_argv(host, ["env", f"PYTHONPATH={view.pythonpath}",
                                f"{owner.ENV}={rt.owner.tag}", *chosen,
                                view.python, "-m",
                                "twin.mrc.endpoint", "--config",
                                f"{view.config_dir}/endpoint.json", "--control", sock_inside])
    return argv, view.from_host(sock_inside), Path(view.from_host(view.run_dir))


def control_path(rt, host: str) -> str:
    return _paths(rt, host)[1]


def start(rt, hosts: list[str], steps=None) -> None:
    """Start one endpoint per host and wait until every one answers `hello`."""
    if steps:
        steps.start(f"starting {len(hosts)} endpoints", len(hosts))
    pending = {}
    for host in hosts:
        argv, sock, run_dir = _paths(rt, host)
        run_dir.mkdir(parents=True, exist_ok=True)
        if os.path.exists(sock):
            os.unlink(sock)
        with open(run_dir / "endpoint.log", "ab") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        pending[host] = (sock, run_dir / "endpoint.log")
    deadline = time.monotonic() + READY_S
    while pending and time.monotonic() < deadline:
        for host, (sock, _) in list(pending.items()):
            if os.path.exists(sock):
                try:
                    with EndpointClient(sock, timeout=2) as c:
                        c.hello()
                except LabError:
                    continue
                del pending[host]
                if steps:
                    steps.advance()
        time.sleep(0.02)
    if pending:
        host, (_, log) = next(iter(pending.items()))
        raise LabError(f"endpoint on {host} did not come up within {READY_S:.0f}s; "
                       f"its log {log} ends:\n  {log_tail(log)}")


def wait_started(rt, hosts: list[str], steps, wait_s: float, *, call_timeout: float = 2,
                 pause_s: float = 0.05, where: str = "", log: str = "endpoint.log") -> None:
    """Wait until each host's endpoint, started by the node itself at boot, answers
    `hello`; LabError naming the host (and `where` it was asked) once wait_s is up."""
    steps.start(f"waiting for {len(hosts)} endpoints", len(hosts))
    deadline = time.monotonic() + wait_s
    for host in hosts:
        while True:
            try:
                with client(rt, host, timeout=call_timeout) as c:
                    c.hello()
                break
            except LabError as e:
                if time.monotonic() > deadline:
                    over = f" over {where}: {e}" if where else ""
                    raise LabError(f"{host}: its endpoint, started at boot, does not "
                                   f"answer{over}; see its {log}") from None
                time.sleep(pause_s)
        steps.advance()


def client(rt, host: str, timeout: float = 30.0) -> EndpointClient:
    relay = getattr(rt, "endpoint_relay", None)  # a remote runtime's nodes: over exec
    if relay is not None:
        sock, proc = relay(host)
        return EndpointClient(f"{host}:{REMOTE_SOCK} (relayed)", timeout, sock, proc)
    path = control_path(rt, host)
    try:
        return EndpointClient(path, timeout)
    except EndpointGone:
        raise EndpointGone(_not_running(rt, host, path)) from None


def liveness(rt, node: str, timeout: float = 1.0) -> dict | None:
    """Whether a node's endpoint answers, for `twin status`: None where the node has
    none (a switch, or a host whose endpoint never started) or where asking would cost
    an exec (a remote runtime's nodes); else {"state": "up", "pid", "datapath", "icrc",
    "transport"}
    or {"state": "ended", "log"}: its socket is there and nothing answers."""
    if getattr(rt, "endpoint_relay", None) is not None:
        return None
    path = control_path(rt, node)
    log = Path(path).with_name("endpoint.log")
    if not os.path.exists(path) and not log.exists():
        return None
    try:
        with EndpointClient(path, timeout) as c:
            hello = c.hello()
    except (LabError, OSError, ValueError):
        return {"state": "ended", "log": str(log)}
    return {"state": "up", "pid": hello.get("pid"), "datapath": hello.get("datapath"),
            "icrc": hello.get("icrc"), "transport": hello.get("transport")}


def fuzz(rt, host: str, peer: str, **kw) -> FuzzReport:
    """twin.mrc.fuzz.run against `host`'s endpoint, `peer`'s helping (keywords: seed,
    budget_s, per_kind, settle_s, live, shape, steps): the packets go from inside
    `host`'s namespace."""
    from twin.mrc import fuzz as mrc_fuzz  # 35 ms of imports every command would pay

    with client(rt, host) as target, client(rt, peer) as helper:
        report = mrc_fuzz.run(target, helper, rt.netns_path(host), **kw)
    # an endpoint the attack ended: its log's last line (a traceback's) names the fault
    for i, line in enumerate(report.problems):
        h = line.split(":", 1)[0]
        if report.alive.get(h) is False and line.endswith("no longer answers hello"):
            last = _last_words(Path(control_path(rt, h)).with_name("endpoint.log"))
            report.problems[i] = f"{line}; its log says: {last[:200]}"
    return report


def _last_words(log: Path, lines: int = 40) -> str:
    """What ended an endpoint, from its log's last lines: the last that names an error
    (a traceback's last line, "Fatal Python error: Segmentation fault"), else the last."""
    tail = log_tail(log, lines).split("\n")
    said = [t.strip() for t in tail if "Error" in t or "error:" in t]
    return said[-1] if said else tail[-1].strip()


def _not_running(rt, host: str, path: str) -> str:
    """What a user needs when a host's endpoint is gone: that it is gone, how it ended
    (its log's last lines: a crash's traceback, or the signal that stopped it), and
    how to bring it back."""
    why = f"nothing listens on {path}: it ended" if os.path.exists(path) \
        else f"no control socket at {path}"
    log = Path(path).with_name("endpoint.log")
    return (f"{host}: its MRC endpoint is not running ({why}); its log {log} ends:\n"
            f"  {log_tail(log)}\n`twin restart {host} --lab {rt.owner.lab}` starts it again")


def log_tail(log: Path, lines: int = 8) -> str:
    """An endpoint log's last lines, indented under the line that names it."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n  ".join(text.splitlines()[-lines:]) or "(empty)"
