"""The CLI's tables at 80 and 120 columns (issue 37): no line wider than the terminal, no
cell cut with an ellipsis, every name whole, the key numbers whole (exact or in units),
long text wrapped rather than gone. Fed the data shapes the endpoints and the lab
report (tests.unit.test_endpoint_stats's reply, the fake runtime's lab)."""

import io
import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from rich.console import Console

from tests.unit.test_endpoint_stats import endpoint_wire
from twin.cli import main
from twin.cli import traffic as cli_traffic
from twin.mrc import stats as S
from twin.units import show_bytes, show_count, show_rate

WIDTHS = (80, 120)
BIG = 4_294_967_295  # a u32 counter at its top: the widest number a cell shows


def screen(monkeypatch, module: str, width: int) -> io.StringIO:
    """The module's `out` console, `width` columns wide, writing into the returned text."""
    text = io.StringIO()
    monkeypatch.setattr(f"twin.cli.{module}.out", Console(file=text, width=width,
                                                          highlight=False, emoji=False))
    return text


def readable(text: str, width: int) -> None:
    lines = text.splitlines()
    assert lines, "nothing printed"
    too_wide = [line for line in lines if len(line) > width]
    assert not too_wide, f"wider than {width}:\n" + "\n".join(too_wide)
    assert "…" not in text and "..." not in text, f"a cell is cut:\n{text}"


def whole(number: int, text: str, *forms) -> None:
    """`number` printed exactly, or in one of its unit `forms`."""
    shown = [f"{number:,}", *(form(number) for form in forms)]
    assert any(s in text for s in shown), f"none of {shown} in:\n{text}"


def words_of(text: str) -> set[str]:
    return set(text.replace("│", " ").replace("┃", " ").split())


# -- twin drill list ------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_drill_list(monkeypatch, width):
    text = screen(monkeypatch, "drill", width)
    assert CliRunner().invoke(main, ["drill", "list"]).exit_code == 0
    shown = text.getvalue()
    readable(shown, width)
    drills = json.loads(CliRunner().invoke(main, ["drill", "list", "--json"]).output)["drills"]
    seen = words_of(shown)
    for d in drills:
        assert d["name"] in seen, d["name"]
        missing = set(d["description"].split()) - seen  # wrapped onto lines, not cut
        assert not missing, (d["name"], missing)


# -- twin stats, --drops ----------------------------------------------------------------


def busy_endpoint(host: str) -> S.EndpointStats:
    wire = endpoint_wire()
    wire["host"] = host
    wire["totals"].update(bytes_sent=67_108_864 * 1000 + 12_345, bytes_placed=BIG,
                          retransmits=BIG)
    wire["totals"]["signals"] = {"ce_marked_rx": 123_456, "ecn_marks_tx": 7,
                                 "trimmed_rx": 42, "nacks_trimmed_received": 40,
                                 "ev_skips_ecn": 3}
    wire["bad_packets"] = 1_234_567
    wire["drops"] = {**wire["drops"], "bad_icrc": BIG}
    return S.EndpointStats.from_dict(wire)


HOSTS = ("r0h0", "r1h1", "r15h31")


@pytest.mark.parametrize("width", WIDTHS)
def test_stats(monkeypatch, width):
    text = screen(monkeypatch, "traffic", width)
    cli_traffic._stats_table("mrc-4p", {h: busy_endpoint(h) for h in HOSTS})
    shown = text.getvalue()
    readable(shown, width)
    assert all(h in words_of(shown) for h in HOSTS)
    whole(67_108_864 * 1000 + 12_345, shown, show_bytes)  # bytes sent
    whole(BIG, shown, show_bytes)  # bytes placed
    whole(BIG, shown, show_count)  # retransmits


@pytest.mark.parametrize("width", WIDTHS)
def test_stats_drops(monkeypatch, width):
    text = screen(monkeypatch, "traffic", width)
    quiet = S.EndpointStats.from_dict({**endpoint_wire(), "drops": {}})
    cli_traffic._drops_table("mrc-4p", {"r0h0": busy_endpoint("r0h0"), "r15h31": quiet})
    shown = text.getvalue()
    readable(shown, width)
    seen = words_of(shown)
    assert {"r0h0", "r15h31", "sack_bits_unsent", "bad_icrc"} <= seen
    whole(BIG, shown, show_count)
    assert set(S.EndpointDrops.MEANING["sack_bits_unsent"].split()) <= seen


# -- twin stats --dataplane ---------------------------------------------------------------


class Plan(dict):
    @property
    def nodes(self):
        return list(self)


def dataplane_att():
    """What _dataplane_stats reads of a lab: an ebpf data plane with counters on every
    node, and the fabric signals (queues at switch ports, RFC 6040 at host ports)."""
    from twin.node.ebpf import COUNTERS

    nodes = {"t0-p3-r15": "t0", "t1-p3-15": "t1", "r15h31": "host"}
    counters = {n: {"counters": {c: BIG - i for i, c in enumerate(COUNTERS)},
                    "programs": {"eth1": {"prog_id": 41}, "eth2": {"prog_id": 42}}}
                for n in nodes}
    queue = {"rate_bps": 2_400_000_000, "queue_bytes_now": 1_500_000,
             "high_water_bytes": 67_108_864, "packets": BIG, "ce_marked": 123_456_789,
             "trimmed": 3, "dropped": 1}
    decap = {"rate_bps": 0, "ce_to_inner": BIG, "trim_to_inner": 3, "drop_ce_not_ect": 0}
    signals = {n: {"ports": {"eth12": decap if tier == "host" else queue}}
               for n, tier in nodes.items()}
    backend = SimpleNamespace(name="ebpf", keeps_counters=True,
                              counters=lambda rt, n: counters[n],
                              signals=lambda rt, n: signals[n])
    plan = Plan({n: SimpleNamespace(tier=t, queues=True, signals=True) for n, t in nodes.items()})
    return SimpleNamespace(lab="mrc-8p-256", plan=plan, dataplane=backend, runtime=None,
                           require_whole=lambda nodes: None, node=lambda n: None), nodes


@pytest.mark.parametrize("width", WIDTHS)
def test_stats_dataplane(monkeypatch, width):
    text = screen(monkeypatch, "traffic", width)
    att, nodes = dataplane_att()
    cli_traffic._dataplane_stats(att, None, as_json=False)
    shown = text.getvalue()
    readable(shown, width)
    seen = words_of(shown)
    for n in nodes:
        assert n in seen or f"{n}:eth12" in seen, n
    whole(BIG, shown, show_count)  # packets shifted, queue packets, CE copied inward
    whole(67_108_864, shown, show_bytes)  # a queue's high water
    assert show_rate(2_400_000_000) in shown


# -- twin traffic -------------------------------------------------------------------------


def flow_rows():
    """Run.flow_rows of a permutation: twin.traffic.merge_rows of Flow.to_dict rows."""
    from twin.traffic import Flow, merge_rows

    pairs = [("r0h0", "r15h31"), ("r15h31", "r7h12"), ("r7h12", "r0h0")]
    rows = []
    for i, (src, dst) in enumerate(pairs):
        row = Flow(src, dst, BIG).to_dict()
        row.update(exact=i != 1, failed="timed out: 12 of 16 MiB acked" if i == 1 else None,
                   goodput_gbps=2.4567, retransmits=BIG, ev_retirements_total=123_456,
                   planes_in_use=[0, 1, 2, 3, 4, 5, 6, 7])
        rows.append(merge_rows([row]))
    return pairs, rows


@pytest.mark.parametrize("width", WIDTHS)
def test_traffic_result(monkeypatch, width):
    text = screen(monkeypatch, "traffic", width)
    pairs, rows = flow_rows()
    cli_traffic._flows_table("permutation, mode mrc, cc nscc, 4 QPs per flow, 12.34s", rows)
    shown = text.getvalue()
    readable(shown, width)
    seen = words_of(shown)
    assert {h for pair in pairs for h in pair} <= seen
    whole(BIG, shown, show_bytes)  # the bytes of each flow
    assert show_rate(2.4567e9) in shown
    assert {"timed", "out:", "acked"} <= seen  # why a flow failed, wrapped, not cut


# -- twin status ----------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_status(monkeypatch, att, width):
    from twin import lab as L

    real = L.status
    image = "ghcr.io/mrc-twin/node:2024.06-5f3c2e1"

    def status(lab=None):  # the fake runtime's lab, as a container runtime describes one
        labs = real(lab)
        for n in labs[0]["nodes"]:
            n["image"] = image
            if "h" in n["node"] and not n["node"].startswith("t"):
                n["endpoint"] = {"state": "up", "pid": 4242, "datapath": "compiled",
                                 "icrc": "crc32c-pclmul", "transport": "compiled"}
        return labs

    monkeypatch.setattr(L, "status", status)
    text = screen(monkeypatch, "status", width)
    res = CliRunner().invoke(main, ["status"])
    assert res.exit_code == 0, res.output
    shown = text.getvalue()
    readable(shown, width)
    seen = words_of(shown)
    assert set(att.plan.nodes) <= seen
    assert {"(compiled,", "crc32c-pclmul,"} <= seen  # the endpoint cell, wrapped if need be


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
