"""The data-plane contract, the registry and `pick` (see twin.dataplane)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict
from typing import ClassVar

from twin.dataplane.program import BpfAttach, NodeProgram, tc_lines
from twin.errors import CommandFailed, UsageError
from twin.fabric.plan import NodePlan
from twin.node import ebpf
from twin.node.ebpf import tc
from twin.registry import Registry


class Dataplane(ABC):
    name: ClassVar[str]
    needs: ClassVar[str]  # the kernel options it needs, for messages and the README
    keeps_counters: ClassVar[bool] = False  # `counters` reads what its SIDs did
    # why its encap route cannot carry UDP GSO super-packets (UDP_SEGMENT), or None
    encap_refuses_udp_gso: ClassVar[str | None] = None

    def program(self, node: NodePlan) -> NodeProgram:
        """The node's program (pure): the same static part on every backend, and the
        backend's own local SIDs."""
        anchor, sid_lines, bpf = self.sids(node)
        ip = ["link set lo up", *(f"address replace {a} dev lo" for a in node.loopback)]
        for ifc in node.interfaces:
            ip.append(f"link set {ifc.name} mtu {ifc.mtu} up")
            ip += [f"address replace {a} dev {ifc.name} nodad" for a in ifc.addresses]
        ip += [r.iproute2() for r in node.routes] + sid_lines
        return NodeProgram(
            node=node.name, dataplane=self.name, node_sysctls=node.node_sysctls,
            interfaces=tuple(i.name for i in node.interfaces),
            interface_sysctls=tuple(node.interface_sysctls()), anchor=anchor, ip=tuple(ip),
            tc=tuple(tc_lines(node)), bpf=tuple(bpf), queues=node.queues)

    @abstractmethod
    def sids(self, node: NodePlan) -> tuple[str | None, list[str], list[BpfAttach]]:
        """How this backend installs the node's local SIDs: (an anchor device it needs,
        `ip -batch` lines, eBPF attachments)."""

    @abstractmethod
    def is_sid_route(self, entry: dict) -> bool:
        """Whether an element of `ip -j -6 route show` is one of this backend's SIDs
        (checked by `check_sids`, not as a static route)."""

    @abstractmethod
    def check_sids(self, rt, node: NodePlan, routes_json: list[dict]) -> list[str]:
        """Read the node's local SIDs back with an oracle independent of what installed
        them; each problem as one line naming the SID (and the port)."""

    @abstractmethod
    def remove_sids(self, rt, node: NodePlan) -> None:
        """Take every local SID of the node away (the sid-loss fault); one that is gone
        already is fine, any other failure is raised (twin.dataplane.base.delete_all)."""

    @abstractmethod
    def add_encap(self, rt, node: str, dst: str, dev: str, src: str, path: str,
                  flow_label: int = 0) -> None:
        """Traffic the node's kernel sends to `dst`/128 leaves IPv6-in-IPv6 on the uSID
        `path` (H.Encaps.Red), source `src`, out of `dev`."""

    @abstractmethod
    def del_encap(self, rt, node: str, dst: str, dev: str) -> None:
        """Remove what add_encap installed; missing is fine."""

    def check_signals(self, rt, node: NodePlan) -> list[str]:
        """Read the fabric signals' programs back (the same on both data planes): each
        planned queue at its port's TC egress, and each `ecn` program at a host port's
        ingress, by name and by the tag the kernel computed; a problem per line."""
        wanted = [("egress", q.dev, ebpf.queue_name(asdict(q)), ebpf.queue_tags(asdict(q)),
                   f"queue program at {q.dev} egress ({q.rate_bps} bit/s)")
                  for q in node.queues]
        wanted += [("ingress", b.dev, ebpf.filter_name(b.kind, b.prefix),
                    ebpf.expected_tags(b.kind, b.prefix, b.slot),
                    f"RFC 6040 program {b.prefix} at {b.dev} ingress")
                   for b in self.sids(node)[2] if b.kind == "ecn"]
        if not wanted:
            return []
        shown = read_filters(rt, node.name, [(dev, hook) for hook, dev, *_ in wanted])
        problems = []
        for (_, _, name, tags, what), got in zip(wanted, shown, strict=True):
            if got.error:
                problems.append(f"{what}: could not read its filters back ({got.error})")
                continue
            found = got.at(ebpf.PREF)
            if found is None:
                problems.append(f"missing {what}")
                continue
            if found.name != name or found.tag not in tags:
                problems.append(f"{what}: attached is {found.name!r} (program "
                                f"{found.prog_id}, tag {found.tag}), planned {name!r} "
                                f"tag {' or '.join(sorted(tags))}")
        return problems

    def signals(self, rt, node: str) -> dict | None:
        """The node's fabric signals, read in the node (python3 -m twin.node.ebpf counters
        --json): {"ports": {dev: {field: value}}, "ports_map_id": id, "slots": {dev:
        slot}}; None where it has none (no queue, no RFC 6040 program)."""
        out = rt.exec(node, [*rt.python_argv(), "-m", "twin.node.ebpf", "counters", "--json"])
        report = json.loads(out.stdout)
        if report.get("ports_map_id") is None:
            return None
        return {"ports": report["ports"], "ports_map_id": report["ports_map_id"],
                "slots": report["slots"]}

    def counters(self, rt, node: str) -> dict | None:
        """What the node's SIDs did, counted by the data plane ({"counters": {name:
        packets}, "programs": {dev: ...}, "map_id": ...}); None where it keeps none."""
        return None


def read_filters(rt, node: str, hooks: list[tuple[str, str]]) -> list[tc.Shown]:
    """What tc shows on each (device, direction) of the node, read back in one `tc -j
    -batch` (twin.node.ebpf.tc: typed records, and an error, not a traceback, where tc's
    answer is not what it should be)."""
    proc = rt.exec(node, tc.ARGV, input=tc.batch(hooks), check=False)
    return tc.read_batch(proc.stdout, hooks)


# What iproute2 adds to each failed line of a `-force -batch`, besides the kernel's reason.
BATCH_NOISE = ("Command failed -:", "We have an error talking to the kernel")


def delete_all(rt, node: str, argv: list[str], lines: str, gone: tuple[str, ...]) -> None:
    """Run a batch of deletions (`ip|tc -force -batch -`): a line whose object was gone
    already (the kernel's reason contains one of `gone`) is fine, because a fault is
    applied again on top of itself; any other failure is raised, naming the kernel's
    words (a command that is not there, a device that is not, a refusal)."""
    proc = rt.exec(node, argv, input=lines, check=False)
    if proc.returncode == 0:
        return
    left = [line for line in proc.stderr.splitlines() if line.strip()
            and not line.startswith(BATCH_NOISE) and not any(g in line for g in gone)]
    if left or not proc.stderr.strip():
        raise CommandFailed([*argv, f"({node})"], proc.returncode, "\n".join(left))


# Every backend by name, as its one instance; `auto` is resolved by `pick`, and listed
# first among the valid names of a miss.
DATAPLANES: Registry[Dataplane] = Registry("data plane", make=lambda cls: cls(),
                                           also=("auto",))
register = DATAPLANES.register
get = DATAPLANES.get  # a miss: UnknownName (a UsageError) listing the valid names
AUTO_ORDER = ["seg6local", "ebpf"]  # `auto` takes the first the kernel can run


def pick(requested: str, unavailable: dict[str, str | None]) -> tuple[str, str]:
    """Resolve `auto` (or check an explicit choice) against what a kernel can run:
    `unavailable` maps each backend to why it cannot run there, or None. Returns
    (name, why); a UsageError (exit 2) when nothing can, naming the kernel options."""
    if requested != "auto":
        get(requested)
        reason = unavailable.get(requested)
        if reason:
            raise UsageError(f"data plane {requested} cannot run here: {reason}; it needs "
                             f"{DATAPLANES[requested].needs} (or try --dataplane auto)")
        return requested, "asked for"
    skipped = []
    for name in AUTO_ORDER:
        reason = unavailable.get(name, "not probed")
        if reason is None:
            return name, ("auto: the kernel has seg6local" if not skipped
                          else f"auto: {'; '.join(skipped)}")
        skipped.append(f"no {name} ({reason})")
    needs = "; ".join(f"{n}: {DATAPLANES[n].needs}" for n in AUTO_ORDER)
    raise UsageError(f"no SRv6 data plane can run on this kernel: {'; '.join(skipped)}. "
                     f"Boot a kernel with either ({needs}); Debian's linux-image-amd64 "
                     "has both")
