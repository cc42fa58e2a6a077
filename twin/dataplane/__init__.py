"""The data plane: who runs a node's local SIDs (twin.fabric.plan.LocalSid).

    seg6local  the kernel's own SRv6 (CONFIG_IPV6_SEG6_LWTUNNEL): uN as a route
               `End flavors next-csid lblen 32 nflen 16` on an always-up anchor,
               decap as `End.DT6 table local` on each host port
    ebpf       eBPF programs at TC ingress (CONFIG_NET_CLS_BPF, clsact;
               twin.node.ebpf): uN on every switch port, decap on each host port,
               and BPF lwt routes for encap

Static routes are the same on both; only local SIDs differ. A backend turns a
node's plan into its node program (pure: twin.dataplane.program), reads its SIDs
back for verify with an oracle of its own (`ip -j -6 route show`; `tc -j filter
show` and the kernel's program tag), takes them away for a sid-loss fault, and
adds an encap route for traffic the kernel itself originates (the bench's TCP).

`pick` resolves `auto` once per lab: seg6local where the kernel has it, else
ebpf; the choice and its reason are kept with the lab (twin status).
Backends register by name in DATAPLANES (a twin.registry.Registry); `get` names
the valid ones when a lookup misses.
"""

from __future__ import annotations

from twin.dataplane import ebpf, seg6local  # noqa: F401  (registration)
from twin.dataplane.base import AUTO_ORDER, DATAPLANES, Dataplane, get, pick

__all__ = ["AUTO_ORDER", "DATAPLANES", "Dataplane", "get", "pick"]
