"""Render a plan to files (pure): the containerlab topology and per-node configs.

    lab/build/<lab>/<lab>.clab.yml          containerlab topology (kind: linux nodes)
    lab/build/<lab>/config/<node>/node.json every planned fact about the node
    lab/build/<lab>/config/<node>/program.json   its node program on the lab's data
                                                 plane (twin.dataplane.program): what
                                                 twin.node.runner runs in the node
    lab/build/<lab>/config/<node>/routes.batch   the program's `ip -batch` part
    lab/build/<lab>/config/<node>/sysctl.conf    its sysctls
    lab/build/<lab>/config/<node>/tc.batch       its shaping, where links have a rate
    lab/build/<lab>/config/<node>/frr.conf       routing: bgp, a router: its FRR config
    lab/build/<lab>/config/<node>/daemons        routing: bgp, a router: FRR's daemons
                                                 (twin.fabric.frr)

The topology file is the single description every runtime deploys. Each
node's config directory is bind-mounted read-only at /etc/mrc-twin, so a
person inside a node can read (or re-apply) what it should hold:

    PYTHONPATH=/opt/mrc-twin python3 -m twin.node.runner /etc/mrc-twin/program.json

Rendering is deterministic: the same spec gives byte-identical files.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import yaml

from twin.dataplane import get as get_dataplane
from twin.dataplane.program import FILE as PROGRAM_FILE
from twin.dataplane.program import NodeProgram
from twin.fabric import bgp, frr
from twin.fabric.plan import NodePlan, Plan
from twin.fabric.routing import STATIC_SRV6

ROUTER_IMAGE = "mrc-twin/router:latest"
HOST_IMAGE = "mrc-twin/host:latest"
CONFIG_MOUNT = "/etc/mrc-twin"
LABEL = "mrc-twin"  # label key prefix on every node


BOOT_ENV = "MRC_TWIN_BOOT"  # a node with it set to 1 configures itself at boot
CODE_MOUNT = "/opt/mrc-twin"  # the project's code, bind-mounted read-only into every node
DEFAULT_CODE_DIR = "../../.."  # the checkout, seen from lab/build/<lab>/
NO_DATAPLANE = "none"  # a program's data plane in routing: bgp (plain IPv6, no SID)


def render(plan: Plan, dataplane: str, code_dir: str = DEFAULT_CODE_DIR) -> dict[str, str]:
    """Every file of the lab's build directory, as relative path -> text.

    `dataplane` is a backend's name (twin.dataplane): it decides how the nodes'
    programs install their local SIDs; in routing: bgp no node has any, the programs
    say `dataplane: none` and routers get FRR's files. `code_dir` is the project checkout relative
    to the build directory; nodes see its `twin/` package at /opt/mrc-twin/twin, so
    code changes need no image rebuild.
    """
    fabric = plan.fabric
    backend = get_dataplane(dataplane)
    files = {f"{fabric.name}.clab.yml": clab_topology(plan, code_dir)}
    spec = fabric.spec
    for name, node in plan.nodes.items():
        program = backend.program(node)
        if spec.bgp is not None:
            program = replace(program, dataplane=NO_DATAPLANE)
            if node.bgp is not None:
                files[f"config/{name}/frr.conf"] = frr.frr_conf(fabric.name, node, spec.bgp)
                files[f"config/{name}/daemons"] = frr.daemons(fabric.name, node, spec.bgp)
        files[f"config/{name}/node.json"] = json.dumps(node.to_dict(), indent=2,
                                                       sort_keys=True) + "\n"
        files[f"config/{name}/{PROGRAM_FILE}"] = program.to_json()
        files[f"config/{name}/routes.batch"] = iproute2_batch(fabric.name, program, node)
        files[f"config/{name}/sysctl.conf"] = sysctl_conf(program)
        if node.tier == "host":
            files[f"config/{name}/endpoint.json"] = endpoint_config(plan, name)
        if program.tc:
            files[f"config/{name}/tc.batch"] = "\n".join(program.tc) + "\n"
    return files


def endpoint_config(plan: Plan, host: str) -> str:
    """What the host's MRC endpoint daemon needs: who it is, its ports, the fabric, and
    in routing: bgp its framing (twin.mrc.framing): `framing: udp-entropy` and its port
    address per plane, `port_addresses` (a peer's come from the spec's bgp.link_prefix
    by the same formula, twin.fabric.bgp.host_link). A static-srv6 host's file has
    neither key: srv6 framing is the default."""
    fabric = plan.fabric
    ports = {str(p): fabric.host_port(p) for p in fabric.nic_planes}
    doc = {"host": host, "nic": plan.nic_address(host), "ports": ports,
           "spec": json.dumps(fabric.spec.to_dict(), sort_keys=True)}
    if fabric.spec.bgp is not None:
        doc["framing"] = "udp-entropy"
        doc["port_addresses"] = {str(p): bgp.host_link(fabric, host, p).host_address
                                 for p in fabric.nic_planes}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def clab_topology(plan: Plan, code_dir: str = DEFAULT_CODE_DIR) -> str:
    """containerlab's topology schema, and nothing it does not define.

    Links carry no `mtu` (configure sets every interface's MTU from the plan),
    and capabilities and sysctls are not topology keys: a runtime applies
    them itself.
    """
    fabric = plan.fabric
    spec = fabric.spec
    nodes = {}
    for n in fabric.nodes:
        labels = {f"{LABEL}.lab": fabric.name, f"{LABEL}.tier": n.tier.value}
        if n.plane is not None:
            labels[f"{LABEL}.plane"] = str(n.plane)
        if n.rack is not None:
            labels[f"{LABEL}.rack"] = str(n.rack)
        if spec.routing != STATIC_SRV6:  # absent by default: static topologies keep their bytes
            labels[f"{LABEL}.routing"] = spec.routing
        nodes[n.name] = {
            "kind": "linux",
            "image": HOST_IMAGE if n.tier.value == "host" else ROUTER_IMAGE,
            "group": n.tier.value,
            "network-mode": "none",
            "env": {BOOT_ENV: "1"},  # images/mrc-twin-boot: configure from /etc/mrc-twin
            "labels": labels,
            "binds": [f"config/{n.name}:{CONFIG_MOUNT}:ro",
                      f"{code_dir}/twin:{CODE_MOUNT}/twin:ro"],
        }
    links = [{"endpoints": [str(lk.a), str(lk.b)]} for lk in fabric.links]
    doc = {"name": fabric.name, "topology": {"nodes": nodes, "links": links}}
    about = f"# {spec.description}\n" if spec.description else ""
    head = (f"# containerlab topology for lab {fabric.name}, rendered by mrc-twin.\n{about}"
            f"# Deploy with `twin up {fabric.name} --runtime containerlab|docker|netns`: each\n"
            "# runtime deploys this file, then twin programs every node's routes. Deployed\n"
            f"# by anything else (`containerlab deploy -t`), nodes with {BOOT_ENV}=1 program\n"
            "# themselves at boot from config/<node>/ (images/mrc-twin-boot).\n")
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=100)


def iproute2_batch(lab: str, program: NodeProgram, node: NodePlan | None = None) -> str:
    """The program's `ip -batch` part, for a person to read or apply by hand."""
    if node is not None and node.routing != STATIC_SRV6:
        what = ("addresses; FRR (frr.conf) installs every route" if node.bgp is not None
                else "addresses and one route per plane")
        head = f"# {program.node} in lab {lab}: {what} (routing: {node.routing})."
    else:
        head = (f"# {program.node} in lab {lab}: addresses and static routes, and the local "
                f"SIDs on the {program.dataplane} data plane.")
    lines = [head,
             "# Apply by hand with: ip -force -batch routes.batch   (every line replaces)"]
    if program.anchor:
        lines += ["", f"# {program.anchor}: always-up anchor for this switch's own uN SID",
                  f"link add {program.anchor} type dummy   # or ifb where dummy is missing",
                  f"link set {program.anchor} up"]
    lines += ["", *program.ip]
    for b in program.bpf:
        lines.append(f"# {b.kind} {b.prefix} on {b.dev}: an eBPF program at TC ingress "
                     "(program.json; `tc filter show dev " + b.dev + " ingress`)")
    for q in program.queues:
        lines.append(f"# queue on {q.dev}: an eBPF program at TC egress, {q.rate_bps} bit/s, "
                     f"CE {q.ecn_min}..{q.ecn_max} bytes{'' if q.mark else ' (off: last hop)'}"
                     f", trim past {q.trim}, drop past {q.drop} (`tc filter show dev {q.dev} "
                     "egress`)")
    return "\n".join(lines) + "\n"


def sysctl_conf(program: NodeProgram) -> str:
    pairs = list(program.node_sysctls) + list(program.interface_sysctls)
    return "".join(f"{k} = {v}\n" for k, v in pairs)


def write_build(files: dict[str, str], build_dir: Path) -> list[Path]:
    """Write rendered files; only touch those whose content changed."""
    written = []
    for rel, text in sorted(files.items()):
        path = build_dir / rel
        if path.exists() and path.read_text() == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
