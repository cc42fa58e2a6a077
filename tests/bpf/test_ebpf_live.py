"""The eBPF data plane live, in two scratch network namespaces (root only).

    host  twin-ebpftest-<pid>-h          switch  twin-ebpftest-<pid>-s
    fd00::1 on lo                         fd00::2 on lo
    route fd00::2/128 encap bpf  ---h0 == s0---  uN fcbb:bb00:100::/48 on s0
    route fcbb:bb00::/32 via s0                  route fcbb:bb00:1100::/48 via s1
                                            s1 == s2 (a veth pair in the switch)
                                                 decap fcbb:bb00:1100::/48 on s2

A UDP datagram the host's kernel sends to fd00::2 leaves encapsulated towards
the carrier fcbb:bb00:100:1100:: (encap), the switch's uN shifts it to
fcbb:bb00:1100:: and forwards it out s1 (hop limit 63), s2 decapsulates it and
the kernel delivers the inner packet to a socket on fd00::2. AF_PACKET taps on
s0 and s2 see the frames before TC ingress does, so the outer headers are
checked byte for byte (expected ones built here with struct). Static
neighbours and no DAD: nothing waits on NDP. Both namespaces go in a finally;
nothing is pinned, and the programs go with their filters and routes.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from twin.node import ebpf
from twin.node.ebpf import bpf, programs

pytestmark = pytest.mark.netns  # and bpf, as every test here (conftest)

ROOT = Path(__file__).resolve().parents[2]
HOST, SWITCH = f"twin-ebpftest-{os.getpid()}-h", f"twin-ebpftest-{os.getpid()}-s"
MAC = {"h0": "02:00:00:00:00:10", "s0": "02:00:00:00:00:20", "s1": "02:00:00:00:00:21",
       "s2": "02:00:00:00:00:22"}
UN_SID, PORT_SID = "fcbb:bb00:100::/48", "fcbb:bb00:1100::/48"
PATH = "fcbb:bb00:100:1100::"
FLOW_LABEL = 0x5A5A5
PORT = 9999
TIMEOUT_S = 5.0
CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
_libc = ctypes.CDLL(None, use_errno=True)


def sh(*argv: str, ns: str | None = None) -> str:
    cmd = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return done.stdout


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextmanager
def inside(ns: str):
    """This thread in the namespace; sockets opened here stay bound to it."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)


@pytest.fixture
def fabric():
    made = []
    try:
        for ns in (HOST, SWITCH):
            sh("ip", "netns", "add", ns)
            made.append(ns)
            sh("sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0",
               "net.ipv6.conf.default.accept_dad=0", ns=ns)
        sh("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1", ns=SWITCH)
        sh("ip", "-n", HOST, "link", "add", "h0", "address", MAC["h0"], "type", "veth",
           "peer", "name", "s0", "address", MAC["s0"], "netns", SWITCH)
        sh("ip", "-n", SWITCH, "link", "add", "s1", "address", MAC["s1"], "type", "veth",
           "peer", "name", "s2", "address", MAC["s2"])
        for ns, devs in ((HOST, ("lo", "h0")), (SWITCH, ("lo", "s0", "s1", "s2"))):
            for dev in devs:
                sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", HOST, "addr", "add", "fd00::1/128", "dev", "lo")
        sh("ip", "-n", SWITCH, "addr", "add", "fd00::2/128", "dev", "lo")
        sh("ip", "-n", SWITCH, "addr", "add", "fe80::20/64", "dev", "s0", "nodad")
        sh("ip", "-n", SWITCH, "addr", "add", "fe80::22/64", "dev", "s2", "nodad")
        sh("ip", "-n", HOST, "neigh", "add", "fe80::20", "lladdr", MAC["s0"], "dev", "h0",
           "nud", "permanent")
        sh("ip", "-n", SWITCH, "neigh", "add", "fe80::22", "lladdr", MAC["s2"], "dev", "s1",
           "nud", "permanent")
        sh("ip", "-n", HOST, "-6", "route", "add", "fcbb:bb00::/32", "via", "fe80::20",
           "dev", "h0")
        sh("ip", "-n", SWITCH, "-6", "route", "add", "fcbb:bb00:1100::/48", "via", "fe80::22",
           "dev", "s1")
        yield
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


@pytest.fixture
def counters():
    """One counters map per namespace (the tier's `counters`, one map, is not enough
    here)."""
    fds = {ns: ebpf.counters_map(None) for ns in (HOST, SWITCH)}
    yield fds
    for fd in fds.values():
        os.close(fd)


@pytest.fixture
def opened():
    """Sockets a test opens inside the namespaces: closed before the
    namespaces go (an open socket would keep its namespace alive)."""
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def tc_filters(ns: str, dev: str) -> list[dict]:
    shown = json.loads(sh("tc", "-j", "filter", "show", "dev", dev, "ingress", ns=ns) or "[]")
    return [entry["options"] for entry in shown if "options" in entry]


def tap(dev: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind((dev, ETH_P_ALL))
    sock.setblocking(False)
    return sock


def frames(sock: socket.socket, want: int = 1) -> list[bytes]:
    """IPv6-in-IPv6 frames seen on a tap, up to `want`, within TIMEOUT_S."""
    out, deadline = [], time.monotonic() + TIMEOUT_S
    for _ in range(1000):
        left = deadline - time.monotonic()
        if len(out) >= want or left <= 0:
            break
        if not select.select([sock], [], [], left)[0]:
            break
        data, (_, _, pkttype, *_) = sock.recvfrom(65535)
        if pkttype != socket.PACKET_OUTGOING and data[12:14] == b"\x86\xdd" and data[20] == 41:
            out.append(data)
    return out


def outer(src: str, dst: str, payload_len: int, hop_limit: int) -> bytes:
    """The outer IPv6 header we expect, built with struct."""
    return struct.pack("!IHBB", 6 << 28 | FLOW_LABEL, payload_len, 41, hop_limit) \
        + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed


def mac(dev: str) -> bytes:
    return bytes.fromhex(MAC[dev].replace(":", ""))


def test_attach_shows_our_name_id_and_tag_then_detach_removes_it(fabric, counters):
    with inside(SWITCH):
        attached = ebpf.attach("s0", "uN", UN_SID, counters[SWITCH])
        again = ebpf.attach("s0", "uN", UN_SID, counters[SWITCH])  # replaced in place
    assert attached["name"] == "mrc-un fcbb:bb00:100::/48"
    (shown,) = tc_filters(SWITCH, "s0")
    assert shown["bpf_name"] == "mrc-un fcbb:bb00:100::/48"
    assert shown["direct-action"] is True
    assert shown["prog"]["id"] == again["prog_id"] != attached["prog_id"]
    assert shown["prog"]["tag"] == again["tag"] == programs.tag(programs.un(UN_SID, 0))
    with inside(SWITCH):
        ebpf.detach("s0")
        ebpf.detach("s0")  # gone already: fine
        ebpf.detach("s1")  # never had a clsact: fine
    assert tc_filters(SWITCH, "s0") == []


def test_one_program_on_several_ports(fabric, counters):
    with inside(SWITCH):
        fd, tag = ebpf.load("uN", UN_SID, counters[SWITCH])
        try:
            for dev in ("s0", "s1", "s2"):
                ebpf.attach_fd(dev, fd, ebpf.filter_name("uN", UN_SID))
            prog_id = bpf.prog_info(fd).id
        finally:
            os.close(fd)
    for dev in ("s0", "s1", "s2"):
        (shown,) = tc_filters(SWITCH, dev)
        assert (shown["prog"]["id"], shown["prog"]["tag"]) == (prog_id, tag)


def test_encap_un_decap_deliver_a_datagram(fabric, counters, opened):
    payload = b"kernel-originated, through three eBPF programs"
    with inside(SWITCH):
        ebpf.attach("s0", "uN", UN_SID, counters[SWITCH])
        decap = ebpf.attach("s2", "decap", PORT_SID, counters[SWITCH])
        on_s0, on_s2 = tap("s0"), tap("s2")
        receiver = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        opened += [on_s0, on_s2, receiver]
        receiver.bind(("fd00::2", PORT))
        receiver.settimeout(TIMEOUT_S)
    with inside(HOST):
        route = ebpf.add_encap_route("fd00::2", "h0", "fd00::1", PATH, FLOW_LABEL,
                                     counters[HOST])
        sender = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        opened.append(sender)
        sender.bind(("fd00::1", 0))
    shown = json.loads(sh("ip", "-j", "-6", "route", "show", "fd00::2/128", ns=HOST))
    assert shown[0]["encap"] == "bpf" and shown[0]["xmit"] == route["name"]

    sender.sendto(payload, ("fd00::2", PORT))
    got, (src, *_) = receiver.recvfrom(65535)
    assert (got, src) == (payload, "fd00::1")

    inner_len = 40 + 8 + len(payload)
    (at_s0,) = frames(on_s0)
    assert at_s0[:14] == mac("s0") + mac("h0") + b"\x86\xdd"
    assert at_s0[14:54] == outer("fd00::1", PATH, inner_len, 64)
    inner = at_s0[54:]
    assert (len(inner), inner[6], inner[8:40]) == (
        inner_len, 17, ipaddress.IPv6Address("fd00::1").packed
        + ipaddress.IPv6Address("fd00::2").packed)
    assert inner.endswith(payload)
    (at_s2,) = frames(on_s2)
    # shifted by uN, hop limit taken down once by the switch's forwarding
    assert at_s2[:14] == mac("s2") + mac("s1") + b"\x86\xdd"
    assert at_s2[14:54] == outer("fd00::1", "fcbb:bb00:1100::", inner_len, 63)
    assert at_s2[54:] == inner

    assert ebpf.read_counters(route["prog_id"]) == dict.fromkeys(programs.COUNTERS, 0) | {
        "encapsulated": 1}
    switch = ebpf.read_counters(decap["prog_id"])
    assert (switch["shifted"], switch["decapsulated"]) == (1, 1)
    assert sum(switch.values()) == 2

    # the entry point a node runs, in the switch
    report = json.loads(sh(sys.executable, "-m", "twin.node.ebpf", "counters", "--json",
                           ns=SWITCH))
    assert report["s0"]["name"] == "mrc-un fcbb:bb00:100::/48"
    assert report["s2"]["name"] == "mrc-decap fcbb:bb00:1100::/48"
    assert report["s2"]["tag"] == programs.tag(programs.decap(PORT_SID, 0))
    assert (report["counters"]["shifted"], report["counters"]["decapsulated"]) == (1, 1)

    with inside(HOST):
        ebpf.del_route("fd00::2", "h0")
        ebpf.del_route("fd00::2", "h0")  # gone already: fine
    assert sh("ip", "-j", "-6", "route", "show", "fd00::2/128", ns=HOST).strip() in ("", "[]")


def test_a_cut_ipv6_header_is_dropped_as_malformed(fabric, counters, opened):
    # BPF_PROG_TEST_RUN refuses such a frame; a veth delivers it
    with inside(SWITCH):
        attached = ebpf.attach("s0", "uN", UN_SID, counters[SWITCH])
    with inside(HOST):
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        opened.append(raw)
        raw.bind(("h0", 0))
    raw.send(mac("s0") + mac("h0") + b"\x86\xdd"
             + outer("fd00::1", "fcbb:bb00:100:200::", 0, 64)[:20])
    deadline, seen = time.monotonic() + TIMEOUT_S, {}
    while time.monotonic() < deadline:  # poll the counter, bounded
        seen = ebpf.read_counters(attached["prog_id"])
        if seen["drop_malformed"]:
            break
        time.sleep(0.01)
    assert seen["drop_malformed"] == 1 and seen["shifted"] == 0


def test_kernel_tcp_rides_encap_un_decap_with_gso(fabric, counters, opened):
    # a TCP baseline: host -> switch through the three programs; the
    # replies go back as plain IPv6 over s0
    sh("ip", "-n", HOST, "addr", "add", "fe80::10/64", "dev", "h0", "nodad")
    sh("ip", "-n", SWITCH, "neigh", "add", "fe80::10", "lladdr", MAC["h0"], "dev", "s0",
       "nud", "permanent")
    sh("ip", "-n", SWITCH, "-6", "route", "add", "fd00::1/128", "via", "fe80::10", "dev", "s0")
    with inside(SWITCH):
        ebpf.attach("s0", "uN", UN_SID, counters[SWITCH])
        decap = ebpf.attach("s2", "decap", PORT_SID, counters[SWITCH])
        server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        opened.append(server)
        server.bind(("fd00::2", PORT))
        server.listen(1)
        server.settimeout(TIMEOUT_S)
    with inside(HOST):
        route = ebpf.add_encap_route("fd00::2", "h0", "fd00::1", PATH, FLOW_LABEL,
                                     counters[HOST])
        client = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        opened.append(client)
        client.bind(("fd00::1", 0))
        client.settimeout(TIMEOUT_S)
    total, received = 8 << 20, []

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.settimeout(TIMEOUT_S)
            for _ in range(100_000):  # bounded; ends at the client's FIN
                chunk = conn.recv(1 << 20)
                if not chunk:
                    break
                received.append(len(chunk))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client.connect(("fd00::2", PORT))
    # the route's headroom (40) comes off its MTU: 1500 - 40 - 40 - 20 - 12
    assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG) == 1388
    for _ in range(total >> 20):
        client.sendall(b"x" * (1 << 20))
    client.close()
    thread.join(3 * TIMEOUT_S)
    assert sum(received) == total

    sent = ebpf.read_counters(route["prog_id"])["encapsulated"]
    switch = ebpf.read_counters(decap["prog_id"])
    assert switch["shifted"] == switch["decapsulated"] == sent
    assert sent < total // 1388  # GSO packets crossed whole: veth does not segment
