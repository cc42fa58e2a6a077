"""Every metric name twin prints is one docs/metrics.md documents, and what it prints
is Prometheus text a scraper takes.

The printers, each fed recorded data (no lab):

    the endpoint        its `metrics` reply (counters.metrics over a loop's counters)
    twin stats          --prometheus, over recorded `stats` replies of two hosts
    the exporter        /metrics, over a recorded Sample (test_telemetry's)
    the dashboards      their queries (dashboards.panel_exprs)
    the CLI's texts     metric names written into twin/cli and twin/telemetry (help,
                        examples)

The doc is parsed, not twin.telemetry.names: a name the code prints and the doc
lacks fails here even when the two tables in the code agree.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from tests.helpers import send_qp_stats
from tests.unit.test_endpoint_stats import RECV, endpoint_wire
from tests.unit.test_telemetry import DOCS, exposition, sample
from twin.lab import compile_spec
from twin.mrc import counters
from twin.mrc import exposition as X
from twin.mrc.stats import EndpointStats
from twin.telemetry import dashboards
from twin.telemetry.collect import Sample
from twin.telemetry.names import EVERY

TWIN = Path(__file__).resolve().parents[2] / "twin"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def documented_names() -> set[str]:
    return set(re.findall(r"^\| `(\w+)` \| \w+ \|", DOCS.read_text(), re.M))


def printed_names(text: str) -> set[str]:
    """Every metric name a text exposition prints: in HELP, TYPE and sample lines."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(SAMPLE.match(line).group(1))
    return names


def busy_stats(host: str = "r0h0") -> EndpointStats:
    """A `stats` reply with every kind of QP: an mrc sending QP, a dcqcn one (its rate
    state), a receiving QP."""
    dcqcn = send_qp_stats(qpn=3, mode="single-path", cc="dcqcn", dcqcn={
        "rate_bps": 25_000_000_000, "target_bps": 50_000_000_000, "alpha": 0.25,
        "phase": "fast_recovery", "line_rate_bps": 100_000_000_000, "cnps_received": 4,
        "rate_cuts": 2, "min_rate_bps": 12_500_000_000, "increases": {}},
        ev_skips_by={"ecn": 1, "trim": 0, "rtt": 2}).to_dict()
    wire = endpoint_wire()
    wire["send_qps"].append(dcqcn)
    wire["recv_qps"].append({**RECV, "qpn": 4, "ce_marked": 5, "trimmed": 1, "nacks": 3,
                             "nacks_trimmed": 1})
    return EndpointStats.from_dict({**wire, "host": host})


def endpoint_reply() -> str:
    """The `metrics` reply of an endpoint, from its loop's own counters (no QPs open:
    the loop's QPs are what `stats` covers, busy_stats above)."""
    planes = range(4)
    loop = SimpleNamespace(host="r0h0", port_bitmap=0b1011, ports=dict.fromkeys(planes, "eth"),
                           send_qps={}, recv_qps={}, datapath="python", transport="python",
                           counters=counters.EndpointCounters(planes))
    loop.counters.drops["bad_icrc"] = 2
    loop.tx_bytes_per_plane = lambda: dict(loop.counters.tx_plane_bytes)
    loop.rx_bytes_per_plane = lambda: dict(loop.counters.rx_plane_bytes)
    return counters.metrics(loop)


def stats_prometheus(monkeypatch) -> str:
    """`twin stats --prometheus` over two hosts' recorded `stats` replies."""
    from twin import endpoints
    from twin.cli import traffic

    replies = {h: {"id": 1, **busy_stats(h).to_dict()} for h in ("r0h0", "r1h0")}

    class Client:
        def __init__(self, host):
            self.host = host

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def stats(self):
            return replies[self.host]

    att = SimpleNamespace(lab="mrc-4p", require_whole=lambda hosts: None, runtime=None,
                          fabric=SimpleNamespace(hosts=[SimpleNamespace(name=h)
                                                        for h in replies],
                                                 nic_planes=range(4)))
    monkeypatch.setattr(traffic.L, "attach", lambda lab: att)
    monkeypatch.setattr(endpoints, "client", lambda runtime, host: Client(host))
    got = CliRunner().invoke(traffic.main, ["stats", "--prometheus"])
    assert got.exit_code == 0, got.output
    return got.output


def exporter_text() -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    from tests.unit.test_telemetry import _Fixed
    from twin.telemetry.exporter import LabMetrics

    reg = CollectorRegistry(auto_describe=False)
    reg.register(LabMetrics(_Fixed(sample(1.0, 4096, 9000, faults=[("link-down", "a--b")],
                                          verify=2))))
    return generate_latest(reg).decode()


def names_in_source() -> set[str]:
    """Metric names written into the CLI's and telemetry's code (help texts, examples),
    except the name tables themselves."""
    skip = {TWIN / "telemetry" / "names.py"}
    found = set()
    for path in [*(TWIN / "cli").glob("*.py"), *(TWIN / "telemetry").glob("*.py")]:
        if path not in skip:
            found |= set(re.findall(r"\b(?:twin|mrc)_[a-z]+_\w*[a-z]\b", path.read_text()))
    return {n for n in found if n.startswith("twin_") or n.endswith(
        ("_total", "_seconds", "_bytes", "_packets", "_up", "_evs", "_alpha"))}


PRINTERS = {
    "endpoint": lambda mp: endpoint_reply(),
    "stats --prometheus": stats_prometheus,
    "exporter": lambda mp: exporter_text(),
}


@pytest.mark.parametrize("printer", PRINTERS)
def test_every_name_printed_is_documented(printer, monkeypatch):
    names = printed_names(PRINTERS[printer](monkeypatch))
    assert names, printer
    # a counter's name ends in _total wherever it is printed, as the doc writes it
    assert names - documented_names() == set(), printer


def test_every_name_in_a_query_or_a_help_text_is_documented():
    queries = set()
    fabric = compile_spec("mrc-4p").fabric
    for board in (dashboards.overview(fabric, "mrc-4p", "ds"),
                  dashboards.drill(fabric, "mrc-4p", "ds", 0, 90_000, "link-down-t1")):
        for expr in dashboards.panel_exprs(board):
            queries |= set(re.findall(r"\b(twin_\w+)\b", expr))
    assert queries and queries <= documented_names()
    # a prefix in prose ("twin_endpoint_*") is not a name
    written = {n for n in names_in_source() if not n.endswith("_")}
    assert written <= documented_names(), written - documented_names()


def test_the_endpoint_prints_the_exporters_series_exactly():
    """Same names, labels and values: the host series of `twin stats --prometheus` are
    what the exporter serves for that host's `stats` reply."""
    st = busy_stats()
    ep = X.EndpointSample.of(st, range(4))
    s = Sample("mrc-4p", 1.0, (ep,), (), (), None, 0.0)
    served = {(x.name, tuple(sorted(x.labels.items())), x.value)
              for samples in exposition(s).values() for x in samples
              if x.name.startswith("twin_endpoint_")}
    text = X.endpoint_text("mrc-4p", [st], range(4))
    printed = {(x.name, tuple(sorted(x.labels.items())), x.value)
               for f in _parse(text) for x in f.samples
               if not x.name.startswith("twin_endpoint_qp_")}
    assert printed == served
    assert {x[0] for x in printed} == {m.name for m in X.ENDPOINT}


@pytest.mark.parametrize("printer", PRINTERS)
def test_every_series_has_its_help_and_type_once_and_the_tables_labels(printer, monkeypatch):
    text = PRINTERS[printer](monkeypatch)
    strict(text)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, labels, _ = SAMPLE.match(line).groups()
        keys = tuple(re.findall(r'(\w+)="', labels or ""))
        want = EVERY[name].labels
        if printer == "endpoint":
            want = tuple(k for k in want if k != "lab")  # an endpoint knows no lab
        assert sorted(keys) == sorted(want), line


@pytest.mark.parametrize("printer", ["endpoint", "stats --prometheus"])
def test_the_endpoints_text_parses(printer, monkeypatch):
    text = PRINTERS[printer](monkeypatch)
    families = list(_parse(text))
    assert {f.name for f in families} == {m.name.removesuffix("_total")
                                          for m in (*X.ENDPOINT, *X.QP)}
    samples = [x for f in families for x in f.samples]
    if printer == "stats --prometheus":
        cuts = [x for x in samples if x.name == "twin_endpoint_qp_dcqcn_rate_cuts_total"]
        assert [(x.labels, x.value) for x in cuts] == [
            ({"lab": "mrc-4p", "host": h, "qp": "3"}, 2) for h in ("r0h0", "r1h0")]
    else:
        ports = {x.labels["plane"]: x.value for x in samples
                 if x.name == "twin_endpoint_port_up"}
        assert ports == {"0": 1, "1": 1, "2": 0, "3": 1}  # port_bitmap 0b1011
        assert [x.value for x in samples if x.name == "twin_endpoint_drops_total"
                and x.labels == {"host": "r0h0", "reason": "bad_icrc"}] == [2]


def test_the_strict_check_refuses_what_a_scraper_refuses():
    good = "# HELP a_total x\n# TYPE a_total counter\na_total{h=\"1\"} 2\n"
    strict(good)
    for bad in (good + good,  # two hosts' replies joined: HELP and TYPE twice
                "a_total 1\n",  # no HELP, TYPE
                "# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n",
                '# HELP a x\n# TYPE a gauge\na{h="1} 2\n'):
        with pytest.raises(AssertionError):
            strict(bad)


def strict(text: str) -> None:
    """The text format's rules a real Prometheus enforces and prometheus_client's parser
    does not: each family's HELP and TYPE once, before its samples, and its samples
    together."""
    assert text.endswith("\n")
    typed: dict[str, str] = {}
    helped: set[str] = set()
    done: set[str] = set()
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helped, f"second HELP for {name}"
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in typed, f"second TYPE for {name}"
            assert name in helped and kind in ("counter", "gauge"), line
            typed[name] = kind
            if current is not None:
                done.add(current)
            current = name
            continue
        m = SAMPLE.match(line)
        assert m and re.fullmatch(r'\{(\w+="(?:[^"\\\n]|\\.)*",?)*\}', m.group(2) or "{}"), line
        float(m.group(3).replace("Inf", "inf"))
        assert m.group(1) == current and current not in done, \
            f"{m.group(1)}: not under its own HELP and TYPE"


def _parse(text: str):
    parser = pytest.importorskip("prometheus_client.parser")
    return parser.text_string_to_metric_families(text)
