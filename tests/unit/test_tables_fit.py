"""The CLI's tables at 80 and 120 columns (issue 37): no line wider than the terminal, no
cell cut with an ellipsis, every name whole, the key numbers whole (exact or in units),
long text wrapped rather than gone. Fed the data shapes the endpoints and the lab
report (tests.unit.test_endpoint_stats's reply, the fake runtime's lab)."""

import io

from rich.console import Console

BIG = 4_294_967_295  # a u32 counter at its top: the widest number a cell shows


# -- the fitting (twin.cli.tables) ----------------------------------------------------------


def test_numbers_shorten_before_columns_go_and_columns_go_in_the_order_given():
    from twin.cli.tables import Col, count, fit

    cols = [Col("name"), Col("a", right=True), Col("b", right=True), Col("c", right=True)]
    rows = [["r15h31", count(BIG), count(BIG), count(BIG)]]

    def fitted(width):
        t, hidden = fit(Console(file=io.StringIO(), width=width), cols, rows,
                        drop=("b", "a"))
        return [c.header.plain for c in t.columns], list(t.columns[-1].cells), hidden

    assert fitted(100) == (["name", "a", "b", "c"], ["4,294,967,295"], [])
    assert fitted(40) == (["name", "a", "b", "c"], ["4.29 G"], [])
    assert fitted(30) == (["name", "a", "c"], ["4.29 G"], ["b"])
    assert fitted(20) == (["name", "c"], ["4.29 G"], ["b", "a"])
