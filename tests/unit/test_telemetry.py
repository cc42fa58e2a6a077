"""Telemetry without root: a Sample as exposition text, the Prometheus configuration,
`twin top`'s rates, the documented names, and the refusals."""

import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from twin.errors import UsageError
from twin.telemetry import prometheus as P
from twin.telemetry.collect import (
    DataplaneSample,
    EndpointSample,
    FaultSample,
    LinkSample,
    PortSample,
    Sample,
)
from twin.telemetry.exporter import LabMetrics, check_address, families
from twin.telemetry.names import EVERY, METRICS
from twin.telemetry.top import rates, render

DOCS = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def sample(t: float, tx: int, link_tx: int, retx: int = 0, up: bool = True,
           faults=(), verify=None) -> Sample:
    ep = EndpointSample("r0h0", True, {0: tx, 1: 2 * tx}, {0: tx, 1: 2 * tx}, retx,
                        {"good": 120, "skip": 0, "assumed_bad": 8, "denied": 0}, 0.0005, 1,
                        {"ce_marked_rx": 5, "ecn_marks_tx": 3, "ev_skips_ecn": 2,
                         "trimmed_rx": 4, "nacks_trimmed_received": 1, "nacks_seq_sent": 6},
                        {"bad_icrc": 2, "sack_bits_unsent": 9, "trim_stale": 0},
                        ev_retirements=7, ports_up={0: True, 1: False})
    return Sample(
        "mrc-4p", t, (ep, EndpointSample("r1h0", up=False)),
        (LinkSample("t0-p0-r0", "eth3", "t1-p0-0:eth1", 0, "fabric", link_tx, 10, 1, 2, up),
         LinkSample("r0h0", "eth1", "t0-p0-r0:eth1", 0, "host", 5, 5, 0, 0, True)),
        tuple(FaultSample(k, t) for k, t in faults), verify, 0.004,
        (DataplaneSample("t1-p0-0", {"shifted": 7 * tx, "drop_end_of_carrier": 1}),),
        (PortSample("t0-p0-r0", "eth3", "t1-p0-0:eth1", 0, "fabric",
                    {"rate_bps": 50_000_000, "queue_bytes_now": 1500, "high_water_bytes": 91000,
                     "packets": 100, "ce_marked": 12, "trimmed": 3, "dropped": 1}),
         PortSample("r0h0", "eth1", "t0-p0-r0:eth1", 0, "host",
                    {"rate_bps": 0, "ce_to_inner": 12, "trim_to_inner": 3})),
        (("congested", "r0h0:eth1--t0-p0-r0:eth1"), ("faulty", "t1-p0-0")))


class _Fixed:
    def __init__(self, s):
        self.s = s

    def sample(self):
        return self.s


def exposition(s: Sample) -> dict[str, list]:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(LabMetrics(_Fixed(s)))
    text = generate_latest(reg).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_a_sample_is_exposed_under_the_documented_names_and_labels():
    got = exposition(sample(1.0, 4096, 9000, faults=[("link-down", "a--b")], verify=2))
    tx = {s.labels["plane"]: s.value for s in got["twin_endpoint_tx_bytes"]
          if s.name.endswith("_total")}
    assert tx == {"0": 4096, "1": 8192}  # the endpoint that did not answer has no bytes
    assert {s.labels["host"]: s.value for s in got["twin_endpoint_up"]} == \
        {"r0h0": 1, "r1h0": 0}
    evs = {s.labels["state"]: s.value for s in got["twin_endpoint_evs"]}
    assert evs == {"good": 120, "skip": 0, "assumed_bad": 8, "denied": 0}
    link = next(s for s in got["twin_link_tx_bytes"] if s.labels["node"] == "t0-p0-r0")
    assert link.labels == {"lab": "mrc-4p", "node": "t0-p0-r0", "ifname": "eth3",
                           "peer": "t1-p0-0:eth1", "plane": "0", "tier": "fabric"}
    drops = {s.labels["direction"]: s.value for s in got["twin_link_drops"]
             if s.labels["node"] == "t0-p0-r0" and s.name.endswith("_total")}
    assert drops == {"tx": 1, "rx": 2}
    assert [(s.labels["kind"], s.labels["target"], s.value)
            for s in got["twin_fault_active"]] == [("link-down", "a--b", 1)]
    assert got["twin_verify_paths_failed"][0].value == 2
    assert {(s.labels["node"], s.labels["counter"]): s.value for s in got["twin_dataplane_packets"]
            if s.name.endswith("_total")} == {("t1-p0-0", "shifted"): 7 * 4096,
                                              ("t1-p0-0", "drop_end_of_carrier"): 1}
    marks = {s.labels["side"]: s.value for s in got["twin_endpoint_ecn_marks"]
             if s.name.endswith("_total")}
    assert marks == {"rx": 5, "tx": 3}
    skips = {s.labels["reason"]: s.value for s in got["twin_endpoint_ev_skips"]
             if s.name.endswith("_total")}
    assert skips == {"ecn": 2, "trim": 0, "rtt": 0}
    nacks = {(s.labels["side"], s.labels["reason"]): s.value for s in got["twin_endpoint_nacks"]
             if s.name.endswith("_total")}
    assert nacks == {("rx", "seq"): 6, ("rx", "trimmed"): 0, ("tx", "seq"): 0,
                     ("tx", "trimmed"): 1}
    assert {s.labels["side"]: s.value for s in got["twin_endpoint_trims"]
            if s.name.endswith("_total")} == {"rx": 4, "tx": 1}
    assert {(s.labels["host"], s.labels["reason"]): s.value for s in got["twin_endpoint_drops"]
            if s.name.endswith("_total")} == {("r0h0", "bad_icrc"): 2,
                                              ("r0h0", "sack_bits_unsent"): 9,
                                              ("r0h0", "trim_stale"): 0}
    assert [s.value for s in got["twin_endpoint_ev_retirements"]
            if s.name.endswith("_total")] == [7]
    assert {s.labels["plane"]: s.value for s in got["twin_endpoint_port_up"]} == \
        {"0": 1, "1": 0}
    queue = {s.labels["node"]: s.value for s in got["twin_port_queue_bytes"]}
    assert queue == {"t0-p0-r0": 1500}  # a host port has no queue
    assert [s.value for s in got["twin_port_queue_high_water_bytes"]] == [91000]
    signals = {(s.labels["node"], s.labels["signal"]): s.value
               for s in got["twin_port_signals"] if s.name.endswith("_total") and s.value}
    assert signals == {("t0-p0-r0", "packets"): 100, ("t0-p0-r0", "ce_marked"): 12,
                       ("t0-p0-r0", "trimmed"): 3, ("t0-p0-r0", "dropped"): 1,
                       ("r0h0", "ce_to_inner"): 12, ("r0h0", "trim_to_inner"): 3}
    assert sorted((s.labels["verdict"], s.labels["target"], s.value)
                  for s in got["twin_probe_named"]) == [
        ("congested", "r0h0:eth1--t0-p0-r0:eth1", 1), ("faulty", "t1-p0-0", 1)]
    every_name = {s.name for samples in got.values() for s in samples}
    assert every_name >= set(METRICS)


def test_no_verify_yet_means_no_series_not_zero():
    names = {f.name for f in families(sample(1.0, 1, 1))
             if f.samples}
    assert "twin_verify_paths_failed" not in names


def documented() -> dict[str, tuple[str, str]]:
    """docs/metrics.md's tables: metric name -> (type, labels as written)."""
    rows = re.findall(r"^\| `(twin_\w+)` \| (\w+) \| ([^|]*) \|", DOCS.read_text(), re.M)
    return {name: (kind, labels.strip()) for name, kind, labels in rows}


def test_every_metric_is_documented_with_its_labels_and_only_those():
    rows = documented()
    assert {n: kind for n, (kind, _) in rows.items()} == \
        {m.name: m.kind for m in EVERY.values()}
    for m in EVERY.values():
        labels = rows[m.name][1]
        if not labels.startswith("same"):  # "same": the row above's, written once
            assert tuple(labels.split(", ")) == m.labels, m.name


def test_prometheus_config_scrapes_the_exporter_every_second():
    cfg = yaml.safe_load(P.config("mrc-4p", "127.0.0.1:9477"))
    assert cfg["global"]["scrape_interval"] == "1s"
    job = cfg["scrape_configs"][0]
    assert job["static_configs"] == [{"targets": ["127.0.0.1:9477"]}]
    assert job["honor_labels"] is True
    argv = P.argv("/usr/bin/prometheus", Path("/r/p.yml"), Path("/r/data"), "127.0.0.1:9478")
    assert "--web.listen-address=127.0.0.1:9478" in argv
    assert "--storage.tsdb.path=/r/data" in argv


@pytest.mark.parametrize("address", ["0.0.0.0", "10.0.0.1", "::", "example.org"])
def test_only_loopback_is_served(address):
    with pytest.raises(UsageError, match="loopback"):
        check_address(address)


def test_loopback_is_fine():
    assert check_address("127.0.0.1") == "127.0.0.1" and check_address("::1") == "::1"


def test_top_rates_per_plane_links_and_resets():
    before, after = sample(10.0, 1000, 0, retx=1), sample(11.0, 126_000, 1_000_000, retx=5)
    view = rates(before, after)
    assert view.plane_bps == {0: 125_000 * 8, 1: 250_000 * 8}
    assert view.links[0].end == "t0-p0-r0:eth3" and view.links[0].bps == 8_000_000
    assert view.retransmits_per_s == 4 and view.endpoints_down == ("r1h0",)
    # a counter that went backwards (an endpoint restarted) is 0, never negative
    assert rates(after, sample(12.0, 10, 0)).plane_bps == {0: 0.0, 1: 0.0}


def test_top_divides_each_counter_by_the_time_between_its_own_reads():
    """A Collector's first sample spends seconds finding the nodes' maps: its counters
    were read well before the sample ended. Over the samples' ends (1 s here) the
    rates read 2.6x too high; over each counter's own reads (2.6 s) they are true."""
    from dataclasses import replace

    def at(s: Sample, t: float) -> Sample:
        return replace(s, endpoints=tuple(replace(e, t=t) for e in s.endpoints),
                       links=tuple(replace(lk, t=t) for lk in s.links))

    before = at(sample(10.0, 0, 0, retx=0), 100.0)  # read at 100.0, the sample done at 101.6
    after = at(sample(11.0, 260_000, 2_600_000, retx=26), 102.6)  # read at 102.6, done 102.6
    view = rates(before, after)
    assert view.plane_bps == pytest.approx({0: 800_000, 1: 1_600_000})  # 260 kB * 8 / 2.6 s
    assert view.links[0].bps == pytest.approx(8_000_000)
    assert view.retransmits_per_s == pytest.approx(10)
    # a sample without read times (an older caller) falls back to the samples' times
    assert rates(sample(10.0, 0, 0), sample(12.0, 1000, 0)).plane_bps == {0: 4000.0,
                                                                         1: 8000.0}


def test_top_on_a_pipe_writes_one_plain_line_a_period():
    from twin.telemetry.top import line

    view = rates(sample(1.0, 0, 0), sample(2.0, 125_000_000, 10, up=False,
                                            faults=[("link-down", "t0-p0-r0:eth3--x")]))
    got = line(view)
    assert "\n" not in got and "\x1b" not in got  # one line, no escape codes
    assert "goodput 3.00 Gbit/s  (p0 1.00 p1 2.00 Gbit/s)" in got
    assert "links down: t0-p0-r0:eth3" in got and "endpoints not answering: r1h0" in got
    assert got.endswith("faults: link-down t0-p0-r0:eth3--x")
    assert line(rates(sample(1.0, 0, 0), sample(2.0, 0, 0))).endswith("faults: none")


def test_top_shows_a_links_queue_and_its_signals_per_second():
    from dataclasses import replace

    from rich.console import Console

    before = sample(10.0, 1000, 0)
    port = before.ports[0]
    busier = replace(port, values={**port.values, "queue_bytes_now": 42_000, "ce_marked": 52,
                                   "trimmed": 13, "dropped": 1})
    after = replace(sample(12.0, 1000, 1_000_000), ports=(busier, *before.ports[1:]))
    view = rates(before, after)
    link = next(lk for lk in view.links if lk.end == "t0-p0-r0:eth3")
    assert link.queue_bytes == 42_000 and link.signals_per_s == (20.0, 5.0, 0.0)
    host = next(lk for lk in view.links if lk.end == "r0h0:eth1")
    assert host.queue_bytes is None  # a host port has no queue
    con = Console(record=True, width=140)
    con.print(render(view))
    row = next(line for line in con.export_text().splitlines() if "t0-p0-r0:eth3" in line)
    assert "42,000 B" in row and row.split()[-3:] == ["20", "5", "0"]


def test_top_renders_a_down_link_and_the_faults():
    from rich.console import Console

    view = rates(sample(1.0, 0, 0), sample(2.0, 10, 10, up=False,
                                            faults=[("link-down", "t0-p0-r0:eth3--x")]))
    con = Console(record=True, width=120)
    con.print(render(view))
    text = con.export_text()
    assert "links down: t0-p0-r0:eth3" in text
    assert "faults in force: link-down t0-p0-r0:eth3--x" in text
    assert "r1h0" in text and "endpoint not answering" in text


def test_a_netlink_link_message_gives_its_name_state_and_counters():
    import struct

    from twin.telemetry import linkstats as LS

    def attr(kind: int, data: bytes) -> bytes:
        raw = struct.pack("=HH", 4 + len(data), kind) + data
        return raw + b"\0" * (-len(raw) % 4)

    stats = struct.pack("=8Q", 10, 20, 1000, 2000, 0, 0, 3, 4) + b"\0" * 8 * 16
    body = (struct.pack("=BxHiII", 0, 1, 7, 0, 0) + attr(LS.IFLA_IFNAME, b"eth3\0")
            + attr(99, b"\x01\x02\x03") + attr(LS.IFLA_OPERSTATE, bytes([LS.IF_OPER_UP]))
            + attr(LS.IFLA_STATS64, stats))
    name, c = LS.parse_link(body, 0, len(body))
    assert name == "eth3"
    assert c == LS.Counters(rx_bytes=1000, tx_bytes=2000, rx_dropped=3, tx_dropped=4,
                            oper_up=True)
    down = body.replace(attr(LS.IFLA_OPERSTATE, bytes([LS.IF_OPER_UP])),
                        attr(LS.IFLA_OPERSTATE, bytes([2])))
    assert LS.parse_link(down, 0, len(down))[1].oper_up is False
