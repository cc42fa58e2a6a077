"""An in-memory runtime for tests of lab lifecycle and fault logic without root.

It records what it was asked to do and can be told to fail at the Nth link,
which is how the tests prove that a failed `twin up` rolls back. It has no
kernel, so `configure` and `verify` are not run against it.
"""

from __future__ import annotations

import subprocess

from twin.errors import CommandFailed
from twin.model import Link
from twin.plan import NodePlan
from twin.runtime.base import Runtime, register

# Shared across instances, as a kernel would be: lab -> node -> set of ifnames
WORLD: dict[str, dict[str, dict[str, bool]]] = {}


@register
class FakeRuntime(Runtime):
    name = "fake"
    fail_after_links: int | None = None  # set by a test to fail while wiring
    calls: list[tuple] = []

    def _nodes(self) -> dict[str, dict[str, bool]]:
        return WORLD.setdefault(self.lab, {})

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        for n in nodes:
            self._nodes()[n.name] = {}
            self.calls.append(("create", self.lab, n.name))

    def wire_links(self, links: list[Link]) -> None:
        for i, lk in enumerate(links):
            if self.fail_after_links is not None and i >= self.fail_after_links:
                raise CommandFailed(["fake", "link", "add", lk.id], 2, "injected failure")
            self._nodes()[lk.a.node][lk.a.ifname] = True
            self._nodes()[lk.b.node][lk.b.ifname] = True
            self.calls.append(("wire", self.lab, lk.id))

    @classmethod
    def unavailable_for_cleanup(cls) -> str | None:
        return "in memory: nothing outlives the process"

    def netns_path(self, node: str) -> str:
        return f"/fake/{self.lab}/{node}"

    def existing(self, nodes: list[str]) -> list[str]:
        return [n for n in nodes if n in self._nodes()]

    def destroy(self, nodes: list[str]) -> list[str]:
        there = self.existing(nodes)
        for n in there:
            del self._nodes()[n]
        if not self._nodes():
            WORLD.pop(self.lab, None)
        return there

    def exec(self, node, argv, *, input=None, check=True, timeout=60):
        self.calls.append(("exec", self.lab, node, tuple(argv)))
        return subprocess.CompletedProcess(argv, 0, "", "")

    def wait_for_carrier(self, nodes, steps=None, timeout_s: float = 10.0) -> None:
        self.calls.append(("carrier", self.lab, len(nodes)))

    def start_endpoints(self, hosts: list[str], steps=None) -> None:
        self.calls.extend(("endpoint", self.lab, h) for h in hosts)

    def configure(self, node: NodePlan) -> None:
        self.calls.append(("configure", self.lab, node.name))

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        if ifname not in self._nodes().get(node, {}):
            raise CommandFailed(["ip", "link", "set", ifname], 1, f"Cannot find device {ifname}")
        self._nodes()[node][ifname] = up
        self.calls.append(("link", self.lab, node, ifname, up))
