"""Several QPs per flow (twin.traffic.split_qps, `twin traffic --qps`, a drill's `qps:`)
and the congestion control a run asks its endpoints for (`--cc`, a drill's `cc:`)."""

from __future__ import annotations

import hashlib

import pytest

from tests.helpers import send_qp_stats
from tests.unit.test_drill import problems
from twin import traffic as T
from twin.chaos import drill as D
from twin.errors import UsageError
from twin.mrc.control import EndpointClient


def test_a_flow_is_split_over_its_qps_and_the_bytes_add_up():
    flows = T.split_qps([T.Flow("a", "b", 10), T.Flow("b", "c", 8)], 4)
    assert [f.size for f in flows] == [3, 3, 2, 2, 2, 2, 2, 2]
    assert [f.group for f in flows] == [0] * 4 + [1] * 4
    assert all((f.src, f.dst) == ("a", "b") for f in flows[:4])
    one = T.split_qps([T.Flow("a", "b", 10)], 1)
    assert [(f.size, f.group) for f in one] == [(10, 0)]


@pytest.mark.parametrize("qps", [0, 65, True, "4"])
def test_qps_outside_1_to_64_is_refused_saying_so(qps):
    with pytest.raises(UsageError, match="^qps: must be an integer 1 to 64 "):
        T.split_qps([T.Flow("a", "b", 1 << 20)], qps)


def test_a_flow_smaller_than_its_qps_is_refused():
    with pytest.raises(UsageError, match="cannot be split over 8 QPs"):
        T.split_qps([T.Flow("a", "b", 5)], 8)


class World:
    """What every fake endpoint shares: QPs by (host, qpn), writes, polls."""

    def __init__(self, polls_to_finish: dict[int, int]):
        self.qps: dict[tuple[str, int], dict] = {}
        self.asked: list[tuple[str, str, dict]] = []
        self.polls = 0
        self.polls_to_finish = polls_to_finish  # send QP number -> stats polls until idle


class FakeEndpoint(EndpointClient):
    """An endpoint that takes every op and moves bytes at once; a sending QP is idle after
    `polls_to_finish` stats polls, so QPs of one flow finish at different times."""

    def __init__(self, world: World, host: str):
        self.world, self.host, self.next_qpn = world, host, 1
        self.path = host

    def call_raw(self, op: str, timeout=None, **a) -> dict:
        w = self.world
        w.asked.append((self.host, op, a))
        if op in ("recv_qp", "send_qp"):
            qpn, self.next_qpn = self.next_qpn, self.next_qpn + 1
            w.qps[self.host, qpn] = {"op": op, **a, "written": 0}
            return {"qpn": qpn, "rkey": 7} if op == "recv_qp" else {"qpn": qpn, "planes": [0]}
        if op == "connect":
            return {"qpn": a["qpn"]}
        if op == "write":
            w.qps[self.host, a["qpn"]]["written"] += a["size"]
            return {"msn": 0}
        if op == "stats":
            w.polls += 1
            qps = []
            for (h, qpn), q in w.qps.items():
                if h != self.host or q["op"] != "send_qp":
                    continue
                done = w.polls >= w.polls_to_finish.get(qpn, 1)
                acked = -(-q["written"] // 4096) if done else 0
                qps.append(send_qp_stats(qpn=qpn, peer=q["peer"], mode=q["mode"], idle=done,
                                         goodput_gbps=0.01 * qpn, elapsed_s=0.1 * qpn,
                                         sender={"acked": acked}).to_dict())
            return {"host": self.host, "ports": 1, "bad_packets": 0, "unknown_qp": 0,
                    "totals": {"bytes_sent": 0, "bytes_placed": 0, "retransmits": 0,
                               "ev_retirements": 0, "tx_bytes_per_plane": {},
                               "rx_bytes_per_plane": {}},
                    "send_qps": qps, "recv_qps": [], "drops": {
                        k: 0 for k in ("truncated", "malformed", "bad_icrc", "unknown_qp",
                                       "bad_rkey", "out_of_bounds", "psn_window",
                                       "duplicate", "ack_unsent")},
                    "datapath": "fake", "transport": "fake"}
        if op == "digest":
            size = w.qps[self.host, a["qpn"]]["size"]
            return {"sha256": hashlib.sha256(str(size).encode()).hexdigest()}
        if op == "events":
            return {"events": [], "dropped": 0, "total": 0, "kinds": {}, "acked_bins": None}
        if op == "close":
            return {"closed": True}
        raise AssertionError(op)

    def close(self) -> None:
        pass


@pytest.fixture
def fake_endpoints(monkeypatch):
    world = World({1: 1, 2: 3, 3: 2, 4: 5})  # the 4 QPs of one flow finish at poll 1..5

    def client(rt, host):
        return FakeEndpoint(world, host)

    monkeypatch.setattr(T.endpoints, "client", client)
    return world


def test_a_flow_over_four_qps_completes_when_all_do_and_its_goodput_is_their_sum(
        fake_endpoints):
    w = fake_endpoints
    size = (64 << 20) + 3
    flows = T.split_qps([T.Flow("r0h0", "r1h0", size)], 4)
    run = T.run(None, "bulk", flows, "single-path", sample_s=0)
    assert w.polls >= 5  # the slowest QP's
    sends = [a for _, op, a in w.asked if op == "send_qp"]
    assert len(sends) == 4 and all(a["cc"] == "dcqcn" and a["mode"] == "single-path"
                                   for a in sends)
    assert sorted(a["size"] for a in sends) == [size // 4] + [size // 4 + 1] * 3
    writes = [a["size"] for _, op, a in w.asked if op == "write"]
    assert sum(writes) == size
    d = run.to_dict()
    assert d["cc"] == "dcqcn" and d["qps"] == 4 and d["ok"]
    (row,) = d["flows"]
    assert row["bytes"] == size and row["qps"] == 4 and row["exact"]
    assert row["goodput_gbps"] == pytest.approx(0.01 * (1 + 2 + 3 + 4))
    assert row["elapsed_s"] == pytest.approx(0.4)  # the slowest QP
    assert len(d["qp_rows"]) == 4 and len(row["single_path"]) == 4


def test_a_named_cc_goes_to_every_qp_and_a_bad_one_is_refused(fake_endpoints):
    flows = T.split_qps([T.Flow("r0h0", "r1h0", 1 << 20)], 2)
    run = T.run(None, "bulk", flows, "mrc", cc="dcqcn", sample_s=0)
    assert {a["cc"] for _, op, a in fake_endpoints.asked if op == "send_qp"} == {"dcqcn"}
    assert run.cc == "dcqcn"
    with pytest.raises(UsageError, match="unknown congestion control 'bbr'"):
        T.run(None, "bulk", flows, "mrc", cc="bbr")
    mrc = T.run(None, "bulk", T.split_qps([T.Flow("r0h0", "r1h0", 1 << 20)], 1), "mrc",
                sample_s=0)
    assert mrc.cc == "nscc" and mrc.to_dict()["flows"][0].get("qps") is None  # unchanged


def test_a_drill_takes_qps_and_cc_and_names_a_bad_one_by_its_key_path():
    d = D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: a, dst: b, "
                      "mode: single-path, qps: 8, cc: dcqcn}}")
    assert d.traffic.qps == 8 and d.traffic.cc == "dcqcn"
    assert D.parse_drill("name: d\nmethod: {traffic: {pattern: incast}}").traffic.cc is None
    found = problems("name: d\nmethod: {traffic: {pattern: incast, qps: 65, cc: bbr}}")
    assert "must be an integer 1 to 64 (got 65)" in found["method.traffic.qps"]
    assert "unknown congestion control 'bbr'" in found["method.traffic.cc"]


def test_a_drills_qps_split_its_flows_bytes():
    from twin.chaos import runner as R
    from twin.fabric.model import build_fabric
    from twin.fabric.spec import load_spec

    fabric = build_fabric(load_spec("lab/fabrics/mrc-4p.yml"))
    d = D.parse_drill("name: d\nmethod: {traffic: {pattern: bulk, src: r0h0, dst: r1h0, "
                      "size: 64M, qps: 8}}")
    flows = R._flows(d, fabric)
    assert len(flows) == 8 and sum(f.size for f in flows) == 64 << 20
    assert {f.group for f in flows} == {0}
