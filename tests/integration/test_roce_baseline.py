"""The RoCE baseline on a shaped mrc-4p (hosts 25 Mbit/s, fabric 50 Mbit/s): single-path
with DCQCN over several QPs per flow moves every byte, each QP on its own hashed path
and paced at its port's rate; a CNP cuts a running QP's rate (docs/roce-baseline.md)."""

import json
import socket
import time

import pytest
from click.testing import CliRunner

from tests.integration.conftest import lab_name
from twin import endpoints, nsenter
from twin import traffic as T
from twin.cli import main
from twin.mrc import wire

pytestmark = pytest.mark.netns
MiB = 1 << 20
LAB = lab_name("test-roce")
FABRIC = "mrc-4p-shaped"  # `lab` (conftest)


def test_single_path_dcqcn_over_four_qps_is_byte_exact(lab):
    got = CliRunner().invoke(main, ["traffic", "bulk", "--src", "r0h0", "--dst", "r1h0",
                                    "--size", "8M", "--mode", "single-path", "--cc", "dcqcn",
                                    "--qps", "4", "--lab", lab.lab, "--json"])
    assert got.exit_code == 0, got.output
    run = json.loads(got.output)
    assert run["ok"] and run["cc"] == "dcqcn" and run["qps"] == 4
    (flow,) = run["flows"]
    assert flow["exact"] and flow["bytes"] == 8 * MiB and flow["qps"] == 4
    assert len(run["qp_rows"]) == 4
    assert all(r["exact"] and r["bytes"] == 2 * MiB for r in run["qp_rows"])
    assert len({r["single_path"] for r in run["qp_rows"]}) >= 2  # hashed apart
    # no QP ran faster than its 25 Mbit/s port (paced at line rate: ~24 of payload)
    assert all(r["goodput_gbps"] <= 0.0255 for r in run["qp_rows"]), run["qp_rows"]


def test_the_endpoint_reports_dcqcn_at_line_rate_and_the_default_is_dcqcn(lab):
    size = 2 * MiB
    flows = T.flows_for("bulk", [], size, "r0h0", "r1h1")
    run = T.run(lab.runtime, "bulk", flows, "single-path", timeout_s=120)
    assert run.ok and run.cc == "dcqcn"
    q = run.flows[0].result
    assert q.cc == "dcqcn" and q.dcqcn["line_rate_bps"] == 25_000_000
    assert q.dcqcn["rate_bps"] == 25_000_000 and q.dcqcn["rate_cuts"] == 0  # no CE: no CNP
    assert q.window == 256  # the in-flight cap, fixed (SenderConfig.max_window)


def _cnp_from_inside(att, host: str, nic: str, qpn: int) -> None:
    """A CNP for sending QP `qpn`, sent from inside `host`'s namespace to its own NIC (as
    twin fuzz sends its packets): the ICRC over the headers the socket will carry."""
    sport = 0xC000 | 0x123
    body = wire.encode_cnp(qpn)
    udp_len = wire.UDP.size + len(body) + wire.ICRC.size
    ip_udp = wire.ipv6_header(nic, nic, wire.NH_UDP, udp_len) + \
        wire.UDP.pack(sport, wire.ROCE_PORT, udp_len, 0)
    with nsenter.inside(att.runtime.netns_path(host)):
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.bind((nic, sport))
    with sock:
        sock.sendto(body + wire.icrc(ip_udp, body), (nic, wire.ROCE_PORT))


def test_a_cnp_cuts_a_running_qps_rate_and_the_bytes_still_arrive(lab):
    size = 6 * MiB  # ~2 s at 25 Mbit/s
    with endpoints.client(lab.runtime, "r1h2") as rx, \
            endpoints.client(lab.runtime, "r0h2") as tx:
        r = rx.recv_qp(size=size)
        s = tx.send_qp(peer="r1h2", peer_qpn=r["qpn"], rkey=r["rkey"], size=size,
                       mode="single-path", cc="dcqcn", seed=5)
        rx.connect(qpn=r["qpn"], peer="r0h2", peer_qpn=s["qpn"])
        tx.write(qpn=s["qpn"], size=size)
        time.sleep(0.3)
        nic = tx.hello()["nic"]
        _cnp_from_inside(lab, "r0h2", nic, s["qpn"])
        deadline = time.monotonic() + 5
        while True:
            q = next(q for q in tx.stats()["send_qps"] if q["qpn"] == s["qpn"])
            if q["dcqcn"]["cnps_received"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert q["dcqcn"]["cnps_received"] == 1 and q["dcqcn"]["rate_cuts"] == 1
        assert q["dcqcn"]["min_rate_bps"] == 12_500_000  # α = 1 at the first CNP: halved
        done = tx.wait(qpn=s["qpn"], timeout=60)
        assert done["idle"] and not done["failed"]
        assert rx.digest(qpn=r["qpn"])["sha256"] == tx.digest(qpn=s["qpn"])["sha256"]
        metrics = tx.metrics()["text"]
        assert (f'twin_endpoint_qp_dcqcn_rate_cuts_total{{host="r0h2",qp="{s["qpn"]}"}} 1'
                in metrics)
        for client, qpn in ((tx, s["qpn"]), (rx, r["qpn"])):
            client.close_qp(qpn)
