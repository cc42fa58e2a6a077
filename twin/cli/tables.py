"""Tables that fit the terminal (rich's Console width, which follows COLUMNS).

A table is its columns and its rows of cells, fitted to the width in this order:

1. every column, every number exact (4,294,967,295);
2. numbers short (`Num`'s second form: 4.29 G);
3. the columns named in `drop` left out, in that order, until the rest fits; a
   footnote names them (--json has all).

Names and numbers are never cut: a column is as wide as its widest cell. Only a
`wrap` column (long text: a description, a reason) gives way, onto more lines, never
narrower than its longest word (or its `least`). Headers wrap at spaces. Cells are rich markup, as
Table.add_row takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from rich.console import Console
from rich.table import Table
from rich.text import Text

from twin.units import show_count


class Num(NamedTuple):
    """A number's cell: exact where the table fits, else short."""
    exact: str
    short: str


def count(n: int) -> Num:
    return Num(f"{n:,}", show_count(n))


@dataclass(frozen=True)
class Col:
    header: str
    right: bool = False  # numbers
    wrap: bool = False  # long text: wraps onto lines
    least: int = 0  # a wrap column narrower than this reads badly: drop others first


Cell = str | Num


def fit(console: Console, cols: list[Col], rows: list[list[Cell]], *,
        drop: tuple[str, ...] = (), **table) -> tuple[Table, list[str]]:
    """The rich Table of `rows` for `console`'s width, and the headers of the columns it
    left out. `table`: Table's own keywords (title, box, show_edge, ...)."""
    width = console.width
    for short in (False, True):
        plain = [[_plain(c, short) for c in row] for row in rows]
        if _least(Table(**table), cols, plain) <= width:
            return _build(cols, rows, plain, short, width, table), []
    hidden: list[str] = []
    for header in drop:
        hidden.append(header)
        keep = [i for i, c in enumerate(cols) if c.header not in hidden]
        if _least(Table(**table), [cols[i] for i in keep],
                  [[row[i] for i in keep] for row in plain]) <= width:
            break
    keep = [i for i, c in enumerate(cols) if c.header not in hidden]
    return _build([cols[i] for i in keep], [[row[i] for i in keep] for row in rows],
                  [[row[i] for i in keep] for row in plain], True, width, table), hidden


def show(console: Console, cols: list[Col], rows: list[list[Cell]], *,
         drop: tuple[str, ...] = (), **table) -> None:
    """Print the fitted table, and a footnote naming the columns a narrow terminal hid."""
    t, hidden = fit(console, cols, rows, drop=drop, **table)
    console.print(t)
    if hidden:
        console.print(f"[dim](narrow terminal: {'column' if len(hidden) == 1 else 'columns'} "
                      f"{', '.join(hidden)} hidden; --json has all)[/dim]")


def _plain(cell: Cell, short: bool) -> str:
    if isinstance(cell, Num):
        return cell.short if short else cell.exact
    return Text.from_markup(cell).plain


def _word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def _least(t: Table, cols: list[Col], plain: list[list[str]]) -> int:
    """The narrowest the table can be: its frame, every cell whole, wrap columns and
    headers at their longest word."""
    return _frame(t, len(cols)) + sum(_need(c, i, plain)[0] for i, c in enumerate(cols))


def _need(col: Col, i: int, plain: list[list[str]]) -> tuple[int, int]:
    """A column's (narrowest, widest) without its padding."""
    cells = [row[i] for row in plain]
    widest = max([len(col.header), *map(len, cells)])
    if col.wrap:
        return max([col.least, _word(col.header), *map(_word, cells)]), widest
    return max([_word(col.header), *map(len, cells)]), widest


def _frame(t: Table, n: int) -> int:
    """Columns of the table's frame: its edges and separators, and the cells' padding
    (as rich's Table counts them)."""
    left, right = t.padding[3], t.padding[1]
    pad = n * (left + right) - (0 if t.pad_edge else left + right)
    return pad + ((2 if t.show_edge else 0) + n - 1 if t.box else 0)


def _build(cols: list[Col], rows: list[list[Cell]], plain: list[list[str]], short: bool,
           width: int, table: dict) -> Table:
    """The Table with every column's width set: each at its narrowest, then what is left
    to the wrap columns' text and then to the headers, the widest want first."""
    t = Table(**table)
    needs = [_need(c, i, plain) for i, c in enumerate(cols)]
    widths = [lo for lo, _ in needs]
    room = width - _frame(t, len(cols)) - sum(widths)
    for group in ([i for i, c in enumerate(cols) if c.wrap],
                  [i for i, c in enumerate(cols) if not c.wrap]):
        while room > 0 and group:
            i = max(group, key=lambda i: needs[i][1] - widths[i])
            if needs[i][1] <= widths[i]:
                break
            widths[i] += 1
            room -= 1
    for c, w in zip(cols, widths, strict=True):
        t.add_column(Text(c.header, no_wrap=False), justify="right" if c.right else "left",
                     width=w, no_wrap=not c.wrap, overflow="fold")
    for row in rows:
        t.add_row(*(_plain(c, short) if isinstance(c, Num) else c for c in row))
    return t
