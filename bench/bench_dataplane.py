"""Data-plane benchmark: what one uSID hop costs the kernel per packet, the eBPF uN program
against plain IPv6 forwarding (and seg6local where the kernel has it), side by side in one run.

Two chains of network namespaces of its own (bench-dp-<pid>-<chain>-<node>), no lab involved,
built the same way:

    src ---- r1 ---- r2 ---- r3 ---- dst       veth pairs, MTU 9000; eth0 faces src, eth1 dst
    0300     0100    0200    0101    0302      uSIDs as in mrc-4p's plane 0: r0h0's port,
                                               T0 of rack 0, T1 0, T0 of rack 1, r1h0's port

and addressed as a lab is (DESIGN.md section 3): every interface has fe80::<own uSID>/64, every
router owns fcbb:bb00:<uSID>::/48 and has a static /48 to the next uSID `via fe80::<next> dev
eth1`, and the NIC addresses fd00:4d52:43::1 (src) and fd00:4d52:43:1::1 (dst) sit on lo.
Chain `bpf` runs the project's programs (twin.node.ebpf, TC ingress): uN on both ports of every
router, decap on dst's eth0. Chain `bare` has no program and no clsact at all. The modes:

    plain      bare: IPv6/UDP straight to dst's NIC address over /128 routes hop by hop. Its UDP
               payload is 40 bytes longer than the others', so every hop carries the same bytes.
    6in6       bare: IPv6-in-IPv6 to fcbb:bb00:302::1 (on dst's lo) over /128 routes: the outer
               header without SRv6. Nothing here decapsulates it (no ip6tnl), so dst counts it
               on a raw socket for protocol 41, where the others count on a UDP socket.
    ebpf       bpf: IPv6-in-IPv6 to the carrier fcbb:bb00:100:200:101:302::; each router's uN
               shifts it and its /48 routes forward it, dst's decap strips the outer header and
               the inner packet reaches the UDP socket on the NIC address.
    seg6local  bare: the same packets as ebpf, through the kernel's own uN (`End flavors
               next-csid`, dev lo) and `End.DT6 table local` routes (another UDP port), where
               twin.dataplane.probe finds seg6local; else the row says why not.

One thread, pinned to the first CPU, writes prebuilt whole packets on raw IPPROTO_RAW sockets
in the src namespaces, BATCH per sendmmsg (ctypes: Python costs next to nothing per packet). A
veth hands its packet to the peer through the sending CPU's backlog, and the softirq that drains
it runs when the send path re-enables bottom halves: all three routers and dst's receive path
run on the sending thread, before sendmmsg returns. A forked receiver on the second CPU empties
every mode's socket with recvmmsg, then naps NAP_S: waiting on the sockets instead would cost
the sender a wake-up every few packets (an IPI, a VM exit here) and bury the routers' work.

Within one repetition and packet size the modes take turns in SLICE_S slices (the order rotates
every round), so a burst of another user's load on this shared 2-core machine hits every mode
alike. Per mode it sums packets sent, packets the socket received, the time spent sending, and
three CPU accounts, the first two per packet received:
    machine  busy jiffies of every CPU in /proc/stat (user, nice, system, irq, softirq, steal):
             everything, other users included;
    ours     the run time (schedstat, ns) of the sender thread (this kernel has no
             CONFIG_IRQ_TIME_ACCOUNTING, so the softirq forwarding done on it is in there), the
             receiver and the ksoftirqd threads (forwarding deferred there): the chain's work,
             blind to other users' processes (though ksoftirqd serves their packets too);
    sender   the sender thread's run time per packet sent, the median over the block's slices:
             where the forwarding runs, least disturbed (a burst spoils slices, not the median).
The modes differ only in what the routers and dst do per packet, so (ebpf - plain) / 3 is what
one eBPF uN hop adds (dst's decap spread over the three), and (ebpf - 6in6) / 3 the same with the
outer header's own share taken out. In ebpf mode the programs' counters (shifted at every
router, decapsulated at dst) are checked against the packets received. Packet sizes: UDP
payload 64 and 4096 bytes (MRC's), both in every repetition. Medians (min-max) over repetitions.
Once, the programs alone: BPF_PROG_TEST_RUN's median ns per run of uN, decap, uN on a packet
that is not its SID's, and an empty program (the test's own overhead), to tell what of a hop's
extra cost is the program and what the TC hook and the rest.
Namespaces are removed in a finally, at exit, and on SIGTERM/SIGHUP. Exits 1 if a mode that ran
delivered nothing or the eBPF counters disagree.
Usage: .venv/bin/python bench/bench_dataplane.py [--repeat N] [--quick] [--no-pin]
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import errno
import ipaddress
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import bench_lab as B  # first: it points TWIN_RUN_DIR / TWIN_BUILD_DIR at a private temp dir

from twin import nsenter
from twin.dataplane.probe import probe
from twin.dataplane.seg6local import ANCHOR
from twin.mrc import wire
from twin.node import ebpf
from twin.node.ebpf import asm, bpf, programs
from twin.node.runner import ensure_anchor
from twin.runtime.netns import list_netns

RESULTS = Path(__file__).resolve().parent / "results" / "dataplane.json"
OWNER, PREFIX = os.getpid(), f"bench-dp-{os.getpid()}-"
NODES = ("src", "r1", "r2", "r3", "dst")
ROUTERS = NODES[1:4]
PORTS = {"src": ("eth0",), "r1": ("eth0", "eth1"), "r2": ("eth0", "eth1"),
         "r3": ("eth0", "eth1"), "dst": ("eth0",)}  # eth0 faces src
USID = {"src": 0x0300, "r1": 0x0100, "r2": 0x0200, "r3": 0x0101, "dst": 0x0302}
BLOCK = "fcbb:bb00"
NIC_SRC, NIC_DST = "fd00:4d52:43::1", "fd00:4d52:43:1::1"
TUNNEL_DST = f"{BLOCK}:{USID['dst']:x}::1"  # 6in6's outer DA, a local address on dst's lo
CARRIER = f"{BLOCK}:" + ":".join(f"{USID[n]:x}" for n in (*ROUTERS, "dst")) + "::"
MODES = ("plain", "6in6", "ebpf", "seg6local")
CHAIN = {"plain": "bare", "6in6": "bare", "ebpf": "bpf", "seg6local": "bare"}
DPORT = {"plain": 4792, "6in6": 4792, "ebpf": 4792, "seg6local": 4793}  # not 4791
PAYLOADS = (64, 4096)  # the UDP payload of the encapsulated modes: small, and MRC's
MTU, SPORT, FLOW_LABEL, HOP_LIMIT = 9000, 49152, 0x12345, 64
BATCH, WARMUP, MAX_PACKETS = 64, 256, 2_000_000  # MAX_PACKETS: per slice
PROGRAM_CALLS = 2000  # BPF_PROG_TEST_RUN calls per program
SLICE_S, WARMUP_S, NAP_S, QUIET_S = 0.1, 5.0, 0.001, 0.05
# the machine's busy CPU (in cores) over BACKGROUND_S before a block of slices: wait (at most
# QUIET_WAIT_S) for a window at or under QUIET_CORES, so fewer slices share with a burst
BACKGROUND_S, QUIET_CORES, QUIET_WAIT_S = 0.25, 0.15, 5.0
SO_RCVBUFFORCE, TICK = 33, os.sysconf("SC_CLK_TCK")
SYSCTLS = (("net.ipv6.conf.all.disable_ipv6", "0"), ("net.ipv6.conf.default.disable_ipv6", "0"),
           ("net.ipv6.conf.all.seg6_enabled", "1"), ("net.ipv6.conf.default.seg6_enabled", "1"),
           ("net.ipv6.conf.default.addr_gen_mode", "1"),  # only the planned fe80::<uSID>
           ("net.ipv6.conf.all.accept_dad", "0"), ("net.ipv6.conf.default.accept_dad", "0"),
           ("net.ipv6.conf.all.accept_ra", "0"), ("net.ipv6.conf.default.accept_ra", "0"))
PIN: dict[str, int] = {}  # role -> CPU, unless --no-pin
ACCOUNTS = {"machine_ns": "machine", "ours_ns": "ours", "sender_slice_median_ns": "sender"}


def ns(chain: str, node: str) -> str:
    return f"{PREFIX}{chain}-{node}"


def ns_path(chain: str, node: str) -> str:
    return f"/run/netns/{ns(chain, node)}"


# -- the chains: built as data first, then run -----------------------------------------------

def locator(node: str) -> str:
    return f"{BLOCK}:{USID[node]:x}::/48"


def link_local(node: str) -> str:
    return f"fe80::{USID[node]:x}"


def chain_plan(chain: str, seg6local: bool) -> list[tuple[str, list[str]]]:
    """(namespace, `ip -batch` lines) in order: the veths (made from their src side), then
    every node's addresses and routes; with `seg6local`, the kernel's local SIDs too."""
    out = [(ns(chain, a), [f"link add {PORTS[a][-1]} mtu {MTU} type veth peer name eth0 "
                           f"mtu {MTU} netns {ns(chain, b)}"])
           for a, b in zip(NODES, NODES[1:], strict=False)]
    for i, node in enumerate(NODES):
        lines = ["link set lo up"]
        for dev in PORTS[node]:
            lines += [f"addr add {link_local(node)}/64 dev {dev} nodad", f"link set {dev} up"]
        if node == "src":
            lines.append(f"addr add {NIC_SRC}/128 dev lo")
        if node == "dst":
            lines += [f"addr add {NIC_DST}/128 dev lo", f"addr add {TUNNEL_DST}/128 dev lo"]
            if seg6local:
                lines.append(f"route add {locator('dst')} encap seg6local action End.DT6 "
                             "table local dev eth0")
        else:
            nxt, out_dev = NODES[i + 1], PORTS[node][-1]
            lines += [f"route add {dst} via {link_local(nxt)} dev {out_dev}"
                      for dst in (locator(nxt), f"{NIC_DST}/128", f"{TUNNEL_DST}/128")]
        if node in ROUTERS and seg6local:  # on twin's anchor: a route via lo would be
            # made a reject route by the kernel (ip6_route_info_create), as twin's would
            lines.append(f"route add {locator(node)} encap seg6local action End flavors "
                         f"next-csid lblen 32 nflen 16 dev {ANCHOR}")
        out.append((ns(chain, node), lines))
    return out


def build(chain: str, seg6local: bool) -> None:
    for node in NODES:
        subprocess.run(["ip", "netns", "add", ns(chain, node)], check=True, capture_output=True,
                       timeout=30)
        with nsenter.inside(ns_path(chain, node)):
            nsenter.write_sysctls([*SYSCTLS, ("net.ipv6.conf.all.forwarding",
                                              "1" if node in ROUTERS else "0")])
            if seg6local and node in ROUTERS:
                ensure_anchor(ANCHOR)  # dummy, else ifb: what twin's nodes carry uN on
    for name, lines in chain_plan(chain, seg6local):
        proc = subprocess.run(["ip", "-n", name, "-batch", "-"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            raise RuntimeError(f"{name}: ip -batch failed: {proc.stderr.strip()}")


def attach_programs(chain: str) -> dict[str, int]:
    """uN on every router port, decap on dst's port: {node: the id of its program}."""
    ids = {}
    for node in (*ROUTERS, "dst"):
        kind, prefix = ("decap", locator("dst")) if node == "dst" else ("uN", locator(node))
        with nsenter.inside(ns_path(chain, node)):
            fd = ebpf.counters_map(None)
            try:
                for dev in PORTS[node]:
                    ids[node] = ebpf.attach(dev, kind, prefix, fd)["prog_id"]
            finally:
                os.close(fd)
    return ids


def programs_alone(payload: int, calls: int = PROGRAM_CALLS) -> dict[str, float]:
    """The programs alone, each run once per call on a fresh packet in the kernel
    (BPF_PROG_TEST_RUN, repeat 1), median ns per run: uN shifting, decap, uN passing a plain
    packet (not its SID), and an empty program (the test timer's own cost). The packet must
    fit in a page with the test's headroom, so not a 4 KiB one: the programs read and write
    headers only, so their cost does not depend on the payload."""
    inner = udp6(payload, DPORT["ebpf"])
    cases = {"uN": ("uN", locator("r1"), frame("ebpf", payload)[0]),
             "decap": ("decap", locator("dst"),
                       ip6(NIC_SRC, f"{BLOCK}:{USID['dst']:x}::", 41, len(inner)) + inner),
             "uN, plain packet": ("uN", locator("r1"), frame("plain", payload)[0])}
    eth = bytes(12) + (0x86DD).to_bytes(2, "big")
    out, map_fd = {}, ebpf.counters_map(None)
    ports_fd = ebpf.ports_map([], 1)  # decap counts RFC 6040's copies per port
    try:
        for name, (kind, prefix, packet) in cases.items():
            fd, _ = ebpf.load(kind, prefix, map_fd, 0, ports_fd)
            try:
                out[name] = statistics.median(
                    bpf.test_run(fd, eth + packet, 1, 64).duration_ns for _ in range(calls))
            finally:
                os.close(fd)
        empty = asm.assemble([asm.mov64_imm(0, 0), asm.exit_()])
        fd = bpf.prog_load(programs.PROG_TYPE_SCHED_CLS, empty, "bench_empty")
        try:
            out["empty"] = statistics.median(
                bpf.test_run(fd, eth + frame("plain", payload)[0], 1, 64).duration_ns
                for _ in range(calls))
        finally:
            os.close(fd)
    finally:
        os.close(map_fd)
        os.close(ports_fd)
    return out


def program_counts(ids: dict[str, int]) -> dict[str, int]:
    return {node: ebpf.read_counters(pid)["decapsulated" if node == "dst" else "shifted"]
            for node, pid in ids.items()}


def cleanup() -> None:
    """Remove this run's namespaces (their veths and programs go with them); idempotent."""
    if os.getpid() != OWNER:  # a forked receiver inherits atexit and signal handlers
        return
    for name in list_netns():
        if name.startswith(PREFIX):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    shutil.rmtree(B.TMP, ignore_errors=True)  # bench_lab's private dirs: unused here


def _on_signal(signum, _frame) -> None:
    raise SystemExit(128 + signum)  # so every finally (and atexit) runs


# -- packets, and sendmmsg / recvmmsg through ctypes -----------------------------------------

def ip6(src: str, dst: str, next_header: int, payload_len: int, flow: int = 0) -> bytes:
    return struct.pack("!IHBB16s16s", 6 << 28 | flow, payload_len, next_header, HOP_LIMIT,
                       ipaddress.IPv6Address(src).packed, ipaddress.IPv6Address(dst).packed)


def udp6(payload: int, dport: int) -> bytes:
    """IPv6/UDP NIC_SRC -> NIC_DST, checksum 0 (the receiver allows it, as MRC's does)."""
    return (ip6(NIC_SRC, NIC_DST, socket.IPPROTO_UDP, 8 + payload)
            + struct.pack("!HHHH", SPORT, dport, 8 + payload, 0) + bytes(payload))


def frame(mode: str, payload: int) -> tuple[bytes, str]:
    """The whole packet a mode sends, and the address the sender routes it by."""
    if mode == "plain":
        return udp6(payload + 40, DPORT[mode]), NIC_DST  # the outer header's 40 bytes
    outer = TUNNEL_DST if mode == "6in6" else CARRIER
    inner = udp6(payload, DPORT[mode])
    return ip6(NIC_SRC, outer, 41, len(inner), FLOW_LABEL) + inner, outer


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32),
                ("iov", ctypes.POINTER(_Iovec)), ("iovlen", ctypes.c_size_t),
                ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int,
                           ctypes.c_void_p]


class Mmsg:
    """BATCH messages of one iovec each: all the same bytes (send), or BATCH buffers (recv)."""

    def __init__(self, sock: socket.socket, data: bytes | None = None) -> None:
        self.fd, self.sock = sock.fileno(), sock  # the socket outlives us
        n = 1 if data is not None else BATCH
        self._bufs = [ctypes.create_string_buffer(data, len(data)) if data is not None
                      else ctypes.create_string_buffer(MTU) for _ in range(n)]
        self._iovs = (_Iovec * n)(*(_Iovec(ctypes.addressof(b), ctypes.sizeof(b))
                                    for b in self._bufs))
        self._msgs = (_Mmsghdr * BATCH)()
        for i, m in enumerate(self._msgs):
            m.hdr.iov, m.hdr.iovlen = ctypes.pointer(self._iovs[i % n]), 1

    def send(self, n: int) -> int:
        """sendmmsg n copies: how many the kernel took (0 on a full queue)."""
        return max(_libc.sendmmsg(self.fd, self._msgs, n, 0), 0)

    def recv(self) -> int:
        """recvmmsg up to BATCH, without waiting: how many; -1 when none is queued."""
        got = _libc.recvmmsg(self.fd, self._msgs, BATCH, socket.MSG_DONTWAIT, None)
        if got < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return got


def receiver(mode: str) -> socket.socket:
    """dst's counting socket: UDP on the NIC address, or (6in6) raw protocol 41."""
    with nsenter.inside(ns_path(CHAIN[mode], "dst")):
        if mode == "6in6":
            rx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, 41)
            rx.bind((TUNNEL_DST, 0))
        else:
            rx = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
            wire.allow_zero_udp_checksum(rx)
            rx.bind((NIC_DST, DPORT[mode]))
    rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
    return rx


def sender(mode: str, data: bytes, dest: str) -> Mmsg:
    with nsenter.inside(ns_path(CHAIN[mode], "src")):
        tx = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 1, 0))  # bounded
    tx.connect((dest, 0))
    return Mmsg(tx, data)


def _drain(socks: list[socket.socket], conn, cpu: int | None, limit_s: float) -> None:
    """Child: count each socket's datagrams until the parent says stop and they are all
    empty (or limit_s passes). It empties every socket, then naps NAP_S: it neither waits on
    a socket (a waiting reader costs the sender a wake-up every few packets) nor spins (its
    run time would then be the wall time, whatever the packets)."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    rings, deadline = [Mmsg(s) for s in socks], time.monotonic() + limit_s
    counts, stopping = [0] * len(rings), False
    conn.send("ready")
    while time.monotonic() < deadline:
        got = 0
        for i, ring in enumerate(rings):
            for _ in range(MAX_PACKETS // BATCH):
                n = ring.recv()
                if n <= 0:
                    break
                counts[i] += n
                got += n
        if stopping and not got:
            break
        if not stopping:
            stopping = conn.poll()  # then one more pass: what was still in flight
        time.sleep(QUIET_S if stopping else NAP_S)
    conn.send(counts)


def warm_up(tx: Mmsg, rx: socket.socket) -> int:
    """Send WARMUP packets and poll until they arrive (every hop's neighbour resolved, which
    takes up to a retransmit second on a fresh chain) or WARMUP_S pass: how many arrived."""
    ring, sent, got, deadline = Mmsg(rx), 0, 0, time.monotonic() + WARMUP_S
    while sent < WARMUP and time.monotonic() < deadline:
        sent += tx.send(BATCH)
    while got < sent and time.monotonic() < deadline:
        time.sleep(0.01)
        for _ in range(sent // BATCH + 1):
            n = ring.recv()
            if n <= 0:
                break
            got += n
    return got


# -- CPU accounts ----------------------------------------------------------------------------

def machine_jiffies() -> tuple[int, int]:
    """(busy, softirq) jiffies of all CPUs: busy is user, nice, system, irq, softirq and steal
    (guest time is inside user already)."""
    with open("/proc/stat") as f:
        _, *v = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, v[:8])
    return user + nice + system + irq + softirq + steal, softirq


def ksoftirqd() -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().startswith("ksoftirqd/"):
                out.append(int(pid))
        except OSError:
            pass
    return out


def run_ns(pid: int) -> int:
    """A thread's run time so far (schedstat's first field, ns); 0 once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def ours_ns(receiver_pid: int, softirqd: list[int]) -> tuple[int, int, int]:
    """Run times so far, ns: this thread's, the receiver's, and the ksoftirqd threads'."""
    return time.thread_time_ns(), run_ns(receiver_pid), sum(run_ns(p) for p in softirqd)


def background() -> tuple[float, float]:
    """The machine's busy cores over BACKGROUND_S, once at or under QUIET_CORES (or after
    QUIET_WAIT_S, the last window's); and how long that took."""
    t0 = time.monotonic()
    while True:
        b0 = machine_jiffies()[0]
        time.sleep(BACKGROUND_S)
        cores = (machine_jiffies()[0] - b0) / TICK / BACKGROUND_S
        waited = time.monotonic() - t0
        if cores <= QUIET_CORES or waited >= QUIET_WAIT_S:
            return cores, waited


def rx_packets(chain: str) -> int:
    out = subprocess.run(["ip", "-n", ns(chain, "dst"), "-j", "-s", "link", "show", "dev",
                          "eth0"], capture_output=True, text=True, check=True, timeout=30).stdout
    return json.loads(out)[0]["stats64"]["rx"]["packets"]


# -- one block: every mode, one packet size, in turns ----------------------------------------

def block(modes: list[str], payload: int, slices: int, prog_ids: dict[str, int]) -> list[dict]:
    """`slices` rounds of one SLICE_S slice per mode (order rotating): per mode, what it sent,
    what arrived, and what it cost."""
    frames = {m: frame(m, payload) for m in modes}
    rxs = {m: receiver(m) for m in modes}
    txs: dict[str, Mmsg] = {}
    acc = {m: {"mode": m, "payload": payload, "wire_bytes": len(frames[m][0]), "sent": 0,
               "send_s": 0.0, "busy_jiffies": 0, "softirq_jiffies": 0, "sender_ns": 0,
               "receiver_ns": 0, "ksoftirqd_ns": 0, "sender_ns_by_slice": []} for m in modes}
    proc, home, counts = None, os.sched_getaffinity(0), None
    try:
        for m in modes:
            txs[m] = sender(m, *frames[m])
            acc[m]["warmup_received"] = warm_up(txs[m], rxs[m])
        cores, waited = background()
        parent, child = multiprocessing.Pipe()
        proc = multiprocessing.get_context("fork").Process(
            target=_drain, args=(list(rxs.values()), child, PIN.get("recv"),
                                 slices * len(modes) * SLICE_S + 30))
        proc.start()
        if not parent.poll(10):
            raise RuntimeError("the receiver did not start")
        parent.recv()
        chains = sorted({CHAIN[m] for m in modes})
        rx0, ctr0 = {c: rx_packets(c) for c in chains}, program_counts(prog_ids)
        softirqd = ksoftirqd()
        if "send" in PIN:
            os.sched_setaffinity(0, {PIN["send"]})
        for i in range(slices):
            for m in modes[i % len(modes):] + modes[:i % len(modes)]:
                a, tx, sent = acc[m], txs[m], 0
                (b0, s0), o0 = machine_jiffies(), ours_ns(proc.pid, softirqd)
                t0 = time.perf_counter()
                while sent < MAX_PACKETS and time.perf_counter() - t0 < SLICE_S:
                    sent += tx.send(BATCH)
                t1, (b1, s1), o1 = time.perf_counter(), machine_jiffies(), ours_ns(proc.pid,
                                                                                    softirqd)
                a["sent"] += sent
                a["send_s"] += t1 - t0
                a["busy_jiffies"] += b1 - b0
                a["softirq_jiffies"] += s1 - s0
                for k, v0, v1 in zip(("sender_ns", "receiver_ns", "ksoftirqd_ns"), o0, o1,
                                     strict=True):
                    a[k] += v1 - v0
                if sent:
                    a["sender_ns_by_slice"].append((o1[0] - o0[0]) / sent)
        os.sched_setaffinity(0, home)
        parent.send("stop")
        counts = parent.recv() if parent.poll(30) else [0] * len(modes)
        rx1, ctr1 = {c: rx_packets(c) for c in chains}, program_counts(prog_ids)
    finally:
        os.sched_setaffinity(0, home)
        if proc is not None:
            proc.join(5 if counts is not None else 0)  # unwinding: do not wait for its deadline
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for s in (*rxs.values(), *(t.sock for t in txs.values())):
            s.close()
    out = []
    for m, got in zip(modes, counts, strict=True):
        a = acc[m]
        ours = a["sender_ns"] + a["receiver_ns"] + a["ksoftirqd_ns"]
        a.update(received=got, loss=1 - got / max(a["sent"], 1),
                 sending_pps=a["sent"] / max(a["send_s"], 1e-9),
                 dst_rx_chain=rx1[CHAIN[m]] - rx0[CHAIN[m]], background_cores=cores,
                 waited_s=waited,
                 machine_ns=a["busy_jiffies"] * 1e9 / TICK / got if got else None,
                 ours_ns=ours / got if got else None,
                 sender_ns_per_packet=a["sender_ns"] / got if got else None,
                 sender_slice_median_ns=statistics.median(a["sender_ns_by_slice"])
                 if a["sender_ns_by_slice"] else None,
                 softirq_share=a["softirq_jiffies"] / a["busy_jiffies"]
                 if a["busy_jiffies"] else None,
                 program_counts={k: ctr1[k] - ctr0[k] for k in ctr1} if m == "ebpf" else {})
        out.append(a)
    return out


def counts_agree(x: dict) -> bool:
    """Every router shifted what dst decapsulated, which dst's eth0 received (ND aside) and
    the socket counted (socket-buffer drops aside)."""
    c = x["program_counts"]
    return len(set(c.values())) == 1 and x["received"] <= c["dst"] <= x["dst_rx_chain"]


# -- the report ------------------------------------------------------------------------------

def stats(xs: list[dict], key: str) -> dict:
    v = [x[key] for x in xs if x.get(key) is not None]
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else {}


def fmt(xs: list[dict], key: str, nd: int = 0, scale: float = 1.0) -> str:
    s = stats(xs, key)
    if not s:
        return "-"
    m, lo, hi = (f"{s[k] * scale:,.{nd}f}" for k in ("median", "min", "max"))
    return m if lo == hi else f"{m} ({lo}-{hi})"


def report(runs: list[dict], unavailable: dict[str, str]) -> tuple[str, dict]:
    body, ratios = [], {}
    for payload in PAYLOADS:
        rows = {m: [x for x in runs if x["mode"] == m and x["payload"] == payload]
                for m in MODES}
        med = {k: {m: stats(xs, k).get("median") for m, xs in rows.items()}
               for k in ACCOUNTS}
        for m, xs in rows.items():
            if m in unavailable:
                body.append([m, str(payload), "-", f"unavailable: {unavailable[m]}",
                             *["-"] * 6])
                continue
            sent, got = (sum(x[k] for x in xs) for k in ("sent", "received"))
            body.append([
                m, str(payload), str(xs[0]["wire_bytes"]),
                f"{sent:,} / {got:,} (loss {1 - got / max(sent, 1):.4f})",
                fmt(xs, "sending_pps", 0, 1e-3), fmt(xs, "machine_ns"),
                fmt(xs, "ours_ns"), fmt(xs, "sender_slice_median_ns"),
                fmt(xs, "softirq_share", 0, 100) + "%",
                " / ".join(f"x{med[k][m] / med[k]['plain']:.3f}" if med[k][m]
                           and med[k]["plain"] else "-" for k in ACCOUNTS)])
        r = {}
        for k, label in ACCOUNTS.items():
            e, p, t = (med[k][m] for m in ("ebpf", "plain", "6in6"))
            if e and p:
                r[label] = {"ebpf/plain": e / p, "ns/hop (ebpf-plain)/3": (e - p) / 3,
                            "ns/hop (ebpf-6in6)/3": (e - t) / 3 if t else None}
            s6 = med[k].get("seg6local")
            if s6 and p:
                r[label]["seg6local/plain"] = s6 / p
                r[label]["ns/hop (seg6local-plain)/3"] = (s6 - p) / 3
                if e:
                    r[label]["ebpf/seg6local"] = e / s6  # the two data planes, side by side
        ratios[f"payload {payload}"] = r
    table = B.markdown(
        ["mode", "UDP payload", "wire bytes", "sent / received, all reps (loss)",
         "kpps while sending",
         "machine CPU ns/pkt", "our CPU ns/pkt", "sender thread ns/pkt (slice median)",
         "softirq share", "vs plain: machine / ours / sender"], body)
    return table, ratios


def _show(ratios: dict) -> str:
    def one(v) -> str:
        return "-" if v is None else f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"
    return "\n".join(f"{size}, {acct}: " + ", ".join(f"{k} {one(v)}" for k, v in r.items())
                     for size, by in ratios.items() for acct, r in by.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--quick", action="store_true", help="1 repetition, fewer slices")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave placement to the scheduler (default: the sender on the first "
                         "CPU, the receiver on the second)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("bench_dataplane needs root (network namespaces, BPF programs)")
    cpus = sorted(os.sched_getaffinity(0))
    if not args.no_pin and len(cpus) >= 2:
        PIN.update(send=cpus[0], recv=cpus[1])
    repeat, slices = (1, 4) if args.quick else (max(1, args.repeat), 10)
    atexit.register(cleanup)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    found = probe()
    unavailable = {m: why for m, why in (("ebpf", found["ebpf"]),
                                         ("seg6local", found["seg6local"])) if why}
    modes = [m for m in MODES if m not in unavailable]
    res: dict = {"unavailable": unavailable, "carrier": CARRIER, "pinned": dict(PIN),
                 "slice_s": SLICE_S, "slices": slices, "batch": BATCH, "runs": []}
    before, started = B.machine(), time.perf_counter()
    try:
        build("bare", "seg6local" in modes)
        prog_ids: dict[str, int] = {}
        if "ebpf" in modes:
            build("bpf", False)
            prog_ids = attach_programs("bpf")
            res["programs_alone_ns"] = programs_alone(PAYLOADS[0])
        for rep in range(repeat):
            for payload in PAYLOADS:
                order = modes if rep % 2 == 0 else modes[::-1]
                for x in block(order, payload, slices, prog_ids):
                    x["rep"] = rep
                    res["runs"].append(x)
                    print(f"  {rep + 1}/{repeat} {x['mode']:9} payload {payload:4}: sent "
                          f"{x['sent']:,} received {x['received']:,}, "
                          f"{x['sending_pps'] / 1e3:,.0f} kpps, CPU ns/pkt machine "
                          f"{x['machine_ns'] or 0:,.0f} ours {x['ours_ns'] or 0:,.0f}, "
                          f"background {x['background_cores']:.0%}"
                          + (f", eBPF {x['program_counts']}" if x["program_counts"] else ""),
                          flush=True)
    finally:
        cleanup()
    res.update(machine=before, machine_after=B.machine(), wall_s=time.perf_counter() - started)
    table, ratios = report(res["runs"], unavailable)
    res["ratios"] = ratios
    print(table, "ratios in this run (of each account's median CPU ns per packet):", _show(ratios),
          sep="\n")
    if "programs_alone_ns" in res:
        print(f"programs alone (BPF_PROG_TEST_RUN, median ns per run, payload {PAYLOADS[0]}): "
              + ", ".join(f"{k} {v:,.0f}" for k, v in res["programs_alone_ns"].items()))
    print(json.dumps(res, separators=(",", ":")))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    bad = [f"{x['mode']} payload {x['payload']} rep {x['rep'] + 1}: nothing received"
           for x in res["runs"] if not x["received"]]
    bad += [f"ebpf payload {x['payload']} rep {x['rep'] + 1}: program counts "
            f"{x['program_counts']}, dst rx {x['dst_rx_chain']}, received {x['received']}"
            for x in res["runs"] if x["program_counts"] and not counts_agree(x)]
    print(*bad, sep="\n", file=sys.stderr, end="\n" if bad else "")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
