"""Drill files (lab/drills/*.yml): parsed and validated like fabric specs.

A drill is a chaos experiment with a verdict (docs/drills.md):

    name: t1-blackhole
    description: a T1 drops what it forwards; links and carrier stay up
    fabric: mrc-4p                      # the lab `make chaos` runs it on
    steady_state:                       # must hold before any fault
      verify: true
      goodput_floor: 100mbit
    method:
      traffic: {pattern: bulk, src: r0h0, dst: r1h0, size: 64M, mode: mrc}
      timeline:
        - at: 300ms
          fault: blackhole
          target: {random: t1}          # or a name: t1-p0-0
          for: 400ms                    # reverted after (else at the end)
    expect:
      exact: true
      repair_ms: "<= 50"
      goodput_retained: ">= 1 - lost_share - 0.2"
      step_retained: [">= 1 - lost_share - 0.1", "<= 1 - lost_share + 0.1"]
      localized: target
    rollback: {verify: true}           # always runs

A figure may take a list of comparisons: every one must hold (a band).

Every problem is reported with its key path and a hint, all at once (exit 2).
Names in targets are checked against a lab at run time (`resolve`), before
anything is applied.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import operator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from twin import validate as V
from twin.errors import Problem, SpecError, UsageError
from twin.fabric.spec import name_problem, yaml_problem
from twin.faults.kinds import FaultType
from twin.faults.registry import KINDS, kind_named
from twin.faults.targets import random_forms
from twin.mrc import cc as CC
from twin.mrc.modes import Mode
from twin.traffic import EVS, MAX_QPS, PATTERNS
from twin.validate import show_value

DRILL_DIR = Path(__file__).resolve().parents[2] / "lab" / "drills"
MAX_AT_NS = 600 * 10**9  # a timeline is at most ten minutes long
MAX_STEPS = 256
MIN_TAIL_NS = 200_000_000  # a timed traffic runs this long past the timeline's end, at least

# A random target's forms (`random: t1`), each drawn among what the traffic crosses; which
# fault kinds take which, and every kind's parameters, are the kinds' (twin.faults.kinds).
RANDOM = random_forms()

# Expectation keys: the figure each names (metrics.py computes them).
METRICS = {
    "exact": "every flow's bytes arrived byte-exact (true/false)",
    "localized": "every fault named by the prober (value: target)",
    "detection_us": "fault to the first EV retired on a dead path, worst fault",
    "repair_ms": "fault until every packet lost on a dead path is acked again, worst fault",
    "repair_us": "the same in µs",
    "localized_ms": "fault to the prober naming it, worst fault",
    "packets_lost": "packets declared lost after a fault, worst fault",
    "packets_lost_per_qp": "packets lost in the whole run (declared lost, less those a late "
                           "copy proved only late), worst QP",
    "goodput_retained": "goodput from the first fault to the end, over the goodput before",
    "settled_retained": "goodput over the last half of the faulted time, over before",
    "step_retained": "at each step of the timeline (from one fault applied or reverted to "
                     "the next), the level its goodput settled at over the level before; "
                     "judged at each step with lost_share that step's",
    "dip_depth": "1 - the lowest 5 ms goodput after a fault over the goodput before",
    "back_to_90_ms": "fault until the 5 ms goodput is back to 90% of before",
    "goodput_gbps": "the whole run's goodput",
    "completion_s": "first write to the last byte acked",
    "speedup": "the baseline's completion time over this run's (needs a baseline)",
    "bystander_retained": "the bystander flow's goodput next to the load over its goodput alone",
    "flow_spread": "1 - the least flow's goodput over the most's (0: every flow alike)",
    "least_fair_share": "the least of each flow's goodput over its fair share, from the "
                        "fabric's rates (a shaped fabric only)",
}
# Figures measured at each step of the timeline, each judged with that step's variables.
PER_STEP = ("step_retained",)
OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt,
       "==": operator.eq}
# Names an expectation may use: the fabric's shape, and what the faults take away.
VARIABLES = {
    "planes": "planes the hosts' NICs have ports on",
    "t1_per_plane": "T1s per plane",
    "racks": "racks",
    "hosts": "GPU hosts",
    "paths": "paths between two racks: planes x t1_per_plane",
    "lost_share": "the share of the traffic's capacity the faults take away, from the "
                  "fabric (all at once; in a step_retained comparison, the step's faults)",
}

_TOP = {"name", "description", "fabric", "steady_state", "method", "expect",
        "baseline_expect", "compare", "rollback"}
_STEADY = {"verify", "goodput_floor"}
_METHOD = {"traffic", "bystander", "timeline"}
_TRAFFIC = {"pattern", "src", "dst", "senders", "size", "for", "mode", "evs", "qps",
            "cc", "ecn", "trim"}
_BYSTANDER = {"src", "dst", "size"}
_STEP = {"at", "fault", "target", "for"}  # and the fault kinds' parameters (_param_keys)
_ROLLBACK = {"verify"}


@dataclass(frozen=True)
class Traffic:
    pattern: str
    src: str | None
    dst: str | None
    size: int
    mode: str = Mode.MRC.value
    evs: int = 128
    qps: int = 1  # QPs per flow, each with 1/qps of its bytes (twin.traffic.split_qps)
    senders: tuple[str, ...] = ()  # incast: these hosts only (default: every other host)
    # `for: 2s`: the run sizes every flow so that it lasts this long at the goodput the
    # steady state measured (runner.size_for): a fault then lands mid-transfer on any
    # machine. None: `size` bytes per flow, however long they take.
    for_ns: int | None = None
    # the senders' congestion control and signals (SenderConfig; None: the defaults)
    cc: str | None = None  # twin.mrc.cc; None: the mode's default (docs/congestion.md)
    ecn: bool | None = None  # use echoed CE marks
    trim: bool | None = None  # act on NACK(TRIMMED)


@dataclass(frozen=True)
class Bystander:
    src: str
    dst: str
    size: int


@dataclass(frozen=True)
class Step:
    """One fault on the timeline, `at` after the traffic's first write."""

    at_ns: int
    fault: str  # a fault kind's name (twin.faults.kinds.KINDS)
    target: str | None  # a name, or None with `random`
    random: str | None = None
    for_ns: int | None = None  # reverted this long after it was applied
    params: dict[str, Any] = field(default_factory=dict, hash=False)  # the kind's
    where: str = ""  # its key path, for errors at run time

    @property
    def kind(self) -> FaultType:
        return KINDS[self.fault]


@dataclass(frozen=True)
class Expectation:
    what: str  # a METRICS key
    op: str | None  # None: a bare value (exact: true, localized: target)
    value: Any  # the expression text, or the bare value
    where: str

    @property
    def want(self) -> str:
        return f"{self.op} {self.value}" if self.op else str(self.value).lower()

    def evaluate(self, variables: dict[str, float]) -> float:
        return evaluate(self.value, variables)


@dataclass(frozen=True)
class Variant:
    """A baseline a drill runs against: a mode, and optionally its own QPs per flow."""

    mode: str
    qps: int | None = None  # None: the drill's
    routing: str | None = None  # None: the drill's lab; bgp: the same fabric on BGP/ECMP

    @property
    def label(self) -> str:
        label = self.mode if self.qps is None else \
            f"{self.mode} x{self.qps} QP{'s' * (self.qps != 1)}"
        return label if self.routing is None else f"{label} over {self.routing}"

    def to_dict(self) -> dict:
        return {"mode": self.mode, "qps": self.qps, "label": self.label,
                **({"routing": self.routing} if self.routing else {})}


@dataclass(frozen=True)
class Drill:
    name: str
    description: str
    source: str
    traffic: Traffic
    timeline: tuple[Step, ...]
    expect: tuple[Expectation, ...]
    baseline_expect: tuple[Expectation, ...]
    fabric: str | None = None
    verify: bool = True
    goodput_floor_bps: int | None = None
    bystander: Bystander | None = None
    compare: tuple[Variant, ...] = ()  # the baselines this drill always runs against
    rollback_verify: bool = True
    tags: tuple[str, ...] = field(default_factory=tuple)

    def resized(self, size: int) -> Drill:
        """The same drill moving `size` bytes per flow (a short variant)."""
        return dataclasses.replace(self, traffic=dataclasses.replace(self.traffic, size=size,
                                                                     for_ns=None))

    def timed(self, for_ns: int) -> Drill:
        """The same drill with its traffic sized to last `for_ns` (see Traffic.for_ns)."""
        return dataclasses.replace(self, traffic=dataclasses.replace(self.traffic,
                                                                     for_ns=for_ns))

    @property
    def end_ns(self) -> int:
        """When the last step is over (its `for`, or a flap's last period)."""
        ends = [s.at_ns + s.kind.length_ns(s) for s in self.timeline]
        return max(ends, default=0)


# -- expressions -----------------------------------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv}
_FUNCS = {"min": min, "max": max}


def evaluate(text: str, variables: dict[str, float]) -> float:
    """Arithmetic over numbers and VARIABLES: + - * / ( ) min() max(). Nothing else."""
    return float(_eval(ast.parse(str(text), mode="eval").body, variables))


def _eval(node: ast.AST, v: dict[str, float]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in v:
            raise ValueError(f"unknown name {node.id!r}")
        return v[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left, v), _eval(node.right, v)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, v)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _FUNCS and node.args and not node.keywords:
        return _FUNCS[node.func.id](*(_eval(a, v) for a in node.args))
    raise ValueError(f"{ast.unparse(node)!r} is not arithmetic")


def _check_expression(text: str) -> str | None:
    """What is wrong with an expression, checked with every variable set to 1."""
    try:
        evaluate(text, dict.fromkeys(VARIABLES, 1.0))
    except SyntaxError:
        return "is not an arithmetic expression"
    except ValueError as e:
        return str(e)
    return None


# -- parsing ---------------------------------------------------------------------


# The validators of single values (twin.validate, the vocabulary of the fabric spec, the
# endpoint's control requests and the CLI's options); checks of one value against
# another are the functions below.
_TEXT = V.Optional(V.Str(empty=False))
_FABRIC = V.Optional(V.Str(empty=False, hint="a shipped fabric's name, e.g. mrc-4p"))
_DURATION = V.Duration(MAX_AT_NS, hi_hint="a drill is a short experiment")
_FLOOR = V.Rate(what="a rate such as 100mbit",
                hint="the goodput the traffic must reach before the first fault")
_PATTERN = V.Choice(PATTERNS)
_MODE = V.Choice(Mode.names())
_QPS = V.Int(1, MAX_QPS, words=V.SPAN,
             hint="QPs per flow, each carrying 1/qps of its bytes: qps: 8")
_SENDERS = V.ListOf(V.Str(empty=False), what="a list of hosts", hint="e.g. senders: [r1h0, r1h1]")
_FLAG = V.Optional(V.Bool())
_SIZE = V.Size(1, 1 << 32, words=V.ONE, what="a size such as 64M, at most 4G",
               hint="bytes, or K/M/G (powers of 1024)")


def load_drill(path: str | Path) -> Drill:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise SpecError(str(path), [Problem("(file)", f"cannot read: {e.strerror}",
                                            "see `twin drill list`")], "drill file") from None
    return parse_drill(text, str(path))


def parse_drill(text: str, source: str = "<drill>") -> Drill:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(source, [yaml_problem(e)], "drill file") from None
    c = V.Problems()
    data = c.mapping(data, "", _TOP, "e.g. lab/drills/t1-blackhole.yml")
    if c.problems:
        raise SpecError(source, c.problems, "drill file")
    drill = _validate(data, source, c)
    if c.problems:
        raise SpecError(source, c.problems, "drill file")
    return drill


def _validate(data: dict, source: str, c: V.Problems) -> Drill | None:
    name = data.get("name")
    if name is None:
        c.say("name", "is required", "add 'name:', e.g. name: t1-blackhole")
    elif name_problem(name):
        c.say("name", name_problem(name)[0], "a drill's name, e.g. t1-blackhole")
    description = c.check(_TEXT, data, "description") or ""
    fabric = c.check(_FABRIC, data, "fabric")

    steady = c.mapping(data.get("steady_state", {}), "steady_state", _STEADY,
                       "e.g. {verify: true, goodput_floor: 100mbit}")
    verify = c.check(V.Bool(), steady, "verify", "steady_state")
    verify = True if verify is None else verify
    floor = c.check(_FLOOR, steady, "goodput_floor", "steady_state")

    if "method" not in data:
        c.say("method", "is required", "add 'method:' with 'traffic:' and 'timeline:'")
    method = c.mapping(data.get("method", {}), "method", _METHOD,
                       "e.g. {traffic: {...}, timeline: [...]}")
    traffic = _traffic(c, method.get("traffic"))
    bystander = None
    if "bystander" in method:
        bystander = _bystander(c, method["bystander"])
    timeline = _timeline(c, method.get("timeline", []))
    if traffic is not None and traffic.for_ns is not None and timeline:
        end = max(s.at_ns + s.kind.length_ns(s) for s in timeline)
        if traffic.for_ns < end + MIN_TAIL_NS:
            c.say("method.traffic.for", f"the traffic would end before the timeline does "
                  f"({traffic.for_ns / 1e9:g} s against {end / 1e9:g} s)",
                  f"let it run {MIN_TAIL_NS // 10**6} ms past the last step at least")

    compare = _compare(c, data.get("compare"))
    expect = _expectations(c, data.get("expect", {}), "expect", bool(timeline))
    # A baseline is judged by its own expectations only; with none (the default) its
    # outcome is reported beside the main run's (a RoCE QP may die at its retry limit:
    # that is what RoCE does, not a failure of the drill)
    baseline = _expectations(c, data.get("baseline_expect", {}), "baseline_expect",
                             bool(timeline))
    if any(e.what == "bystander_retained" for e in expect) and bystander is None:
        c.say("expect.bystander_retained", "needs method.bystander",
              "add method.bystander: {src, dst, size}")
    rollback = c.mapping(data.get("rollback", {}), "rollback", _ROLLBACK, "e.g. {verify: true}")
    rollback_verify = c.check(V.Bool(), rollback, "verify", "rollback")
    rollback_verify = True if rollback_verify is None else rollback_verify
    if c.problems or traffic is None:
        return None
    return Drill(name, description, source, traffic, tuple(timeline), tuple(expect),
                 tuple(baseline), fabric, verify, floor, bystander, compare, rollback_verify)


_VARIANT = {"mode", "qps"}


def _compare(c: V.Problems, data: Any) -> tuple[Variant, ...]:
    """`compare: single-path`, or a list of baselines: [{mode: single-path, qps: 8}, ...]."""
    if data is None:
        return ()
    hint = "a mode, or a list such as [{mode: single-path, qps: 8}]"
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        path = f"compare[{i}]" if isinstance(data, list) else "compare"
        if isinstance(item, str):
            item = {"mode": item}
        elif not isinstance(item, dict):
            c.say(path, f"must be a mode or a mapping (got {show_value(item)})", hint)
            continue
        item = c.mapping(item, path, _VARIANT, "e.g. {mode: single-path, qps: 8}")
        mode = item.get("mode")
        if Mode.of(mode) is None:
            c.say(f"{path}.mode" if isinstance(data, list) else path,
                  f"must be a mode: {Mode.listed()} (got {show_value(mode)})",
                  "the baseline this drill always runs against")
            continue
        qps = c.check(_QPS, item, "qps", path)
        out.append(Variant(mode, qps))
    return tuple(out)


def _traffic(c: V.Problems, data: Any) -> Traffic | None:
    if data is None:
        c.say("method.traffic", "is required",
              "e.g. traffic: {pattern: bulk, src: r0h0, dst: r1h0, size: 64M}")
        return None
    path = "method.traffic."
    data = c.mapping(data, "method.traffic", _TRAFFIC,
                     "e.g. {pattern: bulk, src: r0h0, dst: r1h0, size: 64M}")
    pattern = data.get("pattern", "bulk")
    c.value(_PATTERN, pattern, f"{path}pattern")
    src, dst = c.check(_TEXT, data, "src", path[:-1]), c.check(_TEXT, data, "dst", path[:-1])
    if pattern == "bulk" and (src is None or dst is None):
        c.say(f"{path}src" if src is None else f"{path}dst", "is required for bulk",
              "bulk moves one flow from src to dst")
    size = c.value(_SIZE, data.get("size", "64M"), f"{path}size")
    for_ns = c.check(_DURATION, data, "for", path[:-1])
    if for_ns is not None and "size" in data:
        c.say(f"{path}for", "takes the place of size: give one of them",
              "for: 2s sizes the flows from the steady state; size: 64M moves that much")
    mode = data.get("mode", Mode.MRC.value)
    c.value(_MODE, mode, f"{path}mode")
    evs = c.check(EVS, data, "evs", path[:-1]) or 128
    qps = c.check(_QPS, data, "qps", path[:-1]) or 1
    cc = data.get("cc")
    if cc is not None:
        why = CC.problem(cc, mode) if isinstance(cc, str) else \
            f"must be a string (got {show_value(cc)})"
        if why:
            c.say(f"{path}cc", why, f"one of {CC.Cc.listed()}, or omit it for the "
                  f"mode's default ({Mode.SINGLE_PATH}: "
                  f"{CC.default_for(Mode.SINGLE_PATH)})")
            cc = None
    senders = c.value(_SENDERS, data.get("senders", []), f"{path}senders") or []
    if senders and pattern != "incast":
        c.say(f"{path}senders", "applies to incast only", "bulk names src and dst")
    flags = {key: c.check(_FLAG, data, key, path[:-1]) for key in ("ecn", "trim")}
    return Traffic(pattern, src, dst, size or 0, mode, evs, qps, tuple(senders), for_ns,
                   cc, flags["ecn"], flags["trim"])


def _bystander(c: V.Problems, data: Any) -> Bystander | None:
    path = "method.bystander."
    data = c.mapping(data, "method.bystander", _BYSTANDER,
                     "e.g. {src: r1h1, dst: r0h1, size: 16M}")
    src, dst = c.check(_TEXT, data, "src", path[:-1]), c.check(_TEXT, data, "dst", path[:-1])
    for key, value in (("src", src), ("dst", dst)):
        if value is None:
            c.say(f"{path}{key}", "is required", "the bystander is one flow: src to dst")
    size = c.value(_SIZE, data.get("size", "16M"), f"{path}size")
    if src is None or dst is None or size is None:
        return None
    return Bystander(src, dst, size)


def _timeline(c: V.Problems, data: Any) -> list[Step]:
    if not isinstance(data, list):
        c.say("method.timeline", f"must be a list of steps (got {show_value(data)})",
              "e.g. - {at: 300ms, fault: link-down, target: t0-p0-r0:eth3}")
        return []
    if len(data) > MAX_STEPS:
        c.say("method.timeline", f"has {len(data)} steps; at most {MAX_STEPS}")
        return []
    steps = []
    for i, item in enumerate(data):
        step = _step(c, item, f"method.timeline[{i}]")
        if step:
            steps.append(step)
    return sorted(steps, key=lambda s: s.at_ns)


def _param_keys() -> dict[str, list[str]]:
    """Every drill-step key a fault kind takes as a parameter, with the kinds that take it."""
    keys: dict[str, list[str]] = {}
    for ft in KINDS.values():
        for p in ft.params:
            if p.in_drill is not None:
                keys.setdefault(p.name, []).append(str(ft.name))
    return keys


def _step(c: V.Problems, item: Any, where: str) -> Step | None:
    params_of = _param_keys()
    item = c.mapping(item, where, _STEP | set(params_of),
                     "e.g. {at: 300ms, fault: link-down, target: t0-p0-r0:eth3}")
    if not item:
        return None
    path = f"{where}."
    before = len(c.problems)
    at = c.check(_DURATION, item, "at", where)
    if "at" not in item:
        c.say(f"{path}at", "is required", "when, after the traffic's first write: at: 300ms")
    ft = None
    if "fault" not in item:
        c.say(f"{path}fault", "is required", "a fault kind, see `twin fault --help`")
    else:
        ft = kind_named(item["fault"])
        if ft is None:
            close = difflib.get_close_matches(str(item["fault"]), KINDS.names(), n=1)
            c.say(f"{path}fault", f"unknown fault {show_value(item['fault'])}",
                  (f"did you mean '{close[0]}'? " if close else "")
                  + f"one of: {KINDS.listed()}")
    target, random = _target(c, item.get("target"), ft, f"{path}target")
    for_ns = c.check(_DURATION, item, "for", where)
    params = {}
    if ft is not None:
        mine = [p for p in ft.params if p.in_drill is not None]
        for p in mine:
            try:
                value = p.from_drill(ft.name, item, f"{path}{p.name}")
            except V.Invalid as e:
                c.add(e)
                continue
            if value is not None:
                params[p.name] = value
        for key, kinds in params_of.items():
            if key in item and key not in {p.name for p in mine}:
                c.say(f"{path}{key}", f"does not apply to {ft.name}",
                      f"only to {', '.join(kinds)}")
        if ft.no_for and for_ns is not None:
            c.say(f"{path}for", f"does not apply to {ft.name}", ft.no_for)
    if len(c.problems) > before or at is None or ft is None:
        return None
    return Step(at, ft.name, target, random, for_ns, params, where)


def _target(c: V.Problems, value: Any, ft: FaultType | None, path: str):
    form = ft.target_form() if ft else "a target"
    if value is None:
        c.say(path, "is required", f"{form}, or {{random: t1}}")
        return None, None
    if isinstance(value, dict):
        if set(value) != {"random"}:
            c.say(path, "a random target is {random: KIND}",
                  "kinds: " + ", ".join(RANDOM))
            return None, None
        choice = value["random"]
        if choice not in RANDOM:
            c.say(f"{path}.random", f"unknown random target {show_value(choice)}",
                  "kinds: " + ", ".join(RANDOM))
            return None, None
        if ft is not None and choice not in ft.random_forms():
            fits = [form for form in RANDOM if form in ft.random_forms()]
            c.say(f"{path}.random", f"{ft.name} cannot target a random {choice}",
                  f"use {' or '.join(fits)}")
            return None, None
        return None, choice
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # plane-down: 2
    if not isinstance(value, str) or not value:
        c.say(path, f"must be a name or {{random: KIND}} (got {show_value(value)})", form)
        return None, None
    return value, None


def _expectations(c: V.Problems, data: Any, path: str, faulted: bool) -> list[Expectation]:
    data = c.mapping(data, path, set(METRICS), "e.g. {exact: true, repair_ms: '<= 50'}")
    out = []
    for what, value in data.items():
        if what not in METRICS:
            continue
        where = f"{path}.{what}"
        if what == "exact":
            if not isinstance(value, bool):
                c.say(where, f"must be true or false (got {show_value(value)})")
                continue
            out.append(Expectation(what, None, value, where))
            continue
        if what == "localized":
            if value != "target":
                c.say(where, f"must be 'target' (got {show_value(value)})",
                      "each fault must be named by the prober as its own target")
                continue
            if not faulted:
                c.say(where, "needs a fault on the timeline", "add method.timeline")
                continue
            out.append(Expectation(what, None, value, where))
            continue
        if what in PER_STEP and not faulted:
            c.say(where, "needs a fault on the timeline",
                  "its steps are the stretches between the timeline's changes")
            continue
        if isinstance(value, list):  # a band: every comparison must hold
            if not value:
                c.say(where, "is an empty list", "give a comparison, or a list of them: "
                      "[\">= 1 - lost_share - 0.1\", \"<= 1 - lost_share + 0.1\"]")
            for i, item in enumerate(value):
                e = _comparison(c, what, item, f"{where}[{i}]")
                if e is not None:
                    out.append(e)
            continue
        e = _comparison(c, what, value, where)
        if e is not None:
            out.append(e)
    return out


def _comparison(c: V.Problems, what: str, value: Any, where: str) -> Expectation | None:
    text = str(value) if isinstance(value, str | int | float) \
        and not isinstance(value, bool) else None
    op = next((o for o in sorted(OPS, key=len, reverse=True)
               if text and text.strip().startswith(o)), None)
    if text is None or op is None:
        c.say(where, f"must be a comparison such as \"<= 5\" (got {show_value(value)})",
              "operators: <=, >=, <, >, ==; the right side may use "
              + ", ".join(VARIABLES) + "; or a list of comparisons, all of which must hold")
        return None
    expr = text.strip()[len(op):].strip()
    problem = _check_expression(expr) if expr else "is empty"
    if problem:
        c.say(where, f"{expr!r}: {problem}", "numbers, + - * / ( ), min(), max() and "
              + ", ".join(VARIABLES))
        return None
    return Expectation(what, op, expr, where)


# -- the shipped drills ------------------------------------------------------------


def shipped() -> list[Path]:
    return sorted(DRILL_DIR.glob("*.yml"))


def find(ref: str) -> Path:
    """A drill file path, or a shipped drill's name."""
    path = Path(ref)
    if path.suffix in (".yml", ".yaml") or "/" in ref:
        return path
    candidate = DRILL_DIR / f"{ref}.yml"
    if candidate.exists():
        return candidate
    names = [p.stem for p in shipped()]
    close = difflib.get_close_matches(ref, names, n=1)
    raise UsageError(f"no drill {ref!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                     + f" (shipped: {', '.join(names)}; or give a file)")
