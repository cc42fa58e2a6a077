"""The record of faults in force: <run dir>/<lab>/faults.json, written before a fault
is applied, and the lab's fault timeline, events.jsonl (wall time and
CLOCK_MONOTONIC ns per apply and revert). A hidden fault (a blind drill's) is
recorded like any other, flagged hidden."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from twin.errors import LabError, UnknownName, UsageError
from twin.fabric.model import Endpoint
from twin.faults.registry import KINDS
from twin.faults.targets import LinkTarget, Target, recorded
from twin.lab import Attached
from twin.rundir import read_json, write_json


@dataclass(frozen=True)
class Fault:
    """A fault in force, as recorded. `on` is what it is on (twin.faults.targets): a link
    (LinkTarget, by id) for a fault on one link; else the node (NodeTarget), link end
    (LinkEnd), NIC port(s) (NicPort) or plane (PlaneTarget) it was put on. Given as text
    (a record read back, a caller's), it is read as its type once, here (`recorded`).
    On disk (faults.json) it is that text, under "link", as every twin wrote it."""

    kind: str  # a kind's name (twin.faults.kinds): a FaultKind for the built-in ones
    on: Target
    ends: tuple[Endpoint, ...]  # where it is applied
    since: float
    percent: float = 0.0  # link-loss only
    links: tuple[str, ...] = ()  # every link it holds, when more than `link` names
    detail: str = ""  # kind-specific: link-rate's rate, route-corrupt's route
    hidden: bool = False  # a blind drill's: `fault list` shows only that one is in force
    # CLOCK_MONOTONIC ns just before this process made its kernel change (not kept on
    # disk: a record read back says 0). A drill's figures count from it.
    changed_ns: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.on, str):
            object.__setattr__(self, "on", recorded(self.on))

    @property
    def target(self) -> str:
        """What it is on, as `fault list` shows it and `fault clear` takes it."""
        return str(self.on)

    @property
    def all_links(self) -> tuple[str, ...]:
        """The ids of every link it holds."""
        if self.links:
            return self.links
        return (self.on.id,) if isinstance(self.on, LinkTarget) else (self.target,)

    def describe(self) -> str:
        """The fault in a phrase ("link-loss 1% t0-p0-r0:eth3--t1-p0-0:eth1"); a hidden
        one (a blind drill's) says only that it is one."""
        if self.hidden:
            return "a hidden fault"
        percent = f" {self.percent:g}%" if self.percent else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.kind}{percent} {self.target}{detail}"

    def end_names(self) -> list[str]:
        """NODE:IF per end; a fault in a whole node (blackhole NODE, sid-loss) is NODE."""
        return [str(e) if e.ifname else e.node for e in self.ends]

    def to_dict(self) -> dict:
        d = {"kind": str(self.kind), "link": self.target,
             "ends": self.end_names(), "since": self.since,
             "percent": self.percent}
        if self.links:
            d["links"] = list(self.links)
        if self.detail:
            d["detail"] = self.detail
        if self.hidden:
            d["hidden"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict, where: str = "faults.json") -> Fault:
        try:
            kind = KINDS[d["kind"]].name
        except (KeyError, TypeError):
            raise LabError(f"{where}: a fault without a kind: {d!r}") from None
        except UnknownName as e:
            raise LabError(f"{where}: {e}; was it written by a newer twin?") from None
        return cls(kind, d["link"], tuple(Endpoint(*e.partition(":")[::2]) for e in d["ends"]),
                   d["since"],
                   d.get("percent", 0.0), tuple(d.get("links", ())), d.get("detail", ""),
                   bool(d.get("hidden", False)))


# -- the record on disk ---------------------------------------------------------------


def _path(lab: Attached):
    return lab.state.dir / "faults.json"


def active(lab: Attached) -> list[Fault]:
    path = _path(lab)
    return [Fault.from_dict(d, str(path)) for d in read_json(path, [])]


def _save(lab: Attached, faults: list[Fault]) -> None:
    write_json(_path(lab), [f.to_dict() for f in faults])


def add(lab: Attached, fault: Fault) -> None:
    """Record one fault more (before it is applied)."""
    _save(lab, [*active(lab), fault])


def hidden_in_force(lab: Attached) -> list[Fault]:
    return [f for f in active(lab) if f.hidden]


_HIDING: ContextVar[bool] = ContextVar("hiding", default=False)


def hiding() -> bool:
    """Whether a fault recorded now is recorded hidden (inside `hidden()`)."""
    return _HIDING.get()


@contextmanager
def hidden() -> Iterator[None]:
    """Faults applied inside are recorded hidden (before they are applied, as any):
    `with faults.hidden(): faults.blackhole(lab, "t1-p0-0")`."""
    token = _HIDING.set(True)
    try:
        yield
    finally:
        _HIDING.reset(token)


def refuse_while_hidden(lab: Attached, what: str) -> None:
    """With a hidden fault in force, an error about the links it holds would say where
    it is: refuse every other fault change, whatever it names."""
    if hidden_in_force(lab):
        raise UsageError(f"{what}: a blind drill's hidden fault is in force; answer it "
                         f"(`twin drill answer --lab {lab.lab} NODE:IF|NODE`), give up "
                         f"(`twin drill reveal --lab {lab.lab}`), or `twin fault clear "
                         f"--lab {lab.lab}` first")


def log_event(lab: Attached, event: str, fault: Fault) -> dict:
    """One line of the lab's fault timeline: wall time and CLOCK_MONOTONIC ns."""
    entry = {"t_wall": time.time(), "t_mono_ns": time.monotonic_ns(), "event": event,
             "kind": str(fault.kind), "target": fault.target,
             "ends": fault.end_names()}
    if fault.hidden:
        entry["hidden"] = True
    with open(lab.state.dir / "events.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")
    return entry


def events(lab: Attached) -> list[dict]:
    try:
        lines = (lab.state.dir / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def forget(lab: Attached, fault: Fault) -> None:
    """Forget one fault's record (after it is reverted)."""
    _save(lab, [f for f in active(lab) if (f.kind, f.on) != (fault.kind, fault.on)])

