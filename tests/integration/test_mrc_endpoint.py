"""The MRC endpoints on mrc-4p: real packets through kernel SRv6, verified bytes."""

import contextlib
import json
import shutil
import socket
import subprocess
import time

import pytest
from click.testing import CliRunner

from tests.integration.conftest import LAB4, running_lab
from twin import endpoints, failover, nsenter
from twin import faults as F
from twin import traffic as T
from twin.cli import main
from twin.fabric import paths as P
from twin.faults import timeline as FT
from twin.mrc import wire
from twin.mrc.stats import EndpointStats

pytestmark = pytest.mark.netns
MiB = 1 << 20


def bulk(att, size, mode="mrc", faults=None, src="r0h0", dst="r1h0"):
    """`faults`: (seconds after the first write, what, apply) each, on a fault timeline
    (the run's faults say `what`); the test reverts them (F.clear)."""
    flows = T.flows_for("bulk", [], size, src, dst)
    timeline = FT.Timeline([FT.Scheduled(what, "", apply, ((int(s * 1e9), False),))
                            for s, what, apply in faults]) if faults else None
    return T.run(att.runtime, "bulk", flows, mode, timeline=timeline, timeout_s=120)


RATE: dict[str, float] = {}  # lab -> bytes/s of a bulk transfer, read once per module


def lasting(att, seconds: float) -> int:
    """A transfer size that takes about `seconds` on this machine and data plane, read off
    a 32 MiB transfer (a fault timed into a transfer must land before it is done: on a
    fast data plane 64 MiB took 0.19 s); between 64 MiB and 1 GiB."""
    if att.lab not in RATE:
        run = bulk(att, 32 * MiB)
        assert run.ok
        RATE[att.lab] = 32 * MiB / max(run.flows[0].result.elapsed_s, 1e-3)
    return int(min(1024 * MiB, max(64 * MiB, RATE[att.lab] * seconds))) // MiB * MiB


def test_256_mib_cross_rack_is_byte_exact_and_split_over_all_planes(lab4):
    run = bulk(lab4, 256 * MiB)
    assert run.ok, run.to_dict()
    per_plane = run.flows[0].result.sender.per_plane_packets
    counts = [per_plane[p] for p in range(4)]
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
    assert flow.sender.retransmits > 0
    assert flow.ev_retirements_total > 0  # the EVs over the lossy link were retired
    assert sum(flow.evs.values()) == flow.ev_set_size  # states: EVs now, not events


def test_link_down_mid_transfer_mrc_recovers_single_path_does_not(lab4):
    def cut():
        F.link_down(lab4, "t0-p0-r0:eth3")
        return "link-down t0-p0-r0:eth3"

    try:
        mrc = bulk(lab4, lasting(lab4, 2.0), faults=[(0.4, "link-down t0-p0-r0:eth3", cut)])
    finally:
        F.clear(lab4)
    assert mrc.ok and mrc.events, mrc.to_dict()
    # Recovery is judged by what the transport did, not by how fast goodput came back:
    # on a shared 2-core VM goodput swings 2x with the CPU the sender gets (with one
    # core busy elsewhere, "recovery" read 0-1.7 s on identical runs; once, in CI, it
    # never read as back). That figure is bench_endpoint.py's recovery row.
    # The failover, from the endpoint's own event log: detected, repaired, EVs retired.
    # From when applying the cut began: `t_us` says when it was in force by, and a dead
    # path is now retired whole at its first detection, which a slow `ip link` (a
    # loaded 2-core VM) can leave before that stamp.
    began = [{**f, "t_us": f["t_us"] - f["applied_us"]} for f in mrc.faults]
    ep = failover.episodes(began, mrc.events)[-1]
    assert ep.fault == "link-down t0-p0-r0:eth3"
    assert ep.detection_us is not None and ep.repair_us is not None, ep
    assert 0 < ep.detection_us < ep.repair_us and ep.retirements > 0, ep
    flow = mrc.flows[0].result
    assert flow.dead_paths_total >= 1  # the path was shown dead, its EVs retired together
    assert flow.ev_retirements_total >= ep.retirements - ep.spurious
    # The cut cost the packets in flight on the dead path, not a stall's worth: well
    # under 1% of the transfer's 65,536 (5-17 here; a stall would lose the window again
    # at every timeout).
    packets = 256 * MiB // flow.mtu
    assert ep.losses <= packets // 100, ep
    # Spares took the retired EVs' slots, and plane 0 kept its share: 7 of 8 paths
    # carry the rest, spread by path, not by plane.
    assert sum(flow.evs.values()) == flow.ev_set_size
    assert flow.evs.get("assumed_bad", 0) == 0 and flow.ev_pools["retired"] > 0, flow.evs
    assert flow.planes_in_use == (0, 1, 2, 3)
    counts = [flow.sender.per_plane_packets[p] for p in range(4)]
    assert max(counts) - min(counts) <= 0.05 * (sum(counts) / 4), counts

    # single-path: cut the T0-T1 link its one path crosses (its QP's hash chose it:
    # read it from the running QP), mid-transfer
    def cut_its_path():
        with endpoints.client(lab4.runtime, "r0h0") as c:
            (qp,) = EndpointStats.from_dict(c.stats()).send_qps
        plane, t1, _ = P.parse_path(lab4.fabric, qp.single_path)
        link_end = f"t0-p{plane}-r0:{lab4.fabric.t0_uplink(t1)}"
        F.link_down(lab4, link_end)
        return f"link-down {link_end}"

    try:
        single = bulk(lab4, lasting(lab4, 2.0), mode="single-path",
                      faults=[(0.4, "link-down", cut_its_path)])
        assert not single.ok
        assert "retry limit" in (single.flows[0].result.failed or "")
    except Exception as e:  # a stall past the timeout is the other way RoCE fails
        assert "did not finish" in str(e)
    finally:
        F.clear(lab4)


def test_a_job_starting_with_a_dead_t0_t1_link_loses_fewer_than_5_packets_per_qp(lab4):
    """startup-dead-link (issue 10): a job starts with a dead T0-T1 link and no
    denylist. The path carries two packets until it is heard from; their loss shows it
    dead and every EV on it retires at once (before: ~16 lost, one per EV on it)."""
    F.link_down(lab4, "t0-p0-r0:eth3")  # plane 0, T1 0
    try:
        runs = [bulk(lab4, 16 * MiB) for _ in range(3)]
    finally:
        F.clear(lab4)
    for run in runs:
        assert run.ok, run.to_dict()
        # a late copy declared lost (a stalled 2-core VM times out every path) is no loss
        late = {e["psn"] for e in run.events if e["kind"] == "spurious"}
        lost = [e for e in run.events if e["kind"] == "loss" and e["psn"] not in late]
        assert len(lost) < 5, [(hex(e["ev"]), e["psn"], e["t_us"], e.get("detail")) for e in lost]
        assert all(P.ev_fields(e["ev"])[:2] == (0, 0) for e in lost), lost
        flow = run.flows[0].result
        assert flow.dead_paths_total == 1 and flow.ev_retirements_total >= 8
        retired = [e["ev"] for e in run.events if e["kind"] == "retire"]
        assert all(P.ev_fields(v)[:2] == (0, 0) for v in retired)


def test_the_event_log_has_ns_stamps_and_acked_bins_and_twin_stats_shows_it(lab4):
    size = 8 * MiB
    with endpoints.client(lab4.runtime, "r0h0") as tx, \
            endpoints.client(lab4.runtime, "r1h0") as rx:
        r = rx.recv_qp(size=size)
        s = tx.send_qp(peer="r1h0", peer_qpn=r["qpn"], rkey=r["rkey"], size=size)
        rx.connect(qpn=r["qpn"], peer="r0h0", peer_qpn=s["qpn"])
        before = time.monotonic_ns()
        F.link_down(lab4, "t0-p2-r0:eth4")
        try:
            tx.write(qpn=s["qpn"], size=size)
            assert tx.wait(qpn=s["qpn"], timeout=60)["idle"]
        finally:
            F.clear(lab4)
        log = tx.events(qpn=s["qpn"])
        bins = log["acked_bins"]
        assert before <= bins["first_write_ns"] == bins["t0_ns"] <= time.monotonic_ns()
        assert bins["bin_ns"] == 1_000_000 and sorted(bins["planes"]) == ["0", "1", "2", "3"]
        assert sum(map(sum, bins["planes"].values())) == size
        assert all(sum(v) > 0 for v in bins["planes"].values())
        events = log["events"]
        assert events and all(e["t_us"] == e["t_ns"] // 1000 for e in events)
        assert all(bins["first_write_ns"] <= e["t_ns"] for e in events)
        kinds = {e["kind"] for e in events}
        assert {"loss", "first_loss", "ev_state", "retire", "retransmit", "repaired"} <= kinds
        try:
            runner = CliRunner()
            got = runner.invoke(main, ["stats", "r0h0", "--lab", LAB4, "--events", "--qp",
                                       str(s["qpn"]), "--json", "--kind", "retire"])
            assert got.exit_code == 0, got.output
            view = json.loads(got.output)["r0h0"][0]
            # (probes of the retired EVs go on answering: the log grows as it is read)
            assert view["qpn"] == s["qpn"] and view["total"] >= log["total"]
            assert view["shown"] == len(view["events"]) >= sum(
                e["kind"] == "retire" for e in events) > 0
            assert {e["kind"] for e in view["events"]} == {"retire"}
            table = runner.invoke(main, ["stats", "r0h0", "--lab", LAB4, "--events"])
            assert table.exit_code == 0 and f"QP {s['qpn']} -> r1h0 (mrc)" in table.output
            assert "none dropped" in table.output and "p2 t1-1" in table.output
            bad = runner.invoke(main, ["stats", "--lab", LAB4, "--events", "--kind", "nope"])
            assert bad.exit_code == 2 and "--kind: must be one of loss" in bad.output
        finally:
            tx.close_qp(s["qpn"])
            rx.close_qp(r["qpn"])


def test_metrics_are_prometheus_text(lab4):
    bulk(lab4, 4 * MiB)
    with endpoints.client(lab4.runtime, "r1h0") as c:
        text = c.metrics()["text"]
    assert "# TYPE twin_endpoint_rx_bytes_total counter" in text
    assert 'twin_endpoint_port_up{host="r1h0",plane="0"} 1' in text


def test_probes_resurrect_evs_once_their_path_is_back(lab4):
    def cut():
        F.link_down(lab4, "t0-p1-r0:eth4")
        return "link-down"

    def heal():
        F.link_up(lab4, "t0-p1-r0:eth4")
        return "link-up"

    try:
        run = bulk(lab4, lasting(lab4, 2.0),
                   faults=[(0.3, "link-down", cut), (0.7, "link-up", heal)])
    finally:
        F.clear(lab4)
    assert run.ok
    flow = run.flows[0].result
    assert flow.ev_retirements_total > 0
    assert flow.probes_sent > 0 and flow.ev_revivals_total > 0, flow
    assert [e.fault for e in run.failover()][-2:] == ["link-down", "link-up"]


@pytest.mark.parametrize("port", ["r0h0:eth3", "r1h0:eth2"], ids=["local", "remote"])
def test_a_nic_port_going_down_takes_its_plane_out_on_both_ends(lab4, port):
    """Local: the sender sees its own port down. Remote: the receiver's SACK
    port-state bitmap tells the sender. Either way the plane leaves the rotation."""
    plane = int(port.rsplit("eth", 1)[1]) - 1

    def cut():
        F.link_down(lab4, port)
        return f"link-down {port}"

    try:
        run = bulk(lab4, lasting(lab4, 1.5), faults=[(0.3, f"link-down {port}", cut)])
    finally:
        F.clear(lab4)
    assert run.ok, run.to_dict()
    assert plane not in run.flows[0].result.planes_in_use


def test_a_corrupted_packet_is_dropped_and_counted(lab4):
    """A well-formed packet for no QP counts as unknown_qp (so its ICRC was right); the
    same packet with one payload byte flipped counts as a bad packet, and nothing else."""
    host = "r1h0"  # sent from inside the host to its own NIC address (no SRv6 path needed)
    nic = src = lab4.plan.nic_address(host)
    ev = 0x5A5A5A5A
    body = wire.encode_data(0xFFFFF0, 0, 0, 0, b"x" * 64)  # a DestQP nobody has
    good = wire.roce(src, nic, ev, body)[wire.IP6.size + wire.UDP.size:]
    bad = bytearray(good)
    bad[60] ^= 0xFF  # one flipped payload byte: the ICRC no longer matches
    with endpoints.client(lab4.runtime, host) as c:
        before = c.stats()
        with nsenter.inside(lab4.runtime.netns_path(host)):
            s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            s.bind((src, wire.udp_sport(ev)))
        with s:
            # (no flow label: the ICRC masks it, as a router may rewrite it)
            s.sendto(good, (nic, wire.ROCE_PORT))
            s.sendto(bytes(bad), (nic, wire.ROCE_PORT))
        for _ in range(50):
            after = c.stats()
            if after["bad_packets"] > before["bad_packets"] \
                    and after["unknown_qp"] > before["unknown_qp"]:
                break
            time.sleep(0.02)
        assert after["bad_packets"] == before["bad_packets"] + 1
        assert after["unknown_qp"] == before["unknown_qp"] + 1


def test_incast_into_a_shaped_host_link_is_shared_fairly(session_dirs, tmp_path):
    spec = tmp_path / "shaped4.yml"
    spec.write_text("name: shaped4\nplanes: 2\nracks: 2\nhosts_per_rack: 2\nt1_per_plane: 1\n"
                    "rate: {host: 200mbit, fabric: 10gbit}\n")
    with running_lab(session_dirs, str(spec), "netns") as att:
        hosts = [h.name for h in att.fabric.hosts]
        run = T.run(att.runtime, "incast", T.flows_for("incast", hosts, 8 * MiB, dst="r0h0"),
                    "mrc", timeout_s=120)
    assert run.ok, run.to_dict()
    shares = [f.result.goodput_gbps for f in run.flows]
    assert min(shares) >= 0.7 * max(shares), shares  # the window keeps the shares even
    # the window steers to two frames' time on the slowest link (200 Mbit/s), 400 µs at least
    frame = run.flows[0].result.mtu + wire.MAX_FRAME - wire.MTU
    assert {f.result.target_us for f in run.flows} == {max(400.0, 2 * frame * 8 // 200)}


def test_acks_go_back_the_way_the_data_came(lab4):
    """Each SACK travels the data packet's own plane and T1, reversed: one reverse EV per
    forward path (so a dead path costs its SACKs too, and no healthy path is blamed)."""
    size = 8 * MiB
    with endpoints.client(lab4.runtime, "r1h1") as rx, \
            endpoints.client(lab4.runtime, "r0h0") as tx:
        r = rx.recv_qp(size=size)
        s = tx.send_qp(peer="r1h1", peer_qpn=r["qpn"], rkey=r["rkey"], size=size)
        rx.connect(qpn=r["qpn"], peer="r0h0", peer_qpn=s["qpn"])
        tx.write(qpn=s["qpn"], size=size, imm=42)
        done = tx.wait(qpn=s["qpn"], timeout=60)
        assert done["idle"] and not done["failed"]
        reply = rx.stats()
        stats = EndpointStats.from_dict(reply)  # the schema parses a real endpoint's reply
        assert {"id": reply["id"], **stats.to_dict()} == reply  # and gives it back unchanged
        qp = stats.recv_qp(r["qpn"])
        assert qp.completed == ((0, 42),) and qp.completions == 1
        # A receive batch sends only its last SACKs (the others coalesce), so on a busy
        # machine a bulk transfer may leave a path without one: one-packet writes, each
        # waited for, are acked one by one until every path has carried data (bounded).
        every = [(p, t) for p in range(4) for t in range(lab4.fabric.spec.t1_per_plane)]
        for _ in range(200):
            paths = sorted(P.ev_fields(ev)[:2] for ev in
                           EndpointStats.from_dict(rx.stats()).recv_qp(r["qpn"]).reverse_evs)
            if paths == every:
                break
            tx.write(qpn=s["qpn"], size=1024)
            assert not tx.wait(qpn=s["qpn"], timeout=10)["failed"]
        assert paths == every  # each path once: one reverse EV per forward path
        for c, qpn in ((tx, s["qpn"]), (rx, r["qpn"])):
            c.close_qp(qpn)


def test_a_clean_fabric_retires_nothing_in_19_of_20_transfers(lab4):
    """Item 5: with no fault, sprayed reordering and a busy 2-core machine are no loss."""
    retired = []
    for _ in range(20):
        run = bulk(lab4, 64 * MiB)
        assert run.ok, run.to_dict()
        retired.append(run.flows[0].result.ev_retirements_total)
    assert sum(retired) <= 1, retired  # at most one spurious retirement in all 20


def test_a_new_qp_after_a_fault_starts_from_a_clean_ev_set(lab4):
    """Item 6: nothing of an earlier QP's failover is carried into the next one."""
    def cut():
        F.link_down(lab4, "t0-p0-r0:eth3")
        return "link-down"

    try:
        run = bulk(lab4, lasting(lab4, 1.0), faults=[(0.2, "link-down", cut)])
    finally:
        F.clear(lab4)
    assert run.ok and run.flows[0].result.ev_retirements_total > 0
    with endpoints.client(lab4.runtime, "r1h0") as rx, \
            endpoints.client(lab4.runtime, "r0h0") as tx:
        r = rx.recv_qp(size=4096)
        s = tx.send_qp(peer="r1h0", peer_qpn=r["qpn"], rkey=r["rkey"], size=4096)
        fresh = next(q for q in tx.stats()["send_qps"] if q["qpn"] == s["qpn"])
        for c, qpn in ((tx, s["qpn"]), (rx, r["qpn"])):
            c.close_qp(qpn)
    assert {k: v for k, v in fresh["evs"].items() if v} == {"good": fresh["ev_set_size"]}, fresh
    assert fresh["ev_retirements_total"] == 0 and fresh["ev_revivals_total"] == 0


def test_single_path_reports_the_one_plane_it_used(lab4):
    """Item 7: planes_in_use is where packets went, not where they could go."""
    flow = bulk(lab4, 4 * MiB, mode="single-path").to_dict()["flows"][0]
    plane = P.parse_path(lab4.fabric, flow["single_path"])[0]
    assert flow["planes_in_use"] == [plane]
    assert flow["per_plane_packets"] == {str(plane): flow["per_plane_packets"][str(plane)]}


def test_a_live_capture_inside_a_t1_is_standard_rocev2(lab4, tmp_path):
    """Items 1, 2, 8 on real packets: captured on a T1's ports during a transfer, every
    data packet is RDMA WRITE with the DMA length it carries (tshark), its ICRC is
    RoCEv2's (scapy's own implementation, over the inner packet), and the source ports
    of one path vary (an ECMP hash sees the EV's entropy)."""
    pytest.importorskip("scapy")
    if shutil.which("dumpcap") is None or shutil.which("tshark") is None:
        pytest.skip("dumpcap/tshark missing (Debian: apt-get install tshark)")
    from scapy.contrib.roce import BTH
    from scapy.layers.inet6 import IPv6
    from scapy.utils import rdpcap

    pcap = tmp_path / "t1.pcapng"
    t1 = "t1-p0-0"
    ifaces = [e.ifname for link in lab4.fabric.links for e in (link.a, link.b) if e.node == t1]
    cap = subprocess.Popen(["nsenter", f"--net={lab4.runtime.netns_path(t1)}", "--",
                            "dumpcap", "-q", *sum((["-i", i] for i in ifaces), []),
                            "-c", "400", "-a", "duration:30", "-w", str(pcap)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)  # dumpcap is listening
        assert bulk(lab4, 16 * MiB).ok
    finally:
        try:
            cap.wait(timeout=35)
        except subprocess.TimeoutExpired:
            cap.kill()
    assert pcap.exists(), cap.stderr.read()
    out = subprocess.run(["tshark", "-r", str(pcap), "-d", "udp.port==4791,infiniband",
                          "-Y", "infiniband.bth.opcode == 10 || infiniband.bth.opcode == 11",
                          "-T", "fields", "-E", "separator=,", "-e", "infiniband.reth.dmalen",
                          "-e", "data.len", "-e", "udp.srcport", "-e", "_ws.malformed"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [line.split(",") for line in out.splitlines()]
    assert len(rows) >= 50, out
    assert all(dma and dma == n and not bad for dma, n, _, bad in rows), rows[:5]
    sports = {int(sp) for _, _, sp, _ in rows}
    assert len(sports) >= 4, sports  # several EVs on this one plane-0 path
    checked = 0
    for pkt in rdpcap(str(pcap)):
        raw = bytes(pkt)
        at = raw.find(b"\x60")  # the outer IPv6 header, after any link header
        outer = IPv6(raw[at:])
        if outer.nh != 41 or BTH not in outer:
            continue
        inner = bytes(outer.payload)
        assert IPv6(inner)[BTH].compute_icrc(None) == inner[-4:]
        checked += 1
    assert checked >= 50


def test_a_1500_byte_mtu_fabric_carries_smaller_packets_exactly(session_dirs, tmp_path):
    spec = tmp_path / "mtu1500.yml"
    spec.write_text("name: mtu1500\nplanes: 2\nracks: 2\nhosts_per_rack: 1\nt1_per_plane: 1\n"
                    "mtu: 1500\n")
    with running_lab(session_dirs, str(spec), "netns") as att:
        run = T.run(att.runtime, "bulk", T.flows_for("bulk", [], 4 * MiB, "r0h0", "r1h0"),
                    "mrc", timeout_s=60)
    assert run.ok, run.to_dict()
    # outer + inner IPv6 80, UDP 8, BTH 12, RETH 16, ImmDt 4, ICRC 4
    assert run.flows[0].result.mtu == 1500 - 124


def test_a_t0_losing_every_uplink_mid_transfer_only_costs_its_plane(lab4):
    def cut():
        F.link_down(lab4, "t0-p0-r0:eth3", both=True)
        F.link_down(lab4, "t0-p0-r0:eth4", both=True)
        return "plane 0 of rack 0 cut off from its T1s"

    try:
        run = bulk(lab4, lasting(lab4, 1.5),
                   faults=[(0.3, "plane 0 of rack 0 cut off from its T1s", cut)])
    finally:
        F.clear(lab4)
    assert run.ok, run.to_dict()
    assert run.flows[0].result.ev_retirements_total > 0  # the cut landed in the transfer


def _restart_endpoints(att, hosts, datapath, monkeypatch):
    """Restart these hosts' endpoints with MRC_TWIN_DATAPATH=datapath (twin forwards it)."""
    from twin.runtime.netns import pids_in

    paths = [att.runtime.netns_path(h) for h in hosts]
    for pids in pids_in(paths).values():
        for pid in pids:
            subprocess.run(["kill", str(pid)], check=False)
    deadline = time.monotonic() + 5
    while any(pids_in(paths).values()) and time.monotonic() < deadline:
        time.sleep(0.02)
    monkeypatch.setenv("MRC_TWIN_DATAPATH", datapath)
    endpoints.start(att.runtime, hosts)
    monkeypatch.delenv("MRC_TWIN_DATAPATH")


def test_both_data_paths_move_the_same_bytes_and_talk_to_each_other(lab4, monkeypatch):
    """The compiled data path (the default where it is built) and the pure-Python one
    put the same wire on the fabric: each sends to the other, byte-exact, with a cut
    (the compiled one's ICRC by ISA-L where it loads, the Python one's by zlib)."""
    from twin.mrc.core import compiled
    _fastpath = compiled()

    hosts = ["r0h0", "r1h0"]
    try:
        _restart_endpoints(lab4, ["r0h0"], "python", monkeypatch)
        with endpoints.client(lab4.runtime, "r0h0") as a, \
                endpoints.client(lab4.runtime, "r1h0") as b:
            assert a.hello()["datapath"] == "python: asked for"
            assert a.hello()["icrc"] == "zlib (python)"
            assert b.hello()["datapath"] == "compiled"
            assert b.hello()["icrc"] == _fastpath.ICRC  # isa-l where libisal2 is
        for src, dst in (("r0h0", "r1h0"), ("r1h0", "r0h0")):
            run = bulk(lab4, 32 * MiB, src=src, dst=dst)
            assert run.ok, run.to_dict()
            assert run.flows[0].result.sender.retransmits < 64
        run = bulk(lab4, lasting(lab4, 1.0),
                   faults=[(0.2, "link-down t0-p1-r0:eth3",
                           lambda: F.link_down(lab4, "t0-p1-r0:eth3"))])
        assert run.ok and run.flows[0].result.ev_retirements_total > 0, run.to_dict()
    finally:
        F.clear(lab4)
        _restart_endpoints(lab4, hosts, "auto", monkeypatch)
    with endpoints.client(lab4.runtime, "r0h0") as a:
        assert a.hello()["datapath"] == "compiled"


def test_mrc_twin_record_writes_a_sending_qps_inputs_as_a_trace_both_replay_alike(
        lab4, monkeypatch, tmp_path):
    """MRC_TWIN_RECORD=DIR: the sending QP's inputs, with the loop's cadence, are written
    when it closes, a trace (twin.mrc.trace) the reference replays to where the live QP
    ended, and the compiled core to the same decisions."""
    from twin.mrc.core import compiled
    _fastpath = compiled()
    from twin.mrc import trace as TR
    from twin.mrc.transport import Sender

    try:
        monkeypatch.setenv("MRC_TWIN_RECORD", str(tmp_path))
        _restart_endpoints(lab4, ["r0h0"], "auto", monkeypatch)
        monkeypatch.delenv("MRC_TWIN_RECORD")
        run = bulk(lab4, 8 * MiB)
        assert run.ok, run.to_dict()
        (path,) = tmp_path.glob("r0h0-*.json.gz")
    finally:
        _restart_endpoints(lab4, ["r0h0"], "auto", monkeypatch)
    t = TR.load(path)
    assert t.kind == "sender" and {"post", "poll", "sack", "timer"} <= {c[0] for c in t.calls}
    ref = TR.replay(t, Sender)
    live = run.flows[0].result.sender
    assert ref[-1]["snap"]["stats"]["packets"] == live.packets and ref[-1]["snap"]["idle"]
    assert TR.first_divergence(ref, TR.replay(t, _fastpath.Sender), t.calls) is None


def test_an_endpoint_asked_for_a_data_path_it_cannot_have_says_so():
    from twin.mrc.loop import load_datapath

    with pytest.raises(Exception, match="MRC_TWIN_DATAPATH='fast'"):
        load_datapath("fast")
    assert load_datapath("python") == (None, "python: asked for")


def _endpoint_in_status(runner, node: str) -> dict | None:
    got = runner.invoke(main, ["status", LAB4, "--json"])
    assert got.exit_code == 0, got.output
    (lab,) = json.loads(got.output)
    return next(n for n in lab["nodes"] if n["node"] == node)["endpoint"]


def test_an_endpoint_that_ended_is_named_with_its_log_and_restart_brings_it_back(lab4):
    """A host whose endpoint died (here: SIGTERM from outside) is not `does not answer`:
    twin says the endpoint ended, shows its log's last lines (how it ended), and the
    command that starts it again; `twin status` shows it ended; `twin restart HOST`
    starts it again."""
    from twin.runtime.netns import pids_in

    host = "r1h1"
    (pid,) = pids_in([lab4.runtime.netns_path(host)])[lab4.runtime.netns_path(host)]
    subprocess.run(["kill", str(pid)], check=True)
    deadline = time.monotonic() + 10
    while pids_in([lab4.runtime.netns_path(host)])[lab4.runtime.netns_path(host)] \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    runner = CliRunner()
    got = runner.invoke(main, ["traffic", "bulk", "--lab", LAB4, "--src", "r0h1", "--dst",
                               host, "--size", "1M"])
    assert got.exit_code == 1, got.output
    assert f"{host}: its MRC endpoint is not running" in got.output, got.output
    assert "mrc endpoint: stopped by SIGTERM" in got.output, got.output
    assert f"twin restart {host} --lab {LAB4}" in got.output, got.output
    assert "Traceback" not in got.output
    assert _endpoint_in_status(runner, host)["state"] == "ended"
    got = runner.invoke(main, ["stats", "--lab", LAB4, "--json"])  # the others still shown
    assert got.exit_code == 1 and f"{host}: its MRC endpoint is not running" in got.stderr
    assert set(json.loads(got.stdout)) == {"r0h0", "r0h1", "r1h0"}, got.stdout
    for extra in (["--events", "--json"], ["--prometheus"]):  # so do their event logs, metrics
        got = runner.invoke(main, ["stats", "--lab", LAB4, *extra])
        assert got.exit_code == 1 and f"{host}: its MRC endpoint is not running" in got.stderr
        assert "Traceback" not in got.output
        if "--json" in extra:
            assert set(json.loads(got.stdout)) == {"r0h0", "r0h1", "r1h0"}, got.stdout
        else:
            assert 'host="r0h0"' in got.stdout and 'host="r1h1"' not in got.stdout
    got = runner.invoke(main, ["stats", host, "--lab", LAB4, "--events"])  # asked of it alone
    assert got.exit_code == 1 and f"{host}: its MRC endpoint is not running" in got.output
    got = runner.invoke(main, ["status", LAB4])
    assert f"endpoint ended: {host}" in got.output, got.output
    got = runner.invoke(main, ["restart", host, "--lab", LAB4])
    assert got.exit_code == 0, got.output
    up = _endpoint_in_status(runner, host)
    assert up["state"] == "up" and up["datapath"] == "compiled", up
    assert _endpoint_in_status(runner, "t0-p0-r0") is None  # a switch has none
    run = bulk(lab4, 4 * MiB, src="r0h1", dst=host)
    assert run.ok, run.to_dict()


def test_traffic_says_what_it_does_before_and_after_the_writes(lab4):
    """The seconds around the writes at GiB sizes are named (registering, hashing), and
    every host hashes its own buffers at once: a ring, where each host is a source and
    a destination, is compared flow by flow."""
    runner = CliRunner()
    got = runner.invoke(main, ["traffic", "bulk", "--lab", LAB4, "--src", "r0h0", "--dst",
                               "r1h0", "--size", "2M"])
    assert got.exit_code == 0, got.output
    lines = got.output.splitlines()
    assert lines[0] == "registering buffers: 1 QP, 2 MiB at each end", lines
    assert "checking bytes: sha256 of 2 MiB at each end" in lines, lines
    got = runner.invoke(main, ["traffic", "ring", "--lab", LAB4, "--size", "1M", "--json"])
    assert got.exit_code == 0, got.output
    flows = json.loads(got.output)["flows"]
    assert len(flows) == 4 and all(f["exact"] for f in flows), flows
    assert {f["src"] for f in flows} == {f["dst"] for f in flows}


# -- congestion signals (docs/congestion.md): marks and trims set by nftables ---------------
#
# Until the fabric marks and trims in its switches (and the host's decap copies the outer
# traffic class in, RFC 6040), the receiving host's own nftables stands in for them: an
# input-hook rule sees the inner packet after decap (End.DT6 and the eBPF decap both
# deliver it through ip6_input) and rewrites its traffic class, which is what the
# endpoint's socket reads (IPV6_FLOWINFO). DSCP 7 on a whole packet makes the receiver
# treat it as trimmed (it reads BTH and RETH only): a real copy in flight is "trimmed".

DATA = "udp dport 4791 @th,64,8 { 0x0a, 0x0b }"  # BTH opcode: RDMA WRITE (with imm)


@contextlib.contextmanager
def nft_at(att, host: str, rule: str):
    """One nftables rule on `host`'s input hook for the length of the block; its
    packet counter is read into the yielded dict at the end."""
    path = att.runtime.netns_path(host)
    nsenter.run(path, ["nft", "-f", "-"], input=(
        "table ip6 twin_test_signals {\n chain input {\n"
        "  type filter hook input priority -300; policy accept;\n"
        f"  {rule} counter\n }}\n}}\n"))
    hits: dict = {}
    try:
        yield hits
    finally:
        out = nsenter.run(path, ["nft", "-j", "list", "table", "ip6", "twin_test_signals"])
        for item in json.loads(out.stdout)["nftables"]:
            for expr in item.get("rule", {}).get("expr", []):
                if "counter" in expr:
                    hits["packets"] = expr["counter"]["packets"]
        nsenter.run(path, ["nft", "delete", "table", "ip6", "twin_test_signals"])


def signalled(att, size, **signals):
    flows = T.flows_for("bulk", [], size, "r0h0", "r1h0")
    return T.run(att.runtime, "bulk", flows, "mrc", timeout_s=120, **signals)


def test_ce_marks_on_one_plane_are_echoed_and_its_evs_skipped(lab4):
    """Every data packet of plane 0 arrives CE-marked (the flow label's low bits are
    the EV's plane): the receiver echoes every mark, the sender SKIPs each marked EV
    for a rotation, and plane 0 carries less than the others (a marked EV is used every
    other rotation); with --no-ecn the marks are only counted."""
    rule = f"{DATA} ip6 flowlabel & 0xf == 0 ip6 ecn set ce"
    with endpoints.client(lab4.runtime, "r1h0") as c:
        before = EndpointStats.from_dict(c.stats()).totals.signals.get("ce_marked_rx", 0)
    with nft_at(lab4, "r1h0", rule) as hits:
        on = signalled(lab4, 32 * MiB)
        off = signalled(lab4, 32 * MiB, ecn=False)
    assert on.ok and off.ok, (on.to_dict(), off.to_dict())
    a, b = on.flows[0].result, off.flows[0].result
    assert hits["packets"] > 100
    assert a.sender.ecn_marks + b.sender.ecn_marks == hits["packets"]  # every mark echoed
    with endpoints.client(lab4.runtime, "r1h0") as c:
        seen = EndpointStats.from_dict(c.stats()).totals.signals["ce_marked_rx"] - before
    assert seen == hits["packets"]  # the receiver saw each one (its life-long total)
    assert a.ev_skips_by["ecn"] > 100 and b.ev_skips_by["ecn"] == 0
    assert a.cc == "nscc" and a.signals == ("ecn", "trim") and b.signals == ("trim",)

    def share(r):
        pp = r.sender.per_plane_packets
        return pp[0] / sum(pp.values())

    assert share(a) < min(0.2, share(b) - 0.03), (a.sender.per_plane_packets,
                                                  b.sender.per_plane_packets)


def test_trimmed_packets_are_nacked_and_resent_at_once_without_retiring_evs(lab4):
    """1% of data packets arrive with DSCP 7: trimmed, to the receiver. Each is NAKed
    (NAK_TRIMMED) and resent at once on another EV; no EV retires, no loss is counted.
    With --no-trim the same packets are found as losses, and retire their EVs."""
    rule = f"{DATA} numgen random mod 100 == 0 ip6 dscp set 7"
    with nft_at(lab4, "r1h0", rule) as hits:
        on = signalled(lab4, 32 * MiB)
        off = signalled(lab4, 32 * MiB, cc="delay", ecn=False, trim=False)
    assert on.ok and off.ok, (on.to_dict(), off.to_dict())
    a, b = on.flows[0].result, off.flows[0].result
    assert a.sender.nacks_trimmed + b.sender.trims_ignored == hits["packets"] > 20
    assert a.sender.nacks_trimmed > 0 and a.sender.retransmits >= a.sender.nacks_trimmed
    lost = a.sender.lost_per_ev + a.sender.lost_rack + a.sender.lost_nack \
        + a.sender.lost_timeout
    assert lost <= 2 and a.ev_retirements_total <= 2  # the clean fabric's own, at most
    assert a.ev_skips_by["trim"] > 0
    assert b.sender.nacks_trimmed == 0 and b.cc == "delay" and b.signals == ()
    assert b.ev_retirements_total >= b.sender.trims_ignored // 2
