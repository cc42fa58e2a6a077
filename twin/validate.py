"""Validators: the one vocabulary twin checks what people and programs hand it with.

A fabric spec, a drill file, a control request to an MRC endpoint and a CLI option
are each checked through these (in the spirit of netlab's typed attributes):

    Int(lo, hi)        an integer, not a bool, in lo..hi (a bound may be a callable of the
                       fields a Record checked before it: a write's size by its buffer);
                       above=True: more than lo ("must be more than 0")
    Float(lo, hi)      a finite number, not a bool, in lo..hi (or above lo)
    Str(pattern)       a string, matching `pattern` when given
    Choice(names)      one of `names`: a tuple, or a twin.registry.Registry
    Bool()             true or false
    Size(lo, hi)       bytes: 4096, or 64M / 256MiB / 1G (twin.units.parse_size)
    Rate(), Duration(lo, hi)  tc's 100mbit; 300ms (twin.units), a duration within lo..hi ns
    IPv6Prefix(len, within)  an IPv6 prefix of that length inside another
    ListOf(v, max_len) a list, each item checked by v
    Record(fields)     a mapping: its known keys (a miss suggests the closest), the
                       required ones, each field checked in order; defaults filled in
    Optional(v)        None, or what v accepts

Calling a validator, `v(value, path)`, returns the checked value (a Size its bytes) or
raises `Invalid`, the one error type: it carries the key path, the message and a hint,
and reads `path: message (hint)`. A file's checker collects them instead of stopping at
the first (`Problems`, whose problems a SpecError renders); a CLI option raises it (a
UsageError: exit 2); the endpoint turns it into its protocol's reply.

How a refusal is phrased is a `Words`: DOCUMENT for files ("must be at least 1 (got
0)"), SPAN where a number's whole range is named ("must be an integer 1 to 64 (got 99)",
"must be a number more than 0, at most 100 (got 0)"); the
endpoint's control protocol has words of its own, which its
clients and tests read word for word (twin.mrc.control).

Only the standard library, twin.errors, twin.registry and twin.units: a leaf.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from twin.errors import Problem, UsageError
from twin.registry import Registry
from twin.units import parse_duration_ns, parse_rate, parse_size, show_duration


class Invalid(UsageError, ValueError):
    """A value a validator refused: `path` (where: `bgp.timers.hold`, `--qps`), `message`
    (what is wrong), `hint` (how to fix it). A UsageError (exit 2) where it reaches the
    CLI; a ValueError to code that checks values the standard way."""

    def __init__(self, message: str, hint: str = "", path: str = ""):
        self.message = message
        self.hint = hint
        self.path = path
        super().__init__(message)

    def __str__(self) -> str:
        text = f"{self.path}: {self.message}" if self.path else self.message
        return text + (f" ({self.hint})" if self.hint else "")

    def problem(self) -> Problem:
        """As one problem of a file (twin.errors.Problem, which a SpecError renders)."""
        return Problem(self.path or "(top level)", self.message, self.hint)


def show_value(value: Any) -> str:
    """A value as a message of a file or an option quotes it: 'text', true, 12, nothing,
    or a container's type name (never a whole list pasted back)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "nothing"
    return f"{value!r}" if isinstance(value, int | float) else type(value).__name__


@dataclass(frozen=True)
class Words:
    """How refusals are phrased. Fields of the templates: {what} (the validator's own: "an
    integer"), {lo}, {hi}, {span} (a number's range: "1 to 64", "more than 0, at most
    100"), {names}, {got} (the value as `show` quotes it), {value} (as it is), {key} (a
    missing key), {max} and {noun} (a list's). `more` refuses a number not above an
    exclusive lower bound."""

    wrong: str = "must be {what} (got {got})"
    low: str = "must be at least {lo} (got {value})"
    more: str = "must be more than {lo} (got {value})"
    high: str = "must be at most {hi} (got {value})"
    choice: str = "must be one of {names} (got {got})"
    missing: str = "is required"
    missing_at_key: bool = True  # a missing key's path is the key (else the record's)
    long: str = "has {count} {noun}; at most {max}"
    show: Callable[[Any], str] = show_value

    def but(self, **changes: Any) -> Words:
        return replace(self, **changes)


DOCUMENT = Words()
# A range named whole in every refusal of a number (Int, Float): "must be an integer 1 to
# 64 (got 99)" (a drill file's integers, the CLI's numeric options)
SPAN = DOCUMENT.but(**dict.fromkeys(("wrong", "low", "high", "more"),
                                    "must be {what} {span} (got {got})"))
# Every refusal of a value in one message, its kind and range named in {what}: "must be a
# size such as 64M, at most 4G (got '8G')"
ONE = DOCUMENT.but(low=DOCUMENT.wrong, high=DOCUMENT.wrong, more=DOCUMENT.wrong)

Bound = int | float | Callable[[Mapping[str, Any]], Any]


class Validator:
    """One check. `what` names what it accepts in messages; `hint` ends each refusal;
    `words` phrases them. `check(value, path, ctx)`: the value, checked; `ctx` is what a
    Record checked before this field (for bounds that depend on it)."""

    what = "a value"

    def __init__(self, *, hint: str = "", words: Words = DOCUMENT, what: str | None = None):
        self.hint = hint
        self.words = words
        if what is not None:
            self.what = what

    def __call__(self, value: Any, path: str = "", ctx: Mapping[str, Any] | None = None) -> Any:
        return self.check(value, path, ctx)

    def check(self, value: Any, path: str = "", ctx: Mapping[str, Any] | None = None) -> Any:
        raise NotImplementedError

    def refuse(self, template: str, value: Any, path: str, hint: str | None = None,
               **fields: Any) -> Invalid:
        message = template.format(what=self.what, got=self.words.show(value), value=value,
                                  **fields)
        return Invalid(message, self.hint if hint is None else hint, path)


def _whole(bound: Any) -> Any:
    """A float bound that is a whole number as an int: 1 to 60000, not 1.0 to 60000.0."""
    return int(bound) if isinstance(bound, float) and bound.is_integer() else bound


class Int(Validator):
    """An integer in lo..hi; `above`: lo itself is refused ("must be more than 0");
    `text`: also as text, in decimal or with Python's 0x/0o/0b prefix (an option's
    value: `--ev 0x12345`)."""

    what = "an integer"

    def __init__(self, lo: Bound = -math.inf, hi: Bound = math.inf, *, above: bool = False,
                 text: bool = False, **kw: Any):
        super().__init__(**kw)
        self.lo, self.hi, self.above, self.text = lo, hi, above, text
        self.fixed = not callable(lo) and not callable(hi) and not above

    def span(self, lo: Any, hi: Any) -> str:
        lo, hi = _whole(lo), _whole(hi)
        return f"more than {lo}, at most {hi}" if self.above else f"{lo} to {hi}"

    def number(self, template: str, value: Any, path: str, lo: Any, hi: Any) -> Invalid:
        return self.refuse(template, value, path, lo=lo, hi=hi, span=self.span(lo, hi))

    def check(self, value, path="", ctx=None):
        # (the fast way first: a control request checks several of these, bool is an int)
        if type(value) is not int and self.text and isinstance(value, str):
            value = self.parse(value, path, ctx)
        if type(value) is not int and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.wrong(value, path, ctx)
        if self.fixed and self.lo <= value <= self.hi:
            return value
        return self.in_range(value, path, ctx)

    def parse(self, value: str, path: str, ctx: Mapping[str, Any] | None) -> int:
        try:
            return int(value.strip(), 0)
        except ValueError:
            raise self.wrong(value, path, ctx) from None

    def bounds(self, ctx: Mapping[str, Any] | None) -> tuple[Any, Any]:
        lo, hi = self.lo, self.hi
        if callable(lo):
            lo = lo(ctx if ctx is not None else {})
        if callable(hi):
            hi = hi(ctx if ctx is not None else {})
        return lo, hi

    def wrong(self, value: Any, path: str, ctx: Mapping[str, Any] | None) -> Invalid:
        # (a bound computed from the fields before is not computed for this: they may
        # have been refused themselves)
        return self.number(self.words.wrong, value, path, self.lo, self.hi)

    def in_range(self, value, path, ctx):
        lo, hi = self.bounds(ctx)
        if self.above and value <= lo:
            raise self.number(self.words.more, value, path, lo, hi)
        if value < lo:
            raise self.number(self.words.low, value, path, lo, hi)
        if value > hi:
            raise self.number(self.words.high, value, path, lo, hi)
        return value


class Float(Int):
    """A finite number (an integer is one); NaN and infinities are refused as not one."""

    what = "a number"

    def check(self, value, path="", ctx=None):
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise self.wrong(value, path, ctx)
        return self.in_range(value, path, ctx)


class Str(Validator):
    """A string; not empty unless `empty`; matching `pattern` (re.match) when given."""

    what = "a string"

    def __init__(self, pattern: str | None = None, *, empty: bool = True, max_len: int = 0,
                 **kw: Any):
        super().__init__(**kw)
        self.pattern = re.compile(pattern) if pattern else None
        self.empty = empty
        self.max_len = max_len

    def check(self, value, path="", ctx=None):
        if not isinstance(value, str) or (not value and not self.empty) \
                or (self.pattern is not None and not self.pattern.match(value)) \
                or (self.max_len and len(value) > self.max_len):
            raise self.refuse(self.words.wrong, value, path)
        return value


class Choice(Validator):
    """One of `names`, or of a Registry's valid names (its `also` first)."""

    what = "a name"

    def __init__(self, names: Iterable[str] | Registry[Any], **kw: Any):
        super().__init__(**kw)
        self.names = tuple(names.valid() if isinstance(names, Registry) else names)

    def check(self, value, path="", ctx=None):
        if not isinstance(value, str) or value not in self.names:
            raise self.refuse(self.words.choice, value, path, names=", ".join(self.names))
        return value


class Bool(Validator):
    what = "true or false"

    def check(self, value, path="", ctx=None):
        if not isinstance(value, bool):
            raise self.refuse(self.words.wrong, value, path)
        return value


class Size(Validator):
    """Bytes, in lo..hi: an integer, or text twin.units.parse_size reads (K/M/G are powers
    of 1024). A size out of range is refused in the words' `low` and `high` (ONE_SIZE
    says "must be {what}" for every refusal)."""

    what = "a size in bytes such as 80KB or 81920"

    def __init__(self, lo: int = 1, hi: float = math.inf, *, numbers: bool = True,
                 **kw: Any):
        kw.setdefault("hint", "K, M and G are powers of 1024")
        super().__init__(**kw)
        self.lo, self.hi, self.numbers = lo, hi, numbers

    def check(self, value, path="", ctx=None):
        size = None
        if isinstance(value, str):
            size = parse_size(value)
        elif self.numbers and isinstance(value, int) and not isinstance(value, bool):
            size = value
        if size is None:
            raise self.refuse(self.words.wrong, value, path)
        if size < self.lo:
            raise self.refuse(self.words.low, value, path, lo=self.lo, hi=self.hi)
        if size > self.hi:
            raise self.refuse(self.words.high, value, path, lo=self.lo, hi=self.hi)
        return size


class Rate(Validator):
    """bit/s from tc's units: 100mbit, 10gbit (twin.units.parse_rate)."""

    what = "a rate such as 100mbit or 10gbit"

    def __init__(self, **kw: Any):
        kw.setdefault("hint", "units are tc's: bit, kbit, mbit, gbit, tbit")
        super().__init__(**kw)

    def check(self, value, path="", ctx=None):
        bps = parse_rate(value) if isinstance(value, str) else None
        if bps is None:
            raise self.refuse(self.words.wrong, value, path)
        return bps


class Duration(Validator):
    """Nanoseconds, from 300ms, 1.5s, 250us (a unit is required), at most `hi` ns and at
    least `lo` ns; `hi_hint` and `lo_hint` are the hints of a duration past either."""

    what = "a duration such as 300ms"

    def __init__(self, hi: int | None = None, *, hi_hint: str = "", lo: int | None = None,
                 lo_hint: str = "", **kw: Any):
        kw.setdefault("hint", "units: us, ms, s")
        super().__init__(**kw)
        self.hi, self.hi_hint, self.lo, self.lo_hint = hi, hi_hint, lo, lo_hint

    def check(self, value, path="", ctx=None):
        ns = parse_duration_ns(value) if isinstance(value, str) else None
        if ns is None:
            raise self.refuse(self.words.wrong, value, path)
        if self.hi is not None and ns > self.hi:
            raise self.refuse(self.words.high, value, path, self.hi_hint,
                              hi=show_duration(self.hi))
        if self.lo is not None and ns < self.lo:
            raise self.refuse(self.words.low, value, path, self.lo_hint,
                              lo=show_duration(self.lo))
        return ns


class ListOf(Validator):
    """A list of at most `max_len` items, each checked by `item` at `path[i]` (or at the
    path `item_path` gives it). `noun` counts the items in a message: "steps"."""

    what = "a list"

    def __init__(self, item: Validator, *, max_len: int = 0, noun: str = "items",
                 item_path: Callable[[str, int], str] | None = None, **kw: Any):
        super().__init__(**kw)
        self.item, self.max_len, self.noun = item, max_len, noun
        self.item_path = item_path or (lambda path, i: f"{path}[{i}]")

    def check(self, value, path="", ctx=None):
        if not isinstance(value, list):
            raise self.refuse(self.words.wrong, value, path, max=self.max_len, noun=self.noun)
        if self.max_len and len(value) > self.max_len:
            raise self.refuse(self.words.long, value, path, count=len(value),
                              max=self.max_len, noun=self.noun)
        return [self.item.check(v, self.item_path(path, i), ctx) for i, v in enumerate(value)]


class Optional(Validator):
    """None (or, from a file, nothing), or what `inner` accepts."""

    def __init__(self, inner: Validator):
        super().__init__(hint=inner.hint, words=inner.words, what=inner.what)
        self.inner = inner

    def check(self, value, path="", ctx=None):
        return None if value is None else self.inner.check(value, path, ctx)


class Checked(dict):
    """The fields a Record has checked so far, the `ctx` of the next one; `outer` is the
    ctx the Record itself was checked with (the endpoint's loop, for a QP's number)."""

    def __init__(self, outer: Any = None):
        super().__init__()
        self.outer = outer


def join(path: str, key: object) -> str:
    """The key path of `key` under `path`: `bgp.timers`, `hold` -> `bgp.timers.hold`."""
    return f"{path}.{key}" if path else str(key)


def unknown_key(key: object, known: Iterable[str], path: str) -> Invalid:
    """An unknown key, with the closest known one as the hint (else every known key)."""
    known = sorted(known)
    close = difflib.get_close_matches(str(key), known, n=1)
    return Invalid("unknown key", f"did you mean '{close[0]}'?" if close else
                   "known keys: " + ", ".join(known), join(path, key))


class Record(Validator):
    """A mapping with known keys, each checked by its validator in the order given.

    `defaults`: a missing key's value, checked like a given one (a callable default is
    called with the fields checked so far, and its value taken as it is); a key with
    neither a default nor in `optional` is required. `optional`: keys left out of the
    result when missing. `extra`: "refuse" unknown keys (the closest known key is the
    hint), or "ignore" them. Raises the first Invalid; `collect` reports every one
    instead, into a Problems."""

    what = "a mapping"

    def __init__(self, fields: Mapping[str, Validator], *, defaults: Mapping[str, Any] = {},
                 optional: Iterable[str] = (), extra: str = "refuse", **kw: Any):
        super().__init__(**kw)
        self.fields = dict(fields)
        self.defaults = dict(defaults)
        self.optional = frozenset(optional)
        self.extra = extra

    def _missing(self, key: str, path: str, got: dict) -> Any:
        """A missing key's value: its default, checked (a callable's taken as it is)."""
        if key not in self.defaults:
            where = join(path, key) if self.words.missing_at_key else path
            raise Invalid(self.words.missing.format(key=key), self.hint, where)
        value = self.defaults[key]
        return value(got) if callable(value) else self.fields[key].check(value,
                                                                          join(path, key), got)

    def _field(self, data: Mapping, key: str, path: str, got: dict) -> Any:
        if key in data:
            return self.fields[key].check(data[key], join(path, key), got)
        return self._missing(key, path, got)

    def check(self, value, path="", ctx=None):
        # (a control request is a dict: the Mapping ABC's isinstance is the slow way)
        if not isinstance(value, dict) and not isinstance(value, Mapping):
            raise self.refuse(self.words.wrong, value, path)
        if self.extra == "refuse":
            for key in value:
                if key not in self.fields:
                    raise unknown_key(key, self.fields, path)
        got = Checked(outer=ctx)
        for key, v in self.fields.items():
            if key in value:
                got[key] = v.check(value[key], f"{path}.{key}" if path else key, got)
            elif key not in self.optional:
                got[key] = self._missing(key, path, got)
        return dict(got)

    def collect(self, value: Any, path: str, problems: Problems) -> dict[str, Any]:
        """Every field that checks, and a problem for each one that does not (and for
        each unknown key): a file's way, which reports everything at once."""
        if not isinstance(value, Mapping):
            problems.add(self.refuse(self.words.wrong, value, path))
            return {}
        if self.extra == "refuse":
            for key in value:
                if key not in self.fields:
                    problems.add(unknown_key(key, self.fields, path))
        got = Checked()
        for key in self.fields:
            if key in self.optional and key not in value:
                continue
            try:
                got[key] = self._field(value, key, path, got)
            except Invalid as e:
                problems.add(e)
        return dict(got)


class Problems:
    """The problems of one file, collected rather than raised at the first: each an
    Invalid kept as a twin.errors.Problem, which SpecError renders (and --json lists)."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def __len__(self) -> int:
        return len(self.problems)

    def __bool__(self) -> bool:
        return bool(self.problems)

    def add(self, e: Invalid) -> None:
        self.problems.append(e.problem())

    def say(self, path: str, message: str, hint: str = "") -> None:
        """A problem no single validator finds (one value against another)."""
        self.problems.append(Problem(path, message, hint))

    def check(self, v: Validator, data: Mapping, key: str, path: str = "") -> Any:
        """data[key] checked by `v` at `path.key`: its value, or None if it is missing or
        refused (then a problem says why)."""
        if key not in data:
            return None
        return self.value(v, data[key], join(path, key))

    def value(self, v: Validator, value: Any, path: str) -> Any:
        """`value` checked by `v` at `path`: the checked value, or None and a problem."""
        try:
            return v.check(value, path)
        except Invalid as e:
            self.add(e)
            return None

    def keys(self, data: Mapping, known: Iterable[str], path: str = "") -> None:
        """A problem for each key of `data` that is not `known`."""
        known = list(known)
        for key in data:
            if key not in known:
                self.add(unknown_key(key, known, path))

    def mapping(self, data: Any, path: str, known: Iterable[str], hint: str) -> dict:
        """`data` as a mapping of known keys: {} and a problem if it is no mapping; a
        problem for each unknown key (the mapping is kept whole)."""
        if not isinstance(data, dict):
            self.say(path or "(top level)", f"must be a mapping (got {show_value(data)})", hint)
            return {}
        self.keys(data, known, path)
        return data


def option(v: Validator) -> Callable[[Any, Any, Any], Any]:
    """A click callback that checks an option's value by `v`: a refusal is an Invalid
    (a UsageError, exit 2) at the option's name, `--qps: must be at most 64 (got 65)`.
    None (an option not given, default None) passes unchecked."""

    def callback(ctx: Any, param: Any, value: Any) -> Any:
        if value is None:
            return None
        name = max(param.opts, key=len) if param.opts else param.name
        return v.check(value, name)

    return callback


class IPv6Prefix(Validator):
    """An IPv6 prefix (host bits clear) of length `length`, within `within`: as an
    ipaddress.IPv6Network."""

    what = "an IPv6 prefix"

    def __init__(self, length: int, within: str, **kw: Any):
        super().__init__(**kw)
        self.length, self.within = length, ipaddress.IPv6Network(within)

    def check(self, value, path="", ctx=None):
        try:
            net = ipaddress.IPv6Network(str(value), strict=True)
        except ValueError as e:
            raise Invalid(f"must be {self.what} ({e})", self.hint, path) from None
        if net.prefixlen != self.length:
            raise Invalid(f"must be a /{self.length} (got /{net.prefixlen})", self.hint, path)
        if not net.subnet_of(self.within):
            raise Invalid(f"must lie within {self.within} (got {net})", self.hint, path)
        return net
