"""`Registry[T]`: entries by name, the one way twin looks a named choice up.

The runtimes (twin.runtime), the data planes (twin.dataplane), the fault kinds
(twin.faults.registry), the route-table formats (twin.routes.formats) and the
congestion controls (twin.mrc.cc, a registry over the `Cc` enum) are each one:

    register      a decorator on a class with a `name`; a name registered twice is refused
    get / [name]  the entry; a miss raises twin.errors.UnknownName (a UsageError, exit 2)
                  whose message lists the valid names: "unknown runtime 'x'; one of: ..."
    find          the entry, or None (a name read from a file, checked by its caller)
    names, items, values, in, len, iteration
    describe      "name: its summary; ...": the --help text of a CLI choice

A registry may list names it does not hold (`also`: "auto", which its caller resolves)
first among the valid ones. Only the standard library and twin.errors: a leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum
from typing import Any, Generic, TypeVar

from twin.errors import UnknownName

T = TypeVar("T")


def first_line(entry: Any) -> str:
    """An entry's one line of help: the first line of its `summary`, of its `help` (a
    Choice member, a fault kind) or of its docstring; "" when it has none."""
    for attr in ("summary", "help", "__doc__"):
        text = getattr(entry, attr, None)
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0]
    return ""


class Registry(Generic[T]):
    """Entries of type T by name. `what` names one in messages ("runtime"); `make` turns a
    registered class into its entry (an instance: `make=lambda cls: cls()`; the class
    itself by default); `sort` lists the names sorted in a miss and in --help (else in
    the order they were registered); `hint` ends a miss's message."""

    def __init__(self, what: str, *, make: Callable[[type], T] | None = None,
                 also: tuple[str, ...] = (), sort: bool = True, hint: str = "",
                 summary: Callable[[T], str] = first_line):
        self.what = what
        self.also = also
        self.sort = sort
        self.hint = hint
        self._make = make
        self._summary = summary
        self._entries: dict[str, T] = {}

    @classmethod
    def over(cls, enum: type[Enum], what: str, hint: str = "") -> Registry[Any]:
        """A registry of an enum's members, by value, in their order (twin.mrc.cc.Cc)."""
        reg: Registry[Any] = cls(what, sort=False, hint=hint)
        for member in enum:
            reg.add(str(member.value), member)
        return reg

    # -- registering ---------------------------------------------------------------

    def add(self, name: str, entry: T) -> T:
        """Hold `entry` as `name`; a name held already is refused (ValueError)."""
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered already")
        self._entries[name] = entry
        return entry

    def register(self, cls: type) -> type:
        """Class decorator: hold the class (or what `make` makes of it) by its `name`."""
        self.add(str(cls.name), self._make(cls) if self._make else cls)  # type: ignore[arg-type]
        return cls

    def unregister(self, name: str) -> None:
        """Forget `name` (a test's toy entry); absent is fine."""
        self._entries.pop(name, None)

    # -- looking up ----------------------------------------------------------------

    def get(self, name: Any) -> T:
        """The entry called `name`; UnknownName, listing the valid names, if none is."""
        entry = self.find(name)
        if entry is None:
            raise self.miss(name)
        return entry

    __getitem__ = get

    def find(self, name: Any) -> T | None:
        """The entry called `name`; None if none is (also for a name that is no string)."""
        if not isinstance(name, str):
            return None
        return self._entries.get(name)

    def miss(self, name: Any) -> UnknownName:
        """The error a lookup of `name` raises: for a caller that reports it its own way
        (a spec's problem at a key path, a message of the control protocol)."""
        return UnknownName(self.what, name, self.valid(), self.hint)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> tuple[str, ...]:
        """The registered names (sorted, or in registration order: see `sort`)."""
        return tuple(sorted(self._entries) if self.sort else self._entries)

    def valid(self) -> tuple[str, ...]:
        """Every name a lookup accepts: `also` first, then the registered ones."""
        return (*self.also, *self.names())

    def items(self) -> list[tuple[str, T]]:
        return [(n, self._entries[n]) for n in self.names()]

    def values(self) -> list[T]:
        return [self._entries[n] for n in self.names()]

    def listed(self) -> str:
        """'a, b, c': the valid names, for a message."""
        return ", ".join(self.valid())

    def describe(self, sep: str = "; ") -> str:
        """'a: its summary; b: its summary': the --help text of a choice among them (an
        entry without a summary shows its name alone)."""
        return sep.join(f"{n}: {s}" if (s := self._summary(e)) else n
                        for n, e in self.items())

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self.names())})"
