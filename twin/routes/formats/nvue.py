"""Cumulus Linux NVUE's startup.yaml: the SRv6 locators, static SIDs and static routes an
NVIDIA Spectrum switch takes from `nv config show -o yaml`.

One file per node, `<node>/startup.yaml`, as `nv config show -o yaml` prints it and as
NVUE keeps it in /etc/nvue.d/startup.yaml: a YAML list of one `- set:` mapping (the
configuration) and an optional `- header:` (model and version, not read). Three
subtrees of the `set` mapping are read; the rest (interface, system, bridge, router
bgp, ...) is ignored, because ports and addresses are the addressing plan's (README,
"Addressing") and `twin up --routes` keeps them. The field names are NVUE's, from
NVIDIA's NVUE command reference and the Cumulus Linux 5.14 user guide (sources:
tests/data/routes/nvue/SOURCES.md; CumulusNetworks/docs at the commits named there):

    router.segment-routing.srv6.state             enabled | disabled
    router.segment-routing.srv6.locator.<name>    prefix (its length is block + node),
                                                  block-length 16..64 (default 16),
                                                  node-length 0..64 (16), func-length 0..64 (0)
    router.segment-routing.static.srv6-sid.<sid>  locator-name, behavior, interface
    vrf.default.router.static.<prefix>            address-family, via.<via-id>: type,
                                                  interface, vrf, flag; tag (not read)

A SID becomes the plan's LocalSid by its behavior. uN is UN, with its locator's
block-length and node-length as block_len and usid_len. uA (End.X with NEXT-CSID, which
NVUE requires an interface for) is kept as Dropping: twin forwards on node uSIDs only.

A route of the default VRF becomes a Route: a via of type ipv6-address is the next hop,
out of the via's `interface`; a via of type interface is a route out of that port with
no next hop; `blackhole` a blackhole, `reject` an unreachable route (FRR installs
`reject` as the kernel's unreachable). More than one via (ECMP) is refused: MRC's
tables hold one next hop per destination, and spraying is the sender's choice of path.
Routes of other VRFs and IPv4 routes are ignored: the fabric's ports are in the default
VRF and carry IPv6 only, so no packet of the fabric meets them.

Decisions where the reference leaves something open:

- Decap. NVUE 5.14 documents the behaviours uN and uA only: it is a switch's OS, and
  hosts run none. A host's decap is read in the spelling of FRR's `static-sids`, which
  NVUE writes its static SIDs into (`sid X locator L behavior uA interface swp1`; FRR
  10's static SIDs also take uDT4, uDT6 and uDT46 with `vrf`): behavior uDT6 or uDT46,
  with `vrf` absent or `default`, is DECAP on its `interface` (absent: on any port, as
  seg6local's End.DT6 acts); into another VRF it is Dropping, as is uDT4 (IPv4 only).
  `render` writes uDT6, End.DT6 with NEXT-CSID, the plan's End.DT6 table local in uSID
  terms. `vrf` is FRR's word, not NVUE's: the one field name here not in NVIDIA's
  reference.
- Case. Behaviours are matched as NVUE spells them (uN, uA): `UN` is refused, with the
  spelling in the hint; NVUE's schema is an enumeration.
- srv6 state. The reference enables segment routing with `srv6 state enabled` before
  anything else, and shows it disabled otherwise. A SID in a file whose state is not
  `enabled` (or unset) is kept as Dropping: the switch installs none of them, so a
  packet for it dies there, and the check says why.
- Prefixes with host bits set (a SID, a locator, a route) are read as their network, as
  FRR and the kernel install them: NVIDIA's own reference writes its examples so
  (`srv6-sid 2001:db8:1:1::100/48`, locator `prefix 2001:db8:1:1::/32`).
- A route's prefix may be NVUE's `default6` (::/0) or `default` (0.0.0.0/0, ignored as
  IPv4): the static routing guide calls them functionally equivalent.
- A via's type, when absent, is told from its id: `blackhole`, `reject`, an address,
  else an interface name (netlab's NVUE template writes the type always; NVUE derives it).
- `distance` (`static <prefix> distance <d> via ...`) nests the next hops one level
  down; with one next hop per destination it changes nothing, and it is refused with a
  hint rather than read.

Ports. Cumulus Linux names front-panel ports swpN from swp1, and eth0 is its management
port; containerlab's cvx kind keeps eth0 for management and wires a link to the
container's interface by its swp name (lab-examples/cvx01: "sw1:swp12"). twin's ports
are eth1, eth2, ... after the same eth0. So swpN is twin's ethN and ethN is swpN: both
are read, NVUE's is written. A name the rule does not fit (swp1s0, a breakout; bond1)
is kept as written, and the check finds a port the node does not have.

Strictness. The YAML is read with PyYAML's safe loader (on libyaml's parser where
PyYAML has it). A key written twice in one mapping is refused (YAML keeps the last,
silently), as are aliases (`nv config show` writes none, and an alias bomb costs the
walker time), documents that are not one list of mappings, a second `- set:` (netlab's
template writes one per route; `nv config show` prints one), `- unset:` (a diff's), and
keys this format does not know inside the subtrees it reads, each named by its key
path and line. Deep nesting and numbers past Python's conversion limit are one line
each, never a traceback. A value is never echoed beyond a short escaped token.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import yaml

from twin.errors import Problem, SpecError
from twin.fabric.model import Fabric
from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Route
from twin.routes.formats.base import WHAT, FileInNodeDir, register
from twin.routes.tables import Dropping, NodeTables, Origin, key

FILE = "startup.yaml"
DEFAULT_VRF = "default"
SR = ("router", "segment-routing")
STATIC = ("vrf", DEFAULT_VRF, "router", "static")
LENGTHS = {"block-length": (16, 64, 16), "node-length": (0, 64, 16),
           "func-length": (0, 64, 0)}  # NVUE's range and default for each
DEFAULTS = {"default6": "::/0", "default": "0.0.0.0/0"}  # NVUE's names for default routes
DECAPS = ("uDT6", "uDT46")  # twin's DECAP, into the default VRF (FRR's spelling)
BEHAVIORS = ("uN", "uA", *DECAPS, "uDT4")
VIA_TYPES = ("ipv6-address", "interface", "blackhole", "reject", "ipv4-address")
SHAPE_HINT = ("startup.yaml is a list: `- set:` and the configuration under it "
              "(nv config show -o yaml)")
WRITE = "uDT6"  # what `render` writes for a host port's decap

_UA = "an adjacency uSID (End.X with NEXT-CSID); twin forwards on node uSIDs (uN) only"
_IPV4 = "decapsulates to IPv4; the fabric's inner packets are IPv6"
_OFF = ("segment routing is not enabled (router.segment-routing.srv6.state): the switch "
        "installs none of its SIDs")


def twin_port(name: str) -> str:
    """Cumulus Linux's swpN as twin's ethN (containerlab's cvx kind); others as written."""
    m = re.fullmatch(r"swp([1-9]\d*)", name)
    return f"eth{m[1]}" if m else name


def nvue_port(name: str) -> str:
    """twin's ethN as Cumulus Linux's swpN; others as written."""
    m = re.fullmatch(r"eth([1-9]\d*)", name)
    return f"swp{m[1]}" if m else name


def short(value: object, most: int = 40) -> str:
    """A value of the file as a message may show it: escaped, and at most `most` characters."""
    if isinstance(value, dict | list):
        return "a mapping" if isinstance(value, dict) else "a list"
    if not isinstance(value, str):  # a number, true/false, null: as YAML wrote it
        text = str(value)[:most + 1]
        return text[:most] + "..." if len(text) > most else text
    out = repr(value[:most])
    return out + "..." if len(value) > most else out


def _name(k: object) -> str:
    """A key in a key path: as written when short and printable, else `short`."""
    return k if isinstance(k, str) and len(k) <= 48 and k.isprintable() and k else short(k)


# -- the YAML -------------------------------------------------------------------------------


class _Map(dict):
    """A YAML mapping, with the line each key was written on (1-based)."""

    def __init__(self):
        super().__init__()
        self.lines: dict = {}


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """PyYAML's safe loader (libyaml's parser where PyYAML has it: a fabric's files load
    in a third of the time), refusing aliases and keys written twice, keeping key lines."""

    def construct_object(self, node, deep=False):
        if node in self.constructed_objects:  # a node met twice: an alias of it
            raise yaml.constructor.ConstructorError(
                None, None, "an alias (*name): nv config show writes none", node.start_mark)
        return super().construct_object(node, deep)


def _mapping(loader: _Loader, node: yaml.MappingNode):
    out = _Map()
    yield out
    loader.flatten_mapping(node)
    for k_node, v_node in node.value:
        k = loader.construct_object(k_node, deep=True)
        try:
            hash(k)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "a key that is a list or a mapping", k_node.start_mark) from None
        if k in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {short(k)} is written twice in one mapping (first at line "
                f"{out.lines[k]}); YAML keeps only the last", k_node.start_mark)
        out[k] = loader.construct_object(v_node, deep=True)
        out.lines[k] = k_node.start_mark.line + 1


_Loader.add_constructor("tag:yaml.org,2002:map", _mapping)


# -- one file being read ---------------------------------------------------------------------


@dataclass(frozen=True)
class _At:
    """A place in the file: its key path and the line of its last key."""

    path: tuple
    line: int

    def __str__(self) -> str:
        return " ".join([f"line {self.line}", *(['.'.join(map(_name, self.path))]
                                                if self.path else [])])

    def into(self, m: _Map, k: object) -> _At:
        return _At((*self.path, k), m.lines.get(k, self.line))


class _Reading:
    """One file being read: its problems, each at `<file> line N <key path>`, and what was
    read, each item with the line it came from (twin.routes.tables.Origin)."""

    def __init__(self, file: str):
        self.file = file
        self.problems: list[Problem] = []
        self.read: dict[str, tuple[LocalSid | Dropping | Route, int]] = {}

    def add(self, at: _At | str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(f"{self.file} {at}".strip(), message, hint))

    def keep(self, item: LocalSid | Dropping | Route, at: _At) -> None:
        what = f"route {item.dst}" if isinstance(item, Route) else f"SID {item.prefix}"
        if what in self.read:
            self.add(at, f"{what} is also at line {self.read[what][1]}", "keep one of them")
        else:
            self.read[what] = (item, at.line)

    def tables(self, node: str) -> NodeTables:
        """What was read, in address order (as twin's plan orders it)."""
        def of(kind: type) -> tuple:
            found = [i for i, _ in self.read.values() if isinstance(i, kind)]
            return tuple(sorted(found, key=lambda i: ipaddress.IPv6Network(
                i.dst if isinstance(i, Route) else i.prefix)))
        origins = {key(i): Origin(self.file, f"line {line}") for i, line in self.read.values()}
        return NodeTables(node, of(Route), of(LocalSid), of(Dropping), origins)

    def mapping(self, m: _Map, at: _At, k: object) -> tuple[_Map, _At] | None:
        """The mapping under key `k` (None: absent, or not a mapping, reported)."""
        if k not in m:
            return None
        value, here = m[k], at.into(m, k)
        if value is None:  # `key:` with nothing under it: an empty mapping
            value = _Map()
        if not isinstance(value, _Map):
            self.add(here, f"is {_kind(value)}, not a mapping", SHAPE_HINT)
            return None
        return value, here

    def path(self, m: _Map, at: _At, keys: tuple) -> tuple[_Map, _At] | None:
        for k in keys:
            got = self.mapping(m, at, k)
            if got is None:
                return None
            m, at = got
        return m, at

    def known(self, m: _Map, at: _At, allowed: tuple, what: str) -> bool:
        """Every key of `m` is one of `allowed`; each other is reported (False)."""
        bad = [k for k in m if k not in allowed]
        for k in bad:
            self.add(at.into(m, k), f"{what} has no {_name(k)}: twin does not model it",
                     f"{what} holds {', '.join(allowed)}")
        return not bad

    def entries(self, m: _Map, at: _At) -> list[tuple[object, _Map, _At]]:
        """(key, fields, place) of a mapping of mappings; an entry that is not one is reported."""
        out = []
        for k in m:
            got = self.mapping(m, at, k)
            if got is not None:
                out.append((k, *got))
        return out


def _kind(value: object) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else "true/false"
    return {dict: "a mapping", _Map: "a mapping", list: "a list",
            str: "a string"}.get(type(value), "a number")


def _load(text: str, r: _Reading) -> tuple[_Map, _At] | None:
    """The `set` mapping of the file (None: unreadable or without one, reported)."""
    try:
        doc = yaml.load(text, Loader=_Loader)  # a SafeLoader: plain data only
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1} col {mark.column + 1}" if mark else ""
        said = "; ".join(w for w in (e.context, e.problem) if w) or "unreadable"
        r.add(where, f"not YAML: {short(said, 120)}", SHAPE_HINT)
        return None
    except (yaml.YAMLError, ValueError, RecursionError, MemoryError) as e:
        why = "nested too deep" if isinstance(e, RecursionError) else type(e).__name__
        r.add("", f"not YAML twin can read ({why})", SHAPE_HINT)
        return None
    if doc is None:
        r.add("", "is empty: no `- set:` configuration", SHAPE_HINT)
        return None
    if not isinstance(doc, list) or not all(isinstance(i, _Map) for i in doc):
        r.add("", f"is {_kind(doc) if not isinstance(doc, list) else 'a list of other things'}"
              ", not a list of `- header:` and `- set:`", SHAPE_HINT)
        return None
    found = None
    for n, item in enumerate(doc, 1):
        for k in item:
            at = _At((f"[{n}]", k), item.lines[k])
            if k == "set" and found is None and isinstance(item[k], _Map | None):
                found = (item[k] or _Map(), _At((), item.lines[k]))
            elif k == "set" and found is None:
                r.add(at, f"is {_kind(item[k])}, not a mapping", SHAPE_HINT)
            elif k == "set":
                r.add(at, "a second `- set:`: nv config show prints one", "merge them into one")
            elif k == "unset":
                r.add(at, "`- unset:` is a diff's (nv config diff), not a configuration",
                      "give the file nv config show -o yaml prints")
            elif k != "header":
                r.add(at, f"{_name(k)} is neither header nor set", SHAPE_HINT)
    if found is None and not r.problems:
        r.add("", "has no `- set:` configuration", SHAPE_HINT)
    return found


# -- the values ------------------------------------------------------------------------------


def _network(value: object, at: _At, r: _Reading, what: str = "an IPv6 prefix"):
    """An IP network, host bits cleared (None, reported, if it is none)."""
    try:
        return ipaddress.ip_network(value if isinstance(value, str) else "", strict=False)
    except ValueError:
        r.add(at, f"{short(value)} is not {what}", "e.g. fcbb:bb00:101::/48")
        return None


def _bits(fields: _Map, name: str, at: _At, r: _Reading) -> int | None:
    low, high, default = LENGTHS[name]
    value = fields.get(name, default)
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    r.add(at.into(fields, name), f"{short(value)} is not a length NVUE takes ({low} to {high})",
          f"{name}: {default}")
    return None


def _text(fields: _Map, name: str, at: _At, r: _Reading) -> str | None:
    """A string field (None when absent, or of another type, reported)."""
    value = fields.get(name)
    if value is None or isinstance(value, str):
        return value
    r.add(at.into(fields, name), f"is {_kind(value)} ({short(value)}), not a string")
    return None


@dataclass(frozen=True)
class _Locator:
    prefix: ipaddress.IPv6Network  # block + node: every SID of the locator lies in it
    block_len: int
    node_len: int


def _locator(fields: _Map, at: _At, r: _Reading) -> _Locator | None:
    """One locator. NVUE: "The prefix length must match the sum of block length and the
    node length"; a SID "must be part of the locator prefix"."""
    n = len(r.problems)
    if not r.known(fields, at, ("prefix", *LENGTHS), "a locator"):
        return None
    block, node, _func = (_bits(fields, k, at, r) for k in LENGTHS)
    if "prefix" not in fields:
        r.add(at, "missing: a locator needs its prefix", "prefix: fcbb:bb00:101::/48")
        return None
    prefix = _network(fields["prefix"], at.into(fields, "prefix"), r)
    if prefix is not None and prefix.version != 6:
        r.add(at.into(fields, "prefix"), f"{prefix} is not an IPv6 prefix")
        return None
    if len(r.problems) > n or prefix is None:
        return None
    if prefix.prefixlen != block + node:
        r.add(at.into(fields, "prefix"), f"{prefix} is /{prefix.prefixlen}, but block-length + "
              f"node-length is {block + node}", "NVUE: the prefix length must match the sum "
              "of block length and node length")
        return None
    return _Locator(prefix, block, node)


def _sid(k: object, fields: _Map, at: _At, locators: dict[str, _Locator | None],
         enabled: str | None, r: _Reading) -> LocalSid | Dropping | None:
    """One static SID in the plan's terms (None: a problem, reported)."""
    n = len(r.problems)
    if not r.known(fields, at, ("locator-name", "behavior", "interface", "vrf"), "a SID"):
        return None
    prefix = _network(k, at, r)
    if prefix is not None and prefix.version != 6:
        r.add(at, f"{prefix} is not an IPv6 prefix")
    name, behavior, ifname, vrf = (_text(fields, f, at, r)
                                   for f in ("locator-name", "behavior", "interface", "vrf"))
    if len(r.problems) > n or prefix is None:
        return None
    if name is None:
        r.add(at, "missing: a SID needs its locator-name", "locator-name: <a locator of "
              "router.segment-routing.srv6.locator>")
    elif name not in locators:
        r.add(at.into(fields, "locator-name"), f"no locator {short(name)} in "
              "router.segment-routing.srv6.locator", "one of: "
              + (", ".join(map(_name, locators)) or "(none)"))
    if behavior is None:
        r.add(at, "missing: a SID needs its behavior", "behavior: uN")
    elif behavior not in BEHAVIORS:
        r.add(at.into(fields, "behavior"), f"unknown behavior {short(behavior)}",
              "NVUE's are uN and uA (that case); twin also reads uDT6, uDT46, uDT4 for a "
              "host's decap, as FRR spells them")
    if behavior == "uA" and ifname is None:
        r.add(at, "missing: a uA SID needs its interface", "NVUE: if you specify uA, you must "
              "also provide the interface")
    if behavior == "uN" and ifname is not None:
        r.add(at.into(fields, "interface"), "a uN acts on every port: interface is for uA",
              "remove interface")
    if len(r.problems) > n or locators.get(name) is None:
        return None  # a problem, or a locator that is unreadable (and reported)
    loc = locators[name]
    if not loc.prefix.supernet_of(prefix):
        r.add(at, f"{prefix} is outside locator {_name(name)}'s prefix {loc.prefix}",
              "NVUE: the static segment identifier must be part of the locator prefix")
        return None
    what = " ".join([behavior, *(["interface", ifname] if ifname else []),
                     *(["vrf", vrf] if vrf else [])])
    if enabled != "enabled":
        return Dropping(str(prefix), f"{what} (srv6 state {enabled or 'unset'})", _OFF)
    if behavior == "uN":
        return LocalSid(str(prefix), UN, "", loc.block_len, loc.node_len)
    if behavior in DECAPS and (vrf or DEFAULT_VRF) == DEFAULT_VRF:
        return LocalSid(str(prefix), DECAP, twin_port(ifname or ""), loc.block_len,
                        loc.node_len)
    if behavior in DECAPS:
        return Dropping(str(prefix), what,
                        f"decapsulates into VRF {vrf}; the NIC address is in the default VRF")
    return Dropping(str(prefix), what, _UA if behavior == "uA" else _IPV4)


def _route(k: object, fields: _Map, at: _At, r: _Reading) -> Route | None:
    """One static route of the default VRF in the plan's terms. None for a problem
    (reported), and for an IPv4 route, which no packet of the fabric meets."""
    dst = _network(DEFAULTS.get(k, k), at, r, "an IP prefix")
    if dst is None or dst.version != 6:
        return None
    n = len(r.problems)
    if "distance" in fields:
        r.add(at.into(fields, "distance"), "a next hop under distance: twin reads one next "
              "hop, under via", f"nv set vrf default router static {dst} via <next hop>")
        return None
    if not r.known(fields, at, ("address-family", "via", "tag"), "a static route"):
        return None
    family = _text(fields, "address-family", at, r)
    if family not in (None, "ipv6-unicast"):
        r.add(at.into(fields, "address-family"), f"{short(family)} for the IPv6 prefix {dst}",
              "address-family: ipv6-unicast")
    vias = r.mapping(fields, at, "via")
    if vias is None and "via" not in fields:
        r.add(at, "missing: a static route needs its via", "via: {fe80::200: {interface: "
              "swp3, type: ipv6-address}}")
    hops = r.entries(*vias) if vias else []
    if len(r.problems) > n:
        return None
    if not hops:
        r.add(vias[1], "no next hop", "one via: the next switch's fe80::<uSID>")
        return None
    if len(hops) > 1:
        r.add(vias[1], f"{len(hops)} next hops (ECMP): MRC's tables hold one per destination",
              "spraying is the sender's choice of path (its EV); keep one next hop")
        return None
    return _via(str(dst), *hops[0], r)


def _via(dst: str, via: object, fields: _Map, at: _At, r: _Reading) -> Route | None:
    n = len(r.problems)
    if not r.known(fields, at, ("type", "interface", "vrf", "flag"), "a via"):
        return None
    kind, ifname, vrf, flag = (_text(fields, f, at, r)
                               for f in ("type", "interface", "vrf", "flag"))
    kind = kind or _via_type(via)
    if kind not in VIA_TYPES:
        r.add(at.into(fields, "type"), f"unknown type {short(kind)}",
              f"NVUE's: {', '.join(VIA_TYPES)}")
    if vrf not in (None, DEFAULT_VRF):
        r.add(at.into(fields, "vrf"), f"leaks into VRF {short(vrf)}; the fabric has one table",
              "remove vrf")
    if flag not in (None, "onlink"):
        r.add(at.into(fields, "flag"), f"unknown flag {short(flag)}", "NVUE's: onlink")
    if len(r.problems) > n:
        return None
    if kind in ("blackhole", "reject"):
        return Route(dst, "", type="blackhole" if kind == "blackhole" else "unreachable")
    if kind == "interface":
        return Route(dst, twin_port(str(via)))
    try:
        address = ipaddress.ip_address(via if isinstance(via, str) else "")
    except ValueError:
        address = None
    if address is None or address.version != 6:
        r.add(at, f"{short(via)} is not an IPv6 address",
              "the next switch's fe80::<uSID>, e.g. fe80::201")
        return None
    if not ifname:
        r.add(at, "missing: twin's next hops (fe80::<uSID>) are reached out of a named "
              "port: interface", "interface: swp1 (ethN is swpN)")
        return None
    return Route(dst, twin_port(ifname), via=str(address))


def _via_type(via: object) -> str:
    if via in ("blackhole", "reject"):
        return str(via)
    try:
        return f"ipv{ipaddress.ip_address(via if isinstance(via, str) else '').version}-address"
    except ValueError:
        return "interface"


# -- the format ------------------------------------------------------------------------------


@register
class Nvue(FileInNodeDir):
    file = FILE
    name = "nvue"
    summary = ("<node>/startup.yaml: Cumulus Linux NVUE's segment-routing srv6 locators, "
               "static srv6-sids and vrf default static routes")

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        r = _Reading(file)
        top = _load(text, r)
        if top is not None:
            _read(*top, r)
        if r.problems:
            raise SpecError(file, r.problems, WHAT)
        return r.tables(node)

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        """The node's startup.yaml, for `nv config replace` and `nv config apply`: one
        `- set:`, keys in NVUE's alphabetical order, prefixes in address order; one
        locator per uSID the node owns (a switch's named after it, a host's after node
        and port). A Dropping NVUE cannot say is written as a comment."""
        srv6, sids, unsaid = _srv6(tables)
        body: dict = {}
        if sids:
            body["router"] = {"segment-routing": {"srv6": srv6, "static": {"srv6-sid": sids}}}
        routes = [r for r in tables.routes if r.type != "prohibit"]
        if routes:
            body["vrf"] = {DEFAULT_VRF: {"router": {"static": {
                r.dst: _route_fields(r) for r in routes}}}}
        head = (f"# {tables.node}'s SRv6 locators, static SIDs and static routes (twin, "
                f"{self.name}),\n# as `nv config show -o yaml` prints them. On the switch:\n"
                "#   nv config replace startup.yaml && nv config apply\n")
        head += "".join(f"# not expressible in NVUE: SID {d.prefix} {d.what}\n" for d in unsaid)
        head += "".join(f"# not expressible in NVUE: route {r.describe()} (NVUE has "
                        "blackhole and reject)\n" for r in tables.routes if r.type == "prohibit")
        return head + yaml.safe_dump([{"set": body}], sort_keys=False,
                                     default_flow_style=False)


def _read(top: _Map, at: _At, r: _Reading) -> None:
    """Every SID and route of the `set` mapping, kept in `r`."""
    sr = r.path(top, at, SR)
    if sr is not None:  # an unknown key is reported, and what is known read all the same
        r.known(*sr, ("srv6", "static"), "segment-routing")
        srv6 = r.mapping(*sr, "srv6") or (_Map(), sr[1])
        r.known(*srv6, ("state", "locator"), "srv6")
        enabled = _text(srv6[0], "state", srv6[1], r)
        if enabled not in (None, "enabled", "disabled"):
            r.add(srv6[1].into(srv6[0], "state"), f"{short(enabled)} is neither enabled "
                  "nor disabled")
        written = r.mapping(*srv6, "locator")
        locators = {k: _locator(f, a, r) for k, f, a in (r.entries(*written) if written
                                                          else [])}
        static = r.mapping(*sr, "static")
        if static is not None:
            r.known(*static, ("srv6-sid",), "static")
            sids = r.mapping(*static, "srv6-sid")
            for k, fields, a in r.entries(*sids) if sids else []:
                found = _sid(k, fields, a, locators, enabled, r)
                if found is not None:
                    r.keep(found, a)
    routes = r.path(top, at, STATIC)
    for k, fields, a in r.entries(*routes) if routes else []:
        found = _route(k, fields, a, r)
        if found is not None:
            r.keep(found, a)


def _sid_fields(sid: LocalSid | Dropping, locator: str) -> dict | None:
    """A SID's NVUE fields (None: a Dropping NVUE cannot say)."""
    if isinstance(sid, LocalSid):
        words = ["uN"] if sid.behavior == UN else \
            [WRITE, *(["interface", nvue_port(sid.dev)] if sid.dev else [])]
    else:
        words = sid.what.split()
    behavior, rest = words[0], dict(zip(words[1::2], words[2::2], strict=False))
    if (behavior not in BEHAVIORS or set(rest) - {"interface", "vrf"} or len(words) % 2 == 0
            or (behavior == "uA") > ("interface" in rest)
            or (behavior == "uN") and "interface" in rest):
        return None  # not as this format reads it: uA has an interface, uN none
    return {"behavior": behavior, **rest, "locator-name": locator}


def _srv6(tables: NodeTables) -> tuple[dict, dict, list[Dropping]]:
    """The srv6 mapping (state, locators) and the static srv6-sid mapping for a node's SIDs,
    and the Droppings NVUE cannot say. A Dropping's locator is F3216, as the plan's are."""
    names: dict[tuple, str] = {}  # (locator prefix, block, node) -> its name
    sids, unsaid = {}, []
    every = [(s, s.block_len, s.usid_len, s.dev) for s in tables.sids]
    every += [(d, 32, 16, "") for d in tables.dropping]
    for sid, block, node, dev in every:
        net = ipaddress.IPv6Network(sid.prefix)
        loc = (net.supernet(new_prefix=min(block + node, net.prefixlen)), block, node)
        name = names.get(loc)
        if name is None:
            name = f"{tables.node}-{nvue_port(dev)}" if dev else tables.node
            name = name if name not in names.values() else f"{name}-{len(names) + 1}"
        fields = _sid_fields(sid, name)
        if fields is None:
            unsaid.append(sid)
            continue
        names[loc] = name
        sids[sid.prefix] = fields
    locators = {name: {"block-length": b, "func-length": 0, "node-length": n,
                       "prefix": str(p)} for (p, b, n), name in names.items()}
    return {"locator": locators, "state": "enabled"}, sids, unsaid


def _route_fields(route: Route) -> dict:
    """A route's NVUE fields: one via, typed as netlab's NVUE template types them."""
    if route.type != UNICAST:
        kind = "blackhole" if route.type == "blackhole" else "reject"
        return {"address-family": "ipv6-unicast", "via": {kind: {"type": kind}}}
    if route.via is None:
        via = {nvue_port(route.dev): {"type": "interface"}}
    else:
        via = {route.via: {"interface": nvue_port(route.dev), "type": "ipv6-address"}}
    return {"address-family": "ipv6-unicast", "via": via}
