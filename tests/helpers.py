"""Shared test helpers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"


def twin(*argv: str, ok: bool | None = None, env: dict | None = None,
         timeout: float = 180) -> subprocess.CompletedProcess:
    """The CLI as a user runs it (`python -m twin ...`, no stdin), in this environment or
    `env`. ok=True or False: its exit status must say so, else the assertion shows the
    end of what it printed."""
    proc = subprocess.run([sys.executable, "-m", "twin", *argv], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=dict(os.environ) if env is None else env)
    if ok is not None and (proc.returncode == 0) != ok:
        raise AssertionError(f"twin {' '.join(argv)} exited {proc.returncode}:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def cli(*argv: str):
    """The CLI in this process (click's CliRunner): its Result (exit_code, output)."""
    from click.testing import CliRunner

    from twin.cli import main

    return CliRunner().invoke(main, list(argv))


def poll(what, within_s: float, every_s: float = 0.1):
    """What `what()` gives the first time it is truthy within `within_s` seconds, or what
    it gives once the time is up (falsy): the caller asserts, saying what it waited for."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every_s)
    return what()


def golden(name: str, actual: str) -> None:
    """Compare with tests/golden/<name>; rewrite it when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1"
    expected = path.read_text()
    assert actual == expected, f"output differs from {path} (UPDATE_GOLDEN=1 to accept)"


def golden_tree(name: str, produced: dict[str, str], root: Path = GOLDEN) -> None:
    """Compare a whole tree of outputs with <root>/<name>/, both ways: every file
    produced has its golden twin, and every golden file is still produced. With
    UPDATE_GOLDEN=1 the tree is rewritten, and files no longer produced removed."""
    base = root / name
    stale = sorted(str(p.relative_to(base)) for p in base.rglob("*")
                   if p.is_file() and str(p.relative_to(base)) not in produced) \
        if base.is_dir() else []
    if os.environ.get("UPDATE_GOLDEN") == "1":
        for rel in stale:
            (base / rel).unlink()
        for rel, text in produced.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        return
    missing = sorted(rel for rel in produced if not (base / rel).exists())
    assert not missing, f"no golden file for {missing} under {base}; run with UPDATE_GOLDEN=1"
    assert not stale, f"golden files no longer produced: {stale} under {base}"
    for rel, text in sorted(produced.items()):
        assert text == (base / rel).read_text(), \
            f"output differs from {base / rel} (UPDATE_GOLDEN=1 to accept)"


# The keys containerlab's topology schema defines (containerlab.dev/manual/topo-def-file,
# /manual/nodes; its JSON schema sets additionalProperties false for nodes). A rendered
# topology may use these and nothing else, or a user's `containerlab deploy` rejects it.
CLAB_TOP_KEYS = {"name", "prefix", "mgmt", "topology", "settings"}
CLAB_TOPOLOGY_KEYS = {"nodes", "links", "kinds", "defaults", "groups"}
CLAB_NODE_KEYS = {
    "kind", "image", "image-pull-policy", "license", "type", "group", "startup-config",
    "startup-delay", "enforce-startup-config", "auto-remove", "exec", "binds", "ports", "env",
    "user", "entrypoint", "cmd", "publish", "labels", "runtime", "mgmt-ipv4", "mgmt-ipv6",
    "network-mode", "cpu", "memory", "cpu-set", "extras", "config", "stages", "dns",
    "certificate", "healthcheck",
}
CLAB_BRIEF_LINK_KEYS = {"endpoints", "vars"}


def send_qp_stats(**changes):
    """A sending QP's stats as an endpoint reports them, with `changes` applied
    (keys of the wire form; `sender` merges into the counters)."""
    from twin.mrc.stats import SendQpStats

    sender = {"packets": 256, "bytes": 1 << 20, "retransmits": 0, "lost_per_ev": 0,
              "lost_rack": 0, "lost_timeout": 0, "lost_nack": 0, "spurious": 0, "acked": 256,
              "per_plane_packets": {"0": 64, "1": 64, "2": 64, "3": 64}, "acks_unsent": 0,
              **changes.pop("sender", {})}
    wire = {"qpn": 1, "peer": "r1h0", "mode": "mrc", "idle": True, "mtu": 4096, "failed": None,
            "elapsed_s": 0.5, "goodput_gbps": 0.016, "sender": sender, "window": 16,
            "srtt_us": 480.5, "reorder_window_us": 120.0,
            "evs": {"good": 128, "skip": 0, "assumed_bad": 0, "denied": 0},
            "ev_set_size": 128, "ev_pools": {"spare": 0, "retired": 0},
            "ev_retirements_total": 0, "ev_revivals_total": 0,
            "ev_retirements_undone_total": 0, "planes_in_use": [0, 1, 2, 3], "send_errors": 0,
            "probes_sent": 0, "messages_completed": 1,
            "completions": [{"msn": 0, "latency_us": 500000.0}], "events_logged": 0,
            "single_path": None, **changes}
    return SendQpStats.from_dict(wire)


def double_on_path(tmp_path: Path, monkeypatch, command: str, module: str) -> Path:
    """Put a test double on PATH as `command`: a script running `python -m module`."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / command
    root = Path(__file__).resolve().parents[1]
    exe.write_text(f"#!/bin/sh\ncd {root} && exec {sys.executable} -m {module} \"$@\"\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    return exe


def write_tables(directory: Path, plan, drop: dict[str, list[str]] | None = None) -> Path:
    """The plan's own tables as `ip -j -6 route show` files (iproute2-json), less the
    routes `drop` names per node (by destination prefix); the directory."""
    from twin.routes import formats
    from twin.routes.tables import NodeTables, from_plan

    directory.mkdir(parents=True, exist_ok=True)
    fmt = formats.get("iproute2-json")
    for name, t in from_plan(plan).nodes.items():
        gone = set((drop or {}).get(name, []))
        kept = NodeTables(name, tuple(r for r in t.routes if r.dst not in gone), t.sids)
        (directory / fmt.file_for(name)).write_text(fmt.render(kept, plan.fabric))
    return directory
