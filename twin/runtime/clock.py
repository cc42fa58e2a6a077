"""The clock a drill's figures are read on: each runtime hands out its own
(`Runtime.clock`), and the drill runner takes it at its boundary.

The figures (twin.chaos.metrics, pure) compare a fault's time with the endpoints'
event logs, which the endpoints stamp with their node's CLOCK_MONOTONIC. Whatever
the runner records about a fault goes through one of these first:

    LocalClock   the nodes are on this machine: twin's clock is theirs. A fault
                 began just before twin changed the kernel (Fault.changed_ns) and
                 was in force when the call returned; that span is its uncertainty.
    NodesClock   an attached fabric (twin attach), on one machine elsewhere: the
                 commands that break and mend it run through a stream per node and
                 are stamped by the node (twin.remote.stream); twin's own times are
                 converted by an offset measured before and after the drill
                 (twin.remote.clock). A fabric over several machines is refused.

Both are a `Clock`: `change(fn)`: run fn (an apply or a revert) and say when, on the figures'
clock, it began and was done, and how uncertain its start is; `to_fig(ns)`: twin's
clock to the figures'.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from twin.errors import UsageError
from twin.remote import clock as C


class Clock(Protocol):
    kind: str

    def open(self, nodes: list[str]) -> list[str]:
        """Get ready to time changes in `nodes`; the notes to show."""

    def close(self) -> None: ...

    def change(self, fn: Callable[[], Any]) -> tuple[Any, int, int, int]:
        """Run fn; (its result, began, done, uncertainty of began), on the figures' clock."""

    def to_fig(self, local_ns: int) -> int:
        """twin's CLOCK_MONOTONIC to the figures' clock."""

    def to_dict(self) -> dict: ...


class LocalClock:
    kind = "local"

    def open(self, nodes: list[str]) -> list[str]:
        return []

    def close(self) -> None:
        pass

    def change(self, fn):
        called = time.monotonic_ns()
        result = fn()
        returned = time.monotonic_ns()
        began = getattr(result, "changed_ns", 0) or called
        return result, began, returned, returned - began

    def to_fig(self, local_ns: int) -> int:
        return local_ns

    def to_dict(self) -> dict:
        return {"kind": self.kind, "machine": "this one",
                "what": "one CLOCK_MONOTONIC: twin's, the nodes', the endpoints'"}


class NodesClock:
    """The attached fabric's clock, read in its nodes (see the module docstring)."""

    kind = "nodes"

    def __init__(self, runtime, lab: str, what: str = "twin drill run"):
        self.rt = runtime
        self.machine = C.require_one_machine(what, lab, runtime.machines().items())
        self.map = C.IDENTITY
        self.before: C.ClockMap | None = None
        self.after: C.ClockMap | None = None
        self.stamped = 0
        self.unstamped = 0
        self.failed: dict[str, str] = {}

    def open(self, nodes: list[str]) -> list[str]:
        """Streams into `nodes` (the first is read for the offset); the notes to show."""
        self.failed = self.rt.open_streams(nodes)
        notes = [f"{n}: no command stream ({why}); its faults are timed by twin, wider"
                 for n, why in self.failed.items()]
        reader = next((self.rt.stream(n) for n in nodes if self.rt.stream(n)), None)
        if reader is None:
            raise UsageError(f"no command stream could be opened in any of {', '.join(nodes)}"
                             " (python3 in the node images?): a drill has no clock to read "
                             f"its figures on; first: {next(iter(self.failed.values()), '')}")
        self.reader = reader
        self.before = self.map = C.offset_from(reader.samples())
        return notes

    def close(self) -> None:
        try:
            if self.before is not None and self.reader.alive:
                self.after = C.offset_from(self.reader.samples())
                self.map = C.widen(self.before, self.after)
        finally:
            self.rt.close_streams()

    def change(self, fn):
        with self.rt.stamping() as stamps:
            called = time.monotonic_ns()
            result = fn()
            returned = time.monotonic_ns()
        if stamps:
            self.stamped += 1
        else:
            self.unstamped += 1
        began, done, uncertainty = C.bracket(stamps, called, returned, self.map)
        return result, began, done, uncertainty

    def to_fig(self, local_ns: int) -> int:
        return self.map.to_remote(local_ns)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "machine": self.machine,
                "what": "the nodes' CLOCK_MONOTONIC: faults stamped in the nodes, twin's "
                        "own times converted by the offset",
                "offset": self.map.to_dict(),
                "before": self.before.to_dict() if self.before else None,
                "after": self.after.to_dict() if self.after else None,
                "stamped_changes": self.stamped, "unstamped_changes": self.unstamped,
                "no_stream": sorted(self.failed)}
