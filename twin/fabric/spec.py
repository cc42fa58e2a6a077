"""The fabric spec: the short YAML file a user writes, validated in one place.

A spec names the shape of a multi-plane two-tier fabric, never its parts:

    name: mrc-4p            # lab name: netns / container names derive from it
    planes: 4               # independent planes; every NIC has one port per plane
    racks: 2                # T0 groups; each plane has one T0 per rack
    hosts_per_rack: 2       # GPU NICs under each T0
    t1_per_plane: 2         # spine switches in each plane
    nic_ports: 4            # optional: ports per NIC (default: one per plane)
    mtu: 9000               # optional: every link
    rate: 1gbit             # optional: every link, or {host: ..., fabric: ...}
    congestion:             # optional, shaped fabrics only (on by default there):
      ecn: {min: 20KB, max: 80KB, last_hop: false}   # RED-like CE marking
      trim: 120KB           # virtual queue depth past which MRC packets are trimmed
      drop: 150KB           # the hard limit; `congestion: false` turns it all off
    srv6:                   # optional
      block: fcbb:bb00::/32 # the uSID block (F3216: 32-bit block, 16-bit uSIDs)
      dataplane: auto       # who runs the local SIDs: seg6local | ebpf | auto (the
                            # kernel's seg6local where it works, else eBPF; twin.dataplane)
    nic_prefix: fd00:4d52:43::/48   # optional: where inner NIC addresses live
    routing: static-srv6    # optional: static-srv6 (the default: MRC's source routing) or
                            # bgp (the baseline MRC replaces: eBGP unnumbered and ECMP on FRR)
    bgp:                    # optional, routing: bgp only (twin.fabric.bgp, docs/bgp-baseline.md)
      asn: {t0_base: 4200100000, t1_base: 4200000000}  # T0: t0_base + 1000 x plane + rack,
                            # T1 layer of a plane: t1_base + plane (RFC 7938, RFC 6996 private)
      timers: {keepalive: 3, hold: 9}  # seconds; FRR's datacenter profile
      bfd: {interval_ms: 300, multiplier: 3}   # absent: no BFD
      maximum_paths: 2      # ECMP width; default: t1_per_plane (the widest ECMP), at most 64
      link_prefix: fd00:4d52:4c::/48  # host links' /64s (one per NIC port)

`load_spec` reads a file and returns a frozen `FabricSpec`, or raises
`SpecError` with every problem found, each naming its key path and a hint. Each value
is checked by a validator of twin.validate (the vocabulary drill files, control
requests and CLI options share); a twin.validate.Problems collects what they refuse,
and what no one validator can see (one value against another) besides.
Nothing downstream re-validates: the rest of twin trusts a `FabricSpec`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from twin import validate as V
from twin.errors import Problem, SpecError
from twin.fabric.congestion import DEFAULT_FRACTIONS as _DEFAULT_FRACTION
from twin.fabric.congestion import Congestion, tbf_limit
from twin.fabric.routing import (
    ASN_PLANE_STRIDE,
    BGP,
    DEFAULT_LINK_PREFIX,
    MAX_PATHS,
    PRIVATE_ASNS,
    ROUTING_MODES,
    STATIC_SRV6,
    Bfd,
    BgpSpec,
)
from twin.validate import show_value

# The uSID layout (see twin.fabric.usid) gives these hard limits.
MAX_PLANES = 16  # the plane is the high nibble of every uSID
MAX_INDEX = 256  # racks, T1s per plane and hosts are each a byte of a uSID
MAX_NAME = 24  # lab names prefix namespace and container names

NAME_PATTERN = r"^[a-z][a-z0-9-]*$"

DEFAULT_BLOCK = "fcbb:bb00::/32"
DEFAULT_NIC_PREFIX = "fd00:4d52:43::/48"
DEFAULT_MTU = 9000
DATAPLANES = ("auto", "seg6local", "ebpf")  # twin.dataplane's backends, and auto


@dataclass(frozen=True)
class FabricSpec:
    name: str
    planes: int
    racks: int
    hosts_per_rack: int
    t1_per_plane: int
    nic_ports: int
    mtu: int
    host_rate_bps: int | None
    fabric_rate_bps: int | None
    block: ipaddress.IPv6Network
    nic_prefix: ipaddress.IPv6Network
    description: str = ""
    dataplane: str = "auto"  # one of DATAPLANES: what `twin up` uses unless told otherwise
    congestion: Congestion = Congestion()
    routing: str = STATIC_SRV6  # one of ROUTING_MODES
    bgp: BgpSpec | None = None  # set exactly when routing is bgp

    @property
    def signals(self) -> bool:
        """Whether shaped switch ports keep a virtual queue (ECN, trimming): on for a
        shaped fabric unless `congestion: false`."""
        shaped = bool(self.host_rate_bps or self.fabric_rate_bps)
        return shaped and self.congestion.enabled is not False

    @property
    def hosts(self) -> int:
        return self.racks * self.hosts_per_rack

    def to_dict(self) -> dict:
        """A spec mapping that `parse_spec` turns back into this spec."""
        d = {"name": self.name, "planes": self.planes, "racks": self.racks,
             "hosts_per_rack": self.hosts_per_rack, "t1_per_plane": self.t1_per_plane,
             "nic_ports": self.nic_ports, "mtu": self.mtu,
             "srv6": {"block": str(self.block)}, "nic_prefix": str(self.nic_prefix)}
        if self.dataplane != "auto":
            d["srv6"]["dataplane"] = self.dataplane
        if self.host_rate_bps or self.fabric_rate_bps:
            d["rate"] = {k: f"{v}bit" for k, v in (("host", self.host_rate_bps),
                                                    ("fabric", self.fabric_rate_bps)) if v}
        congestion = self.congestion.to_dict()
        if congestion is not None:
            d["congestion"] = congestion
        if self.description:
            d["description"] = self.description
        if self.routing != STATIC_SRV6:  # absent by default, so static labs' files keep
            d["routing"] = self.routing  # their bytes
        if self.bgp is not None:
            d["bgp"] = self.bgp.to_dict()
        return d


# key -> (type description, required)
_KEYS: dict[str, tuple[str, bool]] = {
    "name": ("string", True),
    "description": ("string", False),
    "planes": ("integer", True),
    "racks": ("integer", True),
    "hosts_per_rack": ("integer", True),
    "t1_per_plane": ("integer", True),
    "nic_ports": ("integer", False),
    "mtu": ("integer", False),
    "rate": ("rate", False),
    "srv6": ("mapping", False),
    "nic_prefix": ("IPv6 prefix", False),
    "congestion": ("mapping", False),
    "routing": ("string", False),
    "bgp": ("mapping", False),
}
_SRV6_KEYS = {"block": "IPv6 prefix", "format": "string", "dataplane": "string"}
_RATE_KEYS = {"host": "rate", "fabric": "rate"}
_CONGESTION_KEYS = {"ecn": "mapping", "trim": "size", "drop": "size"}
_ECN_KEYS = {"min": "size", "max": "size", "last_hop": "boolean"}
_BGP_KEYS = {"asn": "mapping", "timers": "mapping", "bfd": "mapping",
             "maximum_paths": "integer", "link_prefix": "IPv6 prefix"}
_ASN_KEYS = {"t0_base": "integer", "t1_base": "integer"}
_TIMER_KEYS = {"keepalive": "integer", "hold": "integer"}
_BFD_KEYS = {"interval_ms": "integer", "multiplier": "integer"}

# The validators of single values (twin.validate); a check of one against another is
# _validate's. The fabric's shape, in the order its problems are reported:
_SHAPE = {
    "planes": V.Int(1, MAX_PLANES,
                    hint="the plane is the high nibble of every uSID, so 1 to 16 planes"),
    "racks": V.Int(1, MAX_INDEX, hint="the rack is the low byte of a T0 uSID, so 1 to 256 racks"),
    "hosts_per_rack": V.Int(1, MAX_INDEX, hint="each host port is one byte of uSID space, so "
                            "at most 256 hosts in all"),
    "t1_per_plane": V.Int(1, MAX_INDEX,
                          hint="the T1 is the low byte of its uSID, so 1 to 256 per plane"),
    "mtu": V.Int(1280, 65535, hint="IPv6 needs at least 1280; MRC's 4096-byte payload wants "
                 "4400 or more"),
}
_FORMAT = V.Choice(("F3216",), words=V.DOCUMENT.but(choice="only {names} is supported (got {got})"),
                   hint="F3216 is a 32-bit block followed by 16-bit uSIDs, as MRC uses")
_BLOCK = V.IPv6Prefix(32, "fc00::/7", hint="a /32 from the ULA range, e.g. fcbb:bb00::/32")
_DATAPLANE = V.Choice(DATAPLANES, words=V.DOCUMENT.but(choice="unknown data plane {got}"),
                      hint=f"one of {', '.join(DATAPLANES)}: seg6local needs "
                      "CONFIG_IPV6_SEG6_LWTUNNEL, ebpf needs CONFIG_NET_CLS_BPF and clsact, "
                      "auto picks what the kernel has")
_NIC_PREFIX = V.IPv6Prefix(48, "fd00::/8", hint="a /48 under fd00::/8, e.g. fd00:4d52:43::/48")
_ROUTING = V.Choice(ROUTING_MODES, words=V.DOCUMENT.but(choice="unknown routing mode {got}"),
                    hint=f"one of {', '.join(ROUTING_MODES)}: static-srv6 is MRC's source "
                    "routing, bgp the eBGP/ECMP fabric it replaces")
_ASN = V.Int(1, 4294967294, hint="a 4-byte private ASN (RFC 6996: 4200000000-4294967294)")
_KEEPALIVE = V.Int(1, 21845, hint="seconds; FRR's datacenter profile sends one every 3")
_HOLD = V.Int(3, 65535, hint="seconds (RFC 4271: 0 or at least 3; 0, never expire, would "
              "hide a dead peer from a drill)")
_BFD_INTERVAL = V.Int(10, 60000, hint="FRR's bfdd takes 10 to 60000 ms between control packets")
_BFD_MULTIPLIER = V.Int(2, 255, hint="packets missed before the session is down: FRR's bfdd "
                        "takes 2 to 255")
_SIZE = V.Size(words=V.ONE)  # congestion thresholds: "must be a size in bytes such as ..."
_LINK_PREFIX = V.IPv6Prefix(48, "fd00::/8",
                            hint=f"a /48 under fd00::/8, e.g. {DEFAULT_LINK_PREFIX}")


class LabName(V.Validator):
    """A lab name (the spec's `name:`, `twin up --name`): it prefixes namespace and
    container names, so lowercase letters, digits and '-', at most MAX_NAME long."""

    what = "lowercase letters, digits and '-'"
    _form = V.Str(NAME_PATTERN)

    def check(self, value, path="", ctx=None):
        try:
            self._form.check(value, path)
        except V.Invalid:
            raise self.refuse(self.words.wrong, value, path, self.hint or
                              "the name prefixes namespace and container names, "
                              "e.g. mrc-4p") from None
        if len(value) > MAX_NAME:
            raise V.Invalid(f"must be at most {MAX_NAME} characters (got {len(value)})",
                            "the name prefixes namespace and container names; shorten it",
                            path)
        return value


def yaml_problem(e: yaml.YAMLError) -> Problem:
    """A YAML syntax error as a Problem at its line and column (shared with drill files)."""
    mark = getattr(e, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
    what = getattr(e, "problem", None) or str(e)
    return Problem(where, f"YAML syntax error: {what}", "check indentation and quoting there")


def load_spec(path: str | Path) -> FabricSpec:
    """Read and validate a spec file. Raises SpecError (never a traceback)."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(source, [Problem("(file)", f"cannot read: {e.strerror}",
                                         "pass a path such as lab/fabrics/mrc-4p.yml")]) from None
    return parse_spec(text, source)


def parse_spec(text: str, source: str = "<spec>") -> FabricSpec:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(source, [yaml_problem(e)]) from None
    if not isinstance(data, dict):
        raise SpecError(source, [Problem("(top level)",
                                         f"must be a mapping (got {show_value(data)})",
                                         "start from lab/fabrics/mrc-4p.yml")])
    return _validate(data, source)


def name_problem(name) -> tuple[str, str] | None:
    """What is wrong with a lab name (the spec's `name:`, or `twin up --name`): (message,
    hint), or None."""
    try:
        LabName().check(name)
    except V.Invalid as e:
        return e.message, e.hint
    return None


def _validate(data: dict, source: str) -> FabricSpec:
    c = V.Problems()
    c.keys(data, _KEYS)
    for key, (_, required) in _KEYS.items():
        if required and key not in data:
            c.say(key, "is required", f"add '{key}:' (see lab/fabrics/mrc-4p.yml)")

    name = c.check(LabName(), data, "name")
    description = c.check(V.Str(), data, "description") or ""
    planes, racks, hpr, t1, mtu = (c.check(v, data, key) for key, v in _SHAPE.items())
    nic_ports = None
    if planes is not None:
        nic_ports = c.check(V.Int(1, planes, hint="a NIC port attaches to one plane, so 1 "
                                  f"to planes ({planes})"), data, "nic_ports")
    if racks is not None and hpr is not None and racks * hpr > MAX_INDEX:
        c.say("hosts_per_rack",
              f"uSID space exhausted: racks x hosts_per_rack = {racks * hpr} hosts, "
              f"but host-port uSIDs have room for {MAX_INDEX} per plane",
              f"use at most {MAX_INDEX // racks} hosts per rack with {racks} racks")

    host_rate = fabric_rate = None
    if "rate" in data:
        rate = data["rate"]
        if isinstance(rate, dict):
            c.keys(rate, _RATE_KEYS, "rate")
            host_rate = c.check(V.Rate(), rate, "host", "rate")
            fabric_rate = c.check(V.Rate(), rate, "fabric", "rate")
        else:
            host_rate = fabric_rate = c.value(V.Rate(), rate, "rate")

    block = ipaddress.IPv6Network(DEFAULT_BLOCK)
    srv6 = data.get("srv6", {})
    srv6 = c.mapping(srv6, "srv6", _SRV6_KEYS, "e.g. srv6: {block: fcbb:bb00::/32}")
    c.check(_FORMAT, srv6, "format", "srv6")
    block = c.check(_BLOCK, srv6, "block", "srv6") or block
    dataplane = c.check(_DATAPLANE, srv6, "dataplane", "srv6") or "auto"

    congestion = _congestion(c, data, mtu if mtu is not None else DEFAULT_MTU,
                             {"host": host_rate, "fabric": fabric_rate})

    nic_prefix = ipaddress.IPv6Network(DEFAULT_NIC_PREFIX)
    nic_prefix = c.check(_NIC_PREFIX, data, "nic_prefix") or nic_prefix
    if nic_prefix.overlaps(block):
        c.say("nic_prefix", f"{nic_prefix} overlaps the uSID block {block}",
              "inner NIC addresses and uSID paths must not share space")

    routing = c.check(_ROUTING, data, "routing") or STATIC_SRV6
    bgp = None
    if routing == BGP:
        if "dataplane" in srv6:
            c.say("srv6.dataplane", "has no meaning with routing: bgp",
                  "a BGP fabric forwards plain IPv6 and installs no local SIDs; "
                  "remove srv6.dataplane or use routing: static-srv6")
        bgp = _bgp(c, data.get("bgp", {}), t1, planes, racks, nic_prefix, block)
    elif "bgp" in data:
        c.say("bgp", "is only for routing: bgp",
              "add 'routing: bgp', or remove the bgp: section for MRC's static SRv6 fabric")

    if c.problems:
        raise SpecError(source, c.problems)
    assert name and planes and racks and hpr and t1  # guaranteed by the checks above
    return FabricSpec(
        name=name,
        description=description,
        planes=planes,
        racks=racks,
        hosts_per_rack=hpr,
        t1_per_plane=t1,
        nic_ports=nic_ports if nic_ports is not None else planes,
        mtu=mtu if mtu is not None else DEFAULT_MTU,
        host_rate_bps=host_rate,
        fabric_rate_bps=fabric_rate,
        block=block,
        nic_prefix=nic_prefix,
        dataplane=dataplane,
        congestion=congestion,
        routing=routing,
        bgp=bgp,
    )


def with_routing(spec: FabricSpec, routing: str) -> FabricSpec:
    """The same fabric under another routing mode, with the defaults of that mode
    (`twin plan mrc-4p --routing bgp`): a spec's own bgp: section is kept when it
    asks for bgp already, dropped for static-srv6."""
    if routing == spec.routing:
        return spec
    if routing not in ROUTING_MODES:
        raise ValueError(f"unknown routing mode {routing!r}")
    if routing == STATIC_SRV6:
        return replace(spec, routing=STATIC_SRV6, bgp=None)
    c = V.Problems()
    bgp = _bgp(c, {}, spec.t1_per_plane, spec.planes, spec.racks, spec.nic_prefix, spec.block)
    if c.problems:  # the defaults fit every fabric the spec allows; say so if not
        raise SpecError(spec.name, c.problems)
    return replace(spec, routing=routing, bgp=bgp)


BGP_HINT = ("e.g. bgp: {asn: {t0_base: 4200100000, t1_base: 4200000000}, "
            "timers: {keepalive: 3, hold: 9}, bfd: {interval_ms: 300, multiplier: 3}}")


def _mapping(c: V.Problems, path: str, value: Any, keys: dict, hint: str) -> dict:
    return {} if value is None else c.mapping(value, path, keys, hint)


def _asn_ranges(c: V.Problems, t0_base: int, t1_base: int, planes: int, racks: int) -> None:
    """Every ASN the scheme gives stays private (RFC 6996), and the tiers stay apart."""
    t0_last = t0_base + ASN_PLANE_STRIDE * (planes - 1) + racks - 1
    t1_last = t1_base + planes - 1
    fits = True
    for key, first, last, what in (("t0_base", t0_base, t0_last, "T0s"),
                                   ("t1_base", t1_base, t1_last, "T1 layers")):
        if not any(lo <= first and last <= hi for lo, hi in PRIVATE_ASNS):
            c.say(f"bgp.asn.{key}", f"the {what}' ASNs {first}-{last} leave the private "
                  "ranges", "RFC 6996: 64512-65534 or 4200000000-4294967294; T0 ASNs are "
                  f"t0_base + {ASN_PLANE_STRIDE} x plane + rack, a T1 layer's t1_base + plane")
            fits = False
    if fits and t0_base <= t1_last and t1_base <= t0_last:
        c.say("bgp.asn", f"T0 ASNs {t0_base}-{t0_last} and T1 ASNs {t1_base}-{t1_last} "
              "overlap", "give each tier its own range, e.g. t0_base: 4200100000, "
              "t1_base: 4200000000")


def _bgp(c: V.Problems, raw: Any, t1: int | None, planes: int | None, racks: int | None,
         nic_prefix: ipaddress.IPv6Network, block: ipaddress.IPv6Network) -> BgpSpec:
    """The `bgp:` mapping (routing: bgp), every default resolved: the rest of twin reads
    a BgpSpec and never a default of its own."""
    raw = _mapping(c, "bgp", raw, _BGP_KEYS, BGP_HINT)
    dflt = BgpSpec()

    asn = _mapping(c, "bgp.asn", raw.get("asn"), _ASN_KEYS,
                   "e.g. asn: {t0_base: 4200100000, t1_base: 4200000000}")
    before = len(c.problems)
    t0_base = c.check(_ASN, asn, "t0_base", "bgp.asn")
    t1_base = c.check(_ASN, asn, "t1_base", "bgp.asn")
    t0_base = dflt.t0_base if t0_base is None else t0_base
    t1_base = dflt.t1_base if t1_base is None else t1_base
    if len(c.problems) == before and planes is not None and racks is not None:
        _asn_ranges(c, t0_base, t1_base, planes, racks)

    timers = _mapping(c, "bgp.timers", raw.get("timers"), _TIMER_KEYS,
                      "e.g. timers: {keepalive: 3, hold: 9}")
    keepalive = c.check(_KEEPALIVE, timers, "keepalive", "bgp.timers")
    hold = c.check(_HOLD, timers, "hold", "bgp.timers")
    keepalive = dflt.keepalive if keepalive is None else keepalive
    hold = dflt.hold if hold is None else hold
    if keepalive * 3 > hold and ("keepalive" in timers or "hold" in timers):
        c.say("bgp.timers.hold", f"must be at least 3 x keepalive ({3 * keepalive}; got {hold})",
              "a hold time shorter than three keepalives drops sessions on one late packet")

    bfd = None
    if "bfd" in raw and raw["bfd"] is not False:
        got = {} if raw["bfd"] is True else raw["bfd"]
        got = _mapping(c, "bgp.bfd", got, _BFD_KEYS,
                       "e.g. bfd: {interval_ms: 300, multiplier: 3}, or leave it out")
        interval = c.check(_BFD_INTERVAL, got, "interval_ms", "bgp.bfd")
        mult = c.check(_BFD_MULTIPLIER, got, "multiplier", "bgp.bfd")
        bfd = Bfd(interval_ms=Bfd().interval_ms if interval is None else interval,
                  multiplier=Bfd().multiplier if mult is None else mult)

    widest = min(t1 or 1, MAX_PATHS)
    paths = c.check(V.Int(1, MAX_PATHS, hint=f"the ECMP width; a T0 reaches a remote rack "
                          f"through every T1 of its plane ({t1 or '?'}); FRR's MULTIPATH_NUM "
                          f"caps it at {MAX_PATHS}"), raw, "maximum_paths", "bgp")
    paths = widest if paths is None else paths

    link_prefix = ipaddress.IPv6Network(DEFAULT_LINK_PREFIX)
    link_prefix = c.check(_LINK_PREFIX, raw, "link_prefix", "bgp") or link_prefix
    for other, what in ((nic_prefix, "nic_prefix"), (block, "the uSID block")):
        if link_prefix.overlaps(other):
            c.say("bgp.link_prefix", f"{link_prefix} overlaps {what} ({other})",
                  "host links, NIC addresses and uSID paths must not share space")

    return BgpSpec(t0_base=t0_base, t1_base=t1_base, keepalive=keepalive, hold=hold,
                   bfd=bfd, maximum_paths=paths, link_prefix=link_prefix)


CONGESTION_HINT = "e.g. congestion: {ecn: {min: 20KB, max: 80KB}, trim: 120KB, drop: 150KB}"


def _congestion(c: V.Problems, data: dict, mtu: int, rates: dict[str, int | None]) -> Congestion:
    """The `congestion:` mapping: thresholds in bytes, checked against each other and
    against tbf's own queue on every shaped kind of link (a threshold past it would
    never be reached: tbf drops first, and a trimmed header would not get through)."""
    if "congestion" not in data:
        return Congestion()
    raw = data["congestion"]
    if raw is False:
        return Congestion(enabled=False)
    if raw is True or raw is None:
        return Congestion()
    if not isinstance(raw, dict):
        c.say("congestion", f"must be a mapping or false (got {show_value(raw)})",
              CONGESTION_HINT)
        return Congestion()
    c.keys(raw, _CONGESTION_KEYS, "congestion")
    ecn = c.mapping(raw.get("ecn", {}), "congestion.ecn", _ECN_KEYS,
                    "e.g. ecn: {min: 20KB, max: 80KB, last_hop: false}")
    got = {}
    for key, path, where in (("ecn_min", "congestion.ecn.min", ecn),
                             ("ecn_max", "congestion.ecn.max", ecn),
                             ("trim", "congestion.trim", raw), ("drop", "congestion.drop", raw)):
        short = path.rsplit(".", 1)[1]
        if short in where:
            got[key] = c.value(_SIZE, where[short], path)
    last_hop = c.check(V.Bool(hint="true marks CE on a T0's host-facing ports too; MRC "
                              "keeps it off"), ecn, "last_hop", "congestion.ecn") or False
    shaped = {kind: rate for kind, rate in rates.items() if rate}
    if not shaped:
        c.say("congestion", "needs shaped links (rate:)",
              "unshaped links never queue (the CPU is the bottleneck, not a queue), so "
              "there is nothing to mark or trim; add rate: {host: ..., fabric: ...}")
        return Congestion()
    order = [("ecn_min", "congestion.ecn.min"), ("ecn_max", "congestion.ecn.max"),
             ("trim", "congestion.trim"), ("drop", "congestion.drop")]
    present = [(k, p) for k, p in order if got.get(k) is not None]
    for (k1, p1), (k2, p2) in zip(present, present[1:], strict=False):
        may_equal = (k1, k2) == ("ecn_max", "trim")
        if got[k2] < got[k1] or (got[k2] == got[k1] and not may_equal):
            c.say(p2, f"must be {'at least' if may_equal else 'above'} {p1} "
                  f"(got {got[k2]} against {got[k1]} bytes)",
                  "the order is ecn.min < ecn.max <= trim < drop")
    if got.get("trim") is not None and got["trim"] < mtu + 14:
        c.say("congestion.trim", f"must hold one whole frame ({mtu + 14} bytes at mtu {mtu}; "
              f"got {got['trim']})", "below it every full-size packet is trimmed, queue or not")
    for kind, rate in sorted(shaped.items()):
        limit = tbf_limit(rate, mtu)
        for k, p in present:
            if got[k] >= limit:
                c.say(p, f"{got[k]} bytes is not below tbf's queue on the {kind} links "
                      f"({limit} bytes at {rate} bit/s: rate x 20 ms + burst)",
                      f"set it below {limit}, or leave it out for a default "
                      f"({int(100 * _DEFAULT_FRACTION[k])}% of tbf's queue)")
    return Congestion(ecn_min=got.get("ecn_min"), ecn_max=got.get("ecn_max"),
                      last_hop=last_hop, trim=got.get("trim"), drop=got.get("drop"))


def find_spec(name_or_path: str, fabrics_dir: Path) -> Path:
    """Accept `lab/fabrics/mrc-4p.yml`, `mrc-4p.yml` or plain `mrc-4p`."""
    p = Path(name_or_path)
    if p.exists():
        return p
    for candidate in (fabrics_dir / name_or_path, fabrics_dir / f"{name_or_path}.yml"):
        if candidate.exists():
            return candidate
    known = sorted(f.stem for f in fabrics_dir.glob("*.yml"))
    raise SpecError(name_or_path, [Problem("(file)", "no such spec file",
                                           "shipped fabrics: " + ", ".join(known))])
