"""A sending QP's mode: the one definition of its names (twin.mrc.cc holds the other
choice a QP makes, its congestion control, `Cc`, built the same way).

`Mode` is a `StrEnum`: each member equals the string that travels in a control request
(`send_qp`'s `mode`), a drill file, a trace or `twin traffic --mode`, so nothing on the
wire or on disk changes; the transport (twin.mrc.transport: the reference Sender's
ModeRules; the compiled Sender's enum, numbered from these members by name), twin
traffic, the drills, the control protocol and the CLI all take their choices from here.
Each member carries its one-line help (`Mode.MRC.help`), which `--help` and the control
table's docs show.

    mrc            sprays over the EV set and adapts: an EV that lost a packet retires
                   (its whole path when the path proves dead), a congested one SKIPs
    spray-static   sprays over the EV set but never retires or skips an EV
    single-path    one hash-chosen EV for the QP's life, go-back-N recovery: RoCE over
                   ECMP (docs/roce-baseline.md)

Only the standard library: the control client and the CLI import it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class Choice(StrEnum):
    """A StrEnum whose members carry a line of help: `NAME = "value", "help"`."""

    help: str

    def __new__(cls, value: str, help: str = ""):
        member = str.__new__(cls, value)
        member._value_ = value
        member.help = help
        return member

    @classmethod
    def of(cls, value: Any):
        """The member `value` names (a member, or a string equal to one), else None.
        Anything that is not a string (a number or a list from a drill file) is None."""
        if not isinstance(value, str):
            return None
        return cls._value2member_map_.get(value)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every member's value, as plain strings, in the definition's order."""
        return tuple(m.value for m in cls)

    @classmethod
    def listed(cls) -> str:
        """'a, b, c': the values for an error message."""
        return ", ".join(cls.names())

    @classmethod
    def described(cls) -> str:
        """'a: its help; b: its help': for a --help text."""
        return "; ".join(f"{m.value}: {m.help}" for m in cls)


class Mode(Choice):
    MRC = "mrc", "sprays over the EV set and adapts (retires lost paths, skips congested EVs)"
    SPRAY_STATIC = "spray-static", "sprays over the EV set but never retires or skips an EV"
    SINGLE_PATH = "single-path", "one hashed EV for the QP's life, go-back-N: RoCE over ECMP"
