"""Endpoint benchmark: MRC endpoint goodput, CPU/GB, RTT under load and link-failure recovery,
against kernel TCP and raw-socket ceilings on the same path.

On a netns lab shaped like mrc-4p (named bench-ep), cross-rack r0h0 -> r1h0, plane 0 / T1 0:
  blaster   one Python process sends a prebuilt 4 KiB-payload MRC frame (UDP dport patched to a
            counting socket's) from a raw socket in r0h0, one sendto each, as fast as it can;
            a forked process drains it in r1h0. What the kernel path leaves one Python core.
  compiled  the same packets through the endpoint's compiled send path (twin.mrc._fastpath:
            built in C, ICRC included, one sendmmsg per 64): the data path without any
            transport, what the endpoint could reach if its logic cost nothing.
  tcp       kernel TCP, a plain socket pair (4 MiB sendall, 1 MiB recv_into), over temporary
            encap routes on the same uSID paths both ways (removed afterwards), on the lab's
            data plane: `seg6 encap.red`, or a BPF lwt xmit route (twin.dataplane);
            GSO/GRO carry 64 KiB per skb through the routers. tcpi_rtt sampled under load.
  udp-gso   the same routes, a UDP socket sending 15 RoCE-sized (4128-byte) segments per
            sendmsg with UDP_SEGMENT: one 64 KiB skb through the routers per 15 packets.
            Not MRC's wire (one EV for 15 packets, a UDP checksum); it measures what a
            data path carrying several packets per skb would leave.
  goodput   twin.traffic bulk through the endpoint daemons: mrc and single-path on the
            compiled data path with the transport MRC_TWIN_TRANSPORT=auto picks (the compiled
            transport core where it is built), mrc/reference the same with the reference
            Python transport (MRC_TWIN_TRANSPORT=python), mrc/zlib with the ICRC by zlib
            instead of ISA-L (MRC_TWIN_ICRC=zlib), and mrc/python on the pure-Python data path
            (MRC_TWIN_DATAPATH=python; the two endpoints restarted for each, with all three
            variables set). Each row records what its endpoints said they ran (hello:
            datapath, icrc, and transport once they report it). srtt is the sender's, at the
            end: under load.
  CPU/GB    utime+stime of both processes (endpoints: between the first and last goodput
            sample) per GB delivered; the switches' softirq forwarding is billed to the task it
            interrupts.
  recovery  a 256 MiB bulk whose T0-T1 link goes down at 0.4 s (mrc: t0-p0-r0:eth3; single-path:
            the uplink of its one path): detection and repair µs from the QPs' event logs
            (twin.failover), Run.recovery_s, how low goodput fell, retransmits, EV retirements;
            single-path's outcome (retry limit, or a stall cut at STALL_S); mrc/reference
            beside mrc, so the two transports' repair is compared in one run.
  all-to-all  after that lab is down, a second one shaped like mrc-8p (bench-ep-a2a: 8
            planes, 4 racks x 4 hosts, 4 T1s; 16 hosts, 64 routers), up once, round-robin:
            16 compiled blasters at once, one process per host, all pairs rotating (packet k
            of a host goes to the next destination, plane and T1 in turn: every host sends
            to and receives from every other equally, sprayed as MRC sprays; each sends
            what its MRC flows carry), a drain per host counting, aggregate received
            Gbit/s over one window (first packet anywhere to last); against twin.traffic's
            all-to-all in mode mrc (240 flows; goodput = all bytes / the run's elapsed
            time; byte-exact or not). CPU s/GB is summed over every process (blasters and
            drains; the 16 endpoints), 16 hosts sharing the 2 cores, unpinned.
Side by side in one run, round-robin (the modes swap order every repetition), so drift on the
noisy 2-core machine hits the ceiling and both modes alike and ratios within the run mean
something. Every sender (blasters, TCP and GSO clients, r0h0's endpoint) is pinned to the first
CPU and every receiver to the second, so placement is the same for all (--no-pin: the
scheduler's). Medians (min-max). Private dirs, spec, tables, machine facts: bench_lab's. Exits 1
if a fault-free transfer or mrc's recovery did not finish byte-exact.
Usage: .venv/bin/python bench/bench_endpoint.py [--repeat N] [--quick] [--no-pin]
       [--no-all-to-all]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import endpoints, lab, lifecycle, nsenter
from twin import faults as F
from twin import traffic as T
from twin.errors import CommandFailed, LabError
from twin.fabric import paths as P
from twin.fabric.plan import nic_address
from twin.faults import timeline as FT
from twin.mrc import wire
from twin.mrc.loop import load_datapath
from twin.runtime.netns import list_netns, pids_in
from twin.state import known_labs

RESULTS = Path(__file__).resolve().parent / "results" / "endpoint.json"
NAME, SHAPE, SRC, DST = "bench-ep", (4, 2, 2, 2), "r0h0", "r1h0"
A2A_NAME, A2A_SHAPE = "bench-ep-a2a", (8, 4, 4, 4)  # mrc-8p: planes, racks, hosts, T1s
# transport mode / endpoint variant (compiled data path, ICRC by ISA-L where it loads, the
# transport MRC_TWIN_TRANSPORT=auto picks, unless named): reference is MRC_TWIN_TRANSPORT=python
# (the reference Python transport), zlib the compiled path with MRC_TWIN_ICRC=zlib, python the
# pure-Python data path (endpoint_env)
MODES = ("mrc", "single-path", "mrc/reference", "mrc/zlib", "mrc/python")
TCP_PORT, TCP_CHUNK, TCP_INFO_RTT = 5201, 4 * (1 << 20), 68  # tcp_info.tcpi_rtt offset (µs)
GSO_PORT, GSO_SEGMENTS, UDP_SEGMENT = 4793, 15, 103  # 15 x 4128 B: one 64 KiB skb
# --pin (the default on 2+ cores): every sender on CPU 0, every receiver on CPU 1, so each
# measurement gets the same placement (the sender's softirq forwarding follows it)
PIN: dict[str, set[int]] = {}


def pin(role: str, pid: int = 0) -> None:
    """Put a process (0: this one) on its role's CPU, when pinning."""
    if role in PIN:
        os.sched_setaffinity(pid, PIN[role])
MiB, TICK, SO_RCVBUFFORCE, BLAST_PORT = 1 << 20, os.sysconf("SC_CLK_TCK"), 33, 4792  # not 4791
FAULT_AT, STALL_S, SETTLE_S, RECOVERY_BYTES = 0.4, 15.0, 1.0, 256 * MiB


def cpu_s(pids: list[int]) -> float:
    """utime + stime (fields 14 and 15 of proc_pid_stat(5)) of these processes, in seconds."""
    stats = (Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split() for p in pids)
    return sum(int(f[11]) + int(f[12]) for f in stats) / TICK


def _drain(sock: socket.socket, conn) -> None:
    """Child: count datagrams until the parent says stop and 0.2 s pass without one."""
    sock.settimeout(0.2)
    buf, n, first, last, c0 = bytearray(wire.MAX_FRAME), 0, 0.0, 0.0, cpu_s([os.getpid()])
    pin("recv")
    conn.send("ready")
    while True:
        try:
            sock.recv_into(buf)
        except TimeoutError:
            if conn.poll():
                break
        else:
            last = time.perf_counter()
            first, n = first or last, n + 1
    conn.send((n, first, last, cpu_s([os.getpid()]) - c0))


def blast_frame(fab, src: str, dst: str, plane: int, t1: int | None):
    """A 4 KiB-payload MRC data frame src -> dst on one path (t1 None: through the T0
    only), its UDP port patched to BLAST_PORT (a counting socket's): (head, ICRC seed,
    the whole frame, the path's address)."""
    a, b = fab.node(src), fab.node(dst)
    s_nic, d_nic, path = str(nic_address(fab, a)), str(nic_address(fab, b)), P.route(
        fab, a, b, plane, t1)
    tpl = wire.DataTemplate(s_nic, path.address, s_nic, d_nic, path.ev, 1, 0)
    head, seed = tpl.head(wire.MTU, False)
    dport = 2 * wire.IP6.size + 2  # the ICRC does not mask it: the drain's own port
    head = head[:dport] + BLAST_PORT.to_bytes(2, "big") + head[dport + 2:]
    return head, seed, head + tpl.build(0, 0, bytes(wire.MTU))[len(head):], path.address


def _blast(att, count: int, limit_s: float, sender) -> dict:
    """Send `count` 4 KiB-payload packets SRC -> DST on plane 0 / T1 0 (UDP port patched
    to a counting socket's in DST, drained by a forked process) for at most limit_s.
    `sender(tx, head, seed, frame, path)` returns send(n) -> packets the kernel took."""
    fab, rt = att.fabric, att.runtime
    d_nic = str(nic_address(fab, fab.node(DST)))
    head, seed, frame, path = blast_frame(fab, SRC, DST, 0, 0)
    with nsenter.inside(rt.netns_path(DST)):
        rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        wire.allow_zero_udp_checksum(rx)
        rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
        rx.bind((d_nic, BLAST_PORT))
    with nsenter.inside(rt.netns_path(SRC)):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    send = sender(tx, head, seed, frame, path)
    parent, child = multiprocessing.Pipe()
    proc = multiprocessing.get_context("fork").Process(target=_drain, args=(rx, child))
    me, sent, home = [os.getpid()], 0, os.sched_getaffinity(0)
    try:
        proc.start()
        parent.recv()
        pin("send")
        c0, t0 = cpu_s(me), time.perf_counter()
        while sent < count and time.perf_counter() < t0 + limit_s:
            sent += send(min(64, count - sent))
        send_s, tx_cpu = time.perf_counter() - t0, cpu_s(me) - c0
        os.sched_setaffinity(0, home)
        parent.send("stop")
        got, first, last, rx_cpu = parent.recv()
    finally:
        proc.join(5)
        tx.close()
        rx.close()
    recv_s, gb = max(last - first, 1e-9), wire.MTU / 1e9
    return {"sent": sent, "received": got, "send_s": send_s, "sent_pps": sent / send_s,
            "received_pps": got / recv_s, "loss": 1 - got / max(sent, 1),
            "gbps": got * wire.MTU * 8 / recv_s / 1e9, "tx_cpu_s_per_gb": tx_cpu / (sent * gb),
            "rx_cpu_s_per_gb": rx_cpu / max(got * gb, 1e-9)}


def blast(att, count: int, limit_s: float) -> dict:
    """The prebuilt frame, one sendto each, from Python."""
    def sender(tx, _head, _seed, frame, path):
        def send(n: int) -> int:
            for _ in range(n):
                tx.sendto(frame, (path, 0))
            return n
        return send
    return _blast(att, count, limit_s, sender)


def blast_compiled(att, count: int, limit_s: float) -> dict:
    """The same packets through the compiled send path: built in C, one sendmmsg per 64."""
    fast, why = load_datapath("auto")
    if fast is None:
        return {"unavailable": why}
    payload = bytes(wire.MTU)

    def sender(tx, head, seed, _frame, _path):
        batch = fast.TxBatch(tx.fileno(), 64)

        def send(n: int) -> int:
            for i in range(n):
                batch.data(head, seed, i, 0, 0, payload, None, None)
            return n - len(batch.flush())
        return send
    return _blast(att, count, limit_s, sender)


def _a2a_drain(sock: socket.socket, conn) -> None:
    """Child: _drain, unpinned (all-to-all hosts both send and receive: the scheduler
    places them, as it does the endpoints)."""
    PIN.clear()
    _drain(sock, conn)


def _a2a_send(tx: socket.socket, heads: list, count: int, limit_s: float, go, conn) -> None:
    """Child: once `go` is set, send `count` packets for at most limit_s through the
    compiled send path (one sendmmsg per 64), packet k on heads[k % len(heads)]: every
    destination, plane and T1 in turn. Reports (sent, seconds, CPU seconds)."""
    fast, _ = load_datapath("auto")
    batch, payload, sent, k = fast.TxBatch(tx.fileno(), 64), bytes(wire.MTU), 0, 0
    conn.send("ready")
    go.wait()
    c0, t0 = cpu_s([os.getpid()]), time.perf_counter()
    while sent < count and time.perf_counter() < t0 + limit_s:
        n = min(64, count - sent)
        for i in range(k, k + n):
            head, seed = heads[i % len(heads)]
            batch.data(head, seed, i, 0, 0, payload, None, None)
        k += n
        sent += n - len(batch.flush())
    conn.send((sent, time.perf_counter() - t0, cpu_s([os.getpid()]) - c0))


def a2a_heads(fab, src: str, hosts: list[str]) -> list:
    """src's blaster frames, one per (T1, plane, destination), destinations innermost: all
    pairs rotating packet by packet, each sprayed over every plane and (across racks) every
    T1, as MRC sprays; same-rack destinations through their T0 only."""
    out = []
    for t1 in range(fab.spec.t1_per_plane):
        for plane in fab.nic_planes:
            for dst in hosts:
                if dst != src:
                    same = fab.node(src).rack == fab.node(dst).rack
                    out.append(blast_frame(fab, src, dst, plane, None if same else t1)[:2])
    return out


def blast_all_to_all(att, hosts: list[str], count: int, limit_s: float) -> dict:
    """Every host a compiled blaster at once (one process each, `count` packets or
    limit_s), all pairs rotating (a2a_heads): each host sends to and receives from every
    other equally. A drain process per host counts what arrives. Aggregate received
    payload Gbit/s over the one window from the first packet received anywhere to the
    last; CPU is every sender's and drain's, summed."""
    fast, why = load_datapath("auto")
    if fast is None:
        return {"unavailable": why}
    fab, rt, ctx = att.fabric, att.runtime, multiprocessing.get_context("fork")
    heads = {h: a2a_heads(fab, h, hosts) for h in hosts}
    socks: list[socket.socket] = []
    procs: list = []
    go = ctx.Event()
    try:
        drains, senders = [], []
        for h in hosts:
            with nsenter.inside(rt.netns_path(h)):
                rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
                tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
            socks += [rx, tx]
            wire.allow_zero_udp_checksum(rx)
            rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
            rx.bind((str(nic_address(fab, fab.node(h))), BLAST_PORT))
            for target, args, ends in ((_a2a_drain, (rx,), drains),
                                       (_a2a_send, (tx, heads[h], count, limit_s, go), senders)):
                parent, child = multiprocessing.Pipe()
                procs.append(proc := ctx.Process(target=target, args=(*args, child)))
                proc.start()
                ends.append(parent)
        for conn in drains + senders:
            if not conn.poll(30):
                return {"unavailable": "a blaster or drain did not start in 30 s"}
            conn.recv()
        go.set()
        sent = []
        for conn in senders:
            if not conn.poll(limit_s + 60):
                return {"unavailable": f"a blaster did not finish in {limit_s + 60:.0f} s"}
            sent.append(conn.recv())
        for conn in drains:
            conn.send("stop")
        got = [conn.recv() for conn in drains if conn.poll(30)]
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
        for sock in socks:
            sock.close()
    packets, sent_n = sum(g[0] for g in got), sum(x[0] for x in sent)
    first = min((g[1] for g in got if g[0]), default=0.0)
    window = max((g[2] for g in got if g[0]), default=0.0) - first
    tx_cpu, rx_cpu, gb = sum(x[2] for x in sent), sum(g[3] for g in got), wire.MTU / 1e9
    return {"hosts": len(hosts), "pattern": "all pairs rotating, every plane and T1",
            "sent": sent_n, "received": packets, "loss": 1 - packets / max(sent_n, 1),
            "window_s": window, "gbps": packets * wire.MTU * 8 / max(window, 1e-9) / 1e9,
            "per_host_received": [g[0] for g in got],
            "tx_cpu_s_per_gb": tx_cpu / max(sent_n * gb, 1e-9),
            "rx_cpu_s_per_gb": rx_cpu / max(packets * gb, 1e-9),
            "cpu_s_per_gb": (tx_cpu + rx_cpu) / max(packets * gb, 1e-9)}


def mrc_all_to_all(att, hosts: list[str], size: int) -> dict:
    """twin.traffic's all-to-all (every ordered host pair a flow of `size` bytes) in mode
    mrc through the hosts' endpoints: aggregate goodput as the run measures it (every
    flow's bytes over its elapsed time, from before the first write is posted until the
    last flow is idle: posting 240 writes to busy endpoints is part of it), whether every
    flow arrived byte-exact, and the endpoints' CPU over that same span (all of them,
    summed; a thread samples it every 10 ms, so registering and hashing are left out)."""
    rt = att.runtime
    found = pids_in([rt.netns_path(h) for h in hosts])
    pids = [p for h in hosts for p in found[rt.netns_path(h)]]
    flows = T.flows_for("all-to-all", hosts, size)
    cpu: list[tuple[float, float]] = []  # (CLOCK_MONOTONIC s, CPU s of every endpoint)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            cpu.append((time.monotonic(), cpu_s(pids)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        run = T.run(rt, "all-to-all", flows, "mrc", timeout_s=300.0)
    except LabError as e:
        return {"outcome": f"failed: {e}", "flows": len(flows), "exact": False}
    finally:
        stop.set()
        sampler.join()
    start = run.start_us / 1e6

    def at(t: float) -> float:  # the last sample by t
        return next((c for s, c in reversed(cpu) if s <= t), cpu[0][1])

    total = sum(f.size for f in flows)
    used = at(start + run.elapsed_s) - at(start)
    return {"outcome": "done" if run.ok else "failed", "flows": len(flows),
            "flow_bytes": size, "bytes": total, "elapsed_s": run.elapsed_s,
            "exact": all(f.exact for f in flows),
            "failed_flows": sum(1 for f in flows if not f.exact or (
                f.result is not None and f.result.failed)),
            "gbps": total * 8 / run.elapsed_s / 1e9,
            "flow_gbps_median": statistics.median(
                f.result.goodput_gbps or 0.0 for f in flows if f.result is not None),
            "retransmits": sum(f.result.sender.retransmits for f in flows
                               if f.result is not None),
            "cpu_s": used, "cpu_s_per_gb": used / (total / 1e9)}


def _tcp_server(ns: str, addr: str, conn) -> None:
    """Child: accept one connection in DST, count what arrives until EOF."""
    with nsenter.inside(ns):
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, TCP_PORT))
    pin("recv")
    s.listen(1)
    s.settimeout(10)
    conn.send("ready")
    c, _ = s.accept()
    c0, buf, n, first, last = cpu_s([os.getpid()]), bytearray(1 << 20), 0, 0.0, 0.0
    while k := c.recv_into(buf):
        n, last = n + k, time.perf_counter()
        first = first or last
    c.close()
    s.close()
    conn.send((n, first, last, cpu_s([os.getpid()]) - c0))


def _tcp_client(ns: str, src: str, dst: str, size: int, conn) -> None:
    """Child: connect from SRC, send `size` bytes, sample tcpi_rtt after every chunk."""
    with nsenter.inside(ns):
        c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    c.bind((src, 0))
    c.settimeout(30)
    pin("send")
    c.connect((dst, TCP_PORT))
    data, rtts, sent, c0 = bytes(TCP_CHUNK), [], 0, cpu_s([os.getpid()])
    while sent < size:
        c.sendall(data)
        sent += len(data)
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        rtts.append(int.from_bytes(info[TCP_INFO_RTT:TCP_INFO_RTT + 4], "little"))
    c.shutdown(socket.SHUT_WR)
    c.recv(1)  # the server's close: everything arrived
    c.close()
    conn.send((sent, cpu_s([os.getpid()]) - c0, rtts))


def _encap_routes(att) -> list[dict]:
    """The encap routes for TCP between SRC and DST on plane 0 / T1 0, both ways: the same
    uSID paths the endpoints and the blasters use, without an SRH (H.Encaps.Red), on the
    lab's data plane (twin.dataplane: a seg6 route, or a BPF lwt xmit route)."""
    fab, out = att.fabric, []
    for me, peer in ((SRC, DST), (DST, SRC)):
        a, b = fab.node(me), fab.node(peer)
        out.append({"node": me, "dst": str(nic_address(fab, b)), "dev": fab.host_port(0),
                    "src": str(nic_address(fab, a)),
                    "path": P.route(fab, a, b, 0, 0).address})
    return out


def _gso_server(ns: str, addr: str, conn) -> None:
    """Child: count UDP payload bytes on DST until 1 s passes without one."""
    with nsenter.inside(ns):
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 64 << 20)
    s.bind((addr, GSO_PORT))
    pin("recv")
    s.settimeout(1.0)
    conn.send("ready")
    c0, buf, n, first, last = cpu_s([os.getpid()]), bytearray(1 << 16), 0, 0.0, 0.0
    try:
        while True:
            n += s.recv_into(buf)
            last = time.perf_counter()
            first = first or last
    except TimeoutError:
        pass
    s.close()
    conn.send((n, first, last, cpu_s([os.getpid()]) - c0))


def _gso_client(ns: str, src: str, dst: str, size: int, conn) -> None:
    """Child: send `size` bytes as UDP GSO super-packets of GSO_SEGMENTS RoCE-sized
    segments: one skb through the routers for every GSO_SEGMENTS packets."""
    with nsenter.inside(ns):
        c = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    c.bind((src, 0))
    pin("send")
    seg = wire.MTU + wire.DATA_OVERHEAD  # a RoCE WRITE's UDP payload
    data, sent, c0 = bytes(seg * GSO_SEGMENTS), 0, cpu_s([os.getpid()])
    cmsg = [(socket.IPPROTO_UDP, UDP_SEGMENT, seg.to_bytes(2, sys.byteorder))]
    while sent < size:
        try:
            sent += c.sendmsg([data], cmsg, 0, (dst, GSO_PORT))
        except OSError:  # ENOBUFS under a full queue: what UDP does, counted as loss
            time.sleep(0.0001)
    c.close()
    conn.send((sent, cpu_s([os.getpid()]) - c0, []))


def kernel_pair(att, size: int, kind: str) -> dict:
    """Kernel TCP, or UDP GSO, SRC -> DST over temporary encap routes on the same
    uSID paths, removed afterwards."""
    rt, fab = att.runtime, att.fabric
    server_fn, client_fn = {"tcp": (_tcp_server, _tcp_client),
                            "udp-gso": (_gso_server, _gso_client)}[kind]
    if kind == "udp-gso" and att.dataplane.encap_refuses_udp_gso:
        return {"unavailable": f"{att.dataplane.name} encap: "
                               f"{att.dataplane.encap_refuses_udp_gso}"}
    routes, added = _encap_routes(att), []
    try:
        for route in routes:
            try:
                att.dataplane.add_encap(rt, **route)
            except CommandFailed as e:
                return {"unavailable": f"{att.dataplane.name} encap route on {route['node']}: "
                                       f"{e.stderr}"}
            added.append(route)
        ctx = multiprocessing.get_context("fork")
        sp, sc = multiprocessing.Pipe()
        cp, cc = multiprocessing.Pipe()
        server = ctx.Process(target=server_fn, args=(
            rt.netns_path(DST), str(nic_address(fab, fab.node(DST))), sc))
        client = ctx.Process(target=client_fn, args=(
            rt.netns_path(SRC), str(nic_address(fab, fab.node(SRC))),
            str(nic_address(fab, fab.node(DST))), size, cc))
        server.start()
        if not sp.poll(10):
            return {"unavailable": f"the {kind} receiver did not start"}
        sp.recv()
        client.start()
        try:
            if not cp.poll(120) or not sp.poll(10):
                return {"unavailable": f"the {kind} transfer did not finish in 120 s"}
            sent, tx_cpu, rtts = cp.recv()
            got, first, last, rx_cpu = sp.recv()
        finally:
            for proc in (client, server):
                proc.join(5)
                if proc.is_alive():
                    proc.kill()
    finally:
        for route in added:
            att.dataplane.del_encap(rt, route["node"], route["dst"], route["dev"])
    gb, secs = max(got, 1) / 1e9, max(last - first, 1e-9)
    return {"sent": sent, "received": got, "loss": 1 - got / max(sent, 1),
            "gbps": got * 8 / secs / 1e9, "elapsed_s": secs,
            "tx_cpu_s_per_gb": tx_cpu / (sent / 1e9), "rx_cpu_s_per_gb": rx_cpu / gb,
            "rtt_us": statistics.median(rtts) if rtts else None,
            "rtt_us_max": max(rtts) if rtts else None}


# the endpoints' environment (twin.mrc.loop, and the transport core's selector): each is
# always set while endpoints start, and put back as it was afterwards
ENDPOINT_ENV = ("MRC_TWIN_DATAPATH", "MRC_TWIN_ICRC", "MRC_TWIN_TRANSPORT")
HELLO_FACTS = ("datapath", "icrc", "transport")  # transport: once the endpoint says it


def endpoint_env(mode: str) -> tuple[str, str]:
    """(data path, transport) a goodput mode's endpoints run: the mode's suffix names the
    data path (python, or zlib: the compiled one with its ICRC by zlib) or, for
    "reference", the reference Python transport on the compiled data path."""
    suffix = mode.partition("/")[2]
    if suffix == "reference":
        return "auto", "python"
    return suffix or "auto", "auto"


def restart_endpoints(att, datapath: str, transport: str = "auto") -> dict:
    """Restart SRC's and DST's endpoints on this data path (auto, python, or zlib: the
    compiled one with its ICRC by zlib) and transport (MRC_TWIN_TRANSPORT: auto,
    compiled, python; no effect where the endpoint has one transport); their new pids."""
    rt = att.runtime
    for pid in pids_in([rt.netns_path(h) for h in (SRC, DST)]).values():
        for p in pid:
            try:
                os.kill(p, 15)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while any(pids_in([rt.netns_path(h) for h in (SRC, DST)]).values()) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    saved = {k: os.environ.get(k) for k in ENDPOINT_ENV}
    os.environ.update(zip(ENDPOINT_ENV, ("auto" if datapath == "zlib" else datapath,
                                         "zlib" if datapath == "zlib" else "auto", transport),
                          strict=True))
    try:
        endpoints.start(rt, [SRC, DST])  # their environment is ours
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    found = pids_in([rt.netns_path(h) for h in (SRC, DST)])
    pids = {h: found[rt.netns_path(h)] for h in (SRC, DST)}
    for host, role in ((SRC, "send"), (DST, "recv")):
        for pid in pids[host]:
            pin(role, pid)
    return pids


def hello_facts(rt, hosts: list[str]) -> dict:
    """What each endpoint says it runs (its `hello`): data path, ICRC and, once the
    endpoint reports it, transport; only the fields it sends."""
    out = {}
    for h in hosts:
        with endpoints.client(rt, h) as c:
            hello = c.hello()
            said = hello if "transport" in hello else {**c.stats(), **hello}  # or stats'
        out[h] = {k: said[k] for k in HELLO_FACTS if k in said}
    return out


def transfer(att, pids: dict, mode: str, size: int, fault: bool = False) -> dict:
    """One bulk SRC -> DST; with `fault`, the T0-T1 link on its path goes down at FAULT_AT.
    `mode` is a transport mode, with "/python" when the endpoints run that data path."""
    fab, flows, label, mode = att.fabric, T.flows_for("bulk", [], size, SRC, DST), mode, \
        mode.split("/")[0]
    marks: list[tuple] = []  # (t, acked, sender cpu, receiver cpu, monotonic)
    cuts: list[dict] = []  # what traffic.run records, kept here for the stall

    def cut() -> str:
        plane, t1 = 0, 0
        if mode == "single-path":
            plane, t1, _ = P.parse_path(fab, flows[0].result.single_path)
        end = f"{fab.t0_name(plane, fab.node(SRC).rack)}:{fab.t0_uplink(t1)}"
        F.link_down(att, end)
        cuts.append({"t_s": time.monotonic() - marks[-1][4] + marks[-1][0],
                     "t_us": time.monotonic_ns() // 1000, "what": f"link-down {end}"})
        return cuts[-1]["what"]

    outcome = "done"
    try:
        timeline = FT.Timeline([FT.Scheduled("link-down", "", cut, (
            (int(FAULT_AT * 1e9), False),))]) if fault else None  # reverted below (F.clear)
        run = T.run(att.runtime, "bulk", flows, mode, timeline=timeline,
                    progress=lambda a, _n, t: marks.append((t, a, cpu_s(pids[SRC]),
                                                             cpu_s(pids[DST]), time.monotonic())),
                    timeout_s=STALL_S if fault and mode != "mrc" else 120.0)
        if not run.ok:
            outcome = f"failed: {flows[0].result.failed or 'digest mismatch'}"
    except LabError as e:  # the stall: traffic.run gave up, so close the QPs ourselves
        outcome = f"stalled: {e}"
        run = T.Run("bulk", mode, flows, [m[:2] for m in marks], faults=cuts,
                    elapsed_s=marks[-1][0])
        for host, qpn in ((SRC, flows[0].send_qpn), (DST, flows[0].recv_qpn)):
            with endpoints.client(att.runtime, host) as c:
                c.close_qp(qpn)
    finally:
        if fault:
            F.clear(att)
    r = flows[0].result.to_dict() if flows[0].result is not None else {}  # typed since d12a602
    (_, a0, s0, d0, _), (_, a1, s1, d1, _) = marks[0], marks[-1]
    gb = max(a1 - a0, 1) / 1e9
    out = {"mode": label, "fault": fault, "outcome": outcome, "elapsed_s": run.elapsed_s,
           "goodput_gbps": r.get("goodput_gbps"), "acked_mib": a1 / MiB,
           "srtt_us": r.get("srtt_us"),
           "retransmits": r.get("sender", {}).get("retransmits"), "evs": r.get("evs"),
           "ev_retirements": r.get("ev_retirements_total"),
           "ev_revivals": r.get("ev_revivals_total"),
           "sender_cpu_s_per_gb": (s1 - s0) / gb, "receiver_cpu_s_per_gb": (d1 - d0) / gb}
    if fault and not run.faults:
        out["outcome"] = "no fault: the flow ended first"
    elif fault:  # the level recovery_s compares against, and how low goodput fell
        at, series = run.faults[0]["t_s"], run.goodput_series()
        level = statistics.mean([g for t, g in series if at - 0.5 <= t < at] or [0.0])
        low = min((g for t, g in series if at <= t < at + 1.0), default=0.0)
        episode = next((e for e in run.failover() if e.fault), None)
        out.update(event=cuts[0]["what"], fault_at=at, recovery_s=run.recovery_s(at),
                   prefault_gbps=level, min_vs_prefault=low / level if level else None,
                   detection_us=episode.detection_us if episode else None,
                   repair_us=episode.repair_us if episode else None)
    else:
        out["spurious_retirements"] = r.get("ev_retirements_total")
    return out


def stats(xs: list, key: str) -> dict:
    v = [x[key] for x in xs if x.get(key) is not None]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else {}


def fmt(xs: list, key: str, nd: int = 2, key2: str = "") -> str:
    """median (min–max) of one key; with key2, "a / b" of two."""
    if key2:
        return f"{fmt(xs, key, nd)} / {fmt(xs, key2, nd)}"
    s = stats(xs, key)
    m, lo, hi = (f"{s[k]:,.{nd}f}" for k in ("median", "min", "max")) if s else ("-",) * 3
    return m if lo == hi else f"{m} ({lo}–{hi})"


def kind(outcome: str) -> str:
    return "retry limit" if "retry limit" in outcome else outcome.split(":")[0]


RECOVERY_MODES = ("mrc", "mrc/reference", "single-path")


def report(res: dict) -> tuple[str, dict]:
    bl, cb, tc, gs, bulk, rec = (res[k] for k in ("blast", "compiled", "tcp", "gso", "bulk",
                                                  "recovery"))

    def ran(xs: list) -> str:
        """The transport its endpoints said they ran, once they say it."""
        said = sorted({e["transport"] for x in xs for e in x.get("endpoint", {}).values()
                       if "transport" in e})
        return f"; transport {'/'.join(said)}" if said else ""

    cb, tc, gs = ([x for x in xs if "gbps" in x] for xs in (cb, tc, gs))

    def ceiling(name: str, xs: list, rtt: str = "-") -> list:
        return [name, fmt(xs, "sent_pps", 0, "received_pps") if "sent_pps" in (xs or [{}])[0]
                else "-", fmt(xs, "gbps"), fmt(xs, "tx_cpu_s_per_gb", 2, "rx_cpu_s_per_gb"),
                rtt, f"loss {fmt(xs, 'loss', 4)}" if xs and "loss" in xs[0] else "-"]

    t1 = B.markdown(
        ["measurement", "pps sent / received", "Gbit/s payload", "CPU s/GB send / recv",
         "RTT under load µs", "loss or retransmits"],
        [ceiling(f"kernel TCP ({res['dataplane']} encap, GSO)", tc, fmt(tc, "rtt_us", 0)),
         ceiling(f"UDP GSO, {GSO_SEGMENTS} RoCE-sized packets per skb (not MRC's wire)", gs),
         ceiling("compiled blaster (data path, no transport)", cb),
         ceiling("Python blaster", bl)]
        + [[f"endpoint {m}" + {"": " (compiled)", "zlib": " (compiled, ICRC by zlib)",
                                "reference": " (compiled data path, reference transport)"}.get(
            m.partition("/")[2], "") + ran(x), "-",
            fmt(x, "goodput_gbps"), fmt(x, "sender_cpu_s_per_gb", 2, "receiver_cpu_s_per_gb"),
            fmt(x, "srtt_us", 0), f"retx {fmt(x, 'retransmits', 0)}"] for m, x in bulk.items()])
    t2 = B.markdown(
        ["mode", "outcomes", "pre-fault Gbit/s", "detection µs", "repair µs",
         "recovery s (90%)", "lowest / pre-fault", "retransmits", "EV retirements",
         "acked MiB", "elapsed s"],
        [[m, ", ".join(f"{k} x{n}" for k, n in Counter(kind(r["outcome"]) for r in x).items()),
          fmt(x, "prefault_gbps"), fmt(x, "detection_us", 0), fmt(x, "repair_us", 0),
          *(fmt(x, k) for k in ("recovery_s", "min_vs_prefault")),
          *(fmt(x, k, 0) for k in ("retransmits", "ev_retirements", "acked_mib")),
          fmt(x, "elapsed_s")] for m, x in rec.items()])
    med = {m: stats(x, "goodput_gbps").get("median") for m, x in bulk.items()}
    cpu = {m: [stats(x, f"{k}_cpu_s_per_gb").get("median") for k in ("sender", "receiver")]
           for m, x in bulk.items()} | {
        name: [stats(xs, f"{k}_cpu_s_per_gb").get("median") for k in ("tx", "rx")]
        for name, xs in (("blaster", bl), ("compiled", cb), ("tcp", tc), ("gso", gs))}
    gbps = {name: stats(xs, "gbps").get("median") for name, xs in
            (("blaster", bl), ("compiled", cb), ("tcp", tc), ("gso", gs))}

    def ratio(a, b):
        return a / b if a is not None and b else None

    def total(name):
        return sum(cpu[name]) if all(v is not None for v in cpu[name]) else None

    ratios = {
        "mrc_goodput_vs_tcp (goal >= 0.5)": ratio(med["mrc"], gbps["tcp"]),
        "mrc_goodput_vs_python_blaster (goal >= 1.0)": ratio(med["mrc"], gbps["blaster"]),
        "mrc_cpu_per_gb_vs_tcp (send+recv; goal <= 1.5)": ratio(total("mrc"), total("tcp")),
        "compiled_blaster_vs_tcp (one 4 KiB packet per skb, no transport)":
            ratio(gbps["compiled"], gbps["tcp"]),
        "udp_gso_vs_tcp (RoCE-sized packets, 15 per skb)": ratio(gbps["gso"], gbps["tcp"]),
        "mrc_goodput_vs_compiled_blaster (goal >= 0.9)": ratio(med["mrc"], gbps["compiled"]),
        "mrc_cpu_per_gb_vs_compiled_blaster send/recv (goal <= 1.25 / 1.5)": [
            ratio(x, y) for x, y in zip(cpu["mrc"], cpu["compiled"], strict=True)],
        "mrc_repair_us_median (goal <= 1000)": stats(rec["mrc"], "repair_us").get("median"),
        "mrc_reference_repair_us_median": stats(rec["mrc/reference"], "repair_us").get(
            "median"),
        "mrc_vs_reference_transport (goodput; CPU/GB send/recv)": [
            ratio(med["mrc"], med["mrc/reference"]),
            *(ratio(x, y) for x, y in zip(cpu["mrc"], cpu["mrc/reference"], strict=True))],
        "mrc_compiled_vs_python_datapath": ratio(med["mrc"], med["mrc/python"]),
        "mrc_icrc_isal_vs_zlib (goodput; CPU/GB send/recv)": [
            ratio(med["mrc"], med["mrc/zlib"]),
            *(ratio(x, y) for x, y in zip(cpu["mrc"], cpu["mrc/zlib"], strict=True))],
        "single_vs_mrc_goodput": ratio(med["single-path"], med["mrc"]),
        "cpu_per_gb_mrc_vs_python_blaster (sender/receiver)": [
            ratio(x, y) for x, y in zip(cpu["mrc"], cpu["blaster"], strict=True)]}
    a2a = res.get("all_to_all")
    if not a2a:
        return f"{t1}\n\n{t2}", ratios
    ab, am = [x for x in a2a["blasters"] if "gbps" in x], a2a["mrc"]
    t3 = B.markdown(
        [f"all-to-all, {len(a2a['endpoints'])} hosts (mrc-8p shape)", "Gbit/s aggregate",
         "CPU s/GB (all processes)", "send / recv", "outcome"],
        [[f"{ab[0]['hosts'] if ab else '-'} compiled blasters at once (all pairs rotating, "
          "every plane and T1)", fmt(ab, "gbps"), fmt(ab, "cpu_s_per_gb"),
          fmt(ab, "tx_cpu_s_per_gb", 2, "rx_cpu_s_per_gb"), f"loss {fmt(ab, 'loss', 4)}"],
         [f"mrc all-to-all ({am[0]['flows'] if am else '-'} flows, "
          f"{a2a['flow_bytes'] // MiB if 'flow_bytes' in a2a else '-'} MiB each)" + ran(
              [{"endpoint": a2a["endpoints"]}]),
          fmt(am, "gbps"), fmt(am, "cpu_s_per_gb"), "-",
          ", ".join(f"{k} x{n}" for k, n in Counter(
              "byte-exact" if x.get("exact") else kind(x["outcome"]) for x in am).items())]])
    ratios["all_to_all_mrc_vs_16_compiled_blasters"] = ratio(
        stats(am, "gbps").get("median"), stats(ab, "gbps").get("median"))
    ratios["all_to_all_cpu_per_gb_mrc_vs_16_compiled_blasters"] = ratio(
        stats(am, "cpu_s_per_gb").get("median"), stats(ab, "cpu_s_per_gb").get("median"))
    return f"{t1}\n\n{t2}\n\n{t3}", ratios


def _show(v) -> str:
    vs = v if isinstance(v, list) else [v]
    return "/".join("-" if w is None else f"{w:.2f}" for w in vs)


def all_to_all(repeat: int, size: int, limit_s: float) -> dict:
    """The all-to-all row, on a second lab shaped like mrc-8p (16 hosts, 8 planes), up
    once: per repetition, round-robin, 16 compiled blasters at once (all pairs rotating)
    and MRC all-to-all through the endpoints (every ordered pair, `size` bytes each). The
    caller tears the lab down."""
    shape = zip(("planes", "racks", "hosts_per_rack", "t1_per_plane"), A2A_SHAPE, strict=True)
    out: dict = {"flow_bytes": size, "lab": dict(shape), "blasters": [], "mrc": []}
    t0 = time.perf_counter()
    lab.up(str(B.write_spec(A2A_SHAPE, B.TMP, A2A_NAME)), "netns")
    att = lab.attach(A2A_NAME)
    out["up_s"] = time.perf_counter() - t0
    hosts = [h.name for h in att.fabric.hosts]
    out["endpoints"] = hello_facts(att.runtime, hosts)
    # each blaster sends what its host's MRC flows carry: 15 destinations x size
    count = (len(hosts) - 1) * size // wire.MTU
    for rep in range(repeat):
        tag = f"  {rep + 1}/{repeat} all-to-all, {len(hosts)} hosts:"
        for what in ("blasters", "mrc") if rep % 2 == 0 else ("mrc", "blasters"):
            if what == "blasters":
                out["blasters"].append(x := blast_all_to_all(att, hosts, count, limit_s))
                print(f"{tag} {len(hosts)} compiled blasters: " + (
                    f"{x['gbps']:.2f} Gbit/s received, loss {x['loss']:.4f}"
                    if "gbps" in x else x["unavailable"]), flush=True)
            else:
                out["mrc"].append(x := mrc_all_to_all(att, hosts, size))
                print(f"{tag} mrc: {x['outcome'][:60]}, "
                      + (f"{x['gbps']:.2f} Gbit/s, {x['flows']} flows, exact {x['exact']}"
                         if "gbps" in x else ""), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--quick", action="store_true",
                    help="1 repetition, smaller sizes (all-to-all: 1 MiB flows)")
    ap.add_argument("--no-all-to-all", action="store_true",
                    help="skip the all-to-all row (a second lab shaped like mrc-8p)")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave placement to the scheduler (default: senders on CPU 0, "
                         "receivers on CPU 1)")
    args = ap.parse_args(argv)
    if not args.no_pin and len(os.sched_getaffinity(0)) >= 2:
        cpus = sorted(os.sched_getaffinity(0))
        PIN.update(send={cpus[0]}, recv={cpus[1]})
    repeat = 1 if args.quick else max(1, args.repeat)
    size, count, limit_s = (64 * MiB, 20_000, 2.0) if args.quick else (256 * MiB, 100_000, 5.0)
    tcp_size = 4 * size
    res: dict = {"blast": [], "compiled": [], "tcp": [], "gso": [],
                 "bulk": {m: [] for m in MODES}, "recovery": {m: [] for m in RECOVERY_MODES}}
    a2a_size = 1 * MiB if args.quick else 4 * MiB  # per flow: 240 flows on 16 hosts
    for name in (NAME, A2A_NAME):
        if any(n.startswith(f"twin-{name}-") for n in list_netns()):
            sys.exit(f"namespaces of lab {name} exist: another bench run is using it")
    before, started = B.machine(), time.perf_counter()
    try:
        lab.up(str(B.write_spec(SHAPE, B.TMP, NAME)), "netns")
        att = lab.attach(NAME)
        res["dataplane"] = att.dataplane.name
        env = ("auto", "auto")  # (data path, transport): endpoint_env
        pids = restart_endpoints(att, *env)
        res["endpoints"] = {"auto/auto": hello_facts(att.runtime, [SRC, DST])}
        for rep in range(repeat):
            tag = f"  {rep + 1}/{repeat}"
            res["tcp"].append(t := kernel_pair(att, tcp_size, "tcp"))
            print(f"{tag} kernel TCP: " + (f"{t['gbps']:.2f} Gbit/s, rtt {t['rtt_us']} µs"
                                           if "gbps" in t else t["unavailable"]), flush=True)
            res["gso"].append(g := kernel_pair(att, tcp_size, "udp-gso"))
            print(f"{tag} UDP GSO: " + (f"{g['gbps']:.2f} Gbit/s received, loss {g['loss']:.3f}"
                                        if "gbps" in g else g["unavailable"]), flush=True)
            res["compiled"].append(c := blast_compiled(att, count, limit_s))
            print(f"{tag} compiled blaster: " + (f"{c['gbps']:.2f} Gbit/s received"
                                                 if "gbps" in c else c["unavailable"]))
            res["blast"].append(b := blast(att, count, limit_s))
            print(f"{tag} blaster: {b['sent_pps']:,.0f} pps sent, "
                  f"{b['gbps']:.2f} Gbit/s received, loss {b['loss']:.4f}", flush=True)
            for fault in (False, True):
                modes = RECOVERY_MODES if fault else MODES
                for m in modes if rep % 2 == 0 else modes[::-1]:
                    if endpoint_env(m) != env:
                        env = endpoint_env(m)
                        pids = restart_endpoints(att, *env)
                        res["endpoints"]["/".join(env)] = hello_facts(att.runtime, [SRC, DST])
                    x = transfer(att, pids, m, RECOVERY_BYTES if fault else size, fault)
                    x["endpoint"] = res["endpoints"]["/".join(env)]  # what each one ran
                    res["recovery" if fault else "bulk"][m].append(x)
                    print(f"{tag} {m}{' + link-down' if fault else ''}: "
                          f"{x['outcome'][:60]}, {x['goodput_gbps'] or 0:.2f} Gbit/s, "
                          f"srtt {x['srtt_us'] or 0:.0f} µs, retx {x['retransmits']}, "
                          f"recovery {x.get('recovery_s')}", flush=True)
                    time.sleep(SETTLE_S if fault else 0)
        if NAME in known_labs():  # our private run dir only: never another lab
            lifecycle.down(NAME)
        if not args.no_all_to_all:
            time.sleep(B.SETTLE_S)  # the kernel frees the first lab's namespaces
            res["all_to_all"] = all_to_all(repeat, a2a_size, limit_s)
    finally:
        for name in (NAME, A2A_NAME):
            if name in known_labs():  # our private run dir only: never another lab
                lifecycle.down(name)
        shutil.rmtree(B.TMP, ignore_errors=True)
    text, ratios = report(res)
    print(text, "ratios in this run: " + ", ".join(
        f"{k} {_show(v)}" for k, v in ratios.items()), sep="\n")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": before, "machine_after": B.machine(), "repeat": repeat, "quick": args.quick,
        "bulk_bytes": size, "tcp_bytes": tcp_size, "recovery_bytes": RECOVERY_BYTES,
        "blast_count": count, "all_to_all_flow_bytes": None if args.no_all_to_all
        else a2a_size, "pids": pids, "pinned": {k: sorted(v) for k, v in PIN.items()},
        "fault_at_s": FAULT_AT, "stall_s": STALL_S,
        "wall_s": time.perf_counter() - started, "ratios": ratios, **res}, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    bad = [x for x in (*res["bulk"]["mrc"], *res["bulk"]["single-path"],
                       *res["bulk"]["mrc/reference"], *res["bulk"]["mrc/python"],
                       *res["recovery"]["mrc"], *res["recovery"]["mrc/reference"])
           if x["outcome"] != "done"]
    bad += [{"mode": "all-to-all mrc", "fault": False, **x}
            for x in res.get("all_to_all", {}).get("mrc", []) if x["outcome"] != "done"]
    print(*(f"NOT DONE: {x['mode']} fault={x['fault']}: {x['outcome']}" for x in bad),
          sep="\n", file=sys.stderr, end="\n" if bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
