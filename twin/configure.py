"""Apply a node's plan inside its network namespace (the thin kernel layer).

pyroute2 does links, addresses and the routes it can express. iproute2 does
the uN routes: pyroute2 0.9 accepts a seg6local `flavors` key and silently
drops it, installing plain End (DESIGN.md section 5). tc does shaping.

Everything here is idempotent (`replace`), so re-applying a node's plan is
how a link that came back up gets its addresses and routes again: the kernel
deletes both when an interface goes admin-down.
"""

from __future__ import annotations

import shutil

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from twin import nsenter
from twin.errors import LabError
from twin.fabric.plan import NodePlan, Route
from twin.fabric.render import tc_lines

IFA_F_NODAD = 0x02
RTPROT_STATIC = 4
RT_TABLE_LOCAL = 255


def needs_iproute2(route: Route) -> bool:
    return bool(route.flavors)


def pyroute2_route(route: Route, oif: int) -> dict:
    """The pyroute2 `route('replace', ...)` arguments for a route it can express."""
    args = {"dst": route.dst, "family": 10, "oif": oif, "proto": RTPROT_STATIC}
    if route.via:
        args["gateway"] = route.via
    if route.action:
        encap = {"type": "seg6local", "action": route.action}
        if route.table:
            encap["table"] = RT_TABLE_LOCAL if route.table == "local" else int(route.table)
        args["encap"] = encap
    return args


def _ensure_anchor(ipr: IPRoute, name: str) -> int:
    found = ipr.link_lookup(ifname=name)
    if not found:
        for kind in ("dummy", "ifb"):  # dummy where the kernel has it, else ifb
            try:
                ipr.link("add", ifname=name, kind=kind)
                break
            except NetlinkError:
                continue
        else:
            raise LabError(f"cannot create SID anchor {name}: kernel has neither dummy nor ifb")
        found = ipr.link_lookup(ifname=name)
    ipr.link("set", index=found[0], state="up")
    return found[0]


def configure_node(node: NodePlan, path: str, owner_tag: str = "") -> None:
    """Program one node. `path` is its network namespace file; each of its links
    gets `owner_tag` as its ifalias (twin.owner)."""
    with nsenter.inside(path):
        nsenter.write_sysctls(list(node.node_sysctls))
        missing = nsenter.write_sysctls(node.interface_sysctls())
        if missing:
            raise LabError(f"{node.name}: interfaces missing ({', '.join(missing)}); "
                           "were the links wired?")
        ipr = IPRoute()
    try:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        if node.anchor:
            _ensure_anchor(ipr, node.anchor)
        index = {"lo": ipr.link_lookup(ifname="lo")[0]}
        for a in node.loopback:
            addr, plen = a.split("/")
            ipr.addr("replace", index=index["lo"], address=addr, prefixlen=int(plen))
        for ifc in node.interfaces:
            idx = ipr.link_lookup(ifname=ifc.name)[0]
            index[ifc.name] = idx
            ipr.link("set", index=idx, mtu=ifc.mtu, state="up",
                     **({"ifalias": owner_tag} if owner_tag else {}))
            for a in ifc.addresses:
                addr, plen = a.split("/")
                ipr.addr("replace", index=idx, address=addr, prefixlen=int(plen),
                         flags=IFA_F_NODAD)
        if node.anchor:
            index[node.anchor] = ipr.link_lookup(ifname=node.anchor)[0]
        for r in node.routes:
            if not needs_iproute2(r):
                ipr.route("replace", **pyroute2_route(r, index[r.dev]))
    finally:
        ipr.close()
    batch = [r.iproute2() for r in node.routes if needs_iproute2(r)]
    if batch:
        nsenter.run(path, ["ip", "-batch", "-"], input="\n".join(batch) + "\n")
    tc = tc_lines(node)
    if tc:
        if shutil.which("tc") is None:
            raise LabError("the spec sets a link rate but `tc` is not installed")
        nsenter.run(path, ["tc", "-batch", "-"], input="\n".join(tc) + "\n")
