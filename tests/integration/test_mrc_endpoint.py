"""The MRC endpoints on mrc-4p: real packets through kernel SRv6, verified bytes."""

import socket
import time

import pytest

from tests.integration.conftest import running_lab
from twin import endpoints, netns
from twin import faults as F
from twin import paths as P
from twin import traffic as T
from twin.mrc import wire

pytestmark = pytest.mark.netns
MiB = 1 << 20


@pytest.fixture(scope="module")
def lab4(session_dirs):
    with running_lab(session_dirs, "mrc-4p", "netns") as att:
        yield att


def bulk(att, size, mode="mrc", events=None, src="r0h0", dst="r1h0"):
    flows = T.flows_for("bulk", [], size, src, dst)
    return T.run(att.runtime, "bulk", flows, mode, events=events, timeout_s=120)


def test_256_mib_cross_rack_is_byte_exact_and_split_over_all_planes(lab4):
    run = bulk(lab4, 256 * MiB)
    assert run.ok, run.to_dict()
    per_plane = run.flows[0].result["sender"]["per_plane_packets"]
    counts = [per_plane[str(p)] for p in range(4)]
    mean = sum(counts) / 4
    assert max(abs(c - mean) for c in counts) <= 0.05 * mean, counts


def test_one_percent_loss_on_a_t0_t1_link_retires_evs_and_stays_exact(lab4):
    F.link_loss(lab4, "t0-p0-r0:eth3", 1.0)
    try:
        run = bulk(lab4, 64 * MiB)
    finally:
        F.clear(lab4)
    assert run.ok
    flow = run.flows[0].result
    assert flow["sender"]["retransmits"] > 0
    assert flow["evs_retired"] > 0  # the EVs over the lossy link were retired


def test_link_down_mid_transfer_mrc_recovers_single_path_does_not(lab4):
    def cut():
        F.link_down(lab4, "t0-p0-r0:eth3")
        return "link-down t0-p0-r0:eth3"

    try:
        mrc = bulk(lab4, 256 * MiB, events=[(0.4, cut)])
    finally:
        F.clear(lab4)
    assert mrc.ok and mrc.events, mrc.to_dict()
    recovery = mrc.recovery_s(mrc.events[0][0])
    assert recovery is not None  # goodput came back above 90% of its pre-fault level

    # single-path: cut the T0-T1 link its one path crosses, mid-transfer
    probe = bulk(lab4, 4 * MiB, mode="single-path")
    plane, t1, _ = P.parse_path(lab4.fabric, probe.flows[0].result["single_path"])
    link_end = f"t0-p{plane}-r0:{lab4.fabric.t0_uplink(t1)}"

    def cut_its_path():
        F.link_down(lab4, link_end)
        return f"link-down {link_end}"

    try:
        single = bulk(lab4, 256 * MiB, mode="single-path", events=[(0.4, cut_its_path)])
        assert not single.ok
        assert "retry limit" in (single.flows[0].result["failed"] or "")
    except Exception as e:  # a stall past the timeout is the other way RoCE fails
        assert "did not finish" in str(e)
    finally:
        F.clear(lab4)


def test_metrics_are_prometheus_text(lab4):
    bulk(lab4, 4 * MiB)
    with endpoints.client(lab4.runtime, "r1h0") as c:
        text = c.call("metrics")["text"]
    assert "# TYPE mrc_rx_bytes_total counter" in text
    assert 'mrc_port_up{host="r1h0",plane="0"} 1' in text


def test_probes_resurrect_evs_once_their_path_is_back(lab4):
    def cut():
        F.link_down(lab4, "t0-p1-r0:eth4")
        return "link-down"

    def heal():
        F.link_up(lab4, "t0-p1-r0:eth4")
        return "link-up"

    try:
        run = bulk(lab4, 256 * MiB, events=[(0.3, cut), (0.7, heal)])
    finally:
        F.clear(lab4)
    assert run.ok
    flow = run.flows[0].result
    assert flow["evs_retired"] > 0
    assert flow["probes_sent"] > 0 and flow["resurrected"] > 0, flow


@pytest.mark.parametrize("port", ["r0h0:eth3", "r1h0:eth2"], ids=["local", "remote"])
def test_a_nic_port_going_down_takes_its_plane_out_on_both_ends(lab4, port):
    """Local: the sender sees its own port down. Remote: the receiver's SACK
    port-state bitmap tells the sender. Either way the plane leaves the rotation."""
    plane = int(port.rsplit("eth", 1)[1]) - 1

    def cut():
        F.link_down(lab4, port)
        return f"link-down {port}"

    try:
        run = bulk(lab4, 128 * MiB, events=[(0.3, cut)])
    finally:
        F.clear(lab4)
    assert run.ok, run.to_dict()
    assert plane not in run.flows[0].result["planes_in_use"]


def test_a_corrupted_packet_is_dropped_and_counted(lab4):
    host = "r1h0"
    nic = lab4.plan.nic_address(host)
    good = wire.encode_data(1, 0, 0, 0, b"x" * 64, 0, 0, 0)
    bad = bytearray(good)
    bad[60] ^= 0xFF  # one flipped payload byte: the ICRC no longer matches
    with endpoints.client(lab4.runtime, host) as c:
        before = c.call("stats")["bad_packets"]
        with netns.inside(lab4.runtime.netns_path(host)):
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        with s:
            s.sendto(bytes(bad), (nic, wire.ROCE_PORT))
        for _ in range(50):
            if c.call("stats")["bad_packets"] > before:
                break
            time.sleep(0.02)
        assert c.call("stats")["bad_packets"] == before + 1


def test_incast_into_a_shaped_host_link_is_shared_fairly(session_dirs, tmp_path):
    spec = tmp_path / "shaped4.yml"
    spec.write_text("name: shaped4\nplanes: 2\nracks: 2\nhosts_per_rack: 2\nt1_per_plane: 1\n"
                    "rate: {host: 200mbit, fabric: 10gbit}\n")
    with running_lab(session_dirs, str(spec), "netns") as att:
        hosts = [h.name for h in att.fabric.hosts]
        run = T.run(att.runtime, "incast", T.flows_for("incast", hosts, 8 * MiB, dst="r0h0"),
                    "mrc", timeout_s=120)
    assert run.ok, run.to_dict()
    shares = [f.result["goodput_gbps"] for f in run.flows]
    assert min(shares) >= 0.7 * max(shares), shares  # the window keeps the shares even


def test_acks_travel_on_a_reverse_ev_set_with_one_ev_per_plane(lab4):
    size = 8 * MiB
    with endpoints.client(lab4.runtime, "r1h1") as rx, \
            endpoints.client(lab4.runtime, "r0h0") as tx:
        r = rx.call("recv_qp", size=size)
        s = tx.call("send_qp", peer="r1h1", peer_qpn=r["qpn"], rkey=r["rkey"], size=size)
        rx.call("connect", qpn=r["qpn"], peer="r0h0", peer_qpn=s["qpn"])
        tx.call("write", qpn=s["qpn"], size=size, imm=42)
        done = tx.call("wait", qpn=s["qpn"], timeout=60)
        assert done["idle"] and not done["failed"]
        qp = next(q for q in rx.call("stats")["recv_qps"] if q["qpn"] == r["qpn"])
        assert qp["completed"] == [[0, 42]] and qp["completions"] == 1
        rev = qp["reverse_evs"]
        assert sorted(rev) == ["0", "1", "2", "3"]
        assert all(P.ev_fields(ev)[0] == int(plane) for plane, ev in rev.items())
        for c, qpn in ((tx, s["qpn"]), (rx, r["qpn"])):
            c.call("close", qpn=qpn)


def test_a_1500_byte_mtu_fabric_carries_smaller_packets_exactly(session_dirs, tmp_path):
    spec = tmp_path / "mtu1500.yml"
    spec.write_text("name: mtu1500\nplanes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                    "mtu: 1500\n")
    with running_lab(session_dirs, str(spec), "netns") as att:
        run = T.run(att.runtime, "bulk", T.flows_for("bulk", [], 4 * MiB, "r0h0", "r1h0"),
                    "mrc", timeout_s=60)
    assert run.ok, run.to_dict()
    assert run.flows[0].result["mtu"] == 1500 - 144  # outer+inner IPv6, UDP, BTH..ICRC


def test_a_t0_losing_every_uplink_mid_transfer_only_costs_its_plane(lab4):
    def cut():
        F.link_down(lab4, "t0-p0-r0:eth3", both=True)
        F.link_down(lab4, "t0-p0-r0:eth4", both=True)
        return "plane 0 of rack 0 cut off from its T1s"

    try:
        run = bulk(lab4, 128 * MiB, events=[(0.3, cut)])
    finally:
        F.clear(lab4)
    assert run.ok, run.to_dict()
