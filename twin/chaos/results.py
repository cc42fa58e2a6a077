"""A drill run's results as types, from the runner to the report, the plots, the JUnit
writer and `twin ci`; JSON only at the edge (`--json`, report.json, a results file).

    Judged        one row of the verdict table: an expectation of the drill file
                  (twin.chaos.drill.Expectation, the claim) judged on a run, or a check
                  the runner adds (steady state, rollback, faults met traffic): what,
                  want, got, ok, and `judged` (False: a reported baseline's row, shown
                  and not judged)
    FaultFigures  one fault of the timeline and its figures (twin.chaos.metrics)
    LinkLoad      one link of the link view: bytes carried over the run, and where the
                  run read its switch ports' queues, the CE marks and trims on them, in
                  all and per port (PortSignals)
    DrillRun      one run of a drill: its verdict, the rows, the faults, the figures

`to_json()` gives the dict `twin drill run --json` has always printed, key for key and
in the same order; `from_json()` reads one back, from this version or an older one
(whose runs lack later keys: any key may be missing, and the page says so). A run read
from a file remembers which keys it had (`shape`), and keys it does not know (`extra`),
so that writing it again gives the same file. The series of a run (goodput bins, EV
states, the event timeline, per-flow goodput, signals, the prober's snapshot, the clock)
stay JSON values: they are drawn, not judged.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

PASS, FAIL, REPORTED = "pass", "fail", "reported"


@dataclass(frozen=True)
class _Record:
    """to_json/from_json for a dataclass whose JSON keys are its fields' names."""

    # the keys a record read from JSON had, in order (None: built here, every key)
    shape: tuple[str, ...] | None = field(default=None, compare=False, repr=False,
                                          kw_only=True)
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False,
                                  kw_only=True)  # keys of a newer writer, kept as read

    ROWS: ClassVar[dict[str, type]] = {}  # field -> the record type of its list's items
    OMITTED: ClassVar[dict[str, Any]] = {}  # field -> the value it is not written with

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("shape", "extra"))

    def to_json(self) -> dict:
        if self.shape is not None:
            keys = self.shape
        else:
            keys = tuple(k for k in self.keys()
                         if k not in self.OMITTED or getattr(self, k) != self.OMITTED[k])
        known = set(self.keys())
        out = {}
        for k in keys:
            if k in known:
                out[k] = self._out(k, getattr(self, k))
            elif k in self.extra:
                out[k] = self.extra[k]
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    def _out(self, key: str, value):
        if key in self.ROWS and isinstance(value, tuple):
            return [x.to_json() if isinstance(x, _Record) else x for x in value]
        return value

    @classmethod
    def from_json(cls, data: dict):
        known = set(cls.keys())
        kw = {}
        for k, v in data.items():
            if k not in known:
                continue
            row = cls.ROWS.get(k)
            if row is not None and isinstance(v, list):
                v = tuple(row.from_json(x) if isinstance(x, dict) else x for x in v)
            kw[k] = v
        return cls(**kw, shape=tuple(data),
                   extra={k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class Judged(_Record):
    """A row of the verdict table (see the module docstring)."""

    what: str = ""
    want: str = ""
    got: str = ""
    ok: bool = False
    judged: bool = True  # False: a reported baseline's row, shown, fails nothing

    OMITTED: ClassVar[dict[str, Any]] = {"judged": True}

    @property
    def failed(self) -> bool:
        """Whether the row fails its run: not ok, and judged."""
        return not self.ok and self.judged is not False

    def failure(self) -> str:
        return f"{self.what}: want {self.want}, got {self.got}"


@dataclass(frozen=True)
class FaultFigures(_Record):
    """One fault of the timeline and its figures (twin.chaos.metrics.fault_figures)."""

    kind: str | None = None
    target: str | None = None
    at_ns: int | None = None  # on the figures' clock
    applied_us: int | None = None  # how long the kernel change took
    at_uncertainty_us: int | None = None
    reverted_ns: int | None = None
    origin: str | None = None  # what detection and repair count from: fault, first write
    origin_ns: int | None = None
    detection_us: int | None = None
    repair_us: int | None = None
    packets_lost: int | None = None
    dead_path_losses: int | None = None
    localized: bool | None = None
    localized_as: str | None = None
    localized_us: int | None = None
    crossed: bool | None = None  # some main flow's paths cross it (None: cannot say)
    crossed_from: str | None = None  # link counters, paths taken, paths possible
    under_traffic_ms: float | None = None
    met: bool | None = None


@dataclass(frozen=True)
class PortSignals(_Record):
    """One switch port of a link, as the run's queue watch read it: the CE marks, trims
    and drops it made over the run."""

    port: str | None = None  # NODE:IFNAME
    ce_marked: int | None = None
    trimmed: int | None = None
    dropped: int | None = None


@dataclass(frozen=True)
class LinkLoad(_Record):
    """One link of the link view: bytes over the run, both directions; CE marks and trims
    its switch ports made over the run (both ends), where the run read their queues
    (None: it did not, an unshaped fabric or an older run)."""

    link: str | None = None
    plane: int | None = None
    kind: str | None = None  # host, fabric
    bytes: int | None = None
    ce_marked: int | None = None
    trimmed: int | None = None
    ports: tuple[PortSignals, ...] = ()  # its switch ports read, each on its own

    OMITTED: ClassVar[dict[str, Any]] = {"ce_marked": None, "trimmed": None, "ports": ()}
    ROWS: ClassVar[dict[str, type]] = {"ports": PortSignals}


@dataclass(frozen=True)
class DrillRun(_Record):
    """One run of a drill. The JSON keys are the fields' names (twin/chaos/report.py's
    docstring draws them); every field may be missing from an older run's file."""

    name: str | None = None
    description: str | None = None
    lab: str | None = None
    mode: str | None = None
    baseline_of: str | None = None  # the main run's mode: this run is its baseline
    seed: int | None = None
    verdict: str | None = None  # pass, fail, reported
    outcome: str | None = None
    failed_qps: list[dict] | None = None  # {"src", "dst", "why", "at_ms"}
    expectations: tuple[Judged, ...] = ()
    faults: tuple[FaultFigures, ...] = ()
    prober: dict | None = None
    goodput_retained: float | None = None
    exact: bool | None = None
    wall_s: float | None = None
    t0_ns: int | None = None
    clock: dict | None = None
    goodput: dict | None = None
    ev_states: dict | None = None
    timeline: list[dict] | None = None
    link_load: tuple[LinkLoad, ...] = ()
    metrics: dict | None = None
    targets: list[str] | None = None
    variables: dict | None = None
    flows: list[dict] | None = None
    flow_goodput: dict | None = None
    signals: dict | None = None
    variant: str | None = None  # the mode, and its QPs when a baseline set them
    warnings: list[str] | None = None
    qps: int | None = None
    shaped: bool | None = None  # a fabric with rates (unshaped: the CPU sets goodput)

    ROWS: ClassVar[dict[str, type]] = {"expectations": Judged, "faults": FaultFigures,
                                       "link_load": LinkLoad}

    @property
    def ok(self) -> bool:
        return self.verdict in (PASS, REPORTED)  # reported: a baseline

    @property
    def label(self) -> str:
        """Its mode, and its QPs per flow when a baseline set them."""
        return str(self.variant or self.mode or "mrc")

    def failed_rows(self) -> list[Judged]:
        return [e for e in self.expectations if e.failed]

    def metric(self, key: str):
        return (self.metrics or {}).get(key)


def document(runs: list[DrillRun]) -> dict:
    """The runs as `twin drill run --json` prints them and report.json holds them."""
    return {"drills": [r.to_json() for r in runs]}


def parse(doc) -> list[DrillRun]:
    """The runs of a results document (`{"drills": [...]}`), as written by any version;
    what is not a run is left out."""
    drills = doc.get("drills") if isinstance(doc, dict) else None
    return [DrillRun.from_json(r) for r in drills or [] if isinstance(r, dict)]
