"""The Docker engine: find one that answers, or install and start our own.

twin starts dockerd only when no engine answers, and always as

    dockerd --bridge=none --iptables=false

so the engine creates no bridge, touches no firewall and gives containers
no network but the links twin wires (network mode `none`). Its output goes
to a log file, never to the caller's stdout (an inherited stdout keeps CI
runners waiting), and its PID is recorded so `twin engine stop` ends only
the dockerd twin started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from twin.errors import LabError, RuntimeMissing

PIDFILE = Path("/run/mrc-twin-dockerd.pid")
LOGFILE = Path("/var/log/mrc-twin-dockerd.log")
DOCKERD_ARGS = ["--bridge=none", "--iptables=false"]


def client(timeout: int = 120):
    """A docker SDK client whose engine answers a ping, or None."""
    try:
        import docker
    except ImportError:
        return None
    try:
        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except Exception:
        return None


def unavailable() -> str | None:
    if client(timeout=5) is None:
        return "no Docker engine answers (start one with `twin engine start`)"
    return None


def _ours() -> int | None:
    try:
        pid = int(PIDFILE.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/comm") as f:
            return pid if f.read().strip() == "dockerd" else None
    except OSError:
        return None


def install_dockerd() -> None:
    if os.geteuid() != 0:
        raise RuntimeMissing("dockerd is not installed and only root can install it "
                             "(apt-get install docker.io)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "docker.io"]):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise LabError(f"`{' '.join(argv)}` failed: {proc.stderr.strip()[-500:]}")


def start(steps=None, wait: float = 90) -> tuple[str, int | None]:
    """Make sure an engine answers. Returns (what happened, pid we started or None)."""
    if client(timeout=5) is not None:
        pid = _ours()
        return ("already running" + (f" (started by twin, pid {pid})" if pid else "")), None
    if os.geteuid() != 0:
        raise RuntimeMissing("no Docker engine answers, and only root can start one")
    if shutil.which("dockerd") is None:
        if steps:
            steps.note("installing docker.io from Debian")
        install_dockerd()
    LOGFILE.parent.mkdir(parents=True, exist_ok=True)
    with open(LOGFILE, "ab") as log:
        proc = subprocess.Popen(["dockerd", *DOCKERD_ARGS, f"--pidfile={PIDFILE}"],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LabError(f"dockerd exited with {proc.returncode}; see {LOGFILE}")
        if client(timeout=5) is not None:
            return f"started dockerd (pid {proc.pid}, log {LOGFILE})", proc.pid
        time.sleep(0.5)
    proc.terminate()
    raise LabError(f"dockerd did not answer within {wait:.0f}s; see {LOGFILE}")


def stop(wait: float = 30) -> str:
    """Stop the dockerd that twin started (never someone else's)."""
    pid = _ours()
    if pid is None:
        return "no dockerd started by twin is running"
    os.kill(pid, 15)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.2)
    if os.path.exists(f"/proc/{pid}"):
        os.kill(pid, 9)
    return f"stopped dockerd (pid {pid})"
