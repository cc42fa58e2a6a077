"""SONiC's config_db.json: the tables a SONiC switch takes its SRv6 SIDs and static routes from.

One file per node, `<node>/config_db.json`, the file SONiC loads at boot. Three
tables are read; VRF and PORT are consulted for the names SONiC's model lets other
tables point at; every other table (INTERFACE, DEVICE_METADATA, BGP_*, ...) is
ignored: ports and addresses are the addressing plan's (README, "Addressing").

    SRV6_MY_LOCATORS  <name>             prefix, block_len (32), node_len (16),
                                         func_len (16), arg_len (0), vrf
    SRV6_MY_SIDS      <locator>|<prefix> action, decap_vrf ("default"), decap_dscp_mode,
                                         interface, adj (uA)
    STATIC_ROUTE      [<vrf>|]<prefix>   nexthop, ifname, blackhole, distance,
                                         nexthop-vrf, advertise, bfd

As strict as SONiC. A file is held to the two things that stand between config_db
and FRR on a SONiC switch: the YANG models (sonic-srv6.yang, sonic-static-route.yang;
`config apply-patch` and the other YANG-validated paths refuse what they refuse) and
bgpcfgd, which turns the tables into FRR configuration and skips, with a line in
syslog, what it cannot. What either refuses is refused here, each at `<file>
TABLE|key.field` with the rule it breaks, so an operator learns it from the check and
not from a switch that silently lacks a SID. The rules (sources, with commits:
tests/data/routes/sonic/SOURCES.md):

- fields: only the models' leaves; sonic-yang refuses an entry with any other field.
- locators: `prefix` is an IPv6 address with no length (inet:ipv6-address; bgpcfgd
  appends /block_len+node_len itself) and no bit set past block_len + node_len (bgpcfgd
  builds an IPv6Network of it, which refuses host bits); block_len and node_len are 1 to
  128, func_len and arg_len 0 to 128, all integers (a JSON number or a string of
  digits), summing to at most 128; `vrf` is "default" or a key of the VRF table.
- SIDs: the key is `<locator>|<prefix>` and the locator exists; the prefix has a length
  (inet:ipv6-prefix; bgpcfgd reads the length from the key) and no host bits (bgpcfgd's
  IPv6Network again); `action` is one of the YANG enum, spelled as it spells them (uN,
  uA, uDT46: an enum is case-sensitive, and so is bgpcfgd's check); a uA names its
  `interface`, and only a uA has an `adj`; `decap_vrf` is "default" or a VRF; a SID lies
  in its locator's block, a uN in its locator's prefix (bgpcfgd).
- routes: the VRF of the key is `default`, `mgmt` or `Vrf...`; the prefix has a length
  (inet:ip-prefix; host bits are allowed, as the model allows them and FRR masks them);
  `blackhole`, `advertise` and `bfd` are lists of lower-case `true`/`false`, `distance`
  of 0 to 255, `nexthop-vrf` of VRF names; the comma-separated lists of one entry have
  one element per next hop, all of the same length (bgpcfgd refuses the route
  otherwise); each next hop is an address of the prefix's family.
Two leafrefs are checked against the file itself: a decap_vrf or a locator's vrf must be
a key of its VRF table (what `config vrf add` writes), and a uA's interface a key of its
PORT table when the file has one (a fragment without PORT says nothing of the ports).

Older schemas are named, not ignored. SRV6_MY_SID_TABLE, one table of SIDs each with
its own lengths, is SONiC's first SRv6 design (the 2021 SRv6 HLD, and the static-SRv6
HLD's draft until December 2024) and the name of the APPL_DB table srv6orch reads;
bgpcfgd never reads it from CONFIG_DB. SRV6_MY_SIDS keyed `<locator>|<address>` is
sonic-srv6.yang's first revision (January 2025), before the key took a prefix. A
locator with `argu_len` or a prefix with a length is frrcfgd's dialect (the FRR
management framework, `frr_mgmt_framework_config` true), not the model's. Each is
refused with what the current schema wants instead; no db_migrator step exists for
any of them.

A SID becomes the plan's LocalSid by its action: uN is UN (block_len and usid_len are
its locator's); uDT46 into the default VRF is DECAP, on the host port whose uSID the
prefix is (plane p's port of host h owns <block>:<port(p, h)>::/48), else on no port;
a uDT46 into another VRF and a uA are kept as Dropping, with why packets die there.

A route of the default VRF becomes a Route: `nexthop` and `ifname` are its via and
dev, `blackhole: "true"` makes it a blackhole. More than one next hop (ECMP) is
refused: MRC's tables hold one next hop per destination, and spraying is the sender's
choice of path. Routes of other VRFs and IPv4 routes are checked as SONiC checks them,
then ignored: the fabric's ports are in the default VRF and carry IPv6 only, so no
packet of the fabric meets them.

Ports. SONiC names front-panel ports EthernetM. containerlab's sonic-vs kind wires the
container's eth1 to Ethernet0 and each next port to the previous + 4 (eth2 is
Ethernet4), as SONiC-VS's lanemap.ini gives each port four lanes. So EthernetM is
twin's eth<M/4 + 1> and ethN is Ethernet<4(N-1)>: both are read, SONiC's is written.
A name the rule does not fit (Ethernet9, PortChannel1) is kept as written, and the
check finds a port the node does not have. The PORT table's `alias` and `index` are
not used: labels that vary by platform, not the binding to the container's ports.

Errors quote the file's content only as a short escaped token (`_token`): a key or a
value of a hostile file is never echoed whole.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass

from twin.errors import Problem, SpecError
from twin.fabric.model import Fabric
from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Route
from twin.routes.formats.base import WHAT, FileInNodeDir, decap_port, register
from twin.routes.formats.reading import load_json
from twin.routes.tables import Dropping, NodeTables, Origin, key

FILE = "config_db.json"
LOCATORS, SIDS, ROUTES = "SRV6_MY_LOCATORS", "SRV6_MY_SIDS", "STATIC_ROUTE"
VRFS, PORTS = "VRF", "PORT"
OLD_SIDS = "SRV6_MY_SID_TABLE"  # the single-table schema SONiC's CONFIG_DB never took
DEFAULT_VRF = "default"
SRV6_YANG, ROUTE_YANG = "sonic-srv6.yang", "sonic-static-route.yang"
A_UN, A_UA, A_UDT46 = "uN", "uA", "uDT46"
ACTIONS = (A_UN, A_UA, A_UDT46)  # sonic-srv6.yang's enum, spelled as it spells them
DSCP_MODES = ("uniform", "pipe")
DSCP = "pipe"  # twin's decap leaves the inner packet's DSCP as it was
TABLES_HINT = 'config_db.json is one JSON object of tables: {"STATIC_ROUTE": {...}}'

LOCATOR_FIELDS = ("prefix", "block_len", "node_len", "func_len", "arg_len", "vrf")
SID_FIELDS = ("action", "decap_vrf", "decap_dscp_mode", "interface", "adj")
ROUTE_FIELDS = ("nexthop", "ifname", "blackhole", "distance", "nexthop-vrf", "advertise",
                "bfd")
LENGTHS = (("block_len", 32, 1), ("node_len", 16, 1), ("func_len", 16, 0), ("arg_len", 0, 0))
# Fields of older schemas, and where the model keeps them now.
RENAMED = {
    "argu_len": "arg_len (argu_len is frrcfgd's spelling)",
    "dscp_mode": "decap_dscp_mode (dscp_mode is the single-table draft's)",
    "vrf": "decap_vrf (vrf is SRV6_MY_SID_TABLE's)",
    **{n: f"the locator's {n}, in {LOCATORS} (a SID's own {n} is SRV6_MY_SID_TABLE's)"
       for n, _, _ in LENGTHS},
}
# sonic-static-route.yang's patterns, whole-string.
BOOLS = re.compile(r"((true|false),)*(true|false)")
DISTANCES = re.compile(r"((25[0-5]|2[0-4][0-9]|[0-1]?[0-9][0-9]?),)*"
                       r"(25[0-5]|2[0-4][0-9]|[0-1]?[0-9][0-9]?)")
_VRF = r"(Vrf[a-zA-Z0-9_-]+)|(default)|(mgmt)"
ROUTE_VRF = re.compile(_VRF)
NEXTHOP_VRFS = re.compile(rf"((({_VRF}),)*({_VRF}))?")
LISTS = ("blackhole", "nexthop", "ifname", "distance", "nexthop-vrf")  # bgpcfgd's, per hop

_UA = "an adjacency uSID (End.X with NEXT-CSID); twin forwards on node uSIDs (uN) only"
_MIGRATE = (f"migrate: one {LOCATORS} entry per locator (prefix, block_len, node_len, "
            f"func_len, arg_len), and each SID as {SIDS}|<locator>|<prefix>/<length> "
            "with action uN, uA or uDT46 (sonic-srv6.yang); SONiC has no db_migrator "
            "step for it")


def twin_port(name: str) -> str:
    """SONiC's EthernetM as twin's eth<M/4 + 1> (containerlab sonic-vs); others as written."""
    m = re.fullmatch(r"Ethernet(\d+)", name)
    return f"eth{int(m[1]) // 4 + 1}" if m and int(m[1]) % 4 == 0 else name


def sonic_port(name: str) -> str:
    """twin's ethN as SONiC's Ethernet<4(N-1)>; others as written."""
    m = re.fullmatch(r"eth([1-9]\d*)", name)
    return f"Ethernet{4 * (int(m[1]) - 1)}" if m else name


def _token(value: object, limit: int = 40) -> str:
    """A value of the file as an error quotes it: escaped, and cut to `limit` characters."""
    text = value if isinstance(value, str) else json.dumps(value)
    text = text if len(text) <= limit else text[:limit - 3] + "..."
    return repr(text) if isinstance(value, str) else text


def _key(k: str, limit: int = 64) -> str:
    """An entry's key as errors and origins name it (cut, never echoed whole)."""
    k = k.encode("unicode_escape").decode("ascii")
    return k if len(k) <= limit else k[:limit - 3] + "..."


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
            r.add(f"{name}|{_key(k)}", f"is {_kind(fields)}, not an object of fields",
                  '"<key>": {"<field>": "<value>"}')
    return {k: f for k, f in table.items() if isinstance(f, dict)}


def _old_schema(db: dict, r: _Reading) -> None:
    """SRV6_MY_SID_TABLE in CONFIG_DB: the schema before SRV6_MY_SIDS, named with a hint."""
    if OLD_SIDS in db:
        table = db[OLD_SIDS]
        n = len(table) if isinstance(table, dict) else 0
        r.add(OLD_SIDS, f"is the older single-table SRv6 schema ({n} SID"
              f"{'' if n == 1 else 's'}, each with its own lengths): SONiC's SRv6 HLD of "
              f"2021 and APPL_DB's table for srv6orch; bgpcfgd reads {LOCATORS} and {SIDS} "
              "and ignores it", _MIGRATE)


def _fields(fields: dict, known: tuple[str, ...], table: str, where: str,
            r: _Reading) -> None:
    """Every field is one of the model's leaves (sonic-yang refuses an entry with another)."""
    for name in fields:
        if name not in known:
            yang = ROUTE_YANG if table == ROUTES else SRV6_YANG
            r.add(f"{where}.{_key(name, 32)}", f"is not a field of {table} in {yang}",
                  f"its fields: {', '.join(known)}" + (
                      f"; write {RENAMED[name]}" if name in RENAMED else ""))


def _texts(fields: dict, names: tuple[str, ...], where: str, r: _Reading) -> list | None:
    """String fields (None when absent); None for all when one is of another type."""
    bad = [n for n in names if not isinstance(fields.get(n, ""), str)]
    for n in bad:
        r.add(f"{where}.{n}", f"is {_kind(fields[n])} ({_token(fields[n])}), not a string",
              f'SONiC keeps fields as strings: "{n}": "..."')
    return None if bad else [fields.get(n) for n in names]


def _bits(fields: dict, name: str, default: int, low: int, where: str,
          r: _Reading) -> int | None:
    """A bit length, `low` to 128 (the model's uint8 range): a JSON number or a string of
    digits, as sonic-yang turns either into the integer it validates."""
    value = fields.get(name, default)
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,3}", value):
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= 128:
        return value
    r.add(f"{where}.{name}", f"{_token(value)} is not an integer {low} to 128 "
          f"(uint8 range {low}..128 in {SRV6_YANG})", f'"{name}": "{default}"')
    return None


def _vrf(name: str | None, vrfs: set[str], where: str, r: _Reading) -> None:
    """A VRF a table points at: "default", or a key of the file's VRF table (the leafref)."""
    if name not in (None, DEFAULT_VRF) and name not in vrfs:
        r.add(where, f"VRF {_token(name)} is not in the {VRFS} table, and not \"default\" "
              f"(a leafref in {SRV6_YANG})",
              f'add "{VRFS}": {{"<name>": {{}}}} (config vrf add <name>), or use "default"')


@dataclass(frozen=True)
class _Locator:
    block: ipaddress.IPv6Network  # every SID of the locator lies in it
    prefix: ipaddress.IPv6Network  # block + node: a uN SID lies in it
    block_len: int
    node_len: int


def _locator(name: str, fields: dict, vrfs: set[str], r: _Reading) -> _Locator | None:
    """One locator. Its prefix is an address (the model's inet:ipv6-address), which
    bgpcfgd turns into the prefix <address>/<block_len + node_len>."""
    where, n = f"{LOCATORS}|{_key(name)}", len(r.problems)
    _fields(fields, LOCATOR_FIELDS, LOCATORS, where, r)
    lens = [_bits(fields, f, d, low, where, r) for f, d, low in LENGTHS]
    text, vrf = _texts(fields, ("prefix", "vrf"), where, r) or [None, None]
    _vrf(vrf, vrfs, f"{where}.vrf", r)
    address, hint = None, '"prefix": "fcbb:bb00:101::"'
    if text is not None and "/" in text:
        r.add(f"{where}.prefix", f"{_token(text)} has a length: {SRV6_YANG} types a "
              "locator's prefix as inet:ipv6-address, and bgpcfgd appends "
              "/block_len+node_len itself (a length is frrcfgd's spelling)",
              f"write the address alone: {_token(text.partition('/')[0])}")
    elif text is not None:
        try:
            address = ipaddress.IPv6Address(text)
        except ValueError:
            r.add(f"{where}.prefix", f"{_token(text)} is not an IPv6 address", hint)
    if "prefix" not in fields:
        r.add(f"{where}.prefix", f"missing: a locator needs its prefix (mandatory in "
              f"{SRV6_YANG})", hint)
    if len(r.problems) > n or address is None:
        return None
    if sum(lens) > 128:
        r.add(where, f"block_len + node_len + func_len + arg_len is {sum(lens)}, over 128 "
              f"(a must of {SRV6_YANG})")
        return None
    block, node = lens[0], lens[1]
    prefix = ipaddress.IPv6Network((address, block + node), strict=False)
    if prefix.network_address != address:
        r.add(f"{where}.prefix", f"{address} has bits set past block_len + node_len "
              f"({block + node}): bgpcfgd's locator prefix {address}/{block + node} has host "
              "bits, and it refuses it", f'"prefix": "{prefix.network_address}"')
        return None
    return _Locator(prefix.supernet(new_prefix=block), prefix, block, node)


def _sid_prefix(text: str, where: str, r: _Reading) -> ipaddress.IPv6Network | None:
    """A SID key's prefix: with a length, and no host bits (bgpcfgd's IPv6Network)."""
    if "/" not in text:
        r.add(where, f"{_token(text)} has no prefix length: the key is <locator>|<prefix> "
              f"(inet:ipv6-prefix) since {SRV6_YANG}'s second revision; <locator>|<address> "
              "is its first (January 2025), which bgpcfgd no longer reads",
              f"write the SID's length: {_token(text + '/48')}")
        return None
    try:
        net = ipaddress.IPv6Network(text, strict=False)
    except ValueError:
        r.add(where, f"{_token(text)} is not an IPv6 prefix", "e.g. fcbb:bb00:101::/48")
        return None
    if ipaddress.IPv6Address(text.partition("/")[0]) != net.network_address:
        r.add(where, f"{_token(text)} has host bits set: bgpcfgd's IPv6Network refuses it "
              "and installs nothing", f"write {net}")
        return None
    return net


def _action(action: str | None, fields: dict, where: str, r: _Reading) -> None:
    """The action, as the model's enum spells it; uA's interface and adj (the model's
    musts, and bgpcfgd's)."""
    if action is None and "action" not in fields:
        r.add(f"{where}.action", "missing: a SID needs its action (bgpcfgd skips a SID "
              "without one)", '"action": "uN"')
    elif action is not None and action not in ACTIONS:
        spelled = {a.lower(): a for a in ACTIONS}.get(action.lower())
        r.add(f"{where}.action", f"{_token(action)} is not one of {SRV6_YANG}'s "
              f"{', '.join(ACTIONS)}" + (" (an enum is case-sensitive)" if spelled else ""),
              f'"action": "{spelled}"' if spelled else
              "SONiC's config takes uN, uA and uDT46; End, uDT6, ... are actions of APPL_DB "
              "(srv6orch), which no CONFIG_DB entry reaches")
    if action == A_UA and not fields.get("interface"):
        r.add(f"{where}.interface", f"missing: interface is mandatory when action is 'uA' "
              f"({SRV6_YANG}; bgpcfgd skips the SID too)", '"interface": "Ethernet0"')
    if "adj" in fields and action != A_UA:
        r.add(f"{where}.adj", f"adj is only applicable when action is 'uA' ({SRV6_YANG})",
              "remove adj")


def _sid(k: str, fields: dict, locators: dict[str, _Locator], names: tuple[set, set],
         node: str, fabric: Fabric, r: _Reading) -> LocalSid | Dropping | None:
    """One SRV6_MY_SIDS entry in the plan's terms (None: a problem, reported). `names` are
    the file's VRF and PORT keys. SONiC's bgpcfgd refuses a SID outside its locator's
    block, and a uN outside its prefix."""
    where, n = f"{SIDS}|{_key(k)}", len(r.problems)
    vrfs, ports = names
    name, bar, text = k.partition("|")
    prefix = _sid_prefix(text, where, r) if bar else None
    if not bar:
        r.add(where, "the key is not <locator>|<prefix>", '"loc1|fcbb:bb00:101::/48"')
    if bar and name not in locators:
        r.add(where, f"locator {_token(name)} is not in {LOCATORS}",
              f"add {LOCATORS}|{_key(name, 32)}, or key the SID by one of: "
              + (", ".join(sorted(locators)[:8]) or "(none)"))
    _fields(fields, SID_FIELDS, SIDS, where, r)
    got = _texts(fields, SID_FIELDS, where, r)
    action, vrf, dscp, port, adj = got or (None,) * 5
    if got is not None:
        _action(action, fields, where, r)
        _vrf(vrf, vrfs, f"{where}.decap_vrf", r)
    if dscp is not None and dscp not in DSCP_MODES:
        r.add(f"{where}.decap_dscp_mode", f"{_token(dscp)} is not one of {SRV6_YANG}'s "
              "uniform, pipe", f'"decap_dscp_mode": "{DSCP}"')
    if port and ports and port not in ports:
        r.add(f"{where}.interface", f"{_token(port)} is not in the {PORTS} table (a "
              f"leafref in {SRV6_YANG})", "name a port of the PORT table")
    if adj is not None:
        try:
            adj = str(ipaddress.IPv6Address(adj))
        except ValueError:
            r.add(f"{where}.adj", f"{_token(adj)} is not an IPv6 address", '"adj": "fe80::1"')
    if len(r.problems) > n:
        return None
    loc, vrf = locators[name], vrf or DEFAULT_VRF
    if not (loc.prefix if action == A_UN else loc.block).supernet_of(prefix):
        r.add(where, f"{prefix} is outside locator {name}'s "
              + (f"prefix {loc.prefix}" if action == A_UN else f"block {loc.block}"),
              "key the SID by the locator it lies in; SONiC would not install it")
        return None
    if action == A_UN or (action == A_UDT46 and vrf == DEFAULT_VRF):
        dev = "" if action == A_UN else decap_port(prefix, node, fabric)
        return LocalSid(str(prefix), UN if action == A_UN else DECAP, dev,
                        loc.block_len, loc.node_len)
    if action == A_UDT46:
        return Dropping(str(prefix), f"{A_UDT46} decap_vrf {vrf}",
                        f"decapsulates into VRF {vrf}; the NIC address is in the default VRF")
    return Dropping(str(prefix), f"{A_UA} interface {port}" + (f" adj {adj}" if adj else ""),
                    _UA)


def _route_key(k: str, where: str, r: _Reading):
    """A STATIC_ROUTE key, `[<vrf>|]<prefix>`: the VRF and the prefix (None: reported)."""
    vrf, bar, text = k.partition("|")
    vrf, text = (vrf, text) if bar else (DEFAULT_VRF, k)
    if not ROUTE_VRF.fullmatch(vrf):
        r.add(where, f"VRF {_token(vrf)} does not match {ROUTE_YANG}'s vrf_name (default, "
              "mgmt or Vrf<name>)", "SONiC's VRF names begin Vrf, with a capital V")
    if "/" not in text:
        r.add(where, f"{_token(text)} has no prefix length (inet:ip-prefix in {ROUTE_YANG})",
              f"write {_token(text + '/128')}, or the prefix the route is for")
        return vrf, None
    try:
        return vrf, ipaddress.ip_network(text, strict=False)  # FRR masks host bits
    except ValueError:
        r.add(where, f"{_token(text)} is not an IP prefix", "e.g. fcbb:bb00:101::/48")
        return vrf, None


def _hops(fields: dict, dst, where: str, r: _Reading) -> dict[str, list[str]] | None:
    """The per-hop lists of a route, checked as the model's patterns and bgpcfgd check
    them (None: a problem, reported). An empty field is no list, as bgpcfgd reads it."""
    got = _texts(fields, ROUTE_FIELDS, where, r)
    if got is None:
        return None
    text = dict(zip(ROUTE_FIELDS, got, strict=True))
    for name in ("blackhole", "advertise", "bfd"):
        if text[name] is not None and not BOOLS.fullmatch(text[name]):
            r.add(f"{where}.{name}", f"{_token(text[name])} does not match {ROUTE_YANG}'s "
                  "pattern ((true|false),)*(true|false)",
                  "lower case true or false, one per next hop")
    if text["distance"] is not None and not DISTANCES.fullmatch(text["distance"]):
        r.add(f"{where}.distance", f"{_token(text['distance'])} is not a list of distances "
              f"0 to 255 ({ROUTE_YANG})")
    if text["nexthop-vrf"] is not None and not NEXTHOP_VRFS.fullmatch(text["nexthop-vrf"]):
        r.add(f"{where}.nexthop-vrf", f"{_token(text['nexthop-vrf'])} is not a list of VRF "
              f"names (default, mgmt or Vrf<name>; {ROUTE_YANG})")
    lists = {n: text[n].split(",") for n in LISTS if text[n] and text[n].strip()}
    if len({len(v) for v in lists.values()}) > 1:
        r.add(where, "its next-hop lists have different lengths ("
              + ", ".join(f"{n} {len(v)}" for n, v in lists.items())
              + "): bgpcfgd refuses the route", "one element per next hop in each list")
    version = 6 if dst is None else dst.version
    for hop in lists.get("nexthop", []):
        try:
            ok = not hop or ipaddress.ip_address(hop).version == version
        except ValueError:
            ok = False
        if not ok:
            r.add(f"{where}.nexthop", f"{_token(hop)} is not an IPv{version} address "
                  "(bgpcfgd refuses the route)", '"nexthop": "fe80::201" (the next '
                  "switch's uSID)")
    return lists


def _route(k: str, fields: dict, r: _Reading) -> Route | None:
    """One STATIC_ROUTE entry in the plan's terms. None for a problem (reported), and for a
    route of another VRF or of IPv4, which no packet of the fabric meets."""
    where, n = f"{ROUTES}|{_key(k)}", len(r.problems)
    vrf, dst = _route_key(k, where, r)
    _fields(fields, ROUTE_FIELDS, ROUTES, where, r)
    lists = _hops(fields, dst, where, r)
    if len(r.problems) > n or dst is None or vrf != DEFAULT_VRF or dst.version != 6:
        return None
    hops = max(len(v) for v in lists.values()) if lists else 0
    if hops > 1:
        r.add(where, f"{hops} next hops (ECMP): MRC's tables hold one per destination",
              "spraying is the sender's choice of path (its EV); keep one next hop")
        return None
    one = {name: v[0] for name, v in lists.items()}
    if one.get("blackhole") == "true":  # SONiC drops whatever else the entry says
        return Route(str(dst), "", type="blackhole")
    if one.get("nexthop-vrf", DEFAULT_VRF) != DEFAULT_VRF:
        r.add(f"{where}.nexthop-vrf", f"leaks into VRF {one['nexthop-vrf']}; the fabric has "
              "one table", "remove nexthop-vrf")
        return None
    nexthop, ifname = one.get("nexthop", ""), one.get("ifname", "")
    via = None if nexthop in ("", "::") else str(ipaddress.IPv6Address(nexthop))
    if not ifname:
        r.add(f"{where}.ifname", "missing: twin's next hops (fe80::<uSID>) are reached out "
              "of a named port", '"ifname": "Ethernet0" (eth<N> is Ethernet<4(N-1)>)')
        return None
    return Route(str(dst), twin_port(ifname), via=via)


@register
class Sonic(FileInNodeDir):
    file = FILE
    name = "sonic"
    summary = "<node>/config_db.json: SONiC's SRV6_MY_LOCATORS, SRV6_MY_SIDS, STATIC_ROUTE"

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        r = _Reading(file)
        db = _load(text, r)
        _old_schema(db, r)
        names = set(_table(db, VRFS, r)), set(_table(db, PORTS, r))
        written = _table(db, LOCATORS, r)
        locators = {name: loc for name, fields in written.items()
                    if (loc := _locator(name, fields, names[0], r)) is not None}
        for k, fields in _table(db, SIDS, r).items():
            if k.partition("|")[0] in written.keys() - locators.keys():
                continue  # its locator is unreadable, and reported
            r.keep(_sid(k, fields, locators, names, node, fabric, r), f"{SIDS}|{_key(k)}")
        for k, fields in _table(db, ROUTES, r).items():
            r.keep(_route(k, fields, r), f"{ROUTES}|{_key(k)}")
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
        vrfs = {f.get("decap_vrf", DEFAULT_VRF) for f in sids.values()} - {DEFAULT_VRF}
        if vrfs:  # what `config vrf add` writes, for decap_vrf's leafref
            db[VRFS] = {v: {} for v in sorted(vrfs)}
        if tables.routes:
            db[ROUTES] = {f"{DEFAULT_VRF}|{r.dst}": _route_fields(r) for r in tables.routes}
        return json.dumps(db, indent=4, sort_keys=True) + "\n"


def _sid_fields(sid: LocalSid | Dropping) -> dict[str, str]:
    if isinstance(sid, Dropping):  # "<action> <field> <value> ...", as _sid wrote it
        action, *pairs = sid.what.split()
        return {"action": action, **dict(zip(pairs[::2], pairs[1::2], strict=False))}
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
