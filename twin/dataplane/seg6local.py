"""The kernel's own SRv6 as the data plane (CONFIG_IPV6_SEG6_LWTUNNEL).

    uN     route <sid>/48 encap seg6local action End flavors next-csid lblen 32 nflen 16
           dev sr0      (an always-up anchor: the kernel deletes a route whose device
                        goes down, and one failed link must not take the SID with it)
    decap  route <sid>/48 encap seg6local action End.DT6 table local dev <port>
                        (`table main` silently drops: local addresses live in 255)
    encap  route <dst>/128 encap seg6 mode encap.red segs <path> dev <port>

iproute2 installs them all: pyroute2 0.9 accepts a seg6local `flavors` key and
silently drops it (DESIGN.md section 5). `ip -j -6 route show` reads them back.

End.DT6 does not apply RFC 6040 (net/ipv6/seg6_local.c: decap_and_validate pulls
the outer header and leaves the inner one as it was), so on a fabric with signals
each host port also gets a small eBPF program at its TC ingress (`ecn`,
twin.node.ebpf) that copies the outer CE and trim DSCP inward first.
"""

from __future__ import annotations

from twin.dataplane.base import Dataplane, delete_all, register
from twin.dataplane.program import BpfAttach
from twin.fabric.plan import DECAP, PROTO, UN, LocalSid, NodePlan
from twin.node.ebpf import port_slot

ANCHOR = "sr0"  # always-up device carrying a switch's uN SID (dummy, else ifb)


def sid_route(sid: LocalSid) -> dict:
    """The route a SID is, in the keys `ip -j -6 route show` reads it back with."""
    if sid.behavior == UN:
        return {"dst": sid.prefix, "dev": ANCHOR, "action": "End", "flavors": ["next-csid"],
                "lblen": sid.block_len, "nflen": sid.usid_len}
    return {"dst": sid.prefix, "dev": sid.dev, "action": "End.DT6", "table": "local"}


def route_line(sid: LocalSid) -> str:
    r = sid_route(sid)
    words = ["route", "replace", r["dst"], "encap", "seg6local", "action", r["action"]]
    if sid.behavior == UN:
        words += ["flavors", "next-csid", "lblen", str(r["lblen"]), "nflen", str(r["nflen"])]
    else:
        words += ["table", r["table"]]
    return " ".join([*words, "dev", r["dev"], "proto", PROTO])


def _observed(entry: dict) -> dict:
    keys = ("dst", "dev", "action", "flavors", "lblen", "nflen", "table")
    out = {k: entry[k] for k in keys if k in entry}
    out["table"] = str(out["table"]) if "table" in out else None
    return out


def _show(r: dict) -> str:
    extra = [*r.get("flavors", ()), *(f"{k} {r[k]}" for k in ("lblen", "nflen", "table")
                                       if r.get(k) is not None)]
    return " ".join([r.get("action") or "?", *map(str, extra), "dev", r.get("dev", "?")])


@register
class Seg6Local(Dataplane):
    name = "seg6local"
    needs = "CONFIG_IPV6_SEG6_LWTUNNEL (seg6local routes)"

    def sids(self, node: NodePlan) -> tuple[str | None, list[str], list[BpfAttach]]:
        """The SIDs as routes; on a fabric with signals, RFC 6040's copy inward as an
        eBPF program at each host port's ingress (End.DT6 copies nothing)."""
        anchor = ANCHOR if any(s.behavior == UN for s in node.sids) else None
        ecn = [BpfAttach(s.dev, "ecn", s.prefix, port_slot(s.dev)) for s in node.sids
               if node.signals and s.behavior == DECAP]
        return anchor, [route_line(s) for s in node.sids], ecn

    def is_sid_route(self, entry: dict) -> bool:
        return entry.get("encap") == "seg6local"

    def check_sids(self, rt, node: NodePlan, routes_json: list[dict]) -> list[str]:
        seen = {e["dst"]: _observed(e) for e in routes_json if self.is_sid_route(e)}
        problems = []
        for sid in node.sids:
            want = sid_route(sid)
            got = seen.pop(sid.prefix, None)
            if got is None:
                problems.append(f"missing local SID {sid.describe()}")
            elif any(got.get(k) != (str(v) if k == "table" else v) for k, v in want.items()):
                problems.append(f"local SID {sid.prefix} is {_show(got)}, planned {_show(want)}")
        problems += [f"extra local SID {dst} {_show(r)}" for dst, r in sorted(seen.items())]
        return problems

    def remove_sids(self, rt, node: NodePlan) -> None:
        lines = "".join(f"route del {r['dst']} dev {r['dev']}\n"
                        for r in map(sid_route, node.sids))
        delete_all(rt, node.name, ["ip", "-force", "-batch", "-"], lines,
                   gone=("No such process",))  # applied again: the routes are gone already

    def add_encap(self, rt, node: str, dst: str, dev: str, src: str, path: str,
                  flow_label: int = 0) -> None:
        rt.exec(node, ["ip", "-6", "route", "replace", f"{dst}/128", "encap", "seg6", "mode",
                       "encap.red", "segs", path, "dev", dev, "src", src])

    def del_encap(self, rt, node: str, dst: str, dev: str) -> None:
        rt.exec(node, ["ip", "-6", "route", "del", f"{dst}/128", "dev", dev], check=False)
