"""eBPF programs as the data plane (CONFIG_NET_CLS_BPF, clsact; twin.node.ebpf).

    uN     a TC ingress program on every port of a switch, holding the switch's /48
    decap  a TC ingress program on each host port, holding that port's /48
    encap  a BPF lwt xmit route <dst>/128 that pushes the outer header (H.Encaps.Red)

No anchor device and no SID route: a program sees a packet before the kernel's
route lookup, rewrites it (shift, or strip the outer header) and hands it back,
and the static routes do the rest. Each node's SIDs are constants of the program
it loads, so the kernel's tag for a program names its SID: verify reads the
attached programs back with `tc -j filter show` (name and tag, an oracle the
kernel computes over what it loaded) and compares them with the tags the plan
implies. docs/ebpf.md has the semantics, the counters and where they differ from
seg6local.
"""

from __future__ import annotations

import json

from twin.dataplane.base import Dataplane, delete_all, read_filters, register
from twin.dataplane.program import BpfAttach
from twin.fabric.plan import UN, NodePlan
from twin.node import ebpf
from twin.node.ebpf import port_slot, tc


@register
class Ebpf(Dataplane):
    name = "ebpf"
    needs = ("CONFIG_BPF_SYSCALL, CONFIG_NET_CLS_BPF and CONFIG_NET_SCH_INGRESS (clsact); "
             "CONFIG_LWTUNNEL_BPF for encap routes")
    keeps_counters = True
    encap_refuses_udp_gso = ("bpf_lwt_push_encap takes TCP GSO skbs only: a UDP_SEGMENT "
                             "skb gets ENOTSUPP, and the encap program drops it "
                             "(drop_malformed)")

    def sids(self, node: NodePlan) -> tuple[str | None, list[str], list[BpfAttach]]:
        bpf = []
        for sid in node.sids:
            if sid.behavior == UN:
                bpf += [BpfAttach(i.name, UN, sid.prefix) for i in node.interfaces]
            else:  # decap, with RFC 6040's copy inward counted on the port
                bpf.append(BpfAttach(sid.dev, sid.behavior, sid.prefix, port_slot(sid.dev)))
        return None, [], bpf

    def is_sid_route(self, entry: dict) -> bool:
        return False  # its SIDs are programs, not routes

    def check_sids(self, rt, node: NodePlan, routes_json: list[dict]) -> list[str]:
        wanted = self.sids(node)[2]
        if not wanted:
            return []
        shown = read_filters(rt, node.name, [(b.dev, tc.INGRESS) for b in wanted])
        problems = []
        for b, got in zip(wanted, shown, strict=True):
            what = f"eBPF {b.kind} {b.prefix} at {b.dev} ingress"
            if got.error:
                problems.append(f"{what}: could not read its filters back ({got.error})")
                continue
            found = got.at(ebpf.PREF)
            if found is None:
                problems.append(f"missing {what} (no program attached)")
                continue
            tags = ebpf.expected_tags(b.kind, b.prefix, b.slot)
            if found.name != ebpf.filter_name(b.kind, b.prefix) or found.tag not in tags:
                problems.append(f"{what}: attached is {found.name!r} (program "
                                f"{found.prog_id}, tag {found.tag}), planned tag "
                                f"{' or '.join(sorted(tags))}")
        return problems

    def remove_sids(self, rt, node: NodePlan) -> None:
        devs = sorted({b.dev for b in self.sids(node)[2]})
        lines = "".join(f"filter del dev {d} ingress pref {ebpf.PREF}\n" for d in devs)
        delete_all(rt, node.name, ["tc", "-force", "-batch", "-"], lines,
                   gone=("Cannot find specified filter",))  # applied again: already gone

    def add_encap(self, rt, node: str, dst: str, dev: str, src: str, path: str,
                  flow_label: int = 0) -> None:
        rt.exec(node, [*rt.python_argv(), "-m", "twin.node.ebpf", "encap", dst, dev, src, path,
                       "--flow-label", str(flow_label)])

    def counters(self, rt, node: str) -> dict | None:
        """The node's programs and counters, read in the node (python3 -m twin.node.ebpf
        counters --json: `tc -j filter show`, then the programs' counters map)."""
        out = rt.exec(node, [*rt.python_argv(), "-m", "twin.node.ebpf", "counters", "--json"])
        report = json.loads(out.stdout)
        for key in ("egress", "ports", "ports_map_id", "slots"):  # the fabric signals'
            report.pop(key, None)
        return {"counters": report.pop("counters"), "map_id": report.pop("map_id", None),
                "programs": report}

    def del_encap(self, rt, node: str, dst: str, dev: str) -> None:
        rt.exec(node, ["ip", "-6", "route", "del", f"{dst}/128", "dev", dev], check=False)
