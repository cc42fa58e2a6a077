"""The fabric signals on real namespaces, on both data planes: an incast of ECT(0)
MRC-like packets queues at shaped switch ports, whose egress programs mark CE and trim,
and the receiving host's decapsulation copies both inward (RFC 6040).

The fabric (one plane, two racks of two hosts, one T1) runs its fabric links slower
than its host links (20 against 25 Mbit/s), so that the incast queues on both tiers:

    r0h0, r0h1 --> t0-p0-r0 --eth3 (20 Mbit/s: marks and trims)--> t1-p0-0 --> t0-p0-r1
    r1h1 ---------------------------------------------------------------------> t0-p0-r1
    t0-p0-r1 --eth1 (25 Mbit/s, the last hop: trims, never marks)--> r1h0

Each sender writes whole IPv6-in-IPv6 packets on a raw AF_INET6/IPPROTO_RAW socket in
its own namespace (twin.mrc.wire.frame, ECT(0) on both headers: UDP 4791, a 4 KiB
RDMA WRITE),
about twice its port's rate for a second. AF_PACKET taps see the frames on the wire at
t1-p0-0's port from t0-p0-r0 (a fabric link) and at r1h0's port (the last hop), and a
UDP socket on r1h0 reads each datagram's inner traffic class from its IPV6_FLOWINFO and
IPV6_TCLASS cmsgs. The receiver binds an address of its own on lo (the endpoint holds
the NIC address's port 4791), inside the lab's NIC prefix, removed again at the end.

Every loop is bounded in packets and in time; traffic goes only to lab addresses.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import pytest

from tests.integration.conftest import lab_name
from twin import faults as F
from twin import nsenter
from twin.fabric.paths import route
from twin.mrc import wire
from twin.node.ebpf import TRIM_DSCP, TRIM_IP_LEN
from twin.verify import run_verify

pytestmark = pytest.mark.netns
LAB = lab_name("test-sig")
SPEC = """\
name: {name}
description: fabric signals test (twin tests/integration/test_fabric_signals.py)
planes: 1
racks: 2
hosts_per_rack: 2
t1_per_plane: 1
mtu: 9000
rate:
  host: 25mbit
  fabric: 20mbit
"""
DATAPLANES = ["seg6local", "ebpf"]  # `lab`: SPEC on each, where the kernel runs it
SENDERS = ("r0h0", "r0h1", "r1h1")
RECEIVER = "r1h0"
SEND_S = 1.2  # each sender's time budget
MAX_PACKETS = 2_500  # each sender's packet budget
PAYLOAD = 4096
ETH_P_ALL = 0x0003
IPV6_TCLASS, IPV6_RECVTCLASS = 67, 66
ECT0, CE = 2, 3


# -- the incast ----------------------------------------------------------------------------

@dataclass
class Tap:
    """Frames seen at one interface: the outer traffic class and IP length of each 6in6
    frame, by outer source address."""

    seen: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def add(self, frame: bytes) -> None:
        if len(frame) < 14 + 40 or frame[12:14] != b"\x86\xdd" or frame[14 + 6] != 41:
            return
        word, plen = struct.unpack_from("!IH", frame, 14)
        src = str(ipaddress.IPv6Address(frame[22:38]))
        self.seen.setdefault(src, []).append(((word >> 20) & 0xFF, 40 + plen))


def _tap(netns: str, dev: str, tap: Tap, stop: threading.Event, ready: threading.Event):
    with nsenter.inside(netns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    with s:
        s.bind((dev, ETH_P_ALL))
        s.settimeout(0.1)
        ready.set()
        deadline = time.monotonic() + SEND_S + 5
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                frame, addr = s.recvfrom(65535)
            except TimeoutError:
                continue
            if addr[2] != socket.PACKET_OUTGOING:
                tap.add(frame)


def _send(netns: str, frames: list[tuple[bytes, str]], sent: list[int]):
    with nsenter.inside(netns):
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    with s:
        deadline = time.monotonic() + SEND_S
        n = 0
        while n < MAX_PACKETS and time.monotonic() < deadline:
            for packet, dst in frames[:8]:  # 8 x 4.2 KB every 5 ms: about 2 x 25 Mbit/s
                try:
                    s.sendto(packet, (dst, 0))
                    n += 1
                except OSError:  # ENOBUFS: the host's own tbf is full
                    pass
            time.sleep(0.005)
        sent.append(n)


def _receive(netns: str, addr: str, got: list[tuple[int, int, int]], stop: threading.Event,
             ready: threading.Event):
    """(traffic class from IPV6_FLOWINFO, from IPV6_TCLASS, UDP payload length) per datagram."""
    with nsenter.inside(netns):
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    with s:
        wire.allow_zero_udp_checksum(s)
        wire.receive_flow_labels(s)
        s.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
        s.bind((addr, wire.ROCE_PORT))
        s.settimeout(0.1)
        ready.set()
        deadline = time.monotonic() + SEND_S + 5
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                data, anc, _, _ = s.recvmsg(65535, 256)
            except TimeoutError:
                continue
            flowinfo = tclass = -1
            for level, kind, raw in anc:
                if level == socket.IPPROTO_IPV6 and kind == wire.IPV6_FLOWINFO:
                    flowinfo = (int.from_bytes(raw[:4], "big") >> 20) & 0xFF
                elif level == socket.IPPROTO_IPV6 and kind == IPV6_TCLASS:
                    tclass = int.from_bytes(raw[:4], "little")
            got.append((flowinfo, tclass, len(data)))


@dataclass
class Incast:
    fabric_tap: Tap  # t1-p0-0's port from t0-p0-r0: what t0-p0-r0's eth3 sent
    last_hop_tap: Tap  # r1h0's port: what t0-p0-r1 sent down the last hop
    received: list[tuple[int, int, int]]
    sent: list[int]
    sources: dict[str, str]  # sender -> its outer source address
    signals: dict[str, dict]  # node -> its ports' signal counters


def run_incast(att) -> Incast:
    fabric, plan, rt = att.fabric, att.plan, att.runtime
    nic = ipaddress.IPv6Address(plan.nic_address(RECEIVER))
    extra = str(nic + 0x100)  # a receiver address of the test's own, in the NIC prefix
    rt.exec(RECEIVER, ["ip", "-6", "address", "add", f"{extra}/128", "dev", "lo"])
    try:
        body = wire.encode_data(dest_qp=0x11, psn=1, va=0x1000, rkey=0x1234,
                                payload=bytes(range(256)) * (PAYLOAD // 256))
        frames, sources = {}, {}
        dst = fabric.node(RECEIVER)
        for host in SENDERS:
            src = fabric.node(host)
            path = route(fabric, src, dst, 0, None if src.rack == dst.rack else 0)
            sources[host] = plan.nic_address(host)
            packet = bytearray(wire.frame(sources[host], path.address, path.ev,
                                          sources[host], extra, body))
            for at in (0, 40):  # ECT(0) outside and inside, as on the endpoint's data
                struct.pack_into("!I", packet, at, struct.unpack_from("!I", packet, at)[0]
                                 | ECT0 << 20)  # (the ICRC masks the inner class out)
            frames[host] = [(bytes(packet), path.address)] * 8
        fabric_tap, last_hop_tap = Tap(), Tap()
        received: list = []
        sent: list[int] = []
        stop = threading.Event()
        t1_port = next(lk.b.ifname for lk in fabric.links
                       if lk.a.node == "t0-p0-r0" and lk.b.node == "t1-p0-0")
        listeners = [
            (_tap, (rt.netns_path("t1-p0-0"), t1_port, fabric_tap)),
            (_tap, (rt.netns_path(RECEIVER), fabric.host_port(0), last_hop_tap)),
            (_receive, (rt.netns_path(RECEIVER), extra, received)),
        ]
        threads = []
        for fn, args in listeners:
            ready = threading.Event()
            threads.append(threading.Thread(target=fn, args=(*args, stop, ready), daemon=True))
            threads[-1].start()
            assert ready.wait(5), f"{fn.__name__} did not start"
        senders = [threading.Thread(target=_send, args=(rt.netns_path(h), frames[h], sent),
                                    daemon=True) for h in SENDERS]
        for t in senders:
            t.start()
        for t in senders:
            t.join(SEND_S + 5)
        time.sleep(0.5)  # what is queued drains: 20 Mbit/s empties 120 KB in 48 ms
        stop.set()
        for t in threads:
            t.join(5)
    finally:
        rt.exec(RECEIVER, ["ip", "-6", "address", "del", f"{extra}/128", "dev", "lo"],
                check=False)
    signals = {n: att.dataplane.signals(rt, n)["ports"] for n in ("t0-p0-r0", "t0-p0-r1",
                                                                   RECEIVER)}
    return Incast(fabric_tap, last_hop_tap, received, sent, sources, signals)


@pytest.fixture(scope="module")
def incast(lab) -> Incast:
    return run_incast(lab)


# -- what the fabric did -------------------------------------------------------------------

def test_every_sender_sent(incast):
    assert len(incast.sent) == len(SENDERS) and min(incast.sent) > 200, incast.sent


def test_a_fabric_link_carries_ce_marks_and_trimmed_packets(incast):
    """t0-p0-r0's uplink queues two 25 Mbit/s senders into 20 Mbit/s: some packets leave
    it CE-marked (ECT(0) -> CE) and some trimmed to 116 bytes of IPv6 with the trim DSCP."""
    frames = [f for host in ("r0h0", "r0h1") for f in
              incast.fabric_tap.seen.get(incast.sources[host], [])]
    assert len(frames) > 100, {k: len(v) for k, v in incast.fabric_tap.seen.items()}
    ce = [f for f in frames if f[0] & 3 == CE]
    trimmed = [f for f in frames if f[0] >> 2 == TRIM_DSCP]
    assert ce, "no CE mark on the fabric link"
    assert trimmed, "no trimmed packet on the fabric link"
    assert TRIM_IP_LEN == 116 and {length for _, length in trimmed} == {116}
    assert all(length > 116 for tc, length in frames if tc >> 2 != TRIM_DSCP)
    assert {tc & 3 for tc, _ in frames} <= {ECT0, CE}  # nothing loses its ECT


def test_the_last_hop_trims_but_never_marks(incast):
    """r1h1's packets cross only t0-p0-r1's host-facing port, the last hop: trimmed
    there when the incast overflows it, never CE-marked."""
    frames = incast.last_hop_tap.seen.get(incast.sources["r1h1"], [])
    assert len(frames) > 100, {k: len(v) for k, v in incast.last_hop_tap.seen.items()}
    assert {tc & 3 for tc, _ in frames} == {ECT0}, "the last hop marked CE"
    assert any(tc >> 2 == TRIM_DSCP and length == 116 for tc, length in frames)


def test_the_receiver_sees_inner_ce_and_the_trim_dscp(incast):
    """After decap (End.DT6 and the ecn program, or the eBPF decap), the inner traffic
    class carries the outer CE and the trim DSCP: in both cmsgs."""
    got = incast.received
    assert len(got) > 100
    assert all(flowinfo == tclass for flowinfo, tclass, _ in got), got[:20]  # cmsgs agree
    ce = [g for g in got if g[1] & 3 == CE]
    trimmed = [g for g in got if g[1] >> 2 == TRIM_DSCP]
    assert ce and trimmed, (len(ce), len(trimmed))
    assert {length for _, _, length in trimmed} == {116 - 80 - 8}  # BTH + RETH
    whole = 12 + 16 + PAYLOAD + 4  # BTH, RETH, the payload, the ICRC
    assert all(length == whole for tc, _, length in got if tc >> 2 != TRIM_DSCP)


def test_the_counters_say_the_same(incast):
    up, down = incast.signals["t0-p0-r0"], incast.signals["t0-p0-r1"]
    uplink = next(p for dev, p in up.items() if dev == "eth3")
    assert uplink["ce_marked"] > 0 and uplink["trimmed"] > 0 and uplink["packets"] > 100
    assert uplink["high_water_bytes"] > 0
    last_hop = down["eth1"]
    assert last_hop["ce_marked"] == 0 and last_hop["trimmed"] > 0
    host = incast.signals[RECEIVER]["eth1"]
    assert host["ce_to_inner"] > 0 and host["trim_to_inner"] > 0
    assert host["drop_ce_not_ect"] == 0


# -- programming: verify, re-programming, the link-rate fault ------------------------------

def egress_filter(att, node: str, dev: str) -> str:
    text = att.runtime.exec(node, ["tc", "-j", "filter", "show", "dev", dev, "egress"]).stdout
    names = [f["options"]["bpf_name"] for f in json.loads(text or "[]")
             if f.get("kind") == "bpf" and "options" in f]
    return names[0] if names else ""


def test_verify_reads_the_queues_back_and_names_a_missing_one(lab, incast):
    assert run_verify(lab.runtime, lab.plan).ok
    lab.runtime.exec("t1-p0-0", ["tc", "filter", "del", "dev", "eth1", "egress", "pref", "100"])
    try:
        report = run_verify(lab.runtime, lab.plan)
        bad = {n.node: n.problems() for n in report.nodes if not n.ok}
        assert bad == {"t1-p0-0": ["missing queue program at eth1 egress (20000000 bit/s)"]}
    finally:
        from twin.lab import phases
        from twin.progress import Steps

        phases.configure(lab.runtime, [lab.plan["t1-p0-0"]], Steps())
    assert run_verify(lab.runtime, lab.plan).ok


def test_a_link_rate_fault_drains_the_queue_at_the_new_rate_until_revert(lab, incast):
    before = lab.dataplane.signals(lab.runtime, "t0-p0-r0")["ports"]["eth3"]
    F.link_rate(lab, "t0-p0-r0:eth3", "5mbit")
    try:
        assert egress_filter(lab, "t0-p0-r0", "eth3") == "mrc-queue 5000000bit"
        after = lab.dataplane.signals(lab.runtime, "t0-p0-r0")["ports"]["eth3"]
        assert after["packets"] >= before["packets"]  # the same map: counts kept
    finally:
        F.clear(lab)
    assert egress_filter(lab, "t0-p0-r0", "eth3") == "mrc-queue 20000000bit"
    assert run_verify(lab.runtime, lab.plan).ok


def test_stats_shows_each_ports_signals(lab, incast):
    from click.testing import CliRunner

    from twin.cli import main

    result = CliRunner().invoke(main, ["stats", "--dataplane", "--lab", lab.lab, "--json"])
    assert result.exit_code == 0, result.output
    signals = json.loads(result.output)["signals"]
    assert signals["t0-p0-r0"]["eth3"]["ce_marked"] > 0
    assert signals[RECEIVER]["eth1"]["trim_to_inner"] > 0
    text = CliRunner().invoke(main, ["stats", "--dataplane", "--lab", lab.lab]).output
    assert "virtual queues" in text and "t0-p0-r0:eth3" in text and "RFC 6040" in text


def test_sid_loss_and_a_restart_leave_the_queues_planned(lab, incast):
    """A sid-loss fault takes the SIDs (routes, or ingress programs), not the queues; its
    revert re-programs the node, keeping the port map's counts. A restarted switch comes
    back with fresh queues. verify passes after each."""
    from twin import lifecycle

    counted = lab.dataplane.signals(lab.runtime, "t0-p0-r1")["ports"]["eth1"]["packets"]
    F.sid_loss(lab, "t0-p0-r1")
    try:
        assert egress_filter(lab, "t0-p0-r1", "eth1") == "mrc-queue 25000000bit"
    finally:
        F.clear(lab)
    assert lab.dataplane.signals(lab.runtime, "t0-p0-r1")["ports"]["eth1"]["packets"] >= counted
    lifecycle.restart(lab, "t1-p0-0")
    assert egress_filter(lab, "t1-p0-0", "eth1") == "mrc-queue 20000000bit"
    assert run_verify(lab.runtime, lab.plan).ok
