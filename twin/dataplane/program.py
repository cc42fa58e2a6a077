"""A node's program: everything that makes a bare node its plan, as data (pure).

One description, one runner (twin.node.runner), three ways to run it:

    in place   twin runs it on a thread moved into the node's namespace (a node on
               this machine: the netns and docker runtimes; `twin restart`, a
               reverted fault): `run_inside`
    at boot    the node configures itself (images/mrc-twin-boot, containerlab,
               clabernetes, the docker-boot runtime)
    over exec  an attached fabric on another machine (`twin attach`): `push`

The data plane decides what a program holds for the node's local SIDs: seg6local
routes in the `ip` batch, or eBPF programs in `bpf` (twin.dataplane). Everything
else is the same on both, the fabric signals included: `queues`, an eBPF program
at the TC egress of each shaped switch port (before its tbf, twin.fabric.congestion),
and on seg6local an `ecn` program at each host port's ingress (RFC 6040's copy
inward, which End.DT6 does not do; on ebpf the decap program does it). Rendered
to lab/build/<lab>/config/<node>/program.json;
`routes.batch`, `sysctl.conf` and `tc.batch` beside it are its parts as a person
applies them by hand.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from twin import nsenter
from twin.errors import CommandFailed, LabError
from twin.fabric.congestion import PortQueue, tbf_args, tbf_burst
from twin.fabric.plan import NodePlan
from twin.node import runner

__all__ = ["BpfAttach", "NodeProgram", "PortQueue", "load", "path", "push", "run_inside",
           "tbf_burst", "tc_lines"]

FILE = "program.json"


@dataclass(frozen=True)
class BpfAttach:
    """One eBPF program at a port's TC ingress: uN (a switch's SID, on every port),
    decap (a host port's SID, on that port), or ecn (RFC 6040's copy inward before
    seg6local's End.DT6, on a host port)."""

    dev: str
    kind: str  # plan.UN | plan.DECAP | "ecn"
    prefix: str  # the SID's /48
    slot: int | None = None  # decap, ecn: the port's slot in the node's port map


@dataclass(frozen=True)
class NodeProgram:
    node: str
    dataplane: str  # the backend that wrote it
    node_sysctls: tuple[tuple[str, str], ...]  # before any interface exists
    interfaces: tuple[str, ...]  # waited for at boot (links are wired after start)
    interface_sysctls: tuple[tuple[str, str], ...]
    anchor: str | None  # an always-up device the seg6local backend hangs uN on
    ip: tuple[str, ...]  # `ip -batch` lines: links, addresses, routes (each replaces)
    tc: tuple[str, ...]  # `tc -batch` lines: shaping
    bpf: tuple[BpfAttach, ...] = ()
    queues: tuple[PortQueue, ...] = ()  # eBPF at TC egress of shaped switch ports

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_dict(cls, d: dict) -> NodeProgram:
        return cls(node=d["node"], dataplane=d["dataplane"],
                   node_sysctls=tuple(tuple(p) for p in d["node_sysctls"]),
                   interfaces=tuple(d["interfaces"]),
                   interface_sysctls=tuple(tuple(p) for p in d["interface_sysctls"]),
                   anchor=d.get("anchor"), ip=tuple(d["ip"]), tc=tuple(d["tc"]),
                   bpf=tuple(BpfAttach(**b) for b in d.get("bpf", ())),
                   queues=tuple(PortQueue(**q) for q in d.get("queues", ())))


PROBE_BAND_QDISC = "pfifo_fast"  # tbf's child: band 0 (TC_PRIO_CONTROL) goes first


def tc_lines(node: NodePlan) -> list[str]:
    """`tc -batch` lines shaping every interface that has a rate: a root tbf, and under
    it a pfifo_fast in place of tbf's own fifo, so that the probe class (skb->priority
    TC_PRIO_CONTROL: the switch's queue program sets it, a host's prober socket asks for
    it) leaves ahead of the data queued there (docs/ebpf.md, "The probe class")."""
    out = []
    for ifc in node.interfaces:
        if ifc.rate_bps:
            out.append(f"qdisc replace dev {ifc.name} root handle 1: tbf "
                       + " ".join(tbf_args(ifc.rate_bps, ifc.mtu)))
            out.append(f"qdisc replace dev {ifc.name} parent 1:1 handle 10: "
                       + PROBE_BAND_QDISC)
    return out


def path(build_dir: str | Path, node: str) -> Path:
    return Path(build_dir) / "config" / node / FILE


def load(build_dir: str | Path | None, node: str) -> NodeProgram:
    """The program rendered for a node at `twin up`, or a LabError saying how to get one."""
    if build_dir is None:
        raise LabError(f"{node}: this runtime has no build directory to read its program from")
    p = path(build_dir, node)
    try:
        return NodeProgram.from_dict(json.loads(p.read_text()))
    except FileNotFoundError:
        raise LabError(f"{node}: no {p} (a lab brought up by an older twin?); "
                       "`twin down` it and `twin up` again") from None
    except (ValueError, KeyError, TypeError) as e:
        raise LabError(f"{node}: {p} is not a node program ({e})") from None


RUNNER = "twin.node.runner"


def run_inside(netns_path: str, program: NodeProgram, owner: str = "") -> None:
    """Run a node program in this process, on this thread moved into the node's network
    namespace: no interpreter to start per node. A failed step is a LabError naming the
    node and the step."""
    try:
        with nsenter.inside(netns_path):
            runner.run(asdict(program), owner)
    except runner.StepFailed as e:
        raise LabError(f"{program.node}: {e}") from None


def push(rt, program: NodeProgram) -> None:
    """Run a node program in its node with the one runner (twin.node.runner), through
    the runtime's exec: a process in the node's namespace on this machine, or a command
    in a node of an attached fabric. A failed step is a LabError naming node and step."""
    argv = [*rt.python_argv(), "-m", RUNNER, "-"]
    if rt.owner.tag:
        argv += ["--owner", rt.owner.tag]
    try:
        rt.exec(program.node, argv, input=program.to_json(), timeout=120)
    except CommandFailed as e:
        said = " ".join(str(e.stderr).split()).removeprefix("runner: ")
        raise LabError(f"{program.node}: {said or e}") from None
