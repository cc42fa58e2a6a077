"""An in-memory runtime with a model of the kernel, so unit tests run the real
lab phases (up, restart, faults, down --all) without root.

The model keeps what the phases change and look at, per node:

    interfaces   name -> FakeInterface(admin up?, peer end); a veth pair is born
                 admin down, and deleting either end's node deletes the pair
    nft tables   name -> the rule text loaded (loaded twice: the rules twice,
                 as nft does)
    configured   how many times the node's plan was applied
    sids         the local SIDs in place: set by configure, taken by the data
                 plane's removal (seg6local's `route del` batch, ebpf's `tc filter
                 del` batch), as a sid-loss fault does
    endpoint     whether its MRC endpoint runs (dies with the node)
    owner        the lab owner it was created for (twin.owner), so the
                 ownership rules of `down --all` and `down --stray` are tested
                 here as on a machine (its `inventory` is every fake node)

`exec` understands the commands twin sends (`ip link set`, `ip -j link show`,
`nft -f -`, `nft delete table`, `nft list tables`, `ip -force -batch -` of
`route del` lines, `tc -force -batch -` of `filter del` lines); any other
command fails as an unknown command would, so nothing passes by accident.
Its kernel runs every data plane unless a test says otherwise
(`FakeRuntime.unavailable_dataplanes`). Every call is
recorded in `FakeRuntime.calls`.

Tests inject failures with `FakeRuntime.fail_at = {"wire": 5}`: the sixth
wired link fails (ops: create, wire, exec, configure, endpoint).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from typing import ClassVar

from twin.errors import CommandFailed, LabError
from twin.fabric.model import Link
from twin.fabric.plan import NodePlan
from twin.owner import Owner
from twin.runtime.base import Resource, Runtime, register
from twin.runtime.kernel import Kernel


@dataclass
class FakeInterface:
    up: bool = False  # admin state
    peer: tuple[str, str] | None = None  # (node, ifname) at the other end of the veth


@dataclass
class FakeNode:
    interfaces: dict[str, FakeInterface] = field(default_factory=dict)
    nft: dict[str, list[str]] = field(default_factory=dict)  # table -> rules loaded
    configured: int = 0
    sids: dict[str, str] = field(default_factory=dict)  # prefix -> dev ("": every port)
    endpoint: bool = False
    owner: Owner | None = None


# Shared across instances, as a kernel would be: lab -> node -> FakeNode
WORLD: dict[str, dict[str, FakeNode]] = {}


class FakeKernel:
    """Programming a node sets its planned interfaces up (as configure does);
    an endpoint is a flag on its host."""

    def configure(self, rt: FakeRuntime, node: NodePlan) -> None:
        rt._count("configure", node.name)
        fn = rt._node(node.name)
        missing = [i.name for i in node.interfaces if i.name not in fn.interfaces]
        if missing:
            raise LabError(f"{node.name}: interfaces missing ({', '.join(missing)}); "
                           "were the links wired?")
        for ifc in node.interfaces:
            fn.interfaces[ifc.name].up = True
        fn.sids = {s.prefix: s.dev for s in node.sids}
        fn.configured += 1

    def dataplanes(self) -> dict[str, str | None]:
        return {name: FakeRuntime.unavailable_dataplanes.get(name)
                for name in ("seg6local", "ebpf")}

    def host_limits(self, links: int) -> list[str]:
        return []  # the model has no machine-wide tables

    def start_endpoints(self, rt: FakeRuntime, hosts: list[str], steps) -> None:
        steps.start(f"starting {len(hosts)} endpoints", len(hosts))
        for host in hosts:
            rt._count("endpoint", host)
            rt._node(host).endpoint = True
            steps.advance()


@register
class FakeRuntime(Runtime):
    name = "fake"
    kernel: ClassVar[Kernel] = FakeKernel()
    fail_at: dict[str, int] = {}  # op -> how many succeed before one fails
    calls: list[tuple] = []
    unavailable_dataplanes: dict[str, str] = {}  # data plane -> why this kernel lacks it

    @classmethod
    def reset(cls) -> None:
        WORLD.clear()
        cls.calls = []
        cls.fail_at = {}
        cls.unavailable_dataplanes = {}

    @classmethod
    def inventory(cls) -> list[Resource]:
        return [Resource(cls.name, "node", f"{lab}/{name}", node.owner)
                for lab, nodes in sorted(WORLD.items()) for name, node in sorted(nodes.items())]

    @classmethod
    def remove_resources(cls, resources: list[Resource]) -> None:
        for r in resources:
            lab, node = r.name.split("/", 1)
            cls(lab).destroy([node])

    def resource_name(self, node: str) -> str:
        return f"{self.lab}/{node}"

    def world(self) -> dict[str, FakeNode]:
        return WORLD.setdefault(self.lab, {})

    def _node(self, name: str) -> FakeNode:
        try:
            return self.world()[name]
        except KeyError:
            raise LabError(f"node {name}: does not exist (fake runtime)") from None

    def _count(self, op: str, *what) -> None:
        """Record a call; fail it if a test asked for a failure at this point."""
        left = self.fail_at.get(op)
        if left is not None:
            if left <= 0:
                raise CommandFailed(["fake", op, *map(str, what)], 2, "injected failure")
            self.fail_at[op] = left - 1
        self.calls.append((op, self.lab, *what))

    # -- the verbs ------------------------------------------------------------------

    def create_nodes(self, nodes: list[NodePlan]) -> None:
        for n in nodes:
            self._count("create", n.name)
            self.world()[n.name] = FakeNode(owner=self.owner)

    def wire_links(self, links: list[Link]) -> None:
        for lk in links:
            self._count("wire", lk.id)
            a, b = self._node(lk.a.node), self._node(lk.b.node)
            for node, end in ((a, lk.a), (b, lk.b)):
                if end.ifname in node.interfaces:
                    raise CommandFailed(["ip", "link", "add", end.ifname], 2,
                                        "RTNETLINK answers: File exists")
            a.interfaces[lk.a.ifname] = FakeInterface(peer=(lk.b.node, lk.b.ifname))
            b.interfaces[lk.b.ifname] = FakeInterface(peer=(lk.a.node, lk.a.ifname))

    def exec(self, node, argv, *, input=None, check=True, timeout=60):
        self._count("exec", node, tuple(argv))
        rc, out, err = self._run(self._node(node), list(argv), input or "")
        if check and rc != 0:
            raise CommandFailed(list(argv), rc, err)
        return subprocess.CompletedProcess(argv, rc, out, err)

    def set_link_state(self, node: str, ifname: str, up: bool) -> None:
        self.exec(node, ["ip", "link", "set", "dev", ifname, "up" if up else "down"])

    def destroy(self, nodes: list[str]) -> list[str]:
        there = self.existing(nodes)
        for name in there:
            for ifc in self.world().pop(name).interfaces.values():
                if ifc.peer and ifc.peer[0] in self.world():  # the veth pair goes
                    self.world()[ifc.peer[0]].interfaces.pop(ifc.peer[1], None)
        if not self.world():
            WORLD.pop(self.lab, None)
        return there

    def netns_path(self, node: str) -> str:
        return f"/fake/{self.lab}/{node}"

    def existing(self, nodes: list[str]) -> list[str]:
        return [n for n in nodes if n in self.world()]

    # -- the commands the model understands ------------------------------------------

    def _run(self, node: FakeNode, argv: list[str], stdin: str) -> tuple[int, str, str]:
        match argv:
            case ["ip", "link", "set", "dev", ifname, ("up" | "down") as state]:
                if ifname not in node.interfaces:
                    return 1, "", f'Cannot find device "{ifname}"'
                node.interfaces[ifname].up = state == "up"
                return 0, "", ""
            case ["ip", "-j", "link", "show"]:
                return 0, json.dumps([self._link_json(n, i) for n, i in
                                      node.interfaces.items()]), ""
            case ["nft", "-f", "-"]:
                tables = re.findall(r"^table ip6 (\S+) \{", stdin, re.M)
                if not tables:
                    return 1, "", "Error: syntax error (fake nft understands `table ip6 T {`)"
                for t in tables:
                    node.nft.setdefault(t, []).append(stdin)
                return 0, "", ""
            case ["nft", "delete", "table", "ip6", table]:
                if node.nft.pop(table, None) is None:
                    return 1, "", f"Error: No such file or directory; table ip6 {table}"
                return 0, "", ""
            case ["ip", "-force", "-batch", "-"]:  # seg6local: route del <prefix> dev <dev>
                err = []
                for i, line in enumerate(stdin.splitlines(), start=1):
                    m = re.fullmatch(r"route del (\S+) dev (\S+)", line)
                    if m is None or node.sids.pop(m[1], None) is None:  # as the kernel says
                        err += ["RTNETLINK answers: No such process" if m else
                                f'Command "{line}" is unknown, try "ip help".',
                                f"Command failed -:{i}"]
                return (1 if err else 0), "", "\n".join(err)
            case ["tc", "-force", "-batch", "-"]:  # ebpf: filter del dev <dev> ingress ...
                err = []
                for i, line in enumerate(stdin.splitlines(), start=1):
                    m = re.match(r"filter del dev (\S+) ingress", line)
                    # a switch's uN (dev "") is one program on every port: the model
                    # drops it with the first port's filter
                    hit = m is not None and any(d in ("", m[1]) for d in node.sids.values())
                    if not hit:
                        err += ["Error: Cannot find specified filter chain." if m else
                                f'Command "{line}" is unknown, try "tc help".',
                                "We have an error talking to the kernel",
                                f"Command failed -:{i}"]
                        continue
                    node.sids = {p: d for p, d in node.sids.items() if d not in ("", m[1])}
                return (1 if err else 0), "", "\n".join(err)
            case ["nft", "list", "tables"]:
                return 0, "".join(f"table ip6 {t}\n" for t in node.nft), ""
        return 127, "", f"fake runtime: no model of `{' '.join(argv)}`"

    def _link_json(self, name: str, ifc: FakeInterface) -> dict:
        peer_up = False
        if ifc.peer:
            far = self.world().get(ifc.peer[0])
            peer_up = bool(far and far.interfaces.get(ifc.peer[1], FakeInterface()).up)
        carrier = ifc.up and peer_up
        flags = [*(["UP"] if ifc.up else []), *(["LOWER_UP"] if carrier else [])]
        state = "UP" if carrier else ("LOWERLAYERDOWN" if ifc.up else "DOWN")
        return {"ifname": name, "flags": flags, "operstate": state}
