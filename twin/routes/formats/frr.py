"""FRR's frr.conf: the static SRv6 SIDs and IPv6 static routes of an FRR-based switch.

One file per node, `<node>/frr.conf`: the integrated config FRR loads at boot, or
the output of `show running-config`, which has the same syntax. FRR 10's syntax
is read (FRRouting/frr at fbfc8222, tests/data/routes/frr/SOURCES.md): static SIDs
(`static-sids`, staticd) came with FRR 10.3, so Debian 12's FRR 8.4 cannot write them.
Interface names are kept as written (FRR names the kernel's ports: eth1 in twin's
labs; a switch's swp1 or Ethernet0 is reported by the check as a port the node lacks).

    segment-routing / srv6 / locators / locator NAME
        prefix X/M [block-len B] [node-len N] [func-bits F]   the locator
        format usid-f3216|usid-f4816|uncompressed-f4024       its lengths, by name
        behavior usid, flavor psp                             read, no effect (below)
    segment-routing / srv6 / static-sids
        sid X/M locator L behavior uN                         LocalSid uN
        sid X/M locator L behavior uDT6|uDT46 vrf default     LocalSid decap
        sid X/M locator L behavior uDT4 vrf V, uDT6|uDT46 vrf <not default>,
        sid X/M locator L behavior uA interface I [nexthop A] Dropping: why packets die
    ipv6 route P G I       Route P via G dev I (`vrf default` block or option allowed)
    ipv6 route P I         Route P dev I (no next hop: the check says what that does)
    ipv6 route P blackhole|Null0|reject                       Route of type blackhole
                                                              (reject: unreachable)

Reading follows FRR's own: indentation means nothing; `!` and `#` start comments;
a line a CLI node does not know is tried in its parent node, up to the top (so a
`static-sids` right after a locator, with no `exit`, is srv6's, as FRR reads it);
`exit` leaves a node, `end` all of them. Per-daemon files (zebra.conf plus
staticd.conf) are not read together: give the integrated frr.conf.

Lengths. A uN SID is installed (staticd) as End with NEXT-CSID, lblen the locator's
block length and nflen the SID's length less it: twin's block_len and usid_len. A
locator's block and node lengths are FRR's: `format` names them (F3216 is 32 and
16); else block-len and node-len, the one not written being the prefix length less
the other, and both unwritten node-len 24 (zebra's default: a bare `prefix X/48`
is F2424, which the check reports as not F3216). `behavior usid` and `flavor psp`
change nothing staticd installs for a static SID, so they are read and not used.

Decap. FRR on a Linux host installs `uDT6 vrf default` as End.DT6 into table 254
(main) and uDT46 as End.DT46 with VRF table 254 (FRR's static_srv6_sids topotest
expects `"table": 254`): the End.DT6 trap (DESIGN.md section 5), where the NIC
address, in table local, is not found. An FRR-based switch programs the ASIC
instead, whose default VRF holds it. twin reads decapsulation into the default
VRF as the fabric's decap (as the sonic format does) on the host port whose uSID
the prefix is (plane p's port of host h owns <block>:<port(p, h)>::/48); `twin up
--routes` installs it the way twin installs its own, which does deliver.

Ignored, with the reason: `frr version`, `frr defaults`, `hostname` (an operator's
hostnames are not twin's node names; the file's directory names the node), `log`,
`service`, `debug`, `line vty` (management); `ip forwarding` (and `no ip
forwarding`: IPv4), `ipv6 forwarding` and `interface` (or `int`) blocks (addresses,
descriptions, MTU, link state): interfaces, addresses and sysctls belong to the
addressing plan (README, "Addressing") and twin sets them; `ip route` (IPv4) and
routes of a VRF other than default: the fabric's ports are in the default VRF and
carry IPv6 only, so no packet of the fabric meets them; `encapsulation /
source-address`: encapsulating is the endpoints'. Refused, naming the line: `router
<protocol>` (routes a protocol learns are not in the file: check the node's RIB as
`ip -j -6 route show` instead), `no ipv6 forwarding` (the node would not forward),
`ipv6 route` with `segments` (an encap route), `table`, `nexthop-vrf`, `from`, a
gateway without an interface, a second next hop for a prefix (MRC's tables hold one
per destination), a SID written twice, a locator's second prefix or lengths FRR
refuses, a SID of a locator not configured or outside it, a behaviour FRR's `sid`
does not take (a `show running-config` may print `uN PSP`, `End`, ...), and any line
twin does not know. A problem quotes at most a short token of its line.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from twin.errors import Problem, SpecError
from twin.fabric.model import Fabric
from twin.fabric.plan import DECAP, UN, UNICAST, LocalSid, Route
from twin.routes.formats.base import WHAT, FileInNodeDir, decap_port, register
from twin.routes.tables import Dropping, NodeTables, Origin, key

FILE = "frr.conf"
DEFAULT_VRF = "default"
TOKEN = 32  # at most this many characters of a line's word go into a problem
# zebra's defaults for a locator `prefix` without lengths (zebra_srv6_vty.h)
NODE_LEN, FUNC_BITS = 24, 16
FORMATS = {"usid-f3216": (32, 16, 48), "usid-f4816": (48, 16, 64),
           "uncompressed-f4024": (40, 24, 64)}  # name: block, node, prefix length
LENGTHS = {"block-len": (16, 64), "node-len": (0, 64), "func-bits": (0, 64)}
DECAPS = ("uDT6", "uDT46")  # twin's DECAP, when into the default VRF
BEHAVIORS = ("uN", "uA", "uDT4", *DECAPS)  # what FRR 10's `sid` command takes
ROUTE_OPTIONS = ("tag", "metric")  # take a value; with a distance, no effect on one route
SID_HINT = "sid fcbb:bb00:100::/48 locator <name> behavior uN"
ROUTE_HINT = "ipv6 route fcbb:bb00:200::/48 fe80::200 eth3"
ONE_NEXT_HOP = "MRC's tables hold one next hop per destination"
WHY_REFUSED = {  # `ipv6 route` words twin does not read, and why
    "segments": "an encap route: the endpoints write the path into the destination",
    "table": "a route in another table, which no packet of the fabric looks up",
    "nexthop-vrf": "a next hop in another VRF; the fabric has one table",
    "from": "a source-specific route; twin's routes match the destination only",
    "label": "an MPLS route; the fabric forwards on uSIDs",
}
_IPV4 = "decapsulates to IPv4; the fabric's inner packets are IPv6"
_VRF = "decapsulates into VRF {vrf}; the NIC address is in the default VRF"
_UA = "an adjacency uSID (End.X with NEXT-CSID); twin forwards on node uSIDs (uN) only"


def _token(word: str) -> str:
    """A word of the file as a problem quotes it: escaped, and cut short."""
    text = word if len(word) <= TOKEN else word[:TOKEN] + "..."
    return repr(text)


@dataclass
class _Locator:
    name: str
    line: int
    prefix: tuple[int, list[str]] | None = None  # the `prefix` line and its words
    format: tuple[int, str] | None = None


@dataclass
class _Node:
    """A CLI node being read: its kind (top, segment-routing, srv6, locators, locator,
    static-sids, encapsulation, vrf, ignored), its argument, and for an ignored
    block whether its contents may lie at any indentation (a block twin knows)."""

    kind: str
    arg: str = ""
    indent: int = 0
    known: bool = True


TOP_WORDS = ("segment-routing", "vrf", "interface", "int", "router", "hostname", "frr",
             "log", "line", "service", "debug", "end")


def _top_level(words: list[str]) -> bool:
    """A line that only the top of the config takes: it ends an ignored block."""
    return (words[0] in TOP_WORDS and (words[0] != "segment-routing" or len(words) == 1)) \
        or words[:2] in (["ip", "route"], ["ipv6", "route"], ["ip", "forwarding"],
                         ["ipv6", "forwarding"]) \
        or words[:3] in (["no", "ip", "forwarding"], ["no", "ipv6", "forwarding"])


@dataclass
class _Reading:
    """One file being read: the statements twin reads, gathered first (a SID may name a
    locator written after it), and every problem, each at `<file> line N`."""

    node: str
    file: str
    fabric: Fabric | None
    problems: list[Problem] = field(default_factory=list)
    stack: list[_Node] = field(default_factory=lambda: [_Node("top")])
    locators: dict[str, _Locator] = field(default_factory=dict)
    sids: list[tuple[int, list[str]]] = field(default_factory=list)
    routes: list[tuple[int, list[str]]] = field(default_factory=list)
    read: dict[str, tuple[Route | LocalSid | Dropping, int]] = field(default_factory=dict)

    def add(self, line: int, message: str, hint: str = "") -> None:
        self.problems.append(Problem(f"{self.file} line {line}", message, hint))

    # -- the CLI's nodes ------------------------------------------------------------------

    def line(self, n: int, indent: int, words: list[str]) -> None:
        """One line, in the node it belongs to (FRR: a command a node does not know is
        tried in its parent)."""
        if words == ["end"]:
            del self.stack[1:]
            return
        while True:
            here = self.stack[-1]
            if words == ["exit"] or (words == ["exit-vrf"] and here.kind == "vrf"):
                if len(self.stack) > 1:
                    self.stack.pop()
                return
            if getattr(self, f"_in_{here.kind.replace('-', '_')}")(n, indent, words):
                return
            if len(self.stack) == 1:
                self.add(n, f"{_token(' '.join(words[:2]))} is not a line twin reads",
                         "twin reads segment-routing/srv6 locators and static-sids, and "
                         "ipv6 route; see twin.routes.formats.frr")
                self._enter("ignored", indent=indent, known=False)  # its block, if any
                return
            self.stack.pop()

    def _enter(self, kind: str, arg: str = "", indent: int = 0, known: bool = True) -> None:
        self.stack.append(_Node(kind, arg, indent, known))

    def _in_top(self, n: int, indent: int, words: list[str]) -> bool:
        w = words + ["", ""]
        if words == ["segment-routing"]:
            self._enter("segment-routing")
        elif w[:2] == ["ipv6", "route"]:
            self.routes.append((n, words[2:]))
        elif w[0] == "vrf" and len(words) == 2:
            self._enter("vrf", words[1])
        elif w[0] in ("interface", "int") or w[:2] == ["line", "vty"]:
            self._enter("ignored", indent=indent)  # the addressing plan's; management
        elif w[0] == "router":
            self.add(n, f"router {_token(w[1])}: routes a protocol learns are not in "
                     "the file, and twin checks static tables",
                     "check the node's RIB instead: `ip -j -6 route show` (iproute2-json)")
            self._enter("ignored", indent=indent)
        elif w[:3] == ["no", "ipv6", "forwarding"]:
            self.add(n, "no ipv6 forwarding: the node would not forward the fabric's "
                     "packets", "remove it; twin turns forwarding on")
        elif not (w[0] in ("hostname", "log", "service", "debug") or w[:2] == ["ip", "route"]
                  or w[:2] in (["frr", "version"], ["frr", "defaults"])
                  or w[:2] in (["ip", "forwarding"], ["ipv6", "forwarding"])
                  or w[:3] == ["no", "ip", "forwarding"]):  # IPv4: the fabric carries none
            return False
        return True

    def _in_ignored(self, n: int, indent: int, words: list[str]) -> bool:
        here = self.stack[-1]
        return not _top_level(words) if here.known else indent > here.indent

    def _in_segment_routing(self, n: int, indent: int, words: list[str]) -> bool:
        if words == ["srv6"]:
            self._enter("srv6")
            return True
        return False

    def _in_srv6(self, n: int, indent: int, words: list[str]) -> bool:
        if words in (["locators"], ["static-sids"], ["encapsulation"]):
            self._enter(words[0])
            return True
        return False

    def _in_encapsulation(self, n: int, indent: int, words: list[str]) -> bool:
        return words[0] == "source-address"  # the headend's: encapsulating is the endpoints'

    def _in_locators(self, n: int, indent: int, words: list[str]) -> bool:
        if words[0] != "locator" or len(words) != 2:
            return False
        self.locators.setdefault(words[1], _Locator(words[1], n))
        self._enter("locator", words[1])
        return True

    def _in_locator(self, n: int, indent: int, words: list[str]) -> bool:
        loc = self.locators[self.stack[-1].arg]
        if words[0] == "prefix":
            if loc.prefix is not None:
                self.add(n, f"locator {_token(loc.name)} has a second prefix (first at line "
                         f"{loc.prefix[0]})", "one prefix per locator")
            loc.prefix = (n, words[1:])
        elif words[0] == "format" and len(words) == 2:
            if words[1] not in FORMATS:
                self.add(n, f"format {_token(words[1])} is not one FRR knows",
                         f"one of {', '.join(FORMATS)}")
            loc.format = (n, words[1])
        elif words not in (["behavior", "usid"], ["flavor", "psp"]):
            return False
        return True

    def _in_static_sids(self, n: int, indent: int, words: list[str]) -> bool:
        if words[0] != "sid":
            return False
        self.sids.append((n, words[1:]))
        return True

    def _in_vrf(self, n: int, indent: int, words: list[str]) -> bool:
        if words[:2] == ["ipv6", "route"]:
            if self.stack[-1].arg == DEFAULT_VRF:  # another VRF's: no packet meets it
                self.routes.append((n, words[2:]))
            return True
        return words[:2] == ["ip", "route"]

    # -- what was gathered, in twin's terms -----------------------------------------------

    def keep(self, item: Route | LocalSid | Dropping, n: int) -> None:
        name = f"route {item.dst}" if isinstance(item, Route) else f"SID {item.prefix}"
        if name in self.read:
            first = self.read[name][1]
            why = (f"FRR adds it as another next hop, and {ONE_NEXT_HOP}"
                   if isinstance(item, Route) else "FRR keeps only the last")
            self.add(n, f"{name} again (first at line {first}): {why}", "keep one of them")
        else:
            self.read[name] = (item, n)

    def tables(self) -> NodeTables:
        """What was read, in the file's order."""
        found = sorted(self.read.values(), key=lambda x: x[1])
        origins = {key(i): Origin(self.file, f"line {n}") for i, n in found}
        return NodeTables(self.node, tuple(i for i, _ in found if isinstance(i, Route)),
                          tuple(i for i, _ in found if isinstance(i, LocalSid)),
                          tuple(i for i, _ in found if isinstance(i, Dropping)), origins)


def _network(text: str, n: int, r: _Reading) -> ipaddress.IPv6Network | None:
    """An IPv6 prefix with its length and no host bits; None, reported, if not."""
    try:
        if "/" in text:
            return ipaddress.IPv6Network(text)
    except ValueError as e:
        if "host bits" in str(e):
            loose = ipaddress.IPv6Network(text, strict=False)
            r.add(n, f"{_token(text)} has host bits set", f"the network is {loose}")
            return None
    r.add(n, f"{_token(text)} is not an IPv6 prefix with a length", "e.g. fcbb:bb00:200::/48")
    return None


def _address(text: str, version: int = 6) -> str | None:
    try:
        return ipaddress.ip_address(text).compressed if ipaddress.ip_address(
            text).version == version else None
    except ValueError:
        return None


def _number(text: str, low: int, high: int) -> bool:
    """A plain decimal number in [low, high] (a few digits: never a huge int parsed)."""
    return text.isascii() and text.isdigit() and len(text) <= 3 and low <= int(text) <= high


@dataclass(frozen=True)
class _Lengths:
    prefix: ipaddress.IPv6Network
    block: int
    node: int

    @property
    def block_net(self) -> ipaddress.IPv6Network:
        return self.prefix.supernet(new_prefix=self.block)


def _locator(loc: _Locator, r: _Reading) -> _Lengths | None:
    """A locator's prefix and lengths as zebra sets them; None, reported, if it has none."""
    if loc.prefix is None:
        r.add(loc.line, f"locator {_token(loc.name)} has no prefix: FRR installs none of "
              "its SIDs", "prefix fcbb:bb00:100::/48 block-len 32 node-len 16")
        return None
    n, words = loc.prefix
    prefix = _network(words[0], n, r) if words else None
    if not words:
        r.add(n, "prefix without a value", "prefix fcbb:bb00:100::/48 block-len 32 node-len 16")
    lens, rest = {}, words[1:]
    while rest:
        k, v = rest[0], rest[1] if len(rest) > 1 else ""
        low, high = LENGTHS.get(k, (0, -1))
        if k in lens or not _number(v, low, high):
            what = "again" if k in lens else (f"must be {low} to {high}" if k in LENGTHS
                                              else "is not a word of `prefix`")
            r.add(n, f"{_token(k)} {what}", "prefix X/M [block-len 16-64] [node-len 0-64] "
                  "[func-bits 0-64]")
            return None
        lens[k], rest = int(v), rest[2:]
    if prefix is None:
        return None
    plen = prefix.prefixlen
    if loc.format is not None and loc.format[1] in FORMATS:
        block, node, want = FORMATS[loc.format[1]]
        if plen != want:
            r.add(loc.format[0], f"format {loc.format[1]} takes a /{want} prefix, and "
                  f"locator {_token(loc.name)}'s is /{plen}", "FRR refuses the format")
            return None
        return _Lengths(prefix, block, node)
    block, node = lens.get("block-len"), lens.get("node-len")
    if block is not None and node is not None and block + node != plen:
        r.add(n, f"block-len {block} + node-len {node} is not the prefix length {plen}",
              "FRR refuses it: block-len + node-len = the prefix length")
        return None
    node = node if node is not None else (plen - block if block is not None else NODE_LEN)
    block = block if block is not None else plen - node
    if block < 0 or plen + lens.get("func-bits", FUNC_BITS) > 128:
        r.add(n, f"a /{plen} prefix cannot hold these lengths",
              "prefix length + func-bits is at most 128, node-len at most the prefix length")
        return None
    return _Lengths(prefix, block, node)


def _sid(n: int, words: list[str], locators: dict[str, _Lengths | None],
         r: _Reading) -> LocalSid | Dropping | None:
    """One `sid` line in the plan's terms (None: a problem, reported)."""
    if len(words) < 5 or words[1] != "locator" or words[3] != "behavior":
        r.add(n, "a sid line is `sid X/M locator NAME behavior B ...`", SID_HINT)
        return None
    prefix, name, behavior, rest = _network(words[0], n, r), words[2], words[4], words[5:]
    if behavior not in BEHAVIORS:
        r.add(n, f"behavior {_token(behavior)} is not one FRR's sid command takes",
              f"one of {', '.join(BEHAVIORS)}")
        return None
    shape = {"uN": rest == [], "uA": rest[:1] == ["interface"] and len(rest) == 2 or (
        len(rest) == 4 and rest[0] == "interface" and rest[2] == "nexthop")}
    if not shape.get(behavior, len(rest) == 2 and rest[0] == "vrf"):
        r.add(n, f"behavior {behavior} followed by {_token(' '.join(rest[:2]) or 'nothing')}",
              {"uN": "uN takes nothing after it", "uA": "uA interface IFNAME [nexthop X:X::X]"
               }.get(behavior, f"{behavior} vrf VRFNAME, e.g. {behavior} vrf default"))
        return None
    if name not in locators:
        r.add(n, f"locator {_token(name)} is not configured (segment-routing / srv6 / "
              "locators): FRR never installs this SID", f"add `locator {name[:TOKEN]}`, or "
              "name one of: " + (", ".join(sorted(locators))[:60] or "(none)"))
        return None
    loc = locators[name]
    if prefix is None or loc is None:
        return None  # reported
    within = loc.prefix if behavior == "uN" else loc.block_net
    if not within.supernet_of(prefix):
        r.add(n, f"{prefix} is outside locator {_token(name)}'s "
              f"{'prefix' if behavior == 'uN' else 'block'} {within}",
              "name the locator the SID lies in")
        return None
    if behavior == "uN":
        return LocalSid(str(prefix), UN, "", loc.block, prefix.prefixlen - loc.block)
    if behavior in DECAPS and rest[1] == DEFAULT_VRF:
        return LocalSid(str(prefix), DECAP, decap_port(prefix, r.node, r.fabric), loc.block,
                        loc.node)
    why = _UA if behavior == "uA" else _IPV4 if behavior == "uDT4" else _VRF.format(vrf=rest[1])
    return Dropping(str(prefix), " ".join([behavior, *rest]), why)


def _route(n: int, words: list[str], r: _Reading) -> Route | None:
    """One `ipv6 route` (its words after `route`) in the plan's terms. None for a problem
    (reported) and for a route of another VRF."""
    if not words:
        r.add(n, "ipv6 route without a prefix", ROUTE_HINT)
        return None
    dst, rest = _network(words[0], n, r), words[1:]
    via = dev = kind = None
    if rest and rest[0] in ("blackhole", "Null0", "reject"):
        kind = "unreachable" if rest[0] == "reject" else "blackhole"
        rest = rest[1:]
    elif rest and rest[0] not in (*WHY_REFUSED, *ROUTE_OPTIONS, "vrf"):
        via = _address(rest[0])
        dev, rest = (None, rest[1:]) if via else (rest[0], rest[1:])
        if via and rest and rest[0] not in (*WHY_REFUSED, *ROUTE_OPTIONS, "vrf") \
                and not _number(rest[0], 1, 255):
            dev, rest = rest[0], rest[1:]
    vrf = DEFAULT_VRF
    while rest:
        word, value = rest[0], rest[1] if len(rest) > 1 else ""
        if _number(word, 1, 255):  # a distance
            rest = rest[1:]
        elif word in (*ROUTE_OPTIONS, "vrf") and value:
            vrf, rest = (value if word == "vrf" else vrf), rest[2:]
        else:
            r.add(n, f"{_token(word)}: " + WHY_REFUSED.get(word, "not a word twin reads in "
                  "ipv6 route"), "twin reads ipv6 route PREFIX GATEWAY IFNAME [tag N] "
                  "[DISTANCE] [metric N] [vrf default]")
            return None
    if dst is None or vrf != DEFAULT_VRF:
        return None
    if kind:
        return Route(str(dst), "", type=kind)
    if dev is None or _address(dev, 4):
        r.add(n, f"{dst} has " + ("no interface" if via else f"gateway {_token(dev or '')}, "
              "not an IPv6 address"), f"twin's next hops are link-local, out of a named "
              f"port: {ROUTE_HINT}")
        return None
    return Route(str(dst), dev, via)


@register
class Frr(FileInNodeDir):
    file = FILE
    name = "frr"
    summary = "<node>/frr.conf: FRR 10's segment-routing srv6 static-sids and ipv6 route"

    def parse(self, text: str, node: str, file: str, fabric: Fabric) -> NodeTables:
        r = _Reading(node, file, fabric)
        for n, raw in enumerate(text.splitlines(), 1):
            words = raw.split()
            if words and words[0][0] not in "!#":
                r.line(n, len(raw) - len(raw.lstrip()), words)
        locators = {name: _locator(loc, r) for name, loc in r.locators.items()}
        for n, words in r.sids:
            if (sid := _sid(n, words, locators, r)) is not None:
                r.keep(sid, n)
        for n, words in r.routes:
            if (route := _route(n, words, r)) is not None:
                r.keep(route, n)
        if r.problems:
            raise SpecError(file, sorted(r.problems, key=_line_of), WHAT)
        return r.tables()

    def render(self, tables: NodeTables, fabric: Fabric) -> str:
        """The node's frr.conf as FRR 10's `show running-config` prints it: the static
        routes, then zebra's locators (one per uSID the node owns, named after the node,
        and for a host's port after node and port), then staticd's static SIDs."""
        out = [f"! {tables.node}'s static routes and local SIDs (twin, frr), "
               "for FRR 10.3 or later (static SIDs)",
               f"hostname {tables.node}", "!"]
        out += [_route_line(r) for r in tables.routes] + (["!"] if tables.routes else [])
        locators, sids = _srv6(tables)
        if sids:
            out += ["segment-routing", " srv6", "  locators"]
            for name, (prefix, block, node) in locators.items():
                out += [f"   locator {name}",
                        f"    prefix {prefix} block-len {block} node-len {node}",
                        "    behavior usid", "   exit", "   !"]
            out += ["  exit", "  !", "  static-sids", *sids, "  exit", "  !", " exit", " !",
                    "exit", "!"]
        return "\n".join(out) + "\n"


def _line_of(p: Problem) -> int:
    return int(p.path.rsplit(" ", 1)[-1])


def _route_line(route: Route) -> str:
    if route.type != UNICAST:
        return f"ipv6 route {route.dst} {'reject' if route.type == 'unreachable' else 'blackhole'}"
    return " ".join(["ipv6 route", route.dst, *([route.via] if route.via else []), route.dev])


def _srv6(tables: NodeTables) -> tuple[dict[str, tuple], list[str]]:
    """The locators (name: prefix, block, node) and `sid` lines for a node's SIDs; a
    Dropping one (written as FRR wrote it) under an F3216 locator."""
    names: dict[tuple, str] = {}
    lines = []
    every = [(s, s.block_len, s.usid_len if s.behavior == UN else 16, s.dev)
             for s in tables.sids] + [(d, 32, 16, "") for d in tables.dropping]
    for sid, block, node, dev in every:
        net = ipaddress.IPv6Network(sid.prefix)
        loc = (net.supernet(new_prefix=min(block + node, net.prefixlen)), block,
               min(block + node, net.prefixlen) - block)
        if loc not in names:
            name = f"{tables.node}-{dev}" if dev else tables.node
            names[loc] = name if name not in names.values() else f"{name}-{len(names) + 1}"
        if isinstance(sid, Dropping):
            behavior = sid.what
        else:
            behavior = "uN" if sid.behavior == UN else f"uDT6 vrf {DEFAULT_VRF}"
        lines.append(f"   sid {sid.prefix} locator {names[loc]} behavior {behavior}")
    return {name: loc for loc, name in names.items()}, lines
