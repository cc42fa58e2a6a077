"""The Docker runtime: every node is a container, deployed from the rendered
containerlab topology, named and labelled the way containerlab does it.

    container   clab-<lab>-<node>, hostname <node>, network mode `none`
    labels      containerlab=<lab>, clab-node-name=<node>, clab-node-kind=linux, ...
                plus the topology's own mrc-twin.* labels, and the owner's:
                mrc-twin.run-dir, mrc-twin.lab, mrc-twin.lab-id (twin.owner)
    caps        NET_ADMIN, NET_RAW, SYS_ADMIN (not --privileged: this kernel's
                bounding set lacks CAP_SYS_RESOURCE, so privileged containers fail)
    binds       the topology's binds, relative paths resolved against its directory
    links       veth pairs created by pyroute2 with each end born inside its
                container's network namespace (IFLA_NET_NS_PID), so no end ever
                appears in the host namespace

Configuration and verification then run on /proc/<pid>/ns/net exactly as for
the netns runtime: same code, same plan, same probes.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import yaml
from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from twin import dockerd, images, nsenter
from twin.errors import LabError, RuntimeMissing
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan
from twin.fabric.render import BOOT_ENV, CODE_MOUNT, CONFIG_MOUNT
from twin.owner import Owner
from twin.rundir import run_root
from twin.runtime.base import NodeView, Resource, Runtime, register

CAPS = ["NET_ADMIN", "NET_RAW", "SYS_ADMIN"]
PREFIX = "clab"
WORKERS = 4  # the engine serialises much of container creation; more threads buy nothing
TWIN_LABEL = "mrc-twin.lab"  # every container twin makes has it
NODE_RUN_DIR = "/run/mrc-twin"  # inside a container: bind-mounted from the lab's run dir


def _client():
    c = dockerd.client()
    if c is None:
        raise RuntimeMissing("no Docker engine answers (start one with `twin engine start`)")
    return c


def load_topology(build_dir: str | None, lab: str) -> dict:
    if not build_dir:
        raise LabError(f"lab {lab}: no build directory recorded for the container runtime")
    path = Path(build_dir) / f"{lab}.clab.yml"
    try:
        return yaml.safe_load(path.read_text())
    except OSError as e:
        raise LabError(f"cannot read topology {path}: {e.strerror}") from None


def resolve_bind(bind: str, base: Path) -> tuple[str, dict]:
    """containerlab bind syntax `src:dst[:mode]`, src relative to the topology file."""
    parts = bind.split(":")
    src, dst = parts[0], parts[1]
    mode = parts[2] if len(parts) > 2 else "rw"
    path = Path(src) if os.path.isabs(src) else (base / src)
    return str(path.resolve()), {"bind": dst, "mode": mode}


@register
class DockerRuntime(Runtime):
    name = "docker"

    def __init__(self, lab: str, build_dir: str | None = None, owner: Owner | None = None):
        super().__init__(lab, build_dir, owner)
        self._pids: dict[str, int] = {}
        self._docker = None

    @property
    def docker(self):
        if self._docker is None:
            self._docker = _client()
        return self._docker

    @classmethod
    def unavailable(cls) -> str | None:
        reason = dockerd.unavailable()
        if reason:
            return reason
        missing = images.missing_images(dockerd.client())
        if missing:
            return f"images not built: {', '.join(missing)} (run `make images`)"
        return None

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        return dockerd.unavailable()

    def container_name(self, node: str) -> str:
        return f"{PREFIX}-{self.lab}-{node}"

    def resource_name(self, node: str) -> str:
        return self.container_name(node)

    # -- create ---------------------------------------------------------------

    def _labels(self, node: str, spec: dict, topo_file: Path) -> dict[str, str]:
        labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
        labels.update({
            "containerlab": self.lab,
            "clab-node-name": node,
            "clab-node-longname": self.container_name(node),
            "clab-node-kind": spec.get("kind", "linux"),
            "clab-node-group": spec.get("group", ""),
            "clab-topo-file": str(topo_file),
            "mrc-twin.runtime": self.name,
            **self.owner.labels(),
        })
        return labels

    # twin programs every node from the host; the topology's MRC_TWIN_BOOT (a node
    # programming itself at boot, for other orchestrators) is not passed on.
    programs_nodes: ClassVar[bool] = True

    def _environment(self, spec: dict) -> dict[str, str]:
        return {k: str(v) for k, v in (spec.get("env") or {}).items() if k != BOOT_ENV}

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        topo = load_topology(self.build_dir, self.lab)
        base = Path(self.build_dir)
        topo_file = base / f"{self.lab}.clab.yml"
        specs = topo["topology"]["nodes"]

        def start(node: NodePlan) -> None:
            spec = specs[node.name]
            volumes = dict(resolve_bind(b, base) for b in spec.get("binds", []))
            # The node's run directory (endpoint socket and log) lives under the lab's
            # run directory on the host too, as it does for the netns runtime.
            run_dir = run_root() / self.lab / "nodes" / node.name
            run_dir.mkdir(parents=True, exist_ok=True)
            volumes[str(run_dir)] = {"bind": NODE_RUN_DIR, "mode": "rw"}
            c = self.docker.containers.run(
                spec["image"], name=self.container_name(node.name), hostname=node.name,
                labels=self._labels(node.name, spec, topo_file), network_mode="none",
                cap_add=CAPS, volumes=volumes, detach=True, init=True,
                environment=self._environment(spec),
                sysctls={"net.ipv6.conf.all.disable_ipv6": "0"})
            c.reload()
            self._pids[node.name] = c.attrs["State"]["Pid"]
            if self.programs_nodes:  # before any link exists: new interfaces inherit them
                with nsenter.inside(self.netns_path(node.name)):
                    nsenter.write_sysctls(list(node.node_sysctls))

        with ThreadPoolExecutor(WORKERS) as pool:
            for f in [pool.submit(start, n) for n in nodes]:
                f.result()

    def wire_links(self, links: list[Link]) -> None:
        with IPRoute() as ipr:
            for lk in links:
                try:
                    ipr.link("add", ifname=lk.a.ifname, kind="veth", mtu=lk.mtu,
                             net_ns_pid=self._pid(lk.a.node),
                             peer={"ifname": lk.b.ifname, "mtu": lk.mtu,
                                   "net_ns_pid": self._pid(lk.b.node)})
                except NetlinkError as e:
                    raise LabError(f"cannot wire {lk.id}: {e.args[-1]}") from None

    # -- inspect --------------------------------------------------------------

    def _containers(self) -> list:
        """The lab's containers, sparse: the list API only, no per-container inspect,
        which would race with containers being created or removed as we look (after
        a killed `twin up`, dockerd may still be finishing one)."""
        return self.docker.containers.list(all=True, sparse=True,
                                           filters={"label": f"containerlab={self.lab}"})

    def _pid(self, node: str) -> int:
        pid = self._pids.get(node)
        if not pid or not os.path.exists(f"/proc/{pid}"):
            try:
                c = self.docker.containers.get(self.container_name(node))
            except Exception:
                raise LabError(f"node {node}: container {self.container_name(node)} "
                               "does not exist") from None
            pid = c.attrs["State"]["Pid"]
            if not pid:
                raise LabError(f"node {node}: container is {c.status}, not running")
            self._pids[node] = pid
        return pid

    def netns_path(self, node: str) -> str:
        return f"/proc/{self._pid(node)}/ns/net"

    def existing(self, nodes: list[str]) -> list[str]:
        there = {node_of(c) for c in self._containers()}
        return [n for n in nodes if n in there]

    def describe(self, nodes: list[str]) -> dict[str, dict]:
        found = {node_of(c): c for c in self._containers()}
        out = {}
        for n in nodes:
            c = found.get(n)
            out[n] = ({"state": c.attrs.get("State", "?"), "image": c.attrs.get("Image", "?"),
                       "container": c.attrs["Names"][0].lstrip("/")}
                      if c else {"state": "missing", "image": "-"})
        return out

    def node_view(self, node: str) -> NodeView:
        return NodeView(python="python3", pythonpath=CODE_MOUNT, config_dir=CONFIG_MOUNT,
                        run_dir=NODE_RUN_DIR, host_prefix=f"/proc/{self._pid(node)}/root")

    def shell_argv(self, node: str, argv: list[str]) -> list[str]:
        # Every namespace of the container (its filesystem too), not only its network.
        return ["nsenter", "-t", str(self._pid(node)), "-a", "--", *argv]

    # -- change ---------------------------------------------------------------

    def restart_node(self, node: NodePlan) -> None:
        c = self.docker.containers.get(self.container_name(node.name))
        c.restart(timeout=2)
        self._pids.pop(node.name, None)
        if self.programs_nodes:
            with nsenter.inside(self.netns_path(node.name)):
                nsenter.write_sysctls(list(node.node_sysctls))

    def destroy(self, nodes: list[str]) -> list[str]:
        wanted = set(nodes)
        doomed = [c for c in self._containers() if node_of(c) in wanted]
        _remove(doomed)
        for c in doomed:
            self._pids.pop(node_of(c), None)
        return [node_of(c) for c in doomed]

    @classmethod
    def inventory(cls) -> list[Resource]:
        """Every container twin made (the mrc-twin.lab label), with its owner's labels."""
        c = dockerd.client(timeout=10)
        if c is None:
            return []
        found = c.containers.list(all=True, sparse=True, filters={"label": TWIN_LABEL})
        return [Resource(cls.name, "container", x.attrs["Names"][0].lstrip("/"),
                         Owner.from_labels(x.attrs.get("Labels") or {})) for x in found]

    @classmethod
    def remove_resources(cls, resources: list[Resource]) -> None:
        c = dockerd.client()
        if c is not None:
            _remove([c.containers.get(r.name) for r in resources if _exists(c, r.name)])


def node_of(container) -> str | None:
    """The node a (sparse) container plays: containerlab's clab-node-name label."""
    return (container.attrs.get("Labels") or {}).get("clab-node-name")


def _exists(client, name: str) -> bool:
    try:
        client.containers.get(name)
        return True
    except Exception:
        return False


def _remove(containers: list) -> None:
    def kill(c) -> None:
        try:
            c.remove(force=True)
        except Exception as e:  # already gone is fine; anything else is reported
            if "No such container" not in str(e) and "is already in progress" not in str(e):
                raise LabError(f"cannot remove container {c.id[:12]}: {e}") from None

    with ThreadPoolExecutor(WORKERS) as pool:
        for f in [pool.submit(kill, c) for c in containers]:
            f.result()
