"""`tc -j filter show`, read back once into typed records (standard library only).

Both data planes check what the kernel holds against the plan: the SIDs' programs
(twin.dataplane.ebpf) and the fabric signals' queue and RFC 6040 programs
(twin.dataplane.base), and the node reads its own programs back for their counters
(twin.node.ebpf). All three read tc's JSON here, and nowhere else.

tc's JSON is another program's output, and iproute2 has changed it before: keys are
added and renamed, `options` is absent from a chain's head entry, and a field may
come as another type. So nothing here indexes it blindly: a record takes what it
finds and leaves None where a field is missing or of another type, and an answer that
is not a list of filters is a `TcOutputError` (or, in a batch, a `Shown.error`), never
a KeyError. What tc 6.1 prints for a device with one of our filters (a `filter show`
lists the chain's head, then the filter):

    [{"protocol": "all", "pref": 100, "kind": "bpf", "chain": 0},
     {"protocol": "all", "pref": 100, "kind": "bpf", "chain": 0, "options": {
         "handle": "0x1", "bpf_name": "mrc-un fcbb:bb00:200::/48", "direct-action": true,
         "not_in_hw": true, "prog": {"id": 7, "name": "mrc_un", "tag": "...", "jited": 1}}}]

The direction (ingress or egress) is not in tc's answer: it is what was asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

INGRESS, EGRESS = "ingress", "egress"
ARGV = ["tc", "-j", "-batch", "-"]  # a batch of `filter show` lines on stdin


class TcOutputError(ValueError):
    """tc's answer is not a list of filters (not JSON, or JSON of another shape)."""


@dataclass(frozen=True)
class BpfFilter:
    """One bpf filter with a program, as tc showed it; None where tc left a field out
    or gave it another type."""

    dev: str
    direction: str  # INGRESS | EGRESS: what was asked
    prio: int | None  # tc's "pref"
    handle: str | None  # as tc writes it ("0x1")
    name: str | None  # the filter's name (twin's: "mrc-un <prefix>", ...)
    prog_id: int | None
    prog_name: str | None  # the kernel's name of the program
    tag: str | None  # the tag the kernel computed (hex)


@dataclass(frozen=True)
class Shown:
    """What tc answered for one device and direction: its bpf filters, or why its answer
    could not be read."""

    dev: str
    direction: str
    filters: tuple[BpfFilter, ...] = ()
    error: str = ""  # "" when tc answered with a list of filters

    def at(self, prio: int) -> BpfFilter | None:
        """The filter at priority `prio` (twin keeps one per hook), or None."""
        return next((f for f in self.filters if f.prio == prio), None)


def parse_show(text: str, dev: str, direction: str) -> list[BpfFilter]:
    """One `tc -j filter show dev DEV DIRECTION` answer: its bpf filters that carry a
    program. Entries of other kinds, without options and not objects are passed over."""
    try:
        entries = json.loads(text)
    except ValueError as e:
        raise TcOutputError(f"tc printed what is not JSON ({e}): {_head(text)}") from None
    if not isinstance(entries, list):
        raise TcOutputError(f"tc printed a JSON {type(entries).__name__}, not a list of "
                            f"filters: {_head(text)}")
    found = []
    for entry in entries:
        options = entry.get("options") if isinstance(entry, dict) else None
        if _kind(entry) != "bpf" or not isinstance(options, dict):
            continue
        prog = options.get("prog")
        prog = prog if isinstance(prog, dict) else {}
        handle = options.get("handle")
        found.append(BpfFilter(
            dev, direction, _int(entry.get("pref")),
            f"{handle:#x}" if _int(handle) is not None else _str(handle),
            _str(options.get("bpf_name")), _int(prog.get("id")), _str(prog.get("name")),
            _str(prog.get("tag"))))
    return found


def batch(hooks: list[tuple[str, str]]) -> str:
    """The stdin of ARGV that shows each (device, direction)'s filters."""
    return "".join(f"filter show dev {dev} {direction}\n" for dev, direction in hooks)


def read_batch(text: str, hooks: list[tuple[str, str]]) -> list[Shown]:
    """ARGV's answer to `batch(hooks)`, one line per `filter show`, paired with its hook.
    tc stops at the first command that fails, so a hook may have no line."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    out = []
    for i, (dev, direction) in enumerate(hooks):
        if i >= len(lines):
            out.append(Shown(dev, direction, error="tc printed no answer for it (a batch "
                                                   "stops at its first failing command)"))
            continue
        try:
            out.append(Shown(dev, direction, tuple(parse_show(lines[i], dev, direction))))
        except TcOutputError as e:
            out.append(Shown(dev, direction, error=str(e)))
    return out


def _kind(entry) -> str | None:
    return _str(entry.get("kind")) if isinstance(entry, dict) else None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value) -> str | None:
    return value if isinstance(value, str) else None


def _head(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 80 else text[:77] + "..."
