"""Which tables a node's lookups consult (`ip -6 rule`), and those tables composed into one.

The kernel looks a destination up rule by rule, in priority order: a rule whose
selector holds the destination sends the lookup to its table, and a table with no
route for it hands the lookup on to the next rule. twin walks one table per node
(twin.routes.walk: the longest prefix wins), so the tables the rules consult are
composed into one, and where that one table would forward otherwise than the
rules do, the route is refused, naming what the kernel would do instead:

    no rule reaches it      no rule sends lookups for its prefix to its table
    wider than its rule     a rule `to S lookup T` holds part of its prefix only
    under an earlier one    a route of a table looked up before holds its prefix:
                            the kernel never reaches it (one table would let the
                            longer prefix win)

Without rules (no rules file given), a route outside table main is refused naming
its table: skipping it would lose it, and walking it would guess when the kernel
consults its table. The kernel's SRv6 selftests put their SIDs in such a table,
behind `ip -6 rule add to <locator> lookup <table>`.

Rules twin reads: `[from all] [to P] lookup T`, with a priority and a proto.
What selects on anything but the destination (a source, fwmark, iif, oif, not, tos,
dscp, ports, uid, ...) or acts otherwise (goto, nop, blackhole, unreachable,
prohibit, suppress_prefixlength, ...) is refused naming its key: a walk has the
destination only. Table local (255) holds the addressing plan's local routes and
is skipped, with or without rules (twin.routes.formats.iproute2).

Rules come as `ip -j -6 rule show` entries (`rule_of_json`: keys priority, src,
dst, dstlen, table, protocol, as iproute2 6.1 to 6.19 print them) or words
(`rule_of_words`: an `ip -6 rule show` line, `999: from all to fcbb::/16 lookup
90`, or what follows `rule add`, `to fcbb::/16 lookup 90 prio 999`).
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

MAIN_TABLE = "main"
NAMES = {"253": "default", "254": "main", "255": "local"}  # as /etc/iproute2/rt_tables
WALKED = "a walk has the destination only: twin reads `[from all] [to P] lookup T` rules"
JSON_KEYS = ("priority", "src", "srclen", "dst", "dstlen", "table", "protocol")


class Refused(Exception):
    """What twin cannot read or hold: the message and a hint, for a Problem. The whole
    iproute2 format raises it (twin.routes.formats.iproute2 imports this module, so it
    lives here: the other way round would be a cycle)."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message, self.hint = message, hint


@dataclass(frozen=True)
class Rule:
    """`priority: from all to <to> lookup <table>`, and where it was read."""

    priority: int
    to: str  # a network; ::/0 for all
    table: str  # as `table_name` gives it
    where: str

    def __str__(self) -> str:
        to = "" if self.to == "::/0" else f" to {self.to}"
        return f"{self.priority}: from all{to} lookup {self.table}"


def table_name(value: object) -> str:
    """A table as `ip` prints it: main, local, default by name, others by number."""
    return NAMES.get(str(value), str(value))


PLAIN = re.compile(r"[\w.:/,-]{1,40}")


def short(value: object, quoted: bool = False) -> str:
    """A value of an unknown file as a short token for a message: as it is when it is a
    plain word (an address, a name, a number) and not `quoted`, else its repr, cut."""
    if not quoted and isinstance(value, str | int) and PLAIN.fullmatch(str(value)):
        return str(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def rule_of_json(entry: object, where: str) -> Rule:
    if not isinstance(entry, dict):
        raise Refused("not a rule object", "the output of `ip -j -6 rule show`: [{...}, ...]")
    for k in entry:
        if k not in JSON_KEYS:
            raise Refused(f"rule key {short(k, quoted=True)}: not one twin reads", WALKED)
    if "table" not in entry:
        raise Refused("a rule without `table` (it does not look a table up)", WALKED)
    src = "all" if entry.get("src", "all") == "all" else f"{entry['src']}/" \
        f"{entry.get('srclen', 128)}"
    to = f"{entry['dst']}/{entry.get('dstlen', 128)}" if "dst" in entry else "::/0"
    return _rule(entry.get("priority"), src, to, entry["table"], where)


def rule_of_words(words: Sequence[str], where: str) -> Rule:
    """A rule from an `ip -6 rule show` line's words or those after `rule add`."""
    words, got = deque(words), {}
    if words and words[0].endswith(":"):
        got["priority"] = words.popleft()[:-1]
    keys = {"from": "src", "to": "to", "lookup": "table", "table": "table", "proto": "proto",
            "priority": "priority", "prio": "priority", "pref": "priority",
            "preference": "priority"}
    while words:
        w = words.popleft()
        if w not in keys:
            raise Refused(f"rule word {short(w, quoted=True)}: not one twin reads", WALKED)
        if not words:
            raise Refused(f"rule {w} without a value", "e.g. to fcbb:bb00::/32 lookup 90")
        got[keys[w]] = words.popleft()
    if "table" not in got:
        raise Refused("a rule without `lookup` (it does not look a table up)", WALKED)
    return _rule(got.get("priority"), got.get("src", "all"), got.get("to", "::/0"),
                 got["table"], where)


def _rule(priority: object, src: str, to: str, table: object, where: str) -> Rule:
    if src != "all":
        raise Refused(f"a rule from {short(src, quoted=True)} selects on the source", WALKED)
    if not str(priority).isdigit():
        raise Refused(f"rule priority {short(priority)} is not a number",
                      "as `ip -6 rule show` prints it (999:), or `prio 999` after rule add")
    try:
        net = ipaddress.IPv6Network("::/0" if to in ("all", "0/0") else to)
    except ValueError:
        raise Refused(f"rule to {short(to)} is not an IPv6 prefix",
                      "e.g. to fcbb:bb00::/32") from None
    return Rule(int(str(priority)), net.compressed, table_name(table), where)


@dataclass(frozen=True)
class Placed:
    """An item of some table, by its prefix: what composing looks at."""

    table: str
    prefix: str
    where: str


def compose(placed: Sequence[Placed], rules: Sequence[Rule] | None,
            no_rules_hint: str) -> tuple[list[int], list[tuple[str, str, str]]]:
    """The items (by index) one table holds to forward as the rules do, and a problem
    (where, message, hint) for each of the others."""
    if rules is None:
        outside = [i for i, p in enumerate(placed) if p.table != MAIN_TABLE]
        return [i for i, p in enumerate(placed) if p.table == MAIN_TABLE], [
            (placed[i].where, f"{placed[i].prefix} is in table {placed[i].table}, and no "
                              "rules say which lookups reach that table", no_rules_hint)
            for i in outside]
    ordered = sorted(rules, key=lambda r: r.priority)  # stable: the kernel's order on a tie
    rank: dict[int, int] = {}
    problems = []
    for i, p in enumerate(placed):
        net = ipaddress.IPv6Network(p.prefix)
        mine = [(n, r) for n, r in enumerate(ordered)
                if r.table == p.table and net.overlaps(ipaddress.IPv6Network(r.to))]
        part = [r for _, r in mine if not net.subnet_of(ipaddress.IPv6Network(r.to))]
        if not mine:
            problems.append((p.where, f"{p.prefix} is in table {p.table}, and no rule sends "
                                      f"lookups for it there", "add a rule "
                                      f"`to {p.prefix} lookup {p.table}`, or move the route"))
        elif part:
            problems.append((p.where, f"{p.prefix} in table {p.table} is wider than the rule "
                                      f"`{part[0]}` ({part[0].where}), which reaches part of "
                                      "it only", "twin composes tables whose routes lie "
                                      "within their rules' prefixes"))
        else:
            rank[i] = mine[0][0]
    held = _Held()
    kept = []
    for r in sorted(set(rank.values())):  # table by table, in the order lookups reach them
        group = [i for i in rank if rank[i] == r]
        for i in group:
            over = held.over(placed[i].prefix)
            if over is None:
                kept.append(i)
                continue
            p, (j, first) = placed[i], over
            q = placed[j]
            problems.append((p.where, f"{p.prefix} in table {p.table} is never reached: "
                                      f"{q.prefix} in table {q.table} ({q.where}) holds it, "
                                      f"and rule `{ordered[first]}` looks that table up first",
                             "remove one, or give the first rule a narrower `to`"))
        for i in group:
            held.add(placed[i].prefix, (i, r))
    return sorted(kept), problems


class _Held:
    """Prefixes of the tables looked up so far, by length: which one holds a prefix."""

    def __init__(self) -> None:
        self.by_len: dict[int, dict[int, tuple[int, int]]] = {}

    def add(self, prefix: str, what: tuple[int, int]) -> None:
        net = ipaddress.IPv6Network(prefix)
        bits = int(net.network_address) >> (128 - net.prefixlen)
        self.by_len.setdefault(net.prefixlen, {}).setdefault(bits, what)

    def over(self, prefix: str) -> tuple[int, int] | None:
        net = ipaddress.IPv6Network(prefix)
        addr = int(net.network_address)
        for length, held in sorted(self.by_len.items()):
            if length <= net.prefixlen and (addr >> (128 - length)) in held:
                return held[addr >> (128 - length)]
        return None
