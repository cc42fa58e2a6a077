"""SONiC's config_db.json: the tables a SONiC switch takes its SRv6 SIDs and static routes from.

One file per node, `<node>/config_db.json`, the file SONiC loads at boot. Three
tables are read (their sources: tests/data/routes/sonic/SOURCES.md); every other
(PORT, INTERFACE, DEVICE_METADATA, BGP_*, ...) is ignored: ports and addresses are
the addressing plan's (README, "Addressing").

    SRV6_MY_LOCATORS  <name>             prefix, block_len (32), node_len (16), func_len, arg_len
    SRV6_MY_SIDS      <locator>|<prefix> action, decap_vrf ("default"), decap_dscp_mode
    STATIC_ROUTE      [<vrf>|]<prefix>   nexthop, ifname, blackhole (distance, ... unread)

A SID becomes the plan's LocalSid by its action: uN is UN (block_len and usid_len are
its locator's); uDT46 and uDT6 into the default VRF are DECAP, on the host port whose
uSID the prefix is (plane p's port of host h owns <block>:<port(p, h)>::/48), else on
no port; every other action SONiC knows is kept as Dropping, with why packets die.

A route of the default VRF becomes a Route: `nexthop` and `ifname` are its via and
dev, `blackhole: "true"` makes it a blackhole. More than one next hop (SONiC's
comma-separated lists: ECMP) is refused: MRC's tables hold one next hop per
destination, and spraying is the sender's choice of path. Routes of other VRFs and
IPv4 routes are ignored: the fabric's ports are in the default VRF and carry IPv6
only, so no packet of the fabric meets them.

Ports. SONiC names front-panel ports EthernetM. containerlab's sonic-vs kind wires the
container's eth1 to Ethernet0 and each next port to the previous + 4 (eth2 is
Ethernet4), as SONiC-VS's lanemap.ini gives each port four lanes. So EthernetM is
twin's eth<M/4 + 1> and ethN is Ethernet<4(N-1)>: both are read, SONiC's is written.
A name the rule does not fit (Ethernet9, PortChannel1) is kept as written, and the
check finds a port the node does not have. The PORT table's `alias` and `index` are
not used: labels that vary by platform, not the binding to the container's ports.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from twin.errors import Problem, SpecError
from twin.fabric import usid
from twin.fabric.model import Fabric, Tier
from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Route
from twin.routes.formats.base import WHAT, Format, register
from twin.routes.formats.reading import load_json, token
from twin.routes.tables import Dropping, NodeTables, Origin, key

FILE = "config_db.json"
LOCATORS, SIDS, ROUTES = "SRV6_MY_LOCATORS", "SRV6_MY_SIDS", "STATIC_ROUTE"
DEFAULT_VRF = "default"
DECAPS = ("udt46", "udt6")  # twin's DECAP, when into the default VRF
DSCP = "pipe"  # twin's decap leaves the inner packet's DSCP as it was
TABLES_HINT = 'config_db.json is one JSON object of tables: {"STATIC_ROUTE": {...}}'

_NO_SRH = "acts on an SRH; the fabric's packets carry their uSIDs in the destination, with none"
_IPV4 = "decapsulates to IPv4; the fabric's inner packets are IPv6"
_CLASSIC = "decapsulates without NEXT-CSID; a host port's decap in twin is uDT46 or uDT6"
_XCONNECT = "cross-connects to one next hop; twin delivers to the NIC address (uDT46)"
_BINDING = "binds an SRv6 policy; the fabric's whole path is written by the sender"
_WHY = {  # every other action SONiC knows (sonic-swss srv6orch), and why a packet dies there
    "end": _NO_SRH, "end.x": _NO_SRH, "end.t": _NO_SRH,
    "ua": "an adjacency uSID (End.X with NEXT-CSID); twin forwards on node uSIDs (uN) only",
    "end.dt4": _IPV4, "end.dx4": _IPV4, "udt4": _IPV4, "udx4": _IPV4,
    "end.dt6": _CLASSIC, "end.dt46": _CLASSIC, "end.dx6": _XCONNECT, "udx6": _XCONNECT,
    "end.b6.encaps": _BINDING, "end.b6.encaps.red": _BINDING,
    "end.b6.insert": _BINDING, "end.b6.insert.red": _BINDING,
}
ACTIONS = ("un", *DECAPS, *_WHY)


def twin_port(name: str) -> str:
    """SONiC's EthernetM as twin's eth<M/4 + 1> (containerlab sonic-vs); others as written."""
    m = re.fullmatch(r"Ethernet(\d+)", name)
    return f"eth{int(m[1]) // 4 + 1}" if m and int(m[1]) % 4 == 0 else name


def sonic_port(name: str) -> str:
    """twin's ethN as SONiC's Ethernet<4(N-1)>; others as written."""
    m = re.fullmatch(r"eth([1-9]\d*)", name)
    return f"Ethernet{4 * (int(m[1]) - 1)}" if m else name


class _Reading:
    """One file being read: its problems, each at `<file> TABLE|key.field`, and what was
    read, each item with the TABLE|key it came from (twin.routes.tables.Origin)."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []
        self.read: dict[str, tuple[LocalSid | Dropping | Route, str]] = {}  # by prefix

    def add(self, where: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(f"{self.file} {where}".strip(), message, hint))

    def keep(self, item: LocalSid | Dropping | Route | None, where: str) -> None:
        if item is None:
            return
        prefix = f"route {item.dst}" if isinstance(item, Route) else f"SID {item.prefix}"
        if prefix in self.read:
            self.add(where, f"{prefix} is also at {self.read[prefix][1]}", "keep one of them")
        else:
            self.read[prefix] = (item, where)

    def tables(self, node: str) -> NodeTables:
        """What was read, in address order (as twin's plan orders it)."""
        def of(kind: type) -> tuple:
            found = [i for i, _ in self.read.values() if isinstance(i, kind)]
            return tuple(sorted(found, key=lambda i: ipaddress.IPv6Network(
                i.dst if isinstance(i, Route) else i.prefix)))
        origins = {key(i): Origin(self.file, where) for i, where in self.read.values()}
        return NodeTables(node, of(Route), of(LocalSid), of(Dropping), origins)


def _kind(value: object) -> str:
    """A JSON value's type, as a person says it."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true/false"
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value), "a number")


def _load(text: str, r: _Reading) -> dict:
    """The file's tables ({} when unreadable). Bad JSON, a top level that is no object,
    and a key written twice in one object (JSON keeps the last, silently) are problems."""
    twice: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict:
        keys = [k for k, _ in items]
        twice.extend(sorted({k for k in keys if keys.count(k) > 1}))
        return dict(items)
    try:
        db = load_json(text, r.file, pairs)
    except json.JSONDecodeError as e:
        r.add(f"line {e.lineno} col {e.colno}", f"not JSON: {e.msg}", TABLES_HINT)
        return {}
    for k in twice:
        r.add("", f"key {k!r} is written twice in one object; JSON keeps only the last",
              "merge the two into one entry")
    if not isinstance(db, dict):
        r.add("", f"is {_kind(db)}, not an object of tables", TABLES_HINT)
        return {}
    return db


def _table(db: dict, name: str, r: _Reading) -> dict[str, dict]:
    """A table's entries, key -> fields; a table or an entry that is no object is reported."""
    table = db.get(name, {})
    if not isinstance(table, dict):
        r.add(name, f"is {_kind(table)}, not an object of entries",
              f'"{name}": {{"<key>": {{"<field>": "<value>"}}}}')
        return {}
    for k, fields in table.items():
        if not isinstance(fields, dict):
            r.add(f"{name}|{k}", f"is {_kind(fields)}, not an object of fields",
                  '"<key>": {"<field>": "<value>"}')
    return {k: f for k, f in table.items() if isinstance(f, dict)}


def _texts(fields: dict, names: tuple[str, ...], where: str, r: _Reading) -> list | None:
    """String fields (None when absent); None for all when one is of another type."""
    bad = [n for n in names if not isinstance(fields.get(n, ""), str)]
    for n in bad:
        r.add(f"{where}.{n}", f"is {_kind(fields[n])} ({token(fields[n])}), not a string",
              f'SONiC keeps fields as strings: "{n}": "..."')
    return None if bad else [fields.get(n) for n in names]


def _bits(fields: dict, name: str, default: int, where: str, r: _Reading) -> int | None:
    """A bit length, 0 to 128: a number or a string of digits (SONiC's examples write both)."""
    value = fields.get(name, default)
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 128:
        return value
    r.add(f"{where}.{name}", f"{token(value)} is not a bit length (0 to 128)",
          f'"{name}": "{default}"')
    return None


def _network(text: str, where: str, r: _Reading, version: int | None = None):
    """An IP prefix (host bits allowed, as SONiC allows them); None, reported, if not."""
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        net = None
    if net is None or version not in (None, net.version):
        r.add(where, f"{token(text)} is not an IP{'v6' if version else ''} prefix",
              "e.g. fcbb:bb00:101::/48")
        return None
    return net


@dataclass(frozen=True)
class _Locator:
    block: ipaddress.IPv6Network  # every SID of the locator lies in it
    prefix: ipaddress.IPv6Network  # block + node: a uN SID lies in it
    block_len: int
    node_len: int


def _locator(name: str, fields: dict, r: _Reading) -> _Locator | None:
    """One locator. Its prefix is an address (the YANG model's type), or one with a length
    as sonic-mgmt's examples write it; bgpcfgd gives it block_len + node_len either way."""
    where, n = f"{LOCATORS}|{name}", len(r.problems)
    lens = [_bits(fields, f, d, where, r)
            for f, d in (("block_len", 32), ("node_len", 16), ("func_len", 16), ("arg_len", 0))]
    text = (_texts(fields, ("prefix",), where, r) or [None])[0]
    address, hint = None, '"prefix": "fcbb:bb00:101::"'
    try:
        address = ipaddress.IPv6Interface(text).ip if text is not None else None
    except ValueError:
        r.add(f"{where}.prefix", f"{text!r} is not an IPv6 address", hint)
    if "prefix" not in fields:
        r.add(f"{where}.prefix", "missing: a locator needs its prefix", hint)
    if len(r.problems) > n or address is None:
        return None
    if sum(lens) > 128:
        r.add(where, f"block_len + node_len + func_len + arg_len is {sum(lens)}, over 128")
        return None
    block, node = lens[0], lens[1]
    return _Locator(ipaddress.IPv6Network((address, block), strict=False),
                    ipaddress.IPv6Network((address, block + node), strict=False), block, node)


def _host_port(prefix: ipaddress.IPv6Network, node: str, fabric: Fabric) -> str:
    """The port of host `node` whose uSID owns `prefix`; "" when none does."""
    if not fabric.has_node(node) or fabric.node(node).tier is not Tier.HOST:
        return ""
    host = fabric.node(node)
    for p in fabric.nic_planes:
        if prefix == usid.locator(fabric.spec.block, usid.port(p, host.index)):
            return fabric.host_port(p)
    return ""


def _sid(k: str, fields: dict, locators: dict[str, _Locator], node: str, fabric: Fabric,
         r: _Reading) -> LocalSid | Dropping | None:
    """One SRV6_MY_SIDS entry in the plan's terms (None: a problem, reported). SONiC's
    bgpcfgd refuses a SID outside its locator's block, and a uN outside its prefix."""
    where, n = f"{SIDS}|{k}", len(r.problems)
    name, bar, text = k.partition("|")
    prefix = _network(text, where, r, 6) if bar else None
    if not bar:
        r.add(where, "the key is not <locator>|<prefix>", '"loc1|fcbb:bb00:101::/48"')
    if bar and name not in locators:
        r.add(where, f"locator {name!r} is not in {LOCATORS}", f"add {LOCATORS}|{name}, or "
              "key the SID by one of: " + (", ".join(sorted(locators)) or "(none)"))
    action, vrf, dscp = (_texts(fields, ("action", "decap_vrf", "decap_dscp_mode"), where, r)
                         or (None, None, None))
    if action is None and "action" not in fields:
        r.add(f"{where}.action", "missing: a SID needs its action", '"action": "uN"')
    elif action is not None and action.lower() not in ACTIONS:
        r.add(f"{where}.action", f"unknown action {action!r}",
              "SONiC's: uN, uDT46, uDT6, uA, End, End.DT46, ... (sonic-swss srv6orch)")
    if dscp not in (None, "uniform", "pipe"):
        r.add(f"{where}.decap_dscp_mode", f"{dscp!r} is neither uniform nor pipe")
    if len(r.problems) > n:
        return None
    loc, act, vrf = locators[name], action.lower(), vrf or DEFAULT_VRF
    if not (loc.prefix if act == "un" else loc.block).supernet_of(prefix):
        r.add(where, f"{prefix} is outside locator {name}'s "
              + (f"prefix {loc.prefix}" if act == "un" else f"block {loc.block}"),
              "key the SID by the locator it lies in; SONiC would not install it")
        return None
    if act == "un" or (act in DECAPS and vrf == DEFAULT_VRF):
        dev = "" if act == "un" else _host_port(prefix, node, fabric)
        return LocalSid(str(prefix), UN if act == "un" else DECAP, dev,
                        loc.block_len, loc.node_len)
    if act in DECAPS:
        return Dropping(str(prefix), f"{action} decap_vrf {vrf}",
                        f"decapsulates into VRF {vrf}; the NIC address is in the default VRF")
    return Dropping(str(prefix), action, _WHY[act])


def _route(k: str, fields: dict, r: _Reading) -> Route | None:
    """One STATIC_ROUTE entry in the plan's terms. None for a problem (reported), and for a
    route of another VRF or of IPv4, which no packet of the fabric meets."""
    where = f"{ROUTES}|{k}"
    vrf, bar, text = k.partition("|")
    vrf, text = (vrf, text) if bar else (DEFAULT_VRF, k)
    dst = _network(text, where, r) if vrf == DEFAULT_VRF else None
    if dst is None or dst.version != 6:
        return None
    got = _texts(fields, ("nexthop", "ifname", "blackhole", "nexthop-vrf"), where, r)
    if got is None:
        return None
    nexthop, ifname, blackhole, nh_vrf = got
    hops = max(len(v.split(",")) if v else 0 for v in (nexthop, ifname, blackhole))
    if hops > 1:
        r.add(where, f"{hops} next hops (ECMP): MRC's tables hold one per destination",
              "spraying is the sender's choice of path (its EV); keep one next hop")
        return None
    if (blackhole or "false").lower() not in ("true", "false"):
        r.add(f"{where}.blackhole", f"{blackhole!r} is neither true nor false")
        return None
    if (blackhole or "").lower() == "true":  # SONiC drops whatever else the entry says
        return Route(str(dst), "", type="blackhole")
    if nh_vrf not in (None, "", DEFAULT_VRF):
        r.add(f"{where}.nexthop-vrf", f"leaks into VRF {nh_vrf}; the fabric has one table",
              "remove nexthop-vrf")
        return None
    try:
        via = None if nexthop in (None, "", "::") else str(ipaddress.IPv6Address(nexthop))
    except ValueError:
        r.add(f"{where}.nexthop", f"{nexthop!r} is not an IPv6 address",
              '"nexthop": "fe80::201" (the next switch\'s uSID)')
        return None
    if not ifname:
        r.add(f"{where}.ifname", "missing: twin's next hops (fe80::<uSID>) are reached out "
              "of a named port", '"ifname": "Ethernet0" (eth<N> is Ethernet<4(N-1)>)')
        return None
    return Route(str(dst), twin_port(ifname), via=via)


@register
class Sonic(Format):
    name = "sonic"
    summary = "<node>/config_db.json: SONiC's SRV6_MY_LOCATORS, SRV6_MY_SIDS, STATIC_ROUTE"

    def file_for(self, node: str) -> str:
        return f"{node}/{FILE}"

    def node_of(self, rel: str) -> str | None:
        parts = PurePosixPath(rel).parts
        return parts[0] if len(parts) == 2 and parts[1] == FILE else None

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        r = _Reading(file)
        db = _load(text, r)
        written = _table(db, LOCATORS, r)
        locators = {name: loc for name, fields in written.items()
                    if (loc := _locator(name, fields, r)) is not None}
        for k, fields in _table(db, SIDS, r).items():
            if k.partition("|")[0] in written.keys() - locators.keys():
                continue  # its locator is unreadable, and reported
            r.keep(_sid(k, fields, locators, node, fabric, r), f"{SIDS}|{k}")
        for k, fields in _table(db, ROUTES, r).items():
            r.keep(_route(k, fields, r), f"{ROUTES}|{k}")
        if r.problems:
            raise SpecError(file, r.problems, WHAT)
        return r.tables(node)

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        """The node's config_db.json, for `config load` on a SONiC-VS: keys sorted, four
        spaces, every value a string, as `config save` writes it. One locator per uSID
        the node owns (a switch's is named after it, a host's after node and port)."""
        db: dict[str, dict] = {"DEVICE_METADATA": {"localhost": {"hostname": tables.node}}}
        locators, sids = _srv6(tables)
        if sids:
            db[LOCATORS], db[SIDS] = locators, sids
        if tables.routes:
            db[ROUTES] = {f"{DEFAULT_VRF}|{r.dst}": _route_fields(r) for r in tables.routes}
        return json.dumps(db, indent=4, sort_keys=True) + "\n"


def _sid_fields(sid: LocalSid | Dropping) -> dict[str, str]:
    if isinstance(sid, Dropping):  # the action as the table wrote it, and its VRF if any
        action, _, vrf = sid.what.partition(" decap_vrf ")
        return {"action": action.split()[0], **({"decap_vrf": vrf} if vrf else {})}
    if sid.behavior == UN:
        return {"action": "uN", "decap_dscp_mode": DSCP}
    return {"action": "uDT46", "decap_vrf": DEFAULT_VRF, "decap_dscp_mode": DSCP}


def _srv6(tables: NodeTables) -> tuple[dict, dict]:
    """SRV6_MY_LOCATORS and SRV6_MY_SIDS for a node's SIDs (a Dropping one as F3216)."""
    names: dict[tuple, str] = {}  # (locator prefix, block_len, node_len) -> its name
    sids = {}
    every = [(s, s.block_len, s.usid_len, s.dev) for s in tables.sids]
    every += [(d, 32, 16, "") for d in tables.dropping]
    for sid, block_len, node_len, dev in every:
        net = ipaddress.IPv6Network(sid.prefix)
        loc = (net.supernet(new_prefix=min(block_len + node_len, net.prefixlen)),
               block_len, node_len)
        if loc not in names:
            name = f"{tables.node}-{sonic_port(dev)}" if dev else tables.node
            names[loc] = name if name not in names.values() else f"{name}-{len(names) + 1}"
        sids[f"{names[loc]}|{sid.prefix}"] = _sid_fields(sid)
    return ({name: {"prefix": str(p.network_address), "block_len": str(b), "node_len": str(n),
                    "func_len": "0", "arg_len": "0"} for (p, b, n), name in names.items()}, sids)


def _route_fields(route: Route) -> dict[str, str]:
    """A route's STATIC_ROUTE fields. SONiC has one type that drops: each is a blackhole."""
    if route.type != UNICAST:
        return {"blackhole": "true"}
    return {"ifname": sonic_port(route.dev), **({"nexthop": route.via} if route.via else {})}
