"""The fault kinds by name: a leaf of the package. Records (twin.faults.record) read a
kind's name against it; each kind (twin.faults.kinds, .catalog) registers itself here.

KINDS is a twin.registry.Registry of one instance per kind, in the order they register:
`KINDS[name]` of a name no kind has raises UnknownName listing the kinds; `kind_named`
is None for it (a name read from a file, which its reader reports its own way)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twin.registry import Registry

if TYPE_CHECKING:  # only a name for the annotations: the kinds import this module
    FaultType = Any

KINDS: Registry[FaultType] = Registry("fault kind", make=lambda cls: cls(), sort=False,
                                      hint="`twin fault --help` says what each does")
register = KINDS.register
unregister = KINDS.unregister
kind_named = KINDS.find  # the kind called `name`; None if none is (or it is no string)
