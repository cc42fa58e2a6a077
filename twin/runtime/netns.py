"""The embedded runtime: every node is a bare network namespace.

Needs only root and iproute2. Namespaces are named `twin-<lab>-<node>`, so
`ip netns list` shows which lab each belongs to. Nodes and links are created
in bulk with one `ip -batch` each; a veth is created with both ends already
in their namespaces, so no half-wired interface ever appears in the root
namespace. A namespace file cannot carry a label, so each one's owner is
recorded in /run/mrc-twin/netns/<namespace>.json before it is created
(twin.owner), and removed after it is gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from twin import nsenter, owner
from twin.errors import CommandFailed
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan
from twin.runtime.base import Resource, Runtime, register

PREFIX = "twin-"
NETNS_DIR = "/run/netns"


def _ip_batch(lines: list[str], force: bool = False) -> None:
    if not lines:
        return
    argv = ["ip", *(["-force"] if force else []), "-batch", "-"]
    proc = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True)
    if proc.returncode != 0 and not force:
        raise CommandFailed(argv, proc.returncode, proc.stderr)


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def pids_in(paths: list[str]) -> dict[str, list[int]]:
    """Processes whose network namespace is one of these files (by inode)."""
    wanted = {}
    for p in paths:
        try:
            st = os.stat(p)
            wanted[(st.st_dev, st.st_ino)] = p
        except OSError:
            pass
    found: dict[str, list[int]] = {p: [] for p in paths}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key in wanted:
            found[wanted[key]].append(int(entry))
    return found


def _alive(pid: int) -> bool:
    """Running, not merely a zombie its parent has yet to reap."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_all(pids: list[int], grace: float = 2.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if _alive(p)]
        if pids:
            time.sleep(0.02)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@register
class NetnsRuntime(Runtime):
    name = "netns"

    @classmethod
    def unavailable(cls) -> str | None:
        if os.geteuid() != 0:
            return "needs root (network namespaces and veths)"
        if shutil.which("ip") is None:
            return "iproute2 (`ip`) is not installed"
        if shutil.which("nsenter") is None:
            return "util-linux `nsenter` is not installed"
        return None

    def ns_name(self, node: str) -> str:
        return f"{PREFIX}{self.lab}-{node}"

    def netns_path(self, node: str) -> str:
        return f"{NETNS_DIR}/{self.ns_name(node)}"

    def resource_name(self, node: str) -> str:
        return self.ns_name(node)

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        names = [self.ns_name(n.name) for n in nodes]
        owner.record_namespaces(self.owner, names)  # before: a crash leaves them owned
        _ip_batch([f"netns add {ns}" for ns in names])
        for n in nodes:  # before any link exists, so new interfaces inherit the defaults
            with nsenter.inside(self.netns_path(n.name)):
                nsenter.write_sysctls(list(n.node_sysctls))

    def wire_links(self, links: list[Link]) -> None:
        _ip_batch([
            f"link add {lk.a.ifname} netns {self.ns_name(lk.a.node)} type veth "
            f"peer name {lk.b.ifname} netns {self.ns_name(lk.b.node)}"
            for lk in links
        ])

    def restart_node(self, node: NodePlan) -> None:
        """Delete the node's veths first: a namespace is freed asynchronously, so its
        pairs would linger in the peers for a moment and the rewire would clash."""
        if node.interfaces:
            lines = "".join(f"link del {i.name}\n" for i in node.interfaces)
            subprocess.run(["ip", "-n", self.ns_name(node.name), "-force", "-batch", "-"],
                           input=lines, capture_output=True, text=True)
        super().restart_node(node)

    def existing(self, nodes: list[str]) -> list[str]:
        present = set(list_netns())
        return [n for n in nodes if self.ns_name(n) in present]

    def destroy(self, nodes: list[str]) -> list[str]:
        there = self.existing(nodes)
        remove_namespaces([self.ns_name(n) for n in there])
        owner.forget_namespaces([self.ns_name(n) for n in nodes])
        return there

    @classmethod
    def inventory(cls) -> list[Resource]:
        """Every twin-* namespace, with the owner its record names (None: no record).
        Records whose namespace is gone and whose owner is too are dropped as they
        are found (a live owner's record may precede its namespace by a moment)."""
        present = leftover_namespaces()
        orphans = [ns for ns in sorted(set(owner.recorded_namespaces()) - set(present))
                   if (o := owner.namespace_owner(ns)) is None or o.stray_because()]
        owner.forget_namespaces(orphans)
        return [Resource(cls.name, "namespace", ns, owner.namespace_owner(ns))
                for ns in present]

    @classmethod
    def remove_resources(cls, resources: list[Resource]) -> None:
        names = [r.name for r in resources]
        remove_namespaces(names)
        owner.forget_namespaces(names)


def remove_namespaces(names: list[str]) -> None:
    """Stop every process inside, then delete the namespaces (their veths go with them)."""
    if not names:
        return
    paths = [f"{NETNS_DIR}/{n}" for n in names]
    kill_all([pid for pids in pids_in(paths).values() for pid in pids])
    _ip_batch([f"netns del {n}" for n in names], force=True)


def leftover_namespaces() -> list[str]:
    return [n for n in list_netns() if n.startswith(PREFIX)]
