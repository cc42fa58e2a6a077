"""A lab's telemetry stack: its exporter and its Prometheus, as processes twin owns.

    <run dir>/<lab>/telemetry/
        telemetry.json     what runs: pids, ports, URLs, where the data goes at `down`
                           (written before each process starts, so a crash leaves a
                           record `twin telemetry down` and `twin down` can act on)
        prometheus.yml     the scrape configuration (twin.telemetry.prometheus.config)
        data/              Prometheus's TSDB: removed with the lab, or moved to
                           --keep-data DIR when the stack stops
        exporter.pid  prometheus.pid      each process's pid, as the usual pidfiles
        exporter.log  prometheus.log

Both processes bind 127.0.0.1 only, are started in their own session with their
output in a log (never the caller's stdout: an inherited stdout keeps CI waiting),
and carry the lab's owner in their environment (twin.owner), so `twin down` and
`twin down --all` end them with the lab even when telemetry.json is lost. They are
stopped by the pid recorded here, after checking that the pid still runs the program
twin started (a pid can be reused).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from twin import owner as O
from twin.errors import LabError, UsageError
from twin.rundir import read_json, write_json
from twin.telemetry import prometheus as P
from twin.telemetry.exporter import DEFAULT_ADDRESS
from twin.telemetry.exporter import DEFAULT_PORT as EXPORTER_PORT

READY_S = 30.0
STOP_S = 10.0


@dataclass
class Process:
    pid: int
    program: str  # what /proc/<pid>/cmdline must contain for the pid to still be ours
    url: str
    log: str

    def alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{self.pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return False
        return not zombie and self.program.encode() in cmd


@dataclass
class Stack:
    lab: str
    exporter: Process | None = None
    prometheus: Process | None = None
    data_dir: str = ""
    keep_data: str | None = None  # move the TSDB here when the stack stops
    started: float = field(default_factory=time.time)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Stack:
        procs = {k: Process(**d[k]) if d.get(k) else None for k in ("exporter", "prometheus")}
        return cls(d["lab"], procs["exporter"], procs["prometheus"], d.get("data_dir", ""),
                   d.get("keep_data"), d.get("started", 0.0))


def stack_dir(lab_dir: Path) -> Path:
    return lab_dir / "telemetry"


def load(lab_dir: Path) -> Stack | None:
    d = read_json(stack_dir(lab_dir) / "telemetry.json", None)
    try:
        return Stack.from_dict(d) if isinstance(d, dict) else None
    except (KeyError, TypeError):
        return None


def _save(lab_dir: Path, stack: Stack) -> None:
    write_json(stack_dir(lab_dir) / "telemetry.json", stack.to_dict())


# -- ports --------------------------------------------------------------------------


def port_owner(port: int) -> str | None:
    """None if 127.0.0.1:port can be bound; else who holds it, as words for an error."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do
        try:
            s.bind((DEFAULT_ADDRESS, port))
            return None
        except OSError:
            pass
    pid = _listener_pid(port)
    if pid is None:
        return "another process (not visible from here)"
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:80]
    except OSError:
        return f"pid {pid}"
    return f"pid {pid} ({comm}: {cmd.strip()})"


def _listener_pid(port: int) -> int | None:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                inodes.add(cols[9])
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return int(pid)
    return None


def _check_port(port: int, what: str, option: str) -> None:
    if not 0 < port < 65536:
        raise UsageError(f"{option} {port}: not a TCP port")
    holder = port_owner(port)
    if holder:
        raise UsageError(f"{what} port {port} on {DEFAULT_ADDRESS} is in use by {holder}; "
                         f"pick another with {option}")


# -- up, down, status ---------------------------------------------------------------


def running(lab_dir) -> Stack | None:
    """The lab's stack when both its exporter and its Prometheus are alive, else None
    (none started, or half of one left: `up` refuses that, naming `down`)."""
    stack = load(lab_dir)
    if stack and stack.exporter and stack.prometheus and stack.exporter.alive() \
            and stack.prometheus.alive():
        return stack
    return None


def up(att, port: int = EXPORTER_PORT, prometheus_port: int = P.DEFAULT_PORT,
       keep_data: str | None = None, steps=None) -> Stack:
    """Start the lab's exporter and Prometheus and wait until Prometheus scrapes it."""
    lab_dir = att.state.dir
    running = load(lab_dir)
    if running and any(p and p.alive() for p in (running.exporter, running.prometheus)):
        raise UsageError(f"telemetry of lab {att.lab} is already running (see `twin telemetry "
                         f"status --lab {att.lab}`; `twin telemetry down --lab {att.lab}` "
                         "stops it)")
    if port == prometheus_port:
        raise UsageError(f"--port and --prometheus-port are both {port}: give two ports")
    _check_port(port, "exporter", "--port")
    _check_port(prometheus_port, "prometheus", "--prometheus-port")
    if keep_data:
        keep = Path(keep_data)
        if keep.exists() and any(keep.iterdir()):
            raise UsageError(f"--keep-data {keep_data}: exists and is not empty; name a new "
                             "or empty directory")
        if not keep.resolve().parent.is_dir():
            raise UsageError(f"--keep-data {keep_data}: {keep.resolve().parent} does not exist")
    binary = P.install(steps.note if steps else None)
    home = stack_dir(lab_dir)
    data = home / "data"
    data.mkdir(parents=True, exist_ok=True)
    stack = Stack(att.lab, data_dir=str(data),
                  keep_data=str(Path(keep_data).resolve()) if keep_data else None)
    env = dict(os.environ, **{O.ENV: att.state.owner.tag})
    started: list[subprocess.Popen] = []  # this call's children, ended on any failure
    try:
        if steps:
            steps.start("starting the exporter")
        exporter_url = f"http://{DEFAULT_ADDRESS}:{port}/metrics"
        stack.exporter = _spawn(
            [sys.executable, "-m", "twin.telemetry.exporter", "--lab", att.lab,
             "--port", str(port), "--address", DEFAULT_ADDRESS],
            "twin.telemetry.exporter", exporter_url, home / "exporter.log", env, started)
        _save(lab_dir, stack)
        _wait(lambda: _answers(exporter_url), started[-1], stack.exporter, "the exporter")
        if steps:
            steps.start("starting prometheus")
        cfg = home / "prometheus.yml"
        cfg.write_text(P.config(att.lab, f"{DEFAULT_ADDRESS}:{port}"))
        prom_url = f"http://{DEFAULT_ADDRESS}:{prometheus_port}"
        stack.prometheus = _spawn(
            P.argv(binary, cfg, data, f"{DEFAULT_ADDRESS}:{prometheus_port}"),
            "prometheus", prom_url, home / "prometheus.log", env, started)
        _save(lab_dir, stack)
        api = P.Api(prom_url, timeout=2)
        _wait(api.ready, started[-1], stack.prometheus, "prometheus")
        if steps:
            steps.start("waiting for the first scrape")
        _wait(lambda: _target_up(api), started[-1], stack.prometheus,
              "prometheus's scrape of the exporter")
    except BaseException:
        for child in reversed(started):
            _end(child)
        down(lab_dir, keep=False)
        raise
    return stack


def _spawn(argv: list[str], program: str, url: str, log: Path, env: dict,
           started: list[subprocess.Popen]) -> Process:
    with open(log, "ab") as f:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=f, env=env,
                                 start_new_session=True)
    started.append(child)
    log.with_suffix(".pid").write_text(f"{child.pid}\n")
    return Process(child.pid, program, url, str(log))


def _end(child: subprocess.Popen) -> None:
    child.terminate()
    try:
        child.wait(STOP_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _target_up(api: P.Api) -> bool:
    try:
        return any(t.get("health") == "up" for t in api.targets())
    except LabError:
        return False


def _wait(ready, child: subprocess.Popen, proc: Process, what: str) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if ready():
            return
        if child.poll() is not None:
            raise LabError(f"{what} exited at start ({child.returncode}); its log {proc.log} "
                           f"ends:\n{_tail(proc.log)}")
        time.sleep(0.2)
    raise LabError(f"{what} was not ready within {READY_S:.0f}s; see {proc.log}:\n"
                   f"{_tail(proc.log)}")


def _tail(path: str) -> str:
    try:
        return Path(path).read_text(errors="replace")[-800:]
    except OSError:
        return "(no log)"


def down(lab_dir: Path, keep: bool = True) -> list[str]:
    """Stop what telemetry.json names (Prometheus first, so its last scrape is written),
    move the data to keep_data when asked (and `keep`), remove the telemetry directory.
    Returns what it did, as lines."""
    stack = load(lab_dir)
    home = stack_dir(lab_dir)
    done = []
    if stack is not None:
        for name in ("prometheus", "exporter"):
            proc = getattr(stack, name)
            if proc is not None and proc.alive():
                _stop(proc)
                done.append(f"stopped {name} (pid {proc.pid})")
        if keep and stack.keep_data and Path(stack.data_dir).is_dir():
            shutil.move(stack.data_dir, stack.keep_data)
            done.append(f"kept the time series in {stack.keep_data}")
    if home.exists():
        shutil.rmtree(home, ignore_errors=True)
    return done


def _stop(proc: Process) -> None:
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline and proc.alive():
        time.sleep(0.05)
    if proc.alive():
        os.kill(proc.pid, signal.SIGKILL)


def status(lab_dir: Path) -> dict:
    """What runs, for `twin telemetry status` (JSON-ready)."""
    stack = load(lab_dir)
    if stack is None:
        return {"running": False}
    procs = {}
    for name in ("exporter", "prometheus"):
        p = getattr(stack, name)
        procs[name] = None if p is None else {"pid": p.pid, "url": p.url, "log": p.log,
                                              "running": p.alive()}
    return {"running": all(p and p["running"] for p in procs.values()), **procs,
            "data_dir": stack.data_dir, "keep_data": stack.keep_data,
            "age_s": round(time.time() - stack.started, 1)}
