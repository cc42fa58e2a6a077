"""Tables as iproute2 prints and takes them: `ip -j -6 route show`, `ip -6 route show`, `ip -batch`.

    iproute2-json   <node>.json    the JSON array `ip -j -6 route show` prints on the node
    iproute2-batch  <node>.batch   `ip -6 route show` lines, or `ip -batch` lines (`route
                                   add|replace|append ...`, `-6 ` or `ip -6 ` before them
                                   allowed), `#` comments; the two kinds may be mixed

Both read through one path. Each route first becomes an *entry* in the JSON
form's keys (dst, type, gateway, dev, protocol, encap, action, table, flavors,
lblen, nflen, nh6, ...; the route's own table is `route_table`), and one
function, `item`, says what twin makes of an entry:

    dst via G dev D, dst dev D               Route (dst: `default` is ::/0, a bare address /128)
    blackhole|unreachable|prohibit dst       Route of that type (no dev, no next hop)
    seg6local End flavors next-csid          LocalSid uN (lblen, nflen: block and uSID bits;
                                             absent, the kernel's 32 and 16)
    seg6local End.DT6 table local (or 255)   LocalSid decap on dev
    any other seg6local action               Dropping: why a packet of this fabric dies there
    proto kernel; local, multicast, anycast, broadcast; a table other than main
                                             skipped: addresses and connected routes belong
                                             to the addressing plan (README, "Addressing")
    encap seg6/bpf/..., nexthop (multipath), End.X next-csid (uA), throw, nat
                                             a problem: twin's tables cannot hold it

`table` means two things. In a seg6local route it is the action's lookup table
(End.DT6 table local); the route's own table comes after `dev`, in the text
and in the JSON alike, where the kernel prints the key `table` twice. The JSON
is read with its pairs in order so the two stay apart.

Writing: the JSON is the line `ip -j -6 route show` prints for those routes (its
keys, in its order, tests/data/routes), the batch the lines the lab installs
(`route replace ... proto static`). A Dropping's `what` is its action as written
after `encap`, so both write it back as read. Items keep the file's order.

Decisions. End.DT46 is Dropping, not decap: the kernel takes it with `vrftable`
only (`table local` is refused, tests/data/routes/zoo.batch line 23), and a
VRF's table does not hold the NIC address, which lives on lo in the default
VRF. A destination twice in one node is a problem (twin holds one route per
destination), except for `route replace`, which replaces it as the kernel does:
the last line wins.
"""

from __future__ import annotations

import ipaddress
import json
from collections import deque
from collections.abc import Callable
from typing import ClassVar

from twin.dataplane.seg6local import route_line, sid_route
from twin.errors import Problem, SpecError
from twin.fabric.model import Fabric
from twin.fabric.plan import DECAP, DROPPING, PROTO, UN, UNICAST, LocalSid, Route
from twin.routes.formats.base import WHAT, Format, register
from twin.routes.formats.reading import clip, load_json, token
from twin.routes.tables import Dropping, NodeTables, Origin, key

Item = Route | LocalSid | Dropping
SKIPPED_TYPES = ("local", "multicast", "anycast", "broadcast")
MAIN, LOCAL = ("main", "254"), ("local", "255")
# Words of `ip -6 route show` / `route add` that take a value, and the entry key it goes to.
ROUTE_KEYS = {"via": "gateway", "proto": "protocol", "table": "route_table", "src": "prefsrc",
              **{k: k for k in ("dev", "metric", "pref", "scope", "from", "mtu", "advmss",
                                "hoplimit", "expires", "error")}}
FLAGS = ("onlink", "linkdown", "dead", "offload", "trap", "rt_offload", "rt_trap",
         "rt_offload_failed", "pervasive", "notify")
TYPES = (UNICAST, *DROPPING, *SKIPPED_TYPES, "throw", "nat")
# A seg6local action's own words, in the order iproute2 prints them.
ACTION_KEYS = ("srh", "table", "vrftable", "nh4", "nh6", "iif", "oif", "flavors", "lblen",
               "nflen")
ONE_NEXT_HOP = "MRC's static tables have one next hop per destination"
NEEDS_SRH = "{a} needs an SRH, and the fabric's packets carry their uSIDs in the destination " \
            "with none"
WHY = {  # why a packet of this fabric dies at a seg6local action twin does not install
    "End": NEEDS_SRH, "End.X": NEEDS_SRH, "End.T": NEEDS_SRH, "End.B6": NEEDS_SRH,
    "End.B6.Encaps": NEEDS_SRH, "End.BPF": NEEDS_SRH,
    "End.DX6": "End.DX6 sends the inner packet to {nh6} off this node, and no switch routes "
               "the NIC address it is for",
    **dict.fromkeys(("End.DX4", "End.DT4"), "{a} decapsulates IPv4 only, and the fabric's "
                                            "inner packets are IPv6"),
    "End.DX2": "{a} decapsulates Ethernet frames only, and the fabric's inner packets are IPv6",
    "End.DT46": "End.DT46 looks the inner packet up in a VRF's table (the kernel takes it "
                "with vrftable only), and the NIC address is on lo, in the default VRF",
    "End.DT6": "End.DT6 looks the inner packet up in {where}, where no NIC address lives "
               "(local addresses are in table local): every packet is dropped (DESIGN.md "
               "section 5, the End.DT6 trap)",
}


class _Bad(Exception):
    """An entry twin cannot read or hold: the message and a hint, for a Problem."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


# -- an entry, in twin's terms --------------------------------------------------------------


def item(entry: dict) -> Item | None:
    """What twin makes of one entry; None for what is not the operator's (skipped)."""
    kind = entry.get("type", UNICAST)
    if (entry.get("protocol") == "kernel" or kind in SKIPPED_TYPES
            or str(entry.get("route_table", "main")) not in MAIN):
        return None
    if not entry.get("dst"):
        raise _Bad("no dst", "every route names its destination, e.g. fcbb:bb00:200::/48")
    _check(entry)
    dst = _network(str(entry["dst"]))
    if "nexthops" in entry:
        raise _Bad(f"{dst} is a multipath route (nexthop ...): not supported",
                   f"{ONE_NEXT_HOP}; keep one `via G dev D` for it")
    if entry.get("encap") == "seg6local":
        return _sid(dst, entry)
    if entry.get("encap"):
        raise _Bad(f"{dst} is an encap {entry['encap']} route: not supported",
                   "twin's tables hold routes and local SIDs; encapsulating is the "
                   "endpoints' (the MRC daemon writes the path into the destination)")
    if kind in DROPPING:
        return Route(dst, "", type=kind)
    if kind != UNICAST:
        raise _Bad(f"route type {kind} is not supported",
                   f"twin holds unicast routes and the types that drop: {', '.join(DROPPING)}")
    if not entry.get("dev"):
        raise _Bad(f"{dst} has no dev", "twin's routes name their port: add `dev <port>`")
    via = _address(str(entry["gateway"])) if entry.get("gateway") else None
    return Route(dst, str(entry["dev"]), via)


def _check(entry: dict) -> None:
    """Values as the kernel prints them (a file written by hand may hold others): one
    word each, flavors a list of words, srh {"segs": [words]}, lblen and nflen numbers."""
    for k in ("dst", "type", "gateway", "dev", "encap", "action", *ACTION_KEYS[1:7]):
        if k in entry and not _word(entry[k]):
            raise _Bad(f"{k} {token(entry[k])} is not one word", "as `ip -j -6 route show` prints")
    srh = entry.get("srh", {"segs": []})
    lists = {"flavors": entry.get("flavors", []),
             "srh": srh.get("segs") if isinstance(srh, dict) else None}
    for k, v in lists.items():
        if not isinstance(v, list) or not all(map(_word, v)):
            raise _Bad(f"{k} {token(entry[k])} is not a list of words",
                       '"flavors": ["next-csid"], "srh": {"segs": ["fcbb:bb00:100::"]}')
    for k in ("lblen", "nflen"):
        if k in entry and not str(entry[k]).isdigit():
            raise _Bad(f"{k} {token(entry[k])} is not a number of bits", "e.g. lblen 32 nflen 16")


def _word(v: object) -> bool:
    return isinstance(v, str | int) and not isinstance(v, bool) and str(v).split() == [str(v)]


def _sid(dst: str, entry: dict) -> Item:
    action, flavors = entry.get("action"), entry.get("flavors") or []
    if action == "End" and "next-csid" in flavors:
        return LocalSid(dst, UN, "", int(entry.get("lblen", 32)), int(entry.get("nflen", 16)))
    if action == "End.DT6" and str(entry.get("table")) in LOCAL and not entry.get("vrftable"):
        if not entry.get("dev"):
            raise _Bad(f"{dst} End.DT6 has no dev", "a decap SID is on its port: dev <port>")
        return LocalSid(dst, DECAP, str(entry["dev"]))
    if action == "End.X" and "next-csid" in flavors:
        raise _Bad(f"{dst} is uA (End.X flavors next-csid): not supported",
                   "twin's SIDs are uN and decap: reach a neighbour through its uN and a "
                   "route via it")
    if action not in WHY:
        raise _Bad(f"{dst}: seg6local action {action} is not one twin knows",
                   f"twin reads {', '.join(WHY)}")
    where = f"VRF table {entry['vrftable']}" if entry.get("vrftable") else \
        f"table {entry.get('table', 'main')}"
    return Dropping(dst, _what(entry), WHY[action].format(a=action, nh6=entry.get("nh6"),
                                                          where=where))


def _what(entry: dict) -> str:
    """A seg6local action as written after `encap` (and read back by `_entry`)."""
    words = ["seg6local", "action", str(entry["action"])]
    for k in ACTION_KEYS:
        v = entry.get(k)
        if k == "srh" and v:
            words += ["srh", "segs", ",".join(v.get("segs", ()))]
        elif v not in (None, []):
            words += [k, ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    return " ".join([*words, "dev", str(entry.get("dev", ""))])


def _network(text: str) -> str:
    if text == "default":
        return "::/0"
    try:
        return ipaddress.IPv6Network(text if "/" in text else f"{text}/128").compressed
    except ValueError as e:
        if "host bits" in str(e):
            loose = ipaddress.IPv6Network(text, strict=False).compressed
            raise _Bad(f"dst {text} has host bits set", f"the network is {loose}") from None
        raise _Bad(f"dst {clip(text, 40)} is not an IPv6 prefix ({clip(e, 60)})",
                   "e.g. fcbb:bb00:200::/48, or default") from None


def _address(text: str) -> str:
    try:
        return ipaddress.IPv6Address(text).compressed
    except ValueError as e:
        raise _Bad(f"gateway {clip(text, 40)} is not an IPv6 address ({clip(e, 60)})",
                   "e.g. fe80::200") from None


# -- the JSON ---------------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    """One JSON object, with the route's own `table` (after `dev` in a seg6local route,
    anywhere in another) as `route_table`."""
    seg6local, out = ("encap", "seg6local") in pairs, {}
    for k, v in pairs:
        seg6local = seg6local and k != "dev"  # past `dev`, `table` is the route's
        out["route_table" if k == "table" and not seg6local else k] = v
    return out


def _json_entries(text: str, file: str) -> list:
    hint = "the output of `ip -j -6 route show`: [{...}, ...]"
    try:
        data = load_json(text, file, _pairs, repeatable=("table",))
    except json.JSONDecodeError as e:
        bad = Problem(f"{file} line {e.lineno}", f"not JSON: {e.msg} (column {e.colno})", hint)
    else:
        if isinstance(data, list):
            return data
        bad = Problem(file, f"a JSON {_kind(data)}, not an array", hint)
    raise SpecError(file, [bad], WHAT)


def _kind(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


# -- the text ---------------------------------------------------------------------------------


def _entry(words: list[str]) -> dict:
    """One route's words (an `ip -6 route show` line, or what follows `route add`) as
    an entry. Raises _Bad naming every word it does not know."""
    words, entry, unknown = deque(words), {}, []
    while words:
        w = words.popleft()
        if w in TYPES and "dst" not in entry and "type" not in entry:
            entry["type"] = w
        elif w == "encap":
            _encap(words, entry)
        elif w == "nexthop":
            entry["nexthops"] = list(words)
            break
        elif w in ROUTE_KEYS:
            entry[ROUTE_KEYS[w]] = _value(words, w)
        elif w in FLAGS:
            entry.setdefault("flags", []).append(w)
        elif w == "to" or "dst" not in entry:
            entry["dst"] = _value(words, w) if w == "to" else w
        else:
            unknown.append(w)
    if unknown:
        raise _Bad(f"unknown word{'s' if len(unknown) > 1 else ''} "
                   + ", ".join(map(token, unknown[:4])) + (" ..." if len(unknown) > 4 else ""),
                   "a line is an `ip -6 route show` line or `route add|replace|append ...`")
    return entry


def _encap(words: deque, entry: dict) -> None:
    entry["encap"] = _value(words, "encap")
    if entry["encap"] != "seg6local":
        words.clear()  # its words are its own: the route is refused as a whole (`item`)
        return
    if _value(words, "encap seg6local") != "action":
        raise _Bad("encap seg6local without `action`", "e.g. action End flavors next-csid")
    entry["action"] = _value(words, "action")
    while words and words[0] in (*ACTION_KEYS, "segs"):
        k = words.popleft()
        if k == "srh":  # as written: srh segs a,b
            _value(words, "srh")
            entry["srh"] = {"segs": _value(words, "srh segs").split(",")}
        elif k == "segs":  # as printed: segs 2 [ a b ]
            _value(words, "segs")
            entry["srh"] = {"segs": []}
            while (seg := _value(words, "segs [")) != "]":
                entry["srh"]["segs"] += [seg] if seg != "[" else []
        else:
            v = _value(words, k)
            entry[k] = v.split(",") if k == "flavors" else v


def _value(words: deque, after: str) -> str:
    if not words:
        raise _Bad(f"{after} without a value", "each keyword takes one, e.g. dev eth1")
    return words.popleft()


def _records(text: str) -> list[tuple[int, str | None, list[str]]]:
    """(line, verb, words) per route: the verb of a `route add|replace|append` line, None
    for an `ip -6 route show` line; `nexthop` lines join the route above them."""
    out: list[tuple[int, str | None, list[str]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words[:1] == ["nexthop"] and out:
            out[-1][2].extend(words)
        elif words:
            while words[:1] in (["ip"], ["-6"]):
                words.pop(0)
            verb = words[1] if words[:1] == ["route"] and len(words) > 1 else None
            out.append((n, verb, words[2:] if verb else words))
    return out


# -- one node's items, in order ---------------------------------------------------------------


class _Reader:
    """Collects a node's items with their origins, and every problem in its file."""

    def __init__(self, node: str, file: str):
        self.node, self.file = node, file
        self.items: dict[str, Item] = {}  # by destination
        self.first: dict[str, str] = {}  # destination -> where it was read
        self.problems: list[Problem] = []

    def read(self, where: str, entry_of: Callable[[], object], verb: str | None = None) -> None:
        """The entry `entry_of` reads, at `where` in the file (a `route <verb>` line's)."""
        try:
            entry = entry_of()
            if verb not in (None, "add", "replace", "append"):
                raise _Bad(f"route {verb}: not a verb twin reads", "tables say what a node "
                           "holds: route add, replace or append")
            if not isinstance(entry, dict):
                raise _Bad(f"a JSON {_kind(entry)}, not a route object")
            found = item(entry)
        except _Bad as e:
            self.problems.append(Problem(f"{self.file} {where}", e.message, e.hint))
            return
        if found is None:
            return
        dst = found.dst if isinstance(found, Route) else found.prefix
        if dst in self.first and verb != "replace":
            self.problems.append(self._again(dst, where, verb))
            return
        self.items[dst], self.first[dst] = found, where

    def _again(self, dst: str, where: str, verb: str | None) -> Problem:
        why, hint = {"add": ("the kernel refuses it (File exists)", "route replace changes it"),
                     "append": ("the kernel makes it multipath", ONE_NEXT_HOP)}.get(
            verb, ("twin holds one route per destination", "keep the one that forwards"))
        what = f"route {verb} of {dst}" if verb else dst
        return Problem(f"{self.file} {where}", f"{what} again (first at {self.first[dst]}): "
                                               f"{why}", hint)

    def tables(self) -> NodeTables:
        if self.problems:
            raise SpecError(self.file, self.problems, WHAT)
        kept = list(self.items.values())
        origins = {key(i): Origin(self.file, self.first[dst]) for dst, i in self.items.items()}
        return NodeTables(self.node, tuple(i for i in kept if isinstance(i, Route)),
                          tuple(i for i in kept if isinstance(i, LocalSid)),
                          tuple(i for i in kept if isinstance(i, Dropping)), origins)


# -- writing ----------------------------------------------------------------------------------


def _items(tables: NodeTables) -> list[Item]:
    return [*tables.routes, *tables.sids, *tables.dropping]


def kernel_json(it: Item) -> dict:
    """An item as `ip -j -6 route show` prints it (tests/data/routes holds the kernel's)."""
    if isinstance(it, Route):
        entry = {"type": it.type} if it.type != UNICAST else {}
        entry |= {"dst": it.dst, "gateway": it.via, "dev": it.dev or "lo"}
    else:
        entry = (sid_route(it) if isinstance(it, LocalSid)
                 else _entry([it.prefix, "encap", *it.what.split()]))
        entry = {"dst": entry["dst"], "encap": "seg6local", "action": entry["action"],
                 **{k: int(entry[k]) if k in ("lblen", "nflen") else entry[k]
                    for k in ACTION_KEYS if k in entry}, "dev": entry["dev"]}
    dst = entry["dst"]
    entry["dst"] = "default" if dst == "::/0" else dst.removesuffix("/128")
    return {k: v for k, v in entry.items() if v is not None} | {
        "protocol": PROTO, "metric": 1024, "flags": [], "pref": "medium"}


def batch_line(it: Item) -> str:
    """An item as the `ip -batch` line that installs it (the lab's own lines)."""
    if isinstance(it, Route):
        return it.iproute2()
    if isinstance(it, LocalSid):
        return route_line(it)
    return f"# drops: {it.why}\nroute replace {it.prefix} encap {it.what} proto {PROTO}"


class _NodeFile(Format):
    """A format of one file per node, `<node><suffix>`, at the top of the directory."""

    suffix: ClassVar[str]

    def file_for(self, node: str) -> str:
        return node + self.suffix

    def node_of(self, rel: str) -> str | None:
        mine = "/" not in rel and rel.endswith(self.suffix) and rel != "config_db.json"
        return rel.removesuffix(self.suffix) if mine else None


@register
class Iproute2Json(_NodeFile):
    name, suffix = "iproute2-json", ".json"
    summary = "<node>.json: `ip -j -6 route show` of each node"

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        reader = _Reader(node, file)
        for n, entry in enumerate(_json_entries(text, file), 1):
            reader.read(f"entry {n}", lambda e=entry: e)
        return reader.tables()

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        return json.dumps([kernel_json(i) for i in _items(tables)], separators=(",", ":")) + "\n"


@register
class Iproute2Batch(_NodeFile):
    name, suffix = "iproute2-batch", ".batch"
    summary = "<node>.batch: `ip -6 route show` lines or `ip -batch` route lines"

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        reader = _Reader(node, file)
        for n, verb, words in _records(text):
            reader.read(f"line {n}", lambda w=words: _entry(w), verb)
        return reader.tables()

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        head = (f"# {tables.node}'s static routes and local SIDs (twin, {self.name}), as\n"
                f"# `ip -batch` lines. Install them on the node: ip -6 -batch "
                f"{self.file_for(tables.node)}\n")
        return head + "".join(batch_line(i) + "\n" for i in _items(tables))
