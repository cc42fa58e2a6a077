"""Tables as iproute2 prints and takes them: `ip -j -6 route show`, `ip -6 route show`, `ip -batch`.

    iproute2-json   <node>.json    the JSON array `ip [-d] -j -6 route show [table all]`
                                   prints on the node; beside it, when given,
                                   <node>.nexthops.json (`ip -j nexthop show`) and
                                   <node>.rules.json (`ip -j -6 rule show`)
    iproute2-batch  <node>.batch   `ip [-d] -6 route show` lines, or `ip -batch` lines
                                   (`route add|replace|append ...`, `-6 ` or `ip -6 `
                                   before them allowed), `#` comments; the two kinds
                                   may be mixed. Nexthop objects (`nexthop add ...`,
                                   or `ip -6 nexthop show` lines: `id 1 via ...`) and
                                   rules (`rule add ...`, or `ip -6 rule show` lines:
                                   `999: from all ...`) in it, or beside it in
                                   <node>.nexthops and <node>.rules

Every iproute2 users run. Up to 6.2, `ip -j` prints an encap's words beside the
route's (`"encap": "seg6local", "action": "End", ...`); since 6.3 (commit
0f32ef97, "iproute_lwtunnel: fix JSON output") inside an object (`"encap":
{"encap_type": "seg6local", "action": "End", "flavors": [...], "lblen": 32, ...}`),
keys and order otherwise the same (ip/iproute_lwtunnel.c, print_encap_seg6local).
`flat` lifts the object to the older form. `ip -d` adds type unicast, table main,
scope global and, for a route through a nexthop object, the object (`nh_info`);
the text is the same in every version. tests/data/routes has what 6.1.0 and
6.19.0 print, and says which inputs are captured and which derived.

All read through one path. Each route first becomes an *entry* in the flat JSON
form's keys (dst, type, gateway, dev, protocol, encap, action, table, flavors,
lblen, nflen, nh6, nhid, ...; the route's own table is `route_table`), `flat`
resolves its nexthop object, and one function, `item`, says what twin makes of it:

    dst via G dev D, dst dev D               Route (dst: `default` is ::/0, a bare address /128)
    dst nhid N                               the Route of nexthop object N (its via and dev,
                                             or blackhole); without objects given, the via
                                             and dev the kernel prints beside nhid
    blackhole|unreachable|prohibit dst       Route of that type (no dev, no next hop)
    seg6local End flavors next-csid          LocalSid uN (lblen, nflen: block and uSID bits;
                                             absent, the kernel's 32 and 16)
    seg6local End.DT6 table local (or 255)   LocalSid decap on dev
    any other seg6local action               Dropping: why a packet of this fabric dies there
    proto kernel; local, multicast, anycast, broadcast; table local
                                             skipped: addresses and connected routes belong
                                             to the addressing plan (README, "Addressing")
    encap seg6/bpf/..., nexthop (multipath), a nexthop group (ECMP), End.X next-csid (uA),
    throw, nat                               a problem: twin's tables cannot hold it

A route in a table other than main is walked as the rules send lookups there
(twin.routes.formats.iproute2_rules composes the tables into the one a walk
consults); without rules it is a problem naming its table, never skipped: the
check would then report its SIDs missing.

`table` means two things. In a seg6local route it is the action's lookup table
(End.DT6 table local); the route's own table comes after `dev`, in the text and in
the flat JSON alike, where the kernel prints the key `table` twice. The JSON is
read with its pairs in order so the two stay apart; in the nested form the
action's `table` is inside the encap object.

Nexthop objects. MRC's tables hold one next hop per destination (spraying over
paths is the sender's choice, by its EVs), so a group (`group 1/2`) is refused as
ECMP. `ip -6 nexthop show` leaves groups out (their family is unspec); a route
through one is still known by the `nexthop` lines the kernel prints under it.
Given objects, a route's id must be among them (`ip -d` prints the route's own
object beside it, which serves); a route's origin names the object's line too,
so a finding about a wrong next hop leads to the line that holds it.

Writing: the JSON is the line `ip -j -6 route show` of iproute2 6.1 prints for those
routes (its keys, in its order, tests/data/routes), the batch the lines the lab
installs (`route replace ... proto static`). A Dropping's `what` is its action as
written after `encap`, so both write it back as read. Items keep the file's order.

Decisions. End.DT46 is Dropping, not decap: the kernel takes it with `vrftable`
only (`table local` is refused, tests/data/routes/zoo.batch line 23), and a
VRF's table does not hold the NIC address, which lives on lo in the default
VRF. A destination twice in one table is a problem (twin holds one route per
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
from twin.routes.formats.iproute2_rules import (
    Placed,
    Rule,
    compose,
    rule_of_json,
    rule_of_words,
    short,
    table_name,
)
from twin.routes.formats.iproute2_rules import Refused as _Bad
from twin.routes.formats.reading import clip, load_json, token
from twin.routes.tables import Dropping, NodeTables, Origin, key

Item = Route | LocalSid | Dropping
SKIPPED_TYPES = ("local", "multicast", "anycast", "broadcast")
LOCAL = ("local", "255")
# Words of `ip -6 route show` / `route add` that take a value, and the entry key it goes to.
ROUTE_KEYS = {"via": "gateway", "proto": "protocol", "table": "route_table", "src": "prefsrc",
              "nhid": "nhid",
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


# -- an entry, in twin's terms --------------------------------------------------------------


def item(entry: dict) -> Item | None:
    """What twin makes of one entry (in the flat form: `flat`); None for what is not
    the operator's (skipped). Its table is the reader's (`_Reader`, `compose`)."""
    kind = entry.get("type", UNICAST)
    if (entry.get("protocol") == "kernel" or kind in SKIPPED_TYPES
            or table_name(entry.get("route_table", "main")) == "local"):
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


# -- the forms an entry comes in ---------------------------------------------------------------


def flat(entry: dict, nexthops: dict[str, dict] | None, no_nexthop_hint: str) -> dict:
    """An entry in the one form `item` reads: iproute2 6.3+'s nested encap lifted to
    the flat keys 6.2 and earlier print, and a route through a nexthop object (`nhid`)
    given that object's gateway and dev, or its blackhole. `nexthops` by id (as a
    string): the objects given beside the routes (None: none given)."""
    if isinstance(entry.get("encap"), dict):
        entry = _unnested(entry, entry["encap"])
    if "nhid" in entry:
        entry = _through(entry, nexthops, no_nexthop_hint)
    return entry


def _unnested(entry: dict, encap: dict) -> dict:
    """`"encap": {"encap_type": "seg6local", "action": "End.DT6", "table": "local", ...}`
    (iproute2 6.3+, commit 0f32ef97 "iproute_lwtunnel: fix JSON output") as
    `"encap": "seg6local", "action": "End.DT6", "table": "local", ...` (6.2 and before).
    Only a seg6local action's own words are lifted; any other encap is refused by its
    type (`item`), whatever its words."""
    kind = encap.get("encap_type")
    if not _word(kind):
        raise _Bad("an encap object without encap_type", 'as iproute2 6.3 and later print '
                   'it: "encap": {"encap_type": "seg6local", "action": "End", ...}')
    out = {k: v for k, v in entry.items() if k != "encap"} | {"encap": kind}
    if kind == "seg6local":
        out |= {k: v for k, v in encap.items() if k in ("action", *ACTION_KEYS)}
    return out


def _through(entry: dict, nexthops: dict[str, dict] | None, hint: str) -> dict:
    """A route through nexthop object `nhid` as the route it forwards like: the object's
    gateway and dev, or its blackhole. `ip -d` prints the object beside the route
    (`nh_info`). Without objects given, the route is read as the kernel prints it: a
    route through a single nexthop shows its `via` and `dev` (or blackhole, dev lo)
    beside `nhid` (tests/data/routes/ip-*); given objects, a missing id is a problem."""
    nhid, dst = str(entry["nhid"]), entry.get("dst", "?")
    nh = (nexthops or {}).get(nhid, entry.get("nh_info"))
    if "nexthops" in entry or (isinstance(nh, dict) and "group" in nh):
        raise _Bad(f"{dst} goes through nexthop group {short(nhid)}: ECMP, not supported",
                   f"{ONE_NEXT_HOP}; spraying over paths is the sender's choice (MRC's "
                   "EVs): point the route at one nexthop object")
    out = {k: v for k, v in entry.items() if k not in ("nhid", "nh_info")}
    if nh is None and nexthops is None and ("dev" in entry or "gateway" in entry):
        return out
    if not isinstance(nh, dict) or str(nh.get("id", nhid)) != nhid:
        raise _Bad(f"{dst}: nhid {short(nhid)} is not among the "
                   "nexthop objects given", hint)
    if nh.get("encap"):
        kind = nh["encap"].get("encap_type") if isinstance(nh["encap"], dict) else nh["encap"]
        raise _Bad(f"{dst} goes through nexthop {nhid}, an encap {short(kind)} nexthop: not "
                   "supported", "twin's tables hold routes and local SIDs")
    if "blackhole" in nh:
        return out | {"type": "blackhole"}
    for k in ("gateway", "dev"):
        if k in nh and k in out and out[k] != nh[k]:
            raise _Bad(f"{dst}: {k} {short(out[k])}, but its nexthop {nhid} has "
                       f"{short(nh[k])}", "a route through a nexthop object forwards as "
                       "the object says")
        if k in nh:
            out[k] = nh[k]
    return out


NEXTHOP_WORDS = {"id": "id", "via": "gateway", "dev": "dev", "scope": "scope",
                 "proto": "protocol", "group": "group", "type": "type"}


def nexthop_of_words(words: list[str]) -> dict:
    """A nexthop object from an `ip -6 nexthop show` line's words, or those after
    `nexthop add`, in the keys `ip -j -6 nexthop show` prints (id, gateway, dev,
    group: [{"id": 1}, ...], blackhole, encap)."""
    words, nh = deque(words), {}
    while words:
        w = words.popleft()
        if w in NEXTHOP_WORDS:
            nh[NEXTHOP_WORDS[w]] = _value(words, w)
        elif w in ("blackhole", "fdb"):
            nh[w] = None
        elif w == "encap":
            nh["encap"] = _value(words, w)
            words.clear()  # its words are its own: a route through it is refused
        elif w not in FLAGS:
            raise _Bad(f"nexthop word {short(w, quoted=True)}: not one twin reads",
                       "an `ip -6 nexthop show` line: id 1 via fe80::200 dev eth3 ...")
    if "group" in nh:
        nh["group"] = [{"id": m.split(",")[0]} for m in nh["group"].split("/")]
    return _nexthop(nh)


def _nexthop(nh: object) -> dict:
    if not isinstance(nh, dict) or not str(nh.get("id", "")).isdigit():
        raise _Bad("a nexthop object without its id",
                   'as `ip -j -6 nexthop show` prints it: {"id": 1, "gateway": ..., "dev": ...}')
    return nh


# -- the JSON ---------------------------------------------------------------------------------


def _pairs(pairs: list[tuple[str, object]]) -> dict:
    """One JSON object, with the route's own `table` (after `dev` in a flat seg6local
    route, anywhere in another) as `route_table`. iproute2 6.3+'s encap object keeps its
    `table`: it is the action's."""
    if any(k == "encap_type" for k, _ in pairs):
        return dict(pairs)
    seg6local, out = ("encap", "seg6local") in pairs, {}
    for k, v in pairs:
        seg6local = seg6local and k != "dev"  # past `dev`, `table` is the route's
        out["route_table" if k == "table" and not seg6local else k] = v
    return out


def _json_entries(text: str, file: str, shown: str = "route", hook=_pairs) -> list:
    """A JSON array as `ip -j -6 <shown> show` prints it (route, nexthop, rule)."""
    hint = f"the output of `ip -j -6 {shown} show`: [{{...}}, ...]"
    try:
        data = load_json(text, file, hook, repeatable=("table",))
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
        elif w == "nh_info":  # `ip -d`: the route's nexthop object, on the next line
            nh = []
            while words and words[0] != "nexthop":  # a group's nexthop lines follow
                nh.append(words.popleft())
            entry["nh_info"] = nexthop_of_words(nh)
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


Record = tuple[int, str, str | None, list[str]]


def _records(text: str) -> list[Record]:
    """(line, kind, verb, words) per route, nexthop object or rule: kind "route",
    "nexthop" or "rule"; the verb of an `ip -batch` line (`route add`, `nexthop add`,
    `rule add`), None for a line as `ip -6 route|nexthop|rule show` prints it (`id 1
    via ...` a nexthop object, `999: from all ...` a rule). A route's `nexthop` lines
    (multipath) and `nh_info` line (`ip -d`) join the route above them."""
    out: list[Record] = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words[:1] in (["nexthop"], ["nh_info"]) and words[1:2] not in (["add"], ["replace"]) \
                and out and out[-1][1] == "route":
            out[-1][3].extend(words)
        elif words:
            while words[:1] in (["ip"], ["-6"]):
                words.pop(0)
            kind = words[0] if words[0] in ("route", "nexthop", "rule") else None
            if kind and len(words) > 1:
                out.append((n, kind, words[1], words[2:]))
            elif words[0] == "id":
                out.append((n, "nexthop", None, words))
            elif words[0].endswith(":") and words[0][:-1].isdigit():
                out.append((n, "rule", None, words))
            else:
                out.append((n, "route", None, words))
    return out


# -- one node's items, in order ---------------------------------------------------------------


class _Reader:
    """Collects a node's items with their origins, its nexthop objects and rules, and
    every problem in its files. `hints` say how to give what is missing: nexthop
    objects, rules (they differ between the JSON and the text)."""

    def __init__(self, node: str, file: str, hints: tuple[str, str] = ("", "")):
        self.node, self.file = node, file
        self.nexthop_hint, self.rules_hint = hints
        self.items: dict[tuple[str, str], Item] = {}  # by table and destination
        self.first: dict[tuple[str, str], str] = {}  # -> where it was read
        self.nexthops: dict[str, dict] | None = None  # by id; None: none given
        self.nexthop_at: dict[str, str] = {}
        self.rules: list[Rule] | None = None  # None: no rules given
        self.problems: list[Problem] = []

    def _bad(self, where: str, e: _Bad) -> None:
        self.problems.append(Problem(where, e.message, e.hint))

    def nexthop(self, where: str, nexthop_of: Callable[[], object],
                verb: str | None = None) -> None:
        """A nexthop object, at `where` (file and place); any object read (even one
        refused) means nexthop objects were given."""
        self.nexthops = self.nexthops if self.nexthops is not None else {}
        try:
            if verb not in (None, "add", "replace"):
                raise _Bad(f"nexthop {short(verb)}: not a verb twin reads",
                           "nexthop add or replace")
            nh = _nexthop(nexthop_of())
        except _Bad as e:
            return self._bad(where, e)
        nhid = str(nh["id"])
        if nhid in self.nexthops and verb != "replace":
            self.problems.append(Problem(where, f"nexthop {nhid} again (first at "
                                                f"{self.nexthop_at[nhid]})",
                                         "one object per id"))
            return
        self.nexthops[nhid], self.nexthop_at[nhid] = nh, where

    def rule(self, where: str, rule_of: Callable[[], Rule], verb: str | None = None) -> None:
        """A rule, at `where` (file and place); any rule read (even one refused) means
        rules were given."""
        self.rules = self.rules if self.rules is not None else []
        try:
            if verb not in (None, "add"):
                raise _Bad(f"rule {short(verb)}: not a verb twin reads", "rule add")
            self.rules.append(rule_of())
        except _Bad as e:
            self._bad(where, e)

    def read(self, where: str, entry_of: Callable[[], object], verb: str | None = None) -> None:
        """The entry `entry_of` reads, at `where` in the file (a `route <verb>` line's)."""
        try:
            entry = entry_of()
            if verb not in (None, "add", "replace", "append"):
                raise _Bad(f"route {verb}: not a verb twin reads", "tables say what "
                           "a node holds: route add, replace or append")
            if not isinstance(entry, dict):
                raise _Bad(f"a JSON {_kind(entry)}, not a route object")
            nhid = str(entry.get("nhid", ""))
            entry = flat(entry, self.nexthops, self.nexthop_hint)
            found = item(entry)
            if nhid in self.nexthop_at:  # a finding names the object's line too
                where += f" (nhid {nhid}: {self.nexthop_at[nhid]})"
        except _Bad as e:
            return self._bad(f"{self.file} {where}", e)
        if found is None:
            return
        dst = found.dst if isinstance(found, Route) else found.prefix
        at = (table_name(entry.get("route_table", "main")), dst)
        if at in self.first and verb != "replace":
            self.problems.append(self._again(at, where, verb))
            return
        self.items[at], self.first[at] = found, where

    def _again(self, at: tuple[str, str], where: str, verb: str | None) -> Problem:
        why, hint = {"add": ("the kernel refuses it (File exists)", "route replace changes it"),
                     "append": ("the kernel makes it multipath", ONE_NEXT_HOP)}.get(
            verb, ("twin holds one route per destination", "keep the one that forwards"))
        dst = at[1] + ("" if at[0] == "main" else f" table {at[0]}")
        what = f"route {verb} of {dst}" if verb else dst
        return Problem(f"{self.file} {where}", f"{what} again (first at {self.first[at]}): "
                                               f"{why}", hint)

    def tables(self) -> NodeTables:
        """The node's tables: those the rules consult composed into one (`compose`)."""
        ats = list(self.items)
        kept, problems = compose([Placed(t, dst, f"{self.file} {self.first[(t, dst)]}")
                                  for t, dst in ats], self.rules, self.rules_hint)
        self.problems += [Problem(*p) for p in problems]
        if self.problems:
            raise SpecError(self.file, self.problems, WHAT)
        kept_items = [(ats[i], self.items[ats[i]]) for i in kept]
        origins = {key(i): Origin(self.file, self.first[at]) for at, i in kept_items}
        items = [i for _, i in kept_items]
        return NodeTables(self.node, tuple(i for i in items if isinstance(i, Route)),
                          tuple(i for i in items if isinstance(i, LocalSid)),
                          tuple(i for i in items if isinstance(i, Dropping)), origins)


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
    """A format of one file per node, `<node><suffix>`, at the top of the directory, with
    the node's nexthop objects and rules in files beside it when given (`sides`)."""

    suffix: ClassVar[str]
    sides: ClassVar[tuple[str, str]]  # <node>+these: nexthop objects, rules

    def file_for(self, node: str) -> str:
        return node + self.suffix

    def node_of(self, rel: str) -> str | None:
        mine = ("/" not in rel and rel.endswith(self.suffix) and rel != "config_db.json"
                and not rel.endswith(self.sides))
        return rel.removesuffix(self.suffix) if mine else None

    def beside(self, node: str) -> tuple[str, ...]:
        return tuple(node + side for side in self.sides)

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        return self.parse_beside(text, {}, node, file, fabric)


@register
class Iproute2Json(_NodeFile):
    name, suffix = "iproute2-json", ".json"
    sides = (".nexthops.json", ".rules.json")
    summary = "<node>.json: `ip -j -6 route show` of each node"

    def parse_beside(self, text: str, beside: dict[str, str], node: str, file: str,
                     fabric: Fabric) -> NodeTables:
        nexthops, rules = (node + side for side in self.sides)
        reader = _Reader(node, file, (
            f"give `ip -j -6 nexthop show` as {nexthops}, or capture the routes with "
            "`ip -d -j -6 route show`, which prints each route's nexthop (nh_info)",
            f"give `ip -j -6 rule show` as {rules}, or move the route to table main"))
        if nexthops in beside:
            reader.nexthops = {}
            for n, nh in enumerate(_json_entries(beside[nexthops], nexthops, "nexthop",
                                                 None), 1):
                reader.nexthop(f"{nexthops} entry {n}", lambda e=nh: e)
        if rules in beside:
            reader.rules = []
            for n, rule in enumerate(_json_entries(beside[rules], rules, "rule", None), 1):
                at = f"{rules} entry {n}"
                reader.rule(at, lambda e=rule, at=at: rule_of_json(e, at))
        for n, entry in enumerate(_json_entries(text, file), 1):
            reader.read(f"entry {n}", lambda e=entry: e)
        return reader.tables()

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        return json.dumps([kernel_json(i) for i in _items(tables)], separators=(",", ":")) + "\n"


@register
class Iproute2Batch(_NodeFile):
    name, suffix = "iproute2-batch", ".batch"
    sides = (".nexthops", ".rules")
    summary = "<node>.batch: `ip -6 route show` lines or `ip -batch` route lines"

    def parse_beside(self, text: str, beside: dict[str, str], node: str, file: str,
                     fabric: Fabric) -> NodeTables:
        reader = _Reader(node, file, (
            f"give `ip -6 nexthop show` lines in {node}.nexthops or in {file}",
            f"give `ip -6 rule show` lines in {node}.rules or in {file}, or move the "
            "route to table main"))
        nexthops, rules = self.beside(node)
        reader.nexthops = {} if nexthops in beside else None
        reader.rules = [] if rules in beside else None
        sources = [(side, _records(beside[side])) for side in (nexthops, rules)
                   if side in beside] + [(file, _records(text))]
        for f, records in sources:
            for n, kind, verb, words in records:
                where = f"{f} line {n}"
                if kind == "nexthop":
                    reader.nexthop(where, lambda w=words: nexthop_of_words(w), verb)
                elif kind == "rule":
                    reader.rule(where, lambda w=words, at=where: rule_of_words(w, at), verb)
                elif f != file:
                    reader.problems.append(Problem(where, "a route in the file of nexthop "
                                                   "objects or rules", f"routes go in {file}"))
        for n, kind, verb, words in sources[-1][1]:
            if kind == "route":
                reader.read(f"line {n}", lambda w=words: _entry(w), verb)
        return reader.tables()

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        head = (f"# {tables.node}'s static routes and local SIDs (twin, {self.name}), as\n"
                f"# `ip -batch` lines. Install them on the node: ip -6 -batch "
                f"{self.file_for(tables.node)}\n")
        return head + "".join(batch_line(i) + "\n" for i in _items(tables))
