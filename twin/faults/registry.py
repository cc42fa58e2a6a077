"""The fault kinds by name: a leaf of the package. Records (twin.faults.record) read a
kind's name against it; each kind (twin.faults.kinds, .catalog) registers itself here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only a name for the annotations: the kinds import this module
    FaultType = Any

KINDS: dict[str, FaultType] = {}


def register(cls: type[FaultType]) -> type[FaultType]:
    if cls.name in KINDS:
        raise ValueError(f"fault kind {cls.name!r} is registered already")
    KINDS[cls.name] = cls()
    return cls


def unregister(name: str) -> None:
    KINDS.pop(name, None)


def kind_named(name: Any) -> FaultType | None:
    """The kind called `name`; None if none is."""
    try:
        return KINDS.get(name)
    except TypeError:  # not a string at all
        return None
