"""The runtime contract: the few things a lab needs from whatever runs its nodes.

A runtime creates nodes (each one a network namespace, bare or inside a
container), wires links between them as veth pairs, runs commands inside a
node, flips a link's state and destroys what it created. Everything else
(configuring routes, probing paths, faults) works on a node's network
namespace path, which is the same kind of thing for every runtime:

    netns          /run/netns/twin-<lab>-<node>
    docker, clab   /proc/<container pid>/ns/net

Runtimes register by name in RUNTIMES; `get_runtime` names the valid ones
when a lookup misses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from twin import endpoints, nsenter
from twin.configure import configure_node
from twin.errors import LabError, UsageError
from twin.model import Link
from twin.plan import NodePlan
from twin.state import run_root


class Runtime(ABC):
    name: ClassVar[str]

    def __init__(self, lab: str, build_dir: str | None = None):
        self.lab = lab
        self.build_dir = build_dir  # where the rendered topology lives (container runtimes)

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this runtime cannot run on this machine, or None if it can."""
        return None

    @abstractmethod
    def create_nodes(self, nodes: list[NodePlan]) -> None: ...

    @abstractmethod
    def wire_links(self, links: list[Link]) -> None: ...

    @abstractmethod
    def netns_path(self, node: str) -> str: ...

    @abstractmethod
    def destroy(self, nodes: list[str]) -> list[str]:
        """Remove the named nodes (and their links and processes); return what existed."""

    @abstractmethod
    def existing(self, nodes: list[str]) -> list[str]:
        """Which of these nodes exist right now."""

    def exec(self, node: str, argv: list[str], *, input: str | None = None,
             check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        return nsenter.run(self.netns_path(node), argv, input=input, check=check, timeout=timeout)

    def restart_node(self, node: NodePlan) -> None:
        """Reboot one node: it comes back with no links and no configuration."""
        self.destroy([node.name])
        self.create_nodes([node])

    def node_view(self, node: str) -> NodeView:
        """How the node sees the project's code, its config and a run directory."""
        return NodeView(python=sys.executable, pythonpath=str(Path(__file__).parents[2]),
                        config_dir=f"{self.build_dir}/config/{node}",
                        run_dir=str(run_root() / self.lab / "nodes" / node), host_prefix="")

    def shell_argv(self, node: str, argv: list[str]) -> list[str]:
        """How a person runs a command inside the node (`twin exec`)."""
        return ["nsenter", f"--net={self.netns_path(node)}", "--", *argv]

    def describe(self, nodes: list[str]) -> dict[str, dict]:
        """Per-node facts for `twin status` (image, state); runtimes add what they know."""
        present = set(self.existing(nodes))
        return {n: {"state": "running" if n in present else "missing", "image": "-"}
                for n in nodes}

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        """Why leftovers cannot even be looked for (cleanup needs less than deploying)."""
        return cls.unavailable()

    @classmethod
    def leftovers(cls) -> list[str]:
        """Resources of this runtime that belong to no known lab (for `down --all`)."""
        return []

    @classmethod
    def remove_leftovers(cls, names: list[str]) -> None:
        """Remove what `leftovers` found; runtimes that find nothing have nothing to do."""
        return None

    def wait_for_carrier(self, nodes: list[NodePlan], steps=None, timeout_s: float = 10.0):
        """Carrier on a fresh veth follows the kernel's link watch, a moment after both
        ends are up: wait for every planned interface, so endpoints start with all
        ports up."""
        waiting = [n for n in nodes if n.interfaces]
        if steps:
            steps.start("waiting for carrier", len(waiting))
        deadline = time.monotonic() + timeout_s
        while waiting:
            still = []
            for node in waiting:
                out = self.exec(node.name, ["ip", "-j", "link", "show"]).stdout
                up = {e["ifname"] for e in json.loads(out or "[]")
                      if "LOWER_UP" in e.get("flags", ()) and e.get("operstate") == "UP"}
                if {i.name for i in node.interfaces} <= up:
                    if steps:
                        steps.advance()
                else:
                    still.append(node)
            waiting = still
            if waiting and time.monotonic() > deadline:
                raise LabError(f"no carrier on {waiting[0].name} after {timeout_s:.0f}s")
            if waiting:
                time.sleep(0.05)

    def start_endpoints(self, hosts: list[str], steps=None) -> None:
        """Start the MRC endpoint daemon on each host (twin.endpoints)."""
        endpoints.start(self, hosts, steps)

    def configure(self, node: NodePlan) -> None:
        """Apply (or re-apply: it is idempotent) a node's plan."""
        configure_node(node, self.netns_path(node.name))

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        self.exec(node, ["ip", "link", "set", "dev", ifname, "up" if up else "down"])


@dataclass(frozen=True)
class NodeView:
    """Paths as a node sees them; `host_prefix` turns one into a path twin can open."""

    python: str
    pythonpath: str
    config_dir: str
    run_dir: str
    host_prefix: str

    def from_host(self, inside: str) -> str:
        return f"{self.host_prefix}{inside}"


RUNTIMES: dict[str, type[Runtime]] = {}


def register(cls: type[Runtime]) -> type[Runtime]:
    RUNTIMES[cls.name] = cls
    return cls


# `auto` tries these in order (container runtimes join the front as they land).
AUTO_ORDER = ["containerlab", "docker", "netns"]


def get_runtime(name: str, lab: str, build_dir: str | None = None) -> Runtime:
    try:
        cls = RUNTIMES[name]
    except KeyError:
        valid = ", ".join(["auto", *sorted(RUNTIMES)])
        raise UsageError(f"unknown runtime {name!r}; valid runtimes: {valid}") from None
    return cls(lab, build_dir)


def pick_runtime(requested: str) -> tuple[str, str]:
    """Resolve `auto` to a runtime name; return (name, why)."""
    if requested != "auto":
        cls = RUNTIMES.get(requested)
        if cls is None:
            get_runtime(requested, "")  # raises with the list of valid names
        reason = cls.unavailable()
        if reason:
            raise UsageError(f"runtime {requested} cannot run here: {reason}")
        return requested, "asked for"
    skipped = []
    for name in AUTO_ORDER:
        if name not in RUNTIMES:
            continue
        reason = RUNTIMES[name].unavailable()
        if reason is None:
            why = "first available" + (f" ({'; '.join(skipped)})" if skipped else "")
            return name, why
        skipped.append(f"{name}: {reason}")
    raise UsageError("no runtime can run here: " + "; ".join(skipped))
