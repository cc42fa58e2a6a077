"""Fault kinds: one class per kind, registered by name in KINDS. A kind says all there is
to say about its faults, and every caller reads it from here: the commands in
twin.faults, `twin fault KIND` (twin.cli.fault), drill files and their runner
(twin.chaos.drill, twin.chaos.runner) and blind drills (twin.chaos.blind).

    name, help     the kind as records, events, drill files and `twin fault NAME` write
                   it; what `twin fault NAME --help` says
    targets        the target types it takes (twin.faults.targets), the first whose
                   syntax the text has; `check` refuses a target of the right type the
                   kind cannot be put on (a host, for a switch fault)
    params         what else it takes (Param): the command's arguments and options, a
                   drill step's keys, and the validators (twin.validate) that check them
                   on either; `prepare` checks the values given from Python or the
                   command line
    record         the Fault it would record (nothing changed yet)
    start          check, record (before anything changes), apply: the whole command
    apply, revert, reapply
                   on the running lab: make it so (after it is recorded); undo it
                   (before its record is dropped); make it so again on a node that
                   restarted and came back bare, returning the ends touched
    undone_by_reprogram
                   re-programming its node undoes it (the plan sets every interface
                   up and rewrites routes, SIDs and qdiscs): another fault's revert,
                   which re-programs the node, applies it again (`reprogram`)
    elements, in_switch
                   the links and whole switches it takes out (a drill's figures); the
                   switch a fault in force is in, whole (a blind drill's scoring)
    actions, length_ns, lasting, no_for, on_timeline
                   how a drill step of the kind sits on the timeline
    levels, draw   the blind-drill levels it is drawn at, and how it draws a target
    said, reveal   what `twin fault NAME` prints; what a blind drill's reveal adds

A new kind is one class decorated with @register (a test may `unregister` it again).
The draw at a blind level picks among its kinds in registration order, so the
built-in kinds' order (twin.faults.catalog) is what makes a seed replay a drill.
"""

from __future__ import annotations

import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from twin import validate as V
from twin.errors import UsageError
from twin.fabric.model import Endpoint, Fabric
from twin.faults.record import (
    Fault,
    active,
    add,
    forget,
    hiding,
    log_event,
    refuse_while_hidden,
)
from twin.faults.registry import KINDS
from twin.faults.targets import Target, parse_target
from twin.lab import Attached, phases
from twin.progress import Steps


class Step(Protocol):
    """What a kind reads of a drill's timeline step (twin.chaos.drill.Step)."""

    at_ns: int
    for_ns: int | None
    params: dict[str, Any]

Progress = Callable[[int, int], None]  # steps done, of how many (a flap's)


@dataclass(frozen=True)
class Param:
    """A parameter a fault kind takes besides its target: data, checked by a twin.validate
    validator wherever it is given.

    On the command line it is an argument after the target (`argument`), a flag, or an
    option --NAME of `cli_type` with `default` (None: required); `check` checks its value
    there (a refusal at --NAME, or at an argument's METAVAR) and from the kind's Python
    callers alike (`prepare`), and gives the value the kind works with (a rate's bit/s).
    In a drill step it is the key NAME when `drill` is given: True checks it by `check`;
    a validator of its own where a drill writes it another way (link-flap's period: 300ms
    in a drill, seconds on the command line). A step without the key is refused if
    `needed` (the hint: "e.g. percent: 20"); else it takes `default`, checked as given."""

    name: str
    help: str = ""
    cli_type: Any = str
    default: Any = None
    argument: bool = False
    flag: bool = False
    metavar: str | None = None
    check: V.Validator | None = None
    drill: V.Validator | bool = False
    needed: str = ""

    @property
    def cli_name(self) -> str:
        """Where the command line gives it: --NAME, or an argument's METAVAR."""
        return (self.metavar or self.name.upper()) if self.argument else f"--{self.name}"

    @property
    def in_drill(self) -> V.Validator | None:
        """What checks it in a drill step; None: a drill step does not take it."""
        if self.drill is True:
            return self.check
        return self.drill or None

    def from_drill(self, kind: str, step: Mapping[str, Any], path: str) -> Any:
        """A drill step's value of it, checked at `path` (its key's), or its default (None
        for none); raises twin.validate.Invalid."""
        if self.name not in step:
            if self.needed:
                raise V.Invalid(f"is required for {kind}", self.needed, path)
            if self.default is None:
                return None
            return self.in_drill.check(self.default, path)
        return self.in_drill.check(step[self.name], path)


class FaultType(ABC):
    name: ClassVar[str]
    help: ClassVar[str]
    targets: ClassVar[tuple[type[Target], ...]]
    form: ClassVar[str] = ""  # how a target is written, for hints; "": the target types'
    metavar: ClassVar[str] = ""  # the target's argument on the command line; "": the type's
    params: ClassVar[tuple[Param, ...]] = ()
    levels: ClassVar[tuple[str, ...]] = ()  # blind-drill levels it is drawn at
    lasting: ClassVar[bool] = True  # False: over when its apply returns (a reboot)
    no_for: ClassVar[str] = ""  # why a drill step's `for` does not apply to it; "": it does
    takes_down: ClassVar[bool] = False  # the links it holds are down (for the refusals)
    named_by_links: ClassVar[bool] = False  # a prober naming any of its links found it
    # re-programming its node (another fault's revert) undoes it: applied again after
    undone_by_reprogram: ClassVar[bool] = False
    blocking: ClassVar[bool] = False  # its command runs for the fault's length
    step_word: ClassVar[str] = "step"  # what its command's progress lines count

    # -- the target -------------------------------------------------------------------

    @classmethod
    def target_form(cls) -> str:
        return cls.form or " or ".join(t.form for t in cls.targets)

    @classmethod
    def target_metavar(cls) -> str:
        return cls.metavar or cls.targets[0].metavar

    @classmethod
    def random_forms(cls) -> list[str]:
        """The `random:` forms of a drill step's target it takes."""
        return [form for t in cls.targets for form in t.random]

    def parse(self, fabric: Fabric, text: str) -> Target:
        target = parse_target(fabric, text, self.targets)
        self.check(fabric, target)
        return target

    def check(self, fabric: Fabric, target: Target) -> None:
        """Refuse a target the kind cannot be put on (UsageError); all are fine by default."""
        return None

    def whole(self, target: Target) -> str | None:
        """The switch a fault on `target` takes out whole; None: only its links."""
        return None

    def elements(self, fabric: Fabric, target: Target) -> tuple[set[str], set[str]]:
        """The links and whole switches a fault on `target` takes out (a drill's figures)."""
        node = self.whole(target)
        if node is not None and not fabric.node(node).is_switch:
            raise UsageError(f"{node} is a host, not a switch")
        return {lk.id for lk in target.links(fabric)}, ({node} if node else set())

    def in_switch(self, fault: Fault) -> str | None:
        """The switch a fault in force is in, whole; None for a fault on its links."""
        return None

    # -- the parameters -----------------------------------------------------------------

    def values(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` with the command line's defaults filled in."""
        return {p.name: given.get(p.name, p.default) for p in self.params} | dict(given)

    def prepare(self, values: dict[str, Any]) -> dict[str, Any]:
        """The values checked by their params' validators, as the kind works with them (a
        refusal is a twin.validate.Invalid at the param's name on the command line:
        `--count`, `PERCENT`), before the target is looked at."""
        return values | {p.name: p.check.check(values.get(p.name), p.cli_name)
                         for p in self.params if p.check is not None}

    def values_from_args(self, args: list[str]) -> dict[str, Any]:
        """The values of its command-line arguments, from their text (a blind draw's)."""
        return {p.name: p.cli_type(a)
                for p, a in zip([p for p in self.params if p.argument], args, strict=False)}

    # -- the record and the running lab ---------------------------------------------------

    @abstractmethod
    def record(self, lab: Attached, target: Target, values: dict[str, Any]) -> Fault:
        """The fault to record (and then apply); changes nothing."""

    def start(self, lab: Attached, text: str, values: Mapping[str, Any] | None = None,
              progress: Progress | None = None) -> Fault:
        """The command: check the values and the target, refuse a link another fault
        holds, record the fault, apply it."""
        return self.begin(lab, text, self.prepare(self.values(values or {})), progress)

    def begin(self, lab: Attached, text: str, values: dict[str, Any],
              progress: Progress | None = None) -> Fault:
        """`start` with the values checked already (by `prepare`, or a drill step's)."""
        fault = self.record(lab, self.parse(lab.fabric, text), values)
        return self.inject(lab, fault, f"{self.name} {text}", values, progress)

    def inject(self, lab: Attached, fault: Fault, what: str, values: dict[str, Any],
               progress: Progress | None) -> Fault:
        refuse_held(lab, fault.all_links, what)
        return inject(lab, fault)

    @abstractmethod
    def apply(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def revert(self, lab: Attached, fault: Fault) -> None: ...

    @abstractmethod
    def reapply(self, lab: Attached, fault: Fault, node: str) -> list[Endpoint]:
        """After `node` restarted: apply again what it lost; the ends touched."""

    def unsupported(self, lab: Attached) -> str | None:
        """Why this lab cannot have the fault on a drill's timeline; None: it can."""
        return None

    # -- a drill's timeline -----------------------------------------------------------

    def actions(self, step: Step) -> list[tuple[int, bool]]:
        """(ns after the first write, a revert?) for each change a step makes."""
        out = [(step.at_ns, False)]
        if step.for_ns is not None and self.lasting:
            out.append((step.at_ns + step.for_ns, True))
        return out

    def length_ns(self, step: Step) -> int:
        return step.for_ns or 0

    def on_timeline(self, lab: Attached, text: str, values: dict[str, Any]) -> Fault:
        """Apply a step's fault (its values as the drill file's checks gave them; the
        command line's defaults for the params a drill step does not take)."""
        return self.begin(lab, text, self.values(values))

    # -- blind drills and what a person reads -------------------------------------------

    def draw(self, fabric: Fabric, rng: random.Random) -> tuple[str, str]:
        """A blind drill's fault of this kind: its target, and its command-line argument
        after the target ("" for none)."""
        return self.targets[0].draw(fabric, rng), ""

    def said(self, lab: Attached, fault: Fault, values: dict[str, Any]) -> str:
        """What `twin fault NAME` prints once it is applied."""
        return f"{self.name} {fault.target}"

    def reveal(self, fault: Fault) -> str:
        """What a blind drill's reveal says besides the kind and the target."""
        return fault.detail


class Levels(Mapping[str, tuple[str, ...]]):
    """The blind-drill levels, each with the kinds drawn at it (in registration order),
    as the registered kinds say now."""

    def _now(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for kind in KINDS.values():
            for level in kind.levels:
                out.setdefault(level, []).append(kind.name)
        return {level: tuple(names) for level, names in out.items()}

    def __getitem__(self, level: str) -> tuple[str, ...]:
        return self._now()[level]

    def __iter__(self) -> Iterator[str]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())


LEVELS = Levels()


# -- recording, applying, reverting ------------------------------------------------------


def refuse_held(lab: Attached, links, what: str) -> None:
    """No two faults share a link: name the fault in the way, and how to revert it."""
    refuse_while_hidden(lab, what)
    wanted = set(links)
    for f in active(lab):
        shared = wanted & set(f.all_links)
        if shared:
            down = KINDS[f.kind].takes_down
            if f.links:
                held = (f"is already down as part of {f.kind} {f.target}" if down
                        else f"already has a {f.kind} fault ({f.target})")
                how = f"`twin fault clear --lab {lab.lab} {f.target}`"
            else:
                held = "is already down" if down else f"already has a {f.kind} fault"
                how = f"`twin fault link-up --lab {lab.lab} {f.ends[0]}`"
            raise UsageError(f"{what}: link {min(shared)} {held}; {how} first")


def inject(lab: Attached, fault: Fault) -> Fault:
    """Record the fault (hidden inside `faults.hidden()`), log it, apply it."""
    if hiding():
        fault = replace(fault, hidden=True)
    add(lab, fault)  # recorded before applied
    log_event(lab, "apply", fault)
    changed = time.monotonic_ns()
    KINDS[fault.kind].apply(lab, fault)
    return replace(fault, changed_ns=changed)


def momentary(lab: Attached, fault: Fault, what: str) -> Fault:
    """A fault over when its apply returns (a reboot, a session reset): on the record
    and the timeline only while it is being made, never held against others."""
    refuse_while_hidden(lab, what)
    add(lab, fault)
    log_event(lab, "apply", fault)
    changed = time.monotonic_ns()
    try:
        KINDS[fault.kind].apply(lab, fault)
    finally:
        log_event(lab, "revert", fault)
        forget(lab, fault)
    return replace(fault, changed_ns=changed)


def revert(lab: Attached, fault: Fault) -> None:
    KINDS[fault.kind].revert(lab, fault)
    log_event(lab, "revert", fault)


def restore_link(lab: Attached, *ends: Endpoint, mending: Fault | None = None) -> None:
    """Ends up again, and their nodes re-programmed: the kernel deleted an interface's
    addresses and routes when it went down. `mending`: the fault this reverts."""
    for e in ends:
        lab.runtime.set_link_state(e.node, e.ifname, True)
    reprogram(lab, sorted({e.node for e in ends}), mending)


def reprogram(lab: Attached, nodes: list[str], mending: Fault | None = None) -> None:
    """Re-program `nodes` (how a revert ends), then apply again on them every other fault
    in force: a node's plan sets each of its interfaces up and writes its routes, so it
    would undo them (clearing one of two NIC ports down brought the other one up)."""
    phases.configure(lab.runtime, [lab.plan[n] for n in nodes], Steps())
    for fault in active(lab):
        kind = KINDS[fault.kind]
        if not kind.undone_by_reprogram or mending is not None and \
                (fault.kind, fault.target) == (mending.kind, mending.target):
            continue
        for node in nodes:
            kind.reapply(lab, fault, node)


def reapply(lab: Attached, node: str) -> list[str]:
    """Apply again, on `node` that restarted and came back bare, every fault in
    force that it lost; the ends touched, as NODE:IFNAME."""
    again = []
    for fault in active(lab):
        again.extend(str(e) if e.ifname else e.node
                     for e in KINDS[fault.kind].reapply(lab, fault, node))
    return again
