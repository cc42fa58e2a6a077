"""Reading a node's file so that the file cannot hurt the checker.

`twin routes check` runs as root in CI workspaces, on files anyone with a commit
could have left there. Every node's file is read through this module (by
twin.routes.formats.load_dir, before a format's `parse` sees its text), and so no
file, however written, makes the check follow a path out of the tables'
directory, block, run out of memory, print a traceback or print what it holds.
A format keeps its part with two calls: JSON decoded with `load_json`, and what
the file says quoted with `token` (or `clip`, unquoted), never with `!r`.

    list_files(root, depth)     the directory's entries that are not directories, to
                                the depth a format's files go; nothing else opened

    read_file(root, rel, ...)   one node's file as text. Refused, each with a Problem
                                naming the file: a symlink (in the file's own name or
                                a directory above it) leading out of `root`, unless
                                follow_symlinks; anything but a regular file (FIFO,
                                device, socket: refused from its stat, never opened);
                                over the size limit (never more than limit + 1 bytes
                                read); not UTF-8 (the byte and its offset); empty
    load_json(text, file, ...)  json.loads with guards: a key written twice (named;
                                JSON would keep the last), nesting past the limit,
                                a number past the digit limit, NaN and Infinity: a
                                SpecError each. Bad syntax stays json.JSONDecodeError,
                                which the format names with its own hint.
    token(value), clip(text, n) a piece of a file fit to quote in a message: escaped,
                                at most a few dozen characters
    safe(problem)               a Problem with every field escaped and clipped: the
                                net under every format's messages (load_dir)
    Limits                      the numbers, each named in the error that meets it,
                                from TWIN_ROUTES_MAX_BYTES and TWIN_ROUTES_MAX_ENTRIES

The limits are far above what a fabric's tables need: mrc-8p-256's largest node
file is 4 KB (SONiC) and holds 23 entries.
"""

from __future__ import annotations

import json
import os
import reprlib
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from twin.errors import Problem, SpecError
from twin.routes.formats.base import WHAT

MIB = 1024 * 1024
BYTES_ENV, ENTRIES_ENV = "TWIN_ROUTES_MAX_BYTES", "TWIN_ROUTES_MAX_ENTRIES"
FOLLOW_HINT = "copy the file into the directory, or pass --follow-symlinks to read it " \
              "where the link points"


@dataclass(frozen=True)
class Limits:
    """What one tables directory may hold. Each limit is named in the error meeting it."""

    bytes: int = 8 * MIB  # per file; never more than this + 1 read
    entries: int = 50_000  # routes, SIDs and dropping SIDs per node
    problems: int = 10_000  # kept for --json; the rest counted
    depth: int = 64  # JSON nesting
    digits: int = 40  # characters in a JSON number (an IPv6 address as an integer: 39)
    files: int = 100_000  # entries listed in the directory

    @classmethod
    def from_env(cls) -> Limits:
        """The defaults, with TWIN_ROUTES_MAX_BYTES and TWIN_ROUTES_MAX_ENTRIES when set."""
        got = {}
        for name, field in ((BYTES_ENV, "bytes"), (ENTRIES_ENV, "entries")):
            text = os.environ.get(name, "").strip()
            if text:
                if not text.isdigit() or int(text) < 1:
                    raise SpecError(name, [Problem(name, f"{token(text)} is not a positive "
                                                         "whole number")], "environment")
                got[field] = int(text)
        return cls(**got)


# -- quoting ----------------------------------------------------------------------------------


def _escape(text: str) -> str:
    """Printable ASCII as it is, everything else (control characters, escape sequences,
    any non-ASCII) as a Python escape: a terminal shows it, it changes nothing."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def clip(text: object, limit: int) -> str:
    """`text` escaped, and cut to `limit` characters with `...` when longer."""
    s = _escape(str(text)[:limit + 1])
    return s if len(s) <= limit else s[:max(limit - 3, 0)] + "..."


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple = 2, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = 80


def token(value: object, limit: int = 40) -> str:
    """A piece of a file as a message may quote it: a string in quotes, anything else
    (a JSON list, an object) as Python writes it, as `!r` would, but escaped and at
    most `limit` characters ("'abc...'" when longer). Messages quote file content
    through this, or through `clip` where they show it unquoted."""
    if isinstance(value, str):
        return f"'{clip(value, max(limit - 2, 4))}'"
    return clip(_SHORT.repr(value), limit)


def safe(problem: Problem, limit: int = 240) -> Problem:
    """The problem with every field escaped and clipped: whatever a format put in its
    message, no more than `limit` characters of it reach the screen."""
    fields = (problem.path, problem.message, problem.hint)
    clipped = tuple(clip(f, limit) for f in fields)
    return problem if clipped == fields else Problem(*clipped)


# -- a node's file ----------------------------------------------------------------------------

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"))


def _refuse(where: str, message: str, hint: str = "") -> SpecError:
    return SpecError(where, [Problem(where, message, hint)], WHAT)


def _kind(mode: int) -> str:
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def real(path: Path) -> Path:
    """The path with every symlink resolved, as far as they go (a loop: where it loops;
    Path.resolve raises on one)."""
    return Path(os.path.realpath(path))


def _symlink_out(root: Path, rel: str) -> str | None:
    """The first part of `rel` (itself or a directory above it) that is a symlink
    leading out of `root`, as `part -> target`; None when the file stays inside."""
    real_root = real(root)
    for i in range(1, len(Path(rel).parts) + 1):
        part = Path(*Path(rel).parts[:i])
        if (root / part).is_symlink():
            target = real(root / part)
            if not target.is_relative_to(real_root):
                return f"{part} -> {clip(target, 80)}"
    return None


def read_file(root: Path, rel: str, limits: Limits, follow_symlinks: bool = False) -> str:
    """The text of `root/rel`, read without following a link out of `root` (unless
    `follow_symlinks`), only if a regular file, at most limits.bytes; raises SpecError
    (one Problem naming `rel`) for what it refuses."""
    if not follow_symlinks and (link := _symlink_out(root, rel)):
        raise _refuse(rel, f"is a symlink leading out of the tables' directory ({link}): "
                           "refused, not read", FOLLOW_HINT)
    path = real(root / rel)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):  # from its stat: a FIFO is never opened
            raise _refuse(rel, f"is {_kind(st.st_mode)}, not a regular file: refused, "
                               "not read", "a node's tables are a file of text")
        _check_size(rel, st.st_size, limits)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise _refuse(rel, f"cannot read it ({e.strerror or e})") from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            raise _refuse(rel, "changed while it was opened: refused, not read")
        chunks, size = [], 0
        while size <= limits.bytes and (chunk := os.read(fd, limits.bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        _check_size(rel, size, limits)  # it grew after its stat
    except OSError as e:
        raise _refuse(rel, f"cannot read it ({e.strerror or e})") from None
    finally:
        os.close(fd)
    return _text(rel, b"".join(chunks))


def _check_size(rel: str, size: int, limits: Limits) -> None:
    if size > limits.bytes:
        raise _refuse(rel, f"is over {limits.bytes:,} bytes, the limit for one node's file",
                      f"a node's tables are kilobytes; if these are right, raise the limit "
                      f"with {BYTES_ENV}=<bytes>")


def _text(rel: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _refuse(f"{rel} line {line}", f"not UTF-8: byte 0x{data[e.start]:02x} at "
                                            f"offset {e.start:,}",
                      "route tables are UTF-8 text; is it the file you meant?") from None
    if not text.strip():
        raise _refuse(rel, "is empty", "a node's file holds its routes and SIDs; an empty "
                                       "one is most likely a capture that failed")
    return text


def list_files(root: Path, depth: int, limits: Limits) -> list[str]:
    """Every entry of `root` that is not a directory (regular or not: what is not is
    refused by name when read), to `depth` levels, directories linked or not; sorted.
    Nothing is opened but directories."""
    found: list[str] = []
    todo = [(root, "", 1)]
    while todo:
        directory, prefix, level = todo.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue  # an unreadable directory holds no file the check could read
        for entry in entries:
            rel = prefix + entry.name
            try:
                is_dir = entry.is_dir()  # a link to a directory too: read_file judges it
            except OSError:
                is_dir = False
            if is_dir:
                if level < depth:
                    todo.append((Path(entry.path), rel + "/", level + 1))
            else:
                found.append(rel)
            if len(found) > limits.files:
                raise _refuse(str(root), f"holds over {limits.files:,} files: not a "
                                         "directory of route tables")
    return sorted(found)


# -- JSON -------------------------------------------------------------------------------------


class _TooLong(ValueError):
    pass


def _number(parse: Callable[[str], object], digits: int) -> Callable[[str], object]:
    def number(text: str) -> object:
        if len(text) > digits:
            raise _TooLong(text)
        return parse(text)
    return number


def _constant(name: str) -> object:
    raise _TooLong(name)


def load_json(text: str, file: str, object_pairs_hook: Callable | None = None,
              repeatable: tuple[str, ...] = (), limits: Limits | None = None) -> object:
    """json.loads(text) for a node's file: a key written twice in one object (other
    than those in `repeatable`), nesting deeper than limits.depth, a number longer
    than limits.digits, NaN or Infinity raise SpecError naming `file` (and the line
    where it can be told). Bad syntax raises json.JSONDecodeError, as json.loads."""
    limits = limits or Limits()
    twice: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> object:
        seen: set[str] = set()
        for k, _ in items:
            if k in seen and k not in repeatable and len(twice) < 10:
                twice.append(k)
            seen.add(k)
        return object_pairs_hook(items) if object_pairs_hook else dict(items)

    try:
        data = json.loads(text, object_pairs_hook=pairs,
                          parse_int=_number(int, limits.digits),
                          parse_float=_number(float, limits.digits), parse_constant=_constant)
    except _TooLong as e:
        word = str(e)
        if word in ("NaN", "Infinity", "-Infinity"):
            raise _refuse(file, f"{word} is not JSON", "numbers are digits") from None
        line = text.count("\n", 0, max(text.find(word), 0)) + 1
        raise _refuse(f"{file} line {line}", f"a number of {len(word):,} characters, over "
                                             f"{limits.digits}", "route tables' numbers "
                      "are lengths, metrics and table ids") from None
    except RecursionError:  # json's C reader stops near 1,000 levels: never a traceback
        raise _deep(file, limits) from None
    if _depth(data, limits.depth) > limits.depth:
        raise _deep(file, limits)
    if twice:
        raise SpecError(file, [Problem(file, f"key {token(k)} is written twice in one "
                                             "object; JSON keeps only the last",
                                       "merge the two into one entry") for k in twice], WHAT)
    return data


def _deep(file: str, limits: Limits) -> SpecError:
    return _refuse(file, f"nested deeper than {limits.depth} levels",
                   "a route table's JSON nests a few levels")


def _depth(data: object, limit: int) -> int:
    """How deep `data` nests, counted to limit + 1 (no recursion: no depth breaks it)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            if deepest > limit:
                break
            todo.extend((v, level + 1) for v in (value.values() if isinstance(value, dict)
                                                 else value))
    return deepest
