"""The containerlab runtime: `containerlab deploy -t <lab>.clab.yml` creates the
containers and wires the links; twin then configures and verifies the nodes
through the same code as every other runtime.

containerlab names its containers `clab-<lab>-<node>` and labels them
`containerlab=<lab>`, `clab-node-name=<node>`, which is exactly how the
Docker runtime names and finds its own, so everything after deployment
(netns paths, exec, status, restart) is the Docker runtime's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from twin import dockerd, nsenter
from twin.errors import CommandFailed
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan
from twin.runtime.base import register
from twin.runtime.docker import DockerRuntime, node_of

BINARY = "containerlab"


@register
class ContainerlabRuntime(DockerRuntime):
    name = "containerlab"
    incremental = False  # `containerlab deploy` creates every node and link at once

    @classmethod
    def unavailable(cls) -> str | None:
        if shutil.which(BINARY) is None:
            return "the containerlab binary is not on PATH (see containerlab.dev/install)"
        return dockerd.unavailable()

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        return "its containers are found and removed by the docker runtime's cleanup"

    def _topology_file(self) -> Path:
        """The rendered topology with the owner's labels on every node, beside it (so
        its relative binds still resolve): what containerlab deploys and destroys."""
        rendered = Path(self.build_dir) / f"{self.lab}.clab.yml"
        owned = rendered.with_name(f"{self.lab}.owned.clab.yml")
        topo = yaml.safe_load(rendered.read_text())
        for node in topo["topology"]["nodes"].values():
            node["labels"] = {**(node.get("labels") or {}), **self.owner.labels()}
        text = yaml.safe_dump(topo, sort_keys=False)
        if not owned.exists() or owned.read_text() != text:
            owned.write_text(text)
        return owned

    def _clab(self, *args: str, timeout: float = 900) -> None:
        argv = [BINARY, *args, "-t", str(self._topology_file())]
        log = Path(self.build_dir) / "containerlab.log"
        with open(log, "a") as f:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=f,
                                  stderr=subprocess.STDOUT, timeout=timeout)
        if proc.returncode != 0:
            tail = log.read_text()[-1500:]
            raise CommandFailed(argv, proc.returncode, f"(log {log})\n{tail}")

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        """containerlab deploys nodes and links in one go."""
        self._clab("deploy")
        for node in nodes:
            with nsenter.inside(self.netns_path(node.name)):
                nsenter.write_sysctls(list(node.node_sysctls))

    def wire_links(self, links: list[Link]) -> None:
        """Deploy wired them already; after a restart, wire the ones that are gone."""
        missing = [lk for lk in links if not (self._has_if(lk.a.node, lk.a.ifname)
                                              and self._has_if(lk.b.node, lk.b.ifname))]
        if missing:
            super().wire_links(missing)

    def _all_nodes(self) -> list[str]:
        return [n for n in (node_of(c) for c in self._containers()) if n]

    def _has_if(self, node: str, ifname: str) -> bool:
        lines = Path(f"/proc/{self._pid(node)}/net/dev").read_text().splitlines()[2:]
        return ifname in {line.split(":")[0].strip() for line in lines}

    def destroy(self, nodes: list[str]) -> list[str]:
        there = self.existing(nodes)
        whole_lab = set(there) >= set(self._all_nodes())
        rendered = Path(self.build_dir) / f"{self.lab}.clab.yml"
        if there and whole_lab and rendered.exists():
            try:
                self._clab("destroy", "--cleanup", timeout=300)
            except CommandFailed:
                pass  # whatever containerlab left is removed directly below
        super().destroy(there)
        return there
